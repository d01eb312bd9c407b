"""An HDF5 dataset that opens its h5py.File in __init__, read by 2 workers under the spawn start method.

Origin: modelled on the "TypeError: h5py objects cannot be pickled" reports (h5py/h5py#1512,
sgrvinod/a-PyTorch-Tutorial-to-Image-Captioning#119, ACEsuit/mace#117): spawn (macOS, Windows, and Python 3.14's
forkserver default) pickles the dataset into each worker, and an open File cannot be pickled.
"""
from __future__ import annotations

import h5py
import torch
from torch.utils.data import DataLoader, Dataset

from doctor_corpus import _data

EXPECTED = frozenset({"loader-error", "not-picklable"})
EVIDENCE = {"not-picklable": {"path": "loader.dataset.file", "start_method": "spawn"}}
FAST = True


class EagerH5(Dataset):
    """Opens the file once, in __init__, and keeps the handle."""

    def __init__(self, path: str) -> None:
        self.file = h5py.File(path, "r")
        self.images, self.labels = self.file["images"], self.file["labels"]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return torch.from_numpy(self.images[i]), int(self.labels[i])


def make_loader() -> DataLoader:
    """2 spawned workers over 2048 images."""
    return DataLoader(EagerH5(_data.hdf5_file()), batch_size=64, shuffle=True, num_workers=2, multiprocessing_context="spawn")
