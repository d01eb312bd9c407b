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


def test_a_cell_without_an_id_is_named(tmp_path, monkeypatch):
    """New cells written by hand (json, not nbformat) can lack the id nbformat 4.5 requires; JupyterLab warns on opening."""
    notebook = json.loads((ROOT / "notebooks" / "00_setup_check.ipynb").read_text())
    del notebook["cells"][4]["id"]
    monkeypatch.setattr(check_notebooks, "ROOT", tmp_path)
    path = tmp_path / "00_setup_check.ipynb"
    path.write_text(json.dumps(notebook))
    (problem,) = check_notebooks.id_problems(path)
    assert "cells [4] have no id" in problem


def test_lesson_registry_matches_notebooks():
    assert [lesson.stem for lesson in LESSONS] == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def test_readme_course_map_is_generated(capsys):
    from tools import make_readme

    assert make_readme.main(["--check"]) == 0, capsys.readouterr().err
    readme = (ROOT / "README.md").read_text()
    assert all(f"notebooks/{lesson.stem}.ipynb" in readme for lesson in LESSONS)
    assert "make lab" in readme and "make test" in readme


def test_readme_check_fails_on_a_stale_map():
    from tools import make_readme

    stale = make_readme.with_map((ROOT / "README.md").read_text()).replace("| 50 |", "| 55 |", 1)
    assert make_readme.with_map(stale) != stale
    with pytest.raises(ValueError, match="README.md must hold its generated part"):
        make_readme.with_map("# no map here")


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda lesson: lesson.stem)
def test_lesson_header_agrees_with_the_registry(lesson):
    found = check_notebooks.registry_problems(ROOT / "notebooks" / f"{lesson.stem}.ipynb", lesson.number, lesson.title, NEEDS[lesson.needs], lesson.minutes)
    assert not found, "\n".join(found)


