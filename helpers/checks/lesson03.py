"""Lesson 03's self-checks: steady samples/s, the knee of a sweep, `__getitems__`, seeding workers."""
from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, get_worker_info

from helpers.checks.core import Answer, Case, Failed, StandInClock, Wrong, exercise
from helpers.workloads import InMemoryDataset, NumpyRngDataset


class _ClockedBatches:
    """A stand-in loader on a stand-in clock: batch k arrives seconds[k] after batch k-1 (the last entry repeats); counts what was drawn."""

    def __init__(self, clock: StandInClock, seconds: list[float], batch_size: int, total: int) -> None:
        self.clock, self.seconds, self.batch_size, self.total = clock, seconds, batch_size, total
        self.drawn = 0

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for index in range(self.total):
            self.clock.advance(self.seconds[min(index, len(self.seconds) - 1)])
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


def _steady_counts_warmup(loader: Any, warmup_batches: int, num_batches: int) -> float:
    iterator = iter(loader)
    samples = sum(len(next(iterator)[0]) for _ in range(warmup_batches))
    start = time.perf_counter()
    samples += sum(len(next(iterator)[0]) for _ in range(num_batches))
    return samples / (time.perf_counter() - start)


def _steady_clock_after_first_timed(loader: Any, warmup_batches: int, num_batches: int) -> float:
    samples = 0
    for index, batch in enumerate(loader):
        if index == warmup_batches:  # batch `index` has already arrived when the loop body runs
            start = time.perf_counter()
        if index >= warmup_batches:
            samples += len(batch[0])
        if index + 1 == warmup_batches + num_batches:
            break
    return samples / (time.perf_counter() - start)


def _steady_startup_timed_samples(loader: Any, warmup_batches: int, num_batches: int) -> float:
    start, samples = time.perf_counter(), 0
    for index, batch in enumerate(loader):
        if index >= warmup_batches:
            samples += len(batch[0])
        if index + 1 == warmup_batches + num_batches:
            break
    return samples / (time.perf_counter() - start)


def _steady_clock_after_first_timed_counted_after(loader: Any, warmup_batches: int, num_batches: int) -> float:
    samples = 0
    for index, batch in enumerate(loader):
        if index == warmup_batches:
            start = time.perf_counter()
        elif index > warmup_batches:
            samples += len(batch[0])
        if index + 1 == warmup_batches + num_batches:
            break
    return samples / (time.perf_counter() - start)


def _steady_monotonic(loader: Any, warmup_batches: int, num_batches: int) -> float:
    iterator = iter(loader)
    for _ in range(warmup_batches):
        next(iterator)
    start = time.monotonic()
    samples = sum(len(next(iterator)[0]) for _ in range(num_batches))
    return samples / max(time.monotonic() - start, 1e-9)


def _steady_seconds(loader: Any, warmup_batches: int, num_batches: int) -> float:
    iterator = iter(loader)
    for _ in range(warmup_batches):
        next(iterator)
    start = time.perf_counter()
    for _ in range(num_batches):
        next(iterator)
    return time.perf_counter() - start


