"""Mutation testing of the helpers: small bugs planted by mutmut, one at a time; a test must fail on each.

`make mutants` (or `.venv/bin/python tools/mutants.py samplers imbalance --time-limit 1200`) copies helpers/, tests/,
tools/, docs/ and pyproject.toml into a temporary folder, adds a [tool.mutmut] section that mutates only the chosen
modules and runs only the test files that cover them (MODULES), runs `mutmut run` there, and prints per module:
mutants, killed, timed out (a mutant that makes a test hang counts as caught), survived, not reached by any test, listed
(CONTRIBUTING.md, "A test that fails when the code breaks", with the reason) and the share caught. Each survivor that
is not listed is printed as its diff. Exit status 1 when a module catches under THRESHOLD of its unlisted mutants, or
the run ran out of time. The
temporary folder is removed (keep it with --keep to browse it with `mutmut browse` there). Not part of `make test`.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
# mutmut forks each mutant's test run from a process where torch has started its OpenMP threads; a forked child
# then spins in OpenMP until mutmut's CPU limit kills it, and a mutant the tests would catch or miss reads "timed out"
# (72 of focal_loss's 102 did). One thread per process avoids it.
ONE_THREAD = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
THRESHOLD = 0.90  # issue 28: at least 90 % of each module's mutants caught


class Module(NamedTuple):
    """What `make mutants MODULES=name` mutates: its files under helpers/, and the test files that cover them."""

    sources: tuple[str, ...]
    tests: tuple[str, ...]  # fast ones: mutmut runs them once per mutant that they reach


# Each module by the name CONTRIBUTING.md's list of equivalent mutants uses; a package's module names the parts mutated.
MODULES: dict[str, Module] = {
    "imbalance": Module(("helpers/imbalance.py",), ("tests/test_imbalance.py",)),
    "losses": Module(("helpers/losses.py",), ("tests/test_imbalance.py",)),
    "metrics": Module(("helpers/metrics.py",), ("tests/test_imbalance.py",)),
    "samplers": Module(("helpers/samplers.py",), ("tests/test_samplers.py",)),
    "streaming": Module(("helpers/streaming.py",), ("tests/test_streaming.py", "tests/test_streaming_demos.py")),
    "loading": Module(("helpers/loading/benchmark.py", "helpers/loading/sweeps.py"),
                      ("tests/test_loading.py", "tests/test_loading_bench.py")),
}
CAUGHT = ("killed", "timeout", "segfault", "caught by type check")  # a test failed, hung or crashed on the mutant
# In CONTRIBUTING.md: "- `module`: `original` -> `mutated`: why no test can tell them apart" (by the change, not by
# mutmut's numbering, which shifts whenever the module changes).
EQUIVALENT = re.compile(r"^- `(\w+)`: `(.+?)` -> `(.+?)`: (.+)$", re.MULTILINE)
# `mutmut results --all true`: "helpers.samplers.x_name__mutmut_3: killed", a method "helpers.samplers.xǁClassǁname__mutmut_3: ...",
# a package's part "helpers.loading.sweeps.x_name__mutmut_3: ..." (the source file's dotted path, then x_ or xǁ)
RESULT = re.compile(r"^\s*((helpers(?:\.\w+)+?)\.x[_\u01c1]\S+?__mutmut_\d+): (.+)$", re.MULTILINE)


def equivalent_changes(contributing: Path = ROOT / "CONTRIBUTING.md") -> list[tuple[str, str, str]]:
    """The changes CONTRIBUTING.md lists as equivalent mutants (no test can tell them from the original): (module, original, mutated)."""
    return [(module, before, after) for module, before, after, _ in EQUIVALENT.findall(contributing.read_text(encoding="utf-8"))]


def is_equivalent(module: str, diff: list[str], equivalent: list[tuple[str, str, str]]) -> bool:
    """Whether a survivor's diff (its - and + lines) is one of the listed equivalent changes of `module`."""
    removed = " ".join(line[1:] for line in diff if line.startswith("-"))
    added = " ".join(line[1:] for line in diff if line.startswith("+"))
    return any(module == listed and before in removed and after in added for listed, before, after in equivalent)


def mutmut_config(modules: list[str]) -> str:
    """The [tool.mutmut] section that mutates `modules` and runs the test files that cover them, without notebooks."""
    tests = sorted({test for module in modules for test in MODULES[module].tests})
    quoted = lambda items: "[" + ", ".join(f'"{item}"' for item in items) + "]"  # noqa: E731
    return ("\n[tool.mutmut]\n"
            'source_paths = ["helpers"]\n'
            'also_copy = ["tools", "docs"]\n'
            f"only_mutate = {quoted(source for module in modules for source in MODULES[module].sources)}\n"
            f"pytest_add_cli_args_test_selection = {quoted(tests)}\n"
            'pytest_add_cli_args = ["-p", "no:nbval", "-o", "addopts=-p no:cacheprovider", "-x", "-q"]\n')


