"""A JSON-lines IterableDataset that reads its whole file in __iter__, read by 2 workers: every worker yields it all.

Origin: modelled on the torch.utils.data IterableDataset documentation, which warns that with num_workers > 0 each
worker gets a replica of the dataset and duplicates data unless __iter__ splits it by get_worker_info(); here a
line-by-line text reader (the common "large file" pattern of forum threads) without that split.
"""
from __future__ import annotations

import json

import torch
from torch.utils.data import DataLoader, IterableDataset

from doctor_corpus import _data

EXPECTED = frozenset({"iterable-duplicates"})
FAST = False  # make bench runs every case; make test runs a shorter subset


def jsonl(n: int = 1024) -> str:
    """A JSON-lines file of {"id", "tokens" (8 ints), "label"}, made once."""
    path = _data.workdir() / f"stream-{n}.jsonl"
    if not path.exists():
        generator = torch.Generator().manual_seed(0)
        lines = (json.dumps({"id": i, "tokens": torch.randint(0, 1000, (8,), generator=generator).tolist(), "label": i % 2})
                 for i in range(n))
        path.write_text("\n".join(lines) + "\n")
    return str(path)


class JsonLines(IterableDataset):
    """Every line of the file, parsed; `shard` splits the lines by worker (line k goes to worker k % num_workers)."""

    def __init__(self, path: str, shard: bool) -> None:
        self.path, self.shard = path, shard

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        start, every = (info.id, info.num_workers) if self.shard and info is not None else (0, 1)
        with open(self.path) as f:
            for k, line in enumerate(f):
                if k % every == start:
                    row = json.loads(line)
                    yield {"id": row["id"], "tokens": torch.tensor(row["tokens"]), "label": row["label"]}


def make_loader() -> DataLoader:
    """1024 lines, 2 workers, no split."""
    return DataLoader(JsonLines(jsonl(), shard=False), batch_size=32, num_workers=2)
