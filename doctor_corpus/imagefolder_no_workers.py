"""ImageFolder of JPEGs (PIL decode, resize, flip, to-tensor, normalize) read with num_workers=0 and a light step.

Origin: modelled on the PyTorch ImageNet example (pytorch/examples imagenet/main.py: datasets.ImageFolder with
RandomResizedCrop/ToTensor/Normalize) run with `--workers 0`, the setting many tutorials and debugging sessions
use. Decoding is CPU work in the main process: the step waits for it, and 2 workers would decode in parallel.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from doctor_corpus import _data

EXPECTED = frozenset({"workers-too-few", "input-bound"})
BUDGET_S = 10.0
FAST = False
NEEDS = "multi-core"
_weight = torch.randn(3 * 64 * 64, 10, generator=torch.Generator().manual_seed(0))


def make_loader() -> DataLoader:
    """The example's train loader with workers=0 (pin_memory only where CUDA is)."""
    dataset = _data.ImageFolder(_data.jpeg_folder("imagefolder", per_class=150))
    return DataLoader(dataset, batch_size=32, shuffle=True, num_workers=0, pin_memory=torch.cuda.is_available())


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    """A linear classifier's forward pass: a small matmul, far cheaper than decoding 32 JPEGs."""
    return batch[0].flatten(1) @ _weight
