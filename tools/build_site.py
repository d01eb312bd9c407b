"""Build the course as a static site that opens offline (`make site`): every lesson, exercise and solution, executed.

Executed notebooks live in build/executed/<folder>/<name>.ipynb. The test suite writes them there as nbval
runs each notebook (tests/conftest.py), so a `make test` run never executes a notebook twice; this tool
executes (with nbclient) only those that are missing or older than their source and the course code.
Sphinx with MyST-NB (execution off) and sphinx-book-theme then renders them, docs/*.md and a home page
with the course map into build/site/: no CDN, no web font, no widget renderer.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import html
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Collection
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from helpers.course import CHECKS_MUST_PASS_VAR, LESSONS, NEEDS  # noqa: E402

BUILD = ROOT / "build"
EXECUTED_DIR = BUILD / "executed"
STAGE_DIR = BUILD / "site-src"
SITE_DIR = BUILD / "site"
CONF_DIR = ROOT / "site"
FOLDERS = ("notebooks", "exercises", "solutions")
# The course code a notebook's outputs depend on besides its own source: a change here makes them stale.
CODE_GLOBS = ("helpers/**/*.py", "scripts/**/*")
META = "course_site"  # notebook metadata key: where, how and from what the outputs came
CELL_TIMEOUT_S = 180  # as pyproject's --nbval-cell-timeout
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
PROGRESS = re.compile(r"\d+%\|.*\|.*\[.*\]")  # how a tqdm bar's text/plain looks
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s#]+)(#[^)\s]*)?\)")


def sources() -> list[Path]:
    """Every notebook the site shows: lessons, exercises, solutions, in course order."""
    return [path for folder in FOLDERS for path in sorted((ROOT / folder).glob("*.ipynb"))]


def code_digest() -> str:
    """A digest of the course code every notebook imports (helpers/, scripts/)."""
    digest = hashlib.sha256()
    for pattern in CODE_GLOBS:
        for path in sorted(ROOT.glob(pattern)):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(path.relative_to(ROOT).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def source_digest(source: Path, code: str | None = None) -> str:
    """What an executed copy must have been made from: the notebook's bytes and the course code."""
    return hashlib.sha256(source.read_bytes() + (code or code_digest()).encode()).hexdigest()


def _shown(path: Path) -> str:
    """A path as messages show it: relative to the repository when inside it."""
    return path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else str(path)


def executed_path(source: Path, executed_dir: Path = EXECUTED_DIR) -> Path:
    """Where the executed copy of a source notebook lives."""
    return executed_dir / source.parent.name / source.name


def hardware() -> dict:
    """The machine that executes the notebooks, as lesson 00's report describes it (helpers.env.report())."""
    from helpers import env
    from helpers.loading import cpu_model

    report = env.report()
    gpus = f"{report.gpu_count} CUDA GPU{'s' if report.gpu_count != 1 else ''}: {', '.join(report.gpu_names)}" if report.gpu_count else "no CUDA GPU"
    summary = (f"{cpu_model()}, {report.usable_cpus} usable CPU cores, {report.ram_total_bytes / 1024**3:.1f} GiB RAM, {gpus}; "
               f"{report.platform}, Python {report.python}, torch {report.torch}")
    return {"summary": summary, "rows": report.rows()}


def keep_executed(nb, source: Path, runner: str, executed_dir: Path = EXECUTED_DIR, machine: dict | None = None) -> Path:
    """Write an executed notebook (an nbformat node) for the site, stamped with its source digest and the hardware."""
    import nbformat

    nb.metadata[META] = {
        "source": _shown(source),
        "digest": source_digest(source),
        "runner": runner,
        "executed": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "hardware": machine or hardware(),
    }
    target = executed_path(source, executed_dir)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    nbformat.write(nb, partial)
    partial.replace(target)
    return target


def from_cell_outputs(source: Path, outputs: dict[int, list], runner: str, executed_dir: Path = EXECUTED_DIR,
                      machine: dict | None = None) -> Path:
    """Write the executed copy of `source` from the outputs of each code cell (by code-cell number, as nbval counts)."""
    import nbformat

    nb = nbformat.read(source, as_version=4)
    code_cells = [cell for cell in nb.cells if cell.cell_type == "code"]
    if sorted(outputs) != list(range(len(code_cells))):
        raise ValueError(f"{source.name}: outputs for code cells {sorted(outputs)}, but it has {len(code_cells)} code cells")
    for number, cell in enumerate(code_cells):
        cell.outputs = [nbformat.from_dict(dict(output)) for output in outputs[number]]
        cell.execution_count = number + 1
        for output in cell.outputs:
            if output.output_type == "execute_result":
                output.execution_count = number + 1
    return keep_executed(nb, source, runner, executed_dir, machine)


