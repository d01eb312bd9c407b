"""Lesson 01's self-checks: class counts, imbalance ratio, stratified split, balanced accuracy."""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from helpers import data, imbalance, metrics
from helpers.checks.core import Answer, Case, Failed, Mistake, Wrong, exercise

CLASS_COUNTS_CASES: tuple[Case, ...] = (  # unsorted labels first: an order of first appearance is not class order there
    Case(([2, 0, 2, 1, 2], 3), [1, 1, 3], "counts are in class order 0, 1, 2, not in order of appearance"),
    Case(([0, 2, 2, 2], 3), [1, 0, 3], "class 1 has no sample and must still count 0"),
    Case(([1, 1], 4), [0, 2, 0, 0], "num_classes=4 means four counts, even when classes 0, 2 and 3 are absent"),
    Case((np.array([0, 2, 2, 2, 1]), 3), [1, 1, 3], "labels can be a numpy array, as in the lesson: count with np.bincount "
         "(or convert with np.asarray first), not with list methods"),
    Case((np.zeros(0, dtype=np.int64), 2), [0, 0], "no labels: every class counts 0"),
    Case((np.array([3, 3, 0, 3]), 5), [1, 0, 0, 3, 0], "classes 1, 2 and 4 are empty: the empty classes in the middle and at "
         "the end still count 0, each at its own position"),
)


def _bincount(labels: Any, n: int) -> np.ndarray:
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=n)


def _unique_counts(labels: Any, n: int) -> np.ndarray:
    return np.unique(np.asarray(labels, dtype=np.int64), return_counts=True)[1]


CLASS_COUNTS_MISTAKES: tuple[Mistake, ...] = (
    (_unique_counts, "a class with no sample is missing (np.unique and Counter leave it out): count with "
     "np.bincount(labels, minlength=num_classes), so every class 0..num_classes-1 gets its count"),
    (lambda labels, n: _bincount(labels, n)[: n - 1], "the last class is missing: count every class 0 .. num_classes-1, "
     "range(num_classes)"),
    (lambda labels, n: np.concatenate([_unique_counts(labels, n), np.zeros(n - len(np.unique(labels)), np.int64)]),
     "the empty classes' zeros went to the end: each count belongs at its own class's position "
     "(np.bincount(labels, minlength=num_classes))"),
    (lambda labels, n: np.histogram(np.asarray(labels, dtype=np.int64), bins=n)[0], "np.histogram spreads its bins over "
     "the labels' min..max, not over the classes 0..num_classes-1: count with np.bincount(labels, minlength=num_classes)"),
    (lambda labels, n: list(Counter(np.asarray(labels).tolist()).values()), "the counts came in order of first appearance "
     "(a Counter's order), not class order: read them back as counter[c] for c in range(num_classes) (or use "
     "np.bincount(labels, minlength=num_classes))"),
    (lambda labels, n: _bincount(labels, n + 1)[1:], "those are the counts of classes 1..num_classes: classes are numbered "
     "from 0, so count 0..num_classes-1 (range(num_classes))"),
)


@exercise("01.1", "count_classes", right=imbalance.class_counts, wrong=[
    Wrong(lambda labels, n: np.unique(labels, return_counts=True)[1], "returned"),  # drops empty classes
    Wrong(lambda labels, n: list(dict.fromkeys(labels)), "returned"),  # not counts at all
    Wrong(lambda labels, n: np.bincount(np.asarray(labels, dtype=np.int64), minlength=n).astype(float), "expected ints"),
    Wrong(lambda labels, n: [labels.count(k) for k in range(n)], "labels can be a numpy array"),  # works on lists only
    Wrong(lambda labels, n: np.bincount(np.asarray(labels, dtype=np.int64), minlength=n)[None], "shape (1, 3); expected a 1-D"),
])
def check_class_counts(answer: Answer) -> str:
    """Exercise 01.1: samples per class from the labels (a list or a numpy array), empty classes kept, in class order, as ints."""
    return answer.cases(CLASS_COUNTS_CASES, list, CLASS_COUNTS_MISTAKES)


IMBALANCE_RATIO_CASES: tuple[Case, ...] = (
    Case(([10000, 2000, 500],), 20.0, "largest count / smallest count"),
    Case(([5, 5],), 1.0, "a balanced dataset has ratio 1"),
    Case(([3, 12, 6],), 4.0, "the largest and smallest need not be the first and last class"),
    Case(([1, 100],), 100.0, "the ratio is largest / smallest, so it is at least 1"),
    Case(([3, 7],), 7 / 3, "7 / 3 is not a whole number: divide with /, not //"),
    Case(([2, 7],), 3.5, "7 / 2 = 3.5: return the ratio as it is, a float"),
    Case(([10, 0, 5],), ValueError, "a class with zero samples makes the ratio infinite: raise ValueError naming counts",
         names=("counts",)),
)


