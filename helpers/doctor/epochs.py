"""What the ledger rules read (lesson 09): whole epochs per rank through a ledger, set_epoch as a loop calls it, fresh launches.

The doctor reads, when asked (`diagnose(..., epochs=2, ranks=R, resume=True, make_loader=...)`), whole epochs through
`helpers.ledger`, calling `set_epoch(epoch)` before each on the loader's sampler, batch sampler, the sampler inside that
and its dataset (what has one), as a training loop does. Ranks are read one after another in this process, each from
`make_loader(rank=r, world_size=R)`. A loader with workers reads with the doctor's timeout on each batch; a worker-less
one is read here without one (the first pass read it already).
"""
from __future__ import annotations

import contextlib
import hashlib
import math
import random
import time
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, DistributedSampler

from helpers.batches import leaves
from helpers.doctor.measure import KEY_KEYS, length
from helpers.doctor.measure import summary as summary_of
from helpers.doctor.reading import LoaderFailed, stop_workers
from helpers.doctor.registry import Observation
from helpers.ledger import Ledger, Watched, copy_class
from helpers.rebuild import rebuild

DEPTH = 4  # how many samplers deep a sampler wrapped in samplers (`.sampler`) is looked into
STABLE_SHARE = 0.5  # a stream's ids must repeat this share of a reference epoch, else they are not ids (random transforms)
RESUME_EPOCHS = 2  # the resume check reads epochs 0 and 1


def item_id(item: Any) -> Hashable:
    """A streamed item's id: a dict's "__key__", "key" or "id" when it has one, else a hash of its first tensor or array."""
    if isinstance(item, dict):
        for key in KEY_KEYS:
            if key in item:
                return item[key]  # the ledger makes it a plain value
    found = next((leaf for leaf in leaves(item) if isinstance(leaf, (torch.Tensor, np.ndarray))), None)
    if isinstance(found, torch.Tensor):
        data = found.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    elif found is not None:
        data = np.ascontiguousarray(found).tobytes()
    else:
        data = repr(item).encode()
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def called_parts(loader: DataLoader) -> list[tuple[str, Any]]:
    """What a training loop calls set_epoch on, each once: the loader's sampler, batch sampler, the sampler inside it, dataset."""
    found: list[tuple[str, Any]] = []
    for path, part in (("loader.sampler", loader.sampler), ("loader.batch_sampler", loader.batch_sampler),
                       ("loader.batch_sampler.sampler", getattr(loader.batch_sampler, "sampler", None)),
                       ("loader.dataset", loader.dataset)):
        if part is not None and callable(getattr(part, "set_epoch", None)) and all(part is not p for _, p in found):
            found.append((path, part))
    return found


def inner_parts(loader: DataLoader) -> list[tuple[str, Any]]:
    """Every sampler the loader holds, those wrapped in others included (`.sampler`, DEPTH deep), and its dataset."""
    found: list[tuple[str, Any]] = []

    def visit(path: str, part: Any, depth: int) -> None:
        if part is None or depth > DEPTH or any(part is p for _, p in found):
            return
        found.append((path, part))
        visit(path + ".sampler", getattr(part, "sampler", None), depth + 1)

    visit("loader.sampler", loader.sampler, 0)
    visit("loader.batch_sampler", loader.batch_sampler, 0)
    return found + [("loader.dataset", loader.dataset)]


def by_chance(loader: DataLoader) -> bool:
    """Whether a sampler draws by weight or with replacement: how often a sample comes is chance then, not exactly once."""
    return any(getattr(part, "replacement", False) is True or hasattr(part, "weights")
               for path, part in inner_parts(loader) if path != "loader.dataset")


def allowances(loaders: list[DataLoader]) -> tuple[int, int, list[str]]:
    """(samples an epoch may leave out, repeats it may deliver, why) by the loaders' own settings: drop_last and a
    DistributedSampler's padding or dropping."""
    missing = repeats = 0
    why: list[str] = []
    distributed = next((p for _, p in inner_parts(loaders[0]) if isinstance(p, DistributedSampler)), None)
    if distributed is not None:
        extra = distributed.total_size - len(distributed.dataset)  # a subclass may set total_size as it likes: clamped
        if distributed.drop_last and extra < 0:
            missing -= extra
            why.append(f"DistributedSampler(drop_last=True) leaves out {-extra}")
        elif not distributed.drop_last and extra > 0:
            repeats += extra
            why.append(f"DistributedSampler pads {extra} samples so every rank gets as many")
    dropped = 0
    for loader in loaders:
        batching = loader.batch_sampler if loader.batch_size is None else loader
        size, drop = getattr(batching, "batch_size", None), getattr(batching, "drop_last", False)
        if drop is True and isinstance(size, int) and size > 0:
            inner = getattr(loader.batch_sampler, "sampler", None) if loader.batch_size is None else loader.sampler
            count = length(inner)
            dropped += count % size if count is not None else size - 1
    if dropped:
        missing += dropped
        why.append(f"drop_last=True leaves out at most {dropped} (the last incomplete batch of each rank)")
    return missing, repeats, why


