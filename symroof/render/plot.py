"""Roofline plots with matplotlib's object API: no global state, headless, each function
taking an optional `ax` and returning it.

* `plot_roofline`: achievable FLOPs/s against arithmetic intensity on log-log axes, the
  HBM roof (and the network roof for analyses on a mesh), with analyses placed on it as
  points, one colour per series (its label, else its spec), the bound in its legend entry.
* `plot_sweep`: achieved FLOPs/s (or time) against one dim, one curve per analysis, with
  the exact critical value marked, e.g. the chapter's problem 3.

Axes that span two decades or more are logarithmic; ticks read in human units (TFLOPs/s
in the axis label, times as µs, ms, s); legend entries are short (long specs elided in the
middle, around the part that tells them apart); the threshold labels are moved until none
overlaps another, the legend or a curve, or leaves the axes.
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from pathlib import PurePath
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import numpy
import sympy
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.mathtext import MathTextParser
from matplotlib.transforms import Bbox

from ..errors import SymroofError
from ..resources import write_atomically
from .plot_labels import (
    NAME_CHARS,
    LinearTicks,
    legend_names,
    log_ticks,
    plain,
    seconds_tick,
    shared_mesh,
    si,
    si_prefix,
    size_text,
    spec_text,
    time_unit,
    use_log,
    use_log_x,
)

if TYPE_CHECKING:
    from matplotlib.artist import Artist
    from matplotlib.axes import Axes
    from matplotlib.legend import Legend
    from matplotlib.path import Path
    from matplotlib.text import Annotation
    from matplotlib.transforms import BboxBase
    from matplotlib.typing import LegendLocType
    from numpy.typing import ArrayLike

    from ..analysis import Analysis
    from ..hardware.machines import Machine
    from ..roofline.thresholds import Threshold

    # one analysis, or several (in a list or a tuple)
    Analyses: TypeAlias = Analysis | list[Analysis] | tuple[Analysis, ...]

# Where a label may go: its offset from its point (in points), and its horizontal alignment.
Candidate = tuple[tuple[float, float], Literal["left", "right"]]

ROOFLINE_NAME_CHARS = 44      # leaves room for ": compute-bound"
_DPI = 150


def _axes(ax: Axes | None) -> Axes:
    return ax if ax is not None else figure()


def figure(size: tuple[float, float] = (7, 4.5)) -> Axes:
    """The Axes of a Figure of its own (pyplot's global state stays untouched), made at the
    dpi `save` writes at, so that labels are placed where they will be drawn."""
    return Figure(figsize=size, dpi=_DPI, layout="constrained").add_subplot()


def _listed(analyses: Analyses) -> list[Analysis]:
    analyses = list(analyses) if isinstance(analyses, (list, tuple)) else [analyses]
    if not analyses:
        raise SymroofError("nothing to plot: give at least one analysis")
    return analyses


def _machine(a: Analysis) -> Machine:
    """The analysis's machine, which the plots have checked it has."""
    assert a.machine is not None, "a plot of an analysis without a machine"
    return a.machine


def _roof(a: Analysis) -> tuple[float, float]:
    """(peak FLOPs/s, HBM bandwidth): the roof a point lies under, checked to be there."""
    bandwidth = _machine(a).hbm_bw
    assert bandwidth is not None, "a roofline of an analysis without an HBM bandwidth"
    return float(a.peak_flops), float(bandwidth)


def _numbers(a: Analysis, what: str) -> None:
    free = a.free_dims
    if free:
        raise SymroofError(f"give sizes for {', '.join(free)} to place {what} on the plot (--set)")


def plot_roofline(analyses: Analyses, ax: Axes | None = None,
                  labels: Sequence[str] | None = None,
                  intensities: tuple[float, float] | None = None, bounds: bool = True,
                  extra: Sequence[Artist] = ()) -> Axes:
    """The classic roofline of the analyses' chip, with each analysis as a point.

    Args:
        analyses: one `Analysis` or several, on one chip, every dim with a size.
        ax: matplotlib Axes to draw on (a new Figure's when None).
        labels: a label per analysis (default: its spec, shortened). Points share a colour
            when they share a label (or, unlabelled, a spec: one spec at several sizes).
        intensities: (low, high) of the x axis; by default it spans the points and the
            critical intensities.
        bounds: whether each legend entry says its point's bound (not where a label names
            a series of points in both regimes, as validate's ops).
        extra: more legend entries, for what a caller draws besides.
    """
    analyses = _listed(analyses)
    _check_labels(labels, analyses)
    first = analyses[0]
    if first.machine is None or not first.has_peak or first.machine.hbm_bw is None:
        raise SymroofError("a roofline needs a chip (or a peak and an HBM bandwidth)")
    for a in analyses:
        _numbers(a, "it")
        if a.machine is None or a.machine.name != first.machine.name:
            raise SymroofError("a roofline is of one chip: plot analyses of different chips on separate plots")
        if not a.has_peak or a.machine.hbm_bw is None:
            raise SymroofError("a roofline needs a chip (or a peak and an HBM bandwidth)")
        if a.flops == 0:
            raise SymroofError(f"{spec_text(a)!r} does no FLOPs: there is no point for it on a roofline")
    ax = _axes(ax)
    # One roof per (peak, bandwidth): an int8 and a bf16 spec on one chip have different peaks.
    roofs = sorted({_roof(a) for a in analyses})
    networks = sorted({(float(a.peak_flops), float(a.critical_network_intensity))
                       for a in analyses if a.collectives})
    corners = [p / b for p, b in roofs] + [c for _, c in networks]
    points = [float(a.intensity) for a in analyses] + [float(a.network_intensity) for a in analyses if a.collectives]
    lo, hi = intensities or (min(corners + points) / 10, max(corners + points) * 10)
    x = numpy.logspace(numpy.log10(lo), numpy.log10(hi), 400)
    curves, notes = [], []
    for k, (peak, bw) in enumerate(roofs):
        critical = peak / bw
        # several roofs (an int8 and a bf16 spec; the vector unit's and the matrix unit's): told
        # apart by style and named by what runs under them
        style = ["-", "-.", ":"][k % 3]
        # (its points' marker beside it: o^D in the order of the roofs)
        named = f"{_roof_name([a for a in analyses if _roof(a) == (peak, bw)])} {'○△◇'[k % 3]} " \
            if len(roofs) > 1 else ""
        line, = ax.plot(x, numpy.minimum(peak, x * bw), color="black", lw=2 if k == 0 else 1.5, ls=style,
                        label=f"{named}roof: HBM {si(bw, 'B/s')}, peak {si(peak, 'FLOPs/s')}"
                        + (" (estimate)" if any(float(a.peak_flops) == peak and any(map(_machine(a).estimated, a.rates))
                                                for a in analyses) else ""))
        curves.append(line)
        ax.axvline(critical, color="black", ls=":", lw=1)
        note = ax.annotate(f"critical {critical:.1f} FLOPs/byte", (critical, peak), textcoords="offset points",
                           xytext=(4, -14), fontsize=8)
        notes.append((note, [offsets(4, -14), offsets(-4, -14, "right")]))
    for peak, critical in networks:
        link = peak / critical
        line, = ax.plot(x, numpy.minimum(peak, x * link), color="0.45", lw=1.5, ls="--",
                        label=f"network roof: {si(link, 'B/s')} effective (x: network intensity)")
        curves.append(line)
    names, title = legend_names(analyses, labels, ROOFLINE_NAME_CHARS)
    keys = labels if labels else [spec_text(a) for a in analyses]
    colours: dict[str, str] = {}
    placed: list[tuple[float, float]] = []
    for a, name, key in zip(analyses, names, keys):
        colour = colours.setdefault(key, f"C{len(colours) % 10}")
        bound = a.bound if isinstance(a.bound, str) else "balanced"
        y = float(a.achieved_flops_per_s)
        roof = roofs.index(_roof(a))
        # a point where another already is (add and multiply, at one intensity) is drawn as a
        # wider ring beneath it, so that both show
        under = sum(abs(numpy.log10(float(a.intensity) / px)) < 0.02 and abs(numpy.log10(y / py)) < 0.02
                    for px, py in placed)
        placed.append((float(a.intensity), y))
        faces: dict[str, Any] = dict(facecolors=to_rgba(colour, 0.4), edgecolors=colour, linewidths=1.5,
                                     zorder=3 - 0.1 * under)
        said = name if not bounds else f"{name}: {bound}-bound" if bound != "balanced" else f"{name}: balanced"
        ax.scatter([float(a.intensity)], [y], s=45 * (1 + 1.6 * under), marker="o^D"[roof % 3], label=said, **faces)
        if a.collectives:
            ax.scatter([float(a.network_intensity)], [y], marker="s", s=35, label=f"_{name}: network", **faces)
    ax.set_xscale("log")
    ax.set_yscale("log")
    log_ticks(ax.xaxis, si)
    top = max(peak for peak, _ in roofs)
    scale, prefix = si_prefix(top)
    log_ticks(ax.yaxis, lambda v: plain(v / scale))
    ax.set_xlabel("arithmetic intensity (FLOPs/byte)")
    ax.set_ylabel(f"achievable {prefix}FLOPs/s")
    dtypes = sorted({a.compute_dtypes[0].name for a in analyses if a.compute_dtypes})
    mesh = shared_mesh(analyses)
    ax.set_title(f"Roofline: {first.machine.name} ({', '.join(dtypes)}; dense peaks{f'; {mesh}' if mesh else ''})")
    ax.grid(True, which="both", alpha=0.3)
    extra = list(extra)
    if networks:
        extra.append(Line2D([], [], ls="", marker="s", markersize=6, color="0.45",
                            label="squares: points at their network intensity"))
    extra.append(Line2D([], [], ls=":", lw=1, color="black", label="dotted: critical intensity (peak / bandwidth)"))
    arrange(ax, ("lower right", "upper left", "center right", "lower center", "upper center"), curves, notes,
            fontsize=7, extra=extra, title=title)
    return ax


def plot_sweep(analyses: Analyses, dim: str, values: ArrayLike, ax: Axes | None = None,
               labels: Sequence[str] | None = None, quantity: str = "flops", xscale: str = "auto",
               yscale: str = "auto") -> Axes:
    """Achieved FLOPs/s (`quantity="flops"`) or T_lower (`"time"`) against one dim.

    Each analysis must leave `dim` free and give every other dim a size. The exact critical
    value of `dim` is marked on each curve where it lies among `values`. `xscale` and
    `yscale` are "linear", "log" or "auto": log where the data span two decades or more,
    except an x whose knees all lie past the first tenth of a linear axis (the chapter's
    B = 1 to 512) and achieved FLOPs/s over a linear x (a fraction of the peak reads best
    linear).
    """
    analyses = _listed(analyses)
    _check_labels(labels, analyses)
    if quantity not in ("flops", "time"):
        raise SymroofError("quantity is 'flops' (achieved FLOPs/s) or 'time' (T_lower)")
    for name, choice in (("xscale", xscale), ("yscale", yscale)):
        if choice not in ("auto", "linear", "log"):
            raise SymroofError(f"{name} is 'auto', 'linear' or 'log', not {choice!r}")
    xs = numpy.asarray(values, dtype=float)
    if xs.ndim != 1 or not len(xs) or not numpy.all(numpy.isfinite(xs) & (xs > 0)):
        raise SymroofError(f"the values of {dim} to sweep must be positive sizes, at least one")
    for a in analyses:
        if a.machine is None or not a.has_peak:
            raise SymroofError("a sweep needs a chip (or a peak and an HBM bandwidth)")
        if dim not in a.dims:
            raise SymroofError(f"{dim} is not a named dim of {spec_text(a)!r}")
        if dim in a.values:
            raise SymroofError(f"{dim} has a size ({a.values[dim]}) in {spec_text(a)!r}: leave it free to sweep it")
        free = [d for d in a.free_dims if d != dim]
        if free:
            raise SymroofError(f"give sizes for {', '.join(free)} to sweep {dim} (--set)")
        if quantity == "flops" and a.flops == 0:
            raise SymroofError(f"{spec_text(a)!r} does no FLOPs: sweep its time instead (--time)")
    ax = _axes(ax)
    field = "achieved_flops_per_s" if quantity == "flops" else "t_lower"
    names, title = legend_names(analyses, labels, NAME_CHARS)
    peaks, curves, knees, everything, lines = [], [], [], [], []
    for a, name in zip(analyses, names):
        ys = numpy.broadcast_to(a.evaluate(field, **{dim: xs}), xs.shape)
        line, = ax.plot(xs, ys, lw=2, label=name)
        curves.append(line)
        everything.append(ys)
        peaks.append(_peak(a, dim, xs))
        knee = _knee(a.threshold(dim))
        # a knee outside the swept sizes is not marked: it would stretch the axis past the data
        if knee is not None and xs.min() <= knee[0] <= xs.max():
            value, roof = knee
            top = float(a.evaluate("achieved_flops_per_s", **{dim: numpy.array([xs.max()])})[0])
            if not roof and a.collectives and top < peaks[-1] * (1 - 1e-6):
                roof = " (then network-bound)"     # past it the network holds it under the peak
            y = peaks[-1] if quantity == "flops" else float(a.evaluate("t_lower", **{dim: numpy.array([value])})[0])
            knees.append((value, roof, y, line.get_color()))
            everything.append(numpy.array([y]))
    ys = numpy.concatenate(everything)
    if quantity == "flops":  # the peaks: lines the legend keeps clear of, as of the curves
        for peak in sorted(set(peaks)):
            lines.append(ax.axhline(peak, color="black", ls=":", lw=1, label=f"peak {si(peak, 'FLOPs/s')}"))
    notes = []
    for value, roof, y, colour in knees:
        lines.append(ax.axvline(value, color=colour, ls="--", lw=1))
        note = ax.annotate(f"{dim} = {size_text(value)}{roof}", (value, y), textcoords="offset points",
                           xytext=(5, -14), color=colour, fontsize=8)
        if quantity == "flops":     # under the peak, beside the dashed line
            notes.append((note, [offsets(5, -14), offsets(-5, -14, "right")]))
        else:                       # right of the elbow, below the curve; else left, above it
            notes.append((note, [offsets(6, -14), offsets(-6, 6, "right", step=+12)]))
    if use_log_x(xscale, xs, [value for value, *_ in knees]):
        ax.set_xscale("log")
        log_ticks(ax.xaxis, si)
    else:
        ax.xaxis.set_major_formatter(LinearTicks(1.0, compact=True))
    # achieved FLOPs/s on a linear x reads as a fraction of the peak: linear too
    log_y = use_log(yscale, ys) and (quantity == "time" or ax.get_xscale() == "log" or yscale == "log")
    if log_y:
        ax.set_yscale("log")
    if quantity == "flops":             # one unit for the axis, from the peak: TFLOPs/s
        scale, prefix = si_prefix(max(peaks))
        ax.set_ylabel(f"achieved {prefix}FLOPs/s (FLOPs / T_lower)")
        ax.set_ylim(None if log_y else 0, max(peaks) * 1.1)
        ticks = lambda v: plain(v / scale)  # noqa: E731
    elif log_y:                         # each tick its unit: 10 µs, 1 ms, 1 s
        ax.set_ylabel("T_lower (time)")
        ticks = seconds_tick
    else:                               # one unit, from the longest time
        scale, unit = time_unit(float(numpy.max(ys)))
        ax.set_ylabel(f"T_lower ({unit})")
    if log_y:
        log_ticks(ax.yaxis, ticks)
    else:
        ax.yaxis.set_major_formatter(LinearTicks(scale))
    ax.set_xlabel(f"{dim} (size)")
    chips = ", ".join(dict.fromkeys(_machine(a).name for a in analyses))
    mesh = shared_mesh(analyses)
    fixed = {k: v for k, v in analyses[0].values.items() if all(a.values.get(k) == v for a in analyses)}  # shared
    held = ", ".join(f"{k} = {v}" for k, v in fixed.items())
    ax.set_title(f"{'Achieved FLOPs/s' if quantity == 'flops' else 'Time'} against {dim} on {chips}"
                 + (f" ({mesh})" if mesh else "") + (f"; {held}" if held else ""))
    ax.grid(True, which="both" if log_y or ax.get_xscale() == "log" else "major", alpha=0.3)
    corners: tuple[LegendLocType, ...] = ("lower right", "center right", "upper left") if quantity == "flops" else \
        ("upper left", "center left", "lower right")
    dashed = "dashed: where each curve reaches its roof" if quantity == "flops" else "dashed: each curve's threshold"
    extra = [Line2D([], [], ls="--", lw=1, color="0.3", label=dashed)] if knees else []
    arrange(ax, corners, [*curves, *lines], notes, fontsize=8, extra=extra, title=title)
    return ax


def _peak(a: Analysis, dim: str, xs: numpy.ndarray) -> float:
    """The peak a sweep's curve approaches: the chip's for the work's dtype, or where the work
    mixes the vector and matrix units in proportions the swept dim moves (a norm's rsqrt a
    row against its per-element work), the most that mix reaches over the swept sizes."""
    peak = a.peak_flops
    if peak.is_number:
        return float(peak)
    free = {s.name: s for s in peak.free_symbols}
    if set(free) != {dim}:
        raise SymroofError(f"the peak of {spec_text(a)!r} depends on {', '.join(sorted(set(free) - {dim}))}: "
                           "give it a size (--set)")
    values = sympy.lambdify(free[dim], peak, "numpy")(xs)
    return float(numpy.max(numpy.broadcast_to(values, xs.shape)))


def _roof_name(under: Sequence[Analysis]) -> str:
    """What runs under a roof, where a plot has several: the vector unit's (elementwise
    work), the matrix unit's, or a mix, with the dtype."""
    dtype = next((a.compute_dtypes[0].name for a in under if a.compute_dtypes), "")
    if all(a.flops_vector == a.flops for a in under):
        unit = "vector unit"
    elif all(a.flops_vector == 0 for a in under):
        unit = "matrix unit"
    else:
        unit = "mixed"
    return f"{unit} ({dtype})" if dtype else unit


def _knee(t: Threshold) -> tuple[float, str] | None:
    """Where a curve reaches the peak: the larger of the HBM and network thresholds, with
    which roof it is (the network's taken in its bandwidth-bound regime)."""
    knees = []
    for part, roof in ((t, ""), (t.network, " (network)")):
        if part is not None and part.op == ">" and part.exact is not None and part.exact.is_number:
            knees.append((float(part.exact), roof))
    return max(knees, default=None)


def save(ax: Axes, path: str | os.PathLike[str]) -> None:
    """Save the Axes' figure; the format comes from the file's extension (png, svg, pdf)."""
    suffix = PurePath(path).suffix.lower().removeprefix(".")
    if suffix not in ("png", "svg", "pdf"):
        raise SymroofError(f"plots are saved as .png, .svg or .pdf: {path} "
                           + (f"ends .{suffix}" if suffix else "has no suffix"))
    drawn = io.BytesIO()
    ax.figure.figure.savefig(drawn, dpi=_DPI, format=suffix)
    try:
        write_atomically(path, drawn.getvalue())  # whole, or not at all
    except OSError as error:
        raise SymroofError(f"cannot write {path}: {error.strerror or error}") from None


# Legend names ---------------------------------------------------------------------------

def _check_labels(labels: Sequence[str] | None, analyses: Sequence[Analysis]) -> None:
    if labels is not None and len(labels) != len(analyses):
        raise SymroofError(f"{len(labels)} labels for {len(analyses)} analyses: give one per analysis")
    for label in labels or ():
        _check_label(label)


def _check_label(label: str) -> None:
    """A label matplotlib can draw: one with math between pairs of $ (as matplotlib reads
    an even number of unescaped $) must be math it can lay out ('$x^$' is not)."""
    if (label.count("$") - label.count("\\$")) % 2 or "$" not in label.replace("\\$", ""):
        return
    try:
        MathTextParser("path").parse(label)
    except ValueError as error:
        said = next((line.strip() for line in str(error).splitlines() if line.strip()), "")
        raise SymroofError(f"label {label!r}: its math between $...$ is not what matplotlib can draw"
                           + (f" ({said[:80]})" if said else "")) from None


# Placing the legend and the labels --------------------------------------------------------

_NEAR = 8      # candidate places near a knee, on each side


def offsets(dx: float, dy: float, ha: Literal["left", "right"] = "left", step: float = -12,
            count: int = 24) -> list[Candidate]:
    """Candidate offsets (points) for a label on one side of its point: (dx, dy), then a
    step further each time."""
    return [((dx, dy + step * k), ha) for k in range(count)]


def _paths(curves: Sequence[Line2D]) -> list[Path]:
    return [line.get_transform().transform_path(line.get_path()) for line in curves]


def _dots(ax: Axes) -> list[Bbox]:
    """A small box round each scatter point, in display coordinates."""
    boxes = []
    for collection in ax.collections:
        for x, y in collection.get_offset_transform().transform(collection.get_offsets()):
            boxes.append(Bbox.from_extents(x - 5, y - 5, x + 5, y + 5))
    return boxes


def arrange(ax: Axes, corners: Sequence[LegendLocType], curves: Sequence[Line2D],
            notes: Sequence[tuple[Annotation, Sequence[Sequence[Candidate]]]], fontsize: float,
            extra: Sequence[Artist] = (), title: str | None = None) -> None:
    """Lay the figure out once, then put the legend at the first of `corners` where it
    covers no curve and no point (else where it covers fewest), and give each label the
    first of its candidate offsets at which it stays inside the axes, clear of the legend
    and of the labels placed before it, and, where one allows, of the curves and points."""
    handles, texts = ax.get_legend_handles_labels()
    handles, texts = handles + list(extra), texts + [h.get_label() for h in extra]
    columns = 2 if len(handles) > 6 and max(len(t) for t in texts) <= 30 else 1

    def legend(corner: LegendLocType, size: float = fontsize, ncols: int = columns, **where: object) -> Legend:
        return ax.legend(handles, texts, fontsize=size, loc=corner, ncols=ncols, title=title,
                         title_fontsize=size, **where)

    for note, _ in notes:
        note.set_in_layout(False)       # labels stay inside the axes: the layout ignores them
    shown = legend(corners[0])
    ax.figure.figure.draw_without_rendering()  # the layout (constrained) is final from here on
    frame = ax.get_window_extent()
    if not _within(shown.get_window_extent(), frame):
        # more entries than the axes hold: beside them, where the layout makes room, in
        # smaller type or more columns until the figure holds them
        corners = ()
        for size, ncols in ((fontsize, 1), (fontsize - 1, 1), (fontsize - 2, 1), (fontsize - 2, 2),
                            (fontsize - 2, 3)):
            shown = legend("upper left", size, ncols, bbox_to_anchor=(1.02, 1), borderaxespad=0)
            ax.figure.figure.draw_without_rendering()
            if _within(shown.get_window_extent(), ax.figure.bbox):
                break
        frame = ax.get_window_extent()
    paths, dots = _paths(curves), _dots(ax)

    def covered(box: Bbox) -> int:
        return sum(p.intersects_bbox(box, filled=False) for p in paths) + sum(box.overlaps(d) for d in dots)

    best: tuple[int, LegendLocType, Legend] | None = None
    for corner in corners:
        shown = legend(corner)
        hits = covered(shown.get_window_extent().padded(2))
        if best is None or hits < best[0]:
            best = (hits, corner, shown)
        if not hits:
            break
    if best is not None and best[2] is not shown:
        shown = legend(best[1])
    taken = [shown.get_window_extent().padded(2)]

    def fits(box: Bbox, strict: bool) -> bool:
        # a few pixels to spare inside the frame: a later draw (another matplotlib version, the
        # layout settling) may move the frame by a fraction of a pixel
        if not _within(box.padded(3), frame) or any(box.overlaps(t) for t in taken):
            return False
        return not strict or not covered(box)

    for note, sides in notes:
        # clear of everything near the knee (one side, then the other); else further along;
        # else clear of the labels and the legend, as near as can be; else (a crowd of knees)
        # not shown: the dashed line still marks it
        near = [c for side in sides for c in side[:_NEAR]]
        nearest = [side[k] for k in range(max(map(len, sides))) for side in sides if k < len(side)]
        chosen = next((c for c in near if fits(_try(note, c), True)), None)
        if chosen is None:  # clear of every curve and line further along its dashed line, else of the labels
            chosen = next((c for strict in (True, False) for c in nearest if fits(_try(note, c), strict)), None)
        if chosen is None:
            note.set_visible(False)
            continue
        taken.append(_try(note, chosen).padded(1))


def _within(box: BboxBase, frame: BboxBase) -> bool:
    return box.x0 >= frame.x0 and box.x1 <= frame.x1 and box.y0 >= frame.y0 and box.y1 <= frame.y1


def _try(note: Annotation, candidate: Candidate) -> Bbox:
    (dx, dy), ha = candidate
    note.xyann = (dx, dy)
    note.set_horizontalalignment(ha)
    return note.get_window_extent()


__all__ = ["arrange", "figure", "offsets", "plot_roofline", "plot_sweep", "save"]
