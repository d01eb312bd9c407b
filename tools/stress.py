"""Stress run of the lessons: each lesson with timing claims executed N times, half of them beside CPU-bound programs.

`make stress` (or `.venv/bin/python tools/stress.py --runs 10 03 07`) runs every lesson in its own kernel, in turn;
runs 2, 4, 6, ... start `--busy` copies (default 2) of `python -c "while True: pass"` before the kernel and stop them
after. Each run's slowest cell and its seconds are logged, so a stall is seen even when it passes. A failed run is stopped at
its first failing cell; when that cell failed an `assert`, the values of the assertion's parts are read from the same
kernel and printed, so the table shows what the busy machine measured, not only that it failed. Exit status 1 when any
run failed. Nothing is left behind: the busy program and the kernel are stopped on every outcome, and the tool checks
that no child process of its own survives.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import json
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from helpers.start_method import descendants  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
# The lessons whose asserts compare times or speeds (the others assert counts and values that load cannot move).
TIMED_LESSONS = ("03", "04", "05", "06", "07", "08", "09")
CELL_TIMEOUT_S = 300
BUSY_PROGRAMS = 2  # CPU-bound programs beside each busy run: on a 2-core machine, as many as there are cores
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class Run:
    """One execution of one lesson."""

    lesson: str
    number: int
    busy: bool
    name: str = ""  # the notebook's stem
    seconds: float = 0.0
    failed_cell: int | None = None
    error: str = ""
    assertion: str = ""
    values: dict[str, str] = field(default_factory=dict)
    slowest_cell: int | None = None
    slowest_s: float = 0.0

    @property
    def passed(self) -> bool:
        """True when every cell ran without an exception."""
        return self.failed_cell is None


def lesson_path(number: str) -> Path:
    """The notebook of lesson `number` ("03")."""
    found = sorted(NOTEBOOKS.glob(f"{number}_*.ipynb"))
    if len(found) != 1:
        raise ValueError(f"lesson {number!r}: expected one notebook notebooks/{number}_*.ipynb, found {len(found)}")
    return found[0]


def failing_line(traceback: list[str], source: str) -> str:
    """The source line of the cell where the traceback says it failed ("" when it names none)."""
    text = ANSI.sub("", "\n".join(traceback))
    lines = re.findall(r"Cell In\[\d+\], line (\d+)", text)
    if not lines:
        return ""
    number = int(lines[0])
    cell_lines = source.splitlines()
    return cell_lines[number - 1] if 0 < number <= len(cell_lines) else ""


def assertion_parts(line: str) -> list[str]:
    """The expressions an assert line compares, as source text: the operands of its comparisons and its names."""
    try:
        tree = ast.parse(line.strip())
    except SyntaxError:
        return []
    if not tree.body or not isinstance(tree.body[0], ast.Assert):
        return []
    parts: list[str] = []
    for node in ast.walk(tree.body[0].test):
        if isinstance(node, ast.Compare):
            parts += [ast.unparse(operand) for operand in (node.left, *node.comparators)]
        elif isinstance(node, ast.Name) and node.id not in dir(builtins):
            parts.append(node.id)
    return [part for index, part in enumerate(parts) if part not in parts[:index] and not _is_literal(part)]


def _is_literal(text: str) -> bool:
    try:
        ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return False
    return True


def _inspection_source(parts: list[str]) -> str:
    """Code that prints one JSON object: each part's value (repr, cut short) or why it could not be read."""
    return (
        "import json as _stress_json\n_stress_values = {}\n"
        f"for _stress_part in {parts!r}:\n"
        "    try:\n        _stress_value = eval(_stress_part)\n"
        "        if not callable(_stress_value) and type(_stress_value).__name__ != 'module':\n"
        "            _stress_values[_stress_part] = repr(_stress_value)[:200]\n"
        "    except Exception as _stress_error:\n        _stress_values[_stress_part] = f'<{type(_stress_error).__name__}>'\n"
        "print('STRESS-VALUES ' + _stress_json.dumps(_stress_values))\n"
    )


def execute(run: Run, path: Path, timeout_s: int, keep: Path | None = None) -> Run:
    """Execute the notebook cell by cell in a fresh kernel; on a failing cell, read its assertion's values and stop.

    keep: a folder to write the executed notebook to, as `<stem>-run<N>[-busy].ipynb`, to read what each run printed.
    """
    import nbclient
    import nbformat

    from tools.notebook_client import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout_s, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            started = time.perf_counter()
            try:
                client.execute_cell(cell, index)
            except nbclient.exceptions.CellExecutionError as error:
                run.failed_cell, run.error = index, f"{error.ename}: {error.evalue}"[:300]
                errors = [out for out in cell.outputs if out.output_type == "error"]
                run.assertion = failing_line(errors[0].traceback if errors else [], cell.source).strip()
                parts = assertion_parts(run.assertion)
                if parts:
                    probe = nbformat.v4.new_code_cell(_inspection_source(parts))
                    nb.cells.append(probe)  # nbclient writes outputs by index: the probe needs a place in the notebook
                    client.execute_cell(probe, len(nb.cells) - 1)
                    text = "".join(out.get("text", "") for out in probe.outputs)
                    found = re.search(r"STRESS-VALUES (\{.*\})", text)
                    run.values = json.loads(found.group(1)) if found else {}
                break
            except (nbclient.exceptions.CellTimeoutError, nbclient.exceptions.DeadKernelError) as error:
                run.failed_cell, run.error = index, f"{type(error).__name__}: {error}"[:300]
                break
            finally:
                took = time.perf_counter() - started
                if took > run.slowest_s:
                    run.slowest_cell, run.slowest_s = index, took
    run.seconds = time.perf_counter() - start
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, keep / f"{path.stem}-run{run.number}{'-busy' if run.busy else ''}.ipynb")
    return run


