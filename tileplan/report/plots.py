"""Every plot tileplan draws (paper experiments, ``plan --plots``, the HTML report) comes from here.

Functions return a matplotlib ``Figure`` built without pyplot (no global state, no display needed);
:func:`figure_bytes` renders it as PNG or SVG, :func:`save` writes both. Output is deterministic
(no timestamps, fixed SVG ids), so the same data gives the same files.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import matplotlib.patches
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from tileplan.report.files import write_bytes_atomic

_RC: dict[str, Any] = {"svg.hashsalt": "tileplan", "font.size": 9, "axes.titlesize": 10, "axes.grid": True,
       "grid.alpha": 0.3, "legend.fontsize": 8, "legend.frameon": False}


def _figure(n_categories: int = 0, *, height: float = 3.6) -> Figure:
    width = min(22.0, max(6.0, 0.28 * n_categories + 2.0))
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        fig = Figure(figsize=(width, height), layout="constrained")
    return fig


def _wrap(fig: Figure, title: str, share: float = 0.8) -> str:
    """``title`` broken into lines that fit ``share`` of the figure's width (about 9 px per character
    at the 10-point title size), so no title is clipped."""
    chars = max(20, int(fig.get_size_inches()[0] * fig.dpi * share / 9.0))
    return "\n".join(textwrap.wrap(title, chars)) if len(title) > chars else title


def _axes(fig: Figure, title: str, xlabel: str, ylabel: str):  # type: ignore[no-untyped-def]
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        ax = fig.add_subplot()
    ax.set_title(_wrap(fig, title))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    ax.set_axisbelow(True)
    return ax


def _category_axis(ax, categories: Sequence[str]) -> None:  # type: ignore[no-untyped-def]
    ax.set_xticks(range(len(categories)))
    rotate = len(categories) > 6 or max((len(c) for c in categories), default=0) > 10
    ax.set_xticklabels(categories, rotation=90 if rotate else 0, fontsize=7 if len(categories) > 30 else 8)
    ax.set_xlim(-0.6, len(categories) - 0.4)


@dataclass(frozen=True)
class RoofPoint:
    """One layer (or group) on a roofline: operational intensity and attained performance."""

    label: str
    intensity: float  # operations per DRAM byte
    performance: float  # operations per second (in the plot's unit)
    series: str = "layers"


@dataclass(frozen=True)
class Roof:
    """A roof: a compute peak and a memory bandwidth (performance unit per (operations/byte))."""

    label: str
    peak: float
    bandwidth: float
    dashed: bool = False


def roofline(points: Sequence[RoofPoint], roofs: Sequence[Roof], *, title: str,
             xlabel: str = "operational intensity (MAC / DRAM byte)",
             ylabel: str = "performance (GMAC/s)", annotate: bool = False) -> Figure:
    """Log-log roofline (TSO Fig. 11, e-PlaNNer Fig. 5.2): each roof is min(peak, bandwidth x intensity);
    each point is a layer. Points are coloured by ``series``."""
    fig = _figure(height=4.2)
    fig.set_size_inches(6.5, 4.2)
    ax = _axes(fig, title, xlabel, ylabel)
    xs = [p.intensity for p in points if p.intensity > 0] or [1.0]
    lo = min(xs + [r.peak / r.bandwidth for r in roofs]) / 4
    hi = max(xs + [r.peak / r.bandwidth for r in roofs]) * 4
    grid = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    for r in roofs:
        ax.plot(grid, [min(r.peak, r.bandwidth * x) for x in grid], linestyle="--" if r.dashed else "-",
                linewidth=1.4, label=r.label)
    series = list(dict.fromkeys(p.series for p in points))
    for s in series:
        sel = [p for p in points if p.series == s and p.intensity > 0 and p.performance > 0]
        ax.scatter([p.intensity for p in sel], [p.performance for p in sel], s=14, alpha=0.8, label=s, zorder=3)
        if annotate:
            for p in sel:
                ax.annotate(p.label, (p.intensity, p.performance), fontsize=6, xytext=(2, 2),
                            textcoords="offset points")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.legend(loc="lower right")
    return fig


def stacked_bars(categories: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str,
                 ylabel: str, xlabel: str = "", normalise: bool = False) -> Figure:
    """One bar per category, stacked by series (e.g. DRAM traffic by operand, time by load/store/MAC).
    ``normalise`` shows each bar as shares summing to 1."""
    fig = _figure(len(categories))
    ax = _axes(fig, title, xlabel, ylabel)
    totals = [sum(float(v[i]) for v in series.values()) for i in range(len(categories))]
    bottom = [0.0] * len(categories)
    for name, values in series.items():
        vals = [float(v) / t if normalise and t else float(v) for v, t in zip(values, totals, strict=True)]
        ax.bar(range(len(categories)), vals, bottom=bottom, label=name, width=0.8)
        bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
    _category_axis(ax, categories)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def grouped_bars(categories: Sequence[str], series: Mapping[str, Sequence[float]], *, title: str, ylabel: str,
                 xlabel: str = "", log: bool = False, reference: float | None = None) -> Figure:
    """Bars side by side per category, one colour per series (e.g. each strategy per network);
    ``reference`` draws a horizontal line (e.g. 1.0 for normalised results)."""
    fig = _figure(len(categories) * max(1, len(series)) // 2)
    ax = _axes(fig, title, xlabel, ylabel)
    k = max(1, len(series))
    width = 0.8 / k
    for j, (name, values) in enumerate(series.items()):
        xs = [i - 0.4 + width * (j + 0.5) for i in range(len(categories))]
        ax.bar(xs, [float(v) for v in values], width=width, label=name)
    if reference is not None:
        ax.axhline(reference, color="black", linewidth=0.8)
    if log:
        ax.set_yscale("log")
    _category_axis(ax, categories)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def bar_panels(categories: Sequence[str], panels: Sequence[tuple[str, Mapping[str, Sequence[float]]]], *,
               title: str, xlabel: str = "", log: bool = False) -> Figure:
    """Grouped bars in side-by-side panels that share the categories, one panel per unit: ``panels``
    is ``[(ylabel with its unit, {series: values}), ...]``, so no axis mixes units (kB beside %,
    uJ beside cycles)."""
    fig = _figure(max(len(categories) * len(panels), 8))
    fig.set_size_inches(max(fig.get_size_inches()[0], 3.4 * len(panels) + 1.0), fig.get_size_inches()[1])
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (ylabel, series) in zip(axes, panels, strict=True):
        k = max(1, len(series))
        width = 0.8 / k
        for j, (name, values) in enumerate(series.items()):
            xs = [i - 0.4 + width * (j + 0.5) for i in range(len(categories))]
            ax.bar(xs, [float(v) for v in values], width=width, label=name)
        if log:
            ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_xlabel(xlabel)
        ax.grid(True, alpha=0.3)
        ax.set_axisbelow(True)
        _category_axis(ax, categories)
        if k > 1:
            _legend_above_bars(ax, k, log)
    fig.suptitle(_wrap(fig, title, 0.95))
    return fig


def _legend_above_bars(ax: Axes, series: int, log: bool) -> None:
    """A legend of ``series`` entries in two columns at the top of ``ax``, with the y axis raised so
    that the tallest bar ends below it (``loc="best"`` covers a bar when every bar is tall)."""
    rows = -(-series // 2)
    share = min(0.6, 0.07 * rows + 0.06)  # of the axes' height the legend takes, at the rc font size
    bottom, top = ax.get_ylim()
    if log:
        span = math.log10(top) - math.log10(bottom)
        ax.set_ylim(bottom, 10 ** (math.log10(top) + span * share / (1 - share)))
    else:
        ax.set_ylim(bottom, top + (top - bottom) * share / (1 - share))
    ax.legend(loc="upper center", ncol=min(2, series))


def lines(x: Sequence[float], series: Mapping[str, Sequence[float]], *, title: str, xlabel: str, ylabel: str,
          logx: bool = False, logy: bool = False, xticks: Sequence[str] | None = None) -> Figure:
    """A metric against a sweep parameter, one line per series (e.g. DRAM access vs buffer size);
    ``nan`` values leave gaps."""
    fig = _figure()
    ax = _axes(fig, title, xlabel, ylabel)
    for name, values in series.items():
        ax.plot(list(x), [float(v) for v in values], marker="o", markersize=3, linewidth=1.2, label=name)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if xticks is not None:
        ax.set_xticks(list(x))
        ax.set_xticklabels(list(xticks), rotation=45 if len(xticks) > 8 else 0)
    ax.legend(loc="best")
    return fig


def scatter(x: Sequence[float], y: Sequence[float], *, title: str, xlabel: str, ylabel: str,
            labels: Sequence[str] | None = None, fit: bool = True) -> Figure:
    """Points (x, y), optionally labelled, with a least-squares line (e.g. modelled vs measured time)."""
    fig = _figure()
    fig.set_size_inches(5.5, 4.2)
    ax = _axes(fig, title, xlabel, ylabel)
    xs, ys = [float(v) for v in x], [float(v) for v in y]
    ax.scatter(xs, ys, s=16, zorder=3)
    if labels is not None:
        for xi, yi, lab in zip(xs, ys, labels, strict=True):
            ax.annotate(lab, (xi, yi), fontsize=6, xytext=(2, 2), textcoords="offset points")
    if fit and len(xs) >= 2 and max(xs) > min(xs):
        n = len(xs)
        mx, my = sum(xs) / n, sum(ys) / n
        slope = sum((a - mx) * (b - my) for a, b in zip(xs, ys, strict=True)) / sum((a - mx) ** 2 for a in xs)
        ends = [min(xs), max(xs)]
        ax.plot(ends, [my + slope * (e - mx) for e in ends], color="gray", linewidth=1, label="least squares")
        ax.legend(loc="best")
    return fig


def graph_lanes(names: Sequence[str], inputs: Mapping[str, Sequence[str]]) -> dict[str, int]:
    """A lane (row) per layer of a DAG in topological order: a layer continues its first producer's lane
    when it is that lane's last layer, otherwise it takes the lowest lane whose last layer has every
    consumer placed (so a branch gets its own row and rows are reused once a branch has joined)."""
    consumers: dict[str, int] = dict.fromkeys(names, 0)
    for name in names:
        for src in inputs.get(name, ()):
            consumers[src] = consumers.get(src, 0) + 1
    placed: dict[str, int] = dict.fromkeys(names, 0)
    tail: list[str | None] = []  # last layer on each lane
    lane: dict[str, int] = {}
    for name in names:
        srcs = list(inputs.get(name, ()))
        for src in srcs:
            placed[src] += 1
        first = srcs[0] if srcs else None
        if first is not None and tail[lane[first]] == first:
            chosen = lane[first]
        else:
            free = [i for i, t in enumerate(tail) if t is None or placed[t] >= consumers[t]]
            chosen = free[0] if free else len(tail)
            if chosen == len(tail):
                tail.append(None)
        tail[chosen] = name
        lane[name] = chosen
    return lane


def network_graph(names: Sequence[str], inputs: Mapping[str, Sequence[str]], *, title: str,
                  groups: Sequence[Sequence[str]] = (), colours: Mapping[str, str] | None = None,
                  legend: Mapping[str, str] | None = None) -> Figure:
    """The layer graph left to right (one column per layer in topological order, branches on their own
    rows, see :func:`graph_lanes`) with every fusion group of two or more layers drawn as a shaded box
    over its layers. ``colours`` maps a layer to a colour; ``legend`` maps a label to a colour."""
    lane = graph_lanes(names, inputs)
    x = {n: i for i, n in enumerate(names)}
    rows = max(lane.values(), default=0) + 1
    fig = _figure(len(names), height=min(8.0, 1.6 + 0.55 * rows))
    ax = _axes(fig, title, "layers in execution order", "")
    ax.grid(False)
    for name in names:
        for src in inputs.get(name, ()):
            ax.plot([x[src], x[name]], [lane[src], lane[name]], color="0.55", linewidth=0.8, zorder=1)
    for j, group in enumerate(g for g in groups if len(g) > 1):
        xs = [x[n] for n in group if n in x]
        ys = [lane[n] for n in group if n in lane]
        if xs:
            ax.add_patch(matplotlib.patches.FancyBboxPatch(
                (min(xs) - 0.35, min(ys) - 0.3), max(xs) - min(xs) + 0.7, max(ys) - min(ys) + 0.6,
                boxstyle="round,pad=0.02", alpha=0.18, color=f"C{j % 10}", zorder=0,
                label="fusion group" if j == 0 else None))
    cs = [(colours or {}).get(n, "C0") for n in names]
    ax.scatter([x[n] for n in names], [lane[n] for n in names], s=22, c=cs, zorder=3)
    for label, colour in (legend or {}).items():
        ax.scatter([], [], s=22, c=colour, label=label)
    _category_axis(ax, names)
    ax.set_yticks(range(rows))
    ax.set_yticklabels([f"branch {r}" if r else "trunk" for r in range(rows)])
    ax.set_ylim(rows - 0.4, -0.6)
    if legend or any(len(g) > 1 for g in groups):
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


#: Bare unit names: a y label made of two of them ("kB / %") mixes units on one axis.
_UNITS = {"kb", "mb", "gb", "b", "bytes", "%", "uj", "mj", "pj", "j", "cycles", "mcycles", "kcycles", "s", "ms", "us",
          "gmac/s", "macs", "words"}


def _numeric(tick: str) -> bool:
    if "10^" in tick:
        return True
    try:
        float(tick.replace("\u2212", "-").replace(",", ""))
    except ValueError:
        return False
    return True


def figure_titles(fig: Figure) -> list[str]:
    """The figure's title texts: its suptitle, then every axes title (empty ones left out)."""
    sup = getattr(fig, "_suptitle", None)  # matplotlib keeps the suptitle here (no public getter before 3.10)
    titles = [sup.get_text()] if sup is not None and sup.get_text() else []
    return titles + [ax.get_title() for ax in fig.axes if ax.get_title()]


