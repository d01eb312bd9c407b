"""Lesson 05's self-checks: reshuffling every epoch, a rank's balanced loader, deduplicated accuracy."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, WeightedRandomSampler

from helpers.checks.core import Answer, Case, Failed, Wrong, exercise
from helpers.data import labels_from_counts
from helpers.imbalance import sample_weights
from helpers.samplers import DistributedWeightedSampler


def epoch_orders_right(sampler: DistributedSampler, epochs: int) -> list[list[int]]:
    """Exercise 05.1's reference answer (the tests pass it to the check)."""
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def _epoch_orders_one_based(sampler: DistributedSampler, epochs: int) -> list[list[int]]:
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch + 1)
        orders.append(list(sampler))
    return orders


@exercise("05.1", "epoch_orders", right=epoch_orders_right, wrong=[
    Wrong(lambda sampler, epochs: [list(sampler) for _ in range(epochs)], "call sampler.set_epoch(epoch)"),
    Wrong(_epoch_orders_one_based, "set the epoch to 0, 1, 2"),
    Wrong(lambda sampler, epochs: [list(sampler)], "returned [1, 1] epochs"),
])
def check_epoch_orders(answer: Answer) -> str:
    """Exercise 05.1: each epoch's indices from a DistributedSampler, reshuffled every epoch with set_epoch."""
    name = answer.name

    def sampler(rank: int) -> DistributedSampler:
        return DistributedSampler(range(20), num_replicas=2, rank=rank, shuffle=True, seed=7)

    expected = [epoch_orders_right(sampler(rank), 3) for rank in (0, 1)]
    with answer.calling(f"{name}(sampler, 3)"):
        got = [answer.value(sampler(rank), 3) for rank in (0, 1)]
    try:
        got = [[[int(i) for i in order] for order in orders] for orders in got]
    except (TypeError, ValueError):
        raise Failed(f"{name} returned {got!r}; expected a list with one list of indices per epoch") from None
    if any(len(orders) != 3 for orders in got):
        raise Failed(f"{name}(sampler, 3) returned {[len(o) for o in got]} epochs; expected 3")
    if got[0][0] == got[0][1] == got[0][2]:
        raise Failed("all 3 epochs have the same order: call sampler.set_epoch(epoch) before each epoch's iteration")
    if got != expected:
        raise Failed(f"rank 0's orders were {got[0]}, expected {expected[0]}: set the epoch to 0, 1, 2 in turn "
                     "(the sampler shuffles with seed + epoch), once per epoch, before iterating it")
    return f"{name} reshuffles every epoch, the same way on every rank"


def rank_loader_right(dataset: Any, labels: Any, rank: int, world_size: int, batch_size: int) -> DataLoader:
    """Exercise 05.2's reference answer (the tests pass it to the check)."""
    sampler = DistributedWeightedSampler(sample_weights(labels, "inverse"), num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def _rank_loader_naive(dataset: Any, labels: Any, rank: int, world_size: int, batch_size: int) -> DataLoader:
    sampler = WeightedRandomSampler(sample_weights(labels, "inverse"), len(labels), generator=torch.Generator().manual_seed(0))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def _rank_loader_half_epoch(dataset: Any, labels: Any, rank: int, world_size: int, batch_size: int) -> DataLoader:
    sampler = WeightedRandomSampler(sample_weights(labels, "inverse"), len(labels) // world_size)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def _rank_loader_unweighted(dataset: Any, labels: Any, rank: int, world_size: int, batch_size: int) -> DataLoader:
    return DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset, world_size, rank, seed=0))


def _rank_loader_seed_per_rank(dataset: Any, labels: Any, rank: int, world_size: int, batch_size: int) -> DataLoader:
    sampler = DistributedWeightedSampler(sample_weights(labels, "inverse"), num_replicas=world_size, rank=rank, seed=rank)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def _rank_loader_class_weights(dataset: Any, labels: Any, rank: int, world_size: int, batch_size: int) -> DataLoader:
    class_weights = 1.0 / np.bincount(np.asarray(labels))
    sampler = DistributedWeightedSampler(class_weights, num_replicas=world_size, rank=rank, seed=0)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def _rank_loader_with_shuffle(dataset: Any, labels: Any, rank: int, world_size: int, batch_size: int) -> DataLoader:
    loader = rank_loader_right(dataset, labels, rank, world_size, batch_size)
    return DataLoader(dataset, batch_size=batch_size, sampler=loader.sampler, shuffle=True)


