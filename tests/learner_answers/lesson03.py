"""Lesson 03's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import itertools
import time

import numpy as np
import torch
from torch.utils.data import get_worker_info

from helpers import workloads
from helpers.checks.core import Wrong


# ================================================================ 03.1 steady_samples_per_s(loader, warmup, num)
def steady_times_the_warmup(loader, warmup_batches, num_batches):
    """Starts the clock before the warm-up batches: start-up is timed after all."""
    start = time.perf_counter()
    samples = 0
    for i, batch in enumerate(loader):
        if i >= warmup_batches:
            samples += len(batch[0])
        if i + 1 == warmup_batches + num_batches:
            break
    return samples / (time.perf_counter() - start)


def steady_drains_the_loader(loader, warmup_batches, num_batches):
    """Never stops: draws every batch of the loader, timing all those after the warm-up."""
    samples, start = 0, None
    for i, batch in enumerate(loader):
        if i == warmup_batches:
            start = time.perf_counter()
        if i >= warmup_batches:
            samples += len(batch[0])
    return samples / (time.perf_counter() - start)


def steady_assumes_batch_size(loader, warmup_batches, num_batches):
    """Counts loader.batch_size x num_batches: wrong for a partial last batch or batch_size=None."""
    it = iter(loader)
    for _ in range(warmup_batches):
        next(it)
    start = time.perf_counter()
    for _ in range(num_batches):
        next(it)
    return (loader.batch_size or 1) * num_batches / (time.perf_counter() - start)


def steady_len_of_batch(loader, warmup_batches, num_batches):
    """len(batch) of an (inputs, labels) pair is 2, not the batch's samples."""
    it = iter(loader)
    for _ in range(warmup_batches):
        next(it)
    start, samples = time.perf_counter(), 0
    for _ in range(num_batches):
        samples += len(next(it))
    return samples / (time.perf_counter() - start)


def steady_time_time(loader, warmup_batches, num_batches):
    """time.time() instead of time.perf_counter()."""
    it = iter(loader)
    for _ in range(warmup_batches):
        next(it)
    start, samples = time.time(), 0
    for _ in range(num_batches):
        samples += len(next(it)[0])
    return samples / (time.time() - start)


def steady_clock_starts_late(loader, warmup_batches, num_batches):
    """Starts the clock after the first timed batch arrives, yet counts its samples."""
    samples, start = 0, None
    for i, batch in enumerate(loader):
        if i < warmup_batches:
            continue
        if start is None:
            start = time.perf_counter()
        samples += len(batch[0])
        if i + 1 == warmup_batches + num_batches:
            break
    return samples / (time.perf_counter() - start)


def steady_batches_per_s(loader, warmup_batches, num_batches):
    """Returns batches per second, not samples per second."""
    it = iter(loader)
    for _ in range(warmup_batches):
        next(it)
    start = time.perf_counter()
    for _ in range(num_batches):
        next(it)
    return num_batches / (time.perf_counter() - start)


def steady_seconds_per_sample(loader, warmup_batches, num_batches):
    """Returns seconds per sample: the reciprocal."""
    it = iter(loader)
    for _ in range(warmup_batches):
        next(it)
    start, samples = time.perf_counter(), 0
    for _ in range(num_batches):
        samples += len(next(it)[0])
    return (time.perf_counter() - start) / samples


def steady_fresh_iterator_per_batch(loader, warmup_batches, num_batches):
    """next(iter(loader)) each time: restarts the loader (and its workers) for every batch."""
    for _ in range(warmup_batches):
        next(iter(loader))
    start, samples = time.perf_counter(), 0
    for _ in range(num_batches):
        samples += len(next(iter(loader))[0])
    return samples / (time.perf_counter() - start)


def steady_second_pass_for_timing(loader, warmup_batches, num_batches):
    """Warms up on one iterator, then times a new `for batch in loader`: start-up again."""
    it = iter(loader)
    for _ in range(warmup_batches):
        next(it)
    start, samples = time.perf_counter(), 0
    for batch in itertools.islice(loader, num_batches):
        samples += len(batch[0])
    return samples / (time.perf_counter() - start)


# ---------------------------------------------------------------- 03.1 right answers
def steady_islice(loader, warmup_batches, num_batches):
    """Right, with itertools.islice."""
    batches = iter(loader)
    for _ in itertools.islice(batches, warmup_batches):
        pass
    start = time.perf_counter()
    samples = sum(len(batch[0]) for batch in itertools.islice(batches, num_batches))
    return samples / (time.perf_counter() - start)


