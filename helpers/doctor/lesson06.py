"""The doctor's rule whose fix lesson 06 teaches: an IterableDataset every worker reads in full."""
from __future__ import annotations

import time

from helpers.doctor.findings import Finding
from helpers.doctor.measure import identities
from helpers.doctor.reading import LoaderFailed, batches
from helpers.doctor.registry import Observation, finding, rule
from helpers.rebuild import rebuild

DUPLICATE_SHARE = 0.2  # samples delivered more than once, beyond what num_workers=0 delivers


@rule("iterable-duplicates", severities=("error",), phase="measure", budget=1.0, planted="duplicates",
      applies=lambda obs: obs.iterable and obs.loader.num_workers >= 2,
      taught_in=("06_streaming_data", "1. The duplication bug"),
      thresholds={"DUPLICATE_SHARE": (DUPLICATE_SHARE, "share of repeated samples beyond num_workers=0's")})
def iterable_duplicates(obs: Observation) -> Finding | None:
    """Repeated samples across workers, against the repeats the same stream has with num_workers=0."""
    ids = obs.identities
    if not obs.iterable or obs.loader.num_workers < 2:
        return None
    if len(ids) < 4:
        obs.skipped["iterable-duplicates"] = "too few samples read to compare"
        return None
    share = 1 - len(set(ids)) / len(ids)
    baseline_ids: list[str] = []
    if share > 0 and obs.slot_left() > 0.5:
        try:
            for _, batch in batches(rebuild(obs.loader, num_workers=0), time.perf_counter() + obs.slot_left() - 0.2, 10_000,
                                    stop_after_samples=len(ids)):
                baseline_ids.extend(identities(batch))
        except LoaderFailed:
            pass
        baseline_ids = baseline_ids[:len(ids)]
    baseline = 1 - len(set(baseline_ids)) / len(baseline_ids) if baseline_ids else 0.0
    obs.measured.update(duplicate_share=share, duplicate_share_num_workers_0=baseline if baseline_ids else None)
    if share - baseline < DUPLICATE_SHARE:
        return None
    factor = len(ids) / len(set(ids))
    return finding(
        "iterable-duplicates", "error",
        f"{len(ids)} samples from {obs.loader.num_workers} workers held only {len(set(ids))} distinct ones "
        f"(each {factor:.1f} times on average); with num_workers=0, {baseline:.0%} were repeats",
        "shard the IterableDataset in __iter__ by get_worker_info() (and by rank under DDP), e.g. helpers.streaming.ShardedStream (lesson 06)",
        samples=len(ids), distinct=len(set(ids)), duplicate_share=share, baseline_share=baseline)
