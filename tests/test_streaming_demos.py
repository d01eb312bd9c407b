"""helpers.streaming_demos (lesson 06's rank functions) on 2 gloo ranks, and the lesson-06 helpers added to helpers.streaming."""
import collections

import h5py
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from helpers import ddp, streaming, streaming_demos
from helpers.samplers import DistributedWeightedSampler


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    folder = tmp_path_factory.mktemp("shards")
    return [str(p) for p in streaming.write_shards(folder, num_samples=40, samples_per_shard=8)]


def test_keys_read_duplicates_unsharded_and_not_sharded(shards):
    ranks = ddp.run(streaming_demos.keys_read, shards, world_size=2, backend="gloo")
    unsharded = collections.Counter(k for r in ranks for k in r["unsharded"])
    sharded = collections.Counter(k for r in ranks for k in r["sharded"])
    assert set(unsharded.values()) == {4} and set(sharded.values()) == {1} and len(sharded) == 40


def test_train_on_shards_fixes_give_their_steps(shards):
    equal = ddp.run(streaming_demos.train_on_shards, shards, kwargs={"fix": "equal_steps"}, world_size=2, backend="gloo")
    joined = ddp.run(streaming_demos.train_on_shards, shards, kwargs={"fix": "join"}, world_size=2, backend="gloo")
    assert equal == [{"steps": 4, "samples": 16}] * 2
    assert [r["samples"] for r in joined] == [24, 16]


def test_train_on_shards_rejects_an_unknown_fix(shards):
    with pytest.raises(ddp.RankFailed, match="fix must be one of"):
        ddp.run(streaming_demos.train_on_shards, shards, kwargs={"fix": "pad"}, world_size=2, backend="gloo")


def test_small_files_and_shards_hold_the_same_samples(tmp_path):
    files = streaming.write_small_files(tmp_path / "files", 20)
    tars = streaming.write_shards(tmp_path / "tars", 20, samples_per_shard=8)
    assert streaming.read_samples(files) == streaming.read_samples(tars) == 20
    assert np.array_equal(np.load(files[9]), next(s for s in streaming.read_shard(tars[1]) if s["key"] == "00000009")["input"].numpy())


@pytest.mark.parametrize("call, error, says", [
    (lambda p: streaming.write_small_files(3, 4), TypeError, "folder"),
    (lambda p: streaming.write_small_files(p, 0), ValueError, "num_samples"),
    (lambda p: streaming.read_samples([p / "missing.npy"]), ValueError, "does not exist"),
    (lambda p: streaming.read_samples(streaming.write_small_files(p, 1), open_delay_s=-1), ValueError, "open_delay_s"),
    (lambda p: streaming.H5Samples(p / "missing.h5", open_in_init=False), ValueError, "path"),
    (lambda p: streaming.H5Samples(p / "missing.h5", open_in_init=1), TypeError, "open_in_init"),
    (lambda p: streaming.LabelCostDataset([0, 2], ms_per_label=[1.0, 2.0]), ValueError, "ms_per_label"),
])
def test_bad_input_names_the_argument(tmp_path, call, error, says):
    with pytest.raises(error, match=says):
        call(tmp_path)


def test_h5_samples_lazy_opens_once_per_worker(tmp_path):
    path = tmp_path / "x.h5"
    with h5py.File(path, "w") as file:
        file["inputs"] = np.arange(32, dtype=np.float32).reshape(16, 2)
    dataset = streaming.H5Samples(path, open_in_init=False)
    items = list(DataLoader(dataset, batch_size=None, num_workers=2))
    assert dataset.opened_by == [] and {i["pid"]: i["opens"] for i in items} == {p: 1 for p in {i["pid"] for i in items}}
    assert sorted(float(i["input"][0]) for i in items) == [2.0 * n for n in range(16)]
    with pytest.raises(TypeError, match="pickle"), pytest.warns(UserWarning, match="pickle error"):
        list(DataLoader(streaming.H5Samples(path, open_in_init=True), batch_size=None, num_workers=1, multiprocessing_context="spawn"))


@pytest.mark.filterwarnings("ignore:'set_vital' is deprecated")
def test_stateful_loader_resumes_each_rank_of_distributed_weighted_sampler():
    from torchdata.stateful_dataloader import StatefulDataLoader

    weights = torch.linspace(0.1, 1.0, 100)
    for rank in range(2):
        def loader():
            sampler = DistributedWeightedSampler(weights, num_replicas=2, rank=rank, seed=3)
            return StatefulDataLoader(list(range(100)), sampler=sampler, batch_size=4, num_workers=2)
        full = [i for b in loader() for i in b.tolist()]
        first = loader()
        iterator = iter(first)
        head = [i for _ in range(3) for i in next(iterator).tolist()]
        state = first.state_dict()
        del iterator
        resumed = loader()
        resumed.load_state_dict(state)
        assert head + [i for b in resumed for i in b.tolist()] == full


def test_with_epoch_equalises_workers_with_shards_only(tmp_path):
    three = [str(p) for p in streaming.write_shards(tmp_path, num_samples=24, samples_per_shard=8)]  # 3 shards, 2 x 2 readers
    ranks = ddp.run(streaming_demos.with_epoch_per_worker, three, kwargs={"samples": 10}, world_size=2, backend="gloo")
    assert ranks[0] == {"empty_check=False": [10, 10], "empty_check=True": [10, 10]}
    assert ranks[1]["empty_check=False"] == [10, 0]
    assert ranks[1]["empty_check=True"].startswith("ValueError: No samples found in dataset; perhaps you have fewer shards than workers")


@pytest.mark.parametrize("stream_class, reads", [(streaming.CountedStream, 96), (streaming.SeekableCountedStream, 56)])
def test_a_stream_without_state_dict_is_read_again_on_resume(stream_class, reads):
    from torchdata.stateful_dataloader import StatefulDataLoader

    first = StatefulDataLoader(stream_class(96), batch_size=8)
    iterator = iter(first)
    head = [i for _ in range(5) for i in next(iterator).tolist()]
    state = first.state_dict()
    del iterator, first
    stream = stream_class(96)
    resumed = StatefulDataLoader(stream, batch_size=8)
    resumed.load_state_dict(state)
    assert head + [i for b in resumed for i in b.tolist()] == list(range(96))
    assert stream.reads == reads  # 96 - 5 x 8 = 56 delivered; without a state_dict the 40 before are read again


def test_counted_streams_reject_bad_arguments():
    with pytest.raises(ValueError, match="num_items must be at least 1"):
        streaming.CountedStream(0)
    with pytest.raises(ValueError, match="ms_per_item"):
        streaming.CountedStream(4, ms_per_item=-1)
    with pytest.raises(ValueError, match="with_epoch|samples must be at least 1"):
        streaming_demos.with_epoch_per_worker(["x.tar"], samples=0)
