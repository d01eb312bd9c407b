"""Variable-length sequences (lesson 08): a seeded corpus, padding, packing with document masks, and what they cost."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

from helpers._validate import as_int, short

PAD_ID = 0  # the token id of padding; documents use ids 1..vocab_size-1


def corpus_lengths(num_docs: int, max_len: int = 256, seed: int = 0) -> np.ndarray:
    """Long-tailed document lengths (log-normal, median max_len * 0.4, clipped to [8, max_len]), seeded."""
    num_docs, max_len = as_int("num_docs", num_docs, minimum=1), as_int("max_len", max_len, minimum=8)
    rng = np.random.default_rng(as_int("seed", seed, minimum=0))
    drawn = rng.lognormal(np.log(0.4 * max_len), 0.8, num_docs)
    return np.clip(np.round(drawn), 8, max_len).astype(np.int64)


class TokenCorpus(Dataset):
    """Seeded documents (token ids, label) of the given lengths; longer documents are class 1 more often."""

    def __init__(self, lengths: Sequence[int] | np.ndarray, vocab_size: int = 1000, seed: int = 0) -> None:
        self.lengths = as_lengths("lengths", lengths)
        self.vocab_size = as_int("vocab_size", vocab_size, minimum=2)
        self.seed = as_int("seed", seed, minimum=0)
        chance = 0.1 + 0.8 * self.lengths / self.lengths.max()  # P(class 1) rises with the length
        self.labels = (np.random.default_rng(self.seed).random(len(self.lengths)) < chance).astype(np.int64)

    def __len__(self) -> int:
        return len(self.lengths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        rng = np.random.default_rng([self.seed, int(index)])  # the same tokens in any process, any order
        tokens = rng.integers(1, self.vocab_size, int(self.lengths[index]))
        return torch.from_numpy(tokens), int(self.labels[index])


def as_lengths(name: str, lengths: Any) -> np.ndarray:
    """Sequence lengths as a non-empty 1-D int64 array of positive whole numbers."""
    if isinstance(lengths, torch.Tensor):
        lengths = lengths.detach().cpu().numpy()
    if not isinstance(lengths, (list, tuple, np.ndarray, range)):
        raise TypeError(f"{name} must be a 1-D sequence of lengths, got {type(lengths).__name__}")
    array = np.asarray(lengths)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D sequence, got shape {tuple(array.shape)}")
    if not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must hold whole numbers of tokens, got dtype {array.dtype}")
    if array.min() < 1:
        raise ValueError(f"{name} must be at least 1 token each, got {int(array.min())}")
    return array.astype(np.int64)


def pad_collate(batch: Sequence[tuple[torch.Tensor, int]],
                pad_id: int = PAD_ID) -> dict[str, torch.Tensor]:
    """Pad (tokens, label) pairs to the longest: input_ids, attention_mask (True = real), labels."""
    if not batch:
        raise ValueError("batch must hold at least one (tokens, label) pair, got an empty batch")
    pad_id = as_int("pad_id", pad_id, minimum=0)
    longest = max(len(tokens) for tokens, _ in batch)
    input_ids = torch.full((len(batch), longest), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(batch), longest), dtype=torch.bool)
    for row, (tokens, _) in enumerate(batch):
        input_ids[row, : len(tokens)] = tokens
        attention_mask[row, : len(tokens)] = True
    labels = torch.tensor([label for _, label in batch])
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def padding_share(attention_mask: torch.Tensor) -> float:
    """The share of a padded batch's positions that are padding (attention_mask: True or 1 = real token)."""
    if not isinstance(attention_mask, torch.Tensor):
        raise TypeError(f"attention_mask must be a tensor, got {type(attention_mask).__name__}")
    if attention_mask.ndim != 2 or attention_mask.numel() == 0:
        raise ValueError(f"attention_mask must be a non-empty (batch, length) tensor, got {tuple(attention_mask.shape)}")
    if not bool(((attention_mask == 0) | (attention_mask == 1)).all()):
        raise ValueError("attention_mask must hold only 0/1 or False/True")
    return 1.0 - float(attention_mask.bool().sum()) / attention_mask.numel()


