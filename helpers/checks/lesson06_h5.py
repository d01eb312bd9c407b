"""Lesson 06's self-check 06.2: an HDF5 file opened in the process that reads it, once, on its first item."""
from __future__ import annotations

import contextlib
import multiprocessing
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from helpers.checks.core import Answer, Failed, Wrong, every_batch, exercise


class LazyH5Right(Dataset):
    """Exercise 06.2's reference answer (the tests pass it to the check): the file opens on the first item, in the reading process."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = None
        with h5py.File(path, "r") as file:
            self.length = len(file["labels"])

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return torch.from_numpy(self.file["inputs"][index]), int(self.file["labels"][index])


class _H5OpenedInInit(LazyH5Right):
    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.file = h5py.File(path, "r")


class _H5LabelTensor(LazyH5Right):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, Any]:
        inputs, label = super().__getitem__(index)
        return inputs, torch.tensor(label)


class _H5NumpyRow(LazyH5Right):
    def __getitem__(self, index: int) -> tuple[Any, int]:
        inputs, label = super().__getitem__(index)
        return inputs.numpy(), label


class _H5Float64(LazyH5Right):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        inputs, label = super().__getitem__(index)
        return inputs.double(), label  # twice the memory, and a float32 model refuses it


class _H5ReopenedEveryItem(LazyH5Right):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        self.file = h5py.File(self.path, "r")  # a new handle each time; the old one closes when dropped
        return torch.from_numpy(self.file["inputs"][index]), int(self.file["labels"][index])


class _H5OpenedPerItem(LazyH5Right):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with h5py.File(self.path, "r") as file:
            return torch.from_numpy(file["inputs"][index]), int(file["labels"][index])


FIRST = 5  # 06.2 reads item 5 first: a worker's first item is seldom index 0


@contextlib.contextmanager
def _rows_read() -> Iterator[list[int]]:
    """In the block, h5py reads in this process are watched; yields [the most rows one read returned]."""
    widest, real = [0], {name: getattr(h5py.Dataset, name) for name in ("__getitem__", "__array__")}

    def watched(name: str) -> Any:
        def read(self: h5py.Dataset, *args: Any, **kwargs: Any) -> Any:
            got = real[name](self, *args, **kwargs)
            row = int(np.prod(self.shape[1:], dtype=np.int64)) if self.ndim else 1
            widest[0] = max(widest[0], -(-int(np.size(got)) // max(1, row)))
            return got
        return read

    try:
        for name in real:
            setattr(h5py.Dataset, name, watched(name))
        yield widest
    finally:
        for name, method in real.items():
            setattr(h5py.Dataset, name, method)


def _open_files() -> int:
    """How many HDF5 files this process has open."""
    return h5py.h5f.get_obj_count(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE)


def _handles(dataset: Any) -> list[h5py.File]:
    """The open h5py.File objects the dataset keeps in its attributes."""
    return [value for value in vars(dataset).values() if isinstance(value, h5py.File) and value.id.valid]


def _close_files(dataset: Any) -> None:
    """Close any HDF5 file the learner's dataset keeps, so the temporary folder can go."""
    for value in vars(dataset).values():
        if isinstance(value, h5py.File) and value.id.valid:
            value.close()


@exercise("06.2", "LazyH5Dataset.__getitem__", takes_class=True, right=LazyH5Right, wrong=[
    Wrong(_H5OpenedInInit, "already open after __init__"),
    Wrong(_H5OpenedPerItem, "opened and closed the file"),
    Wrong("not a class", "expected a Dataset class"),
    Wrong(_H5LabelTensor, "labels[index] as an int"),
    Wrong(_H5NumpyRow, "inputs[index] as a tensor"),
    Wrong(_H5ReopenedEveryItem, "a new handle"),
    Wrong(_H5Float64, "torch.float64; the file holds float32"),
])
def check_lazy_h5(answer: Answer) -> str:
    """Exercise 06.2: an HDF5-backed Dataset that opens its file on the first item, once per process that reads it."""
    name, dataset_class = answer.name, answer.value
    if not (isinstance(dataset_class, type) and issubclass(dataset_class, Dataset)):
        raise Failed(f"expected a Dataset class (LazyH5Dataset), got {dataset_class!r}")
    inputs = np.random.default_rng(6).standard_normal((64, 4), dtype=np.float32)
    labels = np.arange(64) % 3
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "data.h5")
        with h5py.File(path, "w") as file:
            file["inputs"], file["labels"] = inputs, labels
        before = _open_files()
        with answer.calling(f"{dataset_class.__name__}(path)"):
            dataset = dataset_class(path)
        try:
            return _check_lazy(answer, dataset, path, before, inputs, labels)
        finally:
            _close_files(dataset)


