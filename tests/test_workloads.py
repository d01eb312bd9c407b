"""helpers.workloads: deterministic, picklable datasets with a known cost per item; the batched-fetch path; bad inputs."""
import pickle
import time

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from helpers import workloads
from helpers.workloads import (
    ArrayBackedDataset,
    BatchedInMemoryDataset,
    FailingDataset,
    InMemoryDataset,
    ListBackedDataset,
    NumpyRngDataset,
    PreStackedInMemoryDataset,
    SlowDataset,
    collate_stacked,
)


def test_items_are_deterministic_from_seed_and_index():
    first, again, other = SlowDataset(8, seed=1), SlowDataset(8, seed=1), SlowDataset(8, seed=2)
    image, label = first[3]
    assert image.shape == (3, 32, 32) and image.dtype == torch.uint8
    assert isinstance(label, int) and 0 <= label < 10
    assert torch.equal(image, again[3][0]) and label == again[3][1]
    assert not torch.equal(image, first[4][0]) and not torch.equal(image, other[3][0])
    assert SlowDataset(2, shape=(5,))[0][0].shape == (5,)


def test_labels_collate_to_one_dimension_that_cross_entropy_accepts():
    images, labels = next(iter(DataLoader(SlowDataset(8, num_classes=4), batch_size=8)))
    assert images.shape == (8, 3, 32, 32) and labels.shape == (8,) and labels.dtype == torch.int64
    torch.nn.functional.cross_entropy(torch.zeros(8, 4), labels)  # a [B, 1] target would raise here


def test_pickled_dataset_keeps_its_calibration_and_items():
    dataset = SlowDataset(4, cpu_ms=1.0, io_ms=0.5)
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.spin_iterations == dataset.spin_iterations > 0
    assert torch.equal(copy[2][0], dataset[2][0])


def test_cpu_ms_costs_cpu_time_and_io_ms_costs_wall_time():
    busy, waiting = SlowDataset(2, cpu_ms=20.0), SlowDataset(2, io_ms=30.0)
    busy[0]  # warm up torch's generator path
    cpu = time.thread_time()
    busy[1]
    cpu = time.thread_time() - cpu
    # At least half: a CI VM once ran the calibrated spin at 0.72 of its nominal time (host steal counts as the thread's)
    assert 0.010 <= cpu <= 0.080, f"cpu_ms=20 took {cpu * 1000:.1f} ms of CPU"
    wall, cpu = time.perf_counter(), time.thread_time()
    waiting[0]
    wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
    assert wall >= 0.030 and cpu < 0.015, f"io_ms=30 took {wall * 1000:.1f} ms wall, {cpu * 1000:.1f} ms CPU"


def test_calibration_is_cached():
    assert workloads.spin_iterations_per_ms() == workloads.spin_iterations_per_ms() > 0
    assert workloads.spin_iterations_per_ms.cache_info().hits >= 1


def test_spawned_worker_gets_the_same_items():
    dataset = SlowDataset(4, cpu_ms=0.5, seed=3)
    spawned = DataLoader(dataset, batch_size=2, num_workers=1, multiprocessing_context="spawn")
    inline = DataLoader(dataset, batch_size=2)
    for (a, la), (b, lb) in zip(spawned, inline, strict=True):
        assert torch.equal(a, b) and torch.equal(la, lb)


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"num_items": 0}, ValueError, "num_items"),
        ({"num_items": 2.0}, TypeError, "num_items"),
        ({"cpu_ms": -1}, ValueError, "cpu_ms"),
        ({"cpu_ms": "5"}, TypeError, "cpu_ms"),
        ({"io_ms": float("nan")}, ValueError, "io_ms"),
        ({"io_ms": -0.5}, ValueError, "io_ms"),
        ({"shape": (3, 0)}, ValueError, "shape[1]"),
        ({"shape": ()}, TypeError, "shape"),
        ({"shape": "3x32x32"}, TypeError, "shape"),
        ({"shape": (3, 2.5)}, TypeError, "shape[1]"),
        ({"num_classes": 0}, ValueError, "num_classes"),
        ({"seed": -1}, ValueError, "seed"),
    ],
)
def test_slow_dataset_rejects_bad_arguments(kwargs, error, name):
    with pytest.raises(error, match=name.replace("[", r"\[").replace("]", r"\]")):
        SlowDataset(**kwargs)


def test_out_of_range_index_raises_index_error():
    with pytest.raises(IndexError, match="index 4"):
        SlowDataset(4)[4]
    with pytest.raises(IndexError, match="index -1"):
        InMemoryDataset(4)[-1]


