"""Lesson 06's self-checks: shards per rank and worker, HDF5 opened in the worker, resuming a sampler, a shard count."""
from __future__ import annotations

import math
import multiprocessing
import pickle
import tempfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from helpers.checks.core import Answer, Case, Failed, Wrong, exercise
from helpers.samplers import DistributedWeightedSampler


def my_shards_right(shards: list[str], rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Exercise 06.1's reference answer (the tests pass it to the check)."""
    return shards[rank::world_size][worker_id::max(1, num_workers)]


# (number of shards, world_size, num_workers): even and uneven splits, the main process reading, more readers than shards,
# and 10 shards per rank for 4 workers (blocks of 10 // 4 or of ceil(10 / 4) shards give the workers unequal shares)
SHARD_SPLITS = ((12, 4, 3), (10, 2, 2), (5, 2, 0), (3, 2, 2), (20, 2, 4))


def _shards_rest_to_last(shards: list[str], rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    mine, readers = shards[rank::world_size], max(1, num_workers)
    per = len(mine) // readers  # the last worker also takes the remainder
    return mine[worker_id * per:] if worker_id == readers - 1 else mine[worker_id * per:(worker_id + 1) * per]


def _shards_ceil_blocks(shards: list[str], rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    mine = shards[rank::world_size]
    per = math.ceil(len(mine) / max(1, num_workers))  # blocks of the rounded-up size: the last workers get fewer, or none
    return mine[worker_id * per:(worker_id + 1) * per]


@exercise("06.1", "my_shards", right=my_shards_right, wrong=[
    Wrong(lambda shards, rank, world_size, worker_id, num_workers: shards[worker_id::max(1, num_workers)], "read on more than one rank"),
    Wrong(lambda shards, rank, world_size, worker_id, num_workers: shards[rank::world_size], "read by more than one worker"),
    Wrong(lambda shards, rank, world_size, worker_id, num_workers: shards[rank::world_size][worker_id::num_workers], "raised ValueError"),
    Wrong(lambda shards, rank, world_size, worker_id, num_workers: shards[rank::world_size][worker_id::max(1, num_workers)][:1],
          "no reader took"),
    Wrong(lambda shards, rank, world_size, worker_id, num_workers: shards if rank == worker_id == 0 else [], "equal shares"),
    Wrong(lambda shards, rank, world_size, worker_id, num_workers: (s for s in shards[rank::world_size][worker_id::max(1, num_workers)]),
          "a generator is used up"),
    Wrong(_shards_rest_to_last, "the readers take [2, 2, 2, 4, 2, 2, 2, 4] shards"),
    Wrong(_shards_ceil_blocks, "the readers take [3, 3, 3, 1, 3, 3, 3, 1] shards"),
    Wrong(lambda shards, rank, world_size, worker_id, num_workers: np.array(shards)[rank::world_size][worker_id::max(1, num_workers)],
          "returned a ndarray; expected a list of shard names: slice the list"),
])
def check_my_shards(answer: Answer) -> str:
    """Exercise 06.1: the shards one (rank, worker) reads, so that every shard is read exactly once across all readers."""
    name = answer.name
    for num_shards, world_size, num_workers in SHARD_SPLITS:
        shards = [f"shard-{number:02d}.tar" for number in range(num_shards)]
        readers: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for rank in range(world_size):
            for worker in range(max(1, num_workers)):
                call = f"{name}({num_shards} shards, rank={rank}, world_size={world_size}, worker_id={worker}, num_workers={num_workers})"
                with answer.calling(call, hint=lambda exc: " (num_workers=0 means the main process reads: one reader per rank)"):
                    got = answer.value(list(shards), rank, world_size, worker, num_workers)
                if not isinstance(got, (list, tuple)):
                    why = ("a generator is used up after one pass: return a list" if isinstance(got, Iterator) else
                           "slice the list, shards[...], or wrap the result in list(...)")
                    raise Failed(f"{call} returned a {type(got).__name__}; expected a list of shard names: {why}")
                if not all(isinstance(shard, str) for shard in got):
                    raise Failed(f"{call} returned {got!r}; expected a list of shard names taken from shards")
                for shard in got:
                    if shard not in shards:
                        raise Failed(f"{call} returned {shard!r}, which is not one of the shards")
                    readers[shard].append((rank, worker))
        setup = f"with {num_shards} shards, world_size={world_size}, num_workers={num_workers}"
        for shard in shards:
            taken = readers[shard]
            if len({rank for rank, _ in taken}) > 1:
                raise Failed(f"{setup}, {shard} is read on more than one rank, by (rank, worker) {taken}: each of those ranks "
                             "trains on it, a duplicate per rank. Split the shards by rank first (shards[rank::world_size])")
            if len(taken) > 1:
                raise Failed(f"{setup}, {shard} is read by more than one worker of rank {taken[0][0]}, by (rank, worker) {taken}: "
                             "split the rank's own shards by worker_id over num_workers")
            if not taken:
                raise Failed(f"{setup}, no reader took {shard}: its samples would never be trained on")
        loads = Counter(reader for taken in readers.values() for reader in taken)
        counts = [loads[(rank, worker)] for rank in range(world_size) for worker in range(max(1, num_workers))]
        if max(counts) - min(counts) > 1:
            raise Failed(f"{setup}, the readers take {counts} shards: give them equal shares, at most one shard apart "
                         "(every (rank, worker) takes every n-th shard of what is left to it)")
    return f"{name} gives each shard to exactly one (rank, worker) in all {len(SHARD_SPLITS)} splits, empty workers included"


def _as_list(got: Any, call: str) -> list[Any]:
    """The answer as a list, or a verdict saying it is not a sequence."""
    try:
        return list(got)
    except TypeError:
        raise Failed(f"{call} returned {got!r}; expected a list of shard names") from None


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
    with answer.calling(f"{name}(0)"):
        first = dataset[0]
    if _open_files() == before:
        with answer.calling(f"{name}(1)"):
            dataset[1]
        raise Failed(f"{name} opened and closed the file for each item: open it once, on the first item, keep the handle "
                     "(self.file) and reuse it; reopening costs a file open and metadata read per sample")
    handles = _handles(dataset)  # held here, so a dropped handle stays open and its id cannot be reused by a new one
    with answer.calling(f"{name}(1), {name}(2)"):
        dataset[1], dataset[2]
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
    if not (isinstance(first, (tuple, list)) and len(first) == 2 and torch.equal(torch.as_tensor(first[0]), torch.from_numpy(inputs[0]))
            and first[1] == labels[0]):
        raise Failed(f"{name}(0) returned {first!r}; expected (inputs[0] as a tensor, labels[0] as an int)")
    if not isinstance(first[0], torch.Tensor):
        raise Failed(f"{name}(0) returned inputs[0] as a {type(first[0]).__name__}: return inputs[index] as a tensor (torch.from_numpy)")
    if first[0].dtype != torch.from_numpy(inputs[0]).dtype:
        raise Failed(f"{name}(0) returned inputs[0] as a tensor of {first[0].dtype}; the file holds {inputs.dtype}: keep its dtype "
                     "(torch.from_numpy(row) does), since a float64 batch takes twice the memory and a float32 model refuses it")
    if type(first[1]) is not int:
        raise Failed(f"{name}(0) returned labels[0] as a {type(first[1]).__name__}: return labels[index] as an int (int(...)), "
                     "which the DataLoader collates into a 1-D tensor of labels")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check reads the file in worker processes, which needs the fork start method (Linux, macOS); on Windows use WSL2")
    _close_files(dataset)
    with answer.calling(f"a DataLoader with 2 workers over {type(dataset).__name__}"):
        fresh = type(dataset)(path)
        batches = list(DataLoader(fresh, batch_size=16, num_workers=2, multiprocessing_context="fork"))
    got_inputs = torch.cat([torch.as_tensor(batch[0]) for batch in batches])
    got_labels = torch.cat([torch.as_tensor(batch[1]) for batch in batches])
    if not (torch.equal(got_inputs, torch.from_numpy(inputs)) and torch.equal(got_labels, torch.from_numpy(labels))):
        raise Failed("a DataLoader with 2 workers delivered the wrong rows: item i must be (inputs[i], labels[i])")
    return f"{name} opens the file once, on the first item, and 2 workers read all {len(labels)} rows right"


def remaining_right(sampler: DistributedWeightedSampler, epoch: int, steps_done: int, batch_size: int) -> list[int]:
    """Exercise 06.3's reference answer (the tests pass it to the check)."""
    sampler.load_state_dict({**sampler.state_dict(), "epoch": epoch, "yielded": steps_done * batch_size})
    return list(sampler)


@exercise("06.3", "remaining_indices", right=remaining_right, wrong=[
    Wrong(lambda sampler, epoch, steps_done, batch_size: list(sampler)[steps_done * batch_size:], "restore the epoch"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(epoch) or list(sampler), "already trained on"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(epoch) or list(sampler)[steps_done:],
          "steps_done * batch_size"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(3) or list(sampler)[steps_done * batch_size:],
          "restore the epoch"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(epoch) or list(sampler)[40:], "returned"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(epoch) or [float(i) for i in list(sampler)[steps_done * batch_size:]],
          "list of float"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(epoch) or torch.tensor(list(sampler))[steps_done * batch_size:],
          "returned a Tensor"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(epoch) or sampler.global_indices().tolist()[steps_done * batch_size:],
          "its own part"),
    Wrong(lambda sampler, epoch, steps_done, batch_size: sampler.set_epoch(epoch + 1) or list(sampler)[steps_done * batch_size:],
          "the rest of epoch 4's draw, not epoch 3's"),  # one epoch too far
])
def check_remaining_indices(answer: Answer) -> str:
    """Exercise 06.3: the indices a restarted rank still has to train on, mid-epoch, from (epoch, steps_done, batch_size)."""
    for epoch, steps_done, batch_size in RESUME_CASES:
        _check_resume(answer, epoch, steps_done, batch_size)
    cases = ", ".join(f"epoch {e} after {k} steps of {b}" for e, k, b in RESUME_CASES)
    return f"{answer.name} resumes every rank exactly as the uninterrupted epoch continues ({cases})"


# (epoch, steps_done, batch_size): mid-epoch, at the start of epoch 0, and a late stop with an odd batch size
RESUME_CASES = ((3, 5, 8), (0, 0, 4), (7, 11, 3))


def _check_resume(answer: Answer, epoch: int, steps_done: int, batch_size: int) -> None:
    """One case of exercise 06.3, on both ranks of 2."""
    name = answer.name
    weights = torch.linspace(0.1, 1.0, 200)
    for rank in (0, 1):
        uninterrupted = DistributedWeightedSampler(weights, num_replicas=2, rank=rank, seed=4)
        uninterrupted.set_epoch(epoch)
        expected = list(uninterrupted)[steps_done * batch_size:]
        call = f"{name}(a fresh sampler of rank {rank}, epoch={epoch}, steps_done={steps_done}, batch_size={batch_size})"
        with answer.calling(call):
            got = answer.value(DistributedWeightedSampler(weights, num_replicas=2, rank=rank, seed=4), epoch, steps_done, batch_size)
        if not isinstance(got, list) or not all(type(index) is int for index in got):
            kind = type(got).__name__ if not isinstance(got, list) else f"list of {type(next(i for i in got if type(i) is not int)).__name__}"
            raise Failed(f"{call} returned a {kind}; expected a list of ints (list(sampler) after resuming gives one)")
        if got == expected:
            continue
        if len(got) > len(expected) + steps_done * batch_size:
            raise Failed(f"{call} returned {len(got)} indices, more than this rank's whole epoch ({len(uninterrupted)}): "
                         "a rank resumes only its own part of the draw, the sampler it is given")
        if steps_done and len(got) == len(expected) + steps_done * batch_size:
            raise Failed(f"{call} returned all {len(got)} indices of the epoch: the first {steps_done} batches were already "
                         f"trained on; skip steps_done * batch_size = {steps_done * batch_size} draws")
        if len(got) != len(expected):
            raise Failed(f"{call} returned {len(got)} indices, expected {len(expected)}: a step consumes batch_size draws, "
                         f"so skip steps_done * batch_size = {steps_done * batch_size}")
        drawn_in = _epoch_of(got, weights, rank, steps_done * batch_size, epoch)
        if drawn_in is not None and drawn_in != 0:
            raise Failed(f"{call} returned the rest of epoch {drawn_in}'s draw, not epoch {epoch}'s: set the sampler to the epoch "
                         f"it is given, sampler.set_epoch(epoch) (or load_state_dict with 'epoch': epoch), not {drawn_in}")
        raise Failed(f"{call} returned the right number of indices but other ones: a restarted sampler is at epoch 0, so "
                     f"restore the epoch (set_epoch or load_state_dict) before skipping, or the rest of epoch {epoch} differs")


def _epoch_of(got: list[int], weights: torch.Tensor, rank: int, skipped: int, epoch: int) -> int | None:
    """The epoch near `epoch` (0 to epoch + 2) whose draw on `rank`, after `skipped` draws, is `got`; None when none is."""
    for candidate in range(epoch + 3):
        sampler = DistributedWeightedSampler(weights, num_replicas=2, rank=rank, seed=4)
        sampler.set_epoch(candidate)
        if list(sampler)[skipped:] == got:
            return candidate
    return None


SHARD_COUNT_CASES: tuple[Case, ...] = (
    Case((4, 3, 5), 12, "the smallest multiple of 4 ranks x 3 workers = 12 readers that is at least 5 (with 8, say, each rank "
                        "would have 2 shards for its 3 workers and one worker per rank would get none)"),
    Case((4, 3, 12), 12, "12 already is a multiple of 4 ranks x 3 workers"),
    Case((4, 3, 13), 24, "13 shards for 12 readers leave 11 of them idle while one reads its second shard: the next multiple of "
                         "ranks x workers is 24"),
    Case((2, 0, 3), 4, "num_workers=0 means the main process reads: one reader per rank, so a multiple of 2"),
    Case((2, 2, 5), 8, "2 ranks x 2 workers are 4 readers; the smallest multiple of 4 that is at least 5 is 8"),
    Case((0, 3, 10), ValueError, "ranks=0 is no setup at all: raise ValueError"),
    Case((4, -1, 10), ValueError, "workers=-1 is not a number of workers: raise ValueError"),
    Case((4, 3, 0), ValueError, "min_shards=0 asks for no data: raise ValueError (at least one shard)"),
)


def shard_count_right(ranks: int, workers: int, min_shards: int) -> int:
    """Exercise 06.4's reference answer (the tests pass it to the check)."""
    if ranks < 1 or workers < 0 or min_shards < 1:
        raise ValueError(f"need ranks >= 1, workers >= 0, min_shards >= 1, got {ranks}, {workers}, {min_shards}")
    readers = ranks * max(1, workers)
    return -(-min_shards // readers) * readers


@exercise("06.4", "shard_count", right=shard_count_right, wrong=[
    Wrong(lambda ranks, workers, min_shards: shard_count_right(ranks, 1, min_shards), "one worker per rank would get none"),
    Wrong(lambda ranks, workers, min_shards: max(min_shards, ranks * workers), "returned 13"),
    Wrong(lambda ranks, workers, min_shards: -(-min_shards // (ranks * workers)) * ranks * workers, "raised ZeroDivisionError"),
    Wrong(lambda ranks, workers, min_shards: -(-min_shards // math.lcm(ranks, max(1, workers))) * math.lcm(ranks, max(1, workers))
          if ranks >= 1 and workers >= 0 and min_shards >= 1 else shard_count_right(ranks, workers, min_shards), "returned 6"),
    Wrong(lambda ranks, workers, min_shards: shard_count_right(max(ranks, 1) if ranks else 0, max(workers, 0), min_shards)
          if ranks >= 1 else shard_count_right(ranks, workers, min_shards), "workers=-1"),
    Wrong(lambda ranks, workers, min_shards: 0 if min_shards == 0 else shard_count_right(ranks, workers, min_shards), "min_shards=0"),
])
def check_shard_count(answer: Answer) -> str:
    """Exercise 06.4: the smallest multiple of ranks x workers that is at least min_shards."""
    return answer.cases(SHARD_COUNT_CASES)
