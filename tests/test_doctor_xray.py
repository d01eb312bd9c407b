"""helpers.doctor.xray: one loader under fork, forkserver and spawn, each in a fresh Python; `loader-doctor --start-methods`."""
from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from helpers.doctor import xray
from helpers.doctor.xray import MIB, MethodRun, x_ray

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("no_process_left")

CASES = textwrap.dedent('''
    import torch
    from torch.utils.data import DataLoader, Dataset

    PATHS = [f"/data/train/img_{i:08d}.jpg" for i in range(100_000)]

    class Rows(Dataset):
        def __init__(self, payload=None):
            self.x = torch.arange(131_072 * 16, dtype=torch.float32).reshape(-1, 16)  # 8 MiB
            self.payload = payload

        def __len__(self):
            return 1024

        def __getitem__(self, i):
            return self.x[i]

    def tensors():
        return DataLoader(Rows(), batch_size=64, num_workers=2)

    def paths():
        return DataLoader(Rows(payload=PATHS), batch_size=64, num_workers=2)

    def local_lambda():
        dataset = Rows()
        dataset.transform = lambda x: x
        return DataLoader(dataset, batch_size=64, num_workers=2)

    def no_workers():
        return DataLoader(Rows(), batch_size=64)

    class Raises(Rows):
        def __getitem__(self, i):
            raise ValueError("item 3 is corrupt")

    def raises():
        return DataLoader(Raises(), batch_size=64, num_workers=2)

    class Hangs(Rows):
        def __getitem__(self, i):
            import time
            time.sleep(600)

    def hangs():
        return DataLoader(Hangs(), batch_size=64, num_workers=2)

    def not_a_loader():
        return [1, 2, 3]

    NOT_CALLABLE = 3
''')


@pytest.fixture
def cases(tmp_path, monkeypatch):
    """A module of loaders in a fresh folder, the current directory (as `loader-doctor` finds the learner's module)."""
    (tmp_path / "xray_cases.py").write_text(CASES)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_a_tensor_travels_as_a_handle_and_a_list_by_value(cases):
    import xray_cases

    fork, spawn = x_ray("xray_cases:tensors", methods=["fork", "spawn"])
    assert fork.ok and spawn.ok, (fork, spawn)
    assert fork.sent_mib == 0.0 and spawn.sent_mib < 0.05  # 8 MiB of tensor: a shared-memory handle of a few hundred bytes
    by_value = len(pickle.dumps(xray_cases.PATHS)) / MIB  # the list as plain pickle writes it, about 3.6 MiB
    (listed,) = x_ray("xray_cases:paths", methods=["spawn"])
    assert listed.ok and by_value <= listed.sent_mib <= by_value + 0.05, (listed.sent_mib, by_value)
    assert listed.pickle_s > 0
    for run in (fork, spawn, listed):
        assert len(run.worker_uss_mib) == len(run.worker_pss_mib) == 2 and run.samples_per_s > 0 and run.batches == 16
    # a spawned worker imports torch itself; a forked one shares the parent's pages until it writes them
    assert min(spawn.worker_uss_mib) > 2 * max(fork.worker_uss_mib), (spawn.worker_uss_mib, fork.worker_uss_mib)
    assert spawn.first_batch_s > fork.first_batch_s


def test_a_method_that_cannot_pickle_the_dataset_names_the_part_and_the_fix(cases):
    fork, forkserver = x_ray("xray_cases:local_lambda", methods=["fork", "forkserver"])
    assert fork.ok
    assert not forkserver.ok and "Can't pickle local object 'local_lambda.<locals>.<lambda>'" in forkserver.error
    assert forkserver.culprit == "loader.dataset.transform (function)" and "module level" in forkserver.fix
    assert "it is loader.dataset.transform (function)" in forkserver.row()


def test_a_loader_without_workers_says_the_method_changes_nothing(cases):
    (run,) = x_ray("xray_cases:no_workers", methods=["spawn"])
    assert not run.ok and "num_workers=0" in run.error


