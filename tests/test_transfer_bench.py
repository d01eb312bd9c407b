"""helpers.transfer's measurements (bench.py, timeline.py, host_copies.py): timing waits for the device, reference
reports load, CUDA measurements refuse a CPU, measured on a GPU."""
import json
import re
import time

import pytest
import torch
from conftest import ROOT

from helpers import transfer


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
@pytest.mark.parametrize("call", [
    lambda: transfer.h2d_bandwidth([1024]),
    lambda: transfer.pinning_costs(1024),
    lambda: transfer.copy_compute_timeline(1024, pinned=True, side_stream=True),
    lambda: transfer.unsafe_d2h_read(),
    lambda: transfer.gpu_link(),
    lambda: transfer.prefetch_effect(),
])
def test_cuda_measurements_without_cuda_say_so(call):
    with pytest.raises(RuntimeError, match=r"needs a CUDA GPU, and torch.cuda.is_available\(\) is False"):
        call()


def test_gpu_measurements_refuse_a_cpu_device():
    with pytest.raises(ValueError, match="device must be 'cuda' or 'cuda:N', got 'cpu'"):
        transfer.h2d_bandwidth([1024], device="cpu")


def test_median_seconds_waits_for_queued_work_and_skips_warmup():
    """A fake asynchronous device: run() returns at once, synchronize() waits for its 20 ms; the first call costs 300 ms."""
    state = {"busy_until": 0.0, "calls": 0}

    def run():
        now = time.perf_counter()
        state["busy_until"] = max(now, state["busy_until"]) + (0.3 if state["calls"] == 0 else 0.02)
        state["calls"] += 1

    def synchronize():
        time.sleep(max(0.0, state["busy_until"] - time.perf_counter()))

    seconds = transfer.median_seconds(run, synchronize, repeats=5, warmup=1)
    assert 0.018 < seconds < 0.05
    assert state["calls"] == 6


def test_median_seconds_validates_counts():
    with pytest.raises(ValueError, match="repeats must be at least 1, got 0"):
        transfer.median_seconds(lambda: None, lambda: None, repeats=0)
    with pytest.raises(TypeError, match="warmup must be an int"):
        transfer.median_seconds(lambda: None, lambda: None, warmup=1.5)


def test_host_copy_bandwidth_is_a_positive_rate():
    assert transfer.host_copy_gb_per_s(8 * 2**20, repeats=3, warmup=1) > 0.05


@pytest.mark.parametrize("num_bytes, text", [(512, "512 B"), (4096, "4 KiB"), (3 * 2**19, "1.5 MiB"), (2**30, "1 GiB")])
def test_format_bytes(num_bytes, text):
    assert transfer.format_bytes(num_bytes) == text


def test_timeline_overlap_is_measured_from_the_spans():
    apart = transfer.Timeline("apart", (transfer.Span("copy", "s", 0, 4), transfer.Span("compute", "d", 4, 10)))
    inside = transfer.Timeline("inside", (transfer.Span("copy", "s", 1, 4), transfer.Span("compute", "d", 0, 10)))
    assert apart.overlap_ms == 0 and apart.total_ms == 10
    assert inside.overlap_fraction == 1.0
    ax = transfer.plot_timelines([apart, inside])
    assert ax.get_xlabel().startswith("ms after the start event")


def report(**extra):
    rows = [{"num_bytes": 2**20, "pinned": p, "seconds": s} for p, s in ((False, 1e-4), (True, 5e-5))]
    return {"hardware": "Test GPU", "date": "2026-12-03", "torch": "2.13.0", "bandwidth": {"device_name": "Test GPU", "rows": rows}, **extra}


def test_reference_results_round_trip(tmp_path):
    assert transfer.load_reference_results(tmp_path / "absent") == []
    (tmp_path / "2026-01-01-x-gpu-check.json").write_text(json.dumps(report()))
    (tmp_path / "2026-01-01-cpu-loaders.json").write_text(json.dumps({"kind": "lesson 03's reference"}))  # not a GPU report
    [loaded] = transfer.load_reference_results(tmp_path)
    sweep = transfer.sweep_from_report(loaded)
    assert loaded["file"] == "2026-01-01-x-gpu-check.json"
    assert sweep.rate(2**20, pinned=True) == pytest.approx(2**20 / 5e-5 / 1e9)
    assert "pinned/pageable" in str(sweep) and "2.00x" in str(sweep)
    assert transfer.sweep_to_dict(sweep) == report()["bandwidth"]


def test_reference_results_refuse_a_file_that_is_not_a_report(tmp_path):
    (tmp_path / "other-gpu-check.json").write_text(json.dumps({"hardware": "x"}))
    with pytest.raises(ValueError, match="is not a gpu-check report"):
        transfer.load_reference_results(tmp_path)


