"""Lesson 07's self-checks 07.1-07.2: each reruns the loader doctor on the learner's fix of a clinic fault (07.3-07.4: lesson07_streams)."""
from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, RandomSampler, WeightedRandomSampler

from helpers import clinic, doctor, env
from helpers._validate import short
from helpers.checks.core import Answer, Failed, Wrong, exercise
from helpers.env import usable_cpus
from helpers.imbalance import class_counts, class_weights, sample_weights

BUDGET_S = 3.0  # each diagnosis: the doctor's own budget, short because the checks' datasets are small
BATCH_SIZE = 64
OTHER_BATCH_SIZE = 50  # each loader function is also called with this size: the batch_size given, not a constant


def _problems(loader: DataLoader, **kwargs: Any) -> dict[str, doctor.Finding]:
    """The doctor's warnings and errors on `loader`, by code (info findings are not problems)."""
    with torch.random.fork_rng(devices=[]):  # an unseeded sampler draws the same on every run: verdicts do not vary
        torch.manual_seed(0)
        diagnosis = doctor.diagnose(loader, budget_s=BUDGET_S, **kwargs)
    return {f.code: f for f in diagnosis.findings if f.severity != "info"}


def _judge(name: str, found: dict[str, doctor.Finding], planted: frozenset[str], target: str) -> str:
    """Fail on a new error, the target finding still there, or any other new finding; else the passed detail."""
    def lines(codes: list[str]) -> str:
        return "; ".join(f"[{found[c].severity}] {c}: {found[c].message} (fix: {found[c].fix})" for c in codes)

    new = sorted(set(found) - planted - {target})
    errors = [c for c in new if found[c].severity == "error"]
    if errors:
        raise Failed(f"the doctor finds a new error on the loader from {name}: {lines(errors)}")
    if target in found:
        raise Failed(f"the doctor still finds {target} on the loader from {name}: {lines([target])}")
    if new:
        raise Failed(f"the doctor finds something new on the loader from {name}: {lines(new)}")
    return f"the doctor's {target} finding is gone from the loader from {name}, and it finds nothing new"


def _dataset(decode_ms: float = 0.0) -> clinic.ClinicDataset:
    """The clinic's training samples, stored as one array; decode_ms of CPU work per sample."""
    raw, labels = clinic.training_data()
    return clinic.ClinicDataset(raw, labels, list_backed=False, decode_ms=decode_ms)


def _loader_from(answer: Answer, dataset: Dataset, call: str) -> DataLoader:
    """Call the learner's loader function and check it returned a DataLoader over `dataset`."""
    with answer.calling(call):
        loader = answer.value(dataset, BATCH_SIZE)
    if not isinstance(loader, DataLoader):
        raise Failed(f"{call} returned {short(loader)}; expected a torch.utils.data.DataLoader")
    if loader.dataset is not dataset:
        raise Failed(f"{call} returned a loader over another dataset: build it over the dataset it is given")
    batches = loader.batch_sampler if loader.batch_sampler is not None else None
    for asked in (BATCH_SIZE, OTHER_BATCH_SIZE):
        if asked != BATCH_SIZE:
            with answer.calling(call.replace(str(BATCH_SIZE), str(asked))):
                other = answer.value(dataset, asked)
        size = _batch_size(loader if asked == BATCH_SIZE else other)
        if size != asked:
            raise Failed(f"{call.replace(str(BATCH_SIZE), str(asked))} returned a loader with batches of {size}: use the "
                         f"batch_size it is given ({asked}), not a number of your own")
    drawn = len(getattr(batches, "sampler", None) or loader.sampler)
    if abs(drawn - len(dataset)) > BATCH_SIZE:
        raise Failed(f"{call} returned a loader whose epoch draws {drawn} samples for a dataset of {len(dataset)}: an epoch "
                     "should draw as many samples as the dataset has (num_samples=len(dataset))")
    return loader


def _batch_size(loader: Any) -> Any:
    """The loader's batch size, from itself or its batch sampler; None for what is not a DataLoader."""
    if not isinstance(loader, DataLoader):
        return None
    return loader.batch_size if loader.batch_size is not None else getattr(loader.batch_sampler, "batch_size", None)


# --- 07.1: rebalance the batches (no-rebalancing), without falling into lesson 02's trap 1

@functools.cache
def _planted_balance() -> frozenset[str]:
    return frozenset(_problems(DataLoader(_dataset(), batch_size=BATCH_SIZE, shuffle=True)))


