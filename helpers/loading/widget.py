"""Lesson 03's benchmark widget: sliders for a loader's settings and item costs, and a bar chart of the runs (lesson 03).

helpers.loading re-exports it.
"""
from __future__ import annotations

import warnings
from typing import Any

from torch.utils.data import DataLoader

from helpers._validate import as_int
from helpers.loading.benchmark import benchmark_loader, warmup_for
from helpers.workloads import SlowDataset


def benchmark_widget(num_items: int = 2048, num_batches: int = 8) -> Any:
    """Sliders for num_workers, batch size and per-item CPU / I/O cost, a Run button, and a bar chart of the runs (lesson 03)."""
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    num_items = as_int("num_items", num_items, minimum=1)
    num_batches = as_int("num_batches", num_batches, minimum=1)
    style, layout = {"description_width": "9em"}, widgets.Layout(width="32em")  # room for the whole label
    sliders = {
        "num_workers": widgets.IntSlider(value=2, min=0, max=8, description="num_workers", style=style, layout=layout),
        "batch_size": widgets.IntSlider(value=16, min=1, max=64, description="batch_size", style=style, layout=layout),
        "cpu_ms": widgets.FloatSlider(value=1.0, min=0.0, max=5.0, step=0.5, description="CPU ms per item", style=style, layout=layout),
        "io_ms": widgets.FloatSlider(value=0.0, min=0.0, max=5.0, step=1.0, description="I/O ms per item", style=style, layout=layout),
    }
    button, output = widgets.Button(description="Run benchmark", button_style="primary"), widgets.Output()
    history: list[tuple[str, float]] = []

    def run(_: Any = None) -> None:
        value = {name: slider.value for name, slider in sliders.items()}
        warmup = warmup_for(value["num_workers"])  # the prefetch burst is start-up, not steady state
        needed = (warmup + num_batches) * value["batch_size"]
        loader = DataLoader(SlowDataset(max(num_items, needed), cpu_ms=value["cpu_ms"], io_ms=value["io_ms"]),
                            batch_size=value["batch_size"], num_workers=value["num_workers"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the over-subscription warning: lesson 03 section 3 shows it
            result = benchmark_loader(loader, num_batches=num_batches, warmup_batches=warmup)
        del loader
        history.append((f"#{len(history) + 1}\nw={value['num_workers']} b={value['batch_size']}\n"
                        f"cpu {value['cpu_ms']:g} io {value['io_ms']:g}", result.samples_per_s))
        shown = history[-6:]
        with output:
            output.clear_output(wait=True)
            fig, ax = plt.subplots()
            colors = ["tab:blue"] * (len(shown) - 1) + ["tab:orange"]
            ax.bar(range(len(shown)), [rate for _, rate in shown], color=colors)
            ax.set_xticks(range(len(shown)), [name for name, _ in shown], fontsize=8)
            ax.set(xlabel="run (w = num_workers, b = batch_size, ms per item); newest in orange",
                   ylabel="samples/s (steady state)",
                   title=f"Run #{len(history)}: {result.samples_per_s:,.0f} samples/s after {warmup} warm-up batches; "
                         f"first batch {result.first_batch_s * 1000:.0f} ms")
            plt.show()

    button.on_click(run)
    for slider in sliders.values():
        slider.continuous_update = False  # rerun when a slider is released, not on every tick of a drag
        slider.observe(run, names="value")
    run()
    return widgets.VBox([*sliders.values(), button, output])