def busy_program() -> subprocess.Popen:
    """A CPU-bound program that keeps one core busy until stopped."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def stress(lessons: list[str], runs: int, timeout_s: int, log=print, keep: Path | None = None,
           busy: int = BUSY_PROGRAMS) -> list[Run]:
    """Every lesson `runs` times, the even-numbered runs beside `busy` CPU-bound programs; returns every run."""
    if isinstance(busy, bool) or not isinstance(busy, int) or busy < 1:
        raise ValueError(f"busy must be a whole number of programs, at least 1, got {busy!r}")
    results = []
    for lesson in lessons:
        path = lesson_path(lesson)
        for number in range(1, runs + 1):
            run = Run(lesson, number, busy=number % 2 == 0, name=path.stem)
            burners: list[subprocess.Popen] = []
            try:
                burners.extend(busy_program() for _ in range(busy if run.busy else 0))
                execute(run, path, timeout_s, keep)
            finally:
                for burner in burners:
                    burner.kill()
                    burner.wait()
            results.append(run)
            verdict = "passed" if run.passed else f"FAILED at cell {run.failed_cell}: {run.error}"
            log(f"{path.stem} run {number}/{runs}{f' (beside {busy} busy)' if run.busy else ''}: {verdict} in "
                f"{run.seconds:.0f} s; slowest cell {run.slowest_cell}: {run.slowest_s:.0f} s")
    return results


def table(results: list[Run]) -> str:
    """The summary: per lesson, runs and passes (quiet and busy), then each failure with what its assertion measured."""
    lines = [f"{'lesson':<30}{'runs':>6}{'passed':>8}{'quiet':>8}{'busy':>8}{'median s':>10}{'slowest cell s':>16}"]
    by_lesson: dict[str, list[Run]] = {}
    for run in results:
        by_lesson.setdefault(run.lesson, []).append(run)
    for lesson, runs in by_lesson.items():
        quiet = [r for r in runs if not r.busy]
        busy = [r for r in runs if r.busy]
        seconds = sorted(r.seconds for r in runs)[len(runs) // 2]
        lines.append(f"{runs[0].name or lesson:<30}{len(runs):>6}{sum(r.passed for r in runs):>8}"
                     f"{sum(r.passed for r in quiet):>5}/{len(quiet):<2}{sum(r.passed for r in busy):>5}/{len(busy):<2}{seconds:>10.0f}{max(r.slowest_s for r in runs):>16.0f}")
    failures = [r for r in results if not r.passed]
    if failures:
        lines += ["", "failures (cell = notebook cell index, counting markdown cells):"]
        for run in failures:
            lines.append(f"- {run.lesson} run {run.number}{' (busy)' if run.busy else ''}, cell {run.failed_cell}: {run.error}")
            if run.assertion:
                lines.append(f"    {run.assertion}")
            lines += [f"    {part} = {value}" for part, value in run.values.items()]
    return "\n".join(lines)


def leftover_children() -> list[str]:
    """Child processes of this tool still alive (multiprocessing's resource tracker excepted)."""
    import psutil

    def command(process: psutil.Process) -> str:
        try:
            return " ".join(process.cmdline())
        except psutil.Error:  # exited since it was listed
            return f"pid {process.pid} (exited)"

    return [command(p)[:120] for p in descendants()]


def main(argv: list[str] | None = None) -> int:
    """Command line: tools/stress.py [--runs N] [LESSON ...]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lessons", nargs="*", default=list(TIMED_LESSONS), help=f"lesson numbers (default: {' '.join(TIMED_LESSONS)})")
    parser.add_argument("--runs", type=int, default=5, help="runs per lesson; the even-numbered ones beside busy programs (default 5)")
    parser.add_argument("--busy", type=int, default=BUSY_PROGRAMS, help=f"CPU-bound programs beside each busy run (default {BUSY_PROGRAMS})")
    parser.add_argument("--keep", type=Path, help="a folder for every executed notebook, to read what each run printed")
    parser.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT_S, help=f"seconds per cell (default {CELL_TIMEOUT_S})")
    args = parser.parse_args(argv)
    # A plain `kill` ends Python without running `finally`: turn it into an exit, so the busy program and the kernel stop too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    if args.busy < 1:
        parser.error(f"--busy must be at least 1, got {args.busy}")
    for lesson in args.lessons:
        try:
            lesson_path(lesson)
        except ValueError as error:
            parser.error(str(error))
    results = stress(args.lessons, args.runs, args.cell_timeout, log=lambda line: print(line, flush=True), keep=args.keep, busy=args.busy)
    print("\n" + table(results))
    left = leftover_children()
    if left:
        print("left behind:", *left, sep="\n  ")
    return 0 if all(r.passed for r in results) and not left else 1


if __name__ == "__main__":
    sys.exit(main())
