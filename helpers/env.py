"""Lesson 00: what this machine can run (cores, RAM, /dev/shm, start method, GPUs, DDP backends)."""
from __future__ import annotations

import html
import math
import multiprocessing
import multiprocessing.util
import os
import platform
import shutil
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from helpers.course import LESSONS, NEEDS, REQUIRE_CUDA_VAR
from helpers.errors import wrapped

GIB = 1024**3
# Below this, DataLoader workers that hand batches back through shared memory can die with
# "Bus error" (Docker's default /dev/shm is 64 MiB).
SMALL_SHM_BYTES = 1 * GIB


@dataclass(frozen=True)
class LessonVerdict:
    """Whether one lesson runs at full effect on this machine, and why not if it doesn't."""

    stem: str
    needs: str
    full_effect: bool
    note: str


@dataclass(frozen=True)
class EnvReport:
    """Facts about this machine that decide how data loading behaves here (lesson 00)."""

    python: str
    platform: str
    torch: str
    torch_cuda_build: str | None
    cuda_available: bool
    gpu_count: int
    gpu_names: tuple[str, ...]
    logical_cpus: int
    affinity_cpus: int
    cpu_quota: float | None
    usable_cpus: int
    ram_total_bytes: int
    ram_available_bytes: int
    shm_bytes: int | None
    start_method: str
    distributed_available: bool
    gloo_available: bool
    nccl_available: bool
    ipywidgets: str | None

    def rows(self) -> list[tuple[str, str]]:
        """The report as (name, value) rows, in the order the lesson explains them."""
        shm = "none (not Linux)" if self.shm_bytes is None else f"{self.shm_bytes / GIB:.1f} GiB"
        return [
            ("Python", self.python),
            ("platform", self.platform),
            ("torch", self.torch),
            ("torch built for CUDA", self.torch_cuda_build or "no (CPU-only build)"),
            ("CUDA available", str(self.cuda_available)),
            ("GPUs", f"{self.gpu_count}" + (f": {', '.join(self.gpu_names)}" if self.gpu_names else "")),
            ("CPU cores (os.cpu_count)", str(self.logical_cpus)),
            ("cores this process may run on (sched_getaffinity)", str(self.affinity_cpus)),
            ("CPU quota (cgroup cpu.max / cfs_quota_us)", "none" if self.cpu_quota is None else f"{self.cpu_quota:g} cores"),
            ("usable CPU cores (the smaller of the two)", str(self.usable_cpus)),
            ("RAM total / available", f"{self.ram_total_bytes / GIB:.1f} / {self.ram_available_bytes / GIB:.1f} GiB"),
            ("/dev/shm", shm),
            ("multiprocessing start method", self.start_method),
            ("torch.distributed", str(self.distributed_available)),
            ("gloo backend (CPU)", str(self.gloo_available)),
            ("nccl backend (GPU)", str(self.nccl_available)),
            ("ipywidgets", self.ipywidgets or "not installed"),
        ]

    def warnings(self) -> list[str]:
        """Problems on this machine that will break or slow a lesson, each with its fix."""
        found = []
        if self.shm_bytes is not None and self.shm_bytes < SMALL_SHM_BYTES:
            found.append(
                f"/dev/shm is only {self.shm_bytes / 2**20:.0f} MiB: DataLoader workers pass batches "
                "through it and can die with 'Bus error'; in Docker start with --shm-size=8g or --ipc=host"
            )
        if self.affinity_cpus < self.logical_cpus:
            found.append(
                f"this process may run on {self.affinity_cpus} of {self.logical_cpus} cores (a CPU set: "
                "taskset, a container or a scheduler): size num_workers by the usable number"
            )
        if self.cpu_quota is not None and self.cpu_quota < self.affinity_cpus:
            found.append(
                f"a CPU quota allows {self.cpu_quota:g} cores (docker --cpus, a Kubernetes CPU limit) although "
                f"{self.affinity_cpus} are visible: size num_workers by {self.usable_cpus}; PyTorch's "
                "over-subscription warning only knows the visible cores"
            )
        if self.ipywidgets is None:
            found.append("ipywidgets is not installed: the lessons' widgets will not render")
        return found

    def verdict(self) -> list[LessonVerdict]:
        """For each lesson: does it run at full effect here, and what falls back if not."""
        return [_lesson_verdict(self, entry.stem, entry.needs) for entry in LESSONS]

    def __str__(self) -> str:
        width = max(len(name) for name, _ in self.rows())
        lines = [f"{name:<{width}}  {value}" for name, value in self.rows()]
        lines.append("")
        for item in self.verdict():
            mark = "full effect" if item.full_effect else "falls back"
            lines.append(f"{item.stem:<{width}}  {mark}: {item.note}")
        lines.extend(f"WARNING: {text}" for text in self.warnings())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        cell = "<td style='text-align:left'>{}</td>"
        body = "".join(
            "<tr>" + cell.format(html.escape(name)) + cell.format(html.escape(value)) + "</tr>"
            for name, value in self.rows()
        )
        verdicts = "".join(
            "<tr>"
            + cell.format(html.escape(item.stem))
            + cell.format(("full effect: " if item.full_effect else "falls back: ") + html.escape(item.note))
            + "</tr>"
            for item in self.verdict()
        )
        warnings = "".join(f"<p><b>Warning:</b> {html.escape(text)}</p>" for text in self.warnings())
        return (
            "<table><tr><th>what</th><th>this machine</th></tr>" + body + "</table>"
            "<table><tr><th>lesson</th><th>verdict</th></tr>" + verdicts + "</table>" + warnings
        )


