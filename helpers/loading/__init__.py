"""Measuring a DataLoader (lesson 03).

- helpers/loading/benchmark.py: what to keep in your own training code: `benchmark_loader` (steady samples/s, the
  first batch apart) and `StepTimer` (each step split into data wait and compute)
- helpers/loading/sweeps.py: lesson 03's own measurements: `num_workers` sweeps (`sweep_loader`, `lesson_sweep`)
- helpers/loading/reference.py: the sweeps recorded by `tools/bench.py --record` on a named machine, read back
- helpers/loading/widget.py: lesson 03's benchmark widget
"""
from helpers.loading.benchmark import LoaderBenchmark, StepTimer, benchmark_loader, count_samples, warmup_for
from helpers.loading.reference import REFERENCE_GLOB, LoaderReference, cpu_model, load_loader_reference, record_reference
from helpers.loading.sweeps import INT_PARAMS, LESSON_SWEEPS, LoaderSweep, SweepRow, lesson_sweep, sweep_loader
from helpers.loading.widget import benchmark_widget

__all__ = [
    "INT_PARAMS", "LESSON_SWEEPS", "REFERENCE_GLOB", "LoaderBenchmark", "LoaderReference", "LoaderSweep", "StepTimer", "SweepRow",
    "benchmark_loader", "benchmark_widget", "count_samples", "cpu_model", "lesson_sweep", "load_loader_reference",
    "record_reference", "sweep_loader", "warmup_for",
]
