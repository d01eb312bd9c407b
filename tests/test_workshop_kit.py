"""The workshop kit in docs/: generated schedules, the cheat sheet's links into lessons, and `python -m helpers.ready`."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

from helpers import ready
from helpers.course import LESSONS, Lesson
from tools import make_schedule

DOCS = ROOT / "docs"
KIT = ("instructor-guide.md", "cheatsheet.md", "pre-workshop.md", "hosted-gpu.md")
NOTEBOOK_LINK = re.compile(r"\]\(((?:\.\./)?notebooks/([0-9][0-9]_\w+)\.ipynb)(?:#((?:[^()\s]|\([^()\s]*\))*))?\)")


# --- anchors: how JupyterLab names a heading (createHeaderId: the heading's text, spaces -> "-") ---

def heading_anchor(heading: str) -> str:
    """The id JupyterLab gives a Markdown heading: its rendered text (code spans and emphasis unwrapped), spaces as '-'."""
    text = re.sub(r"^#+\s+", "", heading.strip())
    parts = re.split(r"(`[^`]*`)", text)  # code spans keep their characters; outside them * and _ emphasis goes
    text = "".join(part[1:-1] if part.startswith("`") else re.sub(r"(\*{1,2}|(?<!\w)_{1,2}|_{1,2}(?!\w))", "", part) for part in parts)
    return text.replace(" ", "-")


def notebook_anchors(path: Path) -> set[str]:
    """Every heading anchor of a notebook's markdown cells."""
    cells = json.loads(path.read_text())["cells"]
    return {heading_anchor(line) for cell in cells if cell["cell_type"] == "markdown"
            for line in "".join(cell["source"]).splitlines() if re.match(r"^#{1,6}\s", line)}


def anchor_problems(text: str, where: str, folder: Path) -> list[str]:
    """Links into a lesson notebook whose file or heading anchor does not exist."""
    found = []
    for target, stem, anchor in NOTEBOOK_LINK.findall(text):
        path = (folder / target).resolve()
        if not path.is_file():
            found.append(f"{where}: links to {target}, which does not exist")
        elif anchor and anchor not in notebook_anchors(path):
            found.append(f"{where}: links to {target}#{anchor}, but {stem} has no heading with that anchor")
    return found


def lessons_missing(text: str) -> list[str]:
    """Lessons of LESSONS that a page never links to at one of their headings."""
    linked = {stem for _, stem, anchor in NOTEBOOK_LINK.findall(text) if anchor}
    return [lesson.stem for lesson in LESSONS if lesson.stem not in linked]


def test_anchor_follows_jupyterlab():
    assert heading_anchor("## 3. Where worker batches go: `/dev/shm`") == "3.-Where-worker-batches-go:-/dev/shm"
    assert heading_anchor("## 8. Trap 4: the sampler *and* the loss weights (double correction)") == \
        "8.-Trap-4:-the-sampler-and-the-loss-weights-(double-correction)"
    assert heading_anchor("## 7. Per-item vs batched fetch, and `__getitems__`") == "7.-Per-item-vs-batched-fetch,-and-__getitems__"


def test_jupyterlab_forms_anchors_this_way():
    """The rule above is the one the installed JupyterLab ships (rendermime's createHeaderId)."""
    static = ROOT / ".venv" / "share" / "jupyter" / "lab" / "static"
    bundles = list(static.glob("jlab_core.*.js")) if static.is_dir() else []
    if not bundles:
        pytest.skip("no JupyterLab bundle in .venv to read")
    source = "".join(path.read_text(errors="replace") for path in bundles)
    assert 'createHeaderId=function(e){var t;return(null!=(t=e.textContent)?t:"").replace(/ /g,"-")}' in source


@pytest.mark.parametrize("page", KIT)
def test_kit_links_reach_lesson_headings(page):
    assert not anchor_problems((DOCS / page).read_text(), f"docs/{page}", DOCS)