def figure_problems(fig: Figure) -> list[str]:
    """What makes ``fig`` hard to read, as sentences (empty: none): an axes without a y label, a
    y label that joins two units ("kB / %", "uJ / Mcycles": draw two panels, :func:`bar_panels`),
    no title, a title that does not fit in the figure, or a legend inside an axes that covers one of
    its bars. Renders the figure once (Agg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    problems: list[str] = []
    canvas = FigureCanvasAgg(fig)
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        canvas.draw()
    renderer = canvas.get_renderer()
    width = fig.bbox.width
    sup = getattr(fig, "_suptitle", None)  # matplotlib keeps the suptitle here (no public getter before 3.10)
    titles = [sup] if sup is not None and sup.get_text() else []
    for i, ax in enumerate(fig.axes):
        label = ax.get_ylabel().strip()
        ticks = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
        if not label and any(_numeric(t) for t in ticks):
            problems.append(f"axes {i} has numbers but no y label (say what is plotted, in which unit)")
        parts = [p.strip().lower() for p in label.replace("(", " ").replace(")", " ").split(" / ")]
        if len(parts) > 1 and all(p in _UNITS for p in parts):
            problems.append(f"axes {i}: y label {label!r} mixes units on one axis (use two panels)")
        if ax.get_title():
            titles.append(ax.title)
        covered = _bars_under_legend(ax, renderer)
        if covered:
            problems.append(f"axes {i}: the legend covers {covered} bar(s) (move it out of the data or raise the "
                            f"y axis)")
    if not titles:
        problems.append("the figure has no title")
    for t in titles:
        box = t.get_window_extent(renderer)
        if box.x0 < -1 or box.x1 > width + 1:
            problems.append(f"title {t.get_text()!r} is wider than the figure ({box.width:.0f} > {width:.0f} px)")
    return problems


def _bars_under_legend(ax: Axes, renderer: Any) -> int:
    """How many of ``ax``'s bars (rectangles of non-zero height) the legend overlaps by more than 2 px
    (0 when the legend is outside the axes or there is none)."""
    legend = ax.get_legend()
    if legend is None:
        return 0
    box, area = legend.get_window_extent(renderer), ax.get_window_extent(renderer)
    if box.x0 >= area.x1 - 1 or box.x1 <= area.x0 + 1 or box.y0 >= area.y1 - 1 or box.y1 <= area.y0 + 1:
        return 0
    count = 0
    for patch in ax.patches:
        if isinstance(patch, matplotlib.patches.Rectangle) and patch.get_height() > 0:
            bar = patch.get_window_extent(renderer)
            if min(box.x1, bar.x1) - max(box.x0, bar.x0) > 2 and min(box.y1, bar.y1) - max(box.y0, bar.y0) > 2:
                count += 1
    return count


def figure_bytes(fig: Figure, fmt: str) -> bytes:
    """The figure rendered as ``png`` (150 dpi) or ``svg`` (no timestamp)."""
    buf = io.BytesIO()
    metadata: dict[str, str | None] = {"Date": None} if fmt == "svg" else {"Software": None}
    with matplotlib.rc_context(_RC):  # type: ignore[arg-type]
        fig.savefig(buf, format=fmt, dpi=150, metadata=metadata)
    return buf.getvalue()


def svg_text(fig: Figure) -> str:
    """The figure as an SVG document (for inlining in HTML)."""
    return figure_bytes(fig, "svg").decode()


def save(fig: Figure, folder: str | Path, name: str) -> list[Path]:
    """Write ``name.png`` and ``name.svg`` into ``folder`` (each whole or not at all)."""
    paths = []
    for fmt in ("png", "svg"):
        path = Path(folder) / f"{name}.{fmt}"
        write_bytes_atomic(path, figure_bytes(fig, fmt))
        paths.append(path)
    return paths
