"""Lesson 04's exercises as learners answer them, written from the task text alone (issue 25)."""
from __future__ import annotations

import collections.abc
import statistics
import time

import numpy as np
import torch

from helpers.checks.core import Wrong

# ---------------------------------------------------------------- 04.1: gb_per_s(copy, synchronize, num_bytes, repeats)


def rate_without_warm_up(copy, synchronize, num_bytes, repeats=5):
    """No untimed warm-up copy: the first, slow copy is one of the timed ones."""
    times = []
    for _ in range(repeats):
        synchronize()
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return num_bytes / statistics.median(times) / 1e9


def rate_without_synchronize_after_copy(copy, synchronize, num_bytes, repeats=5):
    """Reads the clock right after queueing the copy: times the launch, not the copy."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        times.append(time.perf_counter() - start)
    synchronize()
    return num_bytes / statistics.median(times) / 1e9


def rate_without_synchronize_after_warm_up(copy, synchronize, num_bytes, repeats=5):
    """Warm-up copy queued but never waited for: the first timed copy waits for it too."""
    copy()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return num_bytes / statistics.median(times) / 1e9


def rate_from_the_mean(copy, synchronize, num_bytes, repeats=5):
    """Mean of the copy times where the task asks for the median."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return num_bytes / statistics.mean(times) / 1e9


def rate_in_gib_per_s(copy, synchronize, num_bytes, repeats=5):
    """GiB/s (2**30 bytes) where the task asks for GB/s (1e9 bytes)."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return num_bytes / statistics.median(times) / 2**30


def rate_from_milliseconds(copy, synchronize, num_bytes, repeats=5):
    """Times in milliseconds divided into the bytes as if they were seconds."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append((time.perf_counter() - start) * 1000)
    return num_bytes / statistics.median(times) / 1e9


def seconds_per_copy(copy, synchronize, num_bytes, repeats=5):
    """Returns the median seconds per copy instead of the rate."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def rate_timing_the_warm_up(copy, synchronize, num_bytes, repeats=5):
    """Starts the clock before the warm-up copy: one total time that includes the warm-up."""
    start = time.perf_counter()
    copy()
    synchronize()
    for _ in range(repeats):
        copy()
    synchronize()
    per_copy = (time.perf_counter() - start) / repeats
    return num_bytes / per_copy / 1e9


def rate_ignoring_repeats(copy, synchronize, num_bytes, repeats=5):
    """Always times five copies, whatever `repeats` says."""
    copy()
    synchronize()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return num_bytes / statistics.median(times) / 1e9


def rate_over_total_time(copy, synchronize, num_bytes, repeats=5):
    """Divides one copy's bytes by the time of all `repeats` copies together."""
    copy()
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
    synchronize()
    return num_bytes / (time.perf_counter() - start) / 1e9


def rate_with_time_time(copy, synchronize, num_bytes, repeats=5):
    """Reads time.time() where the task asks for time.perf_counter()."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.time()
        copy()
        synchronize()
        times.append(max(time.time() - start, 1e-9))
    return num_bytes / statistics.median(times) / 1e9


def rate_in_gigabits(copy, synchronize, num_bytes, repeats=5):
    """Gigabits per second (bytes times 8)."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return num_bytes * 8 / statistics.median(times) / 1e9


def rate_from_fastest_copy(copy, synchronize, num_bytes, repeats=5):
    """max(rates): the fastest copy's rate, not the median (issue 39)."""
    copy()
    synchronize()
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        rates.append(num_bytes / (time.perf_counter() - start) / 1e9)
    return max(rates)


def rate_from_best_time(copy, synchronize, num_bytes, repeats=5):
    """The best (minimum) time, as benchmarks often report, not the median (issue 39)."""
    copy()
    synchronize()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        best = min(best, time.perf_counter() - start)
    return num_bytes / best / 1e9


def median_of_rates(copy, synchronize, num_bytes, repeats=5):
    """Right: one rate per copy, the median of the rates (what "median rate" says literally)."""
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


def rate_as_int(copy, synchronize, num_bytes, repeats=5):
    """int() of the median rate: 2.5 GB/s comes back as 2 (issue 39)."""
    copy()
    synchronize()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        times.append(time.perf_counter() - start)
    return int(num_bytes / statistics.median(times) / 1e9)


def numpy_median_rate(copy, synchronize, num_bytes, repeats=5):
    """Right: numpy's median of the times, a numpy float64 returned."""
    copy()
    synchronize()
    times = np.empty(repeats)
    for i in range(repeats):
        synchronize()
        start = time.perf_counter()
        copy()
        synchronize()
        times[i] = time.perf_counter() - start
    return num_bytes / 1e9 / np.median(times)


# ---------------------------------------------------------------- 04.2: move_to(batch, device, non_blocking=False)


