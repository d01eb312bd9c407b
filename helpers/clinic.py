"""The debugging clinic's training script, faults planted, as importable functions (lesson 07).

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
import itertools
import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
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
from helpers.loading import StepTimer, warmup_for
from helpers.memory import process_memory
from helpers.metrics import per_class_recall, scores
from helpers.samplers import DistributedWeightedSampler
from helpers.timing import Headroom, bracketed, interleaved
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
    """DataLoader workers per rank: all ranks' processes at most one more than the usable cores, and at most `cap` (None: no cap) (lessons 00, 03, 07)."""
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
            yield {"key": index, "input": _decode(self.raw[index], self.spin_iterations), "label": int(self.labels[index])}


def make_loader(fixed: Iterable[str] = (), *, seed: int = 0) -> DataLoader:
    """The training DataLoader with every fault not in `fixed` planted; under a process group, this rank's loader (lesson 07)."""
    fixed, seed = as_fixed(fixed), as_int("seed", seed, minimum=0)
    rank, world = rank_and_world()
    raw, labels = training_data(seed)
    dataset: Dataset = ClinicDataset(raw, labels, list_backed="list-backed" not in fixed)  # FAULT list-backed
    distributed = world > 1 and "uneven-shards" in fixed
    if world > 1 and not distributed:  # FAULT uneven-shards: each rank takes whole shards, 3 and 2 of 5
        mine = np.concatenate(np.array_split(np.arange(len(labels)), NUM_SHARDS)[rank::world])
        dataset, labels = Subset(dataset, mine.tolist()), labels[mine]
    draws = torch.Generator().manual_seed(seed)
    if "no-rebalancing" not in fixed:  # FAULT no-rebalancing: shuffling keeps the 100:10:1 mix in every batch
        sampler: Any = DistributedSampler(dataset, seed=seed) if distributed else RandomSampler(dataset, generator=draws)
    else:
        if "class-weights-as-sample-weights" not in fixed:  # FAULT class-weights-as-sample-weights: one weight per class, not per sample
            weights = torch.as_tensor(class_weights(class_counts(labels, NUM_CLASSES)))
        else:
            weights = sample_weights(labels)
        sampler = (DistributedWeightedSampler(weights, num_samples=len(labels), seed=seed) if distributed
                   else WeightedRandomSampler(weights, num_samples=len(labels), generator=draws))
    workers = workers_per_rank(world) if "no-workers" in fixed else 0  # FAULT no-workers: decoding in the training loop
    return DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, num_workers=workers, persistent_workers=workers > 0,
                      pin_memory="pin-on-the-fly" in fixed and torch.accelerator.is_available())  # FAULT pin-on-the-fly: no pinning here


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
    dataset = ClinicDataset(raw, labels, list_backed=False)  # one numpy array: nothing for workers to copy on read
    weights = sample_weights(labels)  # one weight per sample: its class's inverse frequency
    if world > 1:  # one weighted draw over the whole dataset, a disjoint equal share per rank; call set_epoch each epoch
        sampler: Any = DistributedWeightedSampler(weights, num_samples=len(labels), seed=seed)
    else:
        sampler = WeightedRandomSampler(weights, num_samples=len(labels), generator=torch.Generator().manual_seed(seed))
    workers = workers_per_rank(world)  # all ranks' processes at most one more than the usable cores (capped for this small data)
    return DataLoader(dataset, batch_size=BATCH_SIZE, sampler=sampler, num_workers=workers, persistent_workers=workers > 0,
                      pin_memory=torch.accelerator.is_available())  # pinned in a background thread; copy with non_blocking=True


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
    """A training step on one batch (copy, forward, backward, Adam step) returning the loss; pins on the fly unless fixed (lesson 07)."""
    fixed, device = as_fixed(fixed), _device(device)
    model = make_model(seed).to(device) if model is None else model
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    pin_here = "pin-on-the-fly" not in fixed and device.type == "cuda"

    def step(batch: dict[str, Any]) -> float:
        inputs, labels = batch["input"], batch["label"]
        if pin_here:  # FAULT pin-on-the-fly: the loop pins each batch itself, and waits while it does
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


