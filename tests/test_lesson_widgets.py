"""The computations behind lesson 04's copy-vs-compute widget and lesson 05's shard widget, checked against real tensors and samplers."""
import collections
import math

import matplotlib
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DistributedSampler

from helpers import ddp, ddp_demos, transfer
from helpers.transfer import BandwidthRow, BandwidthSweep

matplotlib.use("Agg")  # no window: these tests only read the drawn artists


@pytest.fixture(autouse=True)
def close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


# ------------------------------------------------------------------ lesson 04


@pytest.mark.parametrize("batch_size, dtype, shape", [
    (64, torch.uint8, (3, 224, 224)), (64, torch.float32, (3, 224, 224)), (1, torch.float16, (3, 224, 224)),
    (7, torch.bfloat16, (1, 5, 3)), (3, torch.float64, (10,)),
])
def test_image_batch_bytes_equals_the_bytes_of_a_real_batch(batch_size, dtype, shape):
    real = (torch.zeros(batch_size, *shape, dtype=dtype), torch.zeros(batch_size, dtype=torch.int64))
    assert transfer.image_batch_bytes(batch_size, dtype, shape) == transfer.batch_bytes(real)


def test_image_batch_bytes_default_shape_is_lesson_04s_images():
    assert transfer.image_batch_bytes(64, torch.float32) == 64 * (3 * 224 * 224 * 4 + 8)


def sweep(pinned_rates, pageable_rates, sizes=(2**10, 2**20, 2**30)):
    """A BandwidthSweep whose rows give exactly these GB/s at these sizes (seconds = bytes / rate)."""
    rows = [BandwidthRow(size, pinned, size / (rate * 1e9))
            for pinned, rates in ((True, pinned_rates), (False, pageable_rates)) for size, rate in zip(sizes, rates)]
    return BandwidthSweep("test GPU", tuple(rows))


def test_rate_at_reads_measured_sizes_interpolates_between_and_holds_the_ends():
    measured = sweep([1.0, 10.0, 20.0], [0.5, 4.0, 8.0])
    assert transfer.rate_at(measured, 2**20, True) == pytest.approx(measured.rate(2**20, True))
    assert transfer.rate_at(measured, 2**20, False) == pytest.approx(4.0)
    assert transfer.rate_at(measured, 2**15, True) == pytest.approx(5.5)  # halfway in log2 size between 2**10 and 2**20
    assert transfer.rate_at(measured, 2**25, False) == pytest.approx(6.0)
    assert transfer.rate_at(measured, 1, True) == pytest.approx(1.0)  # below the smallest size: the smallest's rate
    assert transfer.rate_at(measured, 2**40, True) == pytest.approx(20.0)  # above the largest: the largest's rate


def model(num_bytes=10**9, compute_ms=5.0, pinned=100.0, pageable=50.0):
    return transfer.CopyVsCompute(num_bytes, compute_ms, pinned, pageable, bandwidth_source="test numbers")


def test_copy_time_is_bytes_over_bandwidth():
    m = model()  # 1 GB at 100 and 50 GB/s
    assert m.copy_ms(True) == pytest.approx(10.0) and m.copy_ms(False) == pytest.approx(20.0)


def test_pinned_copy_overlaps_compute_and_pageable_adds_to_it():
    short = model(compute_ms=4.0)  # pinned copy 10 ms, pageable 20 ms
    assert short.step_ms(True) == pytest.approx(10.0) and short.step_ms(False) == pytest.approx(24.0)
    long = model(compute_ms=30.0)
    assert long.step_ms(True) == pytest.approx(30.0) and long.step_ms(False) == pytest.approx(50.0)


def test_the_copy_hides_exactly_when_compute_is_at_least_the_pinned_copy():
    assert model(compute_ms=10.0).hidden(True) and not model(compute_ms=9.99).hidden(True)
    assert not model(compute_ms=1000.0).hidden(False)  # a pageable copy is never hidden in the model
    assert "hides behind" in model(compute_ms=10.0).verdict(True)
    assert "+0.01 ms per step" in model(compute_ms=9.99).verdict(True)
    assert "+20.00 ms per step" in model(compute_ms=1000.0).verdict(False)