@exercise("05.2", "rank_loader", right=rank_loader_right, wrong=[
    Wrong(_rank_loader_naive, "both ranks drew the same samples"),
    Wrong(_rank_loader_half_epoch, "both ranks drew the same samples"),  # halving the epoch does not make a plain sampler rank-aware
    Wrong(_rank_loader_unweighted, "the draws follow the data, not the weights"),
    Wrong(_rank_loader_seed_per_rank, "every rank must use the same seed"),
    Wrong(_rank_loader_with_shuffle, "raised ValueError"),
    Wrong(lambda dataset, labels, rank, world_size, batch_size: DataLoader(dataset, sampler=rank_loader_right(
        dataset, labels, rank, world_size, batch_size).sampler), "batches of [1] samples; pass batch_size=batch_size"),
    Wrong(_rank_loader_class_weights, "one weight per sample"),
])
def check_rank_loader(answer: Answer) -> str:
    """Exercise 05.2: a rank's DataLoader drawing its own, class-balanced shard with DistributedWeightedSampler."""
    name = answer.name
    labels = torch.as_tensor(labels_from_counts([900, 90, 10], seed=1))
    dataset = TensorDataset(torch.arange(len(labels)), labels)
    drawn, counts, seeds = [], [], []
    for rank in (0, 1):
        torch.manual_seed(0)  # as every real rank would after "seed everything": ranks start from the same random state
        with answer.calling(f"{name}(dataset, labels, rank={rank}, world_size=2, batch_size=50)"):
            loader = answer.value(dataset, labels, rank, 2, 50)
            batches = list(loader)
        sampler = getattr(loader, "sampler", None)
        weights = getattr(sampler, "weights", None)
        if weights is not None and len(weights) != len(labels):
            per_class = ": one weight per class" if len(weights) == int(labels.max()) + 1 else ""
            raise Failed(f"the sampler was given {len(weights)} weights for {len(labels)} samples{per_class}. "
                         "A weighted sampler needs one weight per sample: index the class weights by the labels "
                         "(helpers.imbalance.sample_weights(labels) does it)")
        if isinstance(sampler, DistributedWeightedSampler):
            seeds.append(sampler.seed)
        sizes = [len(index) for index, _ in batches]
        if any(size != 50 for size in sizes[:-1]) or (sizes and sizes[-1] > 50):
            raise Failed(f"rank {rank}'s loader gave batches of {sorted(set(sizes))} samples; pass batch_size=batch_size "
                         "to the DataLoader (the check asks for 50)")
        indices = [int(i) for index, _ in batches for i in index]
        drawn.append(indices)
        counts.append(np.bincount(labels[indices].numpy(), minlength=3))
    if drawn[0] == drawn[1]:
        raise Failed("both ranks drew the same samples: a WeightedRandomSampler knows nothing about ranks; use "
                     "DistributedWeightedSampler(weights, num_replicas=world_size, rank=rank)")
    if len(set(seeds)) > 1:
        raise Failed(f"the ranks' samplers had seeds {seeds}: every rank must use the same seed, so they split one "
                     "global draw instead of drawing overlapping ones")
    if [len(d) for d in drawn] != [500, 500]:
        raise Failed(f"the ranks drew {[len(d) for d in drawn]} samples in an epoch; with 1000 samples and 2 ranks "
                     "each should draw 500 (num_samples is the epoch size across all ranks)")
    shares = [c / c.sum() for c in counts]
    if min(s[2] for s in shares) < 0.2:
        raise Failed(f"class counts per rank were {[c.tolist() for c in counts]}: the draws follow the data, not the "
                     "weights. Weight each sample by the inverse of its class count (helpers.imbalance.sample_weights)")
    return f"the ranks drew different samples, 500 each, class counts {[c.tolist() for c in counts]}"


DEDUP_CASES: tuple[Case, ...] = (
    Case(([[(0, True), (2, False)], [(1, False), (0, True)]],), 1 / 3, "sample 0 was padded onto rank 1: count it once (1 of 3 right)"),
    Case(([[(0, True), (1, True)], [(2, False), (3, True)]],), 0.75, "no duplicates: 3 of 4 right"),
    Case(([[(5, False)], [(5, False)], [(4, True)]],), 0.5, "three ranks, sample 5 on two of them: 1 of 2 distinct samples right"),
    Case(([[], []],), ValueError, "no predictions at all: raise ValueError rather than divide by zero"),
)


def dedup_right(gathered: list[list[tuple[int, bool]]]) -> float:
    """Exercise 05.3's reference answer (the tests pass it to the check)."""
    verdicts = {index: bool(correct) for pairs in gathered for index, correct in pairs}
    if not verdicts:
        raise ValueError(f"gathered must hold at least one prediction, got {gathered!r}")
    return sum(verdicts.values()) / len(verdicts)


def _dedup_plain_mean(gathered: list[list[tuple[int, bool]]]) -> float:
    pairs = [c for part in gathered for _, c in part]
    if not pairs:
        raise ValueError(f"gathered must hold at least one prediction, got {gathered!r}")
    return sum(pairs) / len(pairs)


@exercise("05.3", "deduplicated_accuracy", right=dedup_right, wrong=[
    Wrong(_dedup_plain_mean, "count it once"),
    Wrong(lambda gathered: dedup_right(gathered) if any(gathered) else 0.0, "expected ValueError"),
])
def check_deduplicated_accuracy(answer: Answer) -> str:
    """Exercise 05.3: accuracy over gathered (index, correct) pairs with each index counted once."""
    return answer.cases(DEDUP_CASES, kind=float)
