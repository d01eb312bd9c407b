"""The doctor's rules whose fixes lesson 03 teaches: a failing loader, data wait and headspace, a busy machine, worker start-up and memory."""
from __future__ import annotations

import math
import statistics
import time
from typing import Any

import numpy as np
from torch.utils.data import DataLoader

from helpers.doctor.findings import Finding
from helpers.doctor.measure import cpu_seconds, length, python_payload_mib, ranks_on_node
from helpers.doctor.failures import counted, describe_sampler, fix_for, path_of, raised_in, sampler_of, weight_counts
from helpers.doctor.reading import alternating_rates, first_failure, rebuild
from helpers.doctor.registry import Observation, finding, rule
from helpers.env import usable_cpus, workers_per_rank
from helpers.timing import others_during, paired_median

INPUT_BOUND_SHARE = 0.3   # steps that wait for data this share of their time or more
BUSY_CORES = 0.5          # other programs used this many cores or more while the loader ran (info)
BUSY_WINDOW_S = 0.5       # the machine's load is watched at least this long (after a shorter first pass, while idle)
STARTUP_SHARE = 0.2       # persistent workers would save this share of an epoch or more ...
STARTUP_MIN_S = 0.25      # ... and at least this many seconds per epoch
COPY_ON_READ_MIB = 8.0    # pages shared with the parent turned private per worker (median), and Python objects held, in MiB
REPLAY_STEPS = 24         # steps replayed from memory at most, for the headspace


def _doing(failed: Any, obs: Observation, stage: str | None) -> str:
    """What the loader was doing when it failed, in words."""
    if stage == "sampler" and failed.while_ == "starting the workers":
        return "drawing the first batches' indices (the main process draws them as the workers start)"
    if stage == "sampler" and failed.while_ == "reading batches":
        return f"drawing indices after {obs.batches} batch(es) had arrived" if obs.batches else "drawing the first batch's indices"
    if failed.while_ == "drawing from the sampler":
        return "the doctor drew from it before reading, as the loader's first batch would"
    return failed.while_


@rule("loader-error", severities=("error",), phase="pass", planted="fails",
      taught_in=("03_loader_bottlenecks", "10. When the loader fails: three debugging moves"))
def loader_error(obs: Observation) -> Finding | None:
    """The loader raised (in the dataset, sampler, collate or while workers start) or gave no batch in time: which part raised, and why."""
    failed = obs.failure
    if failed is None:
        return None
    evidence: dict[str, Any] = {"error": failed.summary, "while": failed.while_, "after_s": round(failed.after_s, 2),
                                "num_workers": obs.loader.num_workers}
    found = None if failed.timed_out else raised_in(obs.loader, failed.error)  # its own frames: a main-process error
    stage, owner = found if found else (None, None)
    if failed.timed_out:
        message = f"no batch within {failed.after_s:.1f} s (a hang, or a start-up slower than the budget): {failed.summary}"
    elif stage == "sampler":
        message = f"{describe_sampler(obs.loader, owner)} raised {failed.summary} while {_doing(failed, obs, stage)}"
    elif stage is not None:
        message = f"{'the dataset' if stage == 'dataset' else 'collate_fn'} raised {failed.summary} while {failed.while_}"
    else:
        message = f"the loader raised {failed.summary} while {_doing(failed, obs, stage)}"
    if not failed.timed_out and failed.while_ == "reading batches" and stage != "sampler":
        plain = first_failure(obs.loader, max(min(obs.left(), 5.0), 1.0))
        if plain is not None:
            evidence["traceback_num_workers_0"] = plain.traceback
            last = plain.traceback.strip().splitlines()[-1]
            if plain.stage == "sampler":
                owner = (raised_in(obs.loader, plain.error) or (None, sampler_of(obs.loader)))[1]
                where = describe_sampler(obs.loader, owner)
            else:
                where = {"dataset": f"the dataset at index {plain.index}", "collate_fn": "collate_fn (every item of the batch read)"
                         }.get(plain.stage, "the loader")
            stage = stage or plain.stage or None
            message += f"; read with num_workers=0, {where} raised: {last}"
        if plain is not None and plain.index is not None:
            evidence["index"] = plain.index
            path = path_of(obs.loader.dataset, plain.index)
            if path:
                evidence["file"] = path
                message += f" (index {plain.index} is {path})"
    evidence["stage"] = stage or ("the workers' start" if failed.while_ == "starting the workers" else "unknown")
    if stage == "sampler":
        evidence["sampler"] = type(owner).__name__
        counts = weight_counts(owner)
        if counts is not None:
            evidence["weights"] = counts
            message += f"; its weights: {counted(counts)}"
    obs.skipped["measurements"] = "the loader failed, so nothing else was measured"
    return finding("loader-error", "error", message, fix_for(failed, stage, owner), **evidence)


