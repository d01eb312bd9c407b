"""helpers.streaming: tar shards split over ranks x workers read each sample once; the unsharded control duplicates."""
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader
from conftest import ROOT

import helpers.streaming as streaming
from helpers.streaming import ShardedStream, UnshardedStream, count_samples, read_shard, shard_assignment, write_shards

WORLD_SIZE, NUM_WORKERS = 2, 2


def keys_read(dataset_for_rank, world_size: int = WORLD_SIZE) -> dict[int, Counter]:
    """For each simulated rank, how often a DataLoader with real workers delivered each sample key."""
    return {
        rank: Counter(sample["key"] for sample in DataLoader(dataset_for_rank(rank), batch_size=None, num_workers=NUM_WORKERS))
        for rank in range(world_size)
    }


@pytest.fixture
def shards(tmp_path: Path) -> list[Path]:
    """45 samples in 5 shards (the last one half full), written under tmp_path only."""
    return write_shards(tmp_path, num_samples=45, samples_per_shard=10)


def test_written_shards_stay_in_tmp_path_and_hold_every_sample(shards, tmp_path):
    assert sorted(tmp_path.iterdir()) == shards and len(shards) == 5
    assert [count_samples(shard) for shard in shards] == [10, 10, 10, 10, 5]
    first = next(read_shard(shards[0]))
    assert first["key"] == "00000000" and first["input"].shape == (8,) and first["label"] in (0, 1)
    assert len(list(read_shard(shards[1], limit=3))) == 3


def test_each_sample_once_per_epoch_across_ranks_and_workers(shards):
    counts = keys_read(lambda rank: ShardedStream(shards, rank=rank, world_size=WORLD_SIZE))
    total = counts[0] + counts[1]
    assert sorted(total) == [f"{index:08d}" for index in range(45)]
    assert set(total.values()) == {1}, "a sample was read more than once"
    assert not set(counts[0]) & set(counts[1]), "two ranks read the same sample"


def test_unsharded_stream_duplicates_per_rank_and_worker(shards):
    counts = keys_read(lambda rank: UnshardedStream(shards))
    total = counts[0] + counts[1]
    assert len(total) == 45 and set(total.values()) == {WORLD_SIZE * NUM_WORKERS}


def test_fewer_shards_than_readers_leaves_a_worker_empty_but_loses_nothing(shards):
    assert shard_assignment(5, 2, 2) == {(0, 0): [0, 4], (0, 1): [2], (1, 0): [1], (1, 1): [3]}  # ranks uneven: 3 vs 2 shards
    assert shard_assignment(5, 2, 3)[(1, 2)] == []
    assert shard_assignment(3, 2, 2)[(1, 1)] == []
    counts = keys_read(lambda rank: ShardedStream(shards[:3], rank=rank, world_size=WORLD_SIZE))
    total = counts[0] + counts[1]
    assert len(total) == 30 and set(total.values()) == {1}


def test_assignment_covers_every_shard_once():
    plan = shard_assignment(7, 3, 0)
    assert set(plan) == {(0, 0), (1, 0), (2, 0)}
    assert sorted(index for indices in plan.values() for index in indices) == list(range(7))


def test_equal_steps_gives_every_rank_the_same_number_of_samples(shards):
    plain = keys_read(lambda rank: ShardedStream(shards, rank=rank, world_size=WORLD_SIZE))
    assert (sum(plain[0].values()), sum(plain[1].values())) == (25, 20), "the control: ranks are uneven without equal_steps"
    counts = keys_read(lambda rank: ShardedStream(shards, rank=rank, world_size=WORLD_SIZE, equal_steps=True))
    assert sum(counts[0].values()) == sum(counts[1].values()) == 20
    assert set((counts[0] + counts[1]).values()) == {1}


READ_URLS = """
import json, sys
import webdataset as wds
from torch.utils.data import DataLoader
dataset = wds.WebDataset(sys.argv[2:], shardshuffle=False, nodesplitter=wds.split_by_node, workersplitter=wds.split_by_worker)
print(json.dumps(sorted({sample["__url__"] for sample in DataLoader(dataset, batch_size=None, num_workers=int(sys.argv[1]))})))
"""


def test_webdataset_reads_the_shards_the_same_way(shards):
    """Each rank a process launched with its RANK and WORLD_SIZE, as torchrun does. Not one process setting them in
    turn: under forkserver the workers get the fork server's environment, fixed when it started, so the second rank's
    workers read the first rank's RANK (seen in the suite's forkserver run)."""
    ranks = [subprocess.Popen([sys.executable, "-c", READ_URLS, str(NUM_WORKERS), *map(str, shards)], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "RANK": str(rank), "WORLD_SIZE": str(WORLD_SIZE)})
             for rank in range(WORLD_SIZE)]
    plan = shard_assignment(len(shards), WORLD_SIZE, NUM_WORKERS)
    for rank, process in enumerate(ranks):
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        expected = {str(shards[index]) for worker in range(NUM_WORKERS) for index in plan[(rank, worker)]}
        assert set(json.loads(out)) == expected


