"""A corpus of loaders the loader doctor (helpers.doctor, lesson 07) was not written for, each with its findings written first.

Every case module models public code or a public bug report and defines: a docstring with an `Origin:` line,
`EXPECTED` (the codes that must come as warning or error; every other code must not, info is allowed), `WITHOUT_FORK`
(codes also expected where workers do not start by fork: under spawn and forkserver each worker imports torch anew),
`make_loader()`, and optionally `step(batch)`, `BUDGET_S` (default 8), `BUDGET_WITHOUT_FORK_S` (the budget where workers
are fresh Pythons, when the doctor asks for more there), `FAST` (one diagnosis fits `make test`),
`NEEDS` (comma-separated names from NEEDS_CHECKS: the case is skipped where one is unmet), `DEVICE` (passed to
the doctor), `HOST_BUSY` (the runner starts CPU-bound programs around the diagnosis, one per usable core), `EXIT`
(the command line's exit status, when an expected code's severity can be either; else 1 exactly when one is in ERROR_CODES),
`EVIDENCE` ({code: {key: value}}: what an expected finding's evidence must hold, e.g. which part of the loader raised),
and the ledger's reading (lesson 09): `EPOCHS`, `RANKS` (make_loader then takes rank= and world_size=) and `RESUME`.
tests/test_doctor_corpus.py runs the FAST cases; tools/doctor_bench.py runs them all, N times.
"""
from __future__ import annotations

import contextlib
import importlib
import math
import multiprocessing
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

CASES: tuple[str, ...] = (
    "imagefolder_no_workers", "imagefolder_workers", "imagenet_example_defaults", "corrupt_jpeg",
    "webdataset_unsplit", "webdataset_split", "stream_unsharded", "stream_sharded",
    "annotations_list_of_dicts", "annotations_numpy", "tensordataset_workers", "hdf5_eager_spawn", "hdf5_lazy_spawn",
    "sampler_class_weights", "sampler_no_replacement", "sampler_per_sample", "sampler_nan_weight", "sampler_nan_weight_filled",
    "balanced_100_classes",
    "text_default_collate", "text_padding_collate", "text_length_grouped", "lightning_datamodule", "distributed_sampler_set_epoch",
    "timm_16_workers", "blas_transform_workers", "torch_threads_worker_init", "torch_threads_fork_hang",
    "worker_init_startup", "slow_batch_no_workers", "busy_host", "shm_docker", "pin_memory_missing_cuda",
    "stream_epoch_persistent_workers", "stream_epoch_fresh_workers", "validation_loader_epochs",
    "ddp_shuffle_no_distributed_sampler", "ddp_distributed_sampler_padded", "ddp_distributed_sampler_drop_last",
    "stream_uneven_shards_ranks", "stream_even_shards_ranks", "stream_worker_slices", "stateful_shuffle_buffer",
    "stateful_shuffle_buffer_saved", "stateful_generator_no_workers", "stateful_generator_workers", "stateful_distributed_sampler",
    "flight_replica_slow_worker", "flight_stream_slow_shard", "flight_alternating_tasks", "flight_grouped_batches_hol",
    "flight_huge_images_slow_samples", "flight_slow_samples_unordered", "flight_getitems_slow_samples",
    "flight_lognormal_equal_workers", "flight_lazy_open_first_fetch", "flight_step_dominates",
)

# Every code the doctor reports, the two being added (threads-oversubscribed, busy-host) included.
CODES = frozenset({
    "loader-error", "input-bound", "workers-oversubscribed", "workers-too-few", "startup-cost", "pin-memory-no-accelerator",
    "pin-memory-missing", "unbalanced-batches", "class-weights-as-sample-weights", "no-replacement-weights",
    "iterable-duplicates", "copy-on-read", "shm-too-small", "threads-oversubscribed", "busy-host", "padding-waste",
    "epoch-order-repeats", "coverage-gap", "rank-overlap", "unequal-steps", "resume-mismatch", "not-picklable",
    "slow-worker", "slow-samples", "head-of-line",
})
ERROR_CODES = frozenset({"loader-error", "class-weights-as-sample-weights", "iterable-duplicates", "rank-overlap",
                         "unequal-steps"})  # always severity error