@pytest.mark.parametrize("pinned", [True, False])
def test_copy_plot_labels_the_model_and_marks_the_chosen_step(pinned):
    m = model(compute_ms=4.0)
    ax = m.plot(pinned)
    title = ax.get_title()
    assert m.verdict(pinned) in title and "test numbers" in title
    assert ax.get_xlabel() and ax.get_ylabel()
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert sum("(chosen)" in label for label in labels) == 1
    assert any(label.startswith("pinned" if pinned else "pageable") and "(chosen)" in label for label in labels)
    dot = next(line for line in ax.get_lines() if line.get_marker() == "o")
    assert dot.get_ydata()[0] == pytest.approx(m.step_ms(pinned)) and dot.get_xdata()[0] == pytest.approx(4.0)


def test_copy_plot_spans_twice_the_chosen_sources_copy_or_compute():
    m = model(compute_ms=4.0)  # pinned copy 10 ms, pageable 20 ms: each source's kink (or the dot) stays in view
    assert m.plot(True).get_xlim() == (0.0, 20.0)
    assert m.plot(False).get_xlim() == (0.0, 40.0)
    assert model(compute_ms=30.0).plot(True).get_xlim() == (0.0, 60.0)  # compute longer: the dot sits mid-axis


@pytest.mark.parametrize("call, error, says", [
    (lambda: transfer.image_batch_bytes(0, torch.uint8), ValueError, "batch_size"),
    (lambda: transfer.image_batch_bytes(2.0, torch.uint8), TypeError, "batch_size"),
    (lambda: transfer.image_batch_bytes(2, "float32"), TypeError, "dtype"),
    (lambda: transfer.image_batch_bytes(2, torch.uint8, [3, 224, 224]), TypeError, "image_shape"),
    (lambda: transfer.image_batch_bytes(2, torch.uint8, (3, 0, 224)), ValueError, "image_shape"),
    (lambda: transfer.rate_at({"rows": []}, 1024, True), TypeError, "sweep"),
    (lambda: transfer.rate_at(sweep([1, 2, 3], [1, 2, 3]), 0, True), ValueError, "num_bytes"),
    (lambda: transfer.rate_at(sweep([1, 2, 3], [1, 2, 3]), 1024, "pinned"), TypeError, "pinned"),
    (lambda: model(num_bytes=0), ValueError, "num_bytes"),
    (lambda: model(compute_ms=-1.0), ValueError, "compute_ms"),
    (lambda: model(compute_ms="5"), TypeError, "compute_ms"),
    (lambda: model(pinned=0.0), ValueError, "pinned_gb_per_s"),
    (lambda: model(pageable=float("nan")), ValueError, "pageable_gb_per_s"),
    (lambda: transfer.CopyVsCompute(10, 1.0, 1.0, 1.0, bandwidth_source=" "), ValueError, "bandwidth_source"),
    (lambda: model().plot(pinned=1), TypeError, "pinned"),
])
def test_lesson_04_bad_input_names_the_argument(call, error, says):
    with pytest.raises(error, match=says):
        call()


# ------------------------------------------------------------------ lesson 05


def test_shard_plan_gives_the_documented_padding_example():
    plan = ddp_demos.shard_plan(10, 4, shuffle=False)  # FACTS: rank 2 gets [2, 6, 0], rank 3 [3, 7, 1]
    assert plan.shards == ((0, 4, 8), (1, 5, 9), (2, 6, 0), (3, 7, 1))
    assert plan.duplicate_slots() == [(2, 2), (3, 2)] and plan.padding == 2 and plan.unseen == []


@given(num_items=st.integers(1, 60), world_size=st.integers(1, 9), drop_last=st.booleans(), shuffle=st.booleans(),
       batch_size=st.integers(1, 7), epoch=st.integers(0, 3))
