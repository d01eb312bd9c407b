"""Held-out wrong answers to lesson 01's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import collections
import math

import numpy as np


# ---- 01.1 count_classes(labels, num_classes)

def _reference_count_classes(labels, num_classes: int):
    """Samples per class 0..num_classes-1, empty classes 0."""
    return np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes)


def counts_with_unique(labels, num_classes: int):
    """np.unique's counts: a class with no sample is silently dropped."""
    return np.unique(labels, return_counts=True)[1]


def bincount_without_minlength(labels, num_classes: int):
    """bincount without minlength: drops empty classes above the largest label."""
    return np.bincount(np.asarray(labels, dtype=np.int64))


def counter_in_first_seen_order(labels, num_classes: int):
    """Counter values: in order of first appearance, not class order, empty classes missing."""
    return [int(n) for n in collections.Counter(np.asarray(labels).tolist()).values()]


def histogram_over_data_range(labels, num_classes: int):
    """np.histogram with num_classes bins spans min..max of the data, not the classes."""
    return np.histogram(labels, bins=num_classes)[0]


def shares_not_counts(labels, num_classes: int):
    """Returns each class's fraction of the samples instead of its count."""
    labels = np.asarray(labels, dtype=np.int64)
    return np.bincount(labels, minlength=num_classes) / max(len(labels), 1)


# ---- 01.2 ratio(counts)

def _reference_ratio(counts) -> float:
    """Largest over smallest, ValueError on a zero count."""
    array = np.asarray(counts)
    if (array == 0).any():
        raise ValueError(f"counts has a class with zero samples: {counts!r}")
    return float(array.max() / array.min())


def numpy_ratio_returns_inf(counts) -> float:
    """numpy max/min: a zero class gives inf (with a warning) instead of ValueError."""
    array = np.asarray(counts, dtype=float)
    with np.errstate(divide="ignore"):
        return float(array.max() / array.min())


def python_ratio_zero_division(counts) -> float:
    """Plain max/min: a zero class raises ZeroDivisionError, not ValueError."""
    return max(counts) / min(counts)


def smallest_over_largest(counts) -> float:
    """Inverted: smallest over largest, a value in (0, 1]."""
    array = np.asarray(counts)
    if (array == 0).any():
        raise ValueError(f"counts has a class with zero samples: {counts!r}")
    return float(array.min() / array.max())


def floor_division(counts) -> float:
    """Integer division: 3 / 2 comes out 1."""
    array = np.asarray(counts)
    if (array == 0).any():
        raise ValueError(f"counts has a class with zero samples: {counts!r}")
    return int(array.max() // array.min())


def ignores_empty_classes(counts) -> float:
    """Skips zero counts and divides by the smallest non-zero one instead of raising."""
    array = np.asarray(counts)
    present = array[array > 0]
    return float(present.max() / present.min())


def largest_over_mean(counts) -> float:
    """Largest count over the mean count, not over the smallest."""
    array = np.asarray(counts, dtype=float)
    if (array == 0).any():
        raise ValueError(f"counts has a class with zero samples: {counts!r}")
    return float(array.max() / array.mean())


# ---- 01.3 stratified_split(labels, val_fraction, seed)

def _reference_stratified_split(labels, val_fraction: float, seed: int):
    """Per class: round(fraction x count) random indices to validation."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        n_val = round(val_fraction * len(members))
        val.append(members[:n_val])
        train.append(members[n_val:])
    empty = np.array([], dtype=np.int64)
    return (np.concatenate(train) if train else empty, np.concatenate(val) if val else empty)


def random_split_not_stratified(labels, val_fraction: float, seed: int):
    """One random split of all indices: a rare class can miss validation."""
    n = len(labels)
    order = np.random.default_rng(seed).permutation(n)
    n_val = round(val_fraction * n)
    return order[n_val:], order[:n_val]


def truncates_with_int(labels, val_fraction: float, seed: int):
    """int() instead of round(): rare classes lose their validation sample."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        n_val = int(val_fraction * len(members))
        val.append(members[:n_val])
        train.append(members[n_val:])
    return np.concatenate(train), np.concatenate(val)


def ceil_to_keep_one(labels, val_fraction: float, seed: int):
    """math.ceil so every class has a validation sample: more than round(fraction x count)."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == c))
        n_val = math.ceil(val_fraction * len(members))
        val.append(members[:n_val])
        train.append(members[n_val:])
    return np.concatenate(train), np.concatenate(val)


def first_of_each_class(labels, val_fraction: float, seed: int):
    """Takes each class's first indices for validation: not random, seed ignored."""
    labels = np.asarray(labels)
    train, val = [], []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        n_val = round(val_fraction * len(members))
        val.append(members[:n_val])
        train.append(members[n_val:])
    return np.concatenate(train), np.concatenate(val)


def choice_with_replacement(labels, val_fraction: float, seed: int):
    """rng.choice defaults to replace=True: validation repeats indices, the split loses some."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(labels):
        members = np.flatnonzero(labels == c)
        chosen = rng.choice(members, size=round(val_fraction * len(members)))
        val.append(chosen)
        train.append(np.setdiff1d(members, chosen))
    return np.concatenate(train), np.concatenate(val)


def returns_val_first(labels, val_fraction: float, seed: int):
    """Right split, returned as (val_idx, train_idx)."""
    train, val = _reference_stratified_split(labels, val_fraction, seed)
    return val, train


# ---- 01.4 balanced_accuracy(y_true, y_pred)

def _reference_balanced_accuracy(y_true, y_pred) -> float:
    """Mean recall over the classes present in y_true."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    return float(np.mean([np.mean(y_pred[y_true == c] == c) for c in np.unique(y_true)]))


def plain_accuracy(y_true, y_pred) -> float:
    """Plain accuracy: the majority-class predictor scores high."""
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def classes_from_both_arrays(y_true, y_pred) -> float:
    """Averages over classes in y_true or y_pred: a predicted-only class adds a recall of 0."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    recalls = []
    for c in np.union1d(y_true, y_pred):
        members = y_true == c
        recalls.append(float(np.mean(y_pred[members] == c)) if members.any() else 0.0)
    return float(np.mean(recalls))


def classes_zero_to_max_label(y_true, y_pred) -> float:
    """Averages over 0..max label: a class absent from y_true counts as recall 0."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    size = int(max(y_true.max(), y_pred.max())) + 1
    hits = np.bincount(y_true[y_true == y_pred], minlength=size)
    support = np.bincount(y_true, minlength=size)
    return float(np.mean(hits / np.maximum(support, 1)))


def mean_precision(y_true, y_pred) -> float:
    """Per-class precision (fraction of predictions of c that are right), not recall."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    scores = []
    for c in np.unique(y_true):
        predicted = y_pred == c
        scores.append(float(np.mean(y_true[predicted] == c)) if predicted.any() else 0.0)
    return float(np.mean(scores))


def as_percent(y_true, y_pred) -> float:
    """Right mean recall, returned in percent."""
    return 100.0 * _reference_balanced_accuracy(y_true, y_pred)


HELDOUT = {
    "01.1": [counts_with_unique, bincount_without_minlength, counter_in_first_seen_order,
             histogram_over_data_range, shares_not_counts],
    "01.2": [numpy_ratio_returns_inf, python_ratio_zero_division, smallest_over_largest, floor_division,
             ignores_empty_classes, largest_over_mean],
    "01.3": [random_split_not_stratified, truncates_with_int, ceil_to_keep_one, first_of_each_class,
             choice_with_replacement, returns_val_first],
    "01.4": [plain_accuracy, classes_from_both_arrays, classes_zero_to_max_label, mean_precision, as_percent],
}
