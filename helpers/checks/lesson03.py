"""Lesson 03's self-checks: steady samples/s, the knee of a sweep, `__getitems__`, seeding workers."""
from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, get_worker_info

from helpers.checks.core import Answer, Case, Failed, Wrong, exercise
from helpers.workloads import InMemoryDataset, NumpyRngDataset


class _TimedBatches:
    """A stand-in loader: the first batch after `first_s` (worker start-up), then one every `every_s`; counts what was drawn."""

    def __init__(self, first_s: float, every_s: float, batch_size: int, total: int) -> None:
        self.first_s, self.every_s, self.batch_size, self.total = first_s, every_s, batch_size, total
        self.drawn = 0

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for index in range(self.total):
            time.sleep(self.first_s if index == 0 else self.every_s)
            self.drawn += 1
            yield torch.zeros(self.batch_size, 3), torch.zeros(self.batch_size, dtype=torch.int64)


def steady_right(loader: Any, warmup_batches: int, num_batches: int) -> float:
    """Exercise 03.1's reference answer (the tests pass it to the check)."""
    iterator = iter(loader)
    for _ in range(warmup_batches):
        next(iterator)
    start = time.perf_counter()
    samples = sum(len(next(iterator)[0]) for _ in range(num_batches))
    return samples / (time.perf_counter() - start)


def _steady_with_startup(loader: Any, warmup_batches: int, num_batches: int) -> float:
    start, samples = time.perf_counter(), 0
    for index, batch in enumerate(loader):
        samples += len(batch[0])
        if index + 1 == warmup_batches + num_batches:
            break
    return samples / (time.perf_counter() - start)


def _steady_whole_epoch(loader: Any, warmup_batches: int, num_batches: int) -> float:
    start = time.perf_counter()
    return sum(len(batch[0]) for batch in loader) / (time.perf_counter() - start)


@exercise("03.1", "steady_samples_per_s", right=steady_right, wrong=[
    Wrong(_steady_with_startup, "Start the clock after the warm-up"),
    Wrong(_steady_whole_epoch, "drew 40 batches"),
    Wrong(lambda loader, w, n: int(steady_right(loader, w, n) > 0), "samples/s"),
])
def check_steady_samples_per_s(answer: Answer) -> str:
    """Exercise 03.1: samples/s after warm-up, with start-up (the first batch) left out."""
    name = answer.name
    loader = _TimedBatches(first_s=0.3, every_s=0.01, batch_size=8, total=40)
    call = f"{name}(loader whose first batch takes 300 ms and then one batch of 8 every 10 ms, warmup_batches=1, num_batches=10)"
    with answer.calling(call):
        got = answer.value(loader, 1, 10)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise Failed(f"{call} returned {got!r}; expected samples per second as a float")
    if loader.drawn != 11:
        raise Failed(f"{call} drew {loader.drawn} batches; it should draw warmup_batches + num_batches = 11 and stop")
    if got < 300:
        raise Failed(f"{call} returned {got:.0f} samples/s; the steady rate is about 800. "
                     "Start the clock after the warm-up batches: the first batch's 300 ms is start-up, not throughput")
    if got > 840:
        raise Failed(f"{call} returned {got:.0f} samples/s, faster than the loader can deliver (at most 800): "
                     "count only the samples of the timed batches (not the warm-up ones), over the time they took")
    return f"{name} measured {got:.0f} samples/s (the loader delivers at most 800 after start-up)"


KNEE_CASES: tuple[Case, ...] = (
    Case(([0, 1, 2, 4, 8], [100.0, 190.0, 370.0, 380.0, 375.0]), 2, "2 workers already reach 97 % of the best (380): more buy nothing"),
    Case(([0, 2, 4, 8, 16], [50.0, 100.0, 200.0, 390.0, 400.0]), 8, "8 workers reach 97.5 % of the best; 4 only 50 %"),
    Case(([0, 1], [100.0, 100.0]), 0, "when no value beats the first by more than the tolerance, the smallest value is the knee"),
    Case(([0, 1, 2, 4], [100.0, 190.0, 370.0, 380.0], 0.02), 4, "with tolerance=0.02 only 4 workers are within 2 % of the best: use the tolerance argument"),
    Case(([0, 1, 2], [100.0, 200.0]), ValueError, "values and samples_per_s must have the same length"),
)


def knee_right(values: list[int], rates: list[float], tolerance: float = 0.1) -> int:
    """Exercise 03.2's reference answer (the tests pass it to the check)."""
    if len(values) != len(rates):
        raise ValueError(f"values and samples_per_s must have the same length, got {len(values)} and {len(rates)}")
    return min(v for v, r in zip(values, rates) if r >= (1 - tolerance) * max(rates))


@exercise("03.2", "knee", right=knee_right, wrong=[
    Wrong(lambda values, rates, tolerance=0.1: values[int(np.argmax(rates))] if len(values) == len(rates) else knee_right(values, rates),
          "returned 4"),  # the best, not the knee
    Wrong(lambda values, rates, tolerance=0.1: values[-1] if len(values) == len(rates) else knee_right(values, rates), "returned 8"),
    Wrong(lambda values, rates, tolerance=0.1: min(v for v, r in zip(values, rates) if r >= (1 - tolerance) * max(rates)),
          "expected ValueError"),
    Wrong(lambda values, rates, tolerance=0.1: knee_right(values, rates, 0.1), "use the tolerance argument"),
])
def check_knee(answer: Answer) -> str:
    """Exercise 03.2: the smallest num_workers whose samples/s is within 10 % of the sweep's best."""
    return answer.cases(KNEE_CASES)


class GetitemsRight(InMemoryDataset):
    """Exercise 03.3's reference answer (the tests pass it to the check)."""

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        rows = torch.as_tensor(indices)
        return list(zip(self.features[rows], self.labels[rows]))


