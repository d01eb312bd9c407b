"""The doctor's num_workers sweep (lesson 03's section 3): more workers measured against the loader as given, in turns."""
from __future__ import annotations

import math
import time

import numpy as np
from torch.utils.data import DataLoader

from helpers.doctor.alternate import alternating_rates, new_samples
from helpers.doctor.findings import Finding
from helpers.doctor.lesson03 import BUSY_CORES
from helpers.doctor.measure import ranks_on_node
from helpers.doctor.reading import stop_workers
from helpers.doctor.registry import Observation, finding, rule
from helpers.env import usable_cpus, workers_per_rank
from helpers.rebuild import rebuild
from helpers.timing import others_during, paired_median

SWEEP_GAIN = 1.3  # more workers must give this many times the samples/s, in every paired round
TURN_S = 0.25     # each setting's turn in a sweep round times about this long, at the batch time first measured
SLOW_BATCH_S = 0.1  # batches this slow are swept with one batch in flight per worker (prefetch_factor=1)
MAX_TURN_GROUPS = 3  # a single turn (batches too slow to interleave) times up to 3x its minimum while time allows
SWEEP_ROUNDS = 5     # interleaved rounds at most, while the slot allows: from 4 on, one round may fall short
FULL_CORES = 0.9     # the loader already kept this share of the usable cores busy in the first pass: no sweep


def _sweep_cap() -> int:
    return max(1, workers_per_rank(ranks_on_node(), usable_cpus()))


def loop_headroom(obs: Observation) -> tuple[float, float] | None:
    """(share of the loop's time spent waiting for data, how many times faster the loop would run with loading free: its
    time over its steps' time), summed over the first pass's steps after the first; None without a step or with fewer
    than 3 steps. Sums, not medians: workers deliver batches in bunches, and the median wait can be 0 while half the
    time is waiting."""
    if obs.step is None or len(obs.wait_s) < 3:
        return None
    wait, step = sum(obs.wait_s[1:]), sum(obs.step_s[1:])
    return wait / max(wait + step, 1e-12), ((wait + step) / step if step > 0 else math.inf)


def first_turn_rate(loader: DataLoader, batches: int, deadline: float, distinct: bool = False, group: int = 1) -> float | None:
    """Samples/s over `batches` batches read right after the first (the workers' start-up left out), then more in groups
    of `group` while `deadline` allows (up to MAX_TURN_GROUPS x `batches`: a longer window scatters less); None when
    not even `batches` were read by `deadline`.

    With one batch in flight per worker (prefetch_factor=1) and N workers, the N - 1 batches after the first were read
    during start-up, and each later one starts as one is taken: 2N batches after the first take about two batch times
    of every worker, without first taking the ones queued (uneven start-ups only lower the rate).
    distinct: count only samples not delivered before (by identity), as alternating_rates does.
    """
    iterator, rate = iter(loader), None
    try:
        seen: set[str] = set()
        new_samples(next(iterator), seen, distinct)
        started, samples, read = time.perf_counter(), 0, 0
        while True:
            now = time.perf_counter()
            if read >= batches and read % group == 0:  # a whole group read: another only if it fits
                if read >= MAX_TURN_GROUPS * batches or now + (now - started) / read * group > deadline:
                    rate = samples / (now - started)
                    return rate
            if now > deadline:
                return None
            samples += new_samples(next(iterator), seen, distinct)
            read += 1
    except Exception:  # noqa: BLE001 - an error, a timeout or the epoch's end: no rate
        return None
    finally:
        stop_workers(loader, at_once=rate is None)  # no rate: a worker may be starting still, not waited for


