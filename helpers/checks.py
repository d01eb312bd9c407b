"""Self-checks for the exercises: each gives a one-line verdict the learner can act on."""
from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

STRICT_VAR = "COURSE_CHECKS_MUST_PASS"
Status = Literal["passed", "failed", "not implemented yet", "skipped"]


@dataclass(frozen=True)
class CheckResult:
    """One self-check's verdict; shown as a single line "Exercise NN.K <status>: <detail>"."""

    exercise: str
    status: Status
    detail: str

    @property
    def passed(self) -> bool:
        """True when the answer was right."""
        return self.status == "passed"

    def __str__(self) -> str:
        return f"Exercise {self.exercise} {self.status}: {self.detail}"

    __repr__ = __str__


def _finish(result: CheckResult) -> CheckResult:
    """Return the verdict; under COURSE_CHECKS_MUST_PASS=1 (the solutions' test run) a non-pass raises.

    A check skipped for want of a GPU passes that run, unless COURSE_REQUIRE_CUDA=1 says the GPU must be there.
    """
    from helpers.env import cuda_required

    skipped_fine = result.status == "skipped" and not cuda_required()
    if os.environ.get(STRICT_VAR, "") == "1" and not result.passed and not skipped_fine:
        raise AssertionError(str(result))
    return result


@dataclass(frozen=True)
class Case:
    """One call a check makes: the arguments, the right answer (or exception type), and why."""

    args: tuple[Any, ...]
    expected: Any
    why: str


def _call_repr(name: str, args: Sequence[Any]) -> str:
    return f"{name}({', '.join(repr(a) for a in args)})"


class _NotImplemented(Exception):
    """The learner's stub is still in place."""


def _call(exercise: str, fn: Callable[..., Any], args: Sequence[Any]) -> Any:
    """Call the learner's function; a stub's NotImplementedError becomes _NotImplemented."""
    try:
        return fn(*args)
    except NotImplementedError as exc:
        if str(exc).startswith(f"Exercise {exercise}"):
            raise _NotImplemented from exc
        raise


def _not_implemented(exercise: str, name: str) -> CheckResult:
    return _finish(CheckResult(exercise, "not implemented yet", f"replace the `raise NotImplementedError` in {name} with your code"))


def _same(got: Any, expected: Any, kind: type) -> tuple[bool, str]:
    """Whether `got` is the right answer of type `kind`; the reason when not."""
    if kind is float:
        if isinstance(got, bool) or not isinstance(got, (float, int)):
            return False, f"of type {type(got).__name__}; expected a float"
        return math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-9), ""
    if kind is list:
        try:
            values = [int(v) if float(v) == int(v) else float(v) for v in got]
        except (TypeError, ValueError, OverflowError):
            return False, f"of type {type(got).__name__}; expected a sequence of numbers"
        return values == list(expected), ""
    if type(got) is not kind:
        return False, f"of type {type(got).__name__}; expected {kind.__name__}"
    return got == expected, ""


def check_function(exercise: str, fn: Any, name: str, cases: Sequence[Case], kind: type = int) -> CheckResult:
    """Call the learner's `fn` on each case; the first wrong answer becomes the verdict (kind: int, float or list)."""
    if not callable(fn):
        return _finish(CheckResult(exercise, "failed", f"expected the function {name}, got {fn!r}"))
    for case in cases:
        call = _call_repr(name, case.args)
        expects_error = isinstance(case.expected, type) and issubclass(case.expected, BaseException)
        try:
            got = _call(exercise, fn, case.args)
        except _NotImplemented:
            return _not_implemented(exercise, name)
        except Exception as exc:
            if expects_error and isinstance(exc, case.expected):
                continue
            return _finish(CheckResult(exercise, "failed", f"{call} raised {type(exc).__name__}: {exc} ({case.why})"))
        if expects_error:
            return _finish(CheckResult(
                exercise, "failed", f"{call} returned {got!r}; expected {case.expected.__name__} ({case.why})"
            ))
        right, wrong_type = _same(got, case.expected, kind)
        if wrong_type:
            return _finish(CheckResult(exercise, "failed", f"{call} returned {got!r} {wrong_type}"))
        if not right:
            return _finish(CheckResult(
                exercise, "failed", f"{call} returned {got!r}, expected {case.expected!r}: {case.why}"
            ))
    return _finish(CheckResult(exercise, "passed", f"{name} is right in all {len(cases)} cases"))