@rule("busy-host", severities=("info",), phase="pass", planted="busy_host",
      taught_in=("03_loader_bottlenecks", "2. A benchmark you can trust"),
      thresholds={"BUSY_CORES": (BUSY_CORES, "cores other programs used while the loader ran")})
def busy_host(obs: Observation) -> Finding | None:
    """Other programs' CPU while the first pass ran: the machine's busy CPU minus this process and its workers'."""
    wall, ours, machine = (obs.cpu.get(k, 0.0) for k in ("wall_s", "ours_s", "machine_s"))
    if wall < BUSY_WINDOW_S and obs.left() > BUSY_WINDOW_S - wall:  # a short pass: watch the machine a little longer
        (ours0, machine0), started = cpu_seconds([]), time.perf_counter()
        time.sleep(BUSY_WINDOW_S - wall)
        (ours1, machine1), extra = cpu_seconds([]), time.perf_counter() - started
        wall, ours, machine = wall + extra, ours + ours1 - ours0, machine + machine1 - machine0
    if wall < 0.2:
        obs.skipped["busy-host"] = "no time left to measure the machine's load"
        return None
    others = max(0.0, (machine - ours) / wall)
    cores = usable_cpus()
    obs.measured.update(other_programs_cores=round(others, 2), loader_cores=round(ours / wall, 2))
    if others < BUSY_CORES:
        return None
    return finding(
        "busy-host", "info",
        f"other programs used {others:.1f} core(s) of this machine while the loader ran (the loader and its workers: "
        f"{ours / wall:.1f} of {cores} usable): every speed here is what was left to it",
        "measure on a quiet machine, or ask your scheduler for whole cores; compare speeds measured side by side (lesson 03)",
        other_cores=others, loader_cores=ours / wall, usable_cores=cores)


@rule("copy-on-read", severities=("warning",), phase="pass", planted="copy_on_read",
      taught_in=("03_loader_bottlenecks", "8. Copy-on-read: why workers' memory grows"),
      thresholds={"COPY_ON_READ_MIB": (COPY_ON_READ_MIB, "MiB of pages turned from shared to private per worker, and of Python objects held")})
def copy_on_read(obs: Observation) -> Finding | None:
    """Pages a forked worker shared with the parent turning private while it reads, from a dataset that holds Python objects."""
    if obs.loader.num_workers == 0 or not obs.worker_pages:
        if obs.loader.num_workers and not obs.worker_pages:
            obs.skipped["copy-on-read"] = "needs /proc/PID/smaps_rollup (Linux 4.14+) to tell shared pages from private ones"
        return None
    moved = [min(start["shared"] - end["shared"], end["private"] - start["private"]) for start, end in obs.worker_pages]
    payload = python_payload_mib(obs.loader.dataset)
    median = float(np.median(moved))
    obs.measured.update(worker_shared_to_private_mib=[round(m, 1) for m in moved], dataset_python_objects_mib=round(payload, 1))
    if median < COPY_ON_READ_MIB or payload < COPY_ON_READ_MIB:
        return None
    epoch = length(obs.loader)
    read = f"while reading {obs.batches} of {epoch} batches" if epoch else f"while reading {obs.batches} batches"
    return finding(
        "copy-on-read", "warning",
        f"in each worker, {median:.0f} MiB of pages shared with the main process became private copies (median of "
        f"{len(moved)}) {read}, and the dataset holds about {payload:.0f} MiB of Python objects: touching a Python object "
        "(its reference count when it is read, the garbage collector when it walks) writes its page, and a written page "
        "is copied",
        "keep the dataset's records in numpy arrays or tensors (strings as fixed-width bytes), not lists or dicts of Python objects (lesson 03)",
        shared_to_private_mib=median, python_objects_mib=payload, batches_read=obs.batches, workers=len(moved))


