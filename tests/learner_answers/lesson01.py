"""Lesson 01's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import math
from collections import Counter

import numpy as np

from helpers.checks.core import Wrong


# ================================================================ 01.1 count_classes(labels, num_classes)
def counts_via_unique(labels, num_classes):
    """np.unique drops classes that never occur."""
    return np.unique(labels, return_counts=True)[1]


def counts_bincount_no_minlength(labels, num_classes):
    """np.bincount without minlength: empty classes at the end go missing."""
    return np.bincount(np.asarray(labels))


def counts_in_first_seen_order(labels, num_classes):
    """Counter's values come in order of first appearance, not class order."""
    return list(Counter(np.asarray(labels).tolist()).values())


def counts_via_histogram(labels, num_classes):
    """np.histogram spans the labels' min..max, so bins shift when an edge class is empty."""
    return np.histogram(labels, bins=num_classes)[0]


def counts_as_fractions(labels, num_classes):
    """Returns each class's share (floats), not its count."""
    labels = np.asarray(labels)
    return np.bincount(labels, minlength=num_classes) / len(labels)


def counts_as_dict(labels, num_classes):
    """A {class: count} dict that also drops empty classes."""
    return dict(sorted(Counter(np.asarray(labels).tolist()).items()))


def counts_off_by_one_range(labels, num_classes):
    """range(num_classes - 1) leaves out the last class."""
    labels = np.asarray(labels)
    return [int(np.sum(labels == c)) for c in range(num_classes - 1)]


def counts_as_floats(labels, num_classes):
    """Right numbers, but float counts from np.zeros, not ints."""
    labels = np.asarray(labels)
    counts = np.zeros(num_classes)
    for label in labels:
        counts[label] += 1
    return counts


def counts_unique_padded_at_end(labels, num_classes):
    """np.unique's counts padded with zeros at the end: a missing middle class shifts the rest."""
    counts = np.unique(labels, return_counts=True)[1]
    return np.concatenate([counts, np.zeros(num_classes - len(counts), dtype=counts.dtype)])


def counts_from_class_one(labels, num_classes):
    """Counts classes 1..num_classes, as if classes were numbered from 1 (issue 39)."""
    labels = list(np.asarray(labels).tolist())
    return [labels.count(c) for c in range(1, num_classes + 1)]


# ---------------------------------------------------------------- 01.1 right answers
def counts_as_python_ints(labels, num_classes):
    """Right, as a list of Python ints."""
    labels = np.asarray(labels)
    return [int(np.sum(labels == c)) for c in range(num_classes)]


def counts_as_numpy_int64(labels, num_classes):
    """Right, np.bincount with minlength (an int64 array)."""
    return np.bincount(np.asarray(labels), minlength=num_classes)


def counts_from_counter(labels, num_classes):
    """Right, a Counter read back in class order, as a tuple of ints."""
    seen = Counter(np.asarray(labels).tolist())
    return tuple(seen.get(c, 0) for c in range(num_classes))


# ================================================================ 01.2 ratio(counts)
def _refuse_zero(counts):
    if min(counts) == 0:
        raise ValueError(f"counts has an empty class: {list(counts)}")


def ratio_floor_division(counts):
    """// floor division: 10 / 3 becomes 3, and an int."""
    _refuse_zero(counts)
    return max(counts) // min(counts)


def ratio_returns_inf(counts):
    """numpy division by a zero count returns inf instead of raising ValueError."""
    counts = np.asarray(counts, dtype=float)
    with np.errstate(divide="ignore"):
        return float(counts.max() / counts.min())


def ratio_inverted(counts):
    """Smallest over largest: a ratio at most 1."""
    _refuse_zero(counts)
    return min(counts) / max(counts)


def ratio_first_over_last(counts):
    """counts[0] / counts[-1]: only right when counts are sorted largest first."""
    _refuse_zero(counts)
    return counts[0] / counts[-1]


def ratio_vague_error(counts):
    """Raises ValueError without naming counts or its value."""
    if min(counts) == 0:
        raise ValueError("division by zero")
    return max(counts) / min(counts)


def ratio_skips_empty_classes(counts):
    """Filters out the zero counts, returning a finite ratio instead of raising."""
    nonzero = [c for c in counts if c > 0]
    return max(nonzero) / min(nonzero)


