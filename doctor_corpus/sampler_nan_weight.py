"""Multi-label sample weights summed from a CSV's label columns, one cell left empty: every weight is NaN, the sampler raises.

Origin: modelled on a public multi-label sampler helper (Amelieee-m-c/tongue_full_struct, samplers.py): each label
column's positives counted over the table, each sample weighted by the sum of 1/count over its positive labels,
floored, and passed to WeightedRandomSampler with replacement. Planted: one label cell is empty in the CSV and read as
NaN, so that column's count is NaN and so is every sample's weight (0 x NaN is NaN; the floor keeps NaN). torch 2.13
reports it as "invalid multinomial distribution (encountering probability entry < 0)" though no weight is negative.
"""
from __future__ import annotations

import io

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler

EXPECTED = frozenset({"loader-error"})
EVIDENCE = {"loader-error": {"stage": "sampler", "sampler": "WeightedRandomSampler",
                             "weights": {"negative": 0, "nan": 2000, "infinite": 0, "zero": 0, "weights": 2000}}}
BUDGET_S = 5.0
FAST = True
NEEDS = "multi-core"  # two workers: the sampler's first draw happens in the main process as they start
LABELS = ("coated", "cracked", "red_tip", "teeth_marks", "spots")
SHARES = (0.5, 0.3, 0.1, 0.05, 0.02)  # each label's positive share
ROWS, FEATURES, EMPTY_CELL = 2000, 8, (1234, 3)


def table_csv(empty: bool = True) -> str:
    """The annotation table as CSV text: features, then one 0/1 column per label; with `empty`, one label cell is blank."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(ROWS, FEATURES)).round(4)
    labels = (rng.random((ROWS, len(LABELS))) < np.array(SHARES)).astype(int)
    header = ",".join([f"f{i}" for i in range(FEATURES)] + list(LABELS))
    lines = [header]
    for r in range(ROWS):
        cells = [str(v) for v in features[r]] + [str(v) for v in labels[r]]
        if empty and r == EMPTY_CELL[0]:
            cells[FEATURES + EMPTY_CELL[1]] = ""
        lines.append(",".join(cells))
    return "\n".join(lines) + "\n"


def read_table(text: str, fill: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Features (float32) and label columns (float32) of the CSV; an empty cell is NaN, or `fill` when given."""
    kwargs = {} if fill is None else {"filling_values": fill}
    data = np.genfromtxt(io.StringIO(text), delimiter=",", skip_header=1, dtype=np.float64, **kwargs)
    return data[:, :FEATURES].astype(np.float32), data[:, FEATURES:].astype(np.float32)


class Annotated(Dataset):
    """Rows of features with their multi-hot label vector."""

    def __init__(self, features: np.ndarray, labels: np.ndarray) -> None:
        self.features, self.labels = torch.from_numpy(features), torch.from_numpy(np.nan_to_num(labels))

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features[i], self.labels[i]


def per_sample_weights(labels: np.ndarray) -> torch.Tensor:
    """Each sample: the sum of 1/positives over its positive labels, floored at the rarest label's 1/positives."""
    inverse = 1.0 / (labels.sum(axis=0) + 1e-6)
    weights = np.maximum((labels * inverse[None, :]).sum(axis=1), np.min(inverse))
    return torch.as_tensor(weights, dtype=torch.float)


def loader_for(features: np.ndarray, labels: np.ndarray) -> DataLoader:
    """The weighted loader: replacement=True, num_samples = the rows, 2 workers."""
    sampler = WeightedRandomSampler(per_sample_weights(labels), num_samples=len(labels), replacement=True,
                                    generator=torch.Generator().manual_seed(0))
    return DataLoader(Annotated(features, labels), batch_size=32, sampler=sampler, num_workers=2)


def make_loader() -> DataLoader:
    """The table read as it is: the empty cell becomes NaN in the labels, and in every weight."""
    return loader_for(*read_table(table_csv()))
