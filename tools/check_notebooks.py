"""Notebook hygiene (`make test` runs it; `make strip` fixes outputs): each problem names the file and the fix."""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK_FOLDERS = ("notebooks", "exercises", "solutions")
MAX_BYTES = 200 * 1024
KERNEL_NAME = "feed-the-gpus"
HEADINGS_AT_START = ("What you will learn", "Prerequisites")
HEADINGS_AT_END = ("Summary", "Exercises", "Next")


def all_notebooks(root: Path = ROOT) -> list[Path]:
    """Every committed notebook of the course, folder by folder."""
    return [nb for folder in NOTEBOOK_FOLDERS for nb in sorted((root / folder).glob("*.ipynb"))]


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def _text(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _headings(cells: list[dict]) -> list[str]:
    return [
        match.group(1).strip()
        for cell in cells
        if cell["cell_type"] == "markdown"
        for match in re.finditer(r"^#{1,3}\s+(?:\d+\.\s+)?(.+)$", _text(cell), re.MULTILINE)
    ]


def output_problems(path: Path) -> list[str]:
    """Outputs or execution counts committed in a notebook."""
    dirty = [i for i, c in enumerate(_cells(path)) if c["cell_type"] == "code" and (c.get("outputs") or c.get("execution_count"))]
    if not dirty:
        return []
    return [f"{path.relative_to(ROOT)}: code cells {dirty} carry outputs or execution counts: run `make strip`"]


def size_problems(path: Path) -> list[str]:
    """A notebook file over the course's 200 KB limit."""
    size = path.stat().st_size
    if size <= MAX_BYTES:
        return []
    return [f"{path.relative_to(ROOT)}: {size / 1024:.0f} KB is over the {MAX_BYTES // 1024} KB limit: strip outputs or split it"]


def kernel_problems(path: Path) -> list[str]:
    """A notebook that would not open on the course kernel that `make lab` registers."""
    name = json.loads(path.read_text()).get("metadata", {}).get("kernelspec", {}).get("name")
    if name == KERNEL_NAME:
        return []
    return [f"{path.relative_to(ROOT)}: kernelspec is {name!r}, expected {KERNEL_NAME!r}: pick the 'Feed the GPUs (.venv)' kernel and save"]


def structure_problems(path: Path) -> list[str]:
    """A lesson without the header and ending sections of COURSE_SPEC section 3."""
    rel = path.relative_to(ROOT)
    cells = _cells(path)
    found = []
    if not cells or cells[0]["cell_type"] != "markdown" or not _text(cells[0]).startswith("# "):
        found.append(f"{rel}: the first cell must be a markdown H1 title (`# ...`)")
    headings = _headings(cells)
    for wanted in HEADINGS_AT_START:
        if not any(h.startswith(wanted) for h in headings):
            found.append(f"{rel}: no '{wanted}' heading near the top")
    prerequisites = [c for c in cells if c["cell_type"] == "markdown" and "Prerequisites" in _text(c)]
    if prerequisites and "hardware" not in _text(prerequisites[0]).lower():
        found.append(f"{rel}: the Prerequisites section must say what hardware the full effect needs")
    code = [c for c in cells if c["cell_type"] == "code"]
    if not code or not _text(code[0]).startswith("# NBVAL_IGNORE_OUTPUT"):
        found.append(f"{rel}: the first code cell must be the environment cell, starting with `# NBVAL_IGNORE_OUTPUT`")
    tail = [h for h in headings if h.split()[0] in HEADINGS_AT_END][-len(HEADINGS_AT_END):]
    if tuple(h.split()[0] for h in tail) != HEADINGS_AT_END or headings[-len(HEADINGS_AT_END):] != tail:
        found.append(f"{rel}: must end with the headings {', '.join(HEADINGS_AT_END)} (in that order)")
    return found


def link_problems(path: Path) -> list[str]:
    """Relative links to notebooks that do not exist."""
    rel = path.relative_to(ROOT)
    found = []
    for cell in _cells(path):
        if cell["cell_type"] != "markdown":
            continue
        for target in re.findall(r"\]\(([^)#\s]+\.ipynb)\)", _text(cell)):
            if not (path.parent / target).exists():
                found.append(f"{rel}: links to {target}, which does not exist")
    return found


def file_problems(path: Path) -> list[str]:
    """Hygiene problems every notebook can have: outputs, size, kernel, broken links."""
    return output_problems(path) + size_problems(path) + kernel_problems(path) + link_problems(path)


def problems(root: Path = ROOT) -> list[str]:
    """Every hygiene problem in the course's notebooks."""
    found = []
    for path in all_notebooks(root):
        found += file_problems(path)
        if path.parent.name == "notebooks":
            found += structure_problems(path)
    return found


def strip(path: Path) -> bool:
    """Clear outputs and execution counts in place; True if the file changed."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        if cell.cell_type == "code" and (cell.outputs or cell.execution_count is not None):
            cell.outputs, cell.execution_count, changed = [], None, True
    if changed:
        nbformat.write(nb, path)
    return changed


def main(argv: list[str] | None = None) -> int:
    """Report hygiene problems (exit 1 if any); with --strip, clear outputs first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--strip", action="store_true", help="clear outputs and execution counts in place")
    args = parser.parse_args(argv)
    if args.strip:
        for path in all_notebooks():
            if strip(path):
                print(f"stripped {path.relative_to(ROOT)}")
    found = problems()
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
