"""Lesson 02's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import RandomSampler, Sampler, SubsetRandomSampler, WeightedRandomSampler

from helpers.checks.core import Wrong


# ================================================================ 02.1 per_sample_weights(labels)
def weights_per_class(labels):
    """1 / np.bincount(labels): one weight per class, not per sample (the colleague's bug)."""
    return 1.0 / np.bincount(np.asarray(labels))


def weights_are_counts(labels):
    """count[label], not 1 / count: favours the majority."""
    labels = np.asarray(labels)
    return np.bincount(labels)[labels].astype(float)


def weights_floor_division(labels):
    """1 // count: integer division gives 0 for every class with more than one sample."""
    labels = np.asarray(labels)
    return (1 // np.bincount(labels))[labels]


def weights_uniform(labels):
    """1 / len(labels) for every sample: nothing is rebalanced."""
    return np.full(len(labels), 1.0 / len(labels))


def weights_unique_counts_indexed_by_label(labels):
    """np.unique's counts indexed by the label: breaks when a class has no sample."""
    labels = np.asarray(labels)
    counts = np.unique(labels, return_counts=True)[1]
    return 1.0 / counts[labels]


def weights_repeat_assumes_sorted(labels):
    """np.repeat(1 / counts, counts): only right when the labels are sorted by class."""
    counts = np.bincount(np.asarray(labels))
    counts = counts[counts > 0]
    return np.repeat(1.0 / counts, counts)


def weights_inverse_sqrt(labels):
    """1 / sqrt(count): softer weights, the classes' totals are not equal."""
    labels = np.asarray(labels)
    return 1.0 / np.sqrt(np.bincount(labels)[labels])


def weights_per_class_tensor(labels):
    """torch: 1 / torch.bincount(labels), a per-class tensor again."""
    return 1.0 / torch.bincount(torch.as_tensor(labels)).double()


# ---------------------------------------------------------------- 02.1 right answers
def weights_as_float64_tensor(labels):
    """Right, a float64 torch tensor."""
    labels = torch.as_tensor(np.asarray(labels))
    return 1.0 / torch.bincount(labels).double()[labels]


def weights_as_python_list(labels):
    """Right, a list of Python floats from a dict of counts."""
    labels = np.asarray(labels).tolist()
    counts = {}
    for label in labels:
        counts[label] = counts.get(label, 0) + 1
    return [1 / counts[label] for label in labels]


# ================================================================ 02.2 balanced_sampler(labels, num_samples)
def _inverse(labels):
    labels = np.asarray(labels)
    return torch.as_tensor(1.0 / np.bincount(labels)[labels], dtype=torch.float64)


def sampler_per_class_weights(labels, num_samples):
    """The colleague's bug: per-class weights, so only indices 0..C-1 are drawn."""
    return WeightedRandomSampler(1.0 / np.bincount(np.asarray(labels)), num_samples)


def sampler_without_replacement(labels, num_samples):
    """replacement=False: the minority runs out, so the epoch is not balanced."""
    return WeightedRandomSampler(_inverse(labels), min(num_samples, len(labels)), replacement=False)


def sampler_ignores_num_samples(labels, num_samples):
    """num_samples=len(labels): the epoch size asked for is ignored."""
    return WeightedRandomSampler(_inverse(labels), len(labels))


class FrozenDraw(Sampler):
    """Draws once in __init__ and replays the same indices every epoch."""

    def __init__(self, labels, num_samples):
        self.indices = list(WeightedRandomSampler(_inverse(labels), num_samples))

    def __iter__(self):
        return iter(self.indices)

    def __len__(self):
        return len(self.indices)


def sampler_frozen_draw(labels, num_samples):
    """A list drawn once: every epoch repeats the same draws."""
    return FrozenDraw(labels, num_samples)


class ReseededEveryEpoch(Sampler):
    """A fresh torch.Generator().manual_seed(0) in every __iter__: each epoch repeats the last."""

    def __init__(self, labels, num_samples):
        self.weights, self.num_samples = _inverse(labels), num_samples

    def __iter__(self):
        generator = torch.Generator().manual_seed(0)
        return iter(torch.multinomial(self.weights, self.num_samples, True, generator=generator).tolist())

    def __len__(self):
        return self.num_samples


def sampler_reseeded_every_epoch(labels, num_samples):
    """Reseeds the same generator at each epoch: the draws repeat epoch after epoch."""
    return ReseededEveryEpoch(labels, num_samples)


def sampler_uniform(labels, num_samples):
    """A RandomSampler with replacement: uniform over samples, not over classes."""
    return RandomSampler(range(len(labels)), replacement=True, num_samples=num_samples)


def sampler_undersampled_subset(labels, num_samples):
    """Undersamples once: a fixed subset of the majority, never the whole dataset."""
    labels = np.asarray(labels)
    rng = np.random.default_rng(0)
    smallest = np.bincount(labels)[np.bincount(labels) > 0].min()
    keep = np.concatenate([rng.choice(np.flatnonzero(labels == c), smallest, replace=False)
                           for c in np.unique(labels)])
    return SubsetRandomSampler(keep.tolist())


def sampler_count_weights(labels, num_samples):
    """Weights = the class count: draws the majority even more."""
    labels = np.asarray(labels)
    return WeightedRandomSampler(np.bincount(labels)[labels].astype(float), num_samples)


def sampler_generator(labels, num_samples):
    """A generator function: its first pass draws, the second finds it used up (an empty epoch)."""
    for index in torch.multinomial(_inverse(labels), num_samples, True):
        yield int(index)


def sampler_iterator_of_weighted(labels, num_samples):
    """iter(WeightedRandomSampler(...)): an iterator, used up after the first epoch."""
    return iter(WeightedRandomSampler(_inverse(labels), num_samples))


def sampler_drawn_once_reshuffled(labels, num_samples):
    """One weighted draw, reshuffled each epoch: the same indices every epoch, in a new order."""
    return SubsetRandomSampler(list(WeightedRandomSampler(_inverse(labels), num_samples)))


def sampler_returns_weights(labels, num_samples):
    """Returns the per-sample weights themselves, not a sampler over them."""
    return _inverse(labels)


# ---------------------------------------------------------------- 02.2 right answers
def sampler_scaled_list_weights(labels, num_samples):
    """Right, N / count weights (any scale works) as a list of Python floats."""
    labels = np.asarray(labels)
    counts = np.bincount(labels)
    return WeightedRandomSampler((len(labels) / counts[labels]).tolist(), num_samples, replacement=True)


class ClassThenSample(Sampler):
    """A class uniformly, then a sample of it uniformly, fresh draws each epoch."""

    def __init__(self, labels, num_samples):
        labels = np.asarray(labels)
        self.members = [torch.as_tensor(np.flatnonzero(labels == c)) for c in np.unique(labels)]
        self.num_samples = num_samples
        self.generator = torch.Generator().manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))

    def __iter__(self):
        classes = torch.randint(len(self.members), (self.num_samples,), generator=self.generator)
        for c in classes.tolist():
            members = self.members[c]
            yield int(members[torch.randint(len(members), (1,), generator=self.generator)])

    def __len__(self):
        return self.num_samples


