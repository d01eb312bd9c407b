"""The doctor's rules in one registry: each registered once, with its severities, phase, thresholds, lesson and planted fault (lesson 07).

A rule is a function taking the `Observation` of one loader and returning a `Finding` or None: the same shape
as the checks you pass to `diagnose(checks=...)`. The run order and each rule's share of the budget come from
here: rules run phase by phase, in the order they were registered, and a rule with its own measurements gets
a slot in proportion to its `budget` weight.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset

from helpers.doctor.findings import SEVERITIES, Finding

# Before reading (the loader's settings, the sampler's draws), on the first pass's measurements, with measurements
# of its own (a slot of the budget each), and last, on everything measured (advice that depends on the sweep).
PHASES = ("static", "pass", "measure", "verdict")


@dataclass
class Observation:
    """What the doctor knows about one loader: its settings, the first pass's measurements, and room to add more (lesson 07)."""

    loader: DataLoader
    step: Callable[[Any], Any] | None = None
    device: torch.device | None = None
    deadline: float = math.inf  # perf_counter time the doctor's measurements must end by
    budget_s: float = math.nan  # the budget diagnose() was given
    batches: int = 0
    samples: int = 0
    first_batch_s: float = math.nan
    batch_times_s: list[float] = field(default_factory=list)  # after the first: fetch (+ step) per batch
    wait_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    labels: np.ndarray | None = None
    identities: list[str] = field(default_factory=list)
    padding: list[tuple[int, int]] = field(default_factory=list)  # per batch read with an attention_mask: positions, real tokens
    batch_bytes: int = 0
    pinned: bool | None = None
    first_batch: Any = None
    draws: np.ndarray | None = None  # indices drawn from a weighted sampler before reading
    kept: list[Any] = field(default_factory=list)  # batches kept in memory to replay through the step (headspace)
    worker_pages: list[tuple[dict[str, float], dict[str, float]]] = field(default_factory=list)  # per worker: start, end
    worker_threads: list[int] = field(default_factory=list)  # threads computing side by side in each worker, first pass
    cpu: dict[str, float] = field(default_factory=dict)  # the first pass's wall time and CPU seconds, ours and the machine's
    measured: dict[str, Any] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    slot_end: float = math.inf  # a measuring rule's own slot of the budget ends here
    failure: Any = None  # the LoaderFailed that stopped the reading, if any
    epochs: int = 1  # whole epochs the ledger rules read (lesson 09); 1: they do not read
    ranks: int = 1  # ranks read, each from make_loader(rank=r, world_size=ranks)
    resume: bool = False  # check a resumed run against an uninterrupted one
    make_loader: Callable[..., DataLoader] | None = None  # builds the loader afresh, as a new launch of the script would
    received: Any = None  # what the ledger rules read (helpers.doctor.lesson09.Received)
    flight: Any = None  # the flight recording the lesson-09 flight rules share (helpers.doctor.lesson09_flight)

    @property
    def iterable(self) -> bool:
        """True for an IterableDataset (no sampler, no len)."""
        return isinstance(self.loader.dataset, IterableDataset)

    @property
    def steady_batch_s(self) -> float:
        """Mean time per batch after the first (with `step`: data wait + step): batches that arrive in pairs average out."""
        return float(np.mean(self.batch_times_s)) if self.batch_times_s else math.nan

    @property
    def samples_per_s(self) -> float:
        """Samples per second after the first batch."""
        spent = sum(self.batch_times_s)
        per_batch = self.samples / self.batches if self.batches else 0
        return per_batch * len(self.batch_times_s) / spent if spent > 0 else math.nan

    def time_step(self, batch: Any) -> float:
        """Seconds `step(batch)` took, to its end on the device (CUDA work is synchronised)."""
        started = time.perf_counter()
        self.step(batch)  # type: ignore[misc]
        if self.device is not None and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter() - started

    def left(self) -> float:
        """Seconds left in the budget."""
        return self.deadline - time.perf_counter()

    def slot_left(self) -> float:
        """Seconds left in this rule's own slot (and the budget)."""
        return min(self.slot_end, self.deadline) - time.perf_counter()

    def borrow(self, need_s: float) -> bool:
        """Whether this rule's slot holds `need_s` seconds from now, stretching it into the later rules' share when the
        budget left holds them (the later rules share what remains)."""
        if self.slot_left() >= need_s:
            return True
        if need_s > self.left():
            return False
        self.slot_end = time.perf_counter() + need_s
        return True

    def too_short(self, need_s: float, had_s: float) -> str:
        """Why a rule did not measure: the seconds it needs, the share of the budget it had, and the --budget that would do."""
        had = f"its share of this run's budget was {max(0.0, had_s):.1f} s"
        if need_s <= had_s:
            return (f"it needs about {need_s:.1f} s by the first pass's batch times and {had}, but the rounds took longer "
                    "(slower batches or workers slower to start than in the first pass, or other programs on the cores)")
        if not math.isfinite(self.budget_s):
            return f"it needs about {need_s:.1f} s and {had}: give diagnose() a larger budget_s"
        wanted = math.ceil(self.budget_s * need_s / max(had_s, 0.1))  # a rule's share grows in proportion to the budget
        return (f"it needs about {need_s:.1f} s and {had} (of {self.budget_s:g} s): about --budget {wanted} "
                f"(budget_s={wanted}) would give it that")


