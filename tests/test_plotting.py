"""helpers.plotting: the course style and side-by-side panels (this machine's measurement beside a reference)."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from helpers import plotting  # noqa: E402


def test_side_by_side_draws_one_panel_per_function_and_skips_none():
    drawn = []
    fig = plotting.side_by_side(lambda ax: drawn.append(ax), None, lambda ax: drawn.append(ax))
    assert len(fig.axes) == 2 and drawn == fig.axes  # each function got its own panel, in order
    left, right = (ax.get_position() for ax in fig.axes)
    assert left.x1 <= right.x0 and left.y0 == pytest.approx(right.y0)  # in a row
    plt.close(fig)


def test_side_by_side_stacks_in_a_column():
    fig = plotting.side_by_side(lambda ax: ax.set_title("here"), lambda ax: ax.set_title("reference"), stacked=True)
    top, bottom = fig.axes
    assert (top.get_title(), bottom.get_title()) == ("here", "reference")
    assert top.get_position().y0 >= bottom.get_position().y1 and top.get_position().x0 == pytest.approx(bottom.get_position().x0)
    plt.close(fig)


def test_side_by_side_with_nothing_to_draw_makes_no_figure():
    before = plt.get_fignums()
    assert plotting.side_by_side(None, None) is None
    assert plt.get_fignums() == before


@pytest.mark.parametrize("draws, kwargs, error, says", [
    (("not a function",), {}, TypeError, "draws must be functions"),
    ((lambda ax: None,), {"stacked": "yes"}, TypeError, "stacked must be True or False"),
])
def test_side_by_side_refuses_bad_input(draws, kwargs, error, says):
    with pytest.raises(error, match=says):
        plotting.side_by_side(*draws, **kwargs)
