"""StatefulDataLoader(shuffle=True) with a seeded generator and no workers, resumed at the epoch boundary: another order next epoch.

Origin: modelled on huggingface/accelerate#4195 (a resumed run's order differs from the uninterrupted one) and lesson 09's
measurement with the pinned torchdata 0.11: the state restores the generator to where the saved epoch's permutation
began, not the base-seed draw after it, so the next epoch's permutation is drawn one draw early. Same samples, other order.
"""
from __future__ import annotations

import torch
from torchdata.stateful_dataloader import StatefulDataLoader

EXPECTED: frozenset[str] = frozenset({"resume-mismatch"})
EVIDENCE = {"resume-mismatch": {"lost": [0, 0], "extra": [0, 0]}}
EXIT = 0  # a warning: every epoch still holds each sample once
FAST = True
RESUME = True


def make_loader() -> StatefulDataLoader:
    """240 indices, shuffle=True from a generator seeded with 0, batches of 8."""
    return StatefulDataLoader(range(240), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