Check = Callable[[Observation], "Finding | None"]


@dataclass(frozen=True)
class Rule:
    """One registered rule: its code, the severities it may report, when it runs, its thresholds and where its fix is taught."""

    code: str
    severities: tuple[str, ...]
    phase: str
    taught_in: tuple[str, str]  # (notebook stem, section heading without the '## ')
    check: Check
    thresholds: dict[str, tuple[float, str]] = field(default_factory=dict)  # name: (value, what it bounds)
    budget: float = 0.0  # a measuring rule's weight in sharing the budget left after the first pass
    planted: str = ""  # doctor_corpus.planted's function that builds a loader with this fault
    applies: Callable[[Observation], bool] | None = None  # a measuring rule: whether it will measure (else its share goes to others)
    runs_without_batches: bool = False  # runs when the loader gave no batch (rank 0 empty, other ranks not: unequal steps)

    @property
    def lesson(self) -> str:
        """Where the fix is taught, as a Finding names it."""
        return f"{self.taught_in[0]}.ipynb, section {self.taught_in[1]}"


RULES: dict[str, Rule] = {}


def rule(code: str, *, severities: tuple[str, ...], phase: str, taught_in: tuple[str, str], planted: str = "",
         thresholds: dict[str, tuple[float, str]] | None = None, budget: float = 0.0,
         applies: Callable[[Observation], bool] | None = None, runs_without_batches: bool = False) -> Callable[[Check], Check]:
    """Register the decorated check as the rule for `code` (each code once)."""
    if code in RULES:
        raise ValueError(f"code {code!r} is already registered by {RULES[code].check.__module__}")
    if phase not in PHASES:
        raise ValueError(f"phase must be one of {PHASES}, got {phase!r}")
    if not severities or not set(severities) <= set(SEVERITIES):
        raise ValueError(f"severities must be some of {SEVERITIES}, got {severities!r}")
    if (budget > 0) != (phase == "measure"):
        raise ValueError(f"{code}: a budget weight goes with phase 'measure' and only there, got {budget} for {phase!r}")

    def register(check: Check) -> Check:
        RULES[code] = Rule(code, tuple(severities), phase, taught_in, check, dict(thresholds or {}), budget, planted, applies,
                           runs_without_batches)
        return check

    return register


def finding(code: str, severity: str, message: str, fix: str, **evidence: Any) -> Finding:
    """A Finding for a registered code, with its lesson filled in (lesson 07)."""
    known = RULES[code]
    if severity not in known.severities:
        raise ValueError(f"{code} reports {known.severities}, not {severity!r}")
    return Finding(code, severity, message, fix, evidence, known.lesson)


def in_order() -> list[Rule]:
    """The registered rules in run order: phase by phase, each phase in registration order."""
    return sorted(RULES.values(), key=lambda r: PHASES.index(r.phase))


def table() -> str:
    """The registry as a Markdown table: code, severities, phase, thresholds, where it is taught (lesson 07)."""
    rows = ["| code | severity | when | threshold | taught in |", "|---|---|---|---|---|"]
    for r in in_order():
        limits = "; ".join(f"{what}: {value:g}" for value, what in r.thresholds.values()) or "-"
        rows.append(f"| `{r.code}` | {', '.join(r.severities)} | {r.phase} | {limits} | {r.taught_in[0]} section {r.taught_in[1]} |")
    return "\n".join(rows)
