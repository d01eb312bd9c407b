"""Lesson 04's check tables: the stand-in device of 04.1 and the nested batches of 04.2 with a first-difference finder."""
from __future__ import annotations

import collections
import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from helpers.checks.core import Answer, StandInClock

STEADY_S = 0.02  # a timed copy on the stand-in device
QUEUE_S = 0.001  # what copy() costs the host before it returns


@dataclass(frozen=True)
class CopyRun:
    """One call of 04.1's check: repeats, bytes per copy and each copy's device seconds (the warm-up first)."""

    repeats: int
    num_bytes: int
    seconds: tuple[float, ...]

    @property
    def timed(self) -> list[float]:
        """The seconds of the `repeats` copies after the warm-up."""
        return list(self.seconds[1:1 + self.repeats])

    @property
    def right(self) -> float:
        """The median rate in GB/s, worked out from the copy times alone."""
        return self.num_bytes / statistics.median(self.timed) / 1e9

    def likely_mistakes(self) -> dict[str, float]:
        """What known mistakes return on this run: name -> value."""
        timed, gb = self.timed, self.num_bytes / 1e9
        return {
            "fastest": gb / min(timed),
            "slowest": gb / max(timed),
            "mean": gb / statistics.mean(timed),
            "mean of rates": statistics.mean(gb / s for s in timed),
            "total": gb / sum(timed),
            "GiB": self.right * 1e9 / 2**30,
            "bits": self.right * 8,
            "ms": self.right / 1000,
            "seconds": statistics.median(timed),
            "milliseconds": statistics.median(timed) * 1000,
            "bytes": self.right * 1e9,
            "kB": self.right * 1e6,
            "MB": self.right * 1e3,
        }


# The hiccup (a 60 ms copy among about 20 ms ones) tells a median from a mean; copies of 18-22 ms tell it from the best
# (fastest) and the worst copy; repeats=1 tells a warm-up left running. With repeats=4 the two middle copies tie (20 ms),
# so every median (numpy's, statistics', the upper middle, the median of the rates) gives the same rate.
COPY_RUNS = (
    CopyRun(5, 200_000_000, (0.3, 0.022, 0.018, 0.06, STEADY_S, 0.019)),
    CopyRun(1, 50_000_000, (0.3, STEADY_S)),
    CopyRun(4, 200_000_000, (0.3, 0.022, STEADY_S, 0.019, STEADY_S)),
)


def rate_mistake(got: float, run: CopyRun, clock: WatchedClock) -> str:
    """The likely mistake behind a wrong rate whose copies were timed as the task says."""
    seen = next((name for name, value in run.likely_mistakes().items() if math.isclose(got, value, rel_tol=1e-6)), "")
    right, median_ms = f"{run.right:g}", statistics.median(run.timed) * 1000
    if seen in ("fastest", "slowest"):
        return (f"that is the {seen} copy's rate (the {'best' if seen == 'fastest' else 'worst'} time, or the "
                f"{'max' if seen == 'fastest' else 'min'} of the rates). Return the median of the {run.repeats} timed "
                "copies (statistics.median), as the task asks: the typical copy, not the luckiest or unluckiest one")
    if seen in ("mean", "mean of rates"):
        return (f"that is the {seen}, skewed by the one slow copy. Return the median (statistics.median) of the "
                f"{run.repeats} timed copies, as the task asks")
    if seen == "total":
        return ("one copy's bytes over the time of all the timed copies. Time each copy on its own (a clock read "
                "before and after it) and take the median")
    if seen == "GiB":
        return f"GiB per second: divide bytes by 1e9 (GB), not 2**30 (GiB); expected {right} GB/s"
    if seen == "bits":
        return "gigabits per second: bytes times 8. Return bytes / seconds / 1e9 (GB, not Gb)"
    if seen in ("bytes", "kB", "MB"):
        return f"{seen} per second. Divide bytes by 1e9 to get GB, then by the seconds a copy took"
    if seen == "ms":
        return ("a thousandth of the rate: the copy times went in as milliseconds. Differences of time.perf_counter() "
                "are seconds: divide bytes by them unscaled, then by 1e9")
    if seen in ("seconds", "milliseconds"):
        return f"the {seen} a copy takes: return num_bytes / seconds / 1e9 (GB/s)"
    if float(got).is_integer() and abs(got - run.right) <= 1:  # int() of 9.999... (float clock sums) gives 9
        return "that is the rate rounded to a whole number: return the float itself, not int() or round() of it"
    if clock.notes and clock.notes[0][0] == 0:
        return ("the clock started before the warm-up copy, so its 300 ms are in the timing. Leave the first "
                "(warm-up) copy out of the timing: synchronize() after it, then start the clock")
    return (f"the median copy took {median_ms:g} ms for {run.num_bytes:_} bytes. Time each copy from a clock read "
            "to a clock read after synchronize(), and return num_bytes / median seconds / 1e9")


