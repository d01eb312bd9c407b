"""Showing a call that fails, honestly: the real error is printed and its absence is an error."""
from __future__ import annotations

import numbers
import re
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class CaughtError:
    """What `expect_error` caught: the exception itself and its message (lesson 00)."""

    exception: BaseException | None = None

    @property
    def message(self) -> str:
        """The caught exception's message, as str(exception) gives it."""
        return "" if self.exception is None else str(self.exception)


def _type_names(expected: type[BaseException] | tuple[type[BaseException], ...]) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join(t.__name__ for t in types)


WIDTH = 100  # the course's width for printed lines: JupyterLab breaks a line where its output pane ends, mid-word too


_FRAME = re.compile(r'^(\s*File ".*"), (line \d+, in .*)$')  # a frame of a Python traceback
_MARKS = re.compile(r"^\s*[~^]+\s*$")  # the line under a traceback's source line marking where it failed (3.11+)


def wrapped(text: str, width: int = WIDTH, hanging: int = 0) -> str:
    """`text` with each line over `width` characters broken between words, never inside one, its continuation indented
    as the line is plus `hanging` spaces, a traceback's frame after its file name (JupyterLab's output CSS has
    word-break: break-all: it breaks mid-word); a traceback's ~~^^ marks under a line it broke are left out. Tabs in a
    line it breaks become spaces; `width` is at least 20 and `hanging` under it."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    for name, value, least in (("width", width, 20), ("hanging", hanging, 0)):
        if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an int of at least {least}, got {value!r}")
    width, hanging = int(width), int(hanging)
    if hanging >= width:
        raise ValueError(f"hanging must be under width ({width}), got {hanging}")

    def words(part: str, more: int = hanging) -> str:
        if len(part) <= width or not re.search(r"\S[ \t]+\S", part):  # fits, or one word: kept as is, its indent too
            return part
        body = part.lstrip(" \t")
        lead = part[:len(part) - len(body)].expandtabs()  # the line's own indent, kept even beside a long first word
        return textwrap.fill(body, width, initial_indent=lead, subsequent_indent=" " * (len(lead) + more),
                             break_long_words=False, break_on_hyphens=False) or part

    def fill(line: str) -> str:
        if len(line) <= width:  # short lines stay exactly as they are
            return line
        if line.endswith("\r"):  # a Windows line end stays on each line it becomes
            return fill(line[:-1]).replace("\n", "\r\n") + "\r"
        frame = _FRAME.match(line)  # a traceback's frame: break after its file name, not inside "line 83"
        if not frame:
            return words(line)
        indent = " " * (len(frame[1].expandtabs()) - len(frame[1].expandtabs().lstrip(" ")) + hanging)
        head = words(frame[1].replace("File ", "File\xa0", 1) + ",").replace("File\xa0", "File ", 1)  # "File" stays with its name
        return head + "\n" + words(indent + frame[2], more=0)  # its continuation under it
    lines = text.split("\n")
    filled = [fill(line) for line in lines]
    # a traceback's marks under a line broken here would point at the wrong words: left out (any other line is kept)
    return "\n".join(new for i, new in enumerate(filled)
                     if not (i and filled[i - 1] != lines[i - 1] and _MARKS.match(lines[i]) and not _MARKS.match(lines[i - 1])))


@contextmanager
def expect_error(
    expected: type[BaseException] | tuple[type[BaseException], ...], match: str | None = None
) -> Iterator[CaughtError]:
    """Run a block that must raise `expected` (message matching regex `match`) and print it (lesson 00)."""
    types = expected if isinstance(expected, tuple) else (expected,)
    if not types or not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
        raise TypeError(f"expected must be an exception class or a tuple of them, got {expected!r}")
    if match is not None and not isinstance(match, str):
        raise TypeError(f"match must be a regular expression string or None, got {match!r}")
    try:
        re.compile(match or "")
    except re.error as exc:  # before the block runs: a block that raises nothing would hide it
        raise ValueError(f"match must be a valid regular expression, got {match!r}: {exc}") from None
    caught = CaughtError()
    try:
        yield caught
    except types as exc:
        if match is not None and re.search(match, str(exc)) is None:
            raise AssertionError(
                f"expected {_type_names(expected)} matching {match!r}, but the message was: {exc}"
            ) from exc
        # Drop the traceback: its frames would keep the failing objects (a DataLoader iterator and its
        # worker processes) alive in a reference cycle until some later garbage collection.
        caught.exception = exc.with_traceback(None)
        print(wrapped(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__))  # as Python prints it
        return
    except Exception as exc:
        raise AssertionError(
            f"expected {_type_names(expected)}, but {type(exc).__name__} was raised: {exc}"
        ) from exc
    raise AssertionError(f"expected {_type_names(expected)}, but nothing was raised")
