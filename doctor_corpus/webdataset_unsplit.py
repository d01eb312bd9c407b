"""WebDataset tar shards read by a DataPipeline without wds.split_by_worker: each of 2 workers reads every shard.

Origin: modelled on the webdataset README's explicit DataPipeline (webdataset/webdataset#138, #341: SimpleShardList,
split_by_node, split_by_worker, tarfile_to_samples, ...) with the split_by_worker stage left out; the duplicates it gives
are what webdataset/webdataset#160 asks about and lhotse-speech/lhotse#707 fixed.
"""
from __future__ import annotations

import webdataset as wds
from torch.utils.data import DataLoader

from doctor_corpus import _data

EXPECTED = frozenset({"iterable-duplicates"})
FAST = True


def make_loader() -> DataLoader:
    """4 shards of 128 samples, 2 workers, no worker split."""
    dataset = wds.DataPipeline(wds.SimpleShardList(_data.shards()), wds.tarfile_to_samples(), wds.decode(),
                               wds.to_tuple("input.npy", "cls"))
    return DataLoader(dataset, batch_size=16, num_workers=2)
