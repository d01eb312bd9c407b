"""helpers.samplers.DistributedWeightedSampler: weights followed, shards disjoint, deterministic, past 2^24."""
import collections
import itertools
import math
import statistics
import time
import tracemalloc

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from helpers.samplers import DistributedWeightedSampler

weight_lists = st.lists(st.floats(min_value=0.05, max_value=20.0), min_size=2, max_size=8)


def chi_square_limit(df: int, z: float = 4.75) -> float:
    """Upper critical value of chi-square with df degrees of freedom at p ~ 1e-6 (Wilson-Hilferty)."""
    return df * (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3


def draws(weights, **kwargs) -> list[list[int]]:
    """The indices of every rank, built as separate samplers (as separate processes would)."""
    replicas = kwargs.pop("num_replicas", 1)
    return [list(DistributedWeightedSampler(weights, num_replicas=replicas, rank=r, **kwargs)) for r in range(replicas)]


@given(weight_lists, st.integers(min_value=1, max_value=4), st.integers(min_value=0, max_value=1000))
def test_union_of_ranks_follows_the_weights(weights, replicas, seed):
    per_rank = draws(weights, num_replicas=replicas, num_samples=20_000, seed=seed)
    union = np.concatenate(per_rank)
    observed = np.bincount(union, minlength=len(weights))
    expected = len(union) * np.array(weights) / sum(weights)
    chi_square = float(((observed - expected) ** 2 / expected).sum())
    assert chi_square < chi_square_limit(len(weights) - 1), (observed, expected)


@given(st.integers(min_value=1, max_value=300), st.integers(min_value=1, max_value=7), st.booleans(), st.booleans())
def test_lengths_and_disjoint_positions(num_samples, replicas, drop_last, replacement):
    weights = torch.rand(400, generator=torch.Generator().manual_seed(num_samples)) + 0.01
    if drop_last and num_samples < replicas:
        with pytest.raises(ValueError, match="leaves no sample"):
            draws(weights, num_replicas=replicas, num_samples=num_samples, drop_last=drop_last)
        return
    samplers = [DistributedWeightedSampler(weights, replicas, r, num_samples, replacement, 3, drop_last) for r in range(replicas)]
    per_rank = [list(s) for s in samplers]
    expected_len = num_samples // replicas if drop_last else math.ceil(num_samples / replicas)
    assert all(len(s) == expected_len == len(p) for s, p in zip(samplers, per_rank))
    # Rank r holds block r of one global draw: together, in rank order, they are that draw.
    concatenated = sum(per_rank, [])
    assert concatenated == samplers[0].global_indices().tolist()
    if not replacement:
        assert len(set(concatenated)) == len(concatenated), "replacement=False drew an index twice"


def test_without_replacement_each_index_once_across_ranks():
    weights = torch.arange(1, 101, dtype=torch.float64)
    union = sum(draws(weights, num_replicas=4, replacement=False, num_samples=100), [])
    assert sorted(union) == list(range(100))
    first_half = sum(draws(weights, num_replicas=4, replacement=False, num_samples=40), [])
    assert len(set(first_half)) == 40 and np.mean(first_half) > 60, "heavy indices should come first"


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=50))
def test_deterministic_across_builds_and_epochs_differ(seed, epoch):
    weights = torch.rand(500, generator=torch.Generator().manual_seed(1)) + 0.1
    a, b = (DistributedWeightedSampler(weights, 2, 1, seed=seed) for _ in range(2))
    a.set_epoch(epoch)
    b.set_epoch(epoch)
    assert list(a) == list(b)
    b.set_epoch(epoch + 1)
    assert list(a) != list(b)


def test_drop_in_for_weighted_random_sampler_in_a_loader():
    labels = torch.tensor([0] * 90 + [1] * 10)
    weights = torch.where(labels == 0, 1 / 90, 1 / 10).double()
    loader = DataLoader(TensorDataset(labels), batch_size=50, sampler=DistributedWeightedSampler(weights, num_samples=2000))
    seen = torch.cat([batch for (batch,) in loader])
    assert len(seen) == 2000 and abs(seen.float().mean().item() - 0.5) < 0.06


