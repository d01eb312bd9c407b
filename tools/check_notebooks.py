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


def id_problems(path: Path) -> list[str]:
    """Cells without an id: nbformat 4.5 requires one, and JupyterLab warns (MissingIDFieldWarning) on opening the notebook."""
    missing = [i for i, c in enumerate(_cells(path)) if not c.get("id")]
    if not missing:
        return []
    return [f"{path.relative_to(ROOT)}: cells {missing} have no id: give each a unique id (e.g. uuid.uuid4().hex[:8])"]


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
    if not code or not _text(code[0]).startswith("# Environment cell"):
        found.append(f"{rel}: the first code cell must be the environment cell, starting with `# Environment cell`")
    tail = [h for h in headings if h.split()[0] in HEADINGS_AT_END][-len(HEADINGS_AT_END):]
    if tuple(h.split()[0] for h in tail) != HEADINGS_AT_END or headings[-len(HEADINGS_AT_END):] != tail:
        found.append(f"{rel}: must end with the headings {', '.join(HEADINGS_AT_END)} (in that order)")
    return found


def registry_problems(path: Path, number: str, title: str, needs: str, minutes: int) -> list[str]:
    """A lesson's H1, Hardware line and minutes must say what helpers/course.py LESSONS says."""
    rel = path.relative_to(ROOT)
    cells = [_text(c) for c in _cells(path) if c["cell_type"] == "markdown"]
    found = []
    if not cells or not cells[0].startswith(f"# {number} · {title}"):
        found.append(f"{rel}: the H1 must start `# {number} · {title}` (helpers/course.py LESSONS)")
    prerequisites = next((text for text in cells if re.match(r"^##\s+Prerequisites", text)), "")
    hardware = re.search(r"\*\*Hardware:([^*]*)\*\*", prerequisites)
    if hardware is None or needs not in hardware.group(1):
        found.append(f"{rel}: the Prerequisites' **Hardware: ...** line must name '{needs}' (helpers/course.py LESSONS)")
    if f"About {minutes} minutes" not in prerequisites:
        found.append(f"{rel}: the Prerequisites must say 'About {minutes} minutes' (helpers/course.py LESSONS)")
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


# A line that is code, not prose: a cell magic, an assert, a print call or an import.
CODE_LINE = re.compile(r"^\s*(%%|assert |print\(|import \w|from [\w.]+ import )")
FENCE = re.compile(r"^\s*(```|~~~)")


def markdown_code_problems(path: Path) -> list[str]:
    """Markdown cells holding unfenced code: a code cell merged into the text by an editor slip."""
    rel = path.relative_to(ROOT)
    found = []
    for index, cell in enumerate(_cells(path)):
        if cell["cell_type"] != "markdown":
            continue
        fenced = False
        for number, line in enumerate(_text(cell).splitlines(), start=1):
            if FENCE.match(line):
                fenced = not fenced
            elif not fenced and CODE_LINE.match(line):
                found.append(f"{rel} cell {index} line {number}: markdown holds code `{line.strip()[:60]}`: "
                             "make it a code cell, or fence it in ``` if it is meant to be read, not run")
    return found


def doc_link_problems(root: Path = ROOT) -> list[str]:
    """Relative links in the course's Markdown pages (README, CONTRIBUTING, docs/) that do not resolve."""
    found = []
    for page in sorted([*root.glob("*.md"), *(root / "docs").rglob("*.md"), *(root / "scripts").glob("*.md")]):
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target and not target.startswith("mailto:") and not (page.parent / target).exists():
                found.append(f"{page.relative_to(root)}: links to {target}, which does not exist")
    return found


# JupyterLab at 1400 px with the file browser open shows about 110 characters of a code line; the rest is cut off.
MAX_CODE_LINE = 110


def long_line_problems(path: Path) -> list[str]:
    """Code lines longer than MAX_CODE_LINE in a lesson's or solution's code cells (exercises are generated from solutions)."""
    if path.parent.name not in {"notebooks", "solutions"}:
        return []
    rel = path.relative_to(ROOT)
    return [f"{rel} cell {index} line {number}: {len(line)} characters, over {MAX_CODE_LINE} (cut off in JupyterLab): wrap it"
            for index, cell in enumerate(_cells(path)) if cell["cell_type"] == "code"
            for number, line in enumerate(_text(cell).splitlines(), 1) if len(line) > MAX_CODE_LINE]


# A markdown cell over ~150 words is where learners start skimming, and where the instructions get missed.
MAX_MARKDOWN_WORDS = 150


