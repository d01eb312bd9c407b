"""The same HDF5 dataset opening its file lazily, once per worker, under spawn with persistent workers.

Origin: modelled on the fix in ACEsuit/mace#117 and qiuqiao/SOFA#18 (open the h5py.File on first access in the worker,
keep only the path in __init__), the pattern the PyTorch forum's HDF5 threads recommend.
"""
from __future__ import annotations

import h5py
import torch
from torch.utils.data import DataLoader, Dataset

from doctor_corpus import _data

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 15.0
FAST = False


class LazyH5(Dataset):
    """Keeps the path and the length; each worker opens the file on its first item."""

    def __init__(self, path: str) -> None:
        self.path, self.file = path, None
        with h5py.File(path, "r") as f:
            self.length = len(f["labels"])

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        if self.file is None:
            self.file = h5py.File(self.path, "r")
        return torch.from_numpy(self.file["images"][i]), int(self.file["labels"][i])


def make_loader() -> DataLoader:
    """2 spawned, persistent workers over 2048 images."""
    return DataLoader(LazyH5(_data.hdf5_file()), batch_size=64, shuffle=True, num_workers=2, multiprocessing_context="spawn",
                      persistent_workers=True)
