"""A timm-style training loader with 16 workers (persistent, as timm's create_loader sets) on a small machine.

Origin: modelled on timm's create_loader (timm/data/loader.py: persistent_workers=True, pin_memory from --pin-mem)
driven by a training command copied from a GPU server (`train.py -j 16`); on 2 cores that is 17 processes.
Under forkserver the 16 workers each import torch anew: on the 2-core VM the first batch came after 12.1 s, so with
the default budget the doctor stops waiting at its own bound (torch's per-fetch timeout starts again with each batch
that arrives out of turn) and says the workers were still starting; by fork the whole diagnosis takes under 3 s.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from doctor_corpus import _data

EXPECTED = frozenset({"workers-oversubscribed"})
NEEDS = "few-cores"
FAST = True


class Augmented(Dataset):
    """uint8 images with a timm-like random crop, flip and normalize (mean/std of ImageNet)."""

    def __init__(self) -> None:
        self.images, self.targets = _data.images(2048, classes=10, size=40)

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        dy, dx = torch.randint(0, 9, (2,)).tolist()
        x = torch.from_numpy(np.ascontiguousarray(self.images[i][:, dy:dy + 32, dx:dx + 32])).float().div_(255)
        if torch.rand(()) < 0.5:
            x = x.flip(2)
        return (x - 0.45) / 0.226, int(self.targets[i])


def make_loader() -> DataLoader:
    """16 persistent workers, no pinning (timm's default without --pin-mem)."""
    return DataLoader(Augmented(), batch_size=64, shuffle=True, num_workers=16, persistent_workers=True, drop_last=True)
