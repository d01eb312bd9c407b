"""The doctor's head-of-line rule, read from the flight recording the lesson-09 flight rules share (lesson 09).

The loop waits on a batch while a later one, from another worker, is ready. A finding needs a lasting cause, measured:
one worker's batches slower in both halves of the recording, or the slowest batches slow again when made again in this
process; batches uneven only while other programs held the cores are no fault of the loader. What in_order=False saves
is then measured in interleaved rounds against the loader as given.
"""
from __future__ import annotations

import math
import statistics
import time
from typing import Any

from helpers.doctor.alternate import alternating_rates
from helpers.doctor.findings import Finding
from helpers.doctor.lesson09_flight import _fetch_again, _made, _uneven
from helpers.doctor.measure import processes_over_cores
from helpers.doctor.registry import Observation, finding, rule
from helpers.env import usable_cpus
from helpers.flight import FlightRecorder, head_of_line_s, reading_s
from helpers.flight.record import fetches_batches
from helpers.rebuild import rebuild

LESSON = "09_what_the_model_saw"
SECTION = "9. Inside the workers: a flight recorder"

HOL_SHARE = 0.1           # head-of-line seconds, and batches' time over the median batch's, over the reading, before measuring
LASTING_RATIO = 1.5       # a lasting cause: one worker's batches over the others' in each half, or slow batches made again
HOL_GAIN = 1.15           # in_order=False's samples/s over the loader's, over 2-3 interleaved rounds together
MIN_BATCHES = 3           # batches of each worker in each half of the recording before workers are compared
AGAIN_BATCHES = 3         # the slowest batches, and as many typical ones, made again in this process
TURN_S = 0.5              # each loader's timed turn in the in_order=False comparison, at the first pass's batch time
SLOW_PER_TURN = 4         # ... and long enough to hold this many slow batches (LASTING_RATIO x the lower quartile)
                          # at the recording's share of them: a turn's gain depends on where its few slow batches fall


def _drawn(loader: Any, batches: int) -> list[list[Any]]:
    """`batches` batches drawn once from the loader's batch sampler (fewer when it gives none): two loaders reading this
    list read the same batches, so which batches were slow does not differ between them."""
    drawn: list[list[Any]] = []
    while len(drawn) < batches:
        before = len(drawn)
        drawn.extend(list(batch) for batch in loader.batch_sampler)
        if len(drawn) == before:
            break
    return drawn[:batches]


