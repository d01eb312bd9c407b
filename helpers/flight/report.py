"""What a flight recording shows: each worker's busy share, the slowest samples, head-of-line waits, a trace file, a timeline."""
from __future__ import annotations

import json
import math
import numbers
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers._validate import short
from helpers.flight.record import CLOCK, Event, FlightRecorder
from helpers.timing import interleaved, paired_median


@dataclass(frozen=True)
class WorkerShare:
    """One worker's part of a recording: samples fetched, seconds busy (fetch and collate) and that over the loop's reading."""

    worker: int
    samples: int
    busy_s: float
    share: float


def _events(events: Any) -> list[Event]:
    """The events of a FlightRecorder, or a list of them."""
    found = getattr(events, "events", events)
    if not isinstance(found, Sequence) or isinstance(found, str) or not all(isinstance(e, Event) for e in found):
        raise TypeError(f"events must be a FlightRecorder or a list of its Events, got {short(events)}")
    for e in found:
        if not (math.isfinite(e.start) and math.isfinite(e.end) and e.end >= e.start):
            raise ValueError(f"events: each must end at or after its start, both finite, got {short(e)}")
    if not any(e.kind == "wait" for e in found):
        raise ValueError("events: the recording holds no batch; read the FlightRecorder (record() or a for loop) first")
    return list(found)


def _at_least_one(name: str, value: Any) -> None:
    """ValueError naming `name` unless `value` is a whole number of 1 or more."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a whole number of 1 or more, got {short(value)}")


def reading_s(events: Any) -> tuple[float, float]:
    """(start, end) of the loop's reading on the recorder's clock: from its first request to its last batch's arrival."""
    waits = [e for e in _events(events) if e.kind == "wait"]
    return min(e.start for e in waits), max(e.end for e in waits)


def workers(events: Any) -> list[WorkerShare]:
    """Per worker (the main process as -1 with num_workers=0): samples fetched, busy seconds, and their share of reading_s."""
    found = _events(events)
    start, end = reading_s(found)
    shares = []
    for worker in sorted({e.worker for e in found if e.kind == "collate"}):
        mine = [e for e in found if e.worker == worker]
        busy = sum(e.seconds for e in mine if e.kind in ("fetch", "collate"))
        samples = sum(e.samples for e in mine if e.kind == "fetch")
        shares.append(WorkerShare(worker, samples, busy, busy / max(end - start, 1e-9)))
    return shares


def slowest(events: Any, k: int = 5) -> list[Event]:
    """The `k` slowest fetches, slowest first."""
    _at_least_one("k", k)
    return sorted((e for e in _events(events) if e.kind == "fetch"), key=lambda e: -e.seconds)[:k]


def head_of_line_s(events: Any) -> float:
    """Seconds the loop waited for a batch while a batch it received later had already been collated by another worker
    (its trip through the queue included, so an upper bound on time held back; one worker's own batches queue in turn). With in_order=True the loader holds such a
    batch until those before it arrive; in_order=False hands it over, and also gives the next batch to a worker with room in
    its queue, skipping one still busy with a slow batch, so what it saves is measured, not read from this figure."""
    found = _events(events)
    waits = sorted((e for e in found if e.kind == "wait"), key=lambda e: e.batch)
    ready = {e.batch: (e.end, e.worker) for e in found if e.kind == "collate"}
    total, earliest = 0.0, {}  # per worker, the earliest a batch after the one at hand was ready
    for wait in reversed(waits):
        done, worker = ready.get(wait.batch, (math.inf, None))
        later = min((t for w, t in earliest.items() if w != worker), default=math.inf)  # the same worker's queue is no hold
        total += max(0.0, wait.end - max(wait.start, later))
        earliest[worker] = min(earliest.get(worker, math.inf), done)
    return total


