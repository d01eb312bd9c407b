"""The same reshuffling stream with workers started afresh each epoch: set_epoch reaches them, every epoch a new order.

Origin: modelled on one of the two fixes of huggingface/datasets#6673 that lesson 09 measures: persistent_workers=False,
so each epoch's workers copy the dataset after set_epoch ran (the other, an epoch in shared memory, is datasets PR #6710's).
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from doctor_corpus._streams import ShardStream

EXPECTED: frozenset[str] = frozenset()
FAST = True
EPOCHS = 3
BUDGET_S = 10.0


def make_loader() -> DataLoader:
    """8 shards of 24 items, shard order seeded by (seed, epoch), 2 workers started each epoch, batches of 16."""
    return DataLoader(ShardStream([24] * 8, seed=0), batch_size=16, num_workers=2, persistent_workers=False)
