"""The doctor's rules whose fixes lesson 00 teaches: processes against usable cores, shared memory for batches in flight."""
from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Callable

import torch

from helpers.doctor.alternate import alternating_rates
from helpers.doctor.findings import Finding, fmt_bytes
from helpers.doctor.measure import processes_over_cores, ranks_on_node, shm_free_bytes
from helpers.doctor.pickling import PICKLE_FIX, SENT, culprit, main_has_no_file, pickle_probe, start_method
from helpers.doctor.registry import Observation, finding, rule
from helpers.env import usable_cpus, workers_per_rank
from helpers.rebuild import rebuild

SHM_WARN_SHARE = 0.5  # batches in flight take this share of free /dev/shm: warning; over all of it: error
THREADS_GAIN = 1.2    # one thread per worker must give this many times the samples/s in every interleaved round
TURN_S = 0.25         # each loader's turn in a round times at least this long, at the batch time first measured


@rule("workers-oversubscribed", severities=("warning", "info"), phase="static", planted="oversubscribed",
      taught_in=("00_setup_check", "6. How many processes will your loaders start?"),
      thresholds={"PROCESSES_OVER_CORES": (1, "processes (ranks x (1 + workers)) allowed over the usable cores")})
def workers_oversubscribed(obs: Observation) -> Finding | None:
    """More loader processes than cores: a count, not a measurement (the sweep measures)."""
    ranks, cores, workers = ranks_on_node(), usable_cpus(), obs.loader.num_workers
    processes = ranks * (1 + workers)
    advice = workers_per_rank(ranks, cores)
    obs.measured.update(usable_cores=cores, ranks_on_node=ranks, processes=processes, workers_per_rank_rule=advice)
    if processes_over_cores(workers) > 1:
        queued = workers * (obs.loader.prefetch_factor or 2)
        memory = f", and up to {queued} batches per rank wait in memory (prefetch_factor x workers)" if workers else ""
        return finding(
            "workers-oversubscribed", "warning",
            f"{ranks} rank(s) x (1 main process + {workers} workers) = {processes} processes, counted against {cores} usable "
            f"cores: {processes - cores} more (a count, not a measurement). What it can cost: workers whose items need CPU "
            f"share the cores, so the extra ones add no speed{memory}; workers that mostly wait on I/O hold no core while "
            "they wait",
            f"use at most {advice} worker(s) per rank here (all processes at most one more than the cores), or measure "
            "more with a sweep (lesson 03)",
            processes=processes, usable_cores=cores, num_workers=workers, ranks=ranks, advised=advice)
    if processes > cores:
        return finding(
            "workers-oversubscribed", "info",
            f"{processes} processes counted against {cores} usable cores: {processes - cores} over, within the course's rule "
            "of thumb (at most one over, on the premise that a rank's main process spends part of each step waiting for batches)",
            "no change needed unless the sweep or the data-wait share says otherwise (when your step keeps the CPU busy the "
            "whole time, as CPU training does, measure one worker fewer)",
            processes=processes, usable_cores=cores, num_workers=workers, ranks=ranks, advised=advice)
    return None


@rule("shm-too-small", severities=("error", "warning"), phase="pass", planted="shm_too_small",
      taught_in=("00_setup_check", "3. Where worker batches go: `/dev/shm`"),
      thresholds={"SHM_WARN_SHARE": (SHM_WARN_SHARE, "share of free /dev/shm the batches in flight may take")})
