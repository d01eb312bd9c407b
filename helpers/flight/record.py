"""The flight recorder's reading: what each worker, the pin thread and the loop did with every sample and batch, on one clock (lesson 09).

`FlightRecorder(loader)` is the loader's copy whose batches are the loader's own; as the loop reads them it notes, per
sample, the dataset's fetch (`__getitem__`, `__getitems__` or the stream's next item) and inside it the dataset's
`transform` where the dataset has one; per batch the collate_fn, the pin-memory copy and, in the main process, the wait
for the batch and the loop's step (the time from one batch's arrival to the loop asking for the next). Workers send their
notes with the batch they belong to, so nothing is written to disk and nothing crosses processes by itself.

The copy starts from the loader's settings, not its progress: a torchdata StatefulDataLoader's loaded state (and its
snapshot settings) are not carried over, so a recording starts at the beginning of an epoch. A `transform` is timed
where it is the dataset's own attribute (not one inside a Subset's dataset): in each worker's copy after your
worker_init_fn, and without workers in place while the recorder reads, put back afterwards.

The clock is `time.clock_gettime(CLOCK_MONOTONIC)` where the platform has it (Linux, macOS): one counter for every
process on the machine, so a worker's timestamps and the main process's can be compared; elsewhere `time.perf_counter`
(Windows: QueryPerformanceCounter, also machine-wide). Python leaves perf_counter's reference point undefined, hence
the named clock.
"""
from __future__ import annotations

import numbers
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from torch.utils.data import DataLoader, Dataset, IterableDataset, Subset, get_worker_info
from torch.utils.data._utils.collate import default_collate
from torch.utils.data._utils.pin_memory import pin_memory

from helpers._validate import short
from helpers.ledger import MAIN, copy_class, worker_id
from helpers.rebuild import rebuild

CLOCK = "CLOCK_MONOTONIC" if hasattr(time, "clock_gettime") and hasattr(time, "CLOCK_MONOTONIC") else "perf_counter"
KINDS = ("fetch", "transform", "collate", "pin", "wait", "step")


def now() -> float:
    """Seconds on the recorder's clock (CLOCK), the same in every process of this machine."""
    return time.clock_gettime(time.CLOCK_MONOTONIC) if CLOCK == "CLOCK_MONOTONIC" else time.perf_counter()


# What this thread noted since its last batch was collated: its samples' fetches (id, samples, start, end, transforms)
# and the transforms inside the fetch under way. Per thread: two recorders read in two threads keep theirs apart.
_NOTES = threading.local()


def _fetches() -> list[tuple[Any, int, float, float, list[tuple[float, float]]]]:
    if not hasattr(_NOTES, "fetches"):
        _NOTES.fetches, _NOTES.transforms = [], []
    return _NOTES.fetches


def _transforms() -> list[tuple[float, float]]:
    _fetches()
    return _NOTES.transforms


def _forget() -> None:
    """Drop what was noted for a batch that will not be collated (an error, an epoch's dropped last items)."""
    _fetches().clear()
    _transforms().clear()


@dataclass(frozen=True)
class Event:
    """One thing done: its kind (KINDS), where (a worker's id, MAIN for a fetch without workers, 'main' for the loop's waits
    and steps, 'pin' for a pin_memory copy), when on the recorder's clock, and for what."""

    kind: str
    worker: int | str
    start: float
    end: float
    batch: int  # the batch's number in the order the loop received them, from 0
    sample: Any = None  # a fetch's sample id (its index, or (worker, n) for a stream's n-th item; __getitems__: the indices)
    pid: int = 0
    tid: int = 0  # the thread's native id, or 0 for the process's main thread
    samples: int = 0  # samples a fetch read: 1, or the batch's with __getitems__
    epoch: int = 0  # the recorder's pass (each iter() over it), from 0

    @property
    def seconds(self) -> float:
        """How long it took."""
        return self.end - self.start


def _thread_id() -> int:
    """This thread's native id, or 0 for the process's main thread (the trace names it after the process)."""
    return 0 if threading.current_thread() is threading.main_thread() else threading.get_native_id()


def _key(index: Any) -> Any:
    """A sample id as a plain value: an index or 0-d tensor as int, anything else as given."""
    if hasattr(index, "tolist") and not isinstance(index, (str, bytes)):
        index = index.tolist()
    return tuple(index) if isinstance(index, list) else index


class _TimedTransform:
    """The dataset's transform, each call's start and end noted."""

    def __init__(self, transform: Callable[..., Any]) -> None:
        self.transform = transform

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = now()
        try:
            return self.transform(*args, **kwargs)
        finally:
            _transforms().append((start, now()))


