"""Copy/compute timelines on CUDA streams, the unsafe device-to-host read, the GPU's link, the recorded gpu-check reports (lesson 04).

helpers.transfer re-exports every public name here (`transfer.copy_compute_timeline`, ...).
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from helpers._validate import as_int
from helpers.transfer.bench import (GPU_REPORT_GLOB, BandwidthRow, BandwidthSweep, PinningCosts, PrefetchEffect, _cuda, _event_ms,
                                    _matmul_iterations)


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


def plot_timelines(timelines: Sequence[Timeline], ax: Any = None, where: str = "") -> Any:
    """Each timeline as one row of bars (copy, compute) against ms, on `ax` (made if None), titled with `where` if given (lesson 04)."""
    import matplotlib.pyplot as plt

    if not timelines:
        raise ValueError("timelines must hold at least one Timeline, got an empty sequence")
    if not isinstance(where, str):
        raise TypeError(f"where must be a string naming where the timelines were measured, got {where!r}")
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
    title = f"Copy/compute overlap at best {most.overlap_fraction:.0%}: {most.title}"
    ax.set_title(f"{where}\n{title}" if where else title, fontsize=9 if where else None)
    ax.legend(loc="upper left", bbox_to_anchor=(1, 1))  # outside the axes: the bars fill every row
    return ax


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


def newest_reference(references: Sequence[Mapping[str, Any]], section: str) -> Mapping[str, Any] | None:
    """The newest of `references` (oldest first, as load_reference_results lists them) that holds `section`, or None (lesson 04)."""
    if not isinstance(section, str) or not section:
        raise ValueError(f"section must name a part of a gpu-check report such as 'prefetch', got {section!r}")
    holding = [report for report in references if section in report]
    return holding[-1] if holding else None


def reference_title(report: Mapping[str, Any]) -> str:
    """How lesson 04 labels a reference measurement: its hardware, date and torch, and that it is not this machine."""
    return f"Reference, not this machine: {report['hardware']} ({report['date']}, torch {report['torch']})"


def pinning_costs_from_report(report: Mapping[str, Any], num_bytes: int) -> PinningCosts:
    """The pinning costs a gpu-check report recorded for batches of `num_bytes` (lesson 04)."""
    num_bytes = as_int("num_bytes", num_bytes, minimum=1)
    rows = [row for row in report["pinning_costs"] if row["num_bytes"] == num_bytes]
    if not rows:
        recorded = [row["num_bytes"] for row in report["pinning_costs"]]
        raise ValueError(f"num_bytes={num_bytes} was not recorded in {report.get('file', 'this report')}: it holds {recorded}")
    return PinningCosts(**rows[0])


def timelines_from_report(report: Mapping[str, Any]) -> list[Timeline]:
    """The copy/compute timelines a gpu-check report recorded, rebuilt from their spans (lesson 04)."""
    return [Timeline(str(t["title"]), tuple(Span(**span) for span in t["spans"])) for t in report["timelines"]]  # type: ignore[arg-type]


def prefetch_from_report(report: Mapping[str, Any]) -> PrefetchEffect:
    """The prefetcher's step times a gpu-check report recorded (lesson 04)."""
    return PrefetchEffect(**report["prefetch"])
