"""The rank functions lesson 08 runs with helpers.ddp.run; each returns what its rank measured, as plain data."""
from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from helpers._validate import short
from helpers.sequence_samplers import BucketBatchSampler, DistributedBucketSampler, per_rank_buckets
from helpers.sequences import TokenCorpus, pad_collate, tiny_encoder, train_step

SAMPLERS = ("per-rank buckets", "distributed buckets")  # how a rank gets its batches


def rank_sampler(lengths: np.ndarray, how: str, batch_size: int | None = None,
                 max_tokens: int | None = None,
                 seed: int = 0) -> BucketBatchSampler | DistributedBucketSampler:
    """This rank's batch sampler: its own share bucketed its own way, or one plan for all ranks."""
    rank, world = dist.get_rank(), dist.get_world_size()
    if how == "per-rank buckets":
        return per_rank_buckets(lengths, rank, world, batch_size, max_tokens, seed=seed)
    if how == "distributed buckets":
        return DistributedBucketSampler(lengths, world, rank, batch_size, max_tokens, seed=seed)
    raise ValueError(f"how must be one of {SAMPLERS}, got {short(how)}")


def bucketed_epoch(lengths: list[int], how: str, batch_size: int | None = None,
                   max_tokens: int | None = None, seed: int = 0) -> dict[str, Any]:
    """An epoch of DDP-style steps (forward, backward, all-reduce); per step: tokens, seconds."""
    lengths_array = np.asarray(lengths, dtype=np.int64)
    corpus = TokenCorpus(lengths_array, seed=seed)
    model = tiny_encoder(seed=seed)  # the same start on every rank
    steps: dict[str, list[float]] = {"padded_tokens": [], "compute_s": [], "wait_s": []}
    for batch_indices in rank_sampler(lengths_array, how, batch_size, max_tokens, seed):
        batch = pad_collate([corpus[i] for i in batch_indices])
        started_cpu, started = time.process_time(), time.perf_counter()
        train_step(model, batch["input_ids"], key_padding=~batch["attention_mask"])
        computed_cpu, computed = time.process_time(), time.perf_counter()
        for parameter in model.parameters():  # DDP's all-reduce: every rank must take part
            dist.all_reduce(parameter.grad)
            parameter.grad = None
        steps["wait_s"].append(time.perf_counter() - computed)
        steps["compute_s"].append(computed_cpu - started_cpu)  # CPU s: load stretches them less
        steps["padded_tokens"].append(batch["input_ids"].numel())
    dist.barrier()  # the end of the epoch: every rank waits for the others
    return steps
