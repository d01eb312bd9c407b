"""Held-out wrong answers to lesson 06's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import math

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset


# ---- 06.1 my_shards(shards, rank, world_size, worker_id, num_workers)

def _reference_my_shards(shards, rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Global reader id rank x readers + worker, every (world_size x readers)-th shard from it."""
    readers = max(1, num_workers)
    return list(shards)[rank * readers + worker_id::world_size * readers]


def split_by_worker_only(shards, rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """The classic bug: split by worker alone, every rank reads the same shards."""
    return list(shards)[worker_id::max(1, num_workers)]


def split_by_rank_only(shards, rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Split by rank alone: every worker of a rank reads all the rank's shards."""
    return list(shards)[rank::world_size]


def zero_workers_not_handled(shards, rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Uses num_workers as the reader count: num_workers=0 makes a zero slice step."""
    return list(shards)[rank * num_workers + worker_id::world_size * num_workers]


def reader_id_mixes_up_sizes(shards, rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Reader id rank x world_size + worker: readers collide when world_size != num_workers."""
    readers = max(1, num_workers)
    return list(shards)[rank * world_size + worker_id::world_size * readers]


def contiguous_floor_blocks(shards, rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Equal contiguous blocks of len // readers: the remainder shards are never read."""
    readers = max(1, num_workers)
    reader, total = rank * readers + worker_id, world_size * readers
    per = len(shards) // total
    return list(shards)[reader * per:(reader + 1) * per]


def contiguous_ceil_blocks(shards, rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Contiguous blocks of ceil(len / readers): the last readers get two or more fewer, or none."""
    readers = max(1, num_workers)
    reader, total = rank * readers + worker_id, world_size * readers
    per = math.ceil(len(shards) / total)
    return list(shards)[reader * per:(reader + 1) * per]


# ---- 06.2 LazyH5Dataset

class _ReferenceLazyH5Dataset(Dataset):
    """Opens on the first item in the reading process, keeps self.file."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = None
        with h5py.File(path, "r") as file:
            self.length = len(file["labels"])

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return torch.as_tensor(self.file["inputs"][index]), int(self.file["labels"][index])


class _GivenInit(Dataset):
    """The exercise's given __init__ and __len__, unchanged."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = None  # opened by the first __getitem__, in the process that reads
        with h5py.File(path, "r") as file:  # open briefly for the length, and close again
            self.length = len(file["labels"])

    def __len__(self) -> int:
        return self.length


class OpensPerItem(_GivenInit):
    """Opens and closes the file for every item: self.file stays None, an open per sample."""

    def __getitem__(self, index: int):
        with h5py.File(self.path, "r") as file:
            return torch.as_tensor(file["inputs"][index]), int(file["labels"][index])


class ReopensEveryItem(_GivenInit):
    """No 'is None' test: assigns a fresh h5py.File to self.file on every item."""

    def __getitem__(self, index: int):
        self.file = h5py.File(self.path, "r")
        return torch.as_tensor(self.file["inputs"][index]), int(self.file["labels"][index])


class OpensAtIndexZero(_GivenInit):
    """Reads 'the first item' as index 0: a worker (or shuffle) that starts elsewhere finds no file."""

    def __getitem__(self, index: int):
        if index == 0:
            self.file = h5py.File(self.path, "r")
        return torch.as_tensor(self.file["inputs"][index]), int(self.file["labels"][index])


class KeepsAClosedHandle(_GivenInit):
    """Opens with a with-block into self.file: the kept handle is closed after the first item."""

    def __getitem__(self, index: int):
        if self.file is None:
            with h5py.File(self.path, "r") as self.file:
                return torch.as_tensor(self.file["inputs"][index]), int(self.file["labels"][index])
        return torch.as_tensor(self.file["inputs"][index]), int(self.file["labels"][index])


class OpensForWriting(_GivenInit):
    """Opens with mode 'r+': HDF5's file lock refuses a second reading process."""

    def __getitem__(self, index: int):
        if self.file is None:
            self.file = h5py.File(self.path, "r+")
        return torch.as_tensor(self.file["inputs"][index]), int(self.file["labels"][index])


# ---- 06.3 remaining_indices(sampler, epoch, steps_done, batch_size)

def _reference_remaining_indices(sampler, epoch: int, steps_done: int, batch_size: int) -> list[int]:
    """set_epoch first, then skip steps_done x batch_size draws."""
    sampler.set_epoch(epoch)
    return [int(i) for i in sampler][steps_done * batch_size:]


def skips_without_set_epoch(sampler, epoch: int, steps_done: int, batch_size: int) -> list[int]:
    """Skips the done batches in epoch 0's order: the sampler is never moved to `epoch`."""
    return list(sampler)[steps_done * batch_size:]


def skips_steps_not_samples(sampler, epoch: int, steps_done: int, batch_size: int) -> list[int]:
    """Skips steps_done indices instead of steps_done x batch_size."""
    sampler.set_epoch(epoch)
    return list(sampler)[steps_done:]


def skips_one_batch_too_many(sampler, epoch: int, steps_done: int, batch_size: int) -> list[int]:
    """Treats steps_done as the last finished batch's index: skips one batch more."""
    sampler.set_epoch(epoch)
    return list(sampler)[(steps_done + 1) * batch_size:]


def skips_in_the_global_draw(sampler, epoch: int, steps_done: int, batch_size: int) -> list[int]:
    """Skips in the whole draw of all ranks (global_indices), not in this rank's share."""
    sampler.set_epoch(epoch)
    return sampler.global_indices()[steps_done * batch_size:].tolist()


def state_with_batches_as_yielded(sampler, epoch: int, steps_done: int, batch_size: int) -> list[int]:
    """load_state_dict with yielded=steps_done: batches where the state counts draws."""
    sampler.load_state_dict({**sampler.state_dict(), "epoch": epoch, "yielded": steps_done})
    return list(sampler)


# ---- 06.4 shard_count(ranks, workers, min_shards)

def _check_arguments(ranks, workers, min_shards):
    if ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks!r}")
    if workers < 0:
        raise ValueError(f"workers must be at least 0, got {workers!r}")
    if min_shards < 1:
        raise ValueError(f"min_shards must be at least 1, got {min_shards!r}")


def _reference_shard_count(ranks: int, workers: int, min_shards: int) -> int:
    """Smallest multiple of ranks x max(1, workers) at least min_shards."""
    _check_arguments(ranks, workers, min_shards)
    readers = ranks * max(1, workers)
    return -(-min_shards // readers) * readers


def zero_workers_divides_by_zero(ranks: int, workers: int, min_shards: int) -> int:
    """ranks x workers readers: workers=0 divides by zero instead of meaning one reader."""
    _check_arguments(ranks, workers, min_shards)
    readers = ranks * workers
    return -(-min_shards // readers) * readers


def counts_the_main_process(ranks: int, workers: int, min_shards: int) -> int:
    """ranks x (workers + 1): counts the main process as a reader next to its workers."""
    _check_arguments(ranks, workers, min_shards)
    readers = ranks * (workers + 1)
    return -(-min_shards // readers) * readers


def always_next_multiple(ranks: int, workers: int, min_shards: int) -> int:
    """(min // readers + 1) x readers: one multiple too many when min_shards already divides."""
    _check_arguments(ranks, workers, min_shards)
    readers = ranks * max(1, workers)
    return (min_shards // readers + 1) * readers


def rounds_down(ranks: int, workers: int, min_shards: int) -> int:
    """Rounds down to a multiple: fewer than min_shards (even 0)."""
    _check_arguments(ranks, workers, min_shards)
    readers = ranks * max(1, workers)
    return (min_shards // readers) * readers


def no_argument_checks(ranks: int, workers: int, min_shards: int) -> int:
    """Right arithmetic, no ValueError for negative workers, zero ranks or min_shards."""
    readers = max(1, ranks) * max(1, workers)
    return -(-max(1, min_shards) // readers) * readers


def float_count(ranks: int, workers: int, min_shards: int) -> float:
    """np.ceil leaves a float: range(count) and list slicing refuse it."""
    _check_arguments(ranks, workers, min_shards)
    readers = ranks * max(1, workers)
    return float(np.ceil(min_shards / readers) * readers)


HELDOUT = {
    "06.1": [split_by_worker_only, split_by_rank_only, zero_workers_not_handled, reader_id_mixes_up_sizes,
             contiguous_floor_blocks, contiguous_ceil_blocks],
    "06.2": [OpensPerItem, ReopensEveryItem, OpensAtIndexZero, KeepsAClosedHandle, OpensForWriting],
    "06.3": [skips_without_set_epoch, skips_steps_not_samples, skips_one_batch_too_many, skips_in_the_global_draw,
             state_with_batches_as_yielded],
    "06.4": [zero_workers_divides_by_zero, counts_the_main_process, always_next_multiple, rounds_down,
             no_argument_checks, float_count],
}