def test_committed_reference_results_load():
    loaded = transfer.load_reference_results(ROOT / "docs" / "reference-results")
    on_disk = sorted(path.name for path in (ROOT / "docs" / "reference-results").iterdir() if path.name.endswith("-gpu-check.json"))
    assert [item["file"] for item in loaded] == on_disk and len(on_disk) >= 1  # lesson 04 draws the H200 report from here
    assert all(transfer.sweep_from_report(item).rows for item in loaded)


@pytest.mark.cuda
def test_pinned_bandwidth_beats_pageable_for_large_copies():
    sweep = transfer.h2d_bandwidth([64 * 2**20], repeats=5)
    assert sweep.rate(64 * 2**20, pinned=True) > sweep.rate(64 * 2**20, pinned=False)


@pytest.mark.cuda
def test_unsafe_d2h_read_is_wrong_before_synchronising_and_right_after():
    assert transfer.unsafe_d2h_read() == (False, True)


@pytest.mark.cuda
def test_pinned_side_stream_copy_overlaps_compute():
    overlapped = transfer.copy_compute_timeline(64 * 2**20, pinned=True, side_stream=True)
    serial = transfer.copy_compute_timeline(64 * 2**20, pinned=True, side_stream=False)
    assert overlapped.overlap_fraction > 0.5
    assert serial.overlap_fraction < 0.1


