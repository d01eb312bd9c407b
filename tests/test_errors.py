import pytest

from helpers import expect_error


def test_prints_the_real_message(capsys):
    with expect_error(ValueError, match="bad") as caught:
        raise ValueError("a bad value")
    assert capsys.readouterr().out == "ValueError: a bad value\n"
    assert caught.message == "a bad value"


def test_nothing_raised_is_an_assertion_error():
    with pytest.raises(AssertionError, match="nothing was raised"):
        with expect_error(ValueError):
            pass


def test_other_error_is_an_assertion_error():
    with pytest.raises(AssertionError, match="KeyError was raised"):
        with expect_error(ValueError):
            raise KeyError("x")


def test_message_that_does_not_match_fails():
    with pytest.raises(AssertionError, match="but the message was"):
        with expect_error(ValueError, match="^expected text"):
            raise ValueError("other text")


def test_bad_arguments():
    with pytest.raises(TypeError, match="expected must be an exception class"):
        with expect_error("ValueError"):
            pass
    with pytest.raises(TypeError, match="match must be"):
        with expect_error(ValueError, match=3):
            pass
