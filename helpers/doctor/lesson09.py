"""The doctor's rules whose fixes lesson 09 teaches: what the loop received over epochs, ranks and a resume (helpers.doctor.epochs reads it)."""
from __future__ import annotations

import time
from collections import Counter
from typing import Any

from torch.utils.data import DataLoader

from helpers.doctor.epochs import (RESUME_EPOCHS, Launch, OutOfTime, Received, called_parts, chance_skip, ids_stable,
                                   inner_parts, kept_epochs, launch, make, need_s, read_epoch, received, slot, watch)
from helpers.doctor.findings import Finding
from helpers.doctor.registry import Observation, finding, rule
from helpers.ledger import Ledger, Watched, copy_class
from helpers.rebuild import rebuild

LESSON = "09_what_the_model_saw"
SECTION_ORDER = "2. The `set_epoch` trap: a stream with persistent workers"
SECTION_RANKS = "3. Two ranks: merged ledgers"
SECTION_RESUME = "4. Resuming at the epoch boundary: wrong and right"

LEDGER_ASKED = lambda obs: obs.epochs >= 2 or obs.ranks >= 2  # noqa: E731 - the ledger rules read only when asked


@rule("epoch-order-repeats", severities=("warning", "info"), phase="measure", budget=1.0, planted="order_repeats",
      applies=lambda obs: obs.epochs >= 2, taught_in=(LESSON, SECTION_ORDER))
def epoch_order_repeats(obs: Observation) -> Finding | None:
    """Two epochs delivered in the same order to a rank, where a fresh reading shows the order should change with the epoch."""
    got = received(obs) if obs.epochs >= 2 else None
    if got is None or not ids_stable(obs, "epoch-order-repeats", got):
        return None
    same = [(e, r) for r in range(got.ranks) for e in sorted({e for e, _ in got.complete})
            if (e + 1, r) in got.complete and len(got.ledger.received(e, r)) > 1
            and got.ledger.received(e, r) == got.ledger.received(e + 1, r)]
    obs.measured["epochs_in_same_order"] = [list(pair) for pair in same]
    if not same:
        return _needs_set_epoch(obs, got)
    for epoch, rank in same[:3]:  # a pair that a fresh reading repeats too is the loader's own order: try the next
        cause = _order_cause(obs, got, epoch, rank)
        if cause is not None:
            obs.skipped.pop("epoch-order-repeats", None)  # an earlier pair's note: this pair is the finding
            break
    else:
        return None
    return finding(
        "epoch-order-repeats", "warning",
        f"{f'rank {rank}' if got.ranks > 1 else 'the loop'} received epochs {epoch} and {epoch + 1} in the same order "
        f"({len(got.ledger.received(epoch, rank))} "
        f"samples, sample for sample; {len(same)} repeated pair(s) of epochs in all): {cause[0]}",
        cause[1], repeats=[list(pair) for pair in same], samples=len(got.ledger.received(epoch, rank)),
        set_epoch_called_on=[path for path, _ in called_parts(got.loaders[0])], persistent_workers=got.loaders[0].persistent_workers,
        cause=cause[2])


def _fresh_watch(ledger: Ledger, loader: DataLoader, obs: Observation) -> Watched:
    """`loader` watched by `ledger` with workers started afresh every pass (persistent_workers=False)."""
    copy = rebuild(loader, persistent_workers=False, loader_class=copy_class(loader)) if loader.num_workers else loader
    return watch(ledger, copy, obs)


def _needs_set_epoch(obs: Observation, got: Received) -> Finding | None:
    """Info when the epochs changed only because set_epoch was called: two passes at one epoch, without set_epoch between
    them, come in the same order (what a loop that forgets set_epoch would receive; the doctor cannot see your loop)."""
    loader = got.loaders[0]
    called = called_parts(loader)
    if not called:
        return None
    need = need_s(obs, [loader], 2.0)  # None for a stream without a length: what is left of a third of the budget
    if not obs.borrow(need if need is not None else max(obs.slot_left(), 0.3 * obs.left())):
        return None
    again = Ledger()
    seen = _fresh_watch(again, loader, obs)
    end = time.perf_counter() + obs.slot_left()
    try:
        with kept_epochs(called):
            read_epoch(seen, loader, 0, end, parts=called)
            read_epoch(seen, loader, 0, end, parts=[])  # the same epoch again, without set_epoch
    except OutOfTime:
        return None
    if again.received(0) != again.received(1):
        return None  # the order moves on by itself
    paths = ", ".join(f"{path} ({type(part).__name__})" for path, part in called)
    return finding(
        "epoch-order-repeats", "info",
        f"each epoch came in a new order because the doctor called set_epoch(epoch) on {paths}; two passes without it "
        f"came in the same order ({len(again.received(0))} samples): a loop that does not call it repeats its first epoch",
        f"call set_epoch(epoch) on {called[0][0]} at the top of every epoch, before iterating the loader (lesson 09)",
        cause="needs-set-epoch", set_epoch_called_on=[path for path, _ in called], samples=len(again.received(0)))


