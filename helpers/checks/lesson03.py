"""Lesson 03's self-checks: steady samples/s, the knee of a sweep, seeding workers (03.3, `__getitems__`: lesson03_getitems.py)."""
from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, get_worker_info

from helpers.checks.core import Answer, Case, Failed, Mistake, StandInClock, Wrong, every_batch, exercise
from helpers.workloads import NumpyRngDataset


class _ClockedBatches:
    """A stand-in loader on a stand-in clock: batch k arrives seconds[k] after batch k-1 and holds sizes[k] samples (the
    last entries repeat); counts the batches drawn and the iterators started."""

    def __init__(self, clock: StandInClock, seconds: list[float], sizes: list[int], total: int) -> None:
        self.clock, self.seconds, self.sizes, self.total = clock, seconds, sizes, total
        self.batch_size = sizes[0]  # as a DataLoader has it: its last batch may hold fewer
        self.drawn = self.iterators = 0

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        self.iterators += 1
        for index in range(self.total):
            self.clock.advance(self.seconds[min(index, len(self.seconds) - 1)])
            self.drawn += 1
            size = self.sizes[min(index, len(self.sizes) - 1)]
            yield torch.zeros(size, 3), torch.zeros(size, dtype=torch.int64)


def steady_right(loader: Any, warmup_batches: int, num_batches: int) -> float:
    """Exercise 03.1's reference answer (the tests pass it to the check)."""
    iterator = iter(loader)
    for _ in range(warmup_batches):
        next(iterator)
    start = time.perf_counter()
    samples = sum(len(next(iterator)[0]) for _ in range(num_batches))
    return samples / (time.perf_counter() - start)


def _steady_loop(start: str, count_from: int) -> Callable[[Any, int, int], float]:
    """A for-loop answer reading the clock before the loop (start="before") or once batch `warmup` has arrived
    (start="after"), counting the samples of the batches from `warmup + count_from` on (the typical slips)."""
    def answer(loader: Any, warmup_batches: int, num_batches: int) -> float:
        began, samples = time.perf_counter() if start == "before" else None, 0
        for index, batch in enumerate(loader):
            if index == warmup_batches and began is None:  # batch `index` has already arrived when the body runs
                began = time.perf_counter()
            if index >= warmup_batches + count_from:
                samples += len(batch[0])
            if index + 1 == warmup_batches + num_batches:
                break
        return samples / (time.perf_counter() - began)
    return answer


def _steady_whole_epoch(loader: Any, warmup_batches: int, num_batches: int) -> float:
    start = time.perf_counter()
    return sum(len(batch[0]) for batch in loader) / (time.perf_counter() - start)


