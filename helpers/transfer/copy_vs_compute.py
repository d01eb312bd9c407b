"""One training step's host-to-device copy against its compute, read off a measured bandwidth (lesson 04's widget).

helpers.transfer re-exports every public name here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers._validate import as_fraction, as_int, short
from helpers.transfer.bench import BandwidthSweep
from helpers.transfer.copies import format_bytes


def rate_at(sweep: Any, num_bytes: int, pinned: bool) -> float:
    """GB/s of a `num_bytes` copy read off a measured BandwidthSweep: interpolated over log size between sizes, the end value outside them (lesson 04)."""
    if not isinstance(sweep, BandwidthSweep):
        raise TypeError(f"sweep must be a helpers.transfer.BandwidthSweep, got {short(sweep)} of type {type(sweep).__name__}")
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
