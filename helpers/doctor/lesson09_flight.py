"""The doctor's rules read from a flight recording (helpers.flight): a slow worker, slow samples (lesson 09; head-of-line
waits, read from the same recording, are in lesson09_hol).

One recording serves the three rules: the loader read again through a FlightRecorder, with the step when there is one,
for the first of them that runs. A cause a finding names is measured: a worker is slower in both halves of the
recording, and whether its samples or the worker is to blame comes from fetching some of its samples and some of the
others' again in this process; a slow sample is one that is slow again when fetched again; what in_order=False saves
is measured in interleaved rounds against the loader as given.
"""
from __future__ import annotations

import math
import statistics
import threading
import time
from itertools import zip_longest
from typing import Any

from helpers.doctor.findings import Finding
from helpers.doctor.measure import length, summary
from helpers.doctor.reading import THREAD_PREFIX, stop_workers
from helpers.doctor.registry import Observation, finding, rule
from helpers.flight import Event, FlightRecorder, head_of_line_s, reading_s, waiting_share
from helpers.rebuild import rebuild

LESSON = "09_what_the_model_saw"
SECTION = "9. Inside the workers: a flight recorder"

SLOW_WORKER_RATIO = 2.0   # a worker's lower-quartile fetch time per sample over the other workers' (their median)
HALF_RATIO = 1.5          # ... and the same worker slowest in each half, by at least this: a stretch of bad luck is no slow worker
MIN_FETCHES = 8           # fetches per worker in each half of the recording before workers are compared
SLOW_SAMPLE_RATIO = 10.0  # a slow sample's fetch over the median fetch, in the recording ...
AGAIN_RATIO = 5.0         # ... and fetched again in this process, over the median of typical samples fetched again
FEW_SHARE = 0.05          # "a few": at most this share of the samples recorded
SLOW_SAMPLES_SHARE = 0.25  # the slow samples' share of all fetch time
MIN_SAMPLES = 32          # samples recorded before slow samples are looked for
WAITED_SHARE = 0.1        # with a step, the loop must wait at least this share of its time for a slow worker or sample to cost it
RECORD_BATCHES = 48       # batches recorded at most, or 6 per worker when that is more (the time allowed covers 6 per worker)
RECORD_SHARE = 0.4        # of the budget left when recording starts, at most, unless 6 batches per worker need more
CHECKED_SLOW = 5          # slow samples fetched again (the slowest first) before any is named, when there are so many
AGAIN_SAMPLES = 8         # samples of each kind fetched again


def _recording(obs: Observation) -> FlightRecorder | None:
    """The loader read through a FlightRecorder in this rule's slot (the first of these rules to run records it)."""
    if obs.flight is not None or "flight" in obs.skipped:
        return obs.flight
    size, most = length(obs.loader), max(RECORD_BATCHES, 6 * obs.loader.num_workers)
    wanted = min(most, size) if size else most
    # its workers start afresh, as slowly as the first pass's: their start, then as long again for the batches at least
    need = (2 if obs.loader.num_workers else 1) * obs.first_batch_s + max(6 * obs.loader.num_workers, 12) * obs.steady_batch_s
    if not math.isfinite(need) or not obs.borrow(min(need, 0.5 * obs.left())):
        obs.skipped["flight"] = "no time was left in the budget for a flight recording"
        return None
    seconds = max(0.5, min(obs.slot_left(), max(need, RECORD_SHARE * obs.left())))  # the rest: re-fetches and in_order=False
    if obs.loader.num_workers and obs.first_batch_s > 0.5 * seconds:  # the start would take most of the recording
        obs.skipped["flight"] = (f"no flight recording: its workers would start afresh, and the first pass's first batch took "
                                 f"{obs.first_batch_s:.1f} s, over half of the {seconds:.1f} s it could have")
        return None
    recorder = FlightRecorder(rebuild(obs.loader, timeout=seconds) if obs.loader.num_workers else obs.loader)
    failed: list[str] = []

    def read() -> None:
        try:
            recorder.record(step=obs.step, batches=wanted, seconds=seconds)
        except Exception as exc:  # noqa: BLE001 - the rules say why they did not judge
            failed.append(summary(exc))  # not the error: its traceback holds the loader's frames
        finally:
            stop_workers(recorder.loader)

    (thread := threading.Thread(target=read, daemon=True, name=THREAD_PREFIX + "flight")).start()
    thread.join(seconds + max(1.0, obs.first_batch_s))
    if thread.is_alive() or failed or recorder.batches < 2:
        why = ("it did not end in time" if thread.is_alive() else f"it stopped: {failed[0]}" if failed
               else "it read fewer than 2 batches")
        obs.skipped["flight"] = f"the flight recording read {recorder.batches} batch(es) and {why}"
        return None
    obs.flight = recorder
    start, end = reading_s(recorder)
    share = waiting_share(recorder)
    obs.measured.update(flight_batches=recorder.batches, flight_waiting_share=None if math.isnan(share) else round(share, 3),
                        head_of_line_share=round(head_of_line_s(recorder) / max(end - start, 1e-9), 3),
                        batches_uneven=round(_uneven(recorder), 2))
    return recorder


