"""The rank functions lesson 05 runs with helpers.ddp.run and prints where it runs them.

Each returns what its rank saw, as plain data. `shard_plan` is the exception: it builds every
rank's DistributedSampler in one process (num_replicas and rank given), for the lesson's widget.
"""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import psutil
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, WeightedRandomSampler

from helpers._validate import as_int, short
from helpers.ddp import rank_device
from helpers.imbalance import batch_class_counts, class_counts, sample_weights
from helpers.loading import StepTimer, benchmark_loader
from helpers.samplers import DistributedWeightedSampler
from helpers.start_method import descendants
from helpers.timing import tree_cpu_s
from helpers.workloads import SlowDataset


def sampler_epochs(num_items: int, epochs: int, shuffle: bool = True, seed: int = 0,
                   drop_last: bool = False, call_set_epoch: bool = True,
                   seed_per_rank: bool = False) -> list[list[int]]:
    """This rank's DistributedSampler indices per epoch (set_epoch or not, one seed or per rank)."""
    rank_seed = seed + (dist.get_rank() if seed_per_rank else 0)
    sampler = DistributedSampler(range(num_items), shuffle=shuffle, seed=rank_seed,
                                 drop_last=drop_last)
    orders = []
    for epoch in range(epochs):
        if call_set_epoch:
            sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def validation_accuracy(correct: list[bool], drop_last: bool = False) -> dict[str, Any]:
    """Accuracy of a validation set sharded by DistributedSampler: all-reduced vs de-duplicated."""
    sampler = DistributedSampler(range(len(correct)), shuffle=False, drop_last=drop_last)
    mine = list(sampler)
    hits = float(sum(correct[i] for i in mine))
    counts = torch.tensor([hits, float(len(mine))], dtype=torch.float64)
    dist.all_reduce(counts)  # the usual way: sum hits and totals over ranks
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, [(i, bool(correct[i])) for i in mine])
    # one verdict per index: padding duplicates collapse
    unique = dict(pair for part in gathered for pair in part)
    return {
        "indices": mine,
        "all_reduced_accuracy": float(counts[0] / counts[1]),
        "evaluated": int(counts[1]),
        "deduplicated_accuracy": sum(unique.values()) / len(unique),
        "distinct": len(unique),
    }


def naive_weighted_draws(labels: list[int], seed: int = 0) -> dict[str, Any]:
    """A WeightedRandomSampler on each rank after torch.manual_seed(seed): indices, class counts."""
    torch.manual_seed(seed)  # "seed everything", the same on every rank
    weights = sample_weights(labels, "inverse")
    indices = list(WeightedRandomSampler(weights, num_samples=len(labels)))
    return _draws(labels, indices)


def _draws(labels: list[int], indices: list[int]) -> dict[str, Any]:
    """The drawn indices and the class counts they give."""
    counts = class_counts(np.asarray(labels)[indices], max(labels) + 1)
    return {"indices": indices, "class_counts": counts.tolist()}


def _ddp(module: nn.Module, device: torch.device) -> nn.parallel.DistributedDataParallel:
    """`module` on this rank's device, wrapped in DDP (device_ids only for a GPU)."""
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(module.to(device), device_ids=device_ids)


def distributed_weighted_draws(labels: list[int], seed: int = 0,
                               epoch: int = 0) -> dict[str, Any]:
    """This rank's share of one global draw (DistributedWeightedSampler): indices, class counts."""
    sampler = DistributedWeightedSampler(sample_weights(labels, "inverse"), seed=seed)
    sampler.set_epoch(epoch)
    return _draws(labels, list(sampler))


def batch_mix(labels: list[int], shuffle: bool, batch_size: int = 16,
              num_batches: int = 8) -> list[list[int]]:
    """Class counts of this rank's first batches from a DistributedSampler, shuffled or not."""
    dataset = TensorDataset(torch.zeros(len(labels), 1), torch.as_tensor(labels))
    sampler = DistributedSampler(dataset, shuffle=shuffle, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)
    return batch_class_counts(loader, max(labels) + 1, num_batches).tolist()


