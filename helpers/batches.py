"""A batch's nested structure (dicts, lists, tuples of tensors): the one walker behind moving, sizing and counting it (lessons 03, 04)."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch


def map_leaves(batch: Any, fn: Callable[[Any], Any]) -> Any:
    """`batch` rebuilt with `fn(leaf)` for every leaf (whatever is not a dict, list or tuple); namedtuples keep their type (lessons 03, 04)."""
    if isinstance(batch, Mapping):
        return {key: map_leaves(value, fn) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple keeps its type
        return type(batch)(*(map_leaves(value, fn) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_leaves(value, fn) for value in batch)
    return fn(batch)


def leaves(batch: Any) -> list[Any]:
    """Every leaf of `batch`, depth first, in the order `map_leaves` visits them (lessons 03, 04)."""
    found: list[Any] = []
    map_leaves(batch, found.append)  # the rebuilt batch (of Nones) is dropped: only the visits count
    return found


def tensors(batch: Any) -> list[torch.Tensor]:
    """Every tensor in `batch`, depth first (lesson 04)."""
    return [leaf for leaf in leaves(batch) if isinstance(leaf, torch.Tensor)]
