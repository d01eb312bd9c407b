"""Lesson 01's self-checks: class counts, imbalance ratio, stratified split, balanced accuracy."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from helpers import data, imbalance, metrics
from helpers.checks.core import Answer, Case, Failed, Wrong, exercise

CLASS_COUNTS_CASES: tuple[Case, ...] = (
    Case(([0, 2, 2, 2], 3), [1, 0, 3], "class 1 has no sample and must still count 0"),
    Case(([1, 1], 4), [0, 2, 0, 0], "num_classes=4 means four counts, even when classes 0, 2 and 3 are absent"),
    Case(([2, 0, 2, 1, 2], 3), [1, 1, 3], "counts are in class order 0, 1, 2, not in order of appearance"),
    Case(([], 2), [0, 0], "no labels: every class counts 0"),
    Case((np.array([0, 2, 2, 2, 1]), 3), [1, 1, 3], "labels can be a numpy array, as in the lesson: count with np.bincount "
         "(or convert with np.asarray first), not with list methods"),
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
    return answer.cases(CLASS_COUNTS_CASES, kind=list)


IMBALANCE_RATIO_CASES: tuple[Case, ...] = (
    Case(([10000, 2000, 500],), 20.0, "largest count / smallest count"),
    Case(([5, 5],), 1.0, "a balanced dataset has ratio 1"),
    Case(([3, 12, 6],), 4.0, "the largest and smallest need not be the first and last class"),
    Case(([1, 100],), 100.0, "the ratio is largest / smallest, so it is at least 1"),
    Case(([3, 7],), 7 / 3, "7 / 3 is not a whole number: divide with /, not //"),
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
    return answer.cases(IMBALANCE_RATIO_CASES, kind=float, exact_float=True)


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
    name = answer.name
    counts = [200, 33, 7]  # 0.2 * 33 = 6.6 and 0.2 * 7 = 1.4: round, int() and ceil give different answers
    labels = np.repeat(np.arange(3), counts)
    np.random.default_rng(0).shuffle(labels)
    wanted = [round(0.2 * count) for count in counts]
    splits = {}
    for seed in [*range(10), 0]:
        call = f"{name}(labels with counts {counts}, 0.2, seed={seed})"
        with answer.calling(call):
            train_idx, val_idx = answer.value(labels, 0.2, seed)
            train_idx, val_idx = np.asarray(train_idx), np.asarray(val_idx)
        if train_idx.dtype == bool or val_idx.dtype == bool:
            raise Failed(f"{call} returned boolean masks; return two arrays of indices")
        for part, indices in (("train_idx", train_idx), ("val_idx", val_idx)):
            if indices.size and indices.dtype.kind not in "iu":
                raise Failed(f"{call} returned {part} with dtype {indices.dtype}: return integer indices "
                             "(np.int64), which can index the labels")
        train_idx, val_idx = train_idx.astype(np.int64), val_idx.astype(np.int64)
        if len(np.intersect1d(train_idx, val_idx)):
            raise Failed(f"{call}: {len(np.intersect1d(train_idx, val_idx))} indices are in both train and validation")
        if sorted(np.concatenate([train_idx, val_idx]).tolist()) != list(range(len(labels))):
            raise Failed(f"{call}: train and validation together must hold every index 0..{len(labels) - 1} exactly once")
        if len(val_idx) > len(train_idx):
            raise Failed(f"{call}: the second array holds {len(val_idx)} of {len(labels)} indices, the first "
                         f"{len(train_idx)}: return (train_idx, val_idx) in that order")
        val_counts = np.bincount(labels[val_idx], minlength=3).tolist()
        if val_counts != wanted:
            if val_counts == [int(0.2 * count) for count in counts]:
                hint = "int() truncates 6.6 to 6: use round(val_fraction * count)"
            elif val_counts == [math.ceil(0.2 * count) for count in counts]:
                hint = "math.ceil turns 1.4 into 2: use round(val_fraction * count)"
            else:
                hint = "split each class on its own (a random split of all indices is not stratified)"
            raise Failed(f"{call} put {val_counts} samples per class in validation; expected round(0.2 * count) = "
                         f"{wanted}: {hint}")
        split = tuple(np.sort(val_idx).tolist())
        if seed in splits and splits[seed] != split:
            raise Failed(f"{name} returned two different splits for the same seed={seed}: draw with "
                         "np.random.default_rng(seed), not an unseeded generator or np.random's global one, "
                         "so a split can be reproduced")
        splits[seed] = split
    if len(set(splits.values())) == 1:
        raise Failed(f"{name} returned the same split for 10 different seeds: shuffle each class with the seed")
    return f"{name} put round(0.2 * count) of every class in validation, the same split for the same seed, a new one for a new seed"


BALANCED_ACCURACY_CASES: tuple[Case, ...] = (
    Case(([0] * 7 + [1] * 2 + [2], [0] * 10), 1 / 3, "always predicting the majority: recall 1, 0, 0, mean 1/3 (not the 0.7 accuracy)"),
    Case(([0, 1, 2, 2], [0, 1, 2, 2]), 1.0, "all right: every class's recall is 1"),
    Case(([0, 0, 1], [0, 1, 1]), 0.75, "class 0 recall 1/2, class 1 recall 1: mean 0.75"),
    Case(([0, 0, 1], [0, 2, 1]), 0.75, "class 2 is predicted but never true: average over the classes in y_true only"),
)


@exercise("01.4", "balanced_accuracy", right=lambda t, p: metrics.balanced_accuracy(t, p, 3), wrong=[
    Wrong(lambda t, p: metrics.accuracy(t, p), "returned 0.7"),
    Wrong(lambda t, p: float(np.mean([np.mean(np.asarray(t)[np.asarray(p) == c] == c) for c in np.unique(p)])),
          "returned 0.7"),  # precision
    Wrong(lambda t, p: float(np.mean(np.nan_to_num(metrics.per_class_recall(t, p, 3)))), "returned 0.5"),  # absent classes as 0
])
def check_balanced_accuracy(answer: Answer) -> str:
    """Exercise 01.4: balanced accuracy, the mean per-class recall."""
    return answer.cases(BALANCED_ACCURACY_CASES, kind=float)
