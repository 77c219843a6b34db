"""Roofline plots with matplotlib's object API: no global state, headless, each function
taking an optional `ax` and returning it.

* `plot_roofline`: achievable FLOPs/s against arithmetic intensity on log-log axes, the
  HBM roof (and the network roof for analyses on a mesh), with analyses placed on it as
  labelled points coloured by what bounds them.
* `plot_sweep`: achieved FLOPs/s (or time) against one dim, one curve per analysis, with
  the exact critical value marked, e.g. the chapter's problem 3.
"""

from __future__ import annotations

import numpy

from .errors import SymroofError
from .show import number

COLOURS = {"compute": "tab:green", "memory": "tab:blue", "network": "tab:orange", "balanced": "tab:purple"}


def _axes(ax):
    if ax is not None:
        return ax
    from matplotlib.figure import Figure  # a Figure of its own: pyplot's global state stays untouched
    return Figure(figsize=(7, 4.5), layout="constrained").add_subplot()


def _listed(analyses) -> list:
    analyses = list(analyses) if isinstance(analyses, (list, tuple)) else [analyses]
    if not analyses:
        raise SymroofError("nothing to plot: give at least one analysis")
    return analyses


def _numbers(a, what: str) -> None:
    free = a.free_dims
    if free:
        raise SymroofError(f"give sizes for {', '.join(free)} to place {what} on the plot (--set)")


