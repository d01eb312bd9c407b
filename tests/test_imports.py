"""helpers has no import-time side effects: no rcParams change, no CUDA init, no seeds."""
import subprocess
import sys

import pytest

from conftest import ROOT

PROBE = """
import matplotlib, torch
before = dict(matplotlib.rcParams); seed = torch.initial_seed()
import pkgutil, importlib, helpers
for mod in pkgutil.iter_modules(helpers.__path__):
    importlib.import_module("helpers." + mod.name)
assert dict(matplotlib.rcParams) == before, "rcParams changed on import"
assert not torch.cuda.is_initialized(), "CUDA initialised on import"
assert torch.initial_seed() == seed, "seed changed on import"
from helpers.plotting import use_course_style, FIGSIZE
use_course_style()
assert tuple(matplotlib.rcParams["figure.figsize"]) == FIGSIZE
print("ok")
"""


def test_import_has_no_side_effects():
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_moved_names_are_found_and_unknown_ones_named():
    from helpers import clinic, clinic_runs, host_copies, loading, loading_reference, transfer_bench, transfer_timeline

    assert clinic.train is clinic_runs.train and loading.cpu_model is loading_reference.cpu_model
    assert transfer_bench.gpu_link is transfer_timeline.gpu_link
    assert transfer_bench.host_copy_sweep is host_copies.host_copy_sweep
    with pytest.raises(AttributeError, match="module 'helpers.clinic' has no attribute 'no_such_name'"):
        clinic.no_such_name  # noqa: B018


def test_no_helpers_module_is_over_400_lines():
    long = {str(path.relative_to(ROOT)): n for path in (ROOT / "helpers").rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 400}
    assert not long, f"split these modules (CONTRIBUTING.md: small, clear code): {long}"
