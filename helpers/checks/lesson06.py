"""Lesson 06's self-checks: shards per rank and worker, resuming a sampler, a shard count (06.2, HDF5: lesson06_h5.py)."""
from __future__ import annotations

import itertools
import math
from collections import Counter, defaultdict
from collections.abc import Iterator

import numpy as np
import torch

from helpers.checks.core import Answer, Case, Failed, Wrong, exercise, split_problem
from helpers.samplers import DistributedWeightedSampler


def my_shards_right(shards: list[str], rank: int, world_size: int, worker_id: int, num_workers: int) -> list[str]:
    """Exercise 06.1's reference answer (the tests pass it to the check)."""
    return shards[rank::world_size][worker_id::max(1, num_workers)]


# (number of shards, world_size, num_workers): even and uneven splits, the main process reading, more readers than shards,
# 10 shards per rank for 4 workers (blocks of 10 // 4 or of ceil(10 / 4) shards give the workers unequal shares), one rank
# alone and one worker per rank
SHARD_SPLITS = ((12, 4, 3), (10, 2, 2), (5, 2, 0), (3, 2, 2), (20, 2, 4), (7, 1, 0), (7, 3, 1), (11, 3, 2))


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
    for split in SHARD_SPLITS:
        problem = _split_problem(answer, *split)
        if problem and split[1:] != (2, 2) and not any(_split_problem(answer, *s) for s in SHARD_SPLITS if s[1:] == (2, 2)):
            problem += (". It is right with 2 workers per rank but not with num_workers=0: the rank's main process is then "
                        "its only reader (worker 0 of 1), and it still reads only its rank's shards" if split[2] == 0 else
                        f". It is right for 2 ranks x 2 workers but not for {split[1]} x {split[2]}: number the readers "
                        "rank * num_workers + worker_id of world_size * num_workers, with no count hard-coded")
        if problem:
            raise Failed(problem)
    return f"{answer.name} gives each shard to exactly one (rank, worker) in all {len(SHARD_SPLITS)} splits, empty workers included"


def _split_problem(answer: Answer, num_shards: int, world_size: int, num_workers: int) -> str | None:
    """What is wrong with the answer's split of `num_shards` over world_size x num_workers readers, or None."""
    name = answer.name
    shards = [f"shard-{number:02d}.tar" for number in range(num_shards)]
    readers: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for rank in range(world_size):
        for worker in range(max(1, num_workers)):
            call = f"{name}({num_shards} shards, rank={rank}, world_size={world_size}, worker_id={worker}, num_workers={num_workers})"
            with answer.calling(call, hint=lambda exc: " (num_workers=0 means the main process reads: one reader per rank)"):
                got, again = (answer.value(list(shards), rank, world_size, worker, num_workers) for _ in range(2))
            if not isinstance(got, (list, tuple)):
                why = ("a generator is used up after one pass: return a list" if isinstance(got, Iterator) else
                       "slice the list, shards[...], or wrap the result in list(...)")
                raise Failed(f"{call} returned a {type(got).__name__}; expected a list of shard names: {why}")
            if not all(isinstance(shard, str) for shard in got):
                raise Failed(f"{call} returned {got!r}; expected a list of shard names taken from shards")
            if list(again) != list(got):
                raise Failed(f"{name} returned other shards when called again with the same arguments: each reader works "
                             "out its split on its own, so the split must not depend on chance (no unseeded shuffle): take "
                             "every n-th shard from the reader's own start")
            for shard in got:
                if shard not in shards:
                    raise Failed(f"{call} returned {shard!r}, which is not one of the shards")
                readers[shard].append((rank, worker))
    setup = f"with {num_shards} shards, world_size={world_size}, num_workers={num_workers}"
    problem = split_problem(readers, shards, setup, str, "each of those ranks trains on it, a duplicate per rank. Split the "
                            "shards by rank first (shards[rank::world_size])",
                            "split the rank's own shards by worker_id over num_workers",
                            lambda shard: f"no reader took {shard}: its samples would never be trained on")
    if problem:
        return problem
    loads = Counter(reader for taken in readers.values() for reader in taken)
    counts = [loads[(rank, worker)] for rank in range(world_size) for worker in range(max(1, num_workers))]
    if max(counts) - min(counts) > 1:
        return (f"{setup}, the readers take {counts} shards: give them equal shares, at most one shard apart "
                "(every (rank, worker) takes every n-th shard of what is left to it)")
    return None


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
        skipped = steps_done * batch_size
        if steps_done and got == list(uninterrupted)[:skipped]:
            raise Failed(f"{call} returned the first steps_done * batch_size = {skipped} draws, the ones already trained on: "
                         "return the draws that come after them")
        if sorted(got) == sorted(expected):
            raise Failed(f"{call} returned the right indices in another order: training goes on in the order the sampler "
                         "draws them, so return them in that order (no sorted(), no set)")
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
    Case((1, 0, 1), 1, "one rank read by its main process is one reader: 1 shard is enough; raise only for ranks < 1"),
    Case((1, 3, 7), 9, "one rank with 3 workers: 9 is the smallest multiple of 3 that is at least 7; ranks=1 is valid"),
)


def _sweep() -> tuple[Case, ...]:
    """Every ranks 1-4 x workers 0-5 x min_shards 1-30, each expected count found by counting up from min_shards."""
    cases = []
    for ranks, workers, min_shards in itertools.product(range(1, 5), range(6), range(1, 31)):
        readers = ranks * (workers or 1)
        count = next(n for n in itertools.count(min_shards) if n % readers == 0)
        cases.append(Case((ranks, workers, min_shards), count, f"the smallest multiple of {ranks} rank(s) x "
                          f"{workers or 'the main process as 1'} reader(s) = {readers} that is at least {min_shards}"))
    return tuple(cases)


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
    answer.cases(SHARD_COUNT_CASES)
    sweep = _sweep()
    answer.cases(sweep)
    return f"{answer.name} is right in all {len(SHARD_COUNT_CASES) + len(sweep)} cases"
