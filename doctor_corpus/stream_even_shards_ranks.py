"""A sharded stream whose shards divide by the ranks (6 over 2), split again over 2 workers: equal steps, each item once.

Origin: modelled on datasets.distributed.split_dataset_by_node's documented even case (huggingface/datasets PR #5369: a
shard count that is a multiple of world_size is split by shard) read by DataLoader workers that split it again.
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from doctor_corpus._streams import ShardStream

EXPECTED: frozenset[str] = frozenset()
FAST = True
RANKS = 2
EPOCHS = 2


def make_loader(rank: int = 0, world_size: int = 1) -> DataLoader:
    """6 shards of 40 items, shard order seeded by (seed, epoch), 2 workers per rank, batches of 16."""
    return DataLoader(ShardStream([40] * 6, rank=rank, world_size=world_size, seed=0), batch_size=16, num_workers=2)