def steady_enumerate_break(loader, warmup_batches, num_batches):
    """Right, one enumerate loop, clock started after the last warm-up batch, shape[0] counts."""
    samples, start = 0, time.perf_counter()
    for i, batch in enumerate(loader):
        if i < warmup_batches:
            if i == warmup_batches - 1:
                start = time.perf_counter()
            continue
        samples += batch[0].shape[0]
        if i == warmup_batches + num_batches - 1:
            break
    return samples / (time.perf_counter() - start)


# ================================================================ 03.2 knee(values, samples_per_s, tolerance)
def _same_length(values, samples_per_s):
    if len(values) != len(samples_per_s):
        raise ValueError(f"values has {len(values)} entries, samples_per_s {len(samples_per_s)}")


def knee_returns_best(values, samples_per_s, tolerance=0.1):
    """Returns the value with the highest samples/s, not the smallest one within tolerance."""
    _same_length(values, samples_per_s)
    return values[int(np.argmax(samples_per_s))]


def knee_first_in_list_order(values, samples_per_s, tolerance=0.1):
    """The first value in list order within tolerance: only right when values are sorted."""
    _same_length(values, samples_per_s)
    best = max(samples_per_s)
    for value, rate in zip(values, samples_per_s):
        if rate >= (1 - tolerance) * best:
            return value


def knee_returns_index(values, samples_per_s, tolerance=0.1):
    """Returns the position in the list, not the value."""
    _same_length(values, samples_per_s)
    best = max(samples_per_s)
    return min(i for i, rate in enumerate(samples_per_s) if rate >= (1 - tolerance) * best)


def knee_strict_inequality(values, samples_per_s, tolerance=0.1):
    """> instead of >=: a value exactly at 90 % of the best is left out."""
    _same_length(values, samples_per_s)
    best = max(samples_per_s)
    return min(v for v, rate in zip(values, samples_per_s) if rate > (1 - tolerance) * best)


def knee_absolute_tolerance(values, samples_per_s, tolerance=0.1):
    """best - tolerance: treats 0.1 as samples/s, not as a fraction of the best."""
    _same_length(values, samples_per_s)
    best = max(samples_per_s)
    return min(v for v, rate in zip(values, samples_per_s) if rate >= best - tolerance)


def knee_hard_coded_tolerance(values, samples_per_s, tolerance=0.1):
    """Ignores the tolerance argument: always 10 %."""
    _same_length(values, samples_per_s)
    best = max(samples_per_s)
    return min(v for v, rate in zip(values, samples_per_s) if rate >= 0.9 * best)


def knee_no_length_check(values, samples_per_s, tolerance=0.1):
    """zip() silently truncates sequences of different lengths: no ValueError."""
    pairs = list(zip(values, samples_per_s))
    best = max(rate for _, rate in pairs)
    return min(v for v, rate in pairs if rate >= (1 - tolerance) * best)


def knee_marginal_gain(values, samples_per_s, tolerance=0.1):
    """The first value after which the next one gains less than 10 %: a different knee."""
    _same_length(values, samples_per_s)
    for i in range(len(values) - 1):
        if samples_per_s[i + 1] < (1 + tolerance) * samples_per_s[i]:
            return values[i]
    return values[-1]


def knee_returns_rate(values, samples_per_s, tolerance=0.1):
    """Returns the knee's samples/s instead of its value."""
    _same_length(values, samples_per_s)
    best = max(samples_per_s)
    return min((v, rate) for v, rate in zip(values, samples_per_s) if rate >= (1 - tolerance) * best)[1]


def knee_fraction_of_best(values, samples_per_s, tolerance=0.1):
    """rate >= tolerance x best: within 10 % OF the best, i.e. anything above a tenth."""
    _same_length(values, samples_per_s)
    best = max(samples_per_s)
    return min(v for v, rate in zip(values, samples_per_s) if rate >= tolerance * best)


# ---------------------------------------------------------------- 03.2 right answers
def knee_numpy(values, samples_per_s, tolerance=0.1):
    """Right, numpy masks: an np.int64."""
    values, rates = np.asarray(values), np.asarray(samples_per_s, dtype=float)
    if values.shape != rates.shape:
        raise ValueError(f"values {values.shape} and samples_per_s {rates.shape} differ in length")
    return values[rates >= (1 - tolerance) * rates.max()].min()


def knee_sorted_scan(values, samples_per_s, tolerance=0.1):
    """Right, sorting the pairs by value and returning the first good enough."""
    if len(values) != len(samples_per_s):
        raise ValueError("values and samples_per_s must have the same length")
    threshold = (1 - tolerance) * max(samples_per_s)
    for value, rate in sorted(zip(values, samples_per_s)):
        if rate >= threshold:
            return value


