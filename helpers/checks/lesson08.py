"""Lesson 08's self-checks: a batch's padding share, equal bucketed batches per rank, a packed-row mask, a token budget."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from helpers.checks.core import Answer, Case, Failed, Wrong, consistent_hints, exercise
from helpers.checks.lesson08_ranks import (array_hint, check_counts, check_cover_and_budget, check_length_gap,
                                           check_steps_shuffled)
from helpers.sequence_samplers import DistributedBucketSampler, sorted_batches
from helpers.sequences import corpus_lengths


def padding_share_right(lengths: list[int]) -> float:
    """Exercise 08.1's reference answer (the tests pass it to the check)."""
    return 1 - sum(lengths) / (len(lengths) * max(lengths))


# (lengths, the padding share worked out by hand, why)
PADDING_CASES = (
    Case(([3, 1],), 1 - 4 / 6, "padded to 3: positions 3 + 3, real tokens 3 + 1"),
    Case(([4, 4, 4],), 0.0, "equal lengths need no padding"),
    Case(([7],), 0.0, "a batch of one document is padded to itself"),
    Case(([2, 8, 5, 1],), 1 - 16 / 32, "padded to 8: 4 x 8 positions, 16 real tokens"),
    Case(([10, 1, 1, 1],), 1 - 13 / 40, "one long document: 27 of 40 positions are padding"),
)


def _close(got: Any, value: Any) -> bool:
    return isinstance(got, (int, float)) and not isinstance(got, bool) and math.isclose(got, value, abs_tol=1e-9)


PADDING_MISTAKES: tuple[tuple[str, Callable[[list[int]], float]], ...] = (  # (hint, the typical wrong answer)
    ("the longest document's own tokens are real, not padding",
     lambda l: (len(l) * max(l) - sum(l) + max(l)) / (len(l) * max(l))),
    ("the batch is padded to its own longest document ({}), not to a fixed 256", lambda l: 1 - sum(l) / (len(l) * 256)),
    ("divide the padding by all the positions (len x longest), not by the real tokens",
     lambda l: (len(l) * max(l) - sum(l)) / sum(l)),
    ("the batch is padded to its longest document, max(lengths), not max(lengths) + 1",
     lambda l: 1 - sum(l) / (len(l) * (max(l) + 1))),
    ("that is the share of real tokens: the padding share is 1 minus it", lambda l: sum(l) / (len(l) * max(l))),
    ("the longest document's positions count too: divide by all len(lengths) x max(lengths) positions",
     lambda l: (len(l) * max(l) - sum(l)) / ((len(l) - 1) * max(l)) if len(l) > 1 else 0.0),
    ("that is the share of documents that are padded, not of positions: add up each document's padding (longest - "
     "its length) and divide by all the positions, len(lengths) x max(lengths)",
     lambda l: sum(1 for n in l if n < max(l)) / len(l)),
)