def batch_padding_share(lengths: np.ndarray, batches: Sequence[Sequence[int]]) -> float:
    """Padding share of batches given as index lists, each padded to its longest: 1 - real / padded tokens."""
    lengths = as_lengths("lengths", lengths)
    real = sum(int(lengths[list(b)].sum()) for b in batches)
    padded = sum(len(b) * int(lengths[list(b)].max()) for b in batches)
    return 1.0 - real / padded


@dataclass(frozen=True)
class PackedRows:
    """Documents packed into rows: token ids, the document of each position (-1 = padding), restarting positions."""

    input_ids: torch.Tensor
    doc_ids: torch.Tensor
    position_ids: torch.Tensor

    def padding_share(self) -> float:
        """The share of the rows' positions that hold no document."""
        return float((self.doc_ids < 0).float().mean())


def pack_lengths(lengths: Sequence[int] | np.ndarray, row_len: int) -> list[list[int]]:
    """First-fit decreasing: longest first, each into the first row with room; indices per row."""
    lengths, row_len = as_lengths("lengths", lengths), as_int("row_len", row_len, minimum=1)
    if lengths.max() > row_len:
        index = int(np.argmax(lengths))
        raise ValueError(f"document {index} has {int(lengths[index])} tokens, more than "
                         f"row_len={row_len}: split it or raise row_len")
    rows: list[list[int]] = []
    room: list[int] = []
    for doc in np.argsort(-lengths, kind="stable").tolist():
        fits = next((r for r, free in enumerate(room) if free >= lengths[doc]), None)
        if fits is None:
            rows.append([])
            room.append(row_len)
            fits = len(rows) - 1
        rows[fits].append(doc)
        room[fits] -= int(lengths[doc])
    return rows


def pack(documents: Sequence[torch.Tensor], row_len: int) -> PackedRows:
    """Documents packed whole into rows of row_len tokens (pack_lengths), positions restarting at each."""
    if not documents:
        raise ValueError("documents must hold at least one document, got none")
    rows = pack_lengths([len(d) for d in documents], row_len)
    input_ids = torch.full((len(rows), row_len), PAD_ID, dtype=torch.long)
    doc_ids = torch.full((len(rows), row_len), -1, dtype=torch.long)
    position_ids = torch.zeros((len(rows), row_len), dtype=torch.long)
    for r, docs in enumerate(rows):
        at = 0
        for doc in docs:
            n = len(documents[doc])
            input_ids[r, at : at + n] = documents[doc]
            doc_ids[r, at : at + n] = doc
            position_ids[r, at : at + n] = torch.arange(n)  # each document starts again at position 0
            at += n
    return PackedRows(input_ids, doc_ids, position_ids)


