"""Streaming data over tar shard files, split across DDP ranks and DataLoader workers (lesson 06)."""
from __future__ import annotations

import io
import os
import tarfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Dataset, IterableDataset, get_worker_info

from helpers._validate import as_fraction, as_int, short


def write_shards(
    folder: str | os.PathLike,
    num_samples: int,
    samples_per_shard: int,
    num_features: int = 8,
    seed: int = 0,
) -> list[Path]:
    """Write synthetic samples (key, input.npy, label.cls) as tar shards (lesson 06).

    Each shard is written with webdataset.TarWriter.
    """
    import webdataset as wds

    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder must be a path, got {short(folder)} of type {type(folder).__name__}")
    num_samples = as_int("num_samples", num_samples, minimum=1)
    samples_per_shard = as_int("samples_per_shard", samples_per_shard, minimum=1)
    num_features = as_int("num_features", num_features, minimum=1)
    rng = np.random.default_rng(as_int("seed", seed, minimum=0))
    inputs = rng.standard_normal((num_samples, num_features), dtype=np.float32)
    labels = inputs.sum(axis=1) > 0  # class 1: a positive sum
    Path(folder).mkdir(parents=True, exist_ok=True)
    num_shards = -(-num_samples // samples_per_shard)
    paths = [
        Path(folder) / f"shard-{number:05d}-of-{num_shards:05d}.tar" for number in range(num_shards)
    ]
    for number, path in enumerate(paths):
        with wds.TarWriter(str(path)) as sink:
            for index in range(number * samples_per_shard,
                               min(num_samples, (number + 1) * samples_per_shard)):
                sink.write({"__key__": f"{index:08d}", "input.npy": inputs[index],
                            "label.cls": int(labels[index])})
    return paths


def shard_assignment(
    num_shards: int, world_size: int, num_workers: int
) -> dict[tuple[int, int], list[int]]:
    """Which shards each (rank, worker) reads, split as webdataset splits them (lesson 06).

    The split is webdataset's split_by_node, then split_by_worker.
    """
    num_shards = as_int("num_shards", num_shards, minimum=1)
    world_size = as_int("world_size", world_size, minimum=1)
    # num_workers=0: the main process reads
    readers = max(1, as_int("num_workers", num_workers, minimum=0))
    return {
        (rank, worker): list(range(num_shards))[rank::world_size][worker::readers]
        for rank in range(world_size)
        for worker in range(readers)
    }


def read_shard(path: str | os.PathLike, limit: int | None = None) -> Iterator[dict[str, Any]]:
    """Yield the samples of one tar shard in order, at most `limit` of them; the caller's process opens the file (lesson 06)."""
    if limit is not None and as_int("limit", limit, minimum=0) == 0:
        return
    sample: dict[str, Any] = {}
    taken = 0
    with tarfile.open(path) as tar:
        for member in tar:
            key, _, field = Path(member.name).name.partition(".")
            if sample and key != sample["key"]:
                yield sample
                taken += 1
                if limit is not None and taken == limit:
                    return
                sample = {}
            data = tar.extractfile(member).read()
            sample["key"] = key
            if field == "input.npy":
                sample["input"] = torch.from_numpy(np.load(io.BytesIO(data)))
            elif field == "label.cls":
                sample["label"] = int(data)
        if sample:
            yield sample


def count_samples(path: str | os.PathLike) -> int:
    """The number of samples in one tar shard, from its member names alone (lesson 06)."""
    with tarfile.open(path) as tar:
        return len({Path(name).name.partition(".")[0] for name in tar.getnames()})


def _shard_paths(shards: Any) -> list[Path]:
    """`shards` as a non-empty list of paths to existing files."""
    if isinstance(shards, (str, os.PathLike)) or not isinstance(shards, Sequence):
        raise TypeError(f"shards must be a list of shard file paths, got {short(shards)} of type {type(shards).__name__}")
    if len(shards) == 0:
        raise ValueError(f"shards must name at least one shard file, got {short(shards)}")
    for shard in shards:
        if not isinstance(shard, (str, os.PathLike)):
            raise TypeError(f"shards must hold paths, got {short(shard)} of type {type(shard).__name__}")
        if not Path(shard).is_file():
            raise ValueError(f"shards names a file that does not exist: {str(shard)!r}")
    return [Path(shard) for shard in shards]


class UnshardedStream(IterableDataset):
    """Every worker of every rank reads every shard: the duplication that lesson 06 starts from."""

    def __init__(self, shards: Sequence[str | os.PathLike]) -> None:
        self.shards = _shard_paths(shards)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for shard in self.shards:
            yield from read_shard(shard)


class ShardedStream(IterableDataset):
    """Tar shards split over ranks, then over each rank's workers: each sample once per epoch, or equal samples per rank (lesson 06)."""

    def __init__(
        self,
        shards: Sequence[str | os.PathLike],
        rank: int | None = None,
        world_size: int | None = None,
        equal_steps: bool = False,
    ) -> None:
        self.shards = _shard_paths(shards)
        distributed = dist.is_available() and dist.is_initialized()
        self.world_size = as_int("world_size", (dist.get_world_size() if distributed else 1) if world_size is None else world_size, minimum=1)
        self.rank = as_int("rank", (dist.get_rank() if distributed else 0) if rank is None else rank, minimum=0)
        if self.rank >= self.world_size:
            raise ValueError(f"rank must be below world_size={self.world_size}, got {self.rank}")
        if not isinstance(equal_steps, bool):
            raise TypeError(f"equal_steps must be True or False, got {short(equal_steps)}")
        if equal_steps and len(self.shards) < self.world_size:
            raise ValueError(
                f"equal_steps=True needs at least one shard per rank, but shards has {len(self.shards)} for world_size={self.world_size}"
            )
        self.equal_steps = equal_steps

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        # no workers: this process reads
        worker, num_workers = (0, 1) if info is None else (info.id, info.num_workers)
        plan = shard_assignment(len(self.shards), self.world_size, num_workers)
        mine = plan[(self.rank, worker)]
        if not self.equal_steps:
            for index in mine:
                yield from read_shard(self.shards[index])
            return
        # Equal steps: every rank keeps the first `quota` samples of its shards (in the rank's
        # order), where `quota` is the smallest rank's total; each worker opens only its own
        # shards with their share of it.
        sizes = [count_samples(shard) for shard in self.shards]
        rank_shards = [
            sorted(index for (r, _), indices in plan.items() if r == rank for index in indices)
            for rank in range(self.world_size)
        ]
        quota = min(sum(sizes[index] for index in shards) for shards in rank_shards)
        before = 0
        for index in rank_shards[self.rank]:
            take = min(sizes[index], max(0, quota - before))
            before += sizes[index]
            if index in mine and take > 0:
                yield from read_shard(self.shards[index], limit=take)


def write_small_files(folder: str | os.PathLike, num_samples: int, num_features: int = 8, seed: int = 0) -> list[Path]:
    """Write the same synthetic inputs as write_shards, one .npy file per sample: the many-small-files layout (lesson 06)."""
    if not isinstance(folder, (str, os.PathLike)):
        raise TypeError(f"folder must be a path, got {short(folder)} of type {type(folder).__name__}")
    num_samples = as_int("num_samples", num_samples, minimum=1)
    rng = np.random.default_rng(as_int("seed", seed, minimum=0))
    inputs = rng.standard_normal((num_samples, as_int("num_features", num_features, minimum=1)), dtype=np.float32)
    Path(folder).mkdir(parents=True, exist_ok=True)
    paths = [Path(folder) / f"{index:08d}.npy" for index in range(num_samples)]
    for path, row in zip(paths, inputs):
        np.save(path, row)
    return paths


def read_samples(paths: Sequence[str | os.PathLike], open_delay_s: float = 0.0) -> int:
    """Read every sample of .tar shards or .npy files and return the count (lesson 06).

    Sleeps `open_delay_s` per file opened (a simulated network filesystem).
    """
    paths = _shard_paths(paths)
    if isinstance(open_delay_s, bool) or not isinstance(open_delay_s, (int, float)) or open_delay_s < 0:
        raise ValueError(f"open_delay_s must be a number of seconds >= 0, got {short(open_delay_s)}")
    count = 0
    for path in paths:
        time.sleep(open_delay_s)  # SIMULATED per-open latency, not this disk's
        if path.suffix == ".tar":
            count += sum(1 for _ in read_shard(path))
        else:
            np.load(path)
            count += 1
    return count


class H5Samples(Dataset):
    """Rows of an HDF5 dataset 'inputs', the file opened in __init__ or lazily (lesson 06).

    Opened in __init__, the file is shared with forked workers (and unpicklable); opened lazily,
    once per process.
    """

    def __init__(self, path: str | os.PathLike, open_in_init: bool) -> None:
        if not isinstance(open_in_init, bool):
            raise TypeError(f"open_in_init must be True or False, got {short(open_in_init)}")
        if not isinstance(path, (str, os.PathLike)) or not Path(path).is_file():
            raise ValueError(f"path must name an existing HDF5 file, got {short(path)}")
        self.path = str(path)
        self.file: Any = None
        # pids that opened the file through this object, as each process sees it
        self.opened_by: list[int] = []
        with h5py.File(self.path, "r") as file:
            self.length = len(file["inputs"])
        if open_in_init:
            self._open()

    def _open(self) -> None:
        self.file = h5py.File(self.path, "r")
        self.opened_by.append(os.getpid())

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Any]:
        # first access in this process: open once, keep it for the worker's lifetime
        if self.file is None:
            self._open()
        return {"index": index, "input": torch.from_numpy(self.file["inputs"][index]),
                "pid": os.getpid(), "opens": len(self.opened_by)}