@exercise("08.1", "padding_share", right=padding_share_right, wrong=[
    Wrong(lambda lengths: (len(lengths) * max(lengths) - sum(lengths) + max(lengths)) / (len(lengths) * max(lengths)),
          "the longest document's own tokens are real"),
    Wrong(lambda lengths: 1 - sum(lengths) / (len(lengths) * 256), "padded to its own longest document"),
    Wrong(lambda lengths: (len(lengths) * max(lengths) - sum(lengths)) / sum(lengths), "not by the real tokens"),
    Wrong(lambda lengths: 100 * (1 - sum(lengths) / (len(lengths) * max(lengths))), "a share between 0 and 1"),
    Wrong(lambda lengths: (len(lengths) * max(lengths) - sum(lengths)) // (len(lengths) * max(lengths)),
          "divide with /, not //"),
])
def check_padding_share(answer: Answer) -> str:
    """Exercise 08.1: the share of a padded batch's positions that are padding, the batch padded to its longest."""
    for case in PADDING_CASES:
        call = f"{answer.name}({case.args[0]!r})"
        with answer.calling(call):
            got = answer.value(list(case.args[0]))
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            raise Failed(f"{call} returned {got!r} of type {type(got).__name__}; expected a float share")
        if got == 0 and case.expected > 0 and isinstance(got, int):
            raise Failed(f"{call} returned the int 0: divide with /, not // (expected {case.expected:.4f})")
        lengths = case.args[0]
        if got < 0:
            raise Failed(f"{call} returned {got!r}, a negative share: pad to max(lengths), which need not be "
                         f"the first or the last document")
        if got > 1 and math.isclose(got, len(lengths) * max(lengths) - sum(lengths)):
            raise Failed(f"{call} returned {got!r}, the number of padding positions: divide it by the batch's "
                         f"positions, len(lengths) x max(lengths)")
        if not 0 <= got <= 1:
            raise Failed(f"{call} returned {got!r}: a padding share is a share between 0 and 1 (not a percentage)")
        if math.isclose(got, case.expected, abs_tol=1e-6):  # float32 arithmetic is right to about 1e-7
            continue
        if any(got == round(case.expected, digits) for digits in range(5)):
            raise Failed(f"{call} returned {got!r}, expected {case.expected:.6f}: do not round the share (round "
                         "only where you print it)")
        here = [(hint, model) for hint, model in PADDING_MISTAKES if _close(got, model(lengths))]
        hints = consistent_hints(here, answer.value, [c.args for c in PADDING_CASES], _close) or [h for h, _ in here]
        if hints:
            raise Failed(f"{call} returned {got:.4f}, expected {case.expected:.4f}: {hints[0].format(max(lengths))}")
        raise Failed(f"{call} returned {got:.10f}, expected {case.expected:.10f}: {case.why}")
    return f"{answer.name} is right in all {len(PADDING_CASES)} batches"


def rank_batches_right(lengths: list[int], max_tokens: int, rank: int, world_size: int, epoch: int) -> list[list[int]]:
    """Exercise 08.2's reference answer: the lesson's DistributedBucketSampler."""
    sampler = DistributedBucketSampler(lengths, world_size, rank, max_tokens=max_tokens, seed=0)
    sampler.set_epoch(epoch)
    return list(sampler)


def _per_rank_buckets(lengths: list[int], max_tokens: int, rank: int, world_size: int, epoch: int) -> list[list[int]]:
    """The usual first try: bucket this rank's strided share on its own."""
    share = np.arange(rank, len(lengths), world_size)
    return sorted_batches(np.asarray(lengths), share, None, max_tokens, len(share))


def _shuffled_per_rank(lengths: list[int], max_tokens: int, rank: int, world_size: int, epoch: int) -> list[list[int]]:
    """One shared plan, but each rank shuffles its own batches: equal counts, unrelated lengths per step."""
    plan = rank_batches_right(lengths, max_tokens, rank, world_size, epoch)
    return [plan[i] for i in np.random.default_rng([epoch, rank]).permutation(len(plan))]


def _same_every_epoch(lengths: list[int], max_tokens: int, rank: int, world_size: int, epoch: int) -> list[list[int]]:
    return rank_batches_right(lengths, max_tokens, rank, world_size, 0)


def _everything_on_every_rank(lengths: list[int], max_tokens: int, rank: int, world_size: int,
                              epoch: int) -> list[list[int]]:
    return sorted_batches(np.asarray(lengths), np.arange(len(lengths)), None, max_tokens, len(lengths))


# (corpus size, seed, max_len, max_tokens, world_size): lesson 08's budget, a tight one, 3 and 4 ranks (document counts
# that do not divide by the ranks: no document may be left out); the last four plan 19, 32, 27 and 33 batches, counts
# the ranks do not divide: the short last group must be completed, not dropped or filled with empty batches
RANK_SETUPS = ((513, 1, 256, 2048, 2), (301, 7, 128, 512, 3), (402, 3, 64, 256, 4),
               (300, 2, 256, 2048, 2), (257, 5, 128, 512, 3), (200, 4, 64, 256, 4), (242, 6, 128, 512, 4))


