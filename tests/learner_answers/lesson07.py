"""Lesson 07's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import itertools
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import (DataLoader, DistributedSampler, IterableDataset, RandomSampler, WeightedRandomSampler,
                              get_worker_info)

from helpers import doctor, env
from helpers.checks.core import Wrong
from helpers.imbalance import class_counts, class_weights, sample_weights
from helpers.samplers import DistributedWeightedSampler

# ---------------------------------------------------------------- 07.1: balanced_loader(dataset, batch_size)


def _inverse_frequency(targets) -> torch.Tensor:
    targets = np.asarray(targets)
    return torch.as_tensor(1.0 / np.bincount(targets)[targets], dtype=torch.double)


def balanced_frozen_draw(dataset, batch_size):
    """One weighted draw frozen into a list: the same order replayed every epoch (issue 39)."""
    order = list(WeightedRandomSampler(sample_weights(dataset.targets), num_samples=len(dataset)))
    return DataLoader(dataset, batch_size=batch_size, sampler=order)


def balanced_class_weights(dataset, batch_size):
    """Lesson 02's trap 1: one weight per class passed where the sampler takes one per sample."""
    counts = class_counts(dataset.targets, int(np.max(dataset.targets)) + 1)
    weights = torch.as_tensor(class_weights(counts))
    return DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(weights, len(dataset)))


def balanced_just_shuffle(dataset, batch_size):
    """Keeps the loader as given: shuffled, so every batch keeps the 100:10:1 mix."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def balanced_frequency_weights(dataset, batch_size):
    """Weights each sample by its class's count instead of its inverse: the majority gets even more."""
    targets = np.asarray(dataset.targets)
    weights = torch.as_tensor(np.bincount(targets)[targets], dtype=torch.double)
    return DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(weights, len(dataset)))


def balanced_one_batch_epoch(dataset, batch_size):
    """num_samples=batch_size: an epoch of a single batch instead of as many samples as the dataset."""
    sampler = WeightedRandomSampler(_inverse_frequency(dataset.targets), num_samples=batch_size)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def balanced_without_replacement(dataset, batch_size):
    """replacement=False: the epoch draws every sample once, which is the imbalanced mix again."""
    sampler = WeightedRandomSampler(_inverse_frequency(dataset.targets), len(dataset), replacement=False)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def balanced_sampler_and_shuffle(dataset, batch_size):
    """Passes the sampler and shuffle=True together (DataLoader refuses)."""
    sampler = WeightedRandomSampler(_inverse_frequency(dataset.targets), len(dataset))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, shuffle=True)


def balanced_fixed_batch(dataset, batch_size):
    """Hard-codes batches of 64 instead of batch_size."""
    sampler = WeightedRandomSampler(_inverse_frequency(dataset.targets), len(dataset))
    return DataLoader(dataset, batch_size=64, sampler=sampler)


def balanced_sqrt_weights(dataset, batch_size):
    """Inverse square-root frequency: softens the imbalance but the classes are still far from equal."""
    targets = np.asarray(dataset.targets)
    weights = torch.as_tensor(1.0 / np.sqrt(np.bincount(targets)[targets]), dtype=torch.double)
    return DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(weights, len(dataset)))


def balanced_minority_epoch(dataset, batch_size):
    """Undersamples: an epoch of classes x rarest-class count samples, not as many as the dataset has."""
    counts = np.bincount(np.asarray(dataset.targets))
    sampler = WeightedRandomSampler(_inverse_frequency(dataset.targets), int(len(counts) * counts.min()))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def balanced_sorted_labels(dataset, batch_size):
    """Computes the per-sample weights over the sorted labels: weight i belongs to another sample than index i."""
    weights = _inverse_frequency(np.sort(np.asarray(dataset.targets)))
    return DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(weights, len(dataset)))


