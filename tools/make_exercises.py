"""Write exercises/NN_<topic>_exercises.ipynb from solutions/NN_<topic>_solutions.ipynb (`make exercises`).

In a solution notebook, each region between `### BEGIN SOLUTION NN.K` and `### END SOLUTION` (inside a
function body) becomes a stub raising NotImplementedError("Exercise NN.K: ..."); outputs are cleared.
The id NN.K is written in the marker, and the `checks.check_...` call in the next code cell must report
it (helpers.checks.REGISTRY): a marker without an id, an id used twice, or one that the check after it
does not report is a SolutionFormatError naming the file, the cell and the ids. The generator owns the
banner (cell 1): it writes SOLUTION_BANNER into each solution notebook and EXERCISE_BANNER in its place
in the exercise, so no hand-set tag decides what a learner sees. `--check` writes nothing and fails when
a solution lacks its banner, when an exercise notebook differs from what its solution would generate,
or when an exercise leaks a solution.
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import nbformat

from helpers.checks import REGISTRY
from helpers.checks.core import EXERCISE_ID

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
SOLUTION_BANNER = (
    "*This is the solution notebook. The exercises notebook in `exercises/` is generated from it\n"
    "by `make exercises`; each solution region below becomes a `NotImplementedError` stub there.*"
)
EXERCISE_BANNER = (
    "*Your exercise notebook: complete each function where it raises `NotImplementedError`, then run\n"
    "the self-check below it. Worked answers are in `solutions/`: try first.*"
)
# A banner that says "solution" only in the generated solution notebook; any cell saying it is dropped
# from the exercise, whatever its tags.
BANNER_MARK = "solution notebook"
SOLUTION_NAME = re.compile(r"^(\d\d)_([a-z0-9_]+)_solutions\.ipynb$")
CHECK_CALL = re.compile(r"\bchecks\.(check_\w+)\(")


class SolutionFormatError(ValueError):
    """A solution notebook whose markers cannot be turned into stubs."""


def exercise_name(solution: Path) -> str:
    """exercises/ file name for a solutions/ notebook: NN_topic_solutions -> NN_topic_exercises."""
    match = SOLUTION_NAME.match(solution.name)
    if match is None:
        raise SolutionFormatError(f"{solution}: solution notebooks are named NN_<topic>_solutions.ipynb")
    return f"{match.group(1)}_{match.group(2)}_exercises.ipynb"


def region_id(stripped: str, where: str) -> str | None:
    """The exercise id of a `### BEGIN SOLUTION NN.K` line (None for any other line); a marker without a valid id is an error."""
    if not stripped.startswith(BEGIN):
        return None
    number = stripped[len(BEGIN):].strip()
    if not EXERCISE_ID.match(number):
        raise SolutionFormatError(f"{where}: `{stripped}` needs the exercise id it solves, as in `{BEGIN} 03.4`")
    return number


def stub_source(source: str, where: str) -> tuple[str, list[str]]:
    """Replace each marked region of one code cell with a NotImplementedError stub; also return the regions' ids."""
    out: list[str] = []
    ids: list[str] = []
    inside = False
    for line in source.splitlines():
        stripped = line.strip()
        number = region_id(stripped, where)
        if number is not None:
            if inside:
                raise SolutionFormatError(f"{where}: {BEGIN} inside another solution region")
            indent = line[: len(line) - len(line.lstrip())]
            if not indent:
                raise SolutionFormatError(
                    f"{where}: {BEGIN} must sit inside a function body, so the stub raises only when a check calls it"
                )
            ids.append(number)
            out.append(f"{indent}# YOUR CODE HERE")
            out.append(f'{indent}raise NotImplementedError("Exercise {number}: replace this line with your code")')
            inside = True
        elif stripped == END:
            if not inside:
                raise SolutionFormatError(f"{where}: {END} without a {BEGIN} before it")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise SolutionFormatError(f"{where}: {BEGIN} is never closed by {END}")
    return "\n".join(out), ids


def checked_ids(source: str, where: str) -> dict[str, str]:
    """The exercise id each `checks.check_...` call in a cell reports, by check name; an unknown check is an error."""
    by_name = {registered.check.__name__: number for number, registered in REGISTRY.items()}
    found = {}
    for name in CHECK_CALL.findall(source):
        if name not in by_name:
            raise SolutionFormatError(f"{where}: calls checks.{name}, which is not a check in helpers.checks")
        found[name] = by_name[name]
    return found


def _is_banner(cell: dict) -> bool:
    """A markdown cell that tells the reader it is the solution notebook."""
    return cell.get("cell_type") == "markdown" and BANNER_MARK in "".join(cell.get("source", "")).lower()


def with_banner(nb: nbformat.NotebookNode) -> bool:
    """Put SOLUTION_BANNER as cell 1 of a solution notebook (replacing any old banner); True if it changed."""
    cells = [cell for cell in nb.cells if not _is_banner(cell)]
    banner = nbformat.v4.new_markdown_cell(SOLUTION_BANNER)
    current = [cell for cell in nb.cells if _is_banner(cell)]
    if len(current) == 1 and nb.cells.index(current[0]) == 1 and current[0].source == SOLUTION_BANNER:
        return False
    banner.id = current[0].get("id", banner.id) if current else banner.id
    nb.cells = cells[:1] + [banner] + cells[1:]
    return True


