"""`symroof validate`: the roofline's lower bound against a stopwatch.

A sweep of fp32 ops crosses both regimes: matmuls `fp32[B, D] @ fp32[D, F] -> fp32[B, F]`
with D = F fixed and B from 1 (memory-bound) up (compute-bound), a dot product and two
elementwise ops on arrays far larger than the last-level cache (memory-bound). Each is
timed (the median of its runs, after a warm-up: a call on each copy of its arrays and one
more) and set against its T_lower on the chip: the fraction of the roof it reaches is
T_lower / measured, 1 at the roof.

A fraction above 1 + the row's spread (measured faster than the roof allows, beyond the
timing's own noise) is a bug in the model or in the chip's figures, and the row says
which figure is suspect: the peak where the op is compute-bound; where it is memory-bound,
the bandwidth, unless the arrays fit in the cache, whose speed it then measured.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..analysis import Analysis, analyze
from ..errors import HardwareError
from ..hardware.chips import Chip, get_chip
from ..show import capacity, human, seconds
from . import kernels as measure
from . import kernels_jax as measure_jax
from .calibrate import check_backend
from .kernels import Timing

if TYPE_CHECKING:
    from matplotlib.axes import Axes

# The matmul's batch B runs over powers of 2 up to 16 (a CPU's critical intensity is a few
# FLOPs/byte), then of 4 up to D; a quick sweep stops at D / 16.
QUICK_BATCH_SHARE = 16
FRACTION_NOTE = ("fraction = T_lower / measured (median): 1 is the roof; above 1 + the row's spread "
                 "((worst - best) / median of its runs) the measurement beats the roof, and a figure is wrong")


@dataclass(frozen=True, slots=True)
class Point:
    """One op of the sweep at its sizes."""

    op: str                         # "matmul", "dot", "add", "multiply"
    spec: str
    sizes: Mapping[str, int]
    footprint: int                  # bytes the call touches: its inputs and output
    copies: int = 1                 # copies of its arrays timed in turn, to keep them out of the cache

    @property
    def span(self) -> int:
        """Bytes touched between two uses of the same arrays."""
        return self.footprint * self.copies

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={_size(v)}" for k, v in self.sizes.items())


@dataclass(frozen=True, slots=True)
class Row:
    """A point, its roofline figures on the chip, and its timing."""

    point: Point
    flops: float
    bytes: float
    intensity: float
    t_lower: float
    t_math: float
    t_comms: float
    bound: str                      # "compute" or "memory"
    figure: str                     # the chip figure T_math came from ("peak_flops_per_s.fp32")
    timing: Timing
    suspect: str | None = None

    @property
    def fraction(self) -> float:
        return self.t_lower / self.timing.median

    @property
    def tolerance(self) -> float:
        return self.timing.spread

    @property
    def faster(self) -> bool:
        """Measured faster than the roof allows, by more than the timing's spread."""
        return self.fraction > 1 + self.tolerance


@dataclass(frozen=True, slots=True)
class Validation:
    chip: Chip
    backend: str
    repeats: int
    cache: int | None
    rows: tuple[Row, ...]
    skipped: tuple[str, ...]
    load: str = ""


def points(side: int, elements: int, quick: bool = False, cache: int | None = None) -> list[Point]:
    """The sweep: matmuls at D = F = side, and the others over `elements` fp32 values, each
    with as many copies of its arrays as keep them out of a last-level cache of `cache` bytes."""
    batches, b = [], 1
    top = side // QUICK_BATCH_SHARE if quick else side
    while b <= top:
        batches.append(b)
        b *= 2 if b < 16 else 4
    if batches[-1] != top:
        batches.append(top)
    found = [Point("matmul", "fp32[B, D] @ fp32[D, F] -> fp32[B, F]", {"B": b, "D": side, "F": side},
                   4 * (2 * b * side + side * side)) for b in batches]
    n = elements
    found.append(Point("dot", "fp32[N] *_N fp32[N] -> fp32[]", {"N": n}, 8 * n + 4))
    found.append(Point("add", "fp32[N] + fp32[N] -> fp32[N]", {"N": n}, 12 * n))
    found.append(Point("multiply", "fp32[N] * fp32[N] -> fp32[N]", {"N": n}, 12 * n))
    return [dataclasses.replace(p, copies=measure.copies(p.footprint, cache)) for p in found]