def test_a_link_to_a_missing_heading_fails():
    text = ("[ok](../notebooks/00_setup_check.ipynb#1.-The-environment-report) "
            "[bad](../notebooks/00_setup_check.ipynb#1.-The-environment-reports) [gone](../notebooks/99_none.ipynb#x)")
    found = anchor_problems(text, "page", DOCS)
    assert len(found) == 2 and "1.-The-environment-reports" in found[0] and "99_none.ipynb" in found[1]


def test_cheatsheet_covers_every_lesson():
    text = (DOCS / "cheatsheet.md").read_text()
    assert lessons_missing(text) == []
    without_03 = "\n".join(line for line in text.splitlines() if "03_loader_bottlenecks" not in line)
    assert lessons_missing(without_03) == ["03_loader_bottlenecks"]


def test_cheatsheet_rows_are_symptom_measurement_cause_fix_lesson():
    rows = [line for line in (DOCS / "cheatsheet.md").read_text().splitlines() if line.startswith("|")]
    header, rule, *body = rows
    assert [cell.strip() for cell in header.strip("|").split("|")] == ["symptom", "measurement", "cause", "fix", "lesson"]
    assert len(body) >= len(LESSONS)
    for row in body:
        cells = [cell.strip() for cell in re.split(r"(?<!\\)\|", row.strip().strip("|"))]
        assert len(cells) == 5 and all(cells), f"a row needs 5 filled cells: {row}"
        assert NOTEBOOK_LINK.search(cells[4]), f"the lesson cell must link to a lesson heading: {row}"


# --- the schedules: generated from LESSONS, never typed ---

def test_schedule_is_generated(capsys):
    assert make_schedule.main(["--check"]) == 0, capsys.readouterr().err


def test_stale_schedule_fails_the_check(tmp_path, monkeypatch, capsys):
    guide = (DOCS / "instructor-guide.md").read_text()
    stale = guide.replace("| 09:00-09:20 |", "| 09:00-09:25 |", 1)
    assert stale != guide
    monkeypatch.setattr(make_schedule, "GUIDE", tmp_path / "guide.md")
    (tmp_path / "guide.md").write_text(stale)
    assert make_schedule.main(["--check"]) == 1 and "tools/make_schedule.py" in capsys.readouterr().err
    assert make_schedule.main([]) == 0 and (tmp_path / "guide.md").read_text() == guide
    with pytest.raises(ValueError, match="between one"):
        make_schedule.with_schedule("# a guide without markers")


def _lessons_in(slots):
    return [slot.lesson.number for slot in slots if slot.lesson is not None]


def test_schedules_hold_every_lesson_with_breaks():
    full = make_schedule.plan(LESSONS, lunch=True)
    assert _lessons_in(full) == [lesson.number for lesson in LESSONS]
    assert [slot.what for slot in full].count("Lunch") == 1
    halves = make_schedule.half_days(LESSONS)
    assert [n for day in halves for n in _lessons_in(day)] == [lesson.number for lesson in LESSONS]
    for slots in [full, *halves]:
        assert all(a.end == b.start for a, b in zip(slots, slots[1:])), "slots follow each other without gaps"
        block = 0
        for slot in slots:
            block = block + slot.end - slot.start if slot.lesson else 0
            assert block <= max(make_schedule.MAX_BLOCK, max(lesson.minutes for lesson in LESSONS))
    assert all(day[-1].end - day[0].start <= make_schedule.HALF_DAY for day in halves if len(_lessons_in(day)) > 1)
    text = make_schedule.schedule()
    for lesson in LESSONS:
        assert text.count(f"{lesson.number} ({lesson.minutes} min)") == 2, f"lesson {lesson.number}: once in a half day, once in the full day"


