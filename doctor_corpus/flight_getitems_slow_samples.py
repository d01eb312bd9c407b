"""The huge-images dataset fetched a batch at a time through __getitems__, as Hugging Face datasets do.

Origin: modelled on huggingface/datasets#5512 ("Speed up batched PyTorch DataLoader": Dataset.__getitems__, so the
DataLoader asks for a batch of rows in one call; the fix for huggingface/datasets#5505) and pyg-team/pytorch_geometric#8632
(OnDiskDataset.__getitems__). The 31 huge files of flight_huge_images_slow_samples are still there, but a worker fetches
32 rows in one call, so no per-sample time exists to judge: slow-samples must stay silent (the contract: a note, not a
finding). The batches are read by both workers alike. in_order stays at its default; measured apart from the doctor,
in_order=False gave a median 1.07x the samples/s (1.01-1.17x over 8 interleaved rounds of 60 batches), under
head-of-line's 1.15x: head-of-line is not expected. Healthy for the flight rules.
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader

from doctor_corpus.flight_huge_images_slow_samples import ScrapedImages

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 15.0
FAST = False
NEEDS = "multi-core"


class BatchedScrapedImages(ScrapedImages):
    """The same files read by one call per batch (the rows' reads in one go)."""

    def __getitems__(self, indices: list[int]) -> list[tuple[torch.Tensor, int]]:
        time.sleep(sum(self.read_s(i) for i in indices))
        return [(torch.full((3, 32, 32), float(i % 255)), i % 4) for i in indices]


def make_loader() -> DataLoader:
    """2 persistent workers, batches of 32, shuffled, in_order at its default (True)."""
    return DataLoader(BatchedScrapedImages(), batch_size=32, shuffle=True, num_workers=2, persistent_workers=True)
