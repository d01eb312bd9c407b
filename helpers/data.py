"""Synthetic datasets made on the spot from a seed: nothing is downloaded (lessons 01 onwards)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import TensorDataset

from helpers._validate import as_counts, as_fraction, as_int, as_labels


def labels_from_counts(counts: Any, seed: int = 0, shuffle: bool = True) -> np.ndarray:
    """An int64 label array with counts[c] samples of class c, shuffled with `seed` unless shuffle=False (lesson 01)."""
    array = as_counts("counts", counts, positive=False)
    if array.sum() == 0:
        raise ValueError(f"counts must hold at least one sample, got {array.tolist()}")
    labels = np.repeat(np.arange(len(array), dtype=np.int64), array)
    if shuffle:
        np.random.default_rng(as_int("seed", seed, minimum=0)).shuffle(labels)
    return labels


def imbalanced_classification(
    counts: Any, num_features: int = 16, separation: float = 1.5, seed: int = 0, task_seed: int = 0
) -> TensorDataset:
    """A learnable imbalanced task: class c is a unit-noise Gaussian blob `separation` from the origin; task_seed fixes the blobs (lesson 02)."""
    labels = labels_from_counts(counts, seed=seed)
    num_features = as_int("num_features", num_features, minimum=1)
    separation = as_fraction("separation", separation, 0.0, 100.0, include_low=False, include_high=True)
    task = torch.Generator().manual_seed(as_int("task_seed", task_seed, minimum=0))
    directions = torch.randn(len(np.asarray(counts)), num_features, generator=task)
    means = separation * directions / directions.norm(dim=1, keepdim=True)
    target = torch.from_numpy(labels)
    noise = torch.Generator().manual_seed(seed)
    features = means[target] + torch.randn(len(labels), num_features, generator=noise)
    return TensorDataset(features, target)


def split_indices(labels: Any, val_fraction: float, seed: int, stratify: bool) -> tuple[np.ndarray, np.ndarray]:
    """Train and validation indices; stratify=True gives every class round(val_fraction * count) validation samples (lesson 01)."""
    array = as_labels("labels", labels)
    fraction = as_fraction("val_fraction", val_fraction, 0.0, 1.0, include_low=False, include_high=False)
    rng = np.random.default_rng(as_int("seed", seed, minimum=0))
    if not isinstance(stratify, bool):
        raise TypeError(f"stratify must be True or False, got {stratify!r}")
    if not stratify:
        order = rng.permutation(len(array))
        num_val = int(round(fraction * len(array)))
        return np.sort(order[num_val:]), np.sort(order[:num_val])
    val = []
    for c in np.unique(array):
        members = rng.permutation(np.flatnonzero(array == c))
        val.append(members[: int(round(fraction * len(members)))])
    val_idx = np.sort(np.concatenate(val))
    return np.setdiff1d(np.arange(len(array)), val_idx), val_idx
