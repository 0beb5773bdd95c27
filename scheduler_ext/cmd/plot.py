"""``simulate --plot PATH``: the run's timeline as a PNG (matplotlib).

Four panels over the steps, one line per strategy: resize success rate per
window, same-host resizes (cumulative), fleet utilisation per resource
class, and the reconcile window (servers holding more than their flavor
until the periodic reconcile trims them). The PNG's ``Series`` text entry
lists the plotted lines (panel: label), read back from the figure.
"""

from __future__ import annotations

import json
import os
from typing import Any, Mapping

from scheduler_ext.cmd.common import UsageError, write_atomically

PANELS = ("resize success rate", "same-host resizes", "fleet utilisation",
          "reconcile window")


def require() -> None:
    """UsageError unless matplotlib can be imported (checked before work)."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UsageError("--plot needs matplotlib, which is not installed: "
                         "pip install 'scheduler-ext[plot]'") from None


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


def _rate(points: list[dict[str, Any]]) -> tuple[list[int], list[float]]:
    """Resize success rate per window between consecutive samples."""
    xs, ys = [], []
    for a, b in zip(points, points[1:]):
        tried = b["resize_attempted"] - a["resize_attempted"]
        if tried:
            xs.append(b["step"])
            ys.append((b["resize_ok"] - a["resize_ok"]) / tried)
    return xs, ys


def draw(path: str, timelines: Mapping[str, list[dict[str, Any]]],
         title: str) -> list[str]:
    """Write the PNG; returns the series drawn ("panel: label")."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    rate, same, util, window = axes.flat
    for strategy, points in timelines.items():
        steps = [p["step"] for p in points]
        rate.plot(*_rate(points), label=strategy)
        same.plot(steps, [p["resize_same_host_ok"] for p in points], label=strategy)
        classes = sorted({rc for p in points for rc in p["utilisation"]})
        for rc in classes:
            util.plot(steps, [p["utilisation"].get(rc, 0.0) for p in points],
                      label=f"{strategy} {rc}")
        window.plot(steps, [p["awaiting_reconcile"] for p in points],
                    label=strategy)
    for ax, name in zip(axes.flat, PANELS):
        ax.set_title(name)
        ax.legend(fontsize="small")
        ax.grid(True, alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("step")
    rate.set_ylabel("succeeded / attempted")
    same.set_ylabel("resizes kept on the same host")
    util.set_ylabel("used / capacity")
    window.set_ylabel("servers awaiting reconcile")
    fig.suptitle(title)
    fig.tight_layout()
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
