"""Batch samplers for variable-length data (lesson 08): buckets, token budgets, equal steps per rank, mixtures."""
from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np
from torch.utils.data import DistributedSampler, Sampler

from helpers._validate import as_int, fingerprint, short
from helpers.sequences import as_lengths, batch_padding_share, pack_lengths


def sorted_batches(lengths: np.ndarray, order: np.ndarray, batch_size: int | None,
                   max_tokens: int | None, pool_size: int) -> list[list[int]]:
    """Cut `order` into pools, sort each by length, cut into batches (batch_size or max_tokens)."""
    batches: list[list[int]] = []
    for start in range(0, len(order), pool_size):
        pool = order[start : start + pool_size]
        pool = pool[np.argsort(lengths[pool], kind="stable")].tolist()
        if batch_size is not None:
            batches += [pool[i : i + batch_size] for i in range(0, len(pool), batch_size)]
            continue
        current: list[int] = []
        for index in pool:  # ascending lengths: the newest document is the batch's longest
            if current and (len(current) + 1) * lengths[index] > max_tokens:
                batches.append(current)
                current = []
            current.append(index)
        batches.append(current)
    return batches


def _limits(lengths: np.ndarray, batch_size: Any, max_tokens: Any) -> tuple[int | None, int | None]:
    """Exactly one of batch_size and max_tokens, checked; a document above max_tokens is refused."""
    if (batch_size is None) == (max_tokens is None):
        raise ValueError(f"give exactly one of batch_size and max_tokens, got batch_size={short(batch_size)} "
                         f"and max_tokens={short(max_tokens)}")
    if batch_size is not None:
        return as_int("batch_size", batch_size, minimum=1), None
    max_tokens = as_int("max_tokens", max_tokens, minimum=1)
    if lengths.max() > max_tokens:
        index = int(np.argmax(lengths))
        raise ValueError(f"max_tokens={max_tokens} is below lengths[{index}]={int(lengths[index])}: no batch can hold "
                         f"that document; raise max_tokens or truncate documents to it")
    return None, max_tokens


