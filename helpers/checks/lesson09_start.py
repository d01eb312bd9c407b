"""Lesson 09's start-method self-checks: the part of a loader that cannot be pickled, and the MiB the workers are sent."""
from __future__ import annotations

import operator
import os
import pickle
import sys
import threading
from collections.abc import Callable
from multiprocessing.reduction import ForkingPickler
from typing import Any

import numpy as np
import torch
import torch.multiprocessing  # noqa: F401 - registers torch's reductions with ForkingPickler (a tensor as a handle)

from helpers.checks.core import Answer, Case, Failed, Wrong, consistent_hints, exercise

MIB = 2**20


class Box:
    """A plain holder whose attributes are the parts a case sets (importable, so it pickles by reference)."""

    def __init__(self, **parts: Any) -> None:
        self.__dict__.update(parts)

    def __repr__(self) -> str:
        return f"Box({', '.join(f'{k}={_show(v)}' for k, v in vars(self).items())})"


def _show(value: Any) -> str:
    if callable(value) and getattr(value, "__name__", "") == "<lambda>":
        return "lambda"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (np.ndarray, torch.Tensor)):
        return f"<{type(value).__name__} of {value.numel() if isinstance(value, torch.Tensor) else value.size} {value.dtype}>"
    if isinstance(value, list) and len(value) > 4:
        return f"[{_show(value[0])}, ... {len(value)} items]"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_show(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if type(value).__qualname__.endswith("<locals>.Local"):
        return f"Local({', '.join(f'{k}={_show(v)}' for k, v in vars(value).items())})"
    return repr(value)


class Locked:
    """Holds a lock, which cannot be pickled, but pickles without it: its __getstate__ leaves the lock out."""

    def __init__(self) -> None:
        self.n, self.lock = 1, threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        return {"n": self.n}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.n, self.lock = state["n"], threading.Lock()

    def __repr__(self) -> str:
        return "Locked(n=1, lock=<a lock, left out by __getstate__>)"


def _local_instance(**parts: Any) -> Any:
    """An object of a class defined inside a function: its parts pickle, the object does not (its class cannot be found)."""
    class Local:
        def __init__(self) -> None:
            self.__dict__.update(parts)

    return Local()


# ------------------------------------------------------------------ 09.4


def _parts(path: str, obj: Any) -> list[tuple[str, Any]]:
    if isinstance(obj, dict):
        return [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    if isinstance(obj, (list, tuple)):
        return [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    return [(f"{path}.{k}", v) for k, v in vars(obj).items()] if hasattr(obj, "__dict__") else []


def _pickles(obj: Any) -> bool:
    try:
        pickle.dumps(obj)
    except Exception:  # noqa: BLE001 - any error of pickling means it does not
        return False
    return True


def first_unpicklable_right(obj: Any, path: str) -> str | None:
    """Exercise 09.4's reference answer (the tests pass it to the check)."""
    if _pickles(obj):
        return None
    for part_path, part in _parts(path, obj):
        found = first_unpicklable_right(part, part_path)
        if found is not None:
            return found
    return path


def _whole_only(obj: Any, path: str) -> str | None:
    return None if _pickles(obj) else path


def _one_level(obj: Any, path: str) -> str | None:
    if _pickles(obj):
        return None
    return next((p for p, part in _parts(path, obj) if not _pickles(part)), path)


def _walk(parts_of: Callable[[str, Any], list[tuple[str, Any]]] = _parts, whole_first: bool = True,
          blame_self: bool = True) -> Callable[[Any, str], str | None]:
    """The reference answer's walk with one thing changed (a typical mistake): which parts, in which order and named how;
    whether the whole is tried before its parts; whether a failing object none of whose parts fails is blamed."""
    def walk(obj: Any, path: str) -> str | None:
        if whole_first and _pickles(obj):
            return None
        for part_path, part in parts_of(path, obj):
            found = walk(part, part_path)
            if found is not None:
                return found
        if not whole_first and _pickles(obj):
            return None
        return path if blame_self else None
    return walk


def _is_container(obj: Any) -> bool:
    return isinstance(obj, (list, tuple, dict))


_attributes_only = _walk(lambda path, obj: [] if _is_container(obj) else _parts(path, obj))
_last_part = _walk(lambda path, obj: _parts(path, obj)[::-1])
_plain_keys = _walk(lambda path, obj: [(f"{path}[{k}]", v) for k, v in obj.items()] if isinstance(obj, dict)
                    else _parts(path, obj))
_dotted_items = _walk(lambda path, obj: [(f"{path}.{i}", v) for i, v in enumerate(obj)] if isinstance(obj, (list, tuple))
                      else _parts(path, obj))
_sorted_names = _walk(lambda path, obj: _parts(path, obj) if _is_container(obj) else sorted(_parts(path, obj)))
_parts_first = _walk(whole_first=False)
_none_when_no_part = _walk(blame_self=False)


def _blank_when_fine(obj: Any, path: str) -> str | None:
    found = first_unpicklable_right(obj, path)
    return "" if found is None else found


UNPICKLABLE_MISTAKES: tuple[tuple[Callable[..., Any], str], ...] = (
    (_whole_only, "look inside the object that fails: blame the first of its parts that fails on its own"),
    (_one_level, "look inside the failing part the same way, down to a part none of whose own parts fails"),
    (_attributes_only, "look inside lists, tuples and dicts too (path[i], path[key!r]), not only attributes"),
    (_last_part, "blame the first part that fails, in the order of its attributes, items or keys, not the last"),
    (_plain_keys, "name a dict value with the key's repr, path[key!r], e.g. loader['bad']"),
    (_dotted_items, "name a list or tuple item path[i], e.g. loader.items[2]"),
    (_blank_when_fine, "return None when the object pickles, not an empty path"),
    (_sorted_names, "look at the attributes in the order vars(obj) gives them (the order they were set), not sorted by name"),
    (_parts_first, "try pickle.dumps(obj) first: an object that pickles is fine even when a part of it would not on its own"),
    (_none_when_no_part, "if none of its parts fails on its own, blame the object itself: return path"),
)


def _unpicklable_cases() -> list[tuple[Any, str, str | None, str]]:
    """(object, path, the part to blame worked out by hand, why); built per check (an open file is closed after it)."""
    return [
        (Box(size=3, names=["a", "b"]), "loader", None, "every part pickles"),
        (Box(size=3, transform=lambda x: x), "loader", "loader.transform", "the lambda is the second attribute"),
        (Box(data=Box(inner=Box(n=1, fn=lambda: 0))), "loader", "loader.data.inner.fn", "three levels down"),
        (Box(items=[1, 2, lambda: 0]), "loader", "loader.items[2]", "the third item of a list"),
        (Box(table={"ok": 1, "bad": lambda: 0}), "loader", "loader.table['bad']", "a dict's value, named by its key's repr"),
        (Box(first=lambda: 0, second=lambda: 1), "loader", "loader.first", "both fail: the first attribute, in order"),
        (Box(dataset=_local_instance(x=1, y=[2])), "loader", "loader.dataset",
         "its class is defined inside a function: every part pickles, the object does not"),
        (Box(n=1, handle=open(os.devnull)), "ds", "ds.handle", "an open file cannot be pickled, and its own parts can"),
        (Box(pair=(1, lambda: 0)), "loader", "loader.pair[1]", "the second item of a tuple"),
        (lambda: 0, "worker_init_fn", "worker_init_fn", "the object itself is the lambda"),
        (Box(x=[{"k": [0, lambda: 0]}]), "loader", "loader.x[0]['k'][1]", "inside a list, a dict, a list"),
        (Box(a=Box(b=1, c=lambda: 0), d=lambda: 0), "loader", "loader.a.c",
         "a fails first; inside it, c: the first branch that fails, followed down"),
        (Box(zeta=lambda: 0, alpha=lambda: 1), "loader", "loader.zeta", "both fail: zeta was set first"),
        (Box(state=Locked()), "loader", None, "Locked's __getstate__ leaves its lock out, so the whole pickles"),
    ]


def _catch_all(exc: Exception) -> str:
    if isinstance(exc, (pickle.PicklingError, AttributeError, TypeError)):
        return (": catch any exception pickle.dumps raises (a lambda raises PicklingError or AttributeError, an open file "
                "TypeError): each means that part cannot be pickled")
    return ""


def _close(cases: list[tuple[Any, str, str | None, str]]) -> None:
    for obj, _, _, _ in cases:
        for value in (vars(obj).values() if isinstance(obj, Box) else ()):
            if hasattr(value, "close") and hasattr(value, "fileno"):
                value.close()


@exercise("09.4", "first_unpicklable", right=first_unpicklable_right,
          wrong=[Wrong(model, hint.split(":")[0].split(",")[0].strip()) for model, hint in UNPICKLABLE_MISTAKES])
def check_first_unpicklable(answer: Answer) -> str:
    """Exercise 09.4: the path of the part of an object that cannot be pickled, or None."""
    cases = _unpicklable_cases()
    try:
        for obj, path, expected, why in cases:
            call = f"{answer.name}({_show(obj)}, {path!r})"
            with answer.calling(call, hint=_catch_all):
                got = answer.value(obj, path)
            if got == expected and type(got) is type(expected):
                continue
            if got is not None and not isinstance(got, str):
                raise Failed(f"{call} returned {got!r}, expected {expected!r}: return the part's path as a str, or None "
                             "when the object pickles")
            here = [(hint, model) for model, hint in UNPICKLABLE_MISTAKES if model(obj, path) == got != expected]
            agreeing = consistent_hints(here, answer.value, [(o, p) for o, p, _, _ in cases], same=operator.eq)
            hint = agreeing[0] if agreeing else (here[0][0] if len(here) == 1 else "")  # several fit here only: name none
            raise Failed(f"{call} returned {got!r}, expected {expected!r} ({why})" + (f": {hint}" if hint else ""))
    finally:
        _close(cases)
    return f"{answer.name} names the part to blame by its path in all {len(cases)} cases"


# ------------------------------------------------------------------ 09.5


def sent_mib_right(dataset: Any, workers: int, epochs: int, persistent: bool) -> float:
    """Exercise 09.5's reference answer (the tests pass it to the check)."""
    starts = workers if persistent else workers * epochs
    return starts * len(ForkingPickler.dumps(dataset)) / MIB


def _mib_of(obj: Any) -> float:
    return len(pickle.dumps(obj)) / MIB  # plain pickle: the same bytes as ForkingPickler for lists and arrays


def _sent_cases() -> list[Case]:
    """Datasets the check builds afresh: lists and arrays sized by plain pickle (independent of the answer), a tensor a handle."""
    paths = [f"/data/train/img_{i:08d}.jpg" for i in range(20_000)]
    listed = _mib_of(Box(paths=paths))
    array = np.arange(100_000, dtype=np.float64)
    arrayed = _mib_of(Box(values=array))
    return [
        Case((Box(paths=paths), 2, 3, False), 6 * listed,
             "2 workers started anew in each of 3 epochs: 6 starts, each len(ForkingPickler.dumps(dataset)) bytes, in MiB"),
        Case((Box(paths=paths), 2, 3, True), 2 * listed, "persistent: 2 workers started once, each sent the dataset"),
        Case((Box(paths=paths), 4, 1, False), 4 * listed, "4 workers, 1 epoch: 4 starts"),
        Case((Box(values=array), 3, 2, True), 3 * arrayed, "a numpy array travels by value: 3 starts of its pickled bytes"),
        Case((Box(paths=paths), 0, 5, False), 0.0, "no workers: nothing is sent"),
    ]


def _tensor_case() -> tuple[Box, float]:
    """A dataset holding an 8 MiB tensor, and what 2 persistent workers are sent (ForkingPickler: a handle)."""
    dataset = Box(x=torch.zeros(2**21))
    return dataset, 2 * len(ForkingPickler.dumps(dataset)) / MIB


SENT_MISTAKES: tuple[tuple[Callable[..., Any], str], ...] = (
    (lambda d, w, e, p: (w if p else w * e) * len(pickle.dumps(d)) / MIB,
     "measure with multiprocessing.reduction.ForkingPickler.dumps: plain pickle copies a tensor's bytes, where "
     "multiprocessing sends a handle to shared memory"),
    (lambda d, w, e, p: (1 if p else e) * len(ForkingPickler.dumps(d)) / MIB, "each worker is sent its own copy: multiply by workers"),
    (lambda d, w, e, p: w * len(ForkingPickler.dumps(d)) / MIB,
     "without persistent workers each epoch starts new ones, each sent the dataset again: multiply by epochs"),
    (lambda d, w, e, p: w * e * len(ForkingPickler.dumps(d)) / MIB,
     "persistent workers are started once, in the first epoch: do not multiply by epochs then"),
    (lambda d, w, e, p: (w if p else w * e) * len(ForkingPickler.dumps(d)) / 1e6, "a MiB is 2**20 bytes, not 10**6"),
    (lambda d, w, e, p: (max(1, w) if p else max(1, w) * e) * len(ForkingPickler.dumps(d)) / MIB,
     "with 0 workers the main process loads the batches itself: nothing is sent"),
    (lambda d, w, e, p: (w if p else w * e) * len(ForkingPickler.dumps(d)), "return MiB: divide the bytes by 2**20"),
    (lambda d, w, e, p: (w if p else w * e) * len(ForkingPickler.dumps(d)) / 1024,
     "a MiB is 2**20 bytes (1024 x 1024), not 1024: that is a KiB"),
    (lambda d, w, e, p: (w if p else w * e) * len(ForkingPickler.dumps(d)) // MIB, "divide with /, not //: MiB are a float"),
    (lambda d, w, e, p: round((w if p else w * e) * len(ForkingPickler.dumps(d)) / MIB, 2), "return the MiB unrounded"),
    (lambda d, w, e, p: (w if p else w * e) * sys.getsizeof(d) / MIB,
     "measure the pickled bytes, len(ForkingPickler.dumps(dataset)), not sys.getsizeof"),
    (lambda d, w, e, p: (w if p else w * e) * sys.getsizeof(ForkingPickler.dumps(d)) / MIB,
     "take len() of the pickled bytes, not sys.getsizeof (which adds the bytes object's own header)"),
)


@exercise("09.5", "sent_mib", right=sent_mib_right,
          wrong=[Wrong(model, hint.split(":")[0].strip()) for model, hint in SENT_MISTAKES])
def check_sent_mib(answer: Answer) -> str:
    """Exercise 09.5: the MiB pickled for every worker start over a run, measured with multiprocessing's pickler."""
    cases = _sent_cases()
    answer.cases(cases, kind=float, mistakes=SENT_MISTAKES)
    dataset, expected = _tensor_case()
    call = f"{answer.name}(Box(x=torch.zeros(2**21)), 2, 1, True)"
    with answer.calling(call):
        got = answer.value(dataset, 2, 1, True)
    if not isinstance(got, (int, float)) or not expected / 2 <= got <= 2 * expected:
        raise Failed(f"{call} returned {got!r}, expected about {expected:.6f} (an 8 MiB tensor travels as a handle to "
                     "shared memory, a few hundred bytes per worker): measure with multiprocessing.reduction.ForkingPickler.dumps")
    return f"{answer.name} is right in all {len(cases) + 1} cases, a tensor's handle included"
