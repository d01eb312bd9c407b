"""Lesson 02's self-checks: per-sample weights, a balanced sampler, focal loss, samples for coverage."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import WeightedRandomSampler

from helpers import imbalance
from helpers.checks.core import Answer, Case, Failed, Wrong, exercise
from helpers.losses import focal_loss


@exercise("02.1", "per_sample_weights", right=imbalance.sample_weights, wrong=[
    Wrong(lambda labels: 1.0 / np.bincount(labels), "one per class"),  # per-class weights
    Wrong(lambda labels: np.ones(len(labels)), "same share"),  # natural frequencies
    Wrong(lambda labels: 1.0 / np.sqrt(np.bincount(labels))[labels], "same share"),  # sqrt is not balanced
])
def check_per_sample_weights(answer: Answer) -> str:
    """Exercise 02.1: one weight per sample, giving every class the same total weight."""
    name = answer.name
    for counts in ([90, 10], [500, 30, 5, 1]):
        labels = np.repeat(np.arange(len(counts)), counts)
        np.random.default_rng(1).shuffle(labels)
        call = f"{name}(labels with counts {counts})"
        with answer.calling(call):
            weights = np.asarray(answer.value(labels), dtype=np.float64)
        if weights.shape == (len(counts),):
            raise Failed(f"{call} returned {len(counts)} weights for {len(labels)} labels: one per class. "
                         "WeightedRandomSampler needs one weight per sample: index the class weights by the labels")
        if weights.shape != (len(labels),):
            raise Failed(f"{call} returned shape {weights.shape}; expected ({len(labels)},), one weight per sample")
        if not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            raise Failed(f"{call} returned weights that are not all positive and finite")
        mass = np.bincount(labels, weights=weights)
        if not np.allclose(mass, mass[0], rtol=1e-6):
            raise Failed(f"{call}: classes get total weight {np.round(mass / mass.sum(), 3).tolist()}; "
                         "inverse-frequency weights give every class the same share")
    return f"{name} gives one weight per sample and every class the same total weight"


def _without_replacement(exc: Exception) -> str:
    if "without replacement" in str(exc):
        return ". replacement=False draws each index at most once, so it can neither make 3000 draws from 1000 samples nor rebalance"
    return ""


@exercise("02.2", "balanced_sampler", right=lambda labels, num_samples: WeightedRandomSampler(
    imbalance.sample_weights(labels), num_samples, generator=torch.Generator().manual_seed(0)), wrong=[
    Wrong(lambda labels, n: WeightedRandomSampler(1.0 / np.bincount(labels), n), "only ever drew indices [0, 1, 2]"),
    Wrong(lambda labels, n: WeightedRandomSampler(imbalance.sample_weights(labels), len(labels), replacement=False), "drew 1000"),
    Wrong(lambda labels, n: WeightedRandomSampler(torch.ones(len(labels)), n), "weight each sample by 1 / (its class's count)"),
    Wrong(lambda labels, n: WeightedRandomSampler(imbalance.sample_weights(labels), n, replacement=False),
          "can neither make 3000 draws"),
])
def check_balanced_sampler(answer: Answer) -> str:
    """Exercise 02.2: a sampler whose draws are balanced across classes and reach beyond indices 0..C-1."""
    name = answer.name
    labels = np.repeat(np.arange(3), [900, 90, 10])
    np.random.default_rng(2).shuffle(labels)
    call = f"{name}(labels with counts [900, 90, 10], num_samples=3000)"
    with answer.calling(call, hint=_without_replacement):
        drawn = np.array(list(answer.value(labels, 3000)), dtype=np.int64)
    if len(drawn) != 3000:
        raise Failed(f"{call} drew {len(drawn)} indices; the epoch should have num_samples=3000")
    distinct = np.unique(drawn)
    if len(distinct) <= 3:
        raise Failed(f"{call} only ever drew indices {distinct.tolist()}: the per-class weights were passed as "
                     "per-sample weights, so the sampler chooses among 3 'samples'")
    share = np.bincount(labels[drawn], minlength=3) / len(drawn)
    if np.any(np.abs(share - 1 / 3) > 0.05):
        if len(distinct) == len(drawn):  # no index repeats: drawn without replacement
            hint = "replacement=False cannot rebalance: every index appears at most once"
        else:
            hint = "weight each sample by 1 / (its class's count), so every class gets the same total weight"
        raise Failed(f"{call} drew classes in shares {np.round(share, 3).tolist()}; balanced is about 1/3 each ({hint})")
    return f"{name} drew classes in shares {np.round(share, 2).tolist()} from {len(distinct)} distinct samples"


def _described(value: object) -> str:
    """A tensor by its shape (its values would fill the screen), anything else by its repr."""
    return f"a tensor of shape {list(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)


def _focal_log_of_softmax(logits: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    p_t = torch.softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return (-((1 - p_t) ** gamma) * torch.log(p_t)).mean()


def _focal_without_one_minus(logits: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    log_p_t = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return (-(log_p_t.exp() ** gamma) * log_p_t).mean()


@exercise("02.3", "my_focal_loss", right=focal_loss, wrong=[
    Wrong(lambda x, t, g: F.cross_entropy(x, t), "gamma=1.0"),  # forgets the focusing term
    Wrong(lambda x, t, g: focal_loss(x, t, g, reduction="sum"), "gamma=0.0) returned 100"),
    Wrong(lambda x, t, g: (-(1 - F.softmax(x, 1)) ** g * F.log_softmax(x, 1)).sum(1).mean(), "gamma=0.0"),  # all classes, not p_t
    Wrong(lambda x, t, g: focal_loss(x, t, g, reduction="none"), "0-d tensor"),
    Wrong(_focal_log_of_softmax, "F.log_softmax"),  # log(softmax) underflows for a large logit
    Wrong(_focal_without_one_minus, "(1 - p_t)**gamma"),  # p_t**gamma: right at gamma=0 only
])
def check_focal_loss(answer: Answer) -> str:
    """Exercise 02.3: a focal loss equal to helpers.losses.focal_loss (mean reduction) for several gammas."""
    name = answer.name
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(32, 4, generator=generator) * 3
    target = torch.randint(0, 4, (32,), generator=generator)
    for gamma in (0.0, 1.0, 2.0, 5.0):
        call = f"{name}(logits, target, gamma={gamma})"
        with answer.calling(call):
            got = answer.value(logits.clone(), target.clone(), gamma)
        if not isinstance(got, torch.Tensor) or got.ndim != 0:
            raise Failed(f"{call} returned {_described(got)}; expected a 0-d tensor (the mean over the batch)")
        expected = focal_loss(logits, target, gamma=gamma)
        if not torch.allclose(got.float(), expected, rtol=1e-4, atol=1e-6):
            hint = (" At gamma=0 it must equal F.cross_entropy." if gamma == 0 else
                    " Multiply -log(p_t) by the focusing factor (1 - p_t)**gamma, where p_t is the softmax probability "
                    "of each sample's *true* class.")
            raise Failed(f"{call} returned {got.item():.5f}, expected {expected.item():.5f}.{hint}")
    confident = torch.tensor([[200.0, 0.0], [0.0, 200.0], [1.0, -1.0]])  # sample 0's true class has p_t = exp(-200)
    confident_target = torch.tensor([1, 1, 0])
    for gamma in (0.0, 2.0):
        call = f"{name}(logits {confident.tolist()}, target {confident_target.tolist()}, gamma={gamma})"
        with answer.calling(call):
            got = answer.value(confident.clone(), confident_target.clone(), gamma)
        expected = focal_loss(confident, confident_target, gamma=gamma)
        if not isinstance(got, torch.Tensor) or got.ndim != 0:
            raise Failed(f"{call} returned {_described(got)}; expected a 0-d tensor (the mean over the batch)")
        if not torch.isfinite(got):
            raise Failed(f"{call} returned {got.item()}, expected {expected.item():.5f}: softmax gives p_t = exp(-200), "
                         "which is 0 in float32, and log(0) = -inf. Compute log(p_t) with F.log_softmax, which stays finite")
        if not torch.allclose(got.float(), expected, rtol=1e-4, atol=1e-6):
            raise Failed(f"{call} returned {got.item():.5f}, expected {expected.item():.5f}: compute log(p_t) with "
                         "F.log_softmax and gather the true class's column")
    assert torch.allclose(focal_loss(logits, target, gamma=0.0), F.cross_entropy(logits, target))
    return f"{name} matches helpers.losses.focal_loss for gamma 0, 1, 2, 5 (and cross-entropy at 0), also for logits of 200"


COVERAGE_CASES: tuple[Case, ...] = (
    Case(([900, 100], 0.9), 4144, "each draw picks a given majority sample with probability 1/(2*900): "
         "solve 1 - (1 - 1/1800)^S >= 0.9 for the smallest S"),
    Case(([100, 900], 0.9), 4144, "the majority class is the largest count, wherever it is"),
    Case(([4000, 400, 40], 0.5), 8318, "three classes: each gets 1/3 of the draws"),
    Case(([900, 100], 0.0), ValueError, "coverage must be in (0, 1): 0 needs no samples"),
    Case(([900, 100], 1.0), ValueError, "coverage must be in (0, 1): 1 is never certain when drawing with replacement"),
)


def coverage_right(counts: list[int], coverage: float) -> int:
    """Exercise 02.4's reference answer (the tests pass it to the check)."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")
    return math.ceil(math.log(1 - coverage) / math.log1p(-1 / (len(counts) * max(counts))))


@exercise("02.4", "num_samples_for_coverage", right=coverage_right, wrong=[
    Wrong(lambda c, cov: round(cov * max(c) * len(c)) if 0 < cov < 1 else coverage_right(c, cov), "returned 1620"),  # linear
    Wrong(lambda c, cov: math.ceil(math.log(1 - cov) / math.log1p(-1 / c[0] / len(c))) if 0 < cov < 1 else coverage_right(c, cov),
          "([100, 900], 0.9) returned"),  # the first class, not the largest
    Wrong(lambda c, cov: math.log(1 - cov) / math.log1p(-1 / (len(c) * max(c))) if 0 < cov < 1 else coverage_right(c, cov),
          "of type float"),
    Wrong(lambda c, cov: math.ceil(math.log(1 - cov) / math.log1p(-1 / (len(c) * max(c)))) if cov < 1 else 0, "expected ValueError"),
])
def check_num_samples_for_coverage(answer: Answer) -> str:
    """Exercise 02.4: the smallest num_samples whose balanced epoch sees `coverage` of the majority class."""
    return answer.cases(COVERAGE_CASES)
