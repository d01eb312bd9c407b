"""Run the loader doctor on every corpus case (doctor_corpus) N times and print a Markdown table of verdicts.

`.venv/bin/python tools/doctor_bench.py [CASE ...] [--runs 3] [--busy] [--cli]`: each run diagnoses the case's loader
in this process; `--busy` keeps a `python -c "while True: pass"` program running beside every run (busy-host is then
neither required nor a false alarm); `--cli` also runs each case once through `python -m helpers.doctor` in a fresh
process and checks its exit status (1 when an error is expected, else 0) and its codes. A verdict is "ok", or what was
MISSED, what was a FALSE ALARM, which finding had WRONG EVIDENCE (a case's EVIDENCE) and which runs went OVER BUDGET (the doctor's call took over its budget + 1 s), in which
runs. Exit status 1 when any run misses, false-alarms, crashes or goes over budget, or when a process or temp folder is
left behind. A HOST_BUSY case gets one busy program per usable core around its runs.
Cases whose NEEDS are unmet here are listed as skipped. The doctor imported is whichever `helpers` comes first on
sys.path (PYTHONPATH before this checkout), so a base copy can be compared.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))  # after PYTHONPATH: a `helpers` given there is the one diagnosed

import doctor_corpus as corpus  # noqa: E402
from doctor_corpus import _data  # noqa: E402
from helpers.start_method import descendants  # noqa: E402

CLI_SLACK_S = 120  # the command line's start-up (imports, data generation) beyond its budget


@dataclass
class Run:
    """One diagnosis of one case: the codes found as warning/error, its time, or the crash."""

    found: set[str] = field(default_factory=set)
    seconds: float = 0.0
    crash: str = ""
    exit_status: int | None = None  # the command line's, for a --cli run
    why_not: dict[str, str] = field(default_factory=dict)  # the doctor's not_measured reasons for expected codes
    wrong: list[str] = field(default_factory=list)  # the case's EVIDENCE entries its findings did not hold


@dataclass
class Row:
    """A case's runs and verdict."""

    case: ModuleType
    skipped: str = ""
    runs: list[Run] = field(default_factory=list)
    cli: Run | None = None
    tolerated: frozenset[str] = frozenset()

    def verdict(self) -> str:
        """"ok", or what was missed / false-alarmed / crashed, with the runs it happened in."""
        if self.skipped:
            return f"skipped: {self.skipped}"
        missed: dict[str, list[str]] = {}
        extra: dict[str, list[str]] = {}
        said: dict[str, str] = {}  # a missed code's reason, as the doctor gave it (its first run's)
        problems = []
        labelled = [(str(i), r) for i, r in enumerate(self.runs, 1)] + ([("cli", self.cli)] if self.cli else [])
        for label, run in labelled:
            if run.crash:
                problems.append(f"CRASH in run {label}: {run.crash}")
                continue
            lost, alarms = corpus.compare(corpus.expected(self.case), run.found, self.tolerated)
            for code in lost:
                missed.setdefault(code, []).append(label)
                if code in run.why_not:
                    said.setdefault(code, run.why_not[code])
            for code in alarms:
                extra.setdefault(code, []).append(label)
        problems += [f"MISSED {c} (runs {', '.join(r)}){'; the doctor said: ' + said[c] if c in said else ''}"
                     for c, r in sorted(missed.items())]
        problems += [f"FALSE ALARM {c} (runs {', '.join(r)})" for c, r in sorted(extra.items())]
        wrong: dict[str, list[str]] = {}
        for label, run in labelled:
            for entry in run.wrong:
                wrong.setdefault(entry, []).append(label)
        problems += [f"WRONG EVIDENCE {e} (runs {', '.join(r)})" for e, r in sorted(wrong.items())]
        limit = corpus.budget_s(self.case) + corpus.OVER_BUDGET_S
        slow = [f"{label}: {run.seconds:.1f} s" for label, run in labelled[:len(self.runs)] if not run.crash and run.seconds > limit]
        if slow:
            problems.append(f"OVER BUDGET (runs {', '.join(slow)}; budget {corpus.budget_s(self.case):g} s + {corpus.OVER_BUDGET_S:g} s)")
        want = corpus.expected_exit(self.case)
        if self.cli and not self.cli.crash and self.cli.exit_status != want:
            problems.append(f"CLI EXIT {self.cli.exit_status} (want {want})")
        return "; ".join(problems) or "ok"

    @property
    def failed(self) -> bool:
        return not self.skipped and self.verdict() != "ok"