@contextlib.contextmanager
def learners(doing: str) -> Iterator[None]:
    """Your code raising inside (make_loader, set_epoch, a pass over the loader) is the loader's error, as a loop would
    meet it: LoaderFailed, which the doctor reports as loader-error."""
    started = time.perf_counter()
    try:
        yield
    except (OutOfTime, LoaderFailed):
        raise
    except Exception as exc:  # noqa: BLE001 - whatever your code raises is the finding
        raise LoaderFailed(summary_of(exc), time.perf_counter() - started, False, doing, exc) from None


def make(obs: Observation, rank: int, world_size: int | None = None) -> DataLoader:
    """Rank `rank`'s loader from `make_loader` (with rank and world_size when ranks > 1), as a fresh launch builds it."""
    world = obs.ranks if world_size is None else world_size
    with learners(f"building rank {rank}'s loader with make_loader"):
        made = obs.make_loader(rank=rank, world_size=world) if obs.ranks > 1 else obs.make_loader()  # type: ignore[misc]
        if not isinstance(made, DataLoader):
            raise TypeError(f"make_loader must return a torch.utils.data.DataLoader, got {type(made).__name__}")
    return made


def watch(ledger: Ledger, loader: DataLoader, obs: Observation, rank: int = 0) -> Watched:
    """`loader` watched by `ledger`; with workers, a copy whose every batch has the doctor's timeout, never shorter than
    1.5x the first pass's first batch (its workers' start-up: about 2 s each under forkserver on the 2-core VM, where a
    shorter timeout made a slow start a loader-error)."""
    kind = copy_class(loader)
    if loader.num_workers > 0 and type(loader).__iter__ is kind.__iter__:
        start_up = 1.5 * obs.first_batch_s if math.isfinite(obs.first_batch_s) else 0.0
        loader = rebuild(loader, timeout=max(1.0, 0.75 * obs.left(), start_up), loader_class=kind)
    return ledger.watch(loader, rank=rank, sample_id=item_id)


class OutOfTime(Exception):
    """The doctor's slot for reading epochs ended before the epoch did."""


def read_epoch(watched: Watched, loader: DataLoader, epoch: int, end: float, stop_at: int | None = None,
               parts: list[tuple[str, Any]] | None = None, label: str = "") -> dict[str, Any] | None:
    """set_epoch(epoch) on `parts` (default: what a loop calls it on), then one pass of `watched` to its end (or its state
    after `stop_at` batches)."""
    for path, part in called_parts(loader) if parts is None else parts:
        if callable(getattr(part, "set_epoch", None)):
            with learners(f"calling {path}.set_epoch({epoch})"):
                part.set_epoch(epoch)
    passing = iter(watched)
    try:
        with learners(f"reading epoch {epoch}{label} through a ledger"):
            for _ in passing:
                if time.perf_counter() > end:
                    raise OutOfTime
                if stop_at is not None and watched.step == stop_at:
                    return watched.state_dict()
    finally:
        passing.close()
    return None


@contextlib.contextmanager
def kept_epochs(parts: list[tuple[str, Any]]) -> Iterator[None]:
    """Leave each part at the epoch it was at (its `epoch` attribute, as DistributedSampler keeps it) after the doctor's
    own set_epoch calls."""
    before = [(part, part.epoch) for _, part in parts if isinstance(getattr(part, "epoch", None), int)
              and callable(getattr(part, "set_epoch", None))]
    try:
        yield
    finally:
        for part, epoch in before:
            part.set_epoch(epoch)