def run_sweep(chip: str | Chip, hardware: str | None = None, backend: str = "numpy", quick: bool = False,
              repeats: int | None = None, timer: Callable[[Point], Timing] | None = None,
              cache: int | None = None) -> Validation:
    """Analyse and time each point of the sweep on `chip`. `timer` replaces the stopwatch
    (tests give a fake one); `cache` (bytes) the last-level cache read from the OS."""
    check_backend(backend)
    target = chip if isinstance(chip, Chip) else get_chip(chip, hardware)
    repeats = repeats or measure.REPEATS[quick]
    on_cpu = backend == "numpy" or measure_jax.kind() == "cpu"
    if cache is None and on_cpu:  # a GPU's cache is its own, unknown here: its sizes dwarf any
        cache = measure.last_level_cache()
    if backend == "jax":
        side, elements = measure_jax.validate_sizes(quick)
        make = measure_jax.jax_op
    else:
        side, elements = measure.validate_sizes(quick)
        make = measure.numpy_op
    load = measure.busy()
    if timer is None:
        def timer(p: Point) -> Timing:
            call = measure.cycled(functools.partial(make, p.op, p.sizes), p.copies)
            return measure.time_it(call, repeats, measure.MIN_SECONDS[quick], warmups=p.copies)

    rows, skipped = [], []
    for point in points(side, elements, quick, cache):
        try:
            a = analyze(point.spec, chip=target, values=dict(point.sizes))
            float(a.t_lower)
        except HardwareError as error:  # a chip without the figure this op needs (no vector unit figure)
            skipped.append(f"{point.op} {point.label}: {error}")
            continue
        row = _row(point, a, timer(point))
        rows.append(dataclasses.replace(row, suspect=suspect(row, cache)))
    return Validation(target, backend, repeats, cache, tuple(rows), tuple(skipped), load)


def _row(point: Point, a: Analysis, timing: Timing) -> Row:
    rate = a.compute_dtypes[0].rate if a.compute_dtypes else "fp32"
    vector = float(a.t_vector) >= float(a.t_math) / 2
    return Row(point, float(a.flops), float(a.bytes), float(a.intensity), float(a.t_lower), float(a.t_math),
               float(a.t_comms), "compute" if float(a.t_math) >= float(a.t_comms) else "memory",
               f"{'vector_flops_per_s' if vector else 'peak_flops_per_s'}.{rate}", timing)


def suspect(row: Row, cache: int | None) -> str | None:
    """Why a row beats the roof, naming the figure to suspect; None where it does not."""
    if not row.faster:
        return None
    by = (f"measured {seconds(row.timing.median)} is {row.fraction - 1:.0%} faster than T_lower "
          f"{seconds(row.t_lower)}, beyond its {row.tolerance:.0%} spread")
    if row.bound == "compute":
        return f"{by}: compute-bound, so the peak figure {row.figure} is too low"
    arrays = capacity(row.point.footprint) + (f", {row.point.copies} copies cycled" if row.point.copies > 1 else "")
    bandwidth = "the bandwidth figure hbm_bandwidth_bytes_per_s is too low"
    if cache is None:
        return f"{by}: memory-bound, so {bandwidth}, or its arrays ({arrays}) stay in a cache (its size is unknown)"
    if row.point.span <= cache:
        return (f"{by}: memory-bound, and its arrays ({arrays}) fit in the last-level cache ({capacity(cache)}): "
                "it timed the cache, not memory; the bandwidth figure may be right")
    if row.point.span < measure.ROTATE_CACHES * cache:
        return (f"{by}: memory-bound, and its arrays ({arrays}) are less than {measure.ROTATE_CACHES} times the "
                f"last-level cache ({capacity(cache)}): part of them likely stays in the cache from one call to "
                f"the next; else {bandwidth}")
    return (f"{by}: memory-bound on arrays ({arrays}) far larger than the last-level cache ({capacity(cache)}), "
            f"so {bandwidth}")


def largest(v: Validation) -> tuple[Row | None, list[Row]]:
    """The largest matmul, and each elementwise op at the largest size."""
    matmuls = [r for r in v.rows if r.point.op == "matmul"]
    elementwise = [r for r in v.rows if r.point.op in ("add", "multiply")]
    top = max((r.point.footprint for r in elementwise), default=None)
    return max(matmuls, key=lambda r: r.flops, default=None), [r for r in elementwise if r.point.footprint == top]


def summary(v: Validation) -> str:
    matmul, elementwise = largest(v)
    parts = []
    if matmul is not None:
        parts.append(f"the largest matmul ({matmul.point.label}) reaches {matmul.fraction:.2f} of the roof")
    if elementwise:
        parts.append(f"the largest elementwise ops ({elementwise[0].point.label}) "
                     + " and ".join(f"{r.fraction:.2f} ({r.point.op})" for r in elementwise))
    beat = [r for r in v.rows if r.faster]
    verdict = (f"{len(beat)} of {len(v.rows)} ops measured FASTER than the roof allows: see !! above" if beat
               else f"no op measured faster than the roof allows ({len(v.rows)} ops)")
    return "summary: " + "; ".join(parts) + f"; {verdict}"


def table(v: Validation) -> str:
    lines = [f"validate: {v.backend} on this machine against {v.chip.id} ({v.chip.name}); median of {v.repeats} "
             f"runs after a warm-up; {v.load}", ""]
    labels = [f"{r.point.label}" for r in v.rows]
    wide = max([5, *map(len, labels)])
    lines.append(f"   {'op':<9} {'sizes':<{wide}} {'intensity':>9} {'T_lower':>11} {'measured':>11} {'spread':>6} "
                 f"{'fraction':>8}  regime")
    for r, label in zip(v.rows, labels):
        mark = "!!" if r.faster else "  "
        lines.append(f"{mark} {r.point.op:<9} {label:<{wide}} {r.intensity:>9.3g} {seconds(r.t_lower):>11} "
                     f"{seconds(r.timing.median):>11} {r.tolerance:>6.1%} {r.fraction:>8.3f}  {r.bound}")
    flagged = [r for r in v.rows if r.suspect]
    if flagged:
        lines.append("")
        lines += [f"!! {r.point.op} {r.point.label}: {r.suspect}" for r in flagged]
    if v.skipped:
        lines += ["", *(f"skipped {s}" for s in v.skipped)]
    lines += ["", summary(v), FRACTION_NOTE + "; critical intensity " + _critical(v)]
    return "\n".join(lines)


