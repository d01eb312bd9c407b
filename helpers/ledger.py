"""What the training loop received: each sample's id per (epoch, rank, worker, step), and the verdicts read from it (lesson 09).

`ledger.watch(loader, rank=r)` gives an iterable over the same batches as `loader` (the loop's code does not change)
while the ledger writes down, for every batch, the ids of its samples and the worker that read it. For a map-style
dataset the id is the index the sampler handed out; the dataset is not changed, the watched copy wraps it. For an
IterableDataset the items must carry their id: `sample_id(item)` reads it (a dict item's "id" by default; give your
stream's items one, e.g. `{"id": (shard, offset), ...}`); ids are kept as plain values (a tensor id as an int or tuple).
Each `iter()` over a watched loader is one epoch, numbered from `epoch` (set it when a run resumes mid-way, with `step`
at the batch it resumes at): a pass stopped early (break, zip) ends its epoch too, as the loader's own next pass starts
a new one. A DataLoader subclass that changes batches in its own `__iter__` is refused (a copy would not repeat it).
Rows (`to_rows`) gather ranks' ledgers; a rank that received no batch has no row, so name the ranks in `steps()`.
"""
from __future__ import annotations

import operator
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info
from torch.utils.data._utils.collate import default_collate

from helpers._validate import short
from helpers.errors import wrapped
from helpers.rebuild import rebuild

MAIN = -1  # the worker id of a batch read in the main process (num_workers=0)


@dataclass(frozen=True)
class Record:
    """One sample the loop received: its epoch, rank, the worker that read it, the step (batch) it came in, and its id."""

    epoch: int
    rank: int
    worker: int
    step: int
    sample: Hashable


def _whole(name: str, value: Any, low: int = 0) -> int:
    """`value` as an int at least `low` (numpy and torch integers too), else a ValueError naming `name`."""
    try:
        whole = operator.index(value)
    except TypeError:
        whole = None
    if isinstance(value, bool) or whole is None or whole < low:
        raise ValueError(f"{name} must be a whole number >= {low}, got {short(value)}")
    return whole


def default_sample_id(item: Any) -> Hashable:
    """An iterable item's id: a dict's "id" or "__key__" (WebDataset), else an error saying how to add one."""
    if isinstance(item, dict):
        for key in ("id", "__key__"):
            if key in item:
                found = item[key]
                return tuple(found) if isinstance(found, list) else found
    raise ValueError(f"the stream's items carry no id (got {short(item)}): yield dicts with an 'id' (e.g. (shard, offset)), "
                     "or pass sample_id=a function that reads one from an item")


class _Tagged(Dataset):
    """The learner's dataset, each item returned with its id and the worker that read it (the watched copy's dataset)."""

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        if hasattr(dataset, "__getitems__"):
            self.__getitems__ = self._getitems  # the DataLoader fetches a batch at once only where the dataset does

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: Any) -> tuple[Hashable, int, Any]:
        return _key(index), worker_id(), self.dataset[index]

    def _getitems(self, indices: list) -> list[tuple[Hashable, int, Any]]:
        worker = worker_id()
        return [(_key(i), worker, item) for i, item in zip(indices, self.dataset.__getitems__(indices))]


class _TaggedStream(IterableDataset):
    """The learner's IterableDataset, each item returned with the id `sample_id` reads and the worker that yielded it."""

    def __init__(self, dataset: IterableDataset, sample_id: Callable[[Any], Hashable]) -> None:
        self.dataset, self.sample_id = dataset, sample_id

    def __iter__(self) -> Iterator[tuple[Hashable, int, Any]]:
        worker = worker_id()
        for item in self.dataset:
            yield _key(self.sample_id(item)), worker, item

    def __getattr__(self, name: str) -> Any:  # set_epoch, state_dict, ...: the learner's stream answers
        if name in ("dataset", "sample_id"):
            raise AttributeError(name)
        return getattr(self.dataset, name)


def _key(value: Any) -> Hashable:
    """A sample id as a plain hashable value: an index or 0-d tensor as int, a tensor, array or list as a tuple."""
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):  # tensors, numpy arrays and scalars
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return tuple(_key(v) for v in value)
    if hasattr(value, "__index__") and not isinstance(value, bool):
        return operator.index(value)
    try:
        hash(value)
    except TypeError:
        raise ValueError(f"a sample id must be hashable (a number, string or tuple), got {short(value)}") from None
    return value


def worker_id() -> int:
    """The DataLoader worker this code runs in, or MAIN in the main process."""
    info = get_worker_info()
    return MAIN if info is None else info.id


