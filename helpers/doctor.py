"""The loader doctor: short, bounded measurements on your own DataLoader, each finding backed by numbers measured on it (lesson 07).

`diagnose(loader, step=..., budget_s=..., device=...)` returns a `Diagnosis`; `python -m helpers.doctor
module:make_loader [--step module:train_step] [--json out.json] [--budget 30]` does the same from a shell and
exits with status 1 when it finds an error. The budget bounds the doctor's own reading and every fetch it
makes; your `step` runs to its end once called, so a first step slower than the budget (CUDA starting up in
this process, as seen on the H200 reference host) makes the run that much longer. That first step counts as
start-up, not data wait.
"""
from __future__ import annotations

import argparse
import hashlib
import html
import importlib
import json
import math
import os
import queue
import re
import shutil
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, WeightedRandomSampler

from helpers._validate import as_device, short
from helpers.batches import leaves, tensors
from helpers.env import usable_cpus
from helpers.memory import process_memory
from helpers.samplers import DistributedWeightedSampler

SEVERITIES = ("error", "warning", "info")

# Every code the doctor reports: the lesson and section that teach it (a test checks each heading exists).
CODES: dict[str, tuple[str, str]] = {
    "loader-error": ("03_loader_bottlenecks", "10. When the loader fails: three debugging moves"),
    "input-bound": ("03_loader_bottlenecks", "5. Is my training input-bound?"),
    "workers-oversubscribed": ("00_setup_check", "6. How many processes will your loaders start?"),
    "workers-too-few": ("03_loader_bottlenecks", "3. `num_workers` when items cost CPU"),
    "startup-cost": ("03_loader_bottlenecks", "6. Worker start-up, `persistent_workers` and `prefetch_factor`"),
    "pin-memory-no-accelerator": ("04_pinned_memory_transfers", "2. What pinned memory is"),
    "pin-memory-missing": ("04_pinned_memory_transfers", "5. Pinning on the fly vs pinning in the background"),
    "unbalanced-batches": ("02_rebalancing", "3. Batch composition, measured"),
    "class-weights-as-sample-weights": ("02_rebalancing", "5. Trap 1: per-class weights passed as per-sample weights"),
    "no-replacement-weights": ("02_rebalancing", "6. Trap 2: `replacement=False` rebalances nothing"),
    "iterable-duplicates": ("06_streaming_data", "1. The duplication bug"),
    "copy-on-read": ("03_loader_bottlenecks", "8. Copy-on-read: why workers' memory grows"),
    "shm-too-small": ("00_setup_check", "3. Where worker batches go: `/dev/shm`"),
}

# Thresholds, in one place: the lesson shows them, the tests plant faults well past them.
INPUT_BOUND_SHARE = 0.3        # steps that wait for data this share of their time or more
SWEEP_GAIN = 1.3               # more workers must give this many times the samples/s
STARTUP_SHARE = 0.2            # start-up this share of an epoch or more ...
STARTUP_MIN_S = 0.25           # ... and at least this many seconds per epoch
RAREST_SHARE = 0.5             # rarest class below this fraction of an equal share (1/C)
DUPLICATE_SHARE = 0.2          # samples delivered more than once, beyond what num_workers=0 delivers
COPY_ON_READ_MIB = 8.0         # worker USS growth while reading, in MiB (median over workers)
SHM_WARN_SHARE = 0.5           # batches in flight take this share of free /dev/shm: warning; over all of it: error
LABEL_KEYS = ("label", "labels", "target", "targets", "y")
KEY_KEYS = ("__key__", "key", "keys", "id", "ids")