@exercise("08.2", "rank_batches", right=rank_batches_right, wrong=[
    Wrong(_per_rank_buckets, "ranks get different numbers of batches"),
    Wrong(_shuffled_per_rank, "length gap"),
    Wrong(_same_every_epoch, "epoch 1 repeats epoch 0"),
    Wrong(_everything_on_every_rank, "on more than one rank"),
    Wrong(lambda lengths, max_tokens, rank, world_size, epoch: [[i] for i in range(rank, len(lengths), world_size)],
          "ranks get different numbers of batches"),
    Wrong(lambda lengths, max_tokens, rank, world_size, epoch: [np.array(b) for b in rank_batches_right(
        lengths, max_tokens, rank, world_size, epoch)], "make each batch a list"),
    Wrong(lambda lengths, max_tokens, rank, world_size, epoch: sorted(rank_batches_right(
        lengths, max_tokens, rank, world_size, epoch), key=lambda b: max(lengths[i] for i in b)), "in order of length"),
])
def check_rank_batches(answer: Answer) -> str:
    """Exercise 08.2: one rank's bucketed batches under a token budget, equal in number and similar in length across ranks."""
    for size, seed, max_len, max_tokens, world in RANK_SETUPS:
        lengths = corpus_lengths(size, max_len=max_len, seed=seed).tolist()
        setup = f"{size} documents (seed {seed}), max_tokens={max_tokens}, world_size={world}"
        plans: dict[int, list[list[list[int]]]] = {}
        for epoch in (0, 1):
            plans[epoch] = []
            for rank in range(world):
                call = f"{answer.name}(lengths, {max_tokens}, rank={rank}, world_size={world}, epoch={epoch})"
                with answer.calling(call, hint=array_hint):
                    got = answer.value(list(lengths), max_tokens, rank, world, epoch)
                if not isinstance(got, (list, tuple)):
                    raise Failed(f"{call} returned a {type(got).__name__}; expected a list of batches, each a list of "
                                 f"document indices")
                odd = next((b for b in got if not isinstance(b, (list, tuple))), None)
                if odd is not None:
                    raise Failed(f"{call}: a batch is a {type(odd).__name__}; make each batch a list of document "
                                 f"indices (.tolist())")
                plans[epoch].append([[int(i) for i in b] for b in got])
            check_counts(plans[epoch], lengths, max_tokens, setup)
            check_cover_and_budget(plans[epoch], lengths, max_tokens, setup)
            check_length_gap(plans[epoch], lengths, max_tokens, setup)
            check_steps_shuffled(plans[epoch][0], lengths, setup)
        if plans[0] == plans[1]:
            raise Failed(f"with {setup}: epoch 1 repeats epoch 0 batch for batch; shuffle with a generator seeded "
                         f"from the epoch")
    return f"{answer.name} gives every rank the same number of batches of similar lengths in {len(RANK_SETUPS)} setups"


def packed_mask_right(doc_ids: torch.Tensor) -> torch.Tensor:
    """Exercise 08.3's reference answer: causal within each document; padding (-1) attends to itself only."""
    length = len(doc_ids)
    allowed = (doc_ids[:, None] == doc_ids[None, :]) & (doc_ids[:, None] >= 0)
    allowed &= torch.ones(length, length, dtype=torch.bool).tril()
    return allowed | torch.eye(length, dtype=torch.bool)


def _mask_by_hand(doc_ids: list[int]) -> list[list[bool]]:
    """The expected mask written out position by position (not with the reference's tensor ops)."""
    return [[(i == j) or (d >= 0 and d == e and j <= i) for j, e in enumerate(doc_ids)] for i, d in enumerate(doc_ids)]


MASK_ROWS = ([0, 0, 0, 1, 1, 2, -1, -1], [5, 5, 7, 7, 7, 7], [3, -1, -1], [0, 0, 0, 0])


