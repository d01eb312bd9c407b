"""Held-out wrong answers to lesson 05's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import random

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, WeightedRandomSampler

from helpers.imbalance import sample_weights
from helpers.samplers import DistributedWeightedSampler


# ---- 05.1 epoch_orders(sampler, epochs)

def _reference_epoch_orders(sampler, epochs: int) -> list[list[int]]:
    """set_epoch(epoch) before each epoch's pass, as a training loop does."""
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append([int(i) for i in sampler])
    return orders


def never_sets_the_epoch(sampler, epochs: int) -> list[list[int]]:
    """The bug itself: no set_epoch, every epoch the same order."""
    return [list(sampler) for _ in range(epochs)]


def sets_the_epoch_count(sampler, epochs: int) -> list[list[int]]:
    """set_epoch(epochs), the count, not the loop variable: the same order every epoch."""
    orders = []
    for _ in range(epochs):
        sampler.set_epoch(epochs)
        orders.append(list(sampler))
    return orders


def one_flat_list(sampler, epochs: int) -> list[list[int]]:
    """Concatenates the epochs into one flat list instead of a list per epoch."""
    flat = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        flat.extend(sampler)
    return flat


def shuffles_by_itself(sampler, epochs: int) -> list[list[int]]:
    """Reshuffles the sampler's indices with random.shuffle: not the sampler's order, different on every rank."""
    orders = []
    for _ in range(epochs):
        order = list(sampler)
        random.shuffle(order)
        orders.append(order)
    return orders


def reuses_one_iterator(sampler, epochs: int) -> list[list[int]]:
    """One iter(sampler) for all epochs: exhausted after the first, later epochs empty."""
    iterator = iter(sampler)
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(iterator))
    return orders


# ---- 05.2 rank_loader(dataset, labels, rank, world_size, batch_size)

def _reference_rank_loader(dataset, labels, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """Per-sample inverse weights, DistributedWeightedSampler with this rank, same seed everywhere."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def distributed_sampler_unweighted(dataset, labels, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """DistributedSampler: disjoint shards, but the imbalance stays."""
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def weighted_sampler_per_rank(dataset, labels, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """A plain WeightedRandomSampler on each rank: every rank draws a whole epoch of its own, shares not disjoint."""
    sampler = WeightedRandomSampler(sample_weights(labels), num_samples=len(labels))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def seed_per_rank(dataset, labels, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """seed=rank: each rank takes its block from a different draw, so shares overlap."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=rank)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def rank_not_passed(dataset, labels, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """Passes num_replicas but not rank: without a process group every rank is rank 0."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def class_weights_to_the_sampler(dataset, labels, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """One weight per class (lesson 02's trap): only indices 0..C-1 are drawn."""
    weights = torch.as_tensor(1.0 / np.bincount(np.asarray(labels, dtype=np.int64)))
    sampler = DistributedWeightedSampler(weights, num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def batch_size_hard_coded(dataset, labels, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """Right sampler, but batch_size=32 whatever is asked."""
    sampler = DistributedWeightedSampler(sample_weights(labels), num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=32, sampler=sampler)


# ---- 05.3 deduplicated_accuracy(gathered)

def _reference_deduplicated_accuracy(gathered) -> float:
    """Share of distinct indices predicted correctly; ValueError with no pairs."""
    seen = {}
    for part in gathered:
        for index, correct in part:
            seen.setdefault(int(index), bool(correct))
    if not seen:
        raise ValueError(f"gathered holds no predictions: {gathered!r}")
    return sum(seen.values()) / len(seen)


def counts_duplicates(gathered) -> float:
    """No de-duplication: padded repeats are counted again."""
    pairs = [pair for part in gathered for pair in part]
    if not pairs:
        raise ValueError(f"gathered holds no predictions: {gathered!r}")
    return sum(bool(c) for _, c in pairs) / len(pairs)


def distinct_hits_over_all_pairs(gathered) -> float:
    """De-duplicates the correct ones but divides by every pair, repeats included."""
    pairs = [pair for part in gathered for pair in part]
    if not pairs:
        raise ValueError(f"gathered holds no predictions: {gathered!r}")
    return len({int(i) for i, c in pairs if c}) / len(pairs)


def zero_division_when_empty(gathered) -> float:
    """Right when there are predictions, ZeroDivisionError (not ValueError) when there are none."""
    seen = {}
    for part in gathered:
        for index, correct in part:
            seen.setdefault(int(index), bool(correct))
    return sum(seen.values()) / len(seen)


def checks_only_the_outer_list(gathered) -> float:
    """Raises only for gathered == []: empty lists from every rank divide by zero."""
    if not gathered:
        raise ValueError("no predictions")
    seen = {}
    for part in gathered:
        for index, correct in part:
            seen.setdefault(int(index), bool(correct))
    return sum(seen.values()) / len(seen)


def first_rank_only(gathered) -> float:
    """Scores rank 0's list only, as if the gather returned this rank's own pairs."""
    part = gathered[0] if gathered else []
    seen = {int(i): bool(c) for i, c in part}
    if not seen:
        raise ValueError(f"gathered holds no predictions: {gathered!r}")
    return sum(seen.values()) / len(seen)


def mean_of_rank_accuracies(gathered) -> float:
    """Averages each rank's accuracy: repeats still counted, and ranks weighted equally."""
    scores = [sum(bool(c) for _, c in part) / len(part) for part in gathered if part]
    if not scores:
        raise ValueError(f"gathered holds no predictions: {gathered!r}")
    return float(np.mean(scores))


HELDOUT = {
    "05.1": [never_sets_the_epoch, sets_the_epoch_count, one_flat_list, shuffles_by_itself, reuses_one_iterator],
    "05.2": [distributed_sampler_unweighted, weighted_sampler_per_rank, seed_per_rank, rank_not_passed,
             class_weights_to_the_sampler, batch_size_hard_coded],
    "05.3": [counts_duplicates, distinct_hits_over_all_pairs, zero_division_when_empty, checks_only_the_outer_list,
             first_rank_only, mean_of_rank_accuracies],
}
