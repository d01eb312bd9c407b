"""Each worker connects to its own read replica in worker_init_fn; the second replica answers 3x slower than the first.

Origin: modelled on the per-worker connection pattern that torch.utils.data's worker_init_fn documentation describes
(configure each worker's copy of the dataset), as in facebookresearch/fairchem#171 (one LMDB connection per worker)
and pytorch/pytorch#71543 (workers that each open a database connection), with connections spread over read
replicas by worker id. That one replica is 3x slower (a replica on a busier host) is this case's assumption; each GET
is modelled by a wait (4 ms on replica "a" and in the main process, 12 ms on replica "b"). The worker, not its
samples, is slow: the same items fetched in the main process take 4 ms. With in_order left at True the loop also
waits on replica b's batches while replica a's are ready, and in_order=False lets worker 0 take more batches
(1.92x the samples/s in each of 4 interleaved rounds of 40 batches, measured apart from the doctor), so head-of-line is expected too.
"""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader, Dataset, get_worker_info

EXPECTED = frozenset({"slow-worker", "head-of-line"})
EVIDENCE = {"slow-worker": {"worker": 1}}
BUDGET_S = 15.0
FAST = False
NEEDS = "multi-core"

REPLICA_LATENCY_S = {"primary": 0.004, "replica-a": 0.004, "replica-b": 0.012}
REPLICAS = ("replica-a", "replica-b")


class KeyValueImages(Dataset):
    """`n` records behind a key-value store; each GET waits for the connected replica's latency (`latency_s`, seconds)."""

    def __init__(self, n: int = 4096, latency_s: dict[str, float] | None = None) -> None:
        self.n, self.latency_s = n, latency_s or REPLICA_LATENCY_S
        self.replica = "primary"  # the main process's connection

    def connect(self, replica: str) -> None:
        self.replica = replica

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.latency_s[self.replica])
        return torch.full((64,), float(i)), i % 4


def connect_to_replica(worker_id: int) -> None:
    """worker_init_fn: worker k reads from replica k (round robin over the replicas)."""
    get_worker_info().dataset.connect(REPLICAS[worker_id % len(REPLICAS)])


def make_loader() -> DataLoader:
    """2 persistent workers, one per replica, batches of 16, in_order at its default (True)."""
    return DataLoader(KeyValueImages(), batch_size=16, shuffle=True, num_workers=2, worker_init_fn=connect_to_replica,
                      persistent_workers=True)
