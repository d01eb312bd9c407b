"""The host-memory copy the DataLoader's pin thread makes per pageable batch, timed on one thread as it runs (lesson 04).

helpers.transfer re-exports every public name here (`transfer.host_copy_sweep`, ...).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from helpers._validate import as_int
from helpers.transfer.bench import in_pin_thread, interleaved_medians, median_seconds
from helpers.transfer.copies import GB, format_bytes


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
