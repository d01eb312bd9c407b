"""The course's plot style, applied only when a notebook calls `use_course_style()`."""
from __future__ import annotations

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