def move_ignoring_non_blocking(batch, device, non_blocking=False):
    """Never passes non_blocking on to tensor.to."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)
    if isinstance(batch, dict):
        return {k: move_ignoring_non_blocking(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_ignoring_non_blocking(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_ignoring_non_blocking(v, device) for v in batch)
    return batch


def move_always_non_blocking(batch, device, non_blocking=False):
    """Hard-codes non_blocking=True, whatever the caller asks."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: move_always_non_blocking(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_always_non_blocking(v, device) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_always_non_blocking(v, device) for v in batch)
    return batch


def move_tuples_to_lists(batch, device, non_blocking=False):
    """Rebuilds every list or tuple (namedtuples too) as a list."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_tuples_to_lists(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [move_tuples_to_lists(v, device, non_blocking) for v in batch]
    return batch


def move_namedtuple_as_plain_tuple(batch, device, non_blocking=False):
    """Rebuilds a namedtuple as a plain tuple: its field names are lost."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_namedtuple_as_plain_tuple(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, list):
        return [move_namedtuple_as_plain_tuple(v, device, non_blocking) for v in batch]
    if isinstance(batch, tuple):
        return tuple(move_namedtuple_as_plain_tuple(v, device, non_blocking) for v in batch)
    return batch


def move_top_level_only(batch, device, non_blocking=False):
    """Moves the tensors directly inside the batch, never recursing into nested containers."""
    def one(x):
        return x.to(device, non_blocking=non_blocking) if isinstance(x, torch.Tensor) else x
    if isinstance(batch, torch.Tensor):
        return one(batch)
    if isinstance(batch, dict):
        return {k: one(v) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(one(v) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(one(v) for v in batch)
    return batch


def move_in_place(batch, device, non_blocking=False):
    """Overwrites the caller's dicts and lists with the moved values, mutating the input."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        for k in batch:
            batch[k] = move_in_place(batch[k], device, non_blocking)
        return batch
    if isinstance(batch, list):
        for i, v in enumerate(batch):
            batch[i] = move_in_place(v, device, non_blocking)
        return batch
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_in_place(v, device, non_blocking) for v in batch))
    if isinstance(batch, tuple):
        return tuple(move_in_place(v, device, non_blocking) for v in batch)
    return batch


def move_dropping_non_tensors(batch, device, non_blocking=False):
    """Keeps only the tensors in a dict: ids and file names vanish."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_dropping_non_tensors(v, device, non_blocking) for k, v in batch.items()
                if isinstance(v, (torch.Tensor, dict, list, tuple))}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_dropping_non_tensors(v, device, non_blocking) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_dropping_non_tensors(v, device, non_blocking) for v in batch)
    return batch


def move_recursing_into_strings(batch, device, non_blocking=False):
    """Treats every Sequence as a container, strings too: a file name recurses forever."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, collections.abc.Mapping):
        return {k: move_recursing_into_strings(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_recursing_into_strings(v, device, non_blocking) for v in batch))
    if isinstance(batch, collections.abc.Sequence):
        return type(batch)(move_recursing_into_strings(v, device, non_blocking) for v in batch)
    return batch


def move_star_for_every_tuple(batch, device, non_blocking=False):
    """Rebuilds every tuple with type(x)(*fields): a plain tuple refuses the unpacked fields."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_star_for_every_tuple(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, list):
        return [move_star_for_every_tuple(v, device, non_blocking) for v in batch]
    if isinstance(batch, tuple):
        return type(batch)(*(move_star_for_every_tuple(v, device, non_blocking) for v in batch))
    return batch


def move_lists_not_tuples(batch, device, non_blocking=False):
    """Recurses into dicts and lists but leaves tuples (and their tensors) unmoved."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_lists_not_tuples(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, list):
        return [move_lists_not_tuples(v, device, non_blocking) for v in batch]
    return batch


def move_numbers_as_tensors(batch, device, non_blocking=False):
    """Turns ids and other numbers into tensors on the device as well."""
    if isinstance(batch, (torch.Tensor, int, float)):
        return torch.as_tensor(batch).to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_numbers_as_tensors(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_numbers_as_tensors(v, device, non_blocking) for v in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_numbers_as_tensors(v, device, non_blocking) for v in batch)
    return batch


def move_with_keywords(batch, device, non_blocking=False):
    """Right: keyword arguments to .to, torch.is_tensor, and Mapping for the dicts."""
    if torch.is_tensor(batch):
        return batch.to(device=device, non_blocking=non_blocking)
    if isinstance(batch, collections.abc.Mapping):
        return {key: move_with_keywords(value, device, non_blocking=non_blocking) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*[move_with_keywords(v, device, non_blocking=non_blocking) for v in batch])
    if isinstance(batch, (list, tuple)):
        return type(batch)([move_with_keywords(v, device, non_blocking=non_blocking) for v in batch])
    return batch


def move_keeping_dict_type(batch, device, non_blocking=False):
    """Right: rebuilds dicts with their own type (an OrderedDict stays one), match statement style."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        out = type(batch)()
        for key, value in batch.items():
            out[key] = move_keeping_dict_type(value, device, non_blocking)
        return out
    if isinstance(batch, list):
        return [move_keeping_dict_type(v, device, non_blocking) for v in batch]
    if isinstance(batch, tuple):
        fields = [move_keeping_dict_type(v, device, non_blocking) for v in batch]
        return type(batch)(*fields) if hasattr(batch, "_fields") else tuple(fields)
    return batch


