"""Exercise 08.2's plan checks: equal batch counts, every document in one rank's batches within the budget, steps
shuffled, and the ranks' lengths close at each step."""
from __future__ import annotations

import numpy as np

from helpers.checks.core import Failed
from helpers.sequence_samplers import sorted_batches


def check_counts(plans: list[list[list[int]]], lengths: list[int], max_tokens: int, setup: str) -> None:
    """Every rank as many batches; a plan dealt out without completing its short last group is named as such."""
    counts = [len(plan) for plan in plans]
    if len(set(counts)) == 1:
        return
    total, world = _batch_count(lengths, max_tokens), len(plans)
    def profile(batches: list[list[int]]) -> list[list[int]]:  # each batch's lengths: the same for ties in any order
        return sorted(sorted(lengths[i] for i in batch) for batch in batches)

    dealt = profile([b for plan in plans for b in plan]) == profile(_whole_plan(lengths, max_tokens))
    if dealt and total % world:
        raise Failed(f"with {setup}: ranks get different numbers of batches {counts}: {total} batches do not divide "
                     f"among {world} ranks, so dealing them out leaves the last step to some ranks only, and DDP hangs "
                     "at the end of the epoch. Complete the short last group with batches repeated from it")
    raise Failed(f"with {setup}: ranks get different numbers of batches {counts}; DDP hangs at the end of "
                 f"the epoch. Plan all batches once, from every rank, and deal them out")


def check_cover_and_budget(plans: list[list[list[int]]], lengths: list[int], max_tokens: int, setup: str) -> None:
    """Every document in some batch, none on two ranks, every batch within the budget."""
    owner: dict[int, int] = {}
    repeat_steps = set()  # steps where a rank repeats another's documents: one is allowed, to even out the last
    for rank, plan in enumerate(plans):
        for step, batch in enumerate(plan):
            if not batch:
                raise Failed(f"with {setup}: rank {rank} has an empty batch at step {step}: {_batch_count(lengths, max_tokens)} "
                             f"batches do not divide among {len(plans)} ranks. Complete the short last group with batches "
                             "repeated from it, not with empty batches (an empty batch has no tokens to train on)")
            if len(batch) * max(lengths[i] for i in batch) > max_tokens:
                raise Failed(f"with {setup}: rank {rank}'s batch of {len(batch)} documents padded to "
                             f"{max(lengths[i] for i in batch)} holds more than max_tokens={max_tokens} positions")
            for index in batch:
                if owner.setdefault(index, rank) != rank:
                    repeat_steps.add(step)
    if len(repeat_steps) > 1:
        index = next(i for rank, plan in enumerate(plans) for i in plan[max(repeat_steps)] if owner[i] != rank)
        raise Failed(f"with {setup}: document {index} is on more than one rank, in {len(repeat_steps)} steps; deal "
                     f"each batch to one rank (repeating batches in one step to even out the last is fine)")
    missing = sorted(set(range(len(lengths))) - set(owner))
    total = _batch_count(lengths, max_tokens)
    if missing and total % len(plans) and len(plans[0]) == total // len(plans):
        raise Failed(f"with {setup}: documents {missing[:5]} are in no rank's batches: {total} batches do not divide among "
                     f"{len(plans)} ranks, and the short last group was dropped. Complete it with batches repeated from it "
                     "(every document trained on, each rank one more step)")
    if missing:
        raise Failed(f"with {setup}: documents {missing[:5]} are in no rank's batches")


def _whole_plan(lengths: list[int], max_tokens: int) -> list[list[int]]:
    """The whole corpus sorted by length and cut under the budget (the same batches for any order)."""
    return sorted_batches(np.asarray(lengths), np.arange(len(lengths)), None, max_tokens, len(lengths))


def _batch_count(lengths: list[int], max_tokens: int) -> int:
    """How many batches the whole corpus makes in one pool (the same for any order)."""
    return len(_whole_plan(lengths, max_tokens))


def array_hint(exc: Exception) -> str:
    """What to change when numpy refuses a list (sorted_batches wants arrays)."""
    return " (sorted_batches needs numpy arrays: pass np.asarray(lengths))" if isinstance(exc, TypeError) else ""


def check_steps_shuffled(plan: list[list[int]], lengths: list[int], setup: str) -> None:
    """The steps in a shuffled order, not from short to long (a rank correlation of step and length)."""
    longest = np.array([max(lengths[i] for i in b) for b in plan], dtype=float)
    if len(longest) < 4 or longest.std() == 0:
        return
    ranks = np.argsort(np.argsort(longest))
    correlation = float(np.corrcoef(np.arange(len(longest)), ranks)[0, 1])
    if abs(correlation) > 0.9:  # sorted steps: 1.0; shuffled ones: mostly under 0.5 (0.66 seen once in 16 steps)
        raise Failed(f"with {setup}: rank 0's steps run in order of length (rank correlation {correlation:.2f}); "
                     f"shuffle the order of the steps, the same way on every rank")


def length_gap(plans: list[list[list[int]]], lengths: list[int]) -> float:
    """Per step, the ranks' longest documents apart, as a share of the longest, summed over the epoch."""
    longest = np.array([[max(lengths[i] for i in b) for b in plan] for plan in plans])
    return float((longest.max(0) - longest.min(0)).sum() / longest.max(0).sum())


def check_length_gap(plans: list[list[list[int]]], lengths: list[int], max_tokens: int, setup: str) -> None:
    """Per step, the ranks' batches of similar lengths (their attention costs follow the length)."""
    gap = length_gap(plans, lengths)
    if gap > 0.25:  # the lesson's sampler: 4-8 %; ranks ordering their batches apart: 36-72 %
        raise Failed(f"with {setup}: at each step the ranks' longest documents differ by {gap:.0%} of the longer "
                     f"(length gap); the rank with the longer rows computes longer and the other waits. Give the "
                     f"ranks neighbouring batches at each step (sorting within pools? use the whole set: a step "
                     f"across two pools pairs a long batch with a short one)")
