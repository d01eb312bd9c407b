"""Starting a loader's workers within the doctor's wait: iter(loader) bounded on its own clock where it can be (lesson 07).

Under forkserver and spawn, `iter(loader)` starts the workers one after another, and each start blocks until that
worker has read all but the last 64 KiB (a pipe's buffer) of what was pickled for it, which it reads only after
importing the dataset's modules (torch among them): 16 workers with a 10 MB dataset took 11.7 s on the 2-core VM.
Under forkserver the watch kills the fork server's children started since iter() began, the workers started so far and
the one being started: the blocked write then fails (BrokenPipeError) and iter() raises. They are the server's
children, not this process's, so torch's SIGCHLD handler never reports them (it ignores a pid it cannot wait for).
Under spawn the parent holds the pipe's other end itself, so a killed worker would leave the write blocked for good:
there the start is not bounded (nor under fork, where it takes milliseconds).
"""
from __future__ import annotations

import threading
import time
from typing import Any

import psutil
from torch.utils.data import DataLoader

from helpers.doctor.pickling import start_method

WATCH_THREAD = "doctor-start-watch"  # named with the doctor's prefix: `reading.threads_left()` finds it


class StartTimedOut(Exception):
    """The workers had not all started within the wait; those started were killed."""


def started_iterator(loader: DataLoader, wait_s: float) -> Any:
    """iter(loader); under forkserver, StartTimedOut once `wait_s` has passed with workers still being started.

    StartTimedOut's second argument, when present, is the iterator, built as the wait ended: its workers were killed.
    """
    if loader.num_workers == 0 or start_method(loader) != "forkserver":
        return iter(loader)
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    building, fired = threading.Event(), threading.Event()
    building.set()

    def watch() -> None:
        if _ended(building, wait_s):
            return
        killed: set[int] = set()
        while building.is_set():  # until iter() raises: a start that ended just before the first kill is killed next
            if _kill_workers(me, before, killed):
                fired.set()
            if _ended(building, 0.02):
                return

    watcher = threading.Thread(target=watch, name=WATCH_THREAD, daemon=True)
    watcher.start()
    try:
        iterator = iter(loader)
    except Exception as exc:
        if fired.is_set():
            raise StartTimedOut(f"the workers had not all started after {wait_s:.1f} s") from exc
        raise
    finally:
        building.clear()
        watcher.join()
    if fired.is_set():  # a start ended just before its worker was killed, and the rest started: built, workers dead
        raise StartTimedOut(f"the workers had not all started after {wait_s:.1f} s", iterator)
    return iterator


def _ended(building: threading.Event, seconds: float) -> bool:
    """Wait up to `seconds` for iter() to return; True when it has."""
    deadline = time.perf_counter() + seconds
    while building.is_set():
        left = deadline - time.perf_counter()
        if left <= 0:
            return False
        time.sleep(min(left, 0.02))
    return True


def _kill_workers(me: psutil.Process, before: set[int], killed: set[int]) -> bool:
    """Kill the fork server's children not in `before` (nor killed already): workers started since; True if any."""
    found = []
    for server in me.children():
        try:
            if "multiprocessing.forkserver" in " ".join(server.cmdline()):
                found += [p for p in server.children() if p.pid not in before and p.pid not in killed]
        except psutil.Error:  # it ended meanwhile
            pass
    for process in found:
        killed.add(process.pid)
        try:
            process.kill()
        except psutil.Error:
            pass
    return bool(found)
