"""Held-out wrong answers to lesson 03's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.data import get_worker_info

from helpers import workloads


# ---- 03.1 steady_samples_per_s(loader, warmup_batches, num_batches)

def _reference_steady_samples_per_s(loader, warmup_batches: int, num_batches: int) -> float:
    """Skip warmup_batches untimed, time exactly num_batches, samples / s."""
    batches = iter(loader)
    for _ in range(warmup_batches):
        next(batches)
    samples = 0
    start = time.perf_counter()
    for _ in range(num_batches):
        samples += len(next(batches)[0])
    return samples / (time.perf_counter() - start)


def warmup_inside_the_clock(loader, warmup_batches: int, num_batches: int) -> float:
    """Starts the clock before the warm-up batches: worker start-up is timed."""
    batches = iter(loader)
    start = time.perf_counter()
    for _ in range(warmup_batches):
        next(batches)
    samples = 0
    for _ in range(num_batches):
        samples += len(next(batches)[0])
    return samples / (time.perf_counter() - start)


def batches_per_second(loader, warmup_batches: int, num_batches: int) -> float:
    """Returns batches per second, not samples per second."""
    batches = iter(loader)
    for _ in range(warmup_batches):
        next(batches)
    start = time.perf_counter()
    for _ in range(num_batches):
        next(batches)
    return num_batches / (time.perf_counter() - start)


def fetches_one_batch_too_many(loader, warmup_batches: int, num_batches: int) -> float:
    """enumerate + break after fetching: draws (and times) one batch beyond num_batches."""
    batches = iter(loader)
    for _ in range(warmup_batches):
        next(batches)
    samples = 0
    start = time.perf_counter()
    for i, batch in enumerate(batches):
        if i == num_batches:
            break
        samples += len(batch[0])
    return samples / (time.perf_counter() - start)


def assumes_full_batches(loader, warmup_batches: int, num_batches: int) -> float:
    """num_batches x loader.batch_size samples: wrong when a batch is partial."""
    batches = iter(loader)
    for _ in range(warmup_batches):
        next(batches)
    start = time.perf_counter()
    for _ in range(num_batches):
        next(batches)
    return num_batches * loader.batch_size / (time.perf_counter() - start)


def clock_starts_after_first_timed_batch(loader, warmup_batches: int, num_batches: int) -> float:
    """Starts the clock when the first timed batch arrives: counts its samples without timing its fetch."""
    samples, start = 0, None
    for i, batch in enumerate(loader):
        if i < warmup_batches:
            continue
        if start is None:
            start = time.perf_counter()
        samples += len(batch[0])
        if i == warmup_batches + num_batches - 1:
            break
    return samples / (time.perf_counter() - start)


# ---- 03.2 knee(values, samples_per_s, tolerance=0.1)

def _reference_knee(values, samples_per_s, tolerance: float = 0.1) -> int:
    """Smallest value whose rate is at least (1 - tolerance) x the best."""
    if len(values) != len(samples_per_s):
        raise ValueError(f"values and samples_per_s differ in length: {len(values)} and {len(samples_per_s)}")
    best = max(samples_per_s)
    return min(v for v, s in zip(values, samples_per_s) if s >= (1 - tolerance) * best)


def best_value(values, samples_per_s, tolerance: float = 0.1) -> int:
    """Returns the value with the highest samples/s, not the smallest one near it."""
    if len(values) != len(samples_per_s):
        raise ValueError(f"values and samples_per_s differ in length: {len(values)} and {len(samples_per_s)}")
    return values[int(np.argmax(samples_per_s))]


def first_in_list_order(values, samples_per_s, tolerance: float = 0.1) -> int:
    """First qualifying value in the given order: not the smallest when values are unsorted."""
    if len(values) != len(samples_per_s):
        raise ValueError(f"values and samples_per_s differ in length: {len(values)} and {len(samples_per_s)}")
    best = max(samples_per_s)
    for v, s in zip(values, samples_per_s):
        if s >= (1 - tolerance) * best:
            return v


def strictly_above_threshold(values, samples_per_s, tolerance: float = 0.1) -> int:
    """'>' instead of '>=': a value exactly at (1 - tolerance) of the best is skipped."""
    if len(values) != len(samples_per_s):
        raise ValueError(f"values and samples_per_s differ in length: {len(values)} and {len(samples_per_s)}")
    best = max(samples_per_s)
    return min(v for v, s in zip(values, samples_per_s) if s > (1 - tolerance) * best)


def diminishing_returns(values, samples_per_s, tolerance: float = 0.1) -> int:
    """Stops at the first step that gains under 10 % over the previous value, not near the best."""
    if len(values) != len(samples_per_s):
        raise ValueError(f"values and samples_per_s differ in length: {len(values)} and {len(samples_per_s)}")
    pairs = sorted(zip(values, samples_per_s))
    for (v, s), (_, s_next) in zip(pairs, pairs[1:]):
        if s_next < (1 + tolerance) * s:
            return v
    return pairs[-1][0]


def tolerance_hard_coded(values, samples_per_s, tolerance: float = 0.1) -> int:
    """Ignores the tolerance argument: always 10 %."""
    if len(values) != len(samples_per_s):
        raise ValueError(f"values and samples_per_s differ in length: {len(values)} and {len(samples_per_s)}")
    best = max(samples_per_s)
    return min(v for v, s in zip(values, samples_per_s) if s >= 0.9 * best)


def no_length_check(values, samples_per_s, tolerance: float = 0.1) -> int:
    """zip silently drops the extra entries instead of raising ValueError."""
    pairs = list(zip(values, samples_per_s))
    best = max(s for _, s in pairs)
    return min(v for v, s in pairs if s >= (1 - tolerance) * best)


def returns_the_position(values, samples_per_s, tolerance: float = 0.1) -> int:
    """Returns the index of the knee in the sweep, not its num_workers value."""
    if len(values) != len(samples_per_s):
        raise ValueError(f"values and samples_per_s differ in length: {len(values)} and {len(samples_per_s)}")
    knee_value = _reference_knee(values, samples_per_s, tolerance)
    return list(values).index(knee_value)


# ---- 03.3 MyBatchedDataset.__getitems__

class _ReferenceBatchedDataset(workloads.InMemoryDataset):
    """One index_select per tensor, a list of (features, label) pairs in order."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices, dtype=torch.int64)
        features, labels = self.features.index_select(0, rows), self.labels.index_select(0, rows)
        return list(zip(features.unbind(0), labels.unbind(0)))


