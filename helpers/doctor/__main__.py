"""`python -m helpers.doctor module:make_loader [--step module:step] [--json F] [--budget S] [--device D]` (lesson 07)."""
from helpers.doctor.cli import run

run()
