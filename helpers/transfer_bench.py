"""Measuring host-to-device copies (lesson 04, `make gpu-check`): bandwidth over sizes, pinning costs, copy/compute timelines, reports.

The tools to keep in your own training code (`move`, `CUDAPrefetcher`) are in helpers.transfer.
"""
from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from helpers._validate import as_int, short
from helpers.timing import interleaved
from helpers.transfer import CUDAPrefetcher, as_device, move

GB = 1e9  # bandwidth is quoted in decimal GB/s, as NVIDIA and PCIe specifications do
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


def format_bytes(num_bytes: float) -> str:
    """A size for people: 4 KiB, 16 MiB, 1.0 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale:
            value = num_bytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(num_bytes)} B"


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


def h2d_bandwidth(sizes: Sequence[int], device: Any = "cuda", repeats: int = 10, warmup: int = 2) -> BandwidthSweep:
    """Host-to-device GB/s for each size in bytes, from a pageable and a pinned source, timed with CUDA events (lesson 04)."""
    target = _cuda(device, "h2d_bandwidth")
    if not sizes:
        raise ValueError("sizes must name at least one copy size in bytes, got an empty sequence")
    sizes = [as_int("sizes[...]", size, minimum=1) for size in sizes]
    rows = []
    with torch.cuda.device(target):
        for size in sizes:
            dst = torch.empty(size, dtype=torch.uint8, device=target)  # allocated once: the timing is the copy alone
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


@dataclass(frozen=True)
class Span:
    """One stretch of GPU work on a timeline: what ran, on which stream, from and to (ms after the start event)."""

    name: str
    stream: str
    start_ms: float
    end_ms: float


@dataclass(frozen=True)
class Timeline:
    """A copy and a compute, their measured spans and how much they overlapped (lesson 04)."""

    title: str
    spans: tuple[Span, Span]

    @property
    def overlap_ms(self) -> float:
        """Time both spans were running."""
        a, b = self.spans
        return max(0.0, min(a.end_ms, b.end_ms) - max(a.start_ms, b.start_ms))

    @property
    def overlap_fraction(self) -> float:
        """Overlap as a share of the shorter span: 0 = one after the other, 1 = the shorter hides inside the longer."""
        shorter = min(span.end_ms - span.start_ms for span in self.spans)
        return self.overlap_ms / shorter if shorter > 0 else 0.0

    @property
    def total_ms(self) -> float:
        """From the start event to the later span's end."""
        return max(span.end_ms for span in self.spans)


def plot_timelines(timelines: Sequence[Timeline], ax: Any = None) -> Any:
    """Each timeline as one row of bars (copy, compute) against ms, on `ax` (made if None) (lesson 04)."""
    import matplotlib.pyplot as plt

    if not timelines:
        raise ValueError("timelines must hold at least one Timeline, got an empty sequence")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 1 + 0.8 * len(timelines)))
    colours = {"copy": "tab:orange", "compute": "tab:blue"}
    for row, timeline in enumerate(timelines):
        for offset, span in zip((-0.18, 0.18), timeline.spans):
            ax.barh(row + offset, span.end_ms - span.start_ms, left=span.start_ms, height=0.34,
                    color=colours.get(span.name, "grey"), label=span.name if row == 0 else None)
    ax.set_yticks(range(len(timelines)), [f"{t.title}\n(overlap {t.overlap_fraction:.0%})" for t in timelines])
    ax.invert_yaxis()
    ax.set_xlabel("ms after the start event (CUDA events)")
    most = max(timelines, key=lambda t: t.overlap_fraction)
    ax.set_title(f"Copy/compute overlap at best {most.overlap_fraction:.0%}: {most.title}")
    ax.legend(loc="upper left", bbox_to_anchor=(1, 1))  # outside the axes: the bars fill every row
    return ax


def _matmul_iterations(device: torch.device, target_ms: float, side: int) -> int:
    """How many side x side matmuls take about target_ms on `device`."""
    a = torch.randn(side, side, device=device)
    one = _event_ms(lambda: a @ a, repeats=5, warmup=2)
    return max(1, round(target_ms / max(one, 1e-3)))


