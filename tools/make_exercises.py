"""Write exercises/NN_<topic>_exercises.ipynb from solutions/NN_<topic>_solutions.ipynb (`make exercises`).

In a solution notebook, each region between `### BEGIN SOLUTION` and `### END SOLUTION` (inside a
function body) becomes a stub raising NotImplementedError("Exercise NN.K: ..."), K counting regions
in order; cells tagged `solution-only` are dropped; outputs are cleared. `--check` writes nothing
and fails when an exercise notebook differs from what its solution would generate.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SOLUTION_ONLY_TAG = "solution-only"
SOLUTION_NAME = re.compile(r"^(\d\d)_([a-z0-9_]+)_solutions\.ipynb$")


class SolutionFormatError(ValueError):
    """A solution notebook whose markers cannot be turned into stubs."""


def exercise_name(solution: Path) -> str:
    """exercises/ file name for a solutions/ notebook: NN_topic_solutions -> NN_topic_exercises."""
    match = SOLUTION_NAME.match(solution.name)
    if match is None:
        raise SolutionFormatError(f"{solution}: solution notebooks are named NN_<topic>_solutions.ipynb")
    return f"{match.group(1)}_{match.group(2)}_exercises.ipynb"


def stub_source(source: str, number: str, counter: list[int], where: str) -> str:
    """Replace each marked region of one code cell with a NotImplementedError stub."""
    out: list[str] = []
    inside = False
    for line in source.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise SolutionFormatError(f"{where}: {BEGIN} inside another solution region")
            indent = line[: len(line) - len(line.lstrip())]
            if not indent:
                raise SolutionFormatError(
                    f"{where}: {BEGIN} must sit inside a function body, so the stub raises only when a check calls it"
                )
            counter[0] += 1
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f'{indent}raise NotImplementedError("Exercise {number}.{counter[0]}: replace this line with your code")')
            inside = True
        elif stripped == END:
            if not inside:
                raise SolutionFormatError(f"{where}: {END} without a {BEGIN} before it")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise SolutionFormatError(f"{where}: {BEGIN} is never closed by {END}")
    return "\n".join(out)


def generate(solution: Path) -> tuple[str, int]:
    """The exercise notebook's text for one solution notebook, and how many stubs it has."""
    number = exercise_name(solution)[:2]
    nb = nbformat.read(solution, as_version=4)
    counter = [0]
    cells = []
    for index, cell in enumerate(nb.cells):
        if SOLUTION_ONLY_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        where = f"{solution.relative_to(ROOT) if solution.is_relative_to(ROOT) else solution} cell {index}"
        if cell.cell_type == "code":
            cell.source = stub_source(cell.source, number, counter, where)
            cell.outputs = []
            cell.execution_count = None
        elif BEGIN in cell.source:
            raise SolutionFormatError(f"{where}: solution markers belong in code cells only")
        cells.append(cell)
    if counter[0] == 0:
        raise SolutionFormatError(f"{solution}: no {BEGIN} region, so its exercise notebook would have nothing to do")
    nb.cells = cells
    text = nbformat.writes(nb)
    return (text if text.endswith("\n") else text + "\n"), counter[0]


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with --check, verify) every exercise notebook; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if exercises/ is out of date")
    args = parser.parse_args(argv)
    solutions = sorted((ROOT / "solutions").glob("*.ipynb"))
    expected_names = set()
    problems = []
    for solution in solutions:
        target = ROOT / "exercises" / exercise_name(solution)
        expected_names.add(target.name)
        text, stubs = generate(solution)
        current = target.read_text() if target.exists() else None
        if current == text:
            continue
        if args.check:
            problems.append(f"exercises/{target.name} is out of date with solutions/{solution.name}: run `make exercises`")
        else:
            target.write_text(text)
            print(f"wrote exercises/{target.name} ({stubs} exercise stubs)")
    for orphan in sorted((ROOT / "exercises").glob("*.ipynb")):
        if orphan.name not in expected_names:
            problems.append(f"exercises/{orphan.name} has no solution notebook in solutions/: delete it or add its source")
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
