"""A DDP script whose loader shuffles the whole dataset on every rank (no DistributedSampler): the ranks train on the same data.

Origin: modelled on PatrickHua/SimSiam#16 ("no DistributedSampler ... would make the model run the same data twice") and
binbinao/physicsnemo-from-zero-to-one#143 (DataLoader(shuffle=True) under DDP: every rank sees the same data).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

EXPECTED: frozenset[str] = frozenset({"rank-overlap"})
EVIDENCE = {"rank-overlap": {"shared": 512, "rank_samples": 512}}
FAST = True
RANKS = 2


def make_loader(rank: int = 0, world_size: int = 1) -> DataLoader:
    """512 samples, shuffle=True; rank and world_size are taken, as in the script, and never used."""
    dataset = TensorDataset(torch.randn(512, 16, generator=torch.Generator().manual_seed(0)), torch.arange(512) % 4)
    return DataLoader(dataset, batch_size=32, shuffle=True)
