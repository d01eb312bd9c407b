"""Run a function on N DDP ranks from a notebook (lesson 05): spawn, free port, timeout, per-rank results, no orphans.

First the two tools to keep in your own DDP code (`free_port`, `rank_device`); then the notebook launcher `run`
(torchrun's job in a script), what it chooses and raises, and its internals.
"""
from __future__ import annotations

import datetime
import gc
import multiprocessing
import os
import pickle
import queue
import shutil
import socket
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from helpers import start_method
from helpers._validate import as_int, short

BACKENDS = ("gloo", "nccl")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it) (lesson 05)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def rank_device() -> torch.device:
    """Inside a rank: its GPU under nccl (cuda:LOCAL_RANK), else the CPU (lesson 05)."""
    import torch.distributed as dist

    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return torch.device("cpu")


@dataclass(frozen=True)
class Launch:
    """What helpers.ddp.run chose: backend, world size and why (lesson 05)."""

    backend: str
    world_size: int
    reason: str

    def __str__(self) -> str:
        return f"{self.world_size} ranks on {self.backend}: {self.reason}"


def choose(world_size: int | None = None, backend: str | None = None) -> Launch:
    """nccl with one rank per GPU when there are 2+ GPUs (enough for world_size), else gloo on CPU; world size defaults to the GPU count, at least 2 (lesson 05)."""
    import torch.distributed as dist

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if world_size is not None:
        world_size = as_int("world_size", world_size, minimum=1)
    if backend is not None and backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS} or None, got {short(backend)}")
    nccl_ok = dist.is_available() and dist.is_nccl_available()
    if backend is None:
        size = world_size if world_size is not None else max(gpus, 2)  # one rank teaches nothing about ranks
        if gpus >= size and nccl_ok:
            return Launch("nccl", size, f"{gpus} CUDA GPU(s) here, one rank per GPU")
        why = "no CUDA GPU here" if gpus == 0 else f"{gpus} GPU(s) for {size} ranks" if gpus < size else "no nccl in this torch build"
        return Launch("gloo", size, f"{why}, so CPU processes talk over gloo")
    size = world_size if world_size is not None else max(gpus if backend == "nccl" else 0, 2)
    if backend == "nccl":
        if not nccl_ok:
            raise RuntimeError("backend='nccl' needs a torch build with NCCL; this one has none (use 'gloo' on CPU)")
        if gpus < size:
            raise RuntimeError(f"backend='nccl' runs one rank per GPU: {size} ranks need {size} GPUs, this machine has {gpus}")
    return Launch(backend, size, "asked for")


class RankFailed(RuntimeError):
    """The first rank to fail, named with its traceback; ranks that failed after it are listed by their last line (lesson 05)."""

    def __init__(self, rank: int, remote_traceback: str, later: dict[int, str] | None = None) -> None:
        self.rank = rank
        self.remote_traceback = remote_traceback
        self.later = dict(later or {})
        after = "".join(f"\nthen rank {r} failed too: {text.strip().splitlines()[-1]}" for r, text in self.later.items())
        super().__init__(f"rank {rank} failed first:\n{remote_traceback.rstrip()}{after}")


class RanksTimedOut(TimeoutError):
    """Some ranks did not finish within the run's timeout and were stopped (lesson 05)."""


def run(fn: Callable[..., Any], *args: Any, kwargs: dict[str, Any] | None = None, world_size: int | None = None,
        backend: str | None = None, timeout_s: float = 120.0, pg_timeout_s: float = 60.0, grace_s: float = 15.0) -> list[Any]:
    """Run importable `fn(*args, **kwargs)` on each rank (spawned) in one process group; return the values by rank, or raise naming the first failing rank (lesson 05).

    timeout_s bounds the whole run (then every rank is killed); pg_timeout_s is the process group's own timeout
    (`init_process_group(timeout=...)`): how long a collective waits for the other ranks before it raises.
    The ranks' temporary files (tempfile, torch's compile cache) go into one folder that is removed when run returns.
    """
    if not callable(fn) or getattr(fn, "__module__", "__main__") == "__main__" or "<locals>" in getattr(fn, "__qualname__", "<locals>"):
        raise TypeError(f"fn must be a module-level function importable by spawned processes (not one defined in the notebook), got {short(fn)}")
    for name, value in (("timeout_s", timeout_s), ("pg_timeout_s", pg_timeout_s), ("grace_s", grace_s)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"{name} must be a positive number of seconds, got {short(value)}")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise TypeError(f"kwargs must be a dict of keyword arguments for fn, got {short(kwargs)}")
    launch = choose(world_size, backend)
    context = multiprocessing.get_context("spawn")
    tracker_started_here = _tracker_running() is False
    results = context.Queue()
    port = free_port()
    scratch = tempfile.TemporaryDirectory(prefix="ddp-ranks-", ignore_cleanup_errors=True)
    processes = [context.Process(target=_rank_main, args=(rank, launch, port, float(pg_timeout_s), fn, args, kwargs or {}, results,
                                                          os.getpid(), scratch.name))
                 for rank in range(launch.world_size)]
    values: dict[int, Any] = {}
    failures: dict[int, str] = {}
    deadline = time.monotonic() + timeout_s
    try:
        for process in processes:
            process.start()
        while len(values) + len(failures) < launch.world_size:
            if failures:  # the others are likely stuck in a collective waiting for the failed rank
                deadline = min(deadline, time.monotonic() + grace_s)
            if time.monotonic() > deadline:
                break
            try:
                rank, ok, value = results.get(timeout=0.2)
            except queue.Empty:
                silent = [r for r, p in enumerate(processes) if p.exitcode not in (None, 0) and r not in values and r not in failures]
                for rank in silent:  # died without a word: a signal, the OOM killer, a crash in C++
                    failures[rank] = f"process exited with code {processes[rank].exitcode} before reporting (killed by a signal if negative)\n"
                continue
            (values if ok else failures)[rank] = value
    finally:
        for process in processes:  # ranks that reported leave by themselves within moments
            if process.pid is not None:
                process.join(timeout=max(0.0, min(5.0, deadline - time.monotonic())))
        _stop(processes)
        results.close()
        results.join_thread()
        scratch.cleanup()  # every rank has exited: nothing writes there any more
    # not while an exception (a KeyboardInterrupt) propagates: its traceback still holds the queue, registered
    del processes, results  # the queue's semaphores leave the resource tracker as the queue goes
    if tracker_started_here:
        _stop_tracker()
    if failures:
        first, *rest = failures  # in the order they arrived: the first is the cause, the rest usually its echo
        raise RankFailed(first, failures[first], {rank: failures[rank] for rank in rest})
    if len(values) < launch.world_size:
        pending = sorted(set(range(launch.world_size)) - set(values))
        raise RanksTimedOut(f"ranks {pending} did not finish within timeout_s={timeout_s:g} s and were stopped "
                            f"({len(values)} of {launch.world_size} returned)")
    return [values[rank] for rank in range(launch.world_size)]