def balanced_loader_right(dataset: Any, batch_size: int) -> DataLoader:
    """Exercise 07.1's reference answer (the tests pass it to the check)."""
    sampler = WeightedRandomSampler(sample_weights(dataset.targets), num_samples=len(dataset), generator=torch.Generator().manual_seed(0))
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def _class_weights_loader(dataset: Any, batch_size: int) -> DataLoader:
    weights = torch.as_tensor(class_weights(class_counts(dataset.targets)))
    return DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(weights, num_samples=len(dataset)))


SHARE_TOLERANCE = 0.25  # 07.1: each class's share of the draws within 25 % of an equal share


def _class_shares(answer: Answer, loader: DataLoader, dataset: Any) -> tuple[np.ndarray, str]:
    """Each class's share of what the loader's sampler draws, and how it was found: exactly from the weights of a weighted
    sampler with one weight per sample (no sampling noise), else from one epoch of draws (2220: about 1 point of noise per class)."""
    targets = np.asarray(dataset.targets)
    sampler = getattr(loader.batch_sampler, "sampler", loader.sampler)
    weights = getattr(sampler, "weights", None) if getattr(sampler, "replacement", False) else None
    if isinstance(weights, torch.Tensor) and weights.ndim == 1 and len(weights) == len(targets):
        per_class = np.bincount(targets, weights=weights.double().numpy(), minlength=int(targets.max()) + 1)
        return per_class / per_class.sum(), "its sampler's weights give"
    with answer.calling(f"drawing one epoch of indices from the loader from {answer.name}"):
        drawn = [int(index) for batch in loader.batch_sampler for index in batch]
    counts = np.bincount(targets[drawn], minlength=int(targets.max()) + 1)
    return counts / max(1, counts.sum()), f"one epoch of its sampler's draws ({len(drawn)} indices) gives"


def _sampler_hint(loader: DataLoader, dataset: Any) -> str:
    """07.1: what in the loader's sampler keeps the classes unequal, when it can be read off the sampler; else ''."""
    sampler = getattr(loader.batch_sampler, "sampler", loader.sampler)
    targets = np.asarray(dataset.targets)
    weights = getattr(sampler, "weights", None)
    if isinstance(sampler, RandomSampler):
        return (". Its sampler is a RandomSampler (shuffle=True), which keeps the dataset's mix: draw with a "
                "WeightedRandomSampler of one weight per sample instead")
    if getattr(sampler, "replacement", True) is False:
        return (". Its sampler draws without replacement (replacement=False): an epoch of len(dataset) draws then takes "
                "every sample once, the dataset's own mix; keep replacement=True")
    if not (isinstance(weights, torch.Tensor) and weights.ndim == 1 and len(weights) == len(targets)):
        return ""
    values, classes = weights.double().numpy(), np.unique(targets)
    mixed = [int(c) for c in classes if np.ptp(values[targets == c]) > 1e-9 * values.max()]
    if mixed:
        return (f". Its weights differ within class {mixed[0]}: weight i must be the weight of sample i's class, in the "
                "dataset's order (sample_weights(dataset.targets))")
    per_class = [float(values[targets == c][0]) for c in classes]
    counts = [int((targets == c).sum()) for c in classes]
    return (f". Its weights are {', '.join(f'{w:.3g}' for w in per_class)} for classes of {', '.join(map(str, counts))} "
            "samples: weight each sample by 1 / its class's count, so that every class weighs the same in total "
            "(sample_weights(dataset.targets))")


