"""One diagnosis: the registry's rules phase by phase around one pass over the loader, within the budget (lesson 07)."""
from __future__ import annotations

import inspect
import math
import multiprocessing.util
import numbers
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import psutil
import torch
from torch.utils.data import DataLoader

from helpers._validate import as_device, short
from helpers.batches import tensors
from helpers.doctor.findings import SEVERITIES, Diagnosis, Finding
from helpers.doctor.measure import count, cpu_seconds, identities, is_pinned, labels, length, pages, real_tokens, summary
from helpers.doctor.reading import Arrival, LoaderFailed, batches, threads_left
from helpers.doctor.registry import Check, Observation, Rule, in_order
from helpers.doctor.threads import ThreadCensus, working_threads

FIRST_PASS_SHARE = 0.35      # of the budget: the loader as given; the rest goes to the rules' own measurements
FIRST_BATCH_SHARE = 0.75     # of the budget: the longest the first pass waits for its first batch (workers starting)
KEEP_BATCHES = 32            # batches kept in memory to replay through the step (headspace) ...
KEEP_BYTES = 256 * 1024 ** 2  # ... and at most this many bytes of them
MAX_BATCHES = 400
SNAPSHOT_S = 0.25  # the workers' pages, threads and CPU are read at most this often during the first pass


