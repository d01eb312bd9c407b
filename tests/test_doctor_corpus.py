"""The loader doctor on loaders it was not written for (doctor_corpus): each FAST case gets its expected findings only."""
from __future__ import annotations

import ast
import inspect
import pkgutil
import time
from pathlib import Path

import numpy as np
import pytest

import doctor_corpus as corpus

CORPUS_DIR = Path(corpus.__file__).parent
FAST = [corpus.name(case) for case in corpus.cases() if getattr(case, "FAST", False)]


pytestmark = pytest.mark.usefixtures("no_process_left")  # tests/conftest.py: every worker and program stopped


@pytest.mark.parametrize("name", FAST)
def test_the_doctor_finds_what_the_case_expects_and_nothing_else(name):
    case = corpus.load(name)
    reason = corpus.unmet(case)
    if reason:
        pytest.skip(f"{name} {reason}")
    with corpus.host_busy(case):
        diagnosis, seconds = corpus.diagnose(case)
    missed, false_alarms = corpus.compare(corpus.expected(case), corpus.problems(diagnosis, corpus.expected(case)))
    assert not missed and not false_alarms, (f"{name}: missed {sorted(missed)}, false alarms {sorted(false_alarms)} "
                                             f"({corpus.origin(case)[:80]})\n{diagnosis}")
    assert seconds <= corpus.budget_s(case) + corpus.OVER_BUDGET_S, f"{seconds:.1f} s of a {corpus.budget_s(case)} s budget"
    assert not corpus.wrong_evidence(case, diagnosis.findings), f"{name}: {corpus.wrong_evidence(case, diagnosis.findings)}\n{diagnosis}"


def test_every_case_names_its_origin_and_writes_its_expectations_as_a_frozenset():
    for case in corpus.cases():
        name = corpus.name(case)
        assert case.__doc__ and case.__doc__.strip().splitlines()[0], f"{name} has no docstring"
        assert corpus.origin(case).startswith("modelled on "), f"{name}: the docstring needs 'Origin: modelled on <source>'"
        assert isinstance(case.EXPECTED, frozenset) and case.EXPECTED <= corpus.CODES, f"{name}: EXPECTED {case.EXPECTED!r}"
        source = ast.parse(inspect.getsource(case))
        assigned = [node for node in source.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    and "EXPECTED" in ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)]
        assert len(assigned) == 1 and "frozenset(" in ast.unparse(assigned[0].value), f"{name}: write EXPECTED = frozenset(...)"
        assert callable(case.make_loader) and isinstance(getattr(case, "FAST", False), bool)
        assert corpus.budget_s(case) > 0 and (not hasattr(case, "step") or callable(case.step))
        assert set(getattr(case, "EVIDENCE", {})) <= case.EXPECTED, f"{name}: EVIDENCE for a code it does not expect"
        assert getattr(case, "WITHOUT_FORK", frozenset()) <= corpus.CODES - case.EXPECTED, f"{name}: WITHOUT_FORK"
        corpus.unmet(case)  # every NEEDS name is known (a KeyError otherwise)


def test_the_corpus_is_big_enough_and_every_module_is_registered():
    cases = corpus.cases()
    healthy = [c for c in cases if not c.EXPECTED]
    fast = [c for c in cases if getattr(c, "FAST", False)]
    assert len(cases) >= 20 and len(healthy) >= 8, (len(cases), len(healthy))
    assert len(fast) >= 10 and sum(not c.EXPECTED for c in fast) >= 5, [corpus.name(c) for c in fast]
    modules = {m.name for m in pkgutil.iter_modules([str(CORPUS_DIR)]) if not m.name.startswith("_")} - {"planted"}  # not a case
    assert modules == set(corpus.CASES), modules ^ set(corpus.CASES)


def test_the_table_gives_the_doctors_reason_beside_a_miss():
    """A missed code stays a miss (the row fails), with what the doctor's not_measured said about it."""
    from types import SimpleNamespace

    from tools.doctor_bench import Row, Run

    case = SimpleNamespace(EXPECTED=frozenset({"input-bound", "workers-too-few"}), __name__="doctor_corpus.x")
    why = "num_workers=2 gave 1.10x ... while other programs used 1.0 of 2 cores"
    row = Row(case, runs=[Run({"input-bound"}, why_not={"workers-too-few": why}), Run({"input-bound", "workers-too-few"})])
    assert row.failed and row.verdict() == f"MISSED workers-too-few (runs 1); the doctor said: {why}"
    assert Row(case, runs=[Run({"input-bound"})]).verdict() == "MISSED workers-too-few (runs 1)"