@exercise("07.1", "balanced_loader", right=balanced_loader_right, wrong=[
    Wrong(_class_weights_loader, "class-weights-as-sample-weights"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(
        sample_weights(dataset.targets), num_samples=len(dataset), replacement=False)), "still finds unbalanced-batches"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True, sampler=WeightedRandomSampler(
        sample_weights(dataset.targets), num_samples=len(dataset))), "raised ValueError"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True), "still finds unbalanced-batches"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, sampler=WeightedRandomSampler(sample_weights(dataset.targets), len(dataset))),
          "batches of 1"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(
        sample_weights(dataset.targets), batch_size)), "as many samples as the dataset"),
    Wrong(lambda dataset, batch_size: [batch for batch in DataLoader(dataset, batch_size=batch_size)][:2], "expected a torch.utils"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, sampler=WeightedRandomSampler(
        sample_weights(dataset.targets, "effective"), num_samples=len(dataset))), "every class about equally often"),  # half majority
])
def check_balanced_loader(answer: Answer) -> str:
    """Exercise 07.1: a loader whose batches are class-balanced; the doctor's unbalanced-batches finding gone and nothing new."""
    dataset = _dataset()
    loader = _loader_from(answer, dataset, f"{answer.name}(dataset, batch_size={BATCH_SIZE})")
    with answer.calling(f"the doctor reading the loader from {answer.name}"):
        found = _problems(loader)
    try:
        detail = _judge(answer.name, found, _planted_balance(), "unbalanced-batches")
    except Failed as failed:
        raise Failed(f"{failed}{_sampler_hint(loader, dataset)}") from None
    shares, how = _class_shares(answer, loader, dataset)
    equal = 1 / len(shares)
    if np.abs(shares - equal).max() > SHARE_TOLERANCE * equal:
        listed = ", ".join(f"{share:.0%}" for share in shares)
        raise Failed(f"the doctor finds no fault on the loader from {answer.name}, but {how} classes "
                     f"{', '.join(str(c) for c in range(len(shares)))} shares of {listed}: the task asks for every class about "
                     f"equally often ({equal:.0%} each; here {(1 - SHARE_TOLERANCE) * equal:.0%} to {(1 + SHARE_TOLERANCE) * equal:.0%}). "
                     "Weight each sample by the inverse of its class's count: sample_weights(dataset.targets), whose scheme is 'inverse'")
    with answer.calling(f"drawing two epochs of indices from the loader from {answer.name}"):
        first, second = _two_epochs(loader)
    if first == second:
        raise Failed(f"the loader from {answer.name} draws the same {len(first)} indices in the same order every epoch: one "
                     "weighted draw frozen into a list is replayed each epoch, so the model sees the same repeats every time. "
                     "Pass the WeightedRandomSampler itself as sampler=, which draws anew each epoch")
    return detail


def _two_epochs(loader: DataLoader) -> tuple[list[int], list[int]]:
    """The indices of two epochs of the loader, the sampler's set_epoch (if it has one) moved on between them as a loop
    would, then put back."""
    sampler = getattr(loader.batch_sampler, "sampler", loader.sampler)
    epoch, epochs = getattr(sampler, "epoch", 0), []
    for step in range(2):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch + step)
        epochs.append([int(index) for batch in loader.batch_sampler for index in batch])
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    return epochs[0], epochs[1]


# --- 07.2: workers for the decoding (no-workers), within this machine's cores

@functools.cache
def _planted_workers() -> frozenset[str]:
    return frozenset(_problems(DataLoader(_dataset(clinic.DECODE_MS), batch_size=BATCH_SIZE, shuffle=True)))


