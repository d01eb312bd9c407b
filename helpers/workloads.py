"""Datasets with a known cost per item, for finding the input bottleneck; importable so spawned workers find them (lesson 03)."""
from __future__ import annotations

import functools
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info

from helpers._validate import as_fraction, as_int, short

MAX_ITEM_MS = 60_000.0


def spin(iterations: int) -> int:
    """Burn CPU in pure Python (holds the GIL, like real decoding in Python): `iterations` additions (lesson 03)."""
    total = 0
    for i in range(iterations):
        total += i
    return total


@functools.cache
def spin_iterations_per_ms() -> int:
    """How many `spin` iterations take one millisecond of CPU time here: the fastest of five runs of at least 10 ms, measured once (lesson 03)."""
    trial = 10_000
    while (elapsed := _time_spin(trial)) < 0.01:
        trial *= 2
    fastest = min([elapsed] + [_time_spin(trial) for _ in range(4)])
    return max(1, round(trial / (fastest * 1000.0)))


def _time_spin(iterations: int) -> float:
    """CPU seconds one `spin(iterations)` takes (thread time: time spent descheduled by other programs is left out)."""
    start = time.thread_time()
    spin(iterations)
    return time.thread_time() - start


def _shape(shape: Any) -> tuple[int, ...]:
    """`shape` as a non-empty tuple of positive ints."""
    if not isinstance(shape, Sequence) or isinstance(shape, str) or len(shape) == 0:
        raise TypeError(f"shape must be a non-empty tuple of ints such as (3, 32, 32), got {short(shape)}")
    return tuple(as_int(f"shape[{i}]", size, minimum=1) for i, size in enumerate(shape))


def _index(index: Any, length: int) -> int:
    """`index` as an int in [0, length), IndexError otherwise (so `for x in dataset` stops)."""
    index = as_int("index", index)
    if not 0 <= index < length:
        raise IndexError(f"index {index} is out of range for a dataset of {length} items")
    return index


class SlowDataset(Dataset):
    """Items that cost `cpu_ms` of real CPU work and `io_ms` of waiting (simulated I/O) each; content fixed by (seed, index) (lesson 03)."""

    def __init__(
        self,
        num_items: int = 1024,
        cpu_ms: float = 0.0,
        io_ms: float = 0.0,
        shape: Sequence[int] = (3, 32, 32),
        num_classes: int = 10,
        seed: int = 0,
    ) -> None:
        self.num_items = as_int("num_items", num_items, minimum=1)
        self.cpu_ms = as_fraction("cpu_ms", cpu_ms, 0.0, MAX_ITEM_MS, include_low=True, include_high=True)
        self.io_ms = as_fraction("io_ms", io_ms, 0.0, MAX_ITEM_MS, include_low=True, include_high=True)
        self.shape = _shape(shape)
        self.num_classes = as_int("num_classes", num_classes, minimum=1)
        self.seed = as_int("seed", seed, minimum=0)
        # Calibrated here, in the main process: workers (fork or spawn) get the count with the dataset.
        self.spin_iterations = round(self.cpu_ms * spin_iterations_per_ms()) if self.cpu_ms else 0

    def __len__(self) -> int:
        return self.num_items

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """A uint8 image of `shape` and an int label, after the item's CPU work and wait (lesson 03)."""
        index = _index(index, self.num_items)
        if self.io_ms:
            time.sleep(self.io_ms / 1000.0)
        spin(self.spin_iterations)
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + index)
        image = torch.randint(0, 256, self.shape, dtype=torch.uint8, generator=generator)
        label = int(torch.randint(0, self.num_classes, (), generator=generator))
        return image, label


class InMemoryDataset(Dataset):
    """Small float feature vectors and int64 labels held as two tensors, read one item at a time (lesson 03)."""

    def __init__(self, num_items: int = 4096, num_features: int = 16, num_classes: int = 10, seed: int = 0) -> None:
        num_items = as_int("num_items", num_items, minimum=1)
        num_features = as_int("num_features", num_features, minimum=1)
        num_classes = as_int("num_classes", num_classes, minimum=1)
        generator = torch.Generator().manual_seed(as_int("seed", seed, minimum=0))
        self.features = torch.randn(num_items, num_features, generator=generator)
        self.labels = torch.randint(0, num_classes, (num_items,), generator=generator)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """One feature vector and its 0-d int64 label (lesson 03)."""
        index = _index(index, len(self.labels))
        return self.features[index], self.labels[index]