def test_shard_plan_matches_the_real_sampler_and_its_padding(num_items, world_size, drop_last, shuffle, batch_size, epoch):
    plan = ddp_demos.shard_plan(num_items, world_size, drop_last=drop_last, shuffle=shuffle, batch_size=batch_size, epoch=epoch)
    samplers = [DistributedSampler(range(num_items), num_replicas=world_size, rank=r, shuffle=shuffle, seed=0, drop_last=drop_last)
                for r in range(world_size)]
    for sampler in samplers:
        sampler.set_epoch(epoch)
    assert plan.shards == tuple(tuple(s) for s in samplers)
    counts = collections.Counter(i for shard in plan.shards for i in shard)
    repeats = sum(count - 1 for count in counts.values())
    assert plan.padding == repeats == samplers[0].total_size - num_items + len(plan.unseen)  # the sampler's own padding
    assert plan.padding == (0 if drop_last else math.ceil(num_items / world_size) * world_size - num_items)
    assert len(plan.unseen) == (num_items % world_size if drop_last else 0)
    assert set(counts) | set(plan.unseen) == set(range(num_items)) and not set(counts) & set(plan.unseen)
    per_rank = len(samplers[0])
    assert plan.steps_per_epoch == (math.ceil(per_rank / batch_size),) * world_size


def test_duplicates_are_the_padding_slots_at_the_end_of_the_order():
    plan = ddp_demos.shard_plan(13, 5, shuffle=True, epoch=2)  # 15 slots: positions 13 and 14 of the order repeat
    assert plan.duplicate_slots() == [(rank, position) for position, rank in (divmod(13, 5), divmod(14, 5))]
    order = [plan.shards[p % 5][p // 5] for p in range(15)]
    assert order[13:] == order[:2]  # padding repeats the start of the (shuffled) order


def test_a_plan_without_repeats_has_no_padding():
    plan = ddp_demos.ShardPlan(4, 2, 1, False, False, ((0, 2), (1, 3)), (2, 2))
    assert plan.padding == 0 and plan.duplicate_slots() == []
    repeated = ddp_demos.ShardPlan(3, 2, 1, False, False, ((0, 2), (1, 1)), (2, 2))
    assert repeated.duplicate_slots() == [(1, 1)]


def test_shard_plan_equals_what_ranks_in_processes_yield():
    orders = ddp.run(ddp_demos.sampler_epochs, 11, kwargs={"epochs": 1}, world_size=2, backend="gloo")
    assert ddp_demos.shard_plan(11, 2, shuffle=True).shards == tuple(tuple(o[0]) for o in orders)


@pytest.mark.parametrize("drop_last", [False, True])
def test_shard_plot_shows_every_rank_and_colours_the_duplicates(drop_last):
    plan = ddp_demos.shard_plan(10, 4, drop_last=drop_last, shuffle=True, batch_size=2)
    ax = plan.plot()
    grid = ax.images[0].get_array()
    assert (grid == 3).sum() == plan.padding and (grid == 4).sum() == len(plan.unseen)
    rows = [tick.get_text() for tick in ax.get_yticklabels()]
    assert rows[:4] == [f"rank {r}" for r in range(4)] and (rows[4:] == ["never seen"]) == drop_last
    shown = sorted(int(text.get_text()) for text in ax.texts)
    assert shown == sorted([i for shard in plan.shards for i in shard] + plan.unseen)
    assert plan.summary().split(";")[0] in ax.get_title().replace("\n", "; ") and ax.get_xlabel() and ax.get_ylabel()
    assert "padding duplicate" in [text.get_text() for text in ax.get_legend().get_texts()]


@pytest.mark.parametrize("call, error, says", [
    (lambda: ddp_demos.shard_plan(0, 2), ValueError, "num_items"),
    (lambda: ddp_demos.shard_plan(10, 0), ValueError, "world_size"),
    (lambda: ddp_demos.shard_plan(10, 2.0), TypeError, "world_size"),
    (lambda: ddp_demos.shard_plan(10, 2, batch_size=0), ValueError, "batch_size"),
    (lambda: ddp_demos.shard_plan(10, 2, drop_last="no"), TypeError, "drop_last"),
    (lambda: ddp_demos.shard_plan(10, 2, shuffle=1), TypeError, "shuffle"),
    (lambda: ddp_demos.shard_plan(10, 2, seed=-1), ValueError, "seed"),
    (lambda: ddp_demos.shard_plan(10, 2, epoch=-1), ValueError, "epoch"),
])
def test_lesson_05_bad_input_names_the_argument(call, error, says):
    with pytest.raises(error, match=says):
        call()