def execute(source: Path, executed_dir: Path = EXECUTED_DIR, machine: dict | None = None) -> Path:
    """Run a notebook top to bottom with nbclient in its own folder, as the test suite would, and keep it."""
    import nbclient
    import nbformat

    from tools.notebook_client import NotebookClient

    nb = nbformat.read(source, as_version=4)
    must_pass = "0" if source.parent.name == "exercises" else "1"  # stubs report "not implemented yet"; solutions must pass
    saved = os.environ.get(CHECKS_MUST_PASS_VAR)
    os.environ[CHECKS_MUST_PASS_VAR] = must_pass
    try:
        NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                       resources={"metadata": {"path": str(source.parent)}}).execute()
    except (nbclient.exceptions.CellExecutionError, nbclient.exceptions.CellTimeoutError, nbclient.exceptions.DeadKernelError) as error:
        raise RuntimeError(f"{_shown(source)} failed while executing, so the site cannot show it:\n{str(error)[-3000:]}") from error
    finally:
        if saved is None:
            os.environ.pop(CHECKS_MUST_PASS_VAR, None)
        else:
            os.environ[CHECKS_MUST_PASS_VAR] = saved
    return keep_executed(nb, source, "tools/build_site.py (nbclient)", executed_dir, machine)


def is_fresh(source: Path, executed_dir: Path = EXECUTED_DIR, code: str | None = None) -> bool:
    """True when the executed copy exists and was made from this source and this course code."""
    target = executed_path(source, executed_dir)
    if not target.exists():
        return False
    meta = json.loads(target.read_text()).get("metadata", {}).get(META, {})
    return meta.get("digest") == source_digest(source, code)


# What executing the notebooks prints to this terminal that is not a problem.
EXPECTED_NOISE = ("Expected while the notebooks execute: 'Kernel is running over TCP without encryption' once per notebook (each "
                  "kernel listens on this machine's loopback only), and lesson 00's deliberate traceback ('An attempt has been made "
                  "to start a new process before the current process has finished its bootstrapping phase': its section 4 runs a "
                  "script without a main guard on purpose). A notebook that really fails stops the build with its error.")


def ensure_executed(notebooks: list[Path], executed_dir: Path = EXECUTED_DIR, fresh: bool = False, log=print) -> list[Path]:
    """Execute the notebooks whose executed copy is missing or stale (all with fresh=True); return those executed."""
    code = code_digest()
    todo = [source for source in notebooks if fresh or not is_fresh(source, executed_dir, code)]
    machine = hardware() if todo else None
    if todo:
        log(EXPECTED_NOISE)
    for number, source in enumerate(todo, 1):
        start = time.monotonic()
        execute(source, executed_dir, machine)
        log(f"executed {number}/{len(todo)} {_shown(source)} in {time.monotonic() - start:.0f} s")
    return todo


# ---------------------------------------------------------------- staging: what Sphinx reads

def jupyter_slug(title: str) -> str:
    """A heading's anchor as JupyterLab and nbconvert make it ("1. The report" -> "1.-The-report"), so the links
    the course's pages use in JupyterLab (notebook.ipynb#1.-The-report) work on the site too (site/conf.py)."""
    return title.strip().replace(" ", "-")


def widget_note(output) -> str:
    """One line that stands where a widget was: a static page has no kernel to drive it."""
    text = "".join(output.get("data", {}).get("text/plain", ""))
    if PROGRESS.search(text):
        return "<p class='course-widget-note'>A progress bar ran here while the cell executed.</p>"
    return ("<p class='course-widget-note'><b>Interactive control.</b> It responds when you run this notebook in "
            "JupyterLab (<code>make lab</code>); a static page has no kernel behind it.</p>")