class _Resumable:
    """Epochs, and resuming mid-epoch from state_dict(), for a sampler whose epoch is a list of batches (lesson 08).

    A state names the sampler's plan (every argument that decides an epoch's items, arrays as fingerprints) and
    load_state_dict refuses a state of another plan, naming what differs. An epoch's plan is made once and kept
    until the epoch changes, so len() and a resume do not plan it again.
    """

    epoch: int
    _resume_at: int
    _yielded: int
    _planned: tuple[int, list[Any]] | None = None

    def _state_fields(self) -> dict[str, Any]:
        return {}

    def _make_plan(self) -> list[Any]:
        raise NotImplementedError

    def _epoch_plan(self) -> list[Any]:
        """This epoch's items, planned once per epoch."""
        if self._planned is None or self._planned[0] != self.epoch:
            self._planned = (self.epoch, self._make_plan())
        return self._planned[1]

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch (every rank the same value); another epoch drops a pending resume and starts its count at 0."""
        epoch = as_int("epoch", epoch, minimum=0)
        if epoch != self.epoch:
            self._resume_at = self._yielded = 0
        self.epoch = epoch

    def __iter__(self) -> Iterator[Any]:
        start, self._resume_at = self._resume_at, 0
        self._yielded = start
        for item in self._epoch_plan()[start:]:
            self._yielded += 1
            yield item

    def __len__(self) -> int:
        return len(self._epoch_plan())

    def state_dict(self) -> dict[str, Any]:
        """The epoch, how many of its items were handed out (a StatefulDataLoader snapshots it per batch), the plan."""
        return {"epoch": self.epoch, "yielded": self._yielded, **self._state_fields()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration starts at item state['yielded'] of state['epoch'] (a state of the same plan only);
        a state of an epoch before the current one, read to its end, leaves the sampler as it is."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        for name, value in self._state_fields().items():
            if name not in state:
                raise ValueError(f"state lacks {name!r}: pass a dict from {type(self).__name__}.state_dict()")
            if state[name] != value:
                raise ValueError(f"state has {name}={short(state[name])}, but this sampler has {name}={value!r}: "
                                 f"a state resumes only the same plan")
        epoch = as_int("state['epoch']", state.get("epoch"), minimum=0)
        yielded = as_int("state['yielded']", state.get("yielded"), minimum=0)
        current, self.epoch = self.epoch, epoch
        size = len(self)
        self.epoch = current
        if yielded > size:
            raise ValueError(f"state['yielded'] must be at most len(self)={size}, got {yielded}")
        if yielded == size and epoch < current:
            return  # an earlier epoch read to its end (StatefulDataLoader loads it after the loop's set_epoch)
        self.set_epoch(epoch)
        self._resume_at = self._yielded = yielded


class BucketBatchSampler(_Resumable, Sampler[list[int]]):
    """Batches of similar lengths: shuffle, sort within pools of pool_size, cut, shuffle the batches (lesson 08)."""

    def __init__(self, lengths: Sequence[int] | np.ndarray, batch_size: int | None = None, max_tokens: int | None = None,
                 pool_size: int | None = None, seed: int = 0, indices: Sequence[int] | None = None) -> None:
        self.lengths = as_lengths("lengths", lengths)
        self.batch_size, self.max_tokens = _limits(self.lengths, batch_size, max_tokens)
        self.indices = np.arange(len(self.lengths)) if indices is None else np.asarray(indices)
        if self.indices.dtype == bool or not np.issubdtype(self.indices.dtype, np.integer):
            raise TypeError(f"indices must hold whole numbers (document indices), got {short(indices)}")
        self.indices = self.indices.astype(np.int64)
        if self.indices.ndim != 1 or self.indices.size == 0:
            raise ValueError(f"indices must be a non-empty 1-D sequence, got {short(indices)}")
        if self.indices.min() < 0 or self.indices.max() >= len(self.lengths):
            raise ValueError(f"indices must be in [0, {len(self.lengths)}), got {short(indices)}")
        self.pool_size = len(self.indices) if pool_size is None else as_int("pool_size", pool_size, minimum=1)
        self.seed = as_int("seed", seed, minimum=0)
        self._lengths_id, self._indices_id = fingerprint(self.lengths), fingerprint(self.indices)
        self.epoch, self._resume_at, self._yielded = 0, 0, 0

    def _state_fields(self) -> dict[str, Any]:
        return {"lengths": self._lengths_id, "indices": self._indices_id, "seed": self.seed,
                "batch_size": self.batch_size, "max_tokens": self.max_tokens, "pool_size": self.pool_size}

    def _make_plan(self) -> list[list[int]]:
        rng = np.random.default_rng([self.seed, self.epoch])
        order = rng.permutation(self.indices)
        batches = sorted_batches(self.lengths, order, self.batch_size, self.max_tokens, self.pool_size)
        return [batches[i] for i in rng.permutation(len(batches))]


class DistributedBucketSampler(_Resumable, Sampler[list[int]]):
    """Bucketed batches for one rank of num_replicas: every rank the same number of batches, of similar lengths.

    All ranks plan the whole epoch from (seed, epoch): sorted batches are grouped num_replicas at a time (neighbours
    in length), the groups are shuffled, and rank r takes batch r of each group (lesson 08). A last group short of
    num_replicas batches is completed with its own batches again, from its first: `repeated_batches()` extra
    deliveries an epoch, at most num_replicas - 1 (with one pool the last group holds the longest documents). To
    deliver each document once instead, let ranks run out unevenly under DDP's join() (lesson 05).
    """

    def __init__(self, lengths: Sequence[int] | np.ndarray, num_replicas: int, rank: int,
                 batch_size: int | None = None, max_tokens: int | None = None, pool_size: int | None = None,
                 seed: int = 0) -> None:
        self.lengths = as_lengths("lengths", lengths)
        self.batch_size, self.max_tokens = _limits(self.lengths, batch_size, max_tokens)
        self.num_replicas = as_int("num_replicas", num_replicas, minimum=1)
        self.rank = as_int("rank", rank, minimum=0)
        if self.rank >= self.num_replicas:
            raise ValueError(f"rank must be in [0, num_replicas={self.num_replicas}), got {self.rank}")
        self.pool_size = len(self.lengths) if pool_size is None else as_int("pool_size", pool_size, minimum=1)
        self.seed = as_int("seed", seed, minimum=0)
        self._lengths_id = fingerprint(self.lengths)
        self._steps: tuple[int, list[list[list[int]]], int] | None = None
        self.epoch, self._resume_at, self._yielded = 0, 0, 0

    def _state_fields(self) -> dict[str, Any]:
        return {"seed": self.seed, "num_replicas": self.num_replicas, "batch_size": self.batch_size,
                "max_tokens": self.max_tokens, "pool_size": self.pool_size, "lengths": self._lengths_id}

    def _plan_steps(self) -> tuple[list[list[list[int]]], int]:
        """This epoch's steps and how many batches complete the last group, planned once per epoch."""
        if self._steps is None or self._steps[0] != self.epoch:
            rng = np.random.default_rng([self.seed, self.epoch])
            order = rng.permutation(len(self.lengths))
            batches = sorted_batches(self.lengths, order, self.batch_size, self.max_tokens, self.pool_size)
            groups = [batches[i : i + self.num_replicas] for i in range(0, len(batches), self.num_replicas)]
            last = groups[-1]  # may be short: completed with its own batches again
            groups[-1] = [last[i % len(last)] for i in range(self.num_replicas)]
            self._steps = (self.epoch, [groups[i] for i in rng.permutation(len(groups))],
                           self.num_replicas - len(last))
        return self._steps[1], self._steps[2]

    def steps(self) -> list[list[list[int]]]:
        """The epoch's steps, shared by every rank: step k holds one batch per rank."""
        return self._plan_steps()[0]

    def repeated_batches(self) -> int:
        """Batches delivered a second time this epoch, across all ranks, to complete the last group."""
        return self._plan_steps()[1]

    def _make_plan(self) -> list[list[int]]:
        return [step[self.rank] for step in self.steps()]


