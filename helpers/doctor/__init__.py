"""The loader doctor: short, bounded measurements on your own DataLoader, each finding backed by numbers measured on it (lesson 07).

`diagnose(loader, step=..., budget_s=..., device=...)` returns a `Diagnosis`; `loader-doctor module:make_loader
[--step module:train_step] [--json out.json] [--budget 30]` (or `python -m helpers.doctor ...`) does the same from a
shell: exit status 0 when it finds no error, 1 when it finds one, 2 when it could not run. `epochs=`, `ranks=` and
`resume=` (`--epochs 2 --ranks 2 --resume`) also read whole epochs, every rank and a resumed run through a ledger (lesson 09). `--start-methods`
(`helpers.doctor.xray.x_ray`) runs the loader under fork, forkserver and spawn instead, each in a fresh Python (lesson 09). The budget bounds the
doctor's own reading and every fetch it makes; your `step` runs to its end once called, so a first step slower than
the budget (CUDA starting up in this process, as seen on the H200 reference host) makes the run that much longer.
That first step counts as start-up, not data wait.

Each finding is a rule in `RULES`, registered with `@rule` in the module named after the lesson that teaches its
fix (lesson00 ... lesson09; lesson03_workers holds lesson 03's num_workers sweep, lesson09_hol lesson 09's
head-of-line); `table()` lists them with their thresholds.
"""
from helpers.doctor import lesson00, lesson02, lesson03, lesson03_workers, lesson04, lesson06, lesson08  # noqa: F401 - registers the rules,
from helpers.doctor import lesson09, lesson09_flight, lesson09_hol  # noqa: F401 - in run order
from helpers.doctor.cli import main
from helpers.doctor.findings import SEVERITIES, Diagnosis, Finding
from helpers.doctor.lesson00 import SHM_WARN_SHARE, THREADS_GAIN
from helpers.doctor.lesson02 import NOISE_LEVEL, RAREST_SHARE
from helpers.doctor.lesson03 import BUSY_CORES, COPY_ON_READ_MIB, INPUT_BOUND_SHARE, STARTUP_MIN_S, STARTUP_SHARE
from helpers.doctor.lesson03_workers import SWEEP_GAIN
from helpers.doctor.lesson06 import DUPLICATE_SHARE
from helpers.doctor.lesson08 import PADDING_SHARE
from helpers.doctor.registry import PHASES, RULES, Check, Observation, Rule, finding, rule, table
from helpers.doctor.registry import in_order as rules_in_order
from helpers.doctor.run import diagnose

CODES: dict[str, tuple[str, str]] = {code: r.taught_in for code, r in RULES.items()}  # code: (notebook stem, section)

__all__ = ["BUSY_CORES", "CODES", "COPY_ON_READ_MIB", "Check", "DUPLICATE_SHARE", "Diagnosis", "Finding", "INPUT_BOUND_SHARE",
           "NOISE_LEVEL", "Observation", "PADDING_SHARE", "PHASES", "RAREST_SHARE", "RULES", "Rule", "SEVERITIES", "SHM_WARN_SHARE",
           "STARTUP_MIN_S", "STARTUP_SHARE", "SWEEP_GAIN", "THREADS_GAIN", "diagnose", "finding", "main", "rule", "rules_in_order", "table"]
