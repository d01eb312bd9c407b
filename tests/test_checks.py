"""Every self-check passes the right answer and rejects typical wrong ones with an actionable line."""
import pytest

from helpers import checks


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
