"""Lesson 04's self-checks: copy bandwidth, moving a nested batch, prefetching, a safe device-to-host read."""
from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch

from helpers.checks.core import Answer, Failed, Skipped, Wrong, exercise
from helpers.transfer import move


class _FakeAsyncDevice:
    """A stand-in GPU for exercise 04.1: copy() returns at once and queues 20 ms of work (the first 300 ms); synchronize() waits for it."""

    def __init__(self) -> None:
        self.busy_until = 0.0
        self.copies = 0

    def copy(self) -> None:
        self.busy_until = max(time.perf_counter(), self.busy_until) + (0.3 if self.copies == 0 else 0.02)
        self.copies += 1

    def synchronize(self) -> None:
        time.sleep(max(0.0, self.busy_until - time.perf_counter()))


def gb_per_s_right(copy: Callable[[], None], synchronize: Callable[[], None], num_bytes: int, repeats: int = 5) -> float:
    """Exercise 04.1's reference answer (the tests pass it to the check)."""
    copy()
    synchronize()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        seconds.append(time.perf_counter() - start)
    return num_bytes / sorted(seconds)[len(seconds) // 2] / 1e9


def _gb_without_sync(copy: Callable[[], None], synchronize: Callable[[], None], num_bytes: int, repeats: int = 5) -> float:
    copy()
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
    return num_bytes * repeats / (time.perf_counter() - start) / 1e9


def _gb_mean_with_first(copy: Callable[[], None], synchronize: Callable[[], None], num_bytes: int, repeats: int = 5) -> float:
    copy()
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
    synchronize()
    return num_bytes * repeats / (time.perf_counter() - start) / 1e9


def _gb_no_warmup(copy: Callable[[], None], synchronize: Callable[[], None], num_bytes: int, repeats: int = 5) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
    synchronize()
    return num_bytes * repeats / (time.perf_counter() - start) / 1e9


@exercise("04.1", "gb_per_s", right=gb_per_s_right, wrong=[
    Wrong(_gb_without_sync, "call synchronize() before you read the clock"),
    Wrong(_gb_mean_with_first, "Leave the first (warm-up) copy"),
    Wrong(_gb_no_warmup, "make one untimed warm-up copy"),
])
def check_gb_per_s(answer: Answer) -> str:
    """Exercise 04.1: bandwidth of an asynchronous copy, warmed up and synchronised before each clock read."""
    name = answer.name
    device = _FakeAsyncDevice()
    call = f"{name}(copy, synchronize, num_bytes=200_000_000, repeats=5) on a device whose copies take 20 ms (the first 300 ms)"
    with answer.calling(call):
        got = answer.value(device.copy, device.synchronize, 200_000_000, 5)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise Failed(f"{call} returned {got!r}; expected GB per second as a float")
    if device.copies < 6:
        raise Failed(f"{call} made {device.copies} copies; make one untimed warm-up copy, then time `repeats` copies")
    if got > 12:
        raise Failed(f"{call} returned {got:.1f} GB/s, faster than the device can copy (10 GB/s): copy() only queues "
                     "the work, so call synchronize() before you read the clock")
    if got < 7:
        raise Failed(f"{call} returned {got:.1f} GB/s; the steady rate is 10 GB/s. Leave the first (warm-up) copy "
                     "out of the timing, and divide bytes by seconds (GB = 1e9 bytes)")
    return f"{name} measured {got:.1f} GB/s on a device that copies at 10 GB/s after warm-up"


def _move_top_level(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    return {k: v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def _move_loses_namedtuple(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: _move_loses_namedtuple(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [_move_loses_namedtuple(v, device, non_blocking) for v in batch]
    return batch


def _move_namedtuple_from_generator(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: _move_namedtuple_from_generator(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_move_namedtuple_from_generator(v, device, non_blocking) for v in batch)
    return batch


def _rebuild_hint(exc: Exception) -> str:
    return " (rebuild a namedtuple with type(x)(*moved_fields))" if "required positional argument" in str(exc) else ""


@exercise("04.2", "move_to", right=move, wrong=[
    Wrong(_move_top_level, "recurse into lists and tuples"),
    Wrong(_move_loses_namedtuple, "batch['pair'] came back as list"),
    Wrong(_move_namedtuple_from_generator, "type(x)(*moved_fields)"),
])
def check_move_to(answer: Answer) -> str:
    """Exercise 04.2: every tensor of a nested batch moved to the device, the structure and other values kept."""
    name = answer.name
    pair = collections.namedtuple("Pair", "image mask")
    batch = {"pixels": torch.ones(2, 3), "extra": [torch.arange(2), "id-7", 3], "pair": pair(torch.zeros(1), torch.ones(1))}
    with answer.calling(f"{name}(batch, 'meta', non_blocking=True)", hint=_rebuild_hint):
        got = answer.value(batch, "meta", True)
    if not isinstance(got, dict) or set(got) != set(batch):
        raise Failed(f"{name} returned {type(got).__name__} with keys {sorted(got) if isinstance(got, dict) else '-'}; "
                     "a dict batch must come back as a dict with the same keys")
    if not (isinstance(got["pixels"], torch.Tensor) and got["pixels"].device.type == "meta"):
        raise Failed("batch['pixels'] did not reach the device: move every tensor with tensor.to(device, non_blocking=...)")
    extra = got["extra"]
    if not (isinstance(extra, list) and len(extra) == 3 and isinstance(extra[0], torch.Tensor) and extra[0].device.type == "meta"):
        raise Failed("batch['extra'] must stay a list whose tensor reaches the device: recurse into lists and tuples")
    if extra[1:] != ["id-7", 3]:
        raise Failed(f"batch['extra'][1:] came back as {extra[1:]!r}: leave values that are not tensors unchanged")
    if not (isinstance(got["pair"], pair) and got["pair"].mask.device.type == "meta"):
        raise Failed(f"batch['pair'] came back as {type(got['pair']).__name__}: rebuild a namedtuple with "
                     "type(x)(*moved_fields) so its type and field names survive")
    if batch["pixels"].device.type != "cpu":
        raise Failed(f"{name} changed the input batch; return a new one")
    return f"{name} moved every tensor of a dict/list/namedtuple batch and kept the rest"


class _LoggedBatches:
    """Batches 0..n-1 that log when each is drawn, for exercise 04.3."""

    def __init__(self, n: int, log: list[str]) -> None:
        self.n, self.log = n, log

    def __iter__(self) -> Iterator[int]:
        for index in range(self.n):
            self.log.append(f"draw {index}")
            yield index


def prefetched_right(batches: Iterable[Any], copy: Callable[[Any], Any]) -> Iterator[Any]:
    """Exercise 04.3's reference answer (the tests pass it to the check)."""
    iterator = iter(batches)
    try:
        upcoming = copy(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        current, upcoming = upcoming, copy(batch)
        yield current
    yield upcoming


def _prefetched_naive(batches: Iterable[Any], copy: Callable[[Any], Any]) -> Iterator[Any]:
    for batch in batches:
        yield copy(batch)


def _prefetched_everything_first(batches: Iterable[Any], copy: Callable[[Any], Any]) -> Iterator[Any]:
    yield from [copy(batch) for batch in batches]


def _prefetched_drops_last(batches: Iterable[Any], copy: Callable[[Any], Any]) -> Iterator[Any]:
    iterator = iter(batches)
    upcoming = next(iterator, None)
    if upcoming is None:
        return
    upcoming = copy(upcoming)
    for batch in iterator:
        current, upcoming = upcoming, copy(batch)
        yield current


@exercise("04.3", "prefetched", right=prefetched_right, wrong=[
    Wrong(_prefetched_naive, "start the next copy, then yield the current batch"),
    Wrong(_prefetched_everything_first, "stay one batch ahead"),
    Wrong(_prefetched_drops_last, "expected copy(batch) of each, in order"),
])
def check_prefetched(answer: Answer) -> str:
    """Exercise 04.3: copy(batch k+1) is started before batch k is handed out, one batch ahead at most, order kept."""
    name = answer.name
    log: list[str] = []

    def copy(batch: int) -> tuple[str, int]:
        log.append(f"copy {batch}")
        return ("copied", batch)

    received = []
    with answer.calling(f"iterating {name}(batches, copy)"):
        for item in answer.value(_LoggedBatches(4, log), copy):
            log.append(f"use {item[1] if isinstance(item, tuple) and len(item) == 2 else item!r}")
            received.append(item)
        empty = list(answer.value([], copy))
    expected = [("copied", k) for k in range(4)]
    if received != expected:
        raise Failed(f"{name} over batches 0-3 yielded {received!r}; expected copy(batch) of each, in order: {expected!r}")
    if empty:
        raise Failed(f"{name} over no batches yielded {empty!r}; it should yield nothing")
    for k in range(3):
        if log.index(f"copy {k + 1}") > log.index(f"use {k}"):
            raise Failed(f"batch {k} was handed out before batch {k + 1}'s copy started (events: {', '.join(log)}): "
                         "start the next copy, then yield the current batch, so the copy runs during the step")
    for k in range(2):
        if log.index(f"draw {k + 2}") < log.index(f"use {k}"):
            raise Failed(f"batch {k + 2} was drawn before batch {k} was used (events: {', '.join(log)}): "
                         "stay one batch ahead; drawing everything first holds the whole epoch in GPU memory")
    return f"{name} copies each next batch before handing out the current one, one ahead, in order"


def read_back_right(gpu_tensor: torch.Tensor) -> torch.Tensor:
    """Exercise 04.4's reference answer (the tests pass it to the check)."""
    out = gpu_tensor.to("cpu", non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return out


@exercise("04.4", "read_back", right=read_back_right, needs_cuda=True, wrong=[
    Wrong(lambda gpu_tensor: gpu_tensor.to("cpu", non_blocking=True), "the copy had not landed"),
])
def check_safe_read(answer: Answer) -> str:
    """Exercise 04.4 (CUDA GPU): a device-to-host read whose values are right even behind a slow kernel."""
    name = answer.name
    answer.probe(torch.zeros(4))  # a CPU tensor: only tells a stub from an answer
    if not torch.cuda.is_available():
        raise Skipped(f"this check needs a CUDA GPU, and torch.cuda.is_available() is False here: {name} was not tested")
    fresh = time.perf_counter_ns() % 1_000_000  # new values each run: pinned memory reused from a previous run cannot match
    for value in (float(fresh + 1), float(fresh + 2)):
        on_gpu = torch.full((2**24,), value, device="cuda")
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # the copy has to wait behind ~0.1 s of GPU work
        with answer.calling(f"{name}(gpu_tensor)"):
            got = answer.value(on_gpu)
        if not isinstance(got, torch.Tensor) or got.device.type != "cpu":
            raise Failed(f"{name} returned {type(got).__name__} on {getattr(got, 'device', '?')}; return a CPU tensor")
        if not bool((got == value).all()):
            raise Failed(f"{name} returned a CPU tensor whose values were not all {value} when read: the copy had "
                         "not landed. Synchronise (torch.cuda.current_stream().synchronize()) before returning it")
    return f"{name} returned the right values even with a slow kernel queued ahead of the copy"
