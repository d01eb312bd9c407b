"""`make bench`: lesson 03's headline loader effects measured side by side; exits 1 when one misses its target."""
from __future__ import annotations

import multiprocessing
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from helpers.env import usable_cpus  # noqa: E402
from helpers.loading import benchmark_loader, parallel_speedup, sweep_loader  # noqa: E402
from helpers.memory import worker_memory  # noqa: E402
from helpers.workloads import (  # noqa: E402
    ArrayBackedDataset,
    BatchedInMemoryDataset,
    InMemoryDataset,
    ListBackedDataset,
    SlowDataset,
    collate_stacked,
)


@dataclass(frozen=True)
class Result:
    """One effect: the baseline and improved measurements, their ratio (improved over baseline) and the target."""

    effect: str
    baseline: str
    improved: str
    ratio: float
    target: float
    note: str = ""

    @property
    def ok(self) -> bool:
        """Whether the ratio reaches the target."""
        return self.ratio >= self.target


def best_rates(dataset: Dataset, workers: tuple[int, ...], rounds: int, num_batches: int, batch_size: int) -> list[float]:
    """Best samples/s for each num_workers over rounds that alternate between them: a burst of other work can't favour one."""
    sweep = sweep_loader(dataset, values=workers, repeats=rounds, num_batches=num_batches, progress=False, batch_size=batch_size)
    return [row.best_samples_per_s for row in sweep.rows]


def cpu_bound(cores: int) -> Result:
    """Pure-Python CPU work per item: `cores` workers vs loading in the main process."""
    dataset = SlowDataset(num_items=4096, cpu_ms=2.0)
    zero, many = best_rates(dataset, (0, cores), rounds=5, num_batches=16, batch_size=16)
    return Result(
        f"CPU-bound (2 ms/item): {cores} workers vs 0", f"{zero:,.0f} samples/s", f"{many:,.0f} samples/s",
        many / zero, 1.7, f"limit {cores:.1f}x; plain processes reach {parallel_speedup(cores, work_ms=300):.2f}x now",
    )


def io_bound() -> Result:
    """Items that wait (sleep) 10 ms: 8 workers vs 2, more workers than cores."""
    dataset = SlowDataset(num_items=4096, io_ms=10.0)
    two, eight = best_rates(dataset, (2, 8), rounds=3, num_batches=48, batch_size=4)
    return Result("I/O-bound (10 ms wait/item): 8 workers vs 2", f"{two:,.0f} samples/s", f"{eight:,.0f} samples/s", eight / two, 3.0, "ideal 4.0x")


def second_epoch_start(persistent: bool, epochs: int = 12) -> float:
    """Median time from iter() to the first batch in epochs 2.. of a 2-worker loader over a tiny dataset.

    Batches are one small float64 tensor, so the time is start-up, not the ~2 ms a batch of several
    tensors costs to hand over through shared memory (measured here)."""
    loader = DataLoader(ArrayBackedDataset(256), batch_size=16, num_workers=2, persistent_workers=persistent)
    starts = [benchmark_loader(loader).first_batch_s for _ in range(epochs)]
    return statistics.median(starts[1:])


def persistent_workers() -> Result:
    """Second-epoch start with persistent_workers=True vs False."""
    fresh, kept = second_epoch_start(False), second_epoch_start(True)
    return Result("2nd-epoch first batch: persistent vs not", f"{fresh * 1000:.1f} ms", f"{kept * 1000:.1f} ms", fresh / kept, 10.0, f"{multiprocessing.get_start_method()} start")


def batched_fetch() -> Result:
    """__getitems__ (one indexing op per batch) vs __getitem__ per item, num_workers=0, batch 256."""
    rates = []
    for dataset, collate in ((InMemoryDataset(256 * 100), None), (BatchedInMemoryDataset(256 * 100), collate_stacked)):
        loader = DataLoader(dataset, batch_size=256, shuffle=True, collate_fn=collate)
        rates.append(max(benchmark_loader(loader).samples_per_s for _ in range(5)))
    return Result("__getitems__ vs per-item fetch (batch 256)", f"{rates[0]:,.0f} samples/s", f"{rates[1]:,.0f} samples/s", rates[1] / rates[0], 5.0)


def uss_growth(make: Callable[[int], Dataset], num_items: int) -> float:
    """Mean per-worker USS growth in MiB over one epoch (fork, 2 workers, sequential order)."""
    loader = DataLoader(make(num_items), batch_size=4096, num_workers=2)
    return statistics.mean(worker.uss_growth_mib for worker in worker_memory(loader))


def copy_on_read(num_items: int = 4_000_000) -> Result:
    """Worker USS growth over an epoch: 4M Python floats in a list vs one numpy array."""
    listed, array = uss_growth(ListBackedDataset, num_items), uss_growth(ArrayBackedDataset, num_items)
    return Result(
        f"worker USS growth: {num_items / 1e6:.0f}M floats, list vs array", f"+{listed:.1f} MiB", f"+{array:.1f} MiB",
        listed / max(array, 0.1), 5.0, "ratio = list / array growth",
    )


def hardware() -> str:
    """One line naming the machine the numbers come from."""
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("model name")), platform.processor())
    return f"{model}; {usable_cpus()} usable cores; torch {torch.__version__}; Python {platform.python_version()}; start method {multiprocessing.get_start_method()}"


def main() -> int:
    """Measure every effect, print the table, return 1 if a target was missed."""
    warnings.filterwarnings("ignore", message="This DataLoader will create")  # 8 workers on fewer cores is the point
    print(hardware(), flush=True)
    print("load average before: {:.2f} {:.2f} {:.2f} (other programs running slow the timings down)".format(*os.getloadavg()), flush=True)
    began = time.perf_counter()
    steps = (partial(cpu_bound, usable_cpus()), io_bound, persistent_workers, batched_fetch, copy_on_read)  # memory last: a big list slows fork
    results = []
    for step in steps:
        results.append(step())
        print(f"  measured: {results[-1].effect}", flush=True)
    header = f"{'effect':<46} {'baseline':>20} {'improved':>20} {'ratio':>8} {'target':>9}  result"
    print("\n" + header + "\n" + "-" * len(header))
    for r in results:
        verdict = "ok" if r.ok else "MISSED"
        target = f">= {r.target:.1f}x"
        print(f"{r.effect:<46} {r.baseline:>20} {r.improved:>20} {r.ratio:>7.2f}x {target:>9}  {verdict}{'  (' + r.note + ')' if r.note else ''}")
    missed = [r.effect for r in results if not r.ok]
    print(f"\n{len(results) - len(missed)}/{len(results)} targets met in {time.perf_counter() - began:.0f} s")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
