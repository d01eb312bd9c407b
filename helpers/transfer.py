"""Host-to-device copies (lesson 04), the tools to keep in your own training code: `move` a nested batch, `CUDAPrefetcher`, and sizing a step's copy against its compute (`CopyVsCompute`).

The measurements lesson 04 makes with them (bandwidth, pinning costs, timelines) are in helpers.transfer_bench.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from helpers._validate import as_device as _as_device
from helpers._validate import as_fraction, as_int, short
from helpers.batches import map_leaves, tensors


def move(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    """`batch` with every tensor moved to `device`, through tuples, lists and dicts; other values unchanged (lesson 04)."""
    return map_leaves(batch, lambda leaf: leaf.to(device, non_blocking=non_blocking) if isinstance(leaf, torch.Tensor) else leaf)


class CUDAPrefetcher:
    """`for batch in CUDAPrefetcher(loader, device)`: batch k+1 copied on a side stream."""

    def __init__(self, loader: Iterable[Any], device: Any) -> None:
        if not isinstance(loader, Iterable):
            raise TypeError(f"loader must be iterable (a DataLoader or a list of batches), "
                            f"got {short(loader)}")
        self.loader = loader
        self.device = as_device(device)

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self.device.type != "cuda":
            yield from self.loader  # no streams off CUDA: the batches are where the step runs
            return
        side = torch.cuda.Stream(self.device)
        batches = iter(self.loader)

        def copy_next() -> Any:
            batch = next(batches, _END)
            if batch is _END:
                return _END
            with torch.cuda.stream(side):  # on the side stream: the compute stream is not held up
                return move(batch, self.device, non_blocking=True)

        upcoming = copy_next()
        while upcoming is not _END:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(side)  # the step's kernels start only after the copy has landed
            for tensor in tensors(upcoming):
                # keep the caching allocator from reusing this memory while the step reads it
                tensor.record_stream(compute)
            batch, upcoming = upcoming, copy_next()  # batch k+1's copy queued before step k
            yield batch


_END = object()


def batch_bytes(batch: Any) -> int:
    """Bytes of every tensor in `batch` (through tuples, lists and dicts): what one step copies to the GPU (lesson 04)."""
    found = tensors(batch)
    if not found:
        raise ValueError(f"batch must hold at least one tensor, got {short(batch)}")
    return sum(t.element_size() * t.numel() for t in found)


def as_device(device: Any) -> torch.device:
    """`device` as a torch.device; a CUDA device on a machine without CUDA raises RuntimeError naming it (lesson 04)."""
    result = _as_device("device", device)
    if result.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={str(device)!r} needs a CUDA GPU, and torch.cuda.is_available() is False on this machine")
    if result.type == "cuda" and result.index is not None and result.index >= torch.cuda.device_count():
        raise ValueError(f"device={str(device)!r}: this machine has {torch.cuda.device_count()} CUDA device(s)")
    return result


IMAGE_SHAPE = (3, 224, 224)  # the images lesson 04 sizes its batches with (section 3)


def image_batch_bytes(batch_size: int, dtype: torch.dtype, image_shape: tuple[int, ...] = IMAGE_SHAPE) -> int:
    """Bytes of `batch_size` images of `dtype` and `image_shape` plus one int64 label each, computed without allocating them (lesson 04)."""
    batch_size = as_int("batch_size", batch_size, minimum=1)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype such as torch.uint8, got {short(dtype)} of type {type(dtype).__name__}")
    if not isinstance(image_shape, tuple) or not image_shape:
        raise TypeError(f"image_shape must be a non-empty tuple of sizes such as (3, 224, 224), got {short(image_shape)}")
    sides = [as_int("image_shape[...]", side, minimum=1) for side in image_shape]
    return batch_size * (math.prod(sides) * dtype.itemsize + torch.int64.itemsize)


def rate_at(sweep: Any, num_bytes: int, pinned: bool) -> float:
    """GB/s of a `num_bytes` copy read off a measured BandwidthSweep: interpolated over log size between sizes, the end value outside them (lesson 04)."""
    from helpers.transfer_bench import BandwidthSweep  # imports this module: imported here, when both are loaded

    if not isinstance(sweep, BandwidthSweep):
        raise TypeError(f"sweep must be a helpers.transfer_bench.BandwidthSweep, got {short(sweep)} of type {type(sweep).__name__}")
    num_bytes = as_int("num_bytes", num_bytes, minimum=1)
    if not isinstance(pinned, bool):
        raise TypeError(f"pinned must be True or False, got {short(pinned)}")
    sizes = sweep.sizes()
    rates = [sweep.rate(size, pinned) for size in sizes]
    return float(np.interp(math.log2(num_bytes), [math.log2(size) for size in sizes], rates))


@dataclass(frozen=True)
class CopyVsCompute:
    """One training step's host-to-device copy against its compute, from a pinned and a pageable source: a model for lesson 04's widget."""

    num_bytes: int
    compute_ms: float
    pinned_gb_per_s: float
    pageable_gb_per_s: float
    bandwidth_source: str  # where the GB/s come from, shown on the plot: measured here, a reference result, or an assumption

    def __post_init__(self) -> None:
        as_int("num_bytes", self.num_bytes, minimum=1)
        as_fraction("compute_ms", self.compute_ms, 0.0, math.inf, include_low=True, include_high=False)
        for name in ("pinned_gb_per_s", "pageable_gb_per_s"):
            as_fraction(name, getattr(self, name), 0.0, math.inf, include_low=False, include_high=False)
        if not isinstance(self.bandwidth_source, str) or not self.bandwidth_source.strip():
            raise ValueError(f"bandwidth_source must say where the GB/s come from, got {short(self.bandwidth_source)}")

    def copy_ms(self, pinned: bool) -> float:
        """Milliseconds to copy the batch at the pinned or the pageable GB/s."""
        return self.num_bytes / ((self.pinned_gb_per_s if pinned else self.pageable_gb_per_s) * 1e9) * 1000

    def step_ms(self, pinned: bool) -> float:
        """Milliseconds per step: pinned copies on a side stream overlap the compute (max), pageable ones add to it (sum)."""
        return max(self.copy_ms(True), self.compute_ms) if pinned else self.copy_ms(False) + self.compute_ms

    def hidden(self, pinned: bool) -> bool:
        """True when the copy costs the step nothing: a pinned copy no longer than the compute."""
        return pinned and self.copy_ms(True) <= self.compute_ms

    def verdict(self, pinned: bool) -> str:
        """One line: does this source's copy hide behind the compute, and if not, what it adds per step."""
        kind, copy, extra = "pinned" if pinned else "pageable", self.copy_ms(pinned), self.step_ms(pinned) - self.compute_ms
        if self.hidden(pinned):
            return f"{kind} copy {copy:.2f} ms hides behind {self.compute_ms:g} ms of compute"
        if pinned:
            return f"{kind} copy {copy:.2f} ms is longer than {self.compute_ms:g} ms of compute: +{extra:.2f} ms per step"
        return f"{kind} copy {copy:.2f} ms adds to {self.compute_ms:g} ms of compute: +{extra:.2f} ms per step"

    def plot(self, pinned: bool, ax: Any = None) -> Any:
        """Step time against compute time for both sources, `pinned`'s line and the set compute time highlighted, on `ax` (made if None)."""
        import matplotlib.pyplot as plt

        from helpers.transfer_bench import format_bytes

        if not isinstance(pinned, bool):
            raise TypeError(f"pinned must be True or False, got {short(pinned)}")
        if ax is None:
            _, ax = plt.subplots()
        right = max(2 * self.compute_ms, 2 * self.copy_ms(pinned), 0.2)  # the chosen source's kink stays in view
        compute = np.linspace(0.0, right, 200)
        lines = {True: ("pinned, side stream: max(copy, compute)", "tab:blue", np.maximum(self.copy_ms(True), compute)),
                 False: ("pageable: copy + compute", "tab:orange", self.copy_ms(False) + compute)}
        ax.plot(compute, compute, color="grey", linestyle=":", label="compute alone (no copy)")
        for kind, (label, colour, steps) in lines.items():
            chosen = kind == pinned
            ax.plot(compute, steps, color=colour, linewidth=2.5 if chosen else 1.0, linestyle="-" if chosen else "--",
                    label=label + (" (chosen)" if chosen else ""))
        ax.axvline(self.compute_ms, color="black", linewidth=0.8)
        ax.plot([self.compute_ms], [self.step_ms(pinned)], marker="o", color="black", label=f"your step: {self.step_ms(pinned):.2f} ms")
        ax.set_xlim(0, right)
        ax.set_ylim(0, None)
        ax.set_xlabel("compute ms per step (set by you)")
        ax.set_ylabel("ms per step (model)")
        ax.set_title(f"{format_bytes(self.num_bytes)} per batch: {self.verdict(pinned)}\nGB/s pinned {self.pinned_gb_per_s:.3g}, "
                     f"pageable {self.pageable_gb_per_s:.3g}: {self.bandwidth_source}", fontsize=9)
        ax.legend(loc="best", fontsize=8)  # where it hides the least of the lines
        return ax
