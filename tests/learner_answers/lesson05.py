"""Lesson 05's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import collections
import random

import numpy as np
import torch
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, Subset, WeightedRandomSampler

from helpers.checks.core import Wrong
from helpers.imbalance import sample_weights
from helpers.samplers import DistributedWeightedSampler

# ---------------------------------------------------------------- 05.1: epoch_orders(sampler, epochs)


def orders_without_set_epoch(sampler, epochs):
    """Never calls set_epoch: every epoch the same order."""
    return [list(sampler) for _ in range(epochs)]


def orders_set_epoch_after_iterating(sampler, epochs):
    """Calls set_epoch after reading the epoch: epochs 0 and 1 come out the same."""
    orders = []
    for epoch in range(epochs):
        orders.append(list(sampler))
        sampler.set_epoch(epoch)
    return orders


def orders_set_epoch_zero(sampler, epochs):
    """Calls set_epoch(0) every epoch: the call is there, the order never changes."""
    orders = []
    for _ in range(epochs):
        sampler.set_epoch(0)
        orders.append(list(sampler))
    return orders


def orders_numbered_from_one(sampler, epochs):
    """Numbers the epochs from 1, so the first epoch is the training script's second."""
    orders = []
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def orders_shuffled_by_hand(sampler, epochs):
    """Shuffles each rank's shard with random.shuffle: unseeded, and the shards no longer come from one order."""
    orders = []
    for _ in range(epochs):
        order = list(sampler)
        random.shuffle(order)
        orders.append(order)
    return orders