def _steady_counts_warmup(loader: Any, warmup_batches: int, num_batches: int) -> float:
    iterator = iter(loader)
    samples = sum(len(next(iterator)[0]) for _ in range(warmup_batches))
    start = time.perf_counter()
    samples += sum(len(next(iterator)[0]) for _ in range(num_batches))
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
    Wrong(_steady_loop("before", -10**6), "started the clock before the warm-up"),  # and counts the warm-up
    Wrong(_steady_whole_epoch, "drew 40 batches"),
    Wrong(lambda loader, w, n: int(steady_right(loader, w, n) > 0), "samples/s"),
    Wrong(_steady_counts_warmup, "counted the warm-up batches' samples"),
    Wrong(_steady_loop("before", 0), "started the clock before the warm-up"),
    Wrong(_steady_loop("after", 0), "started the clock after the first timed batch"),
    Wrong(_steady_loop("after", 1), "started the clock after the first timed batch"),
    Wrong(_steady_seconds, "looks like seconds"),
    Wrong(lambda loader, w, n: steady_right(loader, w, n) / 8, "batches per second"),  # the check's batches hold 8 samples
    Wrong(_steady_monotonic, "never read time.perf_counter()"),
])
def check_steady_samples_per_s(answer: Answer) -> str:
    """Exercise 03.1: samples/s of the timed batches after warm-up, with start-up (the first batch) left out."""
    name = answer.name
    warmup, timed = 2, 10
    seconds = [0.3, 0.01, 0.04, 0.01]  # start-up, a warm-up batch, the first timed batch (slower), then 10 ms each
    arrival = [seconds[min(k, len(seconds) - 1)] for k in range(warmup + timed)]
    timed_s = sum(arrival[warmup:])
    # a long loader of full batches of 8, then one whose epoch ends after the timed batches, the last of them partial
    for sizes, total, story in (([8], 40, "batches of 8"), ([8] * 11 + [3], 12, "12 batches of 8, the last one of 3")):
        clock = StandInClock()
        loader = _ClockedBatches(clock, seconds, sizes, total)
        call = (f"{name}(loader, warmup_batches={warmup}, num_batches={timed}) on a stand-in loader of {story} (the "
                "first takes 300 ms to start up, the third 40 ms, every other 10 ms)")
        with clock.reading(answer.value), answer.calling(call):
            got = answer.value(loader, warmup, timed)
        if isinstance(got, bool) or not isinstance(got, (int, float, np.integer, np.floating)):
            raise Failed(f"{call} returned {got!r}; expected samples per second as a float")
        if clock.reads == 0:
            raise Failed(f"{call} never read time.perf_counter(): time the batches with time.perf_counter() (the check "
                         "replaces it with the stand-in loader's clock, so other clocks see no time pass)")
        if loader.iterators > 1:
            raise Failed(f"{call} called iter(loader) {loader.iterators} times: every new iterator starts the loader over "
                         "(its workers and first batch included); make one iterator and draw every batch from it")
        if loader.drawn != warmup + timed:
            raise Failed(f"{call} drew {loader.drawn} batches; it should draw warmup_batches + num_batches = "
                         f"{warmup + timed} and stop")
        size = [sizes[min(k, len(sizes) - 1)] for k in range(warmup + timed)]
        right = sum(size[warmup:]) / timed_s
        if math.isclose(got, right, rel_tol=1e-6):
            continue
        early = ("started the clock before the warm-up: start it after the warm-up batches, so the first batch's 300 ms "
                 "of start-up is left out")
        late = ("started the clock after the first timed batch had arrived: read the clock once the warm-up batches are "
                "drawn, before drawing the first timed one (in a for loop over the loader, the body runs after its batch "
                "arrived)")
        mistakes = [
            (sum(size) / timed_s, "counted the warm-up batches' samples: count only the samples of the num_batches "
                                  "timed batches"),
            (sum(size) / sum(arrival), early),
            (sum(size[warmup:]) / sum(arrival), early),
            (sum(size[warmup:]) / sum(arrival[warmup + 1:]), late),
            (sum(size[warmup + 1:]) / sum(arrival[warmup + 1:]), late),
            (timed / timed_s, "counted batches per second: count samples, len(batch[0]) per batch"),
            (2 * timed / timed_s, "counted len(batch) = 2, the (inputs, labels) pair: count len(batch[0]) per batch"),
            (timed * size[0] / timed_s, f"counted batch_size x num_batches, but the last timed batch holds only "
                                        f"{size[-1]} samples: add up len(batch[0]) of each timed batch"),
        ]
        for value, mistake in mistakes:
            if math.isclose(got, value, rel_tol=1e-6):
                raise Failed(f"{call} returned {got:.1f}, expected {right:.1f} samples/s: it {mistake}")
        if got < 1:
            raise Failed(f"{call} returned {got:.4g}; that looks like seconds (the timed batches take {timed_s:.2f} s). "
                         f"Return samples per second: the timed batches' samples / their seconds = {right:.1f}")
        raise Failed(f"{call} returned {got:.1f} samples/s; expected {right:.1f}: the {timed} timed batches (after the "
                     f"{warmup} warm-up ones) hold {sum(size[warmup:])} samples and take {timed_s * 1000:.0f} ms. Start "
                     "the clock after the warm-up batches, count only the timed batches' samples, and read the clock "
                     "after the last one")
    return f"{name} measured the stand-in loaders' rate over the {timed} timed batches, a partial last batch included"


