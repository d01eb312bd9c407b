"""Lesson 06's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import math
import os
import random

import h5py
import numpy as np
import torch
from torch.utils.data import Dataset

from helpers.checks.core import Wrong

# 06.1: my_shards(shards, rank, world_size, worker_id, num_workers)


def shards_by_worker_only(shards, rank, world_size, worker_id, num_workers):
    """Splits the shards by worker alone: every rank reads the same shards."""
    return shards[worker_id::max(1, num_workers)]


def shards_by_rank_only(shards, rank, world_size, worker_id, num_workers):
    """Splits the shards by rank alone: the workers of a rank all read the rank's shards."""
    return shards[rank::world_size]


def shards_crash_without_workers(shards, rank, world_size, worker_id, num_workers):
    """Uses num_workers as the reader count as given, so num_workers=0 makes a step of 0."""
    return shards[rank * num_workers + worker_id::world_size * num_workers]


def shards_all_without_workers(shards, rank, world_size, worker_id, num_workers):
    """Treats num_workers=0 as 'read everything', forgetting that the rank still takes only its part."""
    if num_workers == 0:
        return list(shards)
    return shards[rank * num_workers + worker_id::world_size * num_workers]


def shards_floor_chunks(shards, rank, world_size, worker_id, num_workers):
    """Contiguous chunks of len // readers: the remainder shards are read by nobody."""
    readers = world_size * max(1, num_workers)
    reader = rank * max(1, num_workers) + worker_id
    per = len(shards) // readers
    return shards[reader * per:(reader + 1) * per]


def shards_ceil_chunks(shards, rank, world_size, worker_id, num_workers):
    """Contiguous chunks of ceil(len / readers): the last readers get two fewer shards, or none."""
    readers = world_size * max(1, num_workers)
    reader = rank * max(1, num_workers) + worker_id
    per = math.ceil(len(shards) / readers)
    return shards[reader * per:(reader + 1) * per]


def shards_reader_id_mixed_up(shards, rank, world_size, worker_id, num_workers):
    """Numbers readers rank * world_size + worker: collides whenever workers != ranks."""
    readers = world_size * max(1, num_workers)
    return shards[rank * world_size + worker_id::readers]


def shards_as_indices(shards, rank, world_size, worker_id, num_workers):
    """Returns the shard numbers, not the shards."""
    workers = max(1, num_workers)
    return list(range(len(shards)))[rank * workers + worker_id::world_size * workers]


def shards_as_set(shards, rank, world_size, worker_id, num_workers):
    """Returns a set of this reader's shards instead of a sublist."""
    workers = max(1, num_workers)
    return set(shards[rank * workers + worker_id::world_size * workers])


def shards_shuffled_per_reader(shards, rank, world_size, worker_id, num_workers):
    """Shuffles the shards (unseeded) before splitting: each reader shuffles differently."""
    order = list(shards)
    random.shuffle(order)
    workers = max(1, num_workers)
    return order[rank * workers + worker_id::world_size * workers]


def shards_two_by_two(shards, rank, world_size, worker_id, num_workers):
    """Hard-codes the lesson's 2 workers per rank and 2 ranks."""
    return shards[rank * 2 + worker_id::4]


def shards_zero_workers_reader_zero(shards, rank, world_size, worker_id, num_workers):
    """Counts the readers right for num_workers=0 but numbers them rank * num_workers + worker: every rank is 0."""
    readers = world_size * num_workers if num_workers else world_size
    return shards[rank * num_workers + worker_id::readers]


def shards_numpy_split(shards, rank, world_size, worker_id, num_workers):
    """np.array_split of the shards: this reader's part as a numpy array, not a list."""
    workers = max(1, num_workers)
    return np.array_split(np.array(shards), world_size * workers)[rank * workers + worker_id]


def shards_remainder_to_last(shards, rank, world_size, worker_id, num_workers):
    """Chunks of len // readers with the whole remainder to the last reader: shares more than one apart."""
    readers = world_size * max(1, num_workers)
    reader = rank * max(1, num_workers) + worker_id
    per = len(shards) // readers
    return shards[reader * per:] if reader == readers - 1 else shards[reader * per:(reader + 1) * per]


def shards_worker_major(shards, rank, world_size, worker_id, num_workers):
    """Right: numbers the readers worker-major (worker * world_size + rank), still one reader per number."""
    return shards[worker_id * world_size + rank::world_size * max(1, num_workers)]


