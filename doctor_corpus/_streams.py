"""Streams the ledger cases share: shards split over ranks and workers, and a shuffle buffer that saves its position (lesson 09)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import IterableDataset, get_worker_info

SPLITS = ("stride", "slices")  # shards[w::n], or equal slices of len // n (the remainder never read)


class ShardStream(IterableDataset):
    """Items {"id": (shard, offset), "x"} of `sizes[s]` items per shard; shards dealt to ranks by stride, then to workers
    by `split`; `seed` shuffles the shards' order per epoch (set_epoch) when given."""

    def __init__(self, sizes: list[int], split: str = "stride", rank: int = 0, world_size: int = 1,
                 seed: int | None = None) -> None:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        self.sizes, self.split, self.rank, self.world_size, self.seed = list(sizes), split, rank, world_size, seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """The epoch whose shard order the next pass reads (with a seed)."""
        self.epoch = epoch

    def __iter__(self) -> Iterator[dict[str, Any]]:
        shards = list(range(len(self.sizes)))
        if self.seed is not None:
            order = torch.randperm(len(shards), generator=torch.Generator().manual_seed(self.seed * 1000 + self.epoch))
            shards = [shards[i] for i in order.tolist()]
        mine = shards[self.rank::self.world_size]
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        if self.split == "stride":
            mine = mine[worker::workers]
        else:
            share = len(mine) // workers
            mine = mine[worker * share:(worker + 1) * share]
        for shard in mine:
            for offset in range(self.sizes[shard]):
                yield {"id": (shard, offset), "x": torch.tensor([float(shard * 1000 + offset)])}


class BufferedStream(IterableDataset):
    """Items {"id", "x"} of a source of `n` read through a shuffle buffer of `buffer` items. Its state is the source
    position and the items handed out; with `keep_buffer` also the buffer's content, else a resumed pass refills the
    buffer from the source and the items that were in it never come (huggingface/datasets#7444 warns of exactly this)."""

    def __init__(self, n: int = 240, buffer: int = 16, keep_buffer: bool = False) -> None:
        self.n, self.buffer, self.keep_buffer = n, buffer, keep_buffer
        self.position = self.yielded = 0
        self.pending: list[int] = []  # the buffer, as a pass left it (or a state restored it)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        while self.position < self.n or self.pending:
            while len(self.pending) < self.buffer and self.position < self.n:
                self.pending.append(self.position)
                self.position += 1
            item = self.pending.pop((self.yielded * 7919) % len(self.pending))  # a fixed shuffle of the buffer
            self.yielded += 1
            yield {"id": item, "x": torch.tensor([float(item)])}
        self.position = self.yielded = 0  # the epoch ended: the next pass starts the source again

    def state_dict(self) -> dict[str, Any]:
        """The source position and items handed out (and the buffer's content with keep_buffer)."""
        state: dict[str, Any] = {"position": self.position, "yielded": self.yielded}
        if self.keep_buffer:
            state["buffer"] = list(self.pending)
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a saved state: the buffer restored only if it was saved."""
        self.position, self.yielded = state["position"], state["yielded"]
        self.pending = list(state.get("buffer", []))
