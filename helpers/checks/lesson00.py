"""Lesson 00's self-check: num_workers per rank."""
from __future__ import annotations

import math
import os

from helpers.checks.core import Answer, Case, Mistake, Wrong, exercise

WORKERS_PER_RANK_CASES: tuple[Case, ...] = (
    Case((2, 1), 2, "1 main process + 2 workers = 3 processes on 2 cores: one over, which the rule allows"),
    Case((1, 1), 1, "1 main process + 1 worker = 2 processes on 1 core: one over, which the rule allows"),
    Case((16, 8), 1, "8 x (1 + 1) = 16 processes on 16 cores; 8 x (1 + 2) = 24 would be 7 over"),
    Case((64, 8), 7, "8 x (1 + 7) = 64 processes on 64 cores; one more worker each is 8 over"),
    Case((96, 8), 11, "8 x (1 + 11) = 96 on 96 cores"),
    Case((7, 2), 3, "2 x (1 + 3) = 8 processes on 7 cores: one over, allowed"),
    Case((3, 2), 1, "2 x (1 + 1) = 4 processes on 3 cores: exactly one over, allowed (at most, not below)"),
    Case((2, 2), 0, "2 ranks on 2 cores: 2 x (1 + 1) = 4 is 2 over, so load in the main process (num_workers=0)"),
    Case((4, 8), 0, "more ranks than cores: never a negative num_workers; 0 is the least"),
    Case((6, 4), 0, "4 x (1 + 1) = 8 processes on 6 cores is 2 over: (6 + 1) / 4 - 1 = 0.75 rounds down, not up"),
    Case((9, 4), 1, "4 x (1 + 1) = 8 on 9 cores; 4 x (1 + 2) = 12 is 3 over: (9 + 1) / 4 - 1 = 1.5 rounds down"),
    Case((8, 0), ValueError, "a node runs at least one rank: ranks_per_node=0 is bad input", ("ranks_per_node", "0")),
    Case((0, 1), ValueError, "a machine has at least one usable core: usable_cores=0 is bad input", ("usable_cores", "0")),
    Case((-1, 1), ValueError, "a negative core count is bad input too: check `< 1`, not `== 0`", ("usable_cores", "-1")),
    Case((8, -1), ValueError, "a negative rank count is bad input too (max(0, ...) would hide it): check ranks_per_node `< 1`, "
         "not `== 0`", ("ranks_per_node", "-1")),
)


def _per_rank(cores: int, ranks: int) -> int:
    return max(0, (cores + 1) // ranks - 1)


WORKERS_MISTAKES: tuple[Mistake, ...] = (
    (lambda c, r: _per_rank(os.cpu_count() or 1, r), "that is the answer for this machine's core count: use the "
     "usable_cores argument, not os.cpu_count() (the rule is for any node)"),
    (lambda c, r: max(0, c + 1 - r), "that is the whole node's workers (cores + 1 - ranks): divide among the "
     "ranks_per_node ranks, each running 1 main process + num_workers"),
    *((rounded, "that rounds the quotient to the nearest whole number (or up): num_workers rounds down, not up, "
       "since one worker more would put the node over the rule: (usable_cores + 1) // ranks_per_node - 1")
      for rounded in (lambda c, r: max(0, round((c + 1) / r) - 1), lambda c, r: max(0, round((c + 1) / r - 1)),
                      lambda c, r: max(0, math.ceil((c + 1) / r) - 1))),
    (lambda c, r: max(1, (c + 1) // r - 1), "that never goes below 1 worker (max(1, ...)): when the ranks' main processes "
     "already fill the cores, 0 is right (num_workers=0 loads in the main process); clamp at 0, not 1"),
)


def workers_per_rank_right(usable_cores: int, ranks_per_node: int) -> int:
    """Exercise 00.1's reference answer (the tests pass it to the check)."""
    for name, value in (("usable_cores", usable_cores), ("ranks_per_node", ranks_per_node)):
        if value < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")
    return max(0, (usable_cores + 1) // ranks_per_node - 1)


def _raises(error: Exception) -> int:
    """Raise `error` (a wrong answer's bad-input branch)."""
    raise error


def _ranks_checked_against_zero(usable_cores: int, ranks_per_node: int) -> int:
    if usable_cores < 1:
        raise ValueError(f"usable_cores must be at least 1, got {usable_cores}")
    if ranks_per_node == 0:  # a negative count slips through, and max(0, ...) hides it
        raise ValueError(f"ranks_per_node must be at least 1, got {ranks_per_node}")
    return max(0, (usable_cores + 1) // ranks_per_node - 1)


@exercise("00.1", "workers_per_rank", right=workers_per_rank_right, wrong=[
    Wrong(lambda c, r: max(0, (c + 1) // r), "workers_per_rank(2, 1) returned 3, expected 2"),  # forgets the main process
    Wrong(lambda c, r: max(0, c // r - 1), "workers_per_rank(2, 1) returned 1, expected 2"),  # no process over the cores
    Wrong(lambda c, r: (c + 1) // r - 1 if c >= 1 and r >= 1 else workers_per_rank_right(c, r), "returned -1"),  # negative
    Wrong(lambda c, r: 2 * c, "returned 4"),  # the "2x cores" folklore
    Wrong(lambda c, r: max(0, (c + 1 - r) / r) if c >= 1 and r >= 1 else workers_per_rank_right(c, r), "a float"),
    Wrong(lambda c, r: max(0, (c + 1) // max(r, 1) - 1), "expected ValueError"),  # no input validation
    Wrong(lambda c, r: max(0, round((c + 1) / r - 1)) if c >= 1 and r >= 1 else workers_per_rank_right(c, r),
          "workers_per_rank(6, 4) returned 1, expected 0"),  # rounds instead of flooring
    Wrong(lambda c, r: _raises(ValueError("bad input")) if c < 1 or r < 1 else workers_per_rank_right(c, r),
          "name the argument and its value"),  # a message that does not say which argument
    Wrong(lambda c, r: _raises(TypeError(f"ranks_per_node must be at least 1, got {r}")) if r < 1 else workers_per_rank_right(c, r),
          "expected ValueError"),  # the wrong exception type
    Wrong(lambda c, r: workers_per_rank_right(max(c, 1), r) if c != 0 else workers_per_rank_right(c, r),
          "check `< 1`, not `== 0`"),  # checks `== 0` instead of `< 1`
    Wrong(_ranks_checked_against_zero, "workers_per_rank(8, -1) returned 0; expected ValueError"),  # `== 0` for ranks_per_node
])
def check_workers_per_rank(answer: Answer) -> str:
    """Exercise 00.1: num_workers per rank so that ranks x (1 main + workers) is at most the usable cores + 1."""
    return answer.cases(WORKERS_PER_RANK_CASES, int, WORKERS_MISTAKES,
                     type_hint=": num_workers is a whole number, so divide with // (floor division), not /")
