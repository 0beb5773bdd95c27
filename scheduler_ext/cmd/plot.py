"""``simulate --plot PATH``: the run's timeline (matplotlib), in the
format the extension names (.png, .svg, .pdf...).

Four panels over the steps, one colour per strategy (stock, ours): resize
success so far (cumulative succeeded / attempted), same-host resizes so
far, fleet utilisation per resource class (one line style per class), and
the reconcile window (servers holding more than their flavor until the
periodic reconcile trims them). The title names the run (hosts, sharing
providers, steps, seed, or the scenario file). The legends sit outside the
panels; a panel with nothing to show says so. A PNG's ``Series`` text entry
lists the plotted lines (panel: label), read back from the figure.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Mapping

from scheduler_ext.cmd.common import UsageError, write_atomically

PANELS = ("resize success, cumulative", "same-host resizes, cumulative",
          "fleet utilisation", "reconcile window")
#: the strategies' names on the plot, as in the table
LABELS = {"same_host": "ours", "stock": "stock"}
COLOURS = {"stock": "tab:red", "same_host": "tab:blue"}
STYLES: tuple[Any, ...] = ("-", "--", ":", "-.")


def require() -> None:
    """UsageError unless matplotlib can be imported (checked before work)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib, which is not installed: "
                         f"{sys.executable} -m pip install 'scheduler-ext[plot]'"
                         ) from None


def check_path(path: str) -> None:
    """UsageError unless matplotlib is installed and can write the format
    the extension of ``path`` names (checked before any work)."""
    require()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    formats = FigureCanvasAgg(Figure()).get_supported_filetypes()
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    if ext not in formats:
        raise UsageError(f"--plot {path}: the extension names no format "
                         f"matplotlib writes; use one of "
                         f".{', .'.join(sorted(formats))}")


def _success(points: list[dict[str, Any]]) -> tuple[list[int], list[float]]:
    """Resize success so far: succeeded / attempted, from the first step
    with an attempt."""
    xs, ys = [], []
    for p in points:
        if p["resize_attempted"]:
            xs.append(p["step"])
            ys.append(p["resize_ok"] / p["resize_attempted"])
    return xs, ys


def draw(path: str, timelines: Mapping[str, list[dict[str, Any]]],
         title: str) -> list[str]:
    """Write the plot; returns the series drawn ("panel: label")."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    rate, same, util, window = axes.flat
    classes = sorted({rc for points in timelines.values() for p in points
                      for rc in p["utilisation"]})
    for strategy, points in timelines.items():
        label, colour = LABELS.get(strategy, strategy), COLOURS.get(strategy)
        steps = [p["step"] for p in points]
        rate.plot(*_success(points), label=label, color=colour)
        same.plot(steps, [p["resize_same_host_ok"] for p in points], label=label,
                  color=colour)
        for rc, style in zip(classes, STYLES * len(classes)):
            util.plot(steps, [p["utilisation"].get(rc, 0.0) for p in points],
                      label=f"{label} {rc}", color=colour, linestyle=style)
        window.plot(steps, [p["awaiting_reconcile"] for p in points],
                    label=label, color=colour)
    _decorate(fig, axes, [LABELS.get(s, s) for s in timelines], classes, title)
    series = [f"{name}: {line.get_label()}"
              for ax, name in zip(axes.flat, PANELS) for line in ax.get_lines()]
    ext = os.path.splitext(path)[1].lower().lstrip(".")
    metadata: dict[str, str] | None = {"Title": title} if ext in ("png", "svg", "pdf") else None
    if ext == "png":        # PNG keeps any text entry: the series, for tests
        metadata = {"Title": title, "Series": json.dumps(series)}
    with write_atomically(path, "wb") as f:
        fig.savefig(f, format=ext, dpi=80, metadata=metadata)
    plt.close(fig)
    return series


def _decorate(fig: Any, axes: Any, strategies: list[str], classes: list[str],
              title: str) -> None:
    """Titles, labels, whole-number ticks on counts, and one legend below
    the panels (strategies by colour, classes by line style)."""
    from matplotlib.lines import Line2D
    from matplotlib.ticker import MaxNLocator
    rate, same, util, window = axes.flat
    for ax, name in zip(axes.flat, PANELS):
        ax.set_title(name)
        ax.grid(True, alpha=0.3)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        if not any(len(line.get_xdata()) for line in ax.get_lines()):
            ax.text(0.5, 0.5, "nothing in this run", ha="center", va="center",
                    transform=ax.transAxes, color="grey")
    for ax in (same, window):     # counts: whole ticks, from 0, at least 0..1
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        top = max([1.0] + [float(max(line.get_ydata(), default=0))
                           for line in ax.get_lines()])
        ax.set_ylim(0, top * 1.05)
    last = max([1.0] + [float(max(line.get_xdata(), default=0))
                        for ax in axes.flat for line in ax.get_lines()])
    rate.set_xlim(0, last)      # the axes share x: the run's steps, no more
    rate.set_ylim(-0.02, 1.02)
    util.set_ylim(0, 1.02)
    for ax in axes[1]:
        ax.set_xlabel("step")
    rate.set_ylabel("succeeded / attempted so far")
    same.set_ylabel("resizes kept on the same host")
    util.set_ylabel("used / capacity")
    window.set_ylabel("servers awaiting reconcile")
    fig.suptitle(title, fontsize="medium")
    colours = {label: COLOURS.get(s) for s, label in LABELS.items()}
    handles = [Line2D([], [], color=colours.get(label), label=label)
               for label in strategies]
    handles += [Line2D([], [], color="black", linestyle=style, label=rc)
                for rc, style in zip(classes, STYLES * len(classes))]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles),
               frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 0.97))