def _cold_and_warm(loader: DataLoader) -> tuple[float, float]:
    """Seconds to the first batch with workers starting, then, after reading that epoch to its end, with the same workers."""
    started = time.perf_counter()
    iterator = iter(loader)
    next(iterator)
    cold = time.perf_counter() - started
    for _ in iterator:  # the rest of the epoch: a new epoch on an unfinished one would first drain its batches in flight
        pass
    started = time.perf_counter()
    next(iter(loader))
    return cold, time.perf_counter() - started


@rule("startup-cost", severities=("warning",), phase="measure", budget=1.0, planted="startup",
      applies=lambda obs: obs.loader.num_workers > 0 and not obs.loader.persistent_workers and not obs.iterable,
      taught_in=("03_loader_bottlenecks", "6. Worker start-up, `persistent_workers` and `prefetch_factor`"),
      thresholds={"STARTUP_SHARE": (STARTUP_SHARE, "share of an epoch persistent workers would save"),
                  "STARTUP_MIN_S": (STARTUP_MIN_S, "seconds per epoch persistent workers would save")})
def startup_cost(obs: Observation) -> Finding | None:
    """What persistent_workers=True saves each epoch: the first batch with workers starting, against the same workers after an epoch."""
    loader = obs.loader
    if loader.num_workers == 0 or loader.persistent_workers or obs.iterable:
        return None
    per_epoch = length(loader)
    if per_epoch is None or math.isnan(obs.steady_batch_s):
        obs.skipped["startup-cost"] = "the epoch's length is unknown (no len(loader))"
        return None
    epoch_s, had = obs.first_batch_s + (per_epoch - 1) * obs.steady_batch_s, obs.slot_left()
    bound = max(0.0, obs.first_batch_s - obs.steady_batch_s)  # start-up can cost at most the first batch's extra wait
    obs.measured.update(epoch_s_estimate=epoch_s, startup_at_most_s=bound)
    if bound < STARTUP_MIN_S or bound < STARTUP_SHARE * epoch_s:
        return None  # even all of the first batch's extra wait would be below the thresholds
    savings: list[float] = []
    while obs.slot_left() > 1.5 * (epoch_s + obs.first_batch_s) and len(savings) < 3:
        persistent = rebuild(loader, persistent_workers=True, timeout=max(1.0, obs.slot_left()))
        try:
            cold, warm = _cold_and_warm(persistent)
        except Exception:  # noqa: BLE001 - a failure here was not seen in the first pass; say less
            break
        finally:
            if persistent._iterator is not None:  # private: the persistent workers' iterator
                persistent._iterator._shutdown_workers()
        savings.append(cold - warm)
    if not savings:
        obs.skipped["startup-cost"] = (f"persistent workers were not compared: reading an epoch ({epoch_s:.1f} s) with them and "
                                       "starting the next did not fit; " + obs.too_short(1.5 * (epoch_s + obs.first_batch_s), had))
        return None
    saving = statistics.median(savings)
    share = saving / epoch_s if epoch_s > 0 else 0.0
    obs.measured.update(persistent_saves_s=saving)
    if saving < STARTUP_MIN_S or share < STARTUP_SHARE:
        return None
    return finding(
        "startup-cost", "warning",
        f"starting {loader.num_workers} workers costs {saving:.2f} s before each epoch's first batch (median of {len(savings)}: "
        f"first batch with new workers minus with the same workers after an epoch), {share:.0%} of an epoch of {per_epoch} "
        f"batches ({epoch_s:.2f} s)",
        f"set persistent_workers=True: it saves about {saving:.2f} s every epoch after the first",
        saves_s=saving, epoch_s=epoch_s, share=share, batches_per_epoch=per_epoch, rounds=len(savings))


@rule("headspace", severities=("info",), phase="measure", budget=0.5, planted="input_bound", applies=lambda obs: obs.step is not None,
      taught_in=("03_loader_bottlenecks", "5. Is my training input-bound?"))
