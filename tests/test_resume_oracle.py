"""The resume oracle (issue 36): every sampler or stream the course ships with set_epoch or state_dict, run over ranks x
epochs with a checkpoint at every kind of point, must deliver what the uninterrupted run delivers, and its documented
epoch target (each index once, equal steps per rank, windows up to rounding). The expected values come from the
uninterrupted run of a fresh object and from counting, not from the state the sampler reports about itself; through
StatefulDataLoader, what the loop received is read from a ledger (helpers.ledger) and compared sample by sample."""
from __future__ import annotations

import importlib
import inspect
import pkgutil
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import helpers
from helpers import ledger_demos, samplers, sequence_samplers, streaming
from helpers.ledger import Ledger, default_sample_id

EPOCHS = 3


@dataclass(frozen=True)
class Resumable:
    """How to build one sampler or stream for (rank, world) from drawn parameters, and what its epoch must deliver."""

    build: Callable[[dict, int, int], Any]
    params: st.SearchStrategy
    target: Callable[[dict, list[list[Any]], list[Any]], None]  # (params, each rank's epoch, a rank-0 object)


def _flat(items: list[Any]) -> list[int]:
    return [i for item in items for i in (item if isinstance(item, list) else [item])]


def _dws_target(p: dict, epochs: list[list[int]], built: Any) -> None:
    """Ranks hold disjoint blocks of one global draw; without replacement no index twice, weight-0 indices never."""
    assert all(len(e) == len(built) for e in epochs)
    global_draw = built.global_indices().tolist()
    assert sum(epochs, []) == global_draw  # rank r's part sits at [r * len, (r + 1) * len)
    zero = {i for i, w in enumerate(p["weights"]) if w == 0}
    assert not zero & set(global_draw)
    if not p["replacement"]:
        assert len(set(global_draw)) == len(global_draw)


def _bucket_target(p: dict, epochs: list[list[list[int]]], built: Any) -> None:
    """One rank: each index once; batches under batch_size or max_tokens."""
    (epoch,) = epochs
    assert sorted(_flat(epoch)) == list(range(len(p["lengths"])))
    lengths = np.asarray(p["lengths"])
    for batch in epoch:
        if p["batch_size"] is not None:
            assert 1 <= len(batch) <= p["batch_size"]
        else:
            assert len(batch) * lengths[batch].max() <= p["max_tokens"]


def _distributed_bucket_target(p: dict, epochs: list[list[list[int]]], built: Any) -> None:
    """Equal steps per rank; every index at least once; exactly the repeated_batches() batches delivered twice."""
    assert len({len(e) for e in epochs}) == 1
    delivered = [tuple(b) for e in epochs for b in e]
    assert sorted(_flat([list(b) for b in set(delivered)])) == list(range(len(p["lengths"])))
    assert len(delivered) - len(set(delivered)) == built.repeated_batches() < p["world"]


def _mixture_target(p: dict, epochs: list[list[int]], built: Any) -> None:
    """num_samples per rank, each index inside its source; windowed: each window its share rounded down or up."""
    ends = np.cumsum(p["sizes"])
    share = np.asarray(p["weights"], dtype=np.float64) / sum(p["weights"])
    for epoch in epochs:
        assert len(epoch) == p["num_samples"] and max(epoch) < ends[-1]
        if p["strategy"] != "windowed":
            continue
        source = np.searchsorted(ends, epoch, side="right")
        for start in range(0, len(epoch), p["window"]):
            part = source[start : start + p["window"]]
            counts = np.bincount(part, minlength=len(share))
            assert np.all(np.abs(counts - share * len(part)) < 1), (start, counts, share * len(part))


def _stream_target(p: dict, epochs: list[list[int]], built: Any) -> None:
    (epoch,) = epochs
    assert epoch == list(range(p["num_items"]))


def _lengths(draw_max: int = 40) -> st.SearchStrategy:
    return st.lists(st.integers(1, draw_max), min_size=1, max_size=60)