class ReturnsStackedBatch(workloads.InMemoryDataset):
    """Returns the batch already stacked (features, labels), not a list of samples."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices, dtype=torch.int64)
        return self.features.index_select(0, rows), self.labels.index_select(0, rows)


class SortsTheIndices(workloads.InMemoryDataset):
    """Sorts the indices first (for locality): samples come back out of the requested order."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(sorted(indices), dtype=torch.int64)
        features, labels = self.features.index_select(0, rows), self.labels.index_select(0, rows)
        return list(zip(features.unbind(0), labels.unbind(0)))


class LoopsOverGetitem(workloads.InMemoryDataset):
    """Calls __getitem__ per index: a list of samples, but no batched indexing at all."""

    def __getitems__(self, indices):
        return [self[index] for index in indices]


class ReturnsZipObject(workloads.InMemoryDataset):
    """Returns the zip iterator itself, not a list: collate cannot index it."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices, dtype=torch.int64)
        return zip(self.features.index_select(0, rows).unbind(0), self.labels.index_select(0, rows).unbind(0))


class ListOfTwoTensors(workloads.InMemoryDataset):
    """Returns [features, labels], a list of two stacked tensors, not one sample per index."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices, dtype=torch.int64)
        return [self.features.index_select(0, rows), self.labels.index_select(0, rows)]


# ---- 03.4 seed_numpy_worker(worker_id)

def _reference_seed_numpy_worker(worker_id: int) -> None:
    """The worker's dataset gets a generator seeded from the worker's torch seed."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def seeds_from_worker_id(worker_id: int) -> None:
    """Seeds from worker_id alone: workers differ, but every epoch and run repeat the same draws."""
    get_worker_info().dataset.rng = np.random.default_rng(worker_id)


def seeds_global_numpy(worker_id: int) -> None:
    """np.random.seed: seeds numpy's global state, not the dataset's own generator."""
    np.random.seed(get_worker_info().seed % 2**32)


def seeds_torch(worker_id: int) -> None:
    """torch.manual_seed: the dataset draws from numpy, which it leaves alone."""
    torch.manual_seed(get_worker_info().seed)


def constant_seed(worker_id: int) -> None:
    """A fixed seed: every worker gets the same fresh generator, draws still identical."""
    get_worker_info().dataset.rng = np.random.default_rng(42)


def local_generator_only(worker_id: int) -> None:
    """Makes the seeded generator in a local variable and never puts it on the dataset."""
    info = get_worker_info()
    rng = np.random.default_rng(info.seed)  # noqa: F841 - the mistake: never stored
    return None


HELDOUT = {
    "03.1": [warmup_inside_the_clock, batches_per_second, fetches_one_batch_too_many, assumes_full_batches,
             clock_starts_after_first_timed_batch],
    "03.2": [best_value, first_in_list_order, strictly_above_threshold, diminishing_returns, tolerance_hard_coded,
             no_length_check, returns_the_position],
    "03.3": [ReturnsStackedBatch, SortsTheIndices, LoopsOverGetitem, ReturnsZipObject, ListOfTwoTensors],
    "03.4": [seeds_from_worker_id, seeds_global_numpy, seeds_torch, constant_seed, local_generator_only],
}
