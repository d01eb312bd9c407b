"""Held-out wrong answers to lesson 02's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import SubsetRandomSampler, WeightedRandomSampler


# ---- 02.1 per_sample_weights(labels)

def _reference_per_sample_weights(labels):
    """1 / count of each sample's class, one weight per sample."""
    labels = np.asarray(labels, dtype=np.int64)
    return 1.0 / np.bincount(labels)[labels]


def one_weight_per_class(labels):
    """Lesson 02's trap: 1 / count per class, length C instead of N."""
    return 1.0 / np.bincount(np.asarray(labels, dtype=np.int64))


def frequency_not_inverse(labels):
    """The class count per sample: the majority gets the most weight."""
    labels = np.asarray(labels, dtype=np.int64)
    return np.bincount(labels)[labels].astype(float)


def unique_counts_indexed_by_label(labels):
    """np.unique's counts indexed by the label: out of step (or out of range) once a class is missing."""
    labels = np.asarray(labels, dtype=np.int64)
    counts = np.unique(labels, return_counts=True)[1]
    return 1.0 / counts[labels]


def integer_reciprocal(labels):
    """np.reciprocal of an int array: every class with more than one sample gets weight 0."""
    labels = np.asarray(labels, dtype=np.int64)
    return np.reciprocal(np.bincount(labels)[labels])


def inverse_square_root(labels):
    """1 / sqrt(count): the rare classes still carry less total weight."""
    labels = np.asarray(labels, dtype=np.int64)
    return 1.0 / np.sqrt(np.bincount(labels)[labels])


# ---- 02.2 balanced_sampler(labels, num_samples)

def _reference_balanced_sampler(labels, num_samples: int):
    """Inverse-frequency weight per sample, with replacement, num_samples draws."""
    weights = torch.as_tensor(_reference_per_sample_weights(labels), dtype=torch.float64)
    return WeightedRandomSampler(weights, num_samples=num_samples, replacement=True)


def colleague_class_weights(labels, num_samples: int):
    """Keeps the colleague's bug: one weight per class, so only indices 0..C-1 are drawn."""
    weights = torch.as_tensor(1.0 / np.bincount(np.asarray(labels, dtype=np.int64)), dtype=torch.float64)
    return WeightedRandomSampler(weights, num_samples=num_samples)


def without_replacement(labels, num_samples: int):
    """replacement=False: the rare classes run out, later draws are the majority."""
    weights = torch.as_tensor(_reference_per_sample_weights(labels), dtype=torch.float64)
    return WeightedRandomSampler(weights, num_samples=num_samples, replacement=False)


def epoch_size_ignored(labels, num_samples: int):
    """Draws len(labels) per epoch whatever num_samples says."""
    weights = torch.as_tensor(_reference_per_sample_weights(labels), dtype=torch.float64)
    return WeightedRandomSampler(weights, num_samples=len(labels))


def weights_by_frequency(labels, num_samples: int):
    """Weights proportional to the class count: the majority is drawn even more."""
    labels = np.asarray(labels, dtype=np.int64)
    weights = torch.as_tensor(np.bincount(labels)[labels], dtype=torch.float64)
    return WeightedRandomSampler(weights, num_samples=num_samples)


def fixed_undersampled_subset(labels, num_samples: int):
    """Keeps the first min-count samples per class: balanced, but not the whole dataset nor num_samples long."""
    labels = np.asarray(labels, dtype=np.int64)
    smallest = np.bincount(labels)[np.bincount(labels) > 0].min()
    keep = np.concatenate([np.flatnonzero(labels == c)[:smallest] for c in np.unique(labels)])
    return SubsetRandomSampler(keep.tolist())


# ---- 02.3 my_focal_loss(logits, target, gamma)