def ladder_rounds(ladder: Sequence[Iterable[str]], *, rounds: int = 3, steps: int = 48, seed: int = 0) -> tuple[list[list[Speed]], Headroom]:
    """Every rung timed `rounds` times, and the last rung's speed-up over the first against the ceiling, round by round (lesson 07).

    In each round the first and last rungs run back to back (their order alternating) between two measurements of the
    2-process ceiling, so the pair the lesson asserts on and the headroom it is judged against share the same moment;
    the rungs between follow.
    """
    ladder = [as_fixed(config) for config in ladder]
    if len(ladder) < 2:
        raise ValueError(f"ladder must hold at least two sets of fixed faults (a first and a last), got {len(ladder)}")
    rounds = as_int("rounds", rounds, minimum=1)
    measured: list[list[Speed]] = [[] for _ in ladder]
    speedups, ceilings = [], []
    for index in range(rounds):
        ends = (0, len(ladder) - 1) if index % 2 == 0 else (len(ladder) - 1, 0)
        pair, ceiling = bracketed(lambda: {rung: measure_speed(ladder[rung], steps=steps, seed=seed) for rung in ends})
        speedups.append(pair[len(ladder) - 1].samples_per_s / pair[0].samples_per_s)
        ceilings.append(ceiling)
        for rung in range(len(ladder)):
            measured[rung].append(pair[rung] if rung in pair else measure_speed(ladder[rung], steps=steps, seed=seed))
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
        memory = f", worker USS +{np.median(self.worker_uss_growth_mib):.0f} MiB" if self.worker_uss_growth_mib else ""
        return (f"balanced accuracy {self.balanced_accuracy:.3f}, minority recall {self.minority_recall:.3f}; "
                f"evaluation read {self.eval_samples} samples, {self.eval_distinct} distinct; "
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


def train(fixed: Iterable[str] = (), *, epochs: int = EPOCHS, seed: int = 0, device: Any = None) -> Run:
    """Run the clinic's script with the faults not in `fixed`: train, evaluate, return what was measured; under a process group, this rank's part (lesson 07)."""
    fixed, epochs, seed, device = as_fixed(fixed), as_int("epochs", epochs, minimum=1), as_int("seed", seed, minimum=0), _device(device)
    started = time.perf_counter()
    rank, world = rank_and_world()
    with _one_cpu_thread(device):
        model = make_model(seed).to(device)
        if world > 1:
            model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
        step = make_step(fixed, model=model, device=device)
        loader = make_loader(fixed, seed=seed)
        timer = StepTimer(device)
        draws, uss_start = [], []
        for epoch in range(epochs):
            if "no-set-epoch" in fixed and hasattr(loader.sampler, "set_epoch"):  # FAULT no-set-epoch: without it, each epoch repeats
                loader.sampler.set_epoch(epoch)
            seen: list[int] = []
            for batch in timer.wrap(loader):
                step(batch)
                seen.extend(batch["index"].tolist())
                if not uss_start and loader.num_workers:
                    uss_start = _worker_uss(loader)  # after the first batch: the workers have started
            draws.append(tuple(seen))
            if world > 1:
                dist.barrier()  # end of epoch: every rank waits for the others (say, before rank 0 saves a checkpoint)
        growth = [end - start for start, end in zip(uss_start, _worker_uss(loader))]
        del loader  # its persistent workers exit here
        found = evaluate(model, fixed, seed=seed, device=device)
    wait, compute = sum(timer.data_wait_s[1:]), sum(timer.compute_s[1:])
    trained = sum(len(d) for d in draws) - len(draws[0][:BATCH_SIZE])  # the first step is start-up
    return Run(fixed, rank, world, trained / (wait + compute), wait / (wait + compute), found["accuracy"], found["balanced_accuracy"],
               found["minority_recall"], found["eval_samples"], found["eval_distinct"], found["recall_per_class"], tuple(draws),
               tuple(growth), time.perf_counter() - started)


def train_in_turn(configs: Sequence[Iterable[str]], *, epochs: int = EPOCHS, seed: int = 0) -> list[Run]:
    """train() for each set of fixed faults in turn, in one process group: one launch of ranks for several runs (lesson 07)."""
    configs = [as_fixed(config) for config in configs]
    if not configs:
        raise ValueError("configs must hold at least one set of fixed faults, got none")
    return [train(config, epochs=epochs, seed=seed) for config in configs]


# --- The lesson's before/after table, plot and widget (scaffolding: what the lesson shows, not what it teaches)

@dataclass(frozen=True)
class Rung:
    """One row of the before/after table: the fix just made, and what the script measured after it (lesson 07)."""

    label: str
    speed: Speed | None = None
    run: Run | None = None
    evidence: str = ""


def _cell(value: float | None, form: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, form)


def ladder_table(rungs: Sequence[Rung]) -> str:
    """The before/after table as aligned text: samples/s, data-wait share, balanced accuracy, minority recall, evidence (lesson 07)."""
    if not rungs or not all(isinstance(r, Rung) for r in rungs):
        raise TypeError(f"rungs must be a non-empty sequence of Rung, got {short(rungs)}")
    width = max(len(r.label) for r in rungs)
    lines = [f"{'after':<{width}}  {'samples/s':>9}  {'waiting':>7}  {'bal. acc':>8}  {'min. rec':>8}  evidence"]
    for r in rungs:
        speed, run = r.speed, r.run
        lines.append(f"{r.label:<{width}}  {_cell(speed and speed.samples_per_s, ',.0f'):>9}  {_cell(speed and speed.data_wait_share, '.0%'):>7}  "
                     f"{_cell(run and run.balanced_accuracy, '.3f'):>8}  {_cell(run and run.minority_recall, '.3f'):>8}  {r.evidence}")
    return "\n".join(lines)


def plot_ladder(rungs: Sequence[Rung], title: str = "") -> Any:
    """Two panels over the fixes: samples/s with the data-wait share, and balanced accuracy with minority recall (lesson 07)."""
    import matplotlib.pyplot as plt

    if not rungs or not all(isinstance(r, Rung) for r in rungs):
        raise TypeError(f"rungs must be a non-empty sequence of Rung, got {short(rungs)}")
    fig, (speed_ax, score_ax) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")  # room for the title and labels
    timed = [r for r in rungs if r.speed is not None]  # each panel shows only the rows it has numbers for
    speed_ax.bar(range(len(timed)), [r.speed.samples_per_s for r in timed], color="tab:blue", label="samples/s")
    share_ax = speed_ax.twinx()
    share_ax.plot(range(len(timed)), [100 * r.speed.data_wait_share for r in timed], "o-", color="tab:orange", label="waiting for data (%)")
    share_ax.set(ylim=(0, 135), yticks=range(0, 101, 25), ylabel="% of each step waiting for data")
    share_ax.grid(False)
    top = max([r.speed.samples_per_s for r in timed], default=1.0)
    speed_ax.set(ylim=(0, 1.35 * top), ylabel="training samples/s (median of rounds)", title="Speed")  # the legend sits above the bars
    scored = [r for r in rungs if r.run is not None]
    for key, mark, name in (("balanced_accuracy", "o-", "balanced accuracy"), ("minority_recall", "s--", "minority recall")):
        score_ax.plot(range(len(scored)), [getattr(r.run, key) for r in scored], mark, label=name)
    score_ax.set(ylim=(0, 1.35), yticks=np.linspace(0, 1, 5), ylabel="score on the balanced held-out stream", title="What the model learned")
    score_ax.legend(loc="upper left", fontsize=8, ncol=2)
    for ax, shown in ((speed_ax, timed), (score_ax, scored)):
        ax.set_xticks(range(len(shown)), [r.label for r in shown], rotation=35, ha="right", fontsize=8)
    handles = speed_ax.get_legend_handles_labels()[0] + share_ax.get_legend_handles_labels()[0]
    speed_ax.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=8, ncol=2)
    if title:
        fig.suptitle(title)
    return fig


