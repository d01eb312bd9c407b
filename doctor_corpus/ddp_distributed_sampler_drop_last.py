"""DDP training loader dropping the remainder twice over: DistributedSampler(drop_last=True) and DataLoader(drop_last=True).

Origin: modelled on timm's training loader under DDP (timm/data/loader.py create_loader: a DistributedSampler for the
training set and drop_last=is_training on the DataLoader), with DistributedSampler(drop_last=True) added, over a dataset
that divides neither by the ranks nor by the batch.
"""
from __future__ import annotations

from torch.utils.data import DataLoader, DistributedSampler

from doctor_corpus.ddp_distributed_sampler_padded import dataset

EXPECTED: frozenset[str] = frozenset()
FAST = True
RANKS = 2
EPOCHS = 2


def make_loader(rank: int = 0, world_size: int = 1) -> DataLoader:
    """The same 1001 samples; this rank's 500 in batches of 64 (the last 52 dropped)."""
    data = dataset()
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=0, drop_last=True)
    return DataLoader(data, batch_size=64, sampler=sampler, drop_last=True)
