"""Speed claims that hold on a busy machine: this machine's ceiling right now, and the share of it a change used (lessons 03, 07).

A parallel speed-up can only show where cores are free. `parallel_speedup` measures that ceiling with plain
processes; `bracketed_each` measures it just before and just after a round of measurements, counts the cores other
programs used during each (`others_during`), and keeps the lowest of the two ceilings and the cores those programs left
free during the busiest measurement, so load that came or went in between lowers it; `Headroom`
pairs each round's speed-up with that round's ceiling and asserts only on rounds that had room.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from helpers._validate import as_fraction, as_int, is_real, real_as_float, short
from helpers.errors import wrapped
from helpers.workloads import spin, spin_iterations_per_ms

T = TypeVar("T")
K = TypeVar("K")
# CPU times advance in ticks of 10 ms (USER_HZ 100): over a shorter measurement one tick reads as a busy core
OTHERS_MIN_S = 0.5
HEADROOM = 1.3  # a ceiling below this: other programs hold the cores, too few are free for a parallel speed-up to show


def parallel_speedup(processes: int, work_ms: float = 150.0, rounds: int = 1) -> float:
    """How much faster `processes` plain processes do the same pure-Python work than one: this machine's ceiling right now (lesson 03).

    With rounds > 1, serial and parallel runs alternate and the median of the per-round ratios is returned.
    """
    processes = as_int("processes", processes, minimum=1)
    iterations = round(as_fraction("work_ms", work_ms, 0.0, 10_000.0, include_low=False, include_high=True) * spin_iterations_per_ms())
    rounds = as_int("rounds", rounds, minimum=1)
    ratios = []
    with multiprocessing.get_context().Pool(processes) as pool:
        pool.map(spin, [1] * processes, chunksize=1)  # start the processes before timing
        for _ in range(rounds):
            start = time.perf_counter()
            for _ in range(processes):
                spin(iterations)
            serial_s = time.perf_counter() - start
            start = time.perf_counter()
            pool.map(spin, [iterations] * processes, chunksize=1)
            ratios.append(serial_s / (time.perf_counter() - start))
    return float(statistics.median(ratios))


def interleaved(measures: Mapping[K, Callable[[], T]], rounds: int, *, alternate: bool = True,
                stop: Callable[[dict[K, list[T]]], bool] | None = None) -> dict[K, list[T]]:
    """Each of `measures` once per round, back to back, so load hits all alike; results[name] lists its rounds (lessons 03-07).

    The course's one interleaved-timing loop. With `alternate`, every other round runs them in reverse order, so none
    always goes first; `stop(results)` is asked before each round and ends the rounds early when it returns True.
    """
    if not isinstance(measures, Mapping) or not measures or not all(callable(m) for m in measures.values()):
        raise ValueError(f"measures must map names to callables, at least one, got {short(measures)}")
    rounds = as_int("rounds", rounds, minimum=1)
    results: dict[K, list[T]] = {name: [] for name in measures}
    names = list(measures)
    for number in range(rounds):
        if stop is not None and stop(results):
            break
        for name in (names[::-1] if alternate and number % 2 else names):
            results[name].append(measures[name]())
    return results


def paired_median(numerators: list[float], denominators: list[float]) -> float:
    """Median over rounds of numerator / denominator measured in the same round (lessons 03-07)."""
    if not numerators or len(numerators) != len(denominators):
        raise ValueError(f"numerators and denominators must be non-empty and of one length, got {short(numerators)} and {short(denominators)}")
    return float(statistics.median(n / d for n, d in zip(numerators, denominators)))


def _busy_and_own_s() -> tuple[float, float]:
    """(busy CPU seconds of the cores this process may use, CPU seconds of this process and all its children)."""
    import psutil

    cores = sorted(os.sched_getaffinity(0))
    per_cpu = psutil.cpu_times(percpu=True)
    busy = sum(sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "steal", 0.0)
               for i, t in enumerate(per_cpu) if i in cores)
    return busy, tree_cpu_s()


def tree_cpu_s() -> float:
    """CPU seconds of this process and all its descendants, living or reaped (a fork server's workers included)."""
    import psutil

    total = 0.0
    for process in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        try:  # user, system, and the children it has reaped: under forkserver the fork server reaps the workers
            times = process.cpu_times()
        except psutil.Error:  # exited between the listing and the reading
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def others_during(measure: Callable[[], T]) -> tuple[T, float]:
    """measure()'s result and the cores other programs kept busy meanwhile, on this process's cores (lessons 03, 07).

    Their busy CPU seconds (the cores' busy time, less this process's and its descendants', reaped ones included) over
    the wall seconds. CPU times advance in 10 ms ticks: over a measure() shorter than OTHERS_MIN_S one tick reads as
    whole busy cores (over 2 ms: 5), so count such measurements together, in one call.
    """
    if not callable(measure):
        raise TypeError(f"measure must be a callable taking no arguments, got {short(measure)}")
    busy, own = _busy_and_own_s()
    start = time.perf_counter()
    result = measure()
    wall = time.perf_counter() - start
    busy_after, own_after = _busy_and_own_s()
    return result, max(0.0, (busy_after - busy) - (own_after - own)) / max(wall, 1e-9)


def bracketed_each(measures: Mapping[K, Callable[[], T]], processes: int = 2) -> tuple[dict[K, T], float]:
    """Each of `measures` once, in order, and their ceiling: the lowest of the ceilings measured just before and just
    after them and the cores other programs left free, over all of them and during each, wherever that lasted
    OTHERS_MIN_S or more, so load that hit one of them is not averaged away over the rest (lessons 03, 07)."""
    if not isinstance(measures, Mapping) or not measures or not all(callable(m) for m in measures.values()):
        raise ValueError(f"measures must map names to callables taking no arguments, at least one, got {short(measures)}")
    results: dict[K, T] = {}
    others = []

    def each() -> None:
        for name, measure in measures.items():
            start = time.perf_counter()
            results[name], busy = others_during(measure)
            if time.perf_counter() - start >= OTHERS_MIN_S:
                others.append(busy)

    before = parallel_speedup(processes)
    start = time.perf_counter()
    _, overall = others_during(each)
    if time.perf_counter() - start >= OTHERS_MIN_S:
        others.append(overall)
    cores = len(os.sched_getaffinity(0))
    free = cores - min(cores, max([0.0, *others]))  # nothing long enough to read: the ceilings alone
    return results, min(before, parallel_speedup(processes), free)


def bracketed(measure: Callable[[], T], processes: int = 2) -> tuple[T, float]:
    """measure()'s result and its ceiling, as bracketed_each measures it for one measure (lessons 03, 07)."""
    if not callable(measure):
        raise TypeError(f"measure must be a callable taking no arguments, got {short(measure)}")
    results, ceiling = bracketed_each({0: measure}, processes)
    return results[0], ceiling


@dataclass(frozen=True)
class Headroom:
    """A change's speed-up and the machine's ceiling, round by round: which rounds had free cores, and the share of them used (lessons 03, 07)."""

    speedups: tuple[float, ...]  # per round: the change's rate over the baseline's, measured in that round
    ceilings: tuple[float, ...]  # per round: the ceiling bracketing that round's pair
    gate: float = HEADROOM
    min_rooms: int = 2  # rounds with room needed before the share is worth asserting

    def __post_init__(self) -> None:
        for name in ("speedups", "ceilings"):
            values = getattr(self, name)
            if not isinstance(values, (tuple, list)) or not all(is_real(v) for v in values):
                raise TypeError(f"{name} must be a tuple of numbers, one per round, got {short(values)}")
            object.__setattr__(self, name, tuple(map(real_as_float, values)))  # a Fraction or numpy number prints as a float
        if not is_real(self.gate):
            raise TypeError(f"gate must be a number, got {short(self.gate)}")
        object.__setattr__(self, "gate", real_as_float(self.gate))
        if not self.speedups or len(self.speedups) != len(self.ceilings):
            raise ValueError(f"speedups and ceilings must be non-empty and of one length, got {short(self.speedups)} "
                             f"and {short(self.ceilings)}")
        for name in ("speedups", "ceilings"):  # ratios of two rates: positive and finite (a NaN compares false everywhere)
            if not all(math.isfinite(v) and v > 0 for v in getattr(self, name)):
                raise ValueError(f"{name} must be positive finite ratios of two rates, got {short(getattr(self, name))}")
        if not (math.isfinite(self.gate) and self.gate > 1):
            raise ValueError(f"gate must be above 1 (a ceiling of 1 leaves no headroom), got {short(self.gate)}")
        as_int("min_rooms", self.min_rooms, minimum=1)

    @property
    def rooms(self) -> tuple[int, ...]:
        """Indices of the rounds whose ceiling reached the gate."""
        return tuple(i for i, ceiling in enumerate(self.ceilings) if ceiling >= self.gate)

    @property
    def has_room(self) -> bool:
        """True when enough rounds had free cores for the share to mean something."""
        return len(self.rooms) >= self.min_rooms

    @property
    def share(self) -> float:
        """Median over the rounds with room of (speed-up - 1) / (ceiling - 1); NaN when no round had room."""
        shares = [(self.speedups[i] - 1) / (self.ceilings[i] - 1) for i in self.rooms]
        return statistics.median(shares) if shares else float("nan")

    @property
    def speedup(self) -> float:
        """Median speed-up over all rounds."""
        return statistics.median(self.speedups)

    @property
    def ceiling(self) -> float:
        """Median ceiling over all rounds."""
        return statistics.median(self.ceilings)

    def __str__(self) -> str:
        rounds = ", ".join((f"{s:.2f}x at ceiling {c:.2f}x" + (" (above it)" if round(s, 2) > round(c, 2) else "")).replace(" ", "\xa0")
                           for s, c in zip(self.speedups, self.ceilings))  # no-break spaces: a round stays on one line
        text = f"per round: {rounds}\nrounds with room (ceiling >= {self.gate}x): {len(self.rooms)} of {len(self.ceilings)}"
        text += f"\nshare of the headroom used: {self.share:.0%} (median of those rounds)" if self.rooms else ""
        return wrapped(text, hanging=2).replace("\xa0", " ")  # JupyterLab breaks a long line anywhere

