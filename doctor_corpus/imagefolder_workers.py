"""The same ImageFolder JPEG pipeline read by one worker per core, persistent, under a step that outlasts decoding.

Origin: modelled on the PyTorch ImageNet example (pytorch/examples imagenet/main.py) with `--workers` set to the
cores and persistent_workers=True, as the PyTorch performance tuning guide advises; the step sleeps to model a GPU step.
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader

from doctor_corpus import _data

EXPECTED: frozenset[str] = frozenset()
FAST = False  # make bench runs every case; make test runs a shorter subset


def make_loader() -> DataLoader:
    """A worker per usable core, persistent, pin_memory only where CUDA is."""
    dataset = _data.ImageFolder(_data.jpeg_folder("imagefolder", per_class=150))
    return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=_data.cores(), persistent_workers=True,
                      pin_memory=torch.cuda.is_available())


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    """A GPU step of 40 ms, modelled by waiting (the CPU is free meanwhile, as it is while a GPU computes)."""
    time.sleep(0.04)