@dataclass(frozen=True)
class Finding:
    """One problem the doctor found: a stable code, a severity, the numbers measured, the fix and where it is taught (lesson 07)."""

    code: str
    severity: str
    message: str
    fix: str
    evidence: dict[str, Any] = field(default_factory=dict)
    lesson: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.code, str) or not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", self.code):
            raise ValueError(f"code must be lower-case words joined by '-', got {short(self.code)}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {short(self.severity)}")
        for name in ("message", "fix"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name).strip():
                raise ValueError(f"{name} must be a non-empty sentence, got {short(getattr(self, name))}")
        if not isinstance(self.evidence, dict):
            raise TypeError(f"evidence must be a dict of measured values, got {short(self.evidence)}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: code, severity, message, fix, evidence, lesson."""
        return {"code": self.code, "severity": self.severity, "message": self.message, "fix": self.fix,
                "evidence": _jsonable(self.evidence), "lesson": self.lesson}


def finding(code: str, severity: str, message: str, fix: str, **evidence: Any) -> Finding:
    """A Finding for one of CODES, with its lesson filled in (lesson 07)."""
    stem, section = CODES[code]
    return Finding(code, severity, message, fix, evidence, f"{stem}.ipynb, section {section}")


@dataclass
class Observation:
    """What one pass over the loader measured: plugins (`diagnose(checks=...)`) read it (lesson 07)."""

    loader: DataLoader
    batches: int = 0
    samples: int = 0
    first_batch_s: float = math.nan
    batch_times_s: list[float] = field(default_factory=list)
    wait_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    labels: np.ndarray | None = None
    identities: list[str] = field(default_factory=list)
    batch_bytes: int = 0
    pinned: bool | None = None
    worker_uss_growth_mib: list[float] = field(default_factory=list)
    first_batch: Any = None

    @property
    def steady_batch_s(self) -> float:
        """Median time per batch after the first (with `step`: data wait + step)."""
        times = [w + s for w, s in zip(self.wait_s[1:], self.step_s[1:])] if self.step_s else self.batch_times_s
        return float(np.median(times)) if times else math.nan

    @property
    def samples_per_s(self) -> float:
        """Samples per second after the first batch."""
        spent = sum(self.batch_times_s)
        per_batch = self.samples / self.batches if self.batches else 0
        return per_batch * len(self.batch_times_s) / spent if spent > 0 else math.nan


@dataclass
class Diagnosis:
    """The doctor's findings on one loader, the measurements behind them, and what it could not measure (lesson 07)."""

    findings: list[Finding]
    measurements: dict[str, Any]
    not_measured: dict[str, str]
    elapsed_s: float
    budget_s: float

    @property
    def codes(self) -> list[str]:
        """The findings' codes, in order."""
        return [f.code for f in self.findings]

    @property
    def errors(self) -> list[Finding]:
        """Findings with severity "error"."""
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        """Findings with severity "warning"."""
        return [f for f in self.findings if f.severity == "warning"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: findings, measurements, not_measured, elapsed_s, budget_s."""
        return {"findings": [f.to_dict() for f in self.findings], "measurements": _jsonable(self.measurements),
                "not_measured": dict(self.not_measured), "elapsed_s": round(self.elapsed_s, 3), "budget_s": self.budget_s}

    def __str__(self) -> str:
        lines = [f"Loader doctor: {len(self.errors)} error(s), {len(self.warnings)} warning(s), "
                 f"{len(self.findings) - len(self.errors) - len(self.warnings)} info, in {self.elapsed_s:.1f} s "
                 f"(budget {self.budget_s:g} s)"]
        for f in self.findings:
            lines += [f"[{f.severity}] {f.code}: {f.message}", f"    fix: {f.fix}"] + ([f"    taught in: {f.lesson}"] if f.lesson else [])
        if not self.findings:
            lines.append("no findings: nothing measured here needs a change")
        lines.append("measured: " + ", ".join(f"{k}={_fmt(v)}" for k, v in self.measurements.items()))
        lines += [f"not measured: {k} ({why})" for k, why in self.not_measured.items()]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = "".join(
            f"<tr><td>{html.escape(f.severity)}</td><td><code>{html.escape(f.code)}</code></td><td>{html.escape(f.message)}</td>"
            f"<td>{html.escape(f.fix)}</td><td>{html.escape(f.lesson)}</td></tr>" for f in self.findings
        ) or "<tr><td colspan='5'>no findings: nothing measured here needs a change</td></tr>"
        measured = ", ".join(f"{html.escape(k)}={html.escape(_fmt(v))}" for k, v in self.measurements.items())
        skipped = "".join(f"<li>{html.escape(k)}: {html.escape(v)}</li>" for k, v in self.not_measured.items())
        info = len(self.findings) - len(self.errors) - len(self.warnings)
        return (f"<p><b>Loader doctor</b>: {len(self.errors)} error(s), {len(self.warnings)} warning(s), {info} info in "
                f"{self.elapsed_s:.1f} s (budget {self.budget_s:g} s)</p><table><tr><th>severity</th><th>code</th>"
                f"<th>measured</th><th>fix</th><th>taught in</th></tr>{rows}</table><p>measured: {measured}</p>"
                + (f"<p>not measured:</p><ul>{skipped}</ul>" if skipped else ""))


Check = Callable[[Observation], "Finding | None"]


def diagnose(loader: DataLoader, *, step: Callable[[Any], Any] | None = None, budget_s: float = 30.0,
             device: Any = None, checks: Sequence[Check] = ()) -> Diagnosis:
    """Measure `loader` (and `step(batch)` when given) within `budget_s` seconds and return the findings; `checks` adds your own (lesson 07)."""
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
    start = time.perf_counter()
    deadline = start + 0.85 * budget_s  # the rest covers stopping workers
    doctor = _Doctor(loader, step, device, deadline)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        doctor.run()
        for check in checks:
            result = check(doctor.obs)
            if result is not None and not isinstance(result, Finding):
                raise TypeError(f"check {getattr(check, '__name__', short(check))} must return a Finding or None, got {short(result)}")
            if result is not None:
                doctor.findings.append(result)
    seen = sorted({str(w.message).splitlines()[0] for w in caught})
    if seen:
        doctor.measured["warnings"] = seen
    order = {s: i for i, s in enumerate(SEVERITIES)}
    doctor.findings.sort(key=lambda f: order[f.severity])
    return Diagnosis(doctor.findings, doctor.measured, doctor.skipped, time.perf_counter() - start, float(budget_s))


class _Doctor:
    """One diagnosis: static checks first (free), then passes over the loader while the budget lasts."""

    def __init__(self, loader: DataLoader, step: Callable[[Any], Any] | None, device: torch.device | None, deadline: float) -> None:
        self.loader, self.step, self.device, self.deadline = loader, step, device, deadline
        self.obs = Observation(loader)
        self.findings: list[Finding] = []
        self.measured: dict[str, Any] = {"num_workers": loader.num_workers, "batch_size": loader.batch_size,
                                         "pin_memory": loader.pin_memory, "persistent_workers": loader.persistent_workers}
        self.skipped: dict[str, str] = {}
        self.iterable = isinstance(loader.dataset, IterableDataset)

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def run(self) -> None:
        self.check_processes()
        self.check_sampler()
        self.check_pin_no_accelerator()
        if not self.first_pass():
            return
        self.check_pin_missing()
        self.check_shm()
        self.check_balance()
        self.check_startup()
        self.check_input_bound()
        self.check_copy_on_read()
        self.check_duplicates()
        self.check_worker_sweep()

    # --- checks that need no pass over the data

    def check_processes(self) -> None:
        ranks = _ranks_on_node()
        cores = usable_cpus()
        workers = self.loader.num_workers
        processes = ranks * (1 + workers)
        self.measured.update(usable_cores=cores, ranks_on_node=ranks, processes=processes)
        if workers > cores or processes > cores + 1:
            self.findings.append(finding(
                "workers-oversubscribed", "warning",
                f"{ranks} rank(s) x (1 + {workers} workers) = {processes} processes on {cores} usable cores",
                f"use at most {max(0, cores // ranks - 1)} workers per rank here, or measure more with a sweep (lesson 03)",
                processes=processes, usable_cores=cores, num_workers=workers, ranks=ranks))
        elif processes > cores:
            self.findings.append(finding(
                "workers-oversubscribed", "info",
                f"{processes} processes on {cores} usable cores: one over, which is fine while the main process mostly waits",
                "no change needed unless the sweep or the data-wait share says otherwise",
                processes=processes, usable_cores=cores, num_workers=workers, ranks=ranks))

    def check_sampler(self) -> None:
        sampler = self.loader.sampler
        if self.loader.batch_sampler is not None and hasattr(self.loader.batch_sampler, "sampler"):
            sampler = self.loader.batch_sampler.sampler
        if not isinstance(sampler, (WeightedRandomSampler, DistributedWeightedSampler)):
            return
        weights = sampler.weights
        n_data = _length(self.loader.dataset)
        draws = []
        for i, index in enumerate(iter(sampler)):
            if i >= 100_000 or self.left() <= 0:
                break
            draws.append(int(index))
        counts = np.bincount(np.asarray(draws, dtype=np.int64), minlength=len(weights))
        self.measured["sampler_draws"] = len(draws)
        if n_data is not None and len(weights) < n_data:
            self.findings.append(finding(
                "class-weights-as-sample-weights", "error",
                f"the sampler has {len(weights)} weights for {n_data} samples: of {len(draws)} draws, every index was below "
                f"{int(max(draws)) + 1 if draws else 0}, so only {int(np.count_nonzero(counts))} distinct samples were drawn",
                "give the sampler one weight per sample: weights = class_weights[labels] (helpers.imbalance.sample_weights)",
                num_weights=len(weights), dataset_size=n_data, draws=len(draws), distinct=int(np.count_nonzero(counts)),
                largest_index=int(max(draws)) if draws else None))
            return
        replacement = getattr(sampler, "replacement", True)
        num_samples = getattr(sampler, "num_samples", len(draws))
        if not replacement and num_samples >= len(weights):
            self.findings.append(finding(
                "no-replacement-weights", "warning",
                f"replacement=False with num_samples={num_samples} over {len(weights)} weights: {len(draws)} draws took "
                f"{int(np.count_nonzero(counts))} distinct samples, each at most {int(counts.max()) if draws else 0} time(s): "
                "the epoch's class mix is the dataset's",
                "use replacement=True to rebalance (lesson 02), or drop the sampler if you did not mean to",
                num_samples=num_samples, num_weights=len(weights), draws=len(draws), max_count=int(counts.max()) if draws else 0))

    def check_pin_no_accelerator(self) -> None:
        if self.loader.pin_memory and not _accelerator_available():
            self.findings.append(finding(
                "pin-memory-no-accelerator", "warning",
                "pin_memory=True but this machine has no accelerator: PyTorch warns and pins nothing",
                "set pin_memory=torch.cuda.is_available() (or torch.accelerator.is_available())",
                pin_memory=True, accelerator=None))

    # --- the first pass: the loader as given

    def first_pass(self) -> bool:
        obs = self.obs
        limit = _length(self.loader)
        max_batches = min(limit, 400) if limit is not None else 400
        try:
            window = 0.45 * self.left()  # the rest: the duplicates baseline and the sweep
            for arrival, batch in _batches(self.loader, time.perf_counter() + window, max_batches, on_start=self._workers_started,
                                           on_end=self._workers_ending, step=self._timed_step if self.step else None,
                                           fetch_timeout_s=0.75 * self.left(),  # a slow start-up is not a hang
                                           window_after_first=(window, self.deadline)):  # nor is a slow first step
                self._observe(arrival, batch)
        except _LoaderFailed as failed:
            self.report_failure(failed)
            return False
        if obs.batches == 0:
            self.skipped["all"] = "the loader yielded no batch"
            return False
        self.measured.update(batches_read=obs.batches, samples_read=obs.samples, first_batch_s=obs.first_batch_s,
                             steady_batch_s=obs.steady_batch_s, samples_per_s=obs.samples_per_s)
        return True

    def _workers_started(self, iterator: Any) -> None:
        self._pids = [w.pid for w in getattr(iterator, "_workers", [])]  # private: the worker processes
        self._uss0 = [_uss(pid) for pid in self._pids]

    def _workers_ending(self, iterator: Any) -> None:
        end = [_uss(pid) for pid in getattr(self, "_pids", [])]
        self.obs.worker_uss_growth_mib = [b - a for a, b in zip(self._uss0, end) if not (math.isnan(a) or math.isnan(b))]

    def _timed_step(self, batch: Any) -> float:
        started = time.perf_counter()
        self.step(batch)  # type: ignore[misc]
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - started

    def _observe(self, arrival: _Arrival, batch: Any) -> None:
        obs = self.obs
        if obs.batches == 0:
            obs.first_batch_s, obs.first_batch = arrival.wait_s, batch
            found = tensors(batch)
            obs.batch_bytes = sum(t.numel() * t.element_size() for t in found)
            obs.pinned = all(_is_pinned(t) for t in found) if found else None
        else:
            obs.batch_times_s.append(arrival.wait_s + arrival.step_s)
        if arrival.step_s or self.step:
            obs.wait_s.append(arrival.wait_s)
            obs.step_s.append(arrival.step_s)
        obs.batches += 1
        obs.samples += _count(batch)
        labels = _labels(batch)
        if labels is not None:
            obs.labels = labels if obs.labels is None else np.concatenate([obs.labels, labels])
        if self.iterable:
            obs.identities.extend(_identities(batch))

    def report_failure(self, failed: _LoaderFailed) -> None:
        evidence: dict[str, Any] = {"error": failed.summary, "after_s": round(failed.after_s, 2), "num_workers": self.loader.num_workers}
        message = f"the loader raised {failed.summary}" if not failed.timed_out else (
            f"no batch within {failed.after_s:.1f} s (a hang, or a start-up slower than the budget): {failed.summary}")
        if self.loader.num_workers > 0 and not failed.timed_out:
            plain = _plain_traceback(self.loader, max(self.left(), 1.0))
            if plain:
                evidence["traceback_num_workers_0"] = plain
                message += f"; with num_workers=0 the plain traceback ends: {plain.strip().splitlines()[-1]}"
        self.findings.append(finding(
            "loader-error", "error", message,
            "rerun with num_workers=0 for a plain traceback and fix the dataset or collate_fn it names (lesson 03)", **evidence))
        self.skipped["measurements"] = "the loader failed, so nothing else was measured"

    # --- checks on what the first pass saw

    def check_pin_missing(self) -> None:
        if self.device is None or self.device.type != "cuda":
            return
        if self.obs.pinned is False:
            self.findings.append(finding(
                "pin-memory-missing", "warning",
                f"device {self.device} given, but the first batch's tensors ({_fmt_bytes(self.obs.batch_bytes)}) are not in pinned memory: "
                "a copy with non_blocking=True cannot overlap compute",
                "set pin_memory=True on the DataLoader and copy with .to(device, non_blocking=True)",
                pinned=False, batch_bytes=self.obs.batch_bytes, device=str(self.device)))

    def check_shm(self) -> None:
        workers = self.loader.num_workers
        if workers == 0 or not self.obs.batch_bytes:
            return
        free = _shm_free_bytes()
        if free is None:
            self.skipped["shm-too-small"] = "no /dev/shm on this system"
            return
        in_flight = self.obs.batch_bytes * (self.loader.prefetch_factor or 2) * workers
        self.measured.update(shm_free_bytes=free, batch_bytes=self.obs.batch_bytes, bytes_in_flight=in_flight)
        if in_flight > SHM_WARN_SHARE * free:
            self.findings.append(finding(
                "shm-too-small", "error" if in_flight > free else "warning",
                f"{_fmt_bytes(self.obs.batch_bytes)} per batch x prefetch_factor {self.loader.prefetch_factor or 2} x {workers} workers = "
                f"{_fmt_bytes(in_flight)} in shared memory, against {_fmt_bytes(free)} free in /dev/shm",
                "give /dev/shm more room (Docker: --shm-size=8g or --ipc=host), or lower batch_size, prefetch_factor or num_workers",
                batch_bytes=self.obs.batch_bytes, bytes_in_flight=in_flight, shm_free_bytes=free))

    def check_balance(self) -> None:
        labels = self.obs.labels
        if labels is None:
            self.skipped["unbalanced-batches"] = "no labels found in the batches (a tuple ending in labels, or a dict key 'label'/'target'/'y')"
            return
        known = _dataset_labels(self.loader.dataset)
        classes = int(max(labels.max(), known.max() if known is not None else 0)) + 1
        if len(labels) < 10 * classes:
            self.skipped["unbalanced-batches"] = f"only {len(labels)} labelled samples read for {classes} classes"
            return
        shares = np.bincount(labels, minlength=classes) / len(labels)
        present = np.flatnonzero(np.bincount(known, minlength=classes)) if known is not None else np.flatnonzero(shares)
        rarest = int(present[np.argmin(shares[present])])
        self.measured["batch_class_shares"] = [round(float(s), 4) for s in shares]
        if shares[rarest] < RAREST_SHARE / len(present):
            dataset_share = float(np.mean(known == rarest)) if known is not None else None
            versus = f" (dataset: {dataset_share:.1%})" if dataset_share is not None else ""
            self.findings.append(finding(
                "unbalanced-batches", "warning",
                f"class {rarest} is {shares[rarest]:.1%} of {len(labels)} delivered samples{versus}, against an equal share of "
                f"{1 / len(present):.1%} for {len(present)} classes",
                "rebalance with a per-sample WeightedRandomSampler or weight the loss by class (lesson 02); if the loss is already weighted, this is expected",
                rarest_class=rarest, rarest_share=float(shares[rarest]), dataset_share=dataset_share,
                classes=len(present), samples=len(labels)))

    def check_startup(self) -> None:
        obs, loader = self.obs, self.loader
        if loader.num_workers == 0 or loader.persistent_workers:
            return
        per_epoch = _length(loader)
        steady = obs.steady_batch_s
        if per_epoch is None or math.isnan(steady):
            self.skipped["startup-cost"] = "the epoch's length is unknown (no len(loader))"
            return
        excess = max(0.0, obs.first_batch_s - steady)
        epoch_s = obs.first_batch_s + (per_epoch - 1) * steady
        share = excess / epoch_s
        self.measured.update(startup_s=excess, epoch_s_estimate=epoch_s)
        if excess >= STARTUP_MIN_S and share >= STARTUP_SHARE:
            self.findings.append(finding(
                "startup-cost", "warning",
                f"the first batch took {obs.first_batch_s:.2f} s against {steady * 1000:.1f} ms per batch after it: starting "
                f"{loader.num_workers} workers costs {share:.0%} of an epoch of {per_epoch} batches, every epoch",
                "set persistent_workers=True so workers start once, not every epoch (or use longer epochs)",
                first_batch_s=obs.first_batch_s, steady_batch_s=steady, batches_per_epoch=per_epoch, startup_share=share))

    def check_input_bound(self) -> None:
        obs = self.obs
        if self.step is None:
            self.skipped["input-bound"] = "no step given: pass step=your_train_step to measure data wait against compute"
            return
        wait, compute = sum(obs.wait_s[1:]), sum(obs.step_s[1:])
        if wait + compute <= 0:
            self.skipped["input-bound"] = "fewer than 2 steps ran within the budget"
            return
        share = wait / (wait + compute)
        self.measured.update(data_wait_share=share, wait_ms_median=1000 * float(np.median(obs.wait_s[1:])),
                             step_ms_median=1000 * float(np.median(obs.step_s[1:])))
        if share >= INPUT_BOUND_SHARE:
            self.findings.append(finding(
                "input-bound", "warning",
                f"over {len(obs.wait_s) - 1} steps, {share:.0%} of the time was spent waiting for data "
                f"(median wait {self.measured['wait_ms_median']:.1f} ms, step {self.measured['step_ms_median']:.1f} ms)",
                "make batches faster: more workers (see the sweep), cheaper transforms, or batched fetching (__getitems__)",
                data_wait_share=share, steps=len(obs.wait_s) - 1))

    def check_copy_on_read(self) -> None:
        growth = self.obs.worker_uss_growth_mib
        if not growth:
            return
        median = float(np.median(growth))
        self.measured["worker_uss_growth_mib"] = [round(g, 1) for g in growth]
        if median >= COPY_ON_READ_MIB:
            epoch = _length(self.loader)
            read = f" after reading {self.obs.batches} of {epoch} batches" if epoch else f" after {self.obs.batches} batches"
            self.findings.append(finding(
                "copy-on-read", "warning",
                f"each worker's own memory (USS) grew by {median:.0f} MiB (median of {len(growth)}){read}: touching Python objects "
                "copies the pages they live on into every worker",
                "store the dataset in numpy arrays or tensors, not lists of Python objects (lesson 03)",
                uss_growth_mib=median, batches_read=self.obs.batches, workers=len(growth)))

    def check_duplicates(self) -> None:
        if not self.iterable:
            return
        ids = self.obs.identities
        if self.loader.num_workers < 2:
            return
        if len(ids) < 4:
            self.skipped["iterable-duplicates"] = "too few samples read to compare"
            return
        share = 1 - len(set(ids)) / len(ids)
        baseline_ids: list[str] = []
        if share > 0 and self.left() > 0.5:
            plain = _rebuild(self.loader, num_workers=0)
            try:
                for _, batch in _batches(plain, self.deadline - 0.5 * self.left(), 10_000, stop_after_samples=len(ids)):
                    baseline_ids.extend(_identities(batch))
            except _LoaderFailed:
                pass
            baseline_ids = baseline_ids[:len(ids)]
        baseline = 1 - len(set(baseline_ids)) / len(baseline_ids) if baseline_ids else 0.0
        self.measured.update(duplicate_share=share, duplicate_share_num_workers_0=baseline if baseline_ids else None)
        if share - baseline >= DUPLICATE_SHARE:
            factor = len(ids) / len(set(ids))
            self.findings.append(finding(
                "iterable-duplicates", "error",
                f"{len(ids)} samples from {self.loader.num_workers} workers held only {len(set(ids))} distinct ones "
                f"(each {factor:.1f} times on average); with num_workers=0, {baseline:.0%} were repeats",
                "shard the IterableDataset in __iter__ by get_worker_info() (and by rank under DDP), e.g. helpers.streaming.ShardedStream (lesson 06)",
                samples=len(ids), distinct=len(set(ids)), duplicate_share=share, baseline_share=baseline))

    def check_worker_sweep(self) -> None:
        workers = self.loader.num_workers
        cap = max(1, usable_cpus() // _ranks_on_node())
        candidates = [w for w in (workers + 1, workers + 2, 2 * workers) if workers < w <= cap]
        candidates = sorted(set(candidates))[:2]
        if not candidates:
            self.skipped["workers-too-few"] = f"num_workers={workers} already uses the {cap} usable core(s) per rank"
            return
        values = [workers, *candidates]
        first_s, batch_s = (value if isinstance(value, float) and math.isfinite(value) else 0.0
                            for value in (self.measured.get("first_batch_s"), self.measured.get("steady_batch_s")))

        def needed(w: int) -> float:
            """A slot long enough for w workers to start and deliver the batches _rate leaves out plus 2 it times, at the
            batch time the first pass measured, shared by the workers up to the cores, with half as much again for load."""
            warm = 1 if w == 0 else (self.loader.prefetch_factor or 2) * w
            return max(0.15, 1.5 * (first_s + (warm + 2) * batch_s / max(1, min(w, cap))))

        rounds = 0
        runs: dict[int, list[float]] = {w: [] for w in values}
        per_round = sum(needed(w) for w in values)
        while rounds < 3:
            # this round's part of what is left: a third of the budget for three rounds, or a half for the two needed
            fits = [target for target in (3, 2) if rounds < target and self.left() >= (target - rounds) * per_round]
            if not fits:
                break
            share = self.left() / (fits[0] - rounds)
            for w in values:
                slot = needed(w) + max(0.0, min(1.0 - needed(w), (share - per_round) / len(values)))
                rate = _rate(_rebuild(self.loader, num_workers=w, persistent_workers=False), time.perf_counter() + slot)
                if math.isnan(rate):
                    break
                runs[w].append(rate)
            else:
                rounds += 1
                continue
            break
        if rounds < 2:
            self.skipped["workers-too-few"] = (f"the budget left time for {rounds} round(s) of the num_workers sweep, 2 are needed "
                                               f"(a round takes about {per_round:.1f} s at the batch time measured: raise the budget)")
            return
        ratios = {w: float(np.median([runs[w][r] / runs[workers][r] for r in range(rounds)])) for w in candidates}
        self.measured["sweep_samples_per_s"] = {w: round(float(np.median(runs[w][:rounds])), 1) for w in values}
        best = max(ratios, key=ratios.__getitem__)
        if ratios[best] >= SWEEP_GAIN:
            self.findings.append(finding(
                "workers-too-few", "warning",
                f"num_workers={best} gave {ratios[best]:.2f}x the samples/s of num_workers={workers} "
                f"(median of {rounds} interleaved rounds: {self.measured['sweep_samples_per_s']})",
                f"set num_workers={best} (within this machine's {cap} usable core(s) per rank)",
                num_workers=workers, best=best, speedup=ratios[best], rounds=rounds))


# --- reading a loader with a deadline on every fetch, and leaving no worker behind

@dataclass(frozen=True)
class _Arrival:
    wait_s: float
    step_s: float


class _LoaderFailed(Exception):
    def __init__(self, summary: str, after_s: float, timed_out: bool) -> None:
        super().__init__(summary)
        self.summary, self.after_s, self.timed_out = summary, after_s, timed_out


def _batches(loader: DataLoader, deadline: float, max_batches: int, *, on_start: Callable[[Any], None] | None = None,
             on_end: Callable[[Any], None] | None = None, step: Callable[[Any], float] | None = None,
             stop_after_samples: int | None = None, fetch_timeout_s: float | None = None,
             window_after_first: tuple[float, float] | None = None) -> Iterator[tuple[_Arrival, Any]]:
    """Yield (timing, batch) until the epoch ends, `max_batches`, `deadline` or `stop_after_samples`; raise _LoaderFailed on an error or a hang.

    `window_after_first=(seconds, latest)` moves the deadline once the first batch and its step are done: `seconds`
    from then, but no later than `latest`. The first step carries one-off costs (a CUDA context, kernels loaded on
    first use) that can take longer than the whole window; they are start-up, not the loop's steady state.
    """
    started = time.perf_counter()
    first_wait = max(1.0, deadline - started if fetch_timeout_s is None else fetch_timeout_s)
    if loader.num_workers > 0:
        fetched = _rebuild(loader, timeout=first_wait)
        source: Iterator[Any] = _fetch_in_main(fetched)
    else:
        source = _fetch_in_thread(loader, first_wait)
    count = samples = 0
    failed = False
    try:
        while count < max_batches and (count == 0 or time.perf_counter() < deadline):
            before = time.perf_counter()
            try:
                batch = next(source)
            except StopIteration:
                return
            except _LoaderFailed:
                failed = True
                raise
            except Exception as exc:  # noqa: BLE001 - the learner's loader may raise anything; it is the finding
                failed = True
                raise _LoaderFailed(_summary(exc), time.perf_counter() - started, "timed out" in str(exc)) from None
            wait = time.perf_counter() - before
            if count == 0 and on_start is not None:
                on_start(getattr(source, "iterator", None))
            spent = step(batch) if step is not None else 0.0
            count += 1
            samples += _count(batch)
            yield _Arrival(wait, spent), batch
            if count == 1 and window_after_first is not None:
                deadline = min(time.perf_counter() + window_after_first[0], window_after_first[1])
            if stop_after_samples is not None and samples >= stop_after_samples:
                return
    finally:
        if on_end is not None and count:
            on_end(getattr(source, "iterator", None))
        source.close(kill=failed)  # type: ignore[attr-defined]


class _fetch_in_main:
    """Iterate a loader with workers here: its own `timeout` bounds each fetch; close() shuts the workers down."""

    def __init__(self, loader: DataLoader) -> None:
        self.iterator: Any = iter(loader)

    def __iter__(self) -> _fetch_in_main:
        return self

    def __next__(self) -> Any:
        return next(self.iterator)

    def close(self, kill: bool = False) -> None:
        if kill and getattr(self.iterator, "_workers", None):
            # A hung worker would hold shutdown for torch's 5 s join timeout: stop it first. Torch's SIGCHLD handler
            # would report the stopped worker as a crash, so its pids are unregistered first (private API, as in
            # torch's own _shutdown_workers; the hang tests catch a rename).
            if self.iterator._worker_pids_set:
                torch.utils.data._utils.signal_handling._remove_worker_pids(id(self.iterator))
                self.iterator._worker_pids_set = False
            for worker in self.iterator._workers:
                if worker.is_alive():
                    worker.terminate()
        shutdown = getattr(self.iterator, "_shutdown_workers", None)  # private; `del` alone leaves it to the garbage collector
        if shutdown is not None:
            shutdown()
        self.iterator = None


class _fetch_in_thread:
    """Iterate a worker-less loader in a daemon thread, so a hung __getitem__ times out here instead of hanging the doctor.

    The thread fetches a batch only when asked: reading ahead would overlap the fetch with the step, which a loop
    without workers never does, and hide its data wait.
    """

    def __init__(self, loader: DataLoader, first_wait_s: float) -> None:
        self.iterator = None
        self.wait_s = first_wait_s
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=2)
        self.stop = threading.Event()
        self.wanted = threading.Semaphore(0)  # one per __next__: no read-ahead, so the wait measured is the loop's own fetch
        self.thread = threading.Thread(target=self._produce, args=(loader,), daemon=True, name="doctor-fetch")
        self.thread.start()

    def _produce(self, loader: DataLoader) -> None:
        try:
            batches = iter(loader)
            while True:
                while not self.wanted.acquire(timeout=0.1):  # fetch only when asked, as a loop without workers does
                    if self.stop.is_set():
                        return
                try:
                    batch = next(batches)
                except StopIteration:
                    self.queue.put(("end", None))
                    return
                self.queue.put(("batch", batch))
        except Exception as exc:  # noqa: BLE001 - passed to the reader, which reports it
            self.queue.put(("error", exc))

    def __iter__(self) -> _fetch_in_thread:
        return self

    def __next__(self) -> Any:
        self.wanted.release()
        try:
            kind, value = self.queue.get(timeout=self.wait_s)
        except queue.Empty:
            raise _LoaderFailed(f"no batch came within {self.wait_s:.1f} s (num_workers=0: the dataset or collate_fn is stuck)",
                                self.wait_s, True) from None
        if kind == "end":
            raise StopIteration
        if kind == "error":
            raise value
        return value

    def close(self, kill: bool = False) -> None:
        self.stop.set()  # the thread ends at its next batch; a stuck one stays parked (a daemon, no process)


def _rebuild(loader: DataLoader, **changes: Any) -> DataLoader:
    """A DataLoader with `loader`'s settings and `changes` (num_workers, timeout, persistent_workers)."""
    workers = changes.get("num_workers", loader.num_workers)
    kwargs: dict[str, Any] = {
        "num_workers": workers, "collate_fn": loader.collate_fn, "pin_memory": loader.pin_memory,
        "worker_init_fn": loader.worker_init_fn, "generator": loader.generator,
        "timeout": changes.get("timeout", loader.timeout) if workers > 0 else 0,
    }
    if workers > 0:
        kwargs.update(multiprocessing_context=loader.multiprocessing_context, prefetch_factor=loader.prefetch_factor,
                      persistent_workers=changes.get("persistent_workers", loader.persistent_workers))
        if loader.timeout and "timeout" in changes:
            kwargs["timeout"] = min(loader.timeout, changes["timeout"])
    if hasattr(loader, "in_order"):
        kwargs["in_order"] = loader.in_order
    if isinstance(loader.dataset, IterableDataset):
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_size is None and getattr(loader, "_auto_collation", False):
        kwargs["batch_sampler"] = loader.batch_sampler  # a custom batch sampler
    else:
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last, sampler=loader.sampler)
    return DataLoader(loader.dataset, **kwargs)


def _plain_traceback(loader: DataLoader, wait_s: float) -> str | None:
    """The traceback a num_workers=0 copy of `loader` gives within `wait_s`, or None if it gives none."""
    result: dict[str, str] = {}

    def first() -> None:
        try:
            for _ in _rebuild(loader, num_workers=0):
                if time.perf_counter() > started + wait_s:
                    return
        except Exception:  # noqa: BLE001 - the traceback is what we want
            result["tb"] = traceback.format_exc()

    started = time.perf_counter()
    thread = threading.Thread(target=first, daemon=True, name="doctor-plain")
    thread.start()
    thread.join(wait_s)
    return result.get("tb")


def _rate(loader: DataLoader, deadline: float) -> float:
    """Samples/s of `loader` after its warm-up batches, reading until `deadline`; NaN if too few batches."""
    warm = 1 if loader.num_workers == 0 else (loader.prefetch_factor or 2) * loader.num_workers
    times: list[float] = []
    samples = 0
    try:
        last = None
        for i, (_, batch) in enumerate(_batches(loader, deadline, 100_000)):
            now = time.perf_counter()
            if i >= warm:
                times.append(now - last)  # type: ignore[operator]
                samples += _count(batch)
            last = now
    except _LoaderFailed:
        return math.nan
    if len(times) < 2:
        return math.nan
    return samples / sum(times)


# --- small measurements

def _ranks_on_node() -> int:
    """Ranks sharing this machine: LOCAL_WORLD_SIZE (torchrun), else the process group's size, else 1."""
    if os.environ.get("LOCAL_WORLD_SIZE", "").isdigit():
        return max(1, int(os.environ["LOCAL_WORLD_SIZE"]))
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


def _accelerator_available() -> bool:
    """Whether torch sees any accelerator (CUDA, MPS, XPU, ...)."""
    return bool(torch.accelerator.is_available())


def _shm_free_bytes() -> int | None:
    """Free bytes in /dev/shm, or None where there is none."""
    return shutil.disk_usage("/dev/shm").free if os.path.isdir("/dev/shm") else None


def _uss(pid: int) -> float:
    try:
        return process_memory(pid).uss_mib
    except Exception:  # noqa: BLE001 - a worker that already exited
        return math.nan


def _is_pinned(t: torch.Tensor) -> bool:
    try:
        return bool(t.is_pinned())
    except RuntimeError:
        return False


def _length(obj: Any) -> int | None:
    try:
        return len(obj)
    except TypeError:
        return None


def _count(batch: Any) -> int:
    found = next((leaf for leaf in leaves(batch) if isinstance(leaf, (torch.Tensor, np.ndarray))), None)
    return int(found.shape[0]) if found is not None and found.ndim else 1


def _labels(batch: Any) -> np.ndarray | None:
    """Integer class labels in a batch: a dict key 'label'/'target'/'y', or the last item of a tuple/list."""
    candidate = None
    if isinstance(batch, dict):
        candidate = next((batch[k] for k in LABEL_KEYS if k in batch), None)
    elif isinstance(batch, (tuple, list)) and len(batch) >= 2:
        candidate = batch[-1]
    if isinstance(candidate, torch.Tensor) and candidate.ndim == 1 and not candidate.is_floating_point() and candidate.dtype != torch.bool:
        values = candidate.cpu().numpy().astype(np.int64)
        return values if len(values) and values.min() >= 0 else None
    return None


def _dataset_labels(dataset: Any) -> np.ndarray | None:
    """The dataset's own labels (`targets` or `labels` attribute), when it has them."""
    for name in ("targets", "labels"):
        values = getattr(dataset, name, None)
        if values is None:
            continue
        try:
            array = np.asarray(values.cpu() if isinstance(values, torch.Tensor) else values)
        except Exception:  # noqa: BLE001 - an attribute that is not an array
            continue
        if array.ndim == 1 and array.dtype.kind in "iu" and len(array) and array.min() >= 0:
            return array.astype(np.int64)
    return None


def _identities(batch: Any) -> list[str]:
    """One identity per sample: its key when the batch carries keys, else a hash of its first tensor's row."""
    if isinstance(batch, dict):
        keys = next((batch[k] for k in KEY_KEYS if k in batch), None)
        if isinstance(keys, (list, tuple)) and keys and all(isinstance(k, (str, int)) for k in keys):
            return [str(k) for k in keys]
        if isinstance(keys, torch.Tensor) and keys.ndim == 1:
            return [str(int(k)) for k in keys]
    found = next((leaf for leaf in leaves(batch) if isinstance(leaf, torch.Tensor)), None)
    if found is None:
        return []
    rows = found.detach().cpu().reshape(found.shape[0], -1) if found.ndim else found.reshape(1, 1)
    return [hashlib.blake2b(row.numpy().tobytes(), digest_size=8).hexdigest() for row in rows]


def _summary(exc: BaseException) -> str:
    """An exception as 'Type: last line' (a worker's re-raised error keeps its original type's name in the text)."""
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[-1] if text else ''}".strip()


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if math.isnan(float(value)) else round(float(value), 6)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


