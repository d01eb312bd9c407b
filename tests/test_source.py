"""helpers.source.mechanism: argument checks left out of a listing, everything else kept, word for word."""
import pytest

from helpers import source
from helpers._validate import as_int


def sample(count: int, name: str, flags=(True,)) -> list:
    """A sample with every kind of argument check and a few look-alikes that must stay."""
    count = as_int("count", count, minimum=1)
    count, name = as_int("count", count, minimum=1), as_int("name", name)
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {name!r}")
    for flag in flags:
        if not isinstance(flag, bool):
            raise TypeError("flags must be True or False")
    total = as_int("count", count)  # a new name: the mechanism uses it, kept
    if total > 10:
        raise RuntimeError("too many")  # not an argument check: kept
    if total > 5:
        raise ValueError("five")
    else:
        total -= 1  # an if with an else does work: kept
    return [name] * total


def test_checks_go_and_the_mechanism_stays():
    listing = source.mechanism(sample)
    kept = [line.strip() for line in listing.splitlines()]
    assert kept[0] == source.NOTE and kept[1].startswith("def sample(")
    assert not any(line.startswith(("count = as_int", "count, name =", "for flag", "raise TypeError")) for line in kept)
    assert "total = as_int(\"count\", count)  # a new name: the mechanism uses it, kept" in kept
    assert 'raise RuntimeError("too many")  # not an argument check: kept' in kept
    assert "total -= 1  # an if with an else does work: kept" in kept and "return [name] * total" in kept
    assert len(kept) == len(__import__("inspect").getsource(sample).splitlines()) - 7 + 1  # 7 lines of checks out, the note in


def test_a_function_without_checks_is_its_source():
    def plain(x):
        return x + 1

    assert source.mechanism(plain) == "def plain(x):\n    return x + 1\n"


def test_methods_of_a_class_lose_their_checks():
    class Thing:
        def __init__(self, size: int) -> None:
            if size < 0:
                raise ValueError("size must be at least 0")
            self.size = size

    listing = source.mechanism(Thing)
    assert "raise ValueError" not in listing and "self.size = size" in listing


def test_bad_argument_is_named():
    with pytest.raises(TypeError, match="obj must be a function, method or class, got int"):
        source.mechanism(3)