def _by_worker(made: dict[int, tuple[Any, float, float]]) -> tuple[Any, float] | str | None:
    """The worker whose batches took LASTING_RATIO x as long to make as the other workers' (medians) in each half of its
    own batches, with its ratio over the whole; None when no worker did; why not, when a worker's half holds fewer than
    MIN_BATCHES (each worker's batches split at their own middle: with 8 workers a recording holds 6 each)."""
    per: dict[Any, list[tuple[float, float]]] = {}
    for worker, began, seconds in made.values():
        per.setdefault(worker, []).append((began, seconds))
    if len(per) < 2 or min(len(v) for v in per.values()) < 2 * MIN_BATCHES:
        return (f"the recording holds {min((len(v) for v in per.values()), default=0)} batches of some worker; comparing "
                f"workers needs {2 * MIN_BATCHES} of each from 2 workers")
    ordered = {w: [t for _, t in sorted(v)] for w, v in per.items()}  # each worker's batches in the order they began
    halves = [{w: v[:len(v) // 2] for w, v in ordered.items()}, {w: v[len(v) // 2:] for w, v in ordered.items()}, ordered]
    found = []
    for part in halves:
        medians = {w: statistics.median(v) for w, v in part.items()}
        slowest = max(medians, key=medians.__getitem__)
        found.append((slowest, medians[slowest] / max(statistics.median(m for w, m in medians.items() if w != slowest), 1e-9)))
    (first, a), (second, b), (worker, ratio) = found
    return (worker, ratio) if first == second == worker and min(a, b) >= LASTING_RATIO else None


class _Batches:
    """The dataset's batches by their sample ids, made as the loader's fetcher makes them: __getitems__ where the dataset
    has it, then collate_fn; without a batch sampler (batch_size=None), collate_fn of one sample."""

    def __init__(self, loader: Any) -> None:
        self.dataset, self.collate, self.batched = loader.dataset, loader.collate_fn, loader.batch_sampler is not None

    def __getitem__(self, ids: list[Any]) -> Any:
        if not self.batched:
            return self.collate(self.dataset[ids[0]])
        many = getattr(self.dataset, "__getitems__", None)
        return self.collate(many(list(ids)) if many else [self.dataset[i] for i in ids])


def _made_again(obs: Observation, recorder: FlightRecorder, made: dict[int, tuple[Any, float, float]]) -> float | str:
    """The slowest AGAIN_BATCHES batches made again in this process over as many typical ones, interleaved (the ratio of
    their medians), or why they were not."""
    if obs.iterable:
        return "a stream's batches cannot be made again by their sample ids"
    many = fetches_batches(obs.loader.dataset)  # as the recorder decides: a fetch's sample is then the batch's ids
    ids: dict[int, list[Any]] = {}
    for e in recorder.events:
        if e.kind == "fetch":
            ids.setdefault(e.batch, []).extend(e.sample if many and isinstance(e.sample, tuple) else [e.sample])
    median = statistics.median(seconds for _, _, seconds in made.values())
    order = sorted((b for b in made if b in ids), key=lambda b: -made[b][2])
    slow = order[:AGAIN_BATCHES]
    typical = sorted((b for b in order if b not in slow), key=lambda b: abs(made[b][2] - median))[:AGAIN_BATCHES + 1]
    if len(slow) < 2 or len(typical) < 3:
        return f"the recording holds {len(order)} batches; making the slowest again needs 5 or more"
    batches = [typical[0]] + [b for pair in zip(slow, typical[1:]) for b in pair]  # a warm-up first, then interleaved
    obs.borrow(sum(made[b][2] for b in batches))
    deadline = time.perf_counter() + max(obs.slot_left(), 1.0)
    times = _fetch_again(_Batches(obs.loader), [ids[b] for b in batches], deadline)
    again = dict(zip(batches[1:], times[1:]))
    done_slow, done_typical = [again[b] for b in slow if b in again], [again[b] for b in typical[1:] if b in again]
    if len(done_slow) < 2 or len(done_typical) < 2:
        how = "did not end in time" if time.perf_counter() >= deadline else "raised (the first pass did not)"
        return f"making them again here {how} ({len(times)} of {len(batches)} batches made)"
    ratio = statistics.median(done_slow) / max(statistics.median(done_typical), 1e-9)
    obs.measured["hol_batches_again_ratio"] = round(ratio, 2)
    return ratio


def _cause(obs: Observation, recorder: FlightRecorder, held: float,
           made: dict[int, tuple[Any, float, float]]) -> tuple[str, str] | None:
    """What makes the batches uneven, measured to last: (what was measured, the fix), or None with the reason noted."""
    worker = _by_worker(made)
    if isinstance(worker, tuple):
        return (f"worker {worker[0]}'s batches took {worker[1]:.1f}x as long to make as the other workers' (medians), and "
                f"at least {LASTING_RATIO}x in each half of its batches",
                f"worker {worker[0]}'s batches (slow-worker, when it reports, says whether its samples or the worker are slow)")
    again = _made_again(obs, recorder, made)
    if isinstance(again, float) and again >= LASTING_RATIO:
        return (f"made again in this process, the {AGAIN_BATCHES} slowest batches took {again:.1f}x as long as "
                f"{AGAIN_BATCHES} typical ones, so those batches are slow to make, not the moment",
                "what makes those batches slow (slow samples, or a sampler that puts the costly samples together)")
    measured = f"took {again:.1f}x typical ones (under {LASTING_RATIO}x)" if isinstance(again, float) else f"were not: {again}"
    workers = (f"workers were not compared ({worker})" if isinstance(worker, str) else
               f"no worker's batches took {LASTING_RATIO}x the others' in both halves of its batches")
    obs.skipped["head-of-line"] = (
        f"the loop waited {held:.2f} s on a batch while a later one was ready, but no lasting cause was measured: "
        f"{workers}, and the slowest batches made again here {measured}; batches uneven for a while (other programs on "
        "the cores) are no fault of the loader, and uneven at random (a store whose reads vary) is not told apart here")
    return None


def _holds(obs: Observation) -> bool:
    """head-of-line measures: 2+ workers, at most one process over the cores, in_order=True, and the recording shows batches
    uneven to make and the loop held on a batch while a later one was ready, each for HOL_SHARE of its reading."""
    workers = obs.loader.num_workers
    if obs.flight is None or workers < 2 or not getattr(obs.loader, "in_order", True):
        return False
    if processes_over_cores(workers) > 1:  # workers-oversubscribed: batches come unevenly from taking turns
        obs.skipped["head-of-line"] = (f"{workers} workers take turns on {usable_cpus()} usable cores (workers-oversubscribed), "
                                       "which makes batches arrive unevenly by itself: fix the count first")
        return False
    start, end = reading_s(obs.flight)
    return _uneven(obs.flight) >= HOL_SHARE and head_of_line_s(obs.flight) >= HOL_SHARE * (end - start)


@rule("head-of-line", severities=("warning",), phase="measure", budget=1.0, planted="head_of_line", applies=_holds,
      taught_in=(LESSON, SECTION),
      thresholds={"HOL_SHARE": (HOL_SHARE, "head-of-line seconds, and batches' time over the median's, over the reading, "
                                         "before measuring"),
                  "LASTING_RATIO": (LASTING_RATIO, "one worker's batches over the others' in each half of the recording, or "
                                                   "the slowest batches made again over typical ones"),
                  "HOL_GAIN": (HOL_GAIN, "in_order=False's samples/s over the loader's, over 2-3 interleaved rounds together")})
def head_of_line(obs: Observation) -> Finding | None:
    """The loop waited on a batch while a later one, from another worker, was ready, for a lasting cause (_cause):
    in_order=False measured against the loader as given, reading alone, in interleaved rounds."""
    if not _holds(obs):
        return None
    recorder = obs.flight
    start, end = reading_s(recorder)
    held = head_of_line_s(recorder)
    made_by_batch = _made(recorder)
    cause = _cause(obs, recorder, held, made_by_batch)
    if cause is None:
        return None
    workers = obs.loader.num_workers
    batch_s = max(obs.steady_batch_s, 1e-4)
    made = [seconds for _, _, seconds in made_by_batch.values()]
    typical = statistics.quantiles(made, n=4)[0]  # the lower quartile: half the batches may be slow (a slow worker's)
    slow = sum(m >= LASTING_RATIO * typical for m in made) / len(made)
    per_turn = min(200, max(4 * workers, math.ceil(TURN_S / batch_s), math.ceil(SLOW_PER_TURN / slow) if slow else 0))
    queued = workers * (obs.loader.prefetch_factor or 2)
    need = 2 * 2 * (per_turn + queued) * batch_s + 2 * obs.first_batch_s  # 2 rounds of 2 turns, then a third if time allows
    had = obs.slot_left()
    if obs.borrow(need):
        had = obs.slot_left()
    timeout = max(1.0, obs.slot_left())
    # both read one list of batches drawn once, turn by turn the same ones: which batches were slow does not differ
    same = {} if obs.iterable else {"batch_sampler": _drawn(obs.loader, 1 + 3 * 2 * (queued + per_turn))}
    pair = [rebuild(obs.loader, persistent_workers=True, timeout=timeout, **same),
            rebuild(obs.loader, persistent_workers=True, timeout=timeout, in_order=False, **same)]
    rounds = alternating_rates(pair, time.perf_counter() + obs.slot_left(), batches_per_turn=per_turn)
    rounds = [(given, unordered) for given, unordered in rounds if given > 0 and unordered > 0]
    ratios = [unordered / given for given, unordered in rounds]
    if len(ratios) < 2:
        obs.skipped["head-of-line"] = (f"the loop waited {held:.2f} s on a batch while a later one was ready, but the "
                                       f"comparison with in_order=False ran {len(ratios)} round(s) of the 2 it needs; "
                                       + obs.too_short(need, had))
        return None
    # both loaders' turns read per_turn batches from one list, turn by turn the same stretch of it (in_order=False hands
    # them over in another order): with batches of one size, the rounds together are the ratio of their total times
    gain = sum(1 / given for given, _ in rounds) / sum(1 / unordered for _, unordered in rounds)
    obs.measured["in_order_false_gain"] = [round(r, 2) for r in ratios]
    per_round = ", ".join(f"{r:.2f}x" for r in ratios)
    if gain < HOL_GAIN:
        obs.skipped["head-of-line"] = (f"the loop waited {held:.2f} s of {end - start:.2f} s on a batch while a later one "
                                       f"was ready, but in_order=False gave {gain:.2f}x the samples/s over {len(ratios)} "
                                       f"interleaved rounds of {per_turn} batches a turn ({per_round}); a finding needs "
                                       f"{HOL_GAIN}x")
        return None
    return finding(
        "head-of-line", "warning",
        f"the loop waited {held:.2f} s of {end - start:.2f} s ({held / (end - start):.0%}) on a batch while another worker's later "
        f"batch was ready (the recording's upper bound, the queue's transit included); reading with in_order=False gave "
        f"{gain:.2f}x the samples/s ({len(ratios)} interleaved rounds of {per_turn} batches a turn together: {per_round}; "
        "reading alone, without your step); "
        f"the cause: {cause[0]}",
        "DataLoader(..., in_order=False) hands over batches as they are ready, and gives the next batch to the next worker "
        "with fewer than prefetch_factor batches outstanding, skipping one still busy with a slow batch; the order may then "
        "change from run to run (torch's docstring: it can harm reproducibility and skew the data with imbalanced classes). "
        f"Or remove the cause: {cause[1]}",
        held_s=round(held, 3), reading_s=round(end - start, 3), gain=round(gain, 3), rounds=len(ratios))

