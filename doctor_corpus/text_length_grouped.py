"""The padded sentences again, batched by length groups: the healthy look-alike of padding-waste.

Origin: modelled on transformers' LengthGroupedSampler (`TrainingArguments(group_by_length=True)`): a random
permutation cut into megabatches of 50 batches, each megabatch sorted by length, longest first, then cut into batches.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Sampler

from doctor_corpus.text_default_collate import Tokenized
from doctor_corpus.text_padding_collate import pad_collate

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 5.0
FAST = True


class LengthGrouped(Sampler[int]):
    """Indices in megabatches of 50 x batch_size, each sorted by length (longest first), as transformers does."""

    def __init__(self, lengths: list[int], batch_size: int, seed: int = 0) -> None:
        self.lengths, self.megabatch, self.seed = lengths, 50 * batch_size, seed

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self):
        order = torch.randperm(len(self.lengths), generator=torch.Generator().manual_seed(self.seed)).tolist()
        for start in range(0, len(order), self.megabatch):
            yield from sorted(order[start:start + self.megabatch], key=lambda i: -self.lengths[i])


def make_loader() -> DataLoader:
    """Batches of 32 from length-sorted megabatches, padded by the same collate."""
    data = Tokenized()
    return DataLoader(data, batch_size=32, sampler=LengthGrouped([len(r) for r in data.rows], 32),
                      collate_fn=pad_collate)
