"""The start-method X-ray: one loader under fork, forkserver and spawn, each in a fresh Python, measured side by side (lesson 09).

Each method's run starts the loader's workers with that method and reports the time to the first batch, the bytes
multiprocessing writes to start each worker (its preparation data and the Process with the DataLoader's arguments:
the dataset, collate_fn, worker_init_fn; torch's reductions included, so a tensor travels as a handle to shared
memory, a numpy array or a Python list by value), each worker's memory after the batches read, and the samples/s
after the first batch; where a method fails, its error as raised and, when pickling failed, the part that cannot be
pickled, by its path.
"""
from __future__ import annotations

import json
import math
import multiprocessing
import numbers
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from multiprocessing import reduction
from multiprocessing.process import BaseProcess
from typing import Any

import psutil
from torch.utils.data import DataLoader

from helpers._validate import short
from helpers.doctor.pickling import PICKLE_FIX, SENT, culprit
from helpers.doctor.spec import load

METHODS = ("fork", "forkserver", "spawn")
MIB = 1024 * 1024
ERROR_LINE = re.compile(r"^[A-Za-z_.]*(Error|Exception): ")  # the last line of a traceback
RESULT = "xray-result: "  # the child's last line of output starts with this, then its JSON


@dataclass
class MethodRun:
    """One start method's run of the loader, in a fresh Python (seconds, MiB; None where it was not measured)."""

    method: str
    ok: bool = False
    first_batch_s: float | None = None  # from iter(loader) to the first batch: starting the workers included
    sent_mib: float | None = None  # written to start each worker (0 under fork: the worker is a copy of this process)
    pickle_s: float | None = None  # seconds this process spent pickling that, per worker (each worker then unpickles it)
    worker_uss_mib: list[float] = field(default_factory=list)  # memory only that worker holds, after the batches read
    worker_pss_mib: list[float] = field(default_factory=list)  # its share of all it maps, shared pages split
    samples_per_s: float | None = None  # after the first batch
    batches: int = 0
    error: str = ""  # the first error, as raised (with a worker's own last line when it died)
    culprit: str = ""  # the part of what the workers are sent that cannot be pickled, by its path
    fix: str = ""

    def row(self) -> str:
        """One line of the table `x_ray` prints ("-" where a number was not measured)."""
        if not self.ok:
            said = " ".join(self.error.split())  # one line, whatever the error held
            return f"{self.method:<11} failed: {said}" + (f"; it is {self.culprit}" if self.culprit else "")
        memory = ", ".join(f"{u:.0f}/{p:.0f}" for u, p in zip(self.worker_uss_mib, self.worker_pss_mib)) or "-"

        def show(value: float | None, form: str, unit: str) -> str:
            return f"{value:{form}}{unit}" if value is not None else "-"

        sent = ("0" if self.sent_mib == 0 else show(self.sent_mib, ".2f", " MiB") if self.sent_mib is None or
                self.sent_mib >= 0.01 else f"{self.sent_mib * 1024:.1f} KiB")
        return (f"{self.method:<11} {show(self.first_batch_s, '.2f', ' s'):>10} {sent:>14} {show(self.pickle_s, '.2f', ' s'):>10} "
                f"{show(self.samples_per_s, ',.0f', ''):>12}   {memory}")


HEADER = (f"{'method':<11} {'1st batch':>10} {'sent/worker':>14} {'pickling':>10} {'samples/s':>12}   "
          "worker memory USS/PSS MiB")


def x_ray(spec: str, methods: tuple[str, ...] | list[str] | None = None, batches: int = 20,
          timeout_s: float = 120.0) -> list[MethodRun]:
    """Run the loader `spec` (module:function, imported from the current directory) under each start method (default: those of
    fork, forkserver and spawn this platform has), one fresh Python each, reading `batches` batches, `timeout_s` per method."""
    if methods is None:
        methods = [m for m in METHODS if m in multiprocessing.get_all_start_methods()]
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ValueError(f"spec must look like module:function, got {short(spec)}")
    if isinstance(methods, str) or not isinstance(methods, (list, tuple)):
        raise TypeError(f"methods must be a list of start methods, got {short(methods)}")
    unknown = [m for m in methods if m not in multiprocessing.get_all_start_methods()]
    if not methods or unknown:
        raise ValueError(f"methods must be start methods this platform has, {multiprocessing.get_all_start_methods()}, "
                         f"got {short(methods)}")
    if len(set(methods)) < len(methods):
        raise ValueError(f"methods must name each start method once, got {short(methods)}")
    if isinstance(batches, bool) or not isinstance(batches, numbers.Integral) or batches < 2:
        raise ValueError(f"batches must be an int of at least 2 (the first, then the steady rate), got {short(batches)}")
    if isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float)) or not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ValueError(f"timeout_s must be a positive number of seconds, got {short(timeout_s)}")
    if not callable(load(spec, "spec")):  # a module that cannot be imported, or no such function: said here, once
        raise ValueError(f"spec must name a function that returns a DataLoader, got {spec!r}, which is not callable")
    runs = []
    for method in methods:
        command = [sys.executable, "-m", "helpers.doctor.xray", spec, method, str(batches)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), _root(), os.environ.get("PYTHONPATH", "")])}
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                 start_new_session=True)  # its own process group: its workers and forkserver stop with it
        try:
            stdout, stderr = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _stop(child)
            runs.append(MethodRun(method, error=f"no result within {timeout_s:g} s (a hang, or raise timeout_s)"))
            continue
        except BaseException:  # Ctrl-C, a notebook's interrupt: the run's process group is ours to stop
            _stop(child)
            raise
        found = [line for line in stdout.splitlines() if line.startswith(RESULT)]
        if found:
            runs.append(MethodRun(**json.loads(found[-1][len(RESULT):])))
        else:
            last = (stderr.strip().splitlines() or ["(nothing on stderr)"])[-1]
            runs.append(MethodRun(method, error=f"the run's Python exited with status {child.returncode}: {last}"))
        said = [line for line in stderr.splitlines() if ERROR_LINE.match(line)]
        if not runs[-1].ok and said and said[-1] not in runs[-1].error:  # a worker's own error, printed before it died
            runs[-1].error += f" (a worker printed: {said[-1]})"
    return runs