def _fresh_orders_differ(obs: Observation, loader: DataLoader, parts: list[tuple[str, Any]], epoch: int) -> bool:
    """Whether epochs `epoch` and `epoch + 1` come in different orders from fresh workers (persistent_workers=False), with
    set_epoch on `parts`."""
    fresh = Ledger()
    seen = _fresh_watch(fresh, loader, obs)
    end = time.perf_counter() + max(0.5, obs.left())
    with kept_epochs(parts):
        for e in (epoch, epoch + 1):
            read_epoch(seen, loader, e, end, parts=parts)
    return fresh.received(0) != fresh.received(1)


def _order_cause(obs: Observation, got: Received, epoch: int, rank: int) -> tuple[str, str, str] | None:
    """Why rank `rank` received epochs `epoch` and `epoch + 1` in the same order, measured on its loader read afresh:
    (cause, fix, kind), or None when a fresh reading repeats the order too (the loader's own order: by design or chance)."""
    loader = got.loaders[rank]
    called, inner = called_parts(loader), [(p, x) for p, x in inner_parts(loader) if callable(getattr(x, "set_epoch", None))]
    deeper = [(p, x) for p, x in inner if all(x is not c for _, c in called)]
    try:
        if called and _fresh_orders_differ(obs, loader, called, epoch):
            if loader.persistent_workers and loader.num_workers > 0:
                return ("persistent workers keep the copy of the dataset they started with, so the dataset's set_epoch in the "
                        "main process does not reach them (measured: the same loader with persistent_workers=False delivered "
                        f"epochs {epoch} and {epoch + 1} in different orders)",
                        "keep the epoch where the workers read it: a tensor made with share_memory_() before the workers "
                        "start, which set_epoch fills and __iter__ reads (as helpers.ledger_demos.SharedEpochStream does), or "
                        "persistent_workers=False (lesson 09)", "persistent-workers")
            return (f"set_epoch on {', '.join(p for p, _ in called)} changes the order when read afresh, but not in the "
                    "loop's reading", "check what your loop's set_epoch reaches with a ledger (lesson 09)", "other")
        if deeper and _fresh_orders_differ(obs, loader, called + deeper, epoch):
            path, part = deeper[0]
            return (f"{path} ({type(part).__name__}) changes the order when its own set_epoch is called (measured), but the "
                    "loop's set_epoch does not reach it: what wraps it has none, or does not pass it on",
                    f"pass set_epoch on to the sampler inside, or call {path}.set_epoch(epoch) each epoch (lesson 09)",
                    "not-forwarded")
    except OutOfTime:
        obs.skipped["epoch-order-repeats"] = "epochs came in the same order; too little budget was left to read the loader afresh"
        return None
    says = [(p, x) for p, x in inner_parts(loader) if any(c.__name__ == "RandomSampler" for c in type(x).__mro__)
            or getattr(x, "shuffle", None) is True]
    if says:
        path, part = says[0]
        tried = (f"a fresh reading with set_epoch on {', '.join(p for p, _ in called + deeper)} gave the same order too"
                 if called or deeper else "nothing in the loader has set_epoch, so a loop cannot ask it for a new order")
        return (f"{path} ({type(part).__name__}) is meant to shuffle (a RandomSampler, or shuffle=True), yet {tried}",
                "make the order a function of (seed, epoch) that set_epoch sets, and check it with a ledger (lesson 09)",
                "no-epoch")
    obs.skipped["epoch-order-repeats"] = (f"rank {rank} received epochs {epoch} and {epoch + 1} in the same order, and so did "
                                          "a fresh reading (new workers, set_epoch on every part that has one): the order "
                                          "comes from the loader itself, by design or by chance (an epoch a map-style dataset "
                                          "applies inside its workers is not seen: the ledger's ids are the sampler's indices)")
    return None


@rule("coverage-gap", severities=("warning",), phase="measure", budget=0.5, planted="coverage_gap",
      applies=LEDGER_ASKED, taught_in=(LESSON, SECTION_RANKS))