WORKERS_PER_RANK_CASES: tuple[Case, ...] = (
    Case((2, 1), 1, "1 rank's main process takes 1 core, leaving 1 for a worker"),
    Case((16, 8), 1, "8 main processes take 8 cores, leaving 8: one worker per rank"),
    Case((64, 8), 7, "8 main processes take 8 cores, leaving 56: seven workers per rank"),
    Case((96, 8), 11, "96 cores / 8 ranks = 12 per rank: 1 main process + 11 workers"),
    Case((7, 2), 2, "7 // 2 = 3 cores per rank: 1 main + 2 workers (the spare core stays idle)"),
    Case((2, 2), 0, "2 ranks on 2 cores: no core is left, so load in the main process (num_workers=0)"),
    Case((4, 8), 0, "more ranks than cores: never a negative num_workers; 0 is the least"),
    Case((8, 0), ValueError, "a node runs at least one rank: ranks_per_node=0 is bad input"),
    Case((0, 1), ValueError, "a machine has at least one usable core: usable_cores=0 is bad input"),
)


def check_workers_per_rank(fn: Callable[[int, int], int]) -> CheckResult:
    """Exercise 00.1: num_workers per rank so that ranks x (1 main + workers) fits the usable cores."""
    return check_function("00.1", fn, "workers_per_rank", WORKERS_PER_RANK_CASES)


def _failed(exercise: str, detail: str) -> CheckResult:
    return _finish(CheckResult(exercise, "failed", detail))


def _passed(exercise: str, detail: str) -> CheckResult:
    return _finish(CheckResult(exercise, "passed", detail))


CLASS_COUNTS_CASES: tuple[Case, ...] = (
    Case(([0, 2, 2, 2], 3), [1, 0, 3], "class 1 has no sample and must still count 0"),
    Case(([1, 1], 4), [0, 2, 0, 0], "num_classes=4 means four counts, even when classes 0, 2 and 3 are absent"),
    Case(([2, 0, 2, 1, 2], 3), [1, 1, 3], "counts are in class order 0, 1, 2, not in order of appearance"),
    Case(([], 2), [0, 0], "no labels: every class counts 0"),
)


def check_class_counts(fn: Callable[[Sequence[int], int], Sequence[int]]) -> CheckResult:
    """Exercise 01.1: samples per class from the labels, empty classes kept, in class order."""
    return check_function("01.1", fn, "count_classes", CLASS_COUNTS_CASES, kind=list)


IMBALANCE_RATIO_CASES: tuple[Case, ...] = (
    Case(([10000, 2000, 500],), 20.0, "largest count / smallest count"),
    Case(([5, 5],), 1.0, "a balanced dataset has ratio 1"),
    Case(([3, 12, 6],), 4.0, "the largest and smallest need not be the first and last class"),
    Case(([1, 100],), 100.0, "the ratio is largest / smallest, so it is at least 1"),
    Case(([10, 0, 5],), ValueError, "a class with zero samples makes the ratio infinite: raise ValueError naming counts"),
)


def check_imbalance_ratio(fn: Callable[[Sequence[int]], float]) -> CheckResult:
    """Exercise 01.2: the imbalance ratio, largest class over smallest."""
    return check_function("01.2", fn, "ratio", IMBALANCE_RATIO_CASES, kind=float)


def check_stratified_split(fn: Callable[[Any, float, int], tuple[Any, Any]]) -> CheckResult:
    """Exercise 01.3: every class gets its share of the validation set, for every seed."""
    exercise, name = "01.3", "stratified_split"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    labels = np.repeat(np.arange(3), [200, 30, 5])
    np.random.default_rng(0).shuffle(labels)
    val_sets = set()
    for seed in range(10):
        call = f"{name}(labels with counts [200, 30, 5], 0.2, seed={seed})"
        try:
            train_idx, val_idx = _call(exercise, fn, (labels, 0.2, seed))
            train_idx, val_idx = np.asarray(train_idx), np.asarray(val_idx)
        except _NotImplemented:
            return _not_implemented(exercise, name)
        except Exception as exc:
            return _failed(exercise, f"{call} raised {type(exc).__name__}: {exc}")
        if train_idx.dtype == bool or val_idx.dtype == bool:
            return _failed(exercise, f"{call} returned boolean masks; return two arrays of indices")
        both = np.concatenate([train_idx, val_idx]).astype(np.int64)
        if len(np.intersect1d(train_idx, val_idx)):
            return _failed(exercise, f"{call}: {len(np.intersect1d(train_idx, val_idx))} indices are in both train and validation")
        if sorted(both.tolist()) != list(range(len(labels))):
            return _failed(exercise, f"{call}: train and validation together must hold every index 0..{len(labels) - 1} exactly once")
        val_counts = np.bincount(labels[val_idx], minlength=3)
        wanted = 0.2 * np.array([200, 30, 5])
        if np.any(np.abs(val_counts - wanted) >= 1):
            return _failed(exercise, f"{call} put {val_counts.tolist()} samples per class in validation; "
                           f"stratified means about {wanted.tolist()} (a random split of all indices is not stratified)")
        val_sets.add(tuple(np.sort(val_idx).tolist()))
    if len(val_sets) == 1:
        return _failed(exercise, f"{name} returned the same split for 10 different seeds: shuffle each class with the seed")
    return _passed(exercise, f"{name} gave every class its share of validation for 10 seeds")


