"""What every self-check shares: the verdict, the learner's answer under test, table cases, and the registry of checks."""
from __future__ import annotations

import copy
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from helpers.course import CHECKS_MUST_PASS_VAR
from helpers.env import cuda_required
from helpers.errors import wrapped

Status = Literal["passed", "failed", "not implemented yet", "skipped"]
EXERCISE_ID = re.compile(r"^\d\d\.\d+$")


@dataclass(frozen=True)
class CheckResult:
    """One self-check's verdict; shown as "Exercise NN.K <status>: <detail>", wrapped between words at 100 characters."""

    exercise: str
    status: Status
    detail: str

    @property
    def passed(self) -> bool:
        """True when the answer was right."""
        return self.status == "passed"

    def __str__(self) -> str:
        return wrapped(f"Exercise {self.exercise} {self.status}: {self.detail}", hanging=2)

    __repr__ = __str__


def finish(result: CheckResult) -> CheckResult:
    """Return the verdict; under COURSE_CHECKS_MUST_PASS=1 (the solutions' test run) a non-pass raises.

    A check skipped for want of a GPU passes that run, unless COURSE_REQUIRE_CUDA=1 says the GPU must be there.
    """
    skipped_fine = result.status == "skipped" and not cuda_required()
    if os.environ.get(CHECKS_MUST_PASS_VAR, "") == "1" and not result.passed and not skipped_fine:
        raise AssertionError(str(result))
    return result


class Failed(Exception):
    """Raised by a check: the answer is wrong, and the message says what to fix."""


class Skipped(Exception):
    """Raised by a check: this machine cannot test the answer (a CUDA check without a GPU)."""


class _Stub(Exception):
    """The learner's stub is still in place."""


@dataclass(frozen=True)
class Case:
    """One call a table check makes: the arguments, the right answer (or exception type), and why."""

    args: tuple[Any, ...]
    expected: Any
    why: str
    names: tuple[str, ...] = ()  # for an expected exception: words its message must contain (the argument and its value)


@dataclass(frozen=True)
class Wrong:
    """A typical wrong answer to a check and words its verdict must contain (tests/test_checks.py runs each one)."""

    answer: Any
    says: str


Mistake = tuple[Callable[..., Any], str]  # a typical wrong answer and the hint to give when the learner's matches it


def _is_error(expected: Any) -> bool:
    return isinstance(expected, type) and issubclass(expected, BaseException)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def matches(got: Any, value: Any) -> bool:
    """Whether two answers hold the same numbers (a number, or a 1-D sequence of them), whatever their types."""
    if _number(got) and _number(value):
        return math.isclose(float(got), float(value), rel_tol=1e-6, abs_tol=1e-9)
    if _number(got) or _number(value) or isinstance(got, dict) or isinstance(value, dict):
        return False
    try:
        a, b = np.asarray(got, dtype=np.float64), np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, RuntimeError):
        return False
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=1e-6, atol=1e-9))


def _type_problem(got: Any, kind: type, expected: Any, type_hint: str) -> str:
    """Why `got` is not an answer of `kind` (int, float, or list: a 1-D sequence of ints); "" when it is."""
    if kind is int:
        if isinstance(got, (int, np.integer)) and not isinstance(got, (bool, np.bool_)):
            return ""
        if isinstance(got, (float, np.floating)):
            return f", a float; expected an int{type_hint}"
        return f" of type {type(got).__name__}; expected an int"
    if kind is float:
        if not _number(got):
            return f" of type {type(got).__name__}; expected a float"
        if type_hint and isinstance(got, (int, np.integer)):
            return f" of type int; expected a float{type_hint}"
        return ""
    if isinstance(got, dict):
        return f", a dict; expected a list or array of {len(expected)} counts in class order (0, 1, 2, ...)"
    try:
        array = np.asarray(got)
    except (TypeError, ValueError, RuntimeError):
        return f" of type {type(got).__name__}; expected a 1-D sequence of {len(expected)} ints"
    if array.ndim != 1:
        return f" of shape {array.shape}; expected a 1-D sequence of {len(expected)} ints"
    if array.size and array.dtype.kind not in "iu":
        return f" with dtype {array.dtype}; expected ints (counts are whole numbers){type_hint}"
    return ""


