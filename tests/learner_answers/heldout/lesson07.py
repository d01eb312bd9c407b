"""Held-out wrong answers to lesson 07's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import os

import numpy as np
import torch
from torch.utils.data import (DataLoader, DistributedSampler, IterableDataset, SubsetRandomSampler,
                              WeightedRandomSampler, get_worker_info)

from helpers import doctor, env
from helpers.imbalance import sample_weights


# ---- 07.1 balanced_loader(dataset, batch_size)

def _reference_balanced_loader(dataset, batch_size: int) -> DataLoader:
    """Per-sample inverse weights, with replacement, len(dataset) draws per epoch."""
    sampler = WeightedRandomSampler(sample_weights(dataset.targets), num_samples=len(dataset), replacement=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def class_weights_as_sample_weights(dataset, batch_size: int) -> DataLoader:
    """Lesson 02's trap 1: one weight per class handed to the sampler."""
    weights = torch.as_tensor(1.0 / np.bincount(np.asarray(dataset.targets)))
    return DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(weights, len(dataset)))


def shuffle_only(dataset, batch_size: int) -> DataLoader:
    """shuffle=True: batches keep the dataset's imbalance."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def one_batch_per_epoch(dataset, batch_size: int) -> DataLoader:
    """num_samples=batch_size: balanced, but an epoch is a single batch."""
    sampler = WeightedRandomSampler(sample_weights(dataset.targets), num_samples=batch_size)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def weighted_without_replacement(dataset, batch_size: int) -> DataLoader:
    """replacement=False over len(dataset) draws: every sample once, the imbalance back by the epoch's end."""
    sampler = WeightedRandomSampler(sample_weights(dataset.targets), num_samples=len(dataset), replacement=False)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def undersampled_subset(dataset, batch_size: int) -> DataLoader:
    """Keeps min-count samples per class: balanced, but an epoch far shorter than the dataset."""
    labels = np.asarray(dataset.targets)
    counts = np.bincount(labels)
    smallest = counts[counts > 0].min()
    keep = np.concatenate([np.flatnonzero(labels == c)[:smallest] for c in np.flatnonzero(counts)])
    return DataLoader(dataset, batch_size=batch_size, sampler=SubsetRandomSampler(keep.tolist()))


# ---- 07.2 loader_with_workers(dataset, batch_size)

def _reference_loader_with_workers(dataset, batch_size: int) -> DataLoader:
    """Shuffled, workers = the largest with 1 + workers <= cores + 1, persistent."""
    workers = max(0, (env.usable_cpus() + 1) // 1 - 1)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                      persistent_workers=workers > 0)


def fixed_four_workers(dataset, batch_size: int) -> DataLoader:
    """num_workers=4 whatever the machine: too many on a 1-core machine."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=4, persistent_workers=True)


def cores_minus_one(dataset, batch_size: int) -> DataLoader:
    """'Leave a core for the main process': no worker at all on a 1-core machine."""
    workers = max(0, env.usable_cpus() - 1)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                      persistent_workers=workers > 0)


def os_cpu_count(dataset, batch_size: int) -> DataLoader:
    """Sizes by os.cpu_count(), the machine's cores, not the usable ones."""
    workers = os.cpu_count() or 1
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True)


def workers_die_each_epoch(dataset, batch_size: int) -> DataLoader:
    """Right worker count, but no persistent_workers: workers restart every epoch."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=env.usable_cpus())


def not_shuffled(dataset, batch_size: int) -> DataLoader:
    """Right workers, kept alive, but shuffle left off."""
    workers = env.usable_cpus()
    return DataLoader(dataset, batch_size=batch_size, num_workers=workers, persistent_workers=True)


def one_worker_per_core_plus_one(dataset, batch_size: int) -> DataLoader:
    """cores + 1 workers: reads 'one more than the cores' as the worker count, plus the main process."""
    workers = env.usable_cpus() + 1
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True)


# ---- 07.3 to_array(rows)

def _reference_to_array(rows):
    """One float64 block, same values."""
    return np.asarray(rows, dtype=np.float64)


def object_array(rows):
    """dtype=object: an array of Python floats, each read still touches a refcount."""
    return np.array(rows, dtype=object)


def list_of_row_arrays(rows):
    """One small array per row in a Python list: the list and array objects still get refcounted."""
    return [np.asarray(row, dtype=np.float64) for row in rows]


def half_precision(rows):
    """float16 to save memory: the values change."""
    return np.asarray(rows, dtype=np.float16)


def flattened(rows):
    """One block, but flattened to 1-D: indexing a sample now gives one number."""
    return np.asarray(rows, dtype=np.float64).ravel()


def tuples_of_floats(rows):
    """Tuples instead of lists: immutable, but still Python objects with refcounts."""
    return tuple(tuple(row) for row in rows)


# ---- 07.4 ShardedEvalStream

class _ReferenceShardedEvalStream(IterableDataset):
    """Reader id rank x workers + worker, stride world_size x workers."""

    def __init__(self, raw, labels, rank: int = 0, world_size: int = 1) -> None:
        self.raw, self.labels, self.rank, self.world_size = raw, labels, rank, world_size

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(self.rank * workers + worker, len(self.labels), self.world_size * workers):
            yield {"key": index, "input": torch.tensor(self.raw[index]), "label": int(self.labels[index])}


class _Given(IterableDataset):
    """The exercise's given __init__."""

    def __init__(self, raw, labels, rank: int = 0, world_size: int = 1) -> None:
        self.raw, self.labels, self.rank, self.world_size = raw, labels, rank, world_size

    def _sample(self, index):
        return {"key": index, "input": torch.tensor(self.raw[index]), "label": int(self.labels[index])}


