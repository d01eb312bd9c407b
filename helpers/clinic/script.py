"""The debugging clinic's training script, faults planted, as importable functions (lesson 07; helpers.clinic re-exports it).

A small classifier learns a 3-class task with 100:10:1 class counts; its inputs are decoded from raw signals at a
cost in CPU time, and it is evaluated on a balanced held-out stream. Eight data-loading faults from the course are
planted in it, each under a stable name (`FAULTS`); a fault is on unless its name is in `fixed`. With every name
in `fixed` (`ALL_FIXED`) the script is the course's template, which `template_loader` spells out without the switches.

Everything a DataLoader worker, a spawned rank or the doctor's command line runs lives here, so all of them can
import it:

    python -m helpers.doctor helpers.clinic:make_loader --step helpers.clinic:train_step --json out.json
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset, RandomSampler, Subset, WeightedRandomSampler, get_worker_info

from helpers._validate import as_device, as_int, short
from helpers.data import imbalanced_classification
from helpers.env import workers_per_rank as env_workers_per_rank
from helpers.imbalance import class_counts, class_weights, sample_weights
from helpers.samplers import DistributedWeightedSampler
from helpers.workloads import spin, spin_iterations_per_ms

# The task: the same synthetic blobs as lesson 02, 100:10:1, each input decoded from a raw signal of 1024 floats.
CLASS_COUNTS = (2000, 200, 20)
NUM_CLASSES = len(CLASS_COUNTS)
MINORITY = 2  # the rarest class: its recall is the number to watch
EVAL_PER_CLASS = 200  # the held-out stream is balanced: accuracy there equals balanced accuracy
NUM_FEATURES = 16
RAW_PER_FEATURE = 64  # a feature is the mean of 64 raw values: 1024 raw floats per sample
SEPARATION = 2.0
DECODE_MS = 0.1  # simulated decoding cost per sample: pure-Python CPU work (helpers.workloads.spin)
BATCH_SIZE = 64
NUM_SHARDS = 5  # the training data as 5 equal shards (files, in a real job): 5 do not split evenly over 2 ranks
EPOCHS = 3
MAX_WORKERS = 2  # per rank: an epoch here is 35 batches, and lesson 03's memory measurement needs each worker to read a good share
HIDDEN = 128
LR = 3e-3


@dataclass(frozen=True)
class Fault:
    """One planted fault: its stable name, the lesson section that teaches the fix, the doctor codes that find it (lesson 07)."""

    name: str
    lesson: str
    section: str
    doctor: tuple[str, ...]
    symptom: str
    fix: str
    ranks: int = 1  # ranks it needs to show (2: only a distributed run shows it)
    behind: str = ""  # the fault it hides behind until that one is fixed (no sampler, no class-weight trap)
    device: str = ""  # the device it needs to show ("cuda"), or "" for any

    @property
    def where(self) -> str:
        """'NN_topic.ipynb, section N. Title', as the doctor names a lesson."""
        return f"{self.lesson}.ipynb, section {self.section}"

    @property
    def shows(self) -> str:
        """When its symptom can appear at all, in words."""
        when = ([f"with {self.ranks}+ ranks"] if self.ranks > 1 else []) + ([f"on a {self.device.upper()} device"] if self.device else [])
        when += [f"once {self.behind} is fixed"] if self.behind else []
        return ", ".join(when) or "always"


# In the order the lesson fixes them. A fault's `ranks`, `behind` and `device` say when its symptom can appear at
# all: some hide behind others (no sampler, no class-weight trap; no workers, no copies in workers).
FAULTS: dict[str, Fault] = {fault.name: fault for fault in (
    Fault("no-rebalancing", "02_rebalancing", "3. Batch composition, measured", ("unbalanced-batches",),
          "minority recall near 0 while accuracy looks fine", "draw batches with a WeightedRandomSampler over per-sample weights"),
    Fault("class-weights-as-sample-weights", "02_rebalancing", "5. Trap 1: per-class weights passed as per-sample weights",
          ("class-weights-as-sample-weights",), "the sampler draws only samples 0, 1 and 2",
          "one weight per sample: helpers.imbalance.sample_weights(labels)", behind="no-rebalancing"),
    Fault("no-workers", "03_loader_bottlenecks", "3. `num_workers` when items cost CPU", ("input-bound", "workers-too-few"),
          "slow steps: most of each step waits for decoding", "num_workers=workers_per_rank(ranks), persistent_workers=True"),
    Fault("list-backed", "03_loader_bottlenecks", "8. Copy-on-read: why workers' memory grows", ("copy-on-read",),
          "each worker's own memory grows as it reads", "keep the raw signals in one numpy array", behind="no-workers"),
    Fault("unsharded-eval-stream", "06_streaming_data", "1. The duplication bug", ("iterable-duplicates",),
          "evaluation reads every sample once per worker (and per rank)", "split the stream by rank, then by worker"),
    Fault("pin-on-the-fly", "04_pinned_memory_transfers", "5. Pinning on the fly vs pinning in the background", ("pin-memory-missing",),
          "the loop pins each batch itself, blocking, before a non_blocking copy",
          "pin_memory=True on the loader where there is an accelerator; copy with .to(device, non_blocking=True)", device="cuda"),
    Fault("uneven-shards", "05_ddp_data_loading", "7. Uneven inputs: one extra batch hangs the others", (),
          "2 ranks: the rank with more batches waits in an all-reduce until the process group times out",
          "a DistributedWeightedSampler over the whole dataset: the same number of samples on every rank", ranks=2),
    Fault("no-set-epoch", "05_ddp_data_loading", "3. Forgetting `set_epoch`", (),
          "2 ranks: every epoch draws the same samples", "sampler.set_epoch(epoch) before each epoch", ranks=2,
          behind="uneven-shards"),
)}
ALL_FIXED = frozenset(FAULTS)
ONE_PROCESS = tuple(name for name, fault in FAULTS.items() if fault.ranks == 1)  # faults one process can show
RANKS_ONLY = tuple(name for name in FAULTS if name not in ONE_PROCESS)  # faults that need 2+ ranks to show


def as_fixed(fixed: Any) -> frozenset[str]:
    """`fixed` as a frozenset of fault names, each one of FAULTS (lesson 07)."""
    if isinstance(fixed, (str, bytes)) or not isinstance(fixed, Iterable):
        raise TypeError(f"fixed must be a collection of fault names such as {{'no-workers'}}, got {short(fixed)}")
    names = list(fixed)
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise ValueError(f"fixed holds {short(unknown)}, which are not faults; the faults are {list(FAULTS)}")
    return frozenset(names)


def workers_per_rank(ranks: int = 1, cap: int | None = MAX_WORKERS) -> int:
    """DataLoader workers per rank, at most `cap` (None: no cap) (lessons 00, 03, 07).

    All ranks' processes together are at most one more than the usable cores.
    """
    ranks = as_int("ranks", ranks, minimum=1)
    fit = env_workers_per_rank(ranks)  # the course's rule (helpers.env), the one the doctor advises
    return fit if cap is None else min(fit, as_int("cap", cap, minimum=0))


def shard_plan(world_size: int, seed: int = 0) -> list[int]:
    """Training samples per rank when each rank takes whole shards (the uneven-shards fault): NUM_SHARDS shards dealt out rank by rank (lesson 07)."""
    world_size = as_int("world_size", world_size, minimum=1)
    shards = np.array_split(np.arange(len(training_data(seed)[1])), NUM_SHARDS)
    return [sum(len(shard) for shard in shards[rank::world_size]) for rank in range(world_size)]


def rank_and_world() -> tuple[int, int]:
    """This process's rank and the world size: from the process group when there is one, else (0, 1) (lesson 07)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


