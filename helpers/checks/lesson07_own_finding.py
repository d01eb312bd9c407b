"""Lesson 07's last self-check: a finding of the learner's own, added to the loader doctor through `checks=` (Exercise 07.5)."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, DistributedSampler, RandomSampler, WeightedRandomSampler

from helpers import doctor
from helpers.checks.core import Answer, Failed, Wrong, exercise
from helpers.samplers import DistributedWeightedSampler


# --- 07.5: a finding of your own, through the doctor's checks= plugins

def needs_set_epoch_right(obs: doctor.Observation) -> doctor.Finding | None:
    """Exercise 07.5's reference answer (the tests pass it to the check)."""
    sampler = obs.loader.sampler
    if not (hasattr(sampler, "set_epoch") and hasattr(sampler, "epoch")):
        return None
    epoch = sampler.epoch
    this_epoch = list(sampler)
    sampler.set_epoch(epoch + 1)
    next_epoch = list(sampler)
    sampler.set_epoch(epoch)  # leave the learner's sampler where it was
    if this_epoch == next_epoch:
        return None
    return doctor.Finding("needs-set-epoch", "info", f"{type(sampler).__name__} draws another order in epoch {epoch + 1} than in "
                          f"epoch {epoch}, but only if the loop calls set_epoch", "call sampler.set_epoch(epoch) before each epoch "
                          "(lesson 05)", {"sampler": type(sampler).__name__, "epoch": epoch})


def _always(obs: doctor.Observation) -> doctor.Finding:
    return doctor.Finding("needs-set-epoch", "warning", "m", "call set_epoch")


def _any_set_epoch(obs: doctor.Observation) -> doctor.Finding | None:
    return _always(obs) if hasattr(obs.loader.sampler, "set_epoch") else None


