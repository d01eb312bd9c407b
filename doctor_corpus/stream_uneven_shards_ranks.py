"""A sharded stream split over 2 ranks by shard, 5 shards: 3 against 2, so the ranks take different numbers of steps.

Origin: modelled on huggingface/datasets#6437 (split_dataset_by_node on an iterable dataset gives nodes different
numbers of examples when the shards differ; the user's fix was torch's Join), with shards dealt to ranks by stride.
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from doctor_corpus._streams import ShardStream

EXPECTED: frozenset[str] = frozenset({"unequal-steps"})
BUDGET_WITHOUT_FORK_S = 16  # forkserver run 6 (2-core VM): 8 s did not fit its workers' fresh start
EVIDENCE = {"unequal-steps": {"steps": {"0": 9, "1": 6}}}
FAST = True
RANKS = 2


def make_loader(rank: int = 0, world_size: int = 1) -> DataLoader:
    """5 shards of 48 items dealt to the ranks by stride, 2 workers each, batches of 16."""
    return DataLoader(ShardStream([48] * 5, rank=rank, world_size=world_size), batch_size=16, num_workers=2)
