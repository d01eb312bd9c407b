"""The doctor's ledger rules (lesson 09) beyond their planted faults: causes named, look-alikes silent, arguments checked."""
from __future__ import annotations

import json
import sys
import time

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, Sampler, TensorDataset

from doctor_corpus.planted import Sleepy
from helpers import doctor
from helpers.doctor import epochs
from helpers.ledger import Ledger
from helpers.ledger_demos import SharedEpochStream
from helpers.samplers import DistributedWeightedSampler

pytestmark = pytest.mark.usefixtures("no_process_left")  # tests/conftest.py: every worker stopped

DATA = TensorDataset(torch.arange(200, dtype=torch.float32).unsqueeze(1))


def codes(diagnosis: doctor.Diagnosis) -> set[str]:
    return {f.code for f in diagnosis.findings if f.severity != "info"}


def one(diagnosis: doctor.Diagnosis, code: str) -> doctor.Finding:
    found = [f for f in diagnosis.findings if f.code == code]
    assert len(found) == 1, str(diagnosis)
    return found[0]


class Wrapper(Sampler[int]):
    """A sampler wrapping a DistributedSampler without passing set_epoch on (it has none)."""

    def __init__(self, sampler: Sampler[int]) -> None:
        self.sampler = sampler

    def __iter__(self):
        return iter(self.sampler)

    def __len__(self) -> int:
        return len(self.sampler)


class FixedSeed(Sampler[int]):
    """Says shuffle=True and takes set_epoch, but seeds its permutation with 0 every time."""

    shuffle = True

    def __init__(self, n: int) -> None:
        self.n = n

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=torch.Generator().manual_seed(0)).tolist())

    def __len__(self) -> int:
        return self.n


def test_a_wrapper_that_hides_set_epoch_is_named_with_the_sampler_inside():
    inner = DistributedSampler(DATA, num_replicas=1, rank=0, shuffle=True, seed=0)
    found = one(doctor.diagnose(DataLoader(DATA, batch_size=20, sampler=Wrapper(inner)), epochs=2, budget_s=8), "epoch-order-repeats")
    assert found.evidence["cause"] == "not-forwarded" and found.evidence["set_epoch_called_on"] == []
    assert "loader.sampler.sampler (DistributedSampler) changes the order when its own set_epoch is called" in found.message


def test_a_sampler_that_says_shuffle_but_ignores_the_epoch():
    found = one(doctor.diagnose(DataLoader(DATA, batch_size=20, sampler=FixedSeed(200)), epochs=3, budget_s=8),
                "epoch-order-repeats")
    assert found.evidence["cause"] == "no-epoch" and found.evidence["repeats"] == [[0, 0], [1, 0]]
    assert "loader.sampler (FixedSeed) is meant to shuffle" in found.message


def test_an_epoch_in_shared_memory_reaches_persistent_workers():
    loader = DataLoader(SharedEpochStream(96), batch_size=8, num_workers=2, persistent_workers=True)
    diagnosis = doctor.diagnose(loader, epochs=2, budget_s=10)
    assert "epoch-order-repeats" not in codes(diagnosis), str(diagnosis)
    assert diagnosis.measurements["epochs_in_same_order"] == []
    per_epoch = diagnosis.measurements["ledger"]["per_epoch"]
    assert [per_epoch[e]["distinct"] for e in ("0", "1")] == [96, 96] and per_epoch["1"]["missing"] == 0


def test_a_sequential_loader_repeats_its_order_without_a_finding():
    diagnosis = doctor.diagnose(DataLoader(DATA, batch_size=20), epochs=2, budget_s=8)
    assert codes(diagnosis) == set() and diagnosis.measurements["epochs_in_same_order"] == [[0, 0]]
    assert "a fresh reading" in diagnosis.not_measured["epoch-order-repeats"]