def _time_transform(dataset: Any) -> Callable[[], None]:
    """Put a timed wrapper around `dataset.transform` in place (a method keeps its object); returns what puts it back.
    A dataset without a callable transform, or one that refuses the attribute, is left alone."""
    transform = getattr(dataset, "transform", None)
    if not callable(transform) or isinstance(transform, _TimedTransform):
        return lambda: None
    own = "transform" in getattr(dataset, "__dict__", {})
    try:
        dataset.transform = _TimedTransform(transform)
    except Exception:  # noqa: BLE001 - slots, a read-only property: its fetch is timed whole
        return lambda: None

    def put_back() -> None:
        if own:
            dataset.transform = transform
        else:
            del dataset.transform
    return put_back


class _TimeInWorker:
    """The loader's worker_init_fn, then the worker's own copy of the dataset gets its transform timed."""

    def __init__(self, worker_init_fn: Callable[[int], Any] | None) -> None:
        self.worker_init_fn = worker_init_fn

    def __call__(self, worker_id: int) -> None:
        _forget()
        if self.worker_init_fn is not None:
            self.worker_init_fn(worker_id)
        info = get_worker_info()
        if info is not None:
            _time_transform(info.dataset.dataset)  # the recorder's copy wraps the worker's dataset


def _fetched(sample: Any, start: float, samples: int = 1) -> None:
    transforms = _transforms()
    _fetches().append((sample, samples, start, now(), list(transforms)))
    transforms.clear()


class _Forwarding:
    """Attributes read or set on the copy reach your dataset: a worker_init_fn that sets `get_worker_info().dataset.x`
    (a file opened per worker, a stream's range) sets it where the dataset's code reads it."""

    OWN = frozenset({"dataset", "__getitems__"})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in self.OWN:  # pickle's lookups while the copy is rebuilt in a worker
            raise AttributeError(name)
        return getattr(self.dataset, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.dataset, name, value)


def fetches_batches(dataset: Any) -> bool:
    """Whether `dataset` fetches a batch at once: its own __getitems__, not a Subset's (random_split's) that reads item by
    item from a dataset without one (then each item is timed)."""
    while isinstance(dataset, Subset) and hasattr(dataset, "__getitems__"):
        dataset = dataset.dataset
    return hasattr(dataset, "__getitems__")


