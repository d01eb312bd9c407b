"""`module:function` as the doctor's command line and the start-method X-ray take it: imported from the current directory (lesson 07)."""
from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any

from helpers._validate import short


def load(spec: str, what: str) -> Callable[..., Any]:
    """`module:function` from the current directory or the installed packages."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ValueError(f"{what} must look like module:function, got {short(spec)}")
    module_name, name = spec.split(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    if not hasattr(module, name):
        raise ValueError(f"{what}: module {module_name} has no {name!r}")
    return getattr(module, name)