@exercise("03.1", "steady_samples_per_s", right=steady_right, wrong=[
    Wrong(_steady_with_startup, "started the clock before the warm-up"),
    Wrong(_steady_whole_epoch, "drew 40 batches"),
    Wrong(lambda loader, w, n: int(steady_right(loader, w, n) > 0), "samples/s"),
    Wrong(_steady_counts_warmup, "counted the warm-up batches' samples"),
    Wrong(_steady_startup_timed_samples, "started the clock before the warm-up"),
    Wrong(_steady_clock_after_first_timed, "started the clock after the first timed batch"),
    Wrong(_steady_clock_after_first_timed_counted_after, "started the clock after the first timed batch"),
    Wrong(_steady_seconds, "looks like seconds"),
    Wrong(lambda loader, w, n: steady_right(loader, w, n) / 8, "batches per second"),  # the check's batches hold 8 samples
    Wrong(_steady_monotonic, "never read time.perf_counter()"),
])
def check_steady_samples_per_s(answer: Answer) -> str:
    """Exercise 03.1: samples/s of the timed batches after warm-up, with start-up (the first batch) left out."""
    name = answer.name
    warmup, timed, size = 2, 10, 8
    seconds = [0.3, 0.01, 0.04, 0.01]  # start-up, a warm-up batch, the first timed batch (slower), then 10 ms each
    clock = StandInClock()
    loader = _ClockedBatches(clock, seconds, size, total=40)
    call = (f"{name}(loader, warmup_batches={warmup}, num_batches={timed}) on a stand-in loader of batches of {size} "
            "(the first takes 300 ms to start up, the third 40 ms, every other 10 ms)")
    with clock.reading(answer.value), answer.calling(call):
        got = answer.value(loader, warmup, timed)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise Failed(f"{call} returned {got!r}; expected samples per second as a float")
    if clock.reads == 0:
        raise Failed(f"{call} never read time.perf_counter(): time the batches with time.perf_counter() (the check "
                     "replaces it with the stand-in loader's clock, so other clocks see no time pass)")
    if loader.drawn != warmup + timed:
        raise Failed(f"{call} drew {loader.drawn} batches; it should draw warmup_batches + num_batches = {warmup + timed} and stop")
    arrival = [seconds[min(k, len(seconds) - 1)] for k in range(warmup + timed)]
    timed_s, right = sum(arrival[warmup:]), timed * size / sum(arrival[warmup:])
    if math.isclose(got, right, rel_tol=1e-6):
        return f"{name} measured {got:.1f} samples/s, the stand-in loader's rate over the {timed} timed batches"
    early = ("started the clock before the warm-up: start it after the warm-up batches, so the first batch's 300 ms "
             "of start-up is left out")
    late = ("started the clock after the first timed batch had arrived: read the clock once the warm-up batches are "
            "drawn, before drawing the first timed one (in a for loop over the loader, the body runs after its batch arrived)")
    mistakes = [
        ((warmup + timed) * size / timed_s, "counted the warm-up batches' samples: count only the samples of the "
                                            "num_batches timed batches"),
        ((warmup + timed) * size / sum(arrival), early),
        (timed * size / sum(arrival), early),
        (timed * size / sum(arrival[warmup + 1:]), late),
        ((timed - 1) * size / sum(arrival[warmup + 1:]), late),
        (timed / timed_s, "counted batches per second: count samples, len(batch[0]) per batch"),
    ]
    for value, mistake in mistakes:
        if math.isclose(got, value, rel_tol=1e-6):
            raise Failed(f"{call} returned {got:.1f}, expected {right:.1f} samples/s: it {mistake}")
    if got < 1:
        raise Failed(f"{call} returned {got:.4g}; that looks like seconds (the timed batches take {timed_s:.2f} s). "
                     f"Return samples per second: the timed batches' samples / their seconds = {right:.1f}")
    raise Failed(f"{call} returned {got:.1f} samples/s; expected {right:.1f}: the {timed} timed batches (after the "
                 f"{warmup} warm-up ones) hold {timed * size} samples and take {timed_s * 1000:.0f} ms. Start the clock after "
                 "the warm-up batches, count only the timed batches' samples, and read the clock after the last one")


KNEE_CASES: tuple[Case, ...] = (
    Case(([0, 1, 2, 4, 8], [100.0, 190.0, 370.0, 380.0, 375.0]), 2, "2 workers already reach 97 % of the best (380): more buy nothing"),
    Case(([0, 2, 4, 8, 16], [50.0, 100.0, 200.0, 390.0, 400.0]), 8, "8 workers reach 97.5 % of the best; 4 only 50 %"),
    Case(([0, 1], [100.0, 100.0]), 0, "when no value beats the first by more than the tolerance, the smallest value is the knee"),
    Case(([0, 1, 2, 4], [100.0, 190.0, 370.0, 380.0], 0.02), 4, "with tolerance=0.02 only 4 workers are within 2 % of the best: use the tolerance argument"),
    Case(([0, 1, 2, 4], [100.0, 105.0, 300.0, 310.0]), 2, "a plateau (100 -> 105) comes before the jump to 300: judge every "
         "value against the best (310), not each step against the one before"),
    Case(([0, 1, 2, 4], [100.0, 300.0, 400.0, 200.0]), 2, "the best (400) need not be the last value: compare with "
         "max(samples_per_s), and 300 is below 90 % of 400"),
    Case(([0, 1, 2], [100.0, 200.0]), ValueError, "values and samples_per_s must have the same length"),
)


