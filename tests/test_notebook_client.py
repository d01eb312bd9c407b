"""tools.notebook_client: kernel messages awaited in slices, so a missed wake-up costs one slice, not the cell's timeout."""
import asyncio
import time
from queue import Empty

import pytest

from tools import notebook_client


def missed_wake_up(arrives_after_s: float):
    """A channel's get_msg whose message comes `arrives_after_s` from now, but whose wake-up is lost: a wait that
    started before the message sees it only when its timeout expires (pyzmq's last poll); one without a timeout, never."""
    arrival = time.monotonic() + arrives_after_s
    calls = []

    async def get_msg(timeout=None):
        calls.append(timeout)
        if timeout is None:
            await asyncio.sleep(3600)
        await asyncio.sleep(timeout)
        if time.monotonic() >= arrival:
            return {"msg_type": "execute_reply"}
        raise Empty

    return get_msg, calls


def test_a_missed_wake_up_costs_one_slice_not_the_timeout():
    get_msg, calls = missed_wake_up(0.15)
    started = time.monotonic()
    msg = asyncio.run(notebook_client.in_slices(get_msg, slice_s=0.1)(timeout=300))
    assert msg == {"msg_type": "execute_reply"} and time.monotonic() - started < 1.0
    assert len(calls) >= 2 and all(0 <= t <= 0.1 for t in calls)


def test_a_wait_without_a_timeout_still_polls_in_slices():
    get_msg, calls = missed_wake_up(0.15)
    assert asyncio.run(asyncio.wait_for(notebook_client.in_slices(get_msg, slice_s=0.1)(timeout=None), 5))
    assert None not in calls


def test_a_timeout_still_ends_the_wait_with_empty():
    get_msg, _ = missed_wake_up(60)
    started = time.monotonic()
    with pytest.raises(Empty):
        asyncio.run(notebook_client.in_slices(get_msg, slice_s=0.1)(timeout=0.35))
    assert 0.3 <= time.monotonic() - started < 1.0


@pytest.mark.parametrize("slice_s", [0, -1.0, float("nan"), float("inf"), "1"])
def test_a_slice_must_be_positive_and_finite(slice_s):
    with pytest.raises(ValueError, match="slice_s must be a positive finite number of seconds"):
        notebook_client.in_slices(lambda timeout=None: None, slice_s=slice_s)


def test_a_nan_timeout_is_refused_not_waited_on_forever():
    get_msg, _ = missed_wake_up(60)
    with pytest.raises(ValueError, match="timeout must be a number of seconds or None, got nan"):
        asyncio.run(notebook_client.in_slices(get_msg, slice_s=0.1)(timeout=float("nan")))


def test_the_client_waits_in_slices_on_shell_and_iopub():
    """A real kernel: both channels' get_msg are wrapped, and a cell still runs and returns its output."""
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print(6 * 7)")])
    client = notebook_client.NotebookClient(nb, timeout=60, kernel_name="python3")
    with client.setup_kernel():
        assert all(channel.get_msg.__name__ == "get_msg_in_slices"
                   for channel in (client.kc.shell_channel, client.kc.iopub_channel))
        client.execute_cell(nb.cells[0], 0)
    assert nb.cells[0].outputs[0]["text"] == "42\n"
    seen = []  # execute() starts its kernel client on another path than setup_kernel()
    client = notebook_client.NotebookClient(nb, timeout=60, kernel_name="python3",
                                            on_cell_executed=lambda **_: seen.append(client.kc.shell_channel.get_msg.__name__))
    client.execute()
    assert seen == ["get_msg_in_slices"] and nb.cells[0].outputs[0]["text"] == "42\n"
