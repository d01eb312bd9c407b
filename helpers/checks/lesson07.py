"""Lesson 07's self-checks 07.1-07.4: each reruns the loader doctor on the learner's fix of a clinic fault (the finding gone, nothing new)."""
from __future__ import annotations

import contextlib
import functools
import multiprocessing
import os
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, RandomSampler, WeightedRandomSampler, get_worker_info

from helpers import clinic, doctor, env
from helpers._validate import short
from helpers.checks.core import Answer, Failed, Wrong, exercise
from helpers.env import usable_cpus
from helpers.imbalance import class_counts, class_weights, sample_weights

BUDGET_S = 3.0  # each diagnosis: the doctor's own budget, short because the checks' datasets are small
BATCH_SIZE = 64


def _problems(loader: DataLoader, **kwargs: Any) -> dict[str, doctor.Finding]:
    """The doctor's warnings and errors on `loader`, by code (info findings are not problems)."""
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
    size = loader.batch_size if loader.batch_size is not None else getattr(batches, "batch_size", None)
    if size != BATCH_SIZE:
        raise Failed(f"{call} returned a loader with batches of {size}: use the batch_size it is given ({BATCH_SIZE})")
    drawn = len(getattr(batches, "sampler", None) or loader.sampler)
    if abs(drawn - len(dataset)) > BATCH_SIZE:
        raise Failed(f"{call} returned a loader whose epoch draws {drawn} samples for a dataset of {len(dataset)}: an epoch "
                     "should draw as many samples as the dataset has (num_samples=len(dataset))")
    return loader


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
    detail = _judge(answer.name, found, _planted_balance(), "unbalanced-batches")
    shares, how = _class_shares(answer, loader, dataset)
    equal = 1 / len(shares)
    if np.abs(shares - equal).max() > SHARE_TOLERANCE * equal:
        listed = ", ".join(f"{share:.0%}" for share in shares)
        raise Failed(f"the doctor finds no fault on the loader from {answer.name}, but {how} classes "
                     f"{', '.join(str(c) for c in range(len(shares)))} shares of {listed}: the task asks for every class about "
                     f"equally often ({equal:.0%} each; here {(1 - SHARE_TOLERANCE) * equal:.0%} to {(1 + SHARE_TOLERANCE) * equal:.0%}). "
                     "Weight each sample by the inverse of its class's count: sample_weights(dataset.targets), whose scheme is 'inverse'")
    return detail


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
    dataset = _dataset(clinic.DECODE_MS)
    loader = _loader_from(answer, dataset, f"{answer.name}(dataset, batch_size={BATCH_SIZE})")
    if loader.num_workers == 0:
        raise Failed(f"the loader from {answer.name} has num_workers=0: every sample is still decoded in the training loop's "
                     "process, between steps. Give it workers (this machine's usable cores: helpers.env.usable_cpus())")
    if not isinstance(loader.sampler, RandomSampler):
        raise Failed(f"the loader from {answer.name} is not shuffled ({type(loader.sampler).__name__}): every epoch would see "
                     "the samples in the same order; pass shuffle=True")
    if not loader.persistent_workers:
        raise Failed(f"the loader from {answer.name} starts new workers every epoch: pass persistent_workers=True to keep them")
    sized = {}
    for cores in (1, 4):  # machines this check pretends to be: the answer must follow the usable cores, not this machine's count
        with _pretend_usable_cpus(cores), answer.calling(f"{answer.name}(dataset, batch_size={BATCH_SIZE}) on a machine with {cores} usable core(s)"):
            sized[cores] = answer.value(dataset, BATCH_SIZE).num_workers
    if sized[4] <= sized[1] or any(not 1 <= workers <= cores for cores, workers in sized.items()):
        raise Failed(f"{answer.name} gave {sized[1]} worker(s) on a machine with 1 usable core and {sized[4]} on one with 4: size "
                     "num_workers by the cores this process may use (helpers.env.usable_cpus(), lesson 00), at least 1 and at most "
                     "that many, not by a fixed number or os.cpu_count()")
    rule = {cores: env.workers_per_rank(1, cores) for cores in sized}
    if sized != rule:
        raise Failed(f"{answer.name} gave {sized[1]} worker(s) on a machine with 1 usable core and {sized[4]} on one with 4; the "
                     f"course's rule gives {rule[1]} and {rule[4]}: all processes, the main one included, at most one more than "
                     "the usable cores (helpers.env.workers_per_rank(), lesson 00 section 6)")
    with answer.calling(f"the doctor reading the loader from {answer.name}"):
        found = _problems(loader)
    del loader  # persistent workers exit here
    return _judge(answer.name, found, _planted_workers(), "workers-too-few")