def _reference_focal_loss(logits: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    """mean(-(1 - p_t)^gamma log p_t) with log_softmax over classes."""
    log_pt = F.log_softmax(logits, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
    return (-(1 - log_pt.exp()) ** gamma * log_pt).mean()


def summed_not_mean(logits, target, gamma):
    """Sums over the batch instead of averaging."""
    log_pt = F.log_softmax(logits, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
    return (-(1 - log_pt.exp()) ** gamma * log_pt).sum()


def missing_minus_sign(logits, target, gamma):
    """Drops the minus sign: the loss comes out negative."""
    log_pt = F.log_softmax(logits, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
    return ((1 - log_pt.exp()) ** gamma * log_pt).mean()


def modulates_with_p_t(logits, target, gamma):
    """p_t^gamma instead of (1 - p_t)^gamma: up-weights the easy samples."""
    log_pt = F.log_softmax(logits, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
    return (-(log_pt.exp()) ** gamma * log_pt).mean()


def softmax_over_batch(logits, target, gamma):
    """log_softmax over dim 0 (the batch) instead of the classes."""
    log_pt = F.log_softmax(logits, dim=0).gather(1, target.unsqueeze(1)).squeeze(1)
    return (-(1 - log_pt.exp()) ** gamma * log_pt).mean()


def every_class_not_true_class(logits, target, gamma):
    """Averages the focal term over every class's probability, never gathering the true class."""
    log_p = F.log_softmax(logits, dim=1)
    return (-(1 - log_p.exp()) ** gamma * log_p).mean()


def returns_python_float(logits, target, gamma):
    """Right value as a Python float (.item()): nothing to backpropagate."""
    return _reference_focal_loss(logits, target, gamma).item()


# ---- 02.4 num_samples_for_coverage(counts, coverage)

def _reference_num_samples_for_coverage(counts, coverage: float) -> int:
    """Smallest S with 1 - (1 - 1/(C n))^S >= coverage, exact expression."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be strictly between 0 and 1, got {coverage!r}")
    c, n = len(counts), max(counts)
    q = 1.0 - 1.0 / (c * n)
    if q == 0.0:
        return 1
    s = max(0, math.ceil(math.log(1 - coverage) / math.log(q)))
    while 1 - q ** s < coverage:
        s += 1
    while s > 0 and 1 - q ** (s - 1) >= coverage:
        s -= 1
    return int(s)


def exponential_approximation(counts, coverage: float) -> int:
    """Uses 1 - exp(-S/(C n)), which the task says can be one draw off."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be strictly between 0 and 1, got {coverage!r}")
    return math.ceil(-len(counts) * max(counts) * math.log(1 - coverage))


def rarest_class_size(counts, coverage: float) -> int:
    """Uses the smallest class's size for n instead of the largest."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be strictly between 0 and 1, got {coverage!r}")
    return math.ceil(math.log(1 - coverage) / math.log(1 - 1 / (len(counts) * min(counts))))


def whole_dataset_size(counts, coverage: float) -> int:
    """Uses the dataset size N for C n: as if draws were uniform."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be strictly between 0 and 1, got {coverage!r}")
    return math.ceil(math.log(1 - coverage) / math.log(1 - 1 / sum(counts)))


def no_coverage_check(counts, coverage: float) -> int:
    """No ValueError: coverage 0 returns 0 draws, coverage 1 overflows."""
    q = 1 - 1 / (len(counts) * max(counts))
    return int(np.ceil(np.log1p(-coverage) / np.log(q)))


def truncated_not_ceiled(counts, coverage: float) -> int:
    """int() of the log ratio: one draw short of the coverage."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be strictly between 0 and 1, got {coverage!r}")
    return int(math.log(1 - coverage) / math.log(1 - 1 / (len(counts) * max(counts))))


def float_epoch_size(counts, coverage: float) -> float:
    """The right S as a float (np.ceil style): WeightedRandomSampler refuses a float num_samples."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be strictly between 0 and 1, got {coverage!r}")
    return float(_reference_num_samples_for_coverage(counts, coverage))


HELDOUT = {
    "02.1": [one_weight_per_class, frequency_not_inverse, unique_counts_indexed_by_label, integer_reciprocal,
             inverse_square_root],
    "02.2": [colleague_class_weights, without_replacement, epoch_size_ignored, weights_by_frequency,
             fixed_undersampled_subset],
    "02.3": [summed_not_mean, missing_minus_sign, modulates_with_p_t, softmax_over_batch,
             every_class_not_true_class, returns_python_float],
    "02.4": [exponential_approximation, rarest_class_size, whole_dataset_size, no_coverage_check,
             truncated_not_ceiled, float_epoch_size],
}
