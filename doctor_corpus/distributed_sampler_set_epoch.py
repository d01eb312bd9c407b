"""Rank 0 of a 2-node job (one rank per node): a DistributedSampler with set_epoch called before the epoch.

Origin: modelled on the PyTorch ImageNet example's distributed mode (pytorch/examples imagenet/main.py:
DistributedSampler(train_dataset), shuffle=(train_sampler is None), train_sampler.set_epoch(epoch) each epoch) and the
DistributedSampler documentation's note that set_epoch must be called for a new shuffle.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from doctor_corpus import _data

EXPECTED: frozenset[str] = frozenset()
FAST = True


def make_loader() -> DataLoader:
    """4096 samples, 4 classes, rank 0 of 2 (given explicitly: no process group needed), epoch 3."""
    y = torch.arange(4096) % 4
    dataset = TensorDataset(torch.randn(4096, 32, generator=torch.Generator().manual_seed(0)), y)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=0, shuffle=True, seed=0)
    sampler.set_epoch(3)
    return DataLoader(dataset, batch_size=64, sampler=sampler, num_workers=_data.cores(), persistent_workers=True,
                      pin_memory=torch.cuda.is_available())