KNEE_CASES: tuple[Case, ...] = (
    Case(([0, 1, 2, 4, 8], [100.0, 190.0, 370.0, 380.0, 375.0]), 2, "2 workers already reach 97 % of the best (380): more buy nothing"),
    Case(([0, 2, 4, 8, 16], [50.0, 100.0, 200.0, 390.0, 400.0]), 8, "8 workers reach 97.5 % of the best; 4 only 50 %"),
    Case(([0, 1], [100.0, 100.0]), 0, "when no value beats the first by more than the tolerance, the smallest value is the knee"),
    Case(([0, 1, 2, 4], [100.0, 190.0, 370.0, 380.0], 0.02), 4, "with tolerance=0.02 only 4 workers are within 2 % of the best: use the tolerance argument"),
    Case(([0, 1, 2, 4], [20.0, 21.0, 300.0, 310.0]), 2, "a plateau (20 -> 21) comes before the jump to 300: judge every "
         "value against the best (310), not each step against the one before"),
    Case(([0, 1, 2, 4], [100.0, 300.0, 400.0, 200.0]), 2, "the best (400) need not be the last value: compare with "
         "max(samples_per_s), and 300 is below 90 % of 400"),
    Case(([8, 4, 2, 1, 0], [395.0, 400.0, 380.0, 200.0, 100.0]), 2, "the sweep need not come sorted by value: return "
         "the smallest value within tolerance, min(...), not the first in list order"),
    Case(([0, 1, 2, 3], [100.0, 300.0, 350.0, 400.0], 0.25), 1, "300 is exactly 75 % of the best, 400: within "
         "tolerance=0.25 includes the boundary (>=, not >)"),
    Case(([0, 1, 2], [100.0, 200.0]), ValueError, "values and samples_per_s must have the same length"),
)


def _within(values: list[int], rates: list[float], keep: Callable[[float, float], bool]) -> list[tuple[int, int, float]]:
    """(value, position, rate) of the sweep's entries that `keep(rate, best)` admits: the wrong answers' models."""
    return [(v, i, r) for i, (v, r) in enumerate(zip(values, rates)) if keep(r, max(rates))]


