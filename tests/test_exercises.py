"""Exercises come from solutions: no drift, stubs report "not implemented yet", generator rejects bad markers."""
import re

import nbformat
import pytest
from conftest import ROOT

from helpers.course import CHECKS_MUST_PASS_VAR
from tools import make_exercises
from tools.notebook_client import NotebookClient

EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))
VERDICT = re.compile(r"^Exercise (\d\d\.\d+) (passed|failed|not implemented yet):", re.MULTILINE)


def test_exercises_are_generated_from_solutions(capsys):
    assert make_exercises.main(["--check"]) == 0, capsys.readouterr().err


def test_every_solution_has_an_exercise():
    names = {make_exercises.exercise_name(p) for p in (ROOT / "solutions").glob("*.ipynb")}
    assert names == {p.name for p in EXERCISES} and names


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_shipped_exercise_reports_not_implemented(path, monkeypatch):
    monkeypatch.setenv(CHECKS_MUST_PASS_VAR, "0")
    nb = nbformat.read(path, as_version=4)
    stubs = set(re.findall(r'NotImplementedError\("Exercise (\d\d\.\d+):', "".join(c.source for c in nb.cells)))
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    text = ""
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            assert output.output_type != "error", f"{path.name}: {output.get('ename')}: {output.get('evalue')}"
            text += output.get("text", "") + output.get("data", {}).get("text/plain", "") + "\n"
    verdicts = VERDICT.findall(text)
    assert stubs and {ex for ex, _ in verdicts} == stubs, f"every stub needs a check; stubs {stubs}, checks {verdicts}"
    assert all(status == "not implemented yet" for _, status in verdicts), verdicts


@pytest.mark.parametrize(
    "source, error",
    [
        ("### BEGIN SOLUTION 00.1\nx = 1\n### END SOLUTION", "must sit inside a function body"),
        ("def f():\n    ### BEGIN SOLUTION 00.1\n    return 1", "never closed"),
        ("def f():\n    return 1\n    ### END SOLUTION", "without a"),
        ("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION", "needs the exercise id"),
        ("def f():\n    ### BEGIN SOLUTION 3.1\n    return 1\n    ### END SOLUTION", "needs the exercise id"),
    ],
)
def test_generator_rejects_bad_markers(source, error):
    with pytest.raises(make_exercises.SolutionFormatError, match=f"solutions/x.ipynb cell 1: .*{error}"):
        make_exercises.stub_source(source, "solutions/x.ipynb cell 1")


def test_stub_keeps_indentation_and_the_id():
    out, ids = make_exercises.stub_source("def f():\n    ### BEGIN SOLUTION 03.2\n    return 1\n    ### END SOLUTION\n", "x")
    assert 'raise NotImplementedError("Exercise 03.2:' in out and "return 1" not in out and ids == ["03.2"]
    assert out.splitlines()[2].startswith("    raise")


def _solution(tmp_path, regions_and_checks):
    """A solution notebook for lesson 00: each (id, next cell's code) pair is a region and the cell after it."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# X"), nbformat.v4.new_markdown_cell(make_exercises.SOLUTION_BANNER)]
    for number, check_cell in regions_and_checks:
        nb.cells.append(nbformat.v4.new_code_cell(f"def f(x):\n    ### BEGIN SOLUTION {number}\n    return x\n    ### END SOLUTION"))
        nb.cells.append(nbformat.v4.new_code_cell(check_cell))
    path = tmp_path / "00_x_solutions.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize(
    "regions, error",
    [
        ([("00.1", "checks.check_workers_per_rank(f)"), ("00.1", "checks.check_workers_per_rank(f)")],
         r"cell 4: region 00.1 has the id of the region in cell 2 too"),
        ([("00.1", "checks.check_knee(f)")], r"cell 2: region 00.1 is followed in cell 3 by checks.check_knee \(exercise 03.2\)"),
        ([("00.1", "print(f(1))")], r"cell 2: region 00.1 is followed in cell 3 by no checks.check_"),
        ([("00.1", "checks.check_nothing(f)")], r"cell 3: calls checks.check_nothing, which is not a check"),
        ([("03.2", "checks.check_knee(f)")], r"cell 2: region 03.2 in the notebook of lesson 00"),
    ],
)
def test_generator_matches_each_region_to_the_check_after_it(tmp_path, regions, error):
    with pytest.raises(make_exercises.SolutionFormatError, match=f"00_x_solutions.ipynb {error}"):
        make_exercises.generate(_solution(tmp_path, regions))


def test_generator_takes_ids_from_the_markers(tmp_path):
    text, stubs = make_exercises.generate(_solution(tmp_path, [("00.1", "result = checks.check_workers_per_rank(f)\nresult")]))
    assert stubs == 1 and 'NotImplementedError(\\"Exercise 00.1: replace this line' in text


@pytest.mark.parametrize("path", sorted((ROOT / "solutions").glob("*.ipynb")), ids=lambda p: p.name)
def test_exercise_gives_nothing_away(path):
    text = (ROOT / "exercises" / make_exercises.exercise_name(path)).read_text()
    assert make_exercises.leak_problems(text, path) == []


def test_leak_check_catches_banner_markers_and_bodies(tmp_path):
    solution = tmp_path / "00_x_solutions.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# X"), nbformat.v4.new_markdown_cell(make_exercises.SOLUTION_BANNER),
                nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION 00.1\n    y = x * 41\n    return y + x\n    ### END SOLUTION"),
                nbformat.v4.new_code_cell("checks.check_workers_per_rank(f)")]
    nbformat.write(nb, solution)
    text, stubs = make_exercises.generate(solution)
    assert stubs == 1 and make_exercises.leak_problems(text, solution) == []
    assert nbformat.reads(text, as_version=4).cells[1].source == make_exercises.EXERCISE_BANNER
    assert "solution notebook" not in text.lower()
    found = " ".join(make_exercises.leak_problems(nbformat.writes(nb), solution))  # the solution itself, as an exercise
    assert "tells the learner it is the solution notebook" in found and "solution markers" in found and "y = x * 41" in found


def test_generator_writes_the_banner_into_a_solution():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# X"), nbformat.v4.new_code_cell("x = 1")]
    assert make_exercises.with_banner(nb) and nb.cells[1].source == make_exercises.SOLUTION_BANNER
    assert not make_exercises.with_banner(nb)