def _loop_waits(obs: Observation, recorder: FlightRecorder, code: str, what: str) -> bool:
    """Whether the loop waited for batches long enough for `what` to cost it (always, without a step: reading is all it does)."""
    share = waiting_share(recorder)
    if obs.step is None or share >= WAITED_SHARE:
        return True
    if math.isnan(share):
        obs.skipped[code] = (f"{what}, but every batch recorded was a pass's or a worker's first (their waits include "
                             "starting the workers): too few batches to tell whether the loop waited for them")
        return False
    obs.skipped[code] = (f"{what}, but the loop waited for batches {share:.0%} of its time (under {WAITED_SHARE:.0%}): "
                         "the step sets the pace, and the workers keep ahead of it")
    return False


def _fetches(recorder: FlightRecorder) -> list[Event]:
    return [e for e in recorder.events if e.kind == "fetch"]


def _refetchable(obs: Observation, fetches: list[Event]) -> str:
    """Why the samples cannot be fetched again by their ids here, or "" when they can."""
    return ("a stream's items cannot be fetched again by id" if obs.iterable else "the dataset fetches whole batches "
            "(__getitems__), so its samples' times cannot be told apart" if any(e.samples != 1 for e in fetches) else "")


def _fetch_again(dataset: Any, ids: list[Any], deadline: float) -> list[float]:
    """Seconds each `dataset[i]` takes in this process, in order, for those that ended by `deadline` (in a doctor thread:
    a hung fetch is left there); a fetch that raises ends the list."""
    times: list[float] = []
    stop = threading.Event()

    def fetch() -> None:
        for i in ids:
            if stop.is_set():
                return
            started = time.perf_counter()
            try:
                dataset[i]
            except Exception:  # noqa: BLE001 - the first pass read it; what it raises now, the rule does not judge
                return
            if not stop.is_set():
                times.append(time.perf_counter() - started)

    thread = threading.Thread(target=fetch, daemon=True, name=THREAD_PREFIX + "fetch-again")
    thread.start()
    thread.join(max(0.0, deadline - time.perf_counter()))
    stop.set()
    return list(times)


def _typical(fetches: list[Event], n: int, avoid: set[Any]) -> list[Any]:
    """`n` sample ids whose recorded fetch times lie nearest the median, none of `avoid`."""
    median = statistics.median(e.seconds for e in fetches)
    near = sorted((e for e in fetches if e.sample not in avoid), key=lambda e: abs(e.seconds - median))
    return list(dict.fromkeys(e.sample for e in near))[:n]


@rule("slow-worker", severities=("warning",), phase="measure", budget=0.5, planted="slow_worker",
      applies=lambda obs: obs.batches >= 2 and obs.loader.num_workers >= 2, taught_in=(LESSON, SECTION),
      thresholds={"SLOW_WORKER_RATIO": (SLOW_WORKER_RATIO, "a worker's lower-quartile fetch time per sample over the others'"),
                  "HALF_RATIO": (HALF_RATIO, "the same worker slowest in each half of the recording, by at least this")})