def orders_one_epoch_short(sampler, epochs):
    """range(1, epochs): one epoch short."""
    orders = []
    for epoch in range(1, epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def orders_first_epoch_always(sampler, epochs):
    """Reads the first epoch before the loop: returns one order even when epochs is 0."""
    orders = [list(sampler)]
    for epoch in range(1, epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def orders_as_tensors(sampler, epochs):
    """Returns one tensor per epoch instead of a list of ints."""
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(torch.tensor(list(sampler)))
    return orders


def orders_by_reseeding(sampler, epochs):
    """Overwrites the sampler's seed with the epoch number instead of calling set_epoch."""
    orders = []
    for epoch in range(epochs):
        sampler.seed = epoch
        orders.append(list(sampler))
    return orders


def orders_from_randperm(sampler, epochs):
    """Ignores the sampler's order: a fresh torch.randperm of its length every epoch."""
    return [torch.randperm(len(sampler)).tolist() for _ in range(epochs)]


def orders_as_tuples(sampler, epochs):
    """Right: one tuple per epoch (an order, in another sequence type)."""
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(tuple(sampler))
    return orders


def orders_through_numpy(sampler, epochs):
    """Right: each epoch's indices through numpy, back to a list of ints."""
    out = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        out.append(np.fromiter(iter(sampler), dtype=np.int64).tolist())
    return out


def orders_from_current_epoch(sampler, epochs):
    """Counts the epochs on from the sampler's current epoch, not from 0 (issue 39)."""
    start = sampler.epoch
    orders = []
    for epoch in range(start, start + epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


# ---------------------------------------------------------------- 05.2: rank_loader(dataset, labels, rank, world, bs)


def loader_with_weighted_random_sampler(dataset, labels, rank, world_size, batch_size):
    """A plain WeightedRandomSampler on every rank: a full epoch per rank, ranks overlap."""
    sampler = WeightedRandomSampler(sample_weights(labels), num_samples=len(labels))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_seeded_weighted_random_sampler(dataset, labels, rank, world_size, batch_size):
    """A WeightedRandomSampler per rank with the same generator seed: every rank draws the same indices."""
    generator = torch.Generator().manual_seed(0)
    sampler = WeightedRandomSampler(sample_weights(labels), num_samples=len(labels) // world_size,
                                    generator=generator)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_distributed_sampler(dataset, labels, rank, world_size, batch_size):
    """A DistributedSampler: shards the data but draws no class-balanced epoch."""
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_seeded_by_rank(dataset, labels, rank, world_size, batch_size):
    """Seeds each rank's sampler with its rank: different draws, so the ranks' shares overlap."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=rank)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_randomly_seeded(dataset, labels, rank, world_size, batch_size):
    """A random seed on each rank: the ranks draw different epochs."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank,
                                         seed=random.randrange(2**31))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_class_weights(dataset, labels, rank, world_size, batch_size):
    """Passes one weight per class where the sampler wants one per sample: draws class ids as indices."""
    counts = np.bincount(np.asarray(labels))
    sampler = DistributedWeightedSampler(1.0 / counts, num_replicas=world_size, rank=rank, seed=0,
                                         num_samples=len(labels))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_without_rank(dataset, labels, rank, world_size, batch_size):
    """Leaves out num_replicas and rank: outside a process group every rank draws the whole epoch."""
    sampler = DistributedWeightedSampler(sample_weights(labels), seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_shuffle_too(dataset, labels, rank, world_size, batch_size):
    """Passes shuffle=True as well as the sampler: DataLoader refuses the pair."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, shuffle=True)


def loader_without_batch_size(dataset, labels, rank, world_size, batch_size):
    """Forgets batch_size: the DataLoader's default of 1."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, sampler=sampler)


def loader_weighted_by_count(dataset, labels, rank, world_size, batch_size):
    """Weights each sample by its class count, not its inverse: the majority is drawn even more."""
    array = np.asarray(labels)
    weights = np.bincount(array)[array].astype(float)
    sampler = DistributedWeightedSampler(weights, num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_per_rank_num_samples(dataset, labels, rank, world_size, batch_size):
    """Passes num_samples=len(labels) // world_size: the sampler splits it again, an epoch world_size times short."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0,
                                         num_samples=max(1, len(labels) // world_size))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_without_replacement(dataset, labels, rank, world_size, batch_size):
    """replacement=False: each sample at most once, so the minority cannot be drawn more and nothing is balanced."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0,
                                         replacement=False, drop_last=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_on_strided_subset(dataset, labels, rank, world_size, batch_size):
    """Weights a strided slice of the data per rank: each rank balances only its own slice."""
    mine = list(range(rank, len(labels), world_size))
    weights = sample_weights(np.asarray(labels)[mine])
    sampler = WeightedRandomSampler(weights, num_samples=len(mine), generator=torch.Generator().manual_seed(0))
    return DataLoader(Subset(dataset, mine), batch_size=batch_size, sampler=sampler)


def loader_seed_from_torch(dataset, labels, rank, world_size, batch_size):
    """A seed drawn from torch's generator: the same on every rank only if every rank seeded torch alike (issue 39)."""
    seed = int(torch.randint(0, 2**31, ()).item())
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=seed)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_other_seed(dataset, labels, rank, world_size, batch_size):
    """Right: another seed, the same on every rank."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=1234)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def loader_with_batch_sampler(dataset, labels, rank, world_size, batch_size):
    """Right: the sampler wrapped in a BatchSampler, passed as batch_sampler."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_sampler=BatchSampler(sampler, batch_size, drop_last=False))


def loader_with_own_inverse_weights(dataset, labels, rank, world_size, batch_size):
    """Right: inverse class counts computed by hand with numpy, passed positionally."""
    array = np.asarray(labels)
    weights = 1.0 / np.bincount(array)[array]
    return DataLoader(dataset, batch_size, sampler=DistributedWeightedSampler(weights, world_size, rank))


def loader_returns_the_sampler(dataset, labels, rank, world_size, batch_size):
    """Returns the DistributedWeightedSampler itself, never wrapped in a DataLoader (issue 39)."""
    return DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0)


def loader_dropping_last_batch(dataset, labels, rank, world_size, batch_size):
    """drop_last=True: each rank leaves out its last, short batch (issue 39)."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, drop_last=True)


# ---------------------------------------------------------------- 05.3: deduplicated_accuracy(gathered)


def accuracy_without_dedup(gathered):
    """Counts every pair, padded repeats too."""
    pairs = [pair for part in gathered for pair in part]
    if not pairs:
        raise ValueError("no predictions")
    return sum(bool(correct) for _, correct in pairs) / len(pairs)


def accuracy_ignoring_last_rank(gathered):
    """range(len(gathered) - 1): the last rank's pairs are never read (issue 39)."""
    verdicts = {}
    for rank in range(len(gathered) - 1):
        for index, correct in gathered[rank]:
            verdicts[index] = bool(correct)
    if not verdicts:
        raise ValueError("no predictions")
    return sum(verdicts.values()) / len(verdicts)


def accuracy_dedup_within_rank(gathered):
    """De-duplicates inside each rank's list only: repeats across ranks still count twice."""
    pairs = [pair for part in gathered for pair in dict(part).items()]
    if not pairs:
        raise ValueError("no predictions")
    return sum(bool(correct) for _, correct in pairs) / len(pairs)


def accuracy_mean_of_ranks(gathered):
    """Averages each rank's own accuracy."""
    parts = [part for part in gathered if part]
    if not parts:
        raise ValueError("no predictions")
    return sum(sum(bool(c) for _, c in part) / len(part) for part in parts) / len(parts)


def accuracy_first_rank_only(gathered):
    """Reads gathered[0], the first rank's pairs only (issue 39)."""
    verdicts = {index: bool(correct) for index, correct in gathered[0]} if gathered else {}
    if not verdicts:
        raise ValueError("no predictions")
    return sum(verdicts.values()) / len(verdicts)


def accuracy_zero_when_empty(gathered):
    """Returns 0.0 for no predictions instead of raising ValueError."""
    seen = {index: correct for part in gathered for index, correct in part}
    return sum(bool(c) for c in seen.values()) / len(seen) if seen else 0.0


def accuracy_empty_only_without_ranks(gathered):
    """Raises ValueError for [] but divides by zero when every rank sent an empty list."""
    if not gathered:
        raise ValueError("no predictions")
    seen = {index: correct for part in gathered for index, correct in part}
    return sum(bool(c) for c in seen.values()) / len(seen)


def accuracy_assert_not_empty(gathered):
    """Guards the empty case with assert: AssertionError, not ValueError."""
    seen = {index: correct for part in gathered for index, correct in part}
    assert seen, "no predictions"
    return sum(bool(c) for c in seen.values()) / len(seen)


def accuracy_numerator_with_repeats(gathered):
    """Divides by the distinct indices but counts every correct pair, repeats too."""
    pairs = [pair for part in gathered for pair in part]
    distinct = {index for index, _ in pairs}
    if not distinct:
        raise ValueError("no predictions")
    return sum(bool(correct) for _, correct in pairs) / len(distinct)


def accuracy_dropping_repeated_indices(gathered):
    """Drops every index that appears twice, the original sample as well as its padded repeat."""
    pairs = [pair for part in gathered for pair in part]
    counts = collections.Counter(index for index, _ in pairs)
    kept = [bool(c) for index, c in pairs if counts[index] == 1]
    if not kept:
        raise ValueError("no predictions")
    return sum(kept) / len(kept)


def accuracy_in_percent(gathered):
    """Returns a percentage where the task asks for a share."""
    seen = {index: correct for part in gathered for index, correct in part}
    if not seen:
        raise ValueError("no predictions")
    return 100 * sum(bool(c) for c in seen.values()) / len(seen)


def accuracy_integer_division(gathered):
    """Integer division: 0 unless every prediction is right."""
    seen = {index: correct for part in gathered for index, correct in part}
    if not seen:
        raise ValueError("no predictions")
    return sum(bool(c) for c in seen.values()) // len(seen)


def accuracy_size_from_max_index(gathered):
    """Takes the number of samples as the largest index + 1, as if every index 0..N-1 were there."""
    seen = {index: correct for part in gathered for index, correct in part}
    if not seen:
        raise ValueError("no predictions")
    return sum(bool(c) for c in seen.values()) / (max(seen) + 1)


def accuracy_dedup_correct_only(gathered):
    """De-duplicates the correct indices but divides by every pair, repeats included."""
    pairs = [pair for part in gathered for pair in part]
    if not pairs:
        raise ValueError("no predictions")
    return len({index for index, correct in pairs if correct}) / len(pairs)


def accuracy_with_numpy_unique(gathered):
    """Right: numpy.unique keeps each index's first pair; a numpy float64 comes back."""
    pairs = [(int(index), bool(correct)) for part in gathered for index, correct in part]
    if not pairs:
        raise ValueError("no predictions")
    indices = np.array([index for index, _ in pairs])
    correct = np.array([c for _, c in pairs])
    _, first = np.unique(indices, return_index=True)
    return correct[first].mean()


def accuracy_last_pair_wins(gathered):
    """Right: a dict that keeps each index's last pair."""
    latest = {}
    for part in gathered:
        for index, correct in part:
            latest[index] = bool(correct)
    if not latest:
        raise ValueError("deduplicated_accuracy: no predictions were gathered")
    return sum(latest.values()) / len(latest)


WRONG = {
    "05.1": [
        Wrong(orders_without_set_epoch, 'call sampler.set_epoch(epoch)'),
        Wrong(orders_set_epoch_after_iterating, "epoch 1 came out in epoch 0's order"),
        Wrong(orders_set_epoch_zero, 'all 3 epochs have the same order'),
        Wrong(orders_numbered_from_one, 'epochs are numbered from 0'),
        Wrong(orders_shuffled_by_hand, 'shuffling by hand does not'),
        Wrong(orders_one_epoch_short, 'returned [2, 2] epochs; expected 3'),
        Wrong(orders_first_epoch_always, 'the first (epoch 0) too'),
        Wrong(orders_as_tensors, 'came back as Tensor'),
        Wrong(orders_by_reseeding, 'changed sampler.seed'),
        Wrong(orders_from_randperm, 'holds indices the sampler does not yield'),
        Wrong(orders_from_current_epoch, 'the first epoch is epoch 0'),
    ],
    "05.2": [
        Wrong(loader_with_weighted_random_sampler, 'both ranks drew the same samples'),
        Wrong(loader_with_seeded_weighted_random_sampler, 'both ranks drew the same samples'),
        Wrong(loader_with_distributed_sampler, 'the draws follow the data, not the weights'),
        Wrong(loader_seeded_by_rank, 'every rank must use the same seed'),
        Wrong(loader_randomly_seeded, 'every rank must use the same seed'),
        Wrong(loader_with_class_weights, 'one weight per class'),
        Wrong(loader_without_rank, 'pass num_replicas=world_size, rank=rank'),
        Wrong(loader_with_shuffle_too, 'leave shuffle out'),
        Wrong(loader_without_batch_size, 'pass batch_size=batch_size'),
        Wrong(loader_weighted_by_count, 'the draws follow the data, not the weights'),
        Wrong(loader_with_per_rank_num_samples, 'num_samples is the epoch size across all ranks'),
        Wrong(loader_without_replacement, 'keep replacement=True'),
        Wrong(loader_on_strided_subset, 'not the dataset it was given'),
        Wrong(loader_seed_from_torch, "drawn from torch's random generator"),
        Wrong(loader_returns_the_sampler, 'not a DataLoader'),
        Wrong(loader_dropping_last_batch, 'drop_last=True'),
    ],
    "05.3": [
        Wrong(accuracy_without_dedup, 'that counts every pair, padded repeats too'),
        Wrong(accuracy_dedup_within_rank, 'that counts every pair, padded repeats too'),
        Wrong(accuracy_mean_of_ranks, "averages each rank's own accuracy"),
        Wrong(accuracy_zero_when_empty, 'returned 0.0; expected ValueError'),
        Wrong(accuracy_empty_only_without_ranks, 'raised ZeroDivisionError: division by zero; expected ValueError'),
        Wrong(accuracy_assert_not_empty, 'raised AssertionError: no predictions; expected ValueError'),
        Wrong(accuracy_numerator_with_repeats, 'count it once in the numerator too'),
        Wrong(accuracy_dropping_repeated_indices, 'drops the repeated samples altogether'),
        Wrong(accuracy_in_percent, 'a percentage'),
        Wrong(accuracy_integer_division, 'divide with /, not //'),
        Wrong(accuracy_size_from_max_index, 'divides by the largest index + 1'),
        Wrong(accuracy_dedup_correct_only, 'the denominator counts every pair'),
        Wrong(accuracy_ignoring_last_rank, "leaves out the last rank's pairs"),
        Wrong(accuracy_first_rank_only, "only the first rank's pairs"),
    ],
}

RIGHT = {
    "05.1": [orders_as_tuples, orders_through_numpy],
    "05.2": [loader_with_other_seed, loader_with_batch_sampler, loader_with_own_inverse_weights],
    "05.3": [accuracy_with_numpy_unique, accuracy_last_pair_wins],
}