def _check_lazy(answer: Answer, dataset: Any, path: str, before: int, inputs: np.ndarray, labels: np.ndarray) -> str:
    """Exercise 06.2's steps on a dataset over the file at `path` (`inputs`, `labels`); `before`: files open before it was built."""
    name = answer.name
    if _open_files() > before:
        raise Failed("the file is already open after __init__: a spawn worker gets the dataset pickled, and h5py handles "
                     "cannot be pickled; a forked worker shares the parent's handle, which HDF5 does not support. "
                     "Open it in __getitem__, on the first item")
    try:
        pickle.dumps(vars(dataset))  # what a spawn worker receives (the class itself travels by name)
    except Exception as exc:
        raise Failed(f"the dataset cannot be pickled after __init__ ({type(exc).__name__}: {exc}), so spawn workers "
                     "could not receive it: keep only the path (and plain numbers) until the first item") from exc
    with answer.calling(f"{name}({FIRST})", hint=lambda exc: f" (a process's first item can have any index, here {FIRST}: "
                        "open the file when none is open yet, if self.file is None, not when index == 0)"), _rows_read() as widest:
        first = dataset[FIRST]
    if widest[0] > 1:
        raise Failed(f"{name}({FIRST}) read {widest[0]} rows of a dataset from the file at once: read only row index "
                     "(self.file['inputs'][index]); loading the whole file into each worker's memory defeats reading it lazily")
    if _open_files() == before:
        with answer.calling(f"{name}(1)"):
            dataset[1]
        raise Failed(f"{name} opened and closed the file for each item: open it once, on the first item, keep the handle "
                     "(self.file) and reuse it; reopening costs a file open and metadata read per sample")
    handles = _handles(dataset)  # held here, so a dropped handle stays open and its id cannot be reused by a new one
    with answer.calling(f"{name}(0), {name}(1)"), _rows_read() as widest:
        dataset[0], dataset[1]
    if widest[0] > 1:
        raise Failed(f"{name}(0) read {widest[0]} rows of a dataset from the file at once: read only row index")
    replaced = handles and any(all(new is not old for old in handles) for new in _handles(dataset))
    for old in handles:
        if all(old is not kept for kept in _handles(dataset)):
            old.close()
    if replaced:
        raise Failed(f"{name} opened a new handle for a later item (the old one closed when it was dropped): open the file only "
                     "when none is open yet (if self.file is None), and keep that handle")
    if _open_files() > before + 1:
        raise Failed(f"after 3 items {_open_files() - before} files are open: open the file only when none is open yet "
                     "(if self.file is None)")
    row, label = f"inputs[{FIRST}]", f"labels[{FIRST}]"
    if not (isinstance(first, (tuple, list)) and len(first) == 2
            and torch.equal(torch.as_tensor(first[0]), torch.from_numpy(inputs[FIRST])) and first[1] == labels[FIRST]):
        raise Failed(f"{name}({FIRST}) returned {first!r}; expected ({row} as a tensor, {label} as an int)")
    if not isinstance(first[0], torch.Tensor):
        raise Failed(f"{name}({FIRST}) returned {row} as a {type(first[0]).__name__}: return inputs[index] as a tensor "
                     "(torch.from_numpy)")
    if first[0].dtype != torch.from_numpy(inputs[0]).dtype:
        raise Failed(f"{name}({FIRST}) returned {row} as a tensor of {first[0].dtype}; the file holds {inputs.dtype}: keep its "
                     "dtype (torch.from_numpy(row) does), since a float64 batch takes twice the memory and a float32 model refuses it")
    if type(first[1]) is not int:
        raise Failed(f"{name}({FIRST}) returned {label} as a {type(first[1]).__name__}: return labels[index] as an int "
                     "(int(...)), which the DataLoader collates into a 1-D tensor of labels")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check reads the file in worker processes, which needs the fork start method (Linux, macOS); on Windows use WSL2")
    _close_files(dataset)
    with answer.calling(f"a DataLoader with 2 workers over {type(dataset).__name__}"):
        fresh = type(dataset)(path)
        batches = every_batch(DataLoader(fresh, batch_size=16, num_workers=2, multiprocessing_context="fork"))
    got_inputs = torch.cat([torch.as_tensor(batch[0]) for batch in batches])
    got_labels = torch.cat([torch.as_tensor(batch[1]) for batch in batches])
    if not (torch.equal(got_inputs, torch.from_numpy(inputs)) and torch.equal(got_labels, torch.from_numpy(labels))):
        raise Failed("a DataLoader with 2 workers delivered the wrong rows: item i must be (inputs[i], labels[i])")
    return f"{name} opens the file once, on the first item, and 2 workers read all {len(labels)} rows right"