def headspace(obs: Observation) -> Finding | None:
    """Batches already read, replayed from memory through the step: how much faster the loop runs with loading free."""
    if obs.step is None:
        speed = (f"{obs.samples_per_s:.0f} samples/s" if math.isfinite(obs.samples_per_s)
                 else f"{obs.samples} samples in {obs.batches} batch(es), the first after {obs.first_batch_s:.2f} s")
        obs.skipped["headspace"] = (f"no step given: the loader alone delivered {speed}; pass step=your_train_step to see how "
                                    "much faster your loop would run with loading free")
        return None
    if len(obs.kept) < 2 or len(obs.wait_s) < 3:
        obs.skipped["headspace"] = "fewer than 3 steps ran in the first pass"
        return None
    replayed: list[float] = []
    for i in range(REPLAY_STEPS):
        if obs.slot_left() <= 0:
            break
        replayed.append(obs.time_step(obs.kept[i % len(obs.kept)]))
    if len(replayed) < 2:
        obs.skipped["headspace"] = "no time left to replay batches through the step"
        return None
    loop_s = float(np.median([w + s for w, s in zip(obs.wait_s[1:], obs.step_s[1:])]))  # medians: a busy machine's
    free_s = float(np.median(replayed))  # outliers would otherwise decide the ratio
    times = loop_s / free_s if free_s > 0 else math.inf
    obs.measured.update(headspace=times, replay_step_ms=1000 * free_s, loop_ms=1000 * loop_s)
    return finding(
        "headspace", "info",
        f"with loading free, the loop would run {times:.2f}x faster: {1000 * loop_s:.1f} ms per step as measured (median), "
        f"{1000 * free_s:.1f} ms replaying {len(obs.kept)} batches from memory through your step ({len(replayed)} steps)",
        "a faster loader can gain at most this much; close to 1x, make the step faster instead",
        headspace=times, loop_ms=1000 * loop_s, replay_step_ms=1000 * free_s, replayed=len(replayed))


@rule("input-bound", severities=("warning",), phase="verdict", planted="input_bound",
      taught_in=("03_loader_bottlenecks", "5. Is my training input-bound?"),
      thresholds={"INPUT_BOUND_SHARE": (INPUT_BOUND_SHARE, "share of step time spent waiting for data")})
def input_bound(obs: Observation) -> Finding | None:
    """The share of each step spent waiting for the next batch; the advice follows what the sweep measured."""
    if obs.step is None:
        obs.skipped["input-bound"] = "no step given: pass step=your_train_step to measure data wait against compute"
        return None
    wait, compute = sum(obs.wait_s[1:]), sum(obs.step_s[1:])
    if wait + compute <= 0:
        obs.skipped["input-bound"] = "fewer than 2 steps ran within the budget"
        return None
    share = wait / (wait + compute)
    obs.measured.update(data_wait_share=share, wait_ms_median=1000 * float(np.median(obs.wait_s[1:])),
                        step_ms_median=1000 * float(np.median(obs.step_s[1:])))
    if share < INPUT_BOUND_SHARE:
        return None
    best, gain = obs.measured.get("sweep_best"), obs.measured.get("sweep_gain")
    if best is not None and gain is not None and best != obs.loader.num_workers:
        advice = f"set num_workers={best} (the sweep measured {gain:.2f}x the samples/s); then cheaper transforms or batched fetching (__getitems__)"
    elif best is not None:
        advice = ("more workers measured no faster here (the sweep): make each item cheaper (decode, transforms) or fetch in "
                  "batches (__getitems__)")
    else:
        advice = "make batches faster: cheaper transforms, batched fetching (__getitems__), or more workers if cores are free (a sweep: lesson 03)"
    room = obs.measured.get("headspace")
    headspace_text = f"; with loading free the loop would run {room:.2f}x faster" if isinstance(room, float) else ""
    return finding(
        "input-bound", "warning",
        f"over {len(obs.wait_s) - 1} steps, {share:.0%} of the time was spent waiting for data (median wait "
        f"{obs.measured['wait_ms_median']:.1f} ms, step {obs.measured['step_ms_median']:.1f} ms){headspace_text}",
        advice, data_wait_share=share, steps=len(obs.wait_s) - 1, headspace=room)


SWEEP_GAIN = 1.3  # more workers must give this many times the samples/s, in every paired round
TURN_S = 0.25     # each setting's turn in a sweep round times about this long, at the batch time first measured
SLOW_BATCH_S = 0.1  # batches this slow are swept with one batch in flight per worker (prefetch_factor=1)


