import ast
import dataclasses
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import ROOT

from helpers import env
from helpers.course import REQUIRE_CUDA_VAR


def test_report_is_consistent():
    report = env.report()
    assert 1 <= report.usable_cpus <= report.affinity_cpus <= report.logical_cpus
    assert report.affinity_cpus == len(os.sched_getaffinity(0))
    quota = env.cpu_quota()
    assert report.usable_cpus == (report.affinity_cpus if quota is None else max(1, min(report.affinity_cpus, int(quota))))
    assert report.gpu_count == len(report.gpu_names)
    assert report.ram_available_bytes <= report.ram_total_bytes
    assert report.start_method in {"fork", "spawn", "forkserver"}
    text = str(report)
    assert "cores this process may run on (sched_getaffinity)" in text and "CPU quota" in text and "<table>" in report._repr_html_()


def _fake(**changes):
    return dataclasses.replace(env.report(), **changes)


def test_verdict_follows_the_hardware():
    cpu_only = _fake(cuda_available=False, gpu_count=0, gpu_names=(), usable_cpus=2)
    assert all(v.full_effect for v in cpu_only.verdict() if v.needs == "CPU is enough")
    assert env._lesson_verdict(cpu_only, "x", "1 gpu").full_effect is False
    assert "gloo" in env._lesson_verdict(cpu_only, "x", "2+ gpus").note
    assert "nothing skipped" in env._lesson_verdict(cpu_only, "x", "2+ gpus").note
    assert "needs_cuda" not in (ROOT / "notebooks" / "05_ddp_data_loading.ipynb").read_text()  # what makes it true
    two_gpus = _fake(cuda_available=True, gpu_count=2, gpu_names=("A", "B"), nccl_available=True)
    assert env._lesson_verdict(two_gpus, "x", "2+ gpus").full_effect
    assert not env._lesson_verdict(_fake(usable_cpus=1), "x", "2+ cores").full_effect
    with pytest.raises(ValueError, match="needs must be one of"):
        env._lesson_verdict(cpu_only, "x", "a TPU")


def test_warnings_name_small_shm_and_affinity():
    report = _fake(shm_bytes=64 * 2**20, affinity_cpus=1, usable_cpus=1, logical_cpus=4, cpu_quota=None)
    text = " ".join(report.warnings())
    assert "64 MiB" in text and "Bus error" in text and "1 of 4 cores" in text
    assert _fake(shm_bytes=8 * 2**30, affinity_cpus=2, usable_cpus=2, logical_cpus=2, cpu_quota=None).warnings() == []
    quota = " ".join(_fake(affinity_cpus=8, usable_cpus=1, logical_cpus=8, cpu_quota=1.5).warnings())
    assert "quota allows 1.5 cores" in quota and "size num_workers by 1" in quota


