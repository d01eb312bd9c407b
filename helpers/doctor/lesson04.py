"""The doctor's rules whose fixes lesson 04 teaches: pinned memory asked for where it cannot help, or missing where it would."""
from __future__ import annotations

from helpers.doctor.findings import Finding, fmt_bytes
from helpers.doctor.measure import accelerator_available
from helpers.doctor.registry import Observation, finding, rule


@rule("pin-memory-no-accelerator", severities=("warning",), phase="static", planted="pin_no_accelerator",
      taught_in=("04_pinned_memory_transfers", "2. What pinned memory is"))
def pin_memory_no_accelerator(obs: Observation) -> Finding | None:
    """pin_memory=True on a machine with no accelerator: PyTorch warns and pins nothing."""
    if not obs.loader.pin_memory or accelerator_available():
        return None
    return finding(
        "pin-memory-no-accelerator", "warning",
        "pin_memory=True but this machine has no accelerator: PyTorch warns and pins nothing",
        "set pin_memory=torch.cuda.is_available() (or torch.accelerator.is_available())", pin_memory=True, accelerator=None)


@rule("pin-memory-missing", severities=("warning",), phase="pass", planted="pin_missing",
      taught_in=("04_pinned_memory_transfers", "5. Pinning on the fly vs pinning in the background"))
def pin_memory_missing(obs: Observation) -> Finding | None:
    """Batches bound for a CUDA device that arrive in pageable memory."""
    if obs.device is None or obs.device.type != "cuda" or obs.pinned is not False:
        return None
    return finding(
        "pin-memory-missing", "warning",
        f"device {obs.device} given, but the first batch's tensors ({fmt_bytes(obs.batch_bytes)}) are not in pinned memory: "
        "a copy with non_blocking=True cannot overlap compute",
        "set pin_memory=True on the DataLoader and copy with .to(device, non_blocking=True)",
        pinned=False, batch_bytes=obs.batch_bytes, device=str(obs.device))
