"""A small, seeded training loop for comparing rebalancing strategies on CPU (lesson 02)."""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler

from helpers._validate import as_int

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def small_mlp(num_features: int, num_classes: int, hidden: int = 32) -> nn.Module:
    """A two-layer perceptron: enough capacity for the synthetic tasks, trains in seconds (lesson 02)."""
    return nn.Sequential(nn.Linear(num_features, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))


def fit_classifier(
    dataset: Dataset,
    num_classes: int,
    loss_fn: LossFn,
    sampler: Sampler[int] | None = None,
    epochs: int = 3,
    batch_size: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
) -> nn.Module:
    """Train small_mlp with Adam on `dataset` (shuffled, or drawn by `sampler`) and return it (lesson 02)."""
    epochs = as_int("epochs", epochs, minimum=1)
    batch_size = as_int("batch_size", batch_size, minimum=1)
    torch.manual_seed(as_int("seed", seed, minimum=0))
    features, _ = dataset[0]
    model = small_mlp(features.numel(), as_int("num_classes", num_classes, minimum=2))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, shuffle=sampler is None, generator=generator)
    for epoch in range(epochs):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    return model


@torch.no_grad()
def predict(model: nn.Module, features: torch.Tensor) -> torch.Tensor:
    """The most likely class for each row of `features` (lesson 02)."""
    model.eval()
    return model(features).argmax(dim=1)
