"""helpers.timing: the ceiling bracketing a measurement, and the share of the headroom judged only in rounds with room."""
import contextlib
import math
import multiprocessing
import subprocess
import sys
import time

import psutil
import pytest

from helpers import timing
from helpers.timing import Headroom


def test_share_is_the_median_over_rounds_with_room_only():
    # hand-computed: rounds 0 and 2 have room (ceiling >= 1.3); shares (1.5-1)/(2-1) = 0.5 and (1.9-1)/(1.8-1) = 1.125
    headroom = Headroom((1.5, 1.2, 1.9), (2.0, 1.1, 1.8))
    assert headroom.rooms == (0, 2) and headroom.has_room
    assert headroom.share == pytest.approx((0.5 + 1.125) / 2)
    assert headroom.speedup == 1.5 and headroom.ceiling == 1.8
    # a round's speed-up above its own ceiling is marked (a newcomer read 1.63x beside a 1.49x ceiling, unremarked)
    # and a line breaks between rounds, never inside one ("1.40x at ceiling" / "1.60x" read as two rounds)
    assert str(headroom) == ("per round: 1.50x at ceiling 2.00x, 1.20x at ceiling 1.10x (above it),\n"
                             "  1.90x at ceiling 1.80x (above it)\nrounds with room (ceiling >= 1.3x): 2 of 3\n"
                             "share of the headroom used: 81% (median of those rounds)")
    five = str(Headroom((1.5, 1.2, 1.9, 1.4, 1.1), (2.0, 1.1, 1.8, 1.6, 1.2))).splitlines()
    assert five[1] == "  1.90x at ceiling 1.80x (above it), 1.40x at ceiling 1.60x, 1.10x at ceiling 1.20x"
    assert "above" not in str(Headroom((1.494,), (1.491,)))  # both print as 1.49x: not marked (the contract probe)


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
    # the late review: each was taken without a word
    ({"speedups": (float("nan"), 1.2), "ceilings": (1.5, 1.5)}, r"speedups must be positive finite .*got \(nan, 1.2\)"),
    ({"speedups": (1.2,), "ceilings": (-1.5,)}, r"ceilings must be positive finite ratios of two rates, got \(-1.5,\)"),
    ({"speedups": (0.0,), "ceilings": (1.5,)}, r"speedups must be positive finite"),
    ({"speedups": (1.2,), "ceilings": (float("inf"),)}, r"ceilings must be positive finite .*got \(inf,\)"),
    ({"speedups": (1.0,), "ceilings": (1.5,), "gate": float("inf")}, "gate must be above 1"),
    ({"speedups": (10**400,), "ceilings": (1.5,)}, r"speedups must be positive finite .*got \(inf,\)"),  # the contract probe
])
def test_headroom_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Headroom(**kwargs)


@pytest.mark.parametrize("kwargs, match", [  # the contract probe: each failed later, in str(), naming nothing
    ({"speedups": "ab", "ceilings": "cd"}, "speedups must be a tuple of numbers, one per round, got 'ab'"),
    ({"speedups": 1.5, "ceilings": 1.5}, "speedups must be a tuple of numbers"),
    ({"speedups": (1.5,), "ceilings": (None,)}, r"ceilings must be a tuple of numbers, one per round, got \(None,\)"),
    ({"speedups": (True,), "ceilings": (1.5,)}, "speedups must be a tuple of numbers"),
    ({"speedups": (1.5,), "ceilings": (1.5,), "gate": "2"}, "gate must be a number, got '2'"),
])
def test_headroom_names_an_argument_of_the_wrong_type(kwargs, match):
    with pytest.raises(TypeError, match=match):
        Headroom(**kwargs)


def test_headroom_keeps_any_real_number_as_a_float():
    """The late review: a Fraction passed the type check, then failed in str() on Python 3.11."""
    from fractions import Fraction

    headroom = Headroom([Fraction(3, 2)], (Fraction(19, 10),))
    assert headroom.speedups == (1.5,) and headroom.ceilings == (1.9,)
    assert str(headroom).startswith("per round: 1.50x at ceiling 1.90x")


def test_bracketed_measures_the_ceiling_before_and_after_and_keeps_the_lower(monkeypatch):
    calls = []
    ceilings = iter([1.9, 1.15])

    def fake_ceiling(processes):
        calls.append(("ceiling", processes))
        return next(ceilings)

    monkeypatch.setattr(timing, "parallel_speedup", fake_ceiling)
    monkeypatch.setattr(timing, "others_during", lambda measure: (measure(), 0.0))
    result, ceiling = timing.bracketed(lambda: calls.append("measure") or 42, processes=3)
    assert (result, ceiling) == (42, 1.15)  # load that came mid-way shows in the second measurement
    assert calls == [("ceiling", 3), "measure", ("ceiling", 3)]


