"""Held-out wrong answers to lesson 04's exercises, written from the task text alone (issue 25)."""
from __future__ import annotations

import collections.abc
import statistics
import time

import torch


# ---- 04.1 gb_per_s(copy, synchronize, num_bytes, repeats=5)

def _reference_gb_per_s(copy, synchronize, num_bytes: int, repeats: int = 5) -> float:
    """One untimed warm-up, then the median of `repeats` synchronised timings, in 1e9 bytes/s."""
    copy()
    synchronize()
    rates = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        copy()
        synchronize()
        rates.append(num_bytes / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def never_synchronizes(copy, synchronize, num_bytes: int, repeats: int = 5) -> float:
    """No synchronize(): times how fast copies are queued, not how fast they run."""
    copy()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        rates.append(num_bytes / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def synchronizes_after_the_clock(copy, synchronize, num_bytes: int, repeats: int = 5) -> float:
    """Reads the clock, then synchronises: the stop time is taken before the copy ends."""
    copy()
    synchronize()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        stop = time.perf_counter()
        synchronize()
        rates.append(num_bytes / (stop - start) / 1e9)
    return statistics.median(rates)


def no_warm_up_copy(copy, synchronize, num_bytes: int, repeats: int = 5) -> float:
    """Skips the warm-up: the first, slow copy is one of the timed ones."""
    rates = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        copy()
        synchronize()
        rates.append(num_bytes / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def gib_per_s(copy, synchronize, num_bytes: int, repeats: int = 5) -> float:
    """Divides by 2**30: GiB/s, not GB/s."""
    return _reference_gb_per_s(copy, synchronize, num_bytes, repeats) * 1e9 / 2**30


def mean_over_total_time(copy, synchronize, num_bytes: int, repeats: int = 5) -> float:
    """Total bytes over total time (a mean), not the median: one slow copy drags it down."""
    copy()
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
        synchronize()
    return repeats * num_bytes / (time.perf_counter() - start) / 1e9


# ---- 04.2 move_to(batch, device, non_blocking=False)

def _reference_move_to(batch, device, non_blocking: bool = False):
    """Tensors moved, dicts/lists/tuples/namedtuples rebuilt, anything else unchanged."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {key: _reference_move_to(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, list):
        return [_reference_move_to(value, device, non_blocking) for value in batch]
    if isinstance(batch, tuple):
        fields = [_reference_move_to(value, device, non_blocking) for value in batch]
        return type(batch)(*fields) if hasattr(batch, "_fields") else tuple(fields)
    return batch


def namedtuple_becomes_tuple(batch, device, non_blocking: bool = False):
    """Rebuilds every tuple as a plain tuple: a namedtuple loses its field names."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: namedtuple_becomes_tuple(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, list):
        return [namedtuple_becomes_tuple(v, device, non_blocking) for v in batch]
    if isinstance(batch, tuple):
        return tuple(namedtuple_becomes_tuple(v, device, non_blocking) for v in batch)
    return batch


def namedtuple_from_generator(batch, device, non_blocking: bool = False):
    """type(x)(generator) for every tuple: a namedtuple raises TypeError (it wants fields as arguments)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: namedtuple_from_generator(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(namedtuple_from_generator(v, device, non_blocking) for v in batch)
    return batch


def non_blocking_lost_in_recursion(batch, device, non_blocking: bool = False):
    """Passes non_blocking to top-level tensors only: nested ones are moved blocking."""
    def inner(x):
        if isinstance(x, torch.Tensor):
            return x.to(device)
        if isinstance(x, dict):
            return {k: inner(v) for k, v in x.items()}
        if isinstance(x, list):
            return [inner(v) for v in x]
        if isinstance(x, tuple):
            fields = [inner(v) for v in x]
            return type(x)(*fields) if hasattr(x, "_fields") else tuple(fields)
        return x
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    return inner(batch)


def top_level_only(batch, device, non_blocking: bool = False):
    """Moves the tensors directly in the batch, never recursing into nested containers."""
    def move(x):
        return x.to(device, non_blocking=non_blocking) if isinstance(x, torch.Tensor) else x
    if isinstance(batch, dict):
        return {k: move(v) for k, v in batch.items()}
    if isinstance(batch, list):
        return [move(v) for v in batch]
    if isinstance(batch, tuple):
        fields = [move(v) for v in batch]
        return type(batch)(*fields) if hasattr(batch, "_fields") else tuple(fields)
    return move(batch)


def mutates_the_input(batch, device, non_blocking: bool = False):
    """Writes the moved tensors back into the caller's dicts and lists instead of building a new batch."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        for key in batch:
            batch[key] = mutates_the_input(batch[key], device, non_blocking)
        return batch
    if isinstance(batch, list):
        for i, value in enumerate(batch):
            batch[i] = mutates_the_input(value, device, non_blocking)
        return batch
    if isinstance(batch, tuple):
        fields = [mutates_the_input(v, device, non_blocking) for v in batch]
        return type(batch)(*fields) if hasattr(batch, "_fields") else tuple(fields)
    return batch


def drops_non_tensors(batch, device, non_blocking: bool = False):
    """Keeps only tensors: ids and file names vanish from dicts and lists."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: drops_non_tensors(v, device, non_blocking) for k, v in batch.items()
                if isinstance(v, (torch.Tensor, dict, list, tuple))}
    if isinstance(batch, list):
        return [drops_non_tensors(v, device, non_blocking) for v in batch
                if isinstance(v, (torch.Tensor, dict, list, tuple))]
    if isinstance(batch, tuple):
        fields = [drops_non_tensors(v, device, non_blocking) for v in batch]
        return type(batch)(*fields) if hasattr(batch, "_fields") else tuple(fields)
    return batch


def recurses_into_strings(batch, device, non_blocking: bool = False):
    """Treats every Sequence as a container: a string recurses forever (or comes back as a list)."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, collections.abc.Mapping):
        return {k: recurses_into_strings(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, collections.abc.Sequence):
        fields = [recurses_into_strings(v, device, non_blocking) for v in batch]
        if hasattr(batch, "_fields"):
            return type(batch)(*fields)
        return tuple(fields) if isinstance(batch, tuple) else fields
    return batch


# ---- 04.3 prefetched(batches, copy)

def _reference_prefetched(batches, copy):
    """copy(next) before yielding current, one batch ahead at most."""
    iterator = iter(batches)
    try:
        current = copy(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        upcoming = copy(batch)
        yield current
        current = upcoming
    yield current


def copies_on_demand(batches, copy):
    """No prefetch: each copy starts only after the previous batch was used."""
    for batch in batches:
        yield copy(batch)


def copies_everything_first(batches, copy):
    """Copies the whole epoch before yielding: far more than one batch ahead."""
    copied = [copy(batch) for batch in batches]
    yield from copied


def loses_the_last_batch(batches, copy):
    """Forgets to yield the batch still in flight when the input runs out."""
    iterator = iter(batches)
    try:
        current = copy(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        upcoming = copy(batch)
        yield current
        current = upcoming


def fails_on_no_batches(batches, copy):
    """next() on an empty input inside the generator: RuntimeError instead of an empty stream."""
    iterator = iter(batches)
    current = copy(next(iterator))
    for batch in iterator:
        upcoming = copy(batch)
        yield current
        current = upcoming
    yield current


def yields_the_source_batch(batches, copy):
    """Starts the copies in the right order but yields the original batches, not the copies."""
    iterator = iter(batches)
    try:
        current = next(iterator)
    except StopIteration:
        return
    copy(current)
    for batch in iterator:
        copy(batch)
        yield current
        current = batch
    yield current


def two_batches_ahead(batches, copy):
    """A queue of two in flight: copies batch k+2 before yielding batch k."""
    pending = collections.deque()
    for batch in batches:
        pending.append(copy(batch))
        if len(pending) > 2:
            yield pending.popleft()
    while pending:
        yield pending.popleft()


# ---- 04.4 read_back(gpu_tensor)  (needs CUDA)

def _reference_read_back(gpu_tensor):
    """non_blocking copy, then wait for it before returning."""
    out = gpu_tensor.to("cpu", non_blocking=True)
    torch.cuda.current_stream(gpu_tensor.device).synchronize()
    return out


def returns_unfinished_copy(gpu_tensor):
    """The unsafe read unchanged: returns before the copy has written the tensor."""
    return gpu_tensor.to("cpu", non_blocking=True)


def synchronizes_before_the_copy(gpu_tensor):
    """Waits for the GPU, then queues the copy: the copy itself is still pending on return."""
    torch.cuda.synchronize()
    return gpu_tensor.to("cpu", non_blocking=True)


def blocking_copy(gpu_tensor):
    """Safe, but ignores the task's non_blocking=True: a plain blocking .to('cpu')."""
    return gpu_tensor.to("cpu")


def waits_on_a_new_stream(gpu_tensor):
    """Synchronises a freshly made stream, which has nothing queued: the copy is not waited for."""
    out = gpu_tensor.to("cpu", non_blocking=True)
    torch.cuda.Stream(device=gpu_tensor.device).synchronize()
    return out


HELDOUT = {
    "04.1": [never_synchronizes, synchronizes_after_the_clock, no_warm_up_copy, gib_per_s, mean_over_total_time],
    "04.2": [namedtuple_becomes_tuple, namedtuple_from_generator, non_blocking_lost_in_recursion, top_level_only,
             mutates_the_input, drops_non_tensors, recurses_into_strings],
    "04.3": [copies_on_demand, copies_everything_first, loses_the_last_batch, fails_on_no_batches,
             yields_the_source_batch, two_batches_ahead],
    "04.4": [returns_unfinished_copy, synchronizes_before_the_copy, blocking_copy, waits_on_a_new_stream],
}