def _bucket_params() -> st.SearchStrategy:
    return _lengths().flatmap(lambda lengths: st.fixed_dictionaries({
        "lengths": st.just(lengths), "seed": st.integers(0, 5),
        "batch_size": st.one_of(st.none(), st.integers(1, 9)),
        "pool_size": st.one_of(st.none(), st.integers(1, 20)),
    }).map(lambda p: {**p, "max_tokens": None if p["batch_size"] else max(lengths) * 3}))


@st.composite
def _dws_params(draw: Callable) -> dict:
    """Weights with zeros and ties, 1-4 ranks; num_samples that a draw without replacement can serve."""
    weights = draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0, 100.0]), min_size=1, max_size=40).filter(any))
    world, replacement, drop_last = draw(st.integers(1, 4)), draw(st.booleans()), draw(st.booleans())
    drawable = sum(w > 0 for w in weights)
    most = 60 if replacement else drawable // world * world
    least = world if drop_last else 1
    if most < least:
        world, drop_last, most, least = 1, False, max(most, drawable), 1
    return {"weights": weights, "world": world, "replacement": replacement, "drop_last": drop_last,
            "seed": draw(st.integers(0, 5)), "num_samples": draw(st.integers(least, most))}


REGISTRY: dict[type, Resumable] = {
    samplers.DistributedWeightedSampler: Resumable(
        build=lambda p, rank, world: samplers.DistributedWeightedSampler(
            p["weights"], world, rank, num_samples=p["num_samples"], replacement=p["replacement"], seed=p["seed"],
            drop_last=p["drop_last"]),
        params=_dws_params(),
        target=_dws_target),
    sequence_samplers.BucketBatchSampler: Resumable(
        build=lambda p, rank, world: sequence_samplers.BucketBatchSampler(
            p["lengths"], p["batch_size"], p["max_tokens"], p["pool_size"], p["seed"]),
        params=_bucket_params().map(lambda p: {**p, "world": 1}),
        target=_bucket_target),
    sequence_samplers.DistributedBucketSampler: Resumable(
        build=lambda p, rank, world: sequence_samplers.DistributedBucketSampler(
            p["lengths"], world, rank, p["batch_size"], p["max_tokens"], p["pool_size"], p["seed"]),
        params=st.tuples(_bucket_params(), st.integers(1, 4)).map(lambda t: {**t[0], "world": t[1]}),
        target=_distributed_bucket_target),
    sequence_samplers.MixtureSampler: Resumable(
        build=lambda p, rank, world: sequence_samplers.MixtureSampler(
            p["sizes"], p["weights"], p["num_samples"], p["strategy"], p["window"], world, rank, p["seed"]),
        params=st.fixed_dictionaries({
            "sizes": st.lists(st.integers(1, 30), min_size=1, max_size=6), "seed": st.integers(0, 5),
            "strategy": st.sampled_from(sequence_samplers.MixtureSampler.STRATEGIES), "window": st.integers(1, 12),
            "num_samples": st.integers(1, 50), "world": st.integers(1, 4),
        }).flatmap(lambda p: st.lists(st.floats(0.01, 100.0), min_size=len(p["sizes"]),
                                      max_size=len(p["sizes"])).map(lambda w: {**p, "weights": w})),
        target=_mixture_target),
    streaming.SeekableCountedStream: Resumable(
        build=lambda p, rank, world: streaming.SeekableCountedStream(p["num_items"]),
        params=st.fixed_dictionaries({"num_items": st.integers(1, 30), "world": st.just(1)}),
        target=_stream_target),
}


def _epoch(thing: Any, epoch: int) -> list[Any]:
    """One epoch as a training loop reads it: set_epoch (where there is one), then iterate."""
    if hasattr(thing, "set_epoch"):
        thing.set_epoch(epoch)
    return list(thing)


def _helpers_modules() -> list[Any]:
    """Every module of the helpers package, imported (python -m entry points left out)."""
    names = [info.name for info in pkgutil.walk_packages(helpers.__path__, "helpers.")
             if not info.name.endswith("__main__")]
    return [importlib.import_module(name) for name in names]


