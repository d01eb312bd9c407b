"""A speech corpus whose clips vary in length (lognormal, sigma 1): item times vary widely, but both workers alike.

Origin: modelled on torchaudio's dataset pattern (e.g. torchaudio.datasets.LIBRISPEECH / COMMONVOICE: each item loads
one whole audio file, so its time grows with the clip's duration) and the clip-duration spread of such corpora;
utterance lengths are close to lognormal. The read is modelled by a wait of 4 ms x a lognormal factor (sigma 1,
seeded per clip), then a fixed-size feature vector (a pooled log-mel) is returned. Items over 10x the median are
about 1% of the clips and about 10% of the read time (under the 25% slow-samples asks); both workers draw from the
same distribution (equal medians), and batches of 16 vary little (in_order=False gave a median 1.04x over 8 interleaved rounds
of 60 batches, measured apart from the doctor). Healthy: none of the flight rules should fire.
"""
from __future__ import annotations

import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 15.0
FAST = False
NEEDS = "multi-core"

MEDIAN_S, SIGMA = 0.004, 1.0


class SpeechClips(Dataset):
    """4096 clips; clip i's read time is MEDIAN_S x lognormal(0, SIGMA), fixed per clip (seeded)."""

    def __init__(self, n: int = 4096, seed: int = 0) -> None:
        self.read_s = MEDIAN_S * np.random.default_rng(seed).lognormal(0.0, SIGMA, n)

    def __len__(self) -> int:
        return len(self.read_s)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(float(self.read_s[i]))
        return torch.full((40,), float(self.read_s[i])), i % 4


def make_loader() -> DataLoader:
    """2 persistent workers, batches of 16, shuffled."""
    return DataLoader(SpeechClips(), batch_size=16, shuffle=True, num_workers=2, persistent_workers=True)
