"""helpers.imbalance, helpers.metrics, helpers.data, helpers.losses: values, properties and bad inputs."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from helpers import data, imbalance, losses, metrics

counts_lists = st.lists(st.integers(min_value=1, max_value=5000), min_size=2, max_size=12)


def test_counts_come_from_labels_and_keep_empty_classes():
    assert imbalance.class_counts([0, 2, 2, 2]).tolist() == [1, 0, 3]
    assert imbalance.class_counts(torch.tensor([1, 1]), num_classes=4).tolist() == [0, 2, 0, 0]


def test_seed_post_example():
    labels = data.labels_from_counts([10000, 2000, 500], seed=0)
    counts = imbalance.class_counts(labels)
    assert counts.tolist() == [10000, 2000, 500] and imbalance.imbalance_ratio(counts) == 20.0


def test_effective_number_limits():
    counts = np.array([1, 10, 10**6])
    assert np.allclose(imbalance.effective_number(counts, 0.0), 1.0)  # beta=0: every class counts as one sample
    assert np.allclose(imbalance.effective_number(counts, 0.999)[:2], [1.0, (1 - 0.999**10) / 0.001])
    assert imbalance.effective_number(counts, 0.999)[2] == pytest.approx(1000.0)  # saturates at 1/(1-beta)


@given(counts_lists, st.sampled_from(imbalance.SCHEMES))
def test_class_weights_sum_to_classes_and_favour_rare(counts, scheme):
    weights = imbalance.class_weights(counts, scheme)
    assert weights.sum() == pytest.approx(len(counts))
    order = np.argsort(counts, kind="stable")
    assert np.all(np.diff(weights[order]) <= 1e-12), "a rarer class never gets a smaller weight"


@given(counts_lists)
def test_inverse_sample_weights_give_every_class_equal_mass(counts):
    labels = data.labels_from_counts(counts, seed=1)
    weights = imbalance.sample_weights(labels, "inverse")
    assert weights.dtype == torch.float64 and weights.shape == (len(labels),)
    mass = np.bincount(labels, weights=weights.numpy())
    assert np.allclose(mass, mass[0])


@given(counts_lists)
def test_sqrt_weights_sit_between_natural_and_balanced(counts):
    labels = data.labels_from_counts(counts, seed=2)
    share = np.bincount(labels, weights=imbalance.sample_weights(labels, "sqrt").numpy())
    share /= share.sum()
    natural = np.array(counts) / sum(counts)
    assert share.max() <= natural.max() + 1e-12 and share.min() >= natural.min() - 1e-12


def test_long_tail_counts_hit_the_factor():
    counts = imbalance.long_tail_counts(100, 100.0, 5000)
    assert len(counts) == 100 and counts[0] == 5000 and counts[-1] == 50 and np.all(np.diff(counts) <= 0)


def test_undersample_keeps_min_count_per_class():
    labels = data.labels_from_counts([50, 7, 20], seed=0)
    kept = imbalance.undersample_indices(labels, seed=3)
    assert np.bincount(labels[kept]).tolist() == [7, 7, 7] and len(set(kept.tolist())) == 21


def test_metrics_of_majority_predictor():
    truth = data.labels_from_counts([70, 20, 10], seed=0)
    guess = np.zeros_like(truth)
    result = metrics.scores(truth, guess, 3)
    assert result["accuracy"] == pytest.approx(0.70) and result["balanced_accuracy"] == pytest.approx(1 / 3)
    assert result["minority_recall"] == 0.0 and result["macro_f1"] == pytest.approx((2 * 70 / 170) / 3)


def test_metrics_of_perfect_predictor():
    truth = data.labels_from_counts([5, 3, 1], seed=0)
    assert metrics.scores(truth, truth, 3) == {"accuracy": 1.0, "balanced_accuracy": 1.0, "macro_f1": 1.0, "minority_recall": 1.0}


@given(st.integers(min_value=0, max_value=10_000))
def test_stratified_split_is_exact_and_random_is_not_always(seed):
    labels = data.labels_from_counts([200, 30, 5], seed=0)
    train, val = data.split_indices(labels, 0.2, seed=seed, stratify=True)
    assert np.bincount(labels[val], minlength=3).tolist() == [40, 6, 1]
    assert sorted(np.concatenate([train, val]).tolist()) == list(range(len(labels)))


def test_random_split_misses_the_rare_class_sometimes():
    labels = data.labels_from_counts([200, 30, 5], seed=0)
    rare_in_val = [np.sum(labels[data.split_indices(labels, 0.2, seed=s, stratify=False)[1]] == 2) for s in range(200)]
    assert min(rare_in_val) == 0 and max(rare_in_val) >= 3


def test_synthetic_task_is_deterministic_and_shaped():
    a = data.imbalanced_classification([30, 3], num_features=4, seed=5)
    b = data.imbalanced_classification([30, 3], num_features=4, seed=5)
    assert torch.equal(a.tensors[0], b.tensors[0]) and a.tensors[0].shape == (33, 4)
    assert imbalance.class_counts(a.tensors[1]).tolist() == [30, 3]


@given(st.integers(min_value=2, max_value=6), st.integers(min_value=1, max_value=40), st.integers(0, 2**31 - 1))
def test_focal_loss_with_gamma_zero_is_cross_entropy(classes, batch, seed):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, classes, generator=generator) * 3
    target = torch.randint(0, classes, (batch,), generator=generator)
    assert torch.allclose(losses.focal_loss(logits, target, gamma=0.0), F.cross_entropy(logits, target), atol=1e-6)
    per_sample = losses.focal_loss(logits, target, gamma=2.0, reduction="none")
    assert torch.all(per_sample <= F.cross_entropy(logits, target, reduction="none") + 1e-6)


def test_focal_loss_known_value_and_alpha():
    logits = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    target = torch.tensor([0, 1])
    p = [math.exp(2) / (math.exp(2) + 1), 0.5]
    expected = [-((1 - q) ** 2) * math.log(q) for q in p]
    got = losses.focal_loss(logits, target, reduction="none")
    assert torch.allclose(got, torch.tensor(expected), atol=1e-6)
    weighted = losses.focal_loss(logits, target, alpha=[0.25, 0.75], reduction="sum")
    assert weighted.item() == pytest.approx(0.25 * expected[0] + 0.75 * expected[1], rel=1e-5)


@pytest.mark.parametrize(
    "call, error, says",
    [
        (lambda: imbalance.class_counts([[0, 1]]), ValueError, "labels must be 1-D"),
        (lambda: imbalance.class_counts([0, -1]), ValueError, "labels must be non-negative"),
        (lambda: imbalance.class_counts([0.5, 1.0]), TypeError, "labels must hold integer"),
        (lambda: imbalance.class_counts([0, 3], num_classes=2), ValueError, "num_classes is 2"),
        (lambda: imbalance.class_counts([], None), ValueError, "labels is empty"),
        (lambda: imbalance.imbalance_ratio([10, 0]), ValueError, "zero samples"),
        (lambda: imbalance.imbalance_ratio({"a": 1}), TypeError, "got a dict"),
        (lambda: imbalance.effective_number([3, 4], 1.0), ValueError, r"beta must be in \[0.0, 1.0\)"),
        (lambda: imbalance.class_weights([3, 4], "balanced"), ValueError, "scheme must be one of"),
        (lambda: imbalance.class_weights([3, 0, 4]), ValueError, "class 1"),
        (lambda: imbalance.sample_weights([], "inverse"), ValueError, "labels is empty"),
        (lambda: imbalance.sample_weights([0, 1], "log"), ValueError, "scheme must be one of"),
        (lambda: imbalance.long_tail_counts(1, 10.0, 100), ValueError, "num_classes must be at least 2"),
        (lambda: imbalance.batch_class_counts([], 3), ValueError, "loader yielded no batch"),
        (lambda: imbalance.batch_class_counts([(None, [0])], 3, num_batches=0), ValueError, "num_batches must be at least 1"),
        (lambda: data.split_indices([0, 1], 1.5, 0, True), ValueError, "val_fraction"),
        (lambda: data.split_indices([0, 1], 0.5, 0, "yes"), TypeError, "stratify"),
        (lambda: metrics.confusion_matrix([0, 1], [0], 2), ValueError, "same length"),
        (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(2, 1, dtype=torch.long)), ValueError, "target must be a 1-D"),
        (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), gamma=-1), ValueError, "gamma"),
        (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), alpha=[1, 2]), ValueError, "alpha"),
        (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), reduction="avg"), ValueError, "reduction"),
    ],
)
def test_bad_input_names_the_argument(call, error, says):
    with pytest.raises(error, match=says):
        call()


def test_batch_class_counts_one_row_per_batch():
    batches = [(None, torch.tensor([0, 2, 2])), (None, torch.tensor([1])), (None, torch.tensor([0]))]
    assert imbalance.batch_class_counts(batches, 3).tolist() == [[1, 0, 2], [0, 1, 0], [1, 0, 0]]
    assert imbalance.batch_class_counts(batches, 3, num_batches=2).shape == (2, 3)


def test_over_seeds_uses_the_sample_standard_deviation_and_min_max():
    spread = metrics.over_seeds([[0.5, 1.0], [0.7, 1.0], [0.6, 1.0]])
    assert np.allclose(spread.mean, [0.6, 1.0]) and np.allclose(spread.std, [0.1, 0.0])  # ddof=1: 0.1, not 0.0816
    assert spread.low.tolist() == [0.5, 1.0] and spread.high.tolist() == [0.7, 1.0]


def test_seed_ranges_overlap_only_when_they_share_a_value():
    a = metrics.over_seeds([[0.1], [0.3]])
    assert a.overlaps(metrics.over_seeds([[0.3], [0.5]]), 0)
    assert not a.overlaps(metrics.over_seeds([[0.31], [0.5]]), 0)
    with pytest.raises(ValueError, match="column must be below the number of metrics"):
        a.overlaps(a, 1)


@pytest.mark.parametrize("rows", [[[0.5]], [0.5, 0.6], [[0.5], [float("nan")]]])
def test_over_seeds_refuses_too_few_seeds_and_non_scores(rows):
    with pytest.raises(ValueError, match="rows must"):
        metrics.over_seeds(rows)