def hardware_banner(meta: dict) -> str:
    """The note at the top of an executed page: the hardware it ran on, when and by what."""
    rows = "".join(f"<tr><td>{html.escape(name)}</td><td>{html.escape(value)}</td></tr>" for name, value in meta["hardware"]["rows"])
    return (f"<div class='course-hardware'><details><summary><b>Executed on:</b> {html.escape(meta['hardware']['summary'])} "
            f"({html.escape(meta['executed'])}, by {html.escape(meta['runner'])})</summary>"
            f"<p>Lesson 00's environment report (<code>helpers.env.report()</code>) on that machine:</p>"
            f"<table>{rows}</table></details></div>")


def page_notebook(executed: Path):
    """The executed notebook as the site shows it: the hardware on top, widgets replaced by a note, no widget state."""
    import nbformat

    nb = nbformat.read(executed, as_version=4)
    nb.metadata.pop("widgets", None)  # stored widget state would make MyST-NB load the widget renderer
    for cell in nb.cells:
        for number, output in enumerate(cell.get("outputs", [])):
            data = output.get("data", {})
            if WIDGET_MIME in data or WIDGET_STATE in data:
                cell.outputs[number] = nbformat.v4.new_output("display_data", data={"text/html": widget_note(output)})
    nb.cells.insert(0, nbformat.v4.new_markdown_cell(hardware_banner(nb.metadata[META])))
    return nb


def _title(path: Path) -> str:
    """A page's H1 (notebook or markdown), for the home page's lists."""
    if path.suffix == ".ipynb":
        text = "\n".join("".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "markdown")
    else:
        text = path.read_text()
    match = re.search(r"^# (.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else path.stem


def readme_intro() -> str:
    """The README's opening paragraphs (after its title, before its first section)."""
    readme = (ROOT / "README.md").read_text()
    body = readme.split("\n", 1)[1] if readme.startswith("# ") else readme
    return body.split("\n## ", 1)[0].strip()


def home_page(docs: list[Path], extra: list[str], machine: dict | None) -> str:
    """index.md: the course map from helpers.course.LESSONS, the guides, and the site's navigation."""

    def link(text: str, folder: str, stem: str, suffix: str = "") -> str:
        name = f"{stem}{suffix}.ipynb"
        return f"[{text}]({folder}/{name})" if (ROOT / folder / name).exists() else ""

    def row(lesson) -> str:
        practice = " · ".join(filter(None, (link("exercises", "exercises", lesson.stem, "_exercises"),
                                            link("solutions", "solutions", lesson.stem, "_solutions"))))
        title = link(f"{lesson.number} · {lesson.title}", "notebooks", lesson.stem)
        return f"| {title} | {lesson.learn} | {NEEDS[lesson.needs]} | {lesson.minutes} | {practice} |"

    rows = [row(lesson) for lesson in LESSONS]
    parts = ["# Feed the GPUs", ""]
    if machine:
        parts += [f"<div class='course-hardware'><b>Executed on:</b> {html.escape(machine['summary'])}. Each notebook's page "
                  "says where and when it ran.</div>", ""]
    parts += [readme_intro(), "", "## Course map", "",
              "| lesson | what you learn | hardware for the full effect | minutes | practice |",
              "|---|---|---|---|---|", *rows, ""]
    if docs:
        parts += ["## Guides", "", *(f"- [{_title(path)}](docs/{path.name})" for path in docs), ""]
    parts += ["This site is the notebooks as they ran, with every output they produced. Widgets need a running kernel: "
              "open the notebooks in JupyterLab (`make lab`) to use them.", ""]

    def toctree(caption: str, entries: list[str]) -> list[str]:
        return ["```{toctree}", ":hidden:", f":caption: {caption}", "", *entries, "```", ""] if entries else []

    for caption, folder in (("Lessons", "notebooks"), ("Exercises", "exercises"), ("Solutions", "solutions")):
        parts += toctree(caption, [f"{folder}/{p.stem}" for p in sorted((ROOT / folder).glob("*.ipynb"))])
    parts += toctree("Guides", [f"docs/{p.stem}" for p in docs])
    parts += toctree("Other pages", extra)
    return "\n".join(parts)


def _linked_files(text: str, page: Path) -> list[Path]:
    """Repository files a page links to by relative path."""
    found = []
    for target, _ in LINK.findall(text):
        path = (page.parent / target).resolve()
        if path.is_relative_to(ROOT) and path.is_file():
            found.append(path)
    return found


def stage(executed_dir: Path = EXECUTED_DIR, stage_dir: Path = STAGE_DIR) -> Path:
    """Lay out Sphinx's source folder: executed notebooks, docs/*.md, linked repository files, the home page."""
    import nbformat

    if stage_dir.exists():
        shutil.rmtree(stage_dir)
    stage_dir.mkdir(parents=True)
    staged, texts, machine = set(), [], None
    for source in sources():
        executed = executed_path(source, executed_dir)
        if not executed.exists():
            raise FileNotFoundError(f"{executed} is missing: run `make site` (it executes what is missing)")
        nb = page_notebook(executed)
        machine = machine or nb.metadata[META]["hardware"]
        target = stage_dir / source.parent.name / source.name
        target.parent.mkdir(exist_ok=True)
        nbformat.write(nb, target)
        staged.add(source.resolve())
        texts.append((source, "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")))
    docs = sorted((ROOT / "docs").glob("*.md"))
    for doc in docs:
        (stage_dir / "docs").mkdir(exist_ok=True)
        shutil.copy2(doc, stage_dir / "docs" / doc.name)
        staged.add(doc.resolve())
        texts.append((doc, doc.read_text()))
    texts.append((ROOT / "index.md", readme_intro()))
    # Files the pages link to that are not pages themselves: copied, so the links resolve (a .md becomes a page,
    # anything else a download); repeated until linked pages link to nothing new.
    extra: list[str] = []
    while texts:
        page, text = texts.pop()
        for path in _linked_files(text, page):
            if path in staged:
                continue
            staged.add(path)
            relative = path.relative_to(ROOT)
            (stage_dir / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, stage_dir / relative)
            if path.suffix == ".md":
                extra.append(relative.with_suffix("").as_posix())
                texts.append((path, path.read_text()))
    (stage_dir / "index.md").write_text(home_page(docs, extra, machine))
    return stage_dir


