"""DDP training loader dropping the remainder twice over: DistributedSampler(drop_last=True) and DataLoader(drop_last=True).

Origin: modelled on timm's training loader under DDP (timm/data/loader.py create_loader: a DistributedSampler for the
training set and drop_last=is_training on the DataLoader), with DistributedSampler(drop_last=True) added, over a dataset
that divides neither by the ranks nor by the batch.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EXPECTED: frozenset[str] = frozenset()
FAST = True
RANKS = 2
EPOCHS = 2


def make_loader(rank: int = 0, world_size: int = 1) -> DataLoader:
    """1001 samples, this rank's 500 in batches of 64 (the last 52 dropped)."""
    dataset = TensorDataset(torch.randn(1001, 16, generator=torch.Generator().manual_seed(0)), torch.arange(1001) % 4)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0, drop_last=True)
    return DataLoader(dataset, batch_size=64, sampler=sampler, drop_last=True)