def test_nothing_is_opened_in_init(shards, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a shard was opened in __init__")

    monkeypatch.setattr(streaming.tarfile, "open", refuse)
    ShardedStream(shards, rank=0, world_size=2, equal_steps=True)
    UnshardedStream(shards)


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda s: ShardedStream([]), ValueError, r"shards must name at least one shard file, got \[\]"),
        (lambda s: ShardedStream(str(s[0])), TypeError, "shards must be a list"),
        (lambda s: ShardedStream([3]), TypeError, "shards must hold paths, got 3"),
        (lambda s: ShardedStream([s[0].with_name("missing.tar")]), ValueError, "shards names a file that does not exist: .*missing.tar"),
        (lambda s: ShardedStream(s, rank=2, world_size=2), ValueError, "rank must be below world_size=2, got 2"),
        (lambda s: ShardedStream(s, rank=0, world_size=0), ValueError, "world_size must be at least 1, got 0"),
        (lambda s: ShardedStream(s, rank=-1, world_size=2), ValueError, "rank must be at least 0, got -1"),
        (lambda s: ShardedStream(s, rank=0, world_size=6, equal_steps=True), ValueError, "equal_steps=True needs at least one shard per rank, but shards has 5 for world_size=6"),
        (lambda s: ShardedStream(s, equal_steps="yes"), TypeError, "equal_steps must be True or False, got 'yes'"),
        (lambda s: shard_assignment(0, 2, 2), ValueError, "num_shards must be at least 1, got 0"),
        (lambda s: shard_assignment(5, 1.5, 2), TypeError, "world_size must be an int, got 1.5"),
        (lambda s: shard_assignment(5, 2, -1), ValueError, "num_workers must be at least 0, got -1"),
        (lambda s: write_shards(s[0].parent, 0, 10), ValueError, "num_samples must be at least 1, got 0"),
        (lambda s: write_shards(s[0].parent, 10, 0), ValueError, "samples_per_shard must be at least 1, got 0"),
        (lambda s: write_shards(3, 10, 5), TypeError, "folder must be a path, got 3"),
        (lambda s: list(read_shard(s[0], limit=-1)), ValueError, "limit must be at least 0, got -1"),
    ],
)
def test_bad_arguments_name_the_argument_and_value(shards, make, error, words):
    with pytest.raises(error, match=words):
        make(shards)


def test_written_samples_by_hand(tmp_path):
    """The inputs are the seed's float32 normals, the label says whether their sum is positive (computed here)."""
    paths = write_shards(tmp_path / "a" / "b", num_samples=20, samples_per_shard=8, num_features=1)  # nested: created
    normals = np.random.default_rng(0).standard_normal((20, 1), dtype=np.float32)
    assert 0 < normals.sum(axis=1)[normals.sum(axis=1) > 0].min() < 1  # a positive sum below 1 is among them
    samples = [sample for path in paths for sample in read_shard(path)]
    assert [s["input"].dtype for s in samples] == [torch.float32] * 20
    assert [s["input"].tolist() for s in samples] == normals.tolist()
    assert [s["label"] for s in samples] == [int(row.sum() > 0) for row in normals]
    again = write_shards(tmp_path / "c", num_samples=20, samples_per_shard=8, num_features=1, seed=0)
    assert [s["input"].tolist() for path in again for s in read_shard(path)] == normals.tolist()  # seed 0 is the default
    assert len(list(read_shard(paths[0], limit=1))) == 1 and list(read_shard(paths[0], limit=0)) == []
    assert shard_assignment(3, 1, 0) == {(0, 0): [0, 1, 2]}  # one rank, the main process reads all


@pytest.mark.parametrize("call, error, message", [
    (lambda tmp: write_shards(3, 1, 1), TypeError, "folder must be a path, got 3 of type int"),
    (lambda tmp: write_shards(tmp, 1, 1, num_features=0), ValueError, "num_features must be at least 1, got 0"),
    (lambda tmp: write_shards(tmp, 1, 1, seed=-1), ValueError, "seed must be at least 0, got -1"),
    (lambda tmp: shard_assignment(3, 0, 1), ValueError, "world_size must be at least 1, got 0"),
    (lambda tmp: ShardedStream(str(tmp), rank=0, world_size=1), TypeError,
     f"shards must be a list of shard file paths, got {str(Path('TMP'))!r} of type str"),
    (lambda tmp: ShardedStream([3], rank=0, world_size=1), TypeError, "shards must hold paths, got 3 of type int"),
])
def test_bad_arguments_message_in_full(tmp_path, call, error, message):
    with pytest.raises(error) as caught:
        call(tmp_path)
    assert str(caught.value) == message.replace(repr(str(Path("TMP"))), repr(str(tmp_path)))


