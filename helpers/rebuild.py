"""A DataLoader with another's settings and some of them changed: the doctor's sweeps, the ledger's tagged twin (lessons 07, 09)."""
from __future__ import annotations

from typing import Any

from torch.utils.data import DataLoader, IterableDataset

CHANGEABLE = frozenset({"num_workers", "timeout", "persistent_workers", "worker_init_fn", "prefetch_factor", "dataset",
                        "collate_fn", "loader_class", "sampler", "batch_sampler", "multiprocessing_context", "in_order"})


def rebuild(loader: DataLoader, **changes: Any) -> DataLoader:
    """A DataLoader with `loader`'s settings and `changes` (num_workers, timeout, persistent_workers, worker_init_fn,
    prefetch_factor, dataset, collate_fn, sampler, batch_sampler, multiprocessing_context, in_order; loader_class, e.g.
    torchdata's StatefulDataLoader, else DataLoader)."""
    unknown = sorted(set(changes) - CHANGEABLE)
    if unknown:
        raise ValueError(f"changes: rebuild cannot change {unknown}; it changes {sorted(CHANGEABLE)}")
    if "sampler" in changes and (isinstance(loader.dataset, IterableDataset) or loader.batch_size is None):
        raise ValueError("changes: sampler replaces the sampler of a loader with batch_size over a map-style dataset; "
                         "this one has an IterableDataset or its own batch_sampler")
    if "batch_sampler" in changes and (changes["batch_sampler"] is None or "sampler" in changes):
        raise ValueError(f"changes: batch_sampler must be batches of indices, without sampler (torch takes one or the "
                         f"other), got batch_sampler={changes['batch_sampler']!r}" + (" and sampler" if "sampler" in changes else ""))
    if "batch_sampler" in changes and (isinstance(loader.dataset, IterableDataset) or loader.batch_sampler is None):
        raise ValueError("changes: batch_sampler replaces the batches of a loader over a map-style dataset that makes batches; "
                         "this one has an IterableDataset or batch_size=None")
    workers = changes.get("num_workers", loader.num_workers)
    kwargs: dict[str, Any] = {
        "num_workers": workers, "collate_fn": changes.get("collate_fn", loader.collate_fn), "pin_memory": loader.pin_memory,
        "worker_init_fn": changes.get("worker_init_fn", loader.worker_init_fn), "generator": loader.generator,
        "timeout": changes.get("timeout", loader.timeout) if workers > 0 else 0,
    }
    if workers > 0:
        kwargs.update(multiprocessing_context=changes.get("multiprocessing_context", loader.multiprocessing_context),
                      prefetch_factor=changes.get("prefetch_factor") or loader.prefetch_factor,
                      persistent_workers=changes.get("persistent_workers", loader.persistent_workers))
        if loader.timeout and "timeout" in changes:
            kwargs["timeout"] = min(loader.timeout, changes["timeout"])
    if hasattr(loader, "in_order"):
        kwargs["in_order"] = changes.get("in_order", loader.in_order)
    if "batch_sampler" in changes:
        kwargs["batch_sampler"] = changes["batch_sampler"]
    elif isinstance(loader.dataset, IterableDataset):
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_size is None and getattr(loader, "_auto_collation", False):
        kwargs["batch_sampler"] = loader.batch_sampler  # a custom batch sampler
    else:
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last,
                      sampler=changes.get("sampler", loader.sampler))
    return changes.get("loader_class", DataLoader)(changes.get("dataset", loader.dataset), **kwargs)
