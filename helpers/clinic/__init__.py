"""The debugging clinic (lesson 07): a training script with data-loading faults planted, its measurements and its views.

- helpers/clinic/script.py: the script as importable functions, each fault a switch (`make_loader`, `make_step`, `FAULTS`)
- helpers/clinic/runs.py: speed windows, rounds and ladders, and whole training runs (`measure_speed`, `train`)
- helpers/clinic/views.py: the before/after table and plot, and the fault widget (`ladder_table`, `fault_widget`)

Everything a DataLoader worker, a spawned rank or the doctor's command line runs is importable from here:

    python -m helpers.doctor helpers.clinic:make_loader --step helpers.clinic:train_step --json out.json
"""
from helpers.clinic.runs import Run, Speed, evaluate, ladder_rounds, measure_speed, median_speed, speed_rounds, train, train_in_turn
from helpers.clinic.script import (
    ALL_FIXED,
    BATCH_SIZE,
    CLASS_COUNTS,
    DECODE_MS,
    EPOCHS,
    EVAL_PER_CLASS,
    FAULTS,
    HIDDEN,
    LR,
    MAX_WORKERS,
    MINORITY,
    NUM_CLASSES,
    NUM_FEATURES,
    NUM_SHARDS,
    ONE_PROCESS,
    RANKS_ONLY,
    RAW_PER_FEATURE,
    SEPARATION,
    ClinicDataset,
    EvalStream,
    Fault,
    as_fixed,
    held_out_data,
    make_eval_loader,
    make_loader,
    make_model,
    make_step,
    rank_and_world,
    shard_plan,
    template_loader,
    train_step,
    training_data,
    workers_per_rank,
)
from helpers.clinic.views import Rung, fault_widget, ladder_table, plot_ladder

__all__ = [
    "ALL_FIXED", "BATCH_SIZE", "CLASS_COUNTS", "DECODE_MS", "EPOCHS", "EVAL_PER_CLASS", "FAULTS", "HIDDEN", "LR", "MAX_WORKERS",
    "MINORITY", "NUM_CLASSES", "NUM_FEATURES", "NUM_SHARDS", "ONE_PROCESS", "RANKS_ONLY", "RAW_PER_FEATURE", "SEPARATION",
    "ClinicDataset", "EvalStream", "Fault", "Run", "Rung", "Speed", "as_fixed", "evaluate", "fault_widget", "held_out_data",
    "ladder_rounds", "ladder_table", "make_eval_loader", "make_loader", "make_model", "make_step", "measure_speed", "median_speed",
    "plot_ladder", "rank_and_world", "shard_plan", "speed_rounds", "template_loader", "train", "train_in_turn", "train_step",
    "training_data", "workers_per_rank",
]
