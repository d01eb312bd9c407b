"""Lesson 09's start-method loaders: file paths kept as a Python list, the same paths packed in one tensor, a lambda transform;
and what a worker sees of an environment variable changed after the first worker started.

Each loader function (listed_paths, packed_paths, lambda_transform) takes no argument and returns a DataLoader with 2
workers, so `helpers.doctor.xray.x_ray` (and
`loader-doctor helpers.start_method_demos:listed_paths --start-methods`) can build it in a fresh Python.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import zlib

import torch
from torch.utils.data import DataLoader, Dataset

from helpers._validate import as_fraction

NUM_PATHS = 400_000
WIDTH = 32  # bytes per packed path, zero-padded


def paths(n: int = NUM_PATHS) -> list[str]:
    """n file paths as an image folder's index would list them."""
    return [f"/data/train/{i % 1000:03d}/img_{i:08d}.jpg" for i in range(n)]


class ListedPaths(Dataset):
    """Each item is read from the file at its path (here: a number made from the path); the paths are a Python list."""

    def __init__(self, n: int = NUM_PATHS) -> None:
        self.paths = paths(n)

    def __len__(self) -> int:
        return len(self.paths)

    def path(self, i: int) -> str:
        """Item i's file path."""
        return self.paths[i]

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor([zlib.crc32(self.path(i).encode()) % 1000], dtype=torch.float32)


class PackedPaths(ListedPaths):
    """The same paths, packed as bytes in one uint8 tensor (n x WIDTH): a worker is sent a handle to shared memory."""

    def __init__(self, n: int = NUM_PATHS) -> None:
        listed = paths(n)
        if max(map(len, listed)) > WIDTH:
            raise ValueError(f"paths must be at most {WIDTH} bytes to pack, got one of {max(map(len, listed))}")
        self.packed = torch.frombuffer(bytearray(b"".join(p.encode().ljust(WIDTH, b"\0") for p in listed)),
                                       dtype=torch.uint8).reshape(n, WIDTH)

    def __len__(self) -> int:
        return len(self.packed)

    def path(self, i: int) -> str:
        """Item i's file path, unpacked."""
        return bytes(self.packed[i].tolist()).rstrip(b"\0").decode()


def listed_paths() -> DataLoader:
    """400,000 paths in a Python list, 2 workers."""
    return DataLoader(ListedPaths(), batch_size=256, shuffle=True, num_workers=2)


def packed_paths() -> DataLoader:
    """The same paths packed in a tensor, 2 workers."""
    return DataLoader(PackedPaths(), batch_size=256, shuffle=True, num_workers=2)


def lambda_transform() -> DataLoader:
    """A transform kept as a lambda on the dataset, 2 workers."""
    dataset = ListedPaths(1024)
    dataset.transform = lambda x: x / 1000
    return DataLoader(dataset, batch_size=256, num_workers=2)


SETTING = "COURSE_DEMO_SETTING"  # the variable settings_seen sets, then changes


class SettingReader(Dataset):
    """One item: the value of SETTING in the process that fetches it (a worker)."""

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> str:
        return os.environ.get(SETTING, "")


MAX_TIMEOUT_S = 2_147_483.0  # the longest wait subprocess's poll() accepts (milliseconds in a C int)


def settings_seen(timeout_s: float = 120.0) -> dict[str, list[str]]:
    """Per start method here (multiprocessing.get_all_start_methods()), what a worker read of SETTING set to "first", then
    "second", each before a new loader's worker started, in one fresh Python (its first forkserver loader starts the fork
    server): {method: [first read, second read]}; on Linux fork and spawn read first then second, forkserver first twice
    (lesson 09). timeout_s in (0, MAX_TIMEOUT_S]: past it, TimeoutError, with the fresh Python and its workers stopped."""
    timeout_s = as_fraction("timeout_s", timeout_s, 0.0, MAX_TIMEOUT_S, include_low=False, include_high=True)
    code = f"from helpers.start_method_demos import _read_twice; print(_read_twice({multiprocessing.get_all_start_methods()!r}))"
    env = {k: v for k, v in os.environ.items() if k != SETTING}
    with tempfile.TemporaryDirectory(prefix="settings-seen-") as folder:  # its workers' temporary files go with it
        env["TMPDIR"] = folder
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=env, start_new_session=True)  # its own process group: its workers, the fork server
        try:
            out, err = child.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            # a worker whose parent dies before it starts never notices (torch's watchdog compares against the parent
            # it found at start-up): stop the whole group, not the fresh Python alone
            os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            raise TimeoutError(f"the fresh Python did not finish within timeout_s={timeout_s:g} s (it starts Python, torch "
                               "and a worker per method: seconds); give a larger timeout_s") from None
    if child.returncode != 0:
        raise RuntimeError(f"the fresh Python exited with status {child.returncode}: {err.strip()[-1000:]}")
    return json.loads(out.splitlines()[-1])


def _read_twice(methods: list[str]) -> str:
    """settings_seen's run, in the fresh Python: set SETTING, start one 1-worker loader per method, change it, again."""
    seen: dict[str, list[str]] = {method: [] for method in methods}
    for value in ("first", "second"):
        os.environ[SETTING] = value
        for method in methods:
            loader = DataLoader(SettingReader(), batch_size=None, num_workers=1, multiprocessing_context=method)
            seen[method].extend(loader)
    return json.dumps(seen)