def loader_with_workers_right(dataset: Any, batch_size: int) -> DataLoader:
    """Exercise 07.2's reference answer (the tests pass it to the check)."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=usable_cpus(), persistent_workers=True)


@exercise("07.2", "loader_with_workers", right=loader_with_workers_right, wrong=[
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True), "num_workers=0"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=2 * (os.cpu_count() or 1),
                                                 persistent_workers=True), "os.cpu_count()"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=-1), "raised ValueError"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, num_workers=usable_cpus(), persistent_workers=True),
          "not shuffled"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=usable_cpus()),
          "persistent_workers"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=2, persistent_workers=True),
          "on a machine with 1 usable core"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=os.cpu_count() or 1,
                                                 persistent_workers=True), "os.cpu_count()"),
    Wrong(lambda dataset, batch_size: DataLoader(dataset, batch_size=batch_size, shuffle=True,
                                                 num_workers=max(1, usable_cpus() - 1), persistent_workers=True),
          "the course's rule gives 1 and 4"),  # one worker fewer than the rule: a sweep would only sometimes catch it
])
def check_loader_with_workers(answer: Answer) -> str:
    """Exercise 07.2: DataLoader workers that decode beside the loop: the doctor finds no faster num_workers and nothing new."""
    dataset, name = _dataset(clinic.DECODE_MS), answer.name
    sized: dict[int, int] = {}
    for usable, visible, quota in MACHINES:  # never this machine's count: the answer must follow the usable cores
        where = _machine(usable, visible, quota)
        with _pretend_machine(visible, quota):
            loader = _loader_from(answer, dataset, f"{name}(dataset, batch_size={BATCH_SIZE}) on {where}")
        sized[usable] = loader.num_workers
        if usable == MACHINES[-1][0] and loader.num_workers == 0:
            raise Failed(f"the loader from {name} has num_workers=0 on {where}: every sample is still decoded in the training "
                         "loop's process, between steps. Give it as many workers as usable cores (helpers.env.usable_cpus())")
        if loader.num_workers and not isinstance(loader.sampler, RandomSampler):
            raise Failed(f"the loader from {name} is not shuffled ({type(loader.sampler).__name__}): every epoch would see "
                         "the samples in the same order; pass shuffle=True")
        if loader.num_workers and not loader.persistent_workers:
            raise Failed(f"the loader from {name} starts new workers every epoch: pass persistent_workers=True to keep them")
    rule = {usable: env.workers_per_rank(1, usable) for usable in sized}
    if sized != rule:
        (one, many), (got_one, got_many) = rule.values(), sized.values()
        raise Failed(f"{name} gave {got_one} worker(s) on {_machine(*MACHINES[0])} and {got_many} on {_machine(*MACHINES[1])}, "
                     f"where the course's rule gives {one} and {many}: {_sizing_hint(sized)}. The rule: all processes, the main "
                     "one included, at most one more than the usable cores, so one worker per usable core "
                     "(helpers.env.workers_per_rank(), lesson 00 section 6)")
    with answer.calling(f"{name}(dataset, batch_size={BATCH_SIZE}) on this machine"):
        loader = answer.value(dataset, BATCH_SIZE)
    with answer.calling(f"the doctor reading the loader from {name}"):
        found = _problems(loader)
    del loader  # persistent workers exit here
    return _judge(name, found, _planted_workers(), "workers-too-few")


# 07.2's pretend machines, (usable cores, cores visible to the process, CPU quota): a container held to 1 core by its
# quota, and a 4-core machine; os.cpu_count() reports LOGICAL_CPUS on both
MACHINES = ((1, 4, 1.0), (4, 4, None))
LOGICAL_CPUS = 8


def _machine(usable: int, visible: int, quota: float | None) -> str:
    cores = f"a machine with {usable} usable core{'s' * (usable > 1)}"
    return cores if quota is None else f"{cores} (a container: {visible} cores visible, a CPU quota of {quota:g})"


def _sizing_hint(sized: dict[int, int]) -> str:
    """07.2: the likely mistake behind workers {usable cores: num_workers} that do not follow the rule."""
    visible = {usable: machine_visible for usable, machine_visible, _ in MACHINES}
    if all(workers and workers % LOGICAL_CPUS == 0 for workers in sized.values()):
        return (f"os.cpu_count() ({LOGICAL_CPUS} on both) counts the machine's cores, not those this process may use: "
                "size num_workers by helpers.env.usable_cpus()")
    if sized == visible:
        return ("os.sched_getaffinity() (or os.cpu_count()) sees all the cores a CPU quota does not let you use: "
                "helpers.env.usable_cpus() takes the quota into account")
    if sized == {usable: env.workers_per_rank(2, usable) for usable in sized}:
        return "that is the rule for 2 ranks; this loader is one process's: env.workers_per_rank() (1 rank)"
    if sized == {usable: min(usable, clinic.MAX_WORKERS) for usable in sized}:
        return (f"that is the clinic's cap of {clinic.MAX_WORKERS} workers (clinic.workers_per_rank), which lesson 07 "
                "drops on your own data")
    if sized == {usable: usable + 1 for usable in sized}:
        return "one worker too many: with the main process that is two processes more than the cores"
    if all(workers == usable - 1 or workers == max(1, usable - 1) for usable, workers in sized.items()):
        return "one worker fewer than the rule allows: the main process waits for batches part of each step, so it needs no core"
    if len(set(sized.values())) == 1:
        return (f"the same {sized[1]} on both machines: a fixed number, or one counted once on this machine; read "
                "helpers.env.usable_cpus() each time the function runs")
    return "size num_workers by the cores this process may use (helpers.env.usable_cpus()), not by a fixed number or os.cpu_count()"


@contextlib.contextmanager
def _pretend_machine(visible: int, quota: float | None) -> Iterator[None]:
    """helpers.env sees `visible` cores and a CPU quota of `quota` (so usable_cpus(), wherever imported, follows), and so do
    os.sched_getaffinity and os.cpu_count (LOGICAL_CPUS) while inside; PyTorch's warnings about worker counts are silenced."""
    saved = [(env, "affinity_cpus", env.affinity_cpus), (env, "cpu_quota", env.cpu_quota), (os, "cpu_count", os.cpu_count)]
    if hasattr(os, "sched_getaffinity"):
        saved.append((os, "sched_getaffinity", os.sched_getaffinity))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            env.affinity_cpus, env.cpu_quota, os.cpu_count = (lambda: visible), (lambda *args: quota), (lambda: LOGICAL_CPUS)
            if hasattr(os, "sched_getaffinity"):
                os.sched_getaffinity = lambda pid: set(range(visible))
            yield
    finally:
        for module, attribute, value in saved:
            setattr(module, attribute, value)
