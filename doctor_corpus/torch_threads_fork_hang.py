"""The same worker_init_fn (torch.set_num_threads(cores)) in 2 forked workers: the first multi-threaded matmul never returns.

Origin: modelled on pytorch/pytorch#1355 ("possible deadlock in dataloader": libraries that are not fork-safe, fixed by
the spawn start method) and pytorch/pytorch#54752 (set_num_threads and DataLoader workers crashing); found while
writing torch_threads_worker_init: on this torch 2.13 CPU build a forked worker that raises its intra-op threads hangs
in its first matmul (a 1-worker loader with timeout=10 timed out, spawn did not).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from doctor_corpus.torch_threads_worker_init import Projected, worker_init

EXPECTED = frozenset({"loader-error"})
NEEDS = "multi-core"
BUDGET_S = 5.0
FAST = False  # make bench runs every case; make test runs a shorter subset


def make_loader() -> DataLoader:
    """2 forked workers, each set to one thread per core."""
    return DataLoader(Projected(), batch_size=16, shuffle=True, num_workers=2, worker_init_fn=worker_init,
                      pin_memory=torch.cuda.is_available())
