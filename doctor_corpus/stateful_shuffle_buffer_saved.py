"""The same shuffle-buffer stream, its state holding the buffer's content too: a resumed run is the uninterrupted one.

Origin: modelled on torchdata's StatefulDataLoader documentation, "Saving Custom State with Iterable-Style Datasets"
(state_dict/load_state_dict on the dataset carry everything its next items depend on).
"""
from __future__ import annotations

from torchdata.stateful_dataloader import StatefulDataLoader

from doctor_corpus._streams import BufferedStream

EXPECTED: frozenset[str] = frozenset()
FAST = True
RESUME = True
BUDGET_S = 10.0


def make_loader() -> StatefulDataLoader:
    """480 items through a buffer of 32 that is saved, batches of 16, no workers."""
    return StatefulDataLoader(BufferedStream(480, buffer=32, keep_buffer=True), batch_size=16)
