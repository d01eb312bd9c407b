"""Lesson 01's self-checks: class counts, imbalance ratio, stratified split, balanced accuracy."""
from __future__ import annotations

import numpy as np

from helpers import data, imbalance, metrics
from helpers.checks.core import Answer, Case, Failed, Wrong, exercise

CLASS_COUNTS_CASES: tuple[Case, ...] = (
    Case(([0, 2, 2, 2], 3), [1, 0, 3], "class 1 has no sample and must still count 0"),
    Case(([1, 1], 4), [0, 2, 0, 0], "num_classes=4 means four counts, even when classes 0, 2 and 3 are absent"),
    Case(([2, 0, 2, 1, 2], 3), [1, 1, 3], "counts are in class order 0, 1, 2, not in order of appearance"),
    Case(([], 2), [0, 0], "no labels: every class counts 0"),
)


@exercise("01.1", "count_classes", right=imbalance.class_counts, wrong=[
    Wrong(lambda labels, n: np.unique(labels, return_counts=True)[1], "returned"),  # drops empty classes
    Wrong(lambda labels, n: list(dict.fromkeys(labels)), "returned"),  # not counts at all
])
def check_class_counts(answer: Answer) -> str:
    """Exercise 01.1: samples per class from the labels, empty classes kept, in class order."""
    return answer.cases(CLASS_COUNTS_CASES, kind=list)


IMBALANCE_RATIO_CASES: tuple[Case, ...] = (
    Case(([10000, 2000, 500],), 20.0, "largest count / smallest count"),
    Case(([5, 5],), 1.0, "a balanced dataset has ratio 1"),
    Case(([3, 12, 6],), 4.0, "the largest and smallest need not be the first and last class"),
    Case(([1, 100],), 100.0, "the ratio is largest / smallest, so it is at least 1"),
    Case(([10, 0, 5],), ValueError, "a class with zero samples makes the ratio infinite: raise ValueError naming counts"),
)


@exercise("01.2", "ratio", right=imbalance.imbalance_ratio, wrong=[
    Wrong(lambda c: c[0] / c[-1], "ratio([3, 12, 6]) returned 0.5"),  # first / last
    Wrong(lambda c: min(c) / max(c) if min(c) else 0.0, "returned 0.05"),  # upside down
    Wrong(lambda c: max(c) / min(c) if min(c) else float("inf"), "expected ValueError"),  # inf, no error
])
def check_imbalance_ratio(answer: Answer) -> str:
    """Exercise 01.2: the imbalance ratio, largest class over smallest."""
    return answer.cases(IMBALANCE_RATIO_CASES, kind=float)


@exercise("01.3", "stratified_split", right=lambda labels, f, seed: data.split_indices(labels, f, seed, True), wrong=[
    Wrong(lambda labels, f, seed: data.split_indices(labels, f, seed, stratify=False), "not stratified"),
    Wrong(lambda labels, f, seed: (np.arange(len(labels)), np.arange(0)), "in validation"),
    Wrong(lambda labels, f, seed: data.split_indices(labels, f, 0, True), "same split for 10 different seeds"),
    Wrong(lambda labels, f, seed: (np.ones(len(labels), bool), np.zeros(len(labels), bool)), "boolean masks"),
])
def check_stratified_split(answer: Answer) -> str:
    """Exercise 01.3: every class gets its share of the validation set, for every seed."""
    name = answer.name
    labels = np.repeat(np.arange(3), [200, 30, 5])
    np.random.default_rng(0).shuffle(labels)
    val_sets = set()
    for seed in range(10):
        call = f"{name}(labels with counts [200, 30, 5], 0.2, seed={seed})"
        with answer.calling(call):
            train_idx, val_idx = answer.value(labels, 0.2, seed)
            train_idx, val_idx = np.asarray(train_idx), np.asarray(val_idx)
        if train_idx.dtype == bool or val_idx.dtype == bool:
            raise Failed(f"{call} returned boolean masks; return two arrays of indices")
        both = np.concatenate([train_idx, val_idx]).astype(np.int64)
        if len(np.intersect1d(train_idx, val_idx)):
            raise Failed(f"{call}: {len(np.intersect1d(train_idx, val_idx))} indices are in both train and validation")
        if sorted(both.tolist()) != list(range(len(labels))):
            raise Failed(f"{call}: train and validation together must hold every index 0..{len(labels) - 1} exactly once")
        val_counts = np.bincount(labels[val_idx], minlength=3)
        wanted = 0.2 * np.array([200, 30, 5])
        if np.any(np.abs(val_counts - wanted) >= 1):
            raise Failed(f"{call} put {val_counts.tolist()} samples per class in validation; "
                         f"stratified means about {wanted.tolist()} (a random split of all indices is not stratified)")
        val_sets.add(tuple(np.sort(val_idx).tolist()))
    if len(val_sets) == 1:
        raise Failed(f"{name} returned the same split for 10 different seeds: shuffle each class with the seed")
    return f"{name} gave every class its share of validation for 10 seeds"


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
