"""The latency-throughput curve serving papers draw (`symroof plot serve MODEL`): for each
batch and each way of placing the model (an even split over N chips, or a --strategy), the
time per output token against tokens/s a chip, the Pareto frontier over them, and the best
point under a per-token latency target.

Every number is `serving.request`'s at that batch and placement, none derived again here:
* x, the per-token latency: `tpot_steady`, one decode step at the steady state's mean
  context P + (G - 1)/2 (continuous batching, every slot busy decoding);
* y: `tokens_per_s_steady / chips`, B tokens a step over that step's time, a chip;
* fits: `kv_caches_fit` >= B, the B sequences' caches at P + G fit beside the weights.

A point is on the frontier when no other point that fits is at least as fast and at least
as productive and strictly better in one of the two; points that do not fit are left off
the frontier and the plot (and said so). The SLO is checked against the plotted latency.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING

import sympy

from ..errors import SpecError
from ..hardware.machines import Machine
from ..render.json_report import json_value
from ..show import number, seconds, wrapped
from .serving import Request, _rational, request

if TYPE_CHECKING:
    from matplotlib.axes import Axes

LABELS = 12  # batch labels a placement gets on the plot, at most: more overlap
MAX_POINTS = 512  # each point is a request (three model builds): a bound keeps a sweep quick

CONVENTIONS = (
    "latency: tpot_steady, one decode step at the steady state's mean context P + (G-1)/2 (continuous batching: "
    "every slot decoding, contexts spread over P .. P+G-1; prefill not counted)",
    "throughput: tokens/s a chip, B / tpot_steady / chips",
    "placements: N chips (--chips) split memory and time evenly with no collectives, the most N chips could give; "
    "a --strategy counts its sharding's collectives",
    "fits: the B sequences' KV caches at S = P + G fit the chips' usable HBM beside the weights; points that do "
    "not are off the frontier and the plot",
    "frontier: the points that fit and that no other point that fits matches or beats in both latency and "
    "throughput (strictly in one)",
    "SLO: a point meets it when its plotted latency (tpot_steady) is at most the target; the best is the one of "
    "most tokens/s a chip among those that meet it and fit",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    """One batch on one placement: its request, and where it sits on the curve."""

    placement: str
    request: Request

    @property
    def batch(self) -> int:
        return self.request.batch

    @property
    def latency(self) -> sympy.Expr:
        return self.request.tpot_steady

    @property
    def throughput(self) -> sympy.Expr:
        return self.request.tokens_per_s_steady / self.chips

    @property
    def chips(self) -> sympy.Expr:
        chips = self.request.chips  # an int under a strategy, an expression for an even split
        return sympy.Integer(chips) if isinstance(chips, int) else chips

    @property
    def fits(self) -> bool | None:
        caches = self.request.kv_caches_fit
        return None if caches is None else bool(caches >= self.batch)


def frontier(points: Sequence[Point]) -> tuple[int, ...]:
    """The indices of the non-dominated points among those that fit (or whose fit is
    unknown), in order of rising latency: sorted by latency, then by falling throughput, a
    point is on it when its throughput beats every faster point's, or ties a point of the
    same latency and throughput (equal points do not dominate each other)."""
    kept = sorted((i for i, p in enumerate(points) if p.fits is not False),
                  key=lambda i: (points[i].latency, -points[i].throughput))
    on: list[int] = []
    best: sympy.Expr | None = None
    for i in kept:
        p = points[i]
        if best is None or p.throughput > best:
            on.append(i)
            best = p.throughput
        elif p.throughput == best and on and (points[on[-1]].latency, points[on[-1]].throughput) == \
                (p.latency, p.throughput):
            on.append(i)
    return tuple(on)


@dataclasses.dataclass(frozen=True, slots=True)
class Curve:
    """The points, the frontier's indices, the SLO and the best point under it."""

    name: str
    chip: str
    prompt: int
    generate: int
    points: tuple[Point, ...]
    on_frontier: tuple[int, ...]
    tpot_slo: sympy.Expr | None
    best: int | None  # the index of the best point under the SLO; None without one or where none meets it

    @property
    def context(self) -> sympy.Rational:
        return sympy.Rational(2 * self.prompt + self.generate - 1, 2)

    def meets(self, point: Point) -> bool | None:
        return None if self.tpot_slo is None else bool(point.latency <= self.tpot_slo)

    def past_context(self) -> str | None:
        """A warning where the request's last token is past the model's context (serving's)."""
        r = self.points[0].request
        if not r.past_context:
            return None
        return (f"WARNING: the request reaches S = {self.prompt + self.generate - 1}, past {self.name}'s context of "
                f"{r.context} tokens, which it was not built for: the figures are what the steps would cost, no more")

    def excluded(self) -> list[Point]:
        return [p for p in self.points if p.fits is False]

    def title(self) -> str:
        return (f"{self.name} on {self.chip}: P = {self.prompt}, G = {self.generate}, latency at the mean "
                f"context S = {number(self.context)}")

    def to_dict(self) -> dict:
        """One JSON object: each point's figures (exact where they are numbers), the
        frontier's indices, the SLO, the best point and the conventions."""
        rows = []
        for i, p in enumerate(self.points):
            rows.append({"placement": p.placement, "B": p.batch, "chips": json_value(p.chips),
                         "tpot_steady": json_value(p.latency),
                         "tokens_per_s_steady_per_chip": json_value(p.throughput),
                         "tokens_per_s_steady": json_value(p.request.tokens_per_s_steady),
                         "tpot_last": json_value(p.request.tpot_at(self.prompt + self.generate - 1)),
                         "kv_caches_fit": json_value(p.request.kv_caches_fit), "fits": p.fits,
                         "on_frontier": i in self.on_frontier, "meets_slo": self.meets(p)})
        return {"model": self.name, "chip": self.chip, "prompt": self.prompt, "generate": self.generate,
                "context": json_value(self.context), "tpot_slo": json_value(self.tpot_slo), "points": rows,
                "frontier": list(self.on_frontier), "best": self.best,
                "excluded": [i for i, p in enumerate(self.points) if p.fits is False],
                "context_limit": self.points[0].request.context, "past_context": self.points[0].request.past_context,
                "conventions": list(CONVENTIONS)}

    def table(self) -> str:
        """The points as text, frontier marked, then the best point and the conventions."""
        wide = max(14, *(len(p.placement) for p in self.points))
        head = f"{'placement':<{wide}} {'B':>6} {'tpot':>12} {'tokens/s/chip':>14} {'fits':>5}  frontier"
        warning = self.past_context()
        lines = [self.title(), *([warning] if warning else []), "",
                 head + ("  slo" if self.tpot_slo is not None else "")]
        for i, p in enumerate(self.points):
            fits = "?" if p.fits is None else "yes" if p.fits else "NO"
            row = (f"{p.placement:<{wide}} {p.batch:>6} {seconds(p.latency):>12} {number(p.throughput, 5):>14} "
                   f"{fits:>5}  {'*' if i in self.on_frontier else ' ':>8}")
            if self.tpot_slo is not None:
                row += "  " + ("yes" if self.meets(p) else "no")
            lines.append(row)
        lines.append("")
        if self.tpot_slo is not None:
            lines.append(self.best_text())
        if self.excluded():
            lines.append(f"{len(self.excluded())} point(s) left off the frontier: their KV caches at S = "
                         f"{self.prompt + self.generate} do not fit beside the weights")
        lines += ["", *wrapped("conventions: " + "; ".join(CONVENTIONS))]
        return "\n".join(lines)

    def best_text(self) -> str:
        if self.best is None:
            return f"best under tpot <= {seconds(self.tpot_slo)}: none (no point that fits meets it)"
        p = self.points[self.best]
        return (f"best under tpot <= {seconds(self.tpot_slo)}: {p.placement}, B = {p.batch}: "
                f"{number(p.throughput, 5)} tokens/s a chip at {seconds(p.latency)}")


