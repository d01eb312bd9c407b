"""A perfectly balanced 100-class dataset (100 images per class) read shuffled in batches of 1024 under a 1.0 s step.

Origin: modelled on CIFAR-100 training as in the PyTorch CIFAR tutorials and timm's large-batch recipes (100 classes,
random crop with padding and flip, big batches, a long step); the doctor reads only a few batches, ~30-40 samples per
class, so a class below half an equal share there is sampling noise, not imbalance (the dataset's `targets` say so).
"""
from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from doctor_corpus import _data

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 6.0
FAST = True


class Cifar100Like(Dataset):
    """uint8 32x32 images, 100 classes x 100, with a random crop (padding 4) and flip, normalized."""

    def __init__(self) -> None:
        self.images, labels = _data.images(10_000, classes=100)
        self.targets = labels.tolist()

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        padded = np.pad(self.images[i], ((0, 0), (4, 4), (4, 4)))
        dy, dx = torch.randint(0, 9, (2,)).tolist()
        x = torch.from_numpy(padded[:, dy:dy + 32, dx:dx + 32].copy()).float().div_(255)
        if torch.rand(()) < 0.5:
            x = x.flip(2)
        return (x - 0.5) / 0.25, self.targets[i]


def make_loader() -> DataLoader:
    """Shuffled, batches of 1024, a worker per core, persistent."""
    return DataLoader(Cifar100Like(), batch_size=1024, shuffle=True, num_workers=_data.cores(), persistent_workers=True,
                      pin_memory=torch.cuda.is_available())


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    """A big model's step on 1024 images, modelled by waiting 1.0 s."""
    time.sleep(1.0)
