"""helpers.timing: the ceiling bracketing a measurement, and the share of the headroom judged only in rounds with room."""
import math

import pytest

from helpers import timing
from helpers.timing import Headroom


def test_share_is_the_median_over_rounds_with_room_only():
    # hand-computed: rounds 0 and 2 have room (ceiling >= 1.3); shares (1.5-1)/(2-1) = 0.5 and (1.9-1)/(1.8-1) = 1.125
    headroom = Headroom((1.5, 1.2, 1.9), (2.0, 1.1, 1.8))
    assert headroom.rooms == (0, 2) and headroom.has_room
    assert headroom.share == pytest.approx((0.5 + 1.125) / 2)
    assert headroom.speedup == 1.5 and headroom.ceiling == 1.8


def test_a_busy_round_never_counts_even_when_its_speedup_is_low():
    # the busy round's 0.9x would drag an all-round median down; judged alone, the quiet rounds used 60 % and 70 %
    headroom = Headroom((1.6, 0.9, 1.7), (2.0, 1.05, 2.0))
    assert headroom.share == pytest.approx(0.65)


def test_too_few_rounds_with_room():
    headroom = Headroom((1.5, 1.0, 1.0), (2.0, 1.2, 1.29))
    assert headroom.rooms == (0,) and not headroom.has_room
    assert headroom.share == pytest.approx(0.5)  # still reported, not asserted on
    nothing = Headroom((1.0, 1.0), (1.0, 1.1))
    assert nothing.rooms == () and math.isnan(nothing.share) and "share" not in str(nothing)


def test_gate_is_inclusive_at_the_threshold():
    assert Headroom((1.2, 1.2), (1.3, 1.3)).rooms == (0, 1)


@pytest.mark.parametrize("kwargs, match", [
    ({"speedups": (), "ceilings": ()}, "non-empty and of one length"),
    ({"speedups": (1.0, 2.0), "ceilings": (1.5,)}, "non-empty and of one length"),
    ({"speedups": (1.0,), "ceilings": (1.5,), "gate": 1.0}, "gate must be above 1"),
    ({"speedups": (1.0,), "ceilings": (1.5,), "min_rooms": 0}, "min_rooms must be at least 1"),
])
def test_headroom_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Headroom(**kwargs)


def test_bracketed_measures_the_ceiling_before_and_after_and_keeps_the_lower(monkeypatch):
    calls = []
    ceilings = iter([1.9, 1.15])

    def fake_ceiling(processes):
        calls.append(("ceiling", processes))
        return next(ceilings)

    monkeypatch.setattr(timing, "parallel_speedup", fake_ceiling)
    result, ceiling = timing.bracketed(lambda: calls.append("measure") or 42, processes=3)
    assert (result, ceiling) == (42, 1.15)  # load that came mid-way shows in the second measurement
    assert calls == [("ceiling", 3), "measure", ("ceiling", 3)]


def test_interleaved_runs_each_measure_once_per_round_alternating_the_order():
    calls = []
    results = timing.interleaved({"a": lambda: calls.append("a") or len(calls), "b": lambda: calls.append("b") or len(calls)}, 3)
    assert calls == ["a", "b", "b", "a", "a", "b"]  # worked out by hand: round 2 reversed
    assert results == {"a": [1, 4, 5], "b": [2, 3, 6]}
    calls.clear()
    timing.interleaved({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 2, alternate=False)
    assert calls == ["a", "b", "a", "b"]


def test_interleaved_stops_when_asked_before_a_round():
    results = timing.interleaved({"x": lambda: 1.0}, 5, stop=lambda done: len(done["x"]) >= 2)
    assert results == {"x": [1.0, 1.0]}


def test_paired_median_pairs_rounds():
    assert timing.paired_median([2.0, 9.0, 3.0], [1.0, 3.0, 1.0]) == 3.0  # ratios 2, 3, 3
    with pytest.raises(ValueError, match="numerators and denominators"):
        timing.paired_median([1.0], [])


@pytest.mark.parametrize("measures", [{}, [lambda: 1], {"a": 5}])
def test_interleaved_names_bad_measures(measures):
    with pytest.raises(ValueError, match="measures must map names to callables"):
        timing.interleaved(measures, 2)
