"""The debugging clinic's measurements: speed windows, rounds and ladders, and whole training runs (lesson 07).

helpers.clinic re-exports every public name here (`clinic.train`, `clinic.Speed`, ...).
"""
from __future__ import annotations

import functools
import itertools
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader

from helpers._validate import as_int
from helpers.clinic.script import (BATCH_SIZE, CLASS_COUNTS, EPOCHS, MINORITY, NUM_CLASSES, _device, _one_cpu_thread, as_fixed,
                                   make_eval_loader, make_loader, make_model, make_step, rank_and_world)
from helpers.loading import StepTimer, warmup_for
from helpers.memory import process_memory
from helpers.metrics import per_class_recall, scores
from helpers.timing import Headroom, bracketed_each, interleaved


@dataclass(frozen=True)
class Speed:
    """One short timed window of training steps: samples/s and the share of step time spent waiting for data (lesson 07)."""

    samples_per_s: float
    data_wait_share: float
    steps: int
    loop_cpu_ms: float = math.nan  # CPU time of the training process per step: decoding done in the loop counts, waiting does not

    def __str__(self) -> str:
        return f"{self.samples_per_s:,.0f} samples/s, waiting for data {self.data_wait_share:.0%} of each step ({self.steps} steps)"


def measure_speed(fixed: Iterable[str] = (), *, steps: int = 48, seed: int = 0, device: Any = None) -> Speed:
    """Time `steps` training steps of the script with the faults not in `fixed`, after the workers' start-up and prefetch burst (lesson 07)."""
    fixed, steps, device = as_fixed(fixed), as_int("steps", steps, minimum=2), _device(device)
    with _one_cpu_thread(device):
        loader = make_loader(fixed, seed=seed)
        step = make_step(fixed, device=device, seed=seed)
        warm = warmup_for(loader.num_workers)  # lesson 03: the prefetch burst is start-up, not steady state
        epochs = -(-(warm + steps + 1) // len(loader))  # many workers' burst can outlast an epoch: go on into the next
        timer = StepTimer(device)
        for index, batch in enumerate(timer.wrap(itertools.chain.from_iterable(itertools.repeat(loader, epochs)))):
            if index == warm:
                cpu_start = time.process_time()
            if index == warm + steps:  # the timer records a step when the next batch is asked for: stop here
                cpu_s = time.process_time() - cpu_start
                break
            step(batch)
        del loader  # its persistent workers exit here
    wait, compute = sum(timer.data_wait_s[warm:]), sum(timer.compute_s[warm:])
    return Speed(steps * BATCH_SIZE / (wait + compute), wait / (wait + compute), steps, cpu_s * 1000 / steps)


def speed_rounds(configs: Sequence[Iterable[str]], *, rounds: int = 3, steps: int = 48, seed: int = 0) -> list[list[Speed]]:
    """measure_speed for each configuration in turn, `rounds` times over (A/B/C/A/B/C: load hits all alike); one list of rounds per configuration (lesson 07)."""
    configs = [as_fixed(config) for config in configs]
    if not configs:
        raise ValueError("configs must hold at least one set of fixed faults, got none")
    rounds = as_int("rounds", rounds, minimum=1)
    measured = interleaved({index: functools.partial(measure_speed, config, steps=steps, seed=seed)
                            for index, config in enumerate(configs)}, rounds, alternate=False)
    return [measured[index] for index in range(len(configs))]


def median_speed(runs: Sequence[Speed]) -> Speed:
    """The median samples/s and median data-wait share of several windows (lesson 07)."""
    if not runs:
        raise ValueError("runs must hold at least one Speed, got none")
    return Speed(float(np.median([r.samples_per_s for r in runs])), float(np.median([r.data_wait_share for r in runs])),
                 int(np.median([r.steps for r in runs])), float(np.median([r.loop_cpu_ms for r in runs])))


def ladder_rounds(ladder: Sequence[Iterable[str]], *, rounds: int = 3, steps: int = 48,
                  seed: int = 0) -> tuple[list[list[Speed]], Headroom]:
    """Every rung timed `rounds` times; the last rung's speed-up against the 2-process ceiling.

    The speed-up is the last rung's over the first, set against the ceiling round by round.
    In each round the first and last rungs run back to back (their order alternating) between two
    measurements of the 2-process ceiling, so the pair the lesson asserts on and the headroom it
    is judged against share the same moment; the rungs between follow.
    """
    ladder = [as_fixed(config) for config in ladder]
    if len(ladder) < 2:
        raise ValueError(f"ladder must hold at least two sets of fixed faults (a first and a last), got {len(ladder)}")
    rounds = as_int("rounds", rounds, minimum=1)
    measured: list[list[Speed]] = [[] for _ in ladder]
    speedups, ceilings = [], []
    for index in range(rounds):
        ends = (0, len(ladder) - 1) if index % 2 == 0 else (len(ladder) - 1, 0)
        timed = {rung: functools.partial(measure_speed, ladder[rung], steps=steps, seed=seed)
                 for rung in ends}
        pair, ceiling = bracketed_each(timed)
        speedups.append(pair[len(ladder) - 1].samples_per_s / pair[0].samples_per_s)
        ceilings.append(ceiling)
        for rung in range(len(ladder)):
            measured[rung].append(pair[rung] if rung in pair
                                  else measure_speed(ladder[rung], steps=steps, seed=seed))
    return measured, Headroom(tuple(speedups), tuple(ceilings))


@dataclass(frozen=True)
class Run:
    """What one run of the clinic's script measured, on one rank (lesson 07)."""

    fixed: frozenset[str]
    rank: int
    world_size: int
    samples_per_s: float  # training samples per second after the first step, on this rank
    data_wait_share: float  # share of step time spent waiting for the next batch, after the first step
    accuracy: float
    balanced_accuracy: float
    minority_recall: float
    eval_samples: int  # samples the evaluation read, over all ranks
    eval_distinct: int  # distinct samples among them
    recall_per_class: tuple[float, ...] = ()
    epoch_draws: tuple[tuple[int, ...], ...] = ()  # this rank's training sample indices, epoch by epoch
    worker_uss_growth_mib: tuple[float, ...] = ()  # each training worker's own memory growth over the run
    seconds: float = math.nan
    worker_uss_mib: tuple[float, ...] = ()  # each training worker's own memory at the run's end

    @property
    def accuracy_at_training_mix(self) -> float:
        """The accuracy this model would score on data mixed like the training set (its per-class recalls weighted by the class shares)."""
        shares = np.asarray(CLASS_COUNTS, dtype=np.float64) / sum(CLASS_COUNTS)
        return float(np.dot(shares, self.recall_per_class))

    @property
    def repeated_epochs(self) -> int:
        """Epochs after the first whose draws are exactly the first epoch's, in the same order."""
        return sum(draws == self.epoch_draws[0] for draws in self.epoch_draws[1:])

    @property
    def distinct_drawn(self) -> int:
        """Distinct training samples this rank trained on over all epochs."""
        return len({index for draws in self.epoch_draws for index in draws})

    @property
    def steps_per_epoch(self) -> tuple[int, ...]:
        """Training steps this rank took in each epoch."""
        return tuple(-(-len(draws) // BATCH_SIZE) for draws in self.epoch_draws)

    def __str__(self) -> str:
        memory = (f", worker USS {np.median(self.worker_uss_mib):.0f} MiB (+{np.median(self.worker_uss_growth_mib):.0f} "
                  "over the run)" if self.worker_uss_mib else "")
        return (f"balanced accuracy {self.balanced_accuracy:.3f}, minority recall {self.minority_recall:.3f}; "
                f"evaluation read {self.eval_samples} samples, {self.eval_distinct} distinct\n"
                f"{self.samples_per_s:,.0f} samples/s, waiting {self.data_wait_share:.0%}{memory}")


def _worker_uss(loader: DataLoader) -> list[float]:
    """USS (MiB) of a persistent-worker loader's workers, in worker order (private `_iterator._workers`, as helpers.memory reads)."""
    iterator = getattr(loader, "_iterator", None)
    return [process_memory(worker.pid).uss_mib for worker in getattr(iterator, "_workers", [])]


def evaluate(model: nn.Module, fixed: Iterable[str] = (), *, seed: int = 0, device: Any = None) -> dict[str, Any]:
    """Scores on the held-out stream, gathered over ranks: accuracy, balanced accuracy, minority recall, samples read (lesson 07)."""
    fixed, device = as_fixed(fixed), _device(device)
    net = getattr(model, "module", model)  # DDP's wrapped module: evaluation needs no collective per batch
    truth, predicted, keys = [], [], []
    net.eval()
    with torch.no_grad():
        for batch in make_eval_loader(fixed, seed=seed):
            predicted.append(net(batch["input"].to(device)).argmax(dim=1).cpu())
            truth.append(batch["label"])
            keys.append(batch["key"])
    net.train()
    mine = [torch.cat(part).tolist() if part else [] for part in (truth, predicted, keys)]
    _, world = rank_and_world()
    if world > 1:
        everyone: list[Any] = [None] * world
        dist.all_gather_object(everyone, mine)
        mine = [sum((rank[part] for rank in everyone), []) for part in range(3)]
    found = scores(mine[0], mine[1], NUM_CLASSES, minority=MINORITY)
    recall = tuple(float(r) for r in per_class_recall(mine[0], mine[1], NUM_CLASSES))
    return {**found, "recall_per_class": recall, "eval_samples": len(mine[2]), "eval_distinct": len(set(mine[2]))}


def train(fixed: Iterable[str] = (), *, epochs: int = EPOCHS, seed: int = 0,
          device: Any = None) -> Run:
    """Run the clinic's script with the faults not in `fixed`: train, evaluate, measure (lesson 07).

    It returns what was measured; under a process group, this rank's part.
    """
    fixed, epochs, seed, device = (as_fixed(fixed), as_int("epochs", epochs, minimum=1),
                                   as_int("seed", seed, minimum=0), _device(device))
    started = time.perf_counter()
    rank, world = rank_and_world()
    with _one_cpu_thread(device):
        model = make_model(seed).to(device)
        if world > 1:
            model = nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None)
        step = make_step(fixed, model=model, device=device)
        loader = make_loader(fixed, seed=seed)
        timer = StepTimer(device)
        draws, uss_start = [], []
        for epoch in range(epochs):
            # FAULT no-set-epoch: without it, each epoch repeats
            if "no-set-epoch" in fixed and hasattr(loader.sampler, "set_epoch"):
                loader.sampler.set_epoch(epoch)
            seen: list[int] = []
            for batch in timer.wrap(loader):
                step(batch)
                seen.extend(batch["index"].tolist())
                if not uss_start and loader.num_workers:
                    # after the first batch: the workers have started
                    uss_start = _worker_uss(loader)
            draws.append(tuple(seen))
            if world > 1:
                # end of epoch: every rank waits for the others
                # (say, before rank 0 saves a checkpoint)
                dist.barrier()
        uss_end = _worker_uss(loader)
        growth = [end - start for start, end in zip(uss_start, uss_end)]
        del loader  # its persistent workers exit here
        found = evaluate(model, fixed, seed=seed, device=device)
    wait, compute = sum(timer.data_wait_s[1:]), sum(timer.compute_s[1:])
    trained = sum(len(d) for d in draws) - len(draws[0][:BATCH_SIZE])  # the first step is start-up
    return Run(fixed, rank, world, trained / (wait + compute), wait / (wait + compute),
               found["accuracy"], found["balanced_accuracy"], found["minority_recall"],
               found["eval_samples"], found["eval_distinct"], found["recall_per_class"],
               tuple(draws), tuple(growth), time.perf_counter() - started, tuple(uss_end))


def train_in_turn(configs: Sequence[Iterable[str]], *, epochs: int = EPOCHS,
                  seed: int = 0) -> list[Run]:
    """train() for each set of fixed faults in turn, in one process group (lesson 07).

    One launch of ranks serves several runs.
    """
    configs = [as_fixed(config) for config in configs]
    if not configs:
        raise ValueError("configs must hold at least one set of fixed faults, got none")
    return [train(config, epochs=epochs, seed=seed) for config in configs]


# --- The lesson's before/after table, plot and widget (scaffolding: what the lesson shows, not what it teaches)