@pytest.mark.cuda
def test_prefetcher_shortens_steps_when_copy_and_compute_are_alike():
    effect = transfer.prefetch_effect(32 * 2**20, steps=20)
    assert effect.prefetch_ms < 0.95 * effect.plain_ms


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_gpu_check_refuses_to_run_without_cuda(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    tool = Path(__file__).resolve().parent.parent / "tools" / "gpu_check.py"
    done = subprocess.run([sys.executable, str(tool), "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "needs a CUDA GPU, and torch.cuda.is_available() is False" in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_interleaved_medians_alternate_the_order_and_take_medians():
    calls = []
    medians = transfer.interleaved_medians({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")},
                                           lambda: None, rounds=4, warmup=1)
    assert calls == ["a", "b", "a", "b", "b", "a", "a", "b", "b", "a"]  # warm-up, then A B / B A / A B / B A
    assert set(medians) == {"a", "b"} and all(seconds >= 0 for seconds in medians.values())


@pytest.mark.parametrize("runs, says", [({}, "runs must map names to callables"), ({"a": 3}, "runs must map names to callables")])
def test_interleaved_medians_refuses_bad_runs(runs, says):
    with pytest.raises(ValueError, match=says):
        transfer.interleaved_medians(runs, lambda: None)


def test_host_copy_sweep_moves_the_same_bytes_and_small_copies_cost_more():
    sweep = transfer.host_copy_sweep([1024, 2**20], total_bytes=2**20, rounds=5)
    assert [chunk for chunk, _ in sweep.seconds] == [1024, 2**20]
    assert sweep.slowdown() > 1.5 and sweep.per_call_us() > 0  # 1024 calls cost more than one (measured ~9x here)
    assert sweep.gb_per_s(2**20) > sweep.gb_per_s(1024)


@pytest.mark.parametrize("chunks, total, says", [([1024], 2**20, "at least two different sizes"),
                                                 ([1000, 2**20], 2**20, "must divide total_bytes")])
def test_host_copy_sweep_refuses_bad_sizes(chunks, total, says):
    with pytest.raises(ValueError, match=says):
        transfer.host_copy_sweep(chunks, total_bytes=total)


def test_committed_gpu_reports_are_as_the_tool_wrote_them():
    """Each committed *-gpu-check.md is what tools/gpu_check.py renders from its .json: measurements are never edited by hand."""
    from tools import gpu_check

    reports = sorted((ROOT / "docs" / "reference-results").glob("*-gpu-check.json"))
    assert len(reports) >= 1  # the H200 run of 2026-12-04 at least
    for path in reports:
        written = path.with_suffix(".md").read_text()
        measured, _, suite = written.partition("## Test suite with ")
        tests = {"command": "x", "exit_code": 0, "seconds": 0.0, "summary": "x"}
        assert gpu_check.markdown(json.loads(path.read_text()), tests).partition("## Test suite with ")[0] == measured, path.name
        commands = r"\(skipped: --skip-suite\)|COURSE_REQUIRE_CUDA=1 python -m pytest [^`]+"  # the two that main() writes
        assert re.fullmatch(rf"COURSE_REQUIRE_CUDA=1\n`(?:{commands})` exited \d+ after \d+ s: [^\n]+\n", suite), (path.name, suite)


H200_REPORT = ROOT / "docs" / "reference-results" / "2026-12-04-nvidia-h200-gpu-check.json"


def test_newest_reference_is_the_last_report_holding_the_section():
    older, newer = report(prefetch={"x": 1}, date="2026-01-01"), report(date="2026-02-01")  # the newer one lacks "prefetch"
    assert transfer.newest_reference([older, newer], "bandwidth") is newer
    assert transfer.newest_reference([older, newer], "prefetch") is older
    assert transfer.newest_reference([older, newer], "timelines") is None
    assert transfer.newest_reference([], "prefetch") is None
    with pytest.raises(ValueError, match="section must name a part"):
        transfer.newest_reference([older], "")


def test_reference_title_names_the_hardware_and_says_it_is_not_this_machine():
    assert transfer.reference_title(report()) == "Reference, not this machine: Test GPU (2026-12-03, torch 2.13.0)"


def test_the_h200_reports_sections_read_back_as_lesson_04_draws_them():
    raw = json.loads(H200_REPORT.read_text())  # read here with json, not with the helpers under test
    [loaded] = [r for r in transfer.load_reference_results(H200_REPORT.parent) if r["file"] == H200_REPORT.name]
    costs = transfer.pinning_costs_from_report(loaded, 64 * 2**20)
    assert (costs.pageable_ms, costs.pin_then_copy_ms, costs.pinned_ms) == (
        raw["pinning_costs"][1]["pageable_ms"], raw["pinning_costs"][1]["pin_then_copy_ms"], raw["pinning_costs"][1]["pinned_ms"])
    assert round(costs.pageable_ms, 2) == 7.69 and round(costs.pinned_ms, 2) == 1.27  # the figures lesson 04 quotes
    with pytest.raises(ValueError, match=r"num_bytes=4096 was not recorded .* holds \[1048576, 67108864\]"):
        transfer.pinning_costs_from_report(loaded, 4096)
    timelines = transfer.timelines_from_report(loaded)
    assert [t.title for t in timelines] == [t["title"] for t in raw["timelines"]]
    for rebuilt, stored in zip(timelines, raw["timelines"]):  # overlap recomputed from the spans equals the recorded one
        assert rebuilt.overlap_fraction == pytest.approx(stored["overlap_fraction"])
        assert rebuilt.total_ms == pytest.approx(stored["total_ms"])
    assert [round(t.overlap_fraction, 2) for t in timelines] == [0.0, 0.0, 1.0]
    effect = transfer.prefetch_from_report(loaded)
    assert round(effect.plain_ms / effect.prefetch_ms, 2) == 1.77 and round(effect.plain_ms, 2) == 2.25


def test_pinning_costs_and_prefetch_plots_draw_their_numbers_under_a_named_source():
    costs = transfer.PinningCosts(64 * 2**20, pageable_ms=8.0, pin_then_copy_ms=3.0, pinned_ms=1.25, pin_only_ms=10.0)
    ax = costs.plot("Test GPU")
    assert [bar.get_height() for bar in ax.patches] == [8.0, 3.0, 1.25, 10.0]
    assert ax.get_title() == "Test GPU\npinning in the loop adds 1.75 ms per batch"
    assert ax.get_ylabel() == "wall ms per 64 MiB batch (median)"
    effect = transfer.PrefetchEffect(64 * 2**20, copy_ms=1.5, compute_ms=1.0, plain_ms=2.5, prefetch_ms=1.6)
    ax = effect.plot("Test GPU")
    assert [bar.get_height() for bar in ax.patches] == [2.5, 1.6]
    assert ax.lines[0].get_ydata()[0] == 1.5  # the dotted line: max(copy, compute)
    assert ax.get_title() == "Test GPU\nCUDAPrefetcher: 1.56x shorter steps"
    for drawn in (costs, effect):
        with pytest.raises(ValueError, match="where must say where"):
            drawn.plot("  ")


def test_timelines_title_says_where_they_were_measured():
    apart = transfer.Timeline("apart", (transfer.Span("copy", "s", 0, 4), transfer.Span("compute", "d", 4, 10)))
    assert transfer.plot_timelines([apart]).get_title() == "Copy/compute overlap at best 0%: apart"
    titled = transfer.plot_timelines([apart], where="Reference, not this machine: X")
    assert titled.get_title() == "Reference, not this machine: X\nCopy/compute overlap at best 0%: apart"
    with pytest.raises(TypeError, match="where must be a string"):
        transfer.plot_timelines([apart], where=None)