# --- the command line

def _load(spec: str, what: str) -> Callable[..., Any]:
    """`module:function` from the current directory or the installed packages."""
    if not isinstance(spec, str) or spec.count(":") != 1:
        raise ValueError(f"{what} must look like module:function, got {short(spec)}")
    module_name, name = spec.split(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    if not hasattr(module, name):
        raise ValueError(f"{what}: module {module_name} has no {name!r}")
    return getattr(module, name)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m helpers.doctor module:make_loader [--step module:step] [--json F] [--budget S] [--device D]`; 1 when an error is found."""
    parser = argparse.ArgumentParser(prog="python -m helpers.doctor", description=__doc__.splitlines()[0])
    parser.add_argument("loader", help="module:function returning your DataLoader (the module is imported from the current directory)")
    parser.add_argument("--step", help="module:function taking one batch: one training step, to measure data wait against compute")
    parser.add_argument("--json", help="also write the diagnosis as JSON to this file")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds the measurements may take (default 30)")
    parser.add_argument("--device", help="the device batches go to (e.g. cuda), for the pinning checks")
    args = parser.parse_args(argv)
    loader = _load(args.loader, "loader")()
    step = _load(args.step, "--step") if args.step else None
    diagnosis = diagnose(loader, step=step, budget_s=args.budget, device=args.device)
    print(diagnosis)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(diagnosis.to_dict(), out, indent=1)
    return 1 if diagnosis.errors else 0


if __name__ == "__main__":
    from helpers import doctor as _doctor  # the importable module, not this __main__ copy

    sys.exit(_doctor.main())
