"""A StatefulDataLoader over a stream with a shuffle buffer whose state keeps the source position but not the buffer.

Origin: modelled on huggingface/datasets#7444 ("Loading a state dict of a shuffle buffer of a dataset without the buffer
content. The shuffle buffer will be refilled before starting to yield new examples."): resumed mid-epoch, the items that
were in the buffer never come.
"""
from __future__ import annotations

from torchdata.stateful_dataloader import StatefulDataLoader

from doctor_corpus._streams import BufferedStream

EXPECTED: frozenset[str] = frozenset({"resume-mismatch"})
EVIDENCE = {"resume-mismatch": {"lost": [31, 0], "points": ["mid-epoch"]}}
EXIT = 1  # an error: samples lost
FAST = True
RESUME = True
BUDGET_S = 10.0


def make_loader() -> StatefulDataLoader:
    """480 items through a buffer of 32, batches of 16, no workers."""
    return StatefulDataLoader(BufferedStream(480, buffer=32), batch_size=16)