def document_mask(doc_ids: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Who may attend to whom in packed rows (True = allowed): the same document only (and earlier tokens, if causal).

    Padding positions attend to themselves alone, so that no softmax row is empty.
    """
    if not isinstance(doc_ids, torch.Tensor) or doc_ids.ndim != 2:
        raise ValueError(f"doc_ids must be a (rows, length) tensor, got {short(doc_ids)}")
    same = doc_ids[:, :, None] == doc_ids[:, None, :]
    allowed = same & (doc_ids[:, :, None] >= 0)
    if causal:
        allowed &= torch.ones(doc_ids.shape[1], doc_ids.shape[1], dtype=torch.bool).tril()
    return allowed | torch.eye(doc_ids.shape[1], dtype=torch.bool)


def cross_document_attention(doc_ids: torch.Tensor, allowed: torch.Tensor, dim: int = 16, seed: int = 0) -> float:
    """Mean attention weight a real token puts on other documents' tokens, random queries and keys, under `allowed`."""
    if allowed.shape != (*doc_ids.shape, doc_ids.shape[1]) or allowed.dtype != torch.bool:
        raise ValueError(f"allowed must be a bool (rows, length, length) mask for doc_ids of shape "
                         f"{tuple(doc_ids.shape)}, got {allowed.dtype} {tuple(allowed.shape)}")
    generator = torch.Generator().manual_seed(as_int("seed", seed, minimum=0))
    query = torch.randn(*doc_ids.shape, dim, generator=generator)
    key = torch.randn(*doc_ids.shape, dim, generator=generator)
    scores = (query @ key.transpose(1, 2) / dim**0.5).masked_fill(~allowed, float("-inf"))
    weights = scores.softmax(dim=-1)
    real = doc_ids >= 0
    other = (doc_ids[:, :, None] != doc_ids[:, None, :]) & real[:, None, :]
    return float((weights * other).sum(-1)[real].mean())


def tiny_encoder(vocab_size: int = 1000, max_len: int = 256, dim: int = 32, heads: int = 2,
                 seed: int = 0) -> nn.Module:
    """The lesson's model: token and position embeddings and one TransformerEncoder layer, seeded, training mode."""
    torch.manual_seed(as_int("seed", seed, minimum=0))
    layer = nn.TransformerEncoderLayer(dim, heads, 2 * dim, dropout=0.0, batch_first=True)
    model = nn.ModuleDict({"embed": nn.Embedding(vocab_size, dim), "position": nn.Embedding(max_len, dim),
                           "encoder": nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)})
    return model.train()


def encode(model: nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, *,
           key_padding: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None) -> torch.Tensor:
    """tiny_encoder's output; key_padding True = padding, attn_mask True = NOT allowed (nn's convention)."""
    if position_ids is None:
        position_ids = torch.arange(input_ids.shape[1]).expand_as(input_ids)
    hidden = model["embed"](input_ids) + model["position"](position_ids)
    return model["encoder"](hidden, mask=attn_mask, src_key_padding_mask=key_padding)


def train_step(model: nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None, *,
               key_padding: torch.Tensor | None = None, attn_mask: torch.Tensor | None = None) -> None:
    """One forward and backward pass through tiny_encoder (a stand-in loss: the outputs' mean square)."""
    encode(model, input_ids, position_ids, key_padding=key_padding, attn_mask=attn_mask).square().mean().backward()


@dataclass(frozen=True)
class StepTimes:
    """Wall-clock and CPU seconds of some training steps; other programs can stretch only the first."""

    wall_s: float
    cpu_s: float


def time_padded_batches(model: nn.Module, batches: Sequence[dict[str, torch.Tensor]]) -> StepTimes:
    """Wall and CPU seconds to run train_step over padded batches (from pad_collate), padding masked."""
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        train_step(model, batch["input_ids"], key_padding=~batch["attention_mask"])
    return StepTimes(time.perf_counter() - wall, time.process_time() - cpu)


def time_packed_rows(model: nn.Module, packed: Sequence[PackedRows]) -> StepTimes:
    """Wall and CPU seconds to run train_step over packed rows, each token kept to its own document (the masks are
    built before the clock starts, as a collate_fn in the loader would)."""
    heads = model["encoder"].layers[0].self_attn.num_heads
    blocked = [(~document_mask(rows.doc_ids, causal=False)).repeat_interleave(heads, dim=0)  # True = NOT allowed
               for rows in packed]
    wall, cpu = time.perf_counter(), time.process_time()
    for rows, mask in zip(packed, blocked):
        train_step(model, rows.input_ids, rows.position_ids, attn_mask=mask)
    return StepTimes(time.perf_counter() - wall, time.process_time() - cpu)


def saved_activation_bytes(model: nn.Module, input_ids: torch.Tensor,
                           key_padding: torch.Tensor) -> int:
    """Bytes of the tensors autograd saves for backward in one forward pass: activation memory."""
    seen: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> torch.Tensor:
        seen[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    with torch.autograd.graph.saved_tensors_hooks(keep, lambda tensor: tensor):
        encode(model, input_ids, key_padding=key_padding)
    return sum(nbytes for pointer, nbytes in seen.items() if pointer not in parameters)
