"""Host-to-device copies (lesson 04): the tools to keep in your own training code, and lesson 04's measurements of them.

- helpers/transfer/copies.py: `move` a nested batch, `CUDAPrefetcher`, a batch's size (`batch_bytes`, `format_bytes`)
- helpers/transfer/copy_vs_compute.py: one step's copy against its compute (`CopyVsCompute`, `rate_at`)
- helpers/transfer/bench.py: bandwidth over sizes, pinning costs, prefetching's effect (`h2d_bandwidth`, `make gpu-check`)
- helpers/transfer/timeline.py: copy/compute timelines on CUDA streams, the GPU's link, the recorded gpu-check reports
- helpers/transfer/host_copies.py: the host-memory copy the DataLoader's pin thread makes per pageable batch
"""
from helpers.transfer.bench import (
    GPU_REPORT_GLOB,
    BandwidthRow,
    BandwidthSweep,
    PinningCosts,
    PrefetchEffect,
    h2d_bandwidth,
    in_pin_thread,
    interleaved_medians,
    median_seconds,
    ms_per_step,
    pinning_costs,
    prefetch_effect,
)
from helpers.transfer.copies import GB, IMAGE_SHAPE, CUDAPrefetcher, as_device, batch_bytes, format_bytes, image_batch_bytes, move
from helpers.transfer.copy_vs_compute import CopyVsCompute, rate_at
from helpers.transfer.host_copies import HostCopySweep, host_copy_gb_per_s, host_copy_sweep
from helpers.transfer.timeline import (
    Span,
    Timeline,
    copy_compute_timeline,
    gpu_link,
    load_reference_results,
    newest_reference,
    pinning_costs_from_report,
    plot_timelines,
    prefetch_from_report,
    reference_title,
    sweep_from_report,
    sweep_to_dict,
    timelines_from_report,
    unsafe_d2h_read,
)

__all__ = [
    "GB", "GPU_REPORT_GLOB", "IMAGE_SHAPE", "BandwidthRow", "BandwidthSweep", "CUDAPrefetcher", "CopyVsCompute", "HostCopySweep",
    "PinningCosts", "PrefetchEffect", "Span", "Timeline", "as_device", "batch_bytes", "copy_compute_timeline", "format_bytes",
    "gpu_link", "h2d_bandwidth", "host_copy_gb_per_s", "host_copy_sweep", "image_batch_bytes", "in_pin_thread",
    "interleaved_medians", "load_reference_results", "median_seconds", "move", "ms_per_step", "newest_reference",
    "pinning_costs", "pinning_costs_from_report", "plot_timelines", "prefetch_effect", "prefetch_from_report", "rate_at",
    "reference_title", "sweep_from_report", "sweep_to_dict", "timelines_from_report", "unsafe_d2h_read",
]