KNEE_MISTAKES: tuple[Mistake, ...] = (
    (lambda v, r, t=0.1: min(_within(v, r, lambda x, b: x >= (1 - t) * b), key=lambda e: e[1])[0] if
     list(v) != sorted(v) else None, "the values are not sorted here: return the smallest value within tolerance, "
     "not the first one in list order"),
    (lambda v, r, t=0.1: min(_within(v, r, lambda x, b: x >= (1 - t) * b))[1], "that is the knee's position in the "
     "list: return its value, values[i]"),
    (lambda v, r, t=0.1: min(_within(v, r, lambda x, b: x >= (1 - t) * b))[2], "that is the knee's samples/s: return its "
     "value (the num_workers)"),
    (lambda v, r, t=0.1: min(_within(v, r, lambda x, b: x > (1 - t) * b))[0], "exactly (1 - tolerance) x the best counts "
     "as within tolerance: compare with >=, not >"),
    (lambda v, r, t=0.1: min(_within(v, r, lambda x, b: x >= t * b))[0], "within 10 % of the best means at least "
     "(1 - tolerance) x the best, not tolerance x the best"),
    (lambda v, r, t=0.1: next((v[i] for i in range(len(r) - 1) if r[i + 1] < (1 + t) * r[i]), v[-1])
     if list(v) == sorted(v) else None, "it compares "
     "each step with the one before: judge every value against the best, max(samples_per_s)"),
    (lambda v, r, t=0.1: v[int(np.argmax(r))], "that is the value with the best samples/s (or tolerance was taken as "
     "samples/s, not as a fraction): the knee is the smallest value with samples/s >= (1 - tolerance) x the best"),
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
    return answer.cases(KNEE_CASES, int, KNEE_MISTAKES)


class _NotedRngDataset(NumpyRngDataset):
    """NumpyRngDataset whose items also carry the note the check's worker_init_fn left: what became of self.rng."""

    note = ""

    def __getitem__(self, index: int) -> tuple[float, str]:
        return super().__getitem__(index), self.note


def seed_worker_right(worker_id: int) -> None:
    """Exercise 03.4's reference answer (the tests pass it to the check)."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


@exercise("03.4", "seed_numpy_worker", right=seed_worker_right, wrong=[
    Wrong(lambda worker_id: setattr(get_worker_info().dataset, "rng", np.random.default_rng(worker_id)),
          "every epoch repeats"),
    Wrong(lambda worker_id: np.random.seed(get_worker_info().seed % 2**32), "np.random.seed does not touch it"),
    Wrong(lambda worker_id: setattr(get_worker_info().dataset, "rng", np.random.default_rng()), "reproducible"),
])
def check_seed_worker(answer: Answer) -> str:
    """Exercise 03.4: a worker_init_fn that gives each worker's numpy generator its own, reproducible seed."""
    name = answer.name
    answer.probe(0)  # outside a worker: only a stub's NotImplementedError matters here
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check runs a function defined in the notebook in worker processes, which needs "
                     "the fork start method (Linux, macOS); on Windows use WSL2")

    def init(worker_id: int) -> None:  # the learner's worker_init_fn, noting what it did to the dataset's generator
        dataset = get_worker_info().dataset
        before, attributes = dataset.rng, set(vars(dataset))
        answer.value(worker_id)
        added = sorted(set(vars(dataset)) - attributes - {"note"})
        dataset.note = "replaced" if dataset.rng is not before else ",".join(added)

    def epochs(seed: int, count: int) -> list[tuple[list[list[float]], set[str]]]:
        """Each worker's draws and the notes, for `count` epochs of one loader (its workers start anew each epoch)."""
        loader = DataLoader(_NotedRngDataset(num_items=16, seed=0), batch_size=4, num_workers=2, worker_init_fn=init,
                            generator=torch.Generator().manual_seed(seed), multiprocessing_context="fork")
        runs = []
        for _ in range(count):
            batches = [(draws.tolist(), notes) for draws, notes in every_batch(loader)]  # workers stopped, even on an error
            runs.append(([sum((d for d, _ in batches[worker::2]), []) for worker in (0, 1)],
                         {note for _, notes in batches for note in notes}))
        return runs

    try:
        (first, notes), (second, _) = epochs(0, 2)
        (again, _), = epochs(0, 1)
    except Exception as exc:
        raise Failed(f"a DataLoader with worker_init_fn={name} raised {type(exc).__name__}: {str(exc)[:300]}") from exc
    if first[0] == first[1]:
        if "replaced" in notes:
            raise Failed("both workers drew the same numbers: their new generators got the same seed. Seed each from "
                         "get_worker_info().seed, which differs per worker (a constant or the clock does not)")
        if added := ", ".join(f"info.dataset.{a}" for note in notes for a in note.split(",") if a):
            raise Failed(f"both workers drew the same numbers: {name} set {added}, but the dataset draws from "
                         "self.rng: assign the new generator to info.dataset.rng")
        raise Failed("both workers drew the same numbers: the worker's copy of the dataset's generator, info.dataset.rng, "
                     "was left as it was (np.random.seed does not touch it, nor do torch.manual_seed or a local "
                     "variable): assign info.dataset.rng = np.random.default_rng(info.seed)")
    if first != again:
        raise Failed("two loaders with the same generator seed drew different numbers: seed from "
                     "get_worker_info().seed, not from the clock or os.urandom, so runs are reproducible")
    if first == second:
        raise Failed("the second epoch drew the same numbers as the first, so every epoch repeats its 'random' "
                     "augmentations: seed from get_worker_info().seed, which changes every epoch (and with the "
                     "base seed), not from worker_id alone")
    return f"{name}: workers draw different numbers, new ones each epoch, reproducibly for a given base seed"
