"""Lesson 09's flight-recorder loader: files read in 3 ms each, four of them in 100 ms, by 2 workers in turn.

The reads are waits (`time.sleep`), as reads from a disk or a bucket are: other programs on the cores change them
little (a 3 ms read took up to 17 ms on a loaded 2-core machine), so what the lesson asserts holds on a busy laptop too.
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset

from helpers._validate import as_int, short

FILES = 192
BATCH = 8
READ_MS = 3.0
SLOW_MS = 100.0
# one in each of batches 2, 6, 10 and 14: batches go to the 2 workers in turn, so worker 0 reads all four
SLOW_FILES = (17, 50, 83, 116)
STEP_MS = 6.0


class Files(Dataset):
    """FILES files of 64 features; reading one waits READ_MS, or SLOW_MS for the ids in `slow` (large files)."""

    def __init__(self, slow: tuple[int, ...] = SLOW_FILES) -> None:
        if not isinstance(slow, tuple) or not all(isinstance(i, int) and 0 <= i < FILES for i in slow):
            raise ValueError(f"slow must be a tuple of file ids from 0 to {FILES - 1}, got {short(slow)}")
        self.slow = frozenset(slow)

    def __len__(self) -> int:
        return FILES

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep((SLOW_MS if int(i) in self.slow else READ_MS) / 1000)
        return torch.full((64,), float(i)), int(i)


def loader(in_order: bool = True, workers: int = 2) -> DataLoader:
    """The files in order, in batches of BATCH, read by `workers` workers; in_order=False hands over whichever batch is ready."""
    if not isinstance(in_order, bool):
        raise TypeError(f"in_order must be True or False, got {short(in_order)}")
    return DataLoader(Files(), batch_size=BATCH, num_workers=as_int("workers", workers, minimum=1), in_order=in_order)


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    """A training step's stand-in: STEP_MS of waiting, as for a GPU."""
    time.sleep(STEP_MS / 1000)