def window_counts(weights: Sequence[float], count: int, window: int) -> np.ndarray:
    """Each source's count in each window of `window` positions (the last may be shorter): its share of the window
    rounded down or up, the rounding carried over to the next window (lesson 08)."""
    share = np.asarray(weights, dtype=np.float64)
    if share.ndim != 1 or share.size == 0 or not np.all(np.isfinite(share)) or share.min() < 0 or share.max() <= 0:
        raise ValueError(f"weights must be finite, non-negative, not all 0, one per source, got {short(weights)}")
    count, window = as_int("count", count, minimum=0), as_int("window", window, minimum=1)
    share = share / share.max()  # scaled first: a sum of 1e308s overflows
    share = share / share.sum()
    carry, rows = np.zeros(len(share)), []
    for start in range(0, count, window):
        size = min(window, count - start)
        wanted = share * size + carry
        counts = np.floor(share * size)
        behind = np.argsort(counts - wanted, kind="stable")  # furthest below what it is owed first
        counts[behind[: size - int(counts.sum())]] += 1
        carry = wanted - counts
        rows.append(counts)
    return np.array(rows, dtype=np.int64).reshape(len(rows), len(share))


class MixtureSampler(_Resumable, Sampler[int]):
    """Indices into a ConcatDataset of sources, drawn in proportion to weights, per rank (lesson 08).

    strategy "windowed": every window of `window` positions (the last may be shorter) holds each source's share of it
    rounded down or up, in a shuffled order; the rounding is carried from window to window, so over the epoch a
    source's count stays within about one of its share (`window_counts`). strategy "random": each position's source is
    drawn at random, so a source's count varies by chance. Ranks take turns through each source's items; a rank that
    draws more than its turns of a source's items reads items again (another rank's among them) while some are unread:
    under "windowed" only when the source's share asks for more draws, over all ranks, than it has items (give or
    take the rounding), under "random" by chance.
    """

    STRATEGIES = ("random", "windowed")

    def __init__(self, sizes: Sequence[int], weights: Sequence[float], num_samples: int, strategy: str = "windowed",
                 window: int = 20, num_replicas: int = 1, rank: int = 0, seed: int = 0) -> None:
        self.sizes = as_lengths("sizes", sizes)
        if not isinstance(weights, (list, tuple, np.ndarray)) or len(weights) != len(self.sizes):
            raise ValueError(f"weights must give one weight per source ({len(self.sizes)}), got {short(weights)}")
        share = np.asarray(weights, dtype=np.float64)
        if not np.all(np.isfinite(share)) or share.min() < 0 or share.sum() <= 0:
            raise ValueError(f"weights must be finite, non-negative and sum to a positive number, got {short(weights)}")
        share = share / share.max()  # scaled first: a sum of 1e308s overflows
        self.weights = share / share.sum()
        if strategy not in self.STRATEGIES:
            raise ValueError(f"strategy must be one of {self.STRATEGIES}, got {short(strategy)}")
        self.strategy, self.window = strategy, as_int("window", window, minimum=1)
        self.num_samples = as_int("num_samples", num_samples, minimum=1)
        self.num_replicas = as_int("num_replicas", num_replicas, minimum=1)
        self.rank = as_int("rank", rank, minimum=0)
        if self.rank >= self.num_replicas:
            raise ValueError(f"rank must be in [0, num_replicas={self.num_replicas}), got {self.rank}")
        self.seed = as_int("seed", seed, minimum=0)
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)[:-1]])
        self._sizes, self._weights_id = self.sizes.tolist(), fingerprint(self.weights)  # a state names them
        self.epoch, self._resume_at, self._yielded = 0, 0, 0

    def _state_fields(self) -> dict[str, Any]:
        return {"seed": self.seed, "num_replicas": self.num_replicas, "rank": self.rank, "strategy": self.strategy,
                "window": self.window, "num_samples": self.num_samples, "sizes": self._sizes,
                "weights": self._weights_id}

    def __len__(self) -> int:
        return self.num_samples

    def sources(self) -> np.ndarray:
        """The source of each of this rank's positions this epoch."""
        rng = np.random.default_rng([self.seed, self.epoch, self.rank])
        if self.strategy == "random":
            return rng.choice(len(self.weights), size=self.num_samples, p=self.weights)
        counts = window_counts(self.weights, self.num_samples, self.window)
        plan = np.repeat(np.tile(np.arange(len(self.weights)), len(counts)), counts.reshape(-1))
        for start in range(0, self.num_samples, self.window):
            rng.shuffle(plan[start : start + self.window])  # counts per window kept, order random
        return plan

    def _make_plan(self) -> list[int]:
        plan = self.sources()
        out = np.empty(self.num_samples, dtype=np.int64)
        for source in range(len(self.sizes)):
            where = np.flatnonzero(plan == source)
            items = np.random.default_rng([self.seed, self.epoch, source]).permutation(self.sizes[source])
            turn = np.arange(len(where)) * self.num_replicas + self.rank  # ranks take turns through the items
            out[where] = self.offsets[source] + items[turn % self.sizes[source]]
        return out.tolist()