def ratio_rounded(counts):
    """round()s the ratio to an int."""
    _refuse_zero(counts)
    return round(max(counts) / min(counts))


def ratio_zero_division_error(counts):
    """Lets Python raise ZeroDivisionError, not ValueError."""
    return float(max(counts)) / float(min(counts))


def ratio_over_the_mean(counts):
    """Largest over the mean count, not over the smallest."""
    _refuse_zero(counts)
    return max(counts) / (sum(counts) / len(counts))


# ---------------------------------------------------------------- 01.2 right answers
def ratio_numpy_float(counts):
    """Right, as an np.float64."""
    counts = np.asarray(counts)
    if counts.min() == 0:
        raise ValueError(f"counts={counts.tolist()} has a class with no samples")
    return counts.max() / counts.min()


def ratio_sorted(counts):
    """Right, from the sorted counts."""
    ordered = sorted(int(c) for c in counts)
    if ordered[0] <= 0:
        raise ValueError(f"counts {list(counts)} has a zero count: the ratio would be infinite")
    return ordered[-1] / ordered[0]


# ================================================================ 01.3 stratified_split(labels, val_fraction, seed)
def split_not_stratified(labels, val_fraction, seed):
    """A plain random split of all indices: a rare class can miss validation."""
    labels = np.asarray(labels)
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = round(val_fraction * len(labels))
    return order[cut:], order[:cut]


def _per_class(labels, val_fraction, seed, take):
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        chosen = take(rng, idx, val_fraction)
        val.append(chosen)
        train.append(np.setdiff1d(idx, chosen))
    return np.concatenate(train), np.concatenate(val)


def split_int_instead_of_round(labels, val_fraction, seed):
    """int() truncates: 0.2 x 7 = 1.4 -> 1 fine, but 0.2 x 9 = 1.8 -> 1, not 2."""
    return _per_class(labels, val_fraction, seed,
                      lambda rng, idx, f: rng.permutation(idx)[:int(f * len(idx))])


def split_ceil(labels, val_fraction, seed):
    """math.ceil: 0.2 x 6 = 1.2 -> 2 samples, not 1."""
    return _per_class(labels, val_fraction, seed,
                      lambda rng, idx, f: rng.permutation(idx)[:math.ceil(f * len(idx))])


def split_first_of_each_class(labels, val_fraction, seed):
    """Takes the first round(f x n) indices of each class: not random, the seed does nothing."""
    return _per_class(labels, val_fraction, seed, lambda rng, idx, f: idx[:round(f * len(idx))])


def split_unseeded(labels, val_fraction, seed):
    """np.random.default_rng() without the seed: a different split every call."""
    return _per_class(labels, val_fraction, None,
                      lambda rng, idx, f: rng.permutation(idx)[:round(f * len(idx))])


def split_choice_with_replacement(labels, val_fraction, seed):
    """rng.choice defaults to replace=True: validation holds repeats, and misses its count."""
    return _per_class(labels, val_fraction, seed,
                      lambda rng, idx, f: rng.choice(idx, size=round(f * len(idx))))


def split_returns_masks(labels, val_fraction, seed):
    """Returns boolean masks, not index arrays."""
    train, val = split_right_choice(labels, val_fraction, seed)
    n = len(labels)
    return np.isin(np.arange(n), train), np.isin(np.arange(n), val)


def split_swapped(labels, val_fraction, seed):
    """Returns (val_idx, train_idx): the order swapped."""
    train, val = split_right_choice(labels, val_fraction, seed)
    return val, train


def split_positions_within_class(labels, val_fraction, seed):
    """Validation holds positions within each class, never mapped back to dataset indices."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    val = []
    for c in np.unique(labels):
        n = int(np.sum(labels == c))
        val.append(rng.permutation(n)[:round(val_fraction * n)])
    val = np.unique(np.concatenate(val))
    return np.setdiff1d(np.arange(len(labels)), val), val


def split_misses_last_class(labels, val_fraction, seed):
    """range(labels.max()) skips the last class: its indices are in neither split."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    train, val = [], []
    for c in range(labels.max()):
        idx = rng.permutation(np.flatnonzero(labels == c))
        k = round(val_fraction * len(idx))
        val.append(idx[:k])
        train.append(idx[k:])
    return np.concatenate(train), np.concatenate(val)


