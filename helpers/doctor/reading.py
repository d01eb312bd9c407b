"""Reading a loader for the doctor: a deadline on every fetch, the learner's errors caught as findings, no worker or thread left (lesson 07)."""
from __future__ import annotations

import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader, IterableDataset

from helpers.doctor.measure import count, summary
from helpers.doctor.start_watch import StartTimedOut, started_iterator
from helpers.rebuild import rebuild

THREAD_PREFIX = "doctor-"  # every thread the doctor starts is named so: `threads_left()` finds those still running
POLL_S = 0.25  # torch's timeout on the copy read here: the doctor's own clock bounds each fetch, polling this often


@dataclass(frozen=True)
class Arrival:
    """How long one batch took to arrive, and the step on it."""

    wait_s: float
    step_s: float


class LoaderFailed(Exception):
    """The learner's loader raised, or gave no batch in time: what it said, after how long, and while doing what."""

    def __init__(self, summary: str, after_s: float, timed_out: bool, while_: str = "reading batches", error: BaseException | None = None) -> None:
        super().__init__(summary)
        self.summary, self.after_s, self.timed_out, self.while_, self.error = summary, after_s, timed_out, while_, error


def batches(loader: DataLoader, deadline: float, max_batches: int, *, on_start: Callable[[Any], None] | None = None,
            on_end: Callable[[Any], None] | None = None, step: Callable[[Any], float] | None = None,
            stop_after_samples: int | None = None, fetch_timeout_s: float | None = None,
            window_after_first: tuple[float, float] | None = None,
            worker_init_fn: Callable[[int], None] | None = None) -> Iterator[tuple[Arrival, Any]]:
    """Yield (timing, batch) until the epoch ends, `max_batches`, `deadline` or `stop_after_samples`; raise LoaderFailed on an error or a hang.

    `window_after_first=(seconds, latest)` moves the deadline once the first batch and its step are done: `seconds`
    from then, but no later than `latest`. The first step carries one-off costs (a CUDA context, kernels loaded on
    first use) that can take longer than the whole window; they are start-up, not the loop's steady state.
    `worker_init_fn` replaces the loader's in the copy whose workers are read (one that calls the loader's own).
    """
    started = time.perf_counter()
    first_wait = max(1.0, deadline - started if fetch_timeout_s is None else fetch_timeout_s)
    try:
        source: _FetchInMain | _FetchInThread = (
            _FetchInMain(rebuild(loader, timeout=POLL_S, worker_init_fn=worker_init_fn or loader.worker_init_fn), first_wait)
            if loader.num_workers > 0 else _FetchInThread(loader, first_wait))
    except StartTimedOut as late:
        _stop_half_built(late.__cause__ or late)
        if len(late.args) > 1:  # built as the wait ended
            stop_iterator(late.args[1], kill=True)
        raise LoaderFailed(str(late.args[0]), time.perf_counter() - started, True, "starting the workers") from None
    except Exception as exc:  # noqa: BLE001 - starting the workers runs the learner's code (pickling the dataset, the sampler)
        _stop_half_built(exc)
        raise LoaderFailed(summary(exc), time.perf_counter() - started, False, "starting the workers", exc) from None
    n = samples = 0
    failed = ended = False
    try:
        while n < max_batches and (n == 0 or time.perf_counter() < deadline):
            before = time.perf_counter()
            try:
                batch = next(source)
            except StopIteration:
                ended = True
                return
            except LoaderFailed:
                failed = True
                raise
            except Exception as exc:  # noqa: BLE001 - the learner's loader may raise anything; it is the finding
                failed = True
                raise LoaderFailed(summary(exc), time.perf_counter() - started, "timed out" in str(exc), error=exc) from None
            # the first from iter(loader): under spawn and forkserver, starting a worker blocks until it has read all but
            # the last 64 KiB (a pipe's buffer) of what was pickled for it, so a large dataset's start-up is paid in iter()
            wait = time.perf_counter() - (started if n == 0 else before)
            if n == 0 and on_start is not None:
                on_start(getattr(source, "iterator", None))
            spent = step(batch) if step is not None else 0.0
            n += 1
            samples += count(batch)
            yield Arrival(wait, spent), batch
            if n == 1 and window_after_first is not None:
                deadline = min(time.perf_counter() + window_after_first[0], window_after_first[1])
            if stop_after_samples is not None and samples >= stop_after_samples:
                return
    finally:
        if on_end is not None and n:
            on_end(getattr(source, "iterator", None))
        source.close(kill=failed or not ended)  # stopped early: workers may be starting still (16 under forkserver: 4 s)


