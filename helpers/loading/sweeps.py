"""Lesson 03's measurements: sweeps of DataLoader arguments, and the settings lesson 03 sweeps (helpers.loading re-exports them).

`sweep_loader` measures each value of one DataLoader argument in rounds; `lesson_sweep` runs lesson 03's two
`num_workers` sweeps (`LESSON_SWEEPS`), which `tools/bench.py --record` records on a quiet machine.
"""
from __future__ import annotations

import inspect
import statistics
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from torch.utils.data import DataLoader, Dataset

from helpers._validate import as_int, short
from helpers.loading.benchmark import LoaderBenchmark, benchmark_loader, warmup_for
from helpers.timing import Headroom, bracketed_each
from helpers.workloads import SlowDataset

# DataLoader arguments a sweep may vary, with the smallest value each accepts.
INT_PARAMS: dict[str, int] = {"num_workers": 0, "batch_size": 1, "prefetch_factor": 1}

# Lesson 03's two num_workers sweeps, defined once: the lesson runs them and `tools/bench.py --record`
# records them on a quiet machine, so the reference it plots was measured with the same settings.
LESSON_SWEEPS: dict[str, dict[str, Any]] = {
    "cpu": {"title": "1 ms of CPU work per item", "dataset": {"num_items": 4096, "cpu_ms": 1.0},
            "values": (0, 1, 2, 4, 8), "repeats": 3, "num_batches": 16, "batch_size": 16},
    "io": {"title": "5 ms of waiting per item", "dataset": {"num_items": 4096, "io_ms": 5.0},
           "values": (0, 2, 4, 8, 16), "repeats": 2, "num_batches": 24, "batch_size": 8},
}


@dataclass(frozen=True)
class SweepRow:
    """One value of a sweep: its runs, one per round, in round order (lesson 03)."""

    value: Any
    runs: tuple[LoaderBenchmark, ...]

    @property
    def samples_per_s(self) -> float:
        """Median steady-state samples/s over the rounds."""
        return statistics.median(run.samples_per_s for run in self.runs)

    @property
    def first_batch_s(self) -> float:
        """Median seconds from iter() to the first batch over the rounds."""
        return statistics.median(run.first_batch_s for run in self.runs)


