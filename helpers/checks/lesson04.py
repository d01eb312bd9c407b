"""Lesson 04's self-checks: copy bandwidth, moving a nested batch, prefetching, a safe device-to-host read."""
from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

from helpers.checks.core import Answer, Failed, Skipped, StandInClock, Wrong, exercise
from helpers.transfer import move


class _FakeAsyncDevice:
    """A stand-in GPU for exercise 04.1 on a stand-in clock: copy() takes the host 1 ms to queue 20 ms of device work
    (the first copy 300 ms); synchronize() waits until the queued work is done."""

    QUEUE_S = 0.001

    def __init__(self, clock: StandInClock) -> None:
        self.clock = clock
        self.busy_until = clock.now
        self.copies = 0

    def copy(self) -> None:
        self.busy_until = max(self.clock.now, self.busy_until) + (0.3 if self.copies == 0 else 0.02)
        self.copies += 1
        self.clock.advance(self.QUEUE_S)

    def synchronize(self) -> None:
        self.clock.wait_until(self.busy_until)


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


def _gb_seconds(copy: Callable[[], None], synchronize: Callable[[], None], num_bytes: int, repeats: int = 5) -> float:
    return num_bytes / gb_per_s_right(copy, synchronize, num_bytes, repeats) / 1e9  # seconds per copy, not GB/s


def _gb_wall_clock(copy: Callable[[], None], synchronize: Callable[[], None], num_bytes: int, repeats: int = 5) -> float:
    copy()
    synchronize()
    start = time.time()
    for _ in range(repeats):
        copy()
        synchronize()
    return num_bytes * repeats / max(time.time() - start, 1e-9) / 1e9


@exercise("04.1", "gb_per_s", right=gb_per_s_right, wrong=[
    Wrong(_gb_without_sync, "call synchronize() before you read the clock"),
    Wrong(_gb_mean_with_first, "Leave the first (warm-up) copy"),
    Wrong(_gb_no_warmup, "make one untimed warm-up copy"),
    Wrong(lambda copy, synchronize, num_bytes, repeats=5: gb_per_s_right(copy, synchronize, num_bytes, repeats) * 1e9 / 2**30,
          "divide bytes by 1e9 (GB), not 2**30 (GiB)"),
    Wrong(lambda copy, synchronize, num_bytes, repeats=5: gb_per_s_right(copy, synchronize, num_bytes, repeats) * 1e9,
          "bytes per second. Divide bytes by 1e9"),
    Wrong(_gb_seconds, "the seconds a copy takes"),
    Wrong(_gb_wall_clock, "never read time.perf_counter()"),
])
def check_gb_per_s(answer: Answer) -> str:
    """Exercise 04.1: bandwidth of an asynchronous copy, warmed up and synchronised before each clock read."""
    name = answer.name
    clock = StandInClock()
    device = _FakeAsyncDevice(clock)
    num_bytes, right = 200_000_000, 10.0  # 200 MB in 20 ms
    call = (f"{name}(copy, synchronize, num_bytes=200_000_000, repeats=5) on a stand-in device whose copies take 20 ms "
            "(the first 300 ms) and return after 1 ms, before the copy is done")
    with clock.reading(answer.value), answer.calling(call):
        got = answer.value(device.copy, device.synchronize, num_bytes, 5)
    if isinstance(got, bool) or not isinstance(got, (int, float)):
        raise Failed(f"{call} returned {got!r}; expected GB per second as a float")
    if clock.reads == 0:
        raise Failed(f"{call} never read time.perf_counter(): time the copies with time.perf_counter() (the check "
                     "replaces it with the stand-in device's clock, so other clocks see no time pass)")
    if device.copies < 6:
        raise Failed(f"{call} made {device.copies} copies; make one untimed warm-up copy, then time `repeats` copies")
    if math.isclose(got, right, rel_tol=1e-6):
        return f"{name} measured {got:.1f} GB/s, the stand-in device's rate after warm-up"
    if got > 1000:
        unit = {1e9: "bytes", 1e6: "kB", 1e3: "MB"}.get(next((f for f in (1e9, 1e6, 1e3) if math.isclose(got, right * f, rel_tol=1e-6)), 0))
        measured = f"{unit} per second" if unit else "far more than any copy"
        raise Failed(f"{call} returned {got:.4g}: {measured}. Divide bytes by 1e9 to get GB, then by the seconds a copy "
                     f"took ({num_bytes:_} bytes in 20 ms is {right:.0f} GB/s)")
    if math.isclose(got, right * 1e9 / 2**30, rel_tol=1e-6):
        raise Failed(f"{call} returned {got:.3f}, GiB per second: divide bytes by 1e9 (GB), not 2**30 (GiB); "
                     f"expected {right:.0f} GB/s")
    if got < 1 and math.isclose(got, 0.02, rel_tol=1e-6):
        raise Failed(f"{call} returned {got:.3g}, the seconds a copy takes: return num_bytes / seconds / 1e9 (GB/s)")
    if got > right:
        raise Failed(f"{call} returned {got:.1f} GB/s, faster than the device can copy ({right:.0f} GB/s): copy() only "
                     "queues the work, so call synchronize() before you read the clock")
    raise Failed(f"{call} returned {got:.1f} GB/s; the steady rate is {right:.0f} GB/s. Leave the first (warm-up) copy "
                 "out of the timing: synchronize() after it, then start the clock, and divide bytes by seconds (GB = 1e9 bytes)")


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