class BatchedInMemoryDataset(InMemoryDataset):
    """InMemoryDataset plus `__getitems__` as documented: one indexing op per batch, a list of samples back, collated as usual (lesson 03)."""

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """The batch's samples, one (features, label) pair per index, in order; the DataLoader's collate_fn stacks them (lesson 03)."""
        rows = torch.as_tensor(indices, dtype=torch.int64)
        # index_select, not features[rows]: advanced indexing costs ~10x more here (it may start a parallel region)
        features, labels = self.features.index_select(0, rows), self.labels.index_select(0, rows)
        return list(zip(features.unbind(0), labels.unbind(0)))


class PreStackedInMemoryDataset(InMemoryDataset):
    """A variant outside the documented contract: `__getitems__` returns the batch already stacked; needs collate_fn=collate_stacked (lesson 03)."""

    def __getitems__(self, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's features [B, F] and labels [B], already stacked: not a list of samples (lesson 03)."""
        rows = torch.as_tensor(indices, dtype=torch.int64)
        return self.features.index_select(0, rows), self.labels.index_select(0, rows)


def collate_stacked(batch: Any) -> Any:
    """collate_fn for PreStackedInMemoryDataset, whose `__getitems__` returns a ready batch: hands it on unchanged (lesson 03)."""
    return batch


class ListBackedDataset(Dataset):
    """`num_items` values kept as Python floats in a list: every read writes a refcount, so forked workers copy pages (lesson 03)."""

    def __init__(self, num_items: int, seed: int = 0) -> None:
        rng = np.random.default_rng(as_int("seed", seed, minimum=0))
        self.values = rng.random(as_int("num_items", num_items, minimum=1)).tolist()

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, index: int) -> float:
        """One value as a float (lesson 03)."""
        return float(self.values[index])


class ArrayBackedDataset(ListBackedDataset):
    """The same values as ListBackedDataset in one float64 numpy array: reads leave the shared pages alone (lesson 03)."""

    def __init__(self, num_items: int, seed: int = 0) -> None:
        rng = np.random.default_rng(as_int("seed", seed, minimum=0))
        self.values = rng.random(as_int("num_items", num_items, minimum=1))


class FailingDataset(Dataset):
    """Returns its index as a float tensor, but raises ValueError at `bad_index`: for debugging with num_workers=0 (lesson 03)."""

    def __init__(self, num_items: int = 64, bad_index: int = 37) -> None:
        self.num_items = as_int("num_items", num_items, minimum=1)
        self.bad_index = as_int("bad_index", bad_index, minimum=0)
        if self.bad_index >= self.num_items:
            raise ValueError(f"bad_index must be below num_items={self.num_items}, got {self.bad_index}")

    def __len__(self) -> int:
        return self.num_items

    def __getitem__(self, index: int) -> torch.Tensor:
        """The index as a 0-d float tensor, or ValueError at bad_index (lesson 03)."""
        index = _index(index, self.num_items)
        if index == self.bad_index:
            raise ValueError(f"item {index} is corrupt")
        return torch.tensor(float(index))


class NumpyRngDataset(Dataset):
    """Draws a random augmentation from a np.random.default_rng made in __init__: forked workers repeat each other's draws (lesson 03)."""

    def __init__(self, num_items: int = 8, seed: int = 0) -> None:
        self.num_items = as_int("num_items", num_items, minimum=1)
        self.rng = np.random.default_rng(as_int("seed", seed, minimum=0))

    def __len__(self) -> int:
        return self.num_items

    def __getitem__(self, index: int) -> float:
        """A fresh draw from the dataset's own generator (not seeded per worker by PyTorch) (lesson 03)."""
        _index(index, self.num_items)
        return float(self.rng.random())


class PostDummyDataset(Dataset):
    """The blog post's DummyDataset: 10000 squarings of CPU work per item; its labels have shape [1] unless fixed_labels (lesson 03)."""

    def __init__(self, length: int, fixed_labels: bool = False) -> None:
        self.length = as_int("length", length, minimum=1)
        if not isinstance(fixed_labels, bool):
            raise TypeError(f"fixed_labels must be True or False, got {short(fixed_labels)}")
        self.fixed_labels = fixed_labels

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """torch.randn(10) and a label: shape [1] as in the post, or 0-d with fixed_labels=True (lesson 03)."""
        _ = [i**2 for i in range(10000)]
        label_shape = () if self.fixed_labels else (1,)
        return torch.randn(10), torch.randint(0, 10, label_shape)


def seed_worker_rng(worker_id: int) -> None:
    """worker_init_fn: give the worker's copy of the dataset a numpy generator seeded from the worker's own torch seed (lesson 03)."""
    info = get_worker_info()
    if info is None:
        raise RuntimeError("seed_worker_rng is a DataLoader worker_init_fn: it only runs inside a worker process")
    info.dataset.rng = np.random.default_rng(info.seed)