def sampler_class_then_sample(labels, num_samples):
    """Right, a different algorithm: a uniform class, then a uniform sample of it."""
    return ClassThenSample(labels, num_samples)


# ================================================================ 02.3 my_focal_loss(logits, target, gamma)
def _log_pt(logits, target):
    return F.log_softmax(logits, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)


def focal_log_of_softmax(logits, target, gamma):
    """torch.log(softmax): log(0) = -inf at large logits."""
    p = torch.softmax(logits, dim=1).gather(1, target.unsqueeze(1)).squeeze(1)
    return (-(1 - p) ** gamma * torch.log(p)).mean()


def focal_detached_weight(logits, target, gamma):
    """p_t detached in the (1 - p_t)^gamma factor: the value is right, the gradient is not."""
    log_pt = _log_pt(logits, target)
    return (-(1 - log_pt.exp().detach()) ** gamma * log_pt).mean()


def focal_sum(logits, target, gamma):
    """Sums over the batch instead of taking the mean."""
    log_pt = _log_pt(logits, target)
    return (-(1 - log_pt.exp()) ** gamma * log_pt).sum()


def focal_no_minus(logits, target, gamma):
    """Forgets the minus sign: a negative loss."""
    log_pt = _log_pt(logits, target)
    return ((1 - log_pt.exp()) ** gamma * log_pt).mean()


def focal_pt_to_the_gamma(logits, target, gamma):
    """p_t^gamma instead of (1 - p_t)^gamma."""
    log_pt = _log_pt(logits, target)
    return (-(log_pt.exp()) ** gamma * log_pt).mean()


def focal_without_graph(logits, target, gamma):
    """Computes the number, then wraps it in a new tensor: no graph, no gradient."""
    log_pt = _log_pt(logits, target)
    return torch.tensor((-(1 - log_pt.exp()) ** gamma * log_pt).mean().item())


