"""COCO-style annotations kept as a Python list of 50,000 dicts, read at random by 2 forked workers.

Origin: modelled on pytorch/pytorch#13246 ("DataLoader num_workers > 0 causes CPU memory from parent process to be
replicated in all worker processes": a dataset holding a list of Python objects; reading an item writes its reference
counts, so each forked worker copies the pages it touches).
"""
from __future__ import annotations

import random

import torch
from torch.utils.data import DataLoader, Dataset

EXPECTED = frozenset({"copy-on-read"})
BUDGET_S = 8.0
FAST = False  # make bench runs every case; make test runs a shorter subset
N = 50_000


def annotations(n: int = N) -> list[dict]:
    """COCO-like instance annotations: id, image_id, category_id (10 classes, balanced), bbox, area, segmentation."""
    rng = random.Random(0)
    rows = []
    for i in range(n):
        x, y, w, h = (rng.uniform(0, 600) for _ in range(4))
        rows.append({"id": i, "image_id": i // 3, "category_id": i % 10, "bbox": [x, y, w, h], "area": w * h, "iscrowd": 0,
                     "segmentation": [[x, y, x + w, y, x + w, y + h, x, y + h]]})
    return rows


class Annotations(Dataset):
    """Each item: the box and polygon as one tensor, and the category."""

    def __init__(self, rows: list[dict]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        row = self.rows[i]
        return torch.tensor(row["bbox"] + row["segmentation"][0]), row["category_id"]


def make_loader() -> DataLoader:
    """2 forked workers, shuffled, persistent."""
    return DataLoader(Annotations(annotations()), batch_size=64, shuffle=True, num_workers=2, persistent_workers=True)