def split_half_up(labels, val_fraction, seed):
    """int(f * n + 0.5), the school rounding: 2.5 -> 3, where the task's round() gives 2 (issue 39)."""
    return _per_class(labels, val_fraction, seed,
                      lambda rng, idx, f: rng.permutation(idx)[:int(f * len(idx) + 0.5)])


def split_positions_with_repeats(labels, val_fraction, seed):
    """Positions within each class as validation, concatenated as they are: classes share positions (issue 39)."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    val = np.concatenate([rng.permutation(int(np.sum(labels == c)))[:round(val_fraction * np.sum(labels == c))]
                          for c in np.unique(labels)])
    return np.setdiff1d(np.arange(len(labels)), val), val


def split_at_least_one(labels, val_fraction, seed):
    """max(1, round(f x n)): a class whose share rounds to 0 still sends one sample to validation (issue 39)."""
    return _per_class(labels, val_fraction, seed,
                      lambda rng, idx, f: rng.permutation(idx)[:max(1, round(f * len(idx)))])


def split_returns_labels(labels, val_fraction, seed):
    """Returns labels[train], labels[val]: the classes of the split, not its indices (issue 39)."""
    train, val = split_right_choice(labels, val_fraction, seed)
    labels = np.asarray(labels)
    return labels[train], labels[val]


# ---------------------------------------------------------------- 01.3 right answers
def split_right_choice(labels, val_fraction, seed):
    """Right, with rng.choice(replace=False) per class."""
    return _per_class(labels, val_fraction, seed,
                      lambda rng, idx, f: rng.choice(idx, size=round(f * len(idx)), replace=False))


def split_sorted_lists(labels, val_fraction, seed):
    """Right, a shuffled-index pass per class, both arrays sorted."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(seed)
    val = []
    for c in sorted(set(labels.tolist())):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        val.extend(idx[:round(val_fraction * len(idx))].tolist())
    is_val = np.zeros(len(labels), dtype=bool)
    is_val[val] = True
    return np.flatnonzero(~is_val), np.flatnonzero(is_val)


# ================================================================ 01.4 balanced_accuracy(y_true, y_pred)
def balanced_plain_accuracy(y_true, y_pred):
    """Plain accuracy: the majority predictor scores high."""
    return float(np.mean(np.asarray(y_true) == np.asarray(y_pred)))


def balanced_over_all_seen_classes(y_true, y_pred):
    """Averages over classes in y_true or y_pred: a class only predicted adds a recall of 0."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    recalls = []
    for c in np.union1d(y_true, y_pred):
        count = np.sum(y_true == c)
        recalls.append(np.sum((y_true == c) & (y_pred == c)) / max(count, 1))
    return float(np.mean(recalls))


def balanced_precision(y_true, y_pred):
    """Per-class precision (of the predictions of c, the share right), not recall."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    scores = []
    for c in np.unique(y_true):
        predicted = y_pred == c
        scores.append(np.sum(predicted & (y_true == c)) / max(np.sum(predicted), 1))
    return float(np.mean(scores))


def balanced_range_of_max_label(y_true, y_pred):
    """Classes 0..max(y_true): a class absent from y_true counts as recall 0."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    recalls = [np.sum((y_true == c) & (y_pred == c)) / max(np.sum(y_true == c), 1)
               for c in range(int(y_true.max()) + 1)]
    return float(np.mean(recalls))


def balanced_percent(y_true, y_pred):
    """Returns a percentage (0-100), not a fraction."""
    return 100 * balanced_right_loop(y_true, y_pred)


def balanced_floor_division(y_true, y_pred):
    """// floor division per class: each recall is 0 or 1."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    recalls = [int(np.sum((y_true == c) & (y_pred == c))) // int(np.sum(y_true == c))
               for c in np.unique(y_true)]
    return sum(recalls) / len(recalls)


def balanced_list_of_recalls(y_true, y_pred):
    """Returns the per-class recalls, not their mean."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    return [float(np.mean(y_pred[y_true == c] == c)) for c in np.unique(y_true)]


def balanced_classes_from_predictions(y_true, y_pred):
    """Averages over the classes in y_pred: the majority predictor scores 1.0."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    recalls = [np.mean(y_pred[y_true == c] == c) for c in np.unique(y_pred) if np.any(y_true == c)]
    return float(np.mean(recalls))