def diagnose(loader: DataLoader, *, step: Callable[[Any], Any] | None = None, budget_s: float = 30.0,
             device: Any = None, checks: Sequence[Check] = (), epochs: int = 1, ranks: int = 1, resume: bool = False,
             make_loader: Callable[..., DataLoader] | None = None) -> Diagnosis:
    """Measure `loader` (and `step(batch)` when given) within `budget_s` seconds and return the findings; `checks` adds your
    own (lesson 07); `epochs`, `ranks` and `resume` read whole epochs through a ledger (lesson 09), `make_loader` builds rank
    r's loader as `make_loader(rank=r, world_size=ranks)` (ranks > 1) or a fresh one as `make_loader()`."""
    if not isinstance(loader, DataLoader):
        raise TypeError(f"loader must be a torch.utils.data.DataLoader, got {short(loader)}")
    if step is not None and not callable(step):
        raise TypeError(f"step must be a callable taking one batch, got {short(step)}")
    if isinstance(budget_s, bool) or not isinstance(budget_s, (int, float)) or not math.isfinite(budget_s) or budget_s <= 0:
        raise ValueError(f"budget_s must be a positive number of seconds, got {short(budget_s)}")
    device = None if device is None else as_device("device", device)
    if device is not None and device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device is {device}, but CUDA is not available here")
    if not isinstance(checks, Sequence) or not all(callable(c) for c in checks):
        raise TypeError(f"checks must be a sequence of callables taking an Observation, got {short(checks)}")
    for name, value in (("epochs", epochs), ("ranks", ranks)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a whole number >= 1, got {short(value)}")
    epochs, ranks = int(epochs), int(ranks)
    if not isinstance(resume, bool):
        raise TypeError(f"resume must be True or False, got {short(resume)}")
    check_make_loader(make_loader, ranks, resume)
    # multiprocessing's temporary folder, made here: workers share it (removed at this process's exit) rather than each
    # making its own for the socket that hands over its first tensor, which a worker the doctor terminates leaves behind
    multiprocessing.util.get_temp_dir()
    start = time.perf_counter()
    obs = Observation(loader, step, device, deadline=start + 0.85 * budget_s, budget_s=float(budget_s),  # the rest covers stopping workers
                      epochs=epochs, ranks=ranks, resume=resume, make_loader=make_loader)
    obs.measured.update(num_workers=loader.num_workers, batch_size=loader.batch_size, pin_memory=loader.pin_memory,
                        persistent_workers=loader.persistent_workers)
    findings: list[Finding] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rules = in_order()
        for phase in ("static", "pass", "measure", "verdict"):
            if phase == "pass" and obs.failure is None:
                _first_pass(obs)
            if obs.failure is not None:
                break
            if phase != "static" and obs.batches == 0:  # nothing read: only rules that judge other ranks' loaders too
                _run_phase(obs, [r for r in rules if r.phase == phase and r.runs_without_batches], findings)
                continue
            _run_phase(obs, [r for r in rules if r.phase == phase], findings)
        if obs.failure is not None:
            _run_phase(obs, [r for r in rules if r.code == "loader-error"], findings)
        elif obs.batches == 0 and "all" not in obs.skipped:
            obs.skipped["all"] = "the loader yielded no batch"
        else:
            for check in checks:
                result = check(obs)
                if result is not None and not isinstance(result, Finding):
                    raise TypeError(f"check {getattr(check, '__name__', short(check))} must return a Finding or None, got {short(result)}")
                if result is not None:
                    findings.append(result)
    obs.kept.clear()
    left = threads_left()
    if left:
        obs.skipped["threads"] = (f"{len(left)} doctor thread(s) still inside your loader's code at the end (a slow call or a hang): they end "
                                  "when that call returns; the command line exits without waiting")
    order = {s: i for i, s in enumerate(SEVERITIES)}
    findings.sort(key=lambda f: order[f.severity])
    seen = sorted({f"{w.category.__name__}: {str(w.message).splitlines()[0]}" for w in caught})
    return Diagnosis(findings, obs.measured, obs.skipped, time.perf_counter() - start, float(budget_s), seen)


def check_make_loader(make_loader: Any, ranks: int, resume: bool) -> None:
    """make_loader is a callable, given when ranks > 1 or resume, taking rank= and world_size= when ranks > 1."""
    if make_loader is None:
        if ranks > 1 or resume:
            raise ValueError(f"make_loader is needed for ranks={ranks}, resume={resume}: a function building the loader "
                             "afresh (with rank= and world_size= keyword arguments when ranks > 1)")
        return
    if not callable(make_loader):
        raise TypeError(f"make_loader must be a function returning a DataLoader, got {short(make_loader)}")
    try:
        signature = inspect.signature(make_loader)
    except (TypeError, ValueError):  # no signature to read (a builtin): calling it will tell
        return
    try:
        signature.bind(rank=0, world_size=ranks) if ranks > 1 else signature.bind()
    except TypeError:
        needs = f"rank= and world_size= keyword arguments for ranks={ranks}" if ranks > 1 else "to be callable with no argument"
        raise ValueError(f"make_loader must take {needs}, got {short(make_loader)}{signature}") from None


def _run_phase(obs: Observation, rules: list[Rule], findings: list[Finding]) -> None:
    """Run `rules` in order; a measuring rule gets its weight's share of what is left; the learner's errors become loader-error."""
    for i, rule in enumerate(rules):
        if obs.failure is not None and rule.code != "loader-error":
            return
        weights = sum(r.budget for r in rules[i:] if r.applies is None or r.applies(obs))
        obs.slot_end = time.perf_counter() + obs.left() * rule.budget / max(weights, rule.budget) if rule.budget else math.inf
        try:
            result = rule.check(obs)
        except LoaderFailed as failed:
            obs.failure = failed
            return
        except Exception as exc:  # noqa: BLE001 - a rule that breaks says so and the others still run
            obs.skipped[rule.code] = f"the check itself failed: {summary(exc)}"
            continue
        if result is not None:
            findings.append(result)


def _first_pass(obs: Observation) -> None:
    """Read the loader as given (with the step when there is one) for a share of the budget, recording what rules need."""
    loader = obs.loader
    limit = length(loader)
    window = FIRST_PASS_SHARE * obs.left()
    state: dict[str, Any] = {}

    def started(iterator: Any) -> None:
        state["pids"] = [w.pid for w in getattr(iterator, "_workers", [])]  # private: the worker processes
        state["pages"] = [pages(pid) for pid in state["pids"]]
        state["cpu"], state["t"] = cpu_seconds(state["pids"]), time.perf_counter()
        state["last"] = 0.0

    def snapshot() -> None:
        """The workers' pages, working threads and CPU now, kept only while every worker can still be read: an epoch
        that ends inside the window shuts the workers down before the pass ends, and their last readable state counts."""
        if "pids" not in state or time.perf_counter() - state["last"] < SNAPSHOT_S:
            return
        end = [pages(pid) for pid in state["pids"]]
        threads = [working_threads(pid, census.python_threads(pid)) for pid in state["pids"]]
        (ours0, machine0), (ours1, machine1) = state["cpu"], cpu_seconds(state["pids"])
        if state["pids"] and (any(p is None for p in end) or any(not psutil.pid_exists(pid) for pid in state["pids"])):
            return
        state["last"] = time.perf_counter()
        obs.worker_pages = [(a, b) for a, b in zip(state["pages"], end) if a is not None and b is not None]
        obs.worker_threads = [n for n in threads if n]
        obs.cpu = {"wall_s": state["last"] - state["t"], "ours_s": ours1 - ours0, "machine_s": machine1 - machine0}

    def ending(iterator: Any) -> None:
        state["last"] = 0.0  # the final snapshot, when the workers are still there
        snapshot()

    census = ThreadCensus(loader.worker_init_fn, tempfile.mkdtemp(prefix="doctor-threads-"))  # the DataLoader's own threads
    try:
        for arrival, batch in batches(loader, time.perf_counter() + window, min(limit, MAX_BATCHES) if limit else MAX_BATCHES,
                                      on_start=started, on_end=ending, step=obs.time_step if obs.step else None,
                                      fetch_timeout_s=FIRST_BATCH_SHARE * obs.left(),  # a slow start-up is not a hang
                                      window_after_first=(window, obs.deadline),  # nor is a slow first step
                                      worker_init_fn=census if loader.num_workers > 0 else None):
            _observe(obs, arrival, batch)
            snapshot()
    except LoaderFailed as failed:
        if not _still_starting(obs, failed, census):
            obs.failure = failed
        return
    finally:
        shutil.rmtree(census.folder, ignore_errors=True)
    if obs.batches:
        obs.measured.update(batches_read=obs.batches, samples_read=obs.samples, first_batch_s=obs.first_batch_s,
                            steady_batch_s=obs.steady_batch_s, samples_per_s=obs.samples_per_s)
        if obs.worker_threads:
            obs.measured["worker_threads"] = list(obs.worker_threads)  # threads computing side by side, per worker


def _still_starting(obs: Observation, failed: LoaderFailed, census: ThreadCensus) -> bool:
    """No first batch in time while some workers had not finished starting: said in `skipped`, not a loader-error (a hang)."""
    workers = obs.loader.num_workers
    if not failed.timed_out or obs.batches or not workers:
        return False
    begun, ready = census.started()
    obs.measured.update(workers_started=ready, workers_in_init=begun - ready)
    if ready >= workers:
        return False
    inside = f", {begun - ready} inside its worker_init_fn" if begun > ready else ""
    method = obs.measured.get("start_method", "")
    start = ("a fork of this process, then its worker_init_fn" if method == "fork" else
             f"a process started by {method or 'its start method'} importing the dataset's modules (torch among them) "
             "and unpickling the dataset, then its worker_init_fn; iter() starts them one after another when each is "
             "sent over 64 KiB")
    obs.skipped["all"] = (
        f"no first batch after {failed.after_s:.1f} s: {workers - ready} of the {workers} workers had not finished starting "
        f"(each worker's start: {start}{inside}), so no rule that needs batches ran. Still starting when the doctor "
        "stopped waiting: a slow start or a start that hangs, which the doctor cannot tell apart")
    if math.isfinite(obs.budget_s) and obs.budget_s > 0:
        share = failed.after_s / obs.budget_s
        obs.skipped["all"] += (f". It waited {share:.0%} of its budget for the first batch: time next(iter(loader)) "
                               f"yourself and give it a budget over that time / {share:.2f}")
    return True


def _observe(obs: Observation, arrival: Arrival, batch: Any) -> None:
    if obs.batches == 0:
        obs.first_batch_s, obs.first_batch = arrival.wait_s, batch
        found = tensors(batch)
        obs.batch_bytes = sum(t.numel() * t.element_size() for t in found)
        obs.pinned = all(is_pinned(t) for t in found) if found else None
    else:
        obs.batch_times_s.append(arrival.wait_s + arrival.step_s)
    if obs.step is not None:
        obs.wait_s.append(arrival.wait_s)
        obs.step_s.append(arrival.step_s)
        if len(obs.kept) < KEEP_BATCHES and (len(obs.kept) + 1) * obs.batch_bytes <= KEEP_BYTES:
            obs.kept.append(batch)
    obs.batches += 1
    obs.samples += count(batch)
    found = labels(batch)
    if found is not None:
        obs.labels = found if obs.labels is None else np.concatenate([obs.labels, found])
    if obs.iterable:
        obs.identities.extend(identities(batch))
    counted = real_tokens(batch)
    if counted is not None:
        obs.padding.append(counted)
