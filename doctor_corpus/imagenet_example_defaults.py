"""The ImageNet example's loader settings as shipped (4 workers, pin_memory=True) run on a 2-core laptop without GPU.

Origin: modelled on pytorch/examples imagenet/main.py defaults (`-j 4`, `pin_memory=True`) run unchanged on a small
CPU-only machine: 1 + 4 processes on 2 cores, and pinning with no accelerator to copy to.
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from doctor_corpus import _data

EXPECTED = frozenset({"workers-oversubscribed", "pin-memory-no-accelerator"})
NEEDS = "no-accelerator,few-cores"
BUDGET_S = 8.0
FAST = False  # make bench runs every case; make test runs a shorter subset


def make_loader() -> DataLoader:
    """4 workers, pin_memory=True, not persistent: the example's train_loader."""
    dataset = _data.ImageFolder(_data.jpeg_folder("imagefolder", per_class=150))
    return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=4, pin_memory=True)
