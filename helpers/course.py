"""The course's lessons in one table: the README map, the hygiene tests and env.report's verdict use it."""
from __future__ import annotations

from dataclasses import dataclass

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
        title="Setup check",
        learn="what this machine can run: cores, RAM, /dev/shm, start method, GPUs, DDP backends",
        needs="cpu",
        minutes=20,
    ),
    Lesson(
        stem="01_imbalance_analysis",
        title="Measuring class imbalance",
        learn="counts from labels, imbalance ratio, effective number, why accuracy lies, stratified splits, what each DDP rank sees",
        needs="cpu",
        minutes=40,
    ),
    Lesson(
        stem="02_rebalancing",
        title="Rebalancing: samplers, weights and losses",
        learn="per-sample weights, batch mix and epoch coverage, five sampler traps, memory measured, a fair comparison of six strategies",
        needs="cpu",
        minutes=45,
    ),
    Lesson(
        stem="03_loader_bottlenecks",
        title="Finding the input bottleneck",
        learn="a loader benchmark you can trust, num_workers for CPU- and I/O-bound items, data wait vs compute, start-up, __getitems__, copy-on-read memory, worker seeds, debugging moves",
        needs="2+ cores",
        minutes=50,
    ),
    Lesson(
        stem="04_pinned_memory_transfers",
        title="Host-to-device transfers",
        learn="what pin_memory really does, pageable vs pinned bandwidth over sizes, pinning costs, when non_blocking overlaps, the unsafe device-to-host read, a stream prefetcher",
        needs="1 gpu",
        minutes=40,
    ),
    Lesson(
        stem="05_ddp_data_loading",
        title="Multi-GPU data loading with DDP",
        learn="launching ranks from a notebook, DistributedSampler shards and padding, set_epoch, seeds, weighted sampling across ranks, uneven inputs and join, a straggler rank, workers per rank, multi-node launches",
        needs="2+ gpus",
        minutes=50,
    ),
)


def lesson(number: str) -> Lesson:
    """The lesson with this two-digit number (e.g. "00")."""
    for entry in LESSONS:
        if entry.number == number:
            return entry
    known = ", ".join(entry.number for entry in LESSONS)
    raise ValueError(f"number must be one of the lessons ({known}), got {number!r}")
