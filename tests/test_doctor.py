"""helpers.doctor: each finding on a loader with its fault planted, no warning on healthy loaders, the budget, the command line."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import child_processes
from torch.utils.data import DataLoader, Dataset, DistributedSampler, IterableDataset, TensorDataset, WeightedRandomSampler, get_worker_info

from helpers import doctor
from helpers.env import usable_cpus
from helpers.imbalance import class_counts, class_weights, sample_weights

ROOT = Path(__file__).resolve().parents[1]
CORES = usable_cpus()


@pytest.fixture(autouse=True)
def no_process_left():
    """Every diagnosis stops the workers it started."""
    yield
    deadline = time.monotonic() + 5
    while child_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_processes() == []


def tensors(n: int = 2048, features: int = 16, labels: np.ndarray | None = None) -> TensorDataset:
    """A balanced 4-class TensorDataset with `targets` (or the given labels)."""
    y = torch.as_tensor(np.arange(n) % 4 if labels is None else labels, dtype=torch.long)
    dataset = TensorDataset(torch.randn(n, features, generator=torch.Generator().manual_seed(0)), y)
    dataset.targets = y
    return dataset


class Sleepy(Dataset):
    """Items that wait `ms` milliseconds (I/O-like): more workers help whatever else the cores do."""

    def __init__(self, n: int = 4096, ms: float = 5.0) -> None:
        self.n, self.ms = n, ms

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.ms / 1000)
        return torch.full((4,), float(i)), i % 2


class Fails(Dataset):
    """Raises ValueError at index 5."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        if i == 5:
            raise ValueError("sample 5 is corrupt")
        return torch.zeros(2)


RELEASE = threading.Event()