def test_the_workers_own_error_and_a_function_that_returns_no_loader_are_said(cases):
    (raised,) = x_ray("xray_cases:raises", methods=["fork"])
    assert not raised.ok and raised.error.startswith("ValueError: Caught ValueError in DataLoader worker process")
    assert raised.error.endswith("ValueError: item 3 is corrupt") and not raised.culprit  # it pickles: no part to blame
    (listed,) = x_ray("xray_cases:not_a_loader", methods=["fork"])
    assert listed.error == "spec must name a function that returns a torch.utils.data.DataLoader, got [1, 2, 3]"


def test_an_interrupt_stops_the_methods_python_and_its_workers(cases, monkeypatch):
    """Ctrl-C (or a notebook's interrupt) reaches only this process: the method's Python, in its own process group, and
    the workers it started are stopped before the interrupt goes on."""
    real, children = subprocess.Popen.communicate, []

    def interrupted(self, *args, **kwargs):
        if kwargs.get("timeout") is None:
            return real(self, *args, **kwargs)
        children.append(self.pid)
        deadline = time.monotonic() + 60
        while len(psutil.Process(self.pid).children(recursive=True)) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)  # its workers have started, and hang
        raise KeyboardInterrupt

    monkeypatch.setattr(subprocess.Popen, "communicate", interrupted)
    with pytest.raises(KeyboardInterrupt):
        x_ray("xray_cases:hangs", methods=["fork"])
    left = [p for p in psutil.process_iter(["status"]) if _group(p) == children[0] and p.info["status"] != psutil.STATUS_ZOMBIE]
    assert not left, left


def test_stop_returns_once_no_process_of_the_group_runs():
    """_stop kills the method's process group and waits for it: the group's grandchild (a worker's place) is dead, or a
    zombie, when it returns; _group_running read True before."""
    grandchild = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", grandchild], start_new_session=True)
    deadline = time.monotonic() + 30
    while len(psutil.Process(child.pid).children()) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert xray._group_running(child.pid)
    xray._stop(child)
    assert not xray._group_running(child.pid)
    assert not [p for p in psutil.process_iter(["status"]) if _group(p) == child.pid and p.info["status"] != psutil.STATUS_ZOMBIE]


def _group(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except OSError:
        return None


def test_a_row_shows_a_dash_where_nothing_was_measured():
    assert MethodRun("spawn", ok=True).row().split() == ["spawn", "-", "-", "-", "-", "-"]
    assert "\n" not in MethodRun("spawn", error="first\nsecond").row()


@pytest.mark.parametrize("kwargs, match", [
    ({"spec": "xray_cases"}, "spec must look like module:function, got 'xray_cases'"),
    ({"methods": ["fork", "vfork"]}, "methods must be start methods.*got \\['fork', 'vfork'\\]"),
    ({"methods": ["fork", "fork"]}, "methods must name each start method once"),
    ({"spec": ":make"}, "spec must look like module:function, got ':make'"),
    ({"spec": "xray_cases:NOT_CALLABLE"}, "not callable"),
    ({"batches": 1}, "batches must be an int of at least 2.*got 1"),
    ({"timeout_s": float("nan")}, "timeout_s must be a positive number of seconds, got nan"),
    ({"timeout_s": True}, "timeout_s must be a positive number of seconds, got True"),
])
def test_bad_input_is_named(cases, kwargs, match):
    with pytest.raises(ValueError, match=match):
        x_ray(**{"spec": "xray_cases:tensors", **kwargs})


@pytest.mark.parametrize("methods", ["spawn", 5])
def test_methods_that_are_not_a_list_are_named(cases, methods):
    with pytest.raises(TypeError, match=f"methods must be a list of start methods, got {methods!r}"):
        x_ray("xray_cases:tensors", methods=methods)


def test_a_module_that_is_not_there_is_said_once(cases):
    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        x_ray("no_such_module:make_loader")


def test_command_line_exit_status(cases):
    def doctor(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "helpers.doctor", *args, "--start-methods"], capture_output=True,
                              text=True, timeout=300, cwd=cases, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})

    failed = doctor("xray_cases:local_lambda")
    assert failed.returncode == 1, failed.stderr
    lines = failed.stdout.splitlines()
    assert lines[0].startswith("method") and lines[1].startswith("fork ") and "failed" not in lines[1]
    assert lines[2].startswith("forkserver  failed: AttributeError") and lines[3].startswith("spawn       failed")
    assert lines[4].startswith("fix: make it picklable")
    assert doctor("nowhere:fn").returncode == 2
