"""Which threads of a worker compute side by side: thread pools told apart from the worker's Python threads (lesson 00).

Every Python thread a worker starts through `threading` after its worker_init_fn is left out: the DataLoader's own
(the queue's feeder thread, which sends each batch; with the file_descriptor sharing strategy, Linux's default, and
batches holding tensors, the thread that passes their file descriptors) and any pool the dataset starts itself. On a
loader of cheap items the first two did 40-60 % of the main thread's CPU work (2-core VM, annotations_numpy); the limits threads-oversubscribed
advises (BLAS, OpenMP, OpenCV threads) change none of them. A thread started by `_thread` directly, or a dataset that
replaces the profile hook with its own `threading.setprofile`, is not noted and counts as a pool thread.
"""
from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from typing import Any

import psutil

WORKING_SHARE = 0.5  # a thread working side by side did at least this share of the CPU work of the busiest one


class ThreadCensus:
    """A worker_init_fn: the loader's own, then a note in `folder` of every Python thread the worker starts later, by native id."""

    def __init__(self, inner: Callable[[int], None] | None, folder: str) -> None:
        self.inner = inner
        self.folder = folder

    def __call__(self, worker_id: int) -> None:
        _touch(os.path.join(self.folder, f"w{worker_id}.begun"))  # torch imported, the dataset unpickled
        if self.inner is not None:
            self.inner(worker_id)
        _touch(os.path.join(self.folder, f"w{worker_id}.ready"))
        threading.setprofile(_Note(self.folder, threading.getprofile()))

    def started(self) -> tuple[int, int]:
        """How many workers have reached the loader's worker_init_fn, and how many have returned from it."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return 0, 0
        return sum(n.endswith(".begun") for n in names), sum(n.endswith(".ready") for n in names)

    def python_threads(self, pid: int) -> set[int]:
        """Native ids of the Python threads worker `pid` has started since its worker_init_fn (the main thread is not one)."""
        try:
            names = os.listdir(self.folder)
        except OSError:
            return set()
        return {int(tid) for owner, _, tid in (name.partition(".") for name in names) if owner == str(pid) and tid.isdigit()}


class _Note:
    """A profile hook each new Python thread calls once: it writes the thread's native id, then hands over to the hook before it."""

    def __init__(self, folder: str, before: Any) -> None:
        self.folder = folder
        self.before = before

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        sys.setprofile(self.before)
        _touch(os.path.join(self.folder, f"{os.getpid()}.{threading.get_native_id()}"))
        return self.before(frame, event, arg) if self.before is not None else None


def _touch(path: str) -> None:
    """Create the empty file `path`; nothing when the doctor has finished and removed its folder, or it exists."""
    try:
        open(path, "x").close()
    except OSError:
        pass


def working_threads(pid: int, python_threads: set[int] | frozenset[int] = frozenset()) -> int | None:
    """Threads of process `pid`, other than `python_threads`, that did at least half the CPU work of the busiest of them, or None
    when that busiest one has used under 0.05 s of CPU (CPU seconds since each thread started, start-up included).

    `python_threads`: native ids of the process's Python threads besides its main thread (ThreadCensus); they are left
    out, as BLAS or OpenMP threads splitting a matrix product, which do about as much as the main thread, are not.
    """
    try:
        cpu = [t.user_time + t.system_time for t in psutil.Process(pid).threads() if t.id == pid or t.id not in python_threads]
    except psutil.Error:
        return None
    busiest = max(cpu, default=0.0)
    return sum(1 for c in cpu if c >= WORKING_SHARE * busiest) if busiest >= 0.05 else None