def test_every_resumable_helper_is_registered():
    found = {cls for module in _helpers_modules()
             for cls in vars(module).values()
             if inspect.isclass(cls) and cls.__module__.startswith("helpers.") and "Protocol" not in cls.__name__
             and any(callable(getattr(cls, name, None)) for name in ("set_epoch", "state_dict"))
             and not inspect.isabstract(cls) and not cls.__name__.startswith("_")}
    missing = sorted(cls.__qualname__ for cls in found - set(REGISTRY) - set(EPOCH_ONLY)
                     if issubclass(cls, (torch.utils.data.Sampler, torch.utils.data.Dataset)))
    assert not missing, f"register these with the resume oracle: {missing}"
    resumable = [cls.__qualname__ for cls in EPOCH_ONLY if hasattr(cls, "state_dict")]
    assert not resumable, f"these now keep a state: register them with the resume oracle instead: {resumable}"


# set_epoch without a state: lesson 09's streams, whose point is where the epoch lives, resume only at an epoch's start
# (the loop calls set_epoch); mid-epoch they start the epoch again, as any stream without state_dict does.
EPOCH_ONLY = {ledger_demos.EpochStream, ledger_demos.SharedEpochStream}


def _take(items: Any, count: int) -> list[Any]:
    """`count` items by next(), never asking for one more (the loop has not yet seen the iteration stop)."""
    return [next(items) for _ in range(count)]


def _check(kind: type, p: dict, cut: tuple[int, int], second: int) -> None:
    """Uninterrupted epochs vs a run cut at (epoch, k) (k = -1: right after set_epoch of that epoch, before the
    first item; k = len: after its last item), resumed in a fresh object, and cut once more `second` items later."""
    entry = REGISTRY[kind]
    world = p["world"]
    for rank in range(world):
        reference = entry.build(p, rank, world)
        whole = [_epoch(reference, e) for e in range(EPOCHS)]
        cut_epoch, k = cut
        k = min(k, len(whole[cut_epoch]))
        run = entry.build(p, rank, world)
        got = [_epoch(run, e) for e in range(cut_epoch)]
        if hasattr(run, "set_epoch"):
            run.set_epoch(cut_epoch)
        taken = _take(iter(run), k) if k >= 0 else []
        state = run.state_dict()
        for _ in range(2):  # resume, take `second` more, checkpoint again, resume again
            resumed = entry.build(p, rank, world)
            resumed.load_state_dict(state)
            if hasattr(resumed, "set_epoch"):
                resumed.set_epoch(cut_epoch)  # the loop's top of the epoch: keeps the pending resume
            rest = iter(resumed)
            taken += _take(rest, min(second, len(whole[cut_epoch]) - len(taken)))
            state = resumed.state_dict()
        taken += list(rest)
        got.append(taken)
        got += [_epoch(resumed, e) for e in range(cut_epoch + 1, EPOCHS)]
        assert got == whole, f"rank {rank}, cut {cut}, then {second} more"
    epochs = [_epoch(entry.build(p, r, world), 1) for r in range(world)]
    first = entry.build(p, 0, world)
    _epoch(first, 1)
    entry.target(p, epochs, first)


@pytest.mark.parametrize("kind", list(REGISTRY), ids=lambda k: k.__name__)
def test_a_checkpoint_anywhere_resumes_exactly_the_rest(kind):
    @settings(max_examples=200)
    @given(p=REGISTRY[kind].params, cut_epoch=st.integers(0, EPOCHS - 1),
           k=st.one_of(st.just(-1), st.just(0), st.integers(1, 70), st.just(10**6)), second=st.integers(0, 5))
    def run(p, cut_epoch, k, second):
        # without set_epoch, "right after set_epoch" is "before the first item"
        k = 0 if k == -1 and not hasattr(kind, "set_epoch") else k
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _check(kind, p, (cut_epoch, k), second)
    run()


