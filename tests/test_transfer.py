"""helpers.transfer: batches move whole, the prefetcher keeps order, timing waits for the device, CUDA paths measured on a GPU."""
import collections
import json
import time
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers import transfer

Pair = collections.namedtuple("Pair", "x y")


def nested_batch():
    return {"image": torch.ones(4, 3), "meta": [torch.arange(4), "name", 7], "pair": Pair(torch.zeros(2), 1.5)}


def test_move_reaches_every_tensor_and_keeps_structure():
    moved = transfer.move(nested_batch(), "meta")
    assert moved["image"].device.type == "meta" and moved["meta"][0].device.type == "meta"
    assert moved["meta"][1:] == ["name", 7]
    assert isinstance(moved["pair"], Pair) and moved["pair"].x.device.type == "meta" and moved["pair"].y == 1.5


def test_all_pinned_is_false_on_cpu_tensors_and_for_batches_without_tensors():
    assert not transfer.all_pinned(nested_batch())
    assert not transfer.all_pinned(["no", "tensors"])


def test_dataloader_pin_memory_without_accelerator_warns_and_pins_nothing():
    if torch.accelerator.is_available():
        pytest.skip("an accelerator is present: the DataLoader really pins here")
    loader = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4, pin_memory=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = next(iter(loader))
    assert any("no accelerator is found" in str(w.message) for w in caught)
    assert not transfer.all_pinned(batch)


def test_prefetcher_on_cpu_passes_batches_through_in_order():
    loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3)
    through = list(transfer.CUDAPrefetcher(loader, "cpu"))
    assert [b[0].tolist() for b in through] == [b[0].tolist() for b in loader]
    assert len(transfer.CUDAPrefetcher(loader, "cpu")) == 4


@pytest.mark.parametrize("bad, error", [("gpu0", ValueError), (3.5, ValueError), (None, ValueError)])
def test_bad_device_is_refused_by_name(bad, error):
    with pytest.raises(error, match="device must be a torch device"):
        transfer.as_device(bad)


def test_prefetcher_refuses_a_non_iterable_loader():
    with pytest.raises(TypeError, match="loader must be iterable"):
        transfer.CUDAPrefetcher(42, "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
@pytest.mark.parametrize("call", [
    lambda: transfer.h2d_bandwidth([1024]),
    lambda: transfer.pinning_costs(1024),
    lambda: transfer.copy_compute_timeline(1024, pinned=True, side_stream=True),
    lambda: transfer.unsafe_d2h_read(),
    lambda: transfer.CUDAPrefetcher([], "cuda"),
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
    assert transfer.host_copy_gb_per_s(8 * transfer.MIB, repeats=3, warmup=1) > 0.05


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
    for item in transfer.load_reference_results():
        assert transfer.sweep_from_report(item).rows


@pytest.mark.cuda
def test_pinned_bandwidth_beats_pageable_for_large_copies():
    sweep = transfer.h2d_bandwidth([64 * transfer.MIB], repeats=5)
    assert sweep.rate(64 * transfer.MIB, pinned=True) > sweep.rate(64 * transfer.MIB, pinned=False)


@pytest.mark.cuda
def test_prefetcher_on_cuda_yields_the_same_values_on_the_gpu():
    batches = [(torch.full((1000,), float(i)).pin_memory(), torch.tensor([i])) for i in range(5)]
    out = [(x.sum().item(), y.item(), x.device.type) for x, y in transfer.CUDAPrefetcher(batches, "cuda")]
    assert out == [(1000.0 * i, i, "cuda") for i in range(5)]


@pytest.mark.cuda
def test_unsafe_d2h_read_is_wrong_before_synchronising_and_right_after():
    assert transfer.unsafe_d2h_read() == (False, True)


@pytest.mark.cuda
def test_pinned_side_stream_copy_overlaps_compute():
    overlapped = transfer.copy_compute_timeline(64 * transfer.MIB, pinned=True, side_stream=True)
    serial = transfer.copy_compute_timeline(64 * transfer.MIB, pinned=True, side_stream=False)
    assert overlapped.overlap_fraction > 0.5
    assert serial.overlap_fraction < 0.1


@pytest.mark.cuda
def test_prefetcher_shortens_steps_when_copy_and_compute_are_alike():
    effect = transfer.prefetch_effect(32 * transfer.MIB, steps=20)
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


def test_batch_bytes_counts_every_tensor_from_shapes_and_dtypes():
    assert transfer.batch_bytes(nested_batch()) == 4 * 3 * 4 + 4 * 8 + 2 * 4
    with pytest.raises(ValueError, match="batch must hold at least one tensor"):
        transfer.batch_bytes(["no", "tensors"])