class _TagCollate:
    """The loader's collate_fn on the items, with their ids and workers kept beside the batch."""

    def __init__(self, collate_fn: Callable[[list], Any]) -> None:
        self.collate_fn = collate_fn

    def __call__(self, tagged: list[tuple[Hashable, int, Any]]) -> tuple[list[Hashable], list[int], Any]:
        return [t[0] for t in tagged], [t[1] for t in tagged], self.collate_fn([t[2] for t in tagged])


def copy_class(loader: DataLoader) -> type[DataLoader]:
    """The class of the watched copy: torchdata's StatefulDataLoader for one (it keeps its state), else DataLoader."""
    try:
        from torchdata.stateful_dataloader import StatefulDataLoader
    except ImportError:  # torchdata is pinned, but a learner's own environment may lack it
        return DataLoader
    return StatefulDataLoader if isinstance(loader, StatefulDataLoader) else DataLoader


class Watched:
    """The same batches as the loader it copies, each written in the ledger as it reaches the loop."""

    def __init__(self, ledger: Ledger, loader: DataLoader, rank: int, sample_id: Callable[[Any], Hashable], epoch: int,
                 step: int) -> None:
        if loader.batch_size is None and not getattr(loader, "_auto_collation", False):
            raise ValueError("loader: batch_size=None (no batching) is not supported; the ledger records batches")
        kind = copy_class(loader)
        if type(loader).__iter__ is not kind.__iter__:
            raise ValueError(f"loader: a {type(loader).__name__} changes batches in its own __iter__, which a copy would not "
                             "repeat; watch the torch DataLoader (or StatefulDataLoader) inside it")
        dataset = (_TaggedStream(loader.dataset, sample_id) if isinstance(loader.dataset, IterableDataset)
                   else _Tagged(loader.dataset))
        collate = loader.collate_fn if loader.collate_fn is not None else default_collate
        self.ledger, self.rank, self.epoch, self.step = ledger, rank, epoch, step
        self._fresh = True  # the next iter() writes at (epoch, step); after any other pass it starts the next epoch
        self.loader = rebuild(loader, dataset=dataset, collate_fn=_TagCollate(collate), loader_class=kind)

    def __len__(self) -> int:
        return len(self.loader)

    def __iter__(self) -> Iterator[Any]:
        if not self._fresh:  # the last pass stopped early (break, zip, islice): the loader starts a new epoch, so do we
            self.epoch, self.step = self.epoch + 1, 0
        self._fresh = False
        self.ledger.opened.add((self.epoch, self.rank))
        for ids, workers, batch in self.loader:
            self.ledger.add(self.epoch, self.rank, self.step, ids, workers)
            self.step += 1
            yield batch
        self.epoch, self.step, self._fresh = self.epoch + 1, 0, True

    def state_dict(self) -> dict[str, Any]:
        """The copied loader's state (torchdata's StatefulDataLoader), with the epoch and step the ledger writes next."""
        if not hasattr(self.loader, "state_dict"):
            raise TypeError(f"state_dict: a {type(self.loader).__name__} keeps no state; watch a torchdata StatefulDataLoader")
        return {"loader": self.loader.state_dict(), "epoch": self.epoch, "step": self.step}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume the copied loader, and the epoch and step the ledger writes, from `state_dict()`."""
        if not isinstance(state, dict) or not {"loader", "epoch", "step"} <= set(state):
            raise ValueError(f"state must be what state_dict() returned (keys loader, epoch, step), got {short(state)}")
        self.loader.load_state_dict(state["loader"])
        self.epoch, self.step, self._fresh = _whole("epoch", state["epoch"]), _whole("step", state["step"]), True


@dataclass(frozen=True)
class Coverage:
    """One epoch's delivery against the samples it should hold: missing, delivered more than once, and not expected."""

    epoch: int
    expected: int
    delivered: int
    missing: list[Hashable]
    repeated: dict[Hashable, int]
    unexpected: list[Hashable]

    @property
    def exactly_once(self) -> bool:
        """Every expected sample delivered once, nothing else."""
        return not (self.missing or self.repeated or self.unexpected)

    def __str__(self) -> str:
        head = f"epoch {self.epoch}: {self.delivered} delivered for {self.expected} samples"
        if self.exactly_once:
            return head + ", each exactly once"
        # one line each (up to 5 samples shown): one wrapped line broke inside "0 not" / "expected []"
        return "\n".join([f"{head}:", *(wrapped(f"  {len(found)} {what}" + (f" {shown}" if found else "")
                                                + (" (the first 5)" if len(found) > 5 else ""), hanging=2)
                                        for found, what, shown in (
                                            (self.missing, "never delivered", self.missing[:5]),
                                            (self.repeated, "more than once", dict(list(self.repeated.items())[:5])),
                                            (self.unexpected, "not expected", self.unexpected[:5])))])