def _cgroup_v2(tmp_path, limits):
    """A cgroup v2 tree like /sys/fs/cgroup: this process in /kubepods/pod/ctr, cpu.max per folder."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cgroup").write_text("0::/kubepods/pod/ctr\n")
    for folder, text in limits.items():
        (tmp_path / "fs" / folder).mkdir(parents=True, exist_ok=True)
        (tmp_path / "fs" / folder / "cpu.max").write_text(text + "\n")
    (tmp_path / "fs" / "kubepods/pod/ctr").mkdir(parents=True, exist_ok=True)
    return tmp_path / "fs", tmp_path / "proc" / "cgroup"


def _cgroup_v1(tmp_path, quota_us, period_us="100000"):
    """A cgroup v1 tree: the cpu controller mounted at cpu,cpuacct, this process in /docker/abc."""
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cgroup").write_text("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/\n")
    folder = tmp_path / "fs" / "cpu,cpuacct" / "docker" / "abc"
    folder.mkdir(parents=True)
    (folder / "cpu.cfs_quota_us").write_text(quota_us + "\n")
    (folder / "cpu.cfs_period_us").write_text(period_us + "\n")
    return tmp_path / "fs", tmp_path / "proc" / "cgroup"


@pytest.mark.parametrize(
    "limits, cores",
    [
        ({"kubepods/pod/ctr": "150000 100000"}, 1.5),  # docker --cpus=1.5
        ({"kubepods/pod/ctr": "max 100000"}, None),  # no limit
        ({"kubepods": "200000 100000", "kubepods/pod/ctr": "max 100000"}, 2.0),  # a parent's limit applies
        ({"kubepods": "400000 100000", "kubepods/pod": "50000 100000"}, 0.5),  # the tightest one wins
    ],
)
def test_cpu_quota_reads_cgroup_v2(tmp_path, limits, cores):
    root, self_cgroup = _cgroup_v2(tmp_path, limits)
    assert env.cpu_quota(root, self_cgroup) == cores


@pytest.mark.parametrize("quota_us, cores", [("250000", 2.5), ("-1", None)])
def test_cpu_quota_reads_cgroup_v1(tmp_path, quota_us, cores):
    root, self_cgroup = _cgroup_v1(tmp_path, quota_us)
    assert env.cpu_quota(root, self_cgroup) == cores


def test_cpu_quota_without_cgroups(tmp_path):
    assert env.cpu_quota(tmp_path, tmp_path / "missing") is None


def test_usable_cpus_takes_the_smaller(monkeypatch):
    monkeypatch.setattr(env, "affinity_cpus", lambda: 8)
    monkeypatch.setattr(env, "cpu_quota", lambda: 2.5)
    assert env.usable_cpus() == 2
    monkeypatch.setattr(env, "cpu_quota", lambda: 0.5)
    assert env.usable_cpus() == 1
    monkeypatch.setattr(env, "cpu_quota", lambda: None)
    assert env.usable_cpus() == 8


def test_needs_cuda_skips_with_one_line(capsys, monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the skip path cannot run")
    monkeypatch.delenv(REQUIRE_CUDA_VAR, raising=False)
    assert env.needs_cuda("the bandwidth sweep") is False
    assert capsys.readouterr().out.count("\n") == 1
    monkeypatch.setenv(REQUIRE_CUDA_VAR, "1")
    with pytest.raises(RuntimeError, match="COURSE_REQUIRE_CUDA=1 but CUDA is absent"):
        env.needs_cuda("the bandwidth sweep")
    with pytest.raises(ValueError, match="what must name"):
        env.needs_cuda("")


@pytest.mark.cuda
def test_report_lists_every_gpu():
    import torch

    report = env.report()
    assert report.cuda_available and report.gpu_count == torch.cuda.device_count() >= 1
    assert env.needs_cuda("a CUDA test") is True


@pytest.mark.parametrize("cores, ranks, workers", [
    (2, 1, 2),    # 1 + 2 = 3 processes on 2 cores: one over, the main process mostly waits
    (2, 2, 0),    # 2 ranks already fill 2 cores (+1): no room for workers
    (16, 1, 16),  # 17 processes on 16 cores
    (16, 8, 1),   # 8 x (1 + 1) = 16
    (16, 3, 4),   # 3 x (1 + 4) = 15 <= 17, 3 x (1 + 5) = 18 > 17
    (1, 1, 1),
])
def test_workers_per_rank_is_the_one_rule(cores, ranks, workers):
    assert env.workers_per_rank(ranks, cores) == workers
    assert ranks * (1 + workers) <= cores + 1 or workers == 0
    assert ranks * (2 + workers) > cores + 1  # one more worker would break the rule


@pytest.mark.parametrize("ranks, cores, match", [(0, 2, "ranks must be a positive int, got 0"), (1, 0, "cores must be a positive int, got 0"),
                                                 (True, 2, "ranks must be a positive int, got True"), (1, 2.0, "cores must be a positive int")])
def test_workers_per_rank_names_bad_input(ranks, cores, match):
    with pytest.raises(ValueError, match=match):
        env.workers_per_rank(ranks, cores)


WORKER_TEMP_DIR_SCRIPT = """
import multiprocessing.util
import torch
from torch.utils.data import DataLoader, Dataset
from helpers import env