def slow_worker(obs: Observation) -> Finding | None:
    """One worker markedly slower per sample than the others, in both halves of the recording: named, with its samples,
    and whether they or the worker are slow, from fetching some of each again in this process."""
    if obs.loader.num_workers < 2:
        return None
    recorder = _recording(obs)
    if recorder is None:
        return None
    fetches = _fetches(recorder)
    per: dict[int, list[Event]] = {}
    for e in fetches:
        per.setdefault(e.worker, []).append(e)  # type: ignore[arg-type]
    if len(per) < 2 or min(len(v) for v in per.values()) < 2 * MIN_FETCHES:
        obs.skipped["slow-worker"] = (f"the recording holds {', '.join(f'{len(v)}' for v in per.values()) or 'no'} fetch(es) "
                                      f"per worker; comparing workers needs {2 * MIN_FETCHES} each from 2 workers")
        return None
    middle = (min(e.start for e in fetches) + max(e.end for e in fetches)) / 2
    ratio, worker, others_ms = _slowest(per)
    split = [{w: [e for e in v if (e.start < middle) == first] for w, v in per.items()} for first in (True, False)]
    halves = [_slowest(half) if min(len(v) for v in half.values()) >= MIN_FETCHES else (0.0, -2, math.nan) for half in split]
    obs.measured["worker_fetch_ms"] = {w: round(1000 * _per_sample(v), 2) for w, v in sorted(per.items())}
    if ratio < SLOW_WORKER_RATIO:
        return None
    if any(math.isnan(h[2]) for h in halves):
        obs.skipped["slow-worker"] = (f"worker {worker} was {ratio:.1f}x slower per sample over the recording, but a half of "
                                      f"it held fewer than {MIN_FETCHES} fetches of a worker: the halves were not compared")
        return None
    if any(h[1] != worker or h[0] < HALF_RATIO for h in halves):
        obs.skipped["slow-worker"] = (f"worker {worker} was {ratio:.1f}x slower per sample over the recording, but not in "
                                      f"both halves of it (each at least {HALF_RATIO}x, from {MIN_FETCHES} fetches per worker): "
                                      "a stretch of bad luck (other programs on its core, slower samples for a while), not a "
                                      "slower worker")
        return None
    if not _loop_waits(obs, recorder, "slow-worker", f"worker {worker} was {ratio:.1f}x slower per sample than the others"):
        return None
    mine = list(dict.fromkeys(e.sample for e in per[worker]))
    cause, fix = _whose(obs, fetches, per, worker)
    return finding(
        "slow-worker", "warning",
        f"worker {worker} took {_per_sample(per[worker]) * 1000:.1f} ms per sample (the lower quartile of its "
        f"{len(per[worker])} fetches) against {others_ms:.1f} ms on the other workers, {ratio:.1f}x over a recording of "
        f"{recorder.batches} batches, and at least {HALF_RATIO}x in each half of it; "
        f"its samples: {', '.join(str(s) for s in mine[:12])}{' ...' if len(mine) > 12 else ''}. {cause}",
        fix, worker=worker, ratio=round(ratio, 2), worker_ms=round(_per_sample(per[worker]) * 1000, 2),
        others_ms=round(others_ms, 2), samples=mine[:50])


def _per_sample(fetches: list[Event]) -> float:
    """The lower quartile of seconds per sample: a worker slow by itself is slow on its quick fetches too, while a few slow
    samples (or batches that hold one, with __getitems__) move only its upper fetches."""
    times = [e.seconds / max(e.samples, 1) for e in fetches]
    return statistics.quantiles(times, n=4)[0] if len(times) >= 2 else times[0]


def _slowest(per: dict[int, list[Event]]) -> tuple[float, int, float]:
    """(ratio, worker, others' ms): the worker with the largest time per sample (_per_sample), over the others' median."""
    medians = {w: _per_sample(v) for w, v in per.items() if v}
    if len(medians) < 2:
        return 0.0, -2, math.nan
    worker = max(medians, key=medians.get)  # type: ignore[arg-type]
    others = statistics.median(m for w, m in medians.items() if w != worker)
    return medians[worker] / max(others, 1e-9), worker, 1000 * others


