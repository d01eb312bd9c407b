"""A worker_init_fn that gives each of 2 spawned workers one torch thread per core, for a transform that is a torch matmul.

Origin: modelled on the workaround discussed in pytorch/pytorch#82219 (call torch.set_num_threads in worker_init_fn)
with the count set to "all cores" (os.cpu_count()), the oversubscription transferable-samplers/transferable-samplers#12
fixed: 2 workers x one intra-op thread per core. Spawned, because under fork the same loader hangs
(torch_threads_fork_hang).
"""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

from doctor_corpus import _data

EXPECTED = frozenset({"threads-oversubscribed"})
NEEDS = "multi-core"
BUDGET_S = 30.0  # two spawned loaders, started once each, then the comparison; the doctor stops when done
FAST = False


def worker_init(worker_id: int) -> None:
    """Undo DataLoader's one thread per worker: one intra-op thread per usable core, in every worker."""
    torch.set_num_threads(_data.cores())


class Projected(Dataset):
    """Seeded random features (128 x 512) per item, projected by a fixed 512x512 matrix (torch matmul, multi-threaded)."""

    def __init__(self, n: int = 1024) -> None:
        self.projection = torch.randn(512, 512, generator=torch.Generator().manual_seed(0)) / 512**0.5
        self.targets = torch.arange(n) % 4

    def __len__(self) -> int:
        return len(self.targets)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        features = torch.randn(128, 512, generator=torch.Generator().manual_seed(i))
        return torch.tanh(features @ self.projection), self.targets[i]


def make_loader() -> DataLoader:
    """2 spawned, persistent workers, each on one thread per core."""
    return DataLoader(Projected(), batch_size=16, shuffle=True, num_workers=2, persistent_workers=True,
                      worker_init_fn=worker_init, multiprocessing_context="spawn", pin_memory=torch.cuda.is_available())