def uneven_steps(steps: int = 4, extra_on_last_rank: int = 1,
                 use_join: bool = False) -> dict[str, Any]:
    """DDP steps, `extra_on_last_rank` more on the last rank, then a barrier: steps, weights."""
    device = rank_device()
    torch.manual_seed(0)  # the same start on every rank
    model = _ddp(nn.Linear(8, 2), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(4, 8, device=device)
    is_last_rank = dist.get_rank() == dist.get_world_size() - 1
    my_steps = steps + (extra_on_last_rank if is_last_rank else 0)
    # enabled: ranks that run out keep answering the others' all-reduces with zeros
    with model.join(enable=use_join):
        for _ in range(my_steps):
            loss = model(inputs).square().mean()
            loss.backward()  # DDP all-reduces the gradients here: every rank must take part
            optimizer.step()
            optimizer.zero_grad()
    # end of epoch: every rank waits for the others (say, before rank 0 saves a checkpoint)
    dist.barrier()
    # DDP keeps the replicas identical
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))
    return {"steps": my_steps, "weights_checksum": checksum}


def straggler_steps(slow_rank: int, slow_io_ms: float, num_workers: int, steps: int = 24,
                    batch_size: int = 8) -> dict[str, Any]:
    """A DDP loop whose `slow_rank` reads slowly: this rank's data wait and compute per step."""
    rank = dist.get_rank()
    device = rank_device()
    io_ms = slow_io_ms if rank == slow_rank else 0.0
    dataset = SlowDataset(num_items=4096, io_ms=io_ms, shape=(16,))
    sampler = DistributedSampler(dataset, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers,
                        persistent_workers=False)
    model = _ddp(nn.Linear(16, 10), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    timer = StepTimer(device)
    for step, (images, labels) in enumerate(timer.wrap(loader)):
        # stop here, not after the last step:
        # the timer records a step when the next batch is asked for
        if step == steps:
            break
        inputs = images.to(device).float() / 255
        loss = nn.functional.cross_entropy(model(inputs), labels.to(device))
        loss.backward()  # waits in the gradient all-reduce for the slowest rank
        optimizer.step()
        optimizer.zero_grad()
    del model, optimizer
    gc.collect()
    return {"data_wait_s": timer.data_wait_s, "compute_s": timer.compute_s}


def _worker_counts(worker_counts: Any) -> list[int]:
    """`worker_counts` as a non-empty list of distinct num_workers values (0 or more)."""
    if not isinstance(worker_counts, (list, tuple)) or not worker_counts:
        raise TypeError("worker_counts must be a non-empty list or tuple of num_workers values, "
                        f"got {short(worker_counts)}")
    counts = [as_int("worker_counts", count, minimum=0) for count in worker_counts]
    if len(set(counts)) != len(counts):
        raise ValueError(f"worker_counts must not repeat a value, got {short(worker_counts)}")
    return counts


def straggler_rounds(slow_rank: int, slow_io_ms: float, worker_counts: Any = (0, 2),
                     rounds: int = 3, steps: int = 24) -> list[dict[str, Any]]:
    """straggler_steps for each of `worker_counts`, `rounds` times (A/B/A/B); a dict per run."""
    counts, rounds = _worker_counts(worker_counts), as_int("rounds", rounds, minimum=1)
    runs = []
    # A/B/A/B: load hits every setting alike
    for round_ in range(rounds):
        for num_workers in counts:
            run = straggler_steps(slow_rank, slow_io_ms, num_workers, steps=steps)
            runs.append({"num_workers": num_workers, "round": round_, **run})
    return runs


def loader_sweep(worker_counts: Any = (0, 1, 2), rounds: int = 2,
                 cpu_ms: float = 1.0) -> list[dict[str, Any]]:
    """loader_processes for each of `worker_counts`, `rounds` times interleaved; a dict per run."""
    counts, rounds = _worker_counts(worker_counts), as_int("rounds", rounds, minimum=1)
    return [{"num_workers": num_workers, "round": round_,
             **loader_processes(num_workers, cpu_ms=cpu_ms)}
            for round_ in range(rounds) for num_workers in counts]


def loader_processes(num_workers: int, cpu_ms: float = 1.0, num_batches: int = 24,
                     batch_size: int = 16) -> dict[str, Any]:
    """This rank's DataLoader worker count and samples/s on CPU-bound items, start-up included."""
    dataset = SlowDataset(num_items=4096, cpu_ms=cpu_ms, shape=(16,))
    sampler = DistributedSampler(dataset, seed=0)
    loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, num_workers=num_workers)
    iterator = iter(loader)  # starts this rank's workers
    next(iterator)
    # this rank's DataLoader workers: its children (under forkserver, the fork server's)
    workers = len(descendants())
    del iterator  # stops them
    dist.barrier()  # every rank starts timing together
    mine = tree_cpu_s()
    machine = _busy_seconds(psutil.cpu_times())
    start = time.perf_counter()
    # Timed from iter() to the last batch: batches the workers prefetch
    # while a warm-up is left out would count for free
    benchmark = benchmark_loader(loader, num_batches=num_batches, warmup_batches=0)
    samples_per_s = benchmark.samples_per_s  # the workers exited inside benchmark_loader
    wall_s = time.perf_counter() - start
    return {"workers": workers, "samples_per_s": samples_per_s, "wall_s": wall_s,
            # how this rank's workers started
            "start_method": torch.multiprocessing.get_start_method(),
            # this rank and its workers (reaped when they exit, by the rank or by its fork server)
            "cpu_s": tree_cpu_s() - mine,
            # every program on the machine
            "machine_busy_s": _busy_seconds(psutil.cpu_times()) - machine}