@contextlib.contextmanager
def _pretend_usable_cpus(cores: int) -> Iterator[None]:
    """helpers.env.usable_cpus() (wherever it was imported) and os.sched_getaffinity report `cores` while inside."""
    patched = [(module, "usable_cpus") for module in (env, clinic, sys.modules[__name__]) if hasattr(module, "usable_cpus")]
    saved = [(module, name, getattr(module, name)) for module, name in patched]
    affinity = os.sched_getaffinity if hasattr(os, "sched_getaffinity") else None
    try:
        for module, name in patched:
            setattr(module, name, lambda: cores)
        if affinity is not None:
            os.sched_getaffinity = lambda pid: set(range(cores))
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        if affinity is not None:
            os.sched_getaffinity = affinity


# --- 07.3: one array, not lists (list-backed)

class _Rows(Dataset):
    """Rows in whatever form they are given, decoded as the clinic decodes: np.asarray of the row, then band means."""

    def __init__(self, rows: Any, labels: np.ndarray) -> None:
        self.rows, self.targets = rows, labels

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, index: int) -> dict[str, Any]:
        signal = np.asarray(self.rows[index], dtype=np.float32)
        return {"input": torch.from_numpy(signal.reshape(clinic.NUM_FEATURES, -1).mean(axis=1)), "label": int(self.targets[index])}


def _fork_loader(dataset: Dataset) -> DataLoader:
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check reads with worker processes started by fork (Linux, macOS), as copy-on-read needs; on Windows use WSL2")
    return DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=2, persistent_workers=True, multiprocessing_context="fork")


@functools.cache
def _planted_rows() -> frozenset[str]:
    raw, labels = clinic.training_data()
    return frozenset(_problems(_fork_loader(_Rows(raw.tolist(), labels))))


def to_array_right(rows: list[list[float]]) -> np.ndarray:
    """Exercise 07.3's reference answer (the tests pass it to the check)."""
    return np.asarray(rows, dtype=np.float32)