def test_zero_weight_is_never_drawn():
    weights = torch.tensor([0.0, 1.0, 0.0, 3.0, 0.0])
    union = sum(draws(weights, num_replicas=2, num_samples=5000), [])
    assert set(union) == {1, 3}
    assert sorted(sum(draws(weights, num_replicas=2, num_samples=2, replacement=False), [])) == [1, 3]


def test_defaults_come_from_the_process_group(monkeypatch):
    import torch.distributed as dist

    assert (DistributedWeightedSampler([1.0, 2.0]).num_replicas, DistributedWeightedSampler([1.0, 2.0]).rank) == (1, 0)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)
    monkeypatch.setattr(dist, "get_rank", lambda: 3)
    sampler = DistributedWeightedSampler(torch.ones(10))
    assert (sampler.num_replicas, sampler.rank, len(sampler)) == (4, 3, 3)


def test_more_than_two_to_the_24_weights():
    weights = torch.ones(2**24 + 1, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="number of categories cannot exceed 2\\^24"):
        list(WeightedRandomSampler(weights, num_samples=10))
    weights[-1] = 1e9  # nearly all mass on the last index, which multinomial could never reach
    drawn = list(DistributedWeightedSampler(weights, num_samples=1000))
    assert len(drawn) == 1000 and drawn.count(2**24) > 900


