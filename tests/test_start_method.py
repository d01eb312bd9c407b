"""COURSE_START_METHOD: every Python of the .venv starts DataLoader workers with the method it names (helpers.start_method)."""
from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from helpers import start_method
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


@pytest.mark.parametrize("command, kept", [
    ("python -c from multiprocessing.resource_tracker import main;main(5)", True),
    ("python -B -c from multiprocessing.forkserver import main; main(18, 19, ['__main__'])", True),
    ("python -c from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=6, pipe_handle=8)", False),  # a worker
    ("python -c while True: pass", False),
])
def test_only_multiprocessings_own_servers_are_kept_by_design(command, kept):
    assert start_method.kept_by_design(command) is kept
