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


def with_map(readme: str) -> str:
    """The README text with its course map replaced by the generated one."""
    if readme.count(START) != 1 or readme.count(END) != 1 or readme.index(START) > readme.index(END):
        raise ValueError(f"README.md must hold the course map between one {START!r} and one {END!r}")
    before, rest = readme.split(START)
    _, after = rest.split(END)
    return before + course_map() + after


def main(argv: list[str] | None = None) -> int:
    """Rewrite README.md's course map (or with --check, fail if it differs); return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if README.md's course map is out of date")
    args = parser.parse_args(argv)
    path = ROOT / "README.md"
    current = path.read_text()
    wanted = with_map(current)
    if wanted == current:
        return 0
    if args.check:
        print("README.md's course map differs from helpers/course.py LESSONS: run `make readme`", file=sys.stderr)
        return 1
    path.write_text(wanted)
    print("wrote the course map in README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
