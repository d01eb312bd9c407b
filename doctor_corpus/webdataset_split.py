"""The same WebDataset shards with split_by_node and split_by_worker: each worker reads its own shards.

Origin: modelled on the webdataset README's DataPipeline as tmbdev gives it in webdataset/webdataset#138 and #341
(SimpleShardList, split_by_node, split_by_worker, tarfile_to_samples, decode, to_tuple).
"""
from __future__ import annotations

import webdataset as wds
from torch.utils.data import DataLoader

from doctor_corpus import _data

EXPECTED: frozenset[str] = frozenset()
FAST = True


def make_loader() -> DataLoader:
    """4 shards of 128 samples, 2 workers, split by node and by worker."""
    dataset = wds.DataPipeline(wds.SimpleShardList(_data.shards()), wds.split_by_node, wds.split_by_worker,
                               wds.tarfile_to_samples(), wds.decode(), wds.to_tuple("input.npy", "cls"))
    return DataLoader(dataset, batch_size=16, num_workers=2, persistent_workers=True)
