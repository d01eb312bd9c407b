"""Lesson 04's self-checks: copy bandwidth, moving a nested batch, prefetching, a safe device-to-host read."""
from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import torch

from helpers.checks.core import Answer, Failed, Skipped, Wrong, exercise
from helpers.checks.lesson04_cases import (
    COPY_RUNS, CopyRun, StandInDevice, WatchedClock, count_tensors, moved_batch_problem, nested_batches, rate_mistake)
from helpers.transfer import move


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
    for run in COPY_RUNS:
        _copy_run(answer, run)
    return (f"{answer.name} measured the median rate after one untimed warm-up on stand-in devices "
            f"({', '.join(f'{run.right:g} GB/s with repeats={run.repeats}' for run in COPY_RUNS)})")


def _copy_run(answer: Answer, run: CopyRun) -> None:
    """Call the answer on one stand-in device; raise Failed naming the first thing to change."""
    clock = WatchedClock()
    device = StandInDevice(clock, run.seconds)
    timed = ", ".join(f"{s * 1000:g}" for s in run.timed)
    call = (f"{answer.name}(copy, synchronize, num_bytes={run.num_bytes:_}, repeats={run.repeats}) on a stand-in "
            f"device whose copies return after 1 ms and take 300 ms (the warm-up), then {timed} ms")
    with clock.reading(answer.value), answer.calling(call):
        got = answer.value(device.copy, device.synchronize, run.num_bytes, run.repeats)
    if isinstance(got, (bool, np.bool_)) or not isinstance(got, (int, float, np.integer, np.floating)):
        raise Failed(f"{call} returned {got!r}; expected GB per second as a float")
    if clock.reads == 0:
        raise Failed(f"{call} never read time.perf_counter(): time the copies with time.perf_counter() (the check "
                     "replaces it with the stand-in device's clock, so other clocks see no time pass)")
    if device.copies == run.repeats:
        raise Failed(f"{call} made {device.copies} copies, all timed: make one untimed warm-up copy, then time "
                     "`repeats` copies")
    if device.copies != run.repeats + 1:
        raise Failed(f"{call} made {device.copies} copies; expected {run.repeats + 1}: make one untimed warm-up copy, "
                     f"then time exactly `repeats` copies (use the argument, here {run.repeats})")
    for _queued, running in clock.notes:
        if 0 in running:
            raise Failed(f"{call} read the clock while the warm-up copy was still running, so its 300 ms end up in "
                         "the timing. Leave the first (warm-up) copy out of the timing: synchronize() after it, "
                         "then start the clock")
        if running:
            raise Failed(f"{call} read the clock while copy {running[0]} was still running: copy() only queues the "
                         "work, so call synchronize() before you read the clock")
    got = float(got)
    if math.isclose(got, run.right, rel_tol=1e-6):
        return
    raise Failed(f"{call} returned {got:.4g}; expected {run.right:g} GB/s: {rate_mistake(got, run, clock)}")


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
    if "tuple expected at most 1 argument" in str(exc):
        return " (type(x)(*fields) is for namedtuples only: rebuild a plain tuple with tuple(moved_items))"
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
    name, tensors = answer.name, sum(count_tensors(batch) for _, batch in nested_batches())
    for non_blocking in (True, False):
        flags: list[bool] = []
        with _recording_to(flags):
            problem = moved_batch_problem(answer, _rebuild_hint, non_blocking)
        if problem:
            raise Failed(problem)
        if non_blocking and (len(flags) < tensors or not all(flags)):
            raise Failed(f"{name}(batch, 'meta', non_blocking=True) made {len(flags)} tensor.to calls for {tensors} "
                         f"tensors, {flags.count(True)} with non_blocking=True: pass it on, "
                         "tensor.to(device, non_blocking=non_blocking)")
        if not non_blocking and any(flags):
            raise Failed(f"{name}(batch, 'meta', non_blocking=False) still called tensor.to with non_blocking=True: "
                         "pass the argument on, tensor.to(device, non_blocking=non_blocking)")
    return (f"{name} moved every tensor of dict, list, tuple, namedtuple and bare-tensor batches with the given "
            "non_blocking, and kept the rest")


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


