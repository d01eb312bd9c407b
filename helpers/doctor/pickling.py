"""What a DataLoader sends each worker under spawn and forkserver, pickled as they pickle it: the first part that fails, named by its path (lesson 00)."""
from __future__ import annotations

import multiprocessing
import pickle
import sys
from dataclasses import dataclass, field
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader

SENT = ("dataset", "collate_fn", "worker_init_fn")  # what a DataLoader passes to each worker process it starts
PICKLE_FIX = ("make it picklable: a function or class defined at module level instead of a lambda or a local one; a file, "
              "database or socket opened lazily inside the worker (in __getitem__ or worker_init_fn) instead of in __init__ "
              "(lesson 00)")
MAX_CHILDREN = 10_000  # items of one list or dict tried one by one when looking for the part that fails


def start_method(loader: DataLoader) -> str:
    """The start method the loader's workers use: its multiprocessing_context's, else this process's default."""
    context = loader.multiprocessing_context
    if context is not None:
        return context.get_start_method()
    return multiprocessing.get_start_method(allow_none=True) or multiprocessing.get_all_start_methods()[0]  # no side effect


class _Counter:
    """A file that only counts the bytes written to it."""

    def __init__(self) -> None:
        self.bytes = 0

    def write(self, data: bytes) -> int:
        self.bytes += len(data)
        return len(data)


class _Probe(ForkingPickler):
    """multiprocessing's pickler, with tensors left out (a worker gets a handle to shared memory; torch's reducer would
    move the tensor there now) and numpy arrays counted by their bytes, not pickled (they travel by value, always
    picklable), noting what it references from a __main__ that has no file (a notebook, a REPL)."""

    def __init__(self, file: _Counter) -> None:
        super().__init__(file, pickle.DEFAULT_PROTOCOL)
        self.from_main: list[str] = []
        self.array_bytes = 0

    def persistent_id(self, obj: Any) -> str | None:
        if isinstance(obj, (torch.Tensor, torch.UntypedStorage, torch.TypedStorage)):
            return "tensor"
        if isinstance(obj, np.ndarray) and obj.dtype != object:  # an array of objects pickles its objects: pickle it
            self.array_bytes += obj.nbytes
            return "array"
        return None

    def reducer_override(self, obj: Any) -> Any:
        if (isinstance(obj, type) or callable(obj)) and getattr(obj, "__module__", None) == "__main__":
            self.from_main.append(getattr(obj, "__qualname__", repr(obj)))
        return NotImplemented


@dataclass
class Pickled:
    """One part's pickling: its bytes (tensors left out, numpy arrays by their bytes), the error it raised, what it needs from __main__."""

    nbytes: int = 0
    error: BaseException | None = None
    from_main: list[str] = field(default_factory=list)


def pickle_probe(obj: Any) -> Pickled:
    """Pickle `obj` as multiprocessing does, into a byte counter: its size (numpy arrays by their bytes), or the error."""
    sink = _Counter()
    probe = _Probe(sink)
    try:
        probe.dump(obj)
    except Exception as exc:  # noqa: BLE001 - any error of pickling is the answer
        return Pickled(sink.bytes + probe.array_bytes, exc, probe.from_main)
    return Pickled(sink.bytes + probe.array_bytes, None, probe.from_main)


def _children(path: str, obj: Any) -> list[tuple[str, Any]]:
    """The parts `obj` is pickled from: its attributes, a list's or tuple's items, a dict's keys and values."""
    if isinstance(obj, dict):
        items = list(obj.items())[:MAX_CHILDREN]
        return [(f"{path}[{k!r}] (key)", k) for k, _ in items] + [(f"{path}[{k!r}]", v) for k, v in items]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [(f"{path}[{i}]", v) for i, v in enumerate(list(obj)[:MAX_CHILDREN])]
    found = [(f"{path}.{k}", v) for k, v in vars(obj).items()] if hasattr(obj, "__dict__") and not isinstance(obj, type) else []
    for name in getattr(type(obj), "__slots__", ()):
        if isinstance(name, str) and hasattr(obj, name):
            found.append((f"{path}.{name}", getattr(obj, name)))
    return found


def culprit(path: str, obj: Any, depth: int = 0) -> tuple[str, Any, BaseException] | None:
    """The deepest part of `obj` that fails to pickle on its own, as (path, part, error); None when `obj` pickles."""
    whole = pickle_probe(obj)
    if whole.error is None:
        return None
    if depth < 8:
        for child_path, child in _children(path, obj):
            found = culprit(child_path, child, depth + 1)
            if found is not None:
                return found
    return path, obj, whole.error


def main_has_no_file() -> bool:
    """Whether __main__ is a notebook or a REPL: a spawned worker cannot import what is defined there."""
    return getattr(sys.modules.get("__main__"), "__file__", None) is None
