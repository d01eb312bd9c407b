"""Self-checks for the exercises: each gives a one-line verdict the learner can act on."""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

STRICT_VAR = "COURSE_CHECKS_MUST_PASS"
Status = Literal["passed", "failed", "not implemented yet"]


@dataclass(frozen=True)
class CheckResult:
    """One self-check's verdict; shown as a single line "Exercise NN.K <status>: <detail>"."""

    exercise: str
    status: Status
    detail: str

    @property
    def passed(self) -> bool:
        """True when the answer was right."""
        return self.status == "passed"

    def __str__(self) -> str:
        return f"Exercise {self.exercise} {self.status}: {self.detail}"

    __repr__ = __str__


def _finish(result: CheckResult) -> CheckResult:
    """Return the verdict; under COURSE_CHECKS_MUST_PASS=1 (the solutions' test run) a non-pass raises."""
    if os.environ.get(STRICT_VAR, "") == "1" and not result.passed:
        raise AssertionError(str(result))
    return result


@dataclass(frozen=True)
class Case:
    """One call a check makes: the arguments, the right answer (or exception type), and why."""

    args: tuple[Any, ...]
    expected: Any
    why: str


def _call_repr(name: str, args: Sequence[Any]) -> str:
    return f"{name}({', '.join(repr(a) for a in args)})"


def check_function(exercise: str, fn: Any, name: str, cases: Sequence[Case], kind: type = int) -> CheckResult:
    """Call the learner's `fn` on each case; the first wrong answer becomes the verdict."""
    if not callable(fn):
        return _finish(CheckResult(exercise, "failed", f"expected the function {name}, got {fn!r}"))
    for case in cases:
        call = _call_repr(name, case.args)
        expects_error = isinstance(case.expected, type) and issubclass(case.expected, BaseException)
        try:
            got = fn(*case.args)
        except NotImplementedError as exc:
            if str(exc).startswith(f"Exercise {exercise}"):
                return _finish(CheckResult(
                    exercise, "not implemented yet", f"replace the `raise NotImplementedError` in {name} with your code"
                ))
            return _finish(CheckResult(exercise, "failed", f"{call} raised NotImplementedError: {exc}"))
        except Exception as exc:
            if expects_error and isinstance(exc, case.expected):
                continue
            return _finish(CheckResult(exercise, "failed", f"{call} raised {type(exc).__name__}: {exc} ({case.why})"))
        if expects_error:
            return _finish(CheckResult(
                exercise, "failed", f"{call} returned {got!r}; expected {case.expected.__name__} ({case.why})"
            ))
        if type(got) is not kind:
            return _finish(CheckResult(
                exercise, "failed", f"{call} returned {got!r} of type {type(got).__name__}; expected {kind.__name__}"
            ))
        if got != case.expected:
            return _finish(CheckResult(
                exercise, "failed", f"{call} returned {got!r}, expected {case.expected!r}: {case.why}"
            ))
    return _finish(CheckResult(exercise, "passed", f"{name} is right in all {len(cases)} cases"))


WORKERS_PER_RANK_CASES: tuple[Case, ...] = (
    Case((2, 1), 1, "1 rank's main process takes 1 core, leaving 1 for a worker"),
    Case((16, 8), 1, "8 main processes take 8 cores, leaving 8: one worker per rank"),
    Case((64, 8), 7, "8 main processes take 8 cores, leaving 56: seven workers per rank"),
    Case((96, 8), 11, "96 cores / 8 ranks = 12 per rank: 1 main process + 11 workers"),
    Case((7, 2), 2, "7 // 2 = 3 cores per rank: 1 main + 2 workers (the spare core stays idle)"),
    Case((2, 2), 0, "2 ranks on 2 cores: no core is left, so load in the main process (num_workers=0)"),
    Case((4, 8), 0, "more ranks than cores: never a negative num_workers; 0 is the least"),
    Case((8, 0), ValueError, "a node runs at least one rank: ranks_per_node=0 is bad input"),
    Case((0, 1), ValueError, "a machine has at least one usable core: usable_cores=0 is bad input"),
)


def check_workers_per_rank(fn: Callable[[int, int], int]) -> CheckResult:
    """Exercise 00.1: num_workers per rank so that ranks x (1 main + workers) fits the usable cores."""
    return check_function("00.1", fn, "workers_per_rank", WORKERS_PER_RANK_CASES)
