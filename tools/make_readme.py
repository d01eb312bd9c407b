"""Write the README's course map from helpers.course.LESSONS (`make readme`); `--check` fails when it is out of date."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.course import LESSONS, NEEDS  # noqa: E402

START = "<!-- course map: generated from helpers/course.py by `make readme`; edit LESSONS there -->"
END = "<!-- end of course map -->"


def course_map() -> str:
    """The course map table, one row per lesson of LESSONS, between its markers."""
    rows = [
        "| notebook | what you learn | hardware for the full effect | minutes |",
        "|---|---|---|---|",
        *(f"| [{lesson.stem}.ipynb](notebooks/{lesson.stem}.ipynb) | {lesson.learn} | {NEEDS[lesson.needs]} | {lesson.minutes} |"
          for lesson in LESSONS),
    ]
    return "\n".join([START, *rows, END])


def replace_region(text: str, start: str, end: str, body: str, where: str) -> str:
    """`text` with what lies between its one `start` and one `end` marker replaced by `body` (which holds the markers)."""
    if text.count(start) != 1 or text.count(end) != 1 or text.index(start) > text.index(end):
        raise ValueError(f"{where} must hold its generated part between one {start!r} and one {end!r}")
    before, rest = text.split(start)
    _, after = rest.split(end)
    return before + body + after


def write_or_check(path: Path, wanted: str, check: bool, stale: str, wrote: str) -> int:
    """Write `wanted` to `path` if it differs (with `check`, write nothing and print `stale` instead); the exit status."""
    if wanted == path.read_text():
        return 0
    if check:
        print(stale, file=sys.stderr)
        return 1
    path.write_text(wanted)
    print(wrote)
    return 0


def with_map(readme: str) -> str:
    """The README text with its course map replaced by the generated one."""
    return replace_region(readme, START, END, course_map(), "README.md")


def main(argv: list[str] | None = None) -> int:
    """Rewrite README.md's course map (or with --check, fail if it differs); return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if README.md's course map is out of date")
    args = parser.parse_args(argv)
    path = ROOT / "README.md"
    return write_or_check(path, with_map(path.read_text()), args.check,
                          "README.md's course map differs from helpers/course.py LESSONS: run `make readme`", "wrote the course map in README.md")

if __name__ == "__main__":
    sys.exit(main())