BALANCED_ACCURACY_CASES: tuple[Case, ...] = (
    Case(([0] * 7 + [1] * 2 + [2], [0] * 10), 1 / 3, "always predicting the majority: recall 1, 0, 0, mean 1/3 (not the 0.7 accuracy)"),
    Case(([0, 1, 2, 2], [0, 1, 2, 2]), 1.0, "all right: every class's recall is 1"),
    Case(([0, 0, 1], [0, 1, 1]), 0.75, "class 0 recall 1/2, class 1 recall 1: mean 0.75"),
    Case(([0, 0, 1], [0, 2, 1]), 0.75, "class 2 is predicted but never true: average over the classes in y_true only"),
)


def check_balanced_accuracy(fn: Callable[[Sequence[int], Sequence[int]], float]) -> CheckResult:
    """Exercise 01.4: balanced accuracy, the mean per-class recall."""
    return check_function("01.4", fn, "balanced_accuracy", BALANCED_ACCURACY_CASES, kind=float)


def check_per_sample_weights(fn: Callable[[Any], Any]) -> CheckResult:
    """Exercise 02.1: one weight per sample, giving every class the same total weight."""
    exercise, name = "02.1", "per_sample_weights"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    for counts in ([90, 10], [500, 30, 5, 1]):
        labels = np.repeat(np.arange(len(counts)), counts)
        np.random.default_rng(1).shuffle(labels)
        call = f"{name}(labels with counts {counts})"
        try:
            weights = np.asarray(_call(exercise, fn, (labels,)), dtype=np.float64)
        except _NotImplemented:
            return _not_implemented(exercise, name)
        except Exception as exc:
            return _failed(exercise, f"{call} raised {type(exc).__name__}: {exc}")
        if weights.shape == (len(counts),):
            return _failed(exercise, f"{call} returned {len(counts)} weights for {len(labels)} labels: one per class. "
                           "WeightedRandomSampler needs one weight per sample: index the class weights by the labels")
        if weights.shape != (len(labels),):
            return _failed(exercise, f"{call} returned shape {weights.shape}; expected ({len(labels)},), one weight per sample")
        if not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            return _failed(exercise, f"{call} returned weights that are not all positive and finite")
        mass = np.bincount(labels, weights=weights)
        if not np.allclose(mass, mass[0], rtol=1e-6):
            return _failed(exercise, f"{call}: classes get total weight {np.round(mass / mass.sum(), 3).tolist()}; "
                           "inverse-frequency weights give every class the same share")
    return _passed(exercise, f"{name} gives one weight per sample and every class the same total weight")


def check_balanced_sampler(fn: Callable[[Any, int], Any]) -> CheckResult:
    """Exercise 02.2: a sampler whose draws are balanced across classes and reach beyond indices 0..C-1."""
    exercise, name = "02.2", "balanced_sampler"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    labels = np.repeat(np.arange(3), [900, 90, 10])
    np.random.default_rng(2).shuffle(labels)
    call = f"{name}(labels with counts [900, 90, 10], num_samples=3000)"
    try:
        sampler = _call(exercise, fn, (labels, 3000))
        drawn = np.array(list(sampler), dtype=np.int64)
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception as exc:
        hint = ""
        if "without replacement" in str(exc):
            hint = ". replacement=False draws each index at most once, so it can neither make 3000 draws from 1000 samples nor rebalance"
        return _failed(exercise, f"{call} raised {type(exc).__name__}: {exc}{hint}")
    if len(drawn) != 3000:
        return _failed(exercise, f"{call} drew {len(drawn)} indices; the epoch should have num_samples=3000")
    distinct = np.unique(drawn)
    if len(distinct) <= 3:
        return _failed(exercise, f"{call} only ever drew indices {distinct.tolist()}: the per-class weights were passed as "
                       "per-sample weights, so the sampler chooses among 3 'samples'")
    share = np.bincount(labels[drawn], minlength=3) / len(drawn)
    if np.any(np.abs(share - 1 / 3) > 0.05):
        return _failed(exercise, f"{call} drew classes in shares {np.round(share, 3).tolist()}; balanced is about 1/3 each "
                       "(replacement=False cannot rebalance: every index appears at most once)")
    return _passed(exercise, f"{name} drew classes in shares {np.round(share, 2).tolist()} from {len(distinct)} distinct samples")


