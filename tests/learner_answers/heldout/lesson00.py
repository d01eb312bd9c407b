"""Held-out wrong answers to lesson 00's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import math


def _validate(usable_cores, ranks_per_node):
    for name, value in (("usable_cores", usable_cores), ("ranks_per_node", ranks_per_node)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value!r}")


def _reference_workers_per_rank(usable_cores: int, ranks_per_node: int) -> int:
    """The task read literally: largest w with ranks x (1 + w) <= cores + 1, at least 0, ValueError below 1."""
    _validate(usable_cores, ranks_per_node)
    return max(0, (usable_cores + 1) // ranks_per_node - 1)


def without_the_extra_process(usable_cores: int, ranks_per_node: int) -> int:
    """Forgets the 'one more than the cores' allowance: ranks x (1 + w) <= cores."""
    _validate(usable_cores, ranks_per_node)
    return max(0, usable_cores // ranks_per_node - 1)


def negative_when_ranks_exceed_cores(usable_cores: int, ranks_per_node: int) -> int:
    """No floor at 0: more ranks than cores gives a negative worker count."""
    _validate(usable_cores, ranks_per_node)
    return (usable_cores + 1) // ranks_per_node - 1


def ceil_division(usable_cores: int, ranks_per_node: int) -> int:
    """Rounds the per-rank share up, so the node runs more processes than allowed."""
    _validate(usable_cores, ranks_per_node)
    return max(0, math.ceil((usable_cores + 1) / ranks_per_node) - 1)


def node_total_not_per_rank(usable_cores: int, ranks_per_node: int) -> int:
    """Returns the workers for the whole node (cores + 1 - ranks), not per rank."""
    _validate(usable_cores, ranks_per_node)
    return max(0, usable_cores + 1 - ranks_per_node)


def no_argument_checks(usable_cores: int, ranks_per_node: int) -> int:
    """Right formula, but no ValueError: 0 cores returns 0, 0 ranks divides by zero."""
    return max(0, (usable_cores + 1) // ranks_per_node - 1)


def vague_error_message(usable_cores: int, ranks_per_node: int) -> int:
    """Raises ValueError without naming the argument or its value."""
    if usable_cores < 1 or ranks_per_node < 1:
        raise ValueError("invalid input")
    return max(0, (usable_cores + 1) // ranks_per_node - 1)


HELDOUT = {
    "00.1": [without_the_extra_process, negative_when_ranks_exceed_cores, ceil_division,
             node_total_not_per_rank, no_argument_checks, vague_error_message],
}