DEFAULT_BUDGET_S = 8.0
BUSY_PROGRAM = "while True: pass"


def _blas_threads_by_default() -> bool:
    """numpy's BLAS starts one thread per core (no thread-count variable set to 1) and there are 2+ cores."""
    from helpers.env import usable_cpus

    pinned = any(os.environ.get(v) == "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"))
    return usable_cpus() >= 2 and not pinned


def _small_shm() -> bool:
    """/dev/shm has under 1 GiB free (a default Docker container has 64 MiB)."""
    return os.path.isdir("/dev/shm") and shutil.disk_usage("/dev/shm").free < 1024**3


def _cores(test: Callable[[int], bool]) -> Callable[[], bool]:
    def check() -> bool:
        from helpers.env import usable_cpus

        return test(usable_cpus())
    return check


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def _no_accelerator() -> bool:
    import torch

    return not torch.accelerator.is_available()


# NEEDS names: what each checks, and the check.
NEEDS_CHECKS: dict[str, tuple[str, Callable[[], bool]]] = {
    "cuda": ("a CUDA GPU", _cuda),
    "no-accelerator": ("a machine without accelerator", _no_accelerator),
    "small-shm": ("/dev/shm under 1 GiB free, as in a default Docker container", _small_shm),
    "multi-core": ("2 or more usable cores", _cores(lambda n: n >= 2)),
    "few-cores": ("at most 8 usable cores", _cores(lambda n: n <= 8)),
    "blas-threads": ("numpy's BLAS on its default threads (no OMP/OPENBLAS/MKL_NUM_THREADS=1) and 2+ cores",
                     _blas_threads_by_default),
}


def load(name: str) -> ModuleType:
    """The case module `name` (one of CASES)."""
    if name not in CASES:
        raise ValueError(f"name must be one of the corpus cases {', '.join(CASES)}, got {name!r}")
    return importlib.import_module(f"{__name__}.{name}")


def cases() -> list[ModuleType]:
    """Every case module, in CASES order."""
    return [load(name) for name in CASES]


def name(case: ModuleType) -> str:
    """A case's short name."""
    return case.__name__.rsplit(".", 1)[-1]


def forked() -> bool:
    """True when this process's DataLoader workers start by fork (else each is a fresh Python that imports torch)."""
    return multiprocessing.get_start_method() == "fork"


def budget_s(case: ModuleType) -> float:
    """The case's BUDGET_S (or the default); where workers do not start by fork, its BUDGET_WITHOUT_FORK_S if it has one."""
    from helpers._validate import is_real, real_as_float

    budget = getattr(case, "BUDGET_S", DEFAULT_BUDGET_S)
    seconds = {}
    for label, value in (("BUDGET_S", budget), ("BUDGET_WITHOUT_FORK_S", getattr(case, "BUDGET_WITHOUT_FORK_S", budget))):
        seconds[label] = real_as_float(value) if is_real(value) else math.nan
        if not 0 < seconds[label] < math.inf:
            raise ValueError(f"{name(case)}: {label} must be a positive finite number of seconds, got {value!r}")
    if seconds["BUDGET_WITHOUT_FORK_S"] < seconds["BUDGET_S"]:  # fresh Pythons start slower than forks: a slip
        raise ValueError(f"{name(case)}: BUDGET_WITHOUT_FORK_S ({case.BUDGET_WITHOUT_FORK_S!r}) is under BUDGET_S ({budget!r})")
    return seconds["BUDGET_S" if forked() else "BUDGET_WITHOUT_FORK_S"]


def origin(case: ModuleType) -> str:
    """The text of the case docstring's `Origin:` paragraph, on one line ("" when it has none)."""
    text = (case.__doc__ or "").split("Origin:", 1)
    return " ".join(text[1].split("\n\n", 1)[0].split()) if len(text) == 2 else ""


def unmet(case: ModuleType) -> str | None:
    """Why the case cannot run here (its NEEDS unmet), or None."""
    missing = [NEEDS_CHECKS[n.strip()][0] for n in getattr(case, "NEEDS", "").split(",") if n.strip()
               and not NEEDS_CHECKS[n.strip()][1]()]
    return f"needs {' and '.join(missing)}" if missing else None