def _iterable_hint(exc: Exception) -> str:
    if isinstance(exc, RuntimeError) and "StopIteration" in str(exc):
        return (". An empty loader must end the generator cleanly: next() raised StopIteration, and a StopIteration "
                "inside a generator becomes RuntimeError. Catch it (try/except StopIteration: return) or use next(iterator, sentinel)")
    if isinstance(exc, TypeError) and any(w in str(exc) for w in ("len()", "subscriptable", "not an iterator")):
        return (". batches can be any iterable (a DataLoader, a list, a generator) with no len() or indexing: take "
                "iterator = iter(batches) once and walk it with next()")
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

    for count, batches, label in ((4, _LoggedBatches(4, log), "batches 0-3"), (1, iter(_LoggedBatches(1, log)),
                                  "a generator of one batch"), (0, [], "[] (no batches)")):
        log.clear()
        received = []
        with answer.calling(f"iterating {name}({label}, copy)", hint=_iterable_hint):
            for item in answer.value(batches, copy):
                log.append(f"use {item[1] if isinstance(item, tuple) and len(item) == 2 else item!r}")
                received.append(item)
        expected = [("copied", k) for k in range(count)]
        if received != expected:
            raise Failed(f"{name} over {label} yielded {received!r}; expected copy(batch) of each, in order: {expected!r}")
        again = next((k for k in range(count) if log.count(f"copy {k}") > 1), None)
        if again is not None:
            raise Failed(f"copy(batch) ran {log.count(f'copy {again}')} times for batch {again} (events: "
                         f"{', '.join(log)}): call it once per batch and yield what it returned")
        _check_order(log, count)
    return (f"{name} copies each next batch before handing out the current one, one ahead, in order, copies each batch "
            "once, and works on a list, a generator and no batches")


def _check_order(log: list[str], count: int) -> None:
    """Raise Failed unless each next copy started before the current batch was used, and no batch was drawn early."""
    for k in range(count - 1):
        if log.index(f"copy {k + 1}") > log.index(f"use {k}"):
            raise Failed(f"batch {k} was handed out before batch {k + 1}'s copy started (events: {', '.join(log)}): "
                         "start the next copy, then yield the current batch, so the copy runs during the step")
    for k in range(count - 2):
        if f"draw {k + 2}" in log and log.index(f"draw {k + 2}") < log.index(f"use {k}"):
            raise Failed(f"batch {k + 2} was drawn before batch {k} was used (events: {', '.join(log)}): "
                         "stay one batch ahead; drawing everything first holds the whole epoch in GPU memory")


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
    for value, shape, dtype in ((fresh + 1, (2**26,), torch.float32), (fresh + 2, (2**13, 2**12), torch.int32)):
        on_gpu = torch.full(shape, value, dtype=dtype, device="cuda")
        torch.cuda.synchronize()
        torch.cuda._sleep(200_000_000)  # the copy has to wait behind ~0.1 s of GPU work
        with answer.calling(f"{name}(gpu_tensor)"):
            got = answer.value(on_gpu)
        copied = torch.cuda.current_stream().query()  # False: work queued before the return (the copy) still runs
        if not isinstance(got, torch.Tensor) or got.device.type != "cpu":
            raise Failed(f"{name} returned {type(got).__name__} on {getattr(got, 'device', '?')}; return a CPU tensor")
        if (got.shape, got.dtype) != (on_gpu.shape, on_gpu.dtype):
            raise Failed(f"{name} returned shape {tuple(got.shape)} and dtype {got.dtype} for a {dtype} tensor of "
                         f"shape {shape}: return the copy itself, same shape and dtype")
        if not copied or not bool((got == value).all()):
            raise Failed(f"{name} returned {'before its copy had finished' if not copied else f'values not all {value}'}"
                         " (the copy queued behind a slow kernel): the copy had not landed when it was read. Synchronise "
                         "(torch.cuda.current_stream().synchronize()) after the copy, not before it, then return")
        if not got.is_pinned():
            raise Failed(f"{name} returned the right values in pageable memory: a blocking copy (.cpu()) is safe but "
                         "not the task. Copy with gpu_tensor.to('cpu', non_blocking=True) (the result lands in pinned "
                         "memory), then synchronise before returning it")
    return f"{name} returned the right values even with a slow kernel queued ahead of the copy"
