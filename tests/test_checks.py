"""Every self-check passes the right answer and rejects typical wrong ones with an actionable line."""
import math
import time

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import WeightedRandomSampler, get_worker_info

from helpers import checks, data, imbalance, losses, metrics, workloads


def right(usable_cores, ranks_per_node):
    if usable_cores < 1 or ranks_per_node < 1:
        raise ValueError("bad")
    return max(0, usable_cores // ranks_per_node - 1)


def stub(usable_cores, ranks_per_node):
    raise NotImplementedError("Exercise 00.1: replace this line with your code")


@pytest.fixture(autouse=True)
def lenient(monkeypatch):
    monkeypatch.delenv(checks.STRICT_VAR, raising=False)


def test_right_answer_passes():
    result = checks.check_workers_per_rank(right)
    assert result.passed and str(result).startswith("Exercise 00.1 passed:")


def test_stub_is_not_implemented_yet():
    assert checks.check_workers_per_rank(stub).status == "not implemented yet"


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda c, r: max(0, c // r), "workers_per_rank(2, 1) returned 2, expected 1"),  # forgets the main process
        (lambda c, r: c // r - 1 if c >= 1 and r >= 1 else right(c, r), "returned -1"),  # negative
        (lambda c, r: 2 * c, "returned 4"),  # the "2x cores" folklore
        (lambda c, r: max(0, (c - r) / r) if c >= 1 and r >= 1 else right(c, r), "of type float"),
        (lambda c, r: max(0, c // max(r, 1) - 1), "expected ValueError"),  # no input validation
        ("not a function", "expected the function"),
    ],
)
def test_typical_wrong_answers_fail(wrong, says):
    result = checks.check_workers_per_rank(wrong)
    assert result.status == "failed" and says in result.detail, result


def test_strict_mode_raises(monkeypatch):
    monkeypatch.setenv(checks.STRICT_VAR, "1")
    with pytest.raises(AssertionError, match="Exercise 00.1 not implemented yet"):
        checks.check_workers_per_rank(stub)


# Lessons 01 and 02: each check passes the right answer and rejects the typical wrong ones.


def stub_for(exercise):
    def stub(*args):
        raise NotImplementedError(f"Exercise {exercise}: replace this line with your code")
    return stub


def ratio_right(counts):
    return imbalance.imbalance_ratio(counts)


def split_random(labels, fraction, seed):
    return data.split_indices(labels, fraction, seed, stratify=False)


def focal_right(logits, target, gamma):
    return losses.focal_loss(logits, target, gamma)


def sampler_right(labels, num_samples):
    return WeightedRandomSampler(imbalance.sample_weights(labels), num_samples, generator=torch.Generator().manual_seed(0))


def coverage_right(counts, coverage):
    if not 0 < coverage < 1:
        raise ValueError(f"coverage must be in (0, 1), got {coverage}")
    return math.ceil(math.log(1 - coverage) / math.log1p(-1 / (len(counts) * max(counts))))


CHECKS = [
    (checks.check_class_counts, "01.1", lambda labels, n: imbalance.class_counts(labels, n), [
        (lambda labels, n: np.unique(labels, return_counts=True)[1], "returned"),  # drops empty classes
        (lambda labels, n: list(dict.fromkeys(labels)), "returned"),  # not counts at all
    ]),
    (checks.check_imbalance_ratio, "01.2", ratio_right, [
        (lambda c: c[0] / c[-1], "ratio([3, 12, 6]) returned 0.5"),  # first / last
        (lambda c: min(c) / max(c) if min(c) else 0.0, "returned 0.05"),  # upside down
        (lambda c: max(c) / min(c) if min(c) else float("inf"), "expected ValueError"),  # inf, no error
    ]),
    (checks.check_stratified_split, "01.3", lambda labels, f, seed: data.split_indices(labels, f, seed, True), [
        (split_random, "not stratified"),
        (lambda labels, f, seed: (np.arange(len(labels)), np.arange(0)), "in validation"),
        (lambda labels, f, seed: data.split_indices(labels, f, 0, True), "same split for 10 different seeds"),
        (lambda labels, f, seed: (np.ones(len(labels), bool), np.zeros(len(labels), bool)), "boolean masks"),
    ]),
    (checks.check_balanced_accuracy, "01.4", lambda t, p: metrics.balanced_accuracy(t, p, 3), [
        (lambda t, p: metrics.accuracy(t, p), "returned 0.7"),
        (lambda t, p: float(np.mean([np.mean(np.asarray(t)[np.asarray(p) == c] == c) for c in np.unique(p)])), "returned 0.7"),  # precision
        (lambda t, p: float(np.mean(np.nan_to_num(metrics.per_class_recall(t, p, 3)))), "returned 0.5"),  # absent classes as 0
    ]),
    (checks.check_per_sample_weights, "02.1", imbalance.sample_weights, [
        (lambda labels: 1.0 / np.bincount(labels), "one per class"),  # per-class weights
        (lambda labels: np.ones(len(labels)), "same share"),  # natural frequencies
        (lambda labels: 1.0 / np.sqrt(np.bincount(labels))[labels], "same share"),  # sqrt is not balanced
    ]),
    (checks.check_balanced_sampler, "02.2", sampler_right, [
        (lambda labels, n: WeightedRandomSampler(1.0 / np.bincount(labels), n), "only ever drew indices [0, 1, 2]"),
        (lambda labels, n: WeightedRandomSampler(imbalance.sample_weights(labels), len(labels), replacement=False), "drew 1000"),
        (lambda labels, n: WeightedRandomSampler(torch.ones(len(labels)), n), "shares"),
        (lambda labels, n: WeightedRandomSampler(imbalance.sample_weights(labels), n, replacement=False), "can neither make 3000 draws"),
    ]),
    (checks.check_focal_loss, "02.3", focal_right, [
        (lambda x, t, g: F.cross_entropy(x, t), "gamma=1.0"),  # forgets the focusing term
        (lambda x, t, g: losses.focal_loss(x, t, g, reduction="sum"), "gamma=0.0) returned 100"),
        (lambda x, t, g: (-(1 - F.softmax(x, 1)) ** g * F.log_softmax(x, 1)).sum(1).mean(), "gamma=0.0"),  # all classes, not p_t
        (lambda x, t, g: losses.focal_loss(x, t, g, reduction="none"), "0-d tensor"),
    ]),
    (checks.check_num_samples_for_coverage, "02.4", coverage_right, [
        (lambda c, cov: round(cov * max(c) * len(c)) if 0 < cov < 1 else coverage_right(c, cov), "returned 1620"),  # linear
        (lambda c, cov: math.ceil(math.log(1 - cov) / math.log1p(-1 / c[0] / len(c))) if 0 < cov < 1 else coverage_right(c, cov), "([100, 900], 0.9) returned"),
        (lambda c, cov: math.log(1 - cov) / math.log1p(-1 / (len(c) * max(c))) if 0 < cov < 1 else coverage_right(c, cov), "of type float"),
        (lambda c, cov: math.ceil(math.log(1 - cov) / math.log1p(-1 / (len(c) * max(c)))) if cov < 1 else 0, "expected ValueError"),
    ]),
]


@pytest.mark.parametrize("check, exercise, right_fn, wrongs", CHECKS, ids=[c[1] for c in CHECKS])
def test_lesson_checks(check, exercise, right_fn, wrongs):
    result = check(right_fn)
    assert result.passed and str(result).startswith(f"Exercise {exercise} passed:"), result
    assert check(stub_for(exercise)).status == "not implemented yet"
    assert check("not a function").status == "failed"
    for wrong, says in wrongs:
        verdict = check(wrong)
        assert verdict.status == "failed" and says in verdict.detail, (says, verdict)


# Lesson 03: the same contract, with loaders and worker processes.
def benchmark_right(loader, warmup_batches, num_batches):
    iterator = iter(loader)
    for _ in range(warmup_batches):
        next(iterator)
    start = time.perf_counter()
    samples = sum(len(next(iterator)[0]) for _ in range(num_batches))
    return samples / (time.perf_counter() - start)


def benchmark_with_startup(loader, warmup_batches, num_batches):
    start, samples = time.perf_counter(), 0
    for index, batch in enumerate(loader):
        samples += len(batch[0])
        if index + 1 == warmup_batches + num_batches:
            break
    return samples / (time.perf_counter() - start)


def benchmark_whole_epoch(loader, warmup_batches, num_batches):
    start = time.perf_counter()
    return sum(len(batch[0]) for batch in loader) / (time.perf_counter() - start)


def knee_right(values, rates, tolerance=0.1):
    if len(values) != len(rates):
        raise ValueError("values and samples_per_s must have the same length")
    return min(v for v, r in zip(values, rates) if r >= (1 - tolerance) * max(rates))


class GetitemsRight(workloads.InMemoryDataset):
    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        return list(zip(self.features[rows], self.labels[rows]))


class GetitemsPreStacked(workloads.InMemoryDataset):
    def __getitems__(self, indices):
        rows = torch.as_tensor(indices)
        return self.features[rows], self.labels[rows]


class GetitemsSorted(workloads.InMemoryDataset):
    def __getitems__(self, indices):
        return [self[i] for i in sorted(indices)]


class GetitemsFeaturesOnly(workloads.InMemoryDataset):
    def __getitems__(self, indices):
        return [self.features[i] for i in indices]


class GetitemsStub(workloads.InMemoryDataset):
    def __getitems__(self, indices):
        raise NotImplementedError("Exercise 03.3: replace this line with your code")


def seed_right(worker_id):
    info = get_worker_info()
    info.dataset.rng = np.random.default_rng(info.seed)


def seed_by_worker_id(worker_id):
    get_worker_info().dataset.rng = np.random.default_rng(worker_id)


def seed_legacy_global(worker_id):
    np.random.seed(get_worker_info().seed % 2**32)


LESSON_03_CHECKS = [
    (checks.check_steady_samples_per_s, "03.1", benchmark_right, [
        (benchmark_with_startup, "Start the clock after the warm-up"),
        (benchmark_whole_epoch, "drew 40 batches"),
        (lambda loader, w, n: int(benchmark_right(loader, w, n) > 0), "samples/s"),
    ], stub_for("03.1")),
    (checks.check_knee, "03.2", knee_right, [
        (lambda values, rates, tolerance=0.1: values[int(np.argmax(rates))] if len(values) == len(rates) else knee_right(values, rates), "returned 4"),
        (lambda values, rates, tolerance=0.1: values[-1] if len(values) == len(rates) else knee_right(values, rates), "returned 8"),
        (lambda values, rates, tolerance=0.1: min(v for v, r in zip(values, rates) if r >= (1 - tolerance) * max(rates)), "expected ValueError"),
        (lambda values, rates, tolerance=0.1: knee_right(values, rates, 0.1), "use the tolerance argument"),
    ], stub_for("03.2")),
    (checks.check_getitems, "03.3", GetitemsRight, [
        (GetitemsPreStacked, "one sample per index"),
        (GetitemsSorted, "wrong rows"),
        (GetitemsFeaturesOnly, "(features, label) pair"),
        (workloads.InMemoryDataset, "raised AttributeError"),
    ], GetitemsStub),
    (checks.check_seed_worker, "03.4", seed_right, [
        (seed_by_worker_id, "every epoch repeats"),
        (seed_legacy_global, "np.random.seed does not touch it"),
        (lambda worker_id: get_worker_info().dataset.__setattr__("rng", np.random.default_rng()), "reproducible"),
    ], stub_for("03.4")),
]


@pytest.mark.parametrize("check, exercise, right_answer, wrongs, stub", LESSON_03_CHECKS, ids=[c[1] for c in LESSON_03_CHECKS])
def test_lesson_03_checks(check, exercise, right_answer, wrongs, stub):
    result = check(right_answer)
    assert result.passed and str(result).startswith(f"Exercise {exercise} passed:"), result
    assert check(stub).status == "not implemented yet"
    assert check("not a function").status == "failed"
    for wrong, says in wrongs:
        verdict = check(wrong)
        assert verdict.status == "failed" and says in verdict.detail, (says, verdict)


# Lesson 04: the answers below are the solutions' and the mistakes learners make.
def gb_right(copy, synchronize, num_bytes, repeats=5):
    copy()
    synchronize()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        copy()
        synchronize()
        seconds.append(time.perf_counter() - start)
    return num_bytes / sorted(seconds)[len(seconds) // 2] / 1e9


def gb_without_sync(copy, synchronize, num_bytes, repeats=5):
    copy()
    synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
    return num_bytes * repeats / (time.perf_counter() - start) / 1e9


def gb_mean_with_first(copy, synchronize, num_bytes, repeats=5):
    copy()
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
    synchronize()
    return num_bytes * repeats / (time.perf_counter() - start) / 1e9


def gb_no_warmup(copy, synchronize, num_bytes, repeats=5):
    start = time.perf_counter()
    for _ in range(repeats):
        copy()
    synchronize()
    return num_bytes * repeats / (time.perf_counter() - start) / 1e9


def move_right(batch, device, non_blocking=False):
    from helpers.transfer import move

    return move(batch, device, non_blocking)


def move_top_level(batch, device, non_blocking=False):
    return {k: v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def move_loses_namedtuple(batch, device, non_blocking=False):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_loses_namedtuple(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [move_loses_namedtuple(v, device, non_blocking) for v in batch]
    return batch


def move_namedtuple_from_generator(batch, device, non_blocking=False):
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {k: move_namedtuple_from_generator(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move_namedtuple_from_generator(v, device, non_blocking) for v in batch)
    return batch


def prefetched_right(batches, copy):
    iterator = iter(batches)
    try:
        upcoming = copy(next(iterator))
    except StopIteration:
        return
    for batch in iterator:
        current, upcoming = upcoming, copy(batch)
        yield current
    yield upcoming


def prefetched_naive(batches, copy):
    for batch in batches:
        yield copy(batch)


def prefetched_everything_first(batches, copy):
    yield from [copy(batch) for batch in batches]


def prefetched_drops_last(batches, copy):
    iterator = iter(batches)
    upcoming = next(iterator, None)
    if upcoming is None:
        return
    upcoming = copy(upcoming)
    for batch in iterator:
        current, upcoming = upcoming, copy(batch)
        yield current


def read_back_right(gpu_tensor):
    out = gpu_tensor.to("cpu", non_blocking=True)
    torch.cuda.current_stream().synchronize()
    return out


LESSON_04_CHECKS = [
    (checks.check_gb_per_s, "04.1", gb_right, [
        (gb_without_sync, "call synchronize() before you read the clock"),
        (gb_mean_with_first, "Leave the first (warm-up) copy"),
        (gb_no_warmup, "make one untimed warm-up copy"),
    ], stub_for("04.1")),
    (checks.check_move_to, "04.2", move_right, [
        (move_top_level, "recurse into lists and tuples"),
        (move_loses_namedtuple, "batch['pair'] came back as list"),
        (move_namedtuple_from_generator, "type(x)(*moved_fields)"),
    ], stub_for("04.2")),
    (checks.check_prefetched, "04.3", prefetched_right, [
        (prefetched_naive, "start the next copy, then yield the current batch"),
        (prefetched_everything_first, "stay one batch ahead"),
        (prefetched_drops_last, "expected copy(batch) of each, in order"),
    ], stub_for("04.3")),
]


@pytest.mark.parametrize("check, exercise, right_answer, wrongs, stub", LESSON_04_CHECKS, ids=[c[1] for c in LESSON_04_CHECKS])
def test_lesson_04_checks(check, exercise, right_answer, wrongs, stub):
    test_lesson_03_checks(check, exercise, right_answer, wrongs, stub)


def test_safe_read_check_tells_a_stub_and_skips_without_cuda(monkeypatch):
    assert checks.check_safe_read(stub_for("04.4")).status == "not implemented yet"
    assert checks.check_safe_read("not a function").status == "failed"
    if torch.cuda.is_available():
        assert checks.check_safe_read(read_back_right).passed
        assert checks.check_safe_read(lambda t: t.to("cpu", non_blocking=True)).status == "failed"
        return
    skipped = checks.check_safe_read(read_back_right)
    assert skipped.status == "skipped" and "needs a CUDA GPU" in skipped.detail
    monkeypatch.setenv(checks.STRICT_VAR, "1")
    assert checks.check_safe_read(read_back_right).status == "skipped"  # a CPU run of the solutions passes
    monkeypatch.setenv("COURSE_REQUIRE_CUDA", "1")
    with pytest.raises(AssertionError, match="Exercise 04.4 skipped"):
        checks.check_safe_read(read_back_right)


# Lesson 05
def epoch_orders_right(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        orders.append(list(sampler))
    return orders


def epoch_orders_one_based(sampler, epochs):
    orders = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch + 1)
        orders.append(list(sampler))
    return orders


def rank_loader_right(dataset, labels, rank, world_size, batch_size):
    from helpers.imbalance import sample_weights
    from helpers.samplers import DistributedWeightedSampler

    sampler = DistributedWeightedSampler(sample_weights(labels, "inverse"), num_replicas=world_size, rank=rank, seed=0)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def rank_loader_naive(dataset, labels, rank, world_size, batch_size):
    from helpers.imbalance import sample_weights

    sampler = WeightedRandomSampler(sample_weights(labels, "inverse"), len(labels), generator=torch.Generator().manual_seed(0))
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def rank_loader_unweighted(dataset, labels, rank, world_size, batch_size):
    from torch.utils.data import DistributedSampler

    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=DistributedSampler(dataset, world_size, rank, seed=0))


def rank_loader_seed_per_rank(dataset, labels, rank, world_size, batch_size):
    from helpers.imbalance import sample_weights
    from helpers.samplers import DistributedWeightedSampler

    sampler = DistributedWeightedSampler(sample_weights(labels, "inverse"), num_replicas=world_size, rank=rank, seed=rank)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=sampler)


def rank_loader_with_shuffle(dataset, labels, rank, world_size, batch_size):
    loader = rank_loader_right(dataset, labels, rank, world_size, batch_size)
    return torch.utils.data.DataLoader(dataset, batch_size=batch_size, sampler=loader.sampler, shuffle=True)


def dedup_right(gathered):
    verdicts = {index: bool(correct) for pairs in gathered for index, correct in pairs}
    if not verdicts:
        raise ValueError("empty")
    return sum(verdicts.values()) / len(verdicts)


def dedup_plain_mean(gathered):
    pairs = [c for part in gathered for _, c in part]
    if not pairs:
        raise ValueError("empty")
    return sum(pairs) / len(pairs)


LESSON_05_CHECKS = [
    (checks.check_epoch_orders, "05.1", epoch_orders_right, [
        (lambda sampler, epochs: [list(sampler) for _ in range(epochs)], "call sampler.set_epoch(epoch)"),
        (epoch_orders_one_based, "set the epoch to 0, 1, 2"),
        (lambda sampler, epochs: [list(sampler)], "returned [1, 1] epochs"),
    ], stub_for("05.1")),
    (checks.check_rank_loader, "05.2", rank_loader_right, [
        (rank_loader_naive, "both ranks drew the same samples"),
        (lambda d, labels, r, w, b: torch.utils.data.DataLoader(d, batch_size=b, sampler=WeightedRandomSampler(
            __import__("helpers.imbalance", fromlist=["x"]).sample_weights(labels, "inverse"), len(labels) // w)),
         "both ranks drew the same samples"),  # halving the epoch does not make a plain sampler rank-aware
        (rank_loader_unweighted, "the draws follow the data, not the weights"),
        (rank_loader_seed_per_rank, "every rank must use the same seed"),
        (rank_loader_with_shuffle, "raised ValueError"),
    ], stub_for("05.2")),
    (checks.check_deduplicated_accuracy, "05.3", dedup_right, [
        (dedup_plain_mean, "count it once"),
        (lambda gathered: dedup_right(gathered) if any(gathered) else 0.0, "expected ValueError"),
    ], stub_for("05.3")),
]


@pytest.mark.parametrize("check, exercise, right_answer, wrongs, stub", LESSON_05_CHECKS, ids=[c[1] for c in LESSON_05_CHECKS])
def test_lesson_05_checks(check, exercise, right_answer, wrongs, stub):
    test_lesson_03_checks(check, exercise, right_answer, wrongs, stub)