class Answer:
    """The learner's answer as a check sees it: `value`, its `name` in the notebook, and ways to run it."""

    def __init__(self, exercise: str, name: str, value: Any) -> None:
        self.exercise, self.name, self.value = exercise, name, value

    def _is_stub(self, exc: BaseException) -> bool:
        return isinstance(exc, NotImplementedError) and str(exc).startswith(f"Exercise {self.exercise}")

    @contextmanager
    def calling(self, call: str, hint: Callable[[Exception], str] | None = None) -> Iterator[None]:
        """Run learner code in the block: its stub ends the check "not implemented yet"; any other error fails it, naming `call`."""
        try:
            yield
        except (Failed, Skipped):
            raise
        except Exception as exc:
            if self._is_stub(exc):
                raise _Stub from exc
            raise Failed(f"{call} raised {type(exc).__name__}: {exc}{hint(exc) if hint else ''}") from exc

    def probe(self, *args: Any) -> None:
        """Call the answer once only to tell a stub from an answer; whatever else it does is ignored."""
        try:
            self.value(*args)
        except Exception as exc:
            if self._is_stub(exc):
                raise _Stub from exc

    def cases(self, cases: Sequence[Case], kind: type = int, mistakes: Sequence[Mistake] = (), type_hint: str = "") -> str:
        """Call the answer on each case; the first wrong one fails the check, naming the call, what came back and why.

        kind: int (Python or numpy ints pass), float (any number; with `type_hint`, an int fails) or list (1-D ints).
        mistakes: (typical wrong answer, hint); when the learner's value is the one it gives, the verdict gives its hint.
        """
        for case in cases:
            call = f"{self.name}({', '.join(repr(a) for a in case.args)})"
            expects_error = _is_error(case.expected)

            def unexpected(exc: Exception, case: Case = case) -> str:
                return f"; expected {case.expected.__name__} ({case.why})" if _is_error(case.expected) else f" ({case.why})"

            with self.calling(call, hint=unexpected):
                try:
                    got = self.value(*_fresh(case.args))  # an answer that edits its arguments cannot edit the case
                except Exception as exc:
                    if not (expects_error and isinstance(exc, case.expected)):
                        raise
                    missing = [word for word in case.names if word not in str(exc)]
                    if missing:
                        raise Failed(f"{call} raised {type(exc).__name__}({str(exc)!r}): name the argument and its value in "
                                     f"the message ({' and '.join(repr(w) for w in missing)} missing)") from exc
                    continue
            if expects_error:
                raise Failed(f"{call} returned {got!r}; expected {case.expected.__name__} ({case.why})")
            problem = _type_problem(got, kind, case.expected, type_hint)
            if not problem and (np.asarray(got).tolist() == list(case.expected) if kind is list else matches(got, case.expected)):
                continue
            hints: list[str] = []
            for model, hint in mistakes:
                try:
                    typical = model(*case.args)
                except Exception:  # noqa: BLE001 - a model that cannot run on this case says nothing about it
                    continue
                if not matches(typical, case.expected) and matches(got, typical) and hint not in hints:
                    hints.append(hint)
            hints = consistent_hints([(h, m) for m, h in mistakes if h in hints], self.value,
                                     [c.args for c in cases if not _is_error(c.expected)]) or hints
            if hints:  # two typical mistakes can give the same value here: name those that give the answer's every value
                raise Failed(f"{call} returned {got!r}, expected {case.expected!r}: {'; or '.join(hints)}")
            if problem:
                raise Failed(f"{call} returned {got!r}{problem}")
            raise Failed(f"{call} returned {got!r}, expected {case.expected!r}: {case.why}")
        return f"{self.name} is right in all {len(cases)} cases"


