"""Lesson 09's flight-recorder self-checks: the time a loop waited behind a ready batch, the few samples that take most time."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from helpers.checks.core import Answer, Case, Failed, Wrong, exercise, unchanged

# ------------------------------------------------------------------ 09.6


def held_back_s_right(waits: list[tuple[float, float]], ready: list[float]) -> float:
    """Exercise 09.6's reference answer (the tests pass it to the check)."""
    if len(waits) != len(ready):
        raise ValueError(f"ready must have one time per batch in waits ({len(waits)}), got {len(ready)}")
    total = 0.0
    for i, (asked, got) in enumerate(waits):
        later = min(ready[i + 1:], default=math.inf)
        total += max(0.0, got - max(asked, later))
    return total


HELD_CASES: tuple[Case, ...] = (
    Case(([(0.0, 1.0), (1.1, 1.2), (1.3, 2.1), (2.2, 2.25)], [1.0, 0.3, 2.1, 1.5]), 1.3,
         "batch 0 waited until 1.0 while batch 1 was ready at 0.3: 0.7; batch 2 waited until 2.1 while batch 3 was ready "
         "at 1.5: 0.6; batch 1's wait ended at 1.2, before any later batch was ready: 0"),
    Case(([(0.0, 1.0), (1.0, 2.0)], [1.0, 2.0]), 0.0, "each batch was ready when its wait ended, none before: nothing held back"),
    Case(([(0.0, 0.5)], [0.5]), 0.0, "one batch: nothing comes after it"),
    Case(([(0.0, 0.5), (2.0, 3.0), (3.0, 3.1)], [0.5, 3.0, 1.0]), 1.0,
         "batch 1's wait began at 2.0, after batch 2 was ready (1.0): count from when the loop asked, 3.0 - 2.0"),
    Case(([(0.0, 2.0), (2.0, 2.1), (2.1, 2.2)], [2.0, 1.5, 0.5]), 1.6,
         "batch 0: the earliest of all later batches was ready at 0.5 (batch 2, not only the next one): 1.5; batch 1: "
         "batch 2 was ready before its wait began at 2.0: 0.1"),
    Case(([], []), 0.0, "no batches: nothing was held back (0.0, not an error)"),
    Case(([(0.0, 1.0), (1.0, 1.5)], [1.0]), ValueError, "one ready time per batch in waits: raise ValueError naming ready",
         names=("ready",)),
    Case(([(0.0, 1.0)], [1.0, 0.5]), ValueError, "more ready times than batches is as wrong as fewer: raise ValueError "
         "naming ready", names=("ready",)),
)

HELD_MISTAKES: tuple[tuple[Callable[..., Any], str], ...] = (
    (lambda w, r: sum(max(0.0, got - max(asked, r[i + 1])) for i, (asked, got) in enumerate(w[:-1])),
     "any later batch holds it back, not only the next one: take the earliest ready time of all the batches after it"),
    (lambda w, r: sum(got - asked for i, (asked, got) in enumerate(w) if min(r[i + 1:], default=math.inf) < got),
     "count only the part of the wait after a later batch was ready, not the whole wait"),
    (lambda w, r: sum(max(0.0, got - min(r[i + 1:], default=math.inf)) for i, (asked, got) in enumerate(w)),
     "count from when the loop asked when a later batch was ready before that: max(asked, earliest later ready)"),
    (lambda w, r: sum(max(0.0, got - max(asked, min(r[:i] + r[i + 1:], default=math.inf))) for i, (asked, got) in enumerate(w)),
     "only batches received after it hold it back (ready[i + 1:]), not the ones before"),
    (lambda w, r: sum(got - max(asked, min(r[i + 1:], default=got)) for i, (asked, got) in enumerate(w)),
     "a later batch ready only after the wait ended held nothing back: count max(0, ...)"),
    (lambda w, r: 1000 * held_back_s_right(w, r), "return seconds, as the times are given, not milliseconds"),
    (lambda w, r: sum(max(0.0, got - max(asked, min(r[i:], default=math.inf))) for i, (asked, got) in enumerate(w)),
     "a batch does not hold itself back: take the earliest ready time of the batches after it, ready[i + 1:]"),
    (lambda w, r: sum(max(0.0, got - max(asked, max(r[i + 1:], default=math.inf))) for i, (asked, got) in enumerate(w)),
     "take the earliest ready time of the batches after it, min(...), not the latest"),
    (lambda w, r: sum(max(0.0, got - max(asked, min(r[:i], default=math.inf))) for i, (asked, got) in enumerate(w)),
     "only batches received after it hold it back (ready[i + 1:]), not the ones before"),
    (lambda w, r: sum(1 for i, (asked, got) in enumerate(w) if got - max(asked, min(r[i + 1:], default=math.inf)) > 0),
     "return the seconds held back, added up, not how many batches were held"),
    (lambda w, r: max([max(0.0, got - max(asked, min(r[i + 1:], default=math.inf))) for i, (asked, got) in enumerate(w)],
                      default=0.0), "add up the seconds over all the batches, not the largest"),
    (lambda w, r: sum(max(0.0, min(min(r[i + 1:], default=math.inf), got) - asked) for i, (asked, got) in enumerate(w)
                      if min(r[i + 1:], default=math.inf) < got),
     "count the part of the wait after the later batch was ready, not the part before it"),
    (lambda w, r: sum(max(0.0, got - max(asked, min((g for _, g in w[i + 1:]), default=math.inf)))
                      for i, (asked, got) in enumerate(w)),
     "a later batch is ready when it was collated (ready), not when the loop received it"),
    (lambda w, r: held_back_s_right(w, sorted(r)), "keep ready in batch order: ready[i] belongs to the i-th batch"),
    (lambda w, r: round(held_back_s_right(w, r)), "return the seconds unrounded"),
    (lambda w, r: held_back_s_right(w[1:], r[1:]), "every batch counts, the first one too"),
    (lambda w, r: sum(max(0.0, got - max(asked, min(r[i + 1:-1], default=math.inf))) for i, (asked, got) in enumerate(w)),
     "the last batch can hold the others back too: ready[i + 1:] runs to the end"),
)


