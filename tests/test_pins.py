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