def _lesson_tree(tmp_path, monkeypatch, cells_by_name):
    """A course tree in tmp_path with minimal notebooks; check_notebooks looks there."""
    monkeypatch.setattr(check_notebooks, "ROOT", tmp_path)
    (tmp_path / "notebooks").mkdir(parents=True)
    for name, cells in cells_by_name.items():
        nb = {"cells": [{"cell_type": kind, "metadata": {}, "source": text} for kind, text in cells], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
        (tmp_path / "notebooks" / name).write_text(json.dumps(nb))
    return tmp_path / "notebooks"


@pytest.mark.parametrize("line", ["%%writefile x.py", "assert x == 1", "print(x)", "import torch", "from torch import nn"])
def test_markdown_holding_code_is_named_by_file_cell_and_line(tmp_path, monkeypatch, line):
    folder = _lesson_tree(tmp_path, monkeypatch, {"00_a.ipynb": [("markdown", "# A"), ("markdown", f"Text before:\n{line}")]})
    (problem,) = check_notebooks.markdown_code_problems(folder / "00_a.ipynb")
    assert problem.startswith("notebooks/00_a.ipynb cell 1 line 2:") and line[:10] in problem


def test_fenced_code_and_prose_in_markdown_pass(tmp_path, monkeypatch):
    text = "Read this:\n```python\nimport torch\nprint(1)\n```\nThe import statement is prose here; print it later."
    folder = _lesson_tree(tmp_path, monkeypatch, {"00_a.ipynb": [("markdown", text)]})
    assert check_notebooks.markdown_code_problems(folder / "00_a.ipynb") == []


def test_next_section_links_the_next_lesson(tmp_path, monkeypatch):
    folder = _lesson_tree(tmp_path, monkeypatch, {
        "00_a.ipynb": [("markdown", "## Next\nLesson 01 is in preparation.")],
        "01_b.ipynb": [("markdown", "## Next\nLesson 02 is in preparation.")],
    })
    assert "must link to the next lesson, (01_b.ipynb)" in check_notebooks.next_problems(folder / "00_a.ipynb")[0]
    assert check_notebooks.notebook_preparation_problems(folder / "00_a.ipynb")  # 01 exists
    assert check_notebooks.next_problems(folder / "01_b.ipynb") == []  # the last lesson: nothing to link
    assert check_notebooks.notebook_preparation_problems(folder / "01_b.ipynb") == []  # 02 does not exist


def test_readme_never_calls_an_existing_lesson_in_preparation():
    assert check_notebooks.preparation_problems((ROOT / "README.md").read_text(), "README.md") == []
    assert check_notebooks.preparation_problems("Lesson 01 is in preparation.", "x")
    assert check_notebooks.preparation_problems("In preparation (not in the repository yet): 07 a debugging clinic.", "x")
    assert check_notebooks.preparation_problems("Lesson 99 is in preparation.", "x") == []


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_lesson_links_its_successor(path):
    found = check_notebooks.next_problems(path) + check_notebooks.notebook_preparation_problems(path)
    found += check_notebooks.sources_problems(path)
    assert not found, "\n".join(found)


def test_markdown_pages_link_to_files_that_exist(tmp_path):
    assert check_notebooks.doc_link_problems() == []
    (tmp_path / "README.md").write_text("See [the guide](docs/missing.md) and [PyTorch](https://pytorch.org).")
    assert check_notebooks.doc_link_problems(tmp_path) == ["README.md: links to docs/missing.md, which does not exist"]


def test_sources_rule_names_what_is_missing(tmp_path, monkeypatch):
    folder = _lesson_tree(tmp_path, monkeypatch, {"00_a.ipynb": [("markdown", "As the blog post says."), ("markdown", "## Summary")]})
    found = " ".join(check_notebooks.sources_problems(folder / "00_a.ipynb"))
    assert "needs a '## Further reading' section" in found and "docs/myths.md" in found
    folder = _lesson_tree(tmp_path / "b", monkeypatch, {"00_a.ipynb": [
        ("markdown", "The [blog post](../docs/myths.md)."),
        ("markdown", "## Further reading\n- [a](https://a.org)\n- [b](https://b.org)"), ("markdown", "## Summary")]})
    assert check_notebooks.sources_problems(folder / "00_a.ipynb") == []


def test_instructor_guide_minutes_agree_with_the_registry():
    guide = (ROOT / "docs" / "instructor-guide.md").read_text()
    stated = re.findall(r"\b(\d\d)\s+\((\d+) min\)", guide)
    minutes = {lesson.number: lesson.minutes for lesson in LESSONS}
    assert {number for number, _ in stated} == set(minutes), f"the guide should give every lesson's minutes as 'NN (M min)': {stated}"
    assert all(int(m) == minutes[number] for number, m in stated), f"guide {stated} vs helpers/course.py {minutes}"


@pytest.mark.parametrize("words, reported", [(150, False), (151, True)])
def test_markdown_cells_over_150_words_are_named(tmp_path, monkeypatch, words, reported):
    text = " ".join(["word"] * (words - 2)) + "\n\n[link](https://example.org) end"  # a link is one word
    folder = _lesson_tree(tmp_path, monkeypatch, {"08_a.ipynb": [("markdown", "# A"), ("markdown", text)]})
    found = check_notebooks.long_markdown_problems(folder / "08_a.ipynb")
    assert found == ([f"notebooks/08_a.ipynb cell 1: a markdown cell of {words} words, over 150: split it or cut it "
                      "(starts `word word word word word word word word word word `)"] if reported else [])


def test_long_code_lines_are_named_by_file_cell_and_line(tmp_path, monkeypatch):
    code = [("code", "x = 1\n" + "y = '" + "a" * 104 + "'\n" + "z = '" + "a" * 105 + "'")]  # 110 and 111 characters
    folder = _lesson_tree(tmp_path, monkeypatch, {"08_a.ipynb": code})
    assert check_notebooks.long_line_problems(folder / "08_a.ipynb") == [
        "notebooks/08_a.ipynb cell 0 line 3: 111 characters, over 110 (cut off in JupyterLab): wrap it"]


def test_the_readme_example_verdict_is_what_check_00_1_says(monkeypatch):
    """The README quotes a self-check's failure: it must be the verdict the check gives, by the course's one rule."""
    import re

    from helpers import checks
    from helpers.course import CHECKS_MUST_PASS_VAR
    from helpers.env import workers_per_rank

    monkeypatch.delenv(CHECKS_MUST_PASS_VAR, raising=False)  # a failed verdict is what this test reads
    example = re.search(r"`(workers_per_rank\((\d+), (\d+)\) returned (\d+), expected (\d+)): \.\.\.`",
                        (ROOT / "README.md").read_text())
    assert example, "the README's example verdict of exercise 00.1 is gone or reworded"
    quoted, cores, ranks, returned, expected = example.group(1), *map(int, example.groups()[1:])
    assert expected == workers_per_rank(ranks=ranks, cores=cores)  # the exercise takes (usable_cores, ranks_per_node)
    no_process_over = checks.REGISTRY["00.1"].check(lambda c, r: max(0, c // r - 1))  # returns cores // ranks - 1
    assert returned == cores // ranks - 1 and no_process_over.detail.startswith(quoted), no_process_over.detail


def test_every_test_file_has_one_tier():
    """tests/conftest.py TIERS is the one table `make check` and `make test` select by: each file once, none missing."""
    from conftest import TIERS

    listed = [name for names in TIERS.values() for name in names]
    assert len(listed) == len(set(listed)), sorted(name for name in listed if listed.count(name) > 1)
    assert sorted(listed) == sorted(path.name for path in (ROOT / "tests").glob("test_*.py"))