class _Recorded(_Forwarding, Dataset):
    """The learner's map-style dataset, each fetch noted."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        if fetches_batches(dataset):
            self.__getitems__ = self._getitems  # the DataLoader fetches a batch at once only where the dataset does

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: Any) -> Any:
        _transforms().clear()
        start = now()
        try:
            item = self.dataset[index]
        except BaseException:  # the batch fails as a whole: its other samples' notes go too
            _forget()
            raise
        _fetched(_key(index), start)
        return item

    def _getitems(self, indices: list) -> list:
        _transforms().clear()
        start = now()
        try:
            items = self.dataset.__getitems__(indices)
        except BaseException:
            _forget()
            raise
        _fetched(tuple(_key(i) for i in indices), start, len(indices))  # one fetch: its samples cannot be told apart
        return items


class _RecordedStream(_Forwarding, IterableDataset):
    """The learner's IterableDataset, each item's next() noted; an item's id is (worker, n) for the worker's n-th item."""

    def __init__(self, dataset: IterableDataset) -> None:
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __iter__(self) -> Iterator[Any]:
        _forget()  # a persistent worker's last epoch may have left items its dropped last batch never collated
        worker, items, n = worker_id(), iter(self.dataset), 0
        while True:
            _transforms().clear()
            start = now()
            try:
                item = next(items)
            except StopIteration:
                return
            except BaseException:
                _forget()
                raise
            _fetched((worker, n), start)
            n += 1
            yield item


@dataclass
class _Notes:
    """What a worker noted about one batch, sent with it; the pin thread adds its copy."""

    worker: int
    pid: int
    fetches: list[tuple[Any, int, float, float, list[tuple[float, float]]]]
    collate: tuple[float, float]
    pin: tuple[int, float, float] | None = None


class Flight:
    """A batch on its way to the loop, with the notes about it (torch's pin_memory calls `pin_memory()` on it)."""

    def __init__(self, batch: Any, notes: _Notes) -> None:
        self.batch, self.notes = batch, notes

    def pin_memory(self, device: Any = None) -> Flight:
        """The batch pinned by torch's own pin_memory, the copy's start and end noted with the thread that made it."""
        start = now()
        pinned = pin_memory(self.batch, device)
        self.notes.pin = (_thread_id(), start, now())
        return Flight(pinned, self.notes)


class _RecordCollate:
    """The loader's collate_fn, its batch sent on with the notes of the samples in it."""

    def __init__(self, collate_fn: Callable[[Any], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, items: Any) -> Flight:
        start = now()
        batch = self.collate_fn(items)
        fetches = _fetches()
        notes = _Notes(worker_id(), os.getpid(), list(fetches), (start, now()))
        fetches.clear()
        return Flight(batch, notes)


@dataclass
class FlightRecorder:
    """The loader's own batches, read through a copy that notes what each worker, the pin thread and the loop did."""

    loader: DataLoader
    events: list[Event] = field(default_factory=list, init=False, repr=False)
    batches: int = field(default=0, init=False)  # batches the loop received, over every pass
    passes: int = field(default=0, init=False)  # iter() calls so far

    def __post_init__(self) -> None:
        loader = self.loader
        if not isinstance(loader, DataLoader):
            raise TypeError(f"loader must be a torch DataLoader, got {short(loader)}")
        kind = copy_class(loader)
        if type(loader).__iter__ is not kind.__iter__:
            raise ValueError(f"loader: a {type(loader).__name__} changes batches in its own __iter__, which a copy would not "
                             "repeat; record the torch DataLoader inside it")
        dataset = _RecordedStream(loader.dataset) if isinstance(loader.dataset, IterableDataset) else _Recorded(loader.dataset)
        collate = loader.collate_fn if loader.collate_fn is not None else default_collate
        init = _TimeInWorker(loader.worker_init_fn) if loader.num_workers else loader.worker_init_fn
        self.loader = rebuild(loader, dataset=dataset, collate_fn=_RecordCollate(collate), loader_class=kind,
                              worker_init_fn=init)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        _forget()
        main, epoch = os.getpid(), self.passes
        self.passes += 1
        put_back = lambda: None  # noqa: E731 - without workers the transform is timed in place while reading
        if self.loader.num_workers == 0:
            put_back = _time_transform(self.loader.dataset.dataset)
        batches: Any = None
        try:
            asked = now()  # the first wait includes iter(): the workers' start
            batches = iter(self.loader)
            while True:
                try:
                    flight = next(batches)
                except StopIteration:
                    return
                got = now()
                number = self.batches
                self.batches += 1
                self._note(flight.notes, number, epoch)
                self.events.append(Event("wait", "main", asked, got, number, pid=main, tid=_thread_id(), epoch=epoch))
                try:
                    yield flight.batch
                finally:  # the loop asks for the next batch, or stops here (break): the step ends either way
                    asked = now()
                    self.events.append(Event("step", "main", got, asked, number, pid=main, tid=_thread_id(), epoch=epoch))
        finally:
            put_back()
            # a worker's error keeps this iterator in a reference cycle (torch's reraise frame), and with it the workers
            # until the garbage collector runs: stop them here, as torch does at an epoch's end (persistent ones stay)
            if not self.loader.persistent_workers and hasattr(batches, "_shutdown_workers"):
                batches._shutdown_workers()  # private: the multi-process iterator's own shutdown

    def _note(self, notes: _Notes, number: int, epoch: int) -> None:
        where = notes.worker
        for sample, samples, start, end, transforms in notes.fetches:
            self.events.append(Event("fetch", where, start, end, number, sample, notes.pid, samples=samples, epoch=epoch))
            self.events.extend(Event("transform", where, a, b, number, sample, notes.pid, epoch=epoch) for a, b in transforms)
        self.events.append(Event("collate", where, *notes.collate, number, pid=notes.pid, epoch=epoch))
        if notes.pin is not None:
            tid, start, end = notes.pin
            self.events.append(Event("pin", "pin", start, end, number, pid=os.getpid(), tid=tid, epoch=epoch))

    def record(self, step: Callable[[Any], Any] | None = None, batches: int | None = None,
               seconds: float | None = None) -> FlightRecorder:
        """Read `batches` batches (None: one epoch), passing each to `step` when given, stopping after the batch whose step
        ends past `seconds` of reading when given; returns self."""
        if step is not None and not callable(step):
            raise TypeError(f"step must be a function taking a batch, or None, got {short(step)}")
        if batches is not None and (isinstance(batches, bool) or not isinstance(batches, numbers.Integral) or batches < 1):
            raise ValueError(f"batches must be a whole number of 1 or more, or None for an epoch, got {short(batches)}")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, numbers.Real)
                                    or not 0 < seconds < float("inf")):
            raise ValueError(f"seconds must be a number above 0, or None, got {short(seconds)}")
        end = now() + seconds if seconds is not None else float("inf")
        for read, batch in enumerate(self, start=1):
            if step is not None:
                step(batch)
            if (batches is not None and read >= batches) or now() >= end:
                break
        return self
