"""Lesson 08's exercises as learners answer them, written from the task text alone (issue 39)."""
from __future__ import annotations

import numpy as np

from helpers.checks.core import Wrong
from helpers.sequence_samplers import sorted_batches

# ---------------------------------------------------------------- 08.1: padding_share(lengths)


def share_of_padded_documents(lengths):
    """The share of documents that get padding, not the share of positions."""
    longest = max(lengths)
    return sum(1 for length in lengths if length < longest) / len(lengths)


def share_padded_one_past_the_longest(lengths):
    """Pads to max(lengths) + 1, one position past the longest document (issue 39)."""
    return 1 - sum(lengths) / (len(lengths) * (max(lengths) + 1))


def share_of_real_tokens(lengths):
    """The share of real tokens: one minus the padding share (issue 39)."""
    return sum(lengths) / (len(lengths) * max(lengths))


def share_without_the_longest(lengths):
    """Leaves the longest document out of the positions, as if only the shorter ones were padded (issue 39)."""
    longest, rest = max(lengths), sorted(lengths)[:-1]
    return sum(longest - n for n in rest) / (len(rest) * longest) if rest else 0.0


def share_rounded(lengths):
    """Rounds the share to 2 decimals (issue 39)."""
    return round(1 - sum(lengths) / (len(lengths) * max(lengths)), 2)


# ---------------------------------------------------------------- 08.2: rank_batches(lengths, max_tokens, rank, world_size, epoch)


def _groups(lengths, max_tokens, world_size, epoch):
    """All batches planned once from (0, epoch), sorted by length, grouped world_size at a time, groups shuffled."""
    rng = np.random.default_rng([0, epoch])
    order = rng.permutation(len(lengths))
    batches = sorted_batches(np.asarray(lengths), order, None, max_tokens, len(lengths))
    groups = [batches[i:i + world_size] for i in range(0, len(batches), world_size)]
    return groups, rng


def batches_dropping_short_group(lengths, max_tokens, rank, world_size, epoch):
    """Deals groups of world_size batches and drops a last group that is short of world_size: its documents are lost."""
    groups, rng = _groups(lengths, max_tokens, world_size, epoch)
    groups = [group for group in groups if len(group) == world_size]
    return [groups[i][rank] for i in rng.permutation(len(groups))]


def batches_filling_with_empty(lengths, max_tokens, rank, world_size, epoch):
    """Fills a last group short of world_size with empty batches: equal counts, but a rank steps on nothing."""
    groups, rng = _groups(lengths, max_tokens, world_size, epoch)
    groups[-1] = groups[-1] + [[] for _ in range(world_size - len(groups[-1]))]
    return [[int(i) for i in groups[i][rank]] for i in rng.permutation(len(groups))]


def _plan(lengths, max_tokens, epoch):
    """The whole corpus bucketed once, in one pool, from a generator every rank seeds alike."""
    rng = np.random.default_rng(epoch)
    return sorted_batches(np.asarray(lengths), rng.permutation(len(lengths)), None, max_tokens, len(lengths)), rng


def batches_dealt_with_a_leftover(lengths, max_tokens, rank, world_size, epoch):
    """One plan dealt out with [rank::world_size], a leftover batch not handled: ranks differ by one step (issue 39)."""
    batches, rng = _plan(lengths, max_tokens, epoch)
    mine = batches[rank::world_size]
    rng.shuffle(mine)
    return mine


def batches_leftover_sliced_off(lengths, max_tokens, rank, world_size, epoch):
    """b[:len(b) // world_size * world_size]: the leftover batches' documents are in no batch (issue 39)."""
    batches, rng = _plan(lengths, max_tokens, epoch)
    mine = batches[:len(batches) // world_size * world_size][rank::world_size]
    rng.shuffle(mine)
    return mine


def batches_last_step_padded_empty(lengths, max_tokens, rank, world_size, epoch):
    """Pads the last step with empty batches so that the counts agree (issue 39)."""
    batches, rng = _plan(lengths, max_tokens, epoch)
    batches += [[] for _ in range(-len(batches) % world_size)]
    mine = batches[rank::world_size]
    rng.shuffle(mine)
    return mine


# ---------------------------------------------------------------- 08.4: token_budget(activation_bytes, limit_bytes, max_len)


def budget_refusing_exactly_one_document(activation_bytes, limit_bytes, max_len):
    """Raises ValueError when the budget is max_len or fewer: a budget of exactly one document is refused."""
    small, large = activation_bytes(1000), activation_bytes(2000)
    per_token = (large - small) / 1000
    budget = int((limit_bytes - (small - 1000 * per_token)) // per_token)
    if budget <= max_len:
        raise ValueError(f"limit_bytes={limit_bytes} fits {budget} tokens, not more than max_len={max_len}")
    return budget


def budget_less_the_first_measurement(activation_bytes, limit_bytes, max_len):
    """Subtracts activation_bytes(1000), 1000 tokens' bytes with the fixed part, in place of the fixed part (issue 39)."""
    small, large = activation_bytes(1000), activation_bytes(2000)
    budget = int((limit_bytes - small) * 1000 // (large - small))
    if budget < max_len:
        raise ValueError(f"limit_bytes={limit_bytes} fits {budget} tokens")
    return budget


WRONG = {
    "08.1": [
        Wrong(share_of_padded_documents, 'the share of documents that are padded'),
        Wrong(share_padded_one_past_the_longest, 'not max(lengths) + 1'),
        Wrong(share_of_real_tokens, 'the share of real tokens'),
        Wrong(share_without_the_longest, "the longest document's positions count too"),
        Wrong(share_rounded, 'do not round'),
    ],
    "08.2": [
        Wrong(batches_dropping_short_group, 'the short last group was dropped'),
        Wrong(batches_filling_with_empty, 'not with empty batches'),
        Wrong(batches_dealt_with_a_leftover, 'do not divide among 2 ranks, so dealing them out'),
        Wrong(batches_leftover_sliced_off, 'the short last group was dropped'),
        Wrong(batches_last_step_padded_empty, 'not with empty batches'),
    ],
    "08.4": [
        Wrong(budget_refusing_exactly_one_document, 'raise only when it is fewer'),
        Wrong(budget_less_the_first_measurement, 'not activation_bytes(1000)'),
    ],
}