def _busy_seconds(times: Any) -> float:
    """CPU seconds the machine was busy (not idle nor waiting for I/O), from psutil.cpu_times()."""
    fields = times._asdict()
    not_busy = ("idle", "iowait", "guest", "guest_nice")
    return sum(fields.values()) - sum(fields.get(name, 0.0) for name in not_busy)


def epoch_shape(num_items: int, batch_size: int) -> dict[str, int]:
    """Samples and steps per epoch on this rank, and the global batch, with a DistributedSampler."""
    sampler = DistributedSampler(range(num_items), seed=0)
    loader = DataLoader(range(num_items), batch_size=batch_size, sampler=sampler)
    return {"samples": len(sampler), "steps": len(loader),
            "global_batch": batch_size * dist.get_world_size()}


def fails_on_rank(bad_rank: int) -> str:
    """Raise on `bad_rank`; the other ranks wait at a barrier (for the launcher's error demo)."""
    if dist.get_rank() == bad_rank:
        raise ValueError(f"bad batch on rank {bad_rank}: label 12 is out of range for 10 classes")
    dist.barrier()
    return "ok"


def sleeps(seconds: float) -> str:
    """Sleep `seconds` on every rank (for the launcher's timeout demo and tests)."""
    time.sleep(seconds)
    return "woke"


def whoami() -> dict[str, Any]:
    """This rank's number, world size, backend and device."""
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(),
            "backend": dist.get_backend(), "device": str(rank_device())}


