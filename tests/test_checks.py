"""Every self-check passes the right answer and rejects typical wrong ones with an actionable line."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import WeightedRandomSampler

from helpers import checks, data, imbalance, losses, metrics


def right(usable_cores, ranks_per_node):
    if usable_cores < 1 or ranks_per_node < 1:
        raise ValueError("bad")
    return max(0, usable_cores // ranks_per_node - 1)


def stub(usable_cores, ranks_per_node):
    raise NotImplementedError("Exercise 00.1: replace this line with your code")


@pytest.fixture(autouse=True)
def lenient(monkeypatch):
    monkeypatch.delenv(checks.STRICT_VAR, raising=False)


def test_right_answer_passes():
    result = checks.check_workers_per_rank(right)
    assert result.passed and str(result).startswith("Exercise 00.1 passed:")


def test_stub_is_not_implemented_yet():
    assert checks.check_workers_per_rank(stub).status == "not implemented yet"


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda c, r: max(0, c // r), "workers_per_rank(2, 1) returned 2, expected 1"),  # forgets the main process
        (lambda c, r: c // r - 1 if c >= 1 and r >= 1 else right(c, r), "returned -1"),  # negative
        (lambda c, r: 2 * c, "returned 4"),  # the "2x cores" folklore
        (lambda c, r: max(0, (c - r) / r) if c >= 1 and r >= 1 else right(c, r), "of type float"),
        (lambda c, r: max(0, c // max(r, 1) - 1), "expected ValueError"),  # no input validation
        ("not a function", "expected the function"),
    ],
)
def test_typical_wrong_answers_fail(wrong, says):
    result = checks.check_workers_per_rank(wrong)
    assert result.status == "failed" and says in result.detail, result


def test_strict_mode_raises(monkeypatch):
    monkeypatch.setenv(checks.STRICT_VAR, "1")
    with pytest.raises(AssertionError, match="Exercise 00.1 not implemented yet"):
        checks.check_workers_per_rank(stub)


# Lessons 01 and 02: each check passes the right answer and rejects the typical wrong ones.


def stub_for(exercise):
    def stub(*args):
        raise NotImplementedError(f"Exercise {exercise}: replace this line with your code")
    return stub


def ratio_right(counts):
    return imbalance.imbalance_ratio(counts)


def split_random(labels, fraction, seed):
    return data.split_indices(labels, fraction, seed, stratify=False)


def focal_right(logits, target, gamma):
    return losses.focal_loss(logits, target, gamma)


def sampler_right(labels, num_samples):
    return WeightedRandomSampler(imbalance.sample_weights(labels), num_samples, generator=torch.Generator().manual_seed(0))


def coverage_right(counts, coverage):
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")
    return math.ceil(math.log(1 - coverage) / math.log1p(-1 / (len(counts) * max(counts))))


CHECKS = [
    (checks.check_class_counts, "01.1", lambda labels, n: imbalance.class_counts(labels, n), [
        (lambda labels, n: np.unique(labels, return_counts=True)[1], "returned"),  # drops empty classes
        (lambda labels, n: list(dict.fromkeys(labels)), "returned"),  # not counts at all
    ]),
    (checks.check_imbalance_ratio, "01.2", ratio_right, [
        (lambda c: c[0] / c[-1], "ratio([3, 12, 6]) returned 0.5"),  # first / last
        (lambda c: min(c) / max(c) if min(c) else 0.0, "returned 0.05"),  # upside down
        (lambda c: max(c) / min(c) if min(c) else float("inf"), "expected ValueError"),  # inf, no error
    ]),
    (checks.check_stratified_split, "01.3", lambda labels, f, seed: data.split_indices(labels, f, seed, True), [
        (split_random, "not stratified"),
        (lambda labels, f, seed: (np.arange(len(labels)), np.arange(0)), "in validation"),
        (lambda labels, f, seed: data.split_indices(labels, f, 0, True), "same split for 10 different seeds"),
        (lambda labels, f, seed: (np.ones(len(labels), bool), np.zeros(len(labels), bool)), "boolean masks"),
    ]),
    (checks.check_balanced_accuracy, "01.4", lambda t, p: metrics.balanced_accuracy(t, p, 3), [
        (lambda t, p: metrics.accuracy(t, p), "returned 0.7"),
        (lambda t, p: float(np.mean([np.mean(np.asarray(t)[np.asarray(p) == c] == c) for c in np.unique(p)])), "returned 0.7"),  # precision
        (lambda t, p: float(np.mean(np.nan_to_num(metrics.per_class_recall(t, p, 3)))), "returned 0.5"),  # absent classes as 0
    ]),
    (checks.check_per_sample_weights, "02.1", imbalance.sample_weights, [
        (lambda labels: 1.0 / np.bincount(labels), "one per class"),  # per-class weights
        (lambda labels: np.ones(len(labels)), "same share"),  # natural frequencies
        (lambda labels: 1.0 / np.sqrt(np.bincount(labels))[labels], "same share"),  # sqrt is not balanced
    ]),
    (checks.check_balanced_sampler, "02.2", sampler_right, [
        (lambda labels, n: WeightedRandomSampler(1.0 / np.bincount(labels), n), "only ever drew indices [0, 1, 2]"),
        (lambda labels, n: WeightedRandomSampler(imbalance.sample_weights(labels), len(labels), replacement=False), "drew 1000"),
        (lambda labels, n: WeightedRandomSampler(torch.ones(len(labels)), n), "shares"),
        (lambda labels, n: WeightedRandomSampler(imbalance.sample_weights(labels), n, replacement=False), "can neither make 3000 draws"),
    ]),
    (checks.check_focal_loss, "02.3", focal_right, [
        (lambda x, t, g: F.cross_entropy(x, t), "gamma=1.0"),  # forgets the focusing term
        (lambda x, t, g: losses.focal_loss(x, t, g, reduction="sum"), "gamma=0.0) returned 100"),
        (lambda x, t, g: (-(1 - F.softmax(x, 1)) ** g * F.log_softmax(x, 1)).sum(1).mean(), "gamma=0.0"),  # all classes, not p_t
        (lambda x, t, g: losses.focal_loss(x, t, g, reduction="none"), "0-d tensor"),
    ]),
    (checks.check_num_samples_for_coverage, "02.4", coverage_right, [
        (lambda c, cov: round(cov * max(c) * len(c)) if 0 < cov < 1 else coverage_right(c, cov), "returned 1620"),  # linear
        (lambda c, cov: math.ceil(math.log(1 - cov) / math.log1p(-1 / c[0] / len(c))) if 0 < cov < 1 else coverage_right(c, cov), "([100, 900], 0.9) returned"),
        (lambda c, cov: math.log(1 - cov) / math.log1p(-1 / (len(c) * max(c))) if 0 < cov < 1 else coverage_right(c, cov), "of type float"),
        (lambda c, cov: math.ceil(math.log(1 - cov) / math.log1p(-1 / (len(c) * max(c)))) if cov < 1 else 0, "expected ValueError"),
    ]),
]


@pytest.mark.parametrize("check, exercise, right_fn, wrongs", CHECKS, ids=[c[1] for c in CHECKS])
def test_lesson_checks(check, exercise, right_fn, wrongs):
    result = check(right_fn)
    assert result.passed and str(result).startswith(f"Exercise {exercise} passed:"), result
    assert check(stub_for(exercise)).status == "not implemented yet"
    assert check("not a function").status == "failed"
    for wrong, says in wrongs:
        verdict = check(wrong)
        assert verdict.status == "failed" and says in verdict.detail, (says, verdict)