def curve(name: str, chip: str | Machine, prompt: int, generate: int, batches: Sequence[int], *,
          chips: Sequence[int] = (), strategies: Sequence[str] = (), mesh: str | None = None,
          tpot_slo: float | Fraction | str | None = None, weights: str = "bf16", kv: str = "bf16",
          models_file: str | None = None, hbm_usable: float = 0.9) -> Curve:
    """Each batch on each placement (`chips`: an even split over that many; `strategies`: a
    sharding each, with `mesh`; neither: one chip), as `serving.request` costs it.

    Examples:
        >>> c = curve("llama-3-8b", "h100", 1000, 500, [1, 8, 64], chips=[1, 2])
        >>> c.points[1].latency == request("llama-3-8b", "h100", 1000, 500, 8).tpot_steady
        True
    """
    if not batches:
        raise SpecError("the curve needs batches (--batches 1,2,4,...)")
    placements: list[tuple[str, dict]] = [(f"{n} chip{'s' if n > 1 else ''}", {"chips": n}) for n in chips]
    placements += [(s if mesh is None else f"{s} on {mesh}", {"strategy": s, "mesh": mesh}) for s in strategies]
    if mesh is not None and not strategies:
        raise SpecError("--mesh names the axes of a --strategy: give --strategy too")
    if not placements:
        placements = [("1 chip", {"chips": 1})]
    for n in chips:
        if not isinstance(n, int) or n < 1:
            raise SpecError(f"--chips takes whole numbers of at least 1, got {n!r}")
    if len(batches) * len(placements) > MAX_POINTS:
        raise SpecError(f"{len(batches)} batches x {len(placements)} placements is more than {MAX_POINTS} points")
    slo = None if tpot_slo is None else _rational(tpot_slo, "--tpot-slo")
    points: list[Point] = []
    for label, where in placements:
        for b in batches:
            try:
                r = request(name, chip, prompt, generate, b, weights=weights, kv=kv, models_file=models_file,
                            hbm_usable=hbm_usable, **where)
            except SpecError as error:
                if not points:  # the first point: what is wrong is the same at every point
                    raise
                raise SpecError(f"at B = {b} on {label}: {error.message}") from None
            if not (r.tpot_steady.is_number and Point(label, r).chips.is_number):
                raise SpecError("the curve needs numbers: a chip whose figures are numbers (not --chip symbolic)")
            points.append(Point(label, r))
    on = frontier(points)
    best = None
    if slo is not None:
        meets = [i for i, p in enumerate(points) if p.fits is not False and p.latency <= slo]
        if meets:
            best = max(meets, key=lambda i: (points[i].throughput, -points[i].latency))
    first = points[0].request
    return Curve(first.name, first.chip, prompt, generate, tuple(points), on, slo, best)


