"""A ZCA-whitening transform (a numpy matmul per image) in 2 workers, each on OpenBLAS's default one thread per core.

Origin: modelled on ContinuumIO/anaconda-issues#593 ("OpenBLAS uses all cores in every process") and the DataLoader
thread reports pytorch/pytorch#22535 and rasmushaugaard/surfemb#33 (OMP_NUM_THREADS=1 in workers): DataLoader sets
torch's threads to 1 in a worker, not numpy's BLAS, so 2 workers x one BLAS thread per core oversubscribe the cores.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from doctor_corpus import _data

EXPECTED = frozenset({"threads-oversubscribed"})
NEEDS = "blas-threads"
FAST = False  # make bench runs every case; make test runs a shorter subset
BUDGET_S = 20.0  # the comparison with one thread per worker takes a few seconds after the first pass


class Whitened(Dataset):
    """Images as 16 patches of 768 values each, whitened by a fixed 768x768 matrix (float64 numpy: OpenBLAS dgemm)."""

    def __init__(self, n: int = 1024) -> None:
        rng = np.random.default_rng(0)
        self.images, self.targets = _data.images(n, classes=4, size=64)
        basis = rng.standard_normal((768, 768))
        self.zca = basis @ basis.T / 768

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        patches = self.images[i].reshape(16, 768).astype(np.float64) / 255
        return torch.from_numpy((patches @ self.zca).astype(np.float32)), int(self.targets[i])


def make_loader() -> DataLoader:
    """2 workers, persistent, batches of 16."""
    return DataLoader(Whitened(), batch_size=16, shuffle=True, num_workers=2, persistent_workers=True,
                      pin_memory=torch.cuda.is_available())
