"""The same tokenized sentences batched by a padding collate_fn (pad to the longest, with an attention mask).

Origin: modelled on HuggingFace transformers' DataCollatorWithPadding (pad `input_ids` to the batch's longest,
add `attention_mask`, stack `labels`) passed as DataLoader(collate_fn=...), the fix the forum threads give.
"""
from __future__ import annotations

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader

from doctor_corpus.text_default_collate import Tokenized

# Written before lesson 08's rule existed as frozenset() (healthy: the crash fixed). With padding-waste registered
# it is a finding here: lengths 5-40 in random batches of 32 pad to about 40, so 47 % of positions are padding
# (measured); transformers' own answer is TrainingArguments(group_by_length=True), text_length_grouped.py.
EXPECTED: frozenset[str] = frozenset({"padding-waste"})
BUDGET_S = 5.0
FAST = True


def pad_collate(rows: list[dict]) -> dict[str, torch.Tensor]:
    """Pad input_ids with 0 to the longest in the batch; attention_mask marks the real tokens."""
    ids = pad_sequence([r["input_ids"] for r in rows], batch_first=True, padding_value=0)
    lengths = torch.tensor([len(r["input_ids"]) for r in rows])
    mask = (torch.arange(ids.shape[1]) < lengths[:, None]).long()
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.tensor([r["labels"] for r in rows])}


def make_loader() -> DataLoader:
    """Batches of 32, padded; no workers (the Trainer's default dataloader_num_workers=0): the items are cheap."""
    return DataLoader(Tokenized(), batch_size=32, shuffle=True, collate_fn=pad_collate)