@dataclass(frozen=True)
class ShardPlan:
    """Every rank's DistributedSampler indices for one epoch, its padding and steps per epoch."""

    num_items: int
    world_size: int
    batch_size: int
    drop_last: bool
    shuffle: bool
    shards: tuple[tuple[int, ...], ...]  # rank r's indices, in the order its sampler yields them
    steps_per_epoch: tuple[int, ...]  # len(DataLoader(..., sampler=rank r's sampler)) for each rank

    def duplicate_slots(self) -> list[tuple[int, int]]:
        """(rank, position) of each slot that repeats an index an earlier slot holds."""
        seen: set[int] = set()
        repeats = []
        # walk the sampler's order: slot j of rank r is r + j * world_size
        for position in range(max((len(shard) for shard in self.shards), default=0)):
            for rank, shard in enumerate(self.shards):
                if position < len(shard):
                    if shard[position] in seen:
                        repeats.append((rank, position))
                    seen.add(shard[position])
        return repeats

    @property
    def padding(self) -> int:
        """How many slots repeat an index (drop_last=False pads up to a multiple of world_size)."""
        return len(self.duplicate_slots())

    @property
    def unseen(self) -> list[int]:
        """Indices no rank gets this epoch (drop_last=True trims to a multiple of world_size)."""
        given = {index for shard in self.shards for index in shard}
        return [index for index in range(self.num_items) if index not in given]

    def summary(self) -> str:
        """One line: samples per rank, padding or unseen samples, steps per epoch."""
        return f"{self._shares()}; {self._steps()}"

    def _shares(self) -> str:
        """Samples per rank and the padding (or, with drop_last, the unseen samples)."""
        if self.drop_last:
            listed = f" {self.unseen}" if self.unseen else ""
            extra = f"{len(self.unseen)} never seen{listed}"
        else:
            extra = f"{self.padding} padding duplicate{'' if self.padding == 1 else 's'}"
        ranks = f"{self.world_size} rank{'' if self.world_size == 1 else 's'}"
        return f"{self.num_items} samples on {ranks}: {len(self.shards[0])} per rank, {extra}"

    def _steps(self) -> str:
        """Steps per epoch and the batch size they assume."""
        steps = self.steps_per_epoch[0]
        return f"{steps} step{'' if steps == 1 else 's'} per epoch at batch_size={self.batch_size}"

    def plot(self, ax: Any = None) -> Any:
        """Each rank's slots in a grid: batches shaded, duplicates red, on `ax` (made if None)."""
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap
        from matplotlib.patches import Patch

        # empty, odd step, even step, duplicate, unseen
        colours = ["white", "#c6dbef", "#6baed6", "tab:red", "lightgrey"]
        rows = [list(shard) for shard in self.shards] + ([self.unseen] if self.unseen else [])
        width = max(max((len(row) for row in rows), default=0), 1)
        if ax is None:
            _, ax = plt.subplots(figsize=(6.4, 0.3 * len(rows) + 1.8))
        grid = np.zeros((len(rows), width))
        for rank, shard in enumerate(self.shards):
            for position in range(len(shard)):
                grid[rank, position] = 1 + (position // self.batch_size) % 2
        for rank, position in self.duplicate_slots():
            grid[rank, position] = 3
        if self.unseen:
            grid[-1, :len(self.unseen)] = 4
        ax.imshow(grid, cmap=ListedColormap(colours), vmin=-0.5, vmax=4.5, aspect="auto")
        if width <= 32:  # beyond that the numbers would overlap; the colours still tell the story
            fontsize = 6 if width > 16 else 7 if width > 12 else 9
            for row, indices in enumerate(rows):
                for position, index in enumerate(indices):
                    ax.text(position, row, str(index), ha="center", va="center", fontsize=fontsize)
        names = ([f"rank {rank}" for rank in range(self.world_size)]
                 + (["never seen"] if self.unseen else []))
        ax.set_yticks(range(len(rows)), names)
        ax.set_xticks(range(0, width, 1 if width <= 16 else 4))
        ax.set_xlabel("position in the rank's shard (the order its sampler yields)")
        ax.set_ylabel("rank")
        ax.grid(False)
        handles = [Patch(color=colours[1], label="batches of steps\n1, 3, 5, ..."),
                   Patch(color=colours[2], label="batches of steps\n2, 4, 6, ..."),
                   Patch(color=colours[3], label="padding duplicate")]
        if self.unseen:
            handles.append(Patch(color=colours[4], label="never seen"))
        # outside: the cells fill the axes
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_title(f"{self._shares()}\n{self._steps()}", fontsize=9)
        return ax


def shard_plan(num_items: int, world_size: int, drop_last: bool = False, shuffle: bool = True,
               batch_size: int = 1, seed: int = 0, epoch: int = 0) -> ShardPlan:
    """What DistributedSampler gives each of `world_size` ranks, in this process (lesson 05)."""
    num_items = as_int("num_items", num_items, minimum=1)
    world_size = as_int("world_size", world_size, minimum=1)
    batch_size = as_int("batch_size", batch_size, minimum=1)
    seed, epoch = as_int("seed", seed, minimum=0), as_int("epoch", epoch, minimum=0)
    for name, flag in (("drop_last", drop_last), ("shuffle", shuffle)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {short(flag)}")
    shards, steps = [], []
    for rank in range(world_size):
        sampler = DistributedSampler(range(num_items), num_replicas=world_size, rank=rank,
                                     shuffle=shuffle, seed=seed, drop_last=drop_last)
        sampler.set_epoch(epoch)
        shards.append(tuple(sampler))
        steps.append(len(DataLoader(range(num_items), batch_size=batch_size, sampler=sampler)))
    return ShardPlan(num_items, world_size, batch_size, drop_last, shuffle,
                     tuple(shards), tuple(steps))