def check_focal_loss(fn: Callable[..., Any]) -> CheckResult:
    """Exercise 02.3: a focal loss equal to helpers.losses.focal_loss (mean reduction) for several gammas."""
    import torch
    import torch.nn.functional as F

    from helpers.losses import focal_loss

    exercise, name = "02.3", "my_focal_loss"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(32, 4, generator=generator) * 3
    target = torch.randint(0, 4, (32,), generator=generator)
    for gamma in (0.0, 1.0, 2.0, 5.0):
        call = f"{name}(logits, target, gamma={gamma})"
        try:
            got = _call(exercise, fn, (logits.clone(), target.clone(), gamma))
        except _NotImplemented:
            return _not_implemented(exercise, name)
        except Exception as exc:
            return _failed(exercise, f"{call} raised {type(exc).__name__}: {exc}")
        if not isinstance(got, torch.Tensor) or got.ndim != 0:
            return _failed(exercise, f"{call} returned {got!r}; expected a 0-d tensor (the mean over the batch)")
        expected = focal_loss(logits, target, gamma=gamma)
        if not torch.allclose(got.float(), expected, rtol=1e-4, atol=1e-6):
            hint = " At gamma=0 it must equal F.cross_entropy." if gamma == 0 else " Use p_t, the probability of the *true* class."
            return _failed(exercise, f"{call} returned {got.item():.5f}, expected {expected.item():.5f}.{hint}")
    assert torch.allclose(focal_loss(logits, target, gamma=0.0), F.cross_entropy(logits, target))
    return _passed(exercise, f"{name} matches helpers.losses.focal_loss for gamma 0, 1, 2, 5 (and cross-entropy at 0)")


COVERAGE_CASES: tuple[Case, ...] = (
    Case(([900, 100], 0.9), 4144, "each draw picks a given majority sample with probability 1/(2*900): "
         "solve 1 - (1 - 1/1800)^S >= 0.9 for the smallest S"),
    Case(([100, 900], 0.9), 4144, "the majority class is the largest count, wherever it is"),
    Case(([4000, 400, 40], 0.5), 8318, "three classes: each gets 1/3 of the draws"),
    Case(([900, 100], 0.0), ValueError, "coverage must be in (0, 1): 0 needs no samples"),
    Case(([900, 100], 1.0), ValueError, "coverage must be in (0, 1): 1 is never certain when drawing with replacement"),
)


def check_num_samples_for_coverage(fn: Callable[[Sequence[int], float], int]) -> CheckResult:
    """Exercise 02.4: the smallest num_samples whose balanced epoch sees `coverage` of the majority class."""
    return check_function("02.4", fn, "num_samples_for_coverage", COVERAGE_CASES)


class _TimedBatches:
    """A stand-in loader: the first batch after `first_s` (worker start-up), then one every `every_s`; counts what was drawn."""

    def __init__(self, first_s: float, every_s: float, batch_size: int, total: int) -> None:
        self.first_s, self.every_s, self.batch_size, self.total = first_s, every_s, batch_size, total
        self.drawn = 0

    def __iter__(self):
        import time

        import torch

        for index in range(self.total):
            time.sleep(self.first_s if index == 0 else self.every_s)
            self.drawn += 1
            yield torch.zeros(self.batch_size, 3), torch.zeros(self.batch_size, dtype=torch.int64)


def check_steady_samples_per_s(fn: Callable[[Any, int, int], float]) -> CheckResult:
    """Exercise 03.1: samples/s after warm-up, with start-up (the first batch) left out."""
    exercise, name = "03.1", "steady_samples_per_s"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    loader = _TimedBatches(first_s=0.3, every_s=0.01, batch_size=8, total=40)
    call = f"{name}(loader whose first batch takes 300 ms and then one batch of 8 every 10 ms, warmup_batches=1, num_batches=10)"
    try:
        got = _call(exercise, fn, (loader, 1, 10))
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception as exc:
        return _failed(exercise, f"{call} raised {type(exc).__name__}: {exc}")
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return _failed(exercise, f"{call} returned {got!r}; expected samples per second as a float")
    if loader.drawn != 11:
        return _failed(exercise, f"{call} drew {loader.drawn} batches; it should draw warmup_batches + num_batches = 11 and stop")
    if got < 300:
        return _failed(exercise, f"{call} returned {got:.0f} samples/s; the steady rate is about 800. "
                       "Start the clock after the warm-up batches: the first batch's 300 ms is start-up, not throughput")
    if got > 840:
        return _failed(exercise, f"{call} returned {got:.0f} samples/s, faster than the loader can deliver (at most 800): "
                       "count only the samples of the timed batches (not the warm-up ones), over the time they took")
    return _passed(exercise, f"{name} measured {got:.0f} samples/s (the loader delivers at most 800 after start-up)")


