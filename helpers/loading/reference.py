"""Lesson 03's sweeps recorded on a named quiet machine (`tools/bench.py --record`), and reading them back (lesson 03).

helpers.loading re-exports every public name here (`loading.load_loader_reference`, ...).
"""
from __future__ import annotations

import datetime
import json
import platform
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from helpers._validate import as_int
from helpers.loading.sweeps import LoaderSweep

REFERENCE_GLOB = "*-loaders.json"  # tools/bench.py --record's names; lesson 04's *-gpu-check.json share the folder


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (platform.processor() elsewhere) (lesson 03)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        lines = []
    return next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), platform.processor() or "unknown CPU")


@dataclass(frozen=True)
class LoaderReference:
    """Lesson 03's sweeps recorded on a named quiet machine by `tools/bench.py --record` (lesson 03)."""

    hardware: str
    usable_cores: int
    date: str
    torch: str
    sweeps: dict[str, LoaderSweep]
    file: str = ""

    @property
    def label(self) -> str:
        """How a plot names it: never as this machine's measurement."""
        return f"reference: {self.hardware}, {self.usable_cores} cores ({self.date}), not this machine"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"hardware": self.hardware, "usable_cores": self.usable_cores, "date": self.date, "torch": self.torch,
                "sweeps": {kind: sweep.to_dict() for kind, sweep in self.sweeps.items()}}


def record_reference(sweeps: Mapping[str, LoaderSweep], usable_cores: int) -> LoaderReference:
    """A LoaderReference of `sweeps` measured here now, naming this machine (tools/bench.py --record) (lesson 03)."""
    usable_cores = as_int("usable_cores", usable_cores, minimum=1)
    return LoaderReference(hardware=cpu_model(), usable_cores=usable_cores, date=datetime.date.today().isoformat(),
                           torch=torch.__version__, sweeps=dict(sweeps))


def load_loader_reference(folder: Path | str) -> LoaderReference | None:
    """The newest `*-loaders.json` in `folder` (written by `tools/bench.py --record`), or None when there is none (lesson 03)."""
    folder = Path(folder)
    paths = sorted(folder.glob(REFERENCE_GLOB)) if folder.is_dir() else []
    if not paths:
        return None
    data = json.loads(paths[-1].read_text())
    missing = {"hardware", "usable_cores", "date", "torch", "sweeps"} - set(data)
    if missing:
        raise ValueError(f"{paths[-1]} is not a loader reference: it lacks {sorted(missing)}")
    sweeps = {kind: LoaderSweep.from_dict(sweep) for kind, sweep in data["sweeps"].items()}
    return LoaderReference(hardware=str(data["hardware"]), usable_cores=int(data["usable_cores"]), date=str(data["date"]),
                           torch=str(data["torch"]), sweeps=sweeps, file=paths[-1].name)