def keys(first: int, stop: int) -> list[str]:
    """The sample keys first..stop-1 as write_shards names them."""
    return [f"{index:08d}" for index in range(first, stop)]


@pytest.mark.parametrize("equal_steps, expected", [
    # 45 samples in shards of 10 (the last 5): rank 0 reads shards 0, 2, 4 (worker 0: 0 and 4, worker 1: 2), rank 1
    # reads 1 and 3 (one each). Equal steps: rank 1 holds 20 samples, so rank 0 stops after 20 (shard 4 is left out).
    (False, {(0, 0): keys(0, 10) + keys(40, 45), (0, 1): keys(20, 30), (1, 0): keys(10, 20), (1, 1): keys(30, 40)}),
    (True, {(0, 0): keys(0, 10), (0, 1): keys(20, 30), (1, 0): keys(10, 20), (1, 1): keys(30, 40)}),
])
def test_each_worker_reads_its_own_shards_by_hand(shards, monkeypatch, equal_steps, expected):
    """In this process, as each worker would (get_worker_info faked), so that the split itself is what is tested."""
    class Info:
        num_workers = 2

        def __init__(self, worker):
            self.id = worker

    for (rank, worker), wanted in expected.items():
        monkeypatch.setattr(streaming, "get_worker_info", lambda: Info(worker))
        stream = ShardedStream(shards, rank=rank, world_size=2, equal_steps=equal_steps)
        assert [sample["key"] for sample in stream] == wanted, (rank, worker)
    monkeypatch.setattr(streaming, "get_worker_info", lambda: None)  # no workers: the main process reads all of its rank's
    assert [s["key"] for s in ShardedStream(shards, rank=0, world_size=2)] == keys(0, 10) + keys(20, 30) + keys(40, 45)