def per_rank_buckets(lengths: Sequence[int] | np.ndarray, rank: int, world_size: int,
                     batch_size: int | None = None, max_tokens: int | None = None,
                     seed: int = 0) -> BucketBatchSampler:
    """The usual first try: a rank's DistributedSampler share, bucketed on its own (lesson 08)."""
    share = list(DistributedSampler(range(len(lengths)), num_replicas=world_size, rank=rank,
                                    seed=seed))
    # each rank shuffles its batches its own way (seed + rank), as random.shuffle per process would
    return BucketBatchSampler(lengths, batch_size, max_tokens, seed=seed + rank, indices=share)


STRATEGIES = ("random", "bucketed", "token budget, per rank", "token budget, distributed", "packed")


def rank_plans(lengths: Sequence[int] | np.ndarray, strategy: str, batch_size: int, world_size: int = 2,
               max_len: int | None = None, max_tokens: int | None = None, seed: int = 0) -> list[list[list[int]]]:
    """Each rank's batches (document indices) under a strategy (lesson 08's widget): a token budget of
    max_tokens (default batch_size x max_len), packed batches of batch_size rows of max_len."""
    lengths = as_lengths("lengths", lengths)
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {short(strategy)}")
    batch_size, world_size = as_int("batch_size", batch_size, minimum=1), as_int("world_size", world_size, minimum=1)
    max_len = int(lengths.max()) if max_len is None else as_int("max_len", max_len, minimum=int(lengths.max()))
    budget = batch_size * max_len if max_tokens is None else as_int("max_tokens", max_tokens, minimum=1)
    if strategy == "token budget, distributed":
        return [list(DistributedBucketSampler(lengths, world_size, r, max_tokens=budget, seed=seed))
                for r in range(world_size)]
    plans = []
    for rank in range(world_size):
        share = list(DistributedSampler(range(len(lengths)), num_replicas=world_size, rank=rank, seed=seed))
        if strategy == "random":
            plans.append([share[i : i + batch_size] for i in range(0, len(share), batch_size)])
        elif strategy == "packed":
            rows = [[share[d] for d in row] for row in pack_lengths(lengths[share], max_len)]
            plans.append([sum(rows[i : i + batch_size], []) for i in range(0, len(rows), batch_size)])
        else:
            limits = {"batch_size": batch_size} if strategy == "bucketed" else {"max_tokens": budget}
            plans.append(list(per_rank_buckets(lengths, rank, world_size, **limits, seed=seed)))
    return plans


def plan_padding_share(lengths: Sequence[int] | np.ndarray, strategy: str, plans: list[list[list[int]]],
                       batch_size: int, max_len: int) -> float:
    """The padding share of every rank's batches: packed batches are batch_size rows of max_len each."""
    lengths = as_lengths("lengths", lengths)
    if strategy != "packed":
        return batch_padding_share(lengths, [b for plan in plans for b in plan])
    real = sum(int(lengths[b].sum()) for plan in plans for b in plan)
    rows = sum(len(pack_lengths(lengths[b], max_len)) for plan in plans for b in plan)
    return 1.0 - real / (rows * max_len)