def long_markdown_problems(path: Path) -> list[str]:
    """Markdown cells of more than MAX_MARKDOWN_WORDS words (split at a paragraph or list, or cut)."""
    rel = path.relative_to(ROOT)
    return [f"{rel} cell {index}: a markdown cell of {words} words, over {MAX_MARKDOWN_WORDS}: split it or cut it "
            f"(starts `{_text(cell).strip()[:50]}`)"
            for index, cell in enumerate(_cells(path)) if cell["cell_type"] == "markdown"
            and (words := len(_text(cell).split())) > MAX_MARKDOWN_WORDS]


def file_problems(path: Path) -> list[str]:
    """Hygiene problems every notebook can have: outputs, ids, size, kernel, links, code in markdown, long lines and cells."""
    return (output_problems(path) + id_problems(path) + size_problems(path) + kernel_problems(path) + link_problems(path)
            + markdown_code_problems(path) + long_line_problems(path) + long_markdown_problems(path))


def _lessons(root: Path) -> list[Path]:
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def next_problems(path: Path) -> list[str]:
    """A lesson's "Next" section must link to the next lesson when that notebook exists."""
    rel = path.relative_to(ROOT)
    lessons = _lessons(path.parent.parent)
    later = [p for p in lessons if p.name > path.name]
    sections = [_text(c) for c in _cells(path) if c["cell_type"] == "markdown" and re.match(r"^##\s+Next\b", _text(c))]
    if not sections:
        return [f"{rel}: no '## Next' section"]
    if later and f"({later[0].name})" not in sections[-1]:
        return [f"{rel}: the Next section must link to the next lesson, ({later[0].name})"]
    return []


def sources_problems(path: Path) -> list[str]:
    """A lesson must end its teaching with "Further reading" (links its claims rest on) before the Summary,
    and must say what "the blog post" is (a link to docs/myths.md) if it mentions it."""
    rel = path.relative_to(ROOT)
    cells = [_text(c) for c in _cells(path) if c["cell_type"] == "markdown"]
    found = []
    reading = [i for i, text in enumerate(cells) if re.match(r"^##\s+Further reading\b", text)]
    summary = [i for i, text in enumerate(cells) if re.match(r"^##\s+Summary\b", text)]
    if not reading or not summary or reading[-1] > summary[-1]:
        found.append(f"{rel}: needs a '## Further reading' section before the Summary")
    elif len(re.findall(r"\]\(https?://", cells[reading[-1]])) < 2:
        found.append(f"{rel}: 'Further reading' should link the sources (source files, docs, issues) the lesson rests on")
    mentions = [text for text in cells if "blog post" in text.lower()]
    if mentions and "docs/myths.md" not in mentions[0]:
        found.append(f"{rel}: the first mention of the blog post must link ../docs/myths.md (what the post is and claims)")
    return found


def preparation_problems(text: str, where: str, root: Path = ROOT) -> list[str]:
    """Sentences calling a lesson "in preparation" although its notebook exists."""
    found = []
    for sentence in re.split(r"(?<=[.;])\s+", text.replace("\n", " ")):
        if "in preparation" not in sentence.lower():
            continue
        for lesson in _lessons(root):
            number = lesson.name[:2]
            if re.search(rf"\b{number}\b", sentence) or lesson.stem in sentence:  # "lesson 07", "07 a debugging clinic"
                found.append(f"{where}: says lesson {number} is in preparation, but notebooks/{lesson.name} exists: "
                             f"`{sentence.strip()[:80]}`")
    return found


def notebook_preparation_problems(path: Path) -> list[str]:
    """preparation_problems over a notebook's markdown cells."""
    rel = path.relative_to(ROOT)
    return [problem for index, cell in enumerate(_cells(path)) if cell["cell_type"] == "markdown"
            for problem in preparation_problems(_text(cell), f"{rel} cell {index}", path.parent.parent)]


def problems(root: Path = ROOT) -> list[str]:
    """Every hygiene problem in the course's notebooks."""
    found = []
    for path in all_notebooks(root):
        found += file_problems(path) + notebook_preparation_problems(path)
        if path.parent.name == "notebooks":
            found += structure_problems(path) + next_problems(path) + sources_problems(path)
    found += doc_link_problems(root)
    for page in [root / "README.md", root / "CONTRIBUTING.md", *sorted((root / "docs").glob("*.md"))]:
        if page.exists():
            found += preparation_problems(page.read_text(), str(page.relative_to(root)), root)
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