def read_results(listing: str) -> list[tuple[str, str, str]]:
    """(mutant, module, status) for each line of `mutmut results --all true`, the module by its name in MODULES."""
    owners = {source.removesuffix(".py").replace("/", "."): module for module, covered in MODULES.items() for source in covered.sources}
    return [(name, owners[dotted], status.strip()) for name, dotted, status in RESULT.findall(listing)]


def table(statuses: dict[str, Counter], equivalent: dict[str, int]) -> tuple[str, bool]:
    """The per-module table, and whether every module reached THRESHOLD."""
    rows = ["module      mutants  killed  timed out  survived  no tests      listed  caught",
            "----------  -------  ------  ---------  --------  --------  ----------  ------"]
    ok = True
    for module, counts in statuses.items():
        caught = sum(counts[status] for status in CAUGHT)
        equal = equivalent.get(module, 0)
        judged = sum(counts.values()) - equal - counts["skipped"]
        share = caught / judged if judged else 0.0
        ok &= share >= THRESHOLD
        rows.append(f"{module:<10}  {sum(counts.values()):>7}  {counts['killed']:>6}  {counts['timeout']:>9}  "
                    f"{counts['survived'] - equal:>8}  {counts['no tests']:>8}  {equal:>10}  {share:>6.1%}")
    return "\n".join(rows), ok


def main(argv: list[str] | None = None) -> int:
    """Run mutmut over the chosen modules in a temporary copy; print the table and the survivors."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", help=f"modules of helpers/ (default: all of {list(MODULES)})")
    parser.add_argument("--time-limit", type=int, default=3600, help="seconds mutmut may run in all (default 3600)")
    parser.add_argument("--workers", type=int, default=2, help="mutants tested at once (default 2)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder and print where it is")
    args = parser.parse_args(argv)
    unknown = [module for module in args.modules if module not in MODULES]
    if unknown:
        parser.error(f"modules {unknown} are not covered; choose from {list(MODULES)}")
    if args.time_limit < 1 or args.workers < 1:
        parser.error(f"--time-limit and --workers must be positive, got {args.time_limit} and {args.workers}")
    modules = args.modules or list(MODULES)
    mutmut = Path(sys.executable).parent / "mutmut"
    work = Path(tempfile.mkdtemp(prefix="mutants-"))
    try:
        for part in ("helpers", "tests", "tools", "docs", "doctor_corpus"):  # tests import tools/ and doctor_corpus/, read docs/
            shutil.copytree(ROOT / part, work / part, ignore=shutil.ignore_patterns("__pycache__"))
        config = (ROOT / "pyproject.toml").read_text(encoding="utf-8") + mutmut_config(modules)
        (work / "pyproject.toml").write_text(config, encoding="utf-8")
        start = time.perf_counter()
        try:
            ran = subprocess.run([str(mutmut), "run", "--max-children", str(args.workers)], cwd=work, timeout=args.time_limit,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ONE_THREAD)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
        else:
            if ran.returncode != 0:  # e.g. a test that fails on the unmutated helpers: nothing was counted
                print(ran.stdout[-3000:], f"\nmutmut run failed with exit status {ran.returncode}", file=sys.stderr)
                return 1
        seconds = time.perf_counter() - start
        listing = subprocess.run([str(mutmut), "results", "--all", "true"], cwd=work, capture_output=True, text=True,
                                 check=True).stdout
        statuses: dict[str, Counter] = {module: Counter() for module in modules}
        survivors: dict[str, list[str]] = {module: [] for module in modules}
        for name, module, status in read_results(listing):
            statuses[module][status] += 1
            if status == "survived":
                survivors[module].append(name)
        listed, equivalent = equivalent_changes(), Counter()
        for module in modules:
            for name in survivors[module]:
                shown = subprocess.run([str(mutmut), "show", name], cwd=work, capture_output=True, text=True).stdout
                diff = [line for line in shown.splitlines() if re.match(r"^[-+](?![-+])", line)]
                if is_equivalent(module, diff, listed):
                    equivalent[module] += 1
                else:
                    print(f"survived: {name}\n    " + "\n    ".join(diff))
        text, ok = table(statuses, equivalent)
        print(f"\n{text}\n\nmutmut ran {seconds:.0f} s on {args.workers} workers"
              + ("" if finished else f"; stopped at --time-limit {args.time_limit} s, the counts are partial"))
        if args.keep:
            print(f"kept: {work} (`cd {work} && {mutmut} browse`)")
        return 0 if ok and finished else 1
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