def _whose(obs: Observation, fetches: list[Event], per: dict[int, list[Event]], worker: int) -> tuple[str, str]:
    """Whether the worker's samples or the worker is slow, by fetching some of each again here: (what was measured, the fix)."""
    samples_fix = ("spread the slow samples over the workers: shuffle the order batches are made in (a sampler that groups "
                   "long samples can, with the loader dealing batches to the workers in turn, give one worker all the long "
                   "ones), or balance the shards by size rather than by count")
    worker_fix = ("look at what differs in that worker: your worker_init_fn for its id, the files or connections it opened, "
                  "its thread or CPU-affinity settings")
    why_not = _refetchable(obs, fetches)
    if why_not:
        return (f"Whether its samples or the worker are slow was not measured: {why_not}.",
                f"if its samples are the large ones, {samples_fix}; if not, {worker_fix}")
    mine = _typical(per[worker], AGAIN_SAMPLES, set())
    others = _typical([e for w, v in per.items() if w != worker for e in v], AGAIN_SAMPLES, set(mine))
    order = [i for pair in zip(mine, others) for i in pair]  # interleaved: a change in the machine hits both
    times = _fetch_again(obs.loader.dataset, _typical(fetches, 1, set()) + order, obs.deadline)  # a warm-up fetch first
    again = dict(zip(order, times[1:]))
    mine, others = [i for i in mine if i in again], [i for i in others if i in again]
    if len(mine) < 3 or len(others) < 3:
        return ("Whether its samples or the worker are slow was not measured: fetching them again here did not end in time.",
                f"if its samples are the large ones, {samples_fix}; if not, {worker_fix}")
    ratio = statistics.median(again[i] for i in mine) / max(statistics.median(again[i] for i in others), 1e-9)
    obs.measured["slow_worker_samples_again_ratio"] = round(ratio, 2)
    if ratio >= HALF_RATIO:
        return (f"Fetched again in this process, {len(mine)} of its samples took {ratio:.1f}x as long as {len(others)} of the "
                "others': its samples are slower, not the worker.", samples_fix)
    return (f"Fetched again in this process, {len(mine)} of its samples took {ratio:.1f}x as long as {len(others)} of the "
            "others': the samples are not slower, the worker is.", worker_fix)


@rule("slow-samples", severities=("warning",), phase="measure", budget=0.25, planted="slow_samples",
      applies=lambda obs: obs.batches >= 2,
      taught_in=(LESSON, SECTION),
      thresholds={"SLOW_SAMPLE_RATIO": (SLOW_SAMPLE_RATIO, "a slow sample's fetch over the median fetch"),
                  "SLOW_SAMPLES_SHARE": (SLOW_SAMPLES_SHARE, "share of all fetch time the slow samples (at most 5 % of them) took")})