def shm_too_small(obs: Observation) -> Finding | None:
    """Batches in flight (size x prefetch_factor x workers) against free /dev/shm."""
    workers = obs.loader.num_workers
    if workers == 0 or not obs.batch_bytes:
        return None
    free = shm_free_bytes()
    if free is None:
        obs.skipped["shm-too-small"] = "no /dev/shm on this system"
        return None
    prefetch = obs.loader.prefetch_factor or 2
    in_flight = obs.batch_bytes * prefetch * workers
    obs.measured.update(shm_free_bytes=free, batch_bytes=obs.batch_bytes, bytes_in_flight=in_flight)
    if in_flight <= SHM_WARN_SHARE * free:
        return None
    return finding(
        "shm-too-small", "error" if in_flight > free else "warning",
        f"{fmt_bytes(obs.batch_bytes)} per batch x prefetch_factor {prefetch} x {workers} workers = {fmt_bytes(in_flight)} "
        f"in shared memory, against {fmt_bytes(free)} free in /dev/shm",
        "give /dev/shm more room (Docker: --shm-size=8g or --ipc=host), or lower batch_size, prefetch_factor or num_workers",
        batch_bytes=obs.batch_bytes, bytes_in_flight=in_flight, shm_free_bytes=free)


class OneThread:
    """A worker_init_fn: the loader's own, then this worker's BLAS pools, torch (with its OpenMP pool) and OpenCV on one thread each."""

    def __init__(self, inner: Callable[[int], None] | None) -> None:
        self.inner = inner

    def __call__(self, worker_id: int) -> None:
        from threadpoolctl import threadpool_limits  # the BLAS pools loaded in this worker

        if self.inner is not None:
            self.inner(worker_id)
        # BLAS only: limiting torch's libgomp through threadpoolctl after the loader's worker_init_fn had raised torch's
        # threads aborted a spawned worker at exit ("terminate called without an active exception") in 4 of 60 loaders
        # beside a busy loop, 0 of 40 like this; torch.set_num_threads(1) limits that OpenMP pool itself.
        threadpool_limits(1, user_api="blas")
        torch.set_num_threads(1)
        if "cv2" in sys.modules:
            sys.modules["cv2"].setNumThreads(1)


def _oversubscribed(obs: Observation) -> bool:
    workers, most = obs.loader.num_workers, max(obs.worker_threads, default=1)
    return workers > 0 and most > 1 and ranks_on_node() * workers * most > usable_cpus()


@rule("threads-oversubscribed", severities=("warning",), phase="measure", budget=1.5, planted="threads", applies=_oversubscribed,
      taught_in=("00_setup_check", "6. How many processes will your loaders start?"),
      thresholds={"THREADS_GAIN": (THREADS_GAIN, "samples/s with one thread per worker over as given, in every interleaved round")})
def threads_oversubscribed(obs: Observation) -> Finding | None:
    """Workers running several threads each, more in all than the cores, measured against the same loader with one thread per worker."""
    if not _oversubscribed(obs):
        return None
    workers, most, cores, ranks = obs.loader.num_workers, max(obs.worker_threads), usable_cpus(), ranks_on_node()
    had = obs.slot_left()
    per_turn = min(200, max(2 * workers, math.ceil(TURN_S / max(obs.steady_batch_s, 1e-4))))  # turns long enough to time
    round_s = 2 * (per_turn + workers * (obs.loader.prefetch_factor or 2)) * max(obs.steady_batch_s, 1e-4)
    need = 2 * round_s + 2 * obs.first_batch_s
    if obs.borrow(need):  # the two rounds it needs, from the later rules' share when this rule's own is short of them
        had = obs.slot_left()
    timeout = max(1.0, obs.slot_left())
    pair = [rebuild(obs.loader, persistent_workers=True, timeout=timeout),
            rebuild(obs.loader, persistent_workers=True, timeout=timeout, worker_init_fn=OneThread(obs.loader.worker_init_fn))]
    rounds = alternating_rates(pair, time.perf_counter() + obs.slot_left(), batches_per_turn=per_turn, min_turn_s=TURN_S)
    ratios = [limited / given for given, limited in rounds if given > 0]
    if len(ratios) < 2:
        obs.skipped["threads-oversubscribed"] = (
            f"{workers} workers ran up to {most} working threads each on {cores} cores, but the comparison with one thread per "
            f"worker ran {len(ratios)} round(s) of the 2 it needs; " + obs.too_short(need, had))
        return None
    gain = statistics.median(ratios)
    obs.measured["one_thread_per_worker_gain"] = [round(r, 2) for r in ratios]
    # Every round, not only the median: beside busy programs a loader with no thread pools to limit measured
    # 1.46, 1.32 and 1.07 (a false alarm in CI); the planted fault's rounds measured 2.7 to 9.4.
    if min(ratios) < THREADS_GAIN:
        return None
    return finding(
        "threads-oversubscribed", "warning",
        f"{ranks} rank(s) x {workers} workers ran up to {most} threads computing side by side each ({ranks * workers * most} on {cores} "
        "usable cores); limited to one thread "
        f"per worker, the loader gave {gain:.2f}x the samples/s (median of {len(ratios)} interleaved rounds)",
        "limit each worker to one thread in worker_init_fn: threadpoolctl.threadpool_limits(1, user_api='blas') for numpy's BLAS, "
        "cv2.setNumThreads(1) for OpenCV (or OPENBLAS_NUM_THREADS=1 and OPENCV_FOR_THREADS_NUM=1 before the program "
        "starts); DataLoader already sets torch's own threads to 1 in each worker, unless your worker_init_fn raises them",
        ranks=ranks, workers=workers, threads_per_worker=most, usable_cores=cores, gain=gain, rounds=len(ratios))