def waiting_share(events: Any) -> float:
    """The share of the loop's time spent waiting for batches, leaving out each pass's first batch and each worker
    process's first batch (their waits may include starting the workers: one after another, each importing what it
    needs where it is not forked from the loop's process; persistent workers start once); NaN when no batch is left."""
    found = _events(events)
    first: dict[tuple[str, Any], int] = {}  # ("pass", its number) or ("worker", (id, pid)) -> its first batch
    for e in found:
        if e.kind in ("wait", "collate"):
            key = ("pass", e.epoch) if e.kind == "wait" else ("worker", (e.worker, e.pid))
            first[key] = min(first.get(key, e.batch), e.batch)
    starts = set(first.values())
    found = [e for e in found if e.kind in ("wait", "step") and e.batch not in starts]
    if not found:
        return math.nan
    wait = sum(e.seconds for e in found if e.kind == "wait")
    total = sum(e.seconds for e in found)
    return wait / total if total > 0 else 0.0


def describe(events: Any, slowest_k: int = 3) -> str:
    """The recording in a few lines: per worker its samples and busy share, the `slowest_k` slowest fetches, head-of-line
    and waiting."""
    _at_least_one("slowest_k", slowest_k)
    found = _events(events)
    start, end = reading_s(found)
    waits = [e for e in found if e.kind == "wait"]
    lines = [f"{len(waits)} batches in {end - start:.2f} s (clock: {CLOCK})"]
    lines += [f"  {'main process' if w.worker == -1 else f'worker {w.worker}'}: {w.samples} samples, busy {w.busy_s:.2f} s "
              f"({w.share:.0%} of the reading)" for w in workers(found)]
    slow = slowest(found, slowest_k)
    fetched = sum(e.seconds for e in found if e.kind == "fetch")
    lines.append(f"  slowest fetches ({sum(e.seconds for e in slow) / max(fetched, 1e-12):.0%} of all fetch time):")
    lines += [f"    sample {_plain(e.sample)}: {1000 * e.seconds:.1f} ms (worker {e.worker})" for e in slow]
    share = waiting_share(found)
    lines.append(f"  the loop waited {share:.0%} of its time after each pass's and each worker's first batch" if not math.isnan(share) else
                 "  no batch after each pass's and each worker's first: too few to say how long the loop waited")
    in_order = getattr(getattr(events, "loader", None), "in_order", None)
    lines.append(f"  {head_of_line_s(found):.2f} s of waiting on a batch while a later one was collated"
                 + (" (in_order=True holds it back)" if in_order else ""))
    return "\n".join(lines)


def overhead(loader: Any, batches: int | None = None, rounds: int = 5) -> float:
    """The recorder's cost: seconds to read `batches` batches (None: an epoch) through a FlightRecorder over the plain
    loader's, the median of `rounds` interleaved paired rounds (1.03: 3 % slower)."""
    recorder = FlightRecorder(loader)
    if batches is not None and (isinstance(batches, bool) or not isinstance(batches, numbers.Integral) or batches < 1):
        raise ValueError(f"batches must be a whole number of 1 or more, or None for an epoch, got {short(batches)}")

    def timed(source: Any) -> Any:
        def read() -> float:
            recorder.events.clear()
            started = time.perf_counter()
            for read_so_far, _ in enumerate(source, start=1):
                if batches is not None and read_so_far >= batches:
                    break
            return time.perf_counter() - started
        return read

    times = interleaved({"plain": timed(loader), "recorded": timed(recorder)}, rounds)
    return paired_median(times["recorded"], times["plain"])


def _plain(value: Any) -> Any:
    """A sample id as JSON writes it: numbers and strings as they are, tuples as lists, anything else as its repr."""
    if isinstance(value, (int, float, str)) or value is None:
        return value
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return repr(value)


