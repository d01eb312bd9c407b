"""The doctor from a shell: `loader-doctor module:make_loader` (or `python -m helpers.doctor ...`), with documented exit statuses."""
from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from torch.utils.data import DataLoader

from helpers.doctor.reading import threads_left
from helpers.doctor.run import check_make_loader, diagnose
from helpers.doctor.spec import load
from helpers.env import share_worker_temp_dir

OK, FOUND_ERROR, COULD_NOT_RUN = 0, 1, 2
EPILOG = """exit status:
  0  the doctor ran and found no error (warnings and info may be printed)
  1  the doctor ran and found at least one error (e.g. loader-error, iterable-duplicates)
  2  the doctor could not run: bad arguments, your module or function could not be imported or called,
     or the --json file could not be written"""


def main(argv: Sequence[str] | None = None) -> int:
    """Diagnose the loader `module:function` returns; print the findings; 0 no error, 1 an error found, 2 could not run."""
    parser = argparse.ArgumentParser(prog="loader-doctor", description="The loader doctor (lesson 07): measures your DataLoader "
                                     "for a few seconds and reports findings, each with the numbers behind it and a fix.",
                                     epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("loader", help="module:function returning your DataLoader (the module is imported from the current directory)")
    parser.add_argument("--step", help="module:function taking one batch: one training step, to measure data wait against compute")
    parser.add_argument("--json", help="also write the diagnosis as JSON to this file")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds the measurements may take (default 30)")
    parser.add_argument("--device", help="the device batches go to (e.g. cuda), for the pinning checks")
    parser.add_argument("--epochs", type=int, default=1, help="read this many whole epochs through a ledger, calling set_epoch "
                        "before each as a training loop does: same order twice, samples left out (lesson 09)")
    parser.add_argument("--ranks", type=int, default=1, help="build one loader per rank, function(rank=r, world_size=RANKS), "
                        "and read their epochs: samples two ranks share, unequal steps (lesson 09)")
    parser.add_argument("--resume", action="store_true", help="resume a fresh loader from its state_dict mid-epoch and at the "
                        "epoch boundary, and compare with an uninterrupted run (lesson 09)")
    parser.add_argument("--start-methods", action="store_true", help="instead of a diagnosis, run the loader under fork, "
                        "forkserver and spawn, each in a fresh Python: time to the first batch, MiB sent to each worker, "
                        "worker memory, samples/s, and what fails (lesson 09); exit 1 when a method fails")
    parser.add_argument("--trace", help="after the diagnosis, read up to --trace-batches batches through the flight recorder "
                        "(lesson 09) and write what each worker and the loop did to this file, a Chrome trace "
                        "(open it in ui.perfetto.dev or chrome://tracing)")
    parser.add_argument("--trace-batches", type=int, help="batches the --trace recording reads (default 50)")
    args = parser.parse_args(argv)  # bad arguments: argparse exits with status 2
    for name in ("epochs", "ranks", "trace_batches"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be 1 or more, got {getattr(args, name)}")
    if args.trace_batches is not None and not args.trace:
        parser.error("--trace-batches needs --trace FILE, the file the recording is written to")
    if args.trace and not os.access(os.path.dirname(os.path.abspath(args.trace)), os.W_OK):
        parser.error(f"--trace: cannot write {args.trace} (its folder does not exist or is not writable)")
    share_worker_temp_dir()  # the loader's workers share one temporary folder, removed when the doctor exits
    if args.start_methods:
        return _start_methods(args.loader)
    try:
        make_loader = load(args.loader, "loader")
        check_make_loader(make_loader, args.ranks, args.resume)  # --ranks needs rank= and world_size=: said before calling it
        loader = make_loader(rank=0, world_size=args.ranks) if args.ranks > 1 else make_loader()
        step = load(args.step, "--step") if args.step else None
        diagnosis = diagnose(loader, step=step, budget_s=args.budget, device=args.device, epochs=args.epochs, ranks=args.ranks,
                             resume=args.resume, make_loader=make_loader)
        print(diagnosis)
        if args.json:
            with open(args.json, "w") as out:
                json.dump(diagnosis.to_dict(), out, indent=1)
        if args.trace:
            _trace(loader, step, args.trace, args.trace_batches or 50)
    except Exception as exc:  # noqa: BLE001 - could not run (or write its report): say why, with the traceback, and exit 2
        traceback.print_exc()
        print(f"loader-doctor: could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    return FOUND_ERROR if diagnosis.errors else OK


def _trace(loader: DataLoader, step: Callable[[Any], Any] | None, path: str, batches: int) -> None:
    """The flight recorder's reading of `batches` batches (with the step when given), written to `path`, described."""
    from helpers.flight import FlightRecorder, chrome_trace, describe

    recorder = FlightRecorder(loader).record(step=step, batches=batches)
    chrome_trace(recorder, path)
    print(f"\nflight recorder: {describe(recorder)}\ntrace written to {path} (open it in ui.perfetto.dev or chrome://tracing)")


def _start_methods(spec: str) -> int:
    """The start-method X-ray from the shell: the table, each failure's fix; 1 when a method failed, 2 when it could not run."""
    from helpers.doctor.xray import HEADER, x_ray

    try:
        runs = x_ray(spec)
    except Exception as exc:  # noqa: BLE001 - a bad spec: say why and exit 2
        print(f"loader-doctor: could not run: {type(exc).__name__}: {exc}", file=sys.stderr)
        return COULD_NOT_RUN
    print(HEADER)
    for method_run in runs:
        print(method_run.row())
    for fix in dict.fromkeys(r.fix for r in runs if r.fix):
        print(f"fix: {fix}")
    return OK if all(r.ok for r in runs) else FOUND_ERROR


def run() -> None:
    """The console command: exit with main()'s status, without waiting for a doctor thread stuck in a hung loader."""
    status = main()
    if threads_left():  # a thread inside torch's C++ at interpreter exit would abort the process (exit 134)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)
    sys.exit(status)
