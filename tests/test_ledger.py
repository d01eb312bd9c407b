"""helpers.ledger: what the loop received, checked against hand-counted deliveries and against the loader read without it."""
from __future__ import annotations

import json
import re

import pytest
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset, get_worker_info

from helpers.ledger import MAIN, Ledger, Record, default_sample_id


class Squares(Dataset):
    """Item i is (i, i * i): the id can be read back from the batch itself, independently of the ledger."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[int, int]:
        return i, i * i


class Batched(Squares):
    """The same items, fetched a batch at once (__getitems__)."""

    def __getitems__(self, indices: list[int]) -> list[tuple[int, int]]:
        return [(i, i * i) for i in indices]


class Stream(IterableDataset):
    """Items {"id": i, "x": i} for i < n; sharded over workers when `shard`, else every worker yields all (the bug)."""

    def __init__(self, n: int, shard: bool) -> None:
        self.n, self.shard = n, shard

    def __iter__(self):
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if self.shard and info else (0, 1)
        for i in range(start, self.n, step):
            yield {"id": i, "x": i}


def shuffled(dataset: Dataset, seed: int, **kwargs) -> DataLoader:
    return DataLoader(dataset, batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(seed), **kwargs)


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("kind", [Squares, Batched])
def test_the_loop_gets_the_same_batches_and_the_ledger_their_indices(workers, kind):
    """Read twice with the same seed, the watched loader yields the plain loader's batches; the ledger's ids are the
    first column of each batch (the dataset puts the index there), each index once per epoch."""
    once = shuffled(kind(22), 7, num_workers=workers, persistent_workers=workers > 0)  # persistence decides
    plain = [b[0].tolist() for _ in range(2) for b in once]  # ... when the shared generator is drawn from
    ledger = Ledger()
    watched = ledger.watch(shuffled(kind(22), 7, num_workers=workers, persistent_workers=workers > 0))
    seen = [b[0].tolist() for _ in range(2) for b in watched]
    assert seen == plain
    assert ledger.received(0) + ledger.received(1) == [i for batch in seen for i in batch]
    assert ledger.epochs() == [0, 1] and all(ledger.coverage(e, 22).exactly_once for e in (0, 1))
    assert ledger.steps(0) == {0: 6}  # 22 samples in batches of 4: 5 full and one of 2
    readers = ledger.per_worker(0)
    assert sum(readers.values()) == 22 and set(readers) == ({(0, MAIN)} if workers == 0 else {(0, 0), (0, 1)})
    if workers:
        assert readers == {(0, 0): 12, (0, 1): 10}  # batches go to the workers in turn: 3 + 3 batches, the last of 2 samples


def test_two_ranks_in_one_process_show_distributed_samplers_padding_and_the_missing_set_epoch():
    """DistributedSampler over 5 samples and 2 ranks pads to 6 with the first index of its order (torch's own rule): by
    hand, without shuffling, rank 0 gets 0 2 4 and rank 1 gets 1 3 0. Without set_epoch a shuffled epoch repeats."""
    ledger = Ledger()
    for rank in (0, 1):
        sampler = DistributedSampler(Squares(5), num_replicas=2, rank=rank, shuffle=False)
        for _ in ledger.watch(DataLoader(Squares(5), batch_size=2, sampler=sampler), rank=rank):
            pass
    assert ledger.received(0, 0) == [0, 2, 4] and ledger.received(0, 1) == [1, 3, 0]
    coverage = ledger.coverage(0, 5)
    assert coverage.repeated == {0: 2} and not coverage.missing and not coverage.unexpected and coverage.delivered == 6
    assert ledger.overlap(0) == {(0, 1): 1} and ledger.steps(0) == {0: 2, 1: 2}
    # a head line, then one line per kind (a newcomer saw one wrapped line break inside "0 not" / "expected []")
    assert str(coverage) == ("epoch 0: 6 delivered for 5 samples:\n  0 never delivered\n  1 more than once {0: 2}\n"
                             "  0 not expected")
    seven = Ledger([Record(0, 0, 0, 0, i) for i in (0, 1, 2, 3, 4, 5, 6)])  # 7 unexpected samples: 5 shown, and said so
    assert str(seven.coverage(0, 0)).splitlines()[-1] == "  7 not expected [0, 1, 2, 3, 4] (the first 5)"

    for calls_set_epoch in (False, True):
        ledger, sampler = Ledger(), DistributedSampler(Squares(64), num_replicas=2, rank=0, shuffle=True, seed=3)
        watched = ledger.watch(DataLoader(Squares(64), batch_size=8, sampler=sampler))
        for epoch in range(2):
            if calls_set_epoch:
                sampler.set_epoch(epoch)
            for _ in watched:
                pass
        assert ledger.same_order(0, 1) is not calls_set_epoch


def test_verdicts_on_a_hand_written_ledger():
    ledger = Ledger()
    ledger.add(0, 0, 0, ["a", "b"], [0, 1])
    ledger.add(0, 1, 0, ["b", "c"])
    ledger.add(0, 1, 1, ["z"])
    coverage = ledger.coverage(0, ["a", "b", "c", "d"])
    assert (coverage.missing, coverage.repeated, coverage.unexpected, coverage.delivered) == (["d"], {"b": 2}, ["z"], 5)
    assert not coverage.exactly_once and ledger.coverage(0, ["a", "b", "c", "z"]).repeated == {"b": 2}
    assert ledger.overlap(0) == {(0, 1): 1} and ledger.steps(0) == {0: 1, 1: 2}
    assert ledger.per_worker(0) == {(0, 0): 1, (0, 1): 1, (1, MAIN): 3}
    other = Ledger.from_rows(json.loads(json.dumps(ledger.to_rows())))
    assert other.to_rows() == ledger.to_rows() and ledger.first_difference(other) is None
    other.add(0, 1, 2, ["y"])
    assert ledger.first_difference(other) == "epoch 0, rank 1: 3 samples against 4; first differ at sample 3: [] against ['y']"
    with pytest.raises(ValueError, match="workers: one per sample, got 1 for 2 samples"):
        ledger.add(1, 0, 0, [1, 2], [0])


@pytest.mark.parametrize("shard, times", [(False, 2), (True, 1)])
def test_a_stream_read_by_two_workers_is_counted_by_the_ids_its_items_carry(shard, times):
    ledger = Ledger()
    for _ in ledger.watch(DataLoader(Stream(20, shard), batch_size=5, num_workers=2)):
        pass
    counts = ledger.counts(0)
    assert set(counts) == set(range(20)) and set(counts.values()) == {times}
    assert ledger.coverage(0, 20).exactly_once is (times == 1)


def test_resumed_mid_epoch_through_statefuldataloader_it_receives_what_the_uninterrupted_run_did():
    """A checkpoint after 2 batches of epoch 1 (torchdata's StatefulDataLoader), resumed in a fresh loader: the two
    halves together are the uninterrupted run's epochs 0 and 1; a fresh loader told only the epoch and step starts
    the epoch's order over. (The epoch after a resumed one is drawn differently from the uninterrupted run's here:
    torchdata 0.11 with a shared generator; lesson 09's business, not the ledger's.)"""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader() -> StatefulDataLoader:
        return StatefulDataLoader(Squares(20), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(5))

    whole = Ledger()
    watched = whole.watch(loader())
    for _ in range(2):
        for _ in watched:
            pass
    first, second = Ledger(), Ledger()
    watched = first.watch(loader())
    for _ in watched:
        pass
    for step, _ in enumerate(watched):
        if step == 1:
            state = watched.state_dict()
            break
    resumed = second.watch(loader())
    resumed.load_state_dict(state)
    assert (resumed.epoch, resumed.step) == (1, 2)
    for _ in resumed:
        pass
    assert Ledger.merged([first, second]).first_difference(whole) is None
    wrong = Ledger()
    again = wrong.watch(loader(), epoch=1, step=2)  # a fresh loader told only the epoch: the epoch's order starts over
    for _ in again:
        pass
    assert Ledger.merged([first, wrong]).first_difference(whole).startswith("epoch 1, rank 0: 28 samples against 20")


def test_bad_arguments_are_named():
    ledger = Ledger()
    with pytest.raises(TypeError, match="loader must be a torch.utils.data.DataLoader, got"):
        ledger.watch([1, 2, 3])
    with pytest.raises(ValueError, match="rank must be a whole number >= 0, got -1"):
        ledger.watch(DataLoader(Squares(4)), rank=-1)
    with pytest.raises(TypeError, match="sample_id must be a function of one item"):
        ledger.watch(DataLoader(Squares(4)), sample_id="id")
    with pytest.raises(ValueError, match="batch_size=None"):
        ledger.watch(DataLoader(Squares(4), batch_size=None))
    with pytest.raises(ValueError, match="the stream's items carry no id"):
        default_sample_id((1, 2))
    with pytest.raises(ValueError, match="expected must be a whole number >= 0, got -3"):
        ledger.coverage(0, -3)


def test_a_pass_stopped_early_still_ends_its_epoch():
    """break, zip or islice end a pass; the loader's next pass is a new epoch, and the ledger's too (the contract probe
    saw the next pass written into epoch 0 at step 1)."""
    ledger = Ledger()
    watched = ledger.watch(DataLoader(Squares(10), batch_size=2))
    for _ in watched:
        break
    for _ in zip(range(2), watched):
        pass
    list(watched)
    assert ledger.epochs() == [0, 1, 2] and ledger.steps(0) == {0: 1} and ledger.steps(1) == {0: 2} and ledger.steps(2) == {0: 5}
    assert ledger.received(0) == [0, 1] and ledger.received(1) == [0, 1, 2, 3] and ledger.coverage(2, 10).exactly_once


def test_a_rank_that_received_nothing_counts_zero_steps():
    """4 ranks, 3 single-sample batches: rank 3 gets none, the hang DDP would show. Gathered as rows, a rank with no row
    appears only when the ranks are named."""
    ledger = Ledger()
    for rank in range(4):
        for _ in ledger.watch(DataLoader(Squares(3), batch_sampler=[[rank]] if rank < 3 else []), rank=rank):
            pass
    assert ledger.steps(0) == {0: 1, 1: 1, 2: 1, 3: 0}
    gathered = Ledger.from_rows(ledger.to_rows())
    assert gathered.steps(0) == {0: 1, 1: 1, 2: 1} and gathered.steps(0, ranks=range(4)) == {0: 1, 1: 1, 2: 1, 3: 0}
    ledger.add(1, 0, 0, [5])
    ledger.add(1, 0, 1, [])  # an empty batch is still a step
    ledger.add(1, 0, 2, [6])
    assert ledger.steps(1)[0] == 3


def test_ids_are_plain_values_whatever_the_stream_yields():
    """Tensor ids count by value, not by object, and rows survive JSON, nested tuples too."""

    class TensorIds(IterableDataset):
        def __iter__(self):
            for i in range(10):
                yield {"id": torch.tensor(i % 5), "x": torch.zeros(1)}

    ledger = Ledger()
    for _ in ledger.watch(DataLoader(TensorIds(), batch_size=5)):
        pass
    assert ledger.counts(0) == {i: 2 for i in range(5)}
    ledger.add(1, 0, 0, [(0, (3, 4))])
    back = Ledger.from_rows(json.loads(json.dumps(ledger.to_rows())))
    assert back.to_rows() == ledger.to_rows() and back.counts(1) == {(0, (3, 4)): 1}


def test_a_loader_subclass_that_changes_batches_is_refused_and_a_plain_one_is_copied():
    class Doubled(DataLoader):
        def __iter__(self):
            return (batch * 2 for batch in super().__iter__())

    class Named(DataLoader):
        def __init__(self, tag: str, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.tag = tag

    with pytest.raises(ValueError, match="loader: a Doubled changes batches in its own __iter__"):
        Ledger().watch(Doubled([10, 11], batch_size=1))
    assert [b.tolist() for b in Ledger().watch(Named("x", [10, 11], batch_size=1))] == [[10], [11]]


def test_bad_arguments_to_the_ledger_are_named():
    import numpy as np

    ledger = Ledger()
    for call, error, text in [
        (lambda: ledger.add(-1, 0, 0, [1]), ValueError, "epoch must be a whole number >= 0, got -1"),
        (lambda: ledger.add(0, 0, 0, 5), TypeError, "samples must be the batch's sample ids"),
        (lambda: ledger.add(0, 0, 0, [[1, {}]]), ValueError, "a sample id must be hashable"),
        (lambda: ledger.add(0, 0, 0, [1], [-5]), ValueError, "workers must be a whole number >= -1, got -5"),
        (lambda: Ledger([1, 2]), TypeError, "records must be Record objects"),
        (lambda: Ledger.merged(ledger), TypeError, "ledgers must be a list of Ledger objects"),
        (lambda: Ledger.merged([ledger, 5]), TypeError, "ledgers must be a list of Ledger objects"),
        (lambda: Ledger.from_rows([[0, 0, 0]]), ValueError, "rows: each row is (epoch, rank, worker, step, sample)"),
        (lambda: Ledger.from_rows([["a", 0, 0, 0, 1]]), ValueError, "epoch must be a whole number >= 0, got 'a'"),
        (lambda: ledger.coverage(0, None), TypeError, "expected must be the sample ids or their number"),
        (lambda: ledger.coverage(0, 2.5), ValueError, "expected must be a whole number >= 0, got 2.5"),
        (lambda: ledger.first_difference([]), TypeError, "other must be a Ledger"),
        (lambda: ledger.received("0"), ValueError, "epoch must be a whole number >= 0, got '0'"),
        (lambda: ledger.same_order(0, 1), ValueError, "epoch_a: epoch 0 was not recorded"),
        (lambda: ledger.watch(DataLoader(Squares(4))).state_dict(), TypeError, "state_dict: a DataLoader keeps no state"),
    ]:
        with pytest.raises(error, match=re.escape(text)):
            call()
    assert ledger.coverage(0, np.int64(3)).missing == [0, 1, 2] and ledger.watch(DataLoader(Squares(4)), rank=np.int64(1)).rank == 1
    from torchdata.stateful_dataloader import StatefulDataLoader

    with pytest.raises(ValueError, match="state must be what state_dict\\(\\) returned"):
        ledger.watch(StatefulDataLoader(Squares(4))).load_state_dict({})
