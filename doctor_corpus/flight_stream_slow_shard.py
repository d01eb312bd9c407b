"""A sharded IterableDataset whose shards are dealt to workers by stride; worker 1's shards sit on cold storage.

Origin: modelled on pytorch/pytorch#105203 ("Pytorch dataloader not loading first-available data with multiple
workers": an IterableDataset split per worker with get_worker_info(), where one worker's part of the stream is slow,
and the loop waits on that worker in turn) and the torch.utils.data IterableDataset documentation's per-worker split.
The odd shards sit on a slower tier (an archive bucket, an HDD pool) at 12 ms per record, the even ones on local SSD
at 4 ms; records are modelled by waits. Shards go to workers by stride (shards[worker::num_workers]), so worker 1 reads
only slow shards. A stream cannot be re-fetched by index, so whether the worker or its samples are slow is not
measured; the doctor can only name the worker. in_order stays at its default: worker 0's batches wait behind worker
1's, and in_order=False gives more samples/s (1.90-1.92x in each of 4 interleaved rounds of 30 batches, measured apart from the doctor), so head-of-line is
expected as well.
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

EXPECTED = frozenset({"slow-worker", "head-of-line"})
EVIDENCE = {"slow-worker": {"worker": 1}}
BUDGET_S = 15.0
FAST = False
NEEDS = "multi-core"

SHARDS = 8
PER_SHARD = 1024
TIER_WAIT_S = {"ssd": 0.004, "cold": 0.012}


def tier(shard: int) -> str:
    """Where a shard is stored: even shards on local SSD, odd ones on the cold tier."""
    return "ssd" if shard % 2 == 0 else "cold"


class ShardedRecords(IterableDataset):
    """SHARDS shards of PER_SHARD records {"x": 32 features, "y": label}, each worker reading shards[worker::workers]."""

    def __iter__(self) -> Iterator[dict[str, torch.Tensor | int]]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for shard in range(SHARDS)[worker::workers]:
            wait = TIER_WAIT_S[tier(shard)]
            for offset in range(PER_SHARD):
                time.sleep(wait)
                key = shard * PER_SHARD + offset
                yield {"x": torch.full((32,), float(key)), "y": key % 4}


def make_loader() -> DataLoader:
    """2 persistent workers over 8 shards (8192 records), batches of 16."""
    return DataLoader(ShardedRecords(), batch_size=16, num_workers=2, persistent_workers=True)
