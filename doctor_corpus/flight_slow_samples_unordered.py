"""The huge-images dataset of flight_huge_images_slow_samples read with in_order=False, as for inference or evaluation.

Origin: modelled on pytorch/pytorch#141833 and #142324 (DataLoader's in_order=False, added because "a handful of slow
to process samples holds up smaller and faster to process samples") and alibaba/TorchEasyRec#623 (in_order exposed to
avoid head-of-line blocking from slower workers). in_order=False already lets ready batches through, so head-of-line
must stay silent; the 31 huge files (1.5%, 40x a typical read, about 38% of the read time, as slow in the main
process) are still slow samples, which in_order does not change: slow-samples is expected.
"""
from __future__ import annotations

from torch.utils.data import DataLoader

from doctor_corpus.flight_huge_images_slow_samples import ScrapedImages

EXPECTED = frozenset({"slow-samples"})
BUDGET_S = 15.0
FAST = False
NEEDS = "multi-core"


def make_loader() -> DataLoader:
    """2 persistent workers, batches of 32, shuffled, in_order=False."""
    return DataLoader(ScrapedImages(), batch_size=32, shuffle=True, num_workers=2, persistent_workers=True, in_order=False)
