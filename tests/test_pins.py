"""requirements.txt is the one place of pins; environment.yml must carry exactly the same."""
import re

import yaml
from conftest import ROOT

PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([0-9][^\s#]*)\s+#\s*\S")


def requirement_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"requirements.txt: {line!r} must be `name==version  # what uses it`"
        pins[match.group(1).lower()] = match.group(2)
    return pins


def test_torch_is_pinned_exactly():
    assert requirement_pins()["torch"] == "2.13.0"


def test_environment_yml_matches_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    yml_pins = dict(line.lower().split("==") for line in pip_section)
    assert yml_pins == requirement_pins(), "environment.yml and requirements.txt disagree: copy the pins from requirements.txt"


def test_installed_versions_match_pins():
    from importlib import metadata

    for name, version in requirement_pins().items():
        installed = metadata.version(name)
        assert installed.split("+")[0] == version, f"{name} {installed} installed, {version} pinned: run `make test` to refresh .venv"


def test_versioned_source_links_follow_the_pins():
    """A link into pytorch's or torchdata's source names the pinned release: a pin bump that forgets them fails here."""
    pins = requirement_pins()
    repos = {"pytorch/pytorch/blob": pins["torch"], "pytorch/data/tree": pins["torchdata"],
             "pytorch/data/blob": pins["torchdata"]}
    files = [*(ROOT / "notebooks").glob("*.ipynb"), *(ROOT / "solutions").glob("*.ipynb"), *(ROOT / "docs").glob("*.md"),
             ROOT / "README.md", ROOT / "CONTRIBUTING.md", *(ROOT / "helpers").rglob("*.py")]
    found, stale = 0, []
    for path in files:
        for repo, version in re.findall(r"github\.com/(pytorch/(?:pytorch/blob|data/tree|data/blob))/v([0-9][^/\s)\"]*)",
                                        path.read_text()):
            found += 1
            if version != repos[repo]:
                stale.append(f"{path.relative_to(ROOT)}: {repo}/v{version}, pinned {repos[repo]}")
    assert found >= 20 and not stale, stale or f"only {found} versioned links found"


def test_the_build_requirement_is_the_pinned_setuptools():
    """pyproject.toml's build-system needs setuptools; its version is requirements.txt's (the editable install uses it)."""
    import tomllib

    build = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert build == [f"setuptools=={requirement_pins()['setuptools']}"], build


def test_the_cheat_sheets_workers_rule_is_the_code_over_a_grid():
    """The cheat sheet's formula, read as written and evaluated, equals helpers.env.workers_per_rank everywhere."""
    from helpers.env import workers_per_rank

    sheet = (ROOT / "docs" / "cheatsheet.md").read_text()
    match = re.search(r"workers per rank = ([^(`|]*\(usable cores \+ 1\)[^(`|]*?) \(`helpers\.env\.workers_per_rank`\)",
                      sheet)
    assert match, "the cheat sheet's workers-per-rank rule is gone or reworded: keep it evaluable, or update this test"
    formula = match.group(1).replace("usable cores", "cores")
    assert re.fullmatch(r"[\w\s+\-*/()]+", formula), formula
    for cores in range(1, 65):
        for ranks in range(1, 9):
            prose = max(0, eval(formula, {}, {"cores": cores, "ranks": ranks}))  # noqa: S307 (our own doc's arithmetic)
            assert prose == workers_per_rank(ranks=ranks, cores=cores), (formula, cores, ranks)
