"""DDP with a DistributedSampler over 1001 samples on 2 ranks: one sample padded in, both ranks 501 samples, set_epoch each epoch.

Origin: modelled on the PyTorch ImageNet example's distributed mode (pytorch/examples imagenet/main.py:
DistributedSampler(train_dataset), train_sampler.set_epoch(epoch)), with a dataset that does not divide by the ranks.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

EXPECTED: frozenset[str] = frozenset()
FAST = True
RANKS = 2
EPOCHS = 2


def dataset() -> TensorDataset:
    """1001 samples of 16 features, 4 classes: divides neither by 2 ranks nor by common batch sizes."""
    return TensorDataset(torch.randn(1001, 16, generator=torch.Generator().manual_seed(0)), torch.arange(1001) % 4)


def make_loader(rank: int = 0, world_size: int = 1) -> DataLoader:
    """This rank's share, batches of 32."""
    data = dataset()
    return DataLoader(data, batch_size=32, sampler=DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True, seed=0))