@dataclass
class Received:
    """What the ledger recorded over the doctor's epochs and ranks, and what the loaders' own settings allow."""

    ledger: Ledger
    loaders: list[DataLoader]
    complete: set[tuple[int, int]] = field(default_factory=set)  # (epoch, rank) read to the end
    universe: list[Hashable] | None = None  # the ids one epoch should hold; None: not known
    allowed_missing: int = 0
    allowed_repeats: int = 0
    why: list[str] = field(default_factory=list)

    @property
    def ranks(self) -> int:
        """Ranks read."""
        return len(self.loaders)

    def whole_epochs(self) -> list[int]:
        """Epochs every rank read to the end."""
        return [e for e in sorted({e for e, _ in self.complete}) if all((e, r) in self.complete for r in range(self.ranks))]

    def repeats_within_ranks(self, epoch: int) -> int:
        """Deliveries beyond once of a sample to the same rank in `epoch`."""
        return sum(len(got) - len(set(got)) for got in (self.ledger.received(epoch, r) for r in range(self.ranks)))


def received(obs: Observation) -> Received | None:
    """The epochs x ranks the doctor was asked for, read once through a ledger (the first ledger rule to run reads them)."""
    if obs.received is not None or "ledger" in obs.skipped:
        return obs.received
    try:
        obs.received = _read(obs)
    except LoaderFailed:
        obs.skipped["ledger"] = "your code raised while the doctor read the epochs: see loader-error"
        raise
    except Exception as exc:  # noqa: BLE001 - the doctor's own reading failed: say so, once
        obs.skipped["ledger"] = f"reading {obs.epochs} epoch(s) x {obs.ranks} rank(s) raised {type(exc).__name__}: {exc}"
    if obs.received is not None:
        obs.measured["ledger"] = summary(obs.received)
    return obs.received


def per_batch_s(obs: Observation) -> float:
    """Seconds per batch by the first pass (NaN when it read none)."""
    return obs.steady_batch_s if obs.batch_times_s else obs.first_batch_s


def need_s(obs: Observation, loaders: list[DataLoader], passes: float) -> float | None:
    """Seconds `passes` epochs of the largest rank take by the first pass's batch times (None: the length is unknown)."""
    sizes = [length(loader) for loader in loaders]
    if any(size is None for size in sizes) or not math.isfinite(per_batch_s(obs)):
        return None
    return 1.5 * passes * (max(sizes) * per_batch_s(obs) + obs.first_batch_s) + 0.5  # type: ignore[type-var]


def slot(obs: Observation, code: str, need: float | None, what: str) -> float | None:
    """The perf_counter time this reading must end by, or None (skipped, with the --budget that would do)."""
    if need is None:
        obs.borrow(max(obs.slot_left(), 0.6 * obs.left()))
    elif not obs.borrow(need):
        obs.skipped[code] = f"{what}: " + obs.too_short(need, obs.slot_left())
        return None
    return time.perf_counter() + obs.slot_left()


def _read(obs: Observation) -> Received | None:
    """Each rank built and read as its own process would: from the random state the reading began with (torch, random,
    numpy), each rank's carried on between its epochs; the learner's random state and epochs as they were afterwards."""
    start = Launch()
    streams = [start] * obs.ranks  # rank r's random state, as its own process would carry it
    loaders: list[DataLoader] = []
    try:
        if obs.make_loader is None:
            loaders = [obs.loader]
        for rank in range(obs.ranks if obs.make_loader is not None else 0):
            streams[rank].restore()
            loaders.append(make(obs, rank))
            streams[rank] = Launch()
        with kept_epochs([p for loader in loaders for p in called_parts(loader)]):
            return _read_ranks(obs, loaders, streams)
    finally:
        start.restore()


def _read_ranks(obs: Observation, loaders: list[DataLoader], streams: list[Launch]) -> Received | None:
    passes = obs.epochs * len(loaders) + (1 if obs.iterable else 0)
    started = time.perf_counter()
    end = slot(obs, "ledger", need_s(obs, loaders, passes), f"reading {obs.epochs} whole epoch(s) x {len(loaders)} rank(s)")
    if end is None:
        return None
    got = Received(Ledger(), loaders)
    got.allowed_missing, got.allowed_repeats, got.why = allowances(loaders)
    watched = [watch(got.ledger, loader, obs, rank) for rank, loader in enumerate(loaders)]
    try:
        for epoch in range(obs.epochs):
            for rank, (loader, seen) in enumerate(zip(loaders, watched)):
                streams[rank].restore()
                read_epoch(seen, loader, epoch, end, label=f" of rank {rank}")
                streams[rank] = Launch()
                got.complete.add((epoch, rank))
        got.universe = _universe(obs, loaders[0], end)
    except OutOfTime:
        done = f"{len(got.complete)} of {obs.epochs * len(loaders)} (epoch, rank) passes"
        obs.skipped["ledger"] = (f"the epochs did not end within the {end - started:.1f} s "
                                 f"slot ({done} read): give a larger --budget (budget_s), or a smaller dataset")
    finally:
        for seen in watched:
            stop_workers(seen.loader)
    return got