@exercise("08.3", "packed_mask", right=packed_mask_right, wrong=[
    Wrong(lambda doc_ids: torch.ones(len(doc_ids), len(doc_ids), dtype=torch.bool).tril(), "another document"),
    Wrong(lambda doc_ids: (doc_ids[:, None] == doc_ids[None, :]), "a later position"),
    Wrong(lambda doc_ids: ~packed_mask_right(doc_ids), "True must mean may attend"),
    Wrong(lambda doc_ids: packed_mask_right(doc_ids) & (doc_ids[:, None] >= 0), "no position it may attend to"),
    Wrong(lambda doc_ids: packed_mask_right(doc_ids).float(), "a bool tensor"),
])
def check_packed_mask(answer: Answer) -> str:
    """Exercise 08.3: who may attend to whom in a packed row (True = may attend), causal within documents."""
    for row in MASK_ROWS:
        call = f"{answer.name}(torch.tensor({row}))"
        with answer.calling(call):
            got = answer.value(torch.tensor(row))
        if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
            raise Failed(f"{call} returned {type(got).__name__}"
                         f"{' of dtype ' + str(got.dtype) if isinstance(got, torch.Tensor) else ''}; expected a bool "
                         f"tensor (True = may attend), as scaled_dot_product_attention reads it")
        if tuple(got.shape) != (len(row), len(row)):
            raise Failed(f"{call} has shape {tuple(got.shape)}; expected ({len(row)}, {len(row)}): query x key")
        expected = _mask_by_hand(row)
        if got.tolist() == [[not a for a in line] for line in expected]:
            raise Failed(f"{call} is the opposite mask: True must mean may attend here (nn.MultiheadAttention reads "
                         f"True as blocked; this exercise follows scaled_dot_product_attention)")
        for i, line in enumerate(expected):
            if not any(got[i].tolist()):
                fix = "let padding attend to itself" if row[i] < 0 else "j <= i includes j == i"
                raise Failed(f"{call}: query {i} has no position it may attend to, so its softmax is 0/0 (NaN); "
                             f"{fix}")
            for j, allowed in enumerate(line):
                if bool(got[i, j]) == allowed:
                    continue
                if not allowed and row[i] >= 0 and row[j] >= 0 and row[i] != row[j]:
                    raise Failed(f"{call}: position {i} (document {row[i]}) may attend to position {j} of another "
                                 f"document ({row[j]}); keep attention inside each document")
                if not allowed and j > i:
                    raise Failed(f"{call}: position {i} may attend to a later position {j}; the mask is causal")
                if allowed:
                    raise Failed(f"{call}: position {i} may not attend to position {j}; a token attends to itself "
                                 f"and to earlier tokens of its own document")
                if row[i] < 0:
                    raise Failed(f"{call}: padding position {i} may attend to position {j}; padding attends only "
                                 f"to itself")
                if row[j] < 0:
                    raise Failed(f"{call}: position {i} may attend to padding position {j}; keep padding out of "
                                 f"every document's attention")
                raise Failed(f"{call}: position {i} -> {j} should be {allowed}, got {bool(got[i, j])}")
    return f"{answer.name} gives the right mask for {len(MASK_ROWS)} packed rows"


