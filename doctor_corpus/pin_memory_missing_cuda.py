"""A loader for a CUDA step without pin_memory: its non_blocking copies are synchronous.

Origin: modelled on the PyTorch "pin memory" tutorial (A guide on good usage of non_blocking and pin_memory() in PyTorch)
and the ImageNet example's `pin_memory=True`: here left out, with the batch copied by .to("cuda", non_blocking=True).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from doctor_corpus import _data

EXPECTED = frozenset({"pin-memory-missing"})
NEEDS = "cuda"
DEVICE = "cuda"
FAST = True
_weights: list[torch.Tensor] = []


def make_loader() -> DataLoader:
    """8192 x 1024 features, a worker per core, persistent, not pinned."""
    y = torch.arange(8192) % 4
    dataset = TensorDataset(torch.randn(8192, 1024, generator=torch.Generator().manual_seed(0)), y)
    return DataLoader(dataset, batch_size=256, shuffle=True, num_workers=_data.cores(), persistent_workers=True)


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """Copy the batch with non_blocking=True and run a few layers of matmuls on the GPU."""
    if not _weights:
        _weights.append(torch.randn(1024, 1024, device="cuda") / 32)
    out = batch[0].to("cuda", non_blocking=True)
    for _ in range(20):
        out = torch.tanh(out @ _weights[0])
    return out