def knee_right(values: list[int], rates: list[float], tolerance: float = 0.1) -> int:
    """Exercise 03.2's reference answer (the tests pass it to the check)."""
    if len(values) != len(rates):
        raise ValueError(f"values and samples_per_s must have the same length, got {len(values)} and {len(rates)}")
    return min(v for v, r in zip(values, rates) if r >= (1 - tolerance) * max(rates))


def _knee_first_small_gain(values: list[int], rates: list[float], tolerance: float = 0.1) -> int:
    if len(values) != len(rates):
        raise ValueError(f"values and samples_per_s must have the same length, got {len(values)} and {len(rates)}")
    for index in range(1, len(rates)):
        if rates[index] < (1 + tolerance) * rates[index - 1]:
            return values[index - 1]
    return values[-1]


@exercise("03.2", "knee", right=knee_right, wrong=[
    Wrong(lambda values, rates, tolerance=0.1: values[int(np.argmax(rates))] if len(values) == len(rates) else knee_right(values, rates),
          "returned 4"),  # the best, not the knee
    Wrong(lambda values, rates, tolerance=0.1: values[-1] if len(values) == len(rates) else knee_right(values, rates), "returned 8"),
    Wrong(lambda values, rates, tolerance=0.1: min(v for v, r in zip(values, rates) if r >= (1 - tolerance) * max(rates)),
          "expected ValueError"),
    Wrong(lambda values, rates, tolerance=0.1: knee_right(values, rates, 0.1), "use the tolerance argument"),
    Wrong(_knee_first_small_gain, "returned 0, expected 2"),
    Wrong(lambda values, rates, tolerance=0.1: min(v for v, r in zip(values, rates) if r >= (1 - tolerance) * rates[-1])
          if len(values) == len(rates) else knee_right(values, rates), "returned 1, expected 2"),  # against the last value
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
        rows = torch.as_tensor(sorted(indices))
        return list(zip(self.features[rows], self.labels[rows]))


class _GetitemsOneAtATime(InMemoryDataset):
    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return [self[i] for i in indices]


class _GetitemsFeaturesOnly(InMemoryDataset):
    def __getitems__(self, indices: list[int]) -> list[torch.Tensor]:
        return [self.features[i] for i in indices]


@exercise("03.3", "MyBatchedDataset.__getitems__", takes_class=True, right=GetitemsRight, wrong=[
    Wrong(_GetitemsPreStacked, "one sample per index"),
    Wrong(_GetitemsSorted, "wrong rows"),
    Wrong(_GetitemsFeaturesOnly, "(features, label) pair"),
    Wrong(_GetitemsOneAtATime, "index the tensors once per batch"),
    Wrong(InMemoryDataset, "raised AttributeError"),
    Wrong("not a class", "expected a subclass of helpers.workloads.InMemoryDataset"),
])
def check_getitems(answer: Answer) -> str:
    """Exercise 03.3: a `__getitems__` that returns the batch's samples as a list (the documented contract), called once per batch."""
    name, dataset_class = answer.name, answer.value
    if not (isinstance(dataset_class, type) and issubclass(dataset_class, InMemoryDataset)):
        raise Failed(f"expected a subclass of helpers.workloads.InMemoryDataset, got {dataset_class!r}")
    one_at_a_time = []

    def counted_getitem(self: Any, index: int) -> Any:
        one_at_a_time.append(index)
        return dataset_class.__getitem__(self, index)

    # a subclass that counts __getitem__ calls: self[i] looks __getitem__ up on the class, not on the instance
    dataset = type(dataset_class.__name__, (dataset_class,), {"__getitem__": counted_getitem})(num_items=1000, seed=3)
    with answer.calling(f"{name}([5, 1, 2])"):
        direct = dataset.__getitems__([5, 1, 2])
    if one_at_a_time:
        raise Failed(f"{name}([5, 1, 2]) called __getitem__ {len(one_at_a_time)} times, one sample at a time, which is what "
                     "the DataLoader already does: index the tensors once per batch (self.features.index_select(0, rows), "
                     "self.labels.index_select(0, rows) with rows = torch.as_tensor(indices)) and pair up the rows")
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
