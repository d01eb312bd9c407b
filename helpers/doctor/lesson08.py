"""The doctor's rule whose fix lesson 08 teaches: batches of sequences that are mostly padding."""
from __future__ import annotations

from typing import Any

import torch

from helpers.doctor.findings import Finding
from helpers.doctor.registry import Observation, finding, rule

PADDING_SHARE = 0.3  # share of the padded positions that hold no token
MASK_KEYS = ("attention_mask",)  # a dict batch's 0/1 mask of real tokens (Hugging Face's name; lesson 08's collate)


def _real_token_mask(batch: Any) -> torch.Tensor | None:
    """A dict batch's (batch, length) 0/1 attention mask of real tokens, or None."""
    if not isinstance(batch, dict):
        return None
    for key in MASK_KEYS:
        mask = batch.get(key)
        if isinstance(mask, torch.Tensor) and mask.ndim == 2 and mask.numel():
            if bool(((mask == 0) | (mask == 1)).all()):
                return mask
    return None


@rule("padding-waste", severities=("warning",), phase="pass", planted="padded",
      taught_in=("08_variable_length", "1. The symptom: padding"),
      thresholds={"PADDING_SHARE": (PADDING_SHARE, "share of the batches' padded positions that are padding")})
def padding_waste(obs: Observation) -> Finding | None:
    """The share of padding in the batches read, from their attention_mask: positions computed for nothing."""
    masks = [m for m in (_real_token_mask(b) for b in (obs.kept or [obs.first_batch])) if m is not None]
    if not masks:
        obs.skipped["padding-waste"] = "no 'attention_mask' (0/1, batch x length) in the batches read"
        return None
    positions = sum(m.numel() for m in masks)
    real = sum(int(m.sum()) for m in masks)
    share = 1 - real / positions
    obs.measured.update(padding_share=share)
    if share < PADDING_SHARE:
        return None
    return finding(
        "padding-waste", "warning",
        f"{share:.0%} of the {positions:,} positions in {len(masks)} batches were padding (attention_mask): the model "
        f"computes them and learns nothing from them",
        "batch documents of similar lengths (a bucketing batch sampler), cap batches by tokens, or pack documents into "
        "rows with a document mask (helpers.sequence_samplers.BucketBatchSampler; lesson 08)",
        padding_share=share, positions=positions, real_tokens=real, batches=len(masks))