def median_seconds(make_iter, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in make_iter():
            pass
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def test_epoch_cost_is_close_to_weighted_random_sampler():
    weights = torch.rand(1_000_000, generator=torch.Generator().manual_seed(0)).double()
    reference = WeightedRandomSampler(weights, num_samples=len(weights))
    ours = DistributedWeightedSampler(weights)
    ref_s, ours_s = median_seconds(lambda: iter(reference)), median_seconds(lambda: iter(ours))
    assert ours_s < 3 * ref_s + 0.05, f"DistributedWeightedSampler {ours_s:.3f} s vs WeightedRandomSampler {ref_s:.3f} s per epoch"


@pytest.mark.parametrize(
    "kwargs, error, says",
    [
        ({"weights": [1.0, -1.0]}, ValueError, "weights must be non-negative, got -1.0 at index 1"),
        ({"weights": [1.0, float("nan")]}, ValueError, "weights must be finite, got nan at index 1"),
        ({"weights": [1.0, float("inf")]}, ValueError, "weights must be finite, got inf"),
        ({"weights": [0.0, 0.0]}, ValueError, "weights are all zero"),
        ({"weights": [[1.0, 2.0]]}, ValueError, r"weights must be a non-empty 1-D .* shape \(1, 2\)"),
        ({"weights": {0: 1.0}}, TypeError, "weights must be a 1-D sequence"),
        ({"weights": [1.0, 2.0], "num_replicas": 2, "rank": 2}, ValueError, "rank must be below num_replicas=2, got 2"),
        ({"weights": [1.0, 2.0], "num_replicas": 0, "rank": 0}, ValueError, "num_replicas must be at least 1, got 0"),
        ({"weights": [1.0, 2.0], "rank": -1}, ValueError, "rank must be at least 0, got -1"),
        ({"weights": [1.0, 2.0], "num_samples": 0}, ValueError, "num_samples must be at least 1, got 0"),
        ({"weights": [1.0, 2.0], "num_samples": 2.5}, TypeError, "num_samples must be an int"),
        ({"weights": [1.0, 2.0], "num_samples": 3, "replacement": False}, ValueError, "num_samples=3 .* must not exceed the 2"),
        ({"weights": [1.0, 2.0, 3.0], "num_replicas": 2, "rank": 0, "replacement": False}, ValueError, "rounded up to 4"),
        ({"weights": [1.0, 2.0], "replacement": "no"}, TypeError, "replacement must be True or False"),
        ({"weights": [1.0, 2.0], "seed": -3}, ValueError, "seed must be at least 0"),
    ],
)
def test_bad_input_names_the_argument(kwargs, error, says):
    with pytest.raises(error, match=says):
        DistributedWeightedSampler(**kwargs)


def test_bad_epoch():
    with pytest.raises(TypeError, match="epoch must be an int"):
        DistributedWeightedSampler([1.0]).set_epoch(1.5)


def test_the_global_draw_does_not_depend_on_the_world_size():
    weights = torch.rand(300, generator=torch.Generator().manual_seed(4)) + 0.01
    alone = DistributedWeightedSampler(weights, num_samples=1200, seed=5).global_indices().tolist()
    for replicas in (2, 3, 8):
        assert sum(draws(weights, num_replicas=replicas, num_samples=1200, seed=5), [])[:1200] == alone


def test_fixed_seed_draws_follow_the_weights_and_each_rank_is_mixed():
    weights = torch.rand(1000, generator=torch.Generator().manual_seed(0)).double() ** 3 + 1e-3  # weights spread over 3 decades
    per_rank = draws(weights, num_replicas=4, num_samples=400_000, seed=11)
    observed = np.bincount(np.concatenate(per_rank), minlength=len(weights))
    expected = 400_000 * weights.numpy() / weights.sum().item()
    chi_square = float(((observed - expected) ** 2 / expected).sum())
    assert chi_square < chi_square_limit(len(weights) - 1), chi_square
    for part in per_rank:  # draws come in the stream's order, not sorted by index: no trend along the epoch
        assert abs(np.corrcoef(np.arange(len(part)), part)[0, 1]) < 0.01


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("k", [0, 1, 3, 4, 5, 2**18 - 1, 2**18, 2**18 + 7, 300_000])
def test_resume_at_draw_k_gives_the_rest_of_the_epoch(k, replacement):
    weights = torch.rand(400_000, generator=torch.Generator().manual_seed(2)).double() + 0.01
    kwargs = {"num_replicas": 3, "rank": 1, "num_samples": 900_000 if replacement else 390_000, "replacement": replacement, "seed": 9}
    uninterrupted = DistributedWeightedSampler(weights, **kwargs)
    uninterrupted.set_epoch(2)
    full = list(uninterrupted)
    k = min(k, len(full))
    first = DistributedWeightedSampler(weights, **kwargs)
    first.set_epoch(2)
    consumed = list(itertools.islice(iter(first), k))
    state = first.state_dict()
    assert state["yielded"] == k and state["epoch"] == 2 and consumed == full[:k]
    resumed = DistributedWeightedSampler(weights, **kwargs)
    resumed.load_state_dict(state)
    resumed.set_epoch(2)  # what a training loop does at the top of the epoch: keeps the pending resume
    assert list(resumed) == full[k:]
    assert resumed.state_dict()["yielded"] == len(full)
    resumed.set_epoch(3)
    assert len(list(resumed)) == len(full), "the next epoch starts from its beginning"


def test_one_state_resumes_every_rank_and_another_epoch_drops_it():
    weights = torch.rand(500, generator=torch.Generator().manual_seed(3)) + 0.01
    saved = DistributedWeightedSampler(weights, 4, 0, seed=1)
    saved.set_epoch(6)
    next(iter(saved))  # rank 0 took one draw; ranks in lock-step took one each
    for rank in range(4):
        full = DistributedWeightedSampler(weights, 4, rank, seed=1)
        full.set_epoch(6)
        resumed = DistributedWeightedSampler(weights, 4, rank, seed=1)
        resumed.load_state_dict(saved.state_dict())
        assert list(resumed) == list(full)[1:]
    dropped = DistributedWeightedSampler(weights, 4, 2, seed=1)
    dropped.load_state_dict(saved.state_dict())
    dropped.set_epoch(7)
    assert len(list(dropped)) == len(dropped)


@pytest.mark.parametrize(
    "change, says",
    [
        ({"num_replicas": 8}, "state num_replicas is 8, but this sampler has num_replicas=4"),
        ({"seed": 2}, "state seed is 2, but this sampler has seed=1"),
        ({"num_samples": 99}, "state num_samples is 99, but this sampler has num_samples=500"),
        ({"replacement": False}, "state replacement is False, but this sampler has replacement=True"),
        ({"yielded": 126}, r"state\['yielded'\] must be at most len\(self\)=125, got 126"),
        ({"yielded": -1}, r"state\['yielded'\] must be at least 0, got -1"),
        ({"epoch": 1.5}, r"state\['epoch'\] must be an int, got 1.5"),
        ({"weights": "500 values, blake2b 0"}, "state weights are '500 values, blake2b 0', but this sampler's are '500 values"),
    ],
)
def test_load_state_dict_rejects_a_foreign_state(change, says):
    weights = torch.ones(500)
    state = {**DistributedWeightedSampler(weights, 4, 0, seed=1).state_dict(), **change}
    with pytest.raises((ValueError, TypeError), match=says):
        DistributedWeightedSampler(weights, 4, 0, seed=1).load_state_dict(state)


def test_load_state_dict_rejects_a_non_state():
    sampler = DistributedWeightedSampler([1.0, 2.0])
    with pytest.raises(TypeError, match="state must be a dict from state_dict"):
        sampler.load_state_dict([("epoch", 0)])
    with pytest.raises(ValueError, match="state lacks 'yielded'"):
        sampler.load_state_dict({k: v for k, v in sampler.state_dict().items() if k != "yielded"})


def test_iterating_holds_a_chunk_not_the_epoch():
    sampler = DistributedWeightedSampler(torch.rand(1000, generator=torch.Generator().manual_seed(0)) + 1, num_samples=2**20)
    tracemalloc.start()
    for _ in sampler:
        pass
    peak_mib = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    assert peak_mib < 24, f"peak {peak_mib:.0f} MiB while iterating; the epoch's 2^20 indices as a list take 40 MiB"


def test_one_rank_of_eight_past_two_to_the_24_is_fast_and_resumes_at_once():
    """The `make bench` target (<= 2 s per epoch) with room for a loaded machine; ~3 s here."""
    weights = torch.rand(2**24 + 1, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    sampler = DistributedWeightedSampler(weights, num_replicas=8, rank=7)
    start = time.perf_counter()
    last = collections.deque(sampler, maxlen=5)
    epoch_s = time.perf_counter() - start
    resumed = DistributedWeightedSampler(weights, num_replicas=8, rank=7)
    resumed.load_state_dict({**sampler.state_dict(), "yielded": len(sampler) - 5})
    start = time.perf_counter()
    rest = iter(resumed)
    first = next(rest)
    first_s = time.perf_counter() - start
    assert epoch_s < 8 and first_s < 1, (epoch_s, first_s)
    assert [first, *rest] == list(last)


# --- weights of extreme magnitude, and the seeding without replacement

@pytest.mark.parametrize("weights", [[1e308, 1e308], [5e-324, 5e-324], [1e-320, 1e-320]], ids=["huge", "subnormal", "tiny"])
def test_equal_weights_of_any_magnitude_draw_both_halves(weights):
    # two equal weights: index 0 is drawn Binomial(10000, 1/2) times, 5000 +- 50 (sd); 4700-5300 is 6 sd either side
    sampler = DistributedWeightedSampler(weights, num_replicas=1, rank=0, num_samples=10_000)
    zeros = sum(1 for index in sampler if index == 0)
    assert 4700 < zeros < 5300, zeros


def test_tiny_equal_weights_without_replacement_are_a_uniform_permutation():
    # four equal weights of 1e-320: each index should come first in about a quarter of 200 epochs (50 +- 6 sd)
    sampler = DistributedWeightedSampler([1e-320] * 4, num_replicas=1, rank=0, replacement=False)
    firsts = []
    for epoch in range(200):
        sampler.set_epoch(epoch)
        firsts.append(next(iter(sampler)))
    assert all(20 < firsts.count(index) < 80 for index in range(4)), [firsts.count(i) for i in range(4)]


def test_without_replacement_seed_and_epoch_do_not_alias():
    # seeding with seed + epoch made (seed 0, epoch 1) repeat (seed 1, epoch 0)
    def draw(seed, epoch):
        sampler = DistributedWeightedSampler(torch.ones(50), num_replicas=1, rank=0, replacement=False, seed=seed)
        sampler.set_epoch(epoch)
        return list(sampler)

    assert draw(0, 1) != draw(1, 0) and draw(0, 1) == draw(0, 1)


def reference_draw(weights: list[float], total: int, seed: int, epoch: int, replacement: bool) -> list[int]:
    """The documented draw, re-implemented here from the spec (issue 28): expected values from outside the sampler.

    With replacement: inverse CDF of a Philox stream keyed by (seed, epoch). Without: Efraimidis-Spirakis, the
    `total` smallest Exp(1) / weight keys of that stream, in order.
    """
    stream = np.random.Generator(np.random.Philox(np.random.SeedSequence([seed, epoch])))
    w = np.asarray(weights, dtype=np.float64) / max(weights)
    if replacement:
        cumulative = np.cumsum(w)
        return [min(int(np.searchsorted(cumulative, u * cumulative[-1], side="right")), len(w) - 1)
                for u in stream.random(total)]
    keys = stream.standard_exponential(len(w)) / w
    return [int(i) for i in np.argsort(keys, kind="stable")[:total]]


@pytest.mark.parametrize("replacement", [True, False])
@pytest.mark.parametrize("seed, epoch", [(0, 0), (7, 3)])
def test_each_rank_holds_its_share_of_the_reference_draw(replacement, seed, epoch):
    """With replacement rank r holds block r of the draw; without, every 3rd draw from position r (strided: early and late alike)."""
    weights = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    replicas, num_samples = 3, 10 if not replacement else 11  # 10 and 11 round up to 12: 4 per rank
    expected = reference_draw(weights, 12, seed, epoch, replacement)
    got = []
    for rank in range(replicas):
        sampler = DistributedWeightedSampler(weights, replicas, rank, num_samples, replacement, seed)
        sampler.set_epoch(epoch)
        got.append(list(sampler))
    if replacement:
        assert got == [expected[0:4], expected[4:8], expected[8:12]]
    else:
        assert got == [expected[0::3], expected[1::3], expected[2::3]]
        assert sorted(sum(got, [])) == list(range(12))  # the ranks are disjoint and together draw every index once


def test_a_new_sampler_draws_epoch_0_and_every_iteration_is_the_whole_epoch():
    weights = [1.0, 2.0, 3.0, 4.0]
    sampler = DistributedWeightedSampler(weights, num_samples=6)
    assert sampler.epoch == 0 and list(sampler) == reference_draw(weights, 6, 0, 0, True) == list(sampler)


@pytest.mark.parametrize("call, error, message", [
    (lambda: DistributedWeightedSampler([1.0, 1.0], drop_last="yes"), TypeError, "drop_last must be True or False, got 'yes'"),
    (lambda: DistributedWeightedSampler([1.0, 1.0, 1.0], num_replicas=4, rank=0, drop_last=True), ValueError,
     "num_samples=3 with drop_last=True leaves no sample for 4 ranks"),
    (lambda: DistributedWeightedSampler([1.0, 1.0]).set_epoch(-1), ValueError, "epoch must be at least 0, got -1"),
    (lambda: DistributedWeightedSampler([1.0, 1.0]).load_state_dict(5), TypeError, "state must be a dict from state_dict(), got int"),
])
def test_bad_input_message_in_full(call, error, message):
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message
