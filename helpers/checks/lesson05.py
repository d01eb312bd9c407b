"""Lesson 05's self-checks: reshuffling every epoch, a rank's balanced loader, deduplicated accuracy."""
from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, WeightedRandomSampler

from helpers.checks.core import Answer, Case, Failed, Wrong, consistent_hints, exercise, seeded_randomness
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
    Wrong(lambda sampler, epochs: [torch.tensor(o) for o in epoch_orders_right(sampler, epochs)], "came back as Tensor"),
    Wrong(lambda sampler, epochs: epoch_orders_right(sampler, max(epochs, 1)), "expected [] (no epochs"),
])
def check_epoch_orders(answer: Answer) -> str:
    """Exercise 05.1: each epoch's indices from a DistributedSampler, reshuffled every epoch with set_epoch."""
    name, n, world, seed = answer.name, 21, 2, 7  # 21 samples on 2 ranks: the last slot is padding

    def sampler(rank: int) -> DistributedSampler:
        made = DistributedSampler(range(n), num_replicas=world, rank=rank, shuffle=True, seed=seed)
        made.set_epoch(HANDED_AT)  # as an earlier loop left it: the answer's epochs still start at 0
        return made

    samplers = [sampler(rank) for rank in range(world)]
    with answer.calling(f"{name}(sampler, 3) with a sampler at epoch {HANDED_AT}"), seeded_randomness():
        got = [answer.value(s, 3) for s in samplers]
    got = [_orders(name, orders) for orders in got]
    if any(len(orders) != 3 for orders in got):
        raise Failed(f"{name}(sampler, 3) returned {[len(o) for o in got]} epochs; expected 3")
    if any(s.seed != seed for s in samplers):
        raise Failed(f"{name} changed sampler.seed from {seed} to {samplers[0].seed}: leave the seed as the script set it "
                     "(the same on every rank) and call sampler.set_epoch(epoch) before each epoch")
    for rank, orders in enumerate(got):
        expected = [_shard(n, world, rank, seed, epoch) for epoch in range(4)]
        if orders[0] == orders[1] == orders[2]:
            raise Failed("all 3 epochs have the same order: call sampler.set_epoch(epoch) before each epoch's iteration")
        if orders != expected[:3]:
            handed = [_shard(n, world, rank, seed, epoch) for epoch in range(HANDED_AT, HANDED_AT + 3)]
            raise Failed(f"rank {rank}'s orders were {orders}, expected {expected[:3]}: {_order_mistake(orders, expected, handed)}")
    with answer.calling(f"{name}(sampler, 0)"):
        none = answer.value(sampler(0), 0)
    if not isinstance(none, (list, tuple)) or len(none) != 0:
        raise Failed(f"{name}(sampler, 0) returned {none!r}; expected [] (no epochs, no orders)")
    return f"{name} reshuffles every epoch, the same way on every rank, and returns [] for 0 epochs"


HANDED_AT = 5  # 05.1's samplers come at this epoch, as a script that trained before leaves them


def _shard(n: int, world: int, rank: int, seed: int, epoch: int) -> list[int]:
    """A DistributedSampler's indices worked out by hand: one permutation seeded seed + epoch, padded from its start,
    every world-th slot from position rank."""
    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    order = torch.randperm(n, generator=generator).tolist()
    total = math.ceil(n / world) * world
    order += (order * math.ceil(total / n))[:total - n]
    return order[rank:total:world]


def _orders(name: str, orders: Any) -> list[list[int]]:
    """The learner's orders as lists of ints; Failed when they are not a list of lists of ints."""
    if not isinstance(orders, (list, tuple)):
        raise Failed(f"{name} returned {type(orders).__name__}; expected a list with one list of indices per epoch")
    for epoch, order in enumerate(orders):
        if not isinstance(order, (list, tuple)) or not all(isinstance(i, (int, np.integer)) for i in order):
            raise Failed(f"{name}(sampler, 3)'s epoch {epoch} came back as {type(order).__name__} {order!r}; expected a "
                         "list of ints per epoch (list(sampler))")
    return [[int(i) for i in order] for order in orders]


