"""A WeightedRandomSampler given one weight per class (2 weights for 2000 samples): it only ever draws indices 0 and 1.

Origin: modelled on the PyTorch forum threads on WeightedRandomSampler where `weight = 1. / class_sample_count` is
passed to the sampler directly instead of `samples_weight = weight[target]` (the mistake the forum's answers correct,
and the sampler's documentation, "weights for each sample", warns of). The dataset is sorted by class, as an
ImageFolder is, so both drawn samples are of class 0 and the batches hold one class.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

EXPECTED = frozenset({"class-weights-as-sample-weights", "unbalanced-batches"})
BUDGET_S = 5.0
FAST = True


def dataset() -> TensorDataset:
    """2000 samples of 16 features, 1800 of class 0 then 200 of class 1, with `targets`."""
    target = torch.as_tensor(np.r_[np.zeros(1800), np.ones(200)].astype(np.int64))
    data = TensorDataset(torch.randn(2000, 16, generator=torch.Generator().manual_seed(0)), target)
    data.targets = target
    return data


def make_loader() -> DataLoader:
    """The forum snippet: class weights straight into the sampler, num_samples = the dataset's length."""
    data = dataset()
    class_sample_count = torch.bincount(data.targets)
    weight = 1.0 / class_sample_count.double()
    sampler = WeightedRandomSampler(weight, num_samples=len(data), generator=torch.Generator().manual_seed(0))
    return DataLoader(data, batch_size=64, sampler=sampler)