@rule("not-picklable", severities=("error", "warning", "info"), phase="static", planted="not_picklable",
      taught_in=("00_setup_check", "4. The start method, and why worker code lives in a module"))
def not_picklable(obs: Observation) -> Finding | None:
    """What the workers are sent, pickled as spawn and forkserver send it: the first part that fails, by its path."""
    loader = obs.loader
    if loader.num_workers == 0:
        return None
    method = start_method(loader)
    parts = {name: getattr(loader, name) for name in SENT}
    probes = {name: pickle_probe(part) for name, part in parts.items()}
    failed = next((name for name, p in probes.items() if p.error is not None), None)
    obs.measured["start_method"] = method
    if failed is None:  # what each spawned worker unpickles: numpy arrays by value, tensors left out (a handle to shared memory)
        obs.measured["pickled_per_worker_bytes"] = sum(p.nbytes for p in probes.values())
    later = "fails" if method in ("spawn", "forkserver") else ("would fail under forkserver (Linux's default from Python "
                                                             "3.14) and spawn (macOS, Windows); it works under fork, used now")
    severity = "error" if method in ("spawn", "forkserver") else "warning"
    if failed is not None:
        path, part, error = culprit(f"loader.{failed}", parts[failed]) or (f"loader.{failed}", parts[failed], probes[failed].error)
        return finding(
            "not-picklable", severity,
            f"{path} ({type(part).__name__}) cannot be pickled: {type(error).__name__}: {error}. Each worker is sent the "
            f"{failed} pickled when it starts under spawn or forkserver, so starting the workers {later}",
            PICKLE_FIX,
            path=path, type=type(part).__name__, error=f"{type(error).__name__}: {error}", start_method=method)
    from_main = sorted({name for p in probes.values() for name in p.from_main})
    if from_main and main_has_no_file():  # the course's own notebooks do this under fork: info there, an error where it fails
        return finding(
            "not-picklable", "error" if severity == "error" else "info",
            f"the workers are sent {', '.join(from_main)}, defined in __main__, which here is a notebook or a REPL with no "
            "file: a worker started by spawn or forkserver has a __main__ of its own without them (its error: "
            f"\"AttributeError: Can't get attribute '{from_main[0].split('.')[0]}' on <module '__main__' (built-in)>\"), so "
            f"starting the workers {later}",
            "move the dataset's class and functions into a module (a .py file next to the notebook) and import them (lesson 00)",
            path="__main__", type="defined in __main__", error="", names=from_main, start_method=method)
    return None