def sphinx_build(stage_dir: Path = STAGE_DIR, site_dir: Path = SITE_DIR) -> Path:
    """Render the staged sources into a static site with Sphinx (site/conf.py); warnings fail the build."""
    if site_dir.exists():
        shutil.rmtree(site_dir)
    doctrees = stage_dir.parent / f"{site_dir.name}-doctrees"
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-E",
               "-c", str(CONF_DIR), "-d", str(doctrees), str(stage_dir), str(site_dir)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    shutil.rmtree(doctrees, ignore_errors=True)
    if result.returncode != 0:
        raise RuntimeError(f"sphinx-build failed (exit {result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-5000:]}")
    return site_dir


def build(fresh: bool = False, execute_missing: bool = True, executed_dir: Path = EXECUTED_DIR,
          stage_dir: Path = STAGE_DIR, site_dir: Path = SITE_DIR, log=print, current: Collection[Path] = ()) -> Path:
    """Execute what is missing or stale (unless execute_missing=False: then fail on it), stage and render; return the
    site's folder. `current`: sources whose executed copies this very run made (the test suite's), taken as they are."""
    notebooks = sources()
    code = code_digest()
    todo = [source for source in notebooks if fresh or (source not in current and not is_fresh(source, executed_dir, code))]
    if todo and not execute_missing:
        raise RuntimeError(f"no up-to-date executed copy of {', '.join(map(_shown, todo))} in {_shown(executed_dir)}")
    ensure_executed(todo, executed_dir, fresh=True, log=log)
    start = time.monotonic()
    sphinx_build(stage(executed_dir, stage_dir), site_dir)
    log(f"rendered {len(notebooks)} notebooks and {len(list((ROOT / 'docs').glob('*.md')))} docs pages in "
        f"{time.monotonic() - start:.0f} s: open {_shown(site_dir / 'index.html')}")
    return site_dir


def main(argv: list[str] | None = None) -> int:
    """`make site`: build build/site/ from the executed notebooks, executing those missing or stale first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fresh", action="store_true", help="execute every notebook again, even those with up-to-date outputs")
    parser.add_argument("--no-execute", action="store_true", help="execute nothing; fail if an executed notebook is missing or stale")
    args = parser.parse_args(argv)
    try:
        build(fresh=args.fresh, execute_missing=not args.no_execute)
    except (RuntimeError, FileNotFoundError) as error:
        print(error, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
