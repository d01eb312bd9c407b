"""A healthy loader (a worker per core, persistent) diagnosed while other programs keep every core busy.

Origin: modelled on this course's `make stress` busy runs (`python -c "while True: pass"` beside the lesson) and the
shared-workstation reports where loader speed changed with other jobs (e.g. a second training run or a browser); the
runner starts one busy program per usable core around the diagnosis (HOST_BUSY).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from doctor_corpus import _data

EXPECTED = frozenset({"busy-host"})
HOST_BUSY = True
FAST = False  # make bench runs every case; make test runs a shorter subset


def make_loader() -> DataLoader:
    """4096 x 32 features, 4 classes, a worker per core, persistent."""
    y = torch.arange(4096) % 4
    dataset = TensorDataset(torch.randn(4096, 32, generator=torch.Generator().manual_seed(0)), y)
    return DataLoader(dataset, batch_size=64, shuffle=True, num_workers=_data.cores(), persistent_workers=True,
                      pin_memory=torch.cuda.is_available())
