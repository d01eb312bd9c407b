"""The rank functions lesson 06 runs with helpers.ddp.run and prints where it runs them; each returns what its rank saw, as plain data."""
from __future__ import annotations

import collections
from typing import Any

import torch
import torch.distributed as dist
import webdataset as wds
from torch import nn
from torch.utils.data import DataLoader, get_worker_info

from helpers._validate import as_int, short
from helpers.streaming import ShardedStream, UnshardedStream

FIXES = ("none", "equal_steps", "join")


def keys_read(shards: list[str], num_workers: int = 2) -> dict[str, list[str]]:
    """The sample keys this rank's loader yields from the shards, read unsharded and sharded.

    Unsharded, every worker reads all of them; sharded, they are split by rank, then by worker.
    """
    num_workers = as_int("num_workers", num_workers, minimum=0)
    read = {}
    for name, dataset in (("unsharded", UnshardedStream(shards)),
                          ("sharded", ShardedStream(shards))):  # rank, world from the group
        loader = DataLoader(dataset, batch_size=None, num_workers=num_workers)
        read[name] = [sample["key"] for sample in loader]
    return read


def train_on_shards(
    shards: list[str], fix: str = "none", num_workers: int = 2, batch_size: int = 4
) -> dict[str, int]:
    """One DDP epoch over ShardedStream, then an end-of-epoch barrier.

    `fix` is "none", "equal_steps" (a fixed sample quota per rank) or "join".
    """
    if fix not in FIXES:
        raise ValueError(f"fix must be one of {FIXES}, got {short(fix)}")
    torch.manual_seed(0)  # the same start on every rank
    model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    stream = ShardedStream(shards, equal_steps=fix == "equal_steps")
    loader = DataLoader(stream, batch_size=batch_size,
                        num_workers=as_int("num_workers", num_workers, minimum=0))
    steps = samples = 0
    # enabled: a rank that runs out answers the others' all-reduces with zeros
    with model.join(enable=fix == "join"):
        for batch in loader:
            # the gradient all-reduce: every rank must take part
            model(batch["input"]).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            steps, samples = steps + 1, samples + len(batch["key"])
    dist.barrier()  # end of epoch: every rank waits for the others
    return {"steps": steps, "samples": samples}


def _worker_id(sample: dict[str, Any]) -> int:
    """The id of the DataLoader worker that read this sample (0 in the main process)."""
    info = get_worker_info()
    return 0 if info is None else info.id


def with_epoch_per_worker(
    shards: list[str], samples: int = 10, num_workers: int = 2
) -> dict[str, Any]:
    """webdataset's `with_epoch(samples)` on this rank: samples each worker yielded, or the error.

    Both with empty_check on (the default) and off.
    """
    samples, num_workers = as_int("samples", samples, minimum=1), as_int("num_workers", num_workers, minimum=1)
    outcome: dict[str, Any] = {}
    # the raising one last: no loader forks workers while its failed iterator is still alive
    for empty_check in (False, True):
        pipeline = wds.WebDataset(shards, nodesplitter=wds.split_by_node,
                                  workersplitter=wds.split_by_worker, shardshuffle=False,
                                  empty_check=empty_check).map(_worker_id).with_epoch(samples)
        try:
            counts = collections.Counter(DataLoader(pipeline, batch_size=None,
                                                    num_workers=num_workers))
            outcome[f"empty_check={empty_check}"] = [
                counts.get(worker, 0) for worker in range(num_workers)
            ]
        except ValueError as error:
            # a worker's exception, re-raised here by the DataLoader with the worker's traceback
            # the worker's own message, after its traceback
            original = str(error).rsplit("ValueError: ", 1)[-1]
            outcome[f"empty_check={empty_check}"] = "ValueError: " + " ".join(original.split())
    return outcome