@functools.cache
def _arrays(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training raw signals and labels, held-out raw signals and labels (read-only, made once per seed)."""
    def raw(dataset: Any, noise_seed: int) -> tuple[np.ndarray, np.ndarray]:
        features, labels = (t.numpy() for t in dataset.tensors)
        noise = np.random.default_rng(noise_seed).normal(0.0, 0.5, (len(labels), NUM_FEATURES * RAW_PER_FEATURE))
        signal = (np.repeat(features, RAW_PER_FEATURE, axis=1) + noise).astype(np.float32)
        signal.flags.writeable = labels.flags.writeable = False
        return signal, labels.astype(np.int64)

    train = imbalanced_classification(CLASS_COUNTS, NUM_FEATURES, SEPARATION, seed=seed, task_seed=0)
    held_out = imbalanced_classification([EVAL_PER_CLASS] * NUM_CLASSES, NUM_FEATURES, SEPARATION, seed=seed + 1, task_seed=0)
    return (*raw(train, seed + 2), *raw(held_out, seed + 3))


def training_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The training raw signals (float32, one row of 1024 per sample, read-only) and labels, made once per seed (lesson 07)."""
    raw, labels, _, _ = _arrays(as_int("seed", seed, minimum=0))
    return raw, labels


def held_out_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The held-out raw signals and labels (EVAL_PER_CLASS per class), made once per seed (lesson 07)."""
    _, _, raw, labels = _arrays(as_int("seed", seed, minimum=0))
    return raw, labels


def _decode(signal: Any, spin_iterations: int) -> torch.Tensor:
    """Decode one raw signal into its features: the CPU work of a real decoder (spin), then the band means."""
    spin(spin_iterations)
    values = np.asarray(signal, dtype=np.float32)  # a Python list: this reads (and refcounts) every float in it
    return torch.from_numpy(values.reshape(NUM_FEATURES, RAW_PER_FEATURE).mean(axis=1))


class ClinicDataset(Dataset):
    """The training samples: raw signals decoded on read (DECODE_MS of CPU each) into {"input", "label", "index"} (lesson 07)."""

    def __init__(self, raw: np.ndarray, labels: np.ndarray, list_backed: bool, decode_ms: float = DECODE_MS) -> None:
        if not isinstance(list_backed, bool):
            raise TypeError(f"list_backed must be True or False, got {short(list_backed)}")
        if not isinstance(raw, np.ndarray) or raw.ndim != 2 or len(raw) != len(labels):
            raise ValueError(f"raw must be a 2-D array with one row per label, got {short(raw)}")
        self.targets = np.asarray(labels)  # samplers and the doctor read the labels here, without decoding anything
        self.raw = raw.tolist() if list_backed else raw  # a list of lists of Python floats, or one array
        self.spin_iterations = round(decode_ms * spin_iterations_per_ms()) if decode_ms else 0

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> dict[str, Any]:
        index = int(index)
        return {"input": _decode(self.raw[index], self.spin_iterations), "label": int(self.targets[index]), "index": index}


class EvalStream(IterableDataset):
    """The held-out samples as a stream, as from a bucket or a database cursor; `sharded` splits it by rank, then by worker (lesson 07)."""

    def __init__(self, raw: np.ndarray, labels: np.ndarray, sharded: bool, decode_ms: float = DECODE_MS) -> None:
        if not isinstance(sharded, bool):
            raise TypeError(f"sharded must be True or False, got {short(sharded)}")
        self.raw, self.labels, self.sharded = raw, np.asarray(labels), sharded
        self.rank, self.world_size = rank_and_world()  # read here, in the rank's main process
        self.spin_iterations = round(decode_ms * spin_iterations_per_ms()) if decode_ms else 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        start, step = 0, 1
        if self.sharded:  # split by rank, then by worker: every (rank, worker) reads its own samples
            info = get_worker_info()
            worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
            start, step = self.rank * workers + worker, self.world_size * workers
        for index in range(start, len(self.labels), step):
            yield {"key": index, "input": _decode(self.raw[index], self.spin_iterations),
                   "label": int(self.labels[index])}


def make_loader(fixed: Iterable[str] = (), *, seed: int = 0) -> DataLoader:
    """The training DataLoader with every fault not in `fixed` planted (lesson 07).

    Under a process group, this rank's loader.
    """
    fixed, seed = as_fixed(fixed), as_int("seed", seed, minimum=0)
    rank, world = rank_and_world()
    raw, labels = training_data(seed)
    dataset: Dataset = ClinicDataset(raw, labels,
                                     list_backed="list-backed" not in fixed)  # FAULT list-backed
    distributed = world > 1 and "uneven-shards" in fixed
    # FAULT uneven-shards: each rank takes whole shards, 3 and 2 of 5
    if world > 1 and not distributed:
        mine = np.concatenate(np.array_split(np.arange(len(labels)), NUM_SHARDS)[rank::world])
        dataset, labels = Subset(dataset, mine.tolist()), labels[mine]
    draws = torch.Generator().manual_seed(seed)
    # FAULT no-rebalancing: shuffling keeps the 100:10:1 mix in every batch
    if "no-rebalancing" not in fixed:
        sampler: Any = (DistributedSampler(dataset, seed=seed) if distributed
                        else RandomSampler(dataset, generator=draws))
    else:
        # FAULT class-weights-as-sample-weights: one weight per class, not per sample
        if "class-weights-as-sample-weights" not in fixed:
            weights = torch.as_tensor(class_weights(class_counts(labels, NUM_CLASSES)))
        else:
            weights = sample_weights(labels)
        sampler = (DistributedWeightedSampler(weights, num_samples=len(labels), seed=seed)
                   if distributed
                   else WeightedRandomSampler(weights, num_samples=len(labels), generator=draws))
    # FAULT no-workers: decoding in the training loop
    workers = workers_per_rank(world) if "no-workers" in fixed else 0
    return DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, num_workers=workers,
                      persistent_workers=workers > 0,
                      # FAULT pin-on-the-fly: no pinning here
                      pin_memory="pin-on-the-fly" in fixed and torch.accelerator.is_available())


def make_eval_loader(fixed: Iterable[str] = (), *, seed: int = 0) -> DataLoader:
    """The held-out DataLoader (a stream); with "unsharded-eval-stream" not in `fixed`, every worker and rank reads all of it (lesson 07)."""
    fixed, seed = as_fixed(fixed), as_int("seed", seed, minimum=0)
    raw, labels = held_out_data(seed)
    stream = EvalStream(raw, labels, sharded="unsharded-eval-stream" in fixed)  # FAULT unsharded-eval-stream
    return DataLoader(stream, batch_size=BATCH_SIZE, num_workers=workers_per_rank(rank_and_world()[1]))


def template_loader(seed: int = 0) -> DataLoader:
    """The fixed training loader without the fault switches: the template to copy (lesson 07)."""
    seed = as_int("seed", seed, minimum=0)
    rank, world = rank_and_world()
    raw, labels = training_data(seed)
    # one numpy array: nothing for workers to copy on read
    dataset = ClinicDataset(raw, labels, list_backed=False)
    weights = sample_weights(labels)  # one weight per sample: its class's inverse frequency
    # one weighted draw over the whole dataset, a disjoint equal share per rank;
    # call set_epoch each epoch
    if world > 1:
        sampler: Any = DistributedWeightedSampler(weights, num_samples=len(labels), seed=seed)
    else:
        sampler = WeightedRandomSampler(weights, num_samples=len(labels),
                                        generator=torch.Generator().manual_seed(seed))
    # all ranks' processes at most one more than the usable cores (capped for this small data)
    workers = workers_per_rank(world)
    return DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, num_workers=workers,
                      persistent_workers=workers > 0,
                      # pinned in a background thread; copy with non_blocking=True
                      pin_memory=torch.accelerator.is_available())


def make_model(seed: int = 0) -> nn.Module:
    """The clinic's classifier: 16 features -> 128 -> 128 -> 3 classes, initialised from `seed` (lesson 07)."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(as_int("seed", seed, minimum=0))
    model = nn.Sequential(nn.Linear(NUM_FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, NUM_CLASSES))
    torch.random.set_rng_state(generator_state)  # the caller's random stream is left as it was
    return model


def _device(device: Any) -> torch.device:
    if device is not None:
        return as_device("device", device)
    if dist.is_available() and dist.is_initialized():
        from helpers.ddp import rank_device

        return rank_device()
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def make_step(fixed: Iterable[str] = (), *, model: nn.Module | None = None, device: Any = None,
              seed: int = 0) -> Callable[[dict[str, Any]], torch.Tensor]:
    """A training step (copy, forward, backward, Adam step) that returns the loss (lesson 07).

    The step takes one batch, and pins it on the fly unless "pin-on-the-fly" is in `fixed`.
    """
    fixed, device = as_fixed(fixed), _device(device)
    model = make_model(seed).to(device) if model is None else model
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    pin_here = "pin-on-the-fly" not in fixed and device.type == "cuda"

    def step(batch: dict[str, Any]) -> float:
        inputs, labels = batch["input"], batch["label"]
        # FAULT pin-on-the-fly: the loop pins each batch itself, and waits while it does
        if pin_here:
            inputs, labels = inputs.pin_memory(), labels.pin_memory()
        inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()

    return step


@functools.cache
def _default_step() -> Callable[[dict[str, Any]], torch.Tensor]:
    return make_step()


def train_step(batch: dict[str, Any]) -> torch.Tensor:
    """One step of the faulty script's model on `batch`, for the doctor's --step (lesson 07)."""
    return _default_step()(batch)


@contextlib.contextmanager
def _one_cpu_thread(device: torch.device) -> Iterator[None]:
    """On a CPU, one intra-op thread for the loop while inside: the model is too small to gain from more, which would fight the workers for cores."""
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
