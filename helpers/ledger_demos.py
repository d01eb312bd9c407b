"""Lesson 09's demos: streams that shuffle per epoch, a framework's sampler swap, and the runs the ledger watches (lesson 09).

`EpochStream` keeps its epoch in a plain attribute (the `set_epoch` trap with persistent workers), `SharedEpochStream`
in shared memory (the fix); `rank_rows` runs a watched loader on each DDP rank; `distribute` replaces a loader's
sampler as a framework's DDP set-up may; `simulate` is the widget's run of epochs, ranks and resumes.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, get_worker_info

from helpers._validate import as_int, short
from helpers.ledger import Ledger
from helpers.rebuild import rebuild

LIMIT = 2**31  # seeds, epochs and sizes stay below this: (seed, epoch) -> one generator seed, one to one


def _below_limit(name: str, value: Any) -> int:
    value = as_int(name, value, minimum=0)
    if value >= LIMIT:
        raise ValueError(f"{name} must be below 2**31, got {value!r}")
    return value


def _epoch_order(num_items: int, seed: int, epoch: int) -> list[int]:
    """The items of one epoch in their shuffled order: a permutation seeded by (seed, epoch)."""
    generator = torch.Generator().manual_seed(seed * LIMIT + epoch)
    return torch.randperm(num_items, generator=generator).tolist()


class EpochStream(IterableDataset):
    """Items {"id", "x"} shuffled per epoch, split over workers; epoch in an attribute (lesson 09).

    Each worker reads its own copy of this object, made when the worker started: with persistent
    workers a later `set_epoch` in the main process changes the main process's copy only. One stream
    for one rank: it does not split its items over ranks.
    """

    def __init__(self, num_items: int, seed: int = 0) -> None:
        self.num_items = as_int("num_items", num_items, minimum=1)
        if self.num_items >= LIMIT:
            raise ValueError(f"num_items must be below 2**31, got {num_items!r}")
        self.seed = _below_limit("seed", seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next pass reads."""
        self.epoch = _below_limit("epoch", epoch)

    def current_epoch(self) -> int:
        """The epoch this process's copy will read."""
        return self.epoch

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        order = _epoch_order(self.num_items, self.seed, self.current_epoch())
        for item in order[worker::workers]:
            yield {"id": item, "x": torch.tensor([float(item)])}


