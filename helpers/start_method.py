"""The course's start-method switch: COURSE_START_METHOD=forkserver (Python 3.14's default on Linux) or spawn (macOS, Windows)
makes that the default start method in every Python of the course's .venv: lessons, solutions, tests, workers and ranks.

`make` installs a one-line .pth file (PTH_LINE) in the .venv that calls `apply()` when the variable is set, so a kernel
or a test run starts with the chosen method before any cell or test runs; unset, nothing is imported and the platform's
default stays (fork on Linux before Python 3.14).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from typing import Any

from helpers.course import START_METHOD_VAR

PTH_NAME = "course_start_method.pth"
PTH_LINE = (f"import os; os.environ.get({START_METHOD_VAR!r}) and "
            "__import__('helpers.start_method').start_method.apply()\n")


def chosen() -> str | None:
    """The start method COURSE_START_METHOD names, or None when it is unset or empty; ValueError for one this platform lacks."""
    value = os.environ.get(START_METHOD_VAR, "")
    if not value:
        return None
    methods = multiprocessing.get_all_start_methods()
    if value not in methods:
        raise ValueError(f"{START_METHOD_VAR} must be one of {', '.join(methods)} (or unset), got {value!r}")
    return value


def default() -> str:
    """The course's default start method here: COURSE_START_METHOD's, else the platform's (the first it lists)."""
    return chosen() or multiprocessing.get_all_start_methods()[0]


def apply() -> str:
    """Make COURSE_START_METHOD's method multiprocessing's default in this process, when set; returns the method in effect
    (unset, nothing is fixed: a later set_start_method still works)."""
    method = chosen()
    if method is not None:
        multiprocessing.set_start_method(method, force=True)
    return multiprocessing.get_start_method(allow_none=True) or default()  # unset: nothing is fixed here


RESOURCE_TRACKER = "from multiprocessing.resource_tracker import main"  # the -c code multiprocessing starts each with
FORK_SERVER = "from multiprocessing.forkserver import main"


def kept_by_design(process: Any) -> bool:
    """Whether `process` (a psutil.Process) is multiprocessing's resource tracker or fork server, each started once on first
    use and kept until the program exits; a worker the fork server forked runs the same command line, but its parent is
    the fork server. False for a process that has exited."""
    import psutil

    from helpers._validate import short  # here, not at the top: the .pth imports this module in every Python of the venv

    if not isinstance(process, psutil.Process):
        raise TypeError(f"process must be a psutil.Process, got {short(process)}")
    try:
        command = " ".join(process.cmdline())
        if FORK_SERVER in command:
            parent = process.parent()
            return parent is None or FORK_SERVER not in " ".join(parent.cmdline())
        return RESOURCE_TRACKER in command
    except psutil.Error:
        return False


def descendants() -> list[Any]:
    """This process's descendants (psutil.Process), less the fork server and resource tracker: its workers, ranks and
    programs, under every start method (under forkserver the workers are the fork server's children)."""
    import psutil

    return [p for p in psutil.Process().children(recursive=True) if not kept_by_design(p)]


def main() -> int:
    """Exit status 2 with the error when COURSE_START_METHOD is bad, else 0: make lab and make test check it first, since the
    .pth file can only print it."""
    try:
        chosen()
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
