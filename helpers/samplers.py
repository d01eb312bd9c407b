"""A weighted sampler that works under DistributedDataParallel and past 2^24 weights (lessons 02 and 05)."""
from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from helpers._validate import as_int, as_weights


class DistributedWeightedSampler(Sampler[int]):
    """Weighted sampling sharded across ranks: one global draw from (seed, epoch), each rank a strided slice (lesson 02)."""

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
        drawable = int((self.weights > 0).sum())
        if not replacement and self.total_size > drawable:
            raise ValueError(
                f"replacement=False draws each index at most once, so num_samples={self.num_samples} (rounded up to "
                f"{self.total_size} for {self.num_replicas} ranks) must not exceed the {drawable} samples with weight > 0"
                f" (of len(weights)={len(self.weights)}); lower num_samples or pass drop_last=True"
            )
        # Inverse-CDF sampling needs the running sum once; torch.multinomial would rebuild it every epoch.
        self._cumulative = torch.cumsum(self.weights, dim=0) if replacement else None
        self._last_drawable = int(torch.nonzero(self.weights > 0)[-1])

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch: every rank must call it with the same value before iterating."""
        self.epoch = as_int("epoch", epoch, minimum=0)

    def global_indices(self) -> torch.Tensor:
        """This epoch's draw across all ranks (total_size int64 indices), the same on every rank."""
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        if self.replacement:
            total = self._cumulative[-1]
            points = torch.rand(self.total_size, generator=generator, dtype=torch.float64) * total
            indices = torch.searchsorted(self._cumulative, points, right=True)
            return indices.clamp_(max=self._last_drawable)
        # Efraimidis-Spirakis: the smallest Exp(1)/w keys are a weighted draw without replacement.
        keys = torch.empty(len(self.weights), dtype=torch.float64).exponential_(generator=generator) / self.weights
        return torch.topk(keys, self.total_size, largest=False, sorted=True).indices

    def __iter__(self) -> Iterator[int]:
        return iter(self.global_indices()[self.rank : self.total_size : self.num_replicas].tolist())

    def __len__(self) -> int:
        return self.samples_per_rank