def focal_gather_wrong_dim(logits, target, gamma):
    """gather along dim 0: picks rows by class number, not each sample's class column."""
    log_p = F.log_softmax(logits, dim=1)
    log_pt = log_p.gather(0, target.unsqueeze(1).expand(-1, logits.shape[1]))[:, 0]
    return (-(1 - log_pt.exp()) ** gamma * log_pt).mean()


def focal_on_batch_mean(logits, target, gamma):
    """Applies the factor to the batch-mean cross-entropy: right only for one sample (or gamma=0)."""
    ce = F.cross_entropy(logits, target)
    return (1 - torch.exp(-ce)) ** gamma * ce


def focal_no_reduction(logits, target, gamma):
    """Returns the per-sample losses, not their mean."""
    log_pt = _log_pt(logits, target)
    return -(1 - log_pt.exp()) ** gamma * log_pt


def focal_integer_gamma(logits, target, gamma):
    """int(gamma): right for gamma = 0, 1, 2, wrong for 0.5 or 2.5."""
    log_pt = _log_pt(logits, target)
    return (-(1 - log_pt.exp()) ** int(gamma) * log_pt).mean()


def focal_sigmoid(logits, target, gamma):
    """Binary (sigmoid) focal loss per class, not the softmax probability of the true class."""
    p = torch.sigmoid(logits).gather(1, target.unsqueeze(1)).squeeze(1)
    return (-(1 - p) ** gamma * F.logsigmoid(logits).gather(1, target.unsqueeze(1)).squeeze(1)).mean()


# ---------------------------------------------------------------- 02.3 right answers
def focal_from_cross_entropy(logits, target, gamma):
    """Right, from per-sample cross_entropy: p_t = exp(-ce)."""
    ce = F.cross_entropy(logits, target, reduction="none")
    return ((1 - torch.exp(-ce)) ** gamma * ce).mean()


def focal_via_nll_loss(logits, target, gamma):
    """Right, weighting every log-probability and letting F.nll_loss pick and average."""
    log_p = F.log_softmax(logits, dim=1)
    return F.nll_loss((1 - log_p.exp()) ** gamma * log_p, target)


def focal_one_hot(logits, target, gamma):
    """Right, with a one-hot mask instead of gather."""
    log_p = F.log_softmax(logits, dim=-1)
    log_pt = (log_p * F.one_hot(target, logits.shape[-1]).to(log_p.dtype)).sum(-1)
    return torch.mean(-torch.pow(1 - torch.exp(log_pt), gamma) * log_pt)


# ================================================================ 02.4 num_samples_for_coverage(counts, coverage)
def _refuse(coverage):
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")


def coverage_exp_approximation(counts, coverage):
    """The lesson's exp(-S / (C n)) approximation: can be one draw off."""
    _refuse(coverage)
    return math.ceil(-len(counts) * max(counts) * math.log(1 - coverage))


def coverage_rounded(counts, coverage):
    """round() instead of ceil: can fall one draw short of the coverage."""
    _refuse(coverage)
    return round(math.log(1 - coverage) / math.log(1 - 1 / (len(counts) * max(counts))))


def coverage_floor(counts, coverage):
    """int() truncates: one draw short of the coverage."""
    _refuse(coverage)
    return int(math.log(1 - coverage) / math.log(1 - 1 / (len(counts) * max(counts))))


def coverage_float(counts, coverage):
    """np.ceil returns a float, not an int."""
    _refuse(coverage)
    return np.ceil(np.log(1 - coverage) / np.log(1 - 1 / (len(counts) * max(counts))))


def coverage_first_count(counts, coverage):
    """n = counts[0]: only right when the largest class comes first."""
    _refuse(coverage)
    return math.ceil(math.log(1 - coverage) / math.log(1 - 1 / (len(counts) * counts[0])))


def coverage_total_samples(counts, coverage):
    """Uses the dataset size N = sum(counts) in place of C x n."""
    _refuse(coverage)
    return math.ceil(math.log(1 - coverage) / math.log(1 - 1 / sum(counts)))


def coverage_no_validation(counts, coverage):
    """Never raises: coverage=0 returns 0 and coverage=1 divides by -inf or fails another way."""
    if coverage <= 0:
        return 0
    return math.ceil(math.log(max(1 - coverage, 1e-300)) / math.log(1 - 1 / (len(counts) * max(counts))))


def coverage_validates_upper_only(counts, coverage):
    """Raises for coverage >= 1 but accepts 0 and negative coverage."""
    if coverage >= 1:
        raise ValueError(f"coverage must be below 1, got {coverage}")
    if coverage <= 0:
        return 0
    return math.ceil(math.log(1 - coverage) / math.log(1 - 1 / (len(counts) * max(counts))))