def balanced_course_helper(dataset, batch_size):
    """Right: the course's sample_weights, float32 weights, a seeded generator."""
    sampler = WeightedRandomSampler(sample_weights(dataset.targets), num_samples=len(dataset),
                                    generator=torch.Generator().manual_seed(1))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def balanced_distributed_weighted(dataset, batch_size):
    """Right: DistributedWeightedSampler on one rank (num_samples defaults to the dataset's length)."""
    sampler = DistributedWeightedSampler(_inverse_frequency(dataset.targets), num_replicas=1, rank=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


# 07.2: loader_with_workers(dataset, batch_size)


def workers_cpu_count(dataset, batch_size):
    """os.cpu_count(): the machine's cores, not the usable ones."""
    workers = os.cpu_count()
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True)


def workers_fixed_two(dataset, batch_size):
    """A fixed 2 workers, whatever the cores."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=2, persistent_workers=True)


def workers_one_too_many(dataset, batch_size):
    """usable_cpus() + 1 workers: with the main process, two more processes than cores."""
    workers = env.usable_cpus() + 1
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True)


def workers_not_persistent(dataset, batch_size):
    """The right workers, but restarted every epoch (no persistent_workers)."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=env.usable_cpus())


def workers_not_shuffled(dataset, batch_size):
    """The right workers, but the loader no longer shuffles."""
    workers = env.usable_cpus()
    return DataLoader(dataset, batch_size=batch_size, num_workers=workers, persistent_workers=True)


def workers_cores_minus_one(dataset, batch_size):
    """usable_cpus() - 1 workers: none at all on a 1-core machine."""
    workers = env.usable_cpus() - 1
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                      persistent_workers=workers > 0)


_CORES_HERE = env.usable_cpus()


def workers_counted_once(dataset, batch_size, workers=_CORES_HERE):
    """Reads the usable cores once, when the cell ran: this machine's count, whatever the machine."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True)


def workers_affinity(dataset, batch_size):
    """len(os.sched_getaffinity(0)): ignores a CPU quota and the usable_cpus() the task names."""
    workers = len(os.sched_getaffinity(0))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True)


def workers_fixed_batch(dataset, batch_size):
    """Hard-codes batches of 64 instead of batch_size."""
    workers = env.usable_cpus()
    return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=workers, persistent_workers=True)


def workers_fixed_one(dataset, batch_size):
    """One worker, whatever the cores: within the limit everywhere, but a fixed number."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=1, persistent_workers=True)


def workers_clinic_cap(dataset, batch_size):
    """Keeps the clinic's cap of 2 workers, which the lesson says to drop on your own data."""
    workers = min(env.usable_cpus(), 2)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True)


def workers_for_two_ranks(dataset, batch_size):
    """Sizes by the rule for 2 ranks (env.workers_per_rank(2)) on a single-process loader: none on 1 core."""
    workers = env.workers_per_rank(2)
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers,
                      persistent_workers=workers > 0)


def workers_course_rule(dataset, batch_size):
    """Right: env.workers_per_rank(), the rule as the course spells it, and a RandomSampler."""
    workers = env.workers_per_rank()
    return DataLoader(dataset, batch_size=batch_size, sampler=RandomSampler(dataset), num_workers=workers,
                      persistent_workers=workers > 0)


def workers_usable_prefetch(dataset, batch_size):
    """Right: usable_cpus() workers, prefetch_factor spelled out."""
    workers = env.usable_cpus()
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers, persistent_workers=True,
                      prefetch_factor=2)


# ---------------------------------------------------------------- 07.3: to_array(rows)


def array_of_objects(rows):
    """np.array(rows, dtype=object): one array of Python floats, refcounted on every read."""
    return np.array(rows, dtype=object)


def array_list_of_rows(rows):
    """A list of one array per row: still a list of Python objects."""
    return [np.asarray(row, dtype=np.float32) for row in rows]


def array_integers(rows):
    """An integer array: the values are truncated."""
    return np.asarray(rows, dtype=np.int64)


def array_half(rows):
    """float16: the values are rounded."""
    return np.asarray(rows, dtype=np.float16)


def array_transposed(rows):
    """One row per feature instead of one per sample."""
    return np.asarray(rows, dtype=np.float32).T