def run_in_process(case: ModuleType) -> Run:
    """Diagnose the case here."""
    started = time.perf_counter()
    try:
        diagnosis, seconds = corpus.diagnose(case)
    except Exception as error:  # noqa: BLE001 - a doctor that crashes is a verdict, not the end of the table
        last = traceback.format_exception_only(error)[-1].strip()
        return Run(seconds=time.perf_counter() - started, crash=last[:150])
    return Run(corpus.problems(diagnosis, corpus.expected(case)), seconds,
               why_not={code: why for code, why in diagnosis.not_measured.items() if code in corpus.expected(case)},
               wrong=corpus.wrong_evidence(case, diagnosis.findings))


def run_command_line(case: ModuleType) -> Run:
    """Diagnose the case with `python -m helpers.doctor` in a fresh process group; its exit status and JSON codes."""
    name = f"{corpus.__name__}.{corpus.name(case)}"
    with tempfile.TemporaryDirectory(prefix=_data.PREFIX + "cli-") as folder:
        out = Path(folder) / "diagnosis.json"
        command = [sys.executable, "-m", "helpers.doctor", f"{name}:make_loader", "--json", str(out),
                   "--budget", str(corpus.budget_s(case)), *corpus.cli_flags(case)]
        if hasattr(case, "step"):
            command += ["--step", f"{name}:step"]
        if getattr(case, "DEVICE", None):
            command += ["--device", case.DEVICE]
        paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p] + [str(ROOT)]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "TMPDIR": folder}  # its files go when this folder goes
        started = time.perf_counter()
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            output, _ = process.communicate(timeout=corpus.budget_s(case) + CLI_SLACK_S)
        except subprocess.TimeoutExpired:
            output = "timed out"
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)  # the doctor's own workers too, whatever happened
            process.wait()
        seconds = time.perf_counter() - started
        if not out.exists():
            return Run(seconds=seconds, crash=f"exit {process.returncode}, no JSON: {output.strip().splitlines()[-1:]}",
                       exit_status=process.returncode)
        data = json.loads(out.read_text())
    found = {f["code"] for f in data["findings"] if f["severity"] != "info" or f["code"] in corpus.expected(case)}
    return Run(found, float(data["elapsed_s"]), exit_status=process.returncode, wrong=corpus.wrong_evidence(case, data["findings"]))


def run_case(case: ModuleType, runs: int, busy: bool, cli: bool, log=print) -> Row:
    """All runs of one case (and its command-line run), with its busy programs around them."""
    row = Row(case, skipped=corpus.unmet(case) or "")
    if row.skipped:
        log(f"{corpus.name(case)}: skipped ({row.skipped})")
        return row
    if busy and not getattr(case, "HOST_BUSY", False):
        row.tolerated = frozenset({"busy-host"})
    with corpus.busy(int(busy)), corpus.host_busy(case):
        for number in range(1, runs + 1):
            row.runs.append(run_in_process(case))
            log(f"{corpus.name(case)} run {number}/{runs}: {summary(row.runs[-1])}")
        if cli:
            row.cli = run_command_line(case)
            log(f"{corpus.name(case)} command line: {summary(row.cli)}, exit {row.cli.exit_status}")
    return row


def summary(run: Run) -> str:
    """A run's codes (or its crash) for the table."""
    return f"CRASH {run.crash}" if run.crash else ", ".join(sorted(run.found)) or "—"