def _one_turn(obs: Observation, workers: int, batch_s: float, had: float) -> Finding | None:
    """Batches too slow for interleaved rounds: one turn of the most workers the rule allows, against the first pass's
    batch time, trusted only when other programs left the cores alone during both."""
    loader, cap = obs.loader, _sweep_cap()
    need = 1.1 * obs.first_batch_s + 2 * batch_s  # start-up, then two batches per worker timed (no margin: a turn that
    # does not finish by the deadline says so; with one, a 2 s-per-batch audio loader missed by 0.9 s of 20)
    if not obs.borrow(need):
        obs.skipped["workers-too-few"] = ("the num_workers sweep did not run: one turn of the most workers the rule allows at the "
                                          "batch time measured does not fit; " + obs.too_short(need, had))
        return None
    more = rebuild(loader, num_workers=cap, persistent_workers=True, timeout=max(1.0, obs.slot_left()), prefetch_factor=1)
    had = max(had, obs.slot_left())
    rate, during = others_during(lambda: first_turn_rate(more, 2 * cap, time.perf_counter() + obs.slot_left(),
                                                         distinct=obs.iterable, group=cap))
    before = obs.measured.get("other_programs_cores")
    if rate is None:
        obs.skipped["workers-too-few"] = ("the num_workers sweep did not finish its one turn of num_workers="
                                          f"{cap}; " + obs.too_short(need, had))
        return None
    given = (obs.samples / obs.batches) / batch_s
    gain = rate / given
    obs.measured.update(sweep_samples_per_s={workers: round(given, 1), cap: round(rate, 1)}, sweep_gain=gain,
                        sweep_best=cap if gain >= SWEEP_GAIN else workers, sweep_others_cores=round(during, 2),
                        sweep_needed=SWEEP_GAIN)
    quiet = before is not None and max(before, during) < BUSY_CORES
    if not quiet:  # input-bound must not quote this gain as a settled answer
        obs.measured["sweep_unsettled"] = ("other programs' load not measured" if before is None else
                                           f"other programs used {max(before, during):.1f} cores")
    if gain < SWEEP_GAIN or not quiet:
        load = (f"other programs used {max(before, during):.1f} core(s) meanwhile" if before is not None else
                "the first pass did not measure other programs' load")
        obs.skipped["workers-too-few"] = (
            f"num_workers={cap} gave {gain:.2f}x the {_unit(obs)} of the first pass, measured one after the other (batches of "
            f"{batch_s:.2f} s are too slow for interleaved rounds in this budget); {load}"
            + ("" if quiet else ": measure again on a quiet machine or with a larger budget"))
        return None
    return finding(
        "workers-too-few", "warning",
        f"num_workers={cap} gave {gain:.2f}x the {_unit(obs)} of num_workers={workers} ({rate:.1f} against {given:.1f}; "
        f"batches of {batch_s:.2f} s: one turn of {cap} workers against the first pass, one after the other, other programs "
        f"using under {BUSY_CORES} core both times){_loop_text(obs)}",
        f"set num_workers={cap} (the course's rule allows {cap} per rank on this machine's {usable_cpus()} usable core(s))",
        num_workers=workers, best=cap, speedup=gain, rounds=1)


def low_round(ratios: list[float]) -> float:
    """The round a gain must clear: the lowest of up to 3 rounds, the second lowest of 4 or more (one may fall short:
    a busy moment, one batch slower than the rest)."""
    ordered = sorted(ratios)
    return ordered[1] if len(ordered) >= 4 else ordered[0]


def _unit(obs: Observation) -> str:
    return "distinct samples/s (an IterableDataset: a sample every worker repeats counts once)" if obs.iterable else "samples/s"


def _loop_text(obs: Observation) -> str:
    room = loop_headroom(obs)
    return "" if room is None else (f"; your loop waited {room[0]:.0%} of its time for data: with loading free it would run at "
                                    f"most {room[1]:.2f}x faster (by its steps as timed in that pass)")


@rule("workers-too-few", severities=("warning",), phase="measure", budget=3.0, planted="too_few",
      applies=lambda obs: obs.loader.num_workers < _sweep_cap(),
      taught_in=("03_loader_bottlenecks", "3. `num_workers` when items cost CPU"),
      thresholds={"SWEEP_GAIN": (SWEEP_GAIN, "samples/s with more workers over as given, in every interleaved round but "
                                             "one of 4+ (one turn on a quiet machine, for batches too slow to interleave)"),
                  "FULL_CORES": (FULL_CORES, "share of the usable cores this process and its workers kept busy "
                                             "in the first pass, from which no sweep is run")})
