"""Items fetched from slow remote storage (35 ms each) with num_workers=0: one batch of 32 takes over a second.

Origin: modelled on the "GPU idle, data loading slow" reports for datasets on network or object storage read without
workers (e.g. IntelLabs/distiller#202, YijinHuang/pytorch-DR#1, whose fix was num_workers); the remote read is
modelled by a wait. More workers overlap the waits, but a batch takes > 1 s, so the doctor needs a long budget.
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset

EXPECTED = frozenset({"workers-too-few"})
BUDGET_S = 30.0
FAST = False
NEEDS = "multi-core"


class RemoteObjects(Dataset):
    """Each item waits 35 ms (a GET from object storage), then returns 64 features and a label of 4 classes."""

    def __len__(self) -> int:
        return 1024

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.035)
        return torch.full((64,), float(i)), i % 4


def make_loader() -> DataLoader:
    """Batches of 32 (1.1 s each), no workers."""
    return DataLoader(RemoteObjects(), batch_size=32, shuffle=True)