def token_budget_right(activation_bytes: Callable[[int], int], limit_bytes: int, max_len: int) -> int:
    """Exercise 08.4's reference answer: the most tokens whose measured activation memory fits the limit."""
    small, large = activation_bytes(1000), activation_bytes(2000)  # two measurements: memory is linear in tokens
    per_1000 = large - small
    fixed = small - per_1000  # what the model holds whatever the batch
    budget = int((limit_bytes - fixed) * 1000 // per_1000)
    if budget < max_len:
        raise ValueError(f"limit_bytes={limit_bytes} fits {budget} tokens, fewer than max_len={max_len}: the longest "
                         f"document does not fit")
    return budget


def _line(activation_bytes: Callable[[int], int], limit_bytes: int) -> float:
    """The tokens at which the measured line reaches limit_bytes, unrounded (for the wrong answers)."""
    small, large = activation_bytes(1000), activation_bytes(2000)
    return (limit_bytes - (2 * small - large)) * 1000 / (large - small)


def _raising(activation_bytes: Callable[[int], int], limit_bytes: int, max_len: int, error: type,
             name: str = "limit_bytes=") -> int:
    """The right budget, refusing a small one with `error` (its message naming `name` and the value)."""
    budget = int(_line(activation_bytes, limit_bytes))
    if budget < max_len:
        raise error(f"{name}{limit_bytes} holds {budget} tokens, fewer than max_len={max_len}")
    return budget


def _linear(fixed: int, per_token: int) -> Callable[[int], int]:
    """A stand-in measurement: `fixed` bytes plus `per_token` bytes per token."""
    def activation_bytes(tokens: int) -> int:
        if isinstance(tokens, bool) or not isinstance(tokens, (int, np.integer)):
            raise TypeError(f"tokens must be an int, got {tokens!r}")
        if tokens < 250:  # as with the lesson's model: rows of 250 tokens, and an empty batch runs nothing
            raise ValueError(f"tokens must be at least 250 (one row), got {tokens}: measure at 1000 and 2000 tokens")
        return fixed + per_token * int(tokens)
    return activation_bytes


# (fixed bytes, bytes per token, limit, max_len, the budget worked out by hand)
BUDGET_CASES = ((0, 1000, 2_048_000, 256, 2048), (500_000, 1000, 2_548_000, 256, 2048),
                (4096, 1353, 10_000_000, 512, 7387), (0, 1000, 256_000, 256, 256),
                (1_000_000, 2000, 1_400_000, 256, ValueError))


@exercise("08.4", "token_budget", right=token_budget_right, wrong=[
    Wrong(lambda f, limit, max_len: limit // (f(1000) // 1000), "the fixed part"),
    Wrong(lambda f, limit, max_len: math.ceil(_line(f, limit)), "more than limit_bytes"),
    Wrong(lambda f, limit, max_len: int(_line(f, limit)), "raise ValueError"),
    Wrong(lambda f, limit, max_len: _line(f, limit), "a whole number of tokens"),
    Wrong(lambda f, limit, max_len: int(_line(f, limit)) // max_len * max_len, "not whole rows"),
    Wrong(lambda f, limit, max_len: _raising(f, limit, max_len, RuntimeError), "the task asks for ValueError"),
    Wrong(lambda f, limit, max_len: _raising(f, limit, max_len, ValueError, name=""), "name limit_bytes"),
])
def check_token_budget(answer: Answer) -> str:
    """Exercise 08.4: the largest max_tokens whose measured activation memory fits a limit."""
    for fixed, per_token, limit, max_len, expected in BUDGET_CASES:
        measure = _linear(fixed, per_token)
        call = f"{answer.name}(<{fixed:,} + {per_token:,} bytes per token>, limit_bytes={limit:,}, max_len={max_len})"
        if expected is ValueError:
            try:
                got: Any = answer.value(measure, limit, max_len)
            except ValueError as exc:
                missing = [w for w, ok in (("limit_bytes", "limit_bytes" in str(exc)),
                                           (str(limit), str(limit) in str(exc).replace(",", ""))) if not ok]
                if missing:
                    raise Failed(f"{call} raised ValueError({str(exc)!r}): name limit_bytes and its value "
                                 f"({' and '.join(missing)} missing)") from exc
                continue
            except Exception as exc:
                with answer.calling(call, hint=lambda e: f" (the task asks for ValueError, not {type(e).__name__})"):
                    raise exc
            raise Failed(f"{call} returned {got!r}, fewer tokens than one document of max_len={max_len}: "
                         f"raise ValueError naming limit_bytes")
        with answer.calling(call, hint=lambda e, want=expected, n=max_len: (
                f" (the budget here is {want} tokens, {'exactly' if want == n else 'at least'} one document of max_len={n}: "
                "raise only when it is fewer, budget < max_len)" if isinstance(e, ValueError) else "")):
            got = answer.value(measure, limit, max_len)
        if isinstance(got, bool) or not isinstance(got, (int, np.integer)):
            raise Failed(f"{call} returned {got!r}; expected an int: a whole number of tokens (round down)")
        if measure(int(got)) > limit:
            raise Failed(f"{call} returned {got}, whose activations take {measure(int(got)):,} bytes, more than "
                         f"limit_bytes={limit:,}: round down, and count the fixed part")
        if got != expected and got == expected // max_len * max_len:
            raise Failed(f"{call} returned {got}, expected {expected}: the budget is in tokens, not whole rows: do "
                         f"not round to a multiple of max_len")
        if got != expected and got == int((limit - measure(1000)) * 1000 // (measure(2000) - measure(1000))):
            raise Failed(f"{call} returned {got}, expected {expected}: subtract the fixed part, "
                         "activation_bytes(1000) - 1000 x bytes per token, not activation_bytes(1000) (it holds 1000 "
                         "tokens' bytes too)")
        if got != expected:
            hint = " (memory = the fixed part + bytes per token x tokens: subtract the fixed part first)" if fixed else ""
            raise Failed(f"{call} returned {got}, expected {expected}: the most tokens that fit{hint}")
    return f"{answer.name} finds the largest budget that fits in {len(BUDGET_CASES) - 1} cases and refuses one too small"
