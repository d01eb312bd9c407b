"""A web-scraped image dataset in which 1.5% of the files are huge (40x the read time of a typical one).

Origin: modelled on pytorch/vision#81 (an image list dataset where "some images take 0.001 second while others take
10 second", every N-th batch stalling) and YijinHuang/pytorch-DR#1 (a few very large fundus photographs making
preprocessing slow); web-scraped image sets mix small images with the occasional multi-megapixel original. Reads
are modelled by waits: 4 ms a typical file, 160 ms one of the 31 huge files (seeded positions). The slowness belongs
to the samples (it is the same in the main process), they are under 5% of the items, each 40x the median, and
together about 38% of the read time: slow-samples is expected. They fall on both workers alike (no slow worker).
in_order stays at its default; measured apart from the doctor, in_order=False gave a median 1.02x the samples/s
(0.99-1.13x over 8 interleaved rounds of 60 batches), under head-of-line's 1.15x: head-of-line is not expected.
"""
from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

EXPECTED = frozenset({"slow-samples"})
BUDGET_S = 15.0
FAST = False
NEEDS = "multi-core"

TYPICAL_S, HUGE_S = 0.004, 0.160


class ScrapedImages(Dataset):
    """`n` images, `huge_share` of them (seeded) huge; each read waits for its file, then returns a 3x32x32 tensor
    (after the resize every file gets) and a label of 4 classes."""

    def __init__(self, n: int = 2048, huge_share: float = 0.015, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.huge = np.zeros(n, dtype=bool)
        self.huge[rng.choice(n, size=round(huge_share * n), replace=False)] = True

    def __len__(self) -> int:
        return len(self.huge)

    def read_s(self, i: int) -> float:
        return HUGE_S if self.huge[i] else TYPICAL_S

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.read_s(i))
        return torch.full((3, 32, 32), float(i % 255)), i % 4


def make_loader() -> DataLoader:
    """2 persistent workers, batches of 32, shuffled, in_order at its default (True)."""
    return DataLoader(ScrapedImages(), batch_size=32, shuffle=True, num_workers=2, persistent_workers=True)