def array_flattened(rows):
    """All the rows in one flat line: no row per sample."""
    return np.concatenate([np.asarray(row, dtype=np.float32) for row in rows])


def array_unchanged(rows):
    """Returns the rows as they came, a list of lists."""
    return rows


def array_back_to_lists(rows):
    """Makes the array, then .tolist() again."""
    return np.asarray(rows, dtype=np.float32).tolist()


def array_wrapped(rows):
    """np.array([rows]): an extra leading axis of 1."""
    return np.array([rows], dtype=np.float32)


def array_no_copy(rows):
    """np.array(rows, copy=False): NumPy 2 refuses, since a list cannot become an array without a copy."""
    return np.array(rows, dtype=np.float32, copy=False)


def array_sorted_rows(rows):
    """Sorts the rows on the way: the same rows, in another order than the samples."""
    return np.asarray(sorted(rows), dtype=np.float32)


def array_float64(rows):
    """Right: np.array(rows), float64, exactly the values of the Python floats."""
    return np.array(rows)


def array_float32(rows):
    """Right: float32, the signals' own dtype before tolist(), which holds every value exactly (issue 39: the task says so)."""
    return np.asarray(rows, dtype=np.float32)


def array_vstack(rows):
    """Right: np.vstack of the rows, float32."""
    return np.vstack(rows).astype(np.float32)


# ---------------------------------------------------------------- 07.4: ShardedEvalStream.__iter__


class _GivenStream(IterableDataset):
    """The exercise's class as given."""

    def __init__(self, raw, labels, rank=0, world_size=1):
        self.raw, self.labels, self.rank, self.world_size = raw, labels, rank, world_size

    def _item(self, index):
        return {"key": index, "input": torch.from_numpy(np.asarray(self.raw[index])), "label": int(self.labels[index])}


def _reader():
    info = get_worker_info()
    return (0, 1) if info is None else (info.id, info.num_workers)


class StreamUnsharded(_GivenStream):
    """Reads every sample in every reader."""

    def __iter__(self):
        for index in range(len(self.labels)):
            yield self._item(index)


class StreamWorkerOnly(_GivenStream):
    """Splits by worker alone: every rank reads the same samples."""

    def __iter__(self):
        worker, workers = _reader()
        for index in range(worker, len(self.labels), workers):
            yield self._item(index)


class StreamNestedModulo(_GivenStream):
    """Keeps a sample when index % world_size == rank and index % num_workers == worker: once each, but with 2 ranks x 2
    workers two readers get nothing."""

    def __iter__(self):
        worker, workers = _reader()
        for index in range(len(self.labels)):
            if index % self.world_size == self.rank and index % workers == worker:
                yield self._item(index)


class StreamRankOnly(_GivenStream):
    """Splits by rank alone: each worker of a rank reads all the rank's samples."""

    def __iter__(self):
        for index in range(self.rank, len(self.labels), self.world_size):
            yield self._item(index)


class StreamNoWorkerCrash(_GivenStream):
    """Reads get_worker_info().id unconditionally: with num_workers=0 it is None."""

    def __iter__(self):
        info = get_worker_info()
        start, step = self.rank * info.num_workers + info.id, self.world_size * info.num_workers
        for index in range(start, len(self.labels), step):
            yield self._item(index)


class StreamNumpyInput(_GivenStream):
    """Yields the numpy row as the input, not a tensor."""

    def __iter__(self):
        worker, workers = _reader()
        for index in range(self.rank * workers + worker, len(self.labels), self.world_size * workers):
            yield {"key": index, "input": self.raw[index], "label": int(self.labels[index])}


class StreamTensorLabel(_GivenStream):
    """Yields the label as a tensor, not an int."""

    def __iter__(self):
        worker, workers = _reader()
        for index in range(self.rank * workers + worker, len(self.labels), self.world_size * workers):
            yield {"key": index, "input": torch.from_numpy(np.asarray(self.raw[index])),
                   "label": torch.tensor(self.labels[index])}


