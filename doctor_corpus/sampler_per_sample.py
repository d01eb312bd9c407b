"""A per-sample WeightedRandomSampler with replacement over a 90/10 dataset: batches come about 50/50.

Origin: modelled on the accepted PyTorch forum answer for imbalanced classes (`samples_weight = weight[target]`,
`WeightedRandomSampler(samples_weight, len(samples_weight))`), as lesson 02 teaches it.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, WeightedRandomSampler

from doctor_corpus.sampler_class_weights import dataset

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 5.0
FAST = True


def make_loader() -> DataLoader:
    """Per-sample weights 1/count[target], with replacement, num_samples = the dataset's length."""
    data = dataset()
    samples_weight = (1.0 / torch.bincount(data.targets).double())[data.targets]
    sampler = WeightedRandomSampler(samples_weight, len(samples_weight), generator=torch.Generator().manual_seed(0))
    return DataLoader(data, batch_size=64, sampler=sampler)