@exercise("09.6", "held_back_s", right=held_back_s_right,
          wrong=[Wrong(model, hint.split(":")[0].strip()) for model, hint in HELD_MISTAKES])
def check_held_back_s(answer: Answer) -> str:
    """Exercise 09.6: seconds the loop waited on a batch while a batch it received later was already collated."""
    passed = answer.cases(HELD_CASES, float, HELD_MISTAKES)
    waits, ready = [(0.0, 1.0), (1.0, 2.0)], [1.0, 0.5]
    with answer.calling(f"{answer.name}({waits!r}, {ready!r})"):
        answer.value(waits, ready)
    unchanged(answer.name, ([(0.0, 1.0), (1.0, 2.0)], [1.0, 0.5]), (waits, ready), "waits or ready")
    return passed



# ------------------------------------------------------------------ 09.7


def slowest_share_right(fetch_s: dict[int, float], share: float) -> list[int]:
    """Exercise 09.7's reference answer (the tests pass it to the check)."""
    if not 0 <= share <= 1:
        raise ValueError(f"share must be between 0 and 1, got {share!r}")
    total, found, summed = sum(fetch_s.values()), [], 0.0
    for sample in sorted(fetch_s, key=lambda s: (-fetch_s[s], s)):
        if summed >= share * total:
            break
        found.append(sample)
        summed += fetch_s[sample]
    return found


SLOWEST_CASES: tuple[Case, ...] = (
    Case(({0: 1.0, 1: 0.1, 2: 0.1, 3: 2.5}, 0.5), [3], "sample 3 alone took 2.5 of 3.7 s, 68 %, at least half"),
    Case(({0: 1.0, 1: 0.1, 2: 0.1, 3: 2.5}, 0.9), [3, 0], "2.5 + 1.0 = 3.5 of 3.7 s (95 %); 2.5 alone is 68 %, under 90 %"),
    Case(({0: 1.0, 1: 0.1, 2: 0.1, 3: 2.5}, 1.0), [3, 0, 1, 2],
         "a share of 1 is allowed (between 0 and 1 includes both ends): all of the time needs every sample, slowest "
         "first; samples 1 and 2 tie, the smaller id first"),
    Case(({5: 1.0, 6: 1.0, 7: 2.0}, 0.5), [7], "sample 7's 2.0 s is exactly half of 4.0 s: at least the share, so it is enough"),
    Case(({5: 1.0, 6: 1.0}, 0.0), [], "no time asked for: no sample needed"),
    Case(({9: 0.5, 4: 0.5, 2: 0.1}, 0.6), [4, 9], "0.5 + 0.5 = 1.0 of 1.1 s; 4 and 9 tie at 0.5 s: the smaller id first"),
    Case(({1: 2.0, 2: 0.0}, 1), [1], "all the time is sample 1's; a sample of 0 s adds nothing, so the fewest leave it "
         "out (an int share, 0 or 1, is allowed)"),
    Case(({}, 0.5), [], "no samples: none to return (and no dividing by a total of 0)"),
    Case(({1: 0.0, 2: 0.0}, 0), [], "no time at all: no sample needed"),
    Case(({0: 1.0}, 1.5), ValueError, "a share above 1 cannot be reached: raise ValueError naming share", names=("share",)),
    Case(({0: 1.0}, -0.1), ValueError, "a share below 0 means nothing: raise ValueError naming share", names=("share",)),
    Case(({0: 1.0}, math.nan), ValueError, "NaN is not between 0 and 1 (every comparison with it is False): raise "
         "ValueError naming share", names=("share",)),
)

