"""Names a module moved to others, found again on first use: `clinic.train` keeps working after train moved to clinic_runs."""
from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def forwarder(owner: str, moved: Mapping[str, Sequence[str]]) -> Callable[[str], Any]:
    """A module `__getattr__` for `owner`: each name in `moved[module]` is imported from `module` when first asked for.

    Imported lazily, not at the end of `owner`: the moved modules import `owner`, and a spawned process that
    unpickles one of their functions imports them first, which would make an eager re-export circular.
    """
    def __getattr__(name: str) -> Any:
        for module, names in moved.items():
            if name in names:
                return getattr(importlib.import_module(module), name)
        raise AttributeError(f"module {owner!r} has no attribute {name!r}")

    return __getattr__