def test_a_lesson_missing_from_the_schedule_fails(monkeypatch):
    number = f"{len(LESSONS):02d}"  # the lesson after the last one
    new = Lesson(stem=f"{number}_next_lesson", title="Next lesson", learn="x", needs="cpu", minutes=60)
    with pytest.raises(ValueError, match=f"lesson {number} has no entry in EXERCISE_MINUTES"):
        make_schedule.schedule((*LESSONS, new))
    monkeypatch.setitem(make_schedule.EXERCISE_MINUTES, number, 20)
    assert f"{number} (60 min)" in make_schedule.schedule((*LESSONS, new))
    monkeypatch.setitem(make_schedule.EXERCISE_MINUTES, number, 60)
    with pytest.raises(ValueError, match="between 0 and the lesson's 60 minutes"):
        make_schedule.schedule((*LESSONS, new))


def test_guide_keeps_a_section_per_lesson():
    guide = (DOCS / "instructor-guide.md").read_text()
    for lesson in LESSONS:
        assert re.search(rf"^### {lesson.number} ", guide, re.MULTILINE), f"the guide needs a '### {lesson.number} ...' section"
        section = guide.split(f"### {lesson.number} ", 1)[1].split("\n### ", 1)[0]
        for part in ("Objectives", "Key points", "Demo live", "Ask the room", "What goes wrong", "No GPUs in the room"):
            assert f"**{part}" in section, f"lesson {lesson.number}'s section lacks '**{part}...'"


# --- python -m helpers.ready ---

def test_ready_import_has_no_side_effects():
    code = "import sys, helpers.ready; print(sorted(m for m in ('torch', 'numpy', 'jupyter_client') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout.strip() == "[]" and done.stderr == ""


def test_pins_come_from_requirements():
    path = ready.find_requirements()
    assert path == ROOT / "requirements.txt"
    pins = ready.read_pins(path)
    assert pins["torch"] == "2.13.0" and len(pins) >= 10


def test_pinned_packages_pass_here():
    assert [c.status for c in ready.check_packages(ready.read_pins(ROOT / "requirements.txt"))] == ["ok"]


def test_planted_wrong_version_missing_package_and_broken_import(monkeypatch):
    real = ready._installed_version
    fake = {"torch": "2.12.0", "h5py": None, "numpy": "2.4.6+local"}
    monkeypatch.setattr(ready, "_installed_version", lambda name: fake[name] if name in fake else real(name))
    monkeypatch.setattr(ready, "_import", lambda module: (_ for _ in ()).throw(ImportError("libtiff.so.6: cannot open")) if module == "tqdm" else None)
    found = {c.name: c for c in ready.check_packages({"torch": "2.13.0", "h5py": "3.16.0", "numpy": "2.4.6", "tqdm": "4.70.1"})}
    assert set(found) == {"torch", "h5py", "tqdm"}, "numpy with a local version tag is its pin"
    assert all(c.status == "missing" for c in found.values())
    assert "2.12.0 installed, 2.13.0 pinned" in found["torch"].detail
    assert "not installed (pinned 3.16.0)" in found["h5py"].detail
    assert "`import tqdm` fails: ImportError: libtiff.so.6" in found["tqdm"].detail


def test_module_names_of_distributions():
    assert ready._module_of("PyYAML") == "yaml" and ready._module_of("pytest-timeout") == "pytest_timeout"


def test_python_version_check():
    assert ready.check_python((3, 11, 7), ">=3.11").status == "ok"
    old = ready.check_python((3, 10, 12), ">=3.11")
    assert old.status == "missing" and "3.10.12, the course needs >=3.11" in old.detail
    assert ready.required_python() == ">=3.11"


def test_kernel_check(monkeypatch, tmp_path):
    monkeypatch.setattr(ready, "_kernel_specs", lambda: {})
    assert ready.check_kernel().status == "missing"
    (tmp_path / "kernel.json").write_text(json.dumps({"argv": ["/nowhere/.venv/bin/python", "-m", "ipykernel_launcher"]}))
    monkeypatch.setattr(ready, "_kernel_specs", lambda: {"feed-the-gpus": str(tmp_path)})
    gone = ready.check_kernel()
    assert gone.status == "missing" and "/nowhere/.venv/bin/python" in gone.detail
    (tmp_path / "kernel.json").write_text(json.dumps({"argv": [sys.executable, "-m", "ipykernel_launcher"]}))
    assert ready.check_kernel().status == "ok"


