"""Notebook hygiene: no committed outputs, size limit, course kernel, lesson structure, README map."""
import json
import re

import pytest
from conftest import ROOT

from helpers.course import LESSONS, NEEDS
from tools import check_notebooks

NOTEBOOKS = check_notebooks.all_notebooks()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_notebook_is_clean(path):
    found = check_notebooks.file_problems(path)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_lesson_has_header_and_ending(path):
    assert not check_notebooks.structure_problems(path), "\n".join(check_notebooks.structure_problems(path))


def test_hygiene_failure_names_file_and_fix(tmp_path, monkeypatch):
    dirty = json.loads((ROOT / "notebooks" / "00_setup_check.ipynb").read_text())
    dirty["cells"][3]["execution_count"] = 7
    monkeypatch.setattr(check_notebooks, "ROOT", tmp_path)
    (tmp_path / "notebooks").mkdir()
    path = tmp_path / "notebooks" / "00_setup_check.ipynb"
    path.write_text(json.dumps(dirty))
    (problem,) = check_notebooks.output_problems(path)
    assert "notebooks/00_setup_check.ipynb" in problem and "make strip" in problem
    assert check_notebooks.strip(path) and not check_notebooks.output_problems(path)


def test_lesson_registry_matches_notebooks():
    assert [lesson.stem for lesson in LESSONS] == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_readme_course_map_is_true():
    readme = (ROOT / "README.md").read_text()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\|.*?(\d\d_[a-z0-9_]+)\.ipynb.*$", readme, re.MULTILINE)}
    for lesson in LESSONS:
        assert lesson.stem in rows, f"README.md course map has no row for notebooks/{lesson.stem}.ipynb"
        row = rows[lesson.stem]
        assert NEEDS[lesson.needs] in row and f"| {lesson.minutes} |" in row, f"README row for {lesson.stem} disagrees with helpers/course.py: {row}"
    assert "make lab" in readme and "make test" in readme
