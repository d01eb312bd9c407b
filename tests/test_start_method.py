"""COURSE_START_METHOD: every Python of the .venv starts DataLoader workers with the method it names (helpers.start_method)."""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import time
import sysconfig
from pathlib import Path

import pytest

from helpers import start_method, start_method_demos
from helpers.course import START_METHOD_VAR

# A fresh Python of this .venv: its default start method, and how its DataLoader worker started, told from inside the
# worker: its parent (forkserver's workers are the fork server's children) and whether it inherited a name set at run time
# (fork copies the process; spawn and forkserver start a fresh Python)
WORKER = """
import builtins, os

def collate(batch):
    return os.getppid(), hasattr(builtins, "set_at_run_time")
"""
PROBE = """
import builtins, multiprocessing, os, torch
from torch.utils.data import DataLoader
from probe_worker import collate
builtins.set_at_run_time = True
parent, inherited = next(iter(DataLoader(torch.arange(4), batch_size=2, num_workers=1, collate_fn=collate)))
started = {(True, True): "fork", (True, False): "spawn", (False, False): "forkserver"}[(parent == os.getpid(), inherited)]
print(multiprocessing.get_start_method(), started)
"""


def probe(value: str | None, folder: Path) -> str:
    (folder / "probe_worker.py").write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if k != START_METHOD_VAR}
    env["PYTHONPATH"] = str(folder)
    if value is not None:
        env[START_METHOD_VAR] = value
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize("value, expected", [
    ("forkserver", "forkserver forkserver"),
    ("spawn", "spawn spawn"),
    (None, "fork fork"),  # unset: Linux's default before Python 3.14
])
def test_a_fresh_python_of_the_venv_starts_workers_with_the_method_named(value, expected, tmp_path):
    if sys.platform != "linux" or sys.version_info >= (3, 14):
        pytest.skip("the expected defaults are Linux's before Python 3.14")
    if sys.prefix == sys.base_prefix:
        pytest.skip("not the course's .venv (make installs the .pth file there)")
    assert probe(value, tmp_path) == expected


def test_the_switch_imports_neither_torch_nor_numpy_at_start_up():
    """The .pth runs in every Python of the venv (pip, jupyter, each spawned worker): under the switch, importing
    helpers._validate there made each import numpy and torch at start-up (the forkserver suite's test_ready_import_...)."""
    if sys.prefix == sys.base_prefix:
        pytest.skip("not the course's .venv (make installs the .pth file there)")
    code = "import sys, multiprocessing; print(sorted(m for m in ('numpy', 'torch') if m in sys.modules), multiprocessing.get_start_method())"
    env = {**os.environ, START_METHOD_VAR: "forkserver"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["[]", "forkserver"], done.stdout + done.stderr


def test_the_venv_holds_the_switch_as_make_writes_it():
    if sys.prefix == sys.base_prefix:
        pytest.skip("not the course's .venv (make installs the .pth file there)")
    assert (Path(sysconfig.get_paths()["purelib"]) / start_method.PTH_NAME).read_text() == start_method.PTH_LINE


def test_a_method_this_platform_lacks_is_named_in_the_error(monkeypatch):
    monkeypatch.setenv(START_METHOD_VAR, "forksrv")
    with pytest.raises(ValueError, match=r"COURSE_START_METHOD must be one of .*forkserver.* \(or unset\), got 'forksrv'"):
        start_method.chosen()
    monkeypatch.setenv(START_METHOD_VAR, "")
    assert start_method.chosen() is None and start_method.default() == multiprocessing.get_all_start_methods()[0]


def test_only_multiprocessings_own_servers_are_kept_by_design():
    """Under forkserver: the fork server and the resource tracker are kept; a worker the server forked (same command line,
    the server as its parent) and any other program are not; a command line is not a process."""
    import psutil

    context = multiprocessing.get_context("forkserver")
    worker = context.Process(target=time.sleep, args=(30,))
    worker.start()
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        kept = {p.pid for p in psutil.Process().children(recursive=True) if start_method.kept_by_design(p)}
        servers = {p.pid for p in psutil.Process().children() if start_method.FORK_SERVER in " ".join(p.cmdline())
                   or start_method.RESOURCE_TRACKER in " ".join(p.cmdline())}
        assert len(servers) == 2 and kept == servers  # the fork server and the resource tracker, nothing else
        assert worker.pid not in kept and other.pid not in kept
        assert psutil.Process(worker.pid).parent().pid in servers  # forked by the server
    finally:
        worker.terminate()
        worker.join()
        other.kill()
        other.wait()
    with pytest.raises(TypeError, match="process must be a psutil.Process, got 'resource_tracker'"):
        start_method.kept_by_design("resource_tracker")


def test_a_forkserver_worker_sees_the_environment_the_fork_server_started_with():
    """Lesson 09 section 8: fork and spawn workers get the environment as it is when they start; forkserver workers get
    the fork server's, fixed by the first worker that started it (a stdlib probe gave the same: a, b / a, a / a, b)."""
    seen = start_method_demos.settings_seen()
    expected = {"fork": ["first", "second"], "spawn": ["first", "second"], "forkserver": ["first", "first"]}
    assert seen == {method: expected[method] for method in multiprocessing.get_all_start_methods()}
    assert start_method_demos.SETTING not in os.environ  # the caller's environment is left alone


@pytest.mark.parametrize(("timeout_s", "error"), [(0, ValueError), (-1.0, ValueError), (float("nan"), ValueError),
                                                  (float("inf"), ValueError), (2_147_483.648, ValueError),
                                                  ("60", TypeError), (True, TypeError)])
def test_settings_seen_refuses_a_bad_timeout_naming_it(timeout_s, error):
    with pytest.raises(error, match="timeout_s"):
        start_method_demos.settings_seen(timeout_s=timeout_s)


def test_settings_seen_says_when_its_timeout_was_too_short():
    with pytest.raises(TimeoutError, match=r"timeout_s=0.01 s"):
        start_method_demos.settings_seen(timeout_s=0.01)


def _marked(mark: str) -> list[int]:
    """Processes whose environment holds COURSE_TEST_MARK=mark (inherited by whatever started under this test)."""
    import psutil

    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get("COURSE_TEST_MARK") == mark:
                found.append(process.pid)
        except (psutil.AccessDenied, psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def test_settings_seen_stops_the_fresh_python_and_all_it_started_when_it_times_out(monkeypatch):
    """A contract probe found a spawn worker and a resource tracker (timeouts of 1-2 s), or the fork server and its worker
    (2.5-3 s), left running for good: only the fresh Python was killed, and a worker whose parent dies before it starts
    never notices. Each timeout here stops it at another stage; what is left is found by a mark in its environment."""
    mark = f"settings-seen-{os.getpid()}-{time.time_ns()}"
    monkeypatch.setenv("COURSE_TEST_MARK", mark)
    left = []
    try:
        for timeout_s in (1.0, 1.5, 2.0, 2.5, 3.0):
            with pytest.raises(TimeoutError):
                start_method_demos.settings_seen(timeout_s=timeout_s)
            time.sleep(0.2)
            left += [(timeout_s, pid) for pid in _marked(mark)]
    finally:
        for pid in _marked(mark):
            os.kill(pid, 9)
    assert left == []