class Where(Dataset):
    def __len__(self):
        return 64
    def __getitem__(self, i):
        return torch.zeros(8), multiprocessing.util.get_temp_dir()

def folders(stop_after=None):
    seen = set()
    for step, (_, where) in enumerate(DataLoader(Where(), batch_size=4, num_workers=2, multiprocessing_context="fork")):
        seen.update(where)
        if stop_after is not None and step + 1 >= stop_after:
            break
    return sorted(seen)

alone = folders()  # what torch and multiprocessing do alone: each worker makes its own, removed as it exits
parent = env.share_worker_temp_dir()
assert env.share_worker_temp_dir() == parent  # made once
shared = [folders(stop_after) for stop_after in (1, 1, 1, None)]  # stopped during a worker's first batch, then to the end
print(repr((alone, parent, shared)))
"""


@pytest.fixture
def short_tmp():
    """An empty folder with a short path, removed afterwards: multiprocessing binds AF_UNIX sockets inside TMPDIR (108
    bytes a path at most), and tmp_path under pytest-xdist's popen-gwN folders made that too long ("OSError: AF_UNIX
    path too long" in a DataLoader worker)."""
    folder = Path(tempfile.mkdtemp(prefix="course-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs the fork start method")
def test_share_worker_temp_dir_keeps_one_folder_made_and_removed_by_this_process(short_tmp):
    temp = short_tmp
    result = subprocess.run([sys.executable, "-c", WORKER_TEMP_DIR_SCRIPT], capture_output=True, text=True,
                            cwd=ROOT, env={**os.environ, "TMPDIR": str(temp)}, timeout=120)
    assert result.returncode == 0, result.stderr
    alone, parent, shared = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert len(alone) == 2 and parent not in alone  # the case share_worker_temp_dir avoids
    assert Path(parent).parent == temp and shared[-1] == [parent]  # the workers used the parent's folder
    assert all(seen == [parent] for seen in shared[:-1] if seen)
    assert list(temp.iterdir()) == [], "a pymp-* folder was left behind"


def test_a_killed_makers_folder_is_removed_later_and_no_other(short_tmp):
    """A kernel killed instead of shut down leaves its folder; the next share_worker_temp_dir (or the test session's
    end) removes it, and leaves folders with a live marking process, folders it did not make and markers it did not
    write (another PID namespace's, or ones that are no pid)."""
    temp = short_tmp
    child = subprocess.Popen([sys.executable, "-c", "from helpers import env; print(env.share_worker_temp_dir(), "
                              "flush=True); import time; time.sleep(60)"], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "TMPDIR": str(temp)})
    here = env._namespace()
    try:
        folder = Path(child.stdout.readline().strip())
        assert folder.parent == temp and (folder / f"owner-{here}-{child.pid}").exists()
        assert env.remove_stale_worker_temp_dirs(temp) == []  # its maker is alive
    finally:
        child.kill()  # SIGKILL: no exit clean-up
        child.wait(10)
        child.stdout.close()
    kept = {"pymp-alive": [f"owner-{here}-{os.getpid()}"],
            "pymp-shared": [f"owner-{here}-{child.pid}", f"owner-{here}-{os.getpid()}"],  # a child's marker, parent alive
            "pymp-others": [], "pymp-namespace": [f"owner-{int(here) + 1}-{child.pid}"],
            "pymp-huge": [f"owner-{here}-99999999999999999999"], "pymp-unicode": [f"owner-{here}-\u00b2"]}
    for name, markers in kept.items():
        (temp / name).mkdir()
        for marker in markers:
            (temp / name / marker).touch()
    assert folder.exists()
    assert env.remove_stale_worker_temp_dirs(temp) == [folder]
    assert sorted(p.name for p in temp.iterdir()) == sorted(kept)


@pytest.mark.parametrize("root, error", [(5, TypeError), (b"/tmp", TypeError), ("", ValueError),
                                         ("/no/such/folder", ValueError), (__file__, ValueError)])
def test_remove_stale_worker_temp_dirs_refuses_a_bad_root(root, error):
    with pytest.raises(error, match="root must be"):
        env.remove_stale_worker_temp_dirs(root)