def coverage_smallest_class(counts, coverage):
    """n = min(counts): the smallest class, not the largest."""
    _refuse(coverage)
    return math.ceil(math.log(1 - coverage) / math.log(1 - 1 / (len(counts) * min(counts))))


# ---------------------------------------------------------------- 02.4 right answers
def coverage_by_search(counts, coverage):
    """Right, by multiplying (1 - 1/(C n)) until the coverage is reached."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage={coverage} must lie strictly between 0 and 1")
    keep = 1 - 1 / (len(counts) * max(counts))
    s, missed = 0, 1.0
    while 1 - missed < coverage:
        missed *= keep
        s += 1
    return s


def coverage_numpy_int(counts, coverage):
    """Right, log1p closed form, fixed up to the exact expression, as an np.int64."""
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must satisfy 0 < coverage < 1, got {coverage}")
    p = 1 / (len(counts) * int(np.max(counts)))
    s = np.int64(np.ceil(np.log1p(-coverage) / np.log1p(-p)))
    while s > 0 and 1 - (1 - p) ** (s - 1) >= coverage:
        s -= 1
    while 1 - (1 - p) ** s < coverage:
        s += 1
    return s


WRONG = {
    "02.1": [
        Wrong(weights_per_class, 'one per class'),
        Wrong(weights_are_counts, "each weight is its class's count"),
        Wrong(weights_floor_division, 'integer weights'),
        Wrong(weights_uniform, 'nothing is rebalanced'),
        Wrong(weights_unique_counts_indexed_by_label, 'np.bincount(labels), which keeps a 0'),
        Wrong(weights_repeat_assumes_sorted, 'the labels are shuffled'),
        Wrong(weights_inverse_sqrt, '1 / sqrt(count)'),
        Wrong(weights_per_class_tensor, 'one per class'),
    ],
    "02.2": [
        Wrong(sampler_per_class_weights, 'per-class weights were passed as per-sample weights'),
        Wrong(sampler_without_replacement, 'replacement=False'),
        Wrong(sampler_ignores_num_samples, 'the epoch should have num_samples=3000'),
        Wrong(sampler_frozen_draw, 'repeats its draws every epoch'),
        Wrong(sampler_reseeded_every_epoch, 'repeats its draws every epoch'),
        Wrong(sampler_uniform, "weight each sample by 1 / (its class's count)"),
        Wrong(sampler_undersampled_subset, 'not from a fixed subset'),
        Wrong(sampler_count_weights, "weight each sample by 1 / (its class's count)"),
        Wrong(sampler_generator, 'used up after one pass'),
        Wrong(sampler_iterator_of_weighted, 'used up after one pass'),
        Wrong(sampler_drawn_once_reshuffled, 'only shuffled into another order'),
        Wrong(sampler_returns_weights, 'not a sampler'),
    ],
    "02.3": [
        Wrong(focal_log_of_softmax, 'F.log_softmax'),
        Wrong(focal_detached_weight, "don't .detach()"),
        Wrong(focal_sum, 'the sum over the batch'),
        Wrong(focal_no_minus, 'sign is flipped'),
        Wrong(focal_pt_to_the_gamma, '(1 - p_t)**gamma'),
        Wrong(focal_without_graph, 'no graph'),
        Wrong(focal_gather_wrong_dim, 'must equal F.cross_entropy'),
        Wrong(focal_on_batch_mean, "batch's mean cross-entropy"),
        Wrong(focal_no_reduction, '0-d tensor'),
        Wrong(focal_integer_gamma, 'not a whole number'),
        Wrong(focal_sigmoid, 'must equal F.cross_entropy'),
    ],
    "02.4": [
        Wrong(coverage_exp_approximation, 'exp(-S / (C n)) approximation'),
        Wrong(coverage_rounded, 'round() can land below'),
        Wrong(coverage_floor, 'int() truncates'),
        Wrong(coverage_float, 'math.ceil returns an int'),
        Wrong(coverage_first_count, 'max(counts)'),
        Wrong(coverage_total_samples, 'dataset size sum(counts)'),
        Wrong(coverage_no_validation, 'expected ValueError'),
        Wrong(coverage_validates_upper_only, 'expected ValueError'),
        Wrong(coverage_smallest_class, 'max(counts)'),
    ],
}
RIGHT = {
    "02.1": [weights_as_float64_tensor, weights_as_python_list],
    "02.2": [sampler_scaled_list_weights, sampler_class_then_sample],
    "02.3": [focal_from_cross_entropy, focal_via_nll_loss, focal_one_hot],
    "02.4": [coverage_by_search, coverage_numpy_int],
}