def test_small_files_and_the_demo_datasets_by_hand(tmp_path, shards):
    import h5py

    paths = streaming.write_small_files(tmp_path / "files" / "nested", num_samples=2, num_features=1)
    normals = np.random.default_rng(0).standard_normal((2, 1), dtype=np.float32)
    assert [np.load(path).tolist() for path in paths] == normals.tolist()
    assert [path.name for path in paths] == ["00000000.npy", "00000001.npy"]
    assert streaming.read_samples(paths) == 2 and streaming.read_samples(shards[:2]) == 20
    with h5py.File(tmp_path / "rows.h5", "w") as file:
        file["inputs"] = np.arange(6, dtype=np.float32).reshape(3, 2)
    lazy = streaming.H5Samples(tmp_path / "rows.h5", open_in_init=False)
    assert len(lazy) == 3 and lazy.opened_by == [] and lazy.file is None  # nothing opened until the first item
    items = [lazy[i] for i in range(3)]
    assert [item["input"].tolist() for item in items] == [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    assert [item["index"] for item in items] == [0, 1, 2] and {item["pid"] for item in items} == {os.getpid()}
    assert lazy.opened_by == [os.getpid()] and [item["opens"] for item in items] == [1, 1, 1]  # opened once, here
    eager = streaming.H5Samples(str(tmp_path / "rows.h5"), open_in_init=True)
    assert eager.opened_by == [os.getpid()] and eager.file.mode == "r"
    lazy.file.close(), eager.file.close()
    free = streaming.LabelCostDataset([0, 1, 1], [0.0, 0.0])  # a zero cost is a cost
    assert len(free) == 3 and [free[i] for i in range(3)] == [0, 1, 1] and len(streaming.LabelCostDataset([], [1.0])) == 0
    start = time.perf_counter()
    assert streaming.LabelCostDataset([0], [30.0])[0] == 0 and 0.03 <= time.perf_counter() - start < 1.0  # 30 ms, not 30 s
    seekable = streaming.SeekableCountedStream(5)
    assert next(iter(seekable)) == 0 and seekable.state_dict() == {"position": 1, "num_items": 5}
    seekable.load_state_dict({"position": 3, "num_items": 5})
    assert seekable.state_dict()["position"] == 3  # a state taken again before the first item keeps the resume
    assert list(seekable) == [3, 4] and list(seekable) == [0, 1, 2, 3, 4]  # the resume applies to one iteration
    assert seekable.state_dict()["position"] == 0  # a pass read to its end: the next starts whole
    reading = iter(seekable)
    assert [next(reading) for _ in range(5)] == [0, 1, 2, 3, 4] and seekable.state_dict()["position"] == 5
    seekable.load_state_dict(seekable.state_dict())  # after the last item, before the iteration stopped
    assert list(seekable) == []  # nothing more of that pass
    for state, says in (({"position": 2, "num_items": 6}, "state has num_items=6, but this stream has num_items=5"),
                        ({"position": 2}, "state lacks 'num_items'"),
                        ({"position": 6, "num_items": 5}, r"state\['position'\] must be at most num_items=5, got 6")):
        with pytest.raises(ValueError, match=says):
            seekable.load_state_dict(state)
    plain = streaming.CountedStream(3)
    assert (plain.position, plain.ms_per_item, streaming.SeekableCountedStream(3).ms_per_item) == (0, 0.0, 0.0)
    assert list(plain) == [0, 1, 2] == list(plain) and plain.reads == 6
    assert streaming.SeekableCountedStream(3, 5.0).ms_per_item == 5.0 and streaming.CountedStream(1, 1000.0).ms_per_item == 1000.0
    start = time.perf_counter()
    assert list(streaming.CountedStream(2, 20.0)) == [0, 1] and 0.04 <= time.perf_counter() - start < 1.0  # 20 ms each
    alone = ShardedStream(shards)  # no process group: one rank, rank 0
    assert (alone.world_size, alone.rank) == (1, 0) and ShardedStream(shards[:2], rank=1, world_size=2, equal_steps=True).rank == 1


def test_rank_and_world_size_come_from_the_process_group(shards, monkeypatch):
    monkeypatch.setattr(streaming.dist, "is_initialized", lambda: True)
    monkeypatch.setattr(streaming.dist, "get_world_size", lambda: 3)
    monkeypatch.setattr(streaming.dist, "get_rank", lambda: 2)
    stream = ShardedStream(shards)
    assert (stream.world_size, stream.rank) == (3, 2)


def test_equal_steps_takes_a_single_sample_from_a_shard(tmp_path):
    """31 samples in shards of 10, 10, 10, 1: rank 0 (shards 0, 2) holds 20, rank 1 (shards 1, 3) 11, so rank 0 reads
    shard 0 whole and exactly 1 sample of shard 2."""
    shards = write_shards(tmp_path, num_samples=31, samples_per_shard=10)
    assert [s["key"] for s in ShardedStream(shards, rank=0, world_size=2, equal_steps=True)] == keys(0, 10) + keys(20, 21)
    assert [s["key"] for s in ShardedStream(shards, rank=1, world_size=2, equal_steps=True)] == keys(10, 20) + keys(30, 31)


@pytest.mark.parametrize("call, error, message", [
    (lambda tmp: streaming.write_small_files(3, 1), TypeError, "folder must be a path, got 3 of type int"),
    (lambda tmp: streaming.write_small_files(tmp, 0), ValueError, "num_samples must be at least 1, got 0"),
    (lambda tmp: streaming.write_small_files(tmp, 1, seed=-1), ValueError, "seed must be at least 0, got -1"),
    (lambda tmp: streaming.write_small_files(tmp, 1, num_features=0), ValueError, "num_features must be at least 1, got 0"),
    (lambda tmp: streaming.read_samples(streaming.write_small_files(tmp, 1), open_delay_s=True), ValueError,
     "open_delay_s must be a number of seconds >= 0, got True"),
    (lambda tmp: streaming.H5Samples(tmp, open_in_init=1), TypeError, "open_in_init must be True or False, got 1"),
    (lambda tmp: streaming.H5Samples(3, open_in_init=False), ValueError, "path must name an existing HDF5 file, got 3"),
    (lambda tmp: streaming.LabelCostDataset([-1], [1.0]), ValueError, "labels must be at least 0, got -1"),
    (lambda tmp: streaming.LabelCostDataset([0], [-1.0]), ValueError, "ms_per_label must give a cost >= 0 for every label, got [-1.0]"),
    (lambda tmp: streaming.LabelCostDataset([1], [1.0]), ValueError, "ms_per_label must give a cost >= 0 for every label, got [1.0]"),
    (lambda tmp: streaming.CountedStream(3, 1001.0), ValueError, "ms_per_item must be in [0.0, 1000.0], got 1001.0"),
    (lambda tmp: streaming.SeekableCountedStream(3).load_state_dict({"position": -1, "num_items": 3}), ValueError,
     "state['position'] must be at least 0, got -1"),
])
def test_demo_bad_arguments_message_in_full(tmp_path, call, error, message):
    with pytest.raises(error) as caught:
        call(tmp_path)
    assert str(caught.value) == message
