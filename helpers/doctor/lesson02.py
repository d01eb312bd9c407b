"""The doctor's rules whose fixes lesson 02 teaches: weighted samplers used wrongly, and a class mix far from even."""
from __future__ import annotations

import math
import time

import numpy as np
from torch.utils.data import WeightedRandomSampler

from helpers.doctor.findings import Finding
from helpers.doctor.measure import dataset_labels, length, sampled_labels, summary
from helpers.doctor.reading import LoaderFailed
from helpers.doctor.registry import Observation, finding, rule
from helpers.samplers import DistributedWeightedSampler

RAREST_SHARE = 0.5   # a class delivered at under this fraction of an equal share (1/C) ...
NOISE_LEVEL = 0.01   # ... with this chance or less of so few at half an equal share by sampling noise (binomial, x C classes: Bonferroni)
MAX_DRAWS = 100_000


def _weighted(obs: Observation) -> WeightedRandomSampler | DistributedWeightedSampler | None:
    sampler = obs.loader.sampler
    if obs.loader.batch_sampler is not None and hasattr(obs.loader.batch_sampler, "sampler"):
        sampler = obs.loader.batch_sampler.sampler
    return sampler if isinstance(sampler, (WeightedRandomSampler, DistributedWeightedSampler)) else None


def _draw(obs: Observation, sampler: WeightedRandomSampler | DistributedWeightedSampler) -> np.ndarray:
    """Indices the sampler draws (up to MAX_DRAWS, within the budget); its own error is a LoaderFailed."""
    if obs.draws is None:
        started, drawn = time.perf_counter(), []
        try:
            for i, index in enumerate(iter(sampler)):
                if i >= MAX_DRAWS or obs.left() <= 0:
                    break
                drawn.append(int(index))
        except Exception as exc:  # noqa: BLE001 - the learner's sampler; its error is the finding
            raise LoaderFailed(summary(exc), time.perf_counter() - started, False, "drawing from the sampler", exc) from None
        obs.draws = np.asarray(drawn, dtype=np.int64)
        obs.measured["sampler_draws"] = len(drawn)
    return obs.draws


@rule("no-replacement-weights", severities=("warning",), phase="static", planted="no_replacement",
      taught_in=("02_rebalancing", "6. Trap 2: `replacement=False` rebalances nothing"))
def no_replacement_weights(obs: Observation) -> Finding | None:
    """replacement=False over a whole epoch: a weighted permutation, every sample once."""
    sampler = _weighted(obs)
    if sampler is None or getattr(sampler, "replacement", True):
        return None
    draws = _draw(obs, sampler)
    weights = len(sampler.weights)
    num_samples = getattr(sampler, "num_samples", len(draws))
    if num_samples < weights or len(draws) == 0:
        return None
    counts = np.bincount(draws, minlength=weights)
    return finding(
        "no-replacement-weights", "warning",
        f"replacement=False with num_samples={num_samples} over {weights} weights: {len(draws)} draws took "
        f"{int(np.count_nonzero(counts))} distinct samples, each at most {int(counts.max())} time(s): the epoch's class mix is the dataset's",
        "use replacement=True to rebalance (lesson 02), or drop the sampler if you did not mean to",
        num_samples=num_samples, num_weights=weights, draws=len(draws), max_count=int(counts.max()))


@rule("class-weights-as-sample-weights", severities=("error", "warning"), phase="pass", planted="class_weights",
      taught_in=("02_rebalancing", "5. Trap 1: per-class weights passed as per-sample weights"))
