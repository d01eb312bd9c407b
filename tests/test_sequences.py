"""helpers.sequences and helpers.sequence_samplers (lesson 08): expected values worked out by hand or re-derived here."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DistributedSampler

from helpers import sequence_samplers as ss
from helpers import sequences as sq


def test_corpus_lengths_are_seeded_and_bounded():
    lengths = sq.corpus_lengths(2000, max_len=128, seed=3)
    assert lengths.dtype == np.int64 and lengths.min() >= 8 and lengths.max() <= 128
    assert np.array_equal(lengths, sq.corpus_lengths(2000, max_len=128, seed=3))
    assert not np.array_equal(lengths, sq.corpus_lengths(2000, max_len=128, seed=4))
    assert 0.3 * 128 < np.median(lengths) < 0.5 * 128  # log-normal with median 0.4 * max_len before clipping


def test_token_corpus_items_have_their_lengths_and_repeat():
    lengths = np.array([5, 1, 9])
    one, two = sq.TokenCorpus(lengths, vocab_size=7, seed=1), sq.TokenCorpus(lengths, vocab_size=7, seed=1)
    for index, length in enumerate(lengths):
        tokens, label = one[index]
        assert len(tokens) == length and tokens.min() >= 1 and tokens.max() < 7 and label in (0, 1)
        assert torch.equal(tokens, two[index][0])


def test_longer_documents_are_class_1_more_often():
    corpus = sq.TokenCorpus(sq.corpus_lengths(4000, seed=0))
    long = corpus.lengths > np.median(corpus.lengths)
    assert corpus.labels[long].mean() > corpus.labels[~long].mean() + 0.2


def test_pad_collate_and_padding_share_by_hand():
    batch = sq.pad_collate([(torch.tensor([1, 2, 3]), 0), (torch.tensor([4]), 1)])
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 0, 0]]
    assert batch["attention_mask"].tolist() == [[True, True, True], [True, False, False]]
    assert batch["labels"].tolist() == [0, 1]
    assert sq.padding_share(batch["attention_mask"]) == pytest.approx(2 / 6)
    assert sq.padding_share(torch.tensor([[1, 1], [1, 1]])) == 0.0
    assert sq.batch_padding_share(np.array([3, 1, 2, 2]), [[0, 1], [2, 3]]) == pytest.approx(1 - 8 / 10)


@pytest.mark.parametrize("call, error, words", [
    (lambda: sq.pad_collate([]), ValueError, "empty batch"),
    (lambda: sq.padding_share([[1, 0]]), TypeError, "attention_mask must be a tensor"),
    (lambda: sq.padding_share(torch.tensor([1, 0])), ValueError, "(batch, length)"),
    (lambda: sq.padding_share(torch.tensor([[2, 0]])), ValueError, "only 0/1"),
    (lambda: sq.TokenCorpus([3, 0]), ValueError, "lengths must be at least 1"),
    (lambda: sq.TokenCorpus([3.5]), TypeError, "whole numbers"),
    (lambda: sq.TokenCorpus("abc"), TypeError, "lengths must be a 1-D sequence"),
    (lambda: sq.corpus_lengths(0), ValueError, "num_docs must be at least 1"),
    (lambda: sq.pack([torch.ones(5)], 4), ValueError, "document 0 has 5 tokens, more than row_len=4"),
    (lambda: sq.pack([], 4), ValueError, "at least one document"),
])
def test_bad_input_is_named(call, error, words):
    with pytest.raises(error, match=None) as caught:
        call()
    assert words in str(caught.value)


def test_pack_first_fit_decreasing_by_hand():
    docs = [torch.tensor([1, 1, 1]), torch.tensor([2, 2]), torch.tensor([3, 3])]
    rows = sq.pack(docs, 4)  # 3 tokens fill row 0 but for 1; the two 2-token documents share row 1
    assert rows.input_ids.tolist() == [[1, 1, 1, 0], [2, 2, 3, 3]]
    assert rows.doc_ids.tolist() == [[0, 0, 0, -1], [1, 1, 2, 2]]
    assert rows.position_ids.tolist() == [[0, 1, 2, 0], [0, 1, 0, 1]]
    assert rows.padding_share() == pytest.approx(1 / 8)


def test_document_mask_by_hand():
    allowed = sq.document_mask(torch.tensor([[0, 0, 1, -1]]), causal=True)[0].int().tolist()
    assert allowed == [[1, 0, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]
    both_ways = sq.document_mask(torch.tensor([[0, 0, 1, -1]]), causal=False)[0].int().tolist()
    assert both_ways == [[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]


def test_cross_document_attention_matches_a_softmax_written_here():
    doc_ids = torch.tensor([[0, 0, 1, 1, 1]])
    everything = torch.ones(1, 5, 5, dtype=torch.bool)
    generator = torch.Generator().manual_seed(0)  # the same draws as the helper's
    query, key = torch.randn(1, 5, 16, generator=generator), torch.randn(1, 5, 16, generator=generator)
    scores = (query[0] @ key[0].T).numpy() / 4.0
    weights = np.exp(scores - scores.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    other = np.array([[d != e for e in (0, 0, 1, 1, 1)] for d in (0, 0, 1, 1, 1)])
    expected = (weights * other).sum(1).mean()
    assert sq.cross_document_attention(doc_ids, everything, dim=16, seed=0) == pytest.approx(expected, rel=1e-5)
    assert sq.cross_document_attention(doc_ids, sq.document_mask(doc_ids), dim=16) == 0.0


def test_packed_rows_give_each_document_what_it_gets_alone():
    model = sq.tiny_encoder(seed=0)
    docs = [torch.randint(1, 1000, (n,), generator=torch.Generator().manual_seed(n)) for n in (5, 3, 4)]
    rows = sq.pack(docs, 8)  # row 0: documents 0 and 1 (positions 0-4, 0-2); row 1: document 2
    blocked = (~sq.document_mask(rows.doc_ids, causal=False)).repeat_interleave(2, dim=0)
    with torch.no_grad():
        packed = sq.encode(model, rows.input_ids, rows.position_ids, attn_mask=blocked)
        unmasked = sq.encode(model, rows.input_ids, rows.position_ids)
        counting_on = sq.encode(model, rows.input_ids, attn_mask=blocked)  # positions 0..7 along the row
        for doc, tokens in enumerate(docs):
            alone = sq.encode(model, tokens[None])[0]
            assert torch.allclose(packed[rows.doc_ids == doc], alone, atol=1e-5)
        assert not torch.allclose(unmasked[rows.doc_ids == 1], sq.encode(model, docs[1][None])[0], atol=1e-3)
        assert not torch.allclose(counting_on[rows.doc_ids == 1], sq.encode(model, docs[1][None])[0], atol=1e-3)


def test_padded_batch_gives_each_document_what_it_gets_alone():
    model = sq.tiny_encoder(seed=1)
    docs = [torch.arange(1, n + 1) for n in (6, 2)]
    batch = sq.pad_collate([(d, 0) for d in docs])
    with torch.no_grad():
        out = sq.encode(model, batch["input_ids"], key_padding=~batch["attention_mask"])
        for row, tokens in enumerate(docs):
            assert torch.allclose(out[row, : len(tokens)], sq.encode(model, tokens[None])[0], atol=1e-5)


def test_step_times_count_wall_and_cpu_seconds():
    model = sq.tiny_encoder()
    batch = sq.pad_collate([(torch.arange(1, 40), 0), (torch.arange(1, 9), 1)])
    padded = sq.time_padded_batches(model, [batch, batch])
    packed = sq.time_packed_rows(model, [sq.pack([torch.arange(1, 40), torch.arange(1, 9)], 64)])
    for times in (padded, packed):
        assert isinstance(times, sq.StepTimes) and times.wall_s > 0 and times.cpu_s > 0


def test_saved_activation_bytes_grow_with_tokens():
    model = sq.tiny_encoder()
    def saved(rows: int, length: int) -> int:
        return sq.saved_activation_bytes(model, torch.ones(rows, length, dtype=torch.long),
                                         torch.zeros(rows, length, dtype=torch.bool))
    assert saved(4, 64) == pytest.approx(2 * saved(2, 64), rel=0.02)
    assert saved(2, 128) == pytest.approx(saved(4, 64), rel=0.02)  # tokens, not their shape
    assert saved(2, 64) > 2 * 64 * 32 * 4  # at least the embeddings' output, float32


def test_sorted_batches_by_hand():
    lengths = np.array([5, 1, 4, 2, 3])
    by_count = ss.sorted_batches(lengths, np.arange(5), 2, None, pool_size=5)
    assert by_count == [[1, 3], [4, 2], [0]]  # lengths 1,2 | 3,4 | 5
    by_tokens = ss.sorted_batches(lengths, np.arange(5), None, 6, pool_size=5)
    assert by_tokens == [[1, 3], [4], [2], [0]]  # 2 x 2 = 4 fits 6; 3 x 3 does not; then one each
    assert ss.sorted_batches(np.array([3, 3]), np.arange(2), None, 6, pool_size=2) == [[0, 1]]  # 2 x 3 = 6 fits
    pooled = ss.sorted_batches(lengths, np.arange(5), 2, None, pool_size=2)
    assert pooled == [[1, 0], [3, 2], [4]]  # each pool of two sorted on its own


@settings(max_examples=40, derandomize=True, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=60), st.integers(0, 3), st.integers(50, 120))
def test_bucket_sampler_yields_each_index_once_within_budget(lengths, seed, budget):
    lengths = np.array(lengths)
    sampler = ss.BucketBatchSampler(lengths, max_tokens=budget, seed=seed)
    for epoch in (0, 1):
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        assert all(len(b) * lengths[b].max() <= budget for b in batches)
        assert len(batches) == len(sampler)


def test_bucket_sampler_resumes_exactly_and_refuses_another_plan():
    lengths = sq.corpus_lengths(300, seed=2)
    sampler = ss.BucketBatchSampler(lengths, batch_size=8, seed=5)
    sampler.set_epoch(3)
    whole = list(sampler)
    partial = iter(sampler)
    first = [next(partial) for _ in range(7)]
    state = sampler.state_dict()
    fresh = ss.BucketBatchSampler(lengths, batch_size=8, seed=5)
    fresh.load_state_dict(state)
    assert first + list(fresh) == whole
    assert list(fresh) == whole  # the next iteration is the whole epoch again
    with pytest.raises(ValueError, match="seed=5, but this sampler has seed=6"):
        ss.BucketBatchSampler(lengths, batch_size=8, seed=6).load_state_dict(state)


@pytest.mark.parametrize("kwargs, error, words", [
    ({}, ValueError, "give exactly one of batch_size and max_tokens"),
    ({"batch_size": 2, "max_tokens": 9}, ValueError, "give exactly one"),
    ({"max_tokens": 4}, ValueError, "max_tokens=4 is below lengths[1]=5"),
    ({"batch_size": 0}, ValueError, "batch_size must be at least 1"),
    ({"batch_size": 2.0}, TypeError, "batch_size must be an int"),
    ({"batch_size": 2, "indices": [0, 7]}, ValueError, "indices must be in [0, 3)"),
])
def test_bucket_sampler_bad_input(kwargs, error, words):
    with pytest.raises(error) as caught:
        ss.BucketBatchSampler([3, 5, 2], **kwargs)
    assert words in str(caught.value)


def test_per_rank_bucketing_under_a_token_budget_gives_ranks_unequal_steps():
    lengths = sq.corpus_lengths(512, seed=1)  # lesson 08's corpus for the ranks
    steps = [len(ss.BucketBatchSampler(lengths, max_tokens=2048, seed=rank, indices=list(
        DistributedSampler(range(512), num_replicas=2, rank=rank, seed=0)))) for rank in (0, 1)]
    assert steps[0] != steps[1]
    fixed = [len(ss.DistributedBucketSampler(lengths, 2, rank, max_tokens=2048)) for rank in (0, 1)]
    assert fixed[0] == fixed[1]


@settings(max_examples=30, derandomize=True, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=80), st.integers(1, 4), st.integers(1, 6))
def test_distributed_bucket_sampler_equal_steps_neighbours_cover_all(lengths, world, batch_size):
    lengths = np.array(lengths)
    samplers = [ss.DistributedBucketSampler(lengths, world, rank, batch_size=batch_size, seed=1) for rank in range(world)]
    plans = [list(s) for s in samplers]
    assert len({len(p) for p in plans}) == 1
    assert sorted({i for p in plans for b in p for i in b}) == list(range(len(lengths)))
    ordered = np.sort(lengths)
    for step in zip(*plans):  # one step's batches are neighbours in length: a run of the sorted lengths
        together = np.sort(np.unique(np.concatenate([np.array(b) for b in step])))
        run = np.sort(lengths[together])
        starts = [s for s in range(len(ordered) - len(run) + 1) if np.array_equal(ordered[s : s + len(run)], run)]
        assert starts, (step, run)


def test_distributed_bucket_sampler_resume_and_world_size_check():
    lengths = sq.corpus_lengths(200, seed=4)
    sampler = ss.DistributedBucketSampler(lengths, 2, 1, max_tokens=1024, seed=3)
    whole = list(sampler)
    partial = iter(sampler)
    first = [next(partial) for _ in range(4)]
    state = sampler.state_dict()
    again = ss.DistributedBucketSampler(lengths, 2, 1, max_tokens=1024, seed=3)
    again.load_state_dict(state)
    assert first + list(again) == whole
    with pytest.raises(ValueError, match="num_replicas=2, but this sampler has num_replicas=4"):
        ss.DistributedBucketSampler(lengths, 4, 1, max_tokens=1024, seed=3).load_state_dict(state)
    with pytest.raises(ValueError, match=r"rank must be in \[0, num_replicas=2\), got 2"):
        ss.DistributedBucketSampler(lengths, 2, 2, batch_size=4)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(st.lists(st.floats(0.0, 1000.0), min_size=1, max_size=8).filter(lambda w: sum(w) > 0),
       st.integers(1, 300), st.integers(1, 40))
def test_window_counts_round_each_window_and_carry_the_rest(weights, count, window):
    counts = ss.window_counts(weights, count, window)
    share = np.array(weights) / sum(weights)
    sizes = [min(window, count - start) for start in range(0, count, window)]
    assert counts.shape == (len(sizes), len(weights)) and counts.sum(axis=1).tolist() == sizes
    wanted = share * np.array(sizes)[:, None]
    assert np.all((counts >= np.floor(wanted - 1e-9)) & (counts <= np.ceil(wanted + 1e-9)))  # each window rounded
    assert np.all(np.abs(counts.sum(axis=0) - share * count) < 1.5)  # the carry keeps the epoch near its share


def test_window_counts_by_hand():
    # shares 0.5 / 0.3 / 0.2 of a window of 3: 1.5 / 0.9 / 0.6 owed; floors 1 / 0 / 0, one more each to the two
    # furthest behind (0.9, 0.6): [1, 1, 1], carry 0.5 / -0.1 / -0.4. Second window: 2.0 / 0.8 / 0.2 owed; floors
    # 1 / 0 / 0, one more each to the first two (1.0, 0.8): [2, 1, 0]
    assert ss.window_counts([5, 3, 2], 6, 3).tolist() == [[1, 1, 1], [2, 1, 0]]


def test_mixture_windows_exact_random_not_and_ranks_disjoint():
    sizes, weights = [500, 300, 100], [0.7, 0.2, 0.1]
    windowed = [ss.MixtureSampler(sizes, weights, 400, window=20, num_replicas=2, rank=r) for r in (0, 1)]
    for sampler in windowed:
        for start in range(0, 400, 20):
            counts = np.bincount(sampler.sources()[start : start + 20], minlength=3)
            assert np.all(np.abs(counts - np.array(weights) * 20) <= 1)
    drawn = ss.MixtureSampler(sizes, weights, 400, strategy="random", window=20).sources()
    windows = np.array([np.bincount(drawn[s : s + 20], minlength=3) for s in range(0, 400, 20)])
    assert np.abs(windows - np.array(weights) * 20).max() >= 2  # iid draws stray further than rounding
    indices = [list(s) for s in windowed]
    for sampler, plan in zip(windowed, indices):
        source_of = np.searchsorted(np.cumsum(sizes), plan, side="right")
        assert np.array_equal(source_of, sampler.sources())  # each index lies in the source planned
    assert not set(indices[0]) & set(indices[1])  # 200 per rank: no source is used up, so no overlap


def test_mixture_resumes_and_rejects_bad_weights():
    sampler = ss.MixtureSampler([50, 30], [3, 1], 60, seed=2)
    whole = list(sampler)
    partial = iter(sampler)
    first = [next(partial) for _ in range(17)]
    again = ss.MixtureSampler([50, 30], [3, 1], 60, seed=2)
    again.load_state_dict(sampler.state_dict())
    assert first + list(again) == whole
    for weights, words in (([1, -1], "non-negative"), ([0, 0], "sum to a positive"), ([1], "one weight per source")):
        with pytest.raises(ValueError, match=words):
            ss.MixtureSampler([50, 30], weights, 10)
    with pytest.raises(ValueError, match="strategy must be one of"):
        ss.MixtureSampler([50, 30], [1, 1], 10, strategy="greedy")