def _stop(child: subprocess.Popen) -> None:
    """Kill a method's Python with its workers and forkserver (its process group), reap it, and wait (5 s at most) until
    no process of the group runs: SIGKILL is sent at once but takes effect later (CI saw a worker still running)."""
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    child.communicate()
    deadline = time.monotonic() + 5
    while _group_running(child.pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _group_running(group: int) -> bool:
    """Whether a process of process group `group` is alive (a zombie, dead and waiting to be reaped, is not)."""
    for process in psutil.process_iter(["status"]):
        try:
            if os.getpgid(process.pid) == group and process.info["status"] != psutil.STATUS_ZOMBIE:
                return True
        except OSError:
            continue
    return False


def _root() -> str:
    """The folder holding the helpers package, so a fresh Python imports the same one."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class _Written:
    """Counts what multiprocessing writes to start each worker (spawn and forkserver pickle it with reduction.dump)."""

    def __init__(self) -> None:
        self.bytes, self.seconds, self.starts = 0, 0.0, 0
        self.real = reduction.dump

    def __enter__(self) -> _Written:
        reduction.dump = self.dump
        return self

    def __exit__(self, *exc: object) -> None:
        reduction.dump = self.real

    def dump(self, obj: Any, file: Any, protocol: int | None = None) -> None:
        before, started = file.tell(), time.perf_counter()
        self.real(obj, file, protocol)
        self.bytes += file.tell() - before
        self.seconds += time.perf_counter() - started
        self.starts += isinstance(obj, BaseProcess)


def _error(exc: BaseException) -> str:
    """The error as raised: its first line and, when the message goes on (torch's "Caught ... in DataLoader worker
    process 0" ends with the worker's own error), its last line."""
    lines = [line for line in f"{type(exc).__name__}: {exc}".splitlines() if line.strip()] or [type(exc).__name__]
    return lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1].strip()}"


def _measure(spec: str, method: str, batches: int) -> MethodRun:
    """This Python's run of `spec`'s loader under `method` (the child's side of x_ray)."""
    from helpers.doctor.measure import count
    from helpers.doctor.reading import stop_workers
    from helpers.env import share_worker_temp_dir
    from helpers.rebuild import rebuild

    share_worker_temp_dir()
    run = MethodRun(method)
    loader = load(spec, "spec")()
    if not isinstance(loader, DataLoader):
        run.error = f"spec must name a function that returns a torch.utils.data.DataLoader, got {short(loader)}"
        return run
    if loader.num_workers == 0:
        run.error = "the loader has num_workers=0: no worker process is started, so the start method changes nothing"
        return run
    # persistent workers: still there to be read when the epoch ends within `batches` (the first epoch runs as without)
    loader = rebuild(loader, multiprocessing_context=multiprocessing.get_context(method), persistent_workers=True)
    with _Written() as written:
        try:
            started = time.perf_counter()
            iterator = iter(loader)
            next(iterator)
            run.first_batch_s = time.perf_counter() - started
            samples, steady = 0, time.perf_counter()
            run.batches = 1
            for batch in iterator:
                samples += count(batch)
                run.batches += 1
                if run.batches >= batches:
                    break
            spent = time.perf_counter() - steady
            run.samples_per_s = samples / spent if run.batches > 1 and spent > 0 else None
            for worker in iterator._workers:  # private: the worker processes, read before they exit
                info = psutil.Process(worker.pid).memory_full_info()
                run.worker_uss_mib.append(round(info.uss / MIB, 1))
                run.worker_pss_mib.append(round(getattr(info, "pss", info.uss) / MIB, 1))
        except StopIteration:
            run.error = "the loader gave no batch"
        except Exception as exc:  # noqa: BLE001 - the method's failure is the answer
            run.error = _error(exc)
        finally:
            stop_workers(loader)  # now, not at garbage collection
    if method == "fork":
        run.sent_mib, run.pickle_s = 0.0, 0.0
    elif written.starts:
        run.sent_mib, run.pickle_s = written.bytes / written.starts / MIB, written.seconds / written.starts
    if run.error and method != "fork":
        for name in SENT:  # a part that cannot be pickled: named by its path
            found = culprit(f"loader.{name}", getattr(loader, name))
            if found is not None:
                run.culprit, run.fix = f"{found[0]} ({type(found[1]).__name__})", PICKLE_FIX
                break
    run.ok = not run.error
    return run


def main(argv: list[str]) -> int:
    """The child: measure argv's (spec, method, batches) and print the result as one JSON line."""
    spec, method, batches = argv
    print(RESULT + json.dumps(asdict(_measure(spec, method, int(batches)))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
