"""`make bench`: lesson 03's headline loader effects (and the weighted sampler at scale, lesson 07's doctor) side by side; exits 1 when one misses its target.

Compared things are measured interleaved (A/B/A/B) and compared by the median of paired ratios, so a
burst of load from other programs hits both sides alike. `--record` instead measures lesson 03's two
num_workers sweeps and writes them, with this machine's name, to docs/reference-results/ as the
reference the lesson plots beside a learner's numbers; it refuses when the machine is busy.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import re
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import psutil
from torch.utils.data import DataLoader, Dataset

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.env import usable_cpus  # noqa: E402
from helpers.loading import benchmark_loader, cpu_model, lesson_sweep, record_reference, sweep_loader  # noqa: E402
from helpers.memory import worker_memory  # noqa: E402
from helpers.samplers import DistributedWeightedSampler  # noqa: E402
from helpers.timing import interleaved, paired_median  # noqa: E402
from helpers.workloads import (  # noqa: E402
    ArrayBackedDataset,
    BatchedInMemoryDataset,
    InMemoryDataset,
    ListBackedDataset,
    PreStackedInMemoryDataset,
    SlowDataset,
    collate_stacked,
)

REFERENCE_DIR = ROOT / "docs" / "reference-results"  # --record writes here; lesson 03 reads the newest *-loaders.json in it

# The least plain-process speed-up, as a share of the usable cores, at which the machine counts as quiet.
QUIET_SHARE = 0.85
# Below this plain-process speed-up there is no parallel headroom to compare workers against.
MIN_CEILING = 1.2


@dataclass(frozen=True)
class Result:
    """One effect: the baseline and improved measurements, their ratio (improved over baseline) and the target."""

    effect: str
    baseline: str
    improved: str
    ratio: float
    target: float
    note: str = ""
    busy: bool = False

    @property
    def ok(self) -> bool:
        """Whether the ratio reaches the target (a comparison the machine was too busy to make is not a miss)."""
        return self.busy or self.ratio >= self.target

    @property
    def verdict(self) -> str:
        """ok, MISSED, or 'too busy' when the machine had no parallel headroom to measure against."""
        return "too busy" if self.busy else "ok" if self.ok else "MISSED"


def cpu_bound(cores: int) -> Result:
    """Pure-Python CPU work per item: `cores` workers vs 0, against the plain-process speed-up measured in the same rounds."""
    sweep = sweep_loader(SlowDataset(num_items=4096, cpu_ms=2.0), values=(0, cores), repeats=5, num_batches=16,
                         warmup_batches=None, progress=False, batch_size=16, ceiling_processes=cores)
    speedup, ceiling = sweep.speedup(cores), sweep.ceiling or 1.0
    rates = [row.samples_per_s for row in sweep.rows]
    return Result(
        f"CPU-bound (2 ms/item): {cores} workers vs 0", f"{rates[0]:,.0f} samples/s", f"{rates[1]:,.0f} samples/s",
        (speedup - 1) / max(ceiling - 1, 1e-9), 0.5,
        f"ratio = headroom used: workers {speedup:.2f}x, plain processes {ceiling:.2f}x in the same rounds (medians)",
        busy=ceiling < MIN_CEILING,
    )


def io_bound() -> Result:
    """Items that wait (sleep) 10 ms: 8 workers vs 2, more workers than cores."""
    sweep = sweep_loader(SlowDataset(num_items=4096, io_ms=10.0), values=(2, 8), repeats=3, num_batches=32,
                         warmup_batches=None, progress=False, batch_size=4)
    rates = [row.samples_per_s for row in sweep.rows]
    return Result("I/O-bound (10 ms wait/item): 8 workers vs 2", f"{rates[0]:,.0f} samples/s", f"{rates[1]:,.0f} samples/s",
                  sweep.speedup(8), 3.0, "ideal 4.0x; median of paired rounds")


def persistent_workers(epochs: int = 12) -> Result:
    """Later epochs' first batch with persistent_workers=False vs True, epochs alternating between the two loaders.

    Batches are one small float64 tensor, so the time is start-up, not the ~2 ms a batch of several
    tensors costs to hand over through shared memory (measured here)."""
    loaders = {kept: DataLoader(ArrayBackedDataset(256), batch_size=16, num_workers=2, persistent_workers=kept) for kept in (False, True)}
    starts: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(epochs):
        for kept, loader in loaders.items():
            starts[kept].append(benchmark_loader(loader).first_batch_s)
    del loaders
    fresh, kept = statistics.median(starts[False][1:]), statistics.median(starts[True][1:])
    return Result("later epochs' first batch: persistent vs not", f"{fresh * 1000:.1f} ms", f"{kept * 1000:.1f} ms", fresh / kept, 5.0,
                  f"{multiprocessing.get_start_method()} start; medians of epochs 2-{epochs}, alternating")


def batched_fetch(rounds: int = 5) -> list[Result]:
    """__getitems__ as documented (a list of samples) and pre-stacked vs __getitem__ per item, num_workers=0, batch 256, interleaved."""
    makers = {
        "per item": (InMemoryDataset, None),
        "list": (BatchedInMemoryDataset, None),
        "stacked": (PreStackedInMemoryDataset, collate_stacked),
    }
    def rate(make: Callable[[int], Dataset], collate: Callable | None) -> Callable[[], float]:
        return lambda: benchmark_loader(DataLoader(make(256 * 100), batch_size=256, shuffle=True, collate_fn=collate)).samples_per_s

    rates = interleaved({name: rate(make, collate) for name, (make, collate) in makers.items()}, rounds, alternate=False)
    ratio = {name: paired_median(rates[name], rates["per item"]) for name in ("list", "stacked")}
    median = {name: statistics.median(values) for name, values in rates.items()}
    return [
        Result("__getitems__ list of samples vs per item", f"{median['per item']:,.0f} samples/s", f"{median['list']:,.0f} samples/s",
               ratio["list"], 1.2, "collate still stacks 256 samples"),
        Result("pre-stacked __getitems__ vs per item", f"{median['per item']:,.0f} samples/s", f"{median['stacked']:,.0f} samples/s",
               ratio["stacked"], 5.0, "identity collate_fn; not the documented contract"),
    ]


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


def doctor_on_planted_loaders(rounds: int = 3) -> list[Result]:
    """Lesson 07: the loader doctor's run time on the clinic's planted loaders, median of `rounds`, against the budget it was given."""
    from helpers import clinic, doctor

    trap, workers = {"no-rebalancing"}, {"no-rebalancing", "class-weights-as-sample-weights", "no-workers"}
    planted = [  # (what, loader factory, step factory or None, budget in seconds)
        ("training loader as given, with its step", lambda: clinic.make_loader(), lambda: clinic.make_step(), 6.0),
        ("class-weight trap (no-rebalancing fixed)", lambda: clinic.make_loader(trap), lambda: clinic.make_step(trap), 4.0),
        ("copy-on-read (no-workers fixed too)", lambda: clinic.make_loader(workers), lambda: clinic.make_step(workers), 5.0),
        ("evaluation stream as given", lambda: clinic.make_eval_loader(), None, 4.0),
    ]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as lesson 07 runs the clinic's steps
    try:
        results = []
        for what, make_loader, make_step, budget in planted:
            elapsed, codes = [], set()
            for _ in range(rounds):
                diagnosis = doctor.diagnose(make_loader(), step=make_step() if make_step else None, budget_s=budget)
                elapsed.append(diagnosis.elapsed_s)
                codes |= {f.code for f in diagnosis.findings if f.severity != "info"}
            median = statistics.median(elapsed)
            results.append(Result(f"doctor: {what}", f"budget {budget:.2f} s", f"{median:.2f} s", budget / median, 1 / 1.1,
                                  f"median of {rounds}; ratio = budget / measured (up to 10% over while workers stop); found {sorted(codes)}"))
        return results
    finally:
        torch.set_num_threads(threads)


def sampler_at_scale(num_weights: int = 2**24 + 1, replicas: int = 8) -> list[Result]:
    """DistributedWeightedSampler, one rank of 8 at 2^24+1 weights: epoch seconds, RSS growth while iterating, resume to the first index."""
    weights = torch.rand(num_weights, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sampler = DistributedWeightedSampler(weights, num_replicas=replicas, rank=replicas - 1)
    process = psutil.Process()
    before_mib, peak_mib, iterating = process.memory_info().rss / 2**20, 0.0, True

    def watch_rss() -> None:
        nonlocal peak_mib
        while iterating:
            peak_mib = max(peak_mib, process.memory_info().rss / 2**20)
            time.sleep(0.005)

    watcher = threading.Thread(target=watch_rss)
    watcher.start()
    epochs = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        start = time.perf_counter()
        for _ in sampler:
            pass
        epochs.append(time.perf_counter() - start)
    iterating = False
    watcher.join()
    growth_mib = max(peak_mib - before_mib, 0.0)
    resumed = DistributedWeightedSampler(weights, num_replicas=replicas, rank=replicas - 1)
    start = time.perf_counter()
    resumed.load_state_dict({**sampler.state_dict(), "yielded": len(sampler) // 2})
    next(iter(resumed))
    first_s = time.perf_counter() - start
    rank = f"1 rank of {replicas}, {num_weights:,} weights"
    return [
        Result(f"sampler epoch: {rank}", "budget 2.00 s", f"{statistics.median(epochs):.2f} s",
               2.0 / statistics.median(epochs), 1.0, f"{len(sampler):,} draws; median of 3 epochs; ratio = budget / measured"),
        Result("sampler RSS growth while iterating", "budget 200 MiB", f"+{growth_mib:.0f} MiB",
               200 / max(growth_mib, 1.0), 1.0, "peak RSS sampled every 5 ms over 3 epochs"),
        Result("sampler resume at a mid-epoch draw", "budget 1.00 s", f"{first_s:.3f} s",
               1.0 / first_s, 1.0, "load_state_dict to the first index, no replay"),
    ]


def hardware() -> str:
    """One line naming the machine the numbers come from."""
    return f"{cpu_model()}; {usable_cpus()} usable cores; torch {torch.__version__}; Python {platform.python_version()}; start method {multiprocessing.get_start_method()}"


def bench() -> int:
    """Measure every effect, print the table, return 1 if a target was missed."""
    warnings.filterwarnings("ignore", message="This DataLoader will create")  # 8 workers on fewer cores is the point
    print(hardware(), flush=True)
    print("load average before: {:.2f} {:.2f} {:.2f} (other programs running slow the timings down)".format(*os.getloadavg()), flush=True)
    began = time.perf_counter()
    steps = (partial(cpu_bound, usable_cpus()), io_bound, persistent_workers, batched_fetch, copy_on_read,  # memory last: a big list slows fork
             doctor_on_planted_loaders,  # lesson 07's doctor, on the clinic's loaders (their workers fork before the sampler's weights exist)
             sampler_at_scale)  # after the loaders: its 2^24 weights would be copied into forked workers otherwise
    results: list[Result] = []
    for step in steps:
        got = step()
        results.extend(got if isinstance(got, list) else [got])
        print(f"  measured: {results[-1].effect}", flush=True)
    header = f"{'effect':<46} {'baseline':>20} {'improved':>20} {'ratio':>8} {'target':>9}  result"
    print("\n" + header + "\n" + "-" * len(header))
    for r in results:
        target = f">= {r.target:.1f}x"
        print(f"{r.effect:<46} {r.baseline:>20} {r.improved:>20} {r.ratio:>7.2f}x {target:>9}  {r.verdict}{'  (' + r.note + ')' if r.note else ''}")
    missed = [r.effect for r in results if not r.ok]
    busy = [r.effect for r in results if r.busy]
    if busy:
        print(f"\nToo busy to compare: {busy}. Other programs used the cores' headroom; rerun on a quieter machine.")
    print(f"\n{len(results) - len(missed)}/{len(results)} targets met in {time.perf_counter() - began:.0f} s")
    return 1 if missed else 0


def reference_path(folder: Path, model: str, date: str) -> Path:
    """docs/reference-results/DATE-<cpu model slug>-loaders.json."""
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")[:60] or "cpu"
    return folder / f"{date}-{slug}-loaders.json"


def record(folder: Path = REFERENCE_DIR) -> int:
    """Measure lesson 03's sweeps and write them as the reference; refuse (exit 2) when the ceiling shows a busy machine."""
    cores = usable_cpus()
    print(hardware(), flush=True)
    cpu = lesson_sweep("cpu", ceiling_processes=cores, progress=False)
    print(cpu, flush=True)
    quiet = QUIET_SHARE * cores
    if cores < 2 or min(cpu.ceilings) < quiet:
        print(f"Not recorded: {cores} plain processes ran only {min(cpu.ceilings):.2f}x faster than one in the slowest round "
              f"(a quiet machine gives at least {quiet:.2f}x). Stop other programs and rerun.", file=sys.stderr)
        return 2
    io = lesson_sweep("io", progress=False)
    print(io, flush=True)
    reference = record_reference({"cpu": cpu, "io": io}, cores)
    folder.mkdir(parents=True, exist_ok=True)
    path = reference_path(folder, reference.hardware, reference.date)
    path.write_text(json.dumps(reference.to_dict(), indent=1) + "\n")
    print(f"wrote {path}; lesson 03 plots the newest *-loaders.json beside the learner's sweep")
    return 0


def main(argv: list[str] | None = None) -> int:
    """`make bench` (no arguments) or `tools/bench.py --record [--out DIR]`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", action="store_true", help="record lesson 03's sweeps as the reference (refused on a busy machine)")
    parser.add_argument("--out", type=Path, default=REFERENCE_DIR, help="folder for --record (default: docs/reference-results)")
    args = parser.parse_args(argv)
    return record(args.out) if args.record else bench()


if __name__ == "__main__":
    sys.exit(main())
