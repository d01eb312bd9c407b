"""A small TensorDataset (1000 x 5 features, binary labels) read by 2 workers: nothing in it is a Python object.

Origin: modelled on the torch.utils.data.TensorDataset examples of the PyTorch tutorials and forum answers
(TensorDataset(x, y) with num_workers=2); the tensors are shared with the workers, so there is no copy-on-read. Under
spawn and forkserver each epoch's 2 workers import torch anew: the doctor measured 0.72 s of start-up against an epoch
of 0.77 s under forkserver, so startup-cost is expected there too (persistent_workers=True saves it).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

EXPECTED: frozenset[str] = frozenset()
WITHOUT_FORK = frozenset({"startup-cost"})
FAST = True


def make_loader() -> DataLoader:
    """1000 x 5 features, labels 0/1 alternating, 2 workers, shuffled."""
    x = torch.randn(1000, 5, generator=torch.Generator().manual_seed(0))
    y = torch.arange(1000) % 2
    return DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True, num_workers=2)