class StreamLocalKeys(_GivenStream):
    """Keys each sample by its position in this reader's part (enumerate), not by its index."""

    def __iter__(self):
        worker, workers = _reader()
        part = range(self.rank * workers + worker, len(self.labels), self.world_size * workers)
        for key, index in enumerate(part):
            yield {**self._item(index), "key": key}


class StreamReaderMixedUp(_GivenStream):
    """Numbers the readers rank * world_size + worker: collides whenever workers != ranks."""

    def __iter__(self):
        worker, workers = _reader()
        for index in range(self.rank * self.world_size + worker, len(self.labels), self.world_size * workers):
            yield self._item(index)


class StreamFloorChunks(_GivenStream):
    """Contiguous chunks of len // readers: the remainder is read by nobody."""

    def __iter__(self):
        worker, workers = _reader()
        readers, reader = self.world_size * workers, self.rank * workers + worker
        per = len(self.labels) // readers
        for index in range(reader * per, (reader + 1) * per):
            yield self._item(index)


class StreamProcessGroupRank(_GivenStream):
    """Takes the rank from the process group (0 without one) instead of self.rank."""

    def __iter__(self):
        rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        worker, workers = _reader()
        for index in range(rank * workers + worker, len(self.labels), self.world_size * workers):
            yield self._item(index)


class StreamTuples(_GivenStream):
    """Yields (index, input, label) tuples instead of the dict asked for."""

    def __iter__(self):
        worker, workers = _reader()
        for index in range(self.rank * workers + worker, len(self.labels), self.world_size * workers):
            item = self._item(index)
            yield item["key"], item["input"], item["label"]


class StreamNothingWithoutWorkers(_GivenStream):
    """Returns at once when get_worker_info() is None: with num_workers=0 the stream is empty."""

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            return
        start, step = self.rank * info.num_workers + info.id, self.world_size * info.num_workers
        for index in range(start, len(self.labels), step):
            yield self._item(index)


class StreamAllWithoutWorkers(_GivenStream):
    """With num_workers=0 reads everything, forgetting the rank."""

    def __iter__(self):
        info = get_worker_info()
        if info is None:
            start, step = 0, 1
        else:
            start, step = self.rank * info.num_workers + info.id, self.world_size * info.num_workers
        for index in range(start, len(self.labels), step):
            yield self._item(index)


class StreamKeptIterator(_GivenStream):
    """Keeps its index iterator on self: the second epoch in the same process finds it exhausted."""

    def __iter__(self):
        if not hasattr(self, "_indices"):
            worker, workers = _reader()
            self._indices = iter(range(self.rank * workers + worker, len(self.labels), self.world_size * workers))
        for index in self._indices:
            yield self._item(index)


class StreamDoubleInput(_GivenStream):
    """Yields the row as a float64 tensor instead of the data's float32."""

    def __iter__(self):
        worker, workers = _reader()
        for index in range(self.rank * workers + worker, len(self.labels), self.world_size * workers):
            yield {**self._item(index), "input": torch.tensor(self.raw[index], dtype=torch.float64)}


class StreamWorkerMajor(_GivenStream):
    """Right: readers numbered worker * world_size + rank, the modulo test on every index."""

    def __iter__(self):
        worker, workers = _reader()
        reader, readers = worker * self.world_size + self.rank, self.world_size * workers
        for index in range(len(self.labels)):
            if index % readers == reader:
                yield {"key": index, "input": torch.tensor(self.raw[index]), "label": self.labels[index].item()}