def _move_tuple_as_list(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: _move_tuple_as_list(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(_move_tuple_as_list(v, device, non_blocking) for v in batch))
    if isinstance(batch, (list, tuple)):
        return [_move_tuple_as_list(v, device, non_blocking) for v in batch]
    return batch


def _move_lists_in_place(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    if isinstance(batch, list):
        for index, value in enumerate(batch):
            batch[index] = _move_lists_in_place(value, device, non_blocking)
        return batch
    return move(batch, device, non_blocking) if not isinstance(batch, dict) else {
        k: _move_lists_in_place(v, device, non_blocking) for k, v in batch.items()}


def _rebuild_hint(exc: Exception) -> str:
    return " (rebuild a namedtuple with type(x)(*moved_fields))" if "required positional argument" in str(exc) else ""


@contextmanager
def _recording_to(flags: list[bool]) -> Iterator[None]:
    """In the block, every tensor.to(...) call appends the non_blocking it was given (the first bool argument) to `flags`."""
    original = torch.Tensor.to

    def to(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        flags.append(bool(kwargs.get("non_blocking", next((a for a in args if isinstance(a, bool)), False))))
        return original(self, *args, **kwargs)

    torch.Tensor.to = to  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.Tensor.to = original  # type: ignore[method-assign]


def _snapshot(batch: Any) -> list[tuple[str, int]]:
    """Every container and leaf of `batch` by identity, depth first: a batch changed in place gives another snapshot."""
    found = [(type(batch).__name__, id(batch))]
    if isinstance(batch, dict):
        for value in batch.values():
            found += _snapshot(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            found += _snapshot(value)
    return found


@exercise("04.2", "move_to", right=move, wrong=[
    Wrong(_move_top_level, "recurse into lists and tuples"),
    Wrong(_move_loses_namedtuple, "batch['pair'] came back as list"),
    Wrong(_move_namedtuple_from_generator, "type(x)(*moved_fields)"),
    Wrong(lambda batch, device, non_blocking=False: move(batch, device), "0 with non_blocking=True"),  # ignores non_blocking
    Wrong(lambda batch, device, non_blocking=False: move(batch, device, True), "non_blocking=False) still called"),
    Wrong(_move_tuple_as_list, "a tuple must stay a tuple"),
    Wrong(_move_lists_in_place, "changed the input batch"),
])
def check_move_to(answer: Answer) -> str:
    """Exercise 04.2: every tensor of a nested batch moved with the given non_blocking, the structure and other values kept."""
    name = answer.name
    pair = collections.namedtuple("Pair", "image mask")
    batch = {"pixels": torch.ones(2, 3), "extra": [torch.arange(2), "id-7", 3], "pair": pair(torch.zeros(1), torch.ones(1)),
             "sizes": (torch.tensor([2, 3]), "hw")}
    before = _snapshot(batch)
    flags: list[bool] = []
    with _recording_to(flags), answer.calling(f"{name}(batch, 'meta', non_blocking=True)", hint=_rebuild_hint):
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
    sizes = got["sizes"]
    if type(sizes) is not tuple:
        raise Failed(f"batch['sizes'] came back as {type(sizes).__name__}: a tuple must stay a tuple "
                     "(type(x)(moved_items) rebuilds lists and plain tuples alike)")
    if not (len(sizes) == 2 and isinstance(sizes[0], torch.Tensor) and sizes[0].device.type == "meta" and sizes[1] == "hw"):
        raise Failed(f"batch['sizes'] came back as {sizes!r}: move the tuple's tensor, keep its other values")
    if _snapshot(batch) != before or batch["pixels"].device.type != "cpu":
        raise Failed(f"{name} changed the input batch (its containers now hold other objects): build new dicts, lists "
                     "and tuples and return them, leaving the input as it was")
    if len(flags) < 5 or not all(flags):
        raise Failed(f"{name}(batch, 'meta', non_blocking=True) made {len(flags)} tensor.to calls for 5 tensors, "
                     f"{flags.count(True)} with non_blocking=True: pass it on, tensor.to(device, non_blocking=non_blocking)")
    flags.clear()
    with _recording_to(flags), answer.calling(f"{name}(batch, 'meta', non_blocking=False)", hint=_rebuild_hint):
        answer.value(batch, "meta", False)
    if any(flags):
        raise Failed(f"{name}(batch, 'meta', non_blocking=False) still called tensor.to with non_blocking=True: "
                     "pass the argument on, tensor.to(device, non_blocking=non_blocking)")
    return f"{name} moved every tensor of a dict/list/tuple/namedtuple batch with the given non_blocking and kept the rest"


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


def _empty_hint(exc: Exception) -> str:
    if isinstance(exc, RuntimeError) and "StopIteration" in str(exc):
        return (". An empty loader must end the generator cleanly: next() raised StopIteration, and a StopIteration "
                "inside a generator becomes RuntimeError. Catch it (try/except StopIteration: return) or use next(iterator, sentinel)")
    return ""


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


def _prefetched_bare_next(batches: Iterable[Any], copy: Callable[[Any], Any]) -> Iterator[Any]:
    iterator = iter(batches)
    upcoming = copy(next(iterator))  # no batches: StopIteration here becomes RuntimeError
    for batch in iterator:
        current, upcoming = upcoming, copy(batch)
        yield current
    yield upcoming


@exercise("04.3", "prefetched", right=prefetched_right, wrong=[
    Wrong(_prefetched_naive, "start the next copy, then yield the current batch"),
    Wrong(_prefetched_everything_first, "stay one batch ahead"),
    Wrong(_prefetched_drops_last, "expected copy(batch) of each, in order"),
    Wrong(_prefetched_bare_next, "An empty loader must end the generator cleanly"),
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
    expected = [("copied", k) for k in range(4)]
    if received != expected:
        raise Failed(f"{name} over batches 0-3 yielded {received!r}; expected copy(batch) of each, in order: {expected!r}")
    for k in range(3):
        if log.index(f"copy {k + 1}") > log.index(f"use {k}"):
            raise Failed(f"batch {k} was handed out before batch {k + 1}'s copy started (events: {', '.join(log)}): "
                         "start the next copy, then yield the current batch, so the copy runs during the step")
    for k in range(2):
        if log.index(f"draw {k + 2}") < log.index(f"use {k}"):
            raise Failed(f"batch {k + 2} was drawn before batch {k} was used (events: {', '.join(log)}): "
                         "stay one batch ahead; drawing everything first holds the whole epoch in GPU memory")
    with answer.calling(f"iterating {name}([], copy), a loader with no batches", hint=_empty_hint):
        empty = list(answer.value([], copy))
    if empty:
        raise Failed(f"{name} over no batches yielded {empty!r}; it should yield nothing")
    return f"{name} copies each next batch before handing out the current one, one ahead, in order, and ends cleanly with no batches"


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