class SharedEpochStream(EpochStream):
    """EpochStream, its epoch in shared memory: persistent workers see set_epoch (lesson 09)."""

    def __init__(self, num_items: int, seed: int = 0) -> None:
        # workers inherit this memory itself, not a copy of it
        self._shared = torch.zeros((), dtype=torch.int64).share_memory_()
        super().__init__(num_items, seed)

    @property
    def epoch(self) -> int:
        """The epoch in shared memory (assigning it is set_epoch)."""
        return int(self._shared)

    @epoch.setter
    def epoch(self, value: int) -> None:
        self._shared.fill_(_below_limit("epoch", value))

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch, in memory every worker reads when its next pass starts."""
        self.epoch = epoch


def rank_rows(num_items: int, epochs: int, num_workers: int = 2,
              set_epoch: bool = True) -> list[tuple]:
    """On each DDP rank (helpers.ddp.run): a watched DistributedSampler loader's rows (lesson 09).

    The loader has `num_workers` persistent workers and batches of 4; the loop runs `epochs` epochs,
    calling the sampler's set_epoch at the top of each when `set_epoch`; merge the ranks' rows with
    Ledger.from_rows.
    """
    import torch.distributed as dist
    from torch.utils.data import TensorDataset

    num_items, epochs = as_int("num_items", num_items, minimum=1), as_int("epochs", epochs, minimum=1)
    num_workers = as_int("num_workers", num_workers, minimum=0)
    if not isinstance(set_epoch, bool):
        raise TypeError(f"set_epoch must be True or False, got {short(set_epoch)}")
    if not (dist.is_available() and dist.is_initialized()):
        raise ValueError("rank_rows runs on DDP ranks: call it through helpers.ddp.run(ledger_demos.rank_rows, ...)")
    dataset = TensorDataset(torch.arange(num_items, dtype=torch.float32).unsqueeze(1))
    sampler = DistributedSampler(dataset, shuffle=True, seed=0)  # rank, world: process group
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=num_workers,
                        persistent_workers=num_workers > 0)
    ledger = Ledger()
    watched = ledger.watch(loader, rank=dist.get_rank())
    for epoch in range(epochs):
        if set_epoch:
            sampler.set_epoch(epoch)
        for _ in watched:
            pass  # a training step would go here
    return ledger.to_rows()


def distribute(loader: DataLoader, rank: int, world_size: int) -> DataLoader:
    """`loader` with a shuffled DistributedSampler as its sampler, as DDP set-ups may (lesson 09).

    Every other setting is kept. A loader with its own batch_sampler, or over an IterableDataset,
    has no sampler to replace: refused.
    """
    if not isinstance(loader, DataLoader):
        raise TypeError(f"loader must be a torch.utils.data.DataLoader, got {short(loader)}")
    if isinstance(loader.dataset, IterableDataset):
        raise TypeError(f"loader: its dataset is an IterableDataset ({type(loader.dataset).__name__}), which has no "
                        "sampler to replace")
    if loader.batch_size is None:
        raise ValueError("loader: it has its own batch_sampler (batch_size is None), which this replacement would drop")
    world_size = as_int("world_size", world_size, minimum=1)
    if world_size >= LIMIT:
        raise ValueError(f"world_size must be below 2**31, got {world_size!r}")
    rank = as_int("rank", rank, minimum=0)
    if rank >= world_size:
        raise ValueError(f"rank must be below world_size={world_size}, got {rank}")
    sampler = DistributedSampler(loader.dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=0)
    return rebuild(loader, sampler=sampler, loader_class=type(loader))


RESUMES = ("none", "at the epoch boundary", "re-run the saved epoch")


def simulate(num_items: int, ranks: int, epochs: int, set_epoch: bool = True, resume: str = "none") -> Ledger:
    """The widget's run: per rank, a watched DistributedSampler loader for `epochs` epochs, resumed as `resume` says (lesson 09).

    One process, no workers; "none" runs straight through, the others stop after epoch 0 with a StatefulDataLoader
    checkpoint and resume from it, at the next epoch or (the bug) at the epoch just finished. Returns the merged ledger.
    """
    from torchdata.stateful_dataloader import StatefulDataLoader

    num_items, ranks = as_int("num_items", num_items, minimum=1), as_int("ranks", ranks, minimum=1)
    epochs = as_int("epochs", epochs, minimum=1)
    if not isinstance(set_epoch, bool):
        raise TypeError(f"set_epoch must be True or False, got {short(set_epoch)}")
    if resume not in RESUMES:
        raise ValueError(f"resume must be one of {RESUMES}, got {short(resume)}")
    ledgers = []
    for rank in range(ranks):
        ledger = Ledger()

        def loop(first: int, state: dict | None, stop_after: int | None) -> dict:
            sampler = DistributedSampler(range(num_items), num_replicas=ranks, rank=rank, shuffle=True, seed=0)
            watched = ledger.watch(StatefulDataLoader(range(num_items), batch_size=4, sampler=sampler), rank=rank)
            if state is not None:
                watched.load_state_dict(state)
            for epoch in range(first, epochs):
                if set_epoch:
                    sampler.set_epoch(epoch)
                for _ in watched:
                    pass
                if epoch == stop_after:
                    return {"epoch": epoch + 1, "loader": watched.state_dict()}
            return {}

        if resume == "none":
            loop(0, None, None)
        else:
            saved = loop(0, None, 0)  # a checkpoint after epoch 0's last batch, then the job stops
            first = saved["epoch"] if resume == "at the epoch boundary" else saved["epoch"] - 1
            loop(first, saved["loader"], None)
        ledgers.append(ledger)
    return Ledger.merged(ledgers)
