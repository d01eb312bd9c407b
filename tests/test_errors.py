import numpy
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
    with pytest.raises(ValueError, match=r"match must be a valid regular expression, got '\(': missing \)"):
        with expect_error(ValueError, match="("):  # the contract probe: re.error, and only if the block raised
            pass


def test_an_empty_message_prints_as_python_prints_it(capsys):
    with expect_error(ValueError):
        raise ValueError()
    assert capsys.readouterr().out == "ValueError\n"  # as a traceback's last line: no ": "


def test_long_messages_are_printed_whole_words_per_line(capsys):
    message = "pin_memory=True requires a CUDA or other accelerator backend; no pinned memory allocator is available on this system."
    with expect_error(RuntimeError, match="no pinned memory allocator"):
        raise RuntimeError(message)
    out = capsys.readouterr().out
    assert out == ("RuntimeError: pin_memory=True requires a CUDA or other accelerator backend; no pinned memory\n"
                   "allocator is available on this system.\n")  # 93 characters, then the rest: under 100 each
    assert " ".join(out.split()) == " ".join(f"RuntimeError: {message}".split())  # every word, in order, none cut


def test_wrapped_keeps_short_lines_blank_lines_and_long_words():
    from helpers.errors import wrapped

    assert wrapped("short\n\nlines") == "short\n\nlines"
    path = "/a/" + "x" * 120
    assert wrapped(f"see {path} now") == f"see\n{path}\nnow"  # a token longer than the width stays whole
    assert wrapped("") == ""
    assert wrapped("kept as is \t\n") == "kept as is \t\n"  # short lines, their spaces and the last newline unchanged
    assert wrapped("    " + "word " * 30, 40, hanging=2).splitlines()[1].startswith("      word")  # own indent + 2
    assert wrapped("        " + "word " * 10, 20).splitlines()[0] == "        word word"  # the narrowest: indent kept
    assert wrapped(" " * 18 + "abc d", 20) == " " * 18 + "abc\n" + " " * 18 + "d"  # the indent kept beside a long word
    assert wrapped("\tab ab ab ab ab ab ab", 20) == "        ab ab ab ab\n        ab ab ab"  # a tab indents as 8 spaces
    assert wrapped("aaa bbb ccc ddd eee fff\r\nx", 20) == "aaa bbb ccc ddd eee\r\nfff\r\nx"  # Windows line ends kept
    assert wrapped("word " * 30, numpy.int64(40)) == wrapped("word " * 30, 40)  # any whole number
    tabbed = wrapped("\t".join(["word"] * 30), 40).splitlines()  # words between tabs only: broken, tabs as spaces
    assert len(tabbed) > 1 and max(map(len, tabbed)) <= 40 and " ".join(tabbed).split() == ["word"] * 30


def test_a_traceback_frame_breaks_after_its_file_name_not_inside_line_n():
    """A newcomer saw a rank's traceback in lesson 07 break as '..., line' / '83, in wrapper' (the words wrapped at 100)."""
    from helpers.errors import wrapped

    path = "/home/learner/feed-the-gpus/.venv/lib/python3.11/site-packages/torch/distributed/c10d_logger.py"
    frame = f'  File "{path}", line 83, in wrapper'  # 125 characters, by hand
    text = f"Traceback (most recent call last):\n{frame}\n    return func(*args, **kwargs)"
    assert wrapped(text) == (f'Traceback (most recent call last):\n  File "{path}",\n  line 83, in wrapper\n'
                             "    return func(*args, **kwargs)")
    assert wrapped(frame, hanging=2) == f'  File "{path}",\n    line 83, in wrapper'
    short = '  File "/a.py", line 3, in f'
    assert wrapped(short) == short  # under the width: unchanged
    # the contract probe: a path with spaces, or prose that looks like a frame, still wraps between words
    spaced = '  File "/home/my documents/' + "long folder name " * 6 + 'x.py", line 9, in f'
    assert max(map(len, wrapped(spaced).splitlines())) <= 100 and wrapped(spaced).endswith(",\n  line 9, in f")
    prose = 'File "a", line 1, in ' + "w " * 50
    assert max(map(len, wrapped(prose).splitlines())) <= 100 and wrapped(prose).split() == prose.split()


def test_a_tracebacks_marks_are_left_out_under_a_line_broken_between_words_and_kept_elsewhere(tmp_path):
    """CI printed lesson 06's rank traceback with a 105-character line of ^^^ under a source line broken at 100."""
    import traceback

    from helpers.errors import wrapped

    def formatted(source: str) -> str:
        path = tmp_path / f"lesson{len(source)}.py"  # a file: the traceback prints its source lines from it
        path.write_text(source + "\n")
        try:
            exec(compile(source, str(path), "exec"), {})
        except ZeroDivisionError:
            return traceback.format_exc()
        raise AssertionError("the source did not raise")

    long_line = "result = " + " + ".join(["1"] * 30) + " + int('2') / 0"  # 141 characters: 9 + 30 + 29 * 3 + 15
    text = formatted(long_line)
    marks = [line for line in text.splitlines() if set(line.strip()) <= set("^~") and line.strip()]
    assert marks and max(map(len, marks)) > 100  # this Python marks the failing expression, over the width
    out = wrapped(text)
    assert max(map(len, out.splitlines())) <= 100
    assert [line for line in out.splitlines() if line.strip() and set(line.strip()) <= set("^~")] == []
    assert " ".join(out.split()) == " ".join(line for line in text.split() if not set(line) <= set("^~"))  # nothing else lost
    # the fact-check: marks that fit, under a line broken between words, point at the wrong words too; a divider of
    # tildes under a line that fit is no traceback's marks
    broken = "    " + " ".join(["word"] * 19) + "\n    " + " ".join(["word"] * 6)  # 98 characters, then the other 6 words
    assert wrapped("    " + "word " * 25 + "\n        ^^^^") == broken
    assert wrapped("results\n" + "~" * 120 + "\nend") == "results\n" + "~" * 120 + "\nend"
    short_marks = [line for line in formatted("x = 1 / 0 + 2").splitlines() if set(line.strip()) == {"~", "^"}]
    assert short_marks == ["        ~~^~~"] and short_marks[0] in wrapped(formatted("x = 1 / 0 + 2")).splitlines()  # kept


@pytest.mark.parametrize(("args", "error", "match"), [(("text", 19), ValueError, "width must be an int of at least 20, got 19"),
                                                      (("text", 100, -1), ValueError, "hanging must be an int of at least 0"),
                                                      (("text", 30, 30), ValueError, r"hanging must be under width \(30\), got 30"),
                                                      (("text", "100"), ValueError, "width must be an int"),
                                                      ((None,), TypeError, "text must be a str, got NoneType")])
def test_wrapped_names_a_bad_argument(args, error, match):
    from helpers.errors import wrapped

    with pytest.raises(error, match=match):
        wrapped(*args)
