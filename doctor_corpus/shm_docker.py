"""Batches of 64 images at 224x224 (38.5 MB) from 2 workers in a container with Docker's default 64 MiB /dev/shm.

Origin: modelled on pytorch/pytorch#5040 ("DataLoader worker is killed by signal: Bus error" when shared memory runs
out) and the Docker reports it gathers (fix: `--shm-size` or `--ipc=host`); skipped where /dev/shm is large.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

EXPECTED = frozenset({"shm-too-small"})
NEEDS = "small-shm"
FAST = False
EXIT = 1  # batches in flight (154 MB) exceed all of 64 MiB: an error


class RandomImages(Dataset):
    """3x224x224 float32 images, seeded by index, made on the fly."""

    def __len__(self) -> int:
        return 1024

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.rand(3, 224, 224, generator=torch.Generator().manual_seed(i)), i % 10


def make_loader() -> DataLoader:
    """Batches of 64, 2 workers, prefetch_factor 2: 4 batches in shared memory."""
    return DataLoader(RandomImages(), batch_size=64, num_workers=2, pin_memory=torch.cuda.is_available())