def test_the_table_fails_a_run_over_its_budget_and_one_second():
    from types import SimpleNamespace

    from tools.doctor_bench import Row, Run

    case = SimpleNamespace(EXPECTED=frozenset(), BUDGET_S=8.0, __name__="doctor_corpus.x")
    assert Row(case, runs=[Run(seconds=8.9), Run(seconds=9.0)]).verdict() == "ok"  # 8 s + 1 s is allowed
    row = Row(case, runs=[Run(seconds=8.5), Run(seconds=9.2), Run(crash="boom", seconds=20.0)])
    assert row.failed and row.verdict() == "CRASH in run 3: boom; OVER BUDGET (runs 2: 9.2 s; budget 8 s + 1 s)"


def test_the_table_fails_a_finding_whose_evidence_the_case_does_not_expect():
    from types import SimpleNamespace

    from tools.doctor_bench import Row, Run

    case = SimpleNamespace(EXPECTED=frozenset({"loader-error"}), EVIDENCE={"loader-error": {"stage": "sampler"}},
                           __name__="doctor_corpus.x")
    said = [{"code": "loader-error", "severity": "error", "evidence": {"stage": "collate_fn"}}]
    assert corpus.wrong_evidence(case, said) == ["loader-error.stage='collate_fn' (want 'sampler')"]
    row = Row(case, runs=[Run({"loader-error"}), Run({"loader-error"}, wrong=corpus.wrong_evidence(case, said))])
    assert row.failed and row.verdict() == "WRONG EVIDENCE loader-error.stage='collate_fn' (want 'sampler') (runs 2)"


def test_without_fork_codes_are_expected_only_where_workers_do_not_start_by_fork(monkeypatch):
    import multiprocessing
    from types import SimpleNamespace

    case = SimpleNamespace(EXPECTED=frozenset({"input-bound"}), WITHOUT_FORK=frozenset({"startup-cost"}))
    for method, wanted in (("fork", {"input-bound"}), ("forkserver", {"input-bound", "startup-cost"}),
                           ("spawn", {"input-bound", "startup-cost"})):
        monkeypatch.setattr(multiprocessing, "get_start_method", lambda *args, method=method, **kwargs: method)
        assert corpus.expected(case) == wanted, method
    assert corpus.expected(SimpleNamespace(EXPECTED=frozenset())) == frozenset()  # WITHOUT_FORK is optional


def test_a_case_gets_its_budget_without_fork_only_where_workers_are_fresh_pythons(monkeypatch):
    import multiprocessing
    from types import SimpleNamespace

    case = SimpleNamespace(BUDGET_S=8, BUDGET_WITHOUT_FORK_S=16, __name__="doctor_corpus.x")
    for method, wanted in (("fork", 8.0), ("forkserver", 16.0), ("spawn", 16.0)):
        monkeypatch.setattr(multiprocessing, "get_start_method", lambda *args, method=method, **kwargs: method)
        assert corpus.budget_s(case) == wanted, method
        assert corpus.budget_s(SimpleNamespace(__name__="doctor_corpus.y")) == corpus.DEFAULT_BUDGET_S  # both optional
        assert corpus.budget_s(SimpleNamespace(__name__="doctor_corpus.y", BUDGET_S=np.int64(9))) == 9.0  # any real number
    # the late review: a budget without fork under BUDGET_S, or not a number, was used without a word
    for budgets, match in (({"BUDGET_S": 8, "BUDGET_WITHOUT_FORK_S": 4}, r"x: BUDGET_WITHOUT_FORK_S \(4\) is under BUDGET_S \(8\)"),
                           ({"BUDGET_WITHOUT_FORK_S": "16"}, "x: BUDGET_WITHOUT_FORK_S must be a positive finite number of seconds, got '16'"),
                           ({"BUDGET_S": 0}, "x: BUDGET_S must be a positive finite number of seconds, got 0"),
                           ({"BUDGET_S": 10**309}, "x: BUDGET_S must be a positive finite number of seconds, got 1000")):
        with pytest.raises(ValueError, match=match):
            corpus.budget_s(SimpleNamespace(__name__="doctor_corpus.x", **budgets))
