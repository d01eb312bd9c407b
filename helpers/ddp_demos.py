"""The rank functions lesson 05 runs with helpers.ddp.run and prints where it runs them; each returns what its rank saw, as plain data."""
from __future__ import annotations

import gc
import time
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
from helpers.workloads import SlowDataset


def sampler_epochs(num_items: int, epochs: int, shuffle: bool = True, seed: int = 0, drop_last: bool = False,
                   call_set_epoch: bool = True, seed_per_rank: bool = False) -> list[list[int]]:
    """This rank's DistributedSampler indices for each epoch, with or without set_epoch, with one seed or one per rank."""
    rank_seed = seed + (dist.get_rank() if seed_per_rank else 0)
    sampler = DistributedSampler(range(num_items), shuffle=shuffle, seed=rank_seed, drop_last=drop_last)
    orders = []
    for epoch in range(epochs):
        if call_set_epoch:
            sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def validation_accuracy(correct: list[bool], drop_last: bool = False) -> dict[str, Any]:
    """Accuracy over a validation set sharded by DistributedSampler: all-reduced counts vs de-duplicated gathered results."""
    sampler = DistributedSampler(range(len(correct)), shuffle=False, drop_last=drop_last)
    mine = list(sampler)
    counts = torch.tensor([float(sum(correct[i] for i in mine)), float(len(mine))], dtype=torch.float64)
    dist.all_reduce(counts)  # the usual way: sum hits and totals over ranks
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, [(i, bool(correct[i])) for i in mine])
    unique = dict(pair for part in gathered for pair in part)  # one verdict per index: padding duplicates collapse
    return {
        "indices": mine,
        "all_reduced_accuracy": float(counts[0] / counts[1]),
        "evaluated": int(counts[1]),
        "deduplicated_accuracy": sum(unique.values()) / len(unique),
        "distinct": len(unique),
    }


def naive_weighted_draws(labels: list[int], seed: int = 0) -> dict[str, Any]:
    """A WeightedRandomSampler on every rank after the usual torch.manual_seed(seed): indices and class counts it yields."""
    torch.manual_seed(seed)  # "seed everything", the same on every rank
    weights = sample_weights(labels, "inverse")
    indices = list(WeightedRandomSampler(weights, num_samples=len(labels)))
    return _draws(labels, indices)


def _draws(labels: list[int], indices: list[int]) -> dict[str, Any]:
    """The drawn indices and the class counts they give."""
    return {"indices": indices, "class_counts": class_counts(np.asarray(labels)[indices], max(labels) + 1).tolist()}


def _ddp(module: nn.Module, device: torch.device) -> nn.parallel.DistributedDataParallel:
    """`module` on this rank's device, wrapped in DDP (device_ids only for a GPU)."""
    return nn.parallel.DistributedDataParallel(module.to(device), device_ids=[device.index] if device.type == "cuda" else None)


def distributed_weighted_draws(labels: list[int], seed: int = 0, epoch: int = 0) -> dict[str, Any]:
    """This rank's share of one global weighted draw (DistributedWeightedSampler): indices and class counts."""
    sampler = DistributedWeightedSampler(sample_weights(labels, "inverse"), seed=seed)
    sampler.set_epoch(epoch)
    return _draws(labels, list(sampler))


def batch_mix(labels: list[int], shuffle: bool, batch_size: int = 16, num_batches: int = 8) -> list[list[int]]:
    """Class counts of this rank's first batches from a DistributedSampler over `labels`, shuffled or not."""
    dataset = TensorDataset(torch.zeros(len(labels), 1), torch.as_tensor(labels))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset, shuffle=shuffle, seed=0))
    return batch_class_counts(loader, max(labels) + 1, num_batches).tolist()


