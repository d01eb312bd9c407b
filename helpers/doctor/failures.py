"""A failing loader, read from its error: which part raised (sampler, dataset, collate_fn) and the fix that fits it (lesson 07)."""
from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, Sampler

# torch.multinomial's errors as WeightedRandomSampler raises them (torch 2.13, CPU): (text in the error, what it says).
# With replacement and num_samples > 1 a NaN or -inf weight is reported as "< 0"; without replacement, or for a
# single draw, one message covers negative, NaN and infinite weights.
MULTINOMIAL_ERRORS = (
    ("encountering probability entry < 0", "a weight is negative or NaN (torch.multinomial, drawing several with "
                                           "replacement, reports both as 'entry < 0')"),
    ("encountering probability entry = infinity", "a weight is infinite"),
    ("probability tensor contains either", "a weight is negative, NaN or infinite (torch.multinomial's check without "
                                           "replacement, or for a single draw, names all three at once)"),
    ("sum of probabilities <= 0", "the weights sum to 0: at least one must be positive"),
)
WEIGHTS_FIX = ("make every weight finite and >= 0, with at least one > 0, before building the sampler; "
               "`(~torch.isfinite(w) | (w < 0)).nonzero()` lists the bad ones, and helpers.imbalance.sample_weights "
               "gives one finite positive weight per sample from the labels (lesson 02)")


def _owner(frame: Any) -> Any:
    """The `self` of a traceback frame, or None."""
    try:
        return frame.f_locals.get("self")
    except Exception:  # noqa: BLE001 - a frame whose locals cannot be read names nothing
        return None


def raised_in(loader: DataLoader, error: BaseException | None) -> tuple[str, Any] | None:
    """The innermost part of `loader` (sampler, dataset, collate_fn) with a frame on `error`'s traceback, or None (a worker's error)."""
    if error is None:
        return None
    batch_sampler = loader.batch_sampler
    samplers = [s for s in (batch_sampler, getattr(batch_sampler, "sampler", None), loader.sampler) if s is not None]
    collate = loader.collate_fn
    collate_code = getattr(collate, "__code__", None) or getattr(getattr(collate, "func", None), "__code__", None)
    found = None
    tb = error.__traceback__
    while tb is not None:
        owner = _owner(tb.tb_frame)
        if owner is not None and (any(owner is s for s in samplers) or isinstance(owner, Sampler)):
            found = ("sampler", owner)
        elif owner is not None and (owner is loader.dataset or isinstance(owner, Dataset)):
            found = ("dataset", owner)
        elif (collate_code is not None and tb.tb_frame.f_code is collate_code) or (owner is not None and owner is collate):
            found = ("collate_fn", collate)
        tb = tb.tb_next
    return found


def sampler_of(loader: DataLoader) -> Any:
    """The sampler a loader draws indices from: torch's BatchSampler's own sampler, else the batch sampler given."""
    batch_sampler = loader.batch_sampler
    if batch_sampler is None or type(batch_sampler) is BatchSampler:
        return loader.sampler if batch_sampler is None else batch_sampler.sampler
    return batch_sampler


def describe_sampler(loader: DataLoader, owner: Any) -> str:
    """'the sampler (WeightedRandomSampler)', 'the batch sampler (X)', or 'a Y inside the batch sampler (X)'."""
    name, batch_sampler = type(owner).__name__, loader.batch_sampler
    if owner is batch_sampler:
        return f"the batch sampler ({name})"
    if batch_sampler is None or type(batch_sampler) is BatchSampler:  # torch's own only groups the sampler's indices
        return f"the sampler ({name})"
    return f"a {name} inside the batch sampler ({type(batch_sampler).__name__})"


