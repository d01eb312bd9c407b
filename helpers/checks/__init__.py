"""Self-checks for the exercises, one module per lesson: each check gives a one-line verdict the learner can act on.

Notebooks call them as `checks.check_...` after `from helpers import checks`; `REGISTRY` maps each exercise id to its check.
"""
from helpers.checks.core import REGISTRY, CheckResult
from helpers.checks.lesson00 import check_workers_per_rank
from helpers.checks.lesson01 import check_balanced_accuracy, check_class_counts, check_imbalance_ratio, check_stratified_split
from helpers.checks.lesson02 import check_balanced_sampler, check_focal_loss, check_num_samples_for_coverage, check_per_sample_weights
from helpers.checks.lesson03 import check_knee, check_seed_worker, check_steady_samples_per_s
from helpers.checks.lesson03_getitems import check_getitems
from helpers.checks.lesson04 import check_gb_per_s, check_move_to, check_prefetched, check_safe_read
from helpers.checks.lesson05 import check_deduplicated_accuracy, check_epoch_orders, check_rank_loader
from helpers.checks.lesson06 import check_my_shards, check_remaining_indices, check_shard_count
from helpers.checks.lesson06_h5 import check_lazy_h5
from helpers.checks.lesson07 import check_balanced_loader, check_loader_with_workers
from helpers.checks.lesson07_streams import check_sharded_eval_stream, check_to_array
from helpers.checks.lesson07_own_finding import check_needs_set_epoch
from helpers.checks.lesson08 import check_packed_mask, check_padding_share, check_rank_batches, check_token_budget
from helpers.checks.lesson09 import check_coverage_gaps, check_repeated_orders, check_surprising_classes
from helpers.checks.lesson09_flight import check_held_back_s, check_slowest_share
from helpers.checks.lesson09_start import check_first_unpicklable, check_sent_mib

__all__ = [
    "REGISTRY", "CheckResult",
    "check_workers_per_rank",
    "check_class_counts", "check_imbalance_ratio", "check_stratified_split", "check_balanced_accuracy",
    "check_per_sample_weights", "check_balanced_sampler", "check_focal_loss", "check_num_samples_for_coverage",
    "check_steady_samples_per_s", "check_knee", "check_getitems", "check_seed_worker",
    "check_gb_per_s", "check_move_to", "check_prefetched", "check_safe_read",
    "check_epoch_orders", "check_rank_loader", "check_deduplicated_accuracy",
    "check_my_shards", "check_lazy_h5", "check_remaining_indices", "check_shard_count",
    "check_balanced_loader", "check_loader_with_workers", "check_to_array", "check_sharded_eval_stream", "check_needs_set_epoch",
    "check_padding_share", "check_rank_batches", "check_packed_mask", "check_token_budget",
    "check_repeated_orders", "check_coverage_gaps", "check_surprising_classes", "check_first_unpicklable", "check_sent_mib",
    "check_held_back_s", "check_slowest_share",
]
