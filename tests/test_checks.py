"""Every registered self-check passes its right answer, tells a stub, and rejects each typical wrong answer beside it."""
import pytest

from helpers import checks
from helpers.checks import core
from helpers.course import CHECKS_MUST_PASS_VAR, REQUIRE_CUDA_VAR

REGISTERED = [checks.REGISTRY[number] for number in sorted(checks.REGISTRY)]
# A check stops every worker it started, whatever the answer did: a DataLoader iterator left to the garbage collector
# (03.4 on another exercise's stub) kept 2 workers alive for dozens of tests and cost 10 s when it was collected.
pytestmark = pytest.mark.usefixtures("no_process_left")


def _params(registered):
    """One pytest param per check; a check that needs CUDA is marked `cuda` (skipped without a GPU)."""
    return [pytest.param(r, id=r.exercise, marks=[pytest.mark.cuda] if r.needs_cuda else []) for r in registered]


WRONG = [
    pytest.param(r, wrong, id=f"{r.exercise}-{index}", marks=[pytest.mark.cuda] if r.needs_cuda else [])
    for r in REGISTERED for index, wrong in enumerate(r.wrong, 1)
]


def stub(registered, exercise=None):
    """What `make exercises` leaves in place of the answer: a function (or a method) raising the exercise's stub error."""
    def raise_stub(*args):
        raise NotImplementedError(f"Exercise {exercise or registered.exercise}: replace this line with your code")

    if registered.takes_class:
        return type("Stub", (registered.right,), {registered.name.rsplit(".", 1)[-1]: raise_stub})
    return raise_stub


@pytest.fixture(autouse=True)
def lenient(monkeypatch):
    monkeypatch.delenv(CHECKS_MUST_PASS_VAR, raising=False)


def test_every_check_is_registered_once():
    exported = {name for name in checks.__all__ if name.startswith("check_")}
    assert exported == {r.check.__name__ for r in REGISTERED} and len(exported) == len(REGISTERED) > 0
    for r in REGISTERED:
        assert getattr(checks, r.check.__name__) is r.check
        assert r.check.__doc__.startswith(f"Exercise {r.exercise}"), r.check.__doc__


@pytest.mark.parametrize("registered", _params(REGISTERED))
def test_check_has_wrong_answers(registered):
    assert registered.wrong, f"exercise {registered.exercise}: add at least one typical wrong answer beside its check"


@pytest.mark.parametrize("registered", _params(REGISTERED))
def test_right_answer_passes(registered):
    result = registered.check(registered.right)
    assert result.passed and str(result).startswith(f"Exercise {registered.exercise} passed:"), result


@pytest.mark.parametrize("registered, wrong", WRONG)
def test_wrong_answer_fails(registered, wrong):
    verdict = registered.check(wrong.answer)
    assert verdict.status == "failed" and wrong.says in verdict.detail, (wrong.says, verdict)


@pytest.mark.parametrize("registered", [pytest.param(r, id=r.exercise) for r in REGISTERED])
def test_stub_and_non_answers(registered, monkeypatch):
    number = registered.exercise
    assert registered.check(stub(registered)).status == "not implemented yet"
    assert registered.check("not a function").status == "failed"
    # another exercise's stub is an error in this answer, not this exercise's stub
    assert registered.check(stub(registered, "99.9")).status in ("failed", "skipped")
    monkeypatch.setenv(CHECKS_MUST_PASS_VAR, "1")
    with pytest.raises(AssertionError, match=f"Exercise {number} not implemented yet"):
        registered.check(stub(registered))


def test_skipped_passes_strict_mode_unless_cuda_is_required(monkeypatch):
    skipped = core.CheckResult("04.4", "skipped", "this check needs a CUDA GPU")
    assert core.finish(skipped) is skipped
    monkeypatch.setenv(CHECKS_MUST_PASS_VAR, "1")
    assert core.finish(skipped) is skipped  # a CPU run of the solutions passes
    monkeypatch.setenv(REQUIRE_CUDA_VAR, "1")
    with pytest.raises(AssertionError, match="Exercise 04.4 skipped"):
        core.finish(skipped)


def test_safe_read_skips_without_cuda():
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a GPU the check runs: test_right_answer_passes[04.4] covers it")
    skipped = checks.check_safe_read(checks.REGISTRY["04.4"].right)
    assert skipped.status == "skipped" and "needs a CUDA GPU" in skipped.detail


@pytest.mark.parametrize("number, name, error", [("3.4", "f", ValueError), ("03.x", "f", ValueError), (304, "f", ValueError),
                                                 ("03.4", "", TypeError), ("03.4", None, TypeError)])
def test_exercise_rejects_bad_arguments(number, name, error):
    with pytest.raises(error, match=repr(number) if error is ValueError else "name"):
        core.exercise(number, name, right=None, wrong=[])


def test_exercise_refuses_a_second_check_for_one_id():
    def check_something_else(answer):
        """Exercise 00.1: not the real one."""
        return "passed"

    with pytest.raises(ValueError, match="'00.1' is checked by both check_workers_per_rank and check_something_else"):
        core.exercise("00.1", "x", right=None, wrong=[])(check_something_else)
    assert checks.REGISTRY["00.1"].check is checks.check_workers_per_rank