def workers_too_few(obs: Observation) -> Finding | None:
    """A num_workers sweep up to the course's rule: each setting's workers started once, timed in turns (the others paused)."""
    loader, workers, had = obs.loader, obs.loader.num_workers, obs.slot_left()
    cap = _sweep_cap()
    candidates = sorted({w for w in (workers + 1, workers + 2, 2 * workers) if workers < w <= cap})[:2]
    if not candidates:
        obs.skipped["workers-too-few"] = (f"num_workers={workers} is already {'at' if workers == cap else 'over'} the "
                                         f"course's rule for this machine ({cap} per rank)")
        return None
    room = loop_headroom(obs)
    if room is not None and room[1] < SWEEP_GAIN:
        obs.skipped["workers-too-few"] = (
            f"no sweep: your loop waited {room[0]:.0%} of its time for data (first pass, {len(obs.wait_s) - 1} steps): with "
            f"loading free it would run at most {room[1]:.2f}x faster (by its steps as timed in that pass), under "
            f"{SWEEP_GAIN}x, so more workers cannot speed it up that much; make the step faster instead")
        return None
    used, cores = obs.measured.get("loader_cores"), usable_cpus()
    if used is not None and used >= FULL_CORES * cores:
        obs.skipped["workers-too-few"] = (
            f"no sweep: this process (your steps included) and its workers used {used:.1f} of the {cores} usable core(s) in "
            "CPU time during the first pass, which counts library threads that spin while they wait (numpy's BLAS, OpenMP, "
            "a CUDA synchronize) as well as work: more workers would compete for the same cores, and a sweep cannot show "
            "what they would gain; set one thread per worker (lesson 00) and run the doctor again")
        return None
    batch_s = obs.steady_batch_s - (float(np.mean(obs.step_s[1:])) if obs.step_s[1:] else 0.0)
    if not (math.isfinite(batch_s) and batch_s > 0):  # one batch read (a one-batch epoch): its wait is the estimate
        batch_s = obs.first_batch_s if math.isfinite(obs.first_batch_s) and obs.first_batch_s > 0 else 1e-3
    slow = batch_s >= SLOW_BATCH_S  # then one batch in flight per worker keeps it busy, and a turn takes whole seconds

    def plan(values: list[int]) -> tuple[list[int], float]:
        """Batches each setting times per turn (about TURN_S of them, at least one per worker, and 2 unless batches are slow),
        and a round's seconds."""
        turns = [min(200, max(1 if slow else 2, w, math.ceil(TURN_S * max(1, min(w, cap)) / batch_s))) for w in values]
        queued = [w * (1 if slow else loader.prefetch_factor or 2) for w in values]
        return turns, sum((k + q) * batch_s / max(1, min(w, cap)) for k, q, w in zip(turns, queued, values))

    values = [workers, *candidates]
    per_turn, per_round = plan(values)
    if 2 * per_round + obs.first_batch_s * len(values) > obs.slot_left() and len(candidates) > 1:
        values = [workers, candidates[-1]]  # two rounds of every setting would not fit: the largest candidate alone
        per_turn, per_round = plan(values)
    need = 2 * per_round + obs.first_batch_s * len(values)
    if not obs.borrow(need):
        if slow and workers == 0:
            return _one_turn(obs, workers, batch_s, had)
        obs.skipped["workers-too-few"] = ("the num_workers sweep did not run: 2 rounds at the batch time measured do not fit; "
                                          + obs.too_short(need, had))
        return None
    had = max(had, obs.slot_left())
    timeout = max(1.0, obs.slot_left())
    loaders = [rebuild(loader, num_workers=w, persistent_workers=w > 0, timeout=timeout, prefetch_factor=1 if slow else None)
               for w in values]
    started: list[float] = []

    def after_start(seconds: float) -> float:
        """The rounds' time from now: the new workers' start-up was not in the first pass's times (none, or fork's)."""
        started.append(seconds)
        obs.borrow(2 * per_round)
        return time.perf_counter() + obs.slot_left()

    runs = alternating_rates(loaders, time.perf_counter() + obs.slot_left(), per_turn, rounds=SWEEP_ROUNDS,
                             distinct=obs.iterable, after_start=after_start)
    rounds = len(runs)
    candidates = values[1:]
    if rounds < 2:
        start = f", after {started[0]:.1f} s starting its loaders' workers" if started else ""
        obs.skipped["workers-too-few"] = (f"the num_workers sweep ran {rounds} round(s) of the 2 it needs (about {per_round:.1f} s "
                                          f"each at the batch time measured{start}); "
                                          + obs.too_short(need + sum(started), had))
        return None
    by = {w: [runs[r][i] for r in range(rounds)] for i, w in enumerate(values)}
    ratios = {w: paired_median(by[w], by[workers]) for w in candidates}
    lowest = {w: low_round([a / b for a, b in zip(by[w], by[workers]) if b > 0]) for w in candidates}
    obs.measured["sweep_samples_per_s"] = {w: round(float(np.median(by[w])), 1) for w in values}
    cleared = [w for w in candidates if lowest[w] >= SWEEP_GAIN]  # every round (but one of 4+), not the median alone
    best = max(cleared or candidates, key=ratios.__getitem__)
    won = bool(cleared)
    obs.measured.update(sweep_best=best if won else workers, sweep_gain=ratios[best], sweep_needed=SWEEP_GAIN)
    if not won:
        others = obs.measured.get("other_programs_cores", 0.0)
        if ratios[best] >= SWEEP_GAIN:
            obs.measured["sweep_unsettled"] = (f"rounds disagreed, {lowest[best]:.2f}x in the "
                                               f"{'second ' if rounds >= 4 else ''}lowest")
            obs.skipped["workers-too-few"] = (
                f"num_workers={best} gave {ratios[best]:.2f}x the samples/s of num_workers={workers} (median of {rounds} "
                f"interleaved rounds) but {lowest[best]:.2f}x in its {'second ' if rounds >= 4 else ''}lowest round, under "
                f"{SWEEP_GAIN}x: the rounds did not agree")
        elif others >= BUSY_CORES:  # the workers shared the cores with other programs: say so rather than stay silent
            obs.measured["sweep_unsettled"] = f"other programs used {others:.1f} cores in the first pass"
            obs.skipped["workers-too-few"] = (
                f"num_workers={best} gave {ratios[best]:.2f}x the samples/s of num_workers={workers} (median of {rounds} "
                f"interleaved rounds), under {SWEEP_GAIN}x, but other programs used {others:.1f} core(s) of this machine "
                f"during the first pass ({usable_cpus()} usable here): the sweep may have been limited by them; sweep "
                "again on a quiet machine")
        else:  # measured, on a quiet machine: say what, so the silence can be read
            obs.skipped["workers-too-few"] = (
                f"num_workers={best} gave {ratios[best]:.2f}x the samples/s of num_workers={workers} (median of {rounds} "
                f"interleaved rounds), under the {SWEEP_GAIN}x the rule asks before advising more workers")
        return None
    return finding(
        "workers-too-few", "warning",
        f"num_workers={best} gave {ratios[best]:.2f}x the {_unit(obs)} of num_workers={workers} (median of {rounds} interleaved "
        f"rounds, {lowest[best]:.2f}x in the {'second ' if rounds >= 4 else ''}lowest: {obs.measured['sweep_samples_per_s']})"
        f"{_loop_text(obs)}",
        f"set num_workers={best} (the course's rule allows {cap} per rank on this machine's {usable_cpus()} usable core(s))",
        num_workers=workers, best=best, speedup=ratios[best], rounds=rounds)
