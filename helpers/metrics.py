"""Scores that an imbalanced dataset cannot fool: per-class recall, balanced accuracy, macro-F1 (lesson 01)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from helpers._validate import as_int, as_labels


def confusion_matrix(y_true: Any, y_pred: Any, num_classes: int) -> np.ndarray:
    """Counts[t, p] of samples of true class t predicted as p (lesson 01)."""
    num_classes = as_int("num_classes", num_classes, minimum=1)
    truth = as_labels("y_true", y_true, num_classes)
    pred = as_labels("y_pred", y_pred, num_classes)
    if truth.shape != pred.shape:
        raise ValueError(f"y_true and y_pred must have the same length, got {len(truth)} and {len(pred)}")
    return np.bincount(truth * num_classes + pred, minlength=num_classes * num_classes).reshape(num_classes, num_classes)


def per_class_recall(y_true: Any, y_pred: Any, num_classes: int) -> np.ndarray:
    """Fraction of each class's samples predicted as that class (NaN for a class with no sample) (lesson 01)."""
    matrix = confusion_matrix(y_true, y_pred, num_classes)
    support = matrix.sum(axis=1)
    with np.errstate(invalid="ignore"):  # 0 / 0 for a class with no sample: NaN
        return np.diag(matrix) / support


def balanced_accuracy(y_true: Any, y_pred: Any, num_classes: int) -> float:
    """Mean per-class recall over the classes present in y_true (lesson 01)."""
    return float(np.nanmean(per_class_recall(y_true, y_pred, num_classes)))


def macro_f1(y_true: Any, y_pred: Any, num_classes: int) -> float:
    """Unweighted mean of per-class F1 over classes present in y_true or y_pred (lesson 01)."""
    matrix = confusion_matrix(y_true, y_pred, num_classes)
    true_pos = np.diag(matrix)
    support, predicted = matrix.sum(axis=1), matrix.sum(axis=0)
    present = (support + predicted) > 0
    f1 = 2 * true_pos[present] / (support[present] + predicted[present])
    return float(f1.mean())


def accuracy(y_true: Any, y_pred: Any) -> float:
    """Fraction of samples predicted right: the score imbalance fools (lesson 01)."""
    truth, pred = as_labels("y_true", y_true), as_labels("y_pred", y_pred)
    if truth.shape != pred.shape or truth.size == 0:
        raise ValueError(f"y_true and y_pred must be non-empty and of equal length, got {len(truth)} and {len(pred)}")
    return float((truth == pred).mean())


def scores(y_true: Any, y_pred: Any, num_classes: int, minority: int | None = None) -> dict[str, float]:
    """Accuracy, balanced accuracy, macro-F1 and the recall of class `minority` (default: the rarest in y_true)."""
    truth = as_labels("y_true", y_true)  # its classes are checked against num_classes by per_class_recall
    if truth.size == 0:
        raise ValueError("y_true is empty: there is nothing to score")
    recall = per_class_recall(truth, y_pred, num_classes)
    if minority is None:
        counts = np.bincount(truth)
        minority = int(np.argmin(np.where(counts > 0, counts, np.inf)))  # the rarest class present
    minority = as_int("minority", minority, minimum=0)
    if minority >= num_classes:
        raise ValueError(f"minority must be a class id below num_classes={num_classes}, got {minority}")
    return {
        "accuracy": accuracy(truth, y_pred),
        "balanced_accuracy": float(np.nanmean(recall)),
        "macro_f1": macro_f1(truth, y_pred, num_classes),
        "minority_recall": float(recall[minority]),
    }


@dataclass(frozen=True)
class SeedSpread:
    """Scores over several seeds, per metric: the mean, the sample standard deviation (ddof=1) and the min and max (lesson 02)."""

    mean: np.ndarray
    std: np.ndarray
    low: np.ndarray
    high: np.ndarray

    def overlaps(self, other: SeedSpread, column: int) -> bool:
        """True when the two min-max ranges of metric `column` overlap: the seeds cannot tell the two apart."""
        column = as_int("column", column, minimum=0)
        if column >= len(self.mean):
            raise ValueError(f"column must be below the number of metrics ({len(self.mean)}), got {column}")
        return bool(self.low[column] <= other.high[column] and other.low[column] <= self.high[column])


def over_seeds(rows: Any) -> SeedSpread:
    """Summarise one row of metric values per seed (at least 2 seeds) as mean, std (ddof=1), min and max (lesson 02)."""
    array = np.asarray(rows, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] < 2 or array.shape[1] < 1:
        raise ValueError(f"rows must be a 2-D table with one row per seed and at least 2 seeds, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"rows must hold finite scores, got {array.tolist()}")
    return SeedSpread(array.mean(axis=0), array.std(axis=0, ddof=1), array.min(axis=0), array.max(axis=0))