def plot_roofline(analyses, ax=None, labels=None, intensities=None):
    """The classic roofline of the analyses' chip, with each analysis as a point.

    Args:
        analyses: one `Analysis` or several, on one chip, every dim with a size.
        ax: matplotlib Axes to draw on (a new Figure's when None).
        labels: a label per analysis (default: its spec).
        intensities: (low, high) of the x axis; by default it spans the points and the
            critical intensities.
    """
    analyses = _listed(analyses)
    first = analyses[0]
    if first.machine is None or not first.has_peak or first.machine.hbm_bw is None:
        raise SymroofError("a roofline needs a chip (or a peak and an HBM bandwidth)")
    for a in analyses:
        _numbers(a, "it")
        if a.machine is None or a.machine.name != first.machine.name:
            raise SymroofError("a roofline is of one chip: plot analyses of different chips on separate plots")
        if a.flops == 0:
            raise SymroofError(f"{a.spec!r} does no FLOPs: there is no point for it on a roofline")
    ax = _axes(ax)
    # One roof per (peak, bandwidth): an int8 and a bf16 spec on one chip have different peaks.
    roofs = sorted({(float(a.peak_flops), float(a.machine.hbm_bw)) for a in analyses})
    networks = sorted({(float(a.peak_flops), float(a.critical_network_intensity))
                       for a in analyses if a.collectives})
    corners = [p / b for p, b in roofs] + [c for _, c in networks]
    points = [float(a.intensity) for a in analyses] + [float(a.network_intensity) for a in analyses if a.collectives]
    lo, hi = intensities or (min(corners + points) / 10, max(corners + points) * 10)
    x = numpy.logspace(numpy.log10(lo), numpy.log10(hi), 400)
    dtype_of = {float(a.peak_flops): a.compute_dtypes[0].name for a in analyses if a.compute_dtypes}
    for k, (peak, bw) in enumerate(roofs):
        critical = peak / bw
        # several roofs (an int8 and a bf16 spec): told apart by style and named by dtype
        style = ["-", "-.", ":"][k % 3]
        named = f"{dtype_of[peak]} " if len(roofs) > 1 and peak in dtype_of else ""
        ax.plot(x, numpy.minimum(peak, x * bw), color="black", lw=2 if k == 0 else 1.5, ls=style,
                label=f"{named}HBM roof ({number(bw)} bytes/s, peak {number(peak)} FLOPs/s)")
        ax.axvline(critical, color="black", ls=":", lw=1)
        ax.annotate(f"critical {critical:.1f}", (critical, peak), textcoords="offset points", xytext=(4, -14),
                    fontsize=8)
    for peak, critical in networks:
        link = peak / critical
        ax.plot(x, numpy.minimum(peak, x * link), color="tab:orange", lw=1.5, ls="--",
                label=f"network roof ({number(link)} bytes/s effective; x = network intensity)")
    for i, a in enumerate(analyses):
        bound = a.bound if isinstance(a.bound, str) else "balanced"
        name = (labels[i] if labels else a.spec.split("\n")[-1])
        y = float(a.achieved_flops_per_s)
        roof = roofs.index((float(a.peak_flops), float(a.machine.hbm_bw)))
        ax.scatter([float(a.intensity)], [y], color=COLOURS[bound], zorder=3, s=40, marker="o^D"[roof % 3],
                   label=f"{name}: {bound}-bound")
        if a.collectives:
            ax.scatter([float(a.network_intensity)], [y], color=COLOURS[bound], marker="s", zorder=3, s=30,
                       label=f"{name}: at its network intensity")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs/byte)")
    ax.set_ylabel("achievable FLOPs/s")
    dtypes = sorted({a.compute_dtypes[0].name for a in analyses if a.compute_dtypes})
    ax.set_title(f"Roofline: {first.machine.name} ({', '.join(dtypes)}; dense peaks)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return ax


def plot_sweep(analyses, dim: str, values, ax=None, labels=None, quantity: str = "flops"):
    """Achieved FLOPs/s (`quantity="flops"`) or T_lower (`"time"`) against one dim.

    Each analysis must leave `dim` free and give every other dim a size. The exact critical
    value of `dim` is marked on each curve where one exists.
    """
    analyses = _listed(analyses)
    if quantity not in ("flops", "time"):
        raise SymroofError("quantity is 'flops' (achieved FLOPs/s) or 'time' (T_lower)")
    xs = numpy.asarray(values, dtype=float)
    ax = _axes(ax)
    peaks = []
    for i, a in enumerate(analyses):
        if a.machine is None or not a.has_peak:
            raise SymroofError("a sweep needs a chip (or a peak and an HBM bandwidth)")
        if dim not in a.dims:
            raise SymroofError(f"{dim} is not a named dim of {a.spec!r}")
        free = [d for d in a.free_dims if d != dim]
        if free:
            raise SymroofError(f"give sizes for {', '.join(free)} to sweep {dim} (--set)")
        name = labels[i] if labels else a.spec.split("\n")[-1]
        field = "achieved_flops_per_s" if quantity == "flops" else "t_lower"
        ys = a.evaluate(field, **{dim: xs})
        line, = ax.plot(xs, ys, lw=2, label=name)
        peak = float(a.peak_flops)
        peaks.append(peak)
        knee = _knee(a.threshold(dim))
        if knee is not None:
            value, roof = knee
            y = peak if quantity == "flops" else float(a.at(**{dim: max(1, round(value))}).t_lower)
            ax.axvline(value, color=line.get_color(), ls="--", lw=1)
            # one label under the other, so that knees close together stay readable
            ax.annotate(f"{dim} = {value:.1f}{roof}", (value, y), textcoords="offset points",
                        xytext=(5, -22 - 12 * i), color=line.get_color(), fontsize=8)
    if quantity == "flops":
        for peak in sorted(set(peaks)):
            ax.axhline(peak, color="black", ls=":", lw=1, label=f"peak {number(peak)} FLOPs/s")
        ax.set_ylabel("achieved FLOPs/s (FLOPs / T_lower)")
        ax.set_ylim(0, max(peaks) * 1.1)
    else:
        ax.set_ylabel("T_lower (s)")
    ax.set_xlabel(f"{dim} (size)")
    chips = ", ".join(dict.fromkeys(a.machine.name for a in analyses))
    ax.set_title(f"{'Achieved FLOPs/s' if quantity == 'flops' else 'Time'} against {dim} on {chips}")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right" if quantity == "flops" else "upper left")
    return ax


def _knee(t):
    """Where a curve reaches the peak: the larger of the HBM and network thresholds, with
    which roof it is (the network's taken in its bandwidth-bound regime)."""
    knees = []
    for part, roof in ((t, ""), (t.network, " (network)")):
        if part is not None and part.op == ">" and part.exact is not None and part.exact.is_number:
            knees.append((float(part.exact), roof))
    return max(knees, default=None)


def save(ax, path) -> None:
    """Save the Axes' figure; the format comes from the file's extension (png, svg, pdf)."""
    suffix = str(path).rsplit(".", 1)[-1].lower()
    if suffix not in ("png", "svg", "pdf"):
        raise SymroofError(f"plots are saved as .png, .svg or .pdf, not .{suffix}")
    try:
        ax.figure.savefig(path, dpi=150)
    except OSError as error:
        raise SymroofError(f"cannot write {path}: {error.strerror or error}") from None


__all__ = ["plot_roofline", "plot_sweep", "save"]
