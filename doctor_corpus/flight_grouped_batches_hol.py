"""Detection-style batches grouped by aspect ratio: a quarter of the batches are high-resolution scans, 6x slower an item.

Origin: modelled on torchvision's detection reference (references/detection/group_by_aspect_ratio.py,
GroupedBatchSampler: every batch drawn from one aspect-ratio group) with its tuple collate_fn (utils.collate_fn,
images kept as a list), and on pytorch/pytorch#78798 and the motivation of pytorch/pytorch#141833 (a slow batch holds
up faster ones that are already loaded; in_order=False added for it). Here one group (portrait scans, a quarter of
the images) costs 18 ms an image to read and decode against 3 ms for the rest, modelled by waits. The slow batches
come in random turns, so both workers get their share (equal medians: no slow worker), and slow images are a quarter
of all, not a few (no slow samples). The loop waits on a worker's slow batch while the other's is ready, and
in_order=False gives more samples/s (1.20-1.23x in each of 4 interleaved rounds of 40 batches, measured apart
from the doctor), so head-of-line is expected. The gain of a few batches depends on where the slow ones fall (rounds of
9-12 batches a turn gave 0.82-1.49x), so the doctor's turns hold 4 slow batches each (16 here); BUDGET_S is 23, the
doctor's own advice: in 15 s its 2 rounds had 3.6 s of the 5.4 s they need (3 runs of 3 beside a busy program).
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler

EXPECTED = frozenset({"head-of-line"})
BUDGET_S = 23.0
FAST = False
NEEDS = "multi-core"

COST_S = (0.003, 0.018)  # per image: landscape photos, portrait high-resolution scans


class DetectionImages(Dataset):
    """4096 images, a quarter of them (seeded) in the portrait group; each returns a small image tensor and its target."""

    def __init__(self, n: int = 4096, seed: int = 0) -> None:
        rng = np.random.default_rng(seed)
        self.group = (rng.random(n) < 0.25).astype(np.int8)

    def __len__(self) -> int:
        return len(self.group)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        group = int(self.group[i])
        time.sleep(COST_S[group])
        shape = (3, 24, 16) if group else (3, 16, 24)
        return torch.full(shape, float(i)), {"labels": torch.tensor([i % 4]), "boxes": torch.tensor([[0.0, 0.0, 8.0, 8.0]])}


class GroupedBatchSampler(Sampler[list[int]]):
    """torchvision's GroupedBatchSampler in small: shuffled indices, buffered per group, a batch yielded when a group's
    buffer is full (leftovers dropped)."""

    def __init__(self, groups: np.ndarray, batch_size: int, seed: int = 0) -> None:
        self.groups, self.batch_size, self.seed, self.epoch = groups, batch_size, seed, 0

    def __len__(self) -> int:
        return sum(int((self.groups == g).sum()) // self.batch_size for g in np.unique(self.groups))

    def __iter__(self) -> Iterator[list[int]]:
        order = torch.randperm(len(self.groups), generator=torch.Generator().manual_seed(self.seed + self.epoch)).tolist()
        self.epoch += 1
        buffers: dict[int, list[int]] = {}
        for i in order:
            buffer = buffers.setdefault(int(self.groups[i]), [])
            buffer.append(i)
            if len(buffer) == self.batch_size:
                yield list(buffer)
                buffer.clear()


def collate_fn(batch: list) -> tuple:
    """The detection reference's collate: a tuple of lists (images of different shapes are not stacked)."""
    return tuple(zip(*batch))


def make_loader() -> DataLoader:
    """Batches of 16 from one aspect-ratio group each, 2 persistent workers, in_order at its default (True)."""
    dataset = DetectionImages()
    return DataLoader(dataset, batch_sampler=GroupedBatchSampler(dataset.group, batch_size=16), num_workers=2,
                      collate_fn=collate_fn, persistent_workers=True)