def class_weights_as_sample_weights(obs: Observation) -> Finding | None:
    """Fewer sampler weights than samples: an error when there is one per class, else a warning (part of the data unreachable)."""
    sampler = _weighted(obs)
    n_data = length(obs.loader.dataset)
    if sampler is None or n_data is None or len(sampler.weights) >= n_data:
        return None
    draws = _draw(obs, sampler)
    weights = len(sampler.weights)
    known = dataset_labels(obs.loader.dataset)
    if known is None:  # read some items straight from the dataset: the sampler's own draws reach only its first samples
        try:
            known = sampled_labels(obs.loader.dataset, time.perf_counter() + min(1.0, max(0.0, obs.left() / 10)))
        except Exception:  # noqa: BLE001 - an item that fails here will fail the first pass too; say less
            known = None
    classes = len(np.unique(known)) if known is not None else None
    per_class = classes is not None and weights == classes
    reached = f"of {len(draws)} draws, every index was below {int(draws.max()) + 1 if len(draws) else 0}"
    message = (f"the sampler has {weights} weights for {n_data} samples, one per class of the dataset's {classes}: {reached}, "
               "so only the first samples are ever read" if per_class else
               f"the sampler has {weights} weights for {n_data} samples ({'the dataset has ' + str(classes) + ' classes' if classes else 'no class count known'}): "
               f"{reached}; the other {n_data - weights} samples are never read")
    return finding(
        "class-weights-as-sample-weights", "error" if per_class else "warning", message,
        "give the sampler one weight per sample: weights = class_weights[labels] (helpers.imbalance.sample_weights)",
        num_weights=weights, dataset_size=n_data, classes=classes, draws=len(draws),
        distinct=int(np.count_nonzero(np.bincount(draws))) if len(draws) else 0, largest_index=int(draws.max()) if len(draws) else None)


def binomial_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p), summed in log space."""
    if p <= 0:
        return 1.0
    if p >= 1:
        return 1.0 if k >= n else 0.0
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * math.log(p) + (n - i) * math.log1p(-p)
            for i in range(0, min(k, n) + 1)]
    top = max(logs)
    return min(1.0, math.exp(top) * sum(math.exp(v - top) for v in logs))


@rule("unbalanced-batches", severities=("warning",), phase="pass", planted="unbalanced",
      taught_in=("02_rebalancing", "3. Batch composition, measured"),
      thresholds={"RAREST_SHARE": (RAREST_SHARE, "rarest class's delivered share, as a fraction of an equal share"),
                  "NOISE_LEVEL": (NOISE_LEVEL, "chance of so few at half an equal share by sampling noise (binomial, Bonferroni over the classes)")})
def unbalanced_batches(obs: Observation) -> Finding | None:
    """The rarest class below half an equal share, and unlikely (binomial, Bonferroni over the classes) at half an equal share by sampling noise."""
    labels = obs.labels
    if labels is None:
        obs.skipped["unbalanced-batches"] = "no labels found in the batches (a tuple ending in labels, or a dict key 'label'/'target'/'y')"
        return None
    known = dataset_labels(obs.loader.dataset)
    classes = int(max(labels.max(), known.max() if known is not None else 0)) + 1
    counts = np.bincount(labels, minlength=classes)
    present = np.flatnonzero(np.bincount(known, minlength=classes)) if known is not None else np.flatnonzero(counts)
    rarest = int(present[np.argmin(counts[present])])
    n, floor = len(labels), RAREST_SHARE / len(present)
    chance = min(1.0, len(present) * binomial_cdf(int(counts[rarest]), n, floor))  # Bonferroni: any of the classes
    obs.measured.update(batch_class_shares=[round(float(c / n), 4) for c in counts], rarest_class_share=round(float(counts[rarest] / n), 4))
    if counts[rarest] / n >= floor:
        return None
    if chance > NOISE_LEVEL:
        obs.skipped["unbalanced-batches"] = (f"class {rarest} is {counts[rarest] / n:.1%} of {n} samples read, under half an equal "
                                             f"share ({floor:.1%}), but at that share sampling noise gives {int(counts[rarest])} or fewer "
                                             f"with chance {chance:.3g} (binomial, x {len(present)} classes: Bonferroni), over "
                                             f"{NOISE_LEVEL}: read more to tell")
        return None
    dataset_share = float(np.mean(known == rarest)) if known is not None else None
    versus = f" (dataset: {dataset_share:.1%})" if dataset_share is not None else ""
    return finding(
        "unbalanced-batches", "warning",
        f"class {rarest} is {counts[rarest] / n:.1%} of {n} delivered samples{versus}, against an equal share of "
        f"{1 / len(present):.1%} for {len(present)} classes; at half an equal share ({floor:.1%}), sampling noise would give "
        f"{int(counts[rarest])} or fewer of {n} with chance {chance:.1e} (binomial, x {len(present)} classes: Bonferroni)",
        "rebalance with a per-sample WeightedRandomSampler or weight the loss by class (lesson 02); if the loss is already weighted, this is expected",
        rarest_class=rarest, rarest_share=float(counts[rarest] / n), dataset_share=dataset_share, classes=len(present),
        samples=n, noise_chance=chance)
