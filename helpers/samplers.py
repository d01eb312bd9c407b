"""A weighted sampler that works under DistributedDataParallel and past 2^24 weights (lessons 02 and 05)."""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from helpers._validate import as_int, as_weights, fingerprint

CHUNK = 2**18  # draws per searchsorted batch: sorted queries walk the cumulative sum in order (cache-friendly), memory stays bounded
STATE_FIELDS = ("num_replicas", "num_samples", "seed", "replacement", "drop_last")  # a state resumes only a sampler that agrees on these


# With replacement, draw position p is the inverse-CDF of element p of one Philox stream keyed by (seed, epoch);
# rank r holds positions [r * len(self), (r + 1) * len(self)) and jumps to them with Philox.advance, so an epoch
# costs O(its own samples) after one cumulative sum at construction, and a resume skips to draw k in O(1).
# Without replacement every rank still runs the O(len(weights)) Efraimidis-Spirakis draw, its weighted order
# dealt out strided so that every rank gets early and late draws alike.
class DistributedWeightedSampler(Sampler[int]):
    """Weighted sampling sharded across ranks: one draw fixed by (seed, epoch), each rank computing only its own block, resumable mid-epoch (lessons 02, 05)."""

    def __init__(
        self,
        weights: Any,
        num_replicas: int | None = None,
        rank: int | None = None,
        num_samples: int | None = None,
        replacement: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.weights = as_weights("weights", weights)
        if num_replicas is None:
            num_replicas = dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1
        if rank is None:
            if not (dist.is_available() and dist.is_initialized()) and num_replicas != 1:
                raise ValueError(f"rank must be given with num_replicas={num_replicas!r} when no process group is "
                                 f"initialized: every rank would draw rank 0's part")
            rank = dist.get_rank() if dist.is_available() and dist.is_initialized() else 0
        self.num_replicas = as_int("num_replicas", num_replicas, minimum=1)
        self.rank = as_int("rank", rank, minimum=0)
        if self.rank >= self.num_replicas:
            raise ValueError(f"rank must be below num_replicas={self.num_replicas}, got {self.rank}")
        self.num_samples = as_int("num_samples", len(self.weights) if num_samples is None else num_samples, minimum=1)
        for name, flag in (("replacement", replacement), ("drop_last", drop_last)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {flag!r}")
        self.replacement, self.drop_last = replacement, drop_last
        self.seed = as_int("seed", seed, minimum=0)
        self.epoch = 0
        per_rank = self.num_samples // self.num_replicas if drop_last else math.ceil(self.num_samples / self.num_replicas)
        if per_rank < 1:
            raise ValueError(f"num_samples={self.num_samples} with drop_last=True leaves no sample for {self.num_replicas} ranks")
        self.samples_per_rank = per_rank
        self.total_size = per_rank * self.num_replicas
        drawable = int(torch.count_nonzero(self.weights))
        if not replacement and self.total_size > drawable:
            raise ValueError(
                f"replacement=False draws each index at most once, so num_samples={self.num_samples} (rounded up to "
                f"{self.total_size} for {self.num_replicas} ranks) must not exceed the {drawable} samples with weight > 0"
                f" (of len(weights)={len(self.weights)}); lower num_samples or pass drop_last=True"
            )
        # Draws use the weights scaled so the largest is 1: a sum of 1e308s overflows, and Exp/1e-320 keys are all inf.
        self._largest = float(self.weights.max())
        # The once-per-sampler preparation: the running sum that every draw searches (torch.multinomial rebuilds it per call).
        self._cumulative = np.cumsum(self.weights.cpu().numpy() / self._largest) if replacement else None
        self._last_drawable = len(self.weights) - 1 - int(torch.argmax(self.weights.flip(0).gt(0).to(torch.uint8)))
        self._resume_at = 0  # where the next __iter__ starts in this epoch (set by load_state_dict)
        self._yielded = 0  # draws handed out by the current iteration, counted from the epoch's start
        self._weights_id: str | None = None  # the weights' fingerprint, made when a state first needs it

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch: every rank must call it with the same value before iterating (another epoch drops a pending resume and starts its count at 0)."""
        epoch = as_int("epoch", epoch, minimum=0)
        if epoch != self.epoch:
            self._resume_at = self._yielded = 0
        self.epoch = epoch

    def _stream(self, start: int) -> np.random.Generator:
        """This epoch's uniform stream, positioned at element `start` in O(1) (Philox: 4 doubles per counter block)."""
        bit_generator = np.random.Philox(np.random.SeedSequence([self.seed, self.epoch]))
        bit_generator.advance(start // 4)
        stream = np.random.Generator(bit_generator)
        stream.random(start % 4)
        return stream

    def _draw_chunks(self, start: int, stop: int) -> Iterator[np.ndarray]:
        """Indices at global draw positions [start, stop), CHUNK at a time, in the stream's order."""
        stream, total = self._stream(start), self._cumulative[-1]
        for begin in range(start, stop, CHUNK):
            uniforms = stream.random(min(CHUNK, stop - begin))
            order = np.argsort(uniforms)
            indices = np.empty(len(uniforms), dtype=np.int64)
            indices[order] = np.searchsorted(self._cumulative, uniforms[order] * total, side="right")
            yield np.minimum(indices, self._last_drawable, out=indices)

    def _without_replacement(self) -> torch.Tensor:
        """Efraimidis-Spirakis order (smallest Exp(1)/w keys first) as a (num_replicas, samples_per_rank) table: row r is rank r's part."""
        exponentials = torch.from_numpy(self._stream(0).standard_exponential(len(self.weights)))  # seeded by (seed, epoch), as with replacement
        keys = exponentials / (self.weights.cpu() / self._largest)
        order = torch.topk(keys, self.total_size, largest=False).indices  # sorted: smallest key first
        return order.view(self.samples_per_rank, self.num_replicas).T

    def global_indices(self) -> torch.Tensor:
        """This epoch's whole draw (total_size int64 indices, rank r's part at [r * len(self), (r + 1) * len(self))); for tests and small N."""
        if not self.replacement:
            return self._without_replacement().reshape(-1)
        return torch.from_numpy(np.concatenate(list(self._draw_chunks(0, self.total_size))))

    def __iter__(self) -> Iterator[int]:
        start, self._resume_at = self._resume_at, 0
        self._yielded = start
        if self.replacement:
            offset = self.rank * self.samples_per_rank
            chunks = self._draw_chunks(offset + start, offset + self.samples_per_rank)
        else:
            chunks = iter([self._without_replacement()[self.rank, start:].numpy()])
        for chunk in chunks:
            for index in chunk.tolist():
                self._yielded += 1
                yield index

    def __len__(self) -> int:
        return self.samples_per_rank

    def state_dict(self) -> dict[str, Any]:
        """Epoch and draws handed out so far (the same on every rank in lock-step, so rank 0's state resumes them all).

        It counts indices handed to the DataLoader, which with workers runs ahead of the batches trained on:
        save `{**state, "yielded": steps_done * batch_size}` then, or let a stateful loader take the snapshot.
        """
        return {"epoch": self.epoch, "yielded": self._yielded, **{name: getattr(self, name) for name in STATE_FIELDS},
                "weights": self._weights_fingerprint()}

    def _weights_fingerprint(self) -> str:
        """The weights' fingerprint, computed once (a state names the weights it was drawn from)."""
        if self._weights_id is None:
            self._weights_id = fingerprint(self.weights.cpu().numpy())
        return self._weights_id

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume: the next iteration starts at draw state['yielded'] of state['epoch'], identical to an uninterrupted epoch
        (a state of an epoch before the current one, read to its end, leaves the sampler as it is)."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        for name in (*STATE_FIELDS, "weights", "epoch", "yielded"):
            if name not in state:
                raise ValueError(f"state lacks {name!r}: pass a dict from DistributedWeightedSampler.state_dict()")
        for name in STATE_FIELDS:
            if state[name] != getattr(self, name):
                raise ValueError(f"state {name} is {state[name]!r}, but this sampler has {name}={getattr(self, name)!r}")
        if state["weights"] != self._weights_fingerprint():
            raise ValueError(f"state weights are {state['weights']!r}, but this sampler's are {self._weights_fingerprint()!r}: "
                             f"a state resumes only a draw from the same weights")
        yielded = as_int("state['yielded']", state["yielded"], minimum=0)
        if yielded > self.samples_per_rank:
            raise ValueError(f"state['yielded'] must be at most len(self)={self.samples_per_rank}, got {yielded}")
        epoch = as_int("state['epoch']", state["epoch"], minimum=0)
        if yielded == self.samples_per_rank and epoch < self.epoch:
            return  # an earlier epoch read to its end (StatefulDataLoader loads it after the loop's set_epoch)
        self.set_epoch(epoch)
        self._resume_at = self._yielded = yielded
