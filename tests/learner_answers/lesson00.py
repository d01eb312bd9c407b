"""Lesson 00's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import math
import os

import numpy as np

from helpers.checks.core import Wrong


def _validate(usable_cores, ranks_per_node):
    if usable_cores < 1:
        raise ValueError(f"usable_cores must be at least 1, got {usable_cores}")
    if ranks_per_node < 1:
        raise ValueError(f"ranks_per_node must be at least 1, got {ranks_per_node}")


# ---------------------------------------------------------------- 00.1 wrong answers
def workers_without_the_spare_core(usable_cores, ranks_per_node):
    """Forgets the rule's one extra process: keeps ranks x (1 + workers) at most usable_cores."""
    _validate(usable_cores, ranks_per_node)
    return max(0, usable_cores // ranks_per_node - 1)


def workers_float_division(usable_cores, ranks_per_node):
    """True division: returns a float such as 1.5 workers, not an int."""
    _validate(usable_cores, ranks_per_node)
    return max(0, (usable_cores + 1) / ranks_per_node - 1)


def workers_rounded_up(usable_cores, ranks_per_node):
    """round() of the true quotient: rounds 1.5 workers up to 2, one process too many."""
    _validate(usable_cores, ranks_per_node)
    return max(0, round((usable_cores + 1) / ranks_per_node - 1))


def workers_can_go_negative(usable_cores, ranks_per_node):
    """No clamp at 0: more ranks than cores gives -1 workers."""
    _validate(usable_cores, ranks_per_node)
    return (usable_cores + 1) // ranks_per_node - 1


def workers_never_validates(usable_cores, ranks_per_node):
    """No ValueError for 0 cores or 0 ranks: returns a number (or divides by zero)."""
    return max(0, (usable_cores + 1) // max(ranks_per_node, 1) - 1)


def workers_vague_error(usable_cores, ranks_per_node):
    """Raises ValueError, but the message names neither the argument nor its value."""
    if usable_cores < 1 or ranks_per_node < 1:
        raise ValueError("invalid input")
    return max(0, (usable_cores + 1) // ranks_per_node - 1)


def workers_from_this_machine(usable_cores, ranks_per_node):
    """Reads this machine's os.cpu_count() instead of the usable_cores argument."""
    _validate(usable_cores, ranks_per_node)
    return max(0, ((os.cpu_count() or 1) + 1) // ranks_per_node - 1)


def workers_for_the_whole_node(usable_cores, ranks_per_node):
    """Returns the node's total workers (cores + 1 - ranks), not the per-rank num_workers."""
    _validate(usable_cores, ranks_per_node)
    return max(0, usable_cores + 1 - ranks_per_node)


def workers_strict_inequality(usable_cores, ranks_per_node):
    """Searches with < instead of <=: stops one worker short when the bound is met exactly."""
    _validate(usable_cores, ranks_per_node)
    workers = 0
    while ranks_per_node * (2 + workers) < usable_cores + 1:
        workers += 1
    return workers


def workers_round_of_quotient(usable_cores, ranks_per_node):
    """round() of (cores + 1) / ranks, minus 1: round(1.5) = 2 gives 1 worker on 2 cores and 2 ranks, not 0 (issue 39)."""
    _validate(usable_cores, ranks_per_node)
    return max(0, round((usable_cores + 1) / ranks_per_node) - 1)


def workers_at_least_one(usable_cores, ranks_per_node):
    """max(1, ...): never below one worker, where 0 is right once the ranks' main processes fill the cores (issue 39)."""
    _validate(usable_cores, ranks_per_node)
    return max(1, (usable_cores + 1) // ranks_per_node - 1)


# ---------------------------------------------------------------- 00.1 right answers
def workers_as_numpy_int(usable_cores, ranks_per_node):
    """Right, as an np.int64 (numpy arithmetic)."""
    _validate(usable_cores, ranks_per_node)
    return np.maximum(np.int64(0), (np.int64(usable_cores) + 1) // ranks_per_node - 1)


def workers_by_search(usable_cores, ranks_per_node):
    """Right, by counting down from usable_cores until the node fits."""
    if usable_cores < 1:
        raise ValueError(f"usable_cores={usable_cores}: a node has at least one core")
    if ranks_per_node < 1:
        raise ValueError(f"ranks_per_node={ranks_per_node}: a node runs at least one rank")
    workers = usable_cores
    while workers > 0 and ranks_per_node * (1 + workers) > usable_cores + 1:
        workers -= 1
    return workers


def workers_via_floor(usable_cores, ranks_per_node):
    """Right, with math.floor of the true quotient (exact for core counts)."""
    _validate(usable_cores, ranks_per_node)
    return max(0, math.floor((usable_cores + 1 - ranks_per_node) / ranks_per_node))


WRONG = {
    "00.1": [
        Wrong(workers_without_the_spare_core, 'one over, which the rule allows'),
        Wrong(workers_float_division, 'floor division'),
        Wrong(workers_rounded_up, 'rounds down, not up'),
        Wrong(workers_can_go_negative, 'never a negative num_workers'),
        Wrong(workers_never_validates, 'expected ValueError'),
        Wrong(workers_vague_error, 'name the argument and its value'),
        Wrong(workers_from_this_machine, "this machine's core count"),
        Wrong(workers_for_the_whole_node, "the whole node's workers"),
        Wrong(workers_strict_inequality, 'one over, which the rule allows'),
        Wrong(workers_round_of_quotient, 'rounds down, not up'),
        Wrong(workers_at_least_one, 'max(1, ...)'),
    ],
}
RIGHT = {"00.1": [workers_as_numpy_int, workers_by_search, workers_via_floor]}
