"""The course's facts in one place: its lessons (the README map, hygiene checks and env.report's verdict read them) and its switches."""
from __future__ import annotations

from dataclasses import dataclass

# The course's environment switches, named once; helpers, tools and tests import these names.
REQUIRE_CUDA_VAR = "COURSE_REQUIRE_CUDA"  # "1": a skipped CUDA test or notebook section is a failure (GPU runners)
REQUIRE_BROWSER_VAR = "COURSE_REQUIRE_BROWSER"  # "1": a missing Chromium fails the browser test (CI)
CHECKS_MUST_PASS_VAR = "COURSE_CHECKS_MUST_PASS"  # "1": a self-check that does not pass raises (the solutions' test run)
BROWSER_OUTPUTS_VAR = "COURSE_BROWSER_OUTPUTS"  # a folder: the browser test writes each notebook's rendered outputs there
START_METHOD_VAR = "COURSE_START_METHOD"  # "forkserver" or "spawn": every Python of the .venv starts with it (helpers.start_method)

# What a lesson needs for its full effect. Every lesson runs top to bottom on a CPU machine;
# with less than it needs, its measurements fall back (and say so).
NEEDS: dict[str, str] = {
    "cpu": "CPU is enough",
    "2+ cores": "2+ CPU cores",
    "1 gpu": "1 CUDA GPU",
    "2+ gpus": "2+ CUDA GPUs",
}


@dataclass(frozen=True)
class Lesson:
    """One lesson notebook: its file stem, title, what it teaches, what it needs, how long it takes."""

    stem: str
    title: str
    learn: str
    needs: str
    minutes: int

    @property
    def number(self) -> str:
        """The two-digit lesson number, e.g. "00"."""
        return self.stem[:2]


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        stem="00_setup_check",
        title="Setup check: what can this machine run?",
        learn="what this machine can run: cores, RAM, /dev/shm, start method, GPUs, DDP backends",
        needs="cpu",
        minutes=20,
    ),
    Lesson(
        stem="01_imbalance_analysis",
        title="Measuring class imbalance",
        learn="counts from labels, imbalance ratio and effective number, why accuracy lies, stratified splits, what each DDP rank sees",
        needs="cpu",
        minutes=40,
    ),
    Lesson(
        stem="02_rebalancing",
        title="Rebalancing: samplers, weights and losses, measured",
        learn="per-sample weights, batch mix and epoch coverage, five sampler traps, the memory claim measured, a fair comparison of rebalancing strategies",
        needs="cpu",
        minutes=45,
    ),
    Lesson(
        stem="03_loader_bottlenecks",
        title="Finding the input bottleneck",
        learn="a loader benchmark you can trust, `num_workers` for CPU- and I/O-bound items, data wait vs compute, worker start-up, `__getitems__`, copy-on-read memory, worker seeding, debugging a failing loader",
        needs="2+ cores",
        minutes=50,
    ),
    Lesson(
        stem="04_pinned_memory_transfers",
        title="Host-to-device transfers",
        learn="what `pin_memory` really does, pageable vs pinned bandwidth over sizes, pinning costs, when `non_blocking` overlaps, the unsafe device-to-host read, a stream prefetcher",
        needs="1 gpu",
        minutes=40,
    ),
    Lesson(
        stem="05_ddp_data_loading",
        title="Multi-GPU data loading with DDP",
        learn="launching DDP ranks from a notebook, `DistributedSampler` shards and padding, `set_epoch`, seeds, weighted sampling across ranks, uneven inputs and `join`, a straggler rank, workers per rank, multi-node launches",
        needs="2+ gpus",
        minutes=50,
    ),
    Lesson(
        stem="06_streaming_data",
        title="Streaming data across workers and ranks",
        learn="an `IterableDataset` duplicated across workers and ranks and its fix, tar shards vs small files, uneven shards and the end-of-epoch hang, file handles in workers, resuming mid-epoch with `StatefulDataLoader`, `in_order=False`",
        needs="2+ cores",
        minutes=50,
    ),
    Lesson(
        stem="07_debugging_clinic",
        title="Debugging clinic: a faulty training script, fixed one measurement at a time",
        learn="a training script with faults planted from every lesson: symptoms as measurements, the loader doctor in code and from a shell, one fix at a time and measured, faults that hide behind others, uneven shards and `set_epoch` across ranks, a finding of your own, the fixed script as a template",
        needs="2+ cores",
        minutes=60,
    ),
    Lesson(
        stem="08_variable_length",
        title="Variable-length data: padding, bucketing, token budgets and packing",
        learn="the padding share and useful tokens per second, bucketing and the class mix it changes, token budgets and activation memory, packing with document masks and restarting positions, equal steps across ranks with a resumable distributed bucket sampler, weighted mixtures of sources",
        needs="2+ cores",
        minutes=50,
    ),
    Lesson(
        stem="09_what_the_model_saw",
        title="What did the model see? A ledger of every sample, across epochs, ranks and resumes",
        learn="a ledger of what the training loop received (epoch, rank, worker, step, sample): coverage, overlap and steps per rank, the `set_epoch` trap of a stream with persistent workers, `DistributedSampler`'s padding seen, resuming at the epoch boundary wrong and right, a framework that replaces your sampler caught by counts against their noise, what fork and spawn send each worker and cost, measured side by side, and the error forkserver gives a notebook's lambda, what each worker did sample by sample (a flight recorder's timeline and trace file) and head-of-line blocking against `in_order=False`",
        needs="2+ cores",
        minutes=80,
    ),
)

