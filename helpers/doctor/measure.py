"""Small measurements the doctor's rules share: ranks, memory pages, CPU time, labels, identities and padding in a batch (lesson 07)."""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
import time
from typing import Any

import numpy as np
import psutil
import torch
from torch.utils.data import TensorDataset

from helpers.batches import leaves
from helpers.env import usable_cpus

LABEL_KEYS = ("label", "labels", "target", "targets", "y")
KEY_KEYS = ("__key__", "key", "keys", "id", "ids")
MASK_KEYS = ("attention_mask",)  # a dict batch's 0/1 mask of real tokens (Hugging Face's name; lesson 08's collate)
MIB = 1024 * 1024


def ranks_on_node() -> int:
    """Ranks sharing this machine: LOCAL_WORLD_SIZE (torchrun), else the process group's size, else 1."""
    if os.environ.get("LOCAL_WORLD_SIZE", "").isdigit():
        return max(1, int(os.environ["LOCAL_WORLD_SIZE"]))
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1


def processes_over_cores(workers: int) -> int:
    """Loader processes on this machine (each rank's main process and `workers`) beyond the usable cores (0: within)."""
    return max(0, ranks_on_node() * (1 + workers) - usable_cpus())


def accelerator_available() -> bool:
    """Whether torch sees any accelerator (CUDA, MPS, XPU, ...)."""
    return bool(torch.accelerator.is_available())


def shm_free_bytes() -> int | None:
    """Free bytes in /dev/shm, or None where there is none."""
    return shutil.disk_usage("/dev/shm").free if os.path.isdir("/dev/shm") else None


def pages(pid: int) -> dict[str, float] | None:
    """A process's memory shared with others and private to it, in MiB (/proc/PID/smaps_rollup, Linux 4.14+); None if unreadable."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            kib = {p[0].rstrip(":"): int(p[1]) for p in (line.split() for line in f) if len(p) >= 3 and p[1].isdigit()}
    except OSError:
        return None
    return {"shared": (kib.get("Shared_Clean", 0) + kib.get("Shared_Dirty", 0)) / 1024,
            "private": (kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0)) / 1024}


def python_payload_mib(dataset: Any) -> float:
    """About how many MiB of Python objects (lists, dicts, strings, numbers) `dataset`'s attributes hold: containers are sampled."""
    return _payload(vars(dataset) if hasattr(dataset, "__dict__") else {}, depth=0) / MIB


