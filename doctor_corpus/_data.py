"""Data the corpus cases share, generated on first use with a fixed seed into one temp folder that is removed at exit."""
from __future__ import annotations

import atexit
import io
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from helpers.env import usable_cpus

PREFIX = "doctor-corpus-"  # tools/doctor_bench.py looks for leftovers by this prefix
_workdir: Path | None = None
_made: dict[tuple, object] = {}


def workdir() -> Path:
    """This process's temp folder for the corpus files (made on first use, removed at exit)."""
    global _workdir
    if _workdir is None:
        _workdir = Path(tempfile.mkdtemp(prefix=PREFIX))
        atexit.register(_remove, _workdir, os.getpid())
    return _workdir


def _remove(folder: Path, owner: int) -> None:
    """Remove `folder`, only in the process that made it (a forked worker inherits the path, not the ownership)."""
    if os.getpid() == owner:
        shutil.rmtree(folder, ignore_errors=True)


def cleanup() -> None:
    """Remove the temp folder now and forget what was made in it."""
    global _workdir
    if _workdir is not None:
        _remove(_workdir, os.getpid())
    _workdir = None
    _made.clear()


def cores() -> int:
    """Workers for a healthy loader: one per usable core (the doctor's rule)."""
    return usable_cpus()


def jpeg_folder(name: str, classes: int = 4, per_class: int = 150, size: int = 128, truncate: int | None = None) -> Path:
    """An ImageFolder tree root/class_k/img_nnnn.jpg of smooth noisy JPEGs; `truncate` cuts that sample's file in half."""
    key = ("jpeg", name, classes, per_class, size, truncate)
    if key not in _made:
        root = workdir() / name
        rng = np.random.default_rng(0)
        ramp = np.linspace(0, 200, size * size * 3).reshape(size, size, 3)
        for index in range(classes * per_class):
            folder = root / f"class_{index // per_class}"
            folder.mkdir(parents=True, exist_ok=True)
            pixels = (ramp + rng.integers(0, 55, ramp.shape)).astype(np.uint8)
            buffer = io.BytesIO()
            Image.fromarray(pixels).save(buffer, "JPEG", quality=85)
            data = buffer.getvalue()
            (folder / f"img_{index:04d}.jpg").write_bytes(data[: len(data) // 2] if index == truncate else data)
        _made[key] = root
    return _made[key]  # type: ignore[return-value]


def imagenet_transform(image: Image.Image, size: int = 64) -> torch.Tensor:
    """The ImageNet example's training transforms in small: resize, random horizontal flip, to tensor, normalize."""
    image = image.resize((size, size), Image.BILINEAR)
    if torch.rand(()) < 0.5:
        image = image.transpose(Image.FLIP_LEFT_RIGHT)
    x = torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1).float().div_(255)
    return (x - 0.45) / 0.225


class ImageFolder(Dataset):
    """torchvision.datasets.ImageFolder in small: classes from sorted folder names, samples as (path, class) tuples."""

    def __init__(self, root: Path, transform=imagenet_transform) -> None:
        self.classes = sorted(p.name for p in Path(root).iterdir() if p.is_dir())
        self.samples = [(str(f), k) for k, c in enumerate(self.classes) for f in sorted((Path(root) / c).glob("*.jpg"))]
        self.targets = [k for _, k in self.samples]
        self.transform = transform

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path, target = self.samples[index]
        with open(path, "rb") as f:
            image = Image.open(f).convert("RGB")  # torchvision's pil_loader
        return self.transform(image), target


def shards(count: int = 4, per_shard: int = 128) -> list[str]:
    """WebDataset tar shards of {"__key__", "input.npy" (3x16x16 float32), "cls" (index % 4)}, written with wds.TarWriter."""
    key = ("shards", count, per_shard)
    if key not in _made:
        import webdataset as wds

        rng = np.random.default_rng(0)
        urls = []
        for shard in range(count):
            url = str(workdir() / f"train-{shard:06d}.tar")
            with wds.TarWriter(url) as sink:
                for i in range(shard * per_shard, (shard + 1) * per_shard):
                    sink.write({"__key__": f"{i:06d}", "input.npy": rng.standard_normal((3, 16, 16), dtype=np.float32),
                                "cls": i % 4})
            urls.append(url)
        _made[key] = urls
    return list(_made[key])  # type: ignore[arg-type]


def hdf5_file(n: int = 2048) -> str:
    """An HDF5 file with "images" (n x 3 x 32 x 32 uint8) and "labels" (n, index % 10)."""
    key = ("hdf5", n)
    if key not in _made:
        import h5py

        path = str(workdir() / f"train-{n}.h5")
        rng = np.random.default_rng(0)
        with h5py.File(path, "w") as f:
            f["images"] = rng.integers(0, 256, (n, 3, 32, 32), dtype=np.uint8)
            f["labels"] = np.arange(n) % 10
        _made[key] = path
    return _made[key]  # type: ignore[return-value]


def images(n: int, classes: int, size: int = 32, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """In-memory uint8 images (n x 3 x size x size) and balanced, shuffled labels (n,)."""
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(n) % classes)
    return rng.integers(0, 256, (n, 3, size, size), dtype=np.uint8), labels.astype(np.int64)
