"""The doctor's rules whose fixes lesson 03 teaches: a failing loader, data wait and headspace, a busy machine, worker start-up and memory."""
from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
from torch.utils.data import DataLoader

from helpers.doctor.findings import Finding
from helpers.doctor.measure import cpu_seconds, length, python_payload_mib
from helpers.doctor.pickling import start_method
from helpers.doctor.failures import counted, describe_sampler, fix_for, path_of, raised_in, sampler_of, weight_counts
from helpers.doctor.reading import first_failure, stop_workers
from helpers.doctor.registry import Observation, finding, rule
from helpers.env import usable_cpus
from helpers.rebuild import rebuild

T = TypeVar("T")

INPUT_BOUND_SHARE = 0.3   # steps that wait for data this share of their time or more
BUSY_CORES = 0.5          # other programs used this many cores or more while the loader ran (info)
BUSY_WINDOW_S = 0.5       # the machine's load is watched at least this long (after a shorter first pass, while idle)
STARTUP_SHARE = 0.2       # persistent workers would save this share of an epoch or more ...
STARTUP_MIN_S = 0.25      # ... and at least this many seconds per epoch
COPY_ON_READ_MIB = 8.0    # pages shared with the parent turned private per worker (median), and Python objects held, in MiB
REPLAY_STEPS = 24         # steps replayed from memory at most, for the headspace
REPLAY_SLOWER = 1.5       # a replayed step this many times slower than the loop's own (or faster as other programs stopped)


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
    epoch = length(obs.loader)
    if payload >= COPY_ON_READ_MIB > median and epoch and obs.batches < epoch and start_method(obs.loader) == "fork":
        obs.skipped["copy-on-read"] = (f"the dataset holds about {payload:.0f} MiB of Python objects, and {median:.1f} MiB "
                                       f"per worker (median) turned private over the {obs.batches} of {epoch} batches read: "
                                       "pages are copied as they are read, so a longer read (a larger budget) tells more")
    if median < COPY_ON_READ_MIB or payload < COPY_ON_READ_MIB:
        return None
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
    need = 1.5 * (epoch_s + obs.first_batch_s)
    if obs.borrow(need + 0.25):  # from the later rules' share when the budget left holds it (a slow start under forkserver)
        had = max(had, obs.slot_left())
    while obs.slot_left() > need and len(savings) < 3:
        persistent = rebuild(loader, persistent_workers=True, timeout=max(1.0, obs.slot_left()))
        try:
            cold, warm = _cold_and_warm(persistent)
        except Exception:  # noqa: BLE001 - a failure here was not seen in the first pass; say less
            break
        finally:
            stop_workers(persistent)
        savings.append(cold - warm)
    if not savings:
        obs.skipped["startup-cost"] = (f"persistent workers were not compared: reading an epoch ({epoch_s:.1f} s) with them and "
                                       "starting the next did not fit; " + obs.too_short(need, had))
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


def others_while(measure: Callable[[], T]) -> tuple[T, float]:
    """measure()'s result and the cores other programs used meanwhile, on the whole machine, as busy-host counts them."""
    (ours, machine), started = cpu_seconds([]), time.perf_counter()
    result = measure()
    (ours_after, machine_after), wall = cpu_seconds([]), time.perf_counter() - started
    return result, max(0.0, (machine_after - machine) - (ours_after - ours)) / max(wall, 1e-9)


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
    def replay() -> list[float]:
        times: list[float] = []
        for i in range(REPLAY_STEPS):
            if obs.slot_left() <= 0:
                break
            times.append(obs.time_step(obs.kept[i % len(obs.kept)]))
        return times

    replayed, during = others_while(replay)
    if len(replayed) < 2:
        obs.skipped["headspace"] = "no time left to replay batches through the step"
        return None
    # The loop's mean step (its time over its steps): workers deliver in bunches, so a median step would leave out the
    # long waits between bunches. The replay's median: a busy machine's outliers would otherwise decide the ratio.
    loop_s = (sum(obs.wait_s[1:]) + sum(obs.step_s[1:])) / (len(obs.wait_s) - 1)
    free_s = float(np.median(replayed))
    times = loop_s / free_s if free_s > 0 else math.inf
    before = obs.measured.get("other_programs_cores")
    step_s = float(np.median(obs.step_s[1:min(len(obs.kept), len(replayed))]))  # the same batches' steps in the loop
    obs.measured.update(replay_step_ms=1000 * free_s, loop_ms=1000 * loop_s, replay_others_cores=round(during, 2))
    slower = free_s > REPLAY_SLOWER * step_s  # the same batches, loading free, yet slower: not loading's doing
    freed = before is not None and before - during >= BUSY_CORES and free_s * REPLAY_SLOWER < step_s
    if slower or freed:
        load = "" if before is None else f"; other programs used {during:.1f} core(s) during the replay, {before:.1f} during the first pass"
        obs.skipped["headspace"] = (
            f"not compared: replaying {len(replayed)} batches through your step took {1000 * free_s:.1f} ms per step against "
            f"{1000 * step_s:.1f} ms (median) for the same batches in the first pass{load}: "
            + ("the same step with loading free ran slower, so something else changed between the two (the machine's "
               "load, or your step's own state)" if slower else
               "the replay may be faster because the other programs stopped, not because loading was free")
            + "; measure again on a quiet machine")
        return None
    obs.measured["headspace"] = times
    faster = f"{times:.2f}x faster" if times >= 1 else f"no faster ({times:.2f}x: the replay's steps were slower)"
    return finding(
        "headspace", "info",
        f"with loading free, the loop would run {faster}: {1000 * loop_s:.1f} ms per step as measured (mean), "
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
    unsettled, cheaper = obs.measured.get("sweep_unsettled"), "make each item cheaper (decode, transforms) or fetch in batches (__getitems__)"
    if best is not None and gain is not None and best != obs.loader.num_workers and not unsettled:
        advice = f"set num_workers={best} (the sweep measured {gain:.2f}x the samples/s); then cheaper transforms or batched fetching (__getitems__)"
    elif unsettled and gain is not None:  # the sweep's own note (workers-too-few) says why its gain decides nothing
        advice = (f"more workers measured {gain:.2f}x here, not a settled answer ({unsettled}: workers-too-few's note says "
                  f"more): sweep again on a quiet machine or with a larger budget, or {cheaper}")
    elif best is not None:
        needed = obs.measured.get("sweep_needed")
        advice = (f"more workers measured {gain:.2f}x here, under the {needed}x the sweep asks: {cheaper}"
                  if gain is not None and needed else f"more workers measured no faster here (the sweep): {cheaper}")
    else:
        advice = "make batches faster: cheaper transforms, batched fetching (__getitems__), or more workers if cores are free (a sweep: lesson 03)"
    room = obs.measured.get("headspace")
    headspace_text = f"; with loading free (headspace: the step replayed from memory) the loop would run {room:.2f}x faster" if isinstance(room, float) else ""
    return finding(
        "input-bound", "warning",
        f"over {len(obs.wait_s) - 1} steps, {share:.0%} of the time was spent waiting for data (median wait "
        f"{obs.measured['wait_ms_median']:.1f} ms, step {obs.measured['step_ms_median']:.1f} ms){headspace_text}",
        advice, data_wait_share=share, steps=len(obs.wait_s) - 1, headspace=room)