def _moves_the_epoch(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    first = list(sampler)
    sampler.set_epoch(sampler.epoch + 1)
    return _always(obs) if list(sampler) != first else None


def _back_to_zero(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    first = list(sampler)
    sampler.set_epoch(getattr(sampler, "epoch", 0) + 1)
    second = list(sampler)
    sampler.set_epoch(0)  # "puts it back", to epoch 0 rather than where it was
    return _always(obs) if second != first else None


def _compares_sets(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    if not (hasattr(sampler, "set_epoch") and hasattr(sampler, "epoch")):
        return None
    epoch, first = sampler.epoch, set(sampler)
    sampler.set_epoch(epoch + 1)
    second = set(sampler)
    sampler.set_epoch(epoch)
    return _always(obs) if second != first else None  # which samples, not their order


class _EpochIgnored(torch.utils.data.Sampler):
    """A shuffled order that set_epoch does not change (it only stores the epoch): nothing to note."""

    def __init__(self) -> None:
        self.shuffle, self.epoch = True, 0
        self.order = torch.randperm(64, generator=torch.Generator().manual_seed(0)).tolist()

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)

    def __len__(self) -> int:
        return 64


class _SameFirst(_EpochIgnored):
    """Index 0 first in every epoch, the rest in an order that set_epoch changes: the order depends on it."""

    def __iter__(self) -> Iterator[int]:
        rest = (torch.randperm(63, generator=torch.Generator().manual_seed(self.epoch)) + 1).tolist()
        return iter([0, *rest])


class _Curriculum(_EpochIgnored):
    """In index order for the first two epochs (a warm-up curriculum), then shuffled by epoch: at epoch 4 the order
    depends on set_epoch, though epochs 0 and 1 are alike."""

    def __init__(self) -> None:
        super().__init__()
        self.epoch = 4

    def __iter__(self) -> Iterator[int]:
        if self.epoch < 2:
            return iter(range(64))
        return iter(torch.randperm(64, generator=torch.Generator().manual_seed(self.epoch)).tolist())


def _by_shuffle_flag(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    return _always(obs) if hasattr(sampler, "set_epoch") and getattr(sampler, "shuffle", True) else None


def _first_index_only(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    if not (hasattr(sampler, "set_epoch") and hasattr(sampler, "epoch")):
        return None
    epoch, first = sampler.epoch, next(iter(sampler))
    sampler.set_epoch(epoch + 1)
    second = next(iter(sampler))
    sampler.set_epoch(epoch)
    return _always(obs) if second != first else None


def _reuses_a_doctor_code(obs: doctor.Observation) -> doctor.Finding | None:
    found = needs_set_epoch_right(obs)
    return None if found is None else doctor.Finding("unbalanced-batches", found.severity, found.message, found.fix)


def _same_epoch_twice(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    if not hasattr(sampler, "set_epoch"):
        return None
    return _always(obs) if list(sampler) != list(sampler) else None  # set_epoch never called: the same order twice


def _distributed_sampler_only(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    return _always(obs) if isinstance(sampler, DistributedSampler) and sampler.shuffle else None


def _epochs_zero_and_one(obs: doctor.Observation) -> doctor.Finding | None:
    sampler = obs.loader.sampler
    if not (hasattr(sampler, "set_epoch") and hasattr(sampler, "epoch")):
        return None
    epoch = sampler.epoch
    sampler.set_epoch(0)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    sampler.set_epoch(epoch)
    return _always(obs) if second != first else None


def _no_set_epoch(exc: Exception) -> str:
    """07.5: an answer that calls set_epoch (or reads epoch) on a sampler that has none."""
    if isinstance(exc, AttributeError) and ("set_epoch" in str(exc) or "epoch" in str(exc)):
        return " (a sampler without set_epoch needs no finding: return None for them, before calling it)"
    return ""


def _same_contents(make: Callable[[], Any]) -> bool:
    """Whether a fresh sampler's next epoch draws the same samples as this one, in another order."""
    sampler = make()
    first = list(sampler)
    sampler.set_epoch(sampler.epoch + 1)
    return sorted(first) == sorted(sampler) and first != list(sampler)


def _samplers() -> list[tuple[str, Callable[[], Any], bool]]:
    """(description, a fresh sampler, whether its order depends on set_epoch)."""
    items = range(64)

    def at_epoch(sampler: Any, epoch: int) -> Any:
        sampler.set_epoch(epoch)  # a loop part-way through training: the plugin must leave it here
        return sampler

    return [
        ("DistributedSampler(shuffle=True)", lambda: DistributedSampler(items, num_replicas=2, rank=0, seed=0), True),
        ("DistributedSampler(shuffle=True) at epoch 3", lambda: at_epoch(DistributedSampler(items, num_replicas=2, rank=1), 3), True),
        ("DistributedSampler(shuffle=True) on one rank", lambda: DistributedSampler(items, num_replicas=1, rank=0, seed=0), True),
        ("DistributedWeightedSampler", lambda: DistributedWeightedSampler(torch.linspace(0.1, 1.0, 64), num_replicas=2, rank=0), True),
        ("RandomSampler", lambda: RandomSampler(items), False),
        ("WeightedRandomSampler", lambda: WeightedRandomSampler(torch.linspace(0.1, 1.0, 64), num_samples=64), False),
        ("no sampler (SequentialSampler)", lambda: None, False),
        ("DistributedSampler(shuffle=False)", lambda: DistributedSampler(items, num_replicas=2, rank=0, shuffle=False), False),
        ("a shuffled sampler whose set_epoch changes nothing", _EpochIgnored, False),
        ("a sampler that starts every epoch at index 0 and shuffles the rest by epoch", _SameFirst, True),
        ("a curriculum sampler at epoch 4 (in order in epochs 0 and 1, shuffled by epoch from epoch 2)", _Curriculum, True),
    ]


@exercise("07.5", "needs_set_epoch", right=needs_set_epoch_right, wrong=[
    Wrong(_any_set_epoch, "DistributedSampler(shuffle=False)"),
    Wrong(_always, "RandomSampler"),
    Wrong(_moves_the_epoch, "changed the sampler's epoch"),
    Wrong(lambda obs: "needs-set-epoch", "must return a Finding or None"),
    Wrong(_back_to_zero, "from 3 to 0"),
    Wrong(_compares_sets, "on one rank"),
    Wrong(_by_shuffle_flag, "whose set_epoch changes nothing"),  # asks for a shuffle flag instead of comparing orders
    Wrong(_first_index_only, "starts every epoch at index 0"),  # compares only the first index
    Wrong(_reuses_a_doctor_code, "a code of your own"),  # a code the doctor already reports
    Wrong(_same_epoch_twice, "after sampler.set_epoch(epoch + 1)"),  # compares an epoch with itself
    Wrong(_distributed_sampler_only, "after sampler.set_epoch(epoch + 1)"),  # asks for a type instead of comparing orders
    Wrong(_epochs_zero_and_one, "not epochs 0 and 1"),  # compares epochs 0 and 1 whatever epoch the sampler is at
])
def check_needs_set_epoch(answer: Answer) -> str:
    """Exercise 07.5: a plugin for the doctor that notes a sampler whose order depends on set_epoch, and nothing else."""
    name = answer.name
    data = torch.arange(64, dtype=torch.float32).unsqueeze(1)
    for described, make, depends in _samplers():
        sampler = make()
        loader = DataLoader(data, batch_size=8, sampler=sampler)
        epoch = getattr(sampler, "epoch", None)
        with answer.calling(f"{name}(an Observation of a loader with {described})", hint=_no_set_epoch):
            result = answer.value(doctor.Observation(loader))
        if result is not None and not isinstance(result, doctor.Finding):
            raise Failed(f"{name} must return a Finding or None, got {result!r}: build one with doctor.Finding(code, severity, message, fix)")
        if epoch is not None and sampler.epoch != epoch:
            raise Failed(f"{name} changed the sampler's epoch from {epoch} to {sampler.epoch}: the learner's loop would then train "
                         "on another epoch's order; put the epoch back (sampler.set_epoch(epoch)) before returning")
        if depends and result is None:
            raise Failed(f"{name} found nothing for a loader with {described}, whose order changes only when the loop calls set_epoch: "
                         "for any sampler with set_epoch (obs.loader.sampler), compare list(sampler) at its epoch with list(sampler) "
                         "after sampler.set_epoch(epoch + 1), and put the epoch back" + (
                             f" (the epoch it is at, {epoch}: not epochs 0 and 1)" if epoch else "") + (
                             ". Its next epoch holds the same samples in another order: compare the order, not the "
                             "contents (no sorted() or set())" if _same_contents(make) else ""))
        if not depends and result is not None:
            raise Failed(f"{name} reported {result.code} for a loader with {described}, whose order does not depend on set_epoch: "
                         "compare the orders of two epochs instead of only asking whether set_epoch exists")
    loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(range(64), num_replicas=2, rank=0, seed=0))
    with answer.calling(f"doctor.diagnose(loader, checks=[{name}])"):
        diagnosis = doctor.diagnose(loader, budget_s=1.5, checks=[answer.value])
    found = [f for f in diagnosis.findings if f.code not in doctor.CODES]
    if not found:
        borrowed = sorted({f.code for f in diagnosis.findings} & set(doctor.CODES) - {f.code for f in doctor.diagnose(
            loader, budget_s=1.5).findings})
        if borrowed:
            raise Failed(f"{name} reported {borrowed[0]}, one of the doctor's own codes: give your finding a code of your own "
                         "(e.g. 'needs-set-epoch'), so that it cannot be mistaken for the doctor's")
        raise Failed(f"doctor.diagnose(loader, checks=[{name}]) reported no finding of yours for a DistributedSampler loader")
    return f"{name} notes the {len([s for s in _samplers() if s[2]])} samplers that need set_epoch, leaves the other {len([s for s in _samplers() if not s[2]])} alone and their epochs as they were, and the doctor reports it as [{found[0].severity}] {found[0].code}"
