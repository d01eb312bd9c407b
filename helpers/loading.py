"""Measuring a DataLoader: throughput benchmark, parameter sweep, data-wait vs compute timer (lesson 03)."""
from __future__ import annotations

import inspect
import multiprocessing
import statistics
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from helpers._validate import _short, as_fraction, as_int
from helpers._validate import as_device as _as_device
from helpers.workloads import SlowDataset, spin, spin_iterations_per_ms

# DataLoader arguments a sweep may vary, with the smallest value each accepts.
INT_PARAMS: dict[str, int] = {"num_workers": 0, "batch_size": 1, "prefetch_factor": 1}


@dataclass(frozen=True)
class LoaderBenchmark:
    """One benchmark run: steady-state samples/s after warm-up, and the first batch's latency apart (lesson 03)."""

    samples_per_s: float
    first_batch_s: float
    batch_times_s: tuple[float, ...]
    num_batches: int
    num_samples: int

    def __str__(self) -> str:
        return (
            f"{self.samples_per_s:,.0f} samples/s over {self.num_batches} batches ({self.num_samples} samples) "
            f"after warm-up; first batch after {self.first_batch_s * 1000:.0f} ms"
        )


def count_samples(batch: Any) -> int:
    """Samples in a batch: the length of its first tensor or array, searched through tuples, lists and dicts (lesson 03)."""
    found = _first_array(batch)
    if found is None:
        raise TypeError(f"cannot count samples in a batch of type {type(batch).__name__}: it holds no tensor or numpy array")
    return int(found.shape[0]) if found.ndim else 1


def _first_array(batch: Any) -> torch.Tensor | np.ndarray | None:
    """The first tensor or numpy array in `batch`, depth first, or None."""
    if isinstance(batch, (torch.Tensor, np.ndarray)):
        return batch
    if isinstance(batch, Mapping):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        for part in batch:
            if (found := _first_array(part)) is not None:
                return found
    return None


def benchmark_loader(loader: Iterable[Any], num_batches: int | None = None, warmup_batches: int = 1) -> LoaderBenchmark:
    """Time one pass over `loader`: the first batch (worker start-up + fetch) apart, then num_batches after warmup_batches (lesson 03)."""
    if num_batches is not None:
        num_batches = as_int("num_batches", num_batches, minimum=1)
    warmup_batches = as_int("warmup_batches", warmup_batches, minimum=0)
    wanted = None if num_batches is None else warmup_batches + num_batches
    start = time.perf_counter()
    iterator = iter(loader)
    try:
        arrivals, samples = _drain(iterator, wanted)
    finally:
        del iterator  # a non-persistent multi-worker iterator shuts its workers down here
    received = len(arrivals)
    if received < (wanted or warmup_batches + 1):
        need = f"warmup_batches={warmup_batches} + " + (f"num_batches={num_batches}" if num_batches else "at least 1 timed batch")
        raise ValueError(f"loader yielded {received} batches, but {need} were asked for; lower them or give the loader more data")
    times = np.diff([start, *arrivals])[warmup_batches:]
    timed_samples = sum(samples[warmup_batches:])
    return LoaderBenchmark(
        samples_per_s=timed_samples / float(times.sum()),
        first_batch_s=arrivals[0] - start,
        batch_times_s=tuple(float(t) for t in times),
        num_batches=len(times),
        num_samples=timed_samples,
    )


def _drain(iterator: Iterator[Any], wanted: int | None) -> tuple[list[float], list[int]]:
    """Arrival times (perf_counter) and sample counts of up to `wanted` batches (all when None)."""
    arrivals: list[float] = []
    samples: list[int] = []
    while wanted is None or len(arrivals) < wanted:
        try:
            batch = next(iterator)
        except StopIteration:
            break
        arrivals.append(time.perf_counter())
        samples.append(count_samples(batch))
    return arrivals, samples


@dataclass(frozen=True)
class SweepRow:
    """One value of a sweep: the median of its repeats and every run (lesson 03)."""

    value: Any
    runs: tuple[LoaderBenchmark, ...]

    @property
    def samples_per_s(self) -> float:
        """Median steady-state samples/s over the repeats."""
        return statistics.median(run.samples_per_s for run in self.runs)

    @property
    def best_samples_per_s(self) -> float:
        """Highest samples/s of the repeats: what the loader can do when nothing else slows it down."""
        return max(run.samples_per_s for run in self.runs)

    @property
    def first_batch_s(self) -> float:
        """Median seconds from iter() to the first batch over the repeats."""
        return statistics.median(run.first_batch_s for run in self.runs)


