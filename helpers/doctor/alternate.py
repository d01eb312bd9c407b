"""Loaders timed in turns on workers started once, the others paused meanwhile: the doctor's paired comparisons (lesson 07)."""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader

from helpers.doctor.measure import count, identities
from helpers.doctor.reading import stop_workers


def new_samples(batch: Any, seen: set[str], distinct: bool) -> int:
    """The batch's samples; with `distinct`, only those not in `seen` (by identity: a key, else a hash of the first
    tensor's row), which it then holds too."""
    ids = identities(batch) if distinct else []
    if not ids:  # nothing to tell samples apart by: every sample counts
        return count(batch)
    fresh = len(set(ids) - seen)
    seen.update(ids)
    return fresh


def alternating_rates(loaders: list[DataLoader], deadline: float, batches_per_turn: int | list[int], rounds: int = 3,
                      distinct: bool = False, min_turn_s: float = 0.0,
                      after_start: Callable[[float], float] | None = None) -> list[list[float]]:
    """Samples/s of each loader, per round, taking turns on workers started once; rounds alternate the order, until `deadline`.

    While one loader is timed, the others' workers are paused (SIGSTOP), so refilling their queues cannot take its
    cores; each turn first takes the batches its own workers queued, then times `batches_per_turn`. The loaders
    must have persistent workers (or none); on an error, a hang or the deadline, the rounds so far are returned.
    distinct: count only samples that loader had not delivered before (by identity): an IterableDataset that every
    worker reads in full delivers each sample once per worker, and only the first counts.
    min_turn_s: a turn goes on past its batches until it has timed this long, so a loader many times faster than the
    one its batch count was set from is not timed over a few milliseconds that one pause of the machine decides.
    after_start: given the seconds the workers took to start (to each loader's first batch; the deadline does not end
    the start then), returns the rounds' deadline.
    """
    per_turn = batches_per_turn if isinstance(batches_per_turn, list) else [batches_per_turn] * len(loaders)
    began = time.perf_counter()
    iterators = [iter(loader) for loader in loaders]  # under forkserver and spawn, iter() waits for each worker's start
    seen: list[set[str]] = [set() for _ in loaders]
    pids = [[w.pid for w in getattr(it, "_workers", [])] for it in iterators]  # private: each loader's worker processes
    results: list[list[float]] = []
    failed = False
    try:
        for iterator in iterators:
            if time.perf_counter() > deadline and after_start is None:
                return results
            next(iterator)  # the workers have started
        if after_start is not None:
            deadline = after_start(time.perf_counter() - began)
        turn_s = 0.0
        while len(results) < rounds and time.perf_counter() + 1.2 * turn_s * len(loaders) < deadline:
            started_round, rates = time.perf_counter(), [0.0] * len(loaders)
            order = list(range(len(loaders))) if len(results) % 2 == 0 else list(range(len(loaders)))[::-1]
            for i in order:
                if time.perf_counter() > deadline:
                    return results  # the round is not complete: it does not count
                _signal([p for j, group in enumerate(pids) if j != i for p in group], signal.SIGSTOP)
                _signal(pids[i], signal.SIGCONT)
                queued = (loaders[i].prefetch_factor or 2) * loaders[i].num_workers
                for _ in range(queued):  # batches its workers queued before the turn: not timed, but seen
                    before = iterators[i]
                    iterators[i], batch = _next(loaders[i], iterators[i])
                    if iterators[i] is not before:
                        seen[i].clear()
                    new_samples(batch, seen[i], distinct)
                started, samples, read = time.perf_counter(), 0, 0
                while read < per_turn[i] or time.perf_counter() - started < min_turn_s:
                    read += 1
                    if time.perf_counter() > deadline:
                        return results  # the round is not complete: it does not count
                    before = iterators[i]
                    iterators[i], batch = _next(loaders[i], iterators[i])
                    if iterators[i] is not before:
                        seen[i].clear()  # a new epoch: its samples count again
                    samples += new_samples(batch, seen[i], distinct)
                rates[i] = samples / (time.perf_counter() - started)
            turn_s = (time.perf_counter() - started_round) / len(loaders)
            results.append(rates)
    except Exception:  # noqa: BLE001 - an error or a timeout here: keep the rounds measured so far
        failed = True
    finally:
        _signal([p for group in pids for p in group], signal.SIGCONT)  # a paused worker would hold shutdown
        late = failed or time.perf_counter() > deadline  # a worker may be starting still: not waited for
        for loader in loaders:
            stop_workers(loader, at_once=late)
    return results


def _signal(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:  # a worker that already exited
            pass


def _next(loader: DataLoader, iterator: Any) -> tuple[Any, Any]:
    """The next batch, starting a new epoch on the same persistent workers when one ends."""
    try:
        return iterator, next(iterator)
    except StopIteration:
        iterator = iter(loader)
        return iterator, next(iterator)
