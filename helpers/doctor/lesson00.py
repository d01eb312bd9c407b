"""The doctor's rules whose fixes lesson 00 teaches: processes against usable cores, shared memory for batches in flight."""
from __future__ import annotations

from helpers.doctor.findings import Finding, fmt_bytes
from helpers.doctor.measure import ranks_on_node, shm_free_bytes
from helpers.doctor.registry import Observation, finding, rule
from helpers.env import usable_cpus, workers_per_rank

SHM_WARN_SHARE = 0.5  # batches in flight take this share of free /dev/shm: warning; over all of it: error


@rule("workers-oversubscribed", severities=("warning", "info"), phase="static", planted="oversubscribed",
      taught_in=("00_setup_check", "6. How many processes will your loaders start?"),
      thresholds={"PROCESSES_OVER_CORES": (1, "processes (ranks x (1 + workers)) over the usable cores: more warns")})
def workers_oversubscribed(obs: Observation) -> Finding | None:
    """More loader processes than cores: a count, not a measurement (the sweep measures)."""
    ranks, cores, workers = ranks_on_node(), usable_cpus(), obs.loader.num_workers
    processes = ranks * (1 + workers)
    advice = workers_per_rank(ranks, cores)
    obs.measured.update(usable_cores=cores, ranks_on_node=ranks, processes=processes, workers_per_rank_rule=advice)
    if processes > cores + 1:
        return finding(
            "workers-oversubscribed", "warning",
            f"{ranks} rank(s) x (1 + {workers} workers) = {processes} processes on {cores} usable cores: the workers take "
            "turns on the cores, and each holds its batches in memory",
            f"use at most {advice} worker(s) per rank here (all processes at most one more than the cores), or measure "
            "more with a sweep (lesson 03)",
            processes=processes, usable_cores=cores, num_workers=workers, ranks=ranks, advised=advice)
    if processes > cores:
        return finding(
            "workers-oversubscribed", "info",
            f"{processes} processes on {cores} usable cores: {processes - cores} over, within the course's rule (at most "
            "one over, as the main process mostly waits for batches)",
            "no change needed unless the sweep or the data-wait share says otherwise",
            processes=processes, usable_cores=cores, num_workers=workers, ranks=ranks, advised=advice)
    return None


@rule("shm-too-small", severities=("error", "warning"), phase="pass", planted="shm_too_small",
      taught_in=("00_setup_check", "3. Where worker batches go: `/dev/shm`"),
      thresholds={"SHM_WARN_SHARE": (SHM_WARN_SHARE, "share of free /dev/shm the batches in flight may take")})
def shm_too_small(obs: Observation) -> Finding | None:
    """Batches in flight (size x prefetch_factor x workers) against free /dev/shm."""
    workers = obs.loader.num_workers
    if workers == 0 or not obs.batch_bytes:
        return None
    free = shm_free_bytes()
    if free is None:
        obs.skipped["shm-too-small"] = "no /dev/shm on this system"
        return None
    prefetch = obs.loader.prefetch_factor or 2
    in_flight = obs.batch_bytes * prefetch * workers
    obs.measured.update(shm_free_bytes=free, batch_bytes=obs.batch_bytes, bytes_in_flight=in_flight)
    if in_flight <= SHM_WARN_SHARE * free:
        return None
    return finding(
        "shm-too-small", "error" if in_flight > free else "warning",
        f"{fmt_bytes(obs.batch_bytes)} per batch x prefetch_factor {prefetch} x {workers} workers = {fmt_bytes(in_flight)} "
        f"in shared memory, against {fmt_bytes(free)} free in /dev/shm",
        "give /dev/shm more room (Docker: --shm-size=8g or --ipc=host), or lower batch_size, prefetch_factor or num_workers",
        batch_bytes=obs.batch_bytes, bytes_in_flight=in_flight, shm_free_bytes=free)