def weight_counts(sampler: Any) -> dict[str, int] | None:
    """A weighted sampler's weights counted: negative, NaN, infinite, zero, all (None when it has no 1-D `weights`)."""
    weights = getattr(sampler, "weights", None)
    try:
        w = torch.as_tensor(weights, dtype=torch.float64) if weights is not None else None
    except Exception:  # noqa: BLE001 - not numbers: nothing to count
        return None
    if w is None or w.ndim != 1:
        return None
    return {"negative": int((w < 0).sum()), "nan": int(w.isnan().sum()), "infinite": int(w.isinf().sum()),
            "zero": int((w == 0).sum()), "weights": int(w.numel())}


def sampler_fix(text: str, sampler: Any) -> str:
    """The fix for a sampler's error, chosen from its text."""
    for needle, meaning in MULTINOMIAL_ERRORS:
        if needle in text:
            return f"{meaning}: {WEIGHTS_FIX}"
    if "cannot sample n_sample > prob_dist.size(-1)" in text:
        return "with replacement=False, num_samples must be at most len(weights); use replacement=True to draw more (lesson 02)"
    if "number of categories cannot exceed 2^24" in text:
        return ("torch.multinomial takes at most 2^24 = 16,777,216 weights: helpers.samplers.DistributedWeightedSampler"
                "(weights, num_replicas=1, rank=0) draws from more, with set_epoch(epoch) each epoch (lesson 02)")
    return (f"{type(sampler).__name__} raised it, not the dataset or collate_fn: run `list(iter(sampler))` alone for a plain "
            "traceback and fix the sampler (lesson 03)")


def fix_for(failure: Any, stage: str | None, owner: Any) -> str:
    """The fix that fits what failed, where it failed."""
    text = failure.summary
    if failure.while_ == "starting the workers" and ("pickle" in text or "Can't get attribute" in text):
        return ("each worker gets a pickled copy of the dataset under spawn/forkserver (the default on macOS, Windows and, from "
                "Python 3.14, Linux): open files (h5py, lmdb) lazily in the worker, on first use (lesson 06), and define "
                "datasets in an importable module, not a notebook (lesson 00)")
    if stage == "sampler":
        return sampler_fix(text, owner)
    if "stack expects each tensor to be equal size" in text:
        return "items of different sizes cannot be stacked: pass a collate_fn that pads them (torch.nn.utils.rnn.pad_sequence)"
    if "image file is truncated" in text or "cannot identify image file" in text:
        return ("a corrupt or truncated image: re-encode or remove the file the finding names (a pass over the dataset with "
                "num_workers=0 lists them all), rather than hiding it with PIL's LOAD_TRUNCATED_IMAGES")
    if failure.timed_out:
        return ("rerun with num_workers=0 and interrupt it to see where it waits; if start-up is just slow (the doctor waited "
                f"{failure.after_s:.1f} s for a batch), a larger --budget gives it longer (persistent_workers=True pays it once)")
    where = {"dataset": "the dataset's __getitem__ at the index named", "collate_fn": "the collate_fn"}.get(stage or "")
    if where:
        return f"rerun with num_workers=0 for a plain traceback and fix {where} (lesson 03)"
    return "rerun with num_workers=0 for a plain traceback and fix the dataset, sampler or collate_fn it names (lesson 03)"


def path_of(dataset: Any, index: int) -> str | None:
    """The file behind `index` in an ImageFolder-style dataset (`samples` or `imgs` of (path, label)), or None."""
    for name in ("samples", "imgs"):
        records = getattr(dataset, name, None)
        try:
            record = records[index] if records is not None else None
        except (IndexError, KeyError, TypeError):
            continue
        if isinstance(record, (tuple, list)) and record and isinstance(record[0], str):
            return record[0]
    return None


def counted(counts: dict[str, int]) -> str:
    """'3 negative, 0 NaN, 0 infinite and 0 zero of 2,000 weights'."""
    return (f"{counts['negative']:,} negative, {counts['nan']:,} NaN, {counts['infinite']:,} infinite and {counts['zero']:,} zero "
            f"of {counts['weights']:,} weights")

