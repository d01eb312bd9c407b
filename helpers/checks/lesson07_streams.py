"""Lesson 07's self-checks 07.3 and 07.4: rows that forked workers read without copying, an evaluation stream read once."""
from __future__ import annotations

import contextlib
import functools
import multiprocessing
from collections import Counter, defaultdict
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
from torch.utils.data._utils import worker as worker_state

from helpers import clinic
from helpers._validate import short
from helpers.checks.core import Answer, Failed, Wrong, every_batch, exercise, split_problem
from helpers.checks.lesson07 import BATCH_SIZE, _judge, _problems


# --- 07.3: one array, not lists (list-backed)

class _Rows(Dataset):
    """Rows in whatever form they are given, decoded as the clinic decodes: np.asarray of the row, then band means."""

    def __init__(self, rows: Any, labels: np.ndarray) -> None:
        self.rows, self.targets = rows, labels

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> dict[str, Any]:
        signal = np.asarray(self.rows[index], dtype=np.float32)
        return {"input": torch.from_numpy(signal.reshape(clinic.NUM_FEATURES, -1).mean(axis=1)), "label": int(self.targets[index])}


def _fork_loader(dataset: Dataset) -> DataLoader:
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check reads with worker processes started by fork (Linux, macOS), as copy-on-read needs; on Windows use WSL2")
    return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=2, persistent_workers=True, multiprocessing_context="fork")


@functools.cache
def _planted_rows() -> frozenset[str]:
    raw, labels = clinic.training_data()
    return frozenset(_problems(_fork_loader(_Rows(raw.tolist(), labels))))


def to_array_right(rows: list[list[float]]) -> np.ndarray:
    """Exercise 07.3's reference answer (the tests pass it to the check)."""
    return np.asarray(rows, dtype=np.float32)