def table(rows: list[Row], cli: bool) -> str:
    """The Markdown table: case, origin, expected, found and seconds per run, (command line,) verdict."""
    head = ["case", "origin (short)", "expected", "found per run", "s per run"] + (["command line"] if cli else []) + ["verdict"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        origin = corpus.origin(row.case).removeprefix("modelled on ")
        short = origin[:60] + ("…" if len(origin) > 60 else "")
        cells = [corpus.name(row.case), short, ", ".join(sorted(corpus.expected(row.case))) or "—",
                 " / ".join(summary(r) for r in row.runs) or "—", " / ".join(f"{r.seconds:.1f}" for r in row.runs) or "—"]
        if cli:
            want = corpus.expected_exit(row.case)
            line = row.cli
            cells.append(f"exit {line.exit_status} (want {want}): {summary(line)}, {line.seconds:.1f} s" if line else "—")
        cells.append(row.verdict())
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return "\n".join(lines)


def leftovers(before: set[str]) -> list[str]:
    """Child processes still alive (multiprocessing's resource tracker excepted) and corpus temp folders not there before."""
    import psutil

    def command(process: psutil.Process) -> str:
        try:
            return " ".join(process.cmdline())
        except psutil.Error:
            return f"pid {process.pid} (exited)"

    children = [command(p)[:120] for p in descendants()]
    return children + sorted(temp_folders() - before)


def temp_folders() -> set[str]:
    """The corpus's temp folders now in the temp directory."""
    return {str(p) for p in Path(tempfile.gettempdir()).glob(_data.PREFIX + "*")}


def provenance(package: Path) -> str:
    """Where the diagnosed doctor comes from: its folder, the commit of its checkout, and whether it differs from that commit."""
    def git(*args: str) -> str:
        result = subprocess.run(["git", "-C", str(package), *args], capture_output=True, text=True, check=False)
        return result.stdout.strip()

    commit = git("rev-parse", "--short", "HEAD")
    changed = git("status", "--porcelain", "--", ".")
    return f"{package} (commit {commit or 'unknown'}{', with uncommitted changes' if changed else ''})"


def main(argv: list[str] | None = None) -> int:
    """Command line: tools/doctor_bench.py [CASE ...] [--runs N] [--busy] [--cli]."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", help="case names (default: all of doctor_corpus)")
    parser.add_argument("--runs", type=int, default=3, help="in-process diagnoses per case (default 3)")
    parser.add_argument("--busy", action="store_true", help='keep one `python -c "while True: pass"` running beside every run')
    parser.add_argument("--cli", action="store_true", help="also run each case once through `python -m helpers.doctor`")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error(f"--runs must be at least 1, got {args.runs}")
    unknown = [c for c in args.cases if c not in corpus.CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; the cases are: {', '.join(corpus.CASES)}")
    # A plain `kill` ends Python without running `finally`: turn it into an exit, so busy programs and subprocesses stop too
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    before = temp_folders()
    load_before = os.getloadavg()[0]
    rows = []
    try:
        for name in args.cases or corpus.CASES:
            rows.append(run_case(corpus.load(name), args.runs, args.busy, args.cli, log=lambda line: print(line, flush=True)))
    finally:
        _data.cleanup()
    from helpers import doctor

    print(f"\nhelpers.doctor from {provenance(Path(doctor.__file__).parent)}; {args.runs} run(s) per case"
          + (", beside a busy program (busy-host tolerated)" if args.busy else "")
          + f"; 1-minute load average {load_before:.1f} before, {os.getloadavg()[0]:.1f} after, "
          f"on {_data.cores()} usable cores\n")
    print(table(rows, args.cli))
    failed = [corpus.name(r.case) for r in rows if r.failed]
    print(f"\n{len(rows) - len(failed) - sum(bool(r.skipped) for r in rows)} ok, {len(failed)} not ok"
          f"{' (' + ', '.join(failed) + ')' if failed else ''}, {sum(bool(r.skipped) for r in rows)} skipped")
    deadline = time.monotonic() + 5
    while leftovers(before) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = leftovers(before)
    if left:
        print("left behind:", *left, sep="\n  ")
    return 1 if failed or left else 0


if __name__ == "__main__":
    sys.exit(main())
