"""Lesson 09's streams, the framework's sampler swap and the widget's runs: what the loop receives, counted from outside."""
from __future__ import annotations

import multiprocessing
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, WeightedRandomSampler

from helpers import ledger_demos
from helpers.ledger import Ledger

FORK = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")


def _epochs(stream, persistent: bool, workers: int = 2, epochs: int = 3) -> list[list[int]]:
    """Each epoch's ids as the loop received them, set_epoch at the top of each epoch."""
    loader = DataLoader(stream, batch_size=3, num_workers=workers, persistent_workers=persistent and workers > 0,
                        multiprocessing_context="fork" if workers else None)
    received = []
    for epoch in range(epochs):
        stream.set_epoch(epoch)
        received.append([int(i) for batch in loader for i in batch["id"]])
    return received


@pytest.mark.parametrize("kind", [ledger_demos.EpochStream, ledger_demos.SharedEpochStream])
def test_a_stream_without_workers_reshuffles_every_epoch_and_delivers_each_item_once(kind):
    epochs = _epochs(kind(20, seed=3), persistent=False, workers=0)
    assert all(sorted(e) == list(range(20)) for e in epochs)
    assert epochs[0] != epochs[1] != epochs[2]
    assert _epochs(kind(20, seed=3), persistent=False, workers=0) == epochs  # seeded


@FORK
def test_set_epoch_reaches_persistent_workers_only_through_shared_memory():
    trap = _epochs(ledger_demos.EpochStream(24), persistent=True)
    shared = _epochs(ledger_demos.SharedEpochStream(24), persistent=True)
    fresh = _epochs(ledger_demos.EpochStream(24), persistent=False)
    for epochs in (trap, shared, fresh):
        assert all(sorted(e) == list(range(24)) for e in epochs)  # 2 workers split each epoch, nothing twice
    assert trap[0] == trap[1] == trap[2]  # the workers kept the copy of epoch 0
    assert shared[0] != shared[1] != shared[2] and fresh[0] != fresh[1] != fresh[2]
    assert shared == fresh  # the same epochs' orders, read either way


def test_distribute_replaces_the_sampler_with_a_distributed_one():
    labels = torch.tensor([0] * 90 + [1] * 10)
    weights = torch.where(labels == 0, 1 / 90, 1 / 10).double()
    loader = DataLoader(TensorDataset(labels), batch_size=10,
                        sampler=WeightedRandomSampler(weights, 100, generator=torch.Generator().manual_seed(0)))
    seen = []
    for rank in range(2):
        swapped = ledger_demos.distribute(loader, rank, 2)
        assert isinstance(swapped.sampler, DistributedSampler) and swapped.sampler.rank == rank
        seen += [int(i) for (batch,) in swapped for i in batch]
    assert sorted(seen) == sorted(labels.tolist())  # every sample once over the ranks: the weights are gone


@pytest.mark.parametrize("resume, recorded", [("none", 3), ("at the epoch boundary", 3), ("re-run the saved epoch", 4)])
def test_simulate_records_the_epochs_each_resume_runs(resume, recorded):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchdata 0.11: "'set_vital' is deprecated"
        book = ledger_demos.simulate(42, 4, 3, True, resume)
    assert book.epochs() == list(range(recorded)) and book.ranks() == [0, 1, 2, 3]
    for epoch in book.epochs():  # 42 samples on 4 ranks: padded to 44, two samples twice
        coverage = book.coverage(epoch, 42)
        assert not coverage.missing and sorted(coverage.repeated.values()) == [2, 2]
        assert set(book.steps(epoch).values()) == {3}  # 11 samples per rank in batches of 4
    assert book.same_order(0, 1) == (resume == "re-run the saved epoch")


def test_simulate_without_set_epoch_repeats_every_epoch():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torchdata 0.11: "'set_vital' is deprecated"
        book = ledger_demos.simulate(12, 2, 3, False)
    assert book.same_order(0, 1) and book.same_order(1, 2)
    assert isinstance(book, Ledger)


@pytest.mark.parametrize("call, says", [
    (lambda: ledger_demos.EpochStream(0), "num_items"),
    (lambda: ledger_demos.EpochStream(4, seed=-1), "seed"),
    (lambda: ledger_demos.EpochStream(4).set_epoch(-1), "epoch"),
    (lambda: ledger_demos.SharedEpochStream(4).set_epoch(1.5), "epoch"),
    (lambda: ledger_demos.distribute("loader", 0, 2), "loader"),
    (lambda: ledger_demos.distribute(DataLoader(range(4)), 2, 2), "rank must be below world_size=2, got 2"),
    (lambda: ledger_demos.distribute(DataLoader(range(4)), 0, 0), "world_size"),
    (lambda: ledger_demos.simulate(4, 1, 2, resume="later"), "resume must be one of"),
    (lambda: ledger_demos.simulate(4, 0, 2), "ranks"),
    (lambda: ledger_demos.simulate(4, 1, 2, set_epoch=1), "set_epoch must be True or False, got 1"),
])
def test_bad_arguments_are_refused_naming_them(call, says):
    with pytest.raises((TypeError, ValueError), match=says):
        call()


def test_distribute_keeps_every_other_setting_and_refuses_what_has_no_sampler():
    def init(worker):
        pass

    dataset = TensorDataset(torch.arange(10))
    rich = DataLoader(dataset, batch_size=2, num_workers=1, persistent_workers=True, worker_init_fn=init,
                      prefetch_factor=7, timeout=5, generator=torch.Generator(), drop_last=True)
    swapped = ledger_demos.distribute(rich, 1, 2)
    kept = ("batch_size", "num_workers", "persistent_workers", "worker_init_fn", "prefetch_factor", "timeout",
            "generator", "drop_last", "collate_fn", "pin_memory")
    assert {k: getattr(swapped, k) for k in kept} == {k: getattr(rich, k) for k in kept}
    assert isinstance(swapped.sampler, DistributedSampler) and swapped.sampler.rank == 1
    from torch.utils.data import BatchSampler, SequentialSampler
    batched = DataLoader(dataset, batch_sampler=BatchSampler(SequentialSampler(dataset), 4, False))
    with pytest.raises(ValueError, match="loader: it has its own batch_sampler"):
        ledger_demos.distribute(batched, 0, 2)
    with pytest.raises(TypeError, match="loader: its dataset is an IterableDataset"):
        ledger_demos.distribute(DataLoader(ledger_demos.EpochStream(4), batch_size=2), 0, 2)


def test_shared_epoch_is_the_attribute_and_limits_are_checked_when_given():
    stream = ledger_demos.SharedEpochStream(6)
    stream.set_epoch(3)
    assert stream.epoch == stream.current_epoch() == 3
    stream.epoch = 5
    assert stream.current_epoch() == 5
    for make in (lambda: ledger_demos.EpochStream(4, seed=2**31), lambda: ledger_demos.EpochStream(4).set_epoch(2**64),
                 lambda: ledger_demos.SharedEpochStream(4).set_epoch(2**63)):
        with pytest.raises(ValueError, match="must be below 2\\*\\*31"):
            make()


def test_rank_rows_runs_only_on_ranks_and_checks_set_epoch():
    with pytest.raises(ValueError, match="helpers.ddp.run"):
        ledger_demos.rank_rows(10, 1)
    with pytest.raises(TypeError, match="set_epoch must be True or False, got 'no'"):
        ledger_demos.rank_rows(10, 1, set_epoch="no")