def _universe(obs: Observation, loader: DataLoader, end: float) -> list[Hashable] | None:
    """The ids one epoch should hold: a map-style dataset's indices; for a stream, one epoch read without workers or ranks."""
    if not obs.iterable:
        return list(range(len(loader.dataset)))
    single = make(obs, 0, world_size=1) if obs.make_loader is not None and obs.ranks > 1 else loader
    plain = Ledger()
    read_epoch(plain.watch(rebuild(single, num_workers=0, loader_class=copy_class(single)), sample_id=item_id), single, 0, end)
    return list(dict.fromkeys(plain.received(0)))


def summary(got: Received) -> dict[str, Any]:
    """The ledger's numbers per epoch (steps, samples and distinct samples per rank, missing, overlap) for --json."""
    epochs = {}
    for epoch in got.whole_epochs():
        counts = got.ledger.counts(epoch)
        epochs[str(epoch)] = {
            "steps": {str(r): n for r, n in got.ledger.steps(epoch, ranks=range(got.ranks)).items()},
            "samples": {str(r): len(got.ledger.received(epoch, r)) for r in range(got.ranks)},
            "distinct": len(counts),
            "missing": None if got.universe is None else len(set(got.universe) - set(counts)),
            "repeats_within_ranks": got.repeats_within_ranks(epoch),
            "overlap": {f"{a}-{b}": n for (a, b), n in got.ledger.overlap(epoch).items()},
        }
    return {"epochs_read": len(got.whole_epochs()), "ranks": got.ranks, "per_epoch": epochs,
            "set_epoch_called_on": [f"{path} ({type(part).__name__})" for path, part in called_parts(got.loaders[0])],
            "allowed_missing": got.allowed_missing, "allowed_repeats": got.allowed_repeats, "allowed_because": got.why}


def ids_stable(obs: Observation, code: str, got: Received) -> bool:
    """A stream's ids name samples: epoch 0 holds at least STABLE_SHARE of a plain reading's ids (hashes of randomly
    transformed items do not). Skips the calling rule with the reason when they do not."""
    if not obs.iterable or got.universe is None or not got.whole_epochs():
        return True
    shared = len(set(got.universe) & set(got.ledger.counts(got.whole_epochs()[0])))
    if shared >= STABLE_SHARE * len(got.universe):
        return True
    obs.skipped[code] = (f"the stream's items carry no id and hashes of their first tensor do not repeat ({shared} of "
                             f"{len(got.universe)} in a second reading): random transforms? yield dicts with an 'id'")
    return False


def chance_skip(obs: Observation, code: str, got: Received) -> bool:
    if by_chance(got.loaders[0]):
        obs.skipped[code] = ("a sampler draws by weight or with replacement: how often each sample comes is chance, not "
                             "exactly once (compare counts with their expectation: lesson 09 section 5)")
        return True
    return False


class Launch:
    """The random state a fresh launch of the training script starts with: saved once, restored before each launch."""

    def __init__(self) -> None:
        self.state = (torch.random.get_rng_state(), random.getstate(), np.random.get_state())

    def restore(self) -> None:
        torch.random.set_rng_state(self.state[0])
        random.setstate(self.state[1])
        np.random.set_state(self.state[2])


def launch(obs: Observation, start: Launch, end: float, stop: tuple[int, int | None] | None = None,
           state: dict[str, Any] | None = None) -> tuple[Ledger, dict[str, Any] | None]:
    """One run of rank 0 from a fresh loader (and a loaded `state`): epochs up to RESUME_EPOCHS, or up to `stop` =
    (epoch, batches; None: its end), where it returns the state a checkpoint there would save."""
    start.restore()
    loader = make(obs, 0)
    ledger = Ledger()
    seen = watch(ledger, loader, obs)
    if state is not None:
        seen.load_state_dict(state)
    try:
        for epoch in range(seen.epoch, RESUME_EPOCHS):
            saved = read_epoch(seen, loader, epoch, end, stop_at=stop[1] if stop and stop[0] == epoch else None)
            if saved is not None or (stop is not None and stop == (epoch, None)):
                return ledger, saved if saved is not None else seen.state_dict()
    finally:
        stop_workers(seen.loader)
    return ledger, None
