"""tools/bench.py: verdicts (a busy machine is said, not failed), the reference file name, and --record refusing on a busy machine."""
import json

import pytest

from helpers.loading import LoaderBenchmark, LoaderSweep, SweepRow, load_loader_reference
from tools import bench


def fake_sweep(kind, ceilings):
    """A two-value sweep with fixed rates and the given per-round ceilings (no loader runs)."""
    rows = tuple(SweepRow(v, tuple(LoaderBenchmark(100.0 * (1 + v), 0.01, (), 1, 1) for _ in ceilings)) for v in (0, 1))
    return LoaderSweep("num_workers", rows, kind, ceilings=tuple(ceilings), ceiling_processes=2 if kind == "cpu" else 0,
                       settings={"kind": kind})


def test_result_verdicts():
    assert bench.Result("e", "a", "b", 2.0, 1.5).verdict == "ok"
    assert bench.Result("e", "a", "b", 1.0, 1.5).verdict == "MISSED"
    busy = bench.Result("e", "a", "b", 0.1, 0.5, busy=True)
    assert busy.ok and busy.verdict == "too busy"


def test_reference_path_names_date_and_cpu(tmp_path):
    path = bench.reference_path(tmp_path, "Intel(R) Xeon(R) CPU @ 2.20GHz", "2026-01-02")
    assert path.name == "2026-01-02-intel-r-xeon-r-cpu-2-20ghz-loaders.json"


def test_record_refuses_on_a_busy_machine(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "usable_cpus", lambda: 2)
    monkeypatch.setattr(bench, "lesson_sweep", lambda kind, ceiling_processes=0, progress=True: fake_sweep(kind, [1.9, 1.1, 1.9]))
    assert bench.main(["--record", "--out", str(tmp_path)]) == 2
    assert "Not recorded" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_record_writes_a_reference_the_lesson_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(bench, "usable_cpus", lambda: 2)
    monkeypatch.setattr(bench, "lesson_sweep", lambda kind, ceiling_processes=0, progress=True: fake_sweep(kind, [1.9, 1.8, 1.95]))
    assert bench.main(["--record", "--out", str(tmp_path)]) == 0
    (written,) = tmp_path.glob("*-loaders.json")
    data = json.loads(written.read_text())
    assert data["usable_cores"] == 2 and data["hardware"] and data["torch"] and data["date"]
    reference = load_loader_reference(tmp_path)
    assert reference.sweeps["cpu"].ceiling == pytest.approx(1.9) and reference.sweeps["io"].speedup(1) == 2.0