def _rank_main(rank: int, launch: Launch, port: int, pg_timeout_s: float, fn: Callable[..., Any], args: tuple,
               kwargs: dict[str, Any], results: Any, launcher: int, scratch: str) -> None:
    """One rank: join the group, run fn, send (rank, ok, value or traceback), leave without the gloo exit crash."""
    import threading

    import torch.distributed as dist

    threading.Thread(target=_exit_with_parent, args=(launcher, scratch), daemon=True, name="course_parent_watch").start()
    # The rank's temporary files go into the run's scratch folder, which run() removes. Without this, DDP's first use
    # imports torch._dynamo, which creates torch's compile cache "torchinductor_<user>" in the system temp directory.
    os.environ["TMPDIR"] = scratch
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again

    # A spawned child inherits the parent's "spawn" as its default start method; a rank started by torchrun has the
    # platform's default (fork on Linux), or COURSE_START_METHOD's. Restore that: DataLoader workers spawned from a rank
    # re-import torch (seconds each) and sometimes aborted at interpreter exit here ("terminate called without an active exception").
    multiprocessing.set_start_method(start_method.default(), force=True)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
                      WORLD_SIZE=str(launch.world_size), LOCAL_WORLD_SIZE=str(launch.world_size))
    code = 0
    try:
        if launch.backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(launch.backend, rank=rank, world_size=launch.world_size,
                                timeout=datetime.timedelta(seconds=pg_timeout_s))
        value = fn(*args, **kwargs)
        pickle.dumps(value)  # an unpicklable result fails here, in the rank, with a traceback, not silently in the queue
        results.put((rank, True, value))
    except BaseException:  # noqa: BLE001 - every failure goes back to the notebook with its traceback
        code = 1
        results.put((rank, False, traceback.format_exc()))
    finally:
        # FACTS: a gloo process group torn down at interpreter exit crashed 10-25 % of runs (SIGABRT in
        # ProcessGroupGloo::runLoop). Free its objects, destroy it, flush the result, then leave at once.
        gc.collect()
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - already reported; the process is about to exit
                pass
        results.close()
        results.join_thread()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _tracker_running() -> bool | None:
    """Whether multiprocessing's resource tracker (started by the first spawn) runs; None where this Python hides it."""
    from multiprocessing import resource_tracker

    fd = getattr(getattr(resource_tracker, "_resource_tracker", None), "_fd", False)
    return None if fd is False else fd is not None


def _stop_tracker() -> None:
    """Stop the resource tracker a run started, once nothing is registered with it: it ignores SIGTERM, so a Jupyter
    kernel that still had it as a child was killed at shutdown, its exit-time clean-up skipped (lessons 05-09)."""
    import gc
    from multiprocessing import resource_tracker

    gc.collect()  # run the finalizers that unregister the queue's semaphores
    stop = getattr(getattr(resource_tracker, "_resource_tracker", None), "_stop", None)
    if callable(stop):
        stop()


def _exit_with_parent(launcher: int, scratch: str) -> None:
    """Leave at once if the launching process (the notebook's kernel) has died, so no rank outlives it; remove the run's scratch folder, which the dead launcher cannot."""
    while os.getppid() == launcher:  # once it dies, this process is re-parented and getppid() changes
        time.sleep(0.5)
    shutil.rmtree(scratch, ignore_errors=True)  # every rank tries; whichever comes first removes it
    os._exit(1)


def _stop(processes: Sequence[multiprocessing.process.BaseProcess]) -> None:
    """Kill every rank still alive and all of its descendants (DataLoader workers), and reap them."""
    import psutil

    victims = []
    for process in processes:
        if process.is_alive() and process.pid is not None:
            try:
                parent = psutil.Process(process.pid)
                victims += parent.children(recursive=True) + [parent]
            except psutil.NoSuchProcess:
                pass
    for victim in victims:
        try:
            victim.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(victims, timeout=10)
    for process in processes:
        if process.pid is not None:  # a process that never started (start() raised) cannot be joined
            process.join(timeout=10)