def _loaders(n: int, world: int, batch: int, drop_last: bool) -> list[DataLoader]:
    data = TensorDataset(torch.zeros(n, 1))
    return [DataLoader(data, batch_size=batch, drop_last=drop_last,
                       sampler=DistributedSampler(data, num_replicas=world, rank=r, shuffle=True, seed=0)) for r in range(world)]


def test_allowances_by_hand():
    # 1001 over 2 ranks: DistributedSampler pads 1 (1002 = 2 x 501); 501 = 7 x 64 + 53: drop_last leaves 53 per rank
    assert epochs.allowances(_loaders(1001, 2, 64, True))[:2] == (106, 1)
    assert epochs.allowances(_loaders(1001, 2, 64, False))[:2] == (0, 1)
    assert epochs.allowances(_loaders(1000, 4, 50, True))[:2] == (0, 0)  # 250 per rank, 5 batches each


class Slices(Sampler[int]):
    """Rank `rank`'s contiguous slice of n // world_size indices: the remainder belongs to no rank."""

    def __init__(self, n: int, rank: int, world_size: int) -> None:
        per = n // world_size
        self.indices = list(range(rank * per, (rank + 1) * per))

    def __iter__(self):
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def _sliced(rank: int = 0, world_size: int = 1) -> DataLoader:
    data = TensorDataset(torch.zeros(1001, 1))
    return DataLoader(data, batch_size=50, sampler=Slices(1001, rank, world_size))


def test_a_map_style_gap_across_ranks_is_found_with_its_count():
    found = one(doctor.diagnose(_sliced(0, 2), ranks=2, make_loader=_sliced, budget_s=8), "coverage-gap")
    assert found.evidence["missing"] == 1 and found.evidence["expected"] == 1001  # 1001 = 2 x 500 + 1


def _weighted(rank: int = 0, world_size: int = 1) -> DataLoader:
    weights = torch.tensor([1.0] * 150 + [5.0] * 50)
    return DataLoader(DATA, batch_size=20, sampler=DistributedWeightedSampler(weights, num_replicas=world_size, rank=rank))


def test_draws_by_weight_are_not_judged_for_coverage_or_overlap():
    diagnosis = doctor.diagnose(_weighted(0, 2), ranks=2, epochs=2, make_loader=_weighted, budget_s=8)
    assert not codes(diagnosis) & {"coverage-gap", "rank-overlap", "unequal-steps"}, str(diagnosis)
    for code in ("coverage-gap", "rank-overlap"):
        assert "draws by weight or with replacement" in diagnosis.not_measured[code]


def test_resume_needs_a_loader_that_keeps_its_position():
    make = lambda: DataLoader(DATA, batch_size=20)  # noqa: E731
    diagnosis = doctor.diagnose(make(), resume=True, make_loader=make, budget_s=6)
    assert "resume-mismatch" not in codes(diagnosis)
    assert diagnosis.not_measured["resume-mismatch"].startswith("a DataLoader keeps no position (no state_dict)")


class Augmented(IterableDataset):
    """Items without ids whose tensor is new noise each time (a random transform): their hashes name no sample."""

    def __iter__(self):
        for _ in range(64):
            yield torch.randn(4)


def test_a_stream_without_ids_whose_items_change_is_not_judged():
    diagnosis = doctor.diagnose(DataLoader(Augmented(), batch_size=8), epochs=2, budget_s=8)
    assert not codes(diagnosis) & set(doctor.CODES), str(diagnosis)
    assert "carry no id" in diagnosis.not_measured["coverage-gap"]


def test_an_epoch_longer_than_the_budget_says_which_budget_would_do():
    loader = DataLoader(Sleepy(n=400, ms=5.0), batch_size=8)  # 2 s per epoch
    diagnosis = doctor.diagnose(loader, epochs=2, budget_s=2)
    assert "--budget" in diagnosis.not_measured["ledger"], diagnosis.not_measured
    assert not codes(diagnosis) & {"epoch-order-repeats", "coverage-gap"}


