"""nbclient's NotebookClient with the kernel's messages awaited in 1-second slices: a missed wake-up costs a second, not a cell's timeout.

Seen here (tools/stress.py beside two CPU-bound programs, 2 of 25 runs): the kernel replied to a widget cell in 0.4 s
by its own clock, yet nbclient's execute_cell returned exactly its 300 s cell timeout later, without an error.
pyzmq's asyncio poll ends a timed-out wait with one last non-blocking poll and returns what that finds, so a
reply whose wake-up the event loop missed is read only when the timeout expires. Waiting in slices re-polls
every second, and a wait with a timeout still ends at that timeout.
"""
from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from queue import Empty
from typing import Any

import nbclient
from nbclient.util import run_sync

SLICE_S = 1.0  # the longest one wait on a kernel socket lasts before it polls again


def in_slices(get_msg: Callable[..., Awaitable[dict]], slice_s: float = SLICE_S) -> Callable[..., Awaitable[dict]]:
    """A channel's async get_msg(timeout=None) that waits at most `slice_s` at a time, until its own timeout (None: forever;
    0 or less: one poll)."""
    if not (isinstance(slice_s, (int, float)) and math.isfinite(slice_s) and slice_s > 0):
        raise ValueError(f"slice_s must be a positive finite number of seconds, got {slice_s!r}")

    async def get_msg_in_slices(timeout: float | None = None) -> dict:
        if timeout is not None and math.isnan(timeout):
            raise ValueError(f"timeout must be a number of seconds or None, got {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = slice_s if deadline is None else min(slice_s, max(0.0, deadline - time.monotonic()))
            try:
                return await get_msg(timeout=left)
            except Empty:
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    return get_msg_in_slices


class NotebookClient(nbclient.NotebookClient):
    """nbclient.NotebookClient whose shell and IOPub waits poll the kernel's sockets at least once a second."""

    async def async_start_new_kernel_client(self) -> Any:
        kc = await super().async_start_new_kernel_client()
        for channel in (kc.shell_channel, kc.iopub_channel):
            channel.get_msg = in_slices(channel.get_msg)
        return kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)  # the base class bound its own (setup_kernel calls it)
