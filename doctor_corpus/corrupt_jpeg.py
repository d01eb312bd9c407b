"""An ImageFolder where one JPEG was cut short (an interrupted download): its decode raises in a worker.

Origin: modelled on pytorch/vision#138 and the many "OSError: image file is truncated (N bytes not processed)" reports
(e.g. lucidrains/stylegan2-pytorch#7, "Caught OSError in DataLoader worker process 0"); the error names no file.
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from doctor_corpus import _data

EXPECTED = frozenset({"loader-error"})
FAST = True
BAD_INDEX = 5  # the truncated sample: class_0/img_0005.jpg, read in the first batch


def make_loader() -> DataLoader:
    """Two workers over 64 JPEGs in order, sample 5 truncated."""
    dataset = _data.ImageFolder(_data.jpeg_folder("corrupt", classes=2, per_class=32, truncate=BAD_INDEX))
    return DataLoader(dataset, batch_size=16, num_workers=2, pin_memory=torch.cuda.is_available())