@pytest.mark.parametrize(
    ("make", "error", "name"),
    [
        (lambda: InMemoryDataset(0), ValueError, "num_items"),
        (lambda: InMemoryDataset(4, num_features=0), ValueError, "num_features"),
        (lambda: ListBackedDataset(-3), ValueError, "num_items"),
        (lambda: ArrayBackedDataset(10, seed=1.5), TypeError, "seed"),
        (lambda: FailingDataset(4, bad_index=4), ValueError, "bad_index"),
        (lambda: NumpyRngDataset(0), ValueError, "num_items"),
    ],
)
def test_small_datasets_reject_bad_arguments(make, error, name):
    with pytest.raises(error, match=name):
        make()


class CountingBatched(BatchedInMemoryDataset):
    """Counts __getitems__ calls; per-item reads are an error."""

    calls = 0

    def __getitems__(self, indices):
        CountingBatched.calls += 1
        return super().__getitems__(indices)

    def __getitem__(self, index):
        raise AssertionError("the DataLoader read an item one by one")


def test_getitems_returns_a_list_of_samples_that_default_collate_stacks():
    per_item = list(DataLoader(InMemoryDataset(100, seed=4), batch_size=32))
    samples = CountingBatched(100, seed=4).__getitems__([3, 1])
    assert isinstance(samples, list) and len(samples) == 2 and samples[0][0].shape == (16,) and samples[0][1].shape == ()
    CountingBatched.calls = 0
    batched = list(DataLoader(CountingBatched(100, seed=4), batch_size=32))
    assert CountingBatched.calls == 4 == len(batched)
    for (x, y), (bx, by) in zip(per_item, batched, strict=True):
        assert torch.equal(x, bx) and torch.equal(y, by) and by.shape == (len(x),)


def test_pre_stacked_variant_matches_with_an_identity_collate():
    per_item = list(DataLoader(InMemoryDataset(100, seed=4), batch_size=32))
    stacked = list(DataLoader(PreStackedInMemoryDataset(100, seed=4), batch_size=32, collate_fn=collate_stacked))
    for (x, y), (bx, by) in zip(per_item, stacked, strict=True):
        assert torch.equal(x, bx) and torch.equal(y, by)


def test_pre_stacked_variant_breaks_inside_stack_dataset():
    both = torch.utils.data.StackDataset(PreStackedInMemoryDataset(64), InMemoryDataset(64))
    with pytest.raises(ValueError, match="Nested dataset's output size mismatch. Expected 8, got 2"):
        next(iter(DataLoader(both, batch_size=8, collate_fn=collate_stacked)))
    documented = torch.utils.data.StackDataset(BatchedInMemoryDataset(64), InMemoryDataset(64))
    (x, y), (x2, y2) = next(iter(DataLoader(documented, batch_size=8)))
    assert torch.equal(x, x2) and torch.equal(y, y2)


def test_batched_fetch_is_faster():
    def rate(dataset, collate):
        loader = DataLoader(dataset, batch_size=256, shuffle=True, collate_fn=collate)
        start = time.perf_counter()
        count = sum(len(y) for _, y in loader)
        return count / (time.perf_counter() - start)

    rates = {"item": [], "list": [], "stacked": []}
    for _ in range(5):  # interleaved: load from other programs hits all three alike
        rates["item"].append(rate(InMemoryDataset(256 * 8), None))
        rates["list"].append(rate(BatchedInMemoryDataset(256 * 8), None))
        rates["stacked"].append(rate(PreStackedInMemoryDataset(256 * 8), collate_stacked))
    best = {name: max(values) for name, values in rates.items()}
    assert best["list"] > 1.1 * best["item"], best  # one fetch per batch; the collate stays (~1.5-2x here)
    assert best["stacked"] >= 3 * best["list"], best  # no per-sample collate either (~10x here)


def test_list_and_array_hold_the_same_values():
    listed, array = ListBackedDataset(1000, seed=5), ArrayBackedDataset(1000, seed=5)
    assert isinstance(listed.values, list) and isinstance(array.values, np.ndarray) and array.values.dtype == np.float64
    assert len(listed) == len(array) == 1000 and listed[7] == array[7] and isinstance(array[7], float)
    batch = next(iter(DataLoader(array, batch_size=4)))
    assert batch.shape == (4,) and batch.dtype == torch.float64


def test_failing_dataset_raises_plain_error_without_workers():
    dataset = FailingDataset(8, bad_index=5)
    assert dataset[4].item() == 4.0
    with pytest.raises(ValueError, match="item 5 is corrupt"):
        list(DataLoader(dataset, batch_size=2))


def test_forked_workers_repeat_an_init_time_numpy_generator():
    loader = DataLoader(NumpyRngDataset(8, seed=0), batch_size=2, num_workers=2, multiprocessing_context="fork")
    first, second, third, fourth = (batch.tolist() for batch in loader)
    assert first == second and third == fourth and first != third  # worker 0 and 1 draw the same numbers