def _stop_half_built(error: BaseException) -> None:
    """Stop the workers of an iterator whose construction raised after they started (its first draw): its error's frames keep them alive."""
    tb = error.__traceback__
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        if hasattr(owner, "_shutdown_workers") and hasattr(owner, "_workers"):  # private: torch's multi-process iterator
            try:
                owner._shutdown_workers()
            except Exception:  # noqa: BLE001 - built too little to shut down in order: stop what started
                for worker in owner._workers:
                    if worker.is_alive():
                        worker.terminate()
                        worker.join(1.0)
            return
        tb = tb.tb_next


class _FetchInMain:
    """Iterate a loader with workers here, each fetch bounded by `wait_s` on the doctor's clock; close() shuts the workers down.

    torch's own `timeout` is not such a bound: it starts again with each batch that arrives out of turn, so 16 workers
    starting under forkserver on 2 cores gave the first batch after 12 s with a 5 s timeout. The loader read here
    polls with a `timeout` of POLL_S; a poll that ends empty (torch's RuntimeError, its exact text) is tried again.
    """

    def __init__(self, loader: DataLoader, wait_s: float) -> None:
        began = time.perf_counter()
        self.polled = f"DataLoader timed out after {loader.timeout} seconds"  # torch's text for a poll that ended empty
        self.iterator: Any = started_iterator(loader, wait_s)
        self.each_s = wait_s
        self.first_s = max(POLL_S, wait_s - (time.perf_counter() - began))  # the first batch: what the start left

    def __iter__(self) -> _FetchInMain:
        return self

    def __next__(self) -> Any:
        began, wait_s, self.first_s = time.perf_counter(), self.first_s or self.each_s, 0.0
        while True:
            try:
                return next(self.iterator)  # the iterator's state is unchanged by an empty poll: torch raises before it counts
            except RuntimeError as exc:
                waited = time.perf_counter() - began
                if str(exc) != self.polled:
                    raise
                if waited >= wait_s:
                    raise LoaderFailed(f"no batch came within {waited:.1f} s (the doctor's wait for each batch)", waited,
                                       True) from None

    def close(self, kill: bool = False) -> None:
        stop_iterator(self.iterator, kill)
        self.iterator = None


def stop_iterator(iterator: Any, kill: bool = False) -> None:
    """Shut a multi-process iterator's workers down (kill: terminate them first, terminate_workers)."""
    if kill:
        terminate_workers(iterator)
    shutdown = getattr(iterator, "_shutdown_workers", None)  # private; `del` alone leaves it to the garbage collector
    if shutdown is not None:  # (torchdata's StatefulDataLoader keeps a worker-less iterator too, which has none)
        shutdown()


class _FetchInThread:
    """Iterate a worker-less loader in a thread, so a hung __getitem__ times out here instead of hanging the doctor.

    The thread fetches a batch only when asked: reading ahead would overlap the fetch with the step, which a loop
    without workers never does, and hide its data wait. close() stops the thread; one still inside a hung fetch is
    reported (`threads_left`), and the command line exits without waiting for it: a thread left inside torch's C++
    at interpreter exit aborts the process (exit 134).
    """

    def __init__(self, loader: DataLoader, first_wait_s: float) -> None:
        self.wait_s = first_wait_s
        self.queue: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=2)
        self.stop = threading.Event()
        self.wanted = threading.Semaphore(0)  # one per __next__: no read-ahead, so the wait measured is the loop's own fetch
        self.thread = threading.Thread(target=self._produce, args=(loader,), daemon=True, name=THREAD_PREFIX + "fetch")
        self.thread.start()

    def _produce(self, loader: DataLoader) -> None:
        try:
            source = iter(loader)
            while True:
                while not self.wanted.acquire(timeout=0.05):  # fetch only when asked, as a loop without workers does
                    if self.stop.is_set():
                        return
                if self.stop.is_set():
                    return
                try:
                    batch = next(source)
                except StopIteration:
                    self.queue.put(("end", None))
                    return
                self.queue.put(("batch", batch))
        except Exception as exc:  # noqa: BLE001 - passed to the reader, which reports it
            self.queue.put(("error", exc))

    def __iter__(self) -> _FetchInThread:
        return self

    def __next__(self) -> Any:
        self.wanted.release()
        try:
            kind, value = self.queue.get(timeout=self.wait_s)
        except queue.Empty:
            raise LoaderFailed(f"no batch came within {self.wait_s:.1f} s (num_workers=0: the dataset or collate_fn is stuck)",
                               self.wait_s, True) from None
        if kind == "end":
            raise StopIteration
        if kind == "error":
            raise value
        return value

    def close(self, kill: bool = False) -> None:
        self.stop.set()
        self.thread.join(0.5)  # parked: it ends at once; inside a hung fetch: the run reports it, the command line exits without it


