"""A sharded stream that reshuffles its shards per epoch with set_epoch, read by 2 persistent workers: every epoch the same order.

Origin: modelled on huggingface/datasets#6673 (an IterableDataset's set_epoch, called in the main process, never reaches
persistent workers: they keep the copy made at their start; fixed upstream in datasets PR #6710 with the epoch in
shared memory).
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from doctor_corpus._streams import ShardStream

EXPECTED: frozenset[str] = frozenset({"epoch-order-repeats"})
EVIDENCE = {"epoch-order-repeats": {"cause": "persistent-workers", "samples": 192}}
FAST = True
EPOCHS = 2
BUDGET_S = 10.0


def make_loader() -> DataLoader:
    """8 shards of 24 items, shard order seeded by (seed, epoch), 2 persistent workers, batches of 16."""
    return DataLoader(ShardStream([24] * 8, seed=0), batch_size=16, num_workers=2, persistent_workers=True)
