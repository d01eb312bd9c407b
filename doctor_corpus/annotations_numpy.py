"""The same COCO-style annotations stored as numpy arrays (the fix pytorch#13246 settled on): nothing to copy on read.

Origin: modelled on the fix given in pytorch/pytorch#13246 (keep the annotations in numpy arrays, not Python lists of
objects), as detectron2's DatasetFromList(serialize=True) does with one byte buffer.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from doctor_corpus.annotations_list_of_dicts import annotations

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 8.0
FAST = True


class ArrayAnnotations(Dataset):
    """Boxes and polygons as one float32 array (n x 12), categories as int64 (n,)."""

    def __init__(self, rows: list[dict]) -> None:
        self.geometry = np.array([row["bbox"] + row["segmentation"][0] for row in rows], dtype=np.float32)
        self.categories = np.array([row["category_id"] for row in rows], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.from_numpy(self.geometry[i]), int(self.categories[i])


def make_loader() -> DataLoader:
    """2 forked workers, shuffled, persistent."""
    return DataLoader(ArrayAnnotations(annotations()), batch_size=64, shuffle=True, num_workers=2, persistent_workers=True)
