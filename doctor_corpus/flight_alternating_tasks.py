"""Multi-task training with a round-robin batch sampler (task A, task B, A, B, ...) and 2 workers: worker 1 gets every B batch.

Origin: modelled on the round-robin multi-task batch samplers of facebookresearch/pytext#439 (RoundRobinBatchSampler:
each batch from one task, the tasks taking turns), allenai/rslearn#213 ("Allow alternating dataset batches") and
lhotse-speech/lhotse#1481 (one dataset per batch, round robin). The DataLoader deals batches to workers in turn, so
with as many workers as tasks each worker always gets the same task. Task A (short captions) costs 3 ms an item, task
B (dense masks read from network storage) 15 ms, modelled by waits. Worker 1's samples, not the worker, are slow: the
same B items fetched in the main process take 15 ms too. With in_order at its default the loop waits on B batches
while A batches are ready; in_order=False lets both workers share the B batches (1.63-1.64x the samples/s in each
of 4 interleaved rounds of 40 batches, measured apart from the doctor), so head-of-line is expected as well.
BUDGET_S is 22, the doctor's own advice: its batches are slow (0.12 s), and in 15 s the in_order=False comparison had
4.2 s of the 6.0 s its 2 rounds need ("about --budget 22 would give it that", 3 runs of 3 beside a busy program).
"""
from __future__ import annotations

import time
from collections.abc import Iterator

import torch
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Sampler

EXPECTED = frozenset({"slow-worker", "head-of-line"})
EVIDENCE = {"slow-worker": {"worker": 1}}
BUDGET_S = 22.0
FAST = False
NEEDS = "multi-core"


class TaskItems(Dataset):
    """`n` items of one task, each costing `cost_s` to read and decode; 64 features and a label of 4 classes."""

    def __init__(self, n: int, cost_s: float, task: int) -> None:
        self.n, self.cost_s, self.task = n, cost_s, task

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> dict[str, torch.Tensor | int]:
        time.sleep(self.cost_s)
        return {"x": torch.full((64,), float(i)), "y": i % 4, "task": self.task}


class RoundRobinBatchSampler(Sampler[list[int]]):
    """Batches of one task each, the tasks taking turns; each task's items shuffled per pass (seeded)."""

    def __init__(self, sizes: list[int], batch_size: int, seed: int = 0) -> None:
        self.sizes, self.batch_size, self.seed, self.epoch = sizes, batch_size, seed, 0
        self.offsets = [sum(sizes[:k]) for k in range(len(sizes))]

    def __len__(self) -> int:
        return len(self.sizes) * min(size // self.batch_size for size in self.sizes)

    def __iter__(self) -> Iterator[list[int]]:
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        self.epoch += 1
        orders = [(torch.randperm(size, generator=generator) + offset).tolist()
                  for size, offset in zip(self.sizes, self.offsets)]
        for b in range(len(self) // len(self.sizes)):
            for order in orders:
                yield order[b * self.batch_size:(b + 1) * self.batch_size]


def make_loader() -> DataLoader:
    """Tasks A (2048 items, 3 ms each) and B (2048 items, 15 ms each), batches of 16 taking turns, 2 persistent workers."""
    tasks = [TaskItems(2048, 0.003, task=0), TaskItems(2048, 0.015, task=1)]
    sampler = RoundRobinBatchSampler([len(t) for t in tasks], batch_size=16)
    return DataLoader(ConcatDataset(tasks), batch_sampler=sampler, num_workers=2, persistent_workers=True)