def solution_regions(source: str) -> list[str]:
    """The code of each marked region of one cell, dedented, blank lines and comments left out."""
    regions: list[str] = []
    lines: list[str] | None = None
    for line in source.splitlines():
        stripped = line.strip()
        if stripped.startswith(BEGIN):
            lines = []
        elif stripped == END and lines is not None:
            regions.append("\n".join(lines))
            lines = None
        elif lines is not None and stripped and not stripped.startswith("#"):
            lines.append(stripped)
    return regions


def leak_problems(exercise_text: str, solution: Path) -> list[str]:
    """What an exercise notebook gives away: the solution banner, solution markers, or a solution body."""
    nb = nbformat.reads(exercise_text, as_version=4)
    name = exercise_name(solution)
    found = []
    for index, cell in enumerate(nb.cells):
        text = cell.source
        if BANNER_MARK in text.lower():
            found.append(f"exercises/{name} cell {index}: tells the learner it is the solution notebook")
        if BEGIN in text or END in text:
            found.append(f"exercises/{name} cell {index}: contains solution markers")
    code = "\n".join(line.strip() for cell in nb.cells if cell.cell_type == "code" for line in cell.source.splitlines())
    for cell in nbformat.read(solution, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        for region in solution_regions(cell.source):
            if region and region in code:
                first = region.splitlines()[0]
                found.append(f"exercises/{name}: contains the body of a solution region (starting `{first}`)")
    return found


def generate(solution: Path) -> tuple[str, int]:
    """The exercise notebook's text for one solution notebook, and how many stubs it has."""
    number = exercise_name(solution)[:2]
    shown = solution.relative_to(ROOT) if solution.is_relative_to(ROOT) else solution
    nb = nbformat.read(solution, as_version=4)
    regions: dict[str, int] = {}  # exercise id -> the cell holding its region
    cells = []
    for index, cell in enumerate(nb.cells):
        where = f"{shown} cell {index}"
        if _is_banner(cell):
            banner = nbformat.v4.new_markdown_cell(EXERCISE_BANNER)
            banner.id = f"{cell.get('id', 'banner')}-exercise"[:64]
            cells.append(banner)
            continue
        if cell.cell_type == "code":
            original = cell.source
            cell.source, ids = stub_source(original, where)
            cell.outputs = []
            cell.execution_count = None
            for exercise in ids:
                if not exercise.startswith(f"{number}."):
                    raise SolutionFormatError(f"{where}: region {exercise} in the notebook of lesson {number}: its id starts {number}.")
                if exercise in regions:
                    raise SolutionFormatError(f"{where}: region {exercise} has the id of the region in cell {regions[exercise]} too")
                regions[exercise] = index
                _match_check(nb.cells, index, exercise, shown)
        elif BEGIN in cell.source:
            raise SolutionFormatError(f"{where}: solution markers belong in code cells only")
        cells.append(cell)
    if not regions:
        raise SolutionFormatError(f"{solution}: no {BEGIN} region, so its exercise notebook would have nothing to do")
    nb.cells = cells
    text = nbformat.writes(nb)
    return (text if text.endswith("\n") else text + "\n"), len(regions)


def _match_check(cells: list, index: int, exercise: str, shown: Path) -> None:
    """Fail unless the first code cell after cell `index` calls the check that reports `exercise`."""
    following = next((i for i in range(index + 1, len(cells)) if cells[i].cell_type == "code"), None)
    if following is None:
        raise SolutionFormatError(f"{shown} cell {index}: region {exercise} has no code cell after it to call its check")
    reported = checked_ids(cells[following].source, f"{shown} cell {following}")
    if exercise not in reported.values():
        calls = ", ".join(f"checks.{name} (exercise {ex})" for name, ex in reported.items()) or "no checks.check_... at all"
        raise SolutionFormatError(f"{shown} cell {index}: region {exercise} is followed in cell {following} by {calls}")


def main(argv: list[str] | None = None) -> int:
    """Regenerate (or with --check, verify) every exercise notebook; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if exercises/ is out of date")
    args = parser.parse_args(argv)
    solutions = sorted((ROOT / "solutions").glob("*.ipynb"))
    expected_names = set()
    problems = []
    for solution in solutions:
        nb = nbformat.read(solution, as_version=4)
        if with_banner(nb):
            if args.check:
                problems.append(f"solutions/{solution.name} lacks the generated banner in cell 1: run `make exercises`")
            else:
                nbformat.write(nb, solution)
                print(f"wrote the banner into solutions/{solution.name}")
        target = ROOT / "exercises" / exercise_name(solution)
        expected_names.add(target.name)
        text, stubs = generate(solution)
        problems += leak_problems(text, solution)
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