def shards_balanced_chunks(shards, rank, world_size, worker_id, num_workers):
    """Right: contiguous chunks, boundaries at reader * len // readers (sizes at most one apart)."""
    readers = world_size * max(1, num_workers)
    reader = rank * max(1, num_workers) + worker_id
    return shards[reader * len(shards) // readers:(reader + 1) * len(shards) // readers]


def shards_worker_then_rank(shards, rank, world_size, worker_id, num_workers):
    """Right: splits by worker first, then the worker's shards by rank (still one reader per shard, balanced)."""
    return shards[worker_id::max(1, num_workers)][rank::world_size]


# ---------------------------------------------------------------- 06.2: LazyH5Dataset.__getitem__


class _Given(Dataset):
    """The exercise's class as given: __init__ reads the length and closes the file again."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.file = None
        with h5py.File(path, "r") as file:
            self.length = len(file["labels"])

    def __len__(self) -> int:
        return self.length


class H5OpenPerItem(_Given):
    """Opens (and closes) the file in every __getitem__: an open and a metadata read per sample."""

    def __getitem__(self, index):
        with h5py.File(self.path, "r") as file:
            return torch.from_numpy(file["inputs"][index]), int(file["labels"][index])


class H5ReopenEveryItem(_Given):
    """Assigns self.file = h5py.File(...) on every item, without checking whether it is open already."""

    def __getitem__(self, index):
        self.file = h5py.File(self.path, "r")
        return torch.from_numpy(self.file["inputs"][index]), int(self.file["labels"][index])


class H5OpenInInit(_Given):
    """Opens the file in __init__ (in the main process), which forked workers then share."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.file = h5py.File(path, "r")

    def __getitem__(self, index):
        return torch.from_numpy(self.file["inputs"][index]), int(self.file["labels"][index])


class H5OpenAtIndexZero(_Given):
    """Reads 'the first item' as index 0: a worker that never gets index 0 never opens the file."""

    def __getitem__(self, index):
        if index == 0:
            self.file = h5py.File(self.path, "r")
        return torch.from_numpy(self.file["inputs"][index]), int(self.file["labels"][index])


class H5NumpyRow(_Given):
    """Returns the numpy row, not a tensor."""

    def __getitem__(self, index):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return self.file["inputs"][index], int(self.file["labels"][index])


class H5NumpyLabel(_Given):
    """Returns the label as it comes out of h5py (a numpy integer), not an int."""

    def __getitem__(self, index):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return torch.from_numpy(self.file["inputs"][index]), self.file["labels"][index]


class H5DoubleRow(_Given):
    """Converts the row to a float64 tensor instead of keeping the file's dtype."""

    def __getitem__(self, index):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return torch.tensor(self.file["inputs"][index], dtype=torch.float64), int(self.file["labels"][index])


class H5DictItem(_Given):
    """Returns a dict instead of the (input, label) tuple asked for."""

    def __getitem__(self, index):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return {"input": torch.from_numpy(self.file["inputs"][index]), "label": int(self.file["labels"][index])}


class H5LocalHandle(_Given):
    """Opens into a local variable each item and never keeps it in self.file."""

    def __getitem__(self, index):
        file = h5py.File(self.path, "r")
        return torch.from_numpy(file["inputs"][index]), int(file["labels"][index])


class H5ReadsEverything(_Given):
    """Reads the whole inputs and labels into memory on the first item: every worker loads all the data."""

    def __getitem__(self, index):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
            self.inputs, self.labels = self.file["inputs"][:], self.file["labels"][:]
        return torch.from_numpy(self.inputs[index]), int(self.labels[index])


class H5ByPid(_Given):
    """Right: remembers which process opened the file and reopens in any other process."""

    def __getitem__(self, index):
        if self.file is None or getattr(self, "pid", None) != os.getpid():
            self.file, self.pid = h5py.File(self.path, "r"), os.getpid()
        return torch.as_tensor(self.file["inputs"][index]), int(self.file["labels"][index])


class H5NotFile(_Given):
    """Right: `if not self.file` as the test, the items as torch.tensor and .item()."""

    def __getitem__(self, index):
        if not self.file:
            self.file = h5py.File(self.path, "r")
        return torch.tensor(self.file["inputs"][index]), self.file["labels"][index].item()


class H5KeepsDatasets(_Given):
    """Right: keeps the h5py dataset objects (not their data) beside the handle."""

    def __getitem__(self, index):
        if self.file is None:
            self.file = h5py.File(self.path, "r")
            self.inputs, self.labels = self.file["inputs"], self.file["labels"]
        return torch.from_numpy(self.inputs[index]), int(self.labels[index])


# 06.3: remaining_indices(sampler, epoch, steps_done, batch_size)


def remaining_without_epoch(sampler, epoch, steps_done, batch_size):
    """Skips the batches done but leaves the fresh sampler at epoch 0."""
    return list(sampler)[steps_done * batch_size:]


def remaining_skips_steps_not_samples(sampler, epoch, steps_done, batch_size):
    """Skips steps_done indices instead of steps_done batches."""
    sampler.set_epoch(epoch)
    return list(sampler)[steps_done:]


def remaining_one_batch_late(sampler, epoch, steps_done, batch_size):
    """Skips one batch too many (counts the step it stopped in as done twice)."""
    sampler.set_epoch(epoch)
    return list(sampler)[(steps_done + 1) * batch_size:]


def remaining_state_epoch_zero(sampler, epoch, steps_done, batch_size):
    """Loads a state with the draws skipped but the epoch of the fresh sampler (0)."""
    sampler.load_state_dict({**sampler.state_dict(), "yielded": steps_done * batch_size})
    return list(sampler)


def remaining_done_part(sampler, epoch, steps_done, batch_size):
    """Returns the indices already trained on instead of those left."""
    sampler.set_epoch(epoch)
    return list(sampler)[:steps_done * batch_size]


def remaining_global_draw(sampler, epoch, steps_done, batch_size):
    """Slices the whole draw of all ranks (global_indices) instead of this rank's part."""
    sampler.set_epoch(epoch)
    return sampler.global_indices()[steps_done * batch_size:].tolist()


def remaining_sorted(sampler, epoch, steps_done, batch_size):
    """The right indices, sorted: the order the epoch would have gone on in is lost."""
    sampler.set_epoch(epoch)
    return sorted(list(sampler)[steps_done * batch_size:])


def remaining_skips_all_ranks(sampler, epoch, steps_done, batch_size):
    """Skips steps_done * batch_size * world_size, as if the count were global."""
    sampler.set_epoch(epoch)
    return list(sampler)[steps_done * batch_size * sampler.num_replicas:]


def remaining_as_tensor(sampler, epoch, steps_done, batch_size):
    """Returns a tensor of the indices, not a list of ints."""
    sampler.set_epoch(epoch)
    return torch.tensor(list(sampler))[steps_done * batch_size:]


def remaining_epoch_before(sampler, epoch, steps_done, batch_size):
    """set_epoch(epoch - 1), counting epochs from 1."""
    sampler.set_epoch(max(0, epoch - 1))
    return list(sampler)[steps_done * batch_size:]


def remaining_partial_state(sampler, epoch, steps_done, batch_size):
    """load_state_dict with only the epoch and the draws done: the sampler asks for its whole state."""
    sampler.load_state_dict({"epoch": epoch, "yielded": steps_done * batch_size})
    return list(sampler)


def remaining_iterates_twice(sampler, epoch, steps_done, batch_size):
    """Loads the state, iterates once to count, then again: the resume applies to the first iteration only."""
    sampler.load_state_dict({**sampler.state_dict(), "epoch": epoch, "yielded": steps_done * batch_size})
    assert len(list(sampler)) <= len(sampler)
    return list(sampler)


def remaining_by_state(sampler, epoch, steps_done, batch_size):
    """Right: load_state_dict with the epoch and the draws done, no draw computed for the skipped part."""
    sampler.load_state_dict({**sampler.state_dict(), "epoch": epoch, "yielded": steps_done * batch_size})
    return list(sampler)


def remaining_epoch_attribute_islice(sampler, epoch, steps_done, batch_size):
    """Right: sets the epoch attribute and skips with itertools.islice."""
    import itertools

    sampler.epoch = epoch
    return list(itertools.islice(iter(sampler), steps_done * batch_size, None))


# 06.4: shard_count(ranks, workers, min_shards)


def _validated(ranks, workers, min_shards):
    if ranks < 1 or workers < 0 or min_shards < 1:
        raise ValueError("ranks >= 1, workers >= 0, min_shards >= 1")


def count_zero_workers_zero(ranks, workers, min_shards):
    """Multiplies ranks x workers as given: workers=0 makes 0 readers."""
    _validated(ranks, workers, min_shards)
    readers = ranks * workers
    return -(-min_shards // readers) * readers


def count_rounds_down(ranks, workers, min_shards):
    """Rounds down to a multiple of the readers: fewer than min_shards."""
    _validated(ranks, workers, min_shards)
    readers = ranks * max(1, workers)
    return min_shards // readers * readers


def count_always_next_multiple(ranks, workers, min_shards):
    """(min_shards // readers + 1) * readers: one multiple too many when min_shards divides."""
    _validated(ranks, workers, min_shards)
    readers = ranks * max(1, workers)
    return (min_shards // readers + 1) * readers


def count_numpy_float(ranks, workers, min_shards):
    """np.ceil of the quotient times the readers: the right number as a numpy float."""
    _validated(ranks, workers, min_shards)
    readers = ranks * max(1, workers)
    return np.ceil(min_shards / readers) * readers


def count_no_validation(ranks, workers, min_shards):
    """Computes the count but never raises ValueError."""
    readers = ranks * max(1, workers)
    return -(-min_shards // readers) * readers


def count_forgets_negative_workers(ranks, workers, min_shards):
    """Validates ranks and min_shards but lets workers < 0 through."""
    if ranks < 1 or min_shards < 1:
        raise ValueError("ranks >= 1, min_shards >= 1")
    readers = ranks * max(1, workers)
    return -(-min_shards // readers) * readers


def count_rejects_zero_workers(ranks, workers, min_shards):
    """Raises for workers=0 (workers < 1), which the task allows."""
    if ranks < 1 or workers < 1 or min_shards < 1:
        raise ValueError("ranks >= 1, workers >= 1, min_shards >= 1")
    return -(-min_shards // (ranks * workers)) * (ranks * workers)


def count_twelve_readers(ranks, workers, min_shards):
    """Hard-codes the task's 4 ranks x 3 workers."""
    _validated(ranks, workers, min_shards)
    return -(-min_shards // 12) * 12


def count_workers_only(ranks, workers, min_shards):
    """Rounds up to a multiple of the workers, forgetting the ranks."""
    _validated(ranks, workers, min_shards)
    return -(-min_shards // max(1, workers)) * max(1, workers)


def count_main_process_too(ranks, workers, min_shards):
    """Counts the main process as a reader too: ranks x (workers + 1)."""
    _validated(ranks, workers, min_shards)
    readers = ranks * (workers + 1)
    return -(-min_shards // readers) * readers


def count_asserts(ranks, workers, min_shards):
    """Checks the arguments with assert (AssertionError) instead of raising ValueError."""
    assert ranks >= 1 and workers >= 0 and min_shards >= 1
    readers = ranks * max(1, workers)
    return -(-min_shards // readers) * readers


def count_at_least_readers(ranks, workers, min_shards):
    """max(min_shards, readers): at least min_shards, but not a multiple of the readers."""
    _validated(ranks, workers, min_shards)
    return max(min_shards, ranks * max(1, workers))


def count_lcm(ranks, workers, min_shards):
    """Rounds up to a multiple of lcm(ranks, workers) instead of ranks x workers."""
    _validated(ranks, workers, min_shards)
    readers = math.lcm(ranks, max(1, workers))
    return -(-min_shards // readers) * readers


def count_rejects_one_rank(ranks, workers, min_shards):
    """Validates with ranks <= 1: a single rank, the commonest case, raises."""
    if ranks <= 1 or workers < 0 or min_shards < 1:
        raise ValueError("bad arguments")
    readers = ranks * max(1, workers)
    return -(-min_shards // readers) * readers


def count_math_ceil(ranks, workers, min_shards):
    """Right: math.ceil of the quotient (exact for any realistic shard count)."""
    if ranks < 1 or workers < 0 or min_shards < 1:
        raise ValueError(f"bad arguments {ranks}, {workers}, {min_shards}")
    readers = ranks * (workers if workers else 1)
    return math.ceil(min_shards / readers) * readers


def count_loop(ranks, workers, min_shards):
    """Right: counts up in steps of the readers."""
    if ranks < 1:
        raise ValueError("ranks < 1")
    if workers < 0:
        raise ValueError("workers < 0")
    if min_shards < 1:
        raise ValueError("min_shards < 1")
    readers = ranks * max(workers, 1)
    count = readers
    while count < min_shards:
        count += readers
    return count


WRONG = {
    "06.1": [Wrong(shards_by_worker_only, 'is read on more than one rank'),
             Wrong(shards_by_rank_only, 'read by more than one worker of rank'),
             Wrong(shards_crash_without_workers, 'num_workers=0 means the main process reads'),
             Wrong(shards_all_without_workers, "not with num_workers=0: the rank's main process is then its only reader"),
             Wrong(shards_floor_chunks, 'no reader took'),
             Wrong(shards_ceil_chunks, 'give them equal shares, at most one shard apart'),
             Wrong(shards_reader_id_mixed_up, 'number the readers rank * num_workers + worker_id'),
             Wrong(shards_as_indices, 'expected a list of shard names taken from shards'),
             Wrong(shards_as_set, 'returned a set; expected a list'),
             Wrong(shards_shuffled_per_reader, 'returned other shards when called again with the same arguments'),
             Wrong(shards_two_by_two, 'It is right for 2 ranks x 2 workers but not for 4 x 3'),
             Wrong(shards_zero_workers_reader_zero, 'not with num_workers=0'),
             Wrong(shards_numpy_split, 'returned a ndarray; expected a list'),
             Wrong(shards_remainder_to_last, 'the readers take [2, 2, 2, 4] shards')],
    "06.2": [Wrong(H5OpenPerItem, 'opened and closed the file for each item'),
             Wrong(H5ReopenEveryItem, 'opened a new handle for a later item'),
             Wrong(H5OpenInInit, 'already open after __init__'),
             Wrong(H5OpenAtIndexZero, 'not when index == 0'),
             Wrong(H5NumpyRow, 'return inputs[index] as a tensor'),
             Wrong(H5NumpyLabel, 'return labels[index] as an int'),
             Wrong(H5DoubleRow, 'torch.float64; the file holds float32'),
             Wrong(H5DictItem, 'expected (inputs[5] as a tensor, labels[5] as an int)'),
             Wrong(H5LocalHandle, 'opened and closed the file for each item'),
             Wrong(H5ReadsEverything, 'read 64 rows of a dataset from the file at once')],
    "06.3": [Wrong(remaining_without_epoch, 'restore the epoch'),
             Wrong(remaining_skips_steps_not_samples, 'skip steps_done * batch_size'),
             Wrong(remaining_one_batch_late, 'returned 52 indices, expected 60'),
             Wrong(remaining_state_epoch_zero, 'restore the epoch'),
             Wrong(remaining_done_part, 'the ones already trained on'),
             Wrong(remaining_global_draw, 'a rank resumes only its own part of the draw'),
             Wrong(remaining_sorted, 'the right indices in another order'),
             Wrong(remaining_skips_all_ranks, 'returned 20 indices, expected 60'),
             Wrong(remaining_as_tensor, 'returned a Tensor; expected a list of ints'),
             Wrong(remaining_epoch_before, "the rest of epoch 2's draw, not epoch 3's"),
             Wrong(remaining_partial_state, 'state lacks'),
             Wrong(remaining_iterates_twice, 'returned all 100 indices of the epoch')],
    "06.4": [Wrong(count_zero_workers_zero, 'num_workers=0 means the main process reads'),
             Wrong(count_rounds_down, 'returned 0, expected 12'),
             Wrong(count_always_next_multiple, '12 already is a multiple'),
             Wrong(count_numpy_float, 'a float; expected an int'),
             Wrong(count_no_validation, 'expected ValueError'),
             Wrong(count_forgets_negative_workers, 'workers=-1 is not a number of workers'),
             Wrong(count_rejects_zero_workers, 'num_workers=0 means the main process reads'),
             Wrong(count_twelve_readers, 'returned 12, expected 4'),
             Wrong(count_workers_only, 'returned 6, expected 12'),
             Wrong(count_main_process_too, 'returned 16, expected 12'),
             Wrong(count_asserts, 'raised AssertionError: ; expected ValueError'),
             Wrong(count_at_least_readers, 'returned 13, expected 24'),
             Wrong(count_lcm, 'returned 6, expected 8'),
             Wrong(count_rejects_one_rank, 'raise only for ranks < 1')],
}

RIGHT = {
    "06.1": [shards_worker_major, shards_balanced_chunks, shards_worker_then_rank],
    "06.2": [H5ByPid, H5NotFile, H5KeepsDatasets],
    "06.3": [remaining_by_state, remaining_epoch_attribute_islice],
    "06.4": [count_math_ceil, count_loop],
}
