"""helpers.memory: worker USS/PSS/RSS over an epoch; copy-on-read grows a list-backed dataset's workers, not an array's."""
import statistics
import time

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset, get_worker_info

from helpers.memory import MemorySample, process_memory, worker_memory
from helpers.workloads import ArrayBackedDataset, InMemoryDataset, ListBackedDataset


def test_process_memory_orders_uss_pss_rss():
    sample = process_memory()
    assert isinstance(sample, MemorySample)
    assert 0 < sample.uss_mib <= sample.pss_mib <= sample.rss_mib


def test_worker_memory_measures_each_worker_then_lets_them_exit():
    rows = worker_memory(DataLoader(InMemoryDataset(1024), batch_size=64, num_workers=2))
    assert [row.worker_id for row in rows] == [0, 1] and len({row.pid for row in rows}) == 2
    assert all(0 < row.start.uss_mib <= row.start.rss_mib and row.end.uss_mib > 0 for row in rows)
    assert "USS" in str(rows[0]) and "PSS" in str(rows[0]) and "RSS" in str(rows[0])
    _, alive = psutil.wait_procs([psutil.Process(row.pid) for row in rows if psutil.pid_exists(row.pid)], timeout=5)
    assert alive == []


class SlowFirstItem(InMemoryDataset):
    """Worker 1 starts late and then holds 24 MiB it allocates on its first item, as a lazily opened file or cache would."""

    def __getitem__(self, i):
        info = get_worker_info()
        if info is not None and info.id == 1 and not hasattr(self, "cache"):
            time.sleep(0.5)  # worker 0's first batch reaches the loop first
            self.cache = bytearray(24 * 1024 * 1024)
            self.cache[::4096] = b"x" * len(self.cache[::4096])  # touched: resident, private
        return super().__getitem__(i)


def test_each_worker_is_measured_after_its_own_first_batch():
    """A worker's start-up is not epoch growth: worker 1's first-item allocation happens before its first batch."""
    rows = worker_memory(DataLoader(SlowFirstItem(512), batch_size=32, num_workers=2, multiprocessing_context="fork"))
    assert all(row.uss_growth_mib < 8 for row in rows), [round(row.uss_growth_mib, 1) for row in rows]


def mean_uss_growth(dataset):
    """Mean per-worker USS growth in MiB over one forked epoch with 2 workers."""
    loader = DataLoader(dataset, batch_size=4096, num_workers=2, multiprocessing_context="fork")
    return statistics.mean(row.uss_growth_mib for row in worker_memory(loader))


def test_list_backed_workers_grow_and_array_backed_do_not():
    listed = mean_uss_growth(ListBackedDataset(1_000_000))  # ~17 MiB here: 1M floats are 23 MiB of objects
    array = mean_uss_growth(ArrayBackedDataset(1_000_000))  # ~1-2 MiB
    assert listed > 8, f"list-backed workers grew only {listed:.1f} MiB"
    assert array < listed / 3, f"array-backed {array:.1f} MiB vs list-backed {listed:.1f} MiB"


def test_worker_memory_rejects_bad_arguments():
    with pytest.raises(TypeError, match="loader must be a torch.utils.data.DataLoader"):
        worker_memory([1, 2, 3])
    with pytest.raises(ValueError, match="num_workers must be at least 1.*got 0"):
        worker_memory(DataLoader(InMemoryDataset(8)))
    with pytest.raises(ValueError, match="loader.in_order must be True.*got in_order=False"):
        worker_memory(DataLoader(InMemoryDataset(8), num_workers=2, in_order=False))
    with pytest.raises(ValueError, match="loader must give at least one batch, got len\\(loader\\) == 0"):
        worker_memory(DataLoader(TensorDataset(torch.zeros(0, 2)), num_workers=2))
    with pytest.raises(TypeError, match="loader must have a length.*over Endless, which has none"):
        worker_memory(DataLoader(Endless(), num_workers=2))


class Endless(IterableDataset):
    """A stream with no __len__."""

    def __iter__(self):
        return iter(range(10))
