"""Measuring a DataLoader, the tools to keep in your own training code (lesson 03; helpers.loading re-exports them).

`benchmark_loader` (steady samples/s, the first batch apart) and `StepTimer` (each step split into data wait and compute).
"""
from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from helpers._validate import as_device as _as_device
from helpers._validate import as_int
from helpers.batches import leaves


@dataclass(frozen=True)
class LoaderBenchmark:
    """One benchmark run: steady-state samples/s after warm-up, and the first batch's latency apart (lesson 03)."""

    samples_per_s: float
    first_batch_s: float
    batch_times_s: tuple[float, ...]
    num_batches: int
    num_samples: int

    def __str__(self) -> str:
        return (
            f"{self.samples_per_s:,.0f} samples/s over {self.num_batches} batches ({self.num_samples} samples) "
            f"after warm-up; first batch after {self.first_batch_s * 1000:.0f} ms"
        )


def benchmark_loader(loader: Iterable[Any], num_batches: int | None = None, warmup_batches: int = 1) -> LoaderBenchmark:
    """Time one pass over `loader`: the first batch (worker start-up + fetch) apart, then num_batches after warmup_batches (lesson 03)."""
    if num_batches is not None:
        num_batches = as_int("num_batches", num_batches, minimum=1)
    warmup_batches = as_int("warmup_batches", warmup_batches, minimum=0)
    wanted = None if num_batches is None else warmup_batches + num_batches
    start = time.perf_counter()
    iterator = iter(loader)
    try:
        arrivals, samples = _drain(iterator, wanted)
    finally:
        del iterator  # a non-persistent multi-worker iterator shuts its workers down here
    received = len(arrivals)
    if received < (wanted or warmup_batches + 1):
        need = f"warmup_batches={warmup_batches} + " + (f"num_batches={num_batches}" if num_batches else "at least 1 timed batch")
        raise ValueError(f"loader yielded {received} batches, but {need} were asked for; lower them or give the loader more data")
    times = np.diff([start, *arrivals])[warmup_batches:]
    timed_samples = sum(samples[warmup_batches:])
    return LoaderBenchmark(
        samples_per_s=timed_samples / float(times.sum()),
        first_batch_s=arrivals[0] - start,
        batch_times_s=tuple(float(t) for t in times),
        num_batches=len(times),
        num_samples=timed_samples,
    )


def count_samples(batch: Any) -> int:
    """Samples in a batch: the length of its first tensor or array, searched through tuples, lists and dicts (lesson 03)."""
    found = next((leaf for leaf in leaves(batch) if isinstance(leaf, (torch.Tensor, np.ndarray))), None)
    if found is None:
        raise TypeError(f"cannot count samples in a batch of type {type(batch).__name__}: it holds no tensor or numpy array")
    return int(found.shape[0]) if found.ndim else 1


def _drain(iterator: Iterator[Any], wanted: int | None) -> tuple[list[float], list[int]]:
    """Arrival times (perf_counter) and sample counts of up to `wanted` batches (all when None)."""
    arrivals: list[float] = []
    samples: list[int] = []
    while wanted is None or len(arrivals) < wanted:
        try:
            batch = next(iterator)
        except StopIteration:
            break
        arrivals.append(time.perf_counter())
        samples.append(count_samples(batch))
    return arrivals, samples


def warmup_for(num_workers: int, prefetch_factor: int | None = None) -> int:
    """Batches to leave out before timing: the prefetch burst, prefetch_factor (2) x num_workers, or 1 without workers (lesson 03)."""
    num_workers = as_int("num_workers", num_workers, minimum=0)
    if num_workers == 0:
        return 1
    return (2 if prefetch_factor is None else as_int("prefetch_factor", prefetch_factor, minimum=1)) * num_workers


class StepTimer:
    """Splits each training step into waiting for data and computing: `for batch in timer.wrap(loader): ...` (lesson 03)."""

    def __init__(self, device: str | torch.device | None = None) -> None:
        self.device = _as_device("device", "cpu" if device is None else device)
        self.data_wait_s: list[float] = []
        self.compute_s: list[float] = []

    def _now(self) -> float:
        """perf_counter after the device's queued work has finished (CPU: nothing to wait for)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type != "cpu":
            torch.accelerator.synchronize(self.device)
        return time.perf_counter()

    def wrap(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Yield the batches; time from a step's end to the next batch is data wait, from the batch to the step's end compute."""
        step_end = self._now()
        for batch in batches:  # iter() is inside the first wait: worker start-up counts as data wait
            ready = time.perf_counter()
            yield batch
            done = self._now()
            self.data_wait_s.append(ready - step_end)
            self.compute_s.append(done - ready)
            step_end = done

    def data_fraction(self, skip_first: int = 1) -> float:
        """Share of step time spent waiting for data, leaving out the first `skip_first` steps (worker start-up)."""
        skip_first = as_int("skip_first", skip_first, minimum=0)
        if len(self.data_wait_s) <= skip_first:
            raise ValueError(f"skip_first={skip_first} leaves none of the {len(self.data_wait_s)} timed steps; run more steps")
        wait = sum(self.data_wait_s[skip_first:])
        return wait / (wait + sum(self.compute_s[skip_first:]))

    def __str__(self) -> str:
        steps = len(self.data_wait_s)
        if steps < 2:
            return f"StepTimer: {steps} step(s) timed; run at least 2 (the first is start-up)"
        wait, compute = sum(self.data_wait_s[1:]), sum(self.compute_s[1:])
        return (
            f"{steps - 1} steps after the first: waiting for data {wait:.3f} s ({self.data_fraction():.0%}), "
            f"computing {compute:.3f} s; first step waited {self.data_wait_s[0]:.3f} s"
        )