# ================================================================ 03.3 MyBatchedDataset.__getitems__
class GetitemsReturnsBatch(workloads.InMemoryDataset):
    """Returns the stacked (features, labels) batch, not a list of samples."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        return self.features[rows], self.labels[rows]


class GetitemsLoopsOverGetitem(workloads.InMemoryDataset):
    """Calls self[i] per index: one lookup per sample, not one indexing per tensor."""

    def __getitems__(self, indices):
        return [self[i] for i in indices]


class GetitemsSortsIndices(workloads.InMemoryDataset):
    """Sorts the indices: samples come back in the wrong order under shuffle."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(sorted(indices))
        return list(zip(self.features.index_select(0, rows).unbind(0), self.labels.index_select(0, rows).unbind(0)))


class GetitemsFeaturesOnly(workloads.InMemoryDataset):
    """Returns only the feature rows: the labels are lost."""

    def __getitems__(self, indices):
        return list(self.features.index_select(0, torch.as_tensor(indices)).unbind(0))


class GetitemsSwappedPair(workloads.InMemoryDataset):
    """(label, features) pairs: the sample order swapped."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        return list(zip(self.labels.index_select(0, rows).unbind(0), self.features.index_select(0, rows).unbind(0)))


class GetitemsContiguousSlice(workloads.InMemoryDataset):
    """Slices indices[0]..indices[-1]: right only for sequential, unshuffled batches."""

    def __getitems__(self, indices):
        start, stop = indices[0], indices[-1] + 1
        return list(zip(self.features[start:stop].unbind(0), self.labels[start:stop].unbind(0)))


class GetitemsIndexesRowByRow(workloads.InMemoryDataset):
    """Indexes the tensors once per index: a list of samples, but no batching (nothing gained over __getitem__)."""

    def __getitems__(self, indices):
        return [(self.features[i], self.labels[i]) for i in indices]


class GetitemsLabelsRowByRow(workloads.InMemoryDataset):
    """index_select for the features, but the labels one index at a time."""

    def __getitems__(self, indices):
        features = self.features.index_select(0, torch.as_tensor(indices))
        return [(features[k], self.labels[i]) for k, i in enumerate(indices)]


class GetitemsStackedList(workloads.InMemoryDataset):
    """[features[rows], labels[rows]]: a list, but of the two stacked tensors, not of samples."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        return [self.features[rows], self.labels[rows]]


class GetitemsZipsWholeTensors(workloads.InMemoryDataset):
    """Takes the task's zip hint literally on the dataset's whole tensors: every sample, not the batch's."""

    def __getitems__(self, indices):
        return list(zip(self.features.unbind(0), self.labels.unbind(0)))


class GetitemsReturnsZip(workloads.InMemoryDataset):
    """Returns the zip object itself, not a list: collate cannot index it."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        return zip(self.features.index_select(0, rows).unbind(0), self.labels.index_select(0, rows).unbind(0))


class GetitemsLabelShapeOne(workloads.InMemoryDataset):
    """Labels unsqueezed to shape [1]: batches of labels come out [B, 1], not [B]."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        labels = self.labels.index_select(0, rows).unsqueeze(1)
        return list(zip(self.features.index_select(0, rows).unbind(0), labels.unbind(0)))


class GetitemsFloatLabels(workloads.InMemoryDataset):
    """Labels turned into floats: batches of labels are float32, not int64."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        labels = self.labels.index_select(0, rows).float()
        return list(zip(self.features.index_select(0, rows).unbind(0), labels.unbind(0)))


# ---------------------------------------------------------------- 03.3 right answers
class GetitemsTupleOfSamples(workloads.InMemoryDataset):
    """Right, a tuple of samples (default_collate accepts any sequence)."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        return tuple(zip(self.features.index_select(0, rows).unbind(0), self.labels.index_select(0, rows).unbind(0)))


class GetitemsAdvancedIndexing(workloads.InMemoryDataset):
    """Right, features[rows] advanced indexing and a list comprehension of pairs."""

    def __getitems__(self, indices):
        rows = torch.as_tensor(indices, dtype=torch.long)
        features, labels = self.features[rows], self.labels[rows]
        return [(features[i], labels[i]) for i in range(len(rows))]


# ================================================================ 03.4 seed_numpy_worker(worker_id)
def seed_from_worker_id(worker_id):
    """Seeds from worker_id: workers differ, but every epoch and run repeats the same draws."""
    get_worker_info().dataset.rng = np.random.default_rng(worker_id)


def seed_global_numpy(worker_id):
    """np.random.seed: seeds numpy's global state, not the dataset's own generator."""
    np.random.seed(get_worker_info().seed % 2**32)


def seed_fixed_constant(worker_id):
    """default_rng(0) in every worker: all workers draw the same numbers again."""
    get_worker_info().dataset.rng = np.random.default_rng(0)


def seed_local_variable(worker_id):
    """Makes the new generator but never assigns it to the dataset."""
    info = get_worker_info()
    rng = np.random.default_rng(info.seed)  # noqa: F841 - the learner's mistake


