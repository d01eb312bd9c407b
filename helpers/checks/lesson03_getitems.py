"""Lesson 03's self-check 03.3: a `__getitems__` that picks a batch's rows at once and returns them as a list of samples."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils.data import DataLoader

from helpers.checks.core import Answer, Failed, Wrong, exercise
from helpers.workloads import InMemoryDataset


class _Indexing(TorchFunctionMode):
    """While active, counts the indexing operations (t[...], index_select, select, ...) on each of the given tensors."""

    NAMES = frozenset({"__getitem__", "index_select", "select", "take", "gather", "narrow", "take_along_dim"})

    def __init__(self, *tensors: torch.Tensor) -> None:
        super().__init__()
        self.tensors, self.counts = tensors, [0] * len(tensors)

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        if getattr(func, "__name__", "") in self.NAMES and args:
            for k, tensor in enumerate(self.tensors):
                self.counts[k] += args[0] is tensor
        return func(*args, **(kwargs or {}))


class GetitemsRight(InMemoryDataset):
    """Exercise 03.3's reference answer (the tests pass it to the check)."""

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        rows = torch.as_tensor(indices)
        return list(zip(self.features[rows], self.labels[rows]))


def _getitems(method: Callable[[Any, list[int]], Any]) -> type:
    """An InMemoryDataset with `method` as its __getitems__: the typical wrong answers below."""
    return type("MyBatchedDataset", (InMemoryDataset,), {"__getitems__": method})


def _rows(dataset: Any, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = torch.as_tensor(indices)
    return dataset.features[rows], dataset.labels[rows]


_GetitemsPreStacked = _getitems(_rows)
_GetitemsSorted = _getitems(lambda self, indices: list(zip(*_rows(self, sorted(indices)))))
_GetitemsOneAtATime = _getitems(lambda self, indices: [self[i] for i in indices])
_GetitemsFeaturesOnly = _getitems(lambda self, indices: list(_rows(self, indices)[0].unbind(0)))
_GetitemsRowByRow = _getitems(lambda self, indices: [(self.features[i], self.labels[i]) for i in indices])


@exercise("03.3", "MyBatchedDataset.__getitems__", takes_class=True, right=GetitemsRight, wrong=[
    Wrong(_GetitemsPreStacked, "one sample per index"),
    Wrong(_GetitemsSorted, "wrong rows"),
    Wrong(_GetitemsFeaturesOnly, "(features, label) pair"),
    Wrong(_GetitemsOneAtATime, "index the tensors once per batch"),
    Wrong(_GetitemsRowByRow, "one indexing operation per tensor"),
    Wrong(InMemoryDataset, "raised AttributeError"),
    Wrong("not a class", "expected a subclass of helpers.workloads.InMemoryDataset"),
])
def check_getitems(answer: Answer) -> str:
    """Exercise 03.3: a `__getitems__` that returns the batch's samples as a list (the documented contract), called once per batch."""
    name, dataset_class = answer.name, answer.value
    if not (isinstance(dataset_class, type) and issubclass(dataset_class, InMemoryDataset)):
        raise Failed(f"expected a subclass of helpers.workloads.InMemoryDataset, got {dataset_class!r}")
    one_at_a_time = []

    def counted_getitem(self: Any, index: int) -> Any:
        one_at_a_time.append(index)
        return dataset_class.__getitem__(self, index)

    # a subclass that counts __getitem__ calls: self[i] looks __getitem__ up on the class, not on the instance
    dataset = type(dataset_class.__name__, (dataset_class,), {"__getitem__": counted_getitem})(num_items=1000, seed=3)
    with answer.calling(f"{name}([5, 1, 2])"), _Indexing(dataset.features, dataset.labels) as indexing:
        direct = dataset.__getitems__([5, 1, 2])
    if one_at_a_time:
        raise Failed(f"{name}([5, 1, 2]) called __getitem__ {len(one_at_a_time)} times, one sample at a time, which is what "
                     "the DataLoader already does: index the tensors once per batch (self.features.index_select(0, rows), "
                     "self.labels.index_select(0, rows) with rows = torch.as_tensor(indices)) and pair up the rows")
    if max(indexing.counts) > 1:
        features, labels = indexing.counts
        raise Failed(f"{name}([5, 1, 2]) indexed self.features {features} time(s) and self.labels {labels} time(s) for 3 "
                     "indices, row by row, which gains nothing over __getitem__: pick all the batch's rows with one indexing "
                     "operation per tensor (self.features[rows], rows = torch.as_tensor(indices)), then pair them up")
    if not isinstance(direct, (list, tuple)) or len(direct) != 3:
        got = f"a {type(direct).__name__}" + (f" of {len(direct)} items" if hasattr(direct, "__len__") else "")
        if hasattr(direct, "__len__") and len(direct) == len(dataset):
            why = "pair up the rows you picked, not the dataset's whole tensors"
        elif isinstance(direct, (list, tuple)) and len(direct) == 2:
            why = ("that is the batch already stacked, [features, labels]: the DataLoader's default collate_fn stacks the "
                   "samples itself")
        else:
            why = "indices come in any order, like [5, 1, 2] from a shuffled sampler: pick exactly those rows, in that order, not a slice"
        raise Failed(f"{name}([5, 1, 2]) returned {got}; return a list with one sample per index, [(features, label), ...] ({why})")
    calls = []
    original = dataset.__getitems__
    dataset.__getitems__ = lambda indices: calls.append(list(indices)) or original(indices)
    loader = DataLoader(dataset, batch_size=64, shuffle=True, generator=torch.Generator().manual_seed(0))
    with answer.calling("iterating a DataLoader (default collate_fn) over it"):
        batches = list(loader)
    if [len(c) for c in calls[:2]] != [64, 64] or len(calls) != len(batches):
        raise Failed(f"the DataLoader called {name} {len(calls)} times for {len(batches)} batches; it should be once per batch of 64")
    first = batches[0]
    if not (isinstance(first, (tuple, list)) and len(first) == 2 and all(isinstance(t, torch.Tensor) for t in first)):
        raise Failed(f"the collated batch is {type(first).__name__}, not (features [64, 16], labels [64]): "
                     "each sample must be a (features, label) pair")
    shapes = [list(t.shape) for t in first]
    if shapes == [[64], [64, 16]]:
        raise Failed(f"{name}'s samples are (label, features): the batch collates to labels first; return "
                     "(features, label) pairs, as __getitem__ does")
    if shapes != [[64, 16], [64]]:
        raise Failed(f"the collated batch has features of shape {shapes[0]} and labels of shape {shapes[1]}; expected "
                     "[64, 16] and [64], as without __getitems__: each sample is (features[i] of shape [16], labels[i], "
                     "a 0-d tensor), with no unsqueeze or reshape")
    if (first[0].dtype, first[1].dtype) != (dataset.features.dtype, dataset.labels.dtype):
        raise Failed(f"the collated batch has features {first[0].dtype} and labels {first[1].dtype}; expected "
                     f"{dataset.features.dtype} and {dataset.labels.dtype}, as without __getitems__: return the rows as "
                     "the dataset's tensors hold them, with no dtype conversion (.float(), .int(), .to(...))")
    rows = torch.tensor(calls[0])
    if not (torch.equal(first[0], dataset.features[rows]) and torch.equal(first[1], dataset.labels[rows])):
        raise Failed(f"{name} returned the wrong rows: sample k must be (features[indices[k]], labels[indices[k]]), in order")
    return f"{name} was called once per batch ({len(batches)} batches) and its samples collated to the right rows"
