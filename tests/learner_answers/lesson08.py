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


# ---------------------------------------------------------------- 08.4: token_budget(activation_bytes, limit_bytes, max_len)


def budget_refusing_exactly_one_document(activation_bytes, limit_bytes, max_len):
    """Raises ValueError when the budget is max_len or fewer: a budget of exactly one document is refused."""
    small, large = activation_bytes(1000), activation_bytes(2000)
    per_token = (large - small) / 1000
    budget = int((limit_bytes - (small - 1000 * per_token)) // per_token)
    if budget <= max_len:
        raise ValueError(f"limit_bytes={limit_bytes} fits {budget} tokens, not more than max_len={max_len}")
    return budget


WRONG = {
    "08.1": [
        Wrong(share_of_padded_documents, 'the share of documents that are padded'),
    ],
    "08.2": [
        Wrong(batches_dropping_short_group, 'the short last group was dropped'),
        Wrong(batches_filling_with_empty, 'not with empty batches'),
    ],
    "08.4": [
        Wrong(budget_refusing_exactly_one_document, 'raise only when it is fewer'),
    ],
}