# ---------------------------------------------------------------- 04.3: prefetched(batches, copy)


def no_prefetch(batches, copy):
    """Copies each batch only when it is its turn: nothing runs ahead."""
    for batch in batches:
        yield copy(batch)


def copy_everything_up_front(batches, copy):
    """Copies every batch before yielding the first: far more than one ahead."""
    copied = [copy(batch) for batch in batches]
    yield from copied


def prefetch_crashing_on_empty(batches, copy):
    """next() on an empty iterator inside a generator: RuntimeError instead of no batches."""
    iterator = iter(batches)
    ahead = copy(next(iterator))
    for batch in iterator:
        current, ahead = ahead, copy(batch)
        yield current
    yield ahead


def prefetch_dropping_last(batches, copy):
    """Forgets to yield the batch still in flight when the input runs out."""
    iterator = iter(batches)
    try:
        ahead = copy(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        current, ahead = ahead, copy(batch)
        yield current


def prefetch_by_index(batches, copy):
    """Indexes the batches: works on a list, fails on a generator or DataLoader iterator."""
    if len(batches) == 0:
        return
    ahead = copy(batches[0])
    for i in range(1, len(batches)):
        current, ahead = ahead, copy(batches[i])
        yield current
    yield ahead


def prefetch_two_ahead(batches, copy):
    """Keeps two copies in flight: two batches ahead, not one."""
    queue = []
    for batch in batches:
        queue.append(copy(batch))
        if len(queue) > 2:
            yield queue.pop(0)
    yield from queue


def prefetch_yielding_originals(batches, copy):
    """Starts the copies but yields the original, uncopied batches."""
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


def prefetch_copying_twice(batches, copy):
    """Starts a copy ahead, then copies the same batch again when yielding it."""
    iterator = iter(batches)
    try:
        current = next(iterator)
    except StopIteration:
        return
    copy(current)
    for batch in iterator:
        copy(batch)
        yield copy(current)
        current = batch
    yield copy(current)


def prefetch_after_yield(batches, copy):
    """Starts the next copy only after the current batch was yielded (after the step)."""
    iterator = iter(batches)
    try:
        current = copy(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        yield current
        current = copy(batch)
    yield current


def prefetch_with_zip(batches, copy):
    """Pairs batches with batches[1:]: iterates the input twice, fails on a one-shot iterator."""
    ahead = None
    for current, following in zip(batches, batches[1:]):
        ahead = copy(current) if ahead is None else ahead
        nxt = copy(following)
        yield ahead
        ahead = nxt
    if ahead is not None:
        yield ahead


def prefetch_with_sentinel(batches, copy):
    """Right: a sentinel object instead of try/except StopIteration."""
    missing = object()
    pending = missing
    for batch in batches:
        copied = copy(batch)
        if pending is not missing:
            yield pending
        pending = copied
    if pending is not missing:
        yield pending


def prefetch_with_deque(batches, copy):
    """Right: a one-slot deque holds the copy in flight."""
    in_flight = collections.deque()
    for batch in batches:
        in_flight.append(copy(batch))
        if len(in_flight) > 1:
            yield in_flight.popleft()
    while in_flight:
        yield in_flight.popleft()


# ---------------------------------------------------------------- 04.4: read_back(gpu_tensor) (CUDA only)


def read_without_synchronize(gpu_tensor):
    """Returns the non-blocking copy at once: it may not have been written yet."""
    return gpu_tensor.to("cpu", non_blocking=True)


def read_synchronizing_before_copy(gpu_tensor):
    """Synchronises before queueing the copy, so the copy itself is still pending on return."""
    torch.cuda.synchronize()
    return gpu_tensor.to("cpu", non_blocking=True)


def read_returning_gpu_tensor(gpu_tensor):
    """Synchronises but returns the GPU tensor, not a CPU copy."""
    torch.cuda.synchronize()
    return gpu_tensor


def read_with_unwaited_event(gpu_tensor):
    """Records an event after the copy but never waits on it."""
    out = gpu_tensor.to("cpu", non_blocking=True)
    event = torch.cuda.Event()
    event.record()
    return out


def read_synchronizing_other_stream(gpu_tensor):
    """Synchronises a fresh side stream, not the one the copy was queued on."""
    out = gpu_tensor.to("cpu", non_blocking=True)
    torch.cuda.Stream().synchronize()
    return out


def read_cloned_without_synchronize(gpu_tensor):
    """Clones the CPU result before the copy has written it."""
    return gpu_tensor.to("cpu", non_blocking=True).clone()


def read_blocking(gpu_tensor):
    """A blocking .cpu() copy: safe, but ignores the task's non_blocking=True."""
    return gpu_tensor.cpu()


def read_waiting_on_event(gpu_tensor):
    """Right: records an event after the copy and waits on it."""
    out = gpu_tensor.to("cpu", non_blocking=True)
    done = torch.cuda.Event()
    done.record()
    done.synchronize()
    return out


def read_synchronizing_current_stream(gpu_tensor):
    """Right: waits for the current stream only."""
    out = gpu_tensor.to("cpu", non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return out


WRONG = {
    "04.1": [
        Wrong(rate_without_warm_up, 'make one untimed warm-up copy'),
        Wrong(rate_without_synchronize_after_copy, 'call synchronize() before you read the clock'),
        Wrong(rate_without_synchronize_after_warm_up, 'the warm-up copy was still running'),
        Wrong(rate_from_the_mean, 'that is the mean'),
        Wrong(rate_in_gib_per_s, 'not 2**30 (GiB)'),
        Wrong(rate_from_milliseconds, 'went in as milliseconds'),
        Wrong(seconds_per_copy, 'the seconds a copy takes'),
        Wrong(rate_timing_the_warm_up, 'the clock started before the warm-up copy'),
        Wrong(rate_ignoring_repeats, 'time exactly `repeats` copies'),
        Wrong(rate_over_total_time, 'over the time of all the timed copies'),
        Wrong(rate_with_time_time, 'never read time.perf_counter()'),
        Wrong(rate_in_gigabits, 'gigabits per second'),
        Wrong(rate_from_fastest_copy, "the fastest copy's rate"),
        Wrong(rate_from_best_time, "the fastest copy's rate"),
        Wrong(rate_as_int, 'rounded to a whole number'),
    ],
    "04.2": [
        Wrong(move_ignoring_non_blocking, '0 with non_blocking=True'),
        Wrong(move_always_non_blocking, 'non_blocking=False) still called'),
        Wrong(move_tuples_to_lists, "batch['pair'] came back as list"),
        Wrong(move_namedtuple_as_plain_tuple, "batch['pair'] came back as tuple: rebuild a namedtuple"),
        Wrong(move_top_level_only, "batch['extra'][0] stayed on cpu: recurse into lists and tuples"),
        Wrong(move_in_place, 'changed the input batch'),
        Wrong(move_dropping_non_tensors, "without 'index' (int 7)"),
        Wrong(move_recursing_into_strings, 'a str is a Sequence too'),
        Wrong(move_star_for_every_tuple, 'type(x)(*fields) is for namedtuples only'),
        Wrong(move_lists_not_tuples, "batch['pair'][0] stayed on cpu"),
        Wrong(move_numbers_as_tensors, 'only tensors move'),
    ],
    "04.3": [
        Wrong(no_prefetch, 'start the next copy, then yield the current batch'),
        Wrong(copy_everything_up_front, 'stay one batch ahead'),
        Wrong(prefetch_crashing_on_empty, 'An empty loader must end the generator cleanly'),
        Wrong(prefetch_dropping_last, 'expected copy(batch) of each, in order'),
        Wrong(prefetch_by_index, 'batches can be any iterable'),
        Wrong(prefetch_two_ahead, 'stay one batch ahead'),
        Wrong(prefetch_yielding_originals, 'yielded [0, 1, 2, 3]; expected copy(batch)'),
        Wrong(prefetch_copying_twice, 'call it once per batch'),
        Wrong(prefetch_after_yield, 'start the next copy, then yield the current batch'),
        Wrong(prefetch_with_zip, 'batches can be any iterable'),
    ],
    "04.4": [
        Wrong(read_without_synchronize, 'the copy had not landed'),
        Wrong(read_synchronizing_before_copy, 'the copy had not landed'),
        Wrong(read_returning_gpu_tensor, 'return a CPU tensor'),
        Wrong(read_with_unwaited_event, 'the copy had not landed'),
        Wrong(read_synchronizing_other_stream, 'the copy had not landed'),
        Wrong(read_cloned_without_synchronize, 'the copy had not landed'),
        Wrong(read_blocking, 'in pageable memory'),
    ],
}

RIGHT = {
    "04.1": [median_of_rates, numpy_median_rate],
    "04.2": [move_with_keywords, move_keeping_dict_type],
    "04.3": [prefetch_with_sentinel, prefetch_with_deque],
    "04.4": [read_waiting_on_event, read_synchronizing_current_stream],
}