@pytest.mark.parametrize("kwargs, error, text", [
    ({"epochs": 0}, ValueError, "epochs must be a whole number >= 1, got 0"),
    ({"ranks": True}, ValueError, "ranks must be a whole number >= 1, got True"),
    ({"resume": "yes"}, TypeError, "resume must be True or False, got 'yes'"),
    ({"ranks": 2}, ValueError, "make_loader is needed for ranks=2, resume=False"),
    ({"resume": True}, ValueError, "make_loader is needed for ranks=1, resume=True"),
    ({"ranks": 2, "make_loader": lambda: None}, ValueError, "make_loader must take rank= and world_size= keyword arguments"),
    ({"make_loader": 3}, TypeError, "make_loader must be a function returning a DataLoader, got 3"),
    ({"resume": True, "make_loader": lambda rank, world_size: None}, ValueError, "make_loader must take to be callable with no"),
    ({"epochs": 1.5}, ValueError, "epochs must be a whole number >= 1, got 1.5"),
])
def test_bad_arguments_are_named(kwargs, error, text):
    with pytest.raises(error, match=text.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        doctor.diagnose(DataLoader(DATA, batch_size=20), **kwargs)


def test_a_make_loader_that_returns_something_else_is_the_loaders_error():
    diagnosis = doctor.diagnose(DataLoader(DATA, batch_size=20), epochs=2, make_loader=lambda: [1, 2], budget_s=6)
    found = one(diagnosis, "loader-error")
    assert "make_loader must return a torch.utils.data.DataLoader, got list" in found.message
    assert found.evidence["while"] == "building rank 0's loader with make_loader"


MODULE = '''
import torch
from torch.utils.data import DataLoader, TensorDataset

def every_rank(rank=0, world_size=1):
    return DataLoader(TensorDataset(torch.zeros(64, 1)), batch_size=8, shuffle=True)

def no_rank():
    return DataLoader(TensorDataset(torch.zeros(64, 1)), batch_size=8, shuffle=True)
'''


def test_the_command_line_reads_ranks_and_writes_the_ledger_into_the_json(tmp_path, monkeypatch, capsys):
    (tmp_path / "ranked.py").write_text(MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    out = tmp_path / "d.json"
    assert doctor.main(["ranked:every_rank", "--ranks", "2", "--epochs", "2", "--budget", "8", "--json", str(out)]) == 1
    report = json.loads(out.read_text())
    assert [f["code"] for f in report["findings"] if f["code"] == "rank-overlap"] == ["rank-overlap"]
    ledger = report["measurements"]["ledger"]
    assert ledger["ranks"] == 2 and ledger["per_epoch"]["0"]["overlap"] == {"0-1": 64}
    assert ledger["per_epoch"]["1"]["steps"] == {"0": 8, "1": 8}
    assert doctor.main(["ranked:no_rank", "--ranks", "2"]) == 2  # cannot build rank 0's loader: could not run
    assert "make_loader must take rank= and world_size= keyword arguments for ranks=2" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_:
        doctor.main(["ranked:no_rank", "--epochs", "0"])
    assert exit_.value.code == 2 and "--epochs must be 1 or more, got 0" in capsys.readouterr().err


def _unseeded():
    from torchdata.stateful_dataloader import StatefulDataLoader

    return StatefulDataLoader(range(48), batch_size=6, shuffle=True)  # each epoch's seed drawn from torch's global RNG


def test_an_order_from_the_global_random_state_is_compared_as_fresh_launches_would_see_it():
    """Each run starts from the random state the check began with, as a new launch of the script starts from its seed: the
    uninterrupted runs repeat each other, and a resume is compared sample by sample."""
    diagnosis = doctor.diagnose(_unseeded(), resume=True, make_loader=_unseeded, budget_s=8)
    assert diagnosis.measurements["resume"]["reproducible"] is True, str(diagnosis)
    assert "resume-mismatch" not in codes(diagnosis)


class Chunks(DistributedSampler):
    """A DistributedSampler subclass dealing contiguous chunks of n // world_size, no padding (a held-out review's case)."""

    def __init__(self, dataset, num_replicas: int, rank: int) -> None:
        super().__init__(dataset, num_replicas=num_replicas, rank=rank, shuffle=False)
        self.num_samples = len(dataset) // num_replicas
        self.total_size = self.num_samples * num_replicas  # below len(dataset): not padding

    def __iter__(self):
        return iter(range(self.rank * self.num_samples, (self.rank + 1) * self.num_samples))


def _chunks(rank: int = 0, world_size: int = 1) -> DataLoader:
    data = TensorDataset(torch.zeros(11, 1))
    return DataLoader(data, batch_size=2, sampler=Chunks(data, world_size, rank))


def test_a_sampler_whose_total_size_is_below_the_dataset_explains_no_overlap_and_no_gap():
    diagnosis = doctor.diagnose(_chunks(0, 2), ranks=2, make_loader=_chunks, budget_s=6)
    assert "rank-overlap" not in diagnosis.codes, str(diagnosis)  # 0 shared: padding of -1 must not count
    found = one(diagnosis, "coverage-gap")
    assert found.evidence["missing"] == 1 and found.evidence["allowed_missing"] == 0 == found.evidence["allowed_repeats"]


class EpochOnlyState(Sampler[int]):
    """A "resumable" sampler whose state holds the epoch but not the position in it: a mid-epoch resume starts it again."""

    def __init__(self, n: int) -> None:
        self.n, self.epoch = n, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def state_dict(self) -> dict:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.epoch = state["epoch"]

    def __iter__(self):
        return iter(torch.randperm(self.n, generator=torch.Generator().manual_seed(self.epoch)).tolist())

    def __len__(self) -> int:
        return self.n


def _epoch_only():
    from torchdata.stateful_dataloader import StatefulDataLoader

    return StatefulDataLoader(range(32), batch_size=4, sampler=EpochOnlyState(32))


def test_the_resume_finding_names_the_point_that_lost_or_repeated_samples():
    found = one(doctor.diagnose(_epoch_only(), resume=True, make_loader=_epoch_only, budget_s=8), "resume-mismatch")
    # resumed after 4 of 8 batches, the epoch starts again: the 16 samples already received come a second time
    assert found.severity == "error" and found.evidence["extra"] == [16, 0] and found.evidence["lost"] == [0, 0]
    assert found.message.startswith("a loader resumed mid-epoch (after batch 4 of 8) from its state_dict delivered other")
    assert "epoch 0: 0 samples of the uninterrupted run never came, 16 came again or instead" in found.message


class Shares(IterableDataset):
    """Rank r's share of a stream: rank 0 gets nothing, rank 1 one sample (a contract probe's case)."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def __iter__(self):
        if self.rank == 1:
            yield {"id": 0, "x": torch.zeros(1)}


def _shares(rank: int = 0, world_size: int = 1) -> DataLoader:
    return DataLoader(Shares(rank), batch_size=1)


def test_an_empty_rank_0_does_not_hide_the_other_ranks_steps():
    diagnosis = doctor.diagnose(_shares(0, 2), ranks=2, make_loader=_shares, budget_s=6)
    assert one(diagnosis, "unequal-steps").evidence["steps"] == {"0": 0, "1": 1}
    assert diagnosis.not_measured["all"] == "the loader yielded no batch"


def _second_rank_fails(rank: int = 0, world_size: int = 1) -> DataLoader:
    if rank == 1:
        raise RuntimeError("no loader for rank 1")
    return DataLoader(DATA, batch_size=20, sampler=DistributedSampler(DATA, num_replicas=world_size, rank=rank))


def test_your_codes_errors_while_reading_epochs_are_loader_errors():
    found = one(doctor.diagnose(_second_rank_fails(), ranks=2, make_loader=_second_rank_fails, budget_s=6), "loader-error")
    assert "no loader for rank 1" in found.message and found.evidence["while"] == "building rank 1's loader with make_loader"

    class Refuses(DistributedSampler):
        def set_epoch(self, epoch: int) -> None:
            if epoch > 0:
                raise RuntimeError(f"set_epoch refused: {epoch}")
            super().set_epoch(epoch)

    refusing = DataLoader(DATA, batch_size=20, sampler=Refuses(DATA, num_replicas=1, rank=0))
    found = one(doctor.diagnose(refusing, epochs=2, budget_s=6), "loader-error")
    assert "set_epoch refused: 1" in found.message and found.evidence["while"] == "calling loader.sampler.set_epoch(1)"


def _seeded(rank: int = 0, world_size: int = 1) -> DataLoader:
    order = torch.randperm(8)  # the same on every rank of a script that seeds torch first
    return DataLoader(TensorDataset(torch.zeros(8, 1)), batch_size=2, sampler=order[rank::world_size].tolist())


def test_ranks_start_from_the_same_random_state_as_seeded_processes_do():
    torch.manual_seed(0)
    diagnosis = doctor.diagnose(_seeded(0, 2), ranks=2, make_loader=_seeded, budget_s=6)
    assert not {"rank-overlap", "coverage-gap"} & set(diagnosis.codes), str(diagnosis)
    assert diagnosis.measurements["ledger"]["per_epoch"]["0"]["distinct"] == 8


def test_the_learners_sampler_is_left_at_its_epoch():
    sampler = DistributedSampler(DATA, num_replicas=1, rank=0, shuffle=True, seed=0)
    sampler.set_epoch(5)
    doctor.diagnose(DataLoader(DATA, batch_size=20, sampler=sampler), epochs=3, budget_s=6)
    assert sampler.epoch == 5


def test_a_numpy_integer_is_a_whole_number():
    import numpy as np

    diagnosis = doctor.diagnose(DataLoader(DATA, batch_size=20), epochs=np.int64(2), budget_s=6)
    assert diagnosis.measurements["ledger"]["epochs_read"] == 2


def test_an_order_that_moves_only_with_set_epoch_is_said_as_info():
    """The doctor cannot see your loop; it can measure that the loader needs set_epoch: two passes without it repeat."""
    sampler = DistributedSampler(DATA, num_replicas=1, rank=0, shuffle=True, seed=0)
    found = one(doctor.diagnose(DataLoader(DATA, batch_size=20, sampler=sampler), epochs=2, budget_s=8), "epoch-order-repeats")
    assert found.severity == "info" and found.evidence["cause"] == "needs-set-epoch" and found.evidence["samples"] == 200
    assert "a loop that does not call it repeats its first epoch" in found.message
    assert found.fix.startswith("call set_epoch(epoch) on loader.sampler at the top of every epoch")
    shuffled = doctor.diagnose(DataLoader(DATA, batch_size=20, shuffle=True), epochs=2, budget_s=8)
    assert "epoch-order-repeats" not in shuffled.codes  # a RandomSampler draws a new order by itself


def test_the_ledgers_timeout_allows_the_workers_start_up_the_first_pass_measured():
    """A forkserver run of the suite: 1.5 s left, 0.75 x that the timeout, and workers that took 2.7 s to start the first
    time timed out (a loader-error, an error finding on a loader that only starts slowly)."""
    obs = doctor.Observation(DataLoader(TensorDataset(torch.arange(8)), batch_size=2, num_workers=1),
                             deadline=time.perf_counter() + 1.5)
    obs.first_batch_s = 2.7
    assert epochs.watch(Ledger(), obs.loader, obs).loader.timeout >= 1.5 * 2.7
    obs.first_batch_s = float("nan")  # the first pass read no batch: the budget's share alone
    assert 1.0 <= epochs.watch(Ledger(), obs.loader, obs).loader.timeout <= 1.5