def _sweep_cap() -> int:
    return max(1, workers_per_rank(ranks_on_node(), usable_cpus()))


def loop_headroom(obs: Observation) -> tuple[float, float] | None:
    """(share of the loop's time spent waiting for data, how many times faster the loop would run with loading free), from the
    first pass's steps after the first (medians); None without a step or with fewer than 3 steps."""
    if obs.step is None or len(obs.wait_s) < 3:
        return None
    loop = float(np.median([w + s for w, s in zip(obs.wait_s[1:], obs.step_s[1:])]))
    step = float(np.median(obs.step_s[1:]))
    share = sum(obs.wait_s[1:]) / max(sum(obs.wait_s[1:]) + sum(obs.step_s[1:]), 1e-12)
    return share, (loop / step if step > 0 else math.inf)


def _one_turn(obs: Observation, workers: int, batch_s: float, had: float) -> Finding | None:
    """Batches too slow for interleaved rounds: one turn of the most workers the rule allows, against the first pass's
    batch time, trusted only when other programs left the cores alone during both."""
    loader, cap = obs.loader, _sweep_cap()
    need = obs.first_batch_s + (2 * cap + 1) * batch_s  # start-up, the batches in flight, then one per worker timed
    if need > obs.borrow(need):
        obs.skipped["workers-too-few"] = ("the num_workers sweep did not run: one turn of the most workers the rule allows at the "
                                          "batch time measured does not fit; " + obs.too_short(need, had))
        return None
    more = rebuild(loader, num_workers=cap, persistent_workers=True, timeout=max(1.0, obs.slot_left()), prefetch_factor=1)
    runs, during = others_during(lambda: alternating_rates([more], time.perf_counter() + obs.slot_left(), [cap], rounds=1))
    before = obs.measured.get("other_programs_cores")
    if not runs:
        obs.skipped["workers-too-few"] = ("the num_workers sweep did not finish its one turn of num_workers="
                                          f"{cap}; " + obs.too_short(need, had))
        return None
    given = (obs.samples / obs.batches) / batch_s
    gain = runs[0][0] / given
    obs.measured.update(sweep_samples_per_s={workers: round(given, 1), cap: round(runs[0][0], 1)}, sweep_gain=gain,
                        sweep_best=cap if gain >= SWEEP_GAIN else workers, sweep_others_cores=round(during, 2))
    quiet = before is not None and max(before, during) < BUSY_CORES
    if gain < SWEEP_GAIN or not quiet:
        if gain >= SWEEP_GAIN:
            obs.skipped["workers-too-few"] = (
                f"num_workers={cap} gave {gain:.2f}x the samples/s of the first pass, measured one after the other (batches of "
                f"{batch_s:.2f} s are too slow for interleaved rounds in this budget), but other programs used "
                f"{max(before or 0.0, during):.1f} core(s) meanwhile: measure again on a quiet machine or with a larger budget")
        return None
    return finding(
        "workers-too-few", "warning",
        f"num_workers={cap} gave {gain:.2f}x the samples/s of num_workers={workers} ({runs[0][0]:.1f} against {given:.1f}; "
        f"batches of {batch_s:.2f} s: one turn of {cap} workers against the first pass, one after the other, other programs "
        f"using under {BUSY_CORES} core both times){_loop_text(obs)}",
        f"set num_workers={cap} (the course's rule allows {cap} per rank on this machine's {usable_cpus()} usable core(s))",
        num_workers=workers, best=cap, speedup=gain, rounds=1)


def _loop_text(obs: Observation) -> str:
    room = loop_headroom(obs)
    return "" if room is None else (f"; your loop waited {room[0]:.0%} of its time for data: with loading free it would run at "
                                    f"most {room[1]:.2f}x faster")


@rule("workers-too-few", severities=("warning",), phase="measure", budget=3.0, planted="too_few",
      applies=lambda obs: obs.loader.num_workers < _sweep_cap(),
      taught_in=("03_loader_bottlenecks", "3. `num_workers` when items cost CPU"),
      thresholds={"SWEEP_GAIN": (SWEEP_GAIN, "samples/s with more workers over as given, in every interleaved round")})