class WatchedClock(StandInClock):
    """A stand-in clock that notes, at each read, how many copies were queued and which were still running."""

    def __init__(self) -> None:
        super().__init__()
        self.device: StandInDevice | None = None
        self.notes: list[tuple[int, list[int]]] = []  # per read: (copies queued so far, copies still running)

    def _note(self) -> None:
        device = self.device
        if device is not None:
            running = [k for k, end in enumerate(device.ends) if end > self.now + 1e-12]
            self.notes.append((len(device.ends), running))

    def _seconds(self) -> float:
        self._note()
        return super()._seconds()

    def _nanoseconds(self) -> int:
        self._note()
        return super()._nanoseconds()


class StandInDevice:
    """A stand-in GPU for 04.1: copy() queues `seconds[k]` of device work and returns after 1 ms; synchronize() waits."""

    def __init__(self, clock: WatchedClock, seconds: Sequence[float]) -> None:
        self.clock, self.seconds = clock, tuple(seconds)
        self.ends: list[float] = []  # when each queued copy finishes
        clock.device = self

    def copy(self) -> None:
        """Queue one copy behind the others and return after QUEUE_S."""
        k = len(self.ends)
        duration = self.seconds[k] if k < len(self.seconds) else STEADY_S
        self.ends.append(max(self.clock.now, self.ends[-1] if self.ends else self.clock.now) + duration)
        self.clock.advance(QUEUE_S)

    def synchronize(self) -> None:
        """Wait until every queued copy has finished."""
        if self.ends:
            self.clock.wait_until(self.ends[-1])

    @property
    def copies(self) -> int:
        """Copies queued so far."""
        return len(self.ends)


Pair = collections.namedtuple("Pair", "image mask")


def nested_batches() -> list[tuple[str, Any]]:
    """Fresh batches for 04.2 (name, batch): a dict with every container kind, a list, a bare tensor, empty ones."""
    return [
        ("a dict batch", {"pixels": torch.ones(2, 3), "extra": [torch.arange(2), "id-7", 3],
                          "pair": Pair(torch.zeros(1), torch.ones(1, dtype=torch.float16)),
                          "sizes": (torch.tensor([2, 3]), "hw"), "name": "img-7.png", "index": 7, "scale": 0.5,
                          "nested": {"depth": [{"mask": torch.ones(1, dtype=torch.bool)}]}}),
        ("a list batch", [torch.ones(3), (torch.zeros(2), None), [], (), {}, "label"]),
        ("a bare tensor", torch.arange(4)),
    ]


def count_tensors(batch: Any) -> int:
    """How many tensors `batch` holds, through dicts, lists and tuples."""
    if isinstance(batch, torch.Tensor):
        return 1
    if isinstance(batch, dict):
        return sum(count_tensors(v) for v in batch.values())
    if isinstance(batch, (list, tuple)):
        return sum(count_tensors(v) for v in batch)
    return 0


def snapshot(batch: Any) -> list[tuple[str, int]]:
    """Every container and leaf of `batch` by identity, depth first: a batch changed in place gives another snapshot."""
    found = [(type(batch).__name__, id(batch))]
    if isinstance(batch, dict):
        for value in batch.values():
            found += snapshot(value)
    elif isinstance(batch, (list, tuple)):
        for value in batch:
            found += snapshot(value)
    return found


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if isinstance(value, (str, int, float, type(None))) else type(value).__name__


