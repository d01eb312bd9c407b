"""Memory of DataLoader worker processes: USS/PSS/RSS, to see copy-on-read growth that RSS hides (lesson 03)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psutil
from torch.utils.data import DataLoader

MIB = 1024 * 1024


@dataclass(frozen=True)
class MemorySample:
    """One process's memory in MiB: USS (only its own pages), PSS (shared pages split among sharers), RSS (all resident pages) (lesson 03)."""

    uss_mib: float
    pss_mib: float
    rss_mib: float


def process_memory(pid: int | None = None) -> MemorySample:
    """USS, PSS and RSS of process `pid` (this process when None), in MiB (lesson 03)."""
    info = psutil.Process(pid).memory_full_info()
    return MemorySample(uss_mib=info.uss / MIB, pss_mib=getattr(info, "pss", float("nan")) / MIB, rss_mib=info.rss / MIB)


@dataclass(frozen=True)
class WorkerMemory:
    """A loader worker's memory after its own first batch of the epoch (`start`) and after the epoch's last (`end`) (lesson 03)."""

    worker_id: int
    pid: int
    start: MemorySample
    end: MemorySample

    @property
    def uss_growth_mib(self) -> float:
        """How much the worker's own (unshared) memory grew during the epoch, in MiB."""
        return self.end.uss_mib - self.start.uss_mib

    def __str__(self) -> str:
        parts = [
            f"{name} {getattr(self.start, key):6.1f} -> {getattr(self.end, key):6.1f} MiB"
            for name, key in (("USS", "uss_mib"), ("PSS", "pss_mib"), ("RSS", "rss_mib"))
        ]
        return f"worker {self.worker_id} (pid {self.pid}): " + ", ".join(parts)


def worker_memory(loader: DataLoader) -> list[WorkerMemory]:
    """Run one epoch of `loader` and measure each worker after its own first batch and after the last, before the workers exit (lesson 03)."""
    if not isinstance(loader, DataLoader):
        raise TypeError(f"loader must be a torch.utils.data.DataLoader, got {type(loader).__name__}")
    if loader.num_workers < 1:
        raise ValueError(f"loader.num_workers must be at least 1 to have worker processes, got {loader.num_workers}")
    if not getattr(loader, "in_order", True):
        raise ValueError("loader.in_order must be True: worker_memory tells each worker's first batch by the order "
                         "batches come in (worker i's first is batch i), got in_order=False")
    try:
        num_batches = len(loader)  # stop before StopIteration: a finished non-persistent iterator ends its workers
    except TypeError:
        raise TypeError(f"loader must have a length (a map-style dataset, or an IterableDataset with __len__), got one over "
                        f"{type(loader.dataset).__name__}, which has none") from None
    if num_batches < 1:
        raise ValueError(f"loader must give at least one batch, got len(loader) == {num_batches}")
    iterator: Any = iter(loader)
    try:
        next(iterator)
        pids = [worker.pid for worker in iterator._workers]  # private: worker Processes by id (tests catch a rename)
        start = {0: process_memory(pids[0])}
        for index in range(1, num_batches):
            next(iterator)
            if index < len(pids):  # batches come from the workers in turn: this is worker `index`'s first (a worker
                start[index] = process_memory(pids[index])  # still starting when batch 0 came would count its start-up)
        end = [process_memory(pid) for pid in pids]
    finally:
        del iterator
    # a worker with no batch in a short epoch: start = end
    return [WorkerMemory(worker_id=i, pid=pid, start=start.get(i, e), end=e) for i, (pid, e) in enumerate(zip(pids, end))]