def workers_too_few(obs: Observation) -> Finding | None:
    """A num_workers sweep up to the course's rule: each setting's workers started once, timed in turns (the others paused)."""
    loader, workers, had = obs.loader, obs.loader.num_workers, obs.slot_left()
    cap = _sweep_cap()
    candidates = sorted({w for w in (workers + 1, workers + 2, 2 * workers) if workers < w <= cap})[:2]
    if not candidates:
        obs.skipped["workers-too-few"] = f"num_workers={workers} is already the course's rule for this machine ({cap} per rank)"
        return None
    room = loop_headroom(obs)
    if room is not None and room[1] < SWEEP_GAIN:
        obs.skipped["workers-too-few"] = (
            f"no sweep: your loop waited {room[0]:.0%} of its time for data (first pass, {len(obs.wait_s) - 1} steps): with "
            f"loading free it would run at most {room[1]:.2f}x faster, under {SWEEP_GAIN}x, so more workers cannot speed it up "
            "that much; make the step faster instead")
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
        values = [workers, candidates[-1]]  # two rounds of every setting would not fit: the most workers the rule allows
        per_turn, per_round = plan(values)
    need = 2 * per_round + obs.first_batch_s * len(values)
    if need > obs.borrow(need):
        if slow and workers == 0:
            return _one_turn(obs, workers, batch_s, had)
        obs.skipped["workers-too-few"] = ("the num_workers sweep did not run: 2 rounds at the batch time measured do not fit; "
                                          + obs.too_short(need, had))
        return None
    timeout = max(1.0, obs.slot_left())
    loaders = [rebuild(loader, num_workers=w, persistent_workers=w > 0, timeout=timeout, prefetch_factor=1 if slow else None)
               for w in values]
    runs = alternating_rates(loaders, time.perf_counter() + obs.slot_left(), per_turn)
    rounds = len(runs)
    candidates = values[1:]
    if rounds < 2:
        obs.skipped["workers-too-few"] = (f"the num_workers sweep ran {rounds} round(s) of the 2 it needs (about {per_round:.1f} s "
                                          "each at the batch time measured); " + obs.too_short(need, had))
        return None
    by = {w: [runs[r][i] for r in range(rounds)] for i, w in enumerate(values)}
    ratios = {w: paired_median(by[w], by[workers]) for w in candidates}
    lowest = {w: min(a / b for a, b in zip(by[w], by[workers]) if b > 0) for w in candidates}
    obs.measured["sweep_samples_per_s"] = {w: round(float(np.median(by[w])), 1) for w in values}
    best = max(ratios, key=ratios.__getitem__)
    won = lowest[best] >= SWEEP_GAIN  # every round, not only the median: a fast loader's rounds scatter
    obs.measured.update(sweep_best=best if won else workers, sweep_gain=ratios[best])
    if not won:
        others = obs.measured.get("other_programs_cores", 0.0)
        if ratios[best] >= SWEEP_GAIN:
            obs.skipped["workers-too-few"] = (
                f"num_workers={best} gave {ratios[best]:.2f}x the samples/s of num_workers={workers} (median of {rounds} "
                f"paired rounds) but {lowest[best]:.2f}x in its lowest round, under {SWEEP_GAIN}x: not every round agreed")
        elif others >= BUSY_CORES:  # the workers shared the cores with other programs: say so rather than stay silent
            obs.skipped["workers-too-few"] = (
                f"num_workers={best} gave {ratios[best]:.2f}x the samples/s of num_workers={workers} (median of {rounds} "
                f"paired rounds), under {SWEEP_GAIN}x, but other programs used {others:.1f} core(s) of this machine "
                f"during the first pass ({usable_cpus()} usable here): the sweep may have been limited by them; sweep "
                "again on a quiet machine")
        return None
    return finding(
        "workers-too-few", "warning",
        f"num_workers={best} gave {ratios[best]:.2f}x the samples/s of num_workers={workers} (median of {rounds} interleaved "
        f"rounds, {lowest[best]:.2f}x in the lowest: {obs.measured['sweep_samples_per_s']}){_loop_text(obs)}",
        f"set num_workers={best} (the course's rule allows {cap} per rank on this machine's {usable_cpus()} usable core(s))",
        num_workers=workers, best=best, speedup=ratios[best], rounds=rounds)
