"""Listings for the lessons: a helper's source with its argument checks left out, so the mechanism is what a learner reads."""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

CHECK_ERRORS = {"ValueError", "TypeError"}  # what an argument check raises
NOTE = "# (argument checks left out: inspect.getsource shows them)"


def _raises_check_error(statement: ast.stmt) -> bool:
    """True for `raise ValueError(...)` / `raise TypeError(...)`."""
    if not isinstance(statement, ast.Raise) or statement.exc is None:
        return False
    exc = statement.exc.func if isinstance(statement.exc, ast.Call) else statement.exc
    return isinstance(exc, ast.Name) and exc.id in CHECK_ERRORS


def _validates_itself(value: ast.expr, target: ast.expr) -> bool:
    """True for `x = as_int("x", x, ...)`: an argument replaced by its checked self (a call to an `as_...` validator)."""
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id.startswith("as_")
            and isinstance(target, ast.Name) and any(isinstance(a, ast.Name) and a.id == target.id for a in value.args))


def is_argument_check(statement: ast.stmt) -> bool:
    """An `if ...: raise ValueError/TypeError(...)`, a loop of them, or an argument reassigned to its validated self."""
    if isinstance(statement, ast.If):
        return not statement.orelse and all(_raises_check_error(s) for s in statement.body)
    if isinstance(statement, ast.For):
        return not statement.orelse and all(is_argument_check(s) for s in statement.body)
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target, value = statement.targets[0], statement.value
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            return all(_validates_itself(v, t) for v, t in zip(value.elts, target.elts))
        return _validates_itself(value, target)
    return False


def mechanism(obj: Any) -> str:
    """The source of a function or class (lessons 05-07) without the statements that only check its arguments."""
    if not (inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isclass(obj)):
        raise TypeError(f"obj must be a function, method or class, got {type(obj).__name__}")
    text = textwrap.dedent(inspect.getsource(obj))
    lines = text.splitlines(keepends=True)
    drop: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for statement in node.body:
                if is_argument_check(statement):
                    drop.update(range(statement.lineno - 1, statement.end_lineno))
    if not drop:
        return text
    kept = [line for number, line in enumerate(lines) if number not in drop]
    return f"{NOTE}\n{''.join(kept)}"
