"""tools/stress.py: a failed assertion is reported with the values it compared; the busy program never outlives a run."""
import nbformat
import pytest
from conftest import child_processes, command

from tools import stress


def test_assertion_parts_are_the_compared_expressions_and_names():
    parts = stress.assertion_parts("assert speedup - 1 > 0.2 * (ceiling - 1)  # a comment")
    assert parts == ["speedup - 1", "0.2 * (ceiling - 1)", "speedup", "ceiling"]
    assert stress.assertion_parts("x = 1") == [] and stress.assertion_parts("assert (") == []


def test_failing_line_reads_the_line_the_traceback_names():
    traceback = ["\x1b[0;31mAssertionError\x1b[0m", "Cell \x1b[0;32mIn[7], line 2\x1b[0m", "----> 2 assert b"]
    assert stress.failing_line(traceback, "a = 1\nassert b\n") == "assert b"
    assert stress.failing_line(["no cell named"], "assert b") == ""


def test_a_failed_run_names_its_cell_and_the_values_its_assertion_compared(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("ratio = 1.25\nfloor = 2"),
                                         nbformat.v4.new_code_cell("import math\nassert ratio > floor * math.sqrt(1)"),
                                         nbformat.v4.new_code_cell("raise SystemExit('never reached')")])
    path = tmp_path / "99_planted.ipynb"
    nbformat.write(nb, path)
    run = stress.execute(stress.Run("99", 1, busy=True), path, timeout_s=60, keep=tmp_path / "kept")
    assert not run.passed and run.failed_cell == 2 and run.error.startswith("AssertionError")
    assert run.assertion == "assert ratio > floor * math.sqrt(1)"
    assert run.values == {"ratio": "1.25", "floor * math.sqrt(1)": "2.0", "floor": "2"}  # the module `math` is left out
    assert "    ratio = 1.25" in stress.table([run]).splitlines()
    assert run.slowest_cell in (1, 2) and 0 < run.slowest_s < run.seconds  # the failing cell's time counts too
    kept = nbformat.read(tmp_path / "kept" / "99_planted-run1-busy.ipynb", as_version=4)
    assert kept.cells[2].outputs[0].ename == "AssertionError"


def test_a_passing_run_names_its_slowest_cell_and_its_seconds(tmp_path):
    cells = [nbformat.v4.new_code_cell("x = 1"), nbformat.v4.new_markdown_cell("a stall:"),
             nbformat.v4.new_code_cell("import time\ntime.sleep(1.5)"), nbformat.v4.new_code_cell("y = 2")]
    path = tmp_path / "97_stall.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)
    run = stress.execute(stress.Run("97", 1, busy=False), path, timeout_s=60)
    assert run.passed and run.slowest_cell == 2 and 1.5 <= run.slowest_s < run.seconds
    assert stress.table([run]).splitlines()[1].split()[-1] in ("2", "3")  # the table's last column: the slowest cell's seconds


def test_busy_program_is_stopped(monkeypatch, tmp_path):
    started = []
    original = stress.busy_program
    monkeypatch.setattr(stress, "busy_program", lambda: started.append(original()) or started[-1])
    monkeypatch.setattr(stress, "lesson_path", lambda lesson: tmp_path / "x.ipynb")

    def fails(run, path, timeout_s, keep):
        if run.busy:
            raise RuntimeError("the kernel died")
        return run

    monkeypatch.setattr(stress, "execute", fails)
    with pytest.raises(RuntimeError, match="the kernel died"):
        stress.stress(["99"], runs=2, timeout_s=1, log=lambda line: None)  # run 2 is the busy one
    assert len(started) == 2 and all(p.poll() is not None for p in started) and child_processes() == []  # two by default


def test_bad_arguments_are_named(capsys):
    with pytest.raises(SystemExit):
        stress.main(["--runs", "0"])
    assert "--runs must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        stress.main(["42"])
    assert "lesson '42'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        stress.main(["--busy", "0"])
    assert "--busy must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="busy must be a whole number of programs, at least 1, got 0"):
        stress.stress(["99"], runs=1, timeout_s=1, busy=0)


def test_a_killed_stress_run_stops_its_busy_program(tmp_path):
    """`kill` (SIGTERM) on make stress during a busy run leaves neither its `while True: pass` nor its kernel behind."""
    import signal
    import subprocess
    import sys
    import time

    import psutil
    from conftest import ROOT

    notebook = tmp_path / "notebooks" / "98_sleepy.ipynb"
    notebook.parent.mkdir()
    code = "from pathlib import Path\nimport time\nif Path('ran-once').exists():\n    time.sleep(60)\nPath('ran-once').touch()"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), notebook)  # run 1 quick, run 2 (busy) sleeps
    script = (f"import sys, pathlib; sys.path.insert(0, {str(ROOT)!r}); from tools import stress; "
              f"stress.NOTEBOOKS = pathlib.Path({str(notebook.parent)!r}); sys.exit(stress.main(['--runs', '2', '98']))")
    tool = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = []
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and len(started) < 3:  # the two busy programs and run 2's kernel
            started = [c for c in psutil.Process(tool.pid).children(recursive=True)
                       if "while True" in command(c) or "ipykernel" in command(c)]
            time.sleep(0.2)
        assert len(started) == 3 and (notebook.parent / "ran-once").exists()
        tool.send_signal(signal.SIGTERM)
        tool.wait(timeout=30)
    finally:
        if tool.poll() is None:
            tool.kill()
    gone, alive = psutil.wait_procs(started, timeout=10)
    for process in alive:  # the test leaves nothing either, when it fails
        process.kill()
    assert tool.returncode == 128 + signal.SIGTERM and alive == []