def coverage_gap(obs: Observation) -> Finding | None:
    """Samples an epoch never delivered, or delivered to a rank more than once, beyond what drop_last and padding explain."""
    got = received(obs) if LEDGER_ASKED(obs) else None
    if got is None or chance_skip(obs, "coverage-gap", got) or not ids_stable(obs, "coverage-gap", got) or got.universe is None:
        return None
    for epoch in got.whole_epochs():
        coverage = got.ledger.coverage(epoch, got.universe)
        repeats = got.repeats_within_ranks(epoch)
        if len(coverage.missing) <= got.allowed_missing and repeats <= got.allowed_repeats and not coverage.unexpected:
            continue
        allowed = "; ".join(got.why) or "nothing in the loader's settings leaves samples out or repeats them"
        return finding(
            "coverage-gap", "warning",
            f"epoch {epoch}: {len(coverage.missing)} of {coverage.expected} samples never delivered (e.g. "
            f"{coverage.missing[:5]}), {repeats} deliveries of a sample again to the same rank, {len(coverage.unexpected)} "
            f"not in the dataset; the settings explain at most {got.allowed_missing} left out and {got.allowed_repeats} "
            f"repeats ({allowed})",
            "make the parts (ranks, workers) split one plan of the samples that covers each once: a split by stride "
            "(indices[i::n]) keeps the remainder that equal slices of n // parts leave out, and one shared seed keeps parts "
            "from drawing orders of their own (lessons 05, 06, 09)",
            epoch=epoch, missing=len(coverage.missing), expected=coverage.expected, repeats_within_ranks=repeats,
            unexpected=len(coverage.unexpected), allowed_missing=got.allowed_missing, allowed_repeats=got.allowed_repeats)
    return None


@rule("rank-overlap", severities=("error",), phase="measure", budget=0.25, planted="rank_overlap",
      applies=lambda obs: obs.ranks >= 2, taught_in=(LESSON, SECTION_RANKS))
def rank_overlap(obs: Observation) -> Finding | None:
    """Samples two ranks both received in one epoch, beyond a DistributedSampler's padding."""
    got = received(obs) if obs.ranks >= 2 else None
    if got is None or chance_skip(obs, "rank-overlap", got) or not ids_stable(obs, "rank-overlap", got):
        return None
    for epoch in got.whole_epochs():
        (a, b), shared = max(got.ledger.overlap(epoch).items(), key=lambda pair: pair[1])
        if shared <= got.allowed_repeats:
            continue
        mine = len(set(got.ledger.received(epoch, a)))
        return finding(
            "rank-overlap", "error",
            f"epoch {epoch}: ranks {a} and {b} both received {shared} samples ({shared / max(mine, 1):.0%} of rank {a}'s "
            f"{mine} distinct); padding explains at most {got.allowed_repeats}: the ranks train on the same data",
            "give each rank its own share: DistributedSampler(dataset, num_replicas=world_size, rank=rank) for a map-style "
            "dataset (lesson 05), a split by rank and worker for a stream (lesson 06)",
            epoch=epoch, ranks=[a, b], shared=shared, rank_samples=mine, allowed=got.allowed_repeats)
    return None


@rule("unequal-steps", severities=("error",), phase="measure", budget=0.25, planted="unequal_steps", runs_without_batches=True,
      applies=lambda obs: obs.ranks >= 2, taught_in=(LESSON, SECTION_RANKS))
def unequal_steps(obs: Observation) -> Finding | None:
    """Ranks that take different numbers of steps in one epoch: under DDP their all-reduces stop pairing up (lesson 05)."""
    got = received(obs) if obs.ranks >= 2 else None
    if got is None:
        return None
    for epoch in got.whole_epochs():
        steps = got.ledger.steps(epoch, ranks=range(got.ranks))
        if len(set(steps.values())) == 1:
            continue
        fewest = min(steps, key=steps.get)  # type: ignore[arg-type]
        return finding(
            "unequal-steps", "error",
            f"epoch {epoch}: steps per rank {steps}. Under DDP each step's gradient all-reduce needs every rank: after rank "
            f"{fewest}'s last step ({steps[fewest]}) the others' all-reduces have no partner, so the job hangs until the "
            "collective's timeout, fails when the short rank exits, or pairs steps of different epochs (lesson 05); a loop "
            "without collectives, as some evaluation loops are, is not affected",
            "give every rank as many batches: DistributedSampler pads to equal shares (lesson 05); plan token-budget batches "
            "once and deal them out (helpers.sequence_samplers.DistributedBucketSampler, lesson 08); equal shards per rank, "
            "or stop every rank at the shortest, for a stream (lesson 06)",
            epoch=epoch, steps={str(r): n for r, n in steps.items()})
    return None


