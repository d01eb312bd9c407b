"""Tokenized sentences of different lengths, as dicts, batched by the default collate: torch.stack refuses them.

Origin: modelled on the PyTorch forum and HuggingFace forum threads on "RuntimeError: stack expects each tensor to be
equal size, but got [12] at entry 0 and [17] at entry 1" (pre-tokenized `input_ids` without padding, batched with
DataLoader's default_collate instead of a padding collator).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

EXPECTED = frozenset({"loader-error"})
FAST = True


class Tokenized(Dataset):
    """{"input_ids": 5 to 40 token ids, "labels": 0/1}: a pre-tokenized sentiment set, seeded."""

    def __init__(self, n: int = 2048) -> None:
        generator = torch.Generator().manual_seed(0)
        lengths = torch.randint(5, 41, (n,), generator=generator)
        self.rows = [torch.randint(1, 30_000, (int(k),), generator=generator) for k in lengths]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor | int]:
        return {"input_ids": self.rows[i], "labels": i % 2}


def make_loader() -> DataLoader:
    """Batches of 32 with the default collate."""
    return DataLoader(Tokenized(), batch_size=32, shuffle=True)