def copy_compute_timeline(num_bytes: int, pinned: bool, side_stream: bool, device: Any = "cuda", compute_ms: float | None = None) -> Timeline:
    """Queue a host-to-device copy, then matmuls, and time both with CUDA events to see whether they overlap (lesson 04)."""
    target = _cuda(device, "copy_compute_timeline")
    num_bytes = as_int("num_bytes", num_bytes, minimum=1)
    src = torch.ones(num_bytes, dtype=torch.uint8, pin_memory=pinned)
    dst = torch.empty(num_bytes, dtype=torch.uint8, device=target)
    with torch.cuda.device(target):
        if compute_ms is None:  # make the compute about as long as a pinned copy, so overlap can show
            probe = src if pinned else torch.ones(num_bytes, dtype=torch.uint8, pin_memory=True)
            compute_ms = _event_ms(lambda: dst.copy_(probe, non_blocking=True), 3, 1)
        side = 2048
        iterations = _matmul_iterations(target, compute_ms, side)
        a = torch.randn(side, side, device=target)
        compute_stream = torch.cuda.current_stream()
        copy_stream = torch.cuda.Stream() if side_stream else compute_stream
        events = [torch.cuda.Event(enable_timing=True) for _ in range(5)]
        torch.cuda.synchronize()
        events[0].record(compute_stream)
        copy_stream.wait_event(events[0])
        with torch.cuda.stream(copy_stream):
            events[1].record()
            dst.copy_(src, non_blocking=True)
            events[2].record()
        events[3].record(compute_stream)
        for _ in range(iterations):
            a @ a
        events[4].record(compute_stream)
        torch.cuda.synchronize()
    at = [events[0].elapsed_time(event) for event in events]
    copy_name = "copy" + (" (side stream)" if side_stream else " (default stream)")
    spans = (Span("copy", copy_name, at[1], at[2]), Span("compute", "default stream", at[3], at[4]))
    title = f"{'pinned' if pinned else 'pageable'} source, {'side' if side_stream else 'default'} stream"
    return Timeline(title, spans)


def unsafe_d2h_read(num_elements: int = 2**24, device: Any = "cuda") -> tuple[bool, bool]:
    """Copy GPU values to the CPU with non_blocking=True behind a slow kernel; (right before synchronising, right after) (lesson 04)."""
    target = _cuda(device, "unsafe_d2h_read")
    num_elements = as_int("num_elements", num_elements, minimum=1)
    value = float(time.perf_counter_ns() % 1_000_000 + 1)  # new each run, exact in float32: old memory cannot match by chance
    with torch.cuda.device(target):
        on_gpu = torch.full((num_elements,), value, device=target)
        on_cpu = torch.full((num_elements,), -1.0, pin_memory=True)  # allocated before the race starts
        torch.cuda.synchronize()
        torch.cuda._sleep(1_000_000_000)  # a billion GPU clock cycles ahead of the copy (private helper used by PyTorch's tests): a loaded host reads long before it ends
        on_cpu.copy_(on_gpu, non_blocking=True)  # what .to("cpu", non_blocking=True) does into pinned memory: returns at once
        right_before = bool((on_cpu == value).all())
        torch.cuda.current_stream().synchronize()
        right_after = bool((on_cpu == value).all())
    return right_before, right_after


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


def gpu_link(device: Any = "cuda") -> str:
    """The PCIe link the GPU sits on, read from Linux sysfs (e.g. "32.0 GT/s PCIe x16"), or why it is unknown (lesson 04)."""
    target = _cuda(device, "gpu_link")
    props = torch.cuda.get_device_properties(torch.cuda.current_device() if target.index is None else target.index)
    try:
        bus = f"{props.pci_domain_id:04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    except AttributeError:
        return "unknown (this torch build does not report the GPU's PCI address)"
    folder = Path("/sys/bus/pci/devices") / bus
    try:
        now = [(folder / f"current_link_{k}").read_text().strip() for k in ("speed", "width")]
        most = [(folder / f"max_link_{k}").read_text().strip() for k in ("speed", "width")]
    except OSError:
        return f"unknown (no {folder}/current_link_speed; not Linux, or a virtual machine hiding it)"
    return f"{now[0]} x{now[1]} now, {most[0]} x{most[1]} at most (an idle GPU may slow its link) (PCI {bus})"


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


def host_copy_gb_per_s(num_bytes: int, repeats: int = 10, warmup: int = 2) -> float:
    """GB/s of a one-thread host-memory copy of `num_bytes`: the extra copy the pin thread makes per pageable batch (lesson 04)."""
    num_bytes = as_int("num_bytes", num_bytes, minimum=1)
    src = torch.ones(num_bytes, dtype=torch.uint8)
    dst = torch.empty_like(src)
    seconds = in_pin_thread(lambda: median_seconds(lambda: dst.copy_(src), lambda: None, repeats, warmup))
    return num_bytes / seconds / GB


