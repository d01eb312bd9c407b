"""`make gpu-check`: on a CUDA machine, measure lesson 04's transfers, run the whole suite with CUDA required, write one report."""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers import transfer  # noqa: E402
from helpers.course import REQUIRE_CUDA_VAR  # noqa: E402

SIZES = [4 * 2**10, 64 * 2**10, 2**20, 16 * 2**20, 64 * 2**20, 256 * 2**20]


def driver_version() -> str:
    """The NVIDIA driver version from nvidia-smi, or why it is unknown."""
    if shutil.which("nvidia-smi") is None:
        return "unknown (nvidia-smi not on PATH)"
    done = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip().splitlines()[0] if done.returncode == 0 and done.stdout.strip() else f"unknown (nvidia-smi exit {done.returncode})"


def measure() -> dict[str, Any]:
    """Every lesson 04 measurement on cuda:0, as JSON-ready data."""
    name = torch.cuda.get_device_name(0)
    sweep = transfer.h2d_bandwidth(SIZES, repeats=20)
    timelines = [
        transfer.copy_compute_timeline(64 * 2**20, pinned=pinned, side_stream=side)
        for pinned, side in ((False, True), (True, False), (True, True))
    ]
    before, after = transfer.unsafe_d2h_read()
    return {
        "hardware": name,
        "date": datetime.date.today().isoformat(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "driver": driver_version(),
        "link": transfer.gpu_link(),
        "gpu_count": torch.cuda.device_count(),
        "host": f"{platform.system()} {platform.machine()}, {platform.processor() or 'cpu'}",
        "python": platform.python_version(),
        "bandwidth": transfer.sweep_to_dict(sweep),
        "pinning_costs": [vars(transfer.pinning_costs(size)) for size in (2**20, 64 * 2**20)],
        "timelines": [
            {"title": t.title, "overlap_fraction": t.overlap_fraction, "total_ms": t.total_ms, "spans": [vars(s) for s in t.spans]}
            for t in timelines
        ],
        "unsafe_d2h": {"right_before_sync": before, "right_after_sync": after},
        "prefetch": vars(transfer.prefetch_effect()),
        "host_copy_gb_per_s": transfer.host_copy_gb_per_s(64 * 2**20),
    }


def markdown(report: dict[str, Any], tests: dict[str, Any]) -> str:
    """The report for people: what ran where, each measurement, the suite's outcome."""
    sweep = transfer.sweep_from_report(report)
    lines = [
        f"# GPU check: {report['hardware']}, {report['date']}",
        "",
        f"Recorded by `make gpu-check` (tools/gpu_check.py). torch {report['torch']} (CUDA {report['cuda']}), driver "
        f"{report['driver']}, Python {report['python']}; GPU link: {report['link']}; {report['gpu_count']} GPU(s); host {report['host']}.",
        "",
        "## Host-to-device bandwidth (CUDA events, median of 20)",
        "```",
        str(sweep),
        "```",
        "",
        "## Getting a batch onto the GPU (wall time, median of 10 interleaved rounds)",
    ]
    for costs in report["pinning_costs"]:
        lines.append(f"- {transfer.PinningCosts(**costs)}")
    lines += ["", "## Copy/compute overlap (64 MiB copy, compute sized to a pinned copy)"]
    for t in report["timelines"]:
        lines.append(f"- {t['title']}: overlap {t['overlap_fraction']:.0%} of the shorter span, {t['total_ms']:.2f} ms in all")
    d2h = report["unsafe_d2h"]
    lines += [
        "",
        "## Device-to-host with non_blocking=True behind a slow kernel",
        f"- values right before synchronising: {'right' if d2h['right_before_sync'] else 'wrong'}; "
        f"after: {'right' if d2h['right_after_sync'] else 'wrong'}",
        "",
        "## Stream prefetcher",
        f"- {transfer.PrefetchEffect(**report['prefetch'])}",
        "",
        f"Host memory copy (64 MiB, one thread): {report['host_copy_gb_per_s']:.1f} GB/s.",
        "",
        f"## Test suite with {REQUIRE_CUDA_VAR}=1",
        f"`{tests['command']}` exited {tests['exit_code']} after {tests['seconds']:.0f} s: {tests['summary']}",
        "",
    ]
    return "\n".join(lines)


def run_suite(log: Path) -> dict[str, Any]:
    """The whole pytest suite (lessons, solutions, unit tests) with every CUDA section required; output to `log`."""
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs"]
    began = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=ROOT, env={**os.environ, REQUIRE_CUDA_VAR: "1"}, stdout=out, stderr=subprocess.STDOUT)
    text = log.read_text()
    found = re.findall(r"^=+ (.*(?:passed|failed|error).*) in [\d.]+s", text, flags=re.MULTILINE)
    return {"command": f"{REQUIRE_CUDA_VAR}=1 " + " ".join(["python", *command[1:]]), "exit_code": done.returncode,
            "seconds": time.perf_counter() - began, "summary": found[-1] if found else "no pytest summary line (see the log)"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "gpu-check", help="folder for the report (default: gpu-check/)")
    parser.add_argument("--skip-suite", action="store_true", help="measure only; do not run the test suite")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("make gpu-check needs a CUDA GPU, and torch.cuda.is_available() is False on this machine: nothing was measured.", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    stem = f"{datetime.date.today().isoformat()}-{re.sub(r'[^a-z0-9]+', '-', torch.cuda.get_device_name(0).lower()).strip('-')}-gpu-check"
    report = measure()
    torch.cuda.empty_cache()  # give the suite the GPU memory the measurements cached
    (args.out / f"{stem}.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"measured on {report['hardware']}; wrote {args.out / (stem + '.json')}")
    tests = {"command": "(skipped: --skip-suite)", "exit_code": 0, "seconds": 0.0, "summary": "not run"}
    if not args.skip_suite:
        tests = run_suite(args.out / f"{stem}-pytest.log")
    (args.out / f"{stem}.md").write_text(markdown(report, tests))
    print(f"wrote {args.out / (stem + '.md')}; suite: {tests['summary']} (exit {tests['exit_code']})")
    print("To make these the course's reference results: copy the .json and .md into docs/reference-results/ and commit them.")
    return int(tests["exit_code"] != 0)


if __name__ == "__main__":
    sys.exit(main())