def seed_wrong_attribute(worker_id):
    """Assigns to dataset.generator: the dataset draws from self.rng."""
    info = get_worker_info()
    info.dataset.generator = np.random.default_rng(info.seed)


def seed_from_clock(worker_id):
    """Seeds from int(time.time()): workers started in the same second draw alike, runs never repeat."""
    get_worker_info().dataset.rng = np.random.default_rng(int(time.time()))


def seed_torch_only(worker_id):
    """torch.manual_seed(info.seed): reseeds torch, the numpy generator stays the copy."""
    torch.manual_seed(get_worker_info().seed)


def seed_from_info_id(worker_id):
    """Seeds from info.id, which is just worker_id again."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.id)


# ---------------------------------------------------------------- 03.4 right answers
def seed_from_initial_seed(worker_id):
    """Right: torch.initial_seed() in a worker is the seed PyTorch gave it."""
    get_worker_info().dataset.rng = np.random.default_rng(torch.initial_seed())


def seed_sequence_of_both(worker_id):
    """Right, a SeedSequence entropy list of the worker's seed and id (32-bit folded)."""
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng([info.seed % 2**32, info.seed >> 32, worker_id])


WRONG = {
    "03.1": [
        Wrong(steady_times_the_warmup, 'started the clock before the warm-up'),
        Wrong(steady_drains_the_loader, 'drew 40 batches'),
        Wrong(steady_assumes_batch_size, 'the last timed batch holds only 3 samples'),
        Wrong(steady_len_of_batch, 'counted len(batch) = 2'),
        Wrong(steady_time_time, 'never read time.perf_counter()'),
        Wrong(steady_clock_starts_late, 'started the clock after the first timed batch'),
        Wrong(steady_batches_per_s, 'batches per second'),
        Wrong(steady_seconds_per_sample, 'looks like seconds'),
        Wrong(steady_fresh_iterator_per_batch, 'called iter(loader) 12 times'),
        Wrong(steady_second_pass_for_timing, 'called iter(loader) 2 times'),
    ],
    "03.2": [
        Wrong(knee_returns_best, 'the value with the best samples/s'),
        Wrong(knee_first_in_list_order, 'not the first one in list order'),
        Wrong(knee_returns_index, 'position in the list'),
        Wrong(knee_strict_inequality, 'compare with >=, not >'),
        Wrong(knee_absolute_tolerance, 'tolerance was taken as samples/s'),
        Wrong(knee_hard_coded_tolerance, 'use the tolerance argument'),
        Wrong(knee_no_length_check, 'expected ValueError'),
        Wrong(knee_marginal_gain, 'compares each step with the one before'),
        Wrong(knee_returns_rate, "the knee's samples/s"),
        Wrong(knee_fraction_of_best, 'not tolerance x the best'),
    ],
    "03.3": [
        Wrong(GetitemsReturnsBatch, 'one sample per index'),
        Wrong(GetitemsLoopsOverGetitem, 'index the tensors once per batch'),
        Wrong(GetitemsSortsIndices, 'wrong rows'),
        Wrong(GetitemsFeaturesOnly, '(features, label) pair'),
        Wrong(GetitemsSwappedPair, 'samples are (label, features)'),
        Wrong(GetitemsContiguousSlice, 'not a slice'),
        Wrong(GetitemsReturnsZip, 'returned a zip'),
        Wrong(GetitemsLabelShapeOne, 'labels of shape [64, 1]'),
        Wrong(GetitemsFloatLabels, 'labels torch.float32'),
        Wrong(GetitemsIndexesRowByRow, 'one indexing operation per tensor'),
        Wrong(GetitemsLabelsRowByRow, 'self.labels 3 time(s)'),
        Wrong(GetitemsStackedList, 'batch already stacked'),
        Wrong(GetitemsZipsWholeTensors, "not the dataset's whole tensors"),
    ],
    "03.4": [
        Wrong(seed_from_worker_id, 'every epoch repeats'),
        Wrong(seed_global_numpy, 'np.random.seed does not touch it'),
        Wrong(seed_fixed_constant, 'got the same seed'),
        Wrong(seed_local_variable, 'was left as it was'),
        Wrong(seed_wrong_attribute, 'set info.dataset.generator'),
        Wrong(seed_from_clock, 'the clock'),
        Wrong(seed_torch_only, 'was left as it was'),
        Wrong(seed_from_info_id, 'every epoch repeats'),
    ],
}
RIGHT = {
    "03.1": [steady_islice, steady_enumerate_break],
    "03.2": [knee_numpy, knee_sorted_scan],
    "03.3": [GetitemsTupleOfSamples, GetitemsAdvancedIndexing],
    "03.4": [seed_from_initial_seed, seed_sequence_of_both],
}
