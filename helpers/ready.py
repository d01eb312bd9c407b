"""Before a workshop: `python -m helpers.ready` prints "ready", or what is missing and how to fix it (docs/pre-workshop.md)."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from helpers.course import LESSONS
from helpers.env import SMALL_SHM_BYTES, usable_cpus

KERNEL_NAME = "feed-the-gpus"  # the kernel `make lab` registers and every notebook names
DISTRIBUTION = "feed-the-gpus-helpers"  # this package's name in pyproject.toml
MIN_CORES = 2  # lessons marked "2+ cores" in helpers/course.py show their effect from 2 usable cores
PIN_LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==([^\s#;]+)")


@dataclass(frozen=True)
class Check:
    """One line of the readiness report: what was checked, "ok" / "missing" / "info", and the detail or the fix."""

    name: str
    status: str
    detail: str

    def __post_init__(self) -> None:
        if self.status not in ("ok", "missing", "info"):
            raise ValueError(f"status must be 'ok', 'missing' or 'info', got {self.status!r}")

    def line(self) -> str:
        """The check as one printed line."""
        return f"{self.status:<8} {self.name}: {self.detail}"


def _python() -> str:
    """This interpreter as a participant would type it: relative to the current folder when it lies inside it."""
    relative = os.path.relpath(sys.executable)
    return relative if not relative.startswith("..") else sys.executable


def _lessons(needs: tuple[str, ...]) -> str:
    numbers = [lesson.number for lesson in LESSONS if lesson.needs in needs]
    return ", ".join(numbers[:-1]) + (" and " if len(numbers) > 1 else "") + numbers[-1] if numbers else "none"


def _installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _module_of(distribution: str) -> str:
    """The top-level module a distribution installs (PyYAML -> yaml), by its own name when it ships one."""
    wanted = _normalise(distribution)
    modules = sorted(m for m, dists in metadata.packages_distributions().items()
                     if wanted in {_normalise(d) for d in dists} and not m.startswith("_") and m.isidentifier())
    same = [m for m in modules if _normalise(m) == wanted]
    return (same or modules or [distribution.replace("-", "_").lower()])[0]


def _import(module: str) -> None:
    importlib.import_module(module)


def check_python(version: tuple[int, ...], required: str) -> Check:
    """Whether this Python satisfies the course's `>=X.Y` requirement (pyproject.toml's requires-python)."""
    match = re.fullmatch(r"\s*>=\s*(\d+)\.(\d+)\s*", required or "")
    if match is None:
        raise ValueError(f"required must look like '>=3.11', got {required!r}")
    needed = (int(match.group(1)), int(match.group(2)))
    found = ".".join(str(part) for part in version[:3])
    if tuple(version[:2]) >= needed:
        return Check("Python", "ok", f"{found} (the course needs {required.strip()})")
    return Check("Python", "missing", f"{found}, the course needs {required.strip()}: install a newer Python, then "
                                      "`make lab PYTHON=python3.11` (or newer) in the course folder")


def required_python() -> str:
    """The course's Python requirement: the installed package's Requires-Python, else pyproject.toml beside helpers/."""
    if _installed_version(DISTRIBUTION) is not None:
        found = metadata.metadata(DISTRIBUTION).get("Requires-Python")
        if found:
            return found
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    if pyproject.is_file():
        import tomllib

        return tomllib.loads(pyproject.read_text())["project"]["requires-python"]
    return ">=3.11"


def find_requirements() -> Path | None:
    """requirements.txt of the course: in the clone that holds helpers/, else in the current folder."""
    for folder in (Path(__file__).resolve().parent.parent, Path.cwd()):
        if (folder / "requirements.txt").is_file():
            return folder / "requirements.txt"
    return None


def read_pins(path: str | os.PathLike) -> dict[str, str]:
    """The `name==version` pins of a requirements file, in file order."""
    pins = {}
    for line in Path(path).read_text().splitlines():
        match = PIN_LINE.match(line.strip())
        if match:
            pins[match.group(1)] = match.group(2)
    if not pins:
        raise ValueError(f"path must be a requirements file with name==version lines, got {str(path)!r} with none")
    return pins


def check_packages(pins: dict[str, str], requirements: str = "requirements.txt") -> list[Check]:
    """Each pinned package installed at its pinned version (a local tag such as +cpu allowed) and importable."""
    if not isinstance(pins, dict) or not pins:
        raise ValueError(f"pins must be a non-empty dict of name -> version, got {pins!r}")
    fix = f"`{_python()} -m pip install -r {requirements}`"
    problems = []
    for name, pinned in pins.items():
        installed = _installed_version(name)
        if installed is None:
            problems.append(Check(name, "missing", f"not installed (pinned {pinned}): {fix}"))
        elif installed.split("+")[0] != pinned:
            problems.append(Check(name, "missing", f"{installed} installed, {pinned} pinned: {fix}"))
        else:
            module = _module_of(name)
            try:
                _import(module)
            except Exception as exc:  # a broken install shows here, whatever it raises
                problems.append(Check(name, "missing", f"{installed} installed, but `import {module}` fails: "
                                                       f"{type(exc).__name__}: {exc}; reinstall it: {fix}"))
    return problems or [Check("pinned packages", "ok", f"all {len(pins)} from requirements.txt installed at their pins and importable")]


def check_helpers() -> Check:
    """The course's helpers package installed (the notebooks import it from notebooks/, not from the clone's root)."""
    version = _installed_version(DISTRIBUTION)
    if version is None:
        return Check("helpers package", "missing", f"{DISTRIBUTION} is not installed: `{_python()} -m pip install .` in the course "
                                                   "folder (`make lab` installs it in editable mode)")
    return Check("helpers package", "ok", f"{DISTRIBUTION} {version}")


def _kernel_specs() -> dict[str, str]:
    from jupyter_client.kernelspec import KernelSpecManager

    return KernelSpecManager().find_kernel_specs()


def check_kernel(name: str = KERNEL_NAME) -> Check:
    """The Jupyter kernel the notebooks name is registered, and its Python exists."""
    title = f"Jupyter kernel '{name}'"
    try:
        specs = _kernel_specs()
    except ImportError as exc:
        return Check(title, "missing", f"jupyter_client is not importable ({exc}): `{_python()} -m pip install -r requirements.txt`")
    if name not in specs:
        return Check(title, "missing", f"not registered: run `make lab`, or `{_python()} -m ipykernel install --sys-prefix --name {name} "
                                       '--display-name "Feed the GPUs (.venv)"`')
    argv = json.loads((Path(specs[name]) / "kernel.json").read_text()).get("argv", [])
    python = argv[0] if argv else ""
    if not python or shutil.which(python) is None:
        return Check(title, "missing", f"registered, but its Python {python!r} does not exist (a deleted .venv?): register it again "
                                       f"with `{_python()} -m ipykernel install --sys-prefix --name {name}`")
    return Check(title, "ok", f"runs {python}")


def check_cores(cores: int) -> Check:
    """Usable cores (CPU set and cgroup quota, as lesson 00 counts them) against what the CPU lessons need."""
    if isinstance(cores, bool) or not isinstance(cores, int):
        raise TypeError(f"cores must be an int, got {cores!r} of type {type(cores).__name__}")
    if cores < 1:
        raise ValueError(f"cores must be at least 1, got {cores!r}")
    if cores >= MIN_CORES:
        return Check("usable CPU cores", "ok", str(cores))
    return Check("usable CPU cores", "missing", f"{cores}: lessons {_lessons(('2+ cores',))} need {MIN_CORES}+ to show their effect; "
                                               "use a machine, VM or container with more cores (docker run --cpus=2 or more)")


def check_shm(shm_bytes: int | None) -> Check:
    """/dev/shm, through which DataLoader workers hand back batches, large enough (lesson 00)."""
    if shm_bytes is None:
        return Check("/dev/shm", "info", "none on this OS (macOS, Windows): shared memory is managed differently")
    if isinstance(shm_bytes, bool) or not isinstance(shm_bytes, int) or shm_bytes < 0:
        raise ValueError(f"shm_bytes must be a byte count (an int >= 0) or None, got {shm_bytes!r}")
    size = f"{shm_bytes / 2**30:.1f} GiB" if shm_bytes >= 2**30 else f"{shm_bytes / 2**20:.0f} MiB"
    if shm_bytes >= SMALL_SHM_BYTES:
        return Check("/dev/shm", "ok", size)
    return Check("/dev/shm", "missing", f"{size}: DataLoader workers can die with 'Bus error'; "
                                        "in Docker start the container with --shm-size=8g or --ipc=host")


def shm_size() -> int | None:
    """Size of /dev/shm in bytes, None where there is none."""
    return shutil.disk_usage("/dev/shm").total if os.path.isdir("/dev/shm") else None


def gpu_info() -> Check:
    """GPUs, as information only: every lesson runs without one."""
    gpu_lessons = _lessons(("1 gpu", "2+ gpus"))
    try:
        import torch
    except Exception as exc:
        return Check("GPU", "info", f"not checked: torch does not import ({type(exc).__name__})")
    if not torch.cuda.is_available():
        return Check("GPU", "info", f"none (fine: lessons {gpu_lessons} run with their CPU fallbacks; docs/hosted-gpu.md for a GPU)")
    names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return Check("GPU", "info", f"{len(names)}: {', '.join(names)}")


def run_checks(requirements: str | os.PathLike | None = None, hosted: bool = False) -> list[Check]:
    """Every check, in the order they are printed."""
    found = [check_python(tuple(sys.version_info), required_python())]
    path = Path(requirements) if requirements is not None else find_requirements()
    if path is None or not path.is_file():
        found.append(Check("requirements.txt", "missing", f"not found{f' at {path}' if path else ''}: run this in the course folder "
                                                          "(a clone of the repository) or pass --requirements PATH"))
    else:
        found.extend(check_packages(read_pins(path), os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)))
    found.append(check_helpers())
    if hosted:
        found.append(Check(f"Jupyter kernel '{KERNEL_NAME}'", "info", "not checked (--hosted: the service's own kernel runs the notebooks)"))
    else:
        found.append(check_kernel())
    found.append(check_cores(usable_cpus()))
    found.append(check_shm(shm_size()))
    found.append(gpu_info())
    return found


def main(argv: list[str] | None = None) -> int:
    """Print every check and "ready" (exit 0), or what is missing (exit 1)."""
    parser = argparse.ArgumentParser(prog="python -m helpers.ready", description=__doc__.splitlines()[0])
    parser.add_argument("--requirements", help="the course's requirements.txt (default: the clone's, else ./requirements.txt)")
    parser.add_argument("--hosted", action="store_true", help="on a hosted notebook service: skip the check of the course's Jupyter kernel")
    args = parser.parse_args(argv)
    checks = run_checks(args.requirements, hosted=args.hosted)
    for check in checks:
        print(check.line())
    missing = [check for check in checks if check.status == "missing"]
    if missing:
        print(f"NOT READY: {len(missing)} missing (the 'missing' lines above say how to fix each); then run this again")
        return 1
    print("ready")
    return 0


if __name__ == "__main__":
    sys.exit(main())