class LabelCostDataset(Dataset):
    """Item i is its label, and costs `ms_per_label[label]` ms to load (slow classes: bigger images, say) (lesson 06)."""

    def __init__(self, labels: Sequence[int], ms_per_label: Sequence[float]) -> None:
        self.labels = [as_int("labels", label, minimum=0) for label in labels]
        self.ms_per_label = [float(ms) for ms in ms_per_label]
        if any(ms < 0 for ms in self.ms_per_label) or max(self.labels, default=0) >= len(self.ms_per_label):
            raise ValueError(f"ms_per_label must give a cost >= 0 for every label, got {short(ms_per_label)}")

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> int:
        time.sleep(self.ms_per_label[self.labels[index]] / 1000)
        return self.labels[index]



class CountedStream(IterableDataset):
    """Items 0..num_items-1 read one at a time, `ms_per_item` each, counting every read in `reads` (lesson 06).

    It has no state_dict, so torchdata's StatefulDataLoader resumes it by reading again, and dropping, the batches it had
    yielded before the stop. `reads` counts the reads of this process's copy (use num_workers=0 to count them all).
    """

    def __init__(self, num_items: int, ms_per_item: float = 0.0) -> None:
        self.num_items = as_int("num_items", num_items, minimum=1)
        self.ms_per_item = as_fraction("ms_per_item", ms_per_item, 0.0, 1000.0, include_low=True, include_high=True)
        self.position, self.reads = 0, 0

    def _start(self) -> int:
        """Where an iteration starts: always the beginning."""
        return 0

    def __iter__(self) -> Iterator[int]:
        start = self._start()
        self.position = start  # a resumed iteration is at its start before it reads anything
        for item in range(start, self.num_items):
            time.sleep(self.ms_per_item / 1000)
            self.reads += 1
            self.position = item + 1
            yield item