def _ratio_unnamed_error(counts: list[int]) -> float:
    if min(counts) == 0:
        raise ValueError("a class has no samples")
    return max(counts) / min(counts)


@exercise("01.2", "ratio", right=imbalance.imbalance_ratio, wrong=[
    Wrong(lambda c: c[0] / c[-1], "ratio([3, 12, 6]) returned 0.5"),  # first / last
    Wrong(lambda c: min(c) / max(c) if min(c) else 0.0, "returned 0.05"),  # upside down
    Wrong(lambda c: max(c) / min(c) if min(c) else float("inf"), "expected ValueError"),  # inf, no error
    Wrong(lambda c: max(c) // min(c) if min(c) else imbalance.imbalance_ratio(c), "of type int; expected a float"),  # floor division
    Wrong(lambda c: float(max(c) // min(c)) if min(c) else imbalance.imbalance_ratio(c), "ratio([3, 7]) returned 2.0"),
    Wrong(_ratio_unnamed_error, "'counts' missing"),
])
def check_imbalance_ratio(answer: Answer) -> str:
    """Exercise 01.2: the imbalance ratio, largest class over smallest."""
    return answer.cases(IMBALANCE_RATIO_CASES, float, type_hint=" (divide with /, not //, and return the ratio "
                     "itself, not round() or int() of it)")


def _split_by_class(labels: Any, val_fraction: float, rng: Any, count: Callable[[float], int] = round) -> tuple[np.ndarray, np.ndarray]:
    """Exercise 01.3's solution with the generator and the rounding as parameters, for its typical wrong answers."""
    labels = np.asarray(labels)
    val = []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        val.append(members[: count(val_fraction * len(members))])
    val_idx = np.sort(np.concatenate(val)).astype(np.int64)
    return np.setdiff1d(np.arange(len(labels)), val_idx), val_idx


@exercise("01.3", "stratified_split", right=lambda labels, f, seed: data.split_indices(labels, f, seed, True), wrong=[
    Wrong(lambda labels, f, seed: data.split_indices(labels, f, seed, stratify=False), "not stratified"),
    Wrong(lambda labels, f, seed: (np.arange(len(labels)), np.arange(0)), "in validation"),
    Wrong(lambda labels, f, seed: data.split_indices(labels, f, 0, True), "same split for 10 different seeds"),
    Wrong(lambda labels, f, seed: (np.ones(len(labels), bool), np.zeros(len(labels), bool)), "boolean masks"),
    Wrong(lambda labels, f, seed: _split_by_class(labels, f, np.random.default_rng()), "same seed"),  # unseeded generator
    Wrong(lambda labels, f, seed: _split_by_class(labels, f, np.random), "same seed"),  # numpy's global generator
    Wrong(lambda labels, f, seed: _split_by_class(labels, f, np.random.default_rng(seed), int), "int() truncates"),
    Wrong(lambda labels, f, seed: data.split_indices(labels, f, seed, True)[::-1], "return (train_idx, val_idx) in that order"),
    Wrong(lambda labels, f, seed: tuple(i.astype(float) for i in data.split_indices(labels, f, seed, True)), "return integer indices"),
])
def check_stratified_split(answer: Answer) -> str:
    """Exercise 01.3: every class puts round(val_fraction * its count) samples in validation, chosen by the seed."""
    for counts, fraction in SPLIT_SETUPS:
        _check_split_setup(answer, counts, fraction)
    return (f"{answer.name} put round(val_fraction * count) of every class in validation (halves to even, 0 where it rounds to 0), the same "
            "split for the same seed, a new one for a new seed")


# (class counts, val_fraction): 0.2 x 33 = 6.6 and 0.2 x 7 = 1.4 tell round, int() and ceil apart; 0.25 x 10 = 2.5 and
# 0.25 x 6 = 1.5 are halves, which Python's round() takes to the even neighbour (2 and 2), int(x + 0.5) up (3 and 2);
# 0.2 x 2 = 0.4 rounds to 0: that class keeps all its samples in training (max(1, ...) would add one)
SPLIT_SETUPS = (([200, 33, 7], 0.2), ([10, 6, 5], 0.25), ([40, 9, 2], 0.2))


def _check_split_setup(answer: Answer, counts: list[int], fraction: float) -> None:
    """Call the answer for seeds 0..9 and 0 again on shuffled labels with `counts`; Failed naming the first problem."""
    name = answer.name
    labels = np.repeat(np.arange(len(counts)), counts)
    np.random.default_rng(0).shuffle(labels)
    wanted = [round(fraction * count) for count in counts]
    splits = {}
    for seed in [*range(10), 0]:
        call = f"{name}(labels with counts {counts}, {fraction}, seed={seed})"
        with answer.calling(call):
            train_idx, val_idx = answer.value(labels, fraction, seed)
            train_idx, val_idx = np.asarray(train_idx), np.asarray(val_idx)
        if train_idx.dtype == bool or val_idx.dtype == bool:
            raise Failed(f"{call} returned boolean masks; return two arrays of indices")
        for part, indices in (("train_idx", train_idx), ("val_idx", val_idx)):
            if indices.size and indices.dtype.kind not in "iu":
                raise Failed(f"{call} returned {part} with dtype {indices.dtype}: return integer indices "
                             "(np.int64), which can index the labels")
        train_idx, val_idx = train_idx.astype(np.int64), val_idx.astype(np.int64)
        both = np.concatenate([train_idx, val_idx])
        if both.size and both.min() >= 0 and np.bincount(both, minlength=len(counts)).tolist() == counts:
            raise Failed(f"{call} returned the labels of the split (values 0..{len(counts) - 1}), not its indices: return "
                         "the index arrays themselves, not labels[train_idx], labels[val_idx]")
        positions = bool(val_idx.size) and val_idx.max() < max(counts)  # all below the largest class's count
        for part, indices in (("val_idx", val_idx), ("train_idx", train_idx)):
            if len(np.unique(indices)) < len(indices):
                raise Failed(f"{call}: {part} holds {len(indices) - len(np.unique(indices))} repeated indices; " + (
                    POSITIONS_HINT if positions else "rng.choice draws with replacement unless you pass replace=False "
                    "(or take rng.permutation(members)[:k])"))
        if len(np.intersect1d(train_idx, val_idx)):
            raise Failed(f"{call}: {len(np.intersect1d(train_idx, val_idx))} indices are in both train and validation")
        if sorted(np.concatenate([train_idx, val_idx]).tolist()) != list(range(len(labels))):
            raise Failed(f"{call}: train and validation together must hold every index 0..{len(labels) - 1} exactly once")
        if len(val_idx) > len(train_idx):
            raise Failed(f"{call}: the second array holds {len(val_idx)} of {len(labels)} indices, the first "
                         f"{len(train_idx)}: return (train_idx, val_idx) in that order")
        val_counts = np.bincount(labels[val_idx], minlength=len(counts)).tolist()
        if val_counts != wanted:
            raise Failed(f"{call} put {val_counts} samples per class in validation; expected round({fraction} * count) = "
                         f"{wanted}: {_count_hint(val_counts, counts, fraction, positions)}")
        split = tuple(np.sort(val_idx).tolist())
        if seed in splits and splits[seed] != split:
            raise Failed(f"{name} returned two different splits for the same seed={seed}: draw with "
                         "np.random.default_rng(seed), not an unseeded generator or np.random's global one, "
                         "so a split can be reproduced")
        splits[seed] = split
    if len(set(splits.values())) == 1:
        raise Failed(f"{name} returned the same split for 10 different seeds: shuffle each class with the seed")


POSITIONS_HINT = ("val_idx holds positions within each class (0..count-1), not dataset indices: map them back "
                  "with np.flatnonzero(labels == c)[positions]")


def _count_hint(val_counts: list[int], counts: list[int], fraction: float, positions: bool) -> str:
    """The likely mistake behind validation counts per class that are not round(fraction * count)."""
    if val_counts == [max(1, round(fraction * count)) for count in counts]:
        zero = next(count for count in counts if round(fraction * count) == 0)
        return (f"round({fraction} * {zero}) is 0, so that class puts none in validation: the task asks for exactly "
                "round(val_fraction * count), not max(1, ...)")
    if positions:
        return POSITIONS_HINT
    if val_counts == [int(fraction * count) for count in counts]:
        return f"int() truncates {fraction * counts[1]:g} to {int(fraction * counts[1])}: use round(val_fraction * count)"
    if val_counts == [int(fraction * count + 0.5) for count in counts]:
        return ("int(x + 0.5) rounds a half up (2.5 to 3); the task's round() is Python's, which rounds a half to the even "
                "neighbour (round(2.5) = 2, round(1.5) = 2): use round(val_fraction * count)")
    if val_counts == [math.ceil(fraction * count) for count in counts]:
        return f"math.ceil turns {fraction * counts[2]:g} into {math.ceil(fraction * counts[2])}: use round(val_fraction * count)"
    return "split each class on its own (a random split of all indices is not stratified)"


def _labels(*values: list[int]) -> tuple[np.ndarray, ...]:
    return tuple(np.array(v, dtype=np.int64) for v in values)


BALANCED_ACCURACY_CASES: tuple[Case, ...] = (
    Case(_labels([0] * 7 + [1] * 2 + [2], [0] * 10), 1 / 3,
         "always predicting the majority: recall 1, 0, 0, mean 1/3 (not the 0.7 accuracy)"),
    Case(_labels([0, 1, 2, 2], [0, 1, 2, 2]), 1.0, "all right: every class's recall is 1"),
    Case(_labels([0, 0, 1], [0, 1, 1]), 0.75, "class 0 recall 1/2, class 1 recall 1: mean 0.75"),
    Case(_labels([0, 0, 1], [0, 2, 1]), 0.75, "class 2 is predicted but never true: average over the classes in y_true only"),
    Case(_labels([0, 0, 2, 2], [0, 0, 2, 0]), 0.75, "class 1 never occurs: average the recalls of the classes present "
         "in y_true (0 and 2), not of range(max + 1)"),
    Case(_labels([2, 2, 2, 0], [2, 2, 0, 0]), 5 / 6, "class 0 recall 1, class 2 recall 2/3: mean 5/6"),
)


def _recalls(y_true: Any, y_pred: Any, classes: Any) -> list[float]:
    """Each class's hits over its true samples (0 for a class with none): the models of the wrong answers below."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return [float(np.sum((t == c) & (p == c)) / max(np.sum(t == c), 1)) for c in classes]


def _precisions(y_true: Any, y_pred: Any) -> list[float]:
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return [float(np.sum((t == c) & (p == c)) / max(np.sum(p == c), 1)) for c in np.unique(t)]


BALANCED_ACCURACY_MISTAKES: tuple[Mistake, ...] = (
    (lambda t, p: float(np.mean(np.asarray(t) == np.asarray(p))), "that is plain accuracy: average each class's recall "
     "instead, so every class has the same say"),
    (lambda t, p: float(np.mean(_precisions(t, p))), "that is the mean precision (of the samples predicted as c, the share "
     "right): recall divides by the samples whose true class is c"),
    (lambda t, p: float(np.mean(_recalls(t, p, np.union1d(t, p)))), "it averages over classes missing from y_true too: "
     "average over the classes present in y_true, np.unique(y_true), only"),
    (lambda t, p: float(np.mean(_recalls(t, p, range(int(np.max(t)) + 1)))), "it averages over classes missing from y_true "
     "too: average over the classes present in y_true, np.unique(y_true), only"),
    (lambda t, p: float(np.mean(_recalls(t, p, [c for c in np.unique(p) if c in t]))), "it averages over the classes in "
     "y_pred: average over the classes in y_true"),
    (lambda t, p: 100 * float(np.mean(_recalls(t, p, np.unique(t)))), "a percentage: return a fraction between 0 and 1"),
    (lambda t, p: float(np.mean(np.floor(_recalls(t, p, np.unique(t))))), "each class's recall came out as 0 or 1: divide "
     "with /, not //"),
    (lambda t, p: _recalls(t, p, np.unique(t)), "those are the per-class recalls: return their mean, one float"),
)


@exercise("01.4", "balanced_accuracy", right=lambda t, p: metrics.balanced_accuracy(t, p, 3), wrong=[
    Wrong(lambda t, p: metrics.accuracy(t, p), "returned 0.7"),
    Wrong(lambda t, p: float(np.mean([np.mean(np.asarray(t)[np.asarray(p) == c] == c) for c in np.unique(p)])),
          "returned 0.7"),  # precision
    Wrong(lambda t, p: float(np.mean(np.nan_to_num(metrics.per_class_recall(t, p, 3)))), "returned 0.5"),  # absent classes as 0
])
def check_balanced_accuracy(answer: Answer) -> str:
    """Exercise 01.4: balanced accuracy, the mean per-class recall."""
    return answer.cases(BALANCED_ACCURACY_CASES, float, BALANCED_ACCURACY_MISTAKES)
