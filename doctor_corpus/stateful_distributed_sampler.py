"""StatefulDataLoader with a DistributedSampler per rank and set_epoch each epoch, checked on 2 ranks and resumed.

Origin: modelled on torchdata's StatefulDataLoader tutorial (state_dict saved with the checkpoint, load_state_dict in the
next run) with a DistributedSampler per rank and set_epoch each epoch, as the DistributedSampler documentation asks.
"""
from __future__ import annotations

import torch
from torch.utils.data import DistributedSampler, TensorDataset
from torchdata.stateful_dataloader import StatefulDataLoader

EXPECTED: frozenset[str] = frozenset()
FAST = True
RANKS = 2
EPOCHS = 2
RESUME = True
BUDGET_S = 10.0


def make_loader(rank: int = 0, world_size: int = 1) -> StatefulDataLoader:
    """600 samples, this rank's share in batches of 20."""
    dataset = TensorDataset(torch.randn(600, 8, generator=torch.Generator().manual_seed(0)), torch.arange(600) % 3)
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=0)
    return StatefulDataLoader(dataset, batch_size=20, sampler=sampler)
