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


# Exact values computed by hand (issue 28: the expected value comes from outside the code under test).
@pytest.mark.parametrize("scheme, counts, beta, expected", [
    ("inverse", [100, 25], 0.999, [0.4, 1.6]),  # 1/100 : 1/25 = 1 : 4, scaled to sum 2
    ("sqrt", [100, 25], 0.999, [2 / 3, 4 / 3]),  # 1/10 : 1/5 = 1 : 2
    ("effective", [1, 2], 0.5, [1.2, 0.8]),  # effective numbers 1 and 1.5: 1 : 2/3
    ("effective", [1, 2], 0.999, [2 * 1.999 / 2.999, 2 / 2.999]),  # effective numbers 1 and 1.999 (the default beta)
])
def test_class_weights_by_hand(scheme, counts, beta, expected):
    weights = imbalance.class_weights(counts, scheme) if beta == 0.999 else imbalance.class_weights(counts, scheme, beta)
    assert weights.tolist() == pytest.approx(expected, rel=1e-12)


def test_sample_weights_by_hand():
    assert imbalance.sample_weights([0, 0, 0, 1]).tolist() == pytest.approx([0.5, 0.5, 0.5, 1.5])  # default: inverse
    assert imbalance.sample_weights([0, 2, 2]).tolist() == pytest.approx([4 / 3, 2 / 3, 2 / 3])  # class 1 absent: no weight
    assert imbalance.sample_weights([0, 1, 1], "effective", 0.5).tolist() == pytest.approx([1.2, 0.8, 0.8])
    assert imbalance.sample_weights([0, 1, 1], "effective").tolist() == pytest.approx([2 * 1.999 / 2.999] + [2 / 2.999] * 2)


def test_counting_helpers_by_hand():
    counts = imbalance.class_counts([0, 0], num_classes=1)
    assert counts.tolist() == [2] and counts.dtype == np.int64
    assert imbalance.effective_number([0, 3], 0.5).tolist() == [0.0, 1.75]  # an empty class has no effective samples
    tail = imbalance.long_tail_counts(3, 4.0, 100)  # 100 / n^(ln 4 / ln 3): 100, 41.7, 25
    assert tail.tolist() == [100, 42, 25] and tail.dtype == np.int64
    assert imbalance.long_tail_counts(2, 100.0, 100).tolist() == [100, 1]
    assert imbalance.long_tail_counts(2, 1.0, 1).tolist() == [1, 1]  # the lowest factor and head count allowed
    assert imbalance.undersample_indices([0, 0, 0, 1, 1, 1], 0).tolist() == list(range(6))  # balanced: all kept
    kept = [imbalance.undersample_indices([0, 0, 0, 0, 0, 1], seed).tolist() for seed in range(8)]
    assert all(k[1] == 5 and len(k) == 2 for k in kept) and len({k[0] for k in kept}) > 1  # the seed picks which
    assert kept == [imbalance.undersample_indices([0, 0, 0, 0, 0, 1], seed).tolist() for seed in range(8)]  # and only it
    assert imbalance.batch_class_counts([(None, [0, 0])], 1, num_batches=1).tolist() == [[2]]


def test_scores_by_hand():
    assert metrics.macro_f1([0, 0, 1], [0, 0, 0], 3) == pytest.approx(0.4)  # class 0: F1 4/5, class 1: 0, class 2 absent
    assert metrics.accuracy([1], [1]) == 1.0
    assert metrics.scores([0, 0, 1], [0, 0, 0], 3)["minority_recall"] == 0.0  # rarest present: class 1, not absent 2
    assert metrics.scores([0, 0, 1, 1, 1], [0, 0, 1, 1, 1], 3, minority=0)["minority_recall"] == 1.0
    assert metrics.scores([1, 1, 2, 2, 2], [1, 1, 2, 2, 0], 3)["minority_recall"] == 1.0  # class 0 never occurs
    with np.errstate(all="raise"):  # a class with no sample is NaN without a warning or an error
        assert np.isnan(metrics.per_class_recall([0], [0], 2)[1])
    touching = metrics.over_seeds([[0.5], [0.7]])
    assert touching.overlaps(metrics.over_seeds([[0.3], [0.5]]), 0)
    assert metrics.over_seeds([[1], [2]]).low.dtype == np.float64  # whole-number scores are scores too
    assert metrics.confusion_matrix([0], [0], 1).tolist() == [[1]]


