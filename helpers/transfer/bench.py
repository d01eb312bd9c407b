"""Measuring host-to-device copies (lesson 04, `make gpu-check`): bandwidth over sizes, pinning costs, prefetching's effect.

helpers.transfer re-exports every public name here; the tools to keep in your own training code (`move`,
`CUDAPrefetcher`) are in helpers/transfer/copies.py.
"""
from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from helpers._validate import as_int, short
from helpers.timing import interleaved
from helpers.transfer.copies import GB, CUDAPrefetcher, as_device, format_bytes, move

GPU_REPORT_GLOB = "*-gpu-check.json"  # tools/gpu_check.py's names; other references (lesson 03's *-loaders.json) share the folder


def _cuda(device: Any, what: str) -> torch.device:
    """`device` as a CUDA device, or a clear error: `what` measures GPU transfers and has no CPU meaning."""
    result = as_device(device)
    if result.type != "cuda":
        raise ValueError(f"{what} measures copies to a CUDA GPU; device must be 'cuda' or 'cuda:N', got {str(device)!r}")
    return result


@dataclass(frozen=True)
class BandwidthRow:
    """One size: the median seconds of a host-to-device copy and the bandwidth it gives, pinned or pageable source."""

    num_bytes: int
    pinned: bool
    seconds: float

    @property
    def gb_per_s(self) -> float:
        """Decimal GB per second."""
        return self.num_bytes / self.seconds / GB


@dataclass(frozen=True)
class BandwidthSweep:
    """Host-to-device bandwidth over sizes, pageable and pinned, on one named device (lesson 04)."""

    device_name: str
    rows: tuple[BandwidthRow, ...]

    def rate(self, num_bytes: int, pinned: bool) -> float:
        """GB/s measured for one size and source kind."""
        for row in self.rows:
            if row.num_bytes == num_bytes and row.pinned == pinned:
                return row.gb_per_s
        raise ValueError(f"no row for num_bytes={num_bytes!r}, pinned={pinned!r}; sizes measured: {sorted({r.num_bytes for r in self.rows})}")

    def sizes(self) -> list[int]:
        """The measured sizes, smallest first."""
        return sorted({row.num_bytes for row in self.rows})

    def __str__(self) -> str:
        lines = [f"host-to-device copies on {self.device_name} (median of repeats)", f"{'size':>10} {'pageable GB/s':>14} {'pinned GB/s':>12} {'pinned/pageable':>16}"]
        for size in self.sizes():
            pageable, pinned = self.rate(size, False), self.rate(size, True)
            lines.append(f"{format_bytes(size):>10} {pageable:>14.2f} {pinned:>12.2f} {pinned / pageable:>15.2f}x")
        return "\n".join(lines)

    def plot(self, ax: Any = None, label: str = "") -> Any:
        """Bandwidth against copy size (log x), one line per source kind, on `ax` (made if None)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        sizes = self.sizes()
        for pinned in (False, True):
            kind = "pinned" if pinned else "pageable"
            ax.plot(sizes, [self.rate(s, pinned) for s in sizes], marker="o", label=f"{label}{kind} source")
        ax.set_xscale("log")
        ax.set_xlabel("bytes per copy (log scale)")
        ax.set_ylabel("host-to-device GB/s (median)")
        small, big = sizes[0], sizes[-1]
        ax.set_title(f"{self.device_name}: pinned/pageable {self.rate(small, True) / self.rate(small, False):.2f}x at "
                     f"{format_bytes(small)}, {self.rate(big, True) / self.rate(big, False):.2f}x at {format_bytes(big)}")
        ax.legend(loc="best")
        return ax


def median_seconds(run: Callable[[], Any], synchronize: Callable[[], Any], repeats: int = 10, warmup: int = 2) -> float:
    """Median wall time of `run()` with `synchronize()` before each clock read, after `warmup` untimed calls (lesson 04)."""
    repeats = as_int("repeats", repeats, minimum=1)
    warmup = as_int("warmup", warmup, minimum=0)
    for _ in range(warmup):
        run()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(runs: Mapping[str, Callable[[], Any]], synchronize: Callable[[], Any], rounds: int = 7, warmup: int = 1) -> dict[str, float]:
    """Median wall seconds of each run, timed in interleaved rounds (A, B, A, B, ...) so that load hits all alike (lesson 04)."""
    if not isinstance(runs, Mapping) or not runs or not all(callable(run) for run in runs.values()):
        raise ValueError(f"runs must map names to callables, at least one, got {short(runs)}")
    rounds = as_int("rounds", rounds, minimum=1)
    warmup = as_int("warmup", warmup, minimum=0)
    for _ in range(warmup):
        for run in runs.values():
            run()
    synchronize()
    def timed(run: Callable[[], Any]) -> Callable[[], float]:
        def seconds() -> float:
            start = time.perf_counter()
            run()
            synchronize()
            return time.perf_counter() - start
        return seconds

    times = interleaved({name: timed(run) for name, run in runs.items()}, rounds)  # no run always goes first
    return {name: statistics.median(values) for name, values in times.items()}


def in_pin_thread(fn: Callable[[], Any]) -> Any:
    """Run `fn` in a new thread limited to one torch thread, as the DataLoader's pin thread is; return its result (lesson 04)."""
    box: dict[str, Any] = {}

    def target() -> None:
        torch.set_num_threads(1)  # thread-local: the pin thread copies on one core
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="course_pin_probe")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _event_ms(run: Callable[[], Any], repeats: int, warmup: int) -> float:
    """Median GPU time of `run()` between two CUDA events on the current stream, in ms."""
    for _ in range(warmup):
        run()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def h2d_bandwidth(sizes: Sequence[int], device: Any = "cuda", repeats: int = 10,
                  warmup: int = 2) -> BandwidthSweep:
    """Host-to-device GB/s per size in bytes, pageable and pinned source, timed with CUDA events."""
    target = _cuda(device, "h2d_bandwidth")
    if not sizes:
        raise ValueError("sizes must name at least one copy size in bytes, got an empty sequence")
    sizes = [as_int("sizes[...]", size, minimum=1) for size in sizes]
    rows = []
    with torch.cuda.device(target):
        for size in sizes:
            # allocated once: the timing is the copy alone
            dst = torch.empty(size, dtype=torch.uint8, device=target)
            for pinned in (False, True):
                src = torch.ones(size, dtype=torch.uint8, pin_memory=pinned)
                ms = _event_ms(lambda: dst.copy_(src, non_blocking=True), repeats, warmup)
                rows.append(BandwidthRow(size, pinned, ms / 1000))
            del dst, src
    return BandwidthSweep(torch.cuda.get_device_name(target), tuple(rows))


