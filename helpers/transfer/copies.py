"""Host-to-device copies (lesson 04), the tools to keep in your own training code: `move` a nested batch, `CUDAPrefetcher`,
and a batch's size in bytes (`batch_bytes`, `image_batch_bytes`, `format_bytes`). helpers.transfer re-exports them.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from helpers._validate import as_device as _as_device
from helpers._validate import as_int, short
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


GB = 1e9  # bandwidth is quoted in decimal GB/s, as NVIDIA and PCIe specifications do


def format_bytes(num_bytes: float) -> str:
    """A size for people: 4 KiB, 16 MiB, 1.0 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= scale:
            value = num_bytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{int(num_bytes)} B"
