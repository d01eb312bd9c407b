"""An evaluation loader (shuffle=False) read for 2 epochs: the same order each time, by design.

Origin: modelled on the PyTorch ImageNet example's validation loader (pytorch/examples imagenet/main.py:
DataLoader(val_dataset, batch_size=..., shuffle=False, num_workers=..., pin_memory=True)), evaluated every epoch.
Under spawn and forkserver each epoch's 2 workers import torch anew: the doctor measured 0.94 s of start-up against an
epoch of 1.03 s under forkserver (the suite's forkserver run of 2026-12-07), so startup-cost is expected there too
(persistent_workers=True saves it).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from doctor_corpus import _data

EXPECTED: frozenset[str] = frozenset()
BUDGET_WITHOUT_FORK_S = 28  # forkserver run 6 (2-core VM): 8 s did not fit its workers' fresh start
WITHOUT_FORK = frozenset({"startup-cost"})
FAST = True
EPOCHS = 2


def make_loader() -> DataLoader:
    """1000 samples of 32 features, 4 classes, in order, batches of 50."""
    dataset = TensorDataset(torch.randn(1000, 32, generator=torch.Generator().manual_seed(0)), torch.arange(1000) % 4)
    return DataLoader(dataset, batch_size=50, shuffle=False, num_workers=min(2, _data.cores()))