def chrome_trace(events: Any, path: str | Path | None = None) -> dict[str, Any]:
    """The recording in the Trace Event Format (Chrome's chrome://tracing and ui.perfetto.dev open it): complete ('X')
    events in microseconds from the loop's first request, one process per worker and the main process with its pin
    thread, each named by a metadata ('M') event; events on one thread nest (a transform inside its fetch, without
    workers a fetch inside the loop's wait) or follow each other, as the format requires. Written to `path` as JSON when given."""
    found = _events(events)
    if path is not None and not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a file name or None, got {short(path)}")
    start = reading_s(found)[0]
    out: list[dict[str, Any]] = []
    names: dict[tuple[int, int], str] = {}
    for e in found:
        tid = e.tid or e.pid
        where = ("main process" if e.worker == "main" or (e.worker == "pin" and not e.tid) else "pin_memory thread" if e.worker == "pin" else
                 "main process (num_workers=0)" if e.worker == -1 else f"worker {e.worker}")
        names.setdefault((e.pid, tid), where)
        args: dict[str, Any] = {"batch": e.batch}
        if e.sample is not None:
            args["sample"] = _plain(e.sample)
        begin, end = round((e.start - start) * 1e6, 3), round((e.end - start) * 1e6, 3)  # a child's end stays inside
        out.append({"name": e.kind if e.sample is None else f"{e.kind} {_plain(e.sample)}", "cat": e.kind, "ph": "X",
                    "ts": begin, "dur": round(max(0.0, end - begin), 3), "pid": e.pid, "tid": tid, "args": args})
    for (pid, tid), where in names.items():
        if tid == pid:
            out.append({"name": "process_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": f"{where} (pid {pid})"}})
            out.append({"name": "process_sort_index", "ph": "M", "pid": pid, "tid": tid,
                        "args": {"sort_index": -1 if where.startswith("main") else pid}})
        out.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": where}})
    trace = {"traceEvents": out, "displayTimeUnit": "ms", "otherData": {"clock": CLOCK, "recorder": "helpers.flight"}}
    if path is not None:
        Path(path).write_text(json.dumps(trace))
    return trace


def timeline(events: Any, ax: Any = None, until_s: float | None = None) -> Any:
    """The recording drawn on `ax` (a new figure when None): one row per worker, the pin thread and the loop's waits and steps;
    each batch in one colour from its worker's fetches to its step (colours repeat every 10 batches); `until_s`: seconds shown."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    found = _events(events)
    if until_s is not None and (isinstance(until_s, bool) or not isinstance(until_s, (int, float))
                                or not 0 < until_s < math.inf):
        raise ValueError(f"until_s must be a number of seconds above 0, or None, got {short(until_s)}")
    if ax is not None and not hasattr(ax, "broken_barh"):
        raise TypeError(f"ax must be matplotlib axes or None, got {short(ax)}")
    if ax is None:
        ax = plt.subplots(figsize=(12, 4), layout="constrained")[1]
    start = reading_s(found)[0]
    colours = plt.get_cmap("tab10")
    lanes = ["loop: step", "loop: wait"] + (["pin_memory copy"] if any(e.kind == "pin" for e in found) else [])
    lanes += [("main process" if w == -1 else f"worker {w}") for w in sorted({e.worker for e in found if isinstance(e.worker, int)})]
    row = {name: i for i, name in enumerate(reversed(lanes))}

    def lane(e: Event) -> str:
        if e.worker == "main":
            return f"loop: {e.kind}"
        return "pin_memory copy" if e.worker == "pin" else "main process" if e.worker == -1 else f"worker {e.worker}"

    for e in found:
        y, left = row[lane(e)], e.start - start
        if e.kind == "wait":
            ax.broken_barh([(left, e.seconds)], (y - 0.35, 0.7), facecolors="0.85", edgecolor="0.6", linewidth=0.3)
        elif e.kind == "transform":
            ax.broken_barh([(left, e.seconds)], (y - 0.15, 0.3), facecolors="none", edgecolor="black", hatch="////", linewidth=0.3)
        else:
            edge = "black" if e.kind == "collate" else "white"
            ax.broken_barh([(left, e.seconds)], (y - 0.35, 0.7), facecolors=colours(e.batch % 10), edgecolor=edge, linewidth=0.4)
    ax.set_yticks(range(len(lanes)), list(reversed(lanes)))
    ax.set_xlim(0, until_s if until_s is not None else max(e.end for e in found) - start)
    ax.set_xlabel("seconds since the loop asked for its first batch")
    ax.set_title("What each worker and the loop did (colour: the batch; the 10 colours repeat)")
    legend = [Patch(facecolor="0.45", edgecolor="white", label="fetch (one sample, or one __getitems__)"),
              Patch(facecolor="none", edgecolor="black", hatch="////", label="transform inside a fetch"),
              Patch(facecolor="0.45", edgecolor="black", label="collate (black edge)"),
              Patch(facecolor="0.85", edgecolor="0.6", label="loop waiting for a batch")]
    if not any(e.kind == "transform" for e in found):
        del legend[1]
    ax.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8)
    ax.grid(axis="y", visible=False)
    return ax