class SeekableCountedStream(CountedStream):
    """CountedStream with state_dict / load_state_dict, so a resume reads nothing twice (lesson 06).

    A resumed iteration starts at the saved position. A pass read to its end (the iteration
    stopped) leaves position 0, so a state taken between passes starts the next one whole; a
    state taken after the last item but before the iteration stopped resumes nothing more.
    """

    def __init__(self, num_items: int, ms_per_item: float = 0.0) -> None:
        super().__init__(num_items, ms_per_item)
        self._resume_at = 0

    def _start(self) -> int:
        start, self._resume_at = self._resume_at, 0
        return start

    def __iter__(self) -> Iterator[int]:
        yield from super().__iter__()
        self.position = 0  # the pass ended: the next starts at item 0

    def state_dict(self) -> dict[str, int]:
        """The position (items read so far in this iteration) and num_items."""
        return {"position": self.position, "num_items": self.num_items}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Start the next iteration at state['position'] (a state of the same num_items only)."""
        if not isinstance(state, dict):
            raise TypeError(f"state must be a dict from state_dict(), got {short(state)}")
        for name in ("position", "num_items"):
            if name not in state:
                raise ValueError(f"state lacks {name!r}: pass a dict from SeekableCountedStream.state_dict()")
        if state["num_items"] != self.num_items:
            raise ValueError(f"state has num_items={short(state['num_items'])}, but this stream has "
                             f"num_items={self.num_items}: a state resumes only the same stream")
        position = as_int("state['position']", state["position"], minimum=0)
        if position > self.num_items:
            raise ValueError(f"state['position'] must be at most num_items={self.num_items}, got {position}")
        self._resume_at = self.position = position