def _order_mistake(orders: list[list[int]], expected: list[list[int]], handed: list[list[int]]) -> str:
    """The likely mistake behind orders that are not the sampler's epochs 0, 1, 2 (`handed`: its epochs from HANDED_AT)."""
    if orders == handed:
        return (f"these are epochs {HANDED_AT}, {HANDED_AT + 1}, {HANDED_AT + 2}, counted on from the epoch the sampler was "
                f"at ({HANDED_AT}, set by an earlier loop): the first epoch is epoch 0, so set the epoch to 0, 1, 2 whatever "
                "sampler.epoch was")
    if orders[0] == handed[0] and orders[1:] == expected[1:3]:
        return (f"epoch 0 came out in the order of epoch {HANDED_AT}, the epoch the sampler was at: call "
                "sampler.set_epoch(epoch) before every epoch's iteration, the first (epoch 0) too")
    if orders == expected[1:4]:
        return ("epoch 0 came out as the sampler's epoch 1: set the epoch to 0, 1, 2 in turn (the sampler shuffles "
                "with seed + epoch; epochs are numbered from 0), once per epoch, before iterating it")
    for epoch in (1, 2):
        if orders[epoch] == expected[epoch - 1] != expected[epoch]:
            return (f"epoch {epoch} came out in epoch {epoch - 1}'s order: call sampler.set_epoch(epoch) before "
                    "iterating the sampler, not after")
    for epoch in range(3):
        if orders[epoch] != expected[epoch] and sorted(orders[epoch]) in (sorted(expected[epoch]), sorted(handed[0])):
            return (f"epoch {epoch} has this rank's indices in another order: return them as the sampler yields them. "
                    "set_epoch(epoch) is what reshuffles, the same way on every rank; shuffling by hand does not")
        if not set(orders[epoch]) <= set(expected[epoch]):
            return (f"epoch {epoch} holds indices the sampler does not yield for this rank: return the sampler's own "
                    "indices (list(sampler)) after sampler.set_epoch(epoch)")
    return "set the epoch to 0, 1, 2 in turn (the sampler shuffles with seed + epoch), once per epoch, before iterating it"


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
    labels = torch.as_tensor(labels_from_counts([900, 90, 10], seed=1))  # 1000 samples: 3 ranks do not divide them
    dataset = TensorDataset(torch.arange(len(labels)), labels)
    alone = _rank_draws(answer, dataset, labels, 1)[0]
    for world in (2, 3):
        drawn = _rank_draws(answer, dataset, labels, world)
        ranks = "both ranks" if world == 2 else f"all {world} ranks"
        if all(d == drawn[0] for d in drawn[1:]):
            raise Failed(f"{ranks} drew the same samples: a WeightedRandomSampler knows nothing about ranks; use "
                         "DistributedWeightedSampler(weights, num_replicas=world_size, rank=rank)")
        per_rank = math.ceil(len(labels) / world)
        if [len(d) for d in drawn] != [per_rank] * world:
            raise Failed(f"with world_size={world} the ranks drew {[len(d) for d in drawn]} samples in an epoch; with "
                         f"{len(labels)} samples each should draw {per_rank} (num_samples is the epoch size across "
                         "all ranks, len(labels) by default: leave it out)")
        if [i for d in drawn for i in d][:len(labels)] != alone:
            raise Failed(f"with world_size={world} the ranks' draws are not consecutive shares of the one draw a single "
                         "rank makes: build one DistributedWeightedSampler per rank from the same weights and seed")
    if _rank_draws(answer, dataset, labels, 2, torch_seeds=(11, 12)) != _rank_draws(answer, dataset, labels, 2):
        raise Failed("with world_size=2 and torch seeded differently on each rank, the ranks drew other samples than with "
                     "torch seeded alike: the draws depend on torch's global random state; pass a fixed seed")
    return f"each rank drew its own share of one class-balanced draw, on 1, 2 and 3 ranks ({len(alone)} samples in all)"


