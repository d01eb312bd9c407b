"""Test-suite switches: solution self-checks must pass; CUDA-marked tests skip or fail by COURSE_REQUIRE_CUDA."""
from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers import start_method  # noqa: E402
from helpers.course import CHECKS_MUST_PASS_VAR, REQUIRE_CUDA_VAR  # noqa: E402
from tools.build_site import BUILD, EXECUTED_DIR  # noqa: E402

# Kernels started by nbval inherit this: a self-check that does not pass raises in solutions/.
os.environ[CHECKS_MUST_PASS_VAR] = "1"


# The one table of tiers: every test file in tests/ names its tier, applied as a marker (pyproject.toml registers them).
# `make check` runs "unit" (what a change to helpers/ needs, about 2 minutes on 2 cores); `make test` runs every tier.
# unit: helpers, checks and generated files, quick (workers for a few batches at most); process: trains, launches
# ranks or programs, runs the doctor's measurements; notebook: executes course notebooks (the nbval cells of
# notebooks/ and solutions/ are this tier too); browser: JupyterLab or the site in Chromium.
TIERS = {
    "unit": ("test_ledger.py", "test_ledger_demos.py", "test_checks.py", "test_env.py", "test_errors.py", "test_hygiene.py",
             "test_imbalance.py", "test_imports.py", "test_learner_answers.py", "test_lesson_widgets.py",
             "test_lessons_show_code.py", "test_loading.py", "test_memory.py", "test_mutants.py", "test_pins.py",
             "test_plotting.py", "test_resume_oracle.py", "test_samplers.py", "test_sequences.py", "test_source.py",
             "test_streaming.py", "test_timing.py", "test_transfer.py", "test_transfer_bench.py",
             "test_workloads.py"),
    "process": ("test_clinic.py", "test_ddp.py", "test_doctor.py", "test_doctor_corpus.py", "test_doctor_ledger.py",
                "test_doctor_flight.py", "test_doctor_pickling.py", "test_doctor_threads.py", "test_start_method.py", "test_doctor_xray.py", "test_flight.py", "test_loading_bench.py", "test_notebook_client.py",
                "test_streaming_demos.py", "test_stress.py", "test_workshop_kit.py"),
    "notebook": ("test_exercises.py",),
    "browser": ("test_browser.py", "test_site.py"),
}


def tier_of(path: Path) -> str | None:
    """The tier of a collected file: nbval's notebooks are "notebook", a test file's from TIERS (None: not listed)."""
    if path.suffix == ".ipynb":
        return "notebook"
    return next((tier for tier, names in TIERS.items() if path.name in names), None)


# With several pytest-xdist processes (the Makefile's XDIST: each file whole in one process, --dist loadscope
# --no-loadscope-reorder), files run by tier in this order, the slowest first, so they start the longest work first and
# end together. In one process the files keep their collected order: run right after test_ddp.py in a fresh clone, the
# doctor's planted threads fault found another program using 1.0 core and was not found (left for the next session).
RUN_ORDER = ("browser", "process", "notebook", "unit")


@pytest.hookimpl(tryfirst=True)  # before -m selects by the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its file's tier (a test file missing from TIERS fails at collection) and, in several xdist
    processes, order the files by RUN_ORDER; the site test renders what the suite executed, so it runs last."""
    tiers = {}
    for item in items:
        tier = tiers[item] = tier_of(Path(item.path))
        if tier is None:
            raise pytest.UsageError(f"{Path(item.path).name} has no tier: add it to TIERS in tests/conftest.py")
        item.add_marker(getattr(pytest.mark, tier))
    parallel = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1
    items.sort(key=lambda item: (Path(item.path).name == "test_site.py", RUN_ORDER.index(tiers[item]) if parallel else 0))
    if config.getoption("numprocesses", None) or os.environ.get("PYTEST_XDIST_WORKER"):
        # in parallel processes the site test cannot run after the notebooks: `make test` runs it in a pytest run of its own
        site = [item for item in items if Path(item.path).name == "test_site.py"]
        if site:
            items[:] = [item for item in items if item not in site]
            config.hook.pytest_deselected(items=site)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip `cuda` tests without a GPU, or fail them when COURSE_REQUIRE_CUDA=1."""
    if item.get_closest_marker("cuda") is None:
        return
    import torch

    if torch.cuda.is_available():
        return
    if os.environ.get(REQUIRE_CUDA_VAR) == "1":
        pytest.fail(f"{REQUIRE_CUDA_VAR}=1 but torch.cuda.is_available() is False")
    pytest.skip("needs a CUDA GPU; torch.cuda.is_available() is False here")


