"""Host-to-device copies (lesson 04), the tools to keep in your own training code: `move` a nested batch, `CUDAPrefetcher`.

The measurements lesson 04 makes with them (bandwidth, pinning costs, timelines) are in helpers.transfer_bench.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch

from helpers._validate import as_device as _as_device
from helpers._validate import short
from helpers.batches import map_leaves, tensors


def move(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    """`batch` with every tensor moved to `device`, through tuples, lists and dicts; other values unchanged (lesson 04)."""
    return map_leaves(batch, lambda leaf: leaf.to(device, non_blocking=non_blocking) if isinstance(leaf, torch.Tensor) else leaf)


class CUDAPrefetcher:
    """`for batch in CUDAPrefetcher(loader, device)`: copies batch k+1 on a side stream while step k runs; plain pass-through off CUDA (lesson 04)."""

    def __init__(self, loader: Iterable[Any], device: Any) -> None:
        if not isinstance(loader, Iterable):
            raise TypeError(f"loader must be iterable (a DataLoader or a list of batches), got {short(loader)}")
        self.loader = loader
        self.device = as_device(device)

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[Any]:
        if self.device.type != "cuda":
            yield from self.loader  # no streams on a CPU: the batches are already where the step runs
            return
        side = torch.cuda.Stream(self.device)
        batches = iter(self.loader)

        def copy_next() -> Any:
            batch = next(batches, _END)
            if batch is _END:
                return _END
            with torch.cuda.stream(side):  # queued on the side stream: the compute stream is not held up
                return move(batch, self.device, non_blocking=True)

        upcoming = copy_next()
        while upcoming is not _END:
            compute = torch.cuda.current_stream(self.device)
            compute.wait_stream(side)  # the step's kernels start only after the copy has landed
            for tensor in tensors(upcoming):
                tensor.record_stream(compute)  # keep the allocator from reusing this memory while the step uses it
            batch, upcoming = upcoming, copy_next()  # batch k+1's copy is queued before step k computes
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
