"""The rank functions lesson 06 runs with helpers.ddp.run and prints where it runs them; each returns what its rank saw, as plain data."""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from helpers._validate import as_int, short
from helpers.streaming import ShardedStream, UnshardedStream

FIXES = ("none", "equal_steps", "join")


def keys_read(shards: list[str], num_workers: int = 2) -> dict[str, list[str]]:
    """The sample keys this rank's loader yields from the shards, read unsharded (every worker reads all) and sharded (rank, then worker)."""
    num_workers = as_int("num_workers", num_workers, minimum=0)
    read = {}
    for name, dataset in (("unsharded", UnshardedStream(shards)), ("sharded", ShardedStream(shards))):  # rank, world from the group
        loader = DataLoader(dataset, batch_size=None, num_workers=num_workers)
        read[name] = [sample["key"] for sample in loader]
    return read


def train_on_shards(shards: list[str], fix: str = "none", num_workers: int = 2, batch_size: int = 4) -> dict[str, int]:
    """One DDP epoch over ShardedStream, then an end-of-epoch barrier; `fix` is "none", "equal_steps" (a fixed sample quota per rank) or "join"."""
    if fix not in FIXES:
        raise ValueError(f"fix must be one of {FIXES}, got {short(fix)}")
    torch.manual_seed(0)  # the same start on every rank
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stream = ShardedStream(shards, equal_steps=fix == "equal_steps")
    loader = DataLoader(stream, batch_size=batch_size, num_workers=as_int("num_workers", num_workers, minimum=0))
    steps = samples = 0
    with model.join(enable=fix == "join"):  # enabled: a rank that runs out answers the others' all-reduces with zeros
        for batch in loader:
            model(batch["input"]).square().mean().backward()  # the gradient all-reduce: every rank must take part
            optimizer.step()
            optimizer.zero_grad()
            steps, samples = steps + 1, samples + len(batch["key"])
    dist.barrier()  # end of epoch: every rank waits for the others
    return {"steps": steps, "samples": samples}
