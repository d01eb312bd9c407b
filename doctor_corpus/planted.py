"""One loader per rule with its fault planted, a function named by the rule's `planted` (registered once: by its name here); the tests run each and expect its code (lesson 07)."""
from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, TensorDataset, WeightedRandomSampler, get_worker_info
from torchdata.stateful_dataloader import StatefulDataLoader

from doctor_corpus import forked
from doctor_corpus._streams import BufferedStream, ShardStream
from helpers.env import usable_cpus
from helpers.ledger_demos import EpochStream
from helpers import imbalance
from helpers.imbalance import class_counts, sample_weights
from helpers.sequences import TokenCorpus, corpus_lengths, pad_collate


@dataclass
class Plant:
    """A loader with one fault, how to diagnose it, and what the machine must have (`needs`) or the test must pretend."""

    loader: DataLoader
    step: Callable[[Any], Any] | None = None
    device: str | None = None
    budget_s: float = 6.0
    needs: str = ""  # "cuda", "2 cores", "no accelerator", "another busy program": the test skips or provides it
    pretend: dict[str, Any] = field(default_factory=dict)  # measure functions the test replaces, e.g. a small /dev/shm
    epochs: int = 1  # the ledger's reading (lesson 09): whole epochs, ranks, a resume, and the loader's factory
    ranks: int = 1
    resume: bool = False
    make_loader: Callable[..., DataLoader] | None = None


def labelled(n: int = 2048, features: int = 16, labels: np.ndarray | None = None) -> TensorDataset:
    """A TensorDataset of random features and labels (balanced over 4 classes unless given), with `targets`."""
    y = torch.as_tensor(np.arange(n) % 4 if labels is None else labels, dtype=torch.long)
    dataset = TensorDataset(torch.randn(n, features, generator=torch.Generator().manual_seed(0)), y)
    dataset.targets = y
    return dataset


def skewed(n: int = 2000, rare: int = 200) -> np.ndarray:
    """Labels: n - rare of class 0, then rare of class 1."""
    return np.r_[np.zeros(n - rare, dtype=np.int64), np.ones(rare, dtype=np.int64)]


class Sleepy(Dataset):
    """Items that wait `ms` milliseconds (I/O-like): more workers help whatever else the cores do."""

    def __init__(self, n: int = 4096, ms: float = 5.0) -> None:
        self.n, self.ms = n, ms

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.ms / 1000)
        return torch.full((4,), float(i)), i % 2