@dataclass(frozen=True)
class LoaderSweep:
    """Throughput of one DataLoader argument's values: print it, or .plot() it (lesson 03)."""

    param: str
    rows: tuple[SweepRow, ...]
    title: str = ""

    @property
    def best(self) -> Any:
        """The value with the highest median samples/s."""
        return max(self.rows, key=lambda row: row.samples_per_s).value

    def __str__(self) -> str:
        lines = [f"{self.param:>12} | {'samples/s':>11} | {'min-max':>17} | first batch"]
        for row in self.rows:
            rates = [run.samples_per_s for run in row.runs]
            spread = f"{min(rates):,.0f}-{max(rates):,.0f}"
            lines.append(f"{row.value!s:>12} | {row.samples_per_s:>11,.0f} | {spread:>17} | {row.first_batch_s * 1000:,.0f} ms")
        return "\n".join(lines)

    def plot(self, ax: Any = None, label: str | None = None, statistic: str = "median") -> Any:
        """Median (or best) samples/s against the swept value, min-max of the repeats as error bars, on `ax` (made if None)."""
        import matplotlib.pyplot as plt

        if statistic not in ("median", "best"):
            raise ValueError(f"statistic must be 'median' or 'best', got {statistic!r}")
        if ax is None:
            _, ax = plt.subplots()
        medians = np.array([row.samples_per_s if statistic == "median" else row.best_samples_per_s for row in self.rows])
        lows = medians - [min(run.samples_per_s for run in row.runs) for row in self.rows]
        highs = [max(run.samples_per_s for run in row.runs) for row in self.rows] - medians
        values = [row.value for row in self.rows]
        ax.errorbar(values, medians, yerr=[lows, highs], marker="o", capsize=3, label=label or self.title or None)
        ax.set_xlabel(self.param)
        ax.set_ylabel(f"samples/s ({statistic} of repeats)")
        top = float(max(medians + highs)) * 1.1  # room for this curve and any drawn before on the same axes
        ax.set_ylim(0, max(top, ax.get_ylim()[1]))
        if self.title:
            ax.set_title(self.title)
        if label:
            ax.legend()
        return ax


def sweep_loader(
    dataset: Dataset,
    param: str = "num_workers",
    values: Sequence[Any] = (0, 1, 2, 4),
    repeats: int = 3,
    num_batches: int | None = None,
    warmup_batches: int = 1,
    progress: bool = True,
    title: str = "",
    **loader_kwargs: Any,
) -> LoaderSweep:
    """Benchmark DataLoader(dataset, **loader_kwargs, param=value) for each value, `repeats` times each (lesson 03)."""
    allowed = set(inspect.signature(DataLoader.__init__).parameters) - {"self", "dataset"}
    if not isinstance(param, str) or param not in allowed:
        raise ValueError(f"param must be a DataLoader argument such as 'num_workers', got {_short(param)}")
    if param in loader_kwargs:
        raise ValueError(f"param={param!r} is swept, so it must not also be passed as a keyword argument")
    unknown = sorted(set(loader_kwargs) - allowed)
    if unknown:
        raise TypeError(f"loader_kwargs has names DataLoader does not take: {unknown}")
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or len(values) == 0:
        raise ValueError(f"values must be a non-empty sequence of {param} values, got {_short(values)}")
    if param in INT_PARAMS:
        values = [as_int(f"values[{i}] ({param})", v, minimum=INT_PARAMS[param]) for i, v in enumerate(values)]
    repeats = as_int("repeats", repeats, minimum=1)
    from tqdm.auto import tqdm

    runs: dict[int, list[LoaderBenchmark]] = {i: [] for i in range(len(values))}
    with tqdm(total=len(values) * repeats, desc=f"{param} sweep", disable=not progress, leave=False) as bar:
        for _ in range(repeats):  # round-robin: a burst of load from other programs hits every value alike
            for i, value in enumerate(values):
                bar.set_postfix({param: value})
                loader = DataLoader(dataset, **{**loader_kwargs, param: value})
                runs[i].append(benchmark_loader(loader, num_batches=num_batches, warmup_batches=warmup_batches))
                del loader  # shuts down persistent workers before the next value starts its own
                bar.update()
    rows = tuple(SweepRow(value=value, runs=tuple(runs[i])) for i, value in enumerate(values))
    return LoaderSweep(param=param, rows=rows, title=title)


