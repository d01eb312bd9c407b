"""Measuring class imbalance and turning counts into weights (lessons 01 and 02)."""
from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

from helpers._validate import as_counts, as_fraction, as_int, as_labels

SCHEMES: tuple[str, ...] = ("inverse", "sqrt", "effective")


def class_counts(labels: Any, num_classes: int | None = None) -> np.ndarray:
    """Samples per class, counted from the labels; classes with no sample count 0 (lesson 01)."""
    if num_classes is not None:
        num_classes = as_int("num_classes", num_classes, minimum=1)
    array = as_labels("labels", labels, num_classes)
    if num_classes is None and array.size == 0:
        raise ValueError("labels is empty and num_classes is None: there is nothing to count")
    return np.bincount(array, minlength=num_classes or 0).astype(np.int64)


def imbalance_ratio(counts: Any) -> float:
    """Largest class count divided by the smallest (1.0 = balanced) (lesson 01)."""
    array = as_counts("counts", counts, positive=True)
    return float(array.max() / array.min())


def effective_number(counts: Any, beta: float) -> np.ndarray:
    """Effective number of samples per class, (1 - beta^n) / (1 - beta) (Cui et al. 2019; lesson 01)."""
    array = as_counts("counts", counts, positive=False)
    beta = as_fraction("beta", beta, 0.0, 1.0, include_low=True, include_high=False)
    return (1.0 - np.power(beta, array)) / (1.0 - beta)


def _scheme(scheme: Any) -> str:
    if not isinstance(scheme, str) or scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")
    return scheme


def class_weights(counts: Any, scheme: str = "inverse", beta: float = 0.999) -> np.ndarray:
    """One weight per class (inverse, sqrt-inverse or inverse effective number), summing to the number of classes (lesson 02)."""
    scheme = _scheme(scheme)
    array = as_counts("counts", counts, positive=True)
    if scheme == "inverse":
        raw = array ** -1.0
    elif scheme == "sqrt":
        raw = array ** -0.5
    else:
        raw = effective_number(array, beta) ** -1.0
    return raw * (len(raw) / raw.sum())


def sample_weights(labels: Any, scheme: str = "inverse", beta: float = 0.999) -> torch.Tensor:
    """One float64 weight per sample (its class's weight), for WeightedRandomSampler (lesson 02)."""
    scheme = _scheme(scheme)
    array = as_labels("labels", labels)
    if array.size == 0:
        raise ValueError("labels is empty: there is no sample to weight")
    counts = np.bincount(array)
    present = counts > 0
    weights = np.zeros(len(counts))
    weights[present] = class_weights(counts[present], scheme, beta)
    return torch.from_numpy(weights[array])


def long_tail_counts(num_classes: int, imbalance_factor: float, head_count: int) -> np.ndarray:
    """Zipf-like counts: class i gets head_count / (i+1)^s, with s set so head / tail = imbalance_factor (lesson 01)."""
    num_classes = as_int("num_classes", num_classes, minimum=2)
    head_count = as_int("head_count", head_count, minimum=1)
    factor = as_fraction("imbalance_factor", imbalance_factor, 1.0, float(head_count), include_low=True, include_high=True)
    exponent = np.log(factor) / np.log(num_classes)
    counts = np.round(head_count / np.arange(1, num_classes + 1) ** exponent).astype(np.int64)
    return np.maximum(counts, 1)


def undersample_indices(labels: Any, seed: int) -> np.ndarray:
    """Indices keeping every class down to the smallest class's count, chosen at random (lesson 02)."""
    array = as_labels("labels", labels)
    seed = as_int("seed", seed, minimum=0)
    counts = as_counts("class counts of labels", np.bincount(array), positive=True)
    rng = np.random.default_rng(seed)
    keep = [rng.choice(np.flatnonzero(array == c), size=counts.min(), replace=False) for c in range(len(counts))]
    return np.sort(np.concatenate(keep))


def batch_class_counts(loader: Iterable[Any], num_classes: int, num_batches: int | None = None) -> np.ndarray:
    """Class counts of each (inputs, labels) batch a loader yields, one row per batch; the first num_batches if given (lessons 01 and 02)."""
    num_classes = as_int("num_classes", num_classes, minimum=1)
    if num_batches is not None:
        num_batches = as_int("num_batches", num_batches, minimum=1)
    rows = [class_counts(labels, num_classes) for _, (_, labels) in zip(range(num_batches or sys.maxsize), loader)]
    if not rows:
        raise ValueError("loader yielded no batch: there is nothing to count")
    return np.array(rows)
