"""Test-suite switches: solution self-checks must pass; CUDA-marked tests skip or fail by COURSE_REQUIRE_CUDA."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from helpers.course import CHECKS_MUST_PASS_VAR, REQUIRE_CUDA_VAR  # noqa: E402

# Kernels started by nbval inherit this: a self-check that does not pass raises in solutions/.
os.environ[CHECKS_MUST_PASS_VAR] = "1"


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip `cuda` tests without a GPU, or fail them when COURSE_REQUIRE_CUDA=1."""
    if item.get_closest_marker("cuda") is None:
        return
    import torch

    if torch.cuda.is_available():
        return
    if os.environ.get(REQUIRE_CUDA_VAR) == "1":
        pytest.fail(f"{REQUIRE_CUDA_VAR}=1 but torch.cuda.is_available() is False")
    pytest.skip("needs a CUDA GPU; torch.cuda.is_available() is False here")


def _hypothesis_profile() -> None:
    """Property tests draw the same examples every run (flaky is failing) and keep no database files."""
    from hypothesis import settings

    settings.register_profile("course", derandomize=True, deadline=None, database=None, max_examples=60)
    settings.load_profile("course")


_hypothesis_profile()
