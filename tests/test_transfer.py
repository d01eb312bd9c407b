"""helpers.transfer: batches move whole, the prefetcher keeps order and its stream logic holds (on a fake CUDA too), bad input is named."""
import collections
import contextlib
import warnings

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from helpers import batches, transfer

Pair = collections.namedtuple("Pair", "x y")


def nested_batch():
    return {"image": torch.ones(4, 3), "meta": [torch.arange(4), "name", 7], "pair": Pair(torch.zeros(2), 1.5)}


def test_one_walker_visits_every_leaf_depth_first_and_rebuilds_the_structure():
    batch = nested_batch()
    assert [type(leaf).__name__ for leaf in batches.leaves(batch)] == ["Tensor", "Tensor", "str", "int", "Tensor", "float"]
    assert len(batches.tensors(batch)) == 3 and batches.tensors(["no", "tensors"]) == []
    doubled = batches.map_leaves(batch, lambda leaf: leaf * 2)
    assert isinstance(doubled["pair"], Pair) and doubled["pair"].y == 3.0 and doubled["meta"][1:] == ["namename", 14]
    assert batches.map_leaves({"a": (1, [2])}, str) == {"a": ("1", ["2"])}


def test_move_reaches_every_tensor_and_keeps_structure():
    moved = transfer.move(nested_batch(), "meta")
    assert moved["image"].device.type == "meta" and moved["meta"][0].device.type == "meta"
    assert moved["meta"][1:] == ["name", 7]
    assert isinstance(moved["pair"], Pair) and moved["pair"].x.device.type == "meta" and moved["pair"].y == 1.5


def test_dataloader_pin_memory_without_accelerator_warns_and_pins_nothing():
    if torch.accelerator.is_available():
        pytest.skip("an accelerator is present: the DataLoader really pins here")
    loader = DataLoader(TensorDataset(torch.zeros(8, 2)), batch_size=4, pin_memory=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        batch = next(iter(loader))
    assert any("no accelerator is found" in str(w.message) for w in caught)
    assert not any(t.is_pinned() for t in batches.tensors(batch))


def test_prefetcher_on_cpu_passes_batches_through_in_order():
    loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=3)
    through = list(transfer.CUDAPrefetcher(loader, "cpu"))
    assert [b[0].tolist() for b in through] == [b[0].tolist() for b in loader]
    assert len(transfer.CUDAPrefetcher(loader, "cpu")) == 4


class FakeCUDA:
    """torch.cuda's streams on a CPU: logs where each copy is queued, each wait_stream and record_stream, and each step."""

    class FakeStream:
        def __init__(self, cuda, name):
            self.cuda, self.name = cuda, name

        def wait_stream(self, other):
            self.cuda.log.append(("wait", self.name, other.name))

    def __init__(self):
        self.log = []
        self.current = self.FakeStream(self, "compute")

    def Stream(self, device):  # noqa: N802 - stands in for torch.cuda.Stream
        assert torch.device(device).type == "cuda"
        return self.FakeStream(self, "side")

    @contextlib.contextmanager
    def stream(self, stream):
        before, self.current = self.current, stream
        try:
            yield
        finally:
            self.current = before

    def current_stream(self, device=None):
        return self.current

    def move(self, batch, device, non_blocking=False):
        self.log.append(("copy", int(batch["y"]), self.current.name, non_blocking))
        return batch  # the same tensors stand for the copies

    def record_stream(self, tensor, stream):
        self.log.append(("record", int(tensor.flatten()[0]), stream.name))


@pytest.fixture
def fake_cuda(monkeypatch):
    """CUDAPrefetcher's CUDA path, run on a CPU: torch.cuda's streams and the copy replaced by FakeCUDA."""
    fake = FakeCUDA()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "Stream", fake.Stream)
    monkeypatch.setattr(torch.cuda, "stream", fake.stream)
    monkeypatch.setattr(torch.cuda, "current_stream", fake.current_stream)
    monkeypatch.setattr(torch.Tensor, "record_stream", lambda tensor, stream: fake.record_stream(tensor, stream))
    monkeypatch.setattr("helpers.transfer.copies.move", fake.move)  # where CUDAPrefetcher looks it up
    return fake


def test_prefetcher_copies_one_batch_ahead_on_a_side_stream_and_the_step_waits_for_it(fake_cuda):
    loader = [{"x": torch.full((2,), float(i)), "y": torch.tensor(i)} for i in range(3)]
    for batch in transfer.CUDAPrefetcher(loader, "cuda"):
        fake_cuda.log.append(("step", int(batch["y"])))
    expected = [("copy", 0, "side", True)]
    for i in range(3):
        expected += [("wait", "compute", "side"), ("record", i, "compute"), ("record", i, "compute")]  # before step i: its copy has landed
        expected += [("copy", i + 1, "side", True)] if i < 2 else []  # batch i+1's copy is queued before step i, never two ahead
        expected += [("step", i)]
    assert fake_cuda.log == expected


def test_prefetcher_on_a_fake_cuda_yields_nothing_for_an_empty_loader(fake_cuda):
    assert list(transfer.CUDAPrefetcher([], "cuda")) == [] and fake_cuda.log == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_prefetcher_on_cuda_without_cuda_says_so():
    with pytest.raises(RuntimeError, match=r"needs a CUDA GPU, and torch.cuda.is_available\(\) is False"):
        transfer.CUDAPrefetcher([], "cuda")


@pytest.mark.parametrize("bad, error", [("gpu0", ValueError), (3.5, ValueError), (None, ValueError)])
def test_bad_device_is_refused_by_name(bad, error):
    with pytest.raises(error, match="device must be a torch device"):
        transfer.as_device(bad)


def test_prefetcher_refuses_a_non_iterable_loader():
    with pytest.raises(TypeError, match="loader must be iterable"):
        transfer.CUDAPrefetcher(42, "cpu")


@pytest.mark.cuda
def test_prefetcher_on_cuda_yields_the_same_values_on_the_gpu():
    batches = [(torch.full((1000,), float(i)).pin_memory(), torch.tensor([i])) for i in range(5)]
    out = [(x.sum().item(), y.item(), x.device.type) for x, y in transfer.CUDAPrefetcher(batches, "cuda")]
    assert out == [(1000.0 * i, i, "cuda") for i in range(5)]


def test_batch_bytes_counts_every_tensor_from_shapes_and_dtypes():
    assert transfer.batch_bytes(nested_batch()) == 4 * 3 * 4 + 4 * 8 + 2 * 4
    with pytest.raises(ValueError, match="batch must hold at least one tensor"):
        transfer.batch_bytes(["no", "tensors"])