def first_difference(got: Any, given: Any, path: str, device: str) -> str | None:
    """Where `got` differs from `given` moved to `device` (every tensor moved, the rest the same), and what to change."""
    where = f"batch{path}"
    if isinstance(given, torch.Tensor):
        if not isinstance(got, torch.Tensor):
            return f"{where}, a tensor, came back as {_kind(got)}: move it with tensor.to(device, non_blocking=...)"
        if got.device.type != device:
            return (f"{where} stayed on {got.device.type}: recurse into lists and tuples (and dicts) until you reach the "
                    "tensors, and move each with tensor.to(device, non_blocking=non_blocking)")
        if (got.shape, got.dtype) != (given.shape, given.dtype):
            return (f"{where} came back with shape {tuple(got.shape)} and dtype {got.dtype}, expected "
                    f"{tuple(given.shape)} and {given.dtype}: tensor.to(device) only, no dtype or reshaping")
        return None
    if isinstance(given, dict):
        if not isinstance(got, dict):
            return f"{where}, a dict, came back as {_kind(got)}: a dict must come back as a dict with the same keys"
        if set(got) != set(given):
            missing, extra = sorted(set(given) - set(got), key=str), sorted(set(got) - set(given), key=str)
            lost = ", ".join(f"{k!r} ({_kind(given[k])})" for k in missing)
            return (f"{where} came back with keys {sorted(got, key=str)}" + (f", without {lost}" if missing else "")
                    + (f", with extra {extra}" if extra else "") + ": keep every key, and leave values that are not "
                    "tensors unchanged")
        return next((d for k in given if (d := first_difference(got[k], given[k], f"{path}[{k!r}]", device))), None)
    if isinstance(given, tuple) and hasattr(given, "_fields"):
        if type(got) is not type(given):
            return (f"{where} came back as {type(got).__name__}: rebuild a namedtuple with type(x)(*moved_fields) so "
                    "its type and field names survive")
    elif isinstance(given, (list, tuple)) and type(got) is not type(given):
        kind = type(given).__name__
        return (f"{where} came back as {type(got).__name__}: a {kind} must stay a {kind} "
                "(type(x)(moved_items) rebuilds lists and plain tuples alike)")
    if isinstance(given, (list, tuple)):
        if len(got) != len(given):
            return f"{where} came back with {len(got)} items, expected {len(given)}: keep every item, tensor or not"
        return next((d for i, (a, b) in enumerate(zip(got, given)) if (d := first_difference(a, b, f"{path}[{i}]", device))),
                    None)
    if type(got) is not type(given) or got != given:
        hint = (" (a str is a Sequence too: recurse only into lists and tuples)" if isinstance(given, str) else
                " (only tensors move: ids and sizes stay Python values)" if isinstance(got, torch.Tensor) else "")
        return f"{where} came back as {_kind(got)}, not {_kind(given)}: leave values that are not tensors unchanged{hint}"
    return None


def moved_batch_problem(answer: Answer, hint: Callable[[Exception], str], non_blocking: bool) -> str | None:
    """Call the answer on each nested batch; the first difference from a right move to 'meta', or None."""
    for (label, batch), (_, given) in zip(nested_batches(), nested_batches()):
        before, call = snapshot(batch), f"{answer.name}({label}, 'meta', non_blocking={non_blocking})"
        with answer.calling(call, hint=hint):
            got = answer.value(batch, "meta", non_blocking)
        difference = first_difference(got, given, "", "meta")
        if difference:
            return f"{call}: {difference}"
        if snapshot(batch) != before or count_tensors(batch) and _devices(batch) != {"cpu"}:
            return (f"{call} changed the input batch (its containers now hold other objects): build new dicts, lists "
                    "and tuples and return them, leaving the input as it was")
    return None


def _devices(batch: Any) -> set[str]:
    if isinstance(batch, torch.Tensor):
        return {batch.device.type}
    values = batch.values() if isinstance(batch, dict) else batch if isinstance(batch, (list, tuple)) else ()
    return set().union(*(_devices(v) for v in values)) if values else set()