def _critical(v: Validation) -> str:
    peak, bandwidth = v.chip.figure("peak_flops_per_s.fp32"), v.chip.figure("hbm_bandwidth_bytes_per_s")
    if peak is None or bandwidth is None:
        return "unknown (no fp32 peak)"
    return f"{float(peak / bandwidth):.3g} FLOPs/byte (fp32 peak {human(peak, 'FLOPs/s')}, " \
           f"bandwidth {human(bandwidth, 'bytes/s')})"


def to_json(v: Validation) -> dict:
    def row(r: Row) -> dict:
        t = r.timing
        return {"op": r.point.op, "spec": r.point.spec, "sizes": dict(r.point.sizes), "flops": r.flops,
                "bytes": r.bytes, "intensity": r.intensity, "t_lower": r.t_lower, "t_math": r.t_math,
                "t_comms": r.t_comms, "regime": r.bound, "figure": r.figure, "footprint_bytes": r.point.footprint,
                "measured": {"median": t.median, "best": t.best, "worst": t.worst, "spread": t.spread,
                             "calls_per_run": t.calls, "seconds": list(t.seconds)},
                "fraction": r.fraction, "tolerance": r.tolerance, "faster_than_roof": r.faster, "suspect": r.suspect}

    matmul, elementwise = largest(v)

    def brief(r: Row) -> dict:
        return {"op": r.point.op, "sizes": dict(r.point.sizes), "fraction": r.fraction}

    return {"chip": v.chip.id, "backend": v.backend, "repeats": v.repeats, "cache_bytes": v.cache, "load": v.load,
            "rows": [row(r) for r in v.rows], "skipped": list(v.skipped),
            "largest": {"matmul": None if matmul is None else brief(matmul),
                        "elementwise": [brief(r) for r in elementwise]},
            "faster_than_roof": sum(r.faster for r in v.rows), "conventions": FRACTION_NOTE}


def plot(v: Validation, path: str) -> None:
    """`draw`, saved to `path` (png, svg, pdf)."""
    from ..render import plot as roofline_plot
    roofline_plot.save(draw(v), path)


def draw(v: Validation) -> Axes:
    """The chip's roofline (`plot.plot_roofline`) with each op where the roof puts it (open
    markers) and where it was measured (crosses: FLOPs / median time), log-log."""
    # Imported here: matplotlib is slow to import, and only --plot needs it.
    from ..render import plot as roofline_plot
    if not v.rows:
        raise HardwareError(f"nothing to plot: {v.chip.id} has none of the figures the sweep needs")
    ax = roofline_plot.figure((7, 4.5))
    analyses = [analyze(r.point.spec, chip=v.chip, values=dict(r.point.sizes)) for r in v.rows]
    ops = list(dict.fromkeys(r.point.op for r in v.rows))
    bandwidth = float(v.chip.hbm_bandwidth)
    roofs = sorted({(float(a.peak_flops), bandwidth) for a in analyses})
    for r, a in zip(v.rows, analyses):
        # plot_roofline's colour (one per label, in order) and marker (one per roof)
        colour, roof = f"C{ops.index(r.point.op) % 10}", roofs.index((float(a.peak_flops), bandwidth))
        ax.scatter([r.intensity], [float(a.achieved_flops_per_s)], marker="o^D"[roof % 3], s=30,
                   facecolors="none", edgecolors=colour, linewidths=1)
        ax.scatter([r.intensity], [r.flops / r.timing.median], marker="x", s=40, color=colour, zorder=4)
    from matplotlib.lines import Line2D
    said = [Line2D([], [], ls="", marker="o", markerfacecolor="none", markeredgecolor="black",
                   label="hollow: each size where the roof puts it (T_lower)"),
            Line2D([], [], ls="", marker="x", color="black", label="crosses: measured (FLOPs / median time)")]
    # one point per op carries the legend: its largest; an op's sizes span both regimes, so its
    # entry names the op, not a bound
    last = {r.point.op: a for r, a in zip(v.rows, analyses)}
    roofline_plot.plot_roofline(list(last.values()), ax=ax, labels=list(last), bounds=False, extra=said)
    ax.set_title(f"Measured against the roofline: {v.chip.name} ({v.backend}, fp32)", fontsize=9)
    return ax


def _size(n: int) -> str:
    """4096 as "4096", 67108864 as "64M": powers of 1024, as --set reads them."""
    for power, suffix in ((30, "G"), (20, "M")):
        if n >= 2**power and n % 2**power == 0:
            return f"{n >> power}{suffix}"
    return str(n)