@exercise("07.3", "to_array", right=to_array_right, wrong=[
    Wrong(lambda rows: rows, "one block of numbers"),
    Wrong(lambda rows: np.array(rows, dtype=object), "one block of numbers"),
    Wrong(lambda rows: tuple(tuple(row) for row in rows), "one block of numbers"),
    Wrong(lambda rows: np.asarray(rows, dtype=np.float16), "the values"),
    Wrong(lambda rows: [np.asarray(row, dtype=np.float32) for row in rows], "one block of numbers"),
    Wrong(lambda rows: [torch.tensor(row) for row in rows], "one block of numbers"),
    Wrong(lambda rows: np.asarray(rows, dtype=np.float32).T, "one row per sample"),
    Wrong(lambda rows: None, "returned None: end the function with `return`"),  # forgot the return
    Wrong(lambda rows: (np.float32(v) for row in rows for v in row), "one block of numbers"),  # a generator
    Wrong(lambda rows: np.asarray(rows, dtype=np.int64), "int64 drops their fractions"),
    Wrong(lambda rows: np.asarray(rows[::-1], dtype=np.float32), "in the order given"),
    Wrong(lambda rows: np.sort(np.asarray(rows, dtype=np.float32), axis=1), "in the order given"),
])
def check_to_array(answer: Answer) -> str:
    """Exercise 07.3: the raw rows stored so that workers read them without copying: the doctor's copy-on-read gone, nothing new."""
    raw, labels = clinic.training_data()
    with answer.calling(f"{answer.name}(rows)"):
        stored = answer.value(raw.tolist())
    if stored is None:
        raise Failed(f"{answer.name}(rows) returned None: end the function with `return` and the array")
    if not isinstance(stored, (np.ndarray, torch.Tensor)) or stored.dtype == object:
        first = type(next(iter(stored), None)).__name__ if hasattr(stored, "__iter__") else "nothing"
        raise Failed(f"{answer.name}(rows) returned a {type(stored).__name__} of {first}: "
                     "each row is still its own Python object, whose reference count a worker writes. Return one block of "
                     "numbers: a 2-D numpy array (np.asarray(rows, dtype=np.float32))")
    try:
        values = np.asarray(stored, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise Failed(f"{answer.name}(rows) returned {type(stored).__name__}, which does not read as a {raw.shape} table of numbers: {exc}") from None
    if values.shape != raw.shape:
        raise Failed(f"{answer.name}(rows) returned shape {values.shape}; expected {raw.shape}: one row per sample "
                     f"({raw.shape[0]} rows of {raw.shape[1]} values), in the order given")
    if not np.array_equal(values, raw):  # the rows are float32 values: float32 (or wider) holds them exactly
        largest = float(np.abs(values - raw).max())
        floating, width = ((stored.is_floating_point(), stored.element_size()) if isinstance(stored, torch.Tensor)
                           else (stored.dtype.kind == "f", stored.dtype.itemsize))
        dtype = str(stored.dtype).removeprefix("torch.")
        if not floating:
            raise Failed(f"{answer.name}(rows) changed the values: {dtype} drops their fractions (largest difference "
                         f"{largest:.3g}); store floats, float32 or wider (np.asarray(rows, dtype=np.float32))")
        if width < 4:
            raise Failed(f"{answer.name}(rows) changed the values: {dtype} rounds them (largest difference {largest:.3g}); "
                         "keep float32 or wider (np.asarray(rows, dtype=np.float32))")
        row = int(np.flatnonzero((values != raw).any(axis=1))[0])
        raise Failed(f"{answer.name}(rows) changed the values although its {dtype} holds them exactly: row {row} differs from "
                     f"rows[{row}] (largest difference {largest:.3g}). Keep each row as given, in the order given, without "
                     "sorting or reordering: np.asarray(rows, dtype=np.float32) converts them as they are")
    with answer.calling(f"the doctor reading a dataset that keeps what {answer.name} returned"):
        found = _problems(_fork_loader(_Rows(stored, labels)))
    detail = _judge(answer.name, found, _planted_rows(), "copy-on-read")
    return f"{detail}; {type(stored).__name__} of {stored.dtype}"


# --- 07.4: split the evaluation stream (unsharded-eval-stream) by rank, then by worker

class ShardedEvalStreamRight(IterableDataset):
    """Exercise 07.4's reference answer (the tests pass it to the check): each held-out sample read once over all ranks and workers."""

    def __init__(self, raw: np.ndarray, labels: np.ndarray, rank: int = 0, world_size: int = 1) -> None:
        self.raw, self.labels, self.rank, self.world_size = raw, labels, rank, world_size

    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(self.rank * workers + worker, len(self.labels), self.world_size * workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _Unsharded(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        for index in range(len(self.labels)):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _ByWorkerOnly(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(worker, len(self.labels), workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _ByRankOnly(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        for index in range(self.rank, len(self.labels), self.world_size):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _WorkersOnly(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()  # None in the main process: info.id fails there
        for index in range(self.rank * info.num_workers + info.id, len(self.labels), self.world_size * info.num_workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


UNEVEN = 599  # held-out samples read over 2 ranks x 2 workers: 599 = 4 x 149 + 3, so no reader's share is a plain quarter


class _FloorChunks(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        reader, readers = self.rank * workers + worker, self.world_size * workers
        per = len(self.labels) // readers  # the remainder is never read
        for index in range(reader * per, (reader + 1) * per):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _ProcessGroupRank(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()  # no process group in the check
        for index in range(rank * workers + worker, len(self.labels), world_size * workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _OneShot(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        if not hasattr(self, "_items"):
            self._items = ShardedEvalStreamRight.__iter__(self)  # made once: empty from the second epoch on
        return self._items


class _NumpyLabel(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        for item in ShardedEvalStreamRight.__iter__(self):
            yield {**item, "label": self.labels[item["key"]]}


def _group_hint(exc: Exception) -> str:
    """07.4: an answer that asks torch.distributed for its rank, where the check starts no process group."""
    if "process group" in str(exc):
        return (" (the check starts no process group: it gives each stream its rank as ShardedEvalStream(raw, labels, rank=r, "
                "world_size=2); read them from self.rank and self.world_size, which __init__ stores)")
    if isinstance(exc, AttributeError) and "NoneType" in str(exc):
        return (" (get_worker_info() is None in the main process, with num_workers=0: the main process is then the rank's "
                "only reader, worker 0 of 1)")
    return ""


def _keys(loader: DataLoader) -> list[int]:
    """Every key the loader yields, in order; its workers are shut down even when one raised."""
    return [int(key) for batch in every_batch(loader) for key in batch["key"]]


# 07.4's readers simulated in this process, (world_size, num_workers): the main process alone on 2 ranks, one rank with
# 3 workers, the main process alone on 3 ranks, more ranks than workers and the reverse, one worker per rank, the lesson's 2 x 2
SIMULATED = ((2, 0), (1, 3), (3, 0), (3, 2), (2, 3), (4, 1), (2, 2))
SIMULATED_SAMPLES = 37  # no reader count above divides it


@contextlib.contextmanager
def _as_worker(dataset: Any, worker: int, num_workers: int) -> Iterator[None]:
    """In the block, get_worker_info() answers as in worker `worker` of `num_workers` (None for num_workers=0)."""
    saved = worker_state._worker_info
    worker_state._worker_info = None if num_workers == 0 else worker_state.WorkerInfo(
        id=worker, num_workers=num_workers, seed=worker, dataset=dataset)
    try:
        yield
    finally:
        worker_state._worker_info = saved


def _split_problem(answer: Answer, raw: np.ndarray, labels: np.ndarray, world_size: int, num_workers: int) -> str | None:
    """What is wrong with the answer's reads over world_size ranks x num_workers simulated workers, or None."""
    name, setup = answer.value.__name__, f"with {len(labels)} samples, world_size={world_size}, num_workers={num_workers}"
    if num_workers == 0:
        setup += " (each rank's main process its only reader)"
    readers: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for rank in range(world_size):
        for worker in range(max(1, num_workers)):
            stream = answer.value(raw, labels, rank=rank, world_size=world_size)
            with answer.calling(f"{name}(raw, labels, rank={rank}, world_size={world_size}) read as worker {worker} of "
                                f"num_workers={num_workers}", hint=_group_hint), _as_worker(stream, worker, num_workers):
                items = list(iter(stream))
            for item in items:
                key = item.get("key") if isinstance(item, dict) else None
                if not (isinstance(key, int) and 0 <= key < len(labels)):
                    raise Failed(f"{setup}, rank {rank} worker {worker} yielded {short(item)}: each item is a dict whose "
                                 f"'key' is the sample's index, 0 to {len(labels) - 1}")
                if not (isinstance(item.get("input"), torch.Tensor) and torch.equal(item["input"], torch.from_numpy(raw[key]))
                        and item.get("label") == labels[key]):
                    return (f"{setup}, rank {rank} worker {worker} yielded key {key} with another sample's input or label: "
                            f"'key' is the sample's index into raw and labels (the same whichever reader reads it), "
                            f"not a count of this reader's items, and its input is raw[{key}]")
                readers[key].append((rank, worker))
    problem = split_problem(readers, range(len(labels)), setup, lambda key: f"sample {key}",
                            "split by self.rank over self.world_size first, then by worker",
                            "split the rank's samples by get_worker_info().id over its num_workers",
                            lambda key: f"no reader read sample {key}: together the readers must take every sample, also "
                                        "when they do not divide the count (take every n-th index, from the reader's own start)")
    if problem:
        return problem
    counts = Counter(reader for taken in readers.values() for reader in taken)
    idle = [(rank, worker) for rank in range(world_size) for worker in range(max(1, num_workers)) if not counts[rank, worker]]
    if idle:
        (busiest, most), = counts.most_common(1)
        return (f"{setup}, (rank, worker) {idle} read no sample while {busiest} read {most}: every reader must take its "
                "share; number the readers rank * num_workers + worker of world_size * num_workers and give each every "
                "n-th sample, from its own start")
    return None


def _check_splits(answer: Answer, raw: np.ndarray, labels: np.ndarray) -> None:
    """07.4 over SIMULATED readers: each sample read exactly once, by the reader that yields it with its own key."""
    raw, labels = raw[:SIMULATED_SAMPLES], labels[:SIMULATED_SAMPLES]
    for world_size, num_workers in SIMULATED:
        problem = _split_problem(answer, raw, labels, world_size, num_workers)
        if problem and (world_size, num_workers) != (2, 2) and not _split_problem(answer, raw, labels, 2, 2):
            problem += (f". It is right for 2 ranks x 2 workers but not for {world_size} x {num_workers}: number the readers "
                        "rank * num_workers + worker (num_workers=0: one reader per rank, worker 0 of 1) of "
                        "world_size * num_workers, with no count hard-coded")
        if problem:
            raise Failed(problem)


@functools.cache
def _planted_stream() -> frozenset[str]:
    raw, labels = (array.copy() for array in clinic.held_out_data())  # writable: torch.from_numpy warns on a read-only array
    return frozenset(_problems(DataLoader(_Unsharded(raw, labels), batch_size=BATCH_SIZE, num_workers=2, multiprocessing_context="fork")))


@exercise("07.4", "ShardedEvalStream.__iter__", takes_class=True, right=ShardedEvalStreamRight, wrong=[
    Wrong(_Unsharded, "read on more than one rank"),
    Wrong(_ByRankOnly, "split the rank's samples by get_worker_info().id"),
    Wrong(_ByWorkerOnly, "split by self.rank over self.world_size first"),
    Wrong(_WorkersOnly, "raised AttributeError"),
    Wrong("not a class", "expected an IterableDataset class"),
    Wrong(_FloorChunks, "no reader read sample"),
    Wrong(_OneShot, "in its second"),
    Wrong(_NumpyLabel, "'label' as a int64"),
    Wrong(_ProcessGroupRank, "self.rank and self.world_size"),
])
def check_sharded_eval_stream(answer: Answer) -> str:
    """Exercise 07.4: an evaluation stream split by rank, then by worker: the doctor's iterable-duplicates gone, each sample once over 2 ranks."""
    stream_class = answer.value
    if not (isinstance(stream_class, type) and issubclass(stream_class, IterableDataset)):
        raise Failed(f"expected an IterableDataset class (ShardedEvalStream), got {stream_class!r}")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check reads with worker processes started by fork (Linux, macOS); on Windows use WSL2")
    raw, labels = (array.copy() for array in clinic.held_out_data())  # writable: torch.from_numpy warns on a read-only array
    with answer.calling(f"the first item of {stream_class.__name__}(raw, labels)", hint=_group_hint):
        item = next(iter(stream_class(raw, labels)), None)
    if item is None:
        raise Failed(f"{stream_class.__name__}(raw, labels) yielded nothing when read with num_workers=0: get_worker_info() is "
                     "None in the main process, which is then the rank's only reader and must read all the rank's samples")
    kinds = {"key": int, "input": torch.Tensor, "label": int}
    if not isinstance(item, dict) or set(item) != set(kinds):
        raise Failed(f"{stream_class.__name__} yielded {short(item)}; expected a dict with keys {sorted(kinds)}")
    for key, kind in kinds.items():
        if not isinstance(item[key], kind) or (kind is int and isinstance(item[key], bool)):
            raise Failed(f"{stream_class.__name__} yielded {key!r} as a {type(item[key]).__name__}; the task asks for "
                         f"{'the row as a tensor (torch.from_numpy)' if kind is torch.Tensor else 'an int (int(...))'}")
    if item["input"].dtype != torch.from_numpy(raw[0]).dtype:
        raise Failed(f"{stream_class.__name__} yielded 'input' as a tensor of {item['input'].dtype}; the rows are {raw.dtype}: "
                     "keep their dtype (torch.from_numpy(row) does), or the model gets another dtype than it was trained on")
    loader = DataLoader(stream_class(raw, labels), batch_size=BATCH_SIZE)
    with answer.calling(f"reading {stream_class.__name__}(raw, labels) with num_workers=0, two epochs", hint=_group_hint):
        alone, again = _keys(loader), _keys(loader)
    if sorted(again) != sorted(alone):
        raise Failed(f"the same loader over {stream_class.__name__} read {len(alone)} samples in its first epoch and {len(again)} "
                     "in its second: __iter__ must start the stream again each time it is called (a generator made once is "
                     "used up after one epoch)")
    if sorted(alone) != list(range(len(labels))):
        raise Failed(f"with num_workers=0 (the main process reads), the stream gave {len(alone)} samples, {len(set(alone))} distinct, "
                     f"for {len(labels)}: the main process is the only reader then and must read every sample once")
    _check_splits(answer, raw, labels)
    with answer.calling(f"the doctor reading {stream_class.__name__} with 2 workers", hint=_group_hint):
        found = _problems(DataLoader(stream_class(raw, labels), batch_size=BATCH_SIZE, num_workers=2, multiprocessing_context="fork"))
    detail = _judge(f"{stream_class.__name__}", found, _planted_stream(), "iterable-duplicates")
    raw, labels = raw[:UNEVEN], labels[:UNEVEN]  # a count that 2 ranks x 2 workers do not divide
    with answer.calling(f"reading {stream_class.__name__}(raw, labels, rank=r, world_size=2) with 2 workers on each rank", hint=_group_hint):
        per_rank = [_keys(DataLoader(stream_class(raw, labels, rank=rank, world_size=2), batch_size=BATCH_SIZE, num_workers=2,
                                     multiprocessing_context="fork")) for rank in range(2)]
    both = set(per_rank[0]) & set(per_rank[1])
    if both:
        raise Failed(f"with 2 ranks, {len(both)} samples are read on both ranks (rank 0 read {len(per_rank[0])}, rank 1 "
                     f"{len(per_rank[1])}): split by self.rank over self.world_size first, then by worker")
    counts = Counter(per_rank[0] + per_rank[1])
    if sorted(counts) != list(range(len(labels))) or set(counts.values()) != {1}:
        missing, repeated = len(labels) - len(counts), sum(count - 1 for count in counts.values())
        raise Failed(f"over 2 ranks x 2 workers, {len(counts)} of {len(labels)} samples were read ({missing} never, {repeated} "
                     "reads of a sample read already): every (rank, worker) must take its own share, and together all of them, "
                     "also when the readers do not divide the count (take every n-th index, from the reader's own start)")
    return f"{detail}; over 2 ranks x 2 workers each of {len(labels)} samples is read once, and a second epoch reads them again"
