"""The doctor's rule whose fix lesson 08 teaches: batches of sequences that are mostly padding."""
from __future__ import annotations

from helpers.doctor.findings import Finding
from helpers.doctor.registry import Observation, finding, rule

PADDING_SHARE = 0.3  # share of the padded positions that hold no token


@rule("padding-waste", severities=("warning",), phase="pass", planted="padded",
      taught_in=("08_variable_length", "1. The symptom: padding"),
      thresholds={"PADDING_SHARE": (PADDING_SHARE, "share of the batches' padded positions that are padding")})
def padding_waste(obs: Observation) -> Finding | None:
    """The share of padding over every batch the first pass read, from their attention_mask (0/1, batch x length)."""
    if not obs.padding:
        obs.skipped["padding-waste"] = f"no 'attention_mask' (0/1, batch x length) in the {obs.batches} batches read"
        return None
    positions = sum(p for p, _ in obs.padding)
    real = sum(r for _, r in obs.padding)
    share = 1 - real / positions
    judged = len(obs.padding)
    read = f"all {judged} batches read" if judged == obs.batches else f"the {judged} of {obs.batches} batches read that had one"
    obs.measured.update(padding_share=share, padding_batches=judged)
    if share < PADDING_SHARE:
        return None
    return finding(
        "padding-waste", "warning",
        f"{share:.0%} of the {positions:,} positions in {read} were padding (counted where attention_mask == 0): a dense "
        "model computes every position, padding included; padding reaches the loss only through the outputs the loss "
        "reads: a per-token loss must mask it (ignore_index, or weighted by attention_mask), or it trains on it too",
        "batch documents of similar lengths (a bucketing batch sampler: helpers.sequence_samplers.BucketBatchSampler) or "
        "pack documents into rows with a document mask (lesson 08)",
        padding_share=share, positions=positions, real_tokens=real, batches=judged, batches_read=obs.batches)