# ---------------------------------------------------------------- 01.4 right answers
def balanced_right_loop(y_true, y_pred):
    """Right, a loop over np.unique(y_true)."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    return float(np.mean([np.mean(y_pred[y_true == c] == c) for c in np.unique(y_true)]))


def balanced_sample_weights(y_true, y_pred):
    """Right, as a weighted accuracy with weights 1 / (C x count), an np.float64."""
    y_true, y_pred = np.asarray(y_true), np.asarray(y_pred)
    classes, inverse, counts = np.unique(y_true, return_inverse=True, return_counts=True)
    weights = 1.0 / (len(classes) * counts[inverse])
    return np.sum(weights * (y_true == y_pred))


WRONG = {
    "01.1": [
        Wrong(counts_via_unique, 'np.unique and Counter leave it out'),
        Wrong(counts_bincount_no_minlength, 'num_classes=4 means four counts'),
        Wrong(counts_in_first_seen_order, 'in order of first appearance'),
        Wrong(counts_via_histogram, 'np.histogram spreads its bins'),
        Wrong(counts_as_fractions, 'expected ints'),
        Wrong(counts_as_dict, 'a dict; expected a list or array'),
        Wrong(counts_off_by_one_range, 'the last class is missing'),
        Wrong(counts_as_floats, 'expected ints'),
        Wrong(counts_unique_padded_at_end, 'zeros went to the end'),
        Wrong(counts_from_class_one, 'classes are numbered from 0'),
    ],
    "01.2": [
        Wrong(ratio_floor_division, 'divide with /, not //'),
        Wrong(ratio_returns_inf, 'expected ValueError'),
        Wrong(ratio_inverted, 'largest count / smallest count'),
        Wrong(ratio_first_over_last, 'need not be the first and last class'),
        Wrong(ratio_vague_error, "'counts' missing"),
        Wrong(ratio_skips_empty_classes, 'expected ValueError'),
        Wrong(ratio_rounded, 'not round() or int()'),
        Wrong(ratio_zero_division_error, 'expected ValueError'),
        Wrong(ratio_over_the_mean, 'largest count / smallest count'),
    ],
    "01.3": [
        Wrong(split_not_stratified, 'not stratified'),
        Wrong(split_int_instead_of_round, 'int() truncates'),
        Wrong(split_ceil, 'math.ceil turns 1.4 into 2'),
        Wrong(split_first_of_each_class, 'same split for 10 different seeds'),
        Wrong(split_unseeded, 'two different splits for the same seed'),
        Wrong(split_choice_with_replacement, 'replace=False'),
        Wrong(split_returns_masks, 'boolean masks'),
        Wrong(split_swapped, '(train_idx, val_idx) in that order'),
        Wrong(split_positions_within_class, 'positions within each class'),
        Wrong(split_misses_last_class, 'every index'),
        Wrong(split_half_up, 'rounds a half to the even neighbour'),
        Wrong(split_positions_with_repeats, 'positions within each class'),
        Wrong(split_at_least_one, 'max(1, ...)'),
        Wrong(split_returns_labels, 'the labels of the split'),
    ],
    "01.4": [
        Wrong(balanced_plain_accuracy, 'plain accuracy'),
        Wrong(balanced_over_all_seen_classes, 'classes missing from y_true'),
        Wrong(balanced_precision, 'mean precision'),
        Wrong(balanced_range_of_max_label, 'classes missing from y_true'),
        Wrong(balanced_percent, 'a percentage'),
        Wrong(balanced_floor_division, 'not //'),
        Wrong(balanced_list_of_recalls, 'per-class recalls: return their mean'),
        Wrong(balanced_classes_from_predictions, 'averages over the classes in y_pred'),
    ],
}
RIGHT = {
    "01.1": [counts_as_python_ints, counts_as_numpy_int64, counts_from_counter],
    "01.2": [ratio_numpy_float, ratio_sorted],
    "01.3": [split_right_choice, split_sorted_lists],
    "01.4": [balanced_right_loop, balanced_sample_weights],
}