def _loader_case(kind: type, workers: int) -> tuple[int, Callable[[int], tuple[Any, Any]]]:
    """(ranks, make): make(rank) is a fresh (sampler-or-stream, StatefulDataLoader) pair over 40 items, batches of 2
    where the sampler yields indices; the distributed samplers over 2 ranks."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    lengths = [3, 9, 1, 7, 7, 2, 8, 5, 6, 4] * 4
    builds = {
        samplers.DistributedWeightedSampler: (2, lambda rank: samplers.DistributedWeightedSampler(
            np.linspace(1, 2, 40), 2, rank, seed=3)),
        sequence_samplers.BucketBatchSampler: (1, lambda rank: sequence_samplers.BucketBatchSampler(lengths, batch_size=4)),
        sequence_samplers.DistributedBucketSampler: (2, lambda rank: sequence_samplers.DistributedBucketSampler(
            lengths, 2, rank, max_tokens=20)),
        sequence_samplers.MixtureSampler: (2, lambda rank: sequence_samplers.MixtureSampler(
            [10, 30], [1, 1], 20, window=4, num_replicas=2, rank=rank)),
        streaming.SeekableCountedStream: (1, lambda rank: streaming.SeekableCountedStream(20)),
    }
    ranks, build = builds[kind]

    def make(rank: int) -> tuple[Any, Any]:
        thing = build(rank)
        if isinstance(thing, torch.utils.data.IterableDataset):
            return thing, StatefulDataLoader(thing, batch_size=2, num_workers=workers)
        if isinstance(next(iter(build(rank))), list):
            return thing, StatefulDataLoader(range(40), batch_sampler=thing, num_workers=workers)
        return thing, StatefulDataLoader(range(40), batch_size=2, sampler=thing, num_workers=workers)
    return ranks, make


def _train(make: Callable, rank: int, cut: tuple[int, Any] | None = None, resume: tuple[int, dict] | None = None):
    """A training loop over EPOCHS epochs, watched by a ledger: set_epoch at the top of each; with `cut` it checkpoints
    at (epoch, point), point "top" (right after set_epoch), a batch number (after that batch) or "end" (after the last
    batch), and stops. Returns the batches it received, its ledger and (the epoch to resume, the loader's state)."""
    thing, loader = make(rank)
    ledger = Ledger()
    stream = isinstance(thing, torch.utils.data.IterableDataset)
    watched = ledger.watch(loader, rank=rank, sample_id=int if stream else default_sample_id)  # a stream's items are ids
    first = 0
    if resume is not None:
        first = resume[0]
        watched.load_state_dict(resume[1])
    received = []
    for epoch in range(first, EPOCHS):
        if hasattr(thing, "set_epoch"):
            thing.set_epoch(epoch)
        if cut == (epoch, "top"):
            return received, ledger, (epoch, watched.state_dict())
        for step, batch in enumerate(watched):
            received.append(batch.tolist())
            if cut == (epoch, step):
                return received, ledger, (epoch, watched.state_dict())
        if cut == (epoch, "end"):
            return received, ledger, (epoch + 1, watched.state_dict())
    return received, ledger, None


# SeekableCountedStream is not split across workers (every worker reads every item, lesson 06): 0 workers only
LOADER_CASES = [(kind, workers) for kind in REGISTRY for workers in (0, 2)
                if not (workers and issubclass(kind, torch.utils.data.IterableDataset))]


@pytest.mark.parametrize("kind, workers", LOADER_CASES, ids=lambda v: v.__name__ if isinstance(v, type) else str(v))
def test_stateful_dataloader_resumes_what_the_loop_would_have_received(kind, workers):
    """Per rank, the ledger of a run checkpointed anywhere and resumed equals the uninterrupted run's, sample by sample;
    over the ranks (2 for the distributed samplers, without workers), every epoch has equal steps per rank and a new
    order."""
    ranks, make = _loader_case(kind, workers)
    ranks = ranks if workers == 0 else 1  # the ranks' plans do not depend on workers: 2 ranks without, rank 0 with
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchdata 0.11: "'set_vital' is deprecated"
        wholes = []
        for rank in range(ranks):
            whole, whole_ledger, _ = _train(make, rank)
            wholes.append(whole_ledger)
            assert [s for batch in whole for s in batch] == [r.sample for r in whole_ledger.records]
            for cut in [(0, "top"), (1, "top"), (1, 0), (1, 3), (0, "end"), (1, "end"), (2, "top")]:
                before, before_ledger, state = _train(make, rank, cut=cut)
                after, after_ledger, _ = _train(make, rank, resume=state)
                assert before + after == whole, f"rank {rank}, checkpoint at {cut}: {len(before)} + {len(after)} batches"
                assert Ledger.merged([before_ledger, after_ledger]).first_difference(whole_ledger) is None, (rank, cut)
    ledger = Ledger.merged(wholes)
    assert ledger.epochs() == list(range(EPOCHS)) and ledger.ranks() == list(range(ranks))
    for epoch in range(EPOCHS):
        assert len(set(ledger.steps(epoch).values())) == 1, ledger.steps(epoch)  # unequal steps hang DDP
    if hasattr(kind, "set_epoch"):
        assert not any(ledger.same_order(a, a + 1) for a in range(EPOCHS - 1))


@pytest.mark.parametrize("change, says", [
    ({"batch_size": 5}, "state has batch_size=6, but this sampler has batch_size=5"),
    ({"batch_size": None, "max_tokens": 400}, "state has batch_size=6, but this sampler has batch_size=None"),
    ({"lengths": [3, 9, 1, 7] * 10}, "state has lengths='40 values, blake2b "),
    ({"pool_size": 10}, "state has pool_size=40, but this sampler has pool_size=10"),
])
def test_a_state_of_another_plan_is_refused_naming_what_differs(change, says):
    lengths = [3, 9, 1, 7, 7, 2, 8, 5, 6, 4] * 4
    saved = sequence_samplers.BucketBatchSampler(lengths, batch_size=6)
    next(iter(saved))
    kwargs = {"lengths": lengths, "batch_size": 6, "max_tokens": None, **change}
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("(", r"\(")):
        sequence_samplers.BucketBatchSampler(**kwargs).load_state_dict(saved.state_dict())