@dataclass(frozen=True)
class LoaderSweep:
    """Throughput of one DataLoader argument's values, measured in rounds: print it, or .plot() it (lesson 03).

    `ceilings` holds, per round, how much faster `ceiling_processes` plain processes did pure-Python
    work than one: the lower of the measurements just before and just after that round's loaders (empty when not measured).
    """

    param: str
    rows: tuple[SweepRow, ...]
    title: str = ""
    ceilings: tuple[float, ...] = ()
    ceiling_processes: int = 0
    settings: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def ceiling(self) -> float | None:
        """Median over the rounds of the plain-process speed-up (None when not measured)."""
        return statistics.median(self.ceilings) if self.ceilings else None

    def _row(self, value: Any) -> SweepRow:
        """The row of `value`; ValueError naming the values when it was not swept."""
        for row in self.rows:
            if row.value == value:
                return row
        raise ValueError(f"value must be one of the swept values {[row.value for row in self.rows]}, got {short(value)}")

    def round_speedups(self, value: Any, baseline: Any = None) -> tuple[float, ...]:
        """Per round: samples/s of `value` over samples/s of `baseline` (the first value when None) in the same round."""
        base = self._row(self.rows[0].value if baseline is None else baseline)
        return tuple(run.samples_per_s / ref.samples_per_s for run, ref in zip(self._row(value).runs, base.runs))

    def speedup(self, value: Any, baseline: Any = None) -> float:
        """Median over rounds of `value`'s samples/s over `baseline`'s in the same round: pairs runs that shared the machine's load."""
        return statistics.median(self.round_speedups(value, baseline))

    def headroom(self, value: Any, baseline: Any = None) -> Headroom:
        """`value`'s per-round speed-ups over `baseline` beside each round's ceiling: judge a speed-up only where cores were free."""
        if not self.ceilings:
            raise ValueError("this sweep measured no ceiling: run it with ceiling_processes=N (the usable cores)")
        return Headroom(self.round_speedups(value, baseline), self.ceilings)

    def __str__(self) -> str:
        base = self.rows[0].value
        lines = [f"{self.param:>12} | {'samples/s':>11} | {'min-max':>17} | {'x ' + self.param + '=' + str(base):>17} | first batch",
                 f"{'':>12} | {'(median)':>11} | {'(of rounds)':>17} | {'(median, paired)':>17} |"]
        for row in self.rows:
            rates = [run.samples_per_s for run in row.runs]
            spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
            lines.append(f"{row.value!s:>12} | {row.samples_per_s:>11,.0f} | {spread:>17} | {self.speedup(row.value):>16.2f}x | "
                         f"{row.first_batch_s * 1000:,.0f} ms")
        if self.ceilings:
            each = ", ".join(f"{c:.2f}x" for c in self.ceilings)
            lines.append(f"ceiling: {self.ceiling_processes} plain processes ran at {self.ceiling:.2f}x the speed of one "
                         f"(median of the rounds: {each})")
        return "\n".join(lines)

    def plot(self, ax: Any = None, label: str | None = None) -> Any:
        """Median samples/s against the swept value, min-max of the rounds as error bars, on `ax` (made if None)."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        medians = np.array([row.samples_per_s for row in self.rows])
        lows = medians - [min(run.samples_per_s for run in row.runs) for row in self.rows]
        highs = [max(run.samples_per_s for run in row.runs) for row in self.rows] - medians
        values = [row.value for row in self.rows]
        ax.errorbar(values, medians, yerr=[lows, highs], marker="o", capsize=3, label=label or self.title or None)
        ax.set_xlabel(self.param)
        ax.set_ylabel("samples/s (median of rounds; bars: min-max)")
        top = float(max(medians + highs)) * 1.1  # room for this curve and any drawn before on the same axes
        ax.set_ylim(0, max(top, ax.get_ylim()[1]))
        if self.title:
            ax.set_title(self.title)
        if label:
            ax.legend()
        return ax

    def plot_speedup(self, ax: Any = None, label: str | None = None, **style: Any) -> Any:
        """Speed-up over the first value (median of paired rounds; bars: min-max of rounds) against the swept value, on `ax`."""
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots()
        values = [row.value for row in self.rows]
        per_round = [self.round_speedups(value) for value in values]
        medians = np.array([statistics.median(r) for r in per_round])
        errors = [medians - [min(r) for r in per_round], [max(r) for r in per_round] - medians]
        ax.errorbar(values, medians, yerr=errors, marker="o", capsize=3, label=label or self.title or None, **style)
        ax.set_xlabel(self.param)
        ax.set_ylabel(f"speed-up over {self.param}={values[0]} (x)")
        return ax

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data: every run's samples/s and first-batch seconds, the ceilings and the settings."""
        return {
            "param": self.param, "title": self.title, "ceilings": list(self.ceilings), "ceiling_processes": self.ceiling_processes,
            "settings": _jsonable(self.settings),
            "rows": [{"value": row.value, "samples_per_s": [r.samples_per_s for r in row.runs],
                      "first_batch_s": [r.first_batch_s for r in row.runs]} for row in self.rows],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LoaderSweep:
        """The sweep `to_dict` wrote (per-batch times are not stored)."""
        rows = tuple(
            SweepRow(value=row["value"], runs=tuple(
                LoaderBenchmark(samples_per_s=float(rate), first_batch_s=float(first), batch_times_s=(), num_batches=0, num_samples=0)
                for rate, first in zip(row["samples_per_s"], row["first_batch_s"], strict=True)))
            for row in data["rows"])
        return cls(param=str(data["param"]), rows=rows, title=str(data.get("title", "")),
                   ceilings=tuple(float(c) for c in data.get("ceilings", ())), ceiling_processes=int(data.get("ceiling_processes", 0)),
                   settings=dict(data.get("settings", {})))


def _jsonable(value: Any) -> Any:
    """Tuples as lists, recursively, so settings compare equal after a JSON round trip."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def sweep_loader(
    dataset: Dataset,
    param: str = "num_workers",
    values: Sequence[Any] = (0, 1, 2, 4),
    repeats: int = 3,
    num_batches: int | None = None,
    warmup_batches: int | None = 1,
    progress: bool = True,
    title: str = "",
    ceiling_processes: int = 0,
    **loader_kwargs: Any,
) -> LoaderSweep:
    """Benchmark DataLoader(dataset, **loader_kwargs, param=value) for each value, in `repeats` rounds (lesson 03).

    warmup_batches=None leaves out each loader's prefetch burst (`warmup_for`). ceiling_processes=N
    also measures, before and after every round, how much faster N plain processes do pure-Python work than one.
    """
    allowed = set(inspect.signature(DataLoader.__init__).parameters) - {"self", "dataset"}
    if not isinstance(param, str) or param not in allowed:
        raise ValueError(f"param must be a DataLoader argument such as 'num_workers', got {short(param)}")
    if param in loader_kwargs:
        raise ValueError(f"param={param!r} is swept, so it must not also be passed as a keyword argument")
    unknown = sorted(set(loader_kwargs) - allowed)
    if unknown:
        raise TypeError(f"loader_kwargs has names DataLoader does not take: {unknown}")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"values must be a non-empty sequence of {param} values, got {short(values)}")
    if param in INT_PARAMS:
        values = [as_int(f"values[{i}] ({param})", v, minimum=INT_PARAMS[param]) for i, v in enumerate(values)]
    repeats = as_int("repeats", repeats, minimum=1)
    if warmup_batches is not None:
        warmup_batches = as_int("warmup_batches", warmup_batches, minimum=0)
    ceiling_processes = as_int("ceiling_processes", ceiling_processes, minimum=0)
    from tqdm.auto import tqdm

    runs: dict[int, list[LoaderBenchmark]] = {i: [] for i in range(len(values))}
    ceilings: list[float] = []
    steps = len(values) * repeats + (repeats if ceiling_processes else 0)
    with tqdm(total=steps, desc=f"{param} sweep", disable=not progress, leave=False, mininterval=1.0) as bar:
        def measure(value: Any) -> LoaderBenchmark:
            loader = DataLoader(dataset, **{**loader_kwargs, param: value})
            warmup = warmup_batches if warmup_batches is not None else warmup_for(loader.num_workers, loader.prefetch_factor)
            result = benchmark_loader(loader, num_batches=num_batches, warmup_batches=warmup)
            del loader  # shuts down persistent workers before the next value starts its own
            bar.update()
            return result

        for number in range(repeats):  # rounds: a burst of load from other programs hits every value (and the ceiling) alike
            order = list(enumerate(values))[::-1 if number % 2 else 1]  # every other round reversed: none always first
            measures = {i: partial(measure, value) for i, value in order}
            if ceiling_processes:  # the ceiling just before and after the round, and the cores left free during each value
                results, ceiling = bracketed_each(measures, ceiling_processes)
                ceilings.append(ceiling)
                bar.update()
            else:
                results = {i: one() for i, one in measures.items()}
            for i, result in results.items():
                runs[i].append(result)
    rows = tuple(SweepRow(value=value, runs=tuple(runs[i])) for i, value in enumerate(values))
    settings = {"dataset": repr(dataset), "values": list(values), "repeats": repeats, "num_batches": num_batches,
                "warmup_batches": "prefetch burst" if warmup_batches is None else warmup_batches, **_jsonable(loader_kwargs)}
    return LoaderSweep(param=param, rows=rows, title=title, ceilings=tuple(ceilings), ceiling_processes=ceiling_processes,
                       settings=settings)


def lesson_sweep(kind: str, ceiling_processes: int = 0, progress: bool = True) -> LoaderSweep:
    """Run lesson 03's "cpu" or "io" num_workers sweep with the settings in LESSON_SWEEPS (lesson 03, tools/bench.py --record)."""
    if kind not in LESSON_SWEEPS:
        raise ValueError(f"kind must be one of {sorted(LESSON_SWEEPS)}, got {short(kind)}")
    spec = LESSON_SWEEPS[kind]
    dataset = SlowDataset(**spec["dataset"])
    with warnings.catch_warnings():  # more workers than cores is what the sweep is about; the lesson shows the warning apart
        warnings.filterwarnings("ignore", message="This DataLoader will create")
        sweep = sweep_loader(dataset, values=spec["values"], repeats=spec["repeats"], num_batches=spec["num_batches"],
                             warmup_batches=None, progress=progress, title=spec["title"], ceiling_processes=ceiling_processes,
                             batch_size=spec["batch_size"])
    return LoaderSweep(param=sweep.param, rows=sweep.rows, title=sweep.title, ceilings=sweep.ceilings,
                       ceiling_processes=sweep.ceiling_processes, settings=_jsonable({"kind": kind, **spec}))