def test_cores_and_shm_checks():
    assert ready.check_cores(2).status == "ok"
    one = ready.check_cores(1)
    assert one.status == "missing" and "lessons 03, 06, 07, 08 and 09" in one.detail
    small = ready.check_shm(64 * 2**20)
    assert small.status == "missing" and "64 MiB" in small.detail and "--shm-size=8g" in small.detail
    assert ready.check_shm(8 * 2**30).status == "ok" and ready.check_shm(None).status == "info"


@pytest.mark.parametrize("call, error", [
    (lambda: ready.check_cores(0), ValueError), (lambda: ready.check_cores("2"), TypeError),
    (lambda: ready.check_shm(-1), ValueError), (lambda: ready.check_python((3, 11), "3.11"), ValueError),
    (lambda: ready.check_packages({}), ValueError), (lambda: ready.Check("x", "fine", ""), ValueError),
])
def test_bad_arguments_are_named(call, error):
    with pytest.raises(error, match=r"cores|shm_bytes|required|pins|status"):
        call()


def test_bad_requirements_file(tmp_path):
    (tmp_path / "requirements.txt").write_text("# nothing pinned\ntorch>=2\n")
    with pytest.raises(ValueError, match="path must be a requirements file"):
        ready.read_pins(tmp_path / "requirements.txt")
    missing = ready.run_checks(tmp_path / "absent.txt", hosted=True)
    assert any(c.name == "requirements.txt" and c.status == "missing" for c in missing)


def test_main_says_ready_or_lists_what_is_missing(monkeypatch, capsys):
    good = [ready.Check("Python", "ok", "3.11.7"), ready.Check("GPU", "info", "none")]
    monkeypatch.setattr(ready, "run_checks", lambda requirements=None, hosted=False: good)
    assert ready.main([]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "ready"
    bad = [*good, ready.Check("torch", "missing", "2.12.0 installed, 2.13.0 pinned")]
    monkeypatch.setattr(ready, "run_checks", lambda requirements=None, hosted=False: bad)
    assert ready.main([]) == 1
    out = capsys.readouterr().out
    assert "missing  torch: 2.12.0 installed, 2.13.0 pinned" in out and out.splitlines()[-1].startswith("NOT READY: 1 missing")


def test_ready_command_runs():
    done = subprocess.run([sys.executable, "-m", "helpers.ready", "--hosted"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    lines = done.stdout.splitlines()
    assert done.returncode in (0, 1), done.stderr
    assert lines[-1] == "ready" if done.returncode == 0 else lines[-1].startswith("NOT READY")
    assert (done.returncode == 1) == any(line.startswith("missing") for line in lines)
    assert any(line.startswith("info     GPU:") for line in lines)


def test_pre_workshop_page_names_the_command_and_the_report():
    page = (DOCS / "pre-workshop.md").read_text()
    assert ".venv/bin/python -m helpers.ready" in page and "00_setup_check.ipynb" in page


def test_pre_workshop_sample_of_section_7_lists_every_lesson():
    """The sample of lesson 00's section 7 has a verdict line per lesson in LESSONS, in order, with what each needs."""
    from helpers.course import LESSONS, NEEDS

    page = (DOCS / "pre-workshop.md").read_text()
    lines = re.findall(r"^(\d\d_\w+): (?:full effect|falls back) \(needs: ([^)]+)\)", page, flags=re.MULTILINE)
    assert lines == [(lesson.stem, NEEDS[lesson.needs]) for lesson in LESSONS]
    assert "(needs: {item.needs})" in (DOCS.parent / "notebooks" / "00_setup_check.ipynb").read_text()  # the format it prints
