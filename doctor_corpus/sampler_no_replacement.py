"""A per-sample WeightedRandomSampler with replacement=False over a full epoch: every sample once, the 90/10 mix kept.

Origin: modelled on the PyTorch forum threads asking why WeightedRandomSampler(..., replacement=False) "does not
balance" (drawing all samples without replacement only reorders them), with the per-sample weights done right.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, WeightedRandomSampler

from doctor_corpus.sampler_class_weights import dataset

EXPECTED = frozenset({"no-replacement-weights", "unbalanced-batches"})
BUDGET_S = 5.0
FAST = False  # make bench runs every case; make test runs a shorter subset


def make_loader() -> DataLoader:
    """Per-sample weights 1/count[target], replacement=False, num_samples = the dataset's length."""
    data = dataset()
    samples_weight = (1.0 / torch.bincount(data.targets).double())[data.targets]
    sampler = WeightedRandomSampler(samples_weight, num_samples=len(data), replacement=False,
                                    generator=torch.Generator().manual_seed(0))
    return DataLoader(data, batch_size=64, sampler=sampler)