def _payload(value: Any, depth: int, sample: int = 64) -> float:
    if isinstance(value, (torch.Tensor, np.ndarray, type, torch.nn.Module)) or callable(value) or depth > 4:
        return 0.0
    if isinstance(value, (str, bytes, int, float, bool)) or value is None:
        return float(sys.getsizeof(value))
    if isinstance(value, dict):
        items = list(value.items())
        picked = items[:: max(1, len(items) // sample)][:sample]
        inner = sum(_payload(k, depth + 1) + _payload(v, depth + 1) for k, v in picked)
        return sys.getsizeof(value) + (inner * len(items) / len(picked) if picked else 0.0)
    if isinstance(value, (list, tuple, set, frozenset)):
        items = list(value) if isinstance(value, (set, frozenset)) else value
        picked = items[:: max(1, len(items) // sample)][:sample]
        inner = sum(_payload(v, depth + 1) for v in picked)
        return sys.getsizeof(value) + (inner * len(items) / len(picked) if picked else 0.0)
    if hasattr(value, "__dict__"):
        return _payload(vars(value), depth + 1)  # a wrapped dataset (Subset, a dataset of datasets, a record)
    return 0.0


def cpu_seconds(pids: list[int]) -> tuple[float, float]:
    """(CPU seconds of this process and the processes `pids`, the whole machine's busy CPU seconds) right now."""
    ours = 0.0
    for pid in [os.getpid(), *pids]:
        try:
            ours += sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.Error:  # a worker that just exited
            pass
    times = psutil.cpu_times()
    return ours, sum(times) - times.idle - getattr(times, "iowait", 0.0) - getattr(times, "steal", 0.0)


def is_pinned(t: torch.Tensor) -> bool:
    """Whether `t` is in pinned memory (False where pinning cannot be asked)."""
    try:
        return bool(t.is_pinned())
    except RuntimeError:
        return False


def length(obj: Any) -> int | None:
    """len(obj), or None when it has none."""
    try:
        return len(obj)
    except TypeError:
        return None


def count(batch: Any) -> int:
    """Samples in a batch: the length of a tuple(zip(*samples)) batch's positions, else the first dimension of its first
    tensor or array, else the length of its first list of plain values (default_collate leaves strings as a list), else 1."""
    zipped = _zipped_length(batch)
    if zipped is not None:
        return zipped
    found = next((leaf for leaf in leaves(batch) if isinstance(leaf, (torch.Tensor, np.ndarray))), None)
    if found is not None:
        return int(found.shape[0]) if found.ndim else 1
    return _plain_list_length(batch) or 1


def _zipped_length(batch: Any) -> int | None:
    """The samples in a batch collated as tuple(zip(*samples)) (torchvision's detection references): per-position tuples of
    one length, holding what default_collate never leaves in a batch (dicts, plain numbers, 0-d tensors, or tensors of
    unequal first dimensions), else None."""
    if not isinstance(batch, (tuple, list)) or not batch or not all(isinstance(p, (tuple, list)) for p in batch):
        return None
    n = len(batch[0])
    if n == 0 or any(len(p) != n for p in batch):
        return None
    items = [item for position in batch for item in position]
    arrays = [item for item in items if isinstance(item, (torch.Tensor, np.ndarray))]
    firsts = {int(a.shape[0]) for a in arrays if a.ndim}
    marked = any(isinstance(item, (dict, int, float)) for item in items) or any(a.ndim == 0 for a in arrays)
    return n if marked or len(firsts) > 1 else None


def _plain_list_length(value: Any) -> int | None:
    """The length of the first list or tuple of strings, bytes or numbers in `value` (dicts' values in order)."""
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, (str, bytes, int, float)) for v in value):
        return len(value)
    children = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    return next((n for n in map(_plain_list_length, children) if n), None)


def labels(batch: Any) -> np.ndarray | None:
    """Integer class labels in a batch: a dict key 'label'/'target'/'y', or the last item of a tuple/list."""
    candidate = None
    if isinstance(batch, dict):
        candidate = next((batch[k] for k in LABEL_KEYS if k in batch), None)
    elif isinstance(batch, (tuple, list)) and len(batch) >= 2:
        candidate = batch[-1]
    if isinstance(candidate, torch.Tensor) and candidate.ndim == 1 and not candidate.is_floating_point() and candidate.dtype != torch.bool:
        values = candidate.cpu().numpy().astype(np.int64)
        return values if len(values) and values.min() >= 0 else None
    return None


def real_tokens(batch: Any) -> tuple[int, int] | None:
    """A dict batch's positions and real tokens, from its (batch, length) 0/1 attention_mask; None without one (lesson 08)."""
    if not isinstance(batch, dict):
        return None
    for key in MASK_KEYS:
        mask = batch.get(key)
        if isinstance(mask, torch.Tensor) and mask.ndim == 2 and mask.numel() and bool(((mask == 0) | (mask == 1)).all()):
            return mask.numel(), int(mask.sum())
    return None


def dataset_labels(dataset: Any) -> np.ndarray | None:
    """The dataset's own labels (`targets` or `labels` attribute, a TensorDataset's last tensor), when it has them."""
    last = dataset.tensors[-1] if isinstance(dataset, TensorDataset) and len(dataset.tensors) >= 2 else None
    for values in (getattr(dataset, "targets", None), getattr(dataset, "labels", None), last):
        if values is None or (isinstance(values, torch.Tensor) and values.is_floating_point()):
            continue
        try:
            array = np.asarray(values.cpu() if isinstance(values, torch.Tensor) else values)
        except Exception:  # noqa: BLE001 - an attribute that is not an array
            continue
        if array.ndim == 1 and array.dtype.kind in "iu" and len(array) and array.min() >= 0:
            return array.astype(np.int64)
    return None


def identities(batch: Any) -> list[str]:
    """One identity per sample: its key when the batch carries keys, else a hash of its first tensor's row."""
    if isinstance(batch, dict):
        keys = next((batch[k] for k in KEY_KEYS if k in batch), None)
        if isinstance(keys, (list, tuple)) and keys and all(isinstance(k, (str, int)) for k in keys):
            return [str(k) for k in keys]
        if isinstance(keys, torch.Tensor) and keys.ndim == 1:
            return [str(int(k)) for k in keys]
    found = next((leaf for leaf in leaves(batch) if isinstance(leaf, torch.Tensor)), None)
    if found is None:
        return []
    rows = found.detach().cpu().reshape(found.shape[0], -1) if found.ndim else found.reshape(1, 1)
    return [hashlib.blake2b(row.numpy().tobytes(), digest_size=8).hexdigest() for row in rows]


def summary(exc: BaseException) -> str:
    """An exception as 'Type: last line' (a worker's re-raised error keeps its original type's name in the text)."""
    text = str(exc).strip()
    last = text.splitlines()[-1] if text else ""
    name = type(exc).__name__
    return last if last.startswith(f"{name}: ") else f"{name}: {last}".strip()  # a worker's error text repeats its type


def sampled_labels(dataset: Any, deadline: float, n: int = 256) -> np.ndarray | None:
    """Labels of up to `n` items read straight from a map-style dataset (evenly spaced indices) before `deadline`."""
    size = length(dataset)
    if not size or not hasattr(dataset, "__getitem__"):
        return None
    found: list[int] = []
    for i in np.linspace(0, size - 1, min(n, size)).astype(int):
        if time.perf_counter() > deadline:
            break
        item = dataset[int(i)]
        value = next((item[k] for k in LABEL_KEYS if k in item), None) if isinstance(item, dict) else (
            item[-1] if isinstance(item, (tuple, list)) and len(item) >= 2 else None)
        if isinstance(value, torch.Tensor) and value.ndim == 0 and not value.is_floating_point():
            value = int(value)
        if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
            return None
        found.append(int(value))
    return np.asarray(found, dtype=np.int64) if found else None