class SplitsByRankOnly(_Given):
    """Splits by rank only: each of a rank's workers reads the rank's whole share."""

    def __iter__(self):
        for index in range(self.rank, len(self.labels), self.world_size):
            yield self._sample(index)


class SplitsByWorkerOnly(_Given):
    """Splits by worker only: every rank reads the same samples."""

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(worker, len(self.labels), workers):
            yield self._sample(index)


class AssumesWorkers(_Given):
    """Reads get_worker_info().id unconditionally: num_workers=0 crashes on None."""

    def __iter__(self):
        info = get_worker_info()
        start, step = self.rank * info.num_workers + info.id, self.world_size * info.num_workers
        for index in range(start, len(self.labels), step):
            yield self._sample(index)


class ReaderIdMixesUpSizes(_Given):
    """Reader id rank x world_size + worker: readers overlap or skip when workers != world_size."""

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(self.rank * self.world_size + worker, len(self.labels), self.world_size * workers):
            yield self._sample(index)


class KeyIsPositionInShard(_Given):
    """Right split, but the key counts the reader's own samples (0, 1, 2 ...), not the dataset index."""

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        indices = range(self.rank * workers + worker, len(self.labels), self.world_size * workers)
        for position, index in enumerate(indices):
            yield {**self._sample(index), "key": position}


class ContiguousFloorBlocks(_Given):
    """Contiguous blocks of len // readers: the samples of the remainder are never read."""

    def __iter__(self):
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        readers, reader = self.world_size * workers, self.rank * workers + worker
        per = len(self.labels) // readers
        for index in range(reader * per, (reader + 1) * per):
            yield self._sample(index)


# ---- 07.5 needs_set_epoch(obs)

def _finding(message: str) -> doctor.Finding:
    return doctor.Finding("needs-set-epoch", "warning", message,
                          "call loader.sampler.set_epoch(epoch) at the start of every epoch")


def _reference_needs_set_epoch(obs):
    """Compare this epoch's order with epoch + 1's, restore the epoch, Finding only when they differ."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = getattr(sampler, "epoch", 0)
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    try:
        following = list(sampler)
    finally:
        sampler.set_epoch(epoch)
    if now == following:
        return None
    return _finding(f"{type(sampler).__name__} draws another order in epoch {epoch + 1} than in epoch {epoch}")


def flags_any_set_epoch(obs):
    """Flags every sampler that has set_epoch, even one whose order never changes (shuffle=False)."""
    sampler = obs.loader.sampler
    if hasattr(sampler, "set_epoch"):
        return _finding(f"{type(sampler).__name__} has set_epoch")
    return None


def leaves_the_next_epoch(obs):
    """Compares the orders right, but leaves the sampler at epoch + 1."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = getattr(sampler, "epoch", 0)
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    if list(sampler) == now:
        return None
    return _finding(f"{type(sampler).__name__} draws another order in the next epoch")


def resets_to_epoch_zero(obs):
    """Restores epoch 0 afterwards, not the epoch the sampler was at."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = getattr(sampler, "epoch", 0)
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    following = list(sampler)
    sampler.set_epoch(0)
    if now == following:
        return None
    return _finding(f"{type(sampler).__name__} draws another order in the next epoch")


def distributed_sampler_only(obs):
    """isinstance(DistributedSampler) with shuffle: misses DistributedWeightedSampler and other such samplers."""
    sampler = obs.loader.sampler
    if isinstance(sampler, DistributedSampler) and sampler.shuffle:
        return _finding("DistributedSampler with shuffle=True")
    return None


def compares_the_same_epoch(obs):
    """Draws twice in the same epoch (no set_epoch between): never sees a change, never fires."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    if list(sampler) == list(sampler):
        return None
    return _finding(f"{type(sampler).__name__} draws another order each time")


def returns_true(obs):
    """Returns True / None instead of a doctor.Finding."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = getattr(sampler, "epoch", 0)
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    following = list(sampler)
    sampler.set_epoch(epoch)
    return True if now != following else None


HELDOUT = {
    "07.1": [class_weights_as_sample_weights, shuffle_only, one_batch_per_epoch, weighted_without_replacement,
             undersampled_subset],
    "07.2": [fixed_four_workers, cores_minus_one, os_cpu_count, workers_die_each_epoch, not_shuffled,
             one_worker_per_core_plus_one],
    "07.3": [object_array, list_of_row_arrays, half_precision, flattened, tuples_of_floats],
    "07.4": [SplitsByRankOnly, SplitsByWorkerOnly, AssumesWorkers, ReaderIdMixesUpSizes, KeyIsPositionInShard,
             ContiguousFloorBlocks],
    "07.5": [flags_any_set_epoch, leaves_the_next_epoch, resets_to_epoch_zero, distributed_sampler_only,
             compares_the_same_epoch, returns_true],
}