class Fails(Dataset):
    """Raises ValueError at index 5."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 5:
            raise ValueError("sample 5 is corrupt")
        return torch.zeros(2)


class Stream(IterableDataset):
    """Samples 0..n-1 as {'key', 'input'}; `sharded` splits them by worker, otherwise every worker yields all."""

    def __init__(self, n: int = 512, sharded: bool = False) -> None:
        self.n, self.sharded = n, sharded

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if self.sharded and info is not None else (0, 1)
        for i in range(start, self.n, step):
            yield {"key": f"s{i:05d}", "input": torch.full((4,), float(i))}


class Records(Dataset):
    """Annotations as a list of dicts (pytorch/pytorch#13246): reading one writes reference counts into its pages (copy-on-read)."""

    def __init__(self, n: int = 200_000) -> None:
        self.rows = [{"path": f"images/{i:07d}.jpg", "label": i % 10, "box": [i % 97, i % 89, 32, 32]} for i in range(n)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        row = self.rows[i]
        return torch.tensor(row["box"], dtype=torch.float32), row["label"]


def oversubscribed() -> Plant:
    """More workers than cores (PyTorch warns too)."""
    return Plant(DataLoader(labelled(), batch_size=64, num_workers=usable_cpus() + 1), budget_s=8.0)


def shm_too_small() -> Plant:
    """256 KiB batches x 2 x 2 in flight against a /dev/shm of 512 KiB (a default Docker container with a big batch)."""
    return Plant(DataLoader(TensorDataset(torch.zeros(512, 1024)), batch_size=64, num_workers=2), pretend={"shm_free_bytes": 512 * 1024})


def no_replacement() -> Plant:
    """Per-sample weights with replacement=False: a weighted permutation."""
    sampler = WeightedRandomSampler(sample_weights(skewed()), num_samples=2000, replacement=False)
    return Plant(DataLoader(labelled(2000, labels=skewed()), batch_size=64, sampler=sampler))


def class_weights() -> Plant:
    """One weight per class given where one per sample is needed."""
    sampler = WeightedRandomSampler(torch.as_tensor(imbalance.class_weights(class_counts(skewed()))), num_samples=2000)
    return Plant(DataLoader(labelled(2000, labels=skewed()), batch_size=64, sampler=sampler))


def unbalanced() -> Plant:
    """64 of 4096 samples in class 1, shuffled."""
    labels = np.zeros(4096, dtype=np.int64)
    labels[:64] = 1
    return Plant(DataLoader(labelled(4096, labels=labels), batch_size=64, shuffle=True))


def fails() -> Plant:
    """A dataset that raises at index 5, read by 2 workers."""
    return Plant(DataLoader(Fails(), batch_size=4, num_workers=2))


def busy_host() -> Plant:
    """A quick loader on a machine where another program keeps a core busy (the test starts it)."""
    return Plant(DataLoader(Sleepy(ms=2.0), batch_size=8), needs="another busy program")


def copy_on_read() -> Plant:
    """200,000 annotation dicts read by 2 forked workers."""
    return Plant(DataLoader(Records(), batch_size=256, shuffle=True, num_workers=2, multiprocessing_context="fork"), budget_s=10.0,
                 needs="Linux (fork, /proc/PID/smaps_rollup)")


def startup() -> Plant:
    """4 batches per epoch from 2 spawned workers that start every epoch."""
    return Plant(DataLoader(labelled(256), batch_size=64, num_workers=2, multiprocessing_context="spawn"), budget_s=30.0)


def input_bound() -> Plant:
    """Items that wait 2 ms, no workers, a 2 ms step."""
    return Plant(DataLoader(Sleepy(ms=2.0), batch_size=8), step=lambda batch: time.sleep(0.002))


def too_few() -> Plant:
    """Items that wait 5 ms, no workers."""
    return Plant(DataLoader(Sleepy(ms=5.0), batch_size=8), budget_s=10.0, needs="2 cores")


def duplicates() -> Plant:
    """An IterableDataset every worker reads in full."""
    return Plant(DataLoader(Stream(), batch_size=16, num_workers=2))


class Whitened(Dataset):
    """Items whitened by a fixed 512x512 float64 matrix in numpy: OpenBLAS runs its own threads in every worker."""

    def __init__(self, n: int = 1024) -> None:
        basis = np.random.default_rng(0).standard_normal((512, 512))
        self.matrix = basis @ basis.T / 512

    def __len__(self) -> int:
        return 1024

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        patches = np.random.default_rng(i).standard_normal((32, 512))
        return torch.from_numpy((patches @ self.matrix).astype(np.float32)), i % 4


def threads() -> Plant:
    """2 workers each running numpy's BLAS threads (one per core) on a matmul transform."""
    return Plant(DataLoader(Whitened(), batch_size=16, num_workers=2, persistent_workers=True), budget_s=30.0, needs="2 cores")


def padded() -> Plant:
    """Lesson 08's corpus in random batches of 16, each padded to its longest document."""
    corpus = TokenCorpus(corpus_lengths(512, seed=1), seed=1)
    return Plant(DataLoader(corpus, batch_size=16, shuffle=True, collate_fn=pad_collate,
                            generator=torch.Generator().manual_seed(0)))


def pin_no_accelerator() -> Plant:
    """pin_memory=True on a machine without an accelerator."""
    return Plant(DataLoader(labelled(), batch_size=64, pin_memory=True), needs="no accelerator")


def pin_missing() -> Plant:
    """Batches bound for CUDA in pageable memory."""
    return Plant(DataLoader(labelled(), batch_size=64), device="cuda", needs="cuda")


def order_repeats() -> Plant:
    """A stream that shuffles per epoch with its epoch in a plain attribute, read by 2 persistent workers."""
    return Plant(DataLoader(EpochStream(96), batch_size=8, num_workers=2, persistent_workers=True), epochs=2, budget_s=10.0)


def coverage_gap() -> Plant:
    """5 shards of 12 items over 2 workers in equal slices of 5 // 2: shard 4 is never read."""
    return Plant(DataLoader(ShardStream([12] * 5, split="slices"), batch_size=8, num_workers=2), epochs=2, budget_s=10.0)


def _every_rank_shuffles(rank: int = 0, world_size: int = 1) -> DataLoader:
    return DataLoader(labelled(256), batch_size=32, shuffle=True)  # rank and world_size unused: no DistributedSampler


def rank_overlap() -> Plant:
    """2 ranks, each shuffling the whole dataset: no DistributedSampler."""
    return Plant(_every_rank_shuffles(0, 2), ranks=2, make_loader=_every_rank_shuffles)


def _shards_by_rank(rank: int = 0, world_size: int = 1) -> DataLoader:
    return DataLoader(ShardStream([16] * 5, rank=rank, world_size=world_size), batch_size=8)


def unequal_steps() -> Plant:
    """5 shards of 16 items dealt to 2 ranks by stride: 3 shards (6 steps) against 2 (4 steps)."""
    return Plant(_shards_by_rank(0, 2), ranks=2, make_loader=_shards_by_rank)


def _buffered() -> DataLoader:
    return StatefulDataLoader(BufferedStream(), batch_size=8)


def resume_mismatch() -> Plant:
    """A shuffle buffer whose state saves the source position but not the buffer's content."""
    return Plant(_buffered(), resume=True, make_loader=_buffered, budget_s=10.0)


class Transformed(Dataset):
    """Items passed through a transform kept on the dataset (a lambda, as in many tutorials' `transform=lambda x: ...`)."""

    def __init__(self, transform: Callable[[torch.Tensor], torch.Tensor]) -> None:
        self.transform, self.x = transform, torch.randn(256, 4, generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> torch.Tensor:
        return self.transform(self.x[i])


def not_picklable() -> Plant:
    """A dataset holding a lambda, read by 2 workers: fork copies it, spawn and forkserver must pickle it."""
    return Plant(DataLoader(Transformed(lambda x: x * 2), batch_size=16, num_workers=2, multiprocessing_context="fork"))


class Readings(Dataset):
    """384 readings of 32 features, each read in `ms` milliseconds (a wait, as a disk or network read is); `slow_ms` for
    the ids in `slow`; `worker_ms` replaces `ms` in a worker whose worker_init_fn sets it (`slower_worker`)."""

    def __init__(self, ms: float = 2.0, slow: tuple[int, ...] = (), slow_ms: float = 60.0) -> None:
        self.ms, self.slow, self.slow_ms = ms, frozenset(slow), slow_ms

    def __len__(self) -> int:
        return 384

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep((self.slow_ms if int(i) in self.slow else self.ms) / 1000)
        return torch.full((32,), float(i)), int(i) % 4


def slower_worker(worker_id: int) -> None:
    """Worker 0 reads at 4x the others' time per item (its own connection to a slower replica, say)."""
    info = get_worker_info()
    if worker_id == 0 and info is not None:
        info.dataset.ms *= 4


def slow_worker() -> Plant:
    """2 workers reading 2 ms items, worker 0 at 8 ms per item."""
    return Plant(DataLoader(Readings(), batch_size=8, num_workers=2, worker_init_fn=slower_worker), budget_s=10.0)


def slow_samples() -> Plant:
    """No workers; 5 of 384 items take 60 ms to read, the others 2 ms (5 of 48 batches hold one)."""
    return Plant(DataLoader(Readings(slow=(11, 90, 170, 250, 330)), batch_size=8), budget_s=10.0)


def head_of_line() -> Plant:
    """2 workers in order; 5 slow items, all in batches worker 1 reads (batches 1, 11, 21, 31, 41: odd ones). 14 s by fork;
    24 s where each of the comparison's 4 workers is a fresh Python: the turns hold 4 slow batches each since head-of-line
    pools its rounds, and forkserver run 6 (2-core VM, 2.0 s to the first batch) found it had 3.9 s of the 6.3 s it
    needed in 14 s ("about --budget 23")."""
    return Plant(DataLoader(Readings(slow=(11, 90, 170, 250, 330)), batch_size=8, num_workers=2), budget_s=14.0 if forked() else 24.0)


def _is_plant(value: Any) -> bool:
    """A function of this module taking no argument and returning a Plant."""
    return (inspect.isfunction(value) and value.__module__ == __name__ and value.__annotations__.get("return") == "Plant"
            and not inspect.signature(value).parameters)


def plant(name: str) -> Plant:
    """The loader of the planted fault a rule names (its `planted`): the function of that name in this module, called."""
    made = globals().get(name)
    if not _is_plant(made):
        raise ValueError(f"planted: no function {name!r} -> Plant in {__name__}")
    return made()


def names() -> list[str]:
    """Every planted fault this module defines (each a function of no argument returning a Plant)."""
    return sorted(name for name, value in globals().items() if _is_plant(value))