def test_an_epoch_is_planned_once_for_len_and_iteration(monkeypatch):
    planned = []
    sampler = sequence_samplers.DistributedBucketSampler([3, 9, 1, 7, 7, 2, 8, 5, 6, 4] * 4, 2, 0, max_tokens=20)
    original = sequence_samplers.sorted_batches
    monkeypatch.setattr(sequence_samplers, "sorted_batches", lambda *a: planned.append(1) or original(*a))
    for epoch in (0, 0, 1):
        sampler.set_epoch(epoch)
        assert len(sampler) == len(list(sampler)) == len(sampler)
    sampler.load_state_dict({**sampler.state_dict(), "yielded": 2})
    assert len(list(sampler)) == len(sampler) - 2
    assert len(planned) == 2, "one plan per epoch"


def test_a_stream_state_after_its_last_item_resumes_nothing_more():
    """The loop checkpoints after every batch, the last included, before the loader says the epoch ended."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = StatefulDataLoader(streaming.SeekableCountedStream(3), batch_size=1)
        reading = iter(first)
        assert [next(reading).item() for _ in range(3)] == [0, 1, 2]
        state = first.state_dict()
        resumed = StatefulDataLoader(streaming.SeekableCountedStream(3), batch_size=1)
        resumed.load_state_dict(state)
        assert [b.item() for b in resumed] == []  # as StatefulDataLoader gives for a stream without state_dict


@pytest.mark.parametrize("make, says", [
    (lambda: samplers.DistributedWeightedSampler([1.0, 2.0], num_replicas=2),
     "rank must be given with num_replicas=2 when no process group is initialized"),
    (lambda: sequence_samplers.BucketBatchSampler([1, 2], batch_size=1, indices=[0.5]), "indices must hold whole"),
    (lambda: sequence_samplers.BucketBatchSampler([1, 2, 3], batch_size=1, indices=np.array([True, False, True])),
     "indices must hold whole"),
    (lambda: sequence_samplers.window_counts([1, -1, 1], 4, 2), "weights must be finite, non-negative"),
    (lambda: sequence_samplers.window_counts([], 4, 2), "weights must be finite, non-negative"),
    (lambda: sequence_samplers.window_counts([1, 1], 4, 0), "window must be at least 1, got 0"),
])
def test_bad_arguments_found_by_the_contract_probe_are_refused(make, says):
    with pytest.raises((ValueError, TypeError), match=says):
        make()


def test_huge_mixture_weights_are_a_mixture_not_nan():
    drawn = sequence_samplers.MixtureSampler([2, 2], [1e308, 1e308], 4)
    assert sorted(np.searchsorted([2, 4], list(drawn), side="right").tolist()) == [0, 0, 1, 1]  # half each