def draw(found: Curve, ax: Axes | None = None) -> Axes:
    """The curve on log-log axes: each placement its marker, points off the frontier faint,
    the frontier a line, the SLO a vertical line with its feasible side shaded, the best
    point under it annotated; points that do not fit left off, said in a note."""
    from matplotlib.figure import Figure

    from ..render.plot_labels import log_ticks, plain, seconds_tick
    if ax is None:
        ax = Figure(figsize=(8.5, 5), dpi=150, layout="constrained").add_subplot()
    shown = [i for i, p in enumerate(found.points) if p.fits is not False]
    if not shown:
        raise SpecError("no point fits the chips' HBM: nothing to plot (fewer batches, or more chips)")
    markers = "osD^v<>ph*"
    labels = list(dict.fromkeys(p.placement for p in found.points))
    x = {i: float(found.points[i].latency) for i in shown}
    y = {i: float(found.points[i].throughput) for i in shown}
    for k, label in enumerate(labels):
        mine = [i for i in shown if found.points[i].placement == label]
        for on, alpha in ((True, 1.0), (False, 0.25)):
            pick = [i for i in mine if (i in found.on_frontier) == on]
            if pick:
                ax.plot([x[i] for i in pick], [y[i] for i in pick], markers[k % len(markers)], color=f"C{k % 10}",
                        alpha=alpha, label=label if on or not any(i in found.on_frontier for i in mine) else None)
        # every point labelled where few; where many, the frontier's, at most LABELS a placement
        named = [i for i in mine if len(shown) <= LABELS or i in found.on_frontier]
        for i in named[::max(1, -(-len(named) // LABELS))]:
            ax.annotate(f"B={found.points[i].batch}", (x[i], y[i]), textcoords="offset points", xytext=(4, 3),
                        fontsize=6, alpha=1.0 if i in found.on_frontier else 0.35)
    line = sorted(found.on_frontier, key=lambda i: x[i])
    ax.plot([x[i] for i in line], [y[i] for i in line], "-", color="black", lw=1, label="Pareto frontier")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.margins(0.08)  # room inside the frame for the points' labels
    if found.tpot_slo is not None:
        slo = float(found.tpot_slo)
        ax.axvline(slo, color="C3", ls="--", lw=1, label=f"tpot SLO {seconds_tick(slo)}")
        left, right = ax.get_xlim()
        left, right = min(left, slo / 1.2), max(right, slo * 1.2)  # the line inside the frame, the points either side
        ax.axvspan(left, slo, color="C2", alpha=0.08, label="meets the SLO (left of the line)")
        ax.set_xlim(left, right)
        if found.best is not None:
            b = found.points[found.best]
            # the note on the side of its point with more room, so that it stays inside the frame
            (fx, fy) = ax.transAxes.inverted().transform(ax.transData.transform((x[found.best], y[found.best])))
            ax.annotate(f"best under the SLO: {b.placement}, B={b.batch}\n{plain(float(b.throughput))} tokens/s a chip",
                        (x[found.best], y[found.best]), textcoords="offset points",
                        xytext=(-12 if fx > 0.5 else 12, -30 if fy > 0.3 else 24), ha="right" if fx > 0.5 else "left",
                        fontsize=7, arrowprops={"arrowstyle": "->", "lw": 0.8})
    log_ticks(ax.xaxis, seconds_tick)
    log_ticks(ax.yaxis, plain)
    ax.set_xlabel(f"time per output token (tpot at S = {number(found.context)}, the steady state's mean context)")
    ax.set_ylabel("tokens/s per chip")
    ax.set_title(found.title(), fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    # beside the frame, not over the points; the notes under it
    dominated = any(i not in found.on_frontier for i in shown)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), title="faint: dominated" if dominated else None,
              title_fontsize=7)
    notes = [f"{len(found.excluded())} point(s) left off:\ntheir KV caches do not fit"] if found.excluded() else []
    if found.past_context():
        notes.append(f"past {found.name}'s context\nof {found.points[0].request.context} tokens")
    if found.tpot_slo is not None and found.best is None:
        notes.append("no point that fits\nmeets the SLO")
    if notes:
        ax.text(1.02, 0.0, "\n".join(notes), transform=ax.transAxes, ha="left", va="bottom", fontsize=7, wrap=True)
    return ax