@rule("resume-mismatch", severities=("error", "warning"), phase="measure", budget=2.0, planted="resume_mismatch",
      applies=lambda obs: obs.resume, taught_in=(LESSON, SECTION_RESUME))
def resume_mismatch(obs: Observation) -> Finding | None:
    """A loader restored from its state mid-epoch or at the epoch boundary delivers other samples than the uninterrupted run."""
    if not obs.resume:
        return None
    probe = make(obs, 0)
    if not (callable(getattr(probe, "state_dict", None)) and callable(getattr(probe, "load_state_dict", None))):
        obs.skipped["resume-mismatch"] = (f"a {type(probe).__name__} keeps no position (no state_dict): a resumed run starts "
                                          "its epoch again; torchdata's StatefulDataLoader keeps one (lesson 09)")
        return None
    end = slot(obs, "resume-mismatch", need_s(obs, [probe], 9.0), "two runs of 2 epochs and two resumed ones")
    if end is None:
        return None
    start = Launch()
    try:
        whole, _ = launch(obs, start, end)
        again, _ = launch(obs, start, end)
        batches = whole.steps(0)[0]
        points = {"at the epoch boundary": (0, None)} | ({"mid-epoch": (0, batches // 2)} if batches >= 2 else {})
        resumed = {}
        for where, stop in points.items():
            before, state = launch(obs, start, end, stop=stop)
            after, _ = launch(obs, start, end, state=state)
            resumed[where] = Ledger.merged([before, after])
    except OutOfTime:
        obs.skipped["resume-mismatch"] = "the runs did not end within the slot: give a larger --budget (budget_s)"
        return None
    finally:
        start.restore()
    return _judge_resume(obs, whole, again, resumed, batches)


def _multisets(ledger: Ledger) -> list[Counter]:
    return [ledger.counts(epoch) for epoch in range(RESUME_EPOCHS)]


def _judge_resume(obs: Observation, whole: Ledger, again: Ledger, resumed: dict[str, Ledger], batches: int) -> Finding | None:
    exact = whole.first_difference(again) is None  # the uninterrupted run repeats itself from a fresh launch
    expected = _multisets(whole)
    if not exact and expected != _multisets(again):
        obs.skipped["resume-mismatch"] = ("two uninterrupted runs from the same start delivered different samples: nothing "
                                          "to compare a resumed run with (an order from an unseeded random source?)")
        return None
    found = {}
    for where, ledger in resumed.items():
        delivered = _multisets(ledger)
        lost = [sum(((w - r).values())) for w, r in zip(expected, delivered)]
        extra = [sum(((r - w).values())) for w, r in zip(expected, delivered)]
        differs = ledger.first_difference(whole) if exact else None  # the resumed run's numbers first
        if any(lost) or any(extra) or differs:
            found[where] = {"lost": lost, "extra": extra, "first_difference": differs}
    obs.measured["resume"] = {"reproducible": exact, "batches_in_epoch_0": batches, "mismatches": found}
    if not found:
        return None
    wrong = lambda what: any(what["lost"]) or any(what["extra"])  # noqa: E731 - samples lost or repeated, not just reordered
    where = next((w for w, what in found.items() if wrong(what)), next(iter(found)))  # the worst point is named
    what = found[where]
    severity = "error" if wrong(what) else "warning"
    point = f"mid-epoch (after batch {batches // 2} of {batches})" if where == "mid-epoch" else where
    if severity == "error":
        said = ("delivered other samples than the uninterrupted run: " + "; ".join(
            f"epoch {e}: {lost} samples of the uninterrupted run never came, {extra} came again or instead"
            for e, (lost, extra) in enumerate(zip(what["lost"], what["extra"])) if lost or extra))
    else:
        said = ("delivered the uninterrupted run's samples in another order (each epoch complete): "
                f"resumed run against uninterrupted, {what['first_difference']}")
    return finding(
        "resume-mismatch", severity,
        f"a loader resumed {point} from its state_dict {said}"
        + (f" (also different: {', '.join(w for w in found if w != where)})" if len(found) > 1 else ""),
        "save what the loop has not received yet with the position (a shuffle buffer's content, prefetched items), or make "
        "the order a function of (seed, epoch) and the position; check the resumed run against an uninterrupted one with "
        "a ledger (lesson 09)",
        points=sorted(found), reproducible=exact, lost=what["lost"], extra=what["extra"], batches_in_epoch_0=batches)
