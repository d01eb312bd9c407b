"""Write the workshop schedules in docs/instructor-guide.md from helpers.course.LESSONS; `--check` fails when they are out of date."""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.course import LESSONS, Lesson  # noqa: E402
from tools.make_readme import replace_region, write_or_check  # noqa: E402

GUIDE = ROOT / "docs" / "instructor-guide.md"
START = "<!-- schedule: generated from helpers/course.py LESSONS by `tools/make_schedule.py`; edit the minutes there -->"
END = "<!-- end of schedule -->"
# Each lesson's section in the guide has one line like this, rewritten with its minutes.
MINUTES_LINE = re.compile(r"^\*\*Minutes\*\* \(generated\): (\d\d)\b.*$", re.MULTILINE)

# Of each lesson's minutes (LESSONS), how many go to its exercises; the rest is teaching.
EXERCISE_MINUTES = {"00": 10, "01": 15, "02": 15, "03": 15, "04": 10, "05": 15, "06": 15, "07": 20, "08": 15, "09": 30}
DAY_START = 9 * 60  # 09:00
MAX_BLOCK = 100  # minutes of lessons in a row before a break
BREAK = 15
LUNCH = 60
LUNCH_FROM = 11 * 60 + 30  # the first break that starts at or after 11:30 is lunch (full day)
WRAP_UP = 10
HALF_DAY = 210  # 3.5 hours, breaks and wrap-up included


@dataclass(frozen=True)
class Slot:
    """One row of a schedule: start and end in minutes after midnight, and what happens."""

    start: int
    end: int
    what: str
    lesson: Lesson | None = None


def exercise_minutes(lesson: Lesson) -> int:
    """Minutes of a lesson given to its exercises; the generator refuses a lesson without an entry."""
    if lesson.number not in EXERCISE_MINUTES:
        raise ValueError(f"lesson {lesson.number} has no entry in EXERCISE_MINUTES (tools/make_schedule.py): add one")
    minutes = EXERCISE_MINUTES[lesson.number]
    if not 0 < minutes < lesson.minutes:
        raise ValueError(f"EXERCISE_MINUTES[{lesson.number!r}] must be between 0 and the lesson's {lesson.minutes} minutes, got {minutes}")
    return minutes


def plan(lessons: tuple[Lesson, ...] | list[Lesson], lunch: bool) -> list[Slot]:
    """Lessons in order from DAY_START, a break whenever the next lesson would make a block longer than MAX_BLOCK, a wrap-up."""
    slots: list[Slot] = []
    clock, block = DAY_START, 0
    for lesson in lessons:
        if block and block + lesson.minutes > MAX_BLOCK:
            is_lunch = lunch and clock >= LUNCH_FROM and not any(s.what == "Lunch" for s in slots)
            length = LUNCH if is_lunch else BREAK
            slots.append(Slot(clock, clock + length, "Lunch" if is_lunch else "Break"))
            clock, block = clock + length, 0
        slots.append(Slot(clock, clock + lesson.minutes, lesson.title, lesson))
        clock, block = clock + lesson.minutes, block + lesson.minutes
    slots.append(Slot(clock, clock + WRAP_UP, "Wrap-up: questions, what to try on your own loaders"))
    return slots


def half_days(lessons: tuple[Lesson, ...]) -> list[list[Slot]]:
    """The lessons cut, in order, into as many half days of at most HALF_DAY minutes as they need."""
    days: list[list[Slot]] = []
    rest = list(lessons)
    while rest:
        count = 1
        while count < len(rest) and plan(rest[: count + 1], lunch=False)[-1].end - DAY_START <= HALF_DAY:
            count += 1
        days.append(plan(rest[:count], lunch=False))
        rest = rest[count:]
    return days


def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _table(slots: list[Slot]) -> list[str]:
    rows = ["| time | what | teaching + exercises |", "|---|---|---|"]
    for slot in slots:
        if slot.lesson is None:
            rows.append(f"| {_clock(slot.start)}-{_clock(slot.end)} | {slot.what} | {slot.end - slot.start} min |")
        else:
            lesson = slot.lesson
            exercises = exercise_minutes(lesson)
            link = f"[{lesson.number} ({lesson.minutes} min) {lesson.title}](../notebooks/{lesson.stem}.ipynb)"
            rows.append(f"| {_clock(slot.start)}-{_clock(slot.end)} | {link} | {lesson.minutes - exercises} + {exercises} |")
    return rows


def schedule(lessons: tuple[Lesson, ...] = LESSONS) -> str:
    """The generated part of the guide: half-day and full-day schedules, between their markers."""
    lines = [START, ""]
    days = half_days(lessons)
    for number, slots in enumerate(days, start=1):
        covered = [s.lesson.number for s in slots if s.lesson is not None]
        title = "Half day" if len(days) == 1 else f"Half day {number} of {len(days)}"
        span = f"lesson {covered[0]}" if covered[0] == covered[-1] else f"lessons {covered[0]}-{covered[-1]}"
        lines += [f"**{title}** ({span}, {slots[-1].end - DAY_START} minutes):", "", *_table(slots), ""]
    full = plan(lessons, lunch=True)
    lines += [f"**Full day** (every lesson, {_clock(full[0].start)}-{_clock(full[-1].end)}):", "", *_table(full), "", END]
    return "\n".join(lines)


def minutes_line(lesson: Lesson) -> str:
    """The generated line that opens a lesson's section in the guide: its minutes, teaching and exercises."""
    exercises = exercise_minutes(lesson)
    return (f"**Minutes** (generated): {lesson.number} ({lesson.minutes} min) = {lesson.minutes - exercises} teaching "
            f"+ {exercises} exercises ([{lesson.stem}_exercises.ipynb](../exercises/{lesson.stem}_exercises.ipynb)).")


def with_minutes(guide: str, lessons: tuple[Lesson, ...] = LESSONS) -> str:
    """The guide's text with every lesson's minutes line rewritten; a lesson without one, or one twice, is an error."""
    by_number = {lesson.number: lesson for lesson in lessons}
    found = MINUTES_LINE.findall(guide)
    unknown = sorted(set(found) - set(by_number))
    missing = [number for number in by_number if found.count(number) != 1]
    if unknown or missing:
        raise ValueError(f"docs/instructor-guide.md needs exactly one '**Minutes** (generated): NN' line in each lesson's section: "
                         f"lessons {missing or 'all fine'} lack one or have two; {unknown or 'none'} are not in LESSONS")
    return MINUTES_LINE.sub(lambda match: minutes_line(by_number[match.group(1)]), guide)


def with_schedule(guide: str) -> str:
    """The guide's text with its schedule and the lessons' minutes lines replaced by the generated ones."""
    return with_minutes(replace_region(guide, START, END, schedule(), "docs/instructor-guide.md"))

def main(argv: list[str] | None = None) -> int:
    """Rewrite the guide's schedule (or with --check, fail if it differs); return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail if the guide's schedule is out of date")
    args = parser.parse_args(argv)
    return write_or_check(GUIDE, with_schedule(GUIDE.read_text()), args.check,
                          "docs/instructor-guide.md's schedule differs from helpers/course.py LESSONS: "
                          "run `.venv/bin/python tools/make_schedule.py`", "wrote the schedule in docs/instructor-guide.md")

if __name__ == "__main__":
    sys.exit(main())
