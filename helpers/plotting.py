"""The course's plot style, applied only when a notebook calls `use_course_style()`."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

FIGSIZE: tuple[float, float] = (6.4, 3.6)

COURSE_STYLE: dict[str, object] = {
    "figure.figsize": FIGSIZE,
    "figure.dpi": 80,
    "savefig.dpi": 80,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "legend.fontsize": 9,
    "figure.autolayout": True,
}


def use_course_style() -> None:
    """Apply the course's figure size and look to matplotlib (every lesson's first cell)."""
    import matplotlib

    matplotlib.rcParams.update(COURSE_STYLE)


def side_by_side(*draws: Callable[[Any], Any] | None, stacked: bool = False) -> Any:
    """One panel per drawing function given (each called with its axes; None skipped), in a row or, if stacked, a column; the figure, or None if none."""
    import matplotlib.pyplot as plt

    if not isinstance(stacked, bool):
        raise TypeError(f"stacked must be True or False, got {stacked!r}")
    panels = [draw for draw in draws if draw is not None]
    if not all(callable(draw) for draw in panels):
        raise TypeError(f"draws must be functions of one matplotlib axes (or None), got {[type(d).__name__ for d in panels]}")
    if not panels:
        return None
    width, height = FIGSIZE
    shape, size = ((len(panels), 1), (1.4 * width, height * len(panels))) if stacked else ((1, len(panels)), (width * len(panels), 1.3 * height))
    fig, axes = plt.subplots(*shape, figsize=size, squeeze=False, layout="constrained")
    for draw, ax in zip(panels, axes.flat):
        draw(ax)
    return fig
