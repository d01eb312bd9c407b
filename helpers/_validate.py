"""Argument checks shared by the helpers: each raises ValueError/TypeError naming the argument and value."""
from __future__ import annotations

import hashlib
import math
import numbers
from typing import Any

import numpy as np
import torch


def short(value: Any) -> str:
    """A repr short enough for an error message."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def is_real(value: object) -> bool:
    """Whether `value` is a real number (a bool is not): int, float, Fraction, numpy's."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def real_as_float(value: numbers.Real) -> float:
    """A real number as a float, infinite where it is too large for one (10**400)."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def as_int(name: str, value: Any, minimum: int | None = None) -> int:
    """`value` as an int (bools and floats refused), at least `minimum` when given."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {short(value)} of type {type(value).__name__}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return int(value)


def as_device(name: str, value: Any) -> torch.device:
    """`value` as a torch.device; anything torch.device refuses is a ValueError naming `name`."""
    try:
        return torch.device(value)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"{name} must be a torch device such as 'cpu' or 'cuda:0', got {short(value)}") from exc


def as_fraction(name: str, value: Any, low: float, high: float, *, include_low: bool, include_high: bool) -> float:
    """`value` as a finite float inside the interval from `low` to `high`."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {short(value)} of type {type(value).__name__}")
    number = float(value)
    above = number >= low if include_low else number > low
    below = number <= high if include_high else number < high
    if not (math.isfinite(number) and above and below):
        interval = f"{'[' if include_low else '('}{low}, {high}{']' if include_high else ')'}"
        raise ValueError(f"{name} must be in {interval}, got {value!r}")
    return number


def as_labels(name: str, labels: Any, num_classes: int | None = None) -> np.ndarray:
    """Class labels as a 1-D int64 numpy array of values in [0, num_classes)."""
    if isinstance(labels, torch.Tensor):
        array = labels.detach().cpu().numpy()
    elif isinstance(labels, (np.ndarray, list, tuple, range)):
        array = np.asarray(labels)
    else:
        raise TypeError(f"{name} must be a 1-D sequence of class ids (list, numpy array or tensor), got {type(labels).__name__}")
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(array.shape)}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must hold integer class ids, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    if array.size and array.min() < 0:
        raise ValueError(f"{name} must be non-negative class ids, got {int(array.min())}")
    if num_classes is not None and array.size and array.max() >= num_classes:
        raise ValueError(f"{name} holds class {int(array.max())}, but num_classes is {num_classes}")
    return array


def as_counts(name: str, counts: Any, *, positive: bool) -> np.ndarray:
    """Per-class sample counts as a 1-D int64 array of non-negative (or, if `positive`, positive) values."""
    if isinstance(counts, torch.Tensor):
        counts = counts.detach().cpu().numpy()
    if isinstance(counts, dict):
        raise TypeError(f"{name} must be a sequence of counts in class order, got a dict; pass list(d.values())")
    array = np.asarray(counts)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence of counts, got shape {tuple(array.shape)}")
    if not (np.issubdtype(array.dtype, np.integer) or (np.issubdtype(array.dtype, np.floating) and np.all(np.mod(array, 1) == 0))):
        raise TypeError(f"{name} must hold whole numbers of samples, got {short(counts)}")
    array = array.astype(np.int64)
    if array.min() < 0:
        raise ValueError(f"{name} must not be negative, got {short(counts)}")
    if positive and array.min() == 0:
        empty = int(np.flatnonzero(array == 0)[0])
        raise ValueError(f"{name} has a class with zero samples (class {empty}): it has no weight; drop the class or give it samples")
    return array


def as_weights(name: str, weights: Any) -> torch.Tensor:
    """Sampling weights as a 1-D float64 tensor: finite, non-negative, not all zero."""
    if isinstance(weights, (list, tuple, np.ndarray, torch.Tensor)):
        tensor = torch.as_tensor(weights, dtype=torch.float64)
    else:
        raise TypeError(f"{name} must be a 1-D sequence of per-sample weights, got {type(weights).__name__}")
    if tensor.ndim != 1 or tensor.numel() == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence (one weight per sample), got shape {tuple(tensor.shape)}")
    if not bool(torch.isfinite(tensor).all()):
        bad = int(torch.nonzero(~torch.isfinite(tensor))[0])
        raise ValueError(f"{name} must be finite, got {tensor[bad].item()} at index {bad}")
    if bool((tensor < 0).any()):
        bad = int(torch.nonzero(tensor < 0)[0])
        raise ValueError(f"{name} must be non-negative, got {tensor[bad].item()} at index {bad}")
    if not bool((tensor > 0).any()):
        raise ValueError(f"{name} are all zero: nothing can be drawn")
    return tensor


def fingerprint(values: Any) -> str:
    """A short fingerprint of an array's values (its size and a hash), for the plan a sampler's state names."""
    array = np.ascontiguousarray(np.asarray(values))
    array = array.astype(np.float64 if np.issubdtype(array.dtype, np.floating) else np.int64, copy=False)
    return f"{array.size} values, blake2b {hashlib.blake2b(array.tobytes(), digest_size=8).hexdigest()}"
