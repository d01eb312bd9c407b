"""Losses for imbalanced classification (lesson 02)."""
from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

REDUCTIONS: tuple[str, ...] = ("mean", "sum", "none")


def focal_loss(
    logits: torch.Tensor, target: torch.Tensor, gamma: float = 2.0, alpha: Any = None, reduction: str = "mean"
) -> torch.Tensor:
    """Multi-class softmax focal loss -alpha_t (1 - p_t)^gamma log p_t (Lin et al. 2017); gamma=0, alpha=None is cross-entropy (lesson 02)."""
    if not isinstance(logits, torch.Tensor) or logits.ndim != 2:
        raise ValueError(f"logits must be a 2-D tensor [batch, classes], got {getattr(logits, 'shape', type(logits).__name__)}")
    if not isinstance(target, torch.Tensor) or target.ndim != 1 or target.dtype != torch.int64:
        raise ValueError(f"target must be a 1-D int64 tensor of class ids, got {getattr(target, 'shape', type(target).__name__)}"
                         f" {getattr(target, 'dtype', '')}".rstrip())
    if len(target) != len(logits):
        raise ValueError(f"target has {len(target)} entries but logits has {len(logits)} rows")
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not gamma >= 0:
        raise ValueError(f"gamma must be a number >= 0, got {gamma!r}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    log_p_t = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    loss = -((1.0 - log_p_t.exp()) ** gamma) * log_p_t  # gamma=0: (1 - p)^0 is 1, gradient included: cross-entropy
    if alpha is not None:
        weight = torch.as_tensor(alpha, dtype=logits.dtype, device=logits.device)
        if weight.shape != (logits.shape[1],) or bool((weight < 0).any()):
            raise ValueError(f"alpha must be None or {logits.shape[1]} non-negative per-class weights, got {alpha!r}")
        loss = loss * weight[target]
    if reduction == "mean":
        return loss.mean()
    return loss.sum() if reduction == "sum" else loss
