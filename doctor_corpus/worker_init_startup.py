"""Non-persistent workers whose worker_init_fn loads a lookup table (0.6 s) before each short epoch.

Origin: modelled on pytorch/pytorch#15849 ("DataLoader with option to re-use worker processes": worker_init_fn runs
again every epoch) and open-mmlab/mmpretrain#196 ("data loading in each epoch starting is slow"), fixed by
persistent_workers=True (PyTorch 1.7); the table load is modelled by a wait, as reading it from network storage is.
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, TensorDataset

EXPECTED = frozenset({"startup-cost"})
FAST = False  # make bench runs every case; make test runs a shorter subset


def load_vocabulary(worker_id: int) -> None:
    """Each worker reads a 0.6 s lookup table when it starts."""
    time.sleep(0.6)


def make_loader() -> DataLoader:
    """2048 samples in 32 batches, 2 workers restarted every epoch."""
    y = torch.arange(2048) % 2
    dataset = TensorDataset(torch.randn(2048, 16, generator=torch.Generator().manual_seed(0)), y)
    return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=2, worker_init_fn=load_vocabulary)