def threads_left() -> list[str]:
    """Names of the doctor's threads still running (inside a hung __getitem__ of yours)."""
    return [t.name for t in threading.enumerate() if t.name.startswith(THREAD_PREFIX) and t.is_alive()]


@dataclass(frozen=True)
class PlainRead:
    """What a num_workers=0 reading raised: its traceback, the part that raised and the index being read (map-style)."""

    traceback: str
    stage: str  # "sampler", "dataset", "collate_fn"; "" for an IterableDataset, read whole
    index: int | None = None
    error: BaseException | None = None  # the exception itself, its frames included


def first_failure(loader: DataLoader, wait_s: float) -> PlainRead | None:
    """What a num_workers=0 reading of `loader` raises within `wait_s`, or None.

    A map-style dataset is read step by step: indices from the loader's own batch sampler (an error there is the
    sampler's), each item from the dataset (the index is known), then collate_fn. An IterableDataset is read through
    a num_workers=0 copy of the loader.
    """
    result: dict[str, Any] = {}
    stop = threading.Event()

    def read() -> None:
        try:
            if isinstance(loader.dataset, IterableDataset) or loader.batch_sampler is None:
                result["stage"] = ""
                for _ in rebuild(loader, num_workers=0):
                    if stop.is_set():
                        return
                return
            result["stage"] = "sampler"
            drawn = iter(loader.batch_sampler)
            while not stop.is_set():
                result["stage"] = "sampler"
                result.pop("index", None)
                indices = next(drawn, None)
                if indices is None:
                    return
                items = []
                for index in indices:
                    if stop.is_set():
                        return
                    result["stage"], result["index"] = "dataset", index
                    items.append(loader.dataset[index])
                result["stage"] = "collate_fn"
                result.pop("index", None)
                loader.collate_fn(items)
        except Exception as exc:  # noqa: BLE001 - the traceback is what we want
            result["tb"], result["error"] = traceback.format_exc(), exc

    thread = threading.Thread(target=read, daemon=True, name=THREAD_PREFIX + "plain")
    thread.start()
    thread.join(wait_s)
    stop.set()
    thread.join(1.0)
    return PlainRead(result["tb"], result["stage"], result.get("index"), result["error"]) if "tb" in result else None


def stop_workers(loader: DataLoader, at_once: bool = False) -> None:
    """Stop a persistent-workers loader's workers now (the loader keeps its iterator, and with it the workers, otherwise);
    at_once: terminate them first (terminate_workers) rather than wait: a worker still starting (importing torch anew,
    under spawn or forkserver) would finish starting before it saw the request."""
    stop_iterator(getattr(loader, "_iterator", None), at_once)  # private: the persistent workers' iterator


def terminate_workers(iterator: Any) -> None:
    """Terminate a multi-process iterator's workers now, before its _shutdown_workers, which would wait up to torch's 5 s
    join timeout for each (a hung one, or one still starting). As torch's own shutdown does before it terminates a
    worker: the pin-memory thread is stopped first (a worker killed while sending could leave it a torn message) and the
    pids leave torch's SIGCHLD watch, which would report them as crashed (private API; the hang tests catch a rename)."""
    if not getattr(iterator, "_workers", None):
        return
    if getattr(iterator, "_pin_memory_thread", None) is not None:
        iterator._pin_memory_thread_done_event.set()
        iterator._worker_result_queue.put((None, None))
        iterator._pin_memory_thread.join()
    if iterator._worker_pids_set:
        torch.utils.data._utils.signal_handling._remove_worker_pids(id(iterator))
        iterator._worker_pids_set = False
    for worker in iterator._workers:
        if worker.is_alive():
            worker.terminate()