def parallel_speedup(processes: int, work_ms: float = 150.0) -> float:
    """How much faster `processes` plain processes do the same pure-Python work than one: this machine's ceiling right now (lesson 03)."""
    processes = as_int("processes", processes, minimum=1)
    iterations = round(as_fraction("work_ms", work_ms, 0.0, 10_000.0, include_low=False, include_high=True) * spin_iterations_per_ms())
    with multiprocessing.get_context().Pool(processes) as pool:
        pool.map(spin, [1] * processes, chunksize=1)  # start the processes before timing
        start = time.perf_counter()
        for _ in range(processes):
            spin(iterations)
        serial_s = time.perf_counter() - start
        start = time.perf_counter()
        pool.map(spin, [iterations] * processes, chunksize=1)
        parallel_s = time.perf_counter() - start
    return serial_s / parallel_s


class StepTimer:
    """Splits each training step into waiting for data and computing: `for batch in timer.wrap(loader): ...` (lesson 03)."""

    def __init__(self, device: str | torch.device | None = None) -> None:
        self.device = _as_device("device", "cpu" if device is None else device)
        self.data_wait_s: list[float] = []
        self.compute_s: list[float] = []

    def _now(self) -> float:
        """perf_counter after the device's queued work has finished (CPU: nothing to wait for)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        elif self.device.type != "cpu":
            torch.accelerator.synchronize(self.device)
        return time.perf_counter()

    def wrap(self, batches: Iterable[Any]) -> Iterator[Any]:
        """Yield the batches; time from a step's end to the next batch is data wait, from the batch to the step's end compute."""
        step_end = self._now()
        for batch in batches:  # iter() is inside the first wait: worker start-up counts as data wait
            ready = time.perf_counter()
            yield batch
            done = self._now()
            self.data_wait_s.append(ready - step_end)
            self.compute_s.append(done - ready)
            step_end = done

    def data_fraction(self, skip_first: int = 1) -> float:
        """Share of step time spent waiting for data, leaving out the first `skip_first` steps (worker start-up)."""
        skip_first = as_int("skip_first", skip_first, minimum=0)
        if len(self.data_wait_s) <= skip_first:
            raise ValueError(f"skip_first={skip_first} leaves none of the {len(self.data_wait_s)} timed steps; run more steps")
        wait = sum(self.data_wait_s[skip_first:])
        return wait / (wait + sum(self.compute_s[skip_first:]))

    def reset(self) -> None:
        """Forget the timed steps."""
        self.data_wait_s.clear()
        self.compute_s.clear()

    def __str__(self) -> str:
        steps = len(self.data_wait_s)
        if steps < 2:
            return f"StepTimer: {steps} step(s) timed; run at least 2 (the first is start-up)"
        wait, compute = sum(self.data_wait_s[1:]), sum(self.compute_s[1:])
        return (
            f"{steps - 1} steps after the first: waiting for data {wait:.3f} s ({self.data_fraction():.0%}), "
            f"computing {compute:.3f} s; first step waited {self.data_wait_s[0]:.3f} s"
        )


def benchmark_widget(num_items: int = 2048, num_batches: int = 4) -> Any:
    """Sliders for num_workers, batch size and per-item CPU / I/O cost, a Run button, and a bar chart of the runs (lesson 03)."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    sliders = {
        "num_workers": widgets.IntSlider(value=2, min=0, max=8, description="num_workers"),
        "batch_size": widgets.IntSlider(value=16, min=1, max=64, description="batch size"),
        "cpu_ms": widgets.FloatSlider(value=1.0, min=0.0, max=5.0, step=0.5, description="CPU ms/item"),
        "io_ms": widgets.FloatSlider(value=0.0, min=0.0, max=5.0, step=1.0, description="I/O ms/item"),
    }
    button, output, history = widgets.Button(description="Run benchmark", button_style="primary"), widgets.Output(), []

    def run(_: Any = None) -> None:
        value = {name: slider.value for name, slider in sliders.items()}
        loader = DataLoader(SlowDataset(num_items, cpu_ms=value["cpu_ms"], io_ms=value["io_ms"]),
                            batch_size=value["batch_size"], num_workers=value["num_workers"])
        result = benchmark_loader(loader, num_batches=num_batches)
        history.append((f"w={value['num_workers']} b={value['batch_size']}\ncpu={value['cpu_ms']} io={value['io_ms']}", result.samples_per_s))
        with output:
            output.clear_output(wait=True)
            fig, ax = plt.subplots()
            ax.bar([name for name, _ in history[-6:]], [rate for _, rate in history[-6:]])
            ax.set(ylabel="samples/s (steady state)", title=f"Last run: {result.samples_per_s:,.0f} samples/s, first batch {result.first_batch_s * 1000:.0f} ms")
            plt.show()

    button.on_click(run)
    for slider in sliders.values():
        slider.continuous_update = False  # rerun when a slider is released, not on every tick of a drag
        slider.observe(run, names="value")
    run()
    return widgets.VBox([*sliders.values(), button, output])
