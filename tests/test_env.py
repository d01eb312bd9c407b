import dataclasses
import os

import pytest

from helpers import env
from helpers.course import LESSONS, lesson


def test_report_is_consistent():
    report = env.report()
    assert 1 <= report.usable_cpus <= report.logical_cpus
    assert report.usable_cpus == len(os.sched_getaffinity(0))
    assert report.gpu_count == len(report.gpu_names)
    assert report.ram_available_bytes <= report.ram_total_bytes
    assert report.start_method in {"fork", "spawn", "forkserver"}
    text = str(report)
    assert "usable CPU cores (sched_getaffinity)" in text and "<table>" in report._repr_html_()


def _fake(**changes):
    return dataclasses.replace(env.report(), **changes)


def test_verdict_follows_the_hardware():
    cpu_only = _fake(cuda_available=False, gpu_count=0, gpu_names=(), usable_cpus=2)
    assert all(v.full_effect for v in cpu_only.verdict() if v.needs == "CPU is enough")
    assert env._lesson_verdict(cpu_only, "x", "1 gpu").full_effect is False
    assert "gloo" in env._lesson_verdict(cpu_only, "x", "2+ gpus").note
    two_gpus = _fake(cuda_available=True, gpu_count=2, gpu_names=("A", "B"), nccl_available=True)
    assert env._lesson_verdict(two_gpus, "x", "2+ gpus").full_effect
    assert not env._lesson_verdict(_fake(usable_cpus=1), "x", "2+ cores").full_effect
    with pytest.raises(ValueError, match="needs must be one of"):
        env._lesson_verdict(cpu_only, "x", "a TPU")


def test_warnings_name_small_shm_and_affinity():
    report = _fake(shm_bytes=64 * 2**20, usable_cpus=1, logical_cpus=4)
    text = " ".join(report.warnings())
    assert "64 MiB" in text and "Bus error" in text and "1 of 4 cores" in text
    assert _fake(shm_bytes=8 * 2**30, usable_cpus=2, logical_cpus=2).warnings() == []


def test_needs_cuda_skips_with_one_line(capsys, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the skip path cannot run")
    monkeypatch.delenv("COURSE_REQUIRE_CUDA", raising=False)
    assert env.needs_cuda("the bandwidth sweep") is False
    assert capsys.readouterr().out.count("\n") == 1
    monkeypatch.setenv("COURSE_REQUIRE_CUDA", "1")
    with pytest.raises(RuntimeError, match="COURSE_REQUIRE_CUDA=1 but CUDA is absent"):
        env.needs_cuda("the bandwidth sweep")
    with pytest.raises(ValueError, match="what must name"):
        env.needs_cuda("")


def test_lesson_lookup():
    assert lesson("00") is LESSONS[0]
    with pytest.raises(ValueError, match="number must be one of"):
        lesson("99")


@pytest.mark.cuda
def test_report_lists_every_gpu():
    import torch

    report = env.report()
    assert report.cuda_available and report.gpu_count == torch.cuda.device_count() >= 1
    assert env.needs_cuda("a CUDA test") is True
