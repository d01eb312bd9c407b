"""The same JSON-lines IterableDataset, each worker keeping every num_workers-th line: no duplicates.

Origin: modelled on the torch.utils.data IterableDataset documentation's fix (split the work in __iter__ by
get_worker_info()), striding over lines instead of the documentation's start/end ranges.
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from doctor_corpus import stream_unsharded

EXPECTED: frozenset[str] = frozenset()
FAST = False  # make bench runs every case; make test runs a shorter subset


def make_loader() -> DataLoader:
    """1024 lines, 2 workers, each its own lines."""
    return DataLoader(stream_unsharded.JsonLines(stream_unsharded.jsonl(), shard=True), batch_size=32, num_workers=2,
                      persistent_workers=True)