def _lesson_verdict(env: EnvReport, stem: str, needs: str) -> LessonVerdict:
    if needs == "cpu":
        return LessonVerdict(stem, NEEDS[needs], True, "runs fully on a CPU")
    if needs == "2+ cores":
        full = env.usable_cpus >= 2
        note = f"{env.usable_cpus} usable cores" if full else "1 usable core: worker speed-ups cannot show"
        return LessonVerdict(stem, NEEDS[needs], full, note)
    if needs == "1 gpu":
        if env.gpu_count >= 1:
            return LessonVerdict(stem, NEEDS[needs], True, f"GPU measurements run on {env.gpu_names[0]}")
        return LessonVerdict(stem, NEEDS[needs], False, "no CUDA GPU: each GPU measurement is skipped with a line saying so, the H200 reference drawn instead")
    if needs == "2+ gpus":
        if env.gpu_count >= 2 and env.nccl_available:
            return LessonVerdict(stem, NEEDS[needs], True, f"{env.gpu_count} ranks on nccl, one per GPU")
        if env.gloo_available:
            return LessonVerdict(stem, NEEDS[needs], False, "runs whole on 2 CPU ranks over gloo (nothing skipped; nccl needs 2+ GPUs)")
        return LessonVerdict(stem, NEEDS[needs], False, "no gloo or nccl backend: DDP parts cannot run")
    raise ValueError(f"needs must be one of {sorted(NEEDS)}, got {needs!r}")


def affinity_cpus() -> int:
    """CPU cores this process may run on: sched_getaffinity where the OS has it, else os.cpu_count."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _with_parents(mount: Path, group: str) -> list[Path]:
    """A cgroup's folder and its parents up to the mount: a limit set on a parent applies too."""
    folder = mount / group.strip("/")
    folders = [folder]
    while folder != mount and folder != folder.parent:
        folder = folder.parent
        folders.append(folder)
    return [f for f in folders if f.is_dir()]


def cpu_quota(cgroup_root: str | os.PathLike = "/sys/fs/cgroup", self_cgroup: str | os.PathLike = "/proc/self/cgroup") -> float | None:
    """Cores a cgroup CPU quota allows this process (v2 cpu.max, v1 cpu.cfs_quota_us), None when there is none."""
    root = Path(cgroup_root)
    lines = _read(Path(self_cgroup))
    if lines is None:
        return None
    limits = []
    for line in lines.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        if hierarchy == "0" and controllers == "":  # cgroup v2: one unified tree
            for folder in _with_parents(root, group):
                quota, _, period = (_read(folder / "cpu.max") or "max").partition(" ")
                if quota != "max":
                    limits.append(int(quota) / int(period or 100_000))
        elif "cpu" in controllers.split(","):  # cgroup v1: the cpu controller's own tree
            for mount in {root / controllers, root / "cpu"}:
                for folder in _with_parents(mount, group):
                    quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
                    if quota and period and int(quota) > 0:
                        limits.append(int(quota) / int(period))
    return min(limits) if limits else None


def usable_cpus() -> int:
    """Cores to size num_workers by: the affinity count, or fewer when a cgroup CPU quota is smaller."""
    quota = cpu_quota()
    cores = affinity_cpus()
    return cores if quota is None else max(1, min(cores, math.floor(quota)))


