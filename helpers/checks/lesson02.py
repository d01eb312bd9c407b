"""Lesson 02's self-checks: per-sample weights, a balanced sampler, focal loss, samples for coverage."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import WeightedRandomSampler

from helpers import imbalance
from helpers.checks.core import Answer, Case, Failed, Mistake, Wrong, exercise, seeded_randomness
from helpers.losses import focal_loss


def _as_weights(raw: object) -> np.ndarray:
    """The learner's weights as a numpy array, from a tensor, an array or a list."""
    if isinstance(raw, torch.Tensor):
        raw = raw.detach().cpu().numpy()
    return np.asarray(raw)


def _proportional(weights: np.ndarray, model: np.ndarray) -> bool:
    """Whether `weights` are `model` times one positive constant (a weighting and its rescalings draw alike)."""
    return weights.shape == model.shape and bool(np.allclose(weights / weights[0] * model[0], model, rtol=1e-6))


def _missing_class_hint(counts: list[int]) -> object:
    def hint(exc: Exception) -> str:
        if isinstance(exc, IndexError) and 0 in counts:
            return (f". Class {counts.index(0)} has no sample, so np.unique's counts no longer line up with the labels: "
                    "count with np.bincount(labels), which keeps a 0 for it")
        return ""
    return hint


@exercise("02.1", "per_sample_weights", right=imbalance.sample_weights, wrong=[
    Wrong(lambda labels: 1.0 / np.bincount(labels), "one per class"),  # per-class weights
    Wrong(lambda labels: np.ones(len(labels)), "same weight"),  # natural frequencies
    Wrong(lambda labels: 1.0 / np.sqrt(np.bincount(labels))[labels], "1 / sqrt(count)"),  # sqrt is not balanced
    Wrong(lambda labels: 1.0 / np.unique(labels, return_counts=True)[1][labels], "has no sample"),  # a missing class
    Wrong(lambda labels: (1 // np.bincount(labels))[labels], "integer weights"),  # floor division
])
def check_per_sample_weights(answer: Answer) -> str:
    """Exercise 02.1: one weight per sample, giving every class the same total weight."""
    name = answer.name
    for counts in ([90, 10], [500, 30, 5, 1], [50, 0, 5, 20]):  # class 1 of the last has no sample
        labels = np.repeat(np.arange(len(counts)), counts)
        np.random.default_rng(1).shuffle(labels)
        call = f"{name}(labels with counts {counts})"
        with answer.calling(call, hint=_missing_class_hint(counts)):
            weights = _as_weights(answer.value(labels))
        present = np.array(counts)[np.array(counts) > 0]
        if weights.shape in ((len(counts),), (len(present),)) and weights.shape != (len(labels),):
            raise Failed(f"{call} returned {len(weights)} weights for {len(labels)} labels: one per class. "
                         "WeightedRandomSampler needs one weight per sample: index the class weights by the labels")
        if weights.shape != (len(labels),):
            raise Failed(f"{call} returned shape {weights.shape}; expected ({len(labels)},), one weight per sample")
        if weights.dtype.kind in "iub":
            raise Failed(f"{call} returned integer weights ({weights.dtype}): 1 // count floors to 0 for every class of "
                         "more than one sample; divide with 1.0 / count")
        weights = weights.astype(np.float64)
        if not np.all(np.isfinite(weights)) or np.any(weights <= 0):
            raise Failed(f"{call} returned weights that are not all positive and finite")
        mass = np.bincount(labels, weights=weights, minlength=len(counts))[np.array(counts) > 0]
        if np.allclose(mass, mass[0], rtol=1e-6):
            continue
        share = f"{call}: classes get total weight {np.round(mass / mass.sum(), 3).tolist()}"
        class_counts = np.bincount(labels)[labels].astype(np.float64)
        for model, mistake in (
            (class_counts, "each weight is its class's count: use 1 / count, so a rare class weighs more"),
            (np.ones(len(labels)), "every sample has the same weight, so nothing is rebalanced: use 1 / (its class's count)"),
            (np.repeat(1.0 / present, present), "the weights follow labels sorted by class (np.repeat), but the labels are "
             "shuffled: look each sample's weight up by its own label, class_weights[labels]"),
            (1.0 / np.sqrt(class_counts), "1 / sqrt(count) softens the imbalance but does not remove it: use 1 / count"),
        ):
            if _proportional(weights, model):
                raise Failed(f"{share}: {mistake}")
        raise Failed(f"{share}; 1 / (its class's count) gives every class the same share")
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
    Wrong(lambda labels, n: list(WeightedRandomSampler(imbalance.sample_weights(labels), n)), "repeats its draws every epoch"),
])
def check_balanced_sampler(answer: Answer) -> str:
    """Exercise 02.2: a sampler whose draws are balanced across classes, from the whole dataset, new in every epoch."""
    name = answer.name
    labels = np.repeat(np.arange(3), [900, 90, 10])
    np.random.default_rng(2).shuffle(labels)
    call = f"{name}(labels with counts [900, 90, 10], num_samples=3000)"
    with seeded_randomness(), answer.calling(call, hint=_without_replacement):
        sampler = answer.value(labels, 3000)
        if isinstance(sampler, (np.ndarray, torch.Tensor)):
            raise Failed(f"{call} returned the weights (a {type(sampler).__name__} of {len(sampler)}), not a sampler: pass "
                         "them to WeightedRandomSampler(weights, num_samples, replacement=True) and return that")
        epochs = [np.array(list(sampler), dtype=np.int64) for _ in range(2)]
    drawn = epochs[0]
    if len(drawn) and len(epochs[1]) != len(drawn):
        raise Failed(f"{call}: iterating it twice (two epochs) drew {len(drawn)} then {len(epochs[1])} indices: an "
                     "iterator or generator is used up after one pass; return a sampler that draws again each time it is "
                     "iterated (a WeightedRandomSampler does)")
    if len(drawn) != 3000:
        if len(drawn) < len(labels):
            why = f" of the {len(labels)}: draw from the whole dataset, not from a fixed subset"
        elif len(np.unique(drawn)) == len(drawn):
            why = " and never the same index twice: replacement=False draws each index at most once"
        else:
            why = ""
        raise Failed(f"{call} drew {len(drawn)} indices{why}; the epoch should have num_samples=3000")
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
    if np.array_equal(np.sort(epochs[0]), np.sort(epochs[1])):
        order = "in the same order" if np.array_equal(epochs[0], epochs[1]) else "only shuffled into another order"
        raise Failed(f"{call}: iterating the sampler twice (two epochs) drew the same 3000 indices, {order}, so it "
                     "repeats its draws every epoch: draw afresh in each __iter__ (a WeightedRandomSampler does), don't "
                     "replay or reshuffle a list drawn once, or re-seed a generator inside __iter__")
    majority = np.unique(np.concatenate(epochs)[labels[np.concatenate(epochs)] == 0])
    if len(majority) < 450:
        raise Failed(f"{call}: two epochs drew only {len(majority)} of the 900 majority samples (a weighted draw from the "
                     "whole dataset reaches about 800): weight every sample, don't draw from a fixed subset")
    return f"{name} drew classes in shares {np.round(share, 2).tolist()} from {len(distinct)} distinct samples, new each epoch"