class StreamBalancedChunks(_GivenStream):
    """Right: contiguous chunks with boundaries at reader * n // readers."""

    def __iter__(self):
        worker, workers = _reader()
        readers, reader, n = self.world_size * workers, self.rank * workers + worker, len(self.labels)
        for index in range(reader * n // readers, (reader + 1) * n // readers):
            yield self._item(index)


# ---------------------------------------------------------------- 07.5: needs_set_epoch(obs)


def _finding(message="the sampler draws another order in the next epoch"):
    return doctor.Finding("needs-set-epoch", "warning", message, "call sampler.set_epoch(epoch) before each epoch")


def epoch_whenever_settable(obs):
    """A finding whenever the sampler has set_epoch, without comparing the orders."""
    return _finding() if hasattr(obs.loader.sampler, "set_epoch") else None


def epoch_not_restored(obs):
    """Compares the orders but leaves the sampler at epoch + 1."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    now = list(sampler)
    sampler.set_epoch(sampler.epoch + 1)
    return _finding() if list(sampler) != now else None


def epoch_restored_to_zero(obs):
    """Restores the sampler to epoch 0 instead of the epoch it was at."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    now = list(sampler)
    sampler.set_epoch(sampler.epoch + 1)
    later = list(sampler)
    sampler.set_epoch(0)
    return _finding() if later != now else None


def epoch_compares_sets(obs):
    """Compares the sets of indices: a reshuffle of the same indices looks unchanged."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = sampler.epoch
    now = set(sampler)
    sampler.set_epoch(epoch + 1)
    later = set(sampler)
    sampler.set_epoch(epoch)
    return _finding() if later != now else None


def epoch_compares_sorted(obs):
    """Compares sorted(list(sampler)) of the two epochs: the same samples reshuffled look unchanged (issue 39)."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = sampler.epoch
    now = sorted(sampler)
    sampler.set_epoch(epoch + 1)
    later = sorted(sampler)
    sampler.set_epoch(epoch)
    return _finding() if later != now else None


def epoch_no_attribute_guard(obs):
    """Calls set_epoch on every sampler: samplers without it raise AttributeError."""
    sampler = obs.loader.sampler
    epoch = getattr(sampler, "epoch", 0)
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    later = list(sampler)
    sampler.set_epoch(epoch)
    return _finding() if later != now else None


def epoch_returns_text(obs):
    """Returns the message as a string instead of a doctor.Finding."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = sampler.epoch
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    later = list(sampler)
    sampler.set_epoch(epoch)
    return "needs-set-epoch: call sampler.set_epoch(epoch)" if later != now else None


def epoch_distributed_sampler_only(obs):
    """Looks for a DistributedSampler only: misses other samplers with set_epoch."""
    sampler = obs.loader.sampler
    if not isinstance(sampler, DistributedSampler):
        return None
    epoch = sampler.epoch
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    later = list(sampler)
    sampler.set_epoch(epoch)
    return _finding() if later != now else None


def epoch_zero_then_one(obs):
    """Compares epochs 0 and 1, whatever epoch the sampler is at, and leaves it at 1."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    sampler.set_epoch(0)
    first = list(sampler)
    sampler.set_epoch(1)
    return _finding() if list(sampler) != first else None


def epoch_zero_and_one_put_back(obs):
    """Compares epochs 0 and 1 whatever epoch the sampler is at, then puts the epoch back (issue 39)."""
    sampler = obs.loader.sampler
    if not (hasattr(sampler, "set_epoch") and hasattr(sampler, "epoch")):
        return None
    epoch = sampler.epoch
    sampler.set_epoch(0)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    sampler.set_epoch(epoch)
    return _finding() if second != first else None


def epoch_warn_severity(obs):
    """Builds the Finding with severity "warn", which Finding rejects."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = sampler.epoch
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    later = list(sampler)
    sampler.set_epoch(epoch)
    if later != now:
        return doctor.Finding("needs-set-epoch", "warn", "the order changes with the epoch", "call set_epoch")
    return None


def epoch_random_sampler(obs):
    """A finding for any shuffling sampler (RandomSampler or one with shuffle=True), never compared."""
    sampler = obs.loader.sampler
    if isinstance(sampler, RandomSampler) or getattr(sampler, "shuffle", False):
        return _finding()
    return None


def epoch_same_epoch_twice(obs):
    """Compares two passes at the same epoch, never calling set_epoch(epoch + 1)."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    return _finding() if list(sampler) != list(sampler) else None


def epoch_batch_sampler(obs):
    """Looks at obs.loader.batch_sampler, which has no set_epoch, so it never finds anything."""
    sampler = obs.loader.batch_sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = sampler.epoch
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    later = list(sampler)
    sampler.set_epoch(epoch)
    return _finding() if later != now else None


def epoch_snake_case_code(obs):
    """Names the finding's code needs_set_epoch, with underscores, which Finding rejects."""
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    epoch = sampler.epoch
    now = list(sampler)
    sampler.set_epoch(epoch + 1)
    later = list(sampler)
    sampler.set_epoch(epoch)
    if later != now:
        return doctor.Finding("needs_set_epoch", "warning", "the order changes with the epoch", "call set_epoch")
    return None


def epoch_prefix_torch(obs):
    """Right: compares the first 256 draws as tensors, restores with the epoch attribute read first."""
    sampler = obs.loader.sampler
    if not callable(getattr(sampler, "set_epoch", None)):
        return None
    epoch = getattr(sampler, "epoch", 0)
    try:
        now = torch.tensor(list(itertools.islice(iter(sampler), 256)))
        sampler.set_epoch(epoch + 1)
        later = torch.tensor(list(itertools.islice(iter(sampler), 256)))
    finally:
        sampler.set_epoch(epoch)
    if torch.equal(now, later):
        return None
    return doctor.Finding(code="sampler-epoch", severity="error", message=f"order differs at epoch {epoch + 1}",
                          fix="sampler.set_epoch(epoch) at the start of every epoch", evidence={"epoch": epoch})


def epoch_full_lists(obs):
    """Right: the whole orders as lists, an info-level finding."""
    sampler = obs.loader.sampler
    set_epoch = getattr(sampler, "set_epoch", None)
    if set_epoch is None:
        return None
    epoch = sampler.epoch
    orders = []
    for e in (epoch, epoch + 1):
        set_epoch(e)
        orders.append(list(sampler))
    set_epoch(epoch)
    if orders[0] == orders[1]:
        return None
    return doctor.Finding("needs-set-epoch", "info", "next epoch reorders", "call set_epoch every epoch")


WRONG = {
    "07.1": [Wrong(balanced_class_weights, 'class-weights-as-sample-weights'),
             Wrong(balanced_just_shuffle, 'Its sampler is a RandomSampler (shuffle=True)'),
             Wrong(balanced_frequency_weights, "weight each sample by 1 / its class's count"),
             Wrong(balanced_one_batch_epoch, 'epoch draws 64 samples'),
             Wrong(balanced_without_replacement, 'draws without replacement (replacement=False)'),
             Wrong(balanced_sampler_and_shuffle, 'sampler option is mutually exclusive with shuffle'),
             Wrong(balanced_fixed_batch, 'use the batch_size it is given (50)'),
             Wrong(balanced_sqrt_weights, "weight each sample by 1 / its class's count"),
             Wrong(balanced_minority_epoch, 'epoch draws 60 samples'),
             Wrong(balanced_sorted_labels, 'Its weights differ within class'),
             Wrong(balanced_frozen_draw, 'the same order every epoch')],
    "07.2": [Wrong(workers_cpu_count, "os.cpu_count() (8 on both) counts the machine's cores"),
             Wrong(workers_fixed_two, 'the same 2 on both machines'),
             Wrong(workers_one_too_many, 'one worker too many'),
             Wrong(workers_not_persistent, 'persistent_workers=True'),
             Wrong(workers_not_shuffled, 'not shuffled'),
             Wrong(workers_cores_minus_one, 'one worker fewer than the rule allows'),
             Wrong(workers_counted_once, 'on both machines: a fixed number, or one counted once'),
             Wrong(workers_affinity, 'os.sched_getaffinity() (or os.cpu_count()) sees all the cores a CPU quota does not let you use'),
             Wrong(workers_fixed_batch, 'use the batch_size it is given (50)'),
             Wrong(workers_fixed_one, 'the same 1 on both machines'),
             Wrong(workers_clinic_cap, "the clinic's cap of 2 workers"),
             Wrong(workers_for_two_ranks, 'that is the rule for 2 ranks')],
    "07.3": [Wrong(array_of_objects, 'returned a ndarray of ndarray'),
             Wrong(array_list_of_rows, 'returned a list of ndarray'),
             Wrong(array_integers, 'int64 drops their fractions'),
             Wrong(array_half, 'float16 rounds them'),
             Wrong(array_transposed, 'returned shape (1024, 2220)'),
             Wrong(array_flattened, 'returned shape (2273280,)'),
             Wrong(array_unchanged, 'returned a list of list'),
             Wrong(array_back_to_lists, 'returned a list of list'),
             Wrong(array_wrapped, 'returned shape (1, 2220, 1024)'),
             Wrong(array_no_copy, 'Unable to avoid copy'),
             Wrong(array_sorted_rows, 'without sorting or reordering')],
    "07.4": [Wrong(StreamUnsharded, 'read on more than one rank'),
             Wrong(StreamWorkerOnly, 'split by self.rank over self.world_size first'),
             Wrong(StreamRankOnly, "split the rank's samples by get_worker_info().id"),
             Wrong(StreamNoWorkerCrash, 'get_worker_info() is None in the main process'),
             Wrong(StreamNumpyInput, "yielded 'input' as a ndarray"),
             Wrong(StreamTensorLabel, "yielded 'label' as a Tensor"),
             Wrong(StreamLocalKeys, "not a count of this reader's items"),
             Wrong(StreamReaderMixedUp, 'number the readers rank * num_workers + worker'),
             Wrong(StreamFloorChunks, 'no reader read sample'),
             Wrong(StreamProcessGroupRank, 'split by self.rank over self.world_size first'),
             Wrong(StreamTuples, 'expected a dict with keys'),
             Wrong(StreamNothingWithoutWorkers, 'yielded nothing when read with num_workers=0'),
             Wrong(StreamAllWithoutWorkers, "world_size=2, num_workers=0 (each rank's main process its only reader), sample 0 is read on more than one rank"),
             Wrong(StreamKeptIterator, '0 in its second'),
             Wrong(StreamDoubleInput, "'input' as a tensor of torch.float64"),
             Wrong(StreamNestedModulo, 'read no sample while')],
    "07.5": [Wrong(epoch_whenever_settable, 'instead of only asking whether set_epoch exists'),
             Wrong(epoch_not_restored, "changed the sampler's epoch from 0 to 1"),
             Wrong(epoch_restored_to_zero, 'from 3 to 0'),
             Wrong(epoch_compares_sets, 'found nothing for a loader with DistributedSampler(shuffle=True) on one rank'),
             Wrong(epoch_compares_sorted, 'compare the order, not the contents'),
             Wrong(epoch_no_attribute_guard, 'return None for them'),
             Wrong(epoch_returns_text, 'must return a Finding or None'),
             Wrong(epoch_distributed_sampler_only, 'found nothing for a loader with DistributedWeightedSampler'),
             Wrong(epoch_zero_then_one, "changed the sampler's epoch from 0 to 1"),
             Wrong(epoch_warn_severity, 'severity must be one of'),
             Wrong(epoch_random_sampler, 'found nothing for a loader with DistributedWeightedSampler'),
             Wrong(epoch_same_epoch_twice, 'after sampler.set_epoch(epoch + 1)'),
             Wrong(epoch_batch_sampler, '(obs.loader.sampler)'),
             Wrong(epoch_snake_case_code, "code must be lower-case words joined by '-'"),
             Wrong(epoch_zero_and_one_put_back, 'not epochs 0 and 1')],
}

RIGHT = {
    "07.1": [balanced_course_helper, balanced_distributed_weighted],
    "07.2": [workers_course_rule, workers_usable_prefetch],
    "07.3": [array_float64, array_vstack, array_float32],
    "07.4": [StreamWorkerMajor, StreamBalancedChunks],
    "07.5": [epoch_prefix_torch, epoch_full_lists],
}