@dataclass(frozen=True)
class PinningCosts:
    """Wall ms to get one batch onto the GPU three ways (lesson 04): pageable .to(), pin then copy, already pinned."""

    num_bytes: int
    pageable_ms: float
    pin_then_copy_ms: float
    pinned_ms: float
    pin_only_ms: float

    def __str__(self) -> str:
        return (
            f"{format_bytes(self.num_bytes)} batch to the GPU (wall time, median): t.to(dev) {self.pageable_ms:.2f} ms; "
            f"t.pin_memory().to(dev, non_blocking=True) {self.pin_then_copy_ms:.2f} ms; "
            f"pinning alone, in one thread as the DataLoader's pin thread does it, {self.pin_only_ms:.2f} ms; "
            f"already pinned {self.pinned_ms:.2f} ms"
        )

    def plot(self, where: str, ax: Any = None) -> Any:
        """The four wall times as bars, titled with `where` they were measured, on `ax` (made if None)."""
        import matplotlib.pyplot as plt

        if not isinstance(where, str) or not where.strip():
            raise ValueError(f"where must say where the costs were measured, got {short(where)}")
        if ax is None:
            _, ax = plt.subplots()
        bars = {"t.to(dev)\n(pageable)": (self.pageable_ms, "tab:grey"),
                "t.pin_memory()\n.to(dev, nb=True)": (self.pin_then_copy_ms, "tab:red"),
                "already pinned\n.to(dev, nb=True)": (self.pinned_ms, "tab:green"),
                "pinning alone,\none thread": (self.pin_only_ms, "tab:purple")}
        ax.bar(list(bars), [ms for ms, _ in bars.values()], color=[colour for _, colour in bars.values()])
        ax.set(xlabel="how the batch gets to the GPU", ylabel=f"wall ms per {format_bytes(self.num_bytes)} batch (median)")
        ax.set_title(f"{where}\npinning in the loop adds {self.pin_then_copy_ms - self.pinned_ms:.2f} ms per batch", fontsize=9)
        ax.tick_params(axis="x", labelsize=8)
        return ax


def pinning_costs(num_bytes: int, device: Any = "cuda", repeats: int = 10, warmup: int = 2) -> PinningCosts:
    """Wall time of pageable `.to()`, pinning on the fly then copying, and copying an already pinned tensor, interleaved (lesson 04)."""
    target = _cuda(device, "pinning_costs")
    num_bytes = as_int("num_bytes", num_bytes, minimum=1)
    pageable = torch.ones(num_bytes, dtype=torch.uint8)
    pinned = pageable.pin_memory()
    sync = lambda: torch.cuda.synchronize(target)  # noqa: E731
    seconds = interleaved_medians({
        "pageable": lambda: pageable.to(target),
        "pin_then_copy": lambda: pageable.pin_memory().to(target, non_blocking=True),
        "pinned": lambda: pinned.to(target, non_blocking=True),
    }, sync, rounds=repeats, warmup=warmup)
    return PinningCosts(
        num_bytes=num_bytes,
        pageable_ms=1000 * seconds["pageable"],
        pin_then_copy_ms=1000 * seconds["pin_then_copy"],
        pinned_ms=1000 * seconds["pinned"],
        pin_only_ms=1000 * in_pin_thread(lambda: median_seconds(pageable.pin_memory, lambda: None, repeats, warmup)),
    )