KNEE_CASES: tuple[Case, ...] = (
    Case(([0, 1, 2, 4, 8], [100.0, 190.0, 370.0, 380.0, 375.0]), 2, "2 workers already reach 97 % of the best (380): more buy nothing"),
    Case(([0, 2, 4, 8, 16], [50.0, 100.0, 200.0, 390.0, 400.0]), 8, "8 workers reach 97.5 % of the best; 4 only 50 %"),
    Case(([0, 1], [100.0, 100.0]), 0, "when no value beats the first by more than the tolerance, the smallest value is the knee"),
    Case(([0, 1, 2, 4], [100.0, 190.0, 370.0, 380.0], 0.02), 4, "with tolerance=0.02 only 4 workers are within 2 % of the best: use the tolerance argument"),
    Case(([0, 1, 2], [100.0, 200.0]), ValueError, "values and samples_per_s must have the same length"),
)


def check_knee(fn: Callable[[Sequence[int], Sequence[float]], int]) -> CheckResult:
    """Exercise 03.2: the smallest num_workers whose samples/s is within 10 % of the sweep's best."""
    return check_function("03.2", fn, "knee", KNEE_CASES)


def check_getitems(dataset_class: Any) -> CheckResult:
    """Exercise 03.3: a `__getitems__` that returns the batch's samples as a list (the documented contract), called once per batch."""
    import torch
    from torch.utils.data import DataLoader

    from helpers.workloads import InMemoryDataset

    exercise, name = "03.3", "MyBatchedDataset.__getitems__"
    if not (isinstance(dataset_class, type) and issubclass(dataset_class, InMemoryDataset)):
        return _failed(exercise, f"expected a subclass of helpers.workloads.InMemoryDataset, got {dataset_class!r}")
    dataset = dataset_class(num_items=1000, seed=3)
    try:
        direct = _call(exercise, dataset.__getitems__, ([5, 1, 2],))
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception as exc:
        return _failed(exercise, f"{name}([5, 1, 2]) raised {type(exc).__name__}: {exc}")
    if not isinstance(direct, list) or len(direct) != 3:
        got = f"a {type(direct).__name__}" + (f" of {len(direct)} items" if hasattr(direct, "__len__") else "")
        return _failed(exercise, f"{name}([5, 1, 2]) returned {got}; return a list with one sample per index, "
                       "[(features, label), ...]: the DataLoader's collate_fn stacks them (a pre-stacked batch is the variant, not the contract)")
    calls = []
    original = dataset.__getitems__
    dataset.__getitems__ = lambda indices: calls.append(list(indices)) or original(indices)
    loader = DataLoader(dataset, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    try:
        batches = list(loader)
    except Exception as exc:
        return _failed(exercise, f"iterating a DataLoader (default collate_fn) over it raised {type(exc).__name__}: {exc}")
    if [len(c) for c in calls[:2]] != [64, 64] or len(calls) != len(batches):
        return _failed(exercise, f"the DataLoader called {name} {len(calls)} times for {len(batches)} batches; it should be once per batch of 64")
    first = batches[0]
    if not (isinstance(first, (tuple, list)) and len(first) == 2 and all(isinstance(t, torch.Tensor) for t in first)):
        return _failed(exercise, f"the collated batch is {type(first).__name__}, not (features [64, 16], labels [64]): "
                       "each sample must be a (features, label) pair")
    rows = torch.tensor(calls[0])
    if not (torch.equal(first[0], dataset.features[rows]) and torch.equal(first[1], dataset.labels[rows])):
        return _failed(exercise, f"{name} returned the wrong rows: sample k must be (features[indices[k]], labels[indices[k]]), in order")
    return _passed(exercise, f"{name} was called once per batch ({len(batches)} batches) and its samples collated to the right rows")


def check_seed_worker(fn: Callable[[int], None]) -> CheckResult:
    """Exercise 03.4: a worker_init_fn that gives each worker's numpy generator its own, reproducible seed."""
    import multiprocessing

    import torch
    from torch.utils.data import DataLoader

    from helpers.workloads import NumpyRngDataset

    exercise, name = "03.4", "seed_numpy_worker"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    try:
        _call(exercise, fn, (0,))  # outside a worker: only a stub's NotImplementedError matters here
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception:
        pass
    if "fork" not in multiprocessing.get_all_start_methods():
        return _failed(exercise, "this check runs a function defined in the notebook in worker processes, which needs "
                       "the fork start method (Linux, macOS); on Windows use WSL2")

    def draws(seed: int) -> list[list[float]]:
        loader = DataLoader(NumpyRngDataset(num_items=16, seed=0), batch_size=4, num_workers=2, worker_init_fn=fn,
                            generator=torch.Generator().manual_seed(seed), multiprocessing_context="fork")
        batches = [batch.tolist() for batch in loader]
        return [sum(batches[worker::2], []) for worker in (0, 1)]

    try:
        first, again, other = draws(0), draws(0), draws(1)
    except Exception as exc:
        return _failed(exercise, f"a DataLoader with worker_init_fn={name} raised {type(exc).__name__}: {str(exc)[:300]}")
    if first[0] == first[1]:
        return _failed(exercise, "both workers drew the same numbers: replace the worker's copy of the dataset's generator, "
                       "info.dataset.rng, with one seeded from info.seed (np.random.seed does not touch it)")
    if first != again:
        return _failed(exercise, "two loaders with the same generator seed drew different numbers: seed from "
                       "get_worker_info().seed, not from the clock or os.urandom, so runs are reproducible")
    if first == other:
        return _failed(exercise, "loaders with different generator seeds drew the same numbers, so every epoch repeats its "
                       "'random' augmentations: seed from get_worker_info().seed, which changes with the base seed, not from worker_id alone")
    return _passed(exercise, f"{name}: workers draw different numbers, reproducibly, and a new base seed gives new draws")


class _FakeAsyncDevice:
    """A stand-in GPU for exercise 04.1: copy() returns at once and queues 20 ms of work (the first 300 ms); synchronize() waits for it."""

    def __init__(self) -> None:
        self.busy_until = 0.0
        self.copies = 0

    def copy(self) -> None:
        import time

        self.busy_until = max(time.perf_counter(), self.busy_until) + (0.3 if self.copies == 0 else 0.02)
        self.copies += 1

    def synchronize(self) -> None:
        import time

        time.sleep(max(0.0, self.busy_until - time.perf_counter()))


def check_gb_per_s(fn: Callable[..., float]) -> CheckResult:
    """Exercise 04.1: bandwidth of an asynchronous copy, warmed up and synchronised before each clock read."""
    exercise, name = "04.1", "gb_per_s"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    device = _FakeAsyncDevice()
    call = f"{name}(copy, synchronize, num_bytes=200_000_000, repeats=5) on a device whose copies take 20 ms (the first 300 ms)"
    try:
        got = _call(exercise, fn, (device.copy, device.synchronize, 200_000_000, 5))
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception as exc:
        return _failed(exercise, f"{call} raised {type(exc).__name__}: {exc}")
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        return _failed(exercise, f"{call} returned {got!r}; expected GB per second as a float")
    if device.copies < 6:
        return _failed(exercise, f"{call} made {device.copies} copies; make one untimed warm-up copy, then time `repeats` copies")
    if got > 12:
        return _failed(exercise, f"{call} returned {got:.1f} GB/s, faster than the device can copy (10 GB/s): copy() only queues "
                       "the work, so call synchronize() before you read the clock")
    if got < 7:
        return _failed(exercise, f"{call} returned {got:.1f} GB/s; the steady rate is 10 GB/s. Leave the first (warm-up) copy "
                       "out of the timing, and divide bytes by seconds (GB = 1e9 bytes)")
    return _passed(exercise, f"{name} measured {got:.1f} GB/s on a device that copies at 10 GB/s after warm-up")


def check_move_to(fn: Callable[..., Any]) -> CheckResult:
    """Exercise 04.2: every tensor of a nested batch moved to the device, the structure and other values kept."""
    import collections

    import torch

    exercise, name = "04.2", "move_to"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    pair = collections.namedtuple("Pair", "image mask")
    batch = {"pixels": torch.ones(2, 3), "extra": [torch.arange(2), "id-7", 3], "pair": pair(torch.zeros(1), torch.ones(1))}
    try:
        got = _call(exercise, fn, (batch, "meta", True))
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception as exc:
        hint = " (rebuild a namedtuple with type(x)(*moved_fields))" if "required positional argument" in str(exc) else ""
        return _failed(exercise, f"{name}(batch, 'meta', non_blocking=True) raised {type(exc).__name__}: {exc}{hint}")
    if not isinstance(got, dict) or set(got) != set(batch):
        return _failed(exercise, f"{name} returned {type(got).__name__} with keys {sorted(got) if isinstance(got, dict) else '-'}; "
                       "a dict batch must come back as a dict with the same keys")
    if not (isinstance(got["pixels"], torch.Tensor) and got["pixels"].device.type == "meta"):
        return _failed(exercise, "batch['pixels'] did not reach the device: move every tensor with tensor.to(device, non_blocking=...)")
    extra = got["extra"]
    if not (isinstance(extra, list) and len(extra) == 3 and isinstance(extra[0], torch.Tensor) and extra[0].device.type == "meta"):
        return _failed(exercise, "batch['extra'] must stay a list whose tensor reaches the device: recurse into lists and tuples")
    if extra[1:] != ["id-7", 3]:
        return _failed(exercise, f"batch['extra'][1:] came back as {extra[1:]!r}: leave values that are not tensors unchanged")
    if not (isinstance(got["pair"], pair) and got["pair"].mask.device.type == "meta"):
        return _failed(exercise, f"batch['pair'] came back as {type(got['pair']).__name__}: rebuild a namedtuple with "
                       "type(x)(*moved_fields) so its type and field names survive")
    if batch["pixels"].device.type != "cpu":
        return _failed(exercise, f"{name} changed the input batch; return a new one")
    return _passed(exercise, f"{name} moved every tensor of a dict/list/namedtuple batch and kept the rest")


class _LoggedBatches:
    """Batches 0..n-1 that log when each is drawn, for exercise 04.3."""

    def __init__(self, n: int, log: list[str]) -> None:
        self.n, self.log = n, log

    def __iter__(self):
        for index in range(self.n):
            self.log.append(f"draw {index}")
            yield index


def check_prefetched(fn: Callable[..., Any]) -> CheckResult:
    """Exercise 04.3: copy(batch k+1) is started before batch k is handed out, one batch ahead at most, order kept."""
    exercise, name = "04.3", "prefetched"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    log: list[str] = []

    def copy(batch: int) -> tuple[str, int]:
        log.append(f"copy {batch}")
        return ("copied", batch)

    received = []
    try:
        for item in _call(exercise, fn, (_LoggedBatches(4, log), copy)):
            log.append(f"use {item[1] if isinstance(item, tuple) and len(item) == 2 else item!r}")
            received.append(item)
        empty = list(_call(exercise, fn, ([], copy)))
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception as exc:
        return _failed(exercise, f"iterating {name}(batches, copy) raised {type(exc).__name__}: {exc}")
    expected = [("copied", k) for k in range(4)]
    if received != expected:
        return _failed(exercise, f"{name} over batches 0-3 yielded {received!r}; expected copy(batch) of each, in order: {expected!r}")
    if empty:
        return _failed(exercise, f"{name} over no batches yielded {empty!r}; it should yield nothing")
    for k in range(3):
        if log.index(f"copy {k + 1}") > log.index(f"use {k}"):
            return _failed(exercise, f"batch {k} was handed out before batch {k + 1}'s copy started (events: {', '.join(log)}): "
                           "start the next copy, then yield the current batch, so the copy runs during the step")
    for k in range(2):
        if log.index(f"draw {k + 2}") < log.index(f"use {k}"):
            return _failed(exercise, f"batch {k + 2} was drawn before batch {k} was used (events: {', '.join(log)}): "
                           "stay one batch ahead; drawing everything first holds the whole epoch in GPU memory")
    return _passed(exercise, f"{name} copies each next batch before handing out the current one, one ahead, in order")


def check_safe_read(fn: Callable[[Any], Any]) -> CheckResult:
    """Exercise 04.4 (CUDA GPU): a device-to-host read whose values are right even behind a slow kernel."""
    import torch

    exercise, name = "04.4", "read_back"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    try:
        _call(exercise, fn, (torch.zeros(4),))  # a CPU tensor: only tells a stub from an answer
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception:
        pass
    if not torch.cuda.is_available():
        return _finish(CheckResult(exercise, "skipped", f"this check needs a CUDA GPU, and torch.cuda.is_available() is False "
                                   f"here: {name} was not tested"))
    import time

    fresh = time.perf_counter_ns() % 1_000_000  # new values each run: pinned memory reused from a previous run cannot match
    for value in (float(fresh + 1), float(fresh + 2)):
        on_gpu = torch.full((2**24,), value, device="cuda")
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # the copy has to wait behind ~0.1 s of GPU work
        try:
            got = _call(exercise, fn, (on_gpu,))
        except _NotImplemented:
            return _not_implemented(exercise, name)
        except Exception as exc:
            return _failed(exercise, f"{name}(gpu_tensor) raised {type(exc).__name__}: {exc}")
        if not isinstance(got, torch.Tensor) or got.device.type != "cpu":
            return _failed(exercise, f"{name} returned {type(got).__name__} on {getattr(got, 'device', '?')}; return a CPU tensor")
        if not bool((got == value).all()):
            return _failed(exercise, f"{name} returned a CPU tensor whose values were not all {value} when read: the copy had "
                           "not landed. Synchronise (torch.cuda.current_stream().synchronize()) before returning it")
    return _passed(exercise, f"{name} returned the right values even with a slow kernel queued ahead of the copy")


def check_epoch_orders(fn: Callable[[Any, int], list[list[int]]]) -> CheckResult:
    """Exercise 05.1: each epoch's indices from a DistributedSampler, reshuffled every epoch with set_epoch."""
    from torch.utils.data import DistributedSampler

    exercise, name = "05.1", "epoch_orders"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")

    def sampler(rank: int) -> DistributedSampler:
        return DistributedSampler(range(20), num_replicas=2, rank=rank, shuffle=True, seed=7)

    expected = []
    for rank in (0, 1):
        reference = sampler(rank)
        orders = []
        for epoch in range(3):
            reference.set_epoch(epoch)
            orders.append(list(reference))
        expected.append(orders)
    try:
        got = [_call(exercise, fn, (sampler(rank), 3)) for rank in (0, 1)]
    except _NotImplemented:
        return _not_implemented(exercise, name)
    except Exception as exc:
        return _failed(exercise, f"{name}(sampler, 3) raised {type(exc).__name__}: {exc}")
    try:
        got = [[[int(i) for i in order] for order in orders] for orders in got]
    except (TypeError, ValueError):
        return _failed(exercise, f"{name} returned {got!r}; expected a list with one list of indices per epoch")
    if any(len(orders) != 3 for orders in got):
        return _failed(exercise, f"{name}(sampler, 3) returned {[len(o) for o in got]} epochs; expected 3")
    if got[0][0] == got[0][1] == got[0][2]:
        return _failed(exercise, "all 3 epochs have the same order: call sampler.set_epoch(epoch) before each epoch's iteration")
    if got != expected:
        return _failed(exercise, f"rank 0's orders were {got[0]}, expected {expected[0]}: set the epoch to 0, 1, 2 in turn "
                       "(the sampler shuffles with seed + epoch), once per epoch, before iterating it")
    return _passed(exercise, f"{name} reshuffles every epoch, the same way on every rank")


def check_rank_loader(fn: Callable[..., Any]) -> CheckResult:
    """Exercise 05.2: a rank's DataLoader drawing its own, class-balanced shard with DistributedWeightedSampler."""
    import torch
    from torch.utils.data import TensorDataset

    from helpers.data import labels_from_counts

    exercise, name = "05.2", "rank_loader"
    if not callable(fn):
        return _failed(exercise, f"expected the function {name}, got {fn!r}")
    labels = torch.as_tensor(labels_from_counts([900, 90, 10], seed=1))
    dataset = TensorDataset(torch.arange(len(labels)), labels)
    from helpers.samplers import DistributedWeightedSampler

    drawn, counts, seeds = [], [], []
    for rank in (0, 1):
        call = f"{name}(dataset, labels, rank={rank}, world_size=2, batch_size=50)"
        torch.manual_seed(0)  # as every real rank would after "seed everything": ranks start from the same random state
        try:
            loader = _call(exercise, fn, (dataset, labels, rank, 2, 50))
            batches = list(loader)
        except _NotImplemented:
            return _not_implemented(exercise, name)
        except Exception as exc:
            return _failed(exercise, f"{call} raised {type(exc).__name__}: {exc}")
        if isinstance(getattr(loader, "sampler", None), DistributedWeightedSampler):
            seeds.append(loader.sampler.seed)
        indices = [int(i) for index, _ in batches for i in index]
        drawn.append(indices)
        counts.append(np.bincount(labels[indices].numpy(), minlength=3))
    if drawn[0] == drawn[1]:
        return _failed(exercise, "both ranks drew the same samples: a WeightedRandomSampler knows nothing about ranks; use "
                       "DistributedWeightedSampler(weights, num_replicas=world_size, rank=rank)")
    if len(set(seeds)) > 1:
        return _failed(exercise, f"the ranks' samplers had seeds {seeds}: every rank must use the same seed, so they split one "
                       "global draw instead of drawing overlapping ones")
    if [len(d) for d in drawn] != [500, 500]:
        return _failed(exercise, f"the ranks drew {[len(d) for d in drawn]} samples in an epoch; with 1000 samples and 2 ranks "
                       "each should draw 500 (num_samples is the epoch size across all ranks)")
    shares = [c / c.sum() for c in counts]
    if min(s[2] for s in shares) < 0.2:
        return _failed(exercise, f"class counts per rank were {[c.tolist() for c in counts]}: the draws follow the data, not the "
                       "weights. Weight each sample by the inverse of its class count (helpers.imbalance.sample_weights)")
    return _passed(exercise, f"the ranks drew different samples, 500 each, class counts {[c.tolist() for c in counts]}")


DEDUP_CASES: tuple[Case, ...] = (
    Case(([[(0, True), (2, False)], [(1, False), (0, True)]],), 1 / 3, "sample 0 was padded onto rank 1: count it once (1 of 3 right)"),
    Case(([[(0, True), (1, True)], [(2, False), (3, True)]],), 0.75, "no duplicates: 3 of 4 right"),
    Case(([[(5, False)], [(5, False)], [(4, True)]],), 0.5, "three ranks, sample 5 on two of them: 1 of 2 distinct samples right"),
    Case(([[], []],), ValueError, "no predictions at all: raise ValueError rather than divide by zero"),
)


def check_deduplicated_accuracy(fn: Callable[[Any], float]) -> CheckResult:
    """Exercise 05.3: accuracy over gathered (index, correct) pairs with each index counted once."""
    return check_function("05.3", fn, "deduplicated_accuracy", DEDUP_CASES, kind=float)