@dataclass(frozen=True)
class HostCopySweep:
    """The same bytes copied in host memory as one copy and as many smaller ones, median seconds per chunk size (lesson 04)."""

    total_bytes: int
    seconds: tuple[tuple[int, float], ...]  # (bytes per copy, median seconds to move total_bytes), smallest chunk first

    def gb_per_s(self, chunk_bytes: int) -> float:
        """Decimal GB/s moving total_bytes in copies of chunk_bytes."""
        for chunk, seconds in self.seconds:
            if chunk == chunk_bytes:
                return self.total_bytes / seconds / GB
        raise ValueError(f"chunk_bytes={chunk_bytes!r} was not measured; measured: {[chunk for chunk, _ in self.seconds]}")

    def per_call_us(self) -> float:
        """Fixed cost of one copy call in microseconds, from the smallest and the largest chunk: extra time over extra calls."""
        (small, small_s), (big, big_s) = self.seconds[0], self.seconds[-1]
        extra_calls = self.total_bytes // small - self.total_bytes // big
        return 1e6 * (small_s - big_s) / extra_calls if extra_calls > 0 else 0.0

    def slowdown(self) -> float:
        """How many times longer the smallest chunks took than the largest, for the same bytes."""
        return self.seconds[0][1] / self.seconds[-1][1]

    def plot(self, ax: Any = None) -> Any:
        """GB/s against bytes per copy (log x), on `ax` (made if None)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        chunks = [chunk for chunk, _ in self.seconds]
        ax.plot(chunks, [self.gb_per_s(chunk) for chunk in chunks], marker="o", label=f"{format_bytes(self.total_bytes)} in all, one thread")
        ax.set_xscale("log")
        ax.set_xlabel("bytes per copy call (log scale)")
        ax.set_ylabel("host copy GB/s (median)")
        ax.set_title(f"Same {format_bytes(self.total_bytes)}: {format_bytes(chunks[0])} copies take {self.slowdown():.1f}x as long as one copy")
        ax.legend(loc="best")
        return ax


def host_copy_sweep(chunk_sizes: Sequence[int], total_bytes: int = 4 * 2**20, rounds: int = 7) -> HostCopySweep:
    """Copy total_bytes in host memory as total_bytes / chunk copies for each chunk size, interleaved, on one torch thread (lesson 04)."""
    total_bytes = as_int("total_bytes", total_bytes, minimum=1)
    chunks = sorted({as_int("chunk_sizes[...]", chunk, minimum=1) for chunk in chunk_sizes})
    if len(chunks) < 2:
        raise ValueError(f"chunk_sizes must hold at least two different sizes, got {list(chunk_sizes)!r}")
    if any(total_bytes % chunk for chunk in chunks):
        raise ValueError(f"every chunk size must divide total_bytes={total_bytes}, got {chunks}")
    src = torch.ones(total_bytes, dtype=torch.uint8)
    dst = torch.empty_like(src)

    def copies(chunk: int) -> Callable[[], None]:
        pairs = list(zip(dst.view(-1, chunk).unbind(), src.view(-1, chunk).unbind()))  # views: no allocation while timed

        def run() -> None:
            for to, source in pairs:
                to.copy_(source)
        return run

    runs = {str(chunk): copies(chunk) for chunk in chunks}
    medians = in_pin_thread(lambda: interleaved_medians(runs, lambda: None, rounds=rounds, warmup=1))
    return HostCopySweep(total_bytes, tuple((chunk, medians[str(chunk)]) for chunk in chunks))


def load_reference_results(folder: Path | str) -> list[dict[str, Any]]:
    """Every `*-gpu-check.json` report in `folder` (written by `make gpu-check`), oldest first; [] when there are none (lesson 04)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    reports = []
    for path in sorted(folder.glob(GPU_REPORT_GLOB)):
        report = json.loads(path.read_text())
        missing = {"hardware", "date", "torch", "bandwidth"} - set(report)
        if missing:
            raise ValueError(f"{path} is not a gpu-check report: it lacks {sorted(missing)}")
        report["file"] = path.name
        reports.append(report)
    return reports


def sweep_from_report(report: Mapping[str, Any]) -> BandwidthSweep:
    """The bandwidth sweep stored in a gpu-check report, to print or plot beside this machine's (lesson 04)."""
    rows = tuple(BandwidthRow(int(r["num_bytes"]), bool(r["pinned"]), float(r["seconds"])) for r in report["bandwidth"]["rows"])
    return BandwidthSweep(str(report["bandwidth"]["device_name"]), rows)


def sweep_to_dict(sweep: BandwidthSweep) -> dict[str, Any]:
    """A bandwidth sweep as JSON-ready data (for the gpu-check report)."""
    return {"device_name": sweep.device_name, "rows": [asdict(row) for row in sweep.rows]}