def _rank_draws(answer: Answer, dataset: Any, labels: torch.Tensor, world: int,
                torch_seeds: tuple[int, ...] | None = None) -> list[list[int]]:
    """Each rank's indices for one epoch of the answer's loaders, torch seeded with torch_seeds[rank] on each rank (0 on
    every rank by default); Failed naming the first problem."""
    drawn, seeds, counts = [], [], []
    for rank in range(world):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seeds[rank] if torch_seeds else 0)  # default: "seed everything" alike on every rank
            drawn.append(_one_rank(answer, dataset, labels, rank, world, seeds))
        counts.append(np.bincount(labels[drawn[-1]].numpy(), minlength=3))
    if len(set(seeds)) > 1 and torch_seeds:
        raise Failed(f"with world_size={world} and torch seeded {list(torch_seeds)} on the ranks (as a script that seeds "
                     f"each rank with seed + rank does), the ranks' samplers had seeds {seeds}: a seed drawn from torch's "
                     "random generator (torch.randint, torch.seed) is the same on every rank only while their random "
                     "states agree. Pass one fixed seed (seed=0) on every rank")
    if len(set(seeds)) > 1:
        raise Failed(f"with world_size={world} the ranks' samplers had seeds {seeds}: every rank must use the same "
                     "seed, so they split one global draw instead of drawing overlapping ones")
    if min(c[2] / max(c.sum(), 1) for c in counts) < 0.2:
        raise Failed(f"with world_size={world} the class counts per rank were {[c.tolist() for c in counts]}: the draws "
                     "follow the data, not the weights. Weight each sample by the inverse of its class count "
                     "(helpers.imbalance.sample_weights)")
    return drawn


def _one_rank(answer: Answer, dataset: Any, labels: torch.Tensor, rank: int, world: int, seeds: list[int]) -> list[int]:
    """One rank's indices for an epoch of the answer's loader (its seed appended to `seeds`); Failed on a misbuilt one."""
    call = f"{answer.name}(dataset, labels, rank={rank}, world_size={world}, batch_size=50)"
    with answer.calling(call, hint=_shuffle_hint):
        loader = answer.value(dataset, labels, rank, world, 50)
    if not isinstance(loader, DataLoader):
        raise Failed(f"{call} returned a {type(loader).__name__}, not a DataLoader: wrap the sampler, "
                     "DataLoader(dataset, batch_size=batch_size, sampler=sampler)")
    batcher = loader.batch_sampler
    if getattr(batcher, "drop_last", False) is True and len(getattr(batcher, "sampler", ())) % 50:
        raise Failed(f"{call}: drop_last=True leaves out this rank's last, short batch ({len(batcher.sampler) % 50} of "
                     f"its {len(batcher.sampler)} samples); the sampler already gives every rank as many samples, so "
                     "leave drop_last out")
    with answer.calling(call, hint=_shuffle_hint):
        batches = list(loader)
    sampler = getattr(getattr(loader, "batch_sampler", None), "sampler", None)
    sampler = getattr(loader, "sampler", None) if sampler is None else sampler
    _sampler_problem(call, loader, sampler, dataset, labels, rank, world)
    if isinstance(sampler, DistributedWeightedSampler):
        seeds.append(sampler.seed)
    sizes = [len(index) for index, _ in batches]
    if any(size != 50 for size in sizes[:-1]) or (sizes and sizes[-1] > 50):
        raise Failed(f"rank {rank}'s loader gave batches of {sorted(set(sizes))} samples; pass batch_size=batch_size "
                     "to the DataLoader (the check asks for 50)")
    return [int(i) for index, _ in batches for i in index]


def _shuffle_hint(exc: Exception) -> str:
    return ": leave shuffle out, the sampler does the shuffling" if "mutually exclusive with shuffle" in str(exc) else ""