def expected(case: ModuleType) -> frozenset[str]:
    """The codes the case expects here: EXPECTED, and WITHOUT_FORK when this process's workers do not start by fork."""
    return case.EXPECTED | (frozenset() if forked() else frozenset(getattr(case, "WITHOUT_FORK", frozenset())))


def expected_exit(case: ModuleType) -> int:
    """The command line's exit status for the case: 1 when an expected code is an error."""
    return int(getattr(case, "EXIT", 1 if expected(case) & ERROR_CODES else 0))


def problems(diagnosis: Any, expected: frozenset[str] = frozenset()) -> set[str]:
    """The codes found as warning or error, and the expected ones found as info (busy-host is never more than info)."""
    return {f.code for f in diagnosis.findings if f.severity != "info" or f.code in expected}


def compare(expected: frozenset[str], found: set[str], tolerated: frozenset[str] = frozenset()) -> tuple[set[str], set[str]]:
    """(missed, false alarms): expected codes not found, and found codes neither expected nor tolerated."""
    return set(expected - found), set(found - expected - tolerated)


def wrong_evidence(case: ModuleType, findings: list[Any]) -> list[str]:
    """The case's EVIDENCE entries its findings (objects or JSON dicts with code and evidence) do not hold, as 'code.key=got (want x)'."""
    wrong = []
    for code, wanted in getattr(case, "EVIDENCE", {}).items():
        evidence = next((f["evidence"] if isinstance(f, dict) else f.evidence for f in findings
                         if (f["code"] if isinstance(f, dict) else f.code) == code), None)
        if evidence is None:
            continue  # a missed code is reported as missed
        wrong += [f"{code}.{key}={evidence.get(key)!r} (want {value!r})" for key, value in wanted.items() if evidence.get(key) != value]
    return wrong


OVER_BUDGET_S = 1.0  # the doctor's call may take its budget and this much more (issue 22)


def diagnose(case: ModuleType) -> tuple[Any, float]:
    """The doctor's diagnosis of the case's loader (with its step, budget and device), and the seconds its call took."""
    from helpers import doctor

    epochs, ranks, resume = reading(case)
    loader = case.make_loader(rank=0, world_size=ranks) if ranks > 1 else case.make_loader()  # the case's time, not the doctor's
    started = time.perf_counter()
    diagnosis = doctor.diagnose(loader, step=getattr(case, "step", None), budget_s=budget_s(case),
                                device=getattr(case, "DEVICE", None), epochs=epochs, ranks=ranks, resume=resume,
                                make_loader=case.make_loader)
    return diagnosis, time.perf_counter() - started


def reading(case: ModuleType) -> tuple[int, int, bool]:
    """The case's (EPOCHS, RANKS, RESUME): what the doctor reads through a ledger (default 1, 1, False)."""
    return int(getattr(case, "EPOCHS", 1)), int(getattr(case, "RANKS", 1)), bool(getattr(case, "RESUME", False))


def cli_flags(case: ModuleType) -> list[str]:
    """The command line's flags for the case's reading: --epochs, --ranks, --resume where they differ from the default."""
    epochs, ranks, resume = reading(case)
    return ([f"--epochs={epochs}"] if epochs != 1 else []) + ([f"--ranks={ranks}"] if ranks != 1 else []) + (
        ["--resume"] if resume else [])


@contextlib.contextmanager
def busy(programs: int) -> Iterator[list[subprocess.Popen]]:
    """`programs` CPU-bound `python -c "while True: pass"` processes for the duration, killed on every way out."""
    started: list[subprocess.Popen] = []
    try:
        for _ in range(programs):
            started.append(subprocess.Popen([sys.executable, "-c", BUSY_PROGRAM]))
        yield started
    finally:
        for process in started:
            process.kill()
        for process in started:
            process.wait()


def host_busy(case: ModuleType) -> contextlib.AbstractContextManager:
    """One busy program per usable core around a HOST_BUSY case; nothing for the others."""
    from helpers.env import usable_cpus

    return busy(usable_cpus() if getattr(case, "HOST_BUSY", False) else 0)