class _GetitemsPreStacked(InMemoryDataset):
    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        rows = torch.as_tensor(indices)
        return self.features[rows], self.labels[rows]


class _GetitemsSorted(InMemoryDataset):
    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [self[i] for i in sorted(indices)]


class _GetitemsFeaturesOnly(InMemoryDataset):
    def __getitems__(self, indices: list[int]) -> list[torch.Tensor]:
        return [self.features[i] for i in indices]


@exercise("03.3", "MyBatchedDataset.__getitems__", takes_class=True, right=GetitemsRight, wrong=[
    Wrong(_GetitemsPreStacked, "one sample per index"),
    Wrong(_GetitemsSorted, "wrong rows"),
    Wrong(_GetitemsFeaturesOnly, "(features, label) pair"),
    Wrong(InMemoryDataset, "raised AttributeError"),
    Wrong("not a class", "expected a subclass of helpers.workloads.InMemoryDataset"),
])
def check_getitems(answer: Answer) -> str:
    """Exercise 03.3: a `__getitems__` that returns the batch's samples as a list (the documented contract), called once per batch."""
    name, dataset_class = answer.name, answer.value
    if not (isinstance(dataset_class, type) and issubclass(dataset_class, InMemoryDataset)):
        raise Failed(f"expected a subclass of helpers.workloads.InMemoryDataset, got {dataset_class!r}")
    dataset = dataset_class(num_items=1000, seed=3)
    with answer.calling(f"{name}([5, 1, 2])"):
        direct = dataset.__getitems__([5, 1, 2])
    if not isinstance(direct, list) or len(direct) != 3:
        got = f"a {type(direct).__name__}" + (f" of {len(direct)} items" if hasattr(direct, "__len__") else "")
        raise Failed(f"{name}([5, 1, 2]) returned {got}; return a list with one sample per index, "
                     "[(features, label), ...]: the DataLoader's collate_fn stacks them (a pre-stacked batch is the variant, not the contract)")
    calls = []
    original = dataset.__getitems__
    dataset.__getitems__ = lambda indices: calls.append(list(indices)) or original(indices)
    loader = DataLoader(dataset, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    with answer.calling("iterating a DataLoader (default collate_fn) over it"):
        batches = list(loader)
    if [len(c) for c in calls[:2]] != [64, 64] or len(calls) != len(batches):
        raise Failed(f"the DataLoader called {name} {len(calls)} times for {len(batches)} batches; it should be once per batch of 64")
    first = batches[0]
    if not (isinstance(first, (tuple, list)) and len(first) == 2 and all(isinstance(t, torch.Tensor) for t in first)):
        raise Failed(f"the collated batch is {type(first).__name__}, not (features [64, 16], labels [64]): "
                     "each sample must be a (features, label) pair")
    rows = torch.tensor(calls[0])
    if not (torch.equal(first[0], dataset.features[rows]) and torch.equal(first[1], dataset.labels[rows])):
        raise Failed(f"{name} returned the wrong rows: sample k must be (features[indices[k]], labels[indices[k]]), in order")
    return f"{name} was called once per batch ({len(batches)} batches) and its samples collated to the right rows"


def seed_worker_right(worker_id: int) -> None:
    """Exercise 03.4's reference answer (the tests pass it to the check)."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def _seed_by_worker_id(worker_id: int) -> None:
    get_worker_info().dataset.rng = np.random.default_rng(worker_id)


def _seed_legacy_global(worker_id: int) -> None:
    np.random.seed(get_worker_info().seed % 2**32)


def _seed_from_entropy(worker_id: int) -> None:
    get_worker_info().dataset.rng = np.random.default_rng()


@exercise("03.4", "seed_numpy_worker", right=seed_worker_right, wrong=[
    Wrong(_seed_by_worker_id, "every epoch repeats"),
    Wrong(_seed_legacy_global, "np.random.seed does not touch it"),
    Wrong(_seed_from_entropy, "reproducible"),
])
def check_seed_worker(answer: Answer) -> str:
    """Exercise 03.4: a worker_init_fn that gives each worker's numpy generator its own, reproducible seed."""
    name = answer.name
    answer.probe(0)  # outside a worker: only a stub's NotImplementedError matters here
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check runs a function defined in the notebook in worker processes, which needs "
                     "the fork start method (Linux, macOS); on Windows use WSL2")

    def draws(seed: int) -> list[list[float]]:
        loader = DataLoader(NumpyRngDataset(num_items=16, seed=0), batch_size=4, num_workers=2, worker_init_fn=answer.value,
                            generator=torch.Generator().manual_seed(seed), multiprocessing_context="fork")
        batches = [batch.tolist() for batch in loader]
        return [sum(batches[worker::2], []) for worker in (0, 1)]

    try:
        first, again, other = draws(0), draws(0), draws(1)
    except Exception as exc:
        raise Failed(f"a DataLoader with worker_init_fn={name} raised {type(exc).__name__}: {str(exc)[:300]}") from exc
    if first[0] == first[1]:
        raise Failed("both workers drew the same numbers: replace the worker's copy of the dataset's generator, "
                     "info.dataset.rng, with one seeded from info.seed (np.random.seed does not touch it)")
    if first != again:
        raise Failed("two loaders with the same generator seed drew different numbers: seed from "
                     "get_worker_info().seed, not from the clock or os.urandom, so runs are reproducible")
    if first == other:
        raise Failed("loaders with different generator seeds drew the same numbers, so every epoch repeats its "
                     "'random' augmentations: seed from get_worker_info().seed, which changes with the base seed, not from worker_id alone")
    return f"{name}: workers draw different numbers, reproducibly, and a new base seed gives new draws"