class Hangs(Dataset):
    """Never returns (until the test releases it)."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> torch.Tensor:
        RELEASE.wait(120)
        return torch.zeros(2)


class Stream(IterableDataset):
    """Samples 0..n-1 as {'key', 'input'}; `sharded` splits them by worker, otherwise every worker yields all."""

    def __init__(self, n: int = 512, sharded: bool = False) -> None:
        self.n, self.sharded = n, sharded

    def __iter__(self):
        info = get_worker_info()
        start, step = (info.id, info.num_workers) if self.sharded and info is not None else (0, 1)
        for i in range(start, self.n, step):
            yield {"key": f"s{i:05d}", "input": torch.full((4,), float(i))}


class PythonRows(Dataset):
    """Rows kept as Python lists of floats: reading them writes reference counts into every page (copy-on-read)."""

    def __init__(self, n: int = 20_000, width: int = 64) -> None:
        self.rows = [[float(i + j) for j in range(width)] for i in range(n)]

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.tensor(self.rows[i])


def run(loader: DataLoader, budget_s: float = 6.0, **kwargs) -> doctor.Diagnosis:
    """diagnose within its budget (+10 %)."""
    diagnosis = doctor.diagnose(loader, budget_s=budget_s, **kwargs)
    assert diagnosis.elapsed_s <= 1.1 * budget_s, f"took {diagnosis.elapsed_s:.2f} s of a {budget_s} s budget"
    return diagnosis


def only(diagnosis: doctor.Diagnosis, code: str) -> doctor.Finding:
    found = [f for f in diagnosis.findings if f.code == code]
    assert len(found) == 1, f"expected one {code} finding, got:\n{diagnosis}"
    return found[0]


def problems(diagnosis: doctor.Diagnosis) -> list[str]:
    return [f.code for f in diagnosis.findings if f.severity != "info"]


# --- each code on its planted fault

def test_loader_error_names_the_workers_exception_and_the_plain_traceback():
    diagnosis = run(DataLoader(Fails(), batch_size=4, num_workers=2))
    found = only(diagnosis, "loader-error")
    assert found.severity == "error" and "ValueError" in found.message and "sample 5 is corrupt" in found.message
    assert 'raise ValueError("sample 5 is corrupt")' in found.evidence["traceback_num_workers_0"]


@pytest.mark.parametrize("workers", [0, 1])
def test_a_hanging_loader_times_out_within_the_budget(workers):
    RELEASE.clear()
    try:
        diagnosis = run(DataLoader(Hangs(), batch_size=4, num_workers=workers), budget_s=4.0)
    finally:
        RELEASE.set()
    found = only(diagnosis, "loader-error")
    assert found.severity == "error" and "no batch within" in found.message


def test_input_bound_when_the_step_waits_for_slow_items():
    diagnosis = run(DataLoader(Sleepy(ms=2.0), batch_size=8), step=lambda batch: time.sleep(0.002))
    found = only(diagnosis, "input-bound")
    assert found.evidence["data_wait_share"] >= 0.5


def test_a_slow_first_step_is_start_up_not_the_window():
    """A first step that takes most of the budget (a CUDA context starting, seen on an H200) still leaves steps to time."""
    calls = []

    def step(batch):
        calls.append(1)
        time.sleep(2.5 if len(calls) == 1 else 0.002)

    diagnosis = run(DataLoader(Sleepy(ms=2.0), batch_size=8), step=step, budget_s=5.0)
    assert only(diagnosis, "input-bound").evidence["data_wait_share"] >= 0.5
    assert diagnosis.measurements["batches_read"] >= 10 and diagnosis.elapsed_s <= 5.0 * 1.1


def test_workers_oversubscribed_past_the_usable_cores():
    with pytest.warns(UserWarning, match="Our suggested max number of worker in current system is"):  # PyTorch's own threshold
        loader = DataLoader(tensors(), batch_size=64, num_workers=CORES + 1)
    diagnosis = run(loader, budget_s=8.0)
    found = only(diagnosis, "workers-oversubscribed")
    assert found.severity == "warning" and found.evidence["processes"] == CORES + 2


def test_one_process_over_the_cores_is_at_most_info():
    diagnosis = run(DataLoader(tensors(), batch_size=64, num_workers=CORES))
    assert only(diagnosis, "workers-oversubscribed").severity == "info"


@pytest.mark.skipif(CORES < 2, reason="needs 2 usable cores for a num_workers sweep")
def test_workers_too_few_when_items_wait():
    diagnosis = run(DataLoader(Sleepy(ms=5.0), batch_size=8), budget_s=10.0)
    found = only(diagnosis, "workers-too-few")
    assert found.evidence["best"] >= 1 and found.evidence["speedup"] >= doctor.SWEEP_GAIN


def test_the_sweep_gives_each_setting_time_for_its_warm_up_and_two_timed_batches(monkeypatch):
    """Batches of 0.6 s (measured by the first pass): a rate leaves out 1 batch with no workers, 2 x w with w workers, and
    times 2 more, so a slot must hold (warm-up + 2) batches at the pace the workers share, plus the first batch's wait.
    The old slot of at most 1 s never did, and the sweep was abandoned after 0 rounds."""
    slots = []

    def fake_rate(loader, deadline):
        slots.append((loader.num_workers, deadline - time.perf_counter()))
        return 100.0 * (1 + loader.num_workers)  # more workers, more samples/s: a finding if the sweep runs

    monkeypatch.setattr(doctor, "_rate", fake_rate)
    monkeypatch.setattr(doctor, "usable_cpus", lambda: 2)
    monkeypatch.setattr(doctor, "_ranks_on_node", lambda: 1)
    check = doctor._Doctor(DataLoader(tensors(64), batch_size=8), None, None, time.perf_counter() + 60.0)
    check.measured.update(first_batch_s=0.6, steady_batch_s=0.6)
    check.check_worker_sweep()
    assert {workers for workers, _ in slots} == {0, 1, 2} and len(slots) == 9  # three full rounds fit in 60 s
    for workers, slot in slots:
        batches = 1 + 2 if workers == 0 else 2 * workers + 2
        assert slot >= 0.6 + batches * 0.6 / max(1, workers), (workers, slot)
    assert "workers-too-few" in [f.code for f in check.findings]


def test_startup_cost_of_spawned_workers_on_short_epochs():
    loader = DataLoader(tensors(256), batch_size=64, num_workers=2, multiprocessing_context="spawn")
    found = only(run(loader, budget_s=30.0), "startup-cost")
    assert found.evidence["first_batch_s"] >= doctor.STARTUP_MIN_S and found.evidence["batches_per_epoch"] == 4
    persistent = DataLoader(tensors(256), batch_size=64, num_workers=2, multiprocessing_context="spawn", persistent_workers=True)
    assert "startup-cost" not in run(persistent, budget_s=30.0).codes


@pytest.mark.skipif(torch.accelerator.is_available(), reason="this machine has an accelerator")
def test_pin_memory_without_an_accelerator():
    found = only(run(DataLoader(tensors(), batch_size=64, pin_memory=True)), "pin-memory-no-accelerator")
    assert found.severity == "warning"


@pytest.mark.cuda
def test_pin_memory_missing_for_a_cuda_device():
    assert "pin-memory-missing" in run(DataLoader(tensors(), batch_size=64), device="cuda").codes
    assert "pin-memory-missing" not in run(DataLoader(tensors(), batch_size=64, pin_memory=True), device="cuda").codes


@pytest.mark.cuda
def test_input_bound_with_a_cuda_step():
    """The GPU step is timed to its end (the doctor synchronises): slow items are flagged, a heavy GPU step hides fast ones."""
    weight = torch.randn(4, 4096, device="cuda")
    big = torch.randn(4096, 4096, device="cuda")

    def light(batch):
        return batch[0].to("cuda", non_blocking=True) @ weight

    def heavy(batch):
        out = batch[0].to("cuda", non_blocking=True) @ weight
        for _ in range(40):
            out = out @ big
        return out

    slow = run(DataLoader(Sleepy(ms=2.0), batch_size=8, pin_memory=True), step=light, device="cuda")
    assert only(slow, "input-bound").evidence["data_wait_share"] >= 0.5
    fast = run(DataLoader(tensors(4096, features=4), batch_size=64, pin_memory=True), step=heavy, device="cuda")
    assert "input-bound" not in fast.codes, str(fast)


def test_unbalanced_batches_from_an_imbalanced_dataset():
    labels = np.zeros(4096, dtype=np.int64)
    labels[:64] = 1
    found = only(run(DataLoader(tensors(4096, labels=labels), batch_size=64, shuffle=True)), "unbalanced-batches")
    assert found.evidence["rarest_class"] == 1 and found.evidence["rarest_share"] < 0.05


def test_class_weights_passed_as_sample_weights():
    labels = np.r_[np.zeros(1800, dtype=np.int64), np.ones(200, dtype=np.int64)]
    per_class = class_weights(class_counts(labels))
    sampler = WeightedRandomSampler(torch.as_tensor(per_class), num_samples=len(labels))
    found = only(run(DataLoader(tensors(2000, labels=labels), batch_size=64, sampler=sampler)), "class-weights-as-sample-weights")
    assert found.severity == "error" and found.evidence["num_weights"] == 2 and found.evidence["largest_index"] <= 1


def test_no_replacement_weights_rebalance_nothing():
    labels = np.r_[np.zeros(1800, dtype=np.int64), np.ones(200, dtype=np.int64)]
    sampler = WeightedRandomSampler(sample_weights(labels), num_samples=len(labels), replacement=False)
    diagnosis = run(DataLoader(tensors(2000, labels=labels), batch_size=64, sampler=sampler))
    assert only(diagnosis, "no-replacement-weights").evidence["max_count"] == 1
    assert "unbalanced-batches" in diagnosis.codes  # and the batches show it


def test_iterable_duplicates_across_workers():
    found = only(run(DataLoader(Stream(), batch_size=16, num_workers=2)), "iterable-duplicates")
    assert found.severity == "error" and found.evidence["distinct"] * 2 == found.evidence["samples"]


def test_copy_on_read_of_python_objects():
    found = only(run(DataLoader(PythonRows(), batch_size=64, num_workers=2), budget_s=10.0), "copy-on-read")
    assert found.evidence["uss_growth_mib"] >= doctor.COPY_ON_READ_MIB


def test_shm_too_small_for_the_batches_in_flight(monkeypatch):
    monkeypatch.setattr(doctor, "_shm_free_bytes", lambda: 512 * 1024)  # a tiny /dev/shm, as in a default Docker container with a big batch
    loader = DataLoader(TensorDataset(torch.zeros(512, 1024)), batch_size=64, num_workers=2)  # 256 KiB x 2 x 2 in flight
    found = only(run(loader), "shm-too-small")
    assert found.severity == "error" and found.evidence["bytes_in_flight"] == 64 * 1024 * 4 * 2 * 2


# --- healthy loaders get no warning and no error

def healthy_loaders() -> dict[str, DataLoader]:
    workers = CORES  # the doctor's rule: a worker per usable core (2 here, 16 on a 16-core GPU host, where 2 measured 1.38x slower)
    labels = np.r_[np.zeros(1800, dtype=np.int64), np.ones(200, dtype=np.int64)]
    weighted = WeightedRandomSampler(sample_weights(labels), num_samples=len(labels), generator=torch.Generator().manual_seed(0))
    distributed = DistributedSampler(tensors(), num_replicas=2, rank=0, seed=0)
    distributed.set_epoch(1)
    return {
        "map-style with workers": DataLoader(tensors(), batch_size=64, shuffle=True, num_workers=workers, persistent_workers=True),
        "weighted sampler done right": DataLoader(tensors(2000, labels=labels), batch_size=64, sampler=weighted, num_workers=workers,
                                                  persistent_workers=True),
        "sharded iterable": DataLoader(Stream(sharded=True), batch_size=16, num_workers=workers, persistent_workers=True),
        "distributed sampler with set_epoch": DataLoader(tensors(), batch_size=64, sampler=distributed, num_workers=workers,
                                                         persistent_workers=True),
    }


@pytest.mark.parametrize("name", list(healthy_loaders()))
def test_healthy_loaders_get_no_warning(name):
    diagnosis = run(healthy_loaders()[name], budget_s=8.0)
    assert problems(diagnosis) == [], str(diagnosis)


# --- the contract: output forms, plugins, bad input, lessons

def test_diagnosis_prints_renders_and_serialises():
    diagnosis = run(DataLoader(Stream(), batch_size=16, num_workers=2))
    text, page = str(diagnosis), diagnosis._repr_html_()
    assert "[error] iterable-duplicates" in text and "<code>iterable-duplicates</code>" in page
    data = json.loads(json.dumps(diagnosis.to_dict()))
    assert data["findings"][0]["code"] == "iterable-duplicates" and data["findings"][0]["lesson"].startswith("06_streaming_data.ipynb")


def test_a_plugin_check_adds_its_finding():
    def tiny_batches(obs: doctor.Observation) -> doctor.Finding | None:
        size = obs.samples / obs.batches
        if size < 8:
            return doctor.Finding("tiny-batches", "warning", f"{size:.0f} samples per batch", "raise batch_size", {"per_batch": size})
        return None

    assert "tiny-batches" in run(DataLoader(tensors(), batch_size=2), checks=[tiny_batches]).codes
    assert "tiny-batches" not in run(DataLoader(tensors(), batch_size=64), checks=[tiny_batches]).codes
    with pytest.raises(TypeError, match="must return a Finding or None"):
        doctor.diagnose(DataLoader(tensors(), batch_size=64), budget_s=2, checks=[lambda obs: "oops"])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"loader": [1, 2, 3]}, TypeError, "loader must be a torch.utils.data.DataLoader, got \\[1, 2, 3\\]"),
    ({"budget_s": 0}, ValueError, "budget_s must be a positive number of seconds, got 0"),
    ({"budget_s": float("nan")}, ValueError, "budget_s must be a positive number"),
    ({"step": 5}, TypeError, "step must be a callable taking one batch, got 5"),
    ({"checks": [5]}, TypeError, "checks must be a sequence of callables"),
    ({"device": "gpu"}, ValueError, "device"),
])
def test_bad_input_is_named(kwargs, error, match):
    arguments = {"loader": DataLoader(tensors(), batch_size=64), **kwargs}
    with pytest.raises(error, match=match):
        doctor.diagnose(arguments.pop("loader"), **arguments)


def test_finding_rejects_a_bad_code_or_severity():
    with pytest.raises(ValueError, match="code must be lower-case words"):
        doctor.Finding("Tiny Batches", "warning", "m", "f")
    with pytest.raises(ValueError, match="severity must be one of"):
        doctor.Finding("tiny-batches", "bad", "m", "f")


def test_every_code_names_a_section_its_lesson_has():
    for code, (stem, section) in doctor.CODES.items():
        notebook = json.loads((ROOT / "notebooks" / f"{stem}.ipynb").read_text())
        headings = {line[3:].strip() for cell in notebook["cells"] if cell["cell_type"] == "markdown"
                    for line in "".join(cell["source"]).splitlines() if line.startswith("## ")}
        assert section in headings, f"{code}: {stem} has no section '## {section}'"


# --- the command line

LOADERS = '''
import time

import torch
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

def healthy():
    y = torch.arange(512) % 2
    return DataLoader(TensorDataset(torch.randn(512, 4), y), batch_size=32, shuffle=True)

def faulty():
    y = torch.arange(512) % 2
    return DataLoader(TensorDataset(torch.randn(512, 4), y), batch_size=32,
                      sampler=WeightedRandomSampler(torch.tensor([1.0, 9.0]), num_samples=512))

def step(batch):
    time.sleep(0.005)  # a training step's compute
    return batch[0].sum()
'''


@pytest.mark.parametrize("function, status, code", [("healthy", 0, None), ("faulty", 1, "class-weights-as-sample-weights")])
def test_command_line_exit_status_and_json(tmp_path, function, status, code):
    (tmp_path / "my_loaders.py").write_text(LOADERS)
    out = tmp_path / "diagnosis.json"
    result = subprocess.run(
        [sys.executable, "-m", "helpers.doctor", f"my_loaders:{function}", "--step", "my_loaders:step", "--json", str(out), "--budget", "5"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == status, result.stdout + result.stderr
    assert result.stdout.startswith("Loader doctor:")
    data = json.loads(out.read_text())
    codes = [f["code"] for f in data["findings"] if f["severity"] != "info"]
    assert (codes == []) if code is None else (code in codes), codes
    assert "data_wait_share" in data["measurements"]


def test_command_line_names_a_bad_spec(tmp_path):
    result = subprocess.run([sys.executable, "-m", "helpers.doctor", "no_colon_here"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert result.returncode != 0 and re.search(r"loader must look like module:function, got 'no_colon_here'", result.stderr)


def test_a_finding_without_a_lesson_prints_no_empty_taught_in():
    finding = doctor.Finding("mine", "warning", "a message", "a fix")
    text = str(doctor.Diagnosis(findings=[finding], measurements={}, not_measured={}, elapsed_s=0.1, budget_s=1.0))
    assert "fix: a fix" in text and "taught in" not in text