@exercise("07.3", "to_array", right=to_array_right, wrong=[
    Wrong(lambda rows: rows, "one block of numbers"),
    Wrong(lambda rows: np.array(rows, dtype=object), "one block of numbers"),
    Wrong(lambda rows: tuple(tuple(row) for row in rows), "one block of numbers"),
    Wrong(lambda rows: np.asarray(rows, dtype=np.float16), "the values"),
    Wrong(lambda rows: [np.asarray(row, dtype=np.float32) for row in rows], "one block of numbers"),
    Wrong(lambda rows: [torch.tensor(row) for row in rows], "one block of numbers"),
    Wrong(lambda rows: np.asarray(rows, dtype=np.float32).T, "one row per sample"),
    Wrong(lambda rows: None, "returned None: end the function with `return`"),  # forgot the return
    Wrong(lambda rows: (np.float32(v) for row in rows for v in row), "one block of numbers"),  # a generator
    Wrong(lambda rows: np.asarray(rows, dtype=np.int64), "int64 drops their fractions"),
    Wrong(lambda rows: np.asarray(rows[::-1], dtype=np.float32), "in the order given"),
    Wrong(lambda rows: np.sort(np.asarray(rows, dtype=np.float32), axis=1), "in the order given"),
])
def check_to_array(answer: Answer) -> str:
    """Exercise 07.3: the raw rows stored so that workers read them without copying: the doctor's copy-on-read gone, nothing new."""
    raw, labels = clinic.training_data()
    with answer.calling(f"{answer.name}(rows)"):
        stored = answer.value(raw.tolist())
    if stored is None:
        raise Failed(f"{answer.name}(rows) returned None: end the function with `return` and the array")
    if not isinstance(stored, (np.ndarray, torch.Tensor)) or stored.dtype == object:
        first = type(next(iter(stored), None)).__name__ if hasattr(stored, "__iter__") else "nothing"
        raise Failed(f"{answer.name}(rows) returned a {type(stored).__name__} of {first}: "
                     "each row is still its own Python object, whose reference count a worker writes. Return one block of "
                     "numbers: a 2-D numpy array (np.asarray(rows, dtype=np.float32))")
    try:
        values = np.asarray(stored, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise Failed(f"{answer.name}(rows) returned {type(stored).__name__}, which does not read as a {raw.shape} table of numbers: {exc}") from None
    if values.shape != raw.shape:
        raise Failed(f"{answer.name}(rows) returned shape {values.shape}; expected {raw.shape}: one row per sample "
                     f"({raw.shape[0]} rows of {raw.shape[1]} values), in the order given")
    if not np.allclose(values, raw, rtol=1e-6, atol=1e-6):
        largest = float(np.abs(values - raw).max())
        floating, width = ((stored.is_floating_point(), stored.element_size()) if isinstance(stored, torch.Tensor)
                           else (stored.dtype.kind == "f", stored.dtype.itemsize))
        dtype = str(stored.dtype).removeprefix("torch.")
        if not floating:
            raise Failed(f"{answer.name}(rows) changed the values: {dtype} drops their fractions (largest difference "
                         f"{largest:.3g}); store floats, float32 or wider (np.asarray(rows, dtype=np.float32))")
        if width < 4:
            raise Failed(f"{answer.name}(rows) changed the values: {dtype} rounds them (largest difference {largest:.3g}); "
                         "keep float32 or wider (np.asarray(rows, dtype=np.float32))")
        row = int(np.flatnonzero(~np.isclose(values, raw, rtol=1e-6, atol=1e-6).all(axis=1))[0])
        raise Failed(f"{answer.name}(rows) changed the values although its {dtype} holds them exactly: row {row} differs from "
                     f"rows[{row}] (largest difference {largest:.3g}). Keep each row as given, in the order given, without "
                     "sorting or reordering: np.asarray(rows, dtype=np.float32) converts them as they are")
    with answer.calling(f"the doctor reading a dataset that keeps what {answer.name} returned"):
        found = _problems(_fork_loader(_Rows(stored, labels)))
    detail = _judge(answer.name, found, _planted_rows(), "copy-on-read")
    return f"{detail}; {type(stored).__name__} of {stored.dtype}"


# --- 07.4: split the evaluation stream (unsharded-eval-stream) by rank, then by worker

class ShardedEvalStreamRight(IterableDataset):
    """Exercise 07.4's reference answer (the tests pass it to the check): each held-out sample read once over all ranks and workers."""

    def __init__(self, raw: np.ndarray, labels: np.ndarray, rank: int = 0, world_size: int = 1) -> None:
        self.raw, self.labels, self.rank, self.world_size = raw, labels, rank, world_size

    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(self.rank * workers + worker, len(self.labels), self.world_size * workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _Unsharded(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        for index in range(len(self.labels)):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _ByWorkerOnly(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        for index in range(worker, len(self.labels), workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _ByRankOnly(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        for index in range(self.rank, len(self.labels), self.world_size):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _WorkersOnly(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()  # None in the main process: info.id fails there
        for index in range(self.rank * info.num_workers + info.id, len(self.labels), self.world_size * info.num_workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


UNEVEN = 599  # held-out samples read over 2 ranks x 2 workers: 599 = 4 x 149 + 3, so no reader's share is a plain quarter


class _FloorChunks(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        reader, readers = self.rank * workers + worker, self.world_size * workers
        per = len(self.labels) // readers  # the remainder is never read
        for index in range(reader * per, (reader + 1) * per):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _ProcessGroupRank(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        info = get_worker_info()
        worker, workers = (0, 1) if info is None else (info.id, info.num_workers)
        rank, world_size = torch.distributed.get_rank(), torch.distributed.get_world_size()  # no process group in the check
        for index in range(rank * workers + worker, len(self.labels), world_size * workers):
            yield {"key": index, "input": torch.from_numpy(self.raw[index]), "label": int(self.labels[index])}


class _OneShot(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        if not hasattr(self, "_items"):
            self._items = ShardedEvalStreamRight.__iter__(self)  # made once: empty from the second epoch on
        return self._items


class _NumpyLabel(ShardedEvalStreamRight):
    def __iter__(self) -> Any:
        for item in ShardedEvalStreamRight.__iter__(self):
            yield {**item, "label": self.labels[item["key"]]}


def _group_hint(exc: Exception) -> str:
    """07.4: an answer that asks torch.distributed for its rank, where the check starts no process group."""
    if "process group" in str(exc):
        return (" (the check starts no process group: it gives each stream its rank as ShardedEvalStream(raw, labels, rank=r, "
                "world_size=2); read them from self.rank and self.world_size, which __init__ stores)")
    return ""


def _keys(loader: DataLoader) -> list[int]:
    return [int(key) for batch in loader for key in batch["key"]]


@functools.cache
def _planted_stream() -> frozenset[str]:
    raw, labels = (array.copy() for array in clinic.held_out_data())  # writable: torch.from_numpy warns on a read-only array
    return frozenset(_problems(DataLoader(_Unsharded(raw, labels), batch_size=BATCH_SIZE, num_workers=2, multiprocessing_context="fork")))


@exercise("07.4", "ShardedEvalStream.__iter__", takes_class=True, right=ShardedEvalStreamRight, wrong=[
    Wrong(_Unsharded, "still finds iterable-duplicates"),
    Wrong(_ByRankOnly, "still finds iterable-duplicates"),
    Wrong(_ByWorkerOnly, "on both ranks"),
    Wrong(_WorkersOnly, "raised AttributeError"),
    Wrong("not a class", "expected an IterableDataset class"),
    Wrong(_FloorChunks, "were read"),
    Wrong(_OneShot, "in its second"),
    Wrong(_NumpyLabel, "'label' as a int64"),
    Wrong(_ProcessGroupRank, "self.rank and self.world_size"),
])
def check_sharded_eval_stream(answer: Answer) -> str:
    """Exercise 07.4: an evaluation stream split by rank, then by worker: the doctor's iterable-duplicates gone, each sample once over 2 ranks."""
    stream_class = answer.value
    if not (isinstance(stream_class, type) and issubclass(stream_class, IterableDataset)):
        raise Failed(f"expected an IterableDataset class (ShardedEvalStream), got {stream_class!r}")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise Failed("this check reads with worker processes started by fork (Linux, macOS); on Windows use WSL2")
    raw, labels = (array.copy() for array in clinic.held_out_data())  # writable: torch.from_numpy warns on a read-only array
    with answer.calling(f"the first item of {stream_class.__name__}(raw, labels)", hint=_group_hint):
        item = next(iter(stream_class(raw, labels)))
    kinds = {"key": int, "input": torch.Tensor, "label": int}
    if not isinstance(item, dict) or set(item) != set(kinds):
        raise Failed(f"{stream_class.__name__} yielded {short(item)}; expected a dict with keys {sorted(kinds)}")
    for key, kind in kinds.items():
        if not isinstance(item[key], kind) or (kind is int and isinstance(item[key], bool)):
            raise Failed(f"{stream_class.__name__} yielded {key!r} as a {type(item[key]).__name__}; the task asks for "
                         f"{'the row as a tensor (torch.from_numpy)' if kind is torch.Tensor else 'an int (int(...))'}")
    loader = DataLoader(stream_class(raw, labels), batch_size=BATCH_SIZE)
    with answer.calling(f"reading {stream_class.__name__}(raw, labels) with num_workers=0, two epochs", hint=_group_hint):
        alone, again = _keys(loader), _keys(loader)
    if sorted(again) != sorted(alone):
        raise Failed(f"the same loader over {stream_class.__name__} read {len(alone)} samples in its first epoch and {len(again)} "
                     "in its second: __iter__ must start the stream again each time it is called (a generator made once is "
                     "used up after one epoch)")
    if sorted(alone) != list(range(len(labels))):
        raise Failed(f"with num_workers=0 (the main process reads), the stream gave {len(alone)} samples, {len(set(alone))} distinct, "
                     f"for {len(labels)}: the main process is the only reader then and must read every sample once")
    with answer.calling(f"the doctor reading {stream_class.__name__} with 2 workers", hint=_group_hint):
        found = _problems(DataLoader(stream_class(raw, labels), batch_size=BATCH_SIZE, num_workers=2, multiprocessing_context="fork"))
    detail = _judge(f"{stream_class.__name__}", found, _planted_stream(), "iterable-duplicates")
    raw, labels = raw[:UNEVEN], labels[:UNEVEN]  # a count that 2 ranks x 2 workers do not divide
    with answer.calling(f"reading {stream_class.__name__}(raw, labels, rank=r, world_size=2) with 2 workers on each rank", hint=_group_hint):
        per_rank = [_keys(DataLoader(stream_class(raw, labels, rank=rank, world_size=2), batch_size=BATCH_SIZE, num_workers=2,
                                     multiprocessing_context="fork")) for rank in range(2)]
    both = set(per_rank[0]) & set(per_rank[1])
    if both:
        raise Failed(f"with 2 ranks, {len(both)} samples are read on both ranks (rank 0 read {len(per_rank[0])}, rank 1 "
                     f"{len(per_rank[1])}): split by self.rank over self.world_size first, then by worker")
    counts = Counter(per_rank[0] + per_rank[1])
    if sorted(counts) != list(range(len(labels))) or set(counts.values()) != {1}:
        missing, repeated = len(labels) - len(counts), sum(count - 1 for count in counts.values())
        raise Failed(f"over 2 ranks x 2 workers, {len(counts)} of {len(labels)} samples were read ({missing} never, {repeated} "
                     "reads of a sample read already): every (rank, worker) must take its own share, and together all of them, "
                     "also when the readers do not divide the count (take every n-th index, from the reader's own start)")
    return f"{detail}; over 2 ranks x 2 workers each of {len(labels)} samples is read once, and a second epoch reads them again"