SLOWEST_MISTAKES: tuple[tuple[Callable[..., Any], str], ...] = (
    (lambda f, s: sorted(f, key=lambda k: (f[k], k))[:len(slowest_share_right(f, s))],
     "take the slowest first (sort by time, largest first)"),
    (lambda f, s: [k for k in sorted(f, key=lambda k: (-f[k], k))][:len(slowest_share_right(f, s)) + 1]
     if slowest_share_right(f, s) and len(slowest_share_right(f, s)) < len(f) else slowest_share_right(f, s),
     "stop as soon as the sum reaches the share (at least, >=): one sample too many"),
    (lambda f, s: [k for k in sorted(f, key=lambda k: (-f[k], k)) if f[k] >= s * sum(f.values())],
     "add the slowest samples' times until the sum reaches share x the total, not each sample against it"),
    (lambda f, s: sorted(f, key=lambda k: (-f[k], k))[:math.ceil(s * len(f))],
     "the share is of the fetch time, not of the number of samples"),
    (lambda f, s: sorted(slowest_share_right(f, s)), "return the samples slowest first"),
    (lambda f, s: [f[k] for k in slowest_share_right(f, s)], "return the sample ids, not their times"),
    (lambda f, s: sorted(f, key=lambda k: -f[k])[:len(slowest_share_right(f, s))],
     "samples that tie on time: the smaller id first"),
    (lambda f, s: sorted(f, key=lambda k: (-f[k], -k))[:len(slowest_share_right(f, s))],
     "samples that tie on time: the smaller id first"),
    (lambda f, s: _fastest_first(f, s), "take the slowest first (sort by time, largest first)"),
)


def _fastest_first(fetch_s: dict[int, float], share: float) -> list[int]:
    """Adds up the fastest samples first until the share is reached."""
    total, found, summed = sum(fetch_s.values()), [], 0.0
    for sample in sorted(fetch_s, key=lambda k: (fetch_s[k], k)):
        if summed >= share * total:
            break
        found.append(sample)
        summed += fetch_s[sample]
    return found


def _stop_before(fetch_s: dict[int, float], share: float) -> list[int]:
    """Stops while the sum is still under the share by a strict test (> instead of >=)."""
    total, found, summed = sum(fetch_s.values()), [], 0.0
    for sample in sorted(fetch_s, key=lambda s: (-fetch_s[s], s)):
        if summed > share * total:
            break
        found.append(sample)
        summed += fetch_s[sample]
    return found


@exercise("09.7", "slowest_share", right=slowest_share_right,
          wrong=[Wrong(model, hint.split(":")[0].strip()) for model, hint in SLOWEST_MISTAKES]
          + [Wrong(_stop_before, "stop as soon as the sum reaches the share")])
def check_slowest_share(answer: Answer) -> str:
    """Exercise 09.7: the fewest samples, slowest first, whose fetch time adds up to at least `share` of it all."""
    passed = answer.cases(SLOWEST_CASES, list, SLOWEST_MISTAKES + ((_stop_before, SLOWEST_MISTAKES[1][1]),))
    call = f"{answer.name}({{0: 1.0, 1: 2.0}}, 1.0)"
    with answer.calling(call):
        got = answer.value({0: 1.0, 1: 2.0}, 1.0)
    if not isinstance(got, list):
        raise Failed(f"{call} returned {got!r} of type {type(got).__name__}: return a list, as the task asks")
    fetch_s = {0: 1.0, 1: 2.0}
    with answer.calling(call):
        answer.value(fetch_s, 1.0)
    unchanged(answer.name, {0: 1.0, 1: 2.0}, fetch_s, "fetch_s")
    return passed