def _sampler_problem(call: str, loader: Any, sampler: Any, dataset: Any, labels: torch.Tensor, rank: int,
                     world: int) -> None:
    """Raise Failed when the loader's sampler is visibly misbuilt (weights, ranks, replacement, dataset)."""
    weights = getattr(sampler, "weights", None)
    if weights is not None and len(weights) != len(labels):
        per_class = ": one weight per class" if len(weights) == int(labels.max()) + 1 else ""
        raise Failed(f"the sampler was given {len(weights)} weights for {len(labels)} samples{per_class}. "
                     "A weighted sampler needs one weight per sample: index the class weights by the labels "
                     "(helpers.imbalance.sample_weights(labels) does it)")
    if getattr(loader, "dataset", dataset) is not dataset:
        raise Failed(f"{call} built its DataLoader on a {type(loader.dataset).__name__}, not the dataset it was given: "
                     "load the whole dataset; the distributed sampler picks this rank's share of its indices")
    if isinstance(sampler, DistributedWeightedSampler) and (sampler.num_replicas, sampler.rank) != (world, rank):
        raise Failed(f"{call} built a DistributedWeightedSampler with num_replicas={sampler.num_replicas}, "
                     f"rank={sampler.rank}: pass num_replicas=world_size, rank=rank (outside a process group they "
                     "default to 1 and 0, so every rank draws the whole epoch)")
    if getattr(sampler, "replacement", True) is False:
        raise Failed(f"{call} draws with replacement=False, each sample at most once, so the rare classes cannot be "
                     "drawn more often than they occur: keep replacement=True (the default) for a class-balanced epoch")


def _padded_case(n: int, world: int) -> Case:
    """Pairs as real ranks gather them from a shuffled DistributedSampler over n samples (padded when world does not
    divide n), sample i right when i % 3 != 1; the expected share counted by hand over range(n)."""
    gathered = [[(i, i % 3 != 1) for i in DistributedSampler(range(n), world, rank, seed=3)] for rank in range(world)]
    right = sum(1 for i in range(n) if i % 3 != 1)
    return Case((gathered,), right / n, f"{n} samples on {world} ranks, {world * math.ceil(n / world) - n} padded "
                f"repeats: {right} of the {n} distinct samples right")