def workers_per_rank(ranks: int = 1, cores: int | None = None) -> int:
    """The course's one rule for DataLoader workers per rank: all ranks' processes at most one more than the usable cores (lessons 00, 03, 07).

    Each rank is a main process plus its workers; a rule of thumb, on the premise that the main process spends part
    of each step waiting for batches, so one process over the cores costs little; where the step keeps the CPU busy
    (CPU training), measure. The loader doctor warns past this and advises it.
    """
    if isinstance(ranks, bool) or not isinstance(ranks, int) or ranks < 1:
        raise ValueError(f"ranks must be a positive int, got {ranks!r}")
    cores = usable_cpus() if cores is None else cores
    if isinstance(cores, bool) or not isinstance(cores, int) or cores < 1:
        raise ValueError(f"cores must be a positive int, got {cores!r}")
    return max(0, (cores + 1) // ranks - 1)


OWNER_PREFIX = "owner-"  # share_worker_temp_dir marks its folder with its process: owner-<pid namespace>-<pid>


def _namespace() -> str:
    """This process's PID namespace (a pid means something only inside its own), "0" where /proc does not say."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def share_worker_temp_dir() -> str:
    """Make multiprocessing's temporary folder in this process now, so the workers started later share it (lessons 00, 03-09).

    A worker that sends its first tensor makes its own /tmp/pymp-* folder for the socket that hands the tensor's memory
    over, and removes it when it exits; a worker stopped during its first batch can still be making the socket while the
    folder is removed, and prints "OSError: [Errno 39] Directory not empty: '/tmp/pymp-...'" or leaves the folder behind.
    Workers inherit a folder their parent already made, and only the process that made it removes it, at exit. A kernel
    killed instead of shut down cannot: the folder is marked with each process that called this, and folders whose
    marking processes are all gone are removed here (remove_stale_worker_temp_dirs).
    """
    remove_stale_worker_temp_dirs()
    folder = multiprocessing.util.get_temp_dir()
    marker = Path(folder) / f"{OWNER_PREFIX}{_namespace()}-{os.getpid()}"
    if not marker.exists():
        marker.touch()
    return folder


def remove_stale_worker_temp_dirs(root: str | os.PathLike | None = None) -> list[Path]:
    """Remove the share_worker_temp_dir folders under `root` (the temp folder) whose marking processes are all gone (lesson 00)."""
    import tempfile

    import psutil

    if root is not None and (isinstance(root, (bytes, bool)) or not isinstance(root, (str, os.PathLike))):
        raise TypeError(f"root must be a folder path (str or os.PathLike), got {root!r}")
    folder = Path(root if root is not None else tempfile.gettempdir())
    if str(root) == "" or not folder.is_dir():
        raise ValueError(f"root must be an existing folder, got {root!r}")
    here = _namespace()
    removed = []
    for candidate in sorted(folder.glob("pymp-*")):
        if candidate.is_symlink() or not candidate.is_dir():
            continue
        owners = [m.name[len(OWNER_PREFIX):].split("-") for m in candidate.glob(f"{OWNER_PREFIX}*")]
        if not owners or any(len(o) != 2 or o[0] != here or not (o[1].isascii() and o[1].isdigit()) for o in owners):
            continue  # not ours, another namespace's, or a marker this code did not write: left alone
        try:
            if any(psutil.pid_exists(int(pid)) for _, pid in owners):
                continue
        except (OverflowError, ValueError):
            continue
        shutil.rmtree(candidate, ignore_errors=True)
        removed.append(candidate)
    return removed


def _package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def report() -> EnvReport:
    """Measure this machine now: versions, cores, memory, shm, start method, GPUs, backends (lesson 00)."""
    import psutil
    import torch
    import torch.distributed as dist

    cuda_available = torch.cuda.is_available()
    gpu_count = torch.cuda.device_count() if cuda_available else 0
    gpu_names = tuple(torch.cuda.get_device_name(i) for i in range(gpu_count))
    distributed = dist.is_available()
    memory = psutil.virtual_memory()
    shm_bytes = shutil.disk_usage("/dev/shm").total if os.path.isdir("/dev/shm") else None
    return EnvReport(
        python=platform.python_version(),
        platform=f"{platform.system()} {platform.machine()}",
        torch=torch.__version__,
        torch_cuda_build=torch.version.cuda,
        cuda_available=cuda_available,
        gpu_count=gpu_count,
        gpu_names=gpu_names,
        logical_cpus=os.cpu_count() or 1,
        affinity_cpus=affinity_cpus(),
        cpu_quota=cpu_quota(),
        usable_cpus=usable_cpus(),
        ram_total_bytes=memory.total,
        ram_available_bytes=memory.available,
        shm_bytes=shm_bytes,
        start_method=multiprocessing.get_context().get_start_method(),
        distributed_available=distributed,
        gloo_available=distributed and dist.is_gloo_available(),
        nccl_available=distributed and dist.is_nccl_available(),
        ipywidgets=_package_version("ipywidgets"),
    )


def cuda_required() -> bool:
    """True when COURSE_REQUIRE_CUDA=1: a skipped CUDA section is then a failure (GPU runners)."""
    return os.environ.get(REQUIRE_CUDA_VAR, "") == "1"


def needs_cuda(what: str) -> bool:
    """True if CUDA is here; else print one sentence saying `what` is skipped (raise under COURSE_REQUIRE_CUDA=1)."""
    if not isinstance(what, str) or not what.strip():
        raise ValueError(f"what must name the measurement being skipped, got {what!r}")
    import torch

    if torch.cuda.is_available():
        return True
    line = f"Skipped on this machine: {what} needs a CUDA GPU (torch.cuda.is_available() is False)."
    if cuda_required():
        raise RuntimeError(f"{REQUIRE_CUDA_VAR}=1 but CUDA is absent. {line}")
    print(wrapped(line))  # a long `what` breaks between words, not mid-word in JupyterLab
    return False
