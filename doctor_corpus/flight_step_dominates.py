"""The read-replica loader with a slower second replica, under a training step (50 ms) that outlasts every batch.

Origin: modelled on the same per-worker connection pattern as flight_replica_slow_worker (worker_init_fn connecting
each worker to a replica, as in facebookresearch/fairchem#171), trained with a step that dominates, as in the PyTorch
ImageNet example (pytorch/examples imagenet/main.py) with a large model: the step is modelled by a 50 ms wait (a GPU
step leaves the CPU free). Worker 1's replica is 3.3x slower (2 ms an item against 0.6 ms, batches of 8: 16 ms against
5 ms), but both are far under the step, so the loop never waits for data: the slow worker costs nothing, and
slow-worker and head-of-line must stay silent (as must input-bound).
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader

from doctor_corpus.flight_replica_slow_worker import KeyValueImages, connect_to_replica

EXPECTED: frozenset[str] = frozenset()
BUDGET_S = 15.0
FAST = False
NEEDS = "multi-core"

REPLICA_LATENCY_S = {"primary": 0.0006, "replica-a": 0.0006, "replica-b": 0.002}


def make_loader() -> DataLoader:
    """2 persistent workers, one per replica, batches of 8."""
    return DataLoader(KeyValueImages(latency_s=REPLICA_LATENCY_S), batch_size=8, shuffle=True, num_workers=2,
                      worker_init_fn=connect_to_replica, persistent_workers=True)


def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
    """A GPU step of 50 ms, modelled by waiting."""
    time.sleep(0.05)