def uneven_steps(steps: int = 4, extra_on_last_rank: int = 1, use_join: bool = False) -> dict[str, Any]:
    """DDP training where the last rank has `extra_on_last_rank` more batches, then an end-of-epoch barrier; steps and weights per rank."""
    device = rank_device()
    torch.manual_seed(0)  # the same start on every rank
    model = _ddp(nn.Linear(8, 2), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    inputs = torch.randn(4, 8, device=device)
    my_steps = steps + (extra_on_last_rank if dist.get_rank() == dist.get_world_size() - 1 else 0)
    with model.join(enable=use_join):  # enabled: ranks that run out keep answering the others' all-reduces with zeros
        for _ in range(my_steps):
            model(inputs).square().mean().backward()  # DDP all-reduces the gradients here: every rank must take part
            optimizer.step()
            optimizer.zero_grad()
    dist.barrier()  # end of epoch: every rank waits for the others (say, before rank 0 saves a checkpoint)
    checksum = float(sum(p.detach().double().sum() for p in model.parameters()))  # DDP keeps the replicas identical
    return {"steps": my_steps, "weights_checksum": checksum}


def straggler_steps(slow_rank: int, slow_io_ms: float, num_workers: int, steps: int = 24, batch_size: int = 8) -> dict[str, Any]:
    """A DDP loop whose `slow_rank` reads items slowly: this rank's data wait and compute per step (StepTimer)."""
    rank = dist.get_rank()
    device = rank_device()
    dataset = SlowDataset(num_items=4096, io_ms=slow_io_ms if rank == slow_rank else 0.0, shape=(16,))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset, seed=0), num_workers=num_workers,
                        persistent_workers=False)
    model = _ddp(nn.Linear(16, 10), device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    timer = StepTimer(device)
    for step, (images, labels) in enumerate(timer.wrap(loader)):
        if step == steps:  # stop here, not after the last step: the timer records a step when the next batch is asked for
            break
        loss = nn.functional.cross_entropy(model(images.to(device).float() / 255), labels.to(device))
        loss.backward()  # waits in the gradient all-reduce for the slowest rank
        optimizer.step()
        optimizer.zero_grad()
    del model, optimizer
    gc.collect()
    return {"data_wait_s": timer.data_wait_s, "compute_s": timer.compute_s}


def _worker_counts(worker_counts: Any) -> list[int]:
    """`worker_counts` as a non-empty list of distinct num_workers values (0 or more)."""
    if not isinstance(worker_counts, (list, tuple)) or not worker_counts:
        raise TypeError(f"worker_counts must be a non-empty list or tuple of num_workers values, got {short(worker_counts)}")
    counts = [as_int("worker_counts", count, minimum=0) for count in worker_counts]
    if len(set(counts)) != len(counts):
        raise ValueError(f"worker_counts must not repeat a value, got {short(worker_counts)}")
    return counts


def straggler_rounds(slow_rank: int, slow_io_ms: float, worker_counts: Any = (0, 2), rounds: int = 3,
                     steps: int = 24) -> list[dict[str, Any]]:
    """straggler_steps for each of `worker_counts` in turn, `rounds` times over (A/B/A/B: load hits every setting alike); one dict per run, in run order (lesson 05)."""
    counts, rounds = _worker_counts(worker_counts), as_int("rounds", rounds, minimum=1)
    runs = []
    for round_ in range(rounds):
        for num_workers in counts:
            run = straggler_steps(slow_rank, slow_io_ms, num_workers, steps=steps)
            runs.append({"num_workers": num_workers, "round": round_, **run})
    return runs


def loader_sweep(worker_counts: Any = (0, 1, 2), rounds: int = 2, cpu_ms: float = 1.0) -> list[dict[str, Any]]:
    """loader_processes for each of `worker_counts` in turn, `rounds` times over (interleaved); one dict per run, in run order (lesson 05)."""
    counts, rounds = _worker_counts(worker_counts), as_int("rounds", rounds, minimum=1)
    return [{"num_workers": num_workers, "round": round_, **loader_processes(num_workers, cpu_ms=cpu_ms)}
            for round_ in range(rounds) for num_workers in counts]


def loader_processes(num_workers: int, cpu_ms: float = 1.0, num_batches: int = 12, batch_size: int = 16) -> dict[str, Any]:
    """This rank's DataLoader worker processes (counted) and its samples/s on CPU-bound items (lesson 05)."""
    dataset = SlowDataset(num_items=4096, cpu_ms=cpu_ms, shape=(16,))
    loader = DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset, seed=0), num_workers=num_workers)
    iterator = iter(loader)  # starts this rank's workers
    next(iterator)
    workers = len(psutil.Process().children())  # this rank's child processes: its DataLoader workers
    del iterator  # stops them
    dist.barrier()  # every rank starts timing together
    return {"workers": workers, "samples_per_s": benchmark_loader(loader, num_batches=num_batches, warmup_batches=2).samples_per_s}


def epoch_shape(num_items: int, batch_size: int) -> dict[str, int]:
    """Samples and steps per epoch on this rank, and the global batch, for a DistributedSampler loader (lesson 05)."""
    sampler = DistributedSampler(range(num_items), seed=0)
    loader = DataLoader(range(num_items), batch_size=batch_size, sampler=sampler)
    return {"samples": len(sampler), "steps": len(loader), "global_batch": batch_size * dist.get_world_size()}


def fails_on_rank(bad_rank: int) -> str:
    """Raise on `bad_rank` after joining the group; the other ranks wait at a barrier (for the launcher's error demo)."""
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
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size(), "backend": dist.get_backend(), "device": str(rank_device())}