class Ledger:
    """Every sample a training loop received, with its epoch, rank, worker and step; merge ranks' ledgers into one."""

    def __init__(self, records: Iterable[Record] = ()) -> None:
        self.records: list[Record] = list(records)
        if not all(isinstance(r, Record) for r in self.records):
            raise TypeError(f"records must be Record objects (Ledger.from_rows reads plain rows), got {short(self.records)}")
        self.opened: set[tuple[int, int]] = set()  # (epoch, rank) passes that began, batches or not
        self.batches: set[tuple[int, int, int]] = {(r.epoch, r.rank, r.step) for r in self.records}  # empty ones too

    def watch(self, loader: DataLoader, *, rank: int = 0, sample_id: Callable[[Any], Hashable] = default_sample_id,
              epoch: int = 0, step: int = 0) -> Watched:
        """An iterable over `loader`'s batches that writes each into this ledger (as rank `rank`); one iter() is one epoch."""
        if not isinstance(loader, DataLoader):
            raise TypeError(f"loader must be a torch.utils.data.DataLoader, got {short(loader)}")
        if not callable(sample_id):
            raise TypeError(f"sample_id must be a function of one item, got {short(sample_id)}")
        return Watched(self, loader, _whole("rank", rank), sample_id, _whole("epoch", epoch), _whole("step", step))

    def add(self, epoch: int, rank: int, step: int, samples: Iterable[Hashable], workers: Iterable[int] | None = None) -> None:
        """Write one batch: its samples' ids, in the order received, and the worker that read each (MAIN: none)."""
        epoch, rank, step = _whole("epoch", epoch), _whole("rank", rank), _whole("step", step)
        if isinstance(samples, (str, bytes)) or not isinstance(samples, Iterable):
            raise TypeError(f"samples must be the batch's sample ids (a list), got {short(samples)}")
        samples = [_key(s) for s in samples]
        workers = [MAIN] * len(samples) if workers is None else [_whole("workers", w, MAIN) for w in workers]
        if len(workers) != len(samples):
            raise ValueError(f"workers: one per sample, got {len(workers)} for {len(samples)} samples")
        self.batches.add((epoch, rank, step))
        self.records.extend(Record(epoch, rank, w, step, s) for w, s in zip(workers, samples))

    @classmethod
    def merged(cls, ledgers: Iterable[Ledger]) -> Ledger:
        """One ledger of several (ranks run in one process, gathered from real ranks, or a run and its resumption)."""
        if isinstance(ledgers, Ledger) or not isinstance(ledgers, Iterable):
            raise TypeError(f"ledgers must be a list of Ledger objects, got {short(ledgers)}")
        ledgers = list(ledgers)
        if not all(isinstance(ledger, Ledger) for ledger in ledgers):
            raise TypeError(f"ledgers must be a list of Ledger objects, got {short(ledgers)}")
        merged = cls(r for ledger in ledgers for r in ledger.records)
        for ledger in ledgers:
            merged.opened |= ledger.opened
            merged.batches |= ledger.batches
        return merged

    def to_rows(self) -> list[tuple[int, int, int, int, Hashable]]:
        """The records as plain tuples (epoch, rank, worker, step, sample): to gather from ranks or save as JSON."""
        return [(r.epoch, r.rank, r.worker, r.step, r.sample) for r in self.records]

    @classmethod
    def from_rows(cls, rows: Iterable[Iterable[Any]]) -> Ledger:
        """The ledger `to_rows()` wrote (JSON turns a tuple id into a list: it is turned back, nested ones too)."""
        records = []
        for row in rows:
            row = list(row)
            if len(row) != 5:
                raise ValueError(f"rows: each row is (epoch, rank, worker, step, sample), got {short(row)}")
            e, r, w, s, x = row
            records.append(Record(_whole("epoch", e), _whole("rank", r), _whole("worker", w, MAIN), _whole("step", s), _key(x)))
        return cls(records)

    def epochs(self) -> list[int]:
        """The epochs recorded, in order."""
        return sorted({r.epoch for r in self.records} | {e for e, _ in self.opened})

    def ranks(self) -> list[int]:
        """The ranks recorded (a watched rank that received no batch too), in order."""
        return sorted({r.rank for r in self.records} | {r for _, r in self.opened})

    def received(self, epoch: int, rank: int | None = None) -> list[Hashable]:
        """The ids one rank (or all, rank by rank) received in `epoch`, in the order received."""
        epoch = _whole("epoch", epoch)
        rank = None if rank is None else _whole("rank", rank)
        chosen = [r for r in self.records if r.epoch == epoch and (rank is None or r.rank == rank)]
        return [r.sample for r in sorted(chosen, key=lambda r: (r.rank, r.step))]  # stable: a batch keeps its order

    def counts(self, epoch: int) -> Counter:
        """How often each id was delivered in `epoch`, over all ranks."""
        epoch = _whole("epoch", epoch)
        return Counter(r.sample for r in self.records if r.epoch == epoch)

    def coverage(self, epoch: int, expected: Iterable[Hashable] | int) -> Coverage:
        """`epoch`'s delivery against the samples it should hold (ids, or n for indices 0..n-1), each exactly once."""
        if hasattr(expected, "__index__") or isinstance(expected, float):
            wanted: list[Hashable] = list(range(_whole("expected", expected)))
        elif isinstance(expected, Iterable) and not isinstance(expected, (str, bytes)):
            wanted = [_key(s) for s in expected]
        else:
            raise TypeError(f"expected must be the sample ids or their number, got {short(expected)}")
        counts, universe = self.counts(epoch), set(wanted)
        return Coverage(epoch, len(universe), sum(counts.values()), [s for s in wanted if s not in counts],
                        {s: n for s, n in counts.items() if n > 1 and s in universe},
                        [s for s in counts if s not in universe])

    def overlap(self, epoch: int) -> dict[tuple[int, int], int]:
        """Per pair of ranks, how many distinct ids both received in `epoch`."""
        epoch = _whole("epoch", epoch)
        seen = {rank: {r.sample for r in self.records if r.epoch == epoch and r.rank == rank} for rank in self.ranks()}
        ranks = sorted(seen)
        return {(a, b): len(seen[a] & seen[b]) for i, a in enumerate(ranks) for b in ranks[i + 1:]}

    def steps(self, epoch: int, ranks: Iterable[int] | None = None) -> dict[int, int]:
        """Per rank, the batches (steps) it received in `epoch`, empty ones too: unequal counts hang DDP. `ranks`: every
        rank that should appear (e.g. range(world_size)), so a rank gathered with no row at all shows 0."""
        epoch = _whole("epoch", epoch)
        every = set(self.ranks()) | ({_whole("ranks", r) for r in ranks} if ranks is not None else set())
        return {rank: sum(1 for e, r, _ in self.batches if e == epoch and r == rank) for rank in sorted(every)}

    def per_worker(self, epoch: int) -> dict[tuple[int, int], int]:
        """Per (rank, worker), how many samples it read in `epoch` (worker MAIN = -1: read in the main process)."""
        epoch = _whole("epoch", epoch)
        return dict(sorted(Counter((r.rank, r.worker) for r in self.records if r.epoch == epoch).items()))

    def same_order(self, epoch_a: int, epoch_b: int) -> bool:
        """Whether every rank received the same ids in the same order in both epochs (a sampler whose epoch never changed)."""
        for name, epoch in (("epoch_a", epoch_a), ("epoch_b", epoch_b)):
            if _whole(name, epoch) not in self.epochs():
                raise ValueError(f"{name}: epoch {epoch} was not recorded (recorded: {self.epochs()})")
        return all(self.received(epoch_a, rank) == self.received(epoch_b, rank) for rank in self.ranks())

    def first_difference(self, other: Ledger) -> str | None:
        """Where this ledger's deliveries first differ from `other`'s, per epoch and rank in order received; None if they match."""
        if not isinstance(other, Ledger):
            raise TypeError(f"other must be a Ledger, got {short(other)}")
        for epoch in sorted(set(self.epochs()) | set(other.epochs())):
            for rank in sorted(set(self.ranks()) | set(other.ranks())):
                mine, theirs = self.received(epoch, rank), other.received(epoch, rank)
                if mine != theirs:
                    at = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))
                    return (f"epoch {epoch}, rank {rank}: {len(mine)} samples against {len(theirs)}; first differ at sample "
                            f"{at}: {mine[at:at + 3]} against {theirs[at:at + 3]}")
        return None
