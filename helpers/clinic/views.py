"""The debugging clinic's before/after views: the ladder table and plot, and the fault widget (lesson 07).

helpers.clinic re-exports every public name here.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from helpers._validate import short
from helpers.clinic.runs import Run, Speed, train
from helpers.clinic.script import FAULTS, ONE_PROCESS
from helpers.errors import WIDTH, wrapped


@dataclass(frozen=True)
class Rung:
    """One row of the before/after table: the fix just made, and what the script measured after it (lesson 07)."""

    label: str
    speed: Speed | None = None
    run: Run | None = None
    evidence: str = ""

    def __post_init__(self) -> None:
        for name in ("label", "evidence"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str, got {short(getattr(self, name))}")


LABEL_WIDTH = 40  # the table's label column at most: the numbers take 34 more, the evidence the rest of WIDTH


def _cell(value: float | None, form: str) -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, form)


def ladder_table(rungs: Sequence[Rung]) -> str:
    """The before/after table as aligned text: samples/s, data-wait share, balanced accuracy, minority recall, evidence (lesson 07)."""
    if not rungs or not all(isinstance(r, Rung) for r in rungs):
        raise TypeError(f"rungs must be a non-empty sequence of Rung, got {short(rungs)}")
    width = min(max(len("after"), *(len(r.label) for r in rungs)), LABEL_WIDTH)
    lines = [f"{'after':<{width}}  {'samples/s':>9} {'wait':>4} {'bal.acc':>7} {'min.rec':>7}  evidence"]
    for r in rungs:
        speed, run = r.speed, r.run
        if len(r.label) > width:  # a label too long for its column gets a line of its own, its numbers below it
            lines.append(wrapped(r.label, WIDTH, hanging=2))
        row = (f"{r.label if len(r.label) <= width else '':<{width}}  {_cell(speed and speed.samples_per_s, ',.0f'):>9} {_cell(speed and speed.data_wait_share, '.0%'):>4} "
               f"{_cell(run and run.balanced_accuracy, '.3f'):>7} {_cell(run and run.minority_recall, '.3f'):>7}  ")
        lines.append(row + wrapped(r.evidence, max(WIDTH - len(row), 20)).replace("\n", "\n" + " " * len(row)))
    return "\n".join(lines)


def plot_ladder(rungs: Sequence[Rung], title: str = "") -> Any:
    """Two panels over the fixes: samples/s with the data-wait share, and balanced accuracy with minority recall (lesson 07)."""
    import matplotlib.pyplot as plt

    if not rungs or not all(isinstance(r, Rung) for r in rungs):
        raise TypeError(f"rungs must be a non-empty sequence of Rung, got {short(rungs)}")
    fig, (speed_ax, score_ax) = plt.subplots(1, 2, figsize=(11, 4.4), layout="constrained")  # room for the title and labels
    timed = [r for r in rungs if r.speed is not None]  # each panel shows only the rows it has numbers for
    speed_ax.bar(range(len(timed)), [r.speed.samples_per_s for r in timed], color="tab:blue", label="samples/s")
    share_ax = speed_ax.twinx()
    share_ax.plot(range(len(timed)), [100 * r.speed.data_wait_share for r in timed], "o-", color="tab:orange", label="waiting for data (%)")
    share_ax.set(ylim=(0, 135), yticks=range(0, 101, 25), ylabel="% of each step waiting for data")
    share_ax.grid(False)
    top = max([r.speed.samples_per_s for r in timed], default=1.0)
    speed_ax.set(ylim=(0, 1.35 * top), ylabel="training samples/s (median of rounds)", title="Speed")  # the legend sits above the bars
    scored = [r for r in rungs if r.run is not None]
    for key, mark, name in (("balanced_accuracy", "o-", "balanced accuracy"), ("minority_recall", "s--", "minority recall")):
        score_ax.plot(range(len(scored)), [getattr(r.run, key) for r in scored], mark, label=name)
    score_ax.set(ylim=(0, 1.35), yticks=np.linspace(0, 1, 5), ylabel="score on the balanced held-out stream", title="What the model learned")
    score_ax.legend(loc="upper left", fontsize=9, ncol=2)
    for ax, shown in ((speed_ax, timed), (score_ax, scored)):
        ax.set_xticks(range(len(shown)), [r.label for r in shown], rotation=35, ha="right", fontsize=9)
    handles = speed_ax.get_legend_handles_labels()[0] + share_ax.get_legend_handles_labels()[0]
    speed_ax.legend(handles, [h.get_label() for h in handles], loc="upper left", fontsize=9, ncol=2)
    if title:
        fig.suptitle(title)
    return fig


def fault_widget(planted: Run, fixed: Run, rank_outcomes: dict[str, str]) -> Any:
    """A slider per fault (planted / fixed): the one-process faults rerun the script live; the rank faults show this run's 2-rank results (lesson 07)."""
    for name, value in (("planted", planted), ("fixed", fixed)):
        if not isinstance(value, Run):
            raise TypeError(f"{name} must be a Run from clinic.train, got {short(value)}")
    if not isinstance(rank_outcomes, dict):
        raise TypeError(f"rank_outcomes must be a dict of what 2 ranks showed, got {short(rank_outcomes)}")
    if set(rank_outcomes) != {"uneven-shards", "no-set-epoch", "none"}:
        raise ValueError("rank_outcomes must map 'uneven-shards', 'no-set-epoch' and 'none' to what 2 ranks showed, got "
                         f"the keys {sorted(rank_outcomes, key=repr)}")
    for key, text in rank_outcomes.items():
        if not isinstance(text, str):
            raise TypeError(f"rank_outcomes[{key!r}] must be a str (what 2 ranks showed), got {short(text)}")
    import ipywidgets as widgets
    import matplotlib.pyplot as plt
    style, layout = {"description_width": "17em"}, widgets.Layout(width="34em")
    sliders = {name: widgets.SelectionSlider(options=("planted", "fixed"), value="planted", description=name,
                                             continuous_update=False, style=style, layout=layout) for name in FAULTS}
    for slider in sliders.values():
        # ipywidgets 8 gives the views of IntSlider and FloatSlider the class "jupyter-widgets" but not SelectionSlider's:
        # added, so that these sliders carry the classes of every other slider in the course (the browser test finds them so)
        slider.add_class("jupyter-widgets")
    if not torch.accelerator.is_available():  # the fault pins for a CUDA copy: without an accelerator both positions run the same code
        sliders["pin-on-the-fly"].description = "pin-on-the-fly (no effect: no GPU)"
    output = widgets.Output()
    inert = set() if torch.accelerator.is_available() else {"pin-on-the-fly"}  # the same code either way without a GPU

    def run_key(faults_fixed: frozenset[str]) -> frozenset[str]:
        """The one-process faults that change what runs here."""
        return (faults_fixed & frozenset(ONE_PROCESS)) - inert

    live = {run_key(run.fixed): run for run in (planted, fixed)}  # runs already made: no need to repeat them

    def show(_: Any = None) -> None:
        chosen = frozenset(name for name, slider in sliders.items() if slider.value == "fixed")
        one_process = run_key(chosen)
        if one_process not in live:
            live[one_process] = train(one_process)
        run = live[one_process]
        ranks = ("uneven-shards" if "uneven-shards" not in chosen else "no-set-epoch" if "no-set-epoch" not in chosen else "none")
        with output:
            output.clear_output(wait=True)
            planted_now = [name for name in ONE_PROCESS if name not in chosen]
            print(wrapped(f"one process, planted: {', '.join(planted_now) or 'nothing'}; evaluation read {run.eval_samples} "
                          f"samples for {run.eval_distinct} distinct", hanging=4))
            print("2 ranks (measured earlier in this lesson, not rerun here):")
            print(wrapped(f"    {rank_outcomes[ranks]}", hanging=4))
            fig, axes = plt.subplots(1, 5, figsize=(12, 3.2), layout="constrained")
            names = ["as given", "all fixed", "your choice"]
            runs = (planted, fixed, run)
            panels = [(np.array([getattr(r, key) for r in runs], dtype=float), form, label)
                      for key, form, label in (("samples_per_s", ",.0f", "samples/s (one run)"),
                                               ("data_wait_share", ".0%", "waiting for data"),
                                               ("balanced_accuracy", ".2f", "balanced accuracy"),
                                               ("minority_recall", ".2f", "minority recall"))]
            # each worker's own memory at the run's end (median): what list-backed costs; 0 without workers
            panels.append((np.array([float(np.median(r.worker_uss_mib)) if r.worker_uss_mib else 0.0 for r in runs]),
                           ".0f", "worker memory, USS MiB"))
            for ax, (values, form, label) in zip(axes, panels):
                bars = ax.bar(names, values, color=["tab:red", "tab:green", "tab:blue"])
                memory = label.startswith("worker")
                if memory:  # a run without workers has no worker memory: say so on its empty bar
                    for bar, shown_run in zip(bars, runs):
                        if not shown_run.worker_uss_mib:
                            ax.annotate("no workers", (bar.get_x() + bar.get_width() / 2, 0), ha="center", va="bottom",
                                        fontsize=8, rotation=90, xytext=(0, 3), textcoords="offset points")
                shown = "no workers" if memory and not run.worker_uss_mib else format(values[2], form)
                ax.set_title(f"{label}\nyour choice: {shown}", fontsize=10)
                ax.tick_params(axis="x", labelsize=8, rotation=20)
                if form in (".0%", ".2f"):
                    ax.set_ylim(0, 1)
            fig.suptitle("as given and all fixed: this lesson's runs; your choice: run live the first time it is chosen",
                         fontsize=10)
            plt.show()

    for slider in sliders.values():
        slider.observe(show, names="value")
    show()
    return widgets.VBox([*sliders.values(), output])