def child_processes() -> list:
    """This process's children, less multiprocessing's resource tracker and fork server (each started once, kept by design)."""
    return start_method.descendants()


@pytest.fixture
def no_process_left():
    """The test stops every worker, rank and program it started (within 10 s of its end); use with pytestmark."""
    yield
    deadline = time.monotonic() + 10
    while child_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_processes() == []


def command(process) -> str:
    """A process's command line, or "" once it has exited (a zombie not yet reaped has none to read, but is still a child)."""
    import psutil

    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return ""


def _hypothesis_profile() -> None:
    """Property tests draw the same examples every run (flaky is failing) and keep no database files."""
    from hypothesis import settings

    settings.register_profile("course", derandomize=True, deadline=None, database=None, max_examples=60)
    settings.load_profile("course")


_hypothesis_profile()


SUITE_RUN = BUILD / "suite-run.json"  # what the last test run executed and kept (ExecutedNotebooks.state)
SUITE_RUN_VAR = "COURSE_SUITE_RUN"  # one value for the pytest runs of one `make test` (the Makefile sets it)
EXERCISE_TEST = re.compile(r"test_exercises\.py::test_shipped_exercise_reports_not_implemented\[(.+\.ipynb)\]")


class ExecutedNotebooks:
    """Keeps what the test suite's runs of the course notebooks printed and drew, for the static site (tools/build_site.py).

    nbval's cell items keep the outputs they got (`IPyNbCell.test_outputs`). When the last cell of a notebook has
    run and every cell passed, its executed copy goes to build/executed/, so `make site` and tests/test_site.py
    render that run instead of executing the notebook again. A notebook with a failed cell leaves no copy.
    Tests that execute a course notebook with nbclient (tests/test_exercises.py runs every exercise) are kept the
    same way when they pass: the notebook an nbclient run executed is matched to its source by its cells.
    Registered as a plugin (not a conftest hook), so it sees the cells in notebooks/ and solutions/ too.
    Under pytest-xdist each worker process keeps what it ran and sends it to the main process at its end; the main
    process writes what the whole run kept to SUITE_RUN, where `make test`'s second pytest run (the site test) reads it.
    """

    name = "course-executed-notebooks"

    def __init__(self, executed_dir: Path | None = None) -> None:
        self.executed_dir = executed_dir or EXECUTED_DIR
        self.outputs: dict[Path, dict[int, list]] = {}
        self.failed: set[Path] = set()
        self.seen: set[Path] = set()  # course notebooks the suite ran (nbval: some cells at least) in this session
        self.kept: dict[Path, Path] = {}  # source -> executed copy, written in this session
        self.exercises: set[Path] = set()  # exercise notebooks tests/test_exercises.py ran (passed or not) in this session
        self.machine: dict | None = None

    def state(self) -> dict:
        """What this session ran and kept, as JSON (paths relative to the repository)."""
        mine = lambda paths: sorted(p.relative_to(ROOT).as_posix() for p in paths if p.is_relative_to(ROOT))  # noqa: E731
        return {"kept": {s.relative_to(ROOT).as_posix(): str(c) for s, c in self.kept.items() if s.is_relative_to(ROOT)},
                "seen": mine(self.seen), "failed": mine(self.failed), "exercises": mine(self.exercises)}

    def absorb(self, state: dict) -> None:
        """Add what another process ran and kept (a pytest-xdist worker's state(), or an earlier run's SUITE_RUN)."""
        self.kept.update({ROOT / s: Path(c) for s, c in state["kept"].items()})
        for name in ("seen", "failed", "exercises"):
            getattr(self, name).update(ROOT / p for p in state[name])

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error) -> None:
        """pytest-xdist, main process: a worker ended; take what it kept."""
        state = getattr(node, "workeroutput", {}).get(self.name)
        if state:
            self.absorb(json.loads(state))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """A pytest-xdist worker sends its state to the main process; the main process (or a run without workers)
        writes the run's to SUITE_RUN, tagged with SUITE_RUN_VAR (make test sets it for its two pytest runs)."""
        config = session.config
        if hasattr(config, "workeroutput"):
            config.workeroutput[self.name] = json.dumps(self.state())
        elif self.executed_dir == EXECUTED_DIR and (self.seen or self.failed):
            SUITE_RUN.parent.mkdir(parents=True, exist_ok=True)
            partial = SUITE_RUN.with_name(f"{SUITE_RUN.name}.{os.getpid()}")  # whole or not at all: another run may read it
            partial.write_text(json.dumps({"run": os.environ.get(SUITE_RUN_VAR), **self.state()}, indent=1))
            partial.replace(SUITE_RUN)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        from tools import build_site

        notebook = type(item).__name__ == "IPyNbCell"
        if notebook and Path(item.parent.path) not in self.outputs:  # its first cell: an older copy goes now, so a run
            build_site.executed_path(Path(item.parent.path), self.executed_dir).unlink(missing_ok=True)  # cut short keeps none
        yield
        if not notebook:
            return
        source = Path(item.parent.path)
        self.seen.add(source)
        self.outputs.setdefault(source, {})[item.cell_num] = list(item.test_outputs or [])
        if nextitem is not None and getattr(nextitem, "parent", None) is item.parent:
            return  # more cells of this notebook to come
        outputs = self.outputs.pop(source)
        stale = build_site.executed_path(source, self.executed_dir)
        if source in self.failed or not source.is_relative_to(ROOT):
            stale.unlink(missing_ok=True)  # the site must not show an older run of a notebook that fails now
            return
        try:
            self.machine = self.machine or build_site.hardware()
            self.kept[source] = build_site.from_cell_outputs(source, outputs, "the test suite (nbval)", self.executed_dir,
                                                             machine=self.machine)
        except ValueError:  # only some cells were selected (`pytest nb.ipynb::Cell 3`): nothing complete to keep
            stale.unlink(missing_ok=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        """Keep the course notebooks a passing test executed with nbclient (the site test's own runs excepted)."""
        if type(item).__name__ == "IPyNbCell" or Path(item.path).name == "test_site.py":
            return (yield)
        import nbclient

        executed = []
        original = nbclient.NotebookClient.execute

        def execute(client, *args, **kwargs):
            result = original(client, *args, **kwargs)
            executed.append(client.nb)
            return result

        nbclient.NotebookClient.execute = execute
        try:
            result = yield  # raises when the test fails: nothing is kept then
        finally:
            nbclient.NotebookClient.execute = original
        if executed:
            self._keep_nbclient_runs(executed, f"the test suite ({item.nodeid.split('::')[0]})")
        return result

    def _keep_nbclient_runs(self, executed: list, runner: str) -> None:
        import nbformat
        from tools import build_site

        cells = lambda nb: [(cell.cell_type, cell.source) for cell in nb.cells]  # noqa: E731
        by_cells = {}
        for source in build_site.sources():
            by_cells.setdefault(repr(cells(nbformat.read(source, as_version=4))), source)
        for nb in executed:
            source = by_cells.get(repr(cells(nb)))
            if source is not None:
                self.seen.add(source)
                self.machine = self.machine or build_site.hardware()
                self.kept[source] = build_site.keep_executed(nb, source, runner, self.executed_dir, machine=self.machine)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if ".ipynb::" in report.nodeid and (report.failed or (report.skipped and report.when == "call")):
            self.failed.add(ROOT / report.nodeid.split("::")[0])
        exercise = EXERCISE_TEST.search(report.nodeid)
        if exercise and report.when == "call":
            self.exercises.add(ROOT / "exercises" / exercise.group(1))


def suite_run(plugin: ExecutedNotebooks) -> ExecutedNotebooks:
    """What the test run executed and kept: this session's, or, in a session that executed no course notebook, the
    run before it when it carries the same SUITE_RUN_VAR (`make test` runs the site test in a second pytest run)."""
    if plugin.seen or plugin.failed or not os.environ.get(SUITE_RUN_VAR) or not SUITE_RUN.exists():
        return plugin
    state = json.loads(SUITE_RUN.read_text())
    if state.get("run") != os.environ[SUITE_RUN_VAR]:
        return plugin
    earlier = ExecutedNotebooks(plugin.executed_dir)
    earlier.absorb(state)
    return earlier


def pytest_configure(config: pytest.Config) -> None:
    """Register the plugin that keeps the suite's executed notebooks for the site; the tests' DataLoader workers share
    one multiprocessing temporary folder, removed when pytest exits (helpers.env.share_worker_temp_dir); a bad
    COURSE_START_METHOD stops the run before any test (the .venv's .pth file only printed it)."""
    from helpers import env, start_method

    try:
        start_method.apply()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    env.share_worker_temp_dir()
    if not config.pluginmanager.has_plugin(ExecutedNotebooks.name):
        config.pluginmanager.register(ExecutedNotebooks(), ExecutedNotebooks.name)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The kernels nbval and the browser test stopped are gone: remove the temporary folders they could not."""
    from helpers import env

    env.remove_stale_worker_temp_dirs()

