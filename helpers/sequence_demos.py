"""The rank functions lesson 08 runs with helpers.ddp.run; each returns what its rank measured, as plain data."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DistributedSampler

from helpers._validate import short
from helpers.sequence_samplers import BucketBatchSampler, DistributedBucketSampler, per_rank_buckets
from helpers.sequences import TokenCorpus, pad_collate, tiny_encoder, train_step

# how a rank gets its batches: its own share bucketed and shuffled with its own seed (seed + rank)
# or with the seed every rank shares, or one plan for all ranks
SAMPLERS = ("per-rank buckets", "per-rank buckets, one seed", "distributed buckets")


def rank_sampler(lengths: np.ndarray, how: str, batch_size: int | None = None,
                 max_tokens: int | None = None, seed: int = 0, rank: int | None = None,
                 world_size: int | None = None) -> BucketBatchSampler | DistributedBucketSampler:
    """This rank's batch sampler (rank and world size from the process group unless given)."""
    rank = dist.get_rank() if rank is None else rank
    world = dist.get_world_size() if world_size is None else world_size
    if how == "per-rank buckets":  # each rank shuffles its batches with seed + rank
        return per_rank_buckets(lengths, rank, world, batch_size, max_tokens, seed=seed)
    if how == "per-rank buckets, one seed":  # the same, every rank shuffling with `seed`
        share = list(DistributedSampler(range(len(lengths)), world, rank, seed=seed))
        return BucketBatchSampler(lengths, batch_size, max_tokens, seed=seed, indices=share)
    if how == "distributed buckets":
        return DistributedBucketSampler(lengths, world, rank, batch_size, max_tokens, seed=seed)
    raise ValueError(f"how must be one of {SAMPLERS}, got {short(how)}")


def bucketed_epoch(lengths: list[int], how: str, batch_size: int | None = None,
                   max_tokens: int | None = None, seed: int = 0) -> dict[str, Any]:
    """An epoch of DDP-style steps (forward, backward, all-reduce); per step: documents, seconds."""
    torch.set_num_threads(1)  # 2 ranks on 2 cores; CPU seconds then count no idle thread spinning
    lengths_array = np.asarray(lengths, dtype=np.int64)
    corpus = TokenCorpus(lengths_array, seed=seed)
    model = tiny_encoder(seed=seed)  # the same start on every rank
    # a warm-up step with a padding mask, not timed: its first use cost tenths of a CPU second here
    padding = torch.tensor([[False, False], [False, True]])
    train_step(model, torch.ones(2, 2, dtype=torch.long), key_padding=padding)
    model.zero_grad(set_to_none=True)
    steps: dict[str, list[Any]] = {"documents": [], "padded_tokens": [], "compute_s": [],
                                   "wait_s": []}
    for batch_indices in rank_sampler(lengths_array, how, batch_size, max_tokens, seed):
        batch = pad_collate([corpus[i] for i in batch_indices])
        started_cpu, started = time.process_time(), time.perf_counter()
        train_step(model, batch["input_ids"], key_padding=~batch["attention_mask"])
        computed_cpu, computed = time.process_time(), time.perf_counter()
        for parameter in model.parameters():  # DDP's all-reduce: every rank must take part
            dist.all_reduce(parameter.grad)
            parameter.grad = None
        steps["wait_s"].append(time.perf_counter() - computed)
        steps["compute_s"].append(computed_cpu - started_cpu)  # CPU seconds of this rank's work
        steps["padded_tokens"].append(batch["input_ids"].numel())
        steps["documents"].append([int(i) for i in batch_indices])
    dist.barrier()  # the end of the epoch: every rank waits for the others
    return steps
