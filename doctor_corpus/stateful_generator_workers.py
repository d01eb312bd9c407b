"""The same StatefulDataLoader(shuffle=True) with a seeded generator, with 2 workers: resumed, it repeats the uninterrupted run.

Origin: modelled on torchdata's StatefulDataLoader tutorial (StatefulDataLoader(dataset, num_workers=2), state_dict mid-epoch,
load_state_dict in the next run) and lesson 09's measurement with the pinned torchdata 0.11 (identical with 2 workers).
Under forkserver the doctor measured 0.73 s of worker start-up against an epoch of 0.78 s (each worker imports torch
anew): startup-cost is expected there too.
"""
from __future__ import annotations

import torch
from torchdata.stateful_dataloader import StatefulDataLoader

EXPECTED: frozenset[str] = frozenset()
WITHOUT_FORK = frozenset({"startup-cost"})
FAST = True
RESUME = True
BUDGET_S = 12.0


def make_loader() -> StatefulDataLoader:
    """240 indices, shuffle=True from a generator seeded with 0, batches of 8, 2 workers."""
    return StatefulDataLoader(range(240), batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0), num_workers=2)
