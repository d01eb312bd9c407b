"""A Lightning-style DataModule (prepare_data, setup, train_dataloader) for MNIST-like digits, read under a training step.

Origin: modelled on the PyTorch Lightning documentation's MNISTDataModule (transforms ToTensor + Normalize((0.1307,),
(0.3081,)), random_split 55000/5000), with train_dataloader given the num_workers and persistent_workers that
Lightning's "does not have many workers" warning asks for. No Lightning import: the class has the same methods.
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset, random_split

from doctor_corpus import _data

EXPECTED: frozenset[str] = frozenset()
FAST = False  # make bench runs every case; make test runs a shorter subset


class Digits(Dataset):
    """28x28 uint8 images with balanced labels 0-9, normalized as MNIST is."""

    def __init__(self, n: int) -> None:
        images, self.targets = _data.images(n, classes=10, size=28)
        self.images = torch.from_numpy(images[:, :1].copy())

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return (self.images[i].float().div(255) - 0.1307) / 0.3081, int(self.targets[i])


class DigitsDataModule:
    """LightningDataModule's hooks: prepare_data (download), setup (split), train_dataloader."""

    def __init__(self, batch_size: int = 64) -> None:
        self.batch_size = batch_size

    def prepare_data(self) -> None:
        """Nothing to download: the digits are generated."""

    def setup(self, stage: str) -> None:
        if stage == "fit":
            self.train, self.val = random_split(Digits(6000), [5500, 500], generator=torch.Generator().manual_seed(42))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True, num_workers=_data.cores(),
                          persistent_workers=True, pin_memory=torch.cuda.is_available())


def make_loader() -> DataLoader:
    """What Trainer.fit does first: prepare_data, setup("fit"), train_dataloader()."""
    module = DigitsDataModule()
    module.prepare_data()
    module.setup("fit")
    return module.train_dataloader()


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    """A LeNet step on a GPU, modelled by waiting 10 ms."""
    time.sleep(0.01)