@pytest.mark.parametrize("call, error, message", [
    (lambda: imbalance.class_counts([0], num_classes=0), ValueError, "num_classes must be at least 1, got 0"),
    (lambda: imbalance.class_counts([], None), ValueError, "labels is empty and num_classes is None: there is nothing to count"),
    (lambda: imbalance.imbalance_ratio([1.5, 2]), TypeError, "counts must hold whole numbers of samples, got [1.5, 2]"),
    (lambda: imbalance.effective_number([-1], 0.5), ValueError, "counts must not be negative, got [-1]"),
    (lambda: imbalance.class_weights([1.5, 2]), TypeError, "counts must hold whole numbers of samples, got [1.5, 2]"),
    (lambda: imbalance.sample_weights([0.5]), TypeError, "labels must hold integer class ids, got dtype float64"),
    (lambda: imbalance.sample_weights([]), ValueError, "labels is empty: there is no sample to weight"),
    (lambda: imbalance.long_tail_counts(3, 2.0, 0), ValueError, "head_count must be at least 1, got 0"),
    (lambda: imbalance.long_tail_counts(3, 0.5, 10), ValueError, "imbalance_factor must be in [1.0, 10.0], got 0.5"),
    (lambda: imbalance.long_tail_counts(3, 11.0, 10), ValueError, "imbalance_factor must be in [1.0, 10.0], got 11.0"),
    (lambda: imbalance.undersample_indices([0.5], 0), TypeError, "labels must hold integer class ids, got dtype float64"),
    (lambda: imbalance.undersample_indices([0], -1), ValueError, "seed must be at least 0, got -1"),
    (lambda: imbalance.undersample_indices([0, 2], 0), ValueError,
     "class counts of labels has a class with zero samples (class 1): it has no weight; drop the class or give it samples"),
    (lambda: imbalance.batch_class_counts([], 0), ValueError, "num_classes must be at least 1, got 0"),
    (lambda: imbalance.batch_class_counts([(None, [2])], 2), ValueError, "labels holds class 2, but num_classes is 2"),
    (lambda: imbalance.batch_class_counts([], 2), ValueError, "loader yielded no batch: there is nothing to count"),
    (lambda: losses.focal_loss("x", torch.zeros(1, dtype=torch.long)), ValueError,
     "logits must be a 2-D tensor [batch, classes], got str"),
    (lambda: losses.focal_loss(torch.zeros(3), torch.zeros(3, dtype=torch.long)), ValueError,
     "logits must be a 2-D tensor [batch, classes], got torch.Size([3])"),
    (lambda: losses.focal_loss(torch.zeros(2, 3), [0, 1]), ValueError, "target must be a 1-D int64 tensor of class ids, got list"),
    (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(2)), ValueError,
     "target must be a 1-D int64 tensor of class ids, got torch.Size([2]) torch.float32"),
    (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(3, dtype=torch.long)), ValueError,
     "target has 3 entries but logits has 2 rows"),
    (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), gamma=True), ValueError,
     "gamma must be a number >= 0, got True"),
    (lambda: losses.focal_loss(torch.zeros(2, 3), torch.zeros(2, dtype=torch.long), alpha=[-1, 1, 1]), ValueError,
     "alpha must be None or 3 non-negative per-class weights, got [-1, 1, 1]"),
    (lambda: metrics.confusion_matrix([0], [0], 0), ValueError, "num_classes must be at least 1, got 0"),
    (lambda: metrics.confusion_matrix([2], [0], 2), ValueError, "y_true holds class 2, but num_classes is 2"),
    (lambda: metrics.confusion_matrix([0], [2], 2), ValueError, "y_pred holds class 2, but num_classes is 2"),
    (lambda: metrics.accuracy([0.5], [0]), TypeError, "y_true must hold integer class ids, got dtype float64"),
    (lambda: metrics.accuracy([0], [0.5]), TypeError, "y_pred must hold integer class ids, got dtype float64"),
    (lambda: metrics.accuracy([], []), ValueError, "y_true and y_pred must be non-empty and of equal length, got 0 and 0"),
    (lambda: metrics.accuracy([0], [0, 1]), ValueError, "y_true and y_pred must be non-empty and of equal length, got 1 and 2"),
    (lambda: metrics.scores([2], [0], 2), ValueError, "y_true holds class 2, but num_classes is 2"),
    (lambda: metrics.scores([0.5], [0], 2), TypeError, "y_true must hold integer class ids, got dtype float64"),
    (lambda: metrics.scores([], [], 2), ValueError, "y_true is empty: there is nothing to score"),
    (lambda: metrics.scores([0], [0], 2, minority=-1), ValueError, "minority must be at least 0, got -1"),
    (lambda: metrics.scores([0], [0], 2, minority=2), ValueError, "minority must be a class id below num_classes=2, got 2"),
    (lambda: metrics.over_seeds([[0.5], [0.6]]).overlaps(metrics.over_seeds([[0.5], [0.6]]), -1), ValueError,
     "column must be at least 0, got -1"),
    (lambda: metrics.over_seeds([[0.5]]), ValueError,
     "rows must be a 2-D table with one row per seed and at least 2 seeds, got shape (1, 1)"),
])
def test_bad_input_message_in_full(call, error, message):
    """The whole message, from its first word: it names the argument and the value (a mutant naming None fails)."""
    with pytest.raises(error) as caught:
        call()
    assert str(caught.value) == message


def test_focal_loss_alpha_keeps_the_logits_dtype_and_allows_a_zero_weight():
    import warnings

    logits, target = torch.tensor([[2.0, 0.0], [0.0, 0.0]]), torch.tensor([0, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no implicit-dimension warning from the softmax
        loss = losses.focal_loss(logits, target, alpha=np.array([0.0, 0.75]), reduction="none")
    assert loss.dtype == torch.float32 and loss[0].item() == 0.0 and loss[1].item() > 0  # class 0 weighted out


@pytest.mark.cuda
def test_focal_loss_alpha_on_the_logits_device():
    logits, target = torch.zeros(2, 3, device="cuda"), torch.tensor([0, 2], device="cuda")
    assert losses.focal_loss(logits, target, alpha=[1.0, 1.0, 2.0]).device.type == "cuda"