RIGHT_WITH_IMPORTED_CLOCKS = '''
from time import perf_counter as clock, perf_counter_ns

def steady_samples_per_s(loader, warmup_batches, num_batches):
    iterator = iter(loader)
    for _ in range(warmup_batches):
        next(iterator)
    start = clock()
    samples = sum(len(next(iterator)[0]) for _ in range(num_batches))
    return samples / (clock() - start)

def gb_per_s(copy, synchronize, num_bytes, repeats=5):
    copy()
    synchronize()
    seconds = []
    for _ in range(repeats):
        start = perf_counter_ns()
        copy()
        synchronize()
        seconds.append((perf_counter_ns() - start) / 1e9)
    return num_bytes / sorted(seconds)[len(seconds) // 2] / 1e9
'''


def test_timing_checks_accept_the_clock_imported_by_name():
    """`from time import perf_counter` (or perf_counter_ns) in the notebook reads the check's stand-in clock too."""
    import time

    namespace = {}
    exec(RIGHT_WITH_IMPORTED_CLOCKS, namespace)
    real = time.perf_counter, time.perf_counter_ns
    assert checks.check_steady_samples_per_s(namespace["steady_samples_per_s"]).passed
    assert checks.check_gb_per_s(namespace["gb_per_s"]).passed
    assert (time.perf_counter, time.perf_counter_ns) == real
    assert namespace["clock"] is real[0] and namespace["perf_counter_ns"] is real[1]


def test_timing_checks_give_the_real_clock_back_when_the_answer_raises():
    import time

    real = time.perf_counter

    def broken(loader, warmup_batches, num_batches):
        time.perf_counter()
        raise ZeroDivisionError("division by zero")

    verdict = checks.check_steady_samples_per_s(broken)
    assert verdict.status == "failed" and "ZeroDivisionError" in verdict.detail
    assert time.perf_counter is real


def test_balanced_sampler_blames_replacement_only_when_no_index_repeats():
    import torch
    from torch.utils.data import WeightedRandomSampler

    verdict = checks.check_balanced_sampler(lambda labels, n: WeightedRandomSampler(torch.ones(len(labels)), n))
    assert verdict.status == "failed" and "replacement=False" not in verdict.detail, verdict


def _drawn_by(scheme, frozen=False):
    """07.1 answers whose sampler has no weights: torch.multinomial draws by `scheme`, anew each epoch or once (frozen)."""
    import torch
    from torch.utils.data import DataLoader, Sampler

    from helpers.imbalance import sample_weights

    class Drawn(Sampler):
        def __init__(self, weights):
            self.weights, self.generator = weights, torch.Generator().manual_seed(1)

        def __iter__(self):
            return iter(torch.multinomial(self.weights, len(self.weights), True, generator=self.generator).tolist())

        def __len__(self):
            return len(self.weights)

    def balanced_loader(dataset, batch_size):
        sampler = Drawn(sample_weights(dataset.targets, scheme))
        return DataLoader(dataset, batch_size=batch_size, sampler=list(sampler) if frozen else sampler)
    return balanced_loader


def test_balanced_loader_judges_a_sampler_without_weights_by_one_epoch_of_its_draws():
    """07.1 reads class shares off a weighted sampler's weights; any other sampler (here one of its own) by its draws."""
    assert checks.check_balanced_loader(_drawn_by("inverse")).passed
    verdict = checks.check_balanced_loader(_drawn_by("effective"))
    assert verdict.status == "failed" and "one epoch of its sampler's draws (2220 indices)" in verdict.detail, verdict


def test_balanced_loader_rejects_one_draw_replayed_every_epoch():
    """07.1: the same balanced draw frozen into a list passes the doctor and the shares, but repeats every epoch."""
    verdict = checks.check_balanced_loader(_drawn_by("inverse", frozen=True))
    assert verdict.status == "failed" and "the same 2220 indices in the same order every epoch" in verdict.detail, verdict


def test_split_problem_names_the_first_item_read_twice_or_never():
    """06.1 and 07.4 share it: hand-made reader tables, each verdict worked out here."""
    args = ("S", str, "R", "W", lambda item: f"none {item}")
    assert core.split_problem({"a": [(0, 0)], "b": [(1, 0)]}, ["a", "b"], *args) is None
    assert core.split_problem({"a": [(0, 0), (1, 0)]}, ["a"], *args) == (
        "S, a is read on more than one rank, by (rank, worker) [(0, 0), (1, 0)]: R")
    assert core.split_problem({"a": [(0, 0), (0, 1)]}, ["a"], *args) == (
        "S, a is read by more than one worker of rank 0, by (rank, worker) [(0, 0), (0, 1)]: W")
    assert core.split_problem({"a": [(0, 0)]}, ["a", "b"], *args) == "S, none b"


def test_consistent_hints_keeps_the_mistake_the_answer_makes_everywhere():
    """Two typical mistakes tie at x=2 (both give 4); only one of them gives the answer's value at x=3 too."""
    models = [("squares", lambda x: x * x), ("doubles", lambda x: 2 * x), ("raises", lambda x: 1 / 0)]
    assert core.consistent_hints(models, lambda x: 2 * x, [(2,), (3,)]) == ["doubles", "raises"]
    assert core.consistent_hints(models[:1], lambda x: 2 * x, [(2,), (3,)]) == []
    assert core.consistent_hints(models[:2], lambda x: x + 2, [(2,)]) == ["squares", "doubles"]