def _described(value: object) -> str:
    """A tensor by its shape (its values would fill the screen), anything else by its repr."""
    return f"a tensor of shape {list(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)


def _focal_by_hand(logits: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    """The focal loss from its definition in float64, independent of helpers.losses: the check's expected values."""
    log_p = logits.double() - torch.logsumexp(logits.double(), dim=1, keepdim=True)
    log_p_t = log_p[torch.arange(len(target)), target]
    return torch.mean(-torch.pow(1 - torch.exp(log_p_t), gamma) * log_p_t)


def _focal_hint(got: float, logits: torch.Tensor, target: torch.Tensor, gamma: float, expected: float) -> str:
    """The likely mistake behind a wrong focal loss value, from the values the typical ones give."""
    ce = F.cross_entropy(logits.double(), target)
    models = [
        (-expected, "the sign is flipped: the loss is -(1 - p_t)**gamma * log(p_t), which is positive"),
        (expected * len(target), "that is the sum over the batch: take the mean"),
        ((1 - torch.exp(-ce)).pow(gamma).item() * ce.item(), "the factor (1 - p_t)**gamma was applied to the batch's "
         "mean cross-entropy: weight each sample's -log(p_t) by its own (1 - p_t)**gamma, then take the mean"),
    ]
    if gamma != int(gamma):
        models.append((_focal_by_hand(logits, target, float(int(gamma))).item(), f"that is the loss for gamma="
                       f"{int(gamma)}: gamma={gamma} is not a whole number, so use (1 - p_t) ** gamma, not int(gamma)"))
    for value, hint in models:
        if math.isclose(got, value, rel_tol=1e-4, abs_tol=1e-6) and not math.isclose(value, expected, rel_tol=1e-4):
            return " " + hint[0].upper() + hint[1:] + "."
    if gamma == 0:
        return " At gamma=0 it must equal F.cross_entropy."
    return (" Multiply -log(p_t) by the focusing factor (1 - p_t)**gamma, where p_t is the softmax probability "
            "of each sample's *true* class.")


def _focal_without_one_minus(logits: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    log_p_t = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return (-(log_p_t.exp() ** gamma) * log_p_t).mean()


def _focal_detached(logits: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    log_p_t = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return (-((1 - log_p_t.exp().detach()) ** gamma) * log_p_t).mean()


def _focal_log_of_softmax(logits: torch.Tensor, target: torch.Tensor, gamma: float) -> torch.Tensor:
    p_t = torch.softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    return (-((1 - p_t) ** gamma) * torch.log(p_t)).mean()


@exercise("02.3", "my_focal_loss", right=focal_loss, wrong=[
    Wrong(lambda x, t, g: F.cross_entropy(x, t), "gamma=0.5"),  # forgets the focusing term
    Wrong(lambda x, t, g: focal_loss(x, t, g, reduction="sum"), "the sum over the batch"),
    Wrong(lambda x, t, g: (-(1 - F.softmax(x, 1)) ** g * F.log_softmax(x, 1)).sum(1).mean(), "gamma=0.0"),  # all classes, not p_t
    Wrong(lambda x, t, g: focal_loss(x, t, g, reduction="none"), "0-d tensor"),
    Wrong(_focal_log_of_softmax, "F.log_softmax"),  # log(softmax) underflows for a large logit
    Wrong(_focal_without_one_minus, "(1 - p_t)**gamma"),  # p_t**gamma: right at gamma=0 only
    Wrong(lambda x, t, g: torch.tensor(focal_loss(x, t, g).item()), "no graph"),  # a number, not a loss to train with
    Wrong(_focal_detached, "don't .detach()"),  # the right value, a wrong gradient
    Wrong(lambda x, t, g: focal_loss(x, t, int(g)), "not a whole number"),
])
def check_focal_loss(answer: Answer) -> str:
    """Exercise 02.3: a focal loss equal to -(1 - p_t)^gamma log(p_t) averaged over the batch, value and gradient."""
    name = answer.name
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(32, 4, generator=generator) * 3
    target = torch.randint(0, 4, (32,), generator=generator)
    assert torch.allclose(_focal_by_hand(logits, target, 0.0), F.cross_entropy(logits.double(), target))
    for gamma in (0.0, 0.5, 1.0, 2.0, 2.5, 5.0):
        call = f"{name}(logits, target, gamma={gamma})"
        leaf = logits.clone().requires_grad_(True)
        with answer.calling(call):
            got = answer.value(leaf, target.clone(), gamma)
        if not isinstance(got, torch.Tensor) or got.ndim != 0:
            raise Failed(f"{call} returned {_described(got)}; expected a 0-d tensor (the mean over the batch)")
        expected_loss = _focal_by_hand(logits, target, gamma)
        if not math.isclose(got.item(), expected_loss.item(), rel_tol=1e-4, abs_tol=1e-6):
            hint = _focal_hint(got.item(), logits, target, gamma, expected_loss.item())
            raise Failed(f"{call} returned {got.item():.5f}, expected {expected_loss.item():.5f}.{hint}")
        if got.grad_fn is None:
            raise Failed(f"{call} returned the right value as a tensor with no graph (grad_fn is None), so "
                         "loss.backward() cannot train: build it from logits with torch operations (.item(), "
                         "torch.tensor(...), numpy or .detach() cut the graph)")
        if gamma < 1:
            continue  # (1 - p_t)**gamma has no finite slope at p_t = 1 for gamma < 1: compare gradients where it has one
        with answer.calling(f"loss.backward() on {call}"):
            got.backward()
        reference = logits.double().clone().requires_grad_(True)
        _focal_by_hand(reference, target, gamma).backward()
        if leaf.grad is None or not torch.allclose(leaf.grad.double(), reference.grad, rtol=1e-3, atol=1e-6):
            error = "none reached logits" if leaf.grad is None else \
                f"max error {(leaf.grad.double() - reference.grad).abs().max().item():.2g}"
            raise Failed(f"{call} has the right value but the wrong gradient ({error}): don't .detach() p_t or "
                         "(1 - p_t)**gamma, the gradient flows through both factors of -(1 - p_t)**gamma * log(p_t)")
    confident = torch.tensor([[200.0, 0.0], [0.0, 200.0], [1.0, -1.0]])  # sample 0's true class has p_t = exp(-200)
    confident_target = torch.tensor([1, 1, 0])
    for gamma in (0.0, 2.0):
        call = f"{name}(logits {confident.tolist()}, target {confident_target.tolist()}, gamma={gamma})"
        with answer.calling(call):
            got = answer.value(confident.clone(), confident_target.clone(), gamma)
        expected = _focal_by_hand(confident, confident_target, gamma).item()
        if not isinstance(got, torch.Tensor) or got.ndim != 0:
            raise Failed(f"{call} returned {_described(got)}; expected a 0-d tensor (the mean over the batch)")
        if not torch.isfinite(got):
            raise Failed(f"{call} returned {got.item()}, expected {expected:.5f}: softmax gives p_t = exp(-200), "
                         "which is 0 in float32, and log(0) = -inf. Compute log(p_t) with F.log_softmax, which stays finite")
        if not math.isclose(got.item(), expected, rel_tol=1e-4, abs_tol=1e-6):
            raise Failed(f"{call} returned {got.item():.5f}, expected {expected:.5f}: compute log(p_t) with "
                         "F.log_softmax and gather the true class's column")
    return (f"{name} matches -(1 - p_t)^gamma log(p_t) for gamma 0 to 5 (cross-entropy at 0), its gradient too, "
            "also for logits of 200")


COVERAGE_CASES: tuple[Case, ...] = (
    Case(([900, 100], 0.9), 4144, "each draw picks a given majority sample with probability 1/(2*900): "
         "solve 1 - (1 - 1/1800)^S >= 0.9 for the smallest S"),
    Case(([100, 900], 0.9), 4144, "the majority class is the largest count, wherever it is"),
    Case(([4000, 400, 40], 0.5), 8318, "three classes: each gets 1/3 of the draws"),
    Case(([3, 1, 2], 0.99), 40, "C = 3 classes, n = 3: 1 - (8/9)^39 = 0.9899 misses 0.99, 1 - (8/9)^40 = 0.9910 reaches it"),
    Case(([2, 1], 0.5), 3, "C = 2, n = 2: 1 - (3/4)^2 = 0.44 misses 0.5, 1 - (3/4)^3 = 0.58 reaches it"),
    Case(([900, 100], 0.0), ValueError, "coverage must be in (0, 1): 0 needs no samples"),
    Case(([900, 100], 1.0), ValueError, "coverage must be in (0, 1): 1 is never certain when drawing with replacement"),
    Case(([900, 100], -0.5), ValueError, "coverage must be in (0, 1): a negative coverage is bad input"),
    Case(([900, 100], 1.5), ValueError, "coverage must be in (0, 1): no epoch sees more than all of the class"),
)


def _draws(counts: list[int], coverage: float, per_draw: float) -> float:
    """The exact S, unrounded, for a given sample's per-draw probability (the typical answers' variants)."""
    return math.log(1 - coverage) / math.log1p(-per_draw)


COVERAGE_MISTAKES: tuple[Mistake, ...] = (
    (lambda c, cov: math.ceil(-len(c) * max(c) * math.log(1 - cov)), "that is the exp(-S / (C n)) approximation, which "
     "can be a draw off: solve the exact 1 - (1 - 1/(C n))^S >= coverage"),
    (lambda c, cov: round(_draws(c, cov, 1 / (len(c) * max(c)))), "round() can land below the coverage: the smallest S "
     "that reaches it is the ceiling, math.ceil"),
    (lambda c, cov: int(_draws(c, cov, 1 / (len(c) * max(c)))), "int() truncates below the coverage: the smallest S "
     "that reaches it is the ceiling, math.ceil"),
    (lambda c, cov: math.ceil(_draws(c, cov, 1 / sum(c))), "that uses the dataset size sum(counts): a given sample of "
     "the largest class is drawn with probability 1/(C n), C = len(counts), n = max(counts)"),
    (lambda c, cov: math.ceil(_draws(c, cov, 1 / (len(c) * min(c)))), "n is the largest class's count, max(counts), "
     "wherever it is in counts (not the first, not the smallest)"),
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
          "a float"),
    Wrong(lambda c, cov: math.ceil(math.log(1 - cov) / math.log1p(-1 / (len(c) * max(c)))) if cov < 1 else 0, "expected ValueError"),
    Wrong(lambda c, cov: math.ceil(-len(c) * max(c) * math.log(1 - cov)) if 0 < cov < 1 else coverage_right(c, cov),
          "exp(-S / (C n)) approximation"),
])
def check_num_samples_for_coverage(answer: Answer) -> str:
    """Exercise 02.4: the smallest num_samples whose balanced epoch sees `coverage` of the majority class."""
    return answer.cases(COVERAGE_CASES, int, COVERAGE_MISTAKES,
                     type_hint=": S counts draws, a whole number; math.ceil returns an int (np.ceil and / give floats)")