def test_bracketed_keeps_the_cores_other_programs_left_free_during_the_round(monkeypatch):
    monkeypatch.setattr(timing, "parallel_speedup", lambda processes: 1.9)  # quiet before and after
    monkeypatch.setattr(timing, "others_during", lambda measure: (measure(), 1.2))  # busy in between
    monkeypatch.setattr(timing.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(timing, "OTHERS_MIN_S", 0.0)  # the fake measure takes no time: read it all the same
    assert timing.bracketed(lambda: 7) == (7, pytest.approx(0.8))  # 2 cores - 1.2 used by others


def test_others_during_is_the_cores_busy_less_this_process_tree(monkeypatch):
    readings = iter([(10.0, 3.0), (13.0, 4.5)])  # busy s, own s: 3 s busy, 1.5 s of it ours
    clock = iter([100.0, 102.0])  # over 2 s of wall time
    monkeypatch.setattr(timing, "_busy_and_own_s", lambda: next(readings))
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    assert timing.others_during(lambda: "done") == ("done", pytest.approx(0.75))  # (3 - 1.5) / 2


def _spin_and_report(seconds, queue):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    queue.put(time.process_time())


def test_own_cpu_seconds_count_a_child_that_has_exited():
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    _, own = timing._busy_and_own_s()
    child = context.Process(target=_spin_and_report, args=(0.3, queue))
    child.start()
    child_cpu_s = queue.get(timeout=60)
    child.join()
    _, own_after = timing._busy_and_own_s()
    assert own_after - own >= child_cpu_s - 0.02  # the reaped child's CPU seconds are ours, not another program's


def test_tree_cpu_seconds_count_a_fork_servers_worker():
    """Under forkserver a worker is the fork server's child, reaped by it: a rank's CPU seconds must still hold it
    (ddp_demos.loader_processes read 0.02 s for 384 items of 1 ms when it counted only the rank's own reaped children)."""
    context = multiprocessing.get_context("forkserver")
    queue = context.Queue()
    before = timing.tree_cpu_s()
    child = context.Process(target=_spin_and_report, args=(0.3, queue))
    child.start()
    assert child.pid not in {p.pid for p in psutil.Process().children()}  # not our child: the fork server's
    child_cpu_s = queue.get(timeout=60)
    child.join()
    assert timing.tree_cpu_s() - before >= child_cpu_s - 0.02


BUSY_4_S = "import time\nend = time.time() + 4\nwhile time.time() < end:\n    pass\n"


def test_a_program_outside_this_process_tree_counts_as_others():
    # a grandchild whose parent exits at once: reparented, no longer in this process's tree
    launch = (f"import subprocess, sys; print(subprocess.Popen([sys.executable, '-c', {BUSY_4_S!r}], "
              "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)")  # not our pipe: run() returns at once
    pid = int(subprocess.run([sys.executable, "-c", launch], capture_output=True, text=True, check=True).stdout)
    try:
        busy = psutil.Process(pid)
        deadline = time.monotonic() + 60
        while sum(busy.cpu_times()[:2]) < 0.2 and time.monotonic() < deadline:
            time.sleep(0.05)  # on a busy machine the program's Python may take a while to start spinning
        _, others = timing.others_during(lambda: time.sleep(1.0))
        assert others >= 0.5, others  # the busy program held about a core (more when the machine is busier still)
    finally:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).kill()
            psutil.Process(pid).wait(5)


def test_a_grandchild_reaped_by_a_live_child_is_ours_not_anothers():
    """The contract probe's case: a child that runs a busy program and waits for it (as a forkserver reaps the workers
    it forked) stays alive; the busy program's CPU seconds are in its reaped children's, which are ours."""
    child = subprocess.Popen([sys.executable, "-c", f"import subprocess, sys, time\nsubprocess.run([sys.executable, '-c', "
                              f"{BUSY_4_S.replace('4', '0.8')!r}])\ntime.sleep(3)"])
    try:
        _, own = timing._busy_and_own_s()
        time.sleep(2.0)  # the grandchild spins for 0.8 s of wall time, then its parent reaps it and sleeps
        _, own_after = timing._busy_and_own_s()
        assert own_after - own >= 0.3, own_after - own  # counted although no live process of ours holds it
    finally:
        child.kill()
        child.wait(5)


def test_measure_must_be_callable():
    for call in (timing.others_during, timing.bracketed):
        with pytest.raises(TypeError, match="measure must be a callable taking no arguments, got None"):
            call(None)
    for bad in ({}, {"a": None}, [lambda: 1]):
        with pytest.raises(ValueError, match="measures must map names to callables"):
            timing.bracketed_each(bad)


def _fake_round(monkeypatch, busy: dict, min_s: float) -> None:
    """Ceilings of 1.9x before and after, 2 cores, and others_during reading `busy` by the measure's result (the whole round: 0.65)."""
    monkeypatch.setattr(timing, "parallel_speedup", lambda processes: 1.9)
    monkeypatch.setattr(timing.os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(timing, "OTHERS_MIN_S", min_s)

    def fake_others(measure):
        result = measure()
        return result, busy.get(result, 0.65)
    monkeypatch.setattr(timing, "others_during", fake_others)


def test_bracketed_each_keeps_the_cores_left_free_during_the_busiest_measure(monkeypatch):
    _fake_round(monkeypatch, {"quiet": 0.1, "hit": 1.2}, min_s=0.0)
    results, ceiling = timing.bracketed_each({"a": lambda: "quiet", "b": lambda: "hit"})
    assert list(results.items()) == [("a", "quiet"), ("b", "hit")]
    assert ceiling == pytest.approx(0.8)  # 2 cores - 1.2 used by others during "hit", not the round's 0.65


def test_bracketed_each_judges_a_measure_too_short_to_read_with_the_round(monkeypatch):
    _fake_round(monkeypatch, {"quiet": 0.1, "hit": 1.2}, min_s=0.05)  # each 0.03 s, too short; the round 0.06 s is not
    measures = {"a": lambda: time.sleep(0.03) or "quiet", "b": lambda: time.sleep(0.03) or "hit"}
    assert timing.bracketed_each(measures)[1] == pytest.approx(1.35)  # 2 - 0.65


def test_bracketed_each_judges_a_round_too_short_to_read_by_its_ceilings_alone(monkeypatch):
    _fake_round(monkeypatch, {"quiet": 0.1, "hit": 1.2}, min_s=60.0)
    monkeypatch.setattr(timing, "others_during", lambda measure: (measure(), 5000.0))  # one tick over a microsecond
    assert timing.bracketed_each({"a": lambda: "quiet"})[1] == pytest.approx(1.9)  # never below 0 cores free