def slow_samples(obs: Observation) -> Finding | None:
    """A few samples (at most FEW_SHARE of those read), each SLOW_SAMPLE_RATIO times the median fetch and slow again when
    fetched again here, taking SLOW_SAMPLES_SHARE of all fetch time: named."""
    recorder = _recording(obs)
    if recorder is None:
        return None
    fetches = _fetches(recorder)
    if any(e.samples != 1 for e in fetches):
        obs.skipped["slow-samples"] = "the dataset fetches whole batches (__getitems__): its samples' times cannot be told apart"
        return None
    if len(fetches) < MIN_SAMPLES:
        obs.skipped["slow-samples"] = f"the recording holds {len(fetches)} fetches; looking for slow samples needs {MIN_SAMPLES}"
        return None
    median = statistics.median(e.seconds for e in fetches)
    total = sum(e.seconds for e in fetches)
    slow = sorted((e for e in fetches if e.seconds >= SLOW_SAMPLE_RATIO * median), key=lambda e: -e.seconds)
    share = sum(e.seconds for e in slow) / max(total, 1e-12)
    obs.measured["slow_sample_fetches"] = len(slow)
    if not slow or share < SLOW_SAMPLES_SHARE:
        return None
    if len(slow) > FEW_SHARE * len(fetches):
        obs.skipped["slow-samples"] = (f"{len(slow)} of {len(fetches)} fetches took {SLOW_SAMPLE_RATIO:g}x the median or more "
                                       f"({share:.0%} of the fetch time): a long tail of many samples, not a few to name")
        return None
    why_not = _refetchable(obs, fetches)
    if why_not:
        obs.skipped["slow-samples"] = (f"{len(slow)} fetch(es) took {share:.0%} of the fetch time, but whether the samples "
                                       f"are slow or the moment was (other programs, a cold cache) was not measured: {why_not}")
        return None
    named = list(dict.fromkeys(e.sample for e in slow))  # the slowest first
    warm_up, *typical = _typical(fetches, AGAIN_SAMPLES + 1, set(named))  # the first fetch may open a file: not compared
    order = [warm_up] + [i for pair in zip_longest(named, typical) for i in pair if i is not None]  # interleaved
    obs.borrow(sum(e.seconds for e in slow) + median * len(order))
    times = _fetch_again(obs.loader.dataset, order, time.perf_counter() + max(obs.slot_left(), 1.0))
    again = dict(zip(order[1:], times[1:]))
    checked, base = [i for i in named if i in again], [again[i] for i in typical if i in again]
    if len(checked) < min(CHECKED_SLOW, len(named)) or len(base) < 3:
        obs.skipped["slow-samples"] = (f"{len(slow)} fetch(es) took {share:.0%} of the fetch time, but in its share of the "
                                       f"budget {len(checked)} of them were fetched again here, of the "
                                       f"{min(CHECKED_SLOW, len(named))} needed to tell slow samples from a slow moment")
        return None
    confirmed = [i for i in checked if again[i] >= AGAIN_RATIO * statistics.median(base)]
    # mostly slow again: the ones not fetched again count too; else only those slow again
    kept = set(confirmed) | (set(named) - set(checked) if len(confirmed) >= 0.8 * len(checked) else set())
    slow = [e for e in slow if e.sample in kept]
    share = sum(e.seconds for e in slow) / max(total, 1e-12)
    if share < SLOW_SAMPLES_SHARE:
        obs.skipped["slow-samples"] = (f"{len(named)} sample(s) were slow in the recording, but fetched again here "
                                       f"{len(checked) - len(confirmed)} of the {len(checked)} took under {AGAIN_RATIO:g}x a "
                                       "typical one (the moment was slow: other programs, a cold cache or a file opened on "
                                       "first use), and the rest took under "
                                       f"{SLOW_SAMPLES_SHARE:.0%} of the fetch time")
        return None
    if not _loop_waits(obs, recorder, "slow-samples", f"{len(kept)} sample(s) took {share:.0%} of the fetch time"):
        return None
    ids = list(dict.fromkeys(e.sample for e in slow))
    shown = ", ".join(f"{i} ({1000 * max(e.seconds for e in slow if e.sample == i):.0f} ms)" for i in ids[:12])
    return finding(
        "slow-samples", "warning",
        f"{len(ids)} of {len(fetches)} samples fetched took {share:.0%} of all fetch time, each at least "
        f"{SLOW_SAMPLE_RATIO:g}x the median fetch ({1000 * median:.1f} ms): {shown}{' ...' if len(ids) > 12 else ''}; "
        f"fetched again in this process, {len(confirmed)} of the {len(checked)} slowest took {AGAIN_RATIO:g}x a typical "
        "sample or more, so the samples are slow, not the moment",
        "look at what these samples are (a large file, a long clip, a remote read) and make them cheaper before training: "
        "resize or split them offline, cache them decoded, or move them to faster storage; a worker stuck on one also holds "
        "back the batches behind it (head-of-line, lesson 09 section 9)",
        samples=ids, confirmed=confirmed, share=round(share, 3), median_ms=round(1000 * median, 2), fetches=len(fetches))


def _made(recorder: FlightRecorder) -> dict[int, tuple[Any, float, float]]:
    """Each batch's (worker, when its first fetch began, seconds from then to the end of its collate), by batch number."""
    began: dict[int, float] = {}
    for e in recorder.events:
        if e.kind == "fetch":
            began[e.batch] = min(began.get(e.batch, e.start), e.start)
    return {e.batch: (e.worker, began[e.batch], e.end - began[e.batch])
            for e in recorder.events if e.kind == "collate" and e.batch in began}


def _uneven(recorder: FlightRecorder) -> float:
    """How uneven the batches were to make: the seconds by which batches took longer in their worker (first fetch to the
    end of collate) than the median batch, summed, over the reading time. Equal batches hold nothing back: the loop then
    waits only on the queue's transit, which head_of_line_s counts too."""
    made = [seconds for _, _, seconds in _made(recorder).values()]
    if len(made) < 2:
        return 0.0
    median = statistics.median(made)
    start, end = reading_s(recorder)
    return sum(max(0.0, m - median) for m in made) / max(end - start, 1e-9)
