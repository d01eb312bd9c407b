"""Exercises come from solutions: no drift, stubs report "not implemented yet", generator rejects bad markers."""
import re

import nbclient
import nbformat
import pytest
from conftest import ROOT

from helpers.course import CHECKS_MUST_PASS_VAR
from tools import make_exercises

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
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
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
        ("### BEGIN SOLUTION\nx = 1\n### END SOLUTION", "must sit inside a function body"),
        ("def f():\n    ### BEGIN SOLUTION\n    return 1", "never closed"),
        ("def f():\n    return 1\n    ### END SOLUTION", "without a"),
    ],
)
def test_generator_rejects_bad_markers(source, error):
    with pytest.raises(make_exercises.SolutionFormatError, match=error):
        make_exercises.stub_source(source, "00", [0], "solutions/x.ipynb cell 1")


def test_stub_keeps_indentation_and_numbers():
    counter = [0]
    out = make_exercises.stub_source("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION\n", "03", counter, "x")
    assert 'raise NotImplementedError("Exercise 03.1:' in out and "return 1" not in out and counter == [0 + 1]
    assert out.splitlines()[2].startswith("    raise")


@pytest.mark.parametrize("path", sorted((ROOT / "solutions").glob("*.ipynb")), ids=lambda p: p.name)
def test_exercise_gives_nothing_away(path):
    text = (ROOT / "exercises" / make_exercises.exercise_name(path)).read_text()
    assert make_exercises.leak_problems(text, path) == []


def test_leak_check_catches_banner_markers_and_bodies(tmp_path):
    solution = tmp_path / "07_x_solutions.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# X"), nbformat.v4.new_markdown_cell(make_exercises.SOLUTION_BANNER),
                nbformat.v4.new_code_cell("def f(x):\n    ### BEGIN SOLUTION\n    y = x * 41\n    return y + x\n    ### END SOLUTION")]
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