def _matmul_iterations(device: torch.device, target_ms: float, side: int) -> int:
    """How many side x side matmuls take about target_ms on `device`."""
    a = torch.randn(side, side, device=device)
    one = _event_ms(lambda: a @ a, repeats=5, warmup=2)
    return max(1, round(target_ms / max(one, 1e-3)))


def ms_per_step(batches: Sequence[Any], step: Callable[[Any], Any], device: Any = "cuda", prefetch: bool = False, warmup: int = 2) -> float:
    """Mean wall ms per training step over `batches`, copying each with non_blocking=True, or through CUDAPrefetcher (lesson 04)."""
    target = _cuda(device, "ms_per_step")
    warmup = as_int("warmup", warmup, minimum=0)
    if len(batches) <= warmup:
        raise ValueError(f"batches must hold more than warmup={warmup} batches, got {len(batches)}")
    for batch in batches[:warmup]:
        step(move(batch, target, non_blocking=True))
    timed = batches[warmup:]
    torch.cuda.synchronize(target)
    start = time.perf_counter()
    if prefetch:
        for batch in CUDAPrefetcher(timed, target):
            step(batch)
    else:
        for batch in timed:
            step(move(batch, target, non_blocking=True))
    torch.cuda.synchronize(target)
    return 1000 * (time.perf_counter() - start) / len(timed)


@dataclass(frozen=True)
class PrefetchEffect:
    """Wall ms per step with the copy on the compute stream and with CUDAPrefetcher, for one batch size (lesson 04)."""

    num_bytes: int
    copy_ms: float
    compute_ms: float
    plain_ms: float
    prefetch_ms: float

    def __str__(self) -> str:
        return (
            f"{format_bytes(self.num_bytes)} pinned batches, copy ~{self.copy_ms:.2f} ms, compute ~{self.compute_ms:.2f} ms per step: "
            f"{self.plain_ms:.2f} ms/step copying on the compute stream, {self.prefetch_ms:.2f} ms/step with CUDAPrefetcher "
            f"({self.plain_ms / self.prefetch_ms:.2f}x)"
        )

    def plot(self, where: str, ax: Any = None) -> Any:
        """Step time without and with the prefetcher as bars, max(copy, compute) dotted, titled with `where`, on `ax` (made if None)."""
        import matplotlib.pyplot as plt

        if not isinstance(where, str) or not where.strip():
            raise ValueError(f"where must say where the steps were measured, got {short(where)}")
        if ax is None:
            _, ax = plt.subplots()
        ax.bar(["copy, then compute\n(one stream)", "CUDAPrefetcher\n(side stream)"], [self.plain_ms, self.prefetch_ms],
               color=["tab:grey", "tab:green"])
        ax.axhline(max(self.copy_ms, self.compute_ms), color="black", linestyle=":",
                   label="max(copy, compute), each timed alone: the best overlap can do")
        ax.set(xlabel="how the next batch is copied", ylabel="wall ms per step (median of rounds)")
        ax.set_title(f"{where}\nCUDAPrefetcher: {self.plain_ms / self.prefetch_ms:.2f}x shorter steps", fontsize=9)
        ax.set_ylim(0, 1.35 * max(self.plain_ms, self.prefetch_ms))  # head room: the legend sits above the bars
        ax.legend(loc="upper right", fontsize=8)
        return ax


def prefetch_effect(num_bytes: int = 64 * 2**20, steps: int = 30, device: Any = "cuda", rounds: int = 3) -> PrefetchEffect:
    """Step time over pinned batches whose compute lasts about as long as their copy, without and with CUDAPrefetcher, median of interleaved rounds (lesson 04)."""
    target = _cuda(device, "prefetch_effect")
    num_bytes = as_int("num_bytes", num_bytes, minimum=4)
    steps = as_int("steps", steps, minimum=3)
    rounds = as_int("rounds", rounds, minimum=1)
    batches = [torch.ones(num_bytes // 4, dtype=torch.float32).pin_memory()] * steps  # only read: one pinned buffer serves all
    with torch.cuda.device(target):
        dst = torch.empty(num_bytes // 4, dtype=torch.float32, device=target)
        copy_ms = _event_ms(lambda: dst.copy_(batches[0], non_blocking=True), 5, 2)
        side = 2048
        iterations = _matmul_iterations(target, copy_ms, side)
        weights = torch.randn(side, side, device=target)

        def step(batch: torch.Tensor) -> None:
            out = weights
            for _ in range(iterations):
                out = out @ weights
            out[0, 0] += batch[0]  # the step reads the batch, so it must wait for its copy

        compute_ms = _event_ms(lambda: step(dst), 5, 2)
        runs = interleaved({False: lambda: ms_per_step(batches, step, target, prefetch=False),  # a busy host slows both alike
                            True: lambda: ms_per_step(batches, step, target, prefetch=True)}, rounds, alternate=False)
    return PrefetchEffect(num_bytes, copy_ms, compute_ms, statistics.median(runs[False]), statistics.median(runs[True]))