def fault_widget(planted: Run, fixed: Run, rank_outcomes: dict[str, str]) -> Any:
    """A slider per fault (planted / fixed): the one-process faults rerun the script live; the rank faults show this run's 2-rank results (lesson 07)."""
    for name, value in (("planted", planted), ("fixed", fixed)):
        if not isinstance(value, Run):
            raise TypeError(f"{name} must be a Run from clinic.train, got {short(value)}")
    if not isinstance(rank_outcomes, dict) or set(rank_outcomes) != {"uneven-shards", "no-set-epoch", "none"}:
        raise ValueError(f"rank_outcomes must map 'uneven-shards', 'no-set-epoch' and 'none' to what 2 ranks showed, got {short(rank_outcomes)}")
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    style, layout = {"description_width": "17em"}, widgets.Layout(width="34em")
    sliders = {name: widgets.SelectionSlider(options=("planted", "fixed"), value="planted", description=name,
                                             continuous_update=False, style=style, layout=layout) for name in FAULTS}
    for slider in sliders.values():
        # ipywidgets 8 gives the views of IntSlider and FloatSlider the class "jupyter-widgets" but not SelectionSlider's:
        # added, so that these sliders carry the classes of every other slider in the course (the browser test finds them so)
        slider.add_class("jupyter-widgets")
    if not torch.accelerator.is_available():  # the fault pins for a CUDA copy: without an accelerator both positions run the same code
        sliders["pin-on-the-fly"].description = "pin-on-the-fly (no effect: no GPU)"
    output = widgets.Output()
    inert = set() if torch.accelerator.is_available() else {"pin-on-the-fly"}  # the same code either way without a GPU

    def run_key(faults_fixed: frozenset[str]) -> frozenset[str]:
        """The one-process faults that change what runs here."""
        return (faults_fixed & frozenset(ONE_PROCESS)) - inert

    live = {run_key(run.fixed): run for run in (planted, fixed)}  # runs already made: no need to repeat them

    def show(_: Any = None) -> None:
        chosen = frozenset(name for name, slider in sliders.items() if slider.value == "fixed")
        one_process = run_key(chosen)
        if one_process not in live:
            live[one_process] = train(one_process)
        run = live[one_process]
        ranks = ("uneven-shards" if "uneven-shards" not in chosen else "no-set-epoch" if "no-set-epoch" not in chosen else "none")
        with output:
            output.clear_output(wait=True)
            fig, axes = plt.subplots(1, 4, figsize=(12, 3.2))
            names = ["as given", "all fixed", "your choice"]
            for ax, (key, form, label) in zip(axes, (("samples_per_s", ",.0f", "samples/s (one run)"),
                                                     ("data_wait_share", ".0%", "waiting for data"),
                                                     ("balanced_accuracy", ".2f", "balanced accuracy"),
                                                     ("minority_recall", ".2f", "minority recall"))):
                values = [getattr(r, key) for r in (planted, fixed, run)]
                ax.bar(names, values, color=["tab:red", "tab:green", "tab:blue"])
                ax.set_title(f"{label}: {format(values[2], form)}")
                ax.tick_params(axis="x", labelsize=7)
                if key != "samples_per_s":
                    ax.set_ylim(0, 1)
            planted_now = [name for name in ONE_PROCESS if name not in chosen]
            fig.suptitle(f"one process (bars 1-2: this lesson's runs; bar 3: run live when first chosen): planted "
                         f"{', '.join(planted_now) or 'nothing'}; evaluation read {run.eval_samples} samples for {run.eval_distinct}\n"
                         f"2 ranks (measured earlier in this lesson, not rerun here): {rank_outcomes[ranks]}", fontsize=9)
            plt.show()

    for slider in sliders.values():
        slider.observe(show, names="value")
    show()
    return widgets.VBox([*sliders.values(), output])