def _fresh(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A deep copy of a case's arguments (the arguments themselves where they cannot be copied)."""
    try:
        return copy.deepcopy(args)
    except Exception:  # noqa: BLE001 - a generator, a lock: the case's own arguments
        return args


def unchanged(name: str, before: Any, after: Any, what: str) -> None:
    """Fail naming `what` when the learner's `name` changed an argument the caller keeps using."""
    if before != after:
        raise Failed(f"{name} changed {what}: read it, do not sort, fill or edit it (the caller keeps using it)")


def consistent_hints(models: Sequence[tuple[str, Callable[..., Any]]], answer: Callable[..., Any],
                     calls: Sequence[tuple[Any, ...]], same: Callable[[Any, Any], bool] = matches) -> list[str]:
    """The hints of `models` (hint, typical wrong answer) whose model returns what `answer` returns in every one of
    `calls` where both return: of two mistakes that tie on one case, the one the answer makes everywhere."""
    def run(function: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
        try:
            return True, function(*copy.deepcopy(args))
        except Exception:  # noqa: BLE001 - a call that raises says nothing about which mistake it is
            return False, None

    answers = [run(answer, args) for args in calls]
    kept = []
    for hint, model in models:
        typical = [run(model, args) for args in calls]
        if all(not (ok and fine) or same(got, value) for (ok, got), (fine, value) in zip(answers, typical)):
            kept.append(hint)
    return kept


def split_problem(readers: Mapping[Any, Sequence[tuple[int, int]]], items: Iterable[Any], setup: str,
                  label: Callable[[Any], str], by_rank: str, by_worker: str, unread: Callable[[Any], str]) -> str | None:
    """The first of `items` read on several ranks, by several workers of one rank, or by no reader (`readers`: item ->
    its (rank, worker) readers), as a verdict naming the fix; None when every item is read exactly once."""
    for item in items:
        taken = list(readers.get(item, ()))
        if len({rank for rank, _ in taken}) > 1:
            return f"{setup}, {label(item)} is read on more than one rank, by (rank, worker) {taken}: {by_rank}"
        if len(taken) > 1:
            return (f"{setup}, {label(item)} is read by more than one worker of rank {taken[0][0]}, by (rank, worker) "
                    f"{taken}: {by_worker}")
        if not taken:
            return f"{setup}, {unread(item)}"
    return None


@contextmanager
def seeded_randomness() -> Iterator[None]:
    """In the block, torch's, numpy's and Python's global generators start from seed 0 (an answer that draws from them
    gives the same verdict every run); the caller's states come back afterwards."""
    import random

    import torch

    python_state, numpy_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        np.random.seed(0)
        random.seed(0)
        try:
            yield
        finally:
            random.setstate(python_state)
            np.random.set_state(numpy_state)


def every_batch(loader: Any) -> list[Any]:
    """Every batch of `loader`, in order; its workers are shut down even when one raised."""
    batches = iter(loader)
    try:
        return list(batches)
    finally:
        getattr(batches, "_shutdown_workers", lambda: None)()  # private: `del` alone leaves it to the garbage collector


class StandInClock:
    """A clock that moves only when a check's stand-in loader or device says so, read through time.perf_counter during a call.

    The check's verdict on a timing answer then depends on what the answer computes, not on how busy the machine is.
    """

    def __init__(self) -> None:
        self.now = time.perf_counter()  # start where the real clock is, so the values look like perf_counter's
        self.reads = 0

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass."""
        self.now += seconds

    def wait_until(self, moment: float) -> None:
        """Let time pass until `moment` (nothing when it is already past)."""
        self.now = max(self.now, moment)

    def _seconds(self) -> float:
        self.reads += 1
        return self.now

    def _nanoseconds(self) -> int:
        self.reads += 1
        return round(self.now * 1e9)

    @contextmanager
    def reading(self, function: Any) -> Iterator[None]:
        """In the block, time.perf_counter(_ns) read this clock, and so do the names `function`'s module imported them as."""
        stand_ins = {time.perf_counter: self._seconds, time.perf_counter_ns: self._nanoseconds}
        names = getattr(function, "__globals__", None)
        aliases = {}
        if isinstance(names, dict):
            aliases = {key: value for key, value in names.items() if any(value is real for real in stand_ins)}
        originals = {"perf_counter": time.perf_counter, "perf_counter_ns": time.perf_counter_ns}
        try:
            for attribute, real in originals.items():
                setattr(time, attribute, stand_ins[real])
            for key, real in aliases.items():
                names[key] = stand_ins[real]  # `from time import perf_counter` in the notebook
            yield
        finally:
            for attribute, real in originals.items():
                setattr(time, attribute, real)
            for key, real in aliases.items():
                names[key] = real


@dataclass(frozen=True)
class Registered:
    """A registered self-check with the answers the tests try on it; `takes_class`: the learner passes a class."""

    exercise: str
    name: str
    check: Callable[[Any], CheckResult]
    right: Any
    wrong: tuple[Wrong, ...]
    takes_class: bool
    needs_cuda: bool


REGISTRY: dict[str, Registered] = {}


def exercise(
    number: str, name: str, *, right: Any, wrong: Sequence[Wrong], takes_class: bool = False, needs_cuda: bool = False
) -> Callable[[Callable[[Answer], str]], Callable[[Any], CheckResult]]:
    """Register a check of exercise `number` on the learner's `name`: its body returns the passed detail or raises Failed/Skipped."""
    if not isinstance(number, str) or not EXERCISE_ID.match(number):
        raise ValueError(f"number must look like '03.4', got {number!r}")
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")

    def register(body: Callable[[Answer], str]) -> Callable[[Any], CheckResult]:
        def check(answer: Any) -> CheckResult:
            return finish(_verdict(number, name, body, answer, takes_class))

        check.__name__ = check.__qualname__ = body.__name__
        check.__doc__, check.__module__ = body.__doc__, body.__module__
        known = REGISTRY.get(number)
        if known is not None and known.check.__name__ != body.__name__:
            raise ValueError(f"number {number!r} is checked by both {known.check.__name__} and {body.__name__}")
        REGISTRY[number] = Registered(number, name, check, right, tuple(wrong), takes_class, needs_cuda)
        return check

    return register


def _verdict(number: str, name: str, body: Callable[[Answer], str], value: Any, takes_class: bool) -> CheckResult:
    """Run a check's body on the learner's answer and turn how it ended into the verdict."""
    if not takes_class and not callable(value):
        return CheckResult(number, "failed", f"expected the function {name}, got {value!r}")
    try:
        return CheckResult(number, "passed", body(Answer(number, name, value)))
    except _Stub:
        return CheckResult(number, "not implemented yet", f"replace the `raise NotImplementedError` in {name} with your code")
    except Failed as exc:
        return CheckResult(number, "failed", str(exc))
    except Skipped as exc:
        return CheckResult(number, "skipped", str(exc))