DEDUP_CASES: tuple[Case, ...] = (
    Case(([[(0, True), (2, False)], [(1, False), (0, True)]],), 1 / 3, "sample 0 was padded onto rank 1: count it once (1 of 3 right)"),
    Case(([[(0, True), (1, True)], [(2, False), (3, True)]],), 0.75, "no duplicates: 3 of 4 right"),
    Case(([[(5, False)], [(5, False)], [(4, True)]],), 0.5, "three ranks, sample 5 on two of them: 1 of 2 distinct samples right"),
    Case(([[(0, True), (1, True), (2, False)], [(3, False), (0, True)]],), 0.5,
         "ranks sent 3 and 2 pairs, sample 0 on both: 2 of 4 distinct samples right"),
    Case(([[(10, 1), (30, 0), (20, 1)]],), 2 / 3, "one rank, indices 10, 20, 30, correct given as 1 and 0: 2 of 3 right"),
    _padded_case(7, 3), _padded_case(1, 4), _padded_case(10, 4), _padded_case(9, 3),
    Case(([[], []],), ValueError, "no predictions at all: raise ValueError rather than divide by zero"),
    Case(([],), ValueError, "no ranks, no predictions: raise ValueError rather than divide by zero"),
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


def _dedup_repeats_in_numerator(gathered: list[list[tuple[int, bool]]]) -> float:
    distinct = {index for part in gathered for index, _ in part}
    if not distinct:
        raise ValueError(f"gathered must hold at least one prediction, got {gathered!r}")
    return sum(c for part in gathered for _, c in part) / len(distinct)


@exercise("05.3", "deduplicated_accuracy", right=dedup_right, wrong=[
    Wrong(_dedup_plain_mean, "count it once"),
    Wrong(lambda gathered: dedup_right(gathered) if any(gathered) else 0.0, "expected ValueError"),
    Wrong(lambda gathered: 100 * dedup_right(gathered), "a percentage"),
    Wrong(_dedup_repeats_in_numerator, "count it once in the numerator too"),
])
def check_deduplicated_accuracy(answer: Answer) -> str:
    """Exercise 05.3: accuracy over gathered (index, correct) pairs with each index counted once."""
    for case in DEDUP_CASES:
        gathered = case.args[0]
        call = f"{answer.name}({gathered!r})"
        if isinstance(case.expected, type):
            try:
                got = answer.value(copy.deepcopy(gathered))
            except ValueError:
                continue
            except Exception as exc:
                with answer.calling(call):
                    raise Failed(f"{call} raised {type(exc).__name__}: {exc}; expected ValueError ({case.why})") from exc
            raise Failed(f"{call} returned {got!r}; expected ValueError ({case.why})")
        with answer.calling(call):
            got = answer.value(copy.deepcopy(gathered))
        if isinstance(got, (bool, np.bool_, int, np.integer)):
            raise Failed(f"{call} returned {got!r}, an int; expected the share {case.expected:.4g} as a float "
                         "(divide with /, not //)")
        if not isinstance(got, (float, np.floating)):
            raise Failed(f"{call} returned {type(got).__name__} {got!r}; expected the share as a float")
        if not math.isclose(float(got), case.expected, rel_tol=1e-6, abs_tol=1e-9):
            raise Failed(f"{call} returned {float(got):.4g}, expected {case.expected:.4g} ({case.why}): "
                         f"{_dedup_mistake(answer, float(got), gathered)}")
    return f"{answer.name} is right in all {len(DEDUP_CASES)} cases, padded shards, one rank and no predictions included"


def _pairs(gathered: list[list[tuple[int, Any]]]) -> list[tuple[int, bool]]:
    return [(i, bool(c)) for part in gathered for i, c in part]


def _share(verdicts: dict[int, bool]) -> float:
    return sum(verdicts.values()) / len(verdicts) if verdicts else math.nan


def _once(gathered: list[list[tuple[int, Any]]]) -> float:
    """Only the indices that came once (the repeated ones dropped altogether)."""
    pairs = _pairs(gathered)
    seen = [i for i, _ in pairs]
    return _share({i: c for i, c in pairs if seen.count(i) == 1})


DEDUP_MISTAKES: tuple[tuple[str, Any], ...] = (  # (hint, the typical wrong answer that gives it)
    ("a percentage: return the share between 0 and 1, not times 100", lambda g: 100 * _share(dict(_pairs(g)))),
    ("that counts every pair, padded repeats too: count it once, one verdict per distinct index",
     lambda g: sum(c for _, c in _pairs(g)) / len(_pairs(g))),
    ("that leaves out the last rank's pairs: read every rank's list, gathered[0] to gathered[-1] (range(len(gathered)))",
     lambda g: _share(dict(_pairs(g[:-1])))),
    ("that reads only the first rank's pairs, gathered[0]: pool every rank's list", lambda g: _share(dict(_pairs(g[:1])))),
    ("that averages each rank's own accuracy: pool every rank's pairs, then count each index once",
     lambda g: float(np.mean([sum(bool(c) for _, c in part) / len(part) for part in g if part]))),
    ("that drops the repeated samples altogether: keep one verdict per index, the repeat's or the original's", _once),
    ("that divides by the largest index + 1: divide by the number of distinct indices you received",
     lambda g: sum(dict(_pairs(g)).values()) / (max(dict(_pairs(g))) + 1)),
    ("the correct pairs are counted with their repeats: count it once in the numerator too",
     lambda g: sum(c for _, c in _pairs(g)) / len(dict(_pairs(g)))),
    ("the denominator counts every pair, repeats included: divide by the number of distinct indices",
     lambda g: len({i for i, c in _pairs(g) if c}) / len(_pairs(g))),
)


def _dedup_mistake(answer: Answer, got: float, gathered: list[list[tuple[int, Any]]]) -> str:
    """The likely mistake behind a wrong accuracy: of the known mistakes that give `got` here, the one that gives the
    answer's value in every case."""
    def same(a: Any, b: Any) -> bool:
        return isinstance(a, (int, float, np.number)) and math.isclose(float(a), float(b), rel_tol=1e-6)

    def value(model: Any) -> float:
        try:
            return float(model(gathered))
        except (ValueError, ZeroDivisionError):  # a model that cannot run on this case says nothing about it
            return math.nan

    here = [(hint, model) for hint, model in DEDUP_MISTAKES if same(got, value(model))]
    calls = [case.args for case in DEDUP_CASES if not isinstance(case.expected, type)]
    return next(iter(consistent_hints(here, answer.value, calls, same) or [hint for hint, _ in here]),
                "count it once: one verdict per distinct index over all ranks, then the share of those that are right")
