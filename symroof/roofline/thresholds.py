"""Thresholds: the sizes of one dim at which T_math overtakes the time of a roof (HBM, or
the network on a mesh), by the book's rule and exactly, with conditions and reasons.

`solve(sized, t_math, x, roof, grow)` compares T_math with the roof's time. The rule takes
every other named dim without a size (or only those in `grow`) to infinity together and
compares the two times' leading parts, dims with sizes kept at them; the exact answer
keeps the other dims at their sizes (or free, as an expression with the
condition under which it holds). Costs are linear in each dim, so each answer is one
root of a linear polynomial, or none, or every size.

A `Threshold` says itself in words here (`threshold_text`, its str; `threshold_summary`,
its repr), and the text report quotes the same text: no renderer above is needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import sympy
from sympy.polys.rings import PolyElement

from ..ir import dim_symbol
from ..show import pretty
from .oneline import REPR_WIDTH, cut
from .sized import Sized
from .solve import Region, cleared, fraction_expr, limit_parts, path_independent, polys, positive_region, ratio_limit


@dataclass(frozen=True)
class Roof:
    """What T_math is compared with: a time, the bytes behind it and the critical intensity,
    at the analysis's sizes."""

    name: str
    time: sympy.Expr
    traffic: sympy.Expr
    critical: sympy.Expr


@dataclass(frozen=True)
class Threshold:
    """Where a dim makes the analysis compute-bound.

    Attributes:
        var: the dim solved for.
        op: ">" (compute-bound above the value), "<" (below it), or None (no threshold).
        rule: the value from the limit as the other named dims grow (`rule_as`); with no
            other named dims, the same as `exact`.
        exact: the value at the other dims' sizes (or an expression in them).
        condition: when the exact answer depends on other dims, the condition under which
            it holds; `otherwise` says what holds where it fails ("never" or "always").
        reason_parts: whatever a number alone would not say (that no threshold exists
            and why, that every size is compute-bound, what to mind), one tuple per
            sentence of words and expressions, so that each printer (text, LaTeX) writes
            the expressions its own way; `reason` is the plain text of it.
        rule_as: the dims taken to infinity for the rule.
        roof: which time T_math is compared with ("HBM" or "network").
        network: on a mesh with collectives, the threshold against the network roof.
        past_latency: for the network's threshold at known sizes, where T_math also
            clears the collectives' latency floor, when that comes later.
    """

    var: str
    op: str | None
    rule: sympy.Expr | None
    exact: sympy.Expr | None
    condition: sympy.Basic | None = None
    otherwise: str | None = None
    reason_parts: tuple[tuple, ...] = ()
    rule_as: tuple[str, ...] = ()
    roof: str = "HBM"
    network: Threshold | None = None
    past_latency: sympy.Expr | None = None  # network only: where T_math also clears the latency floor

    @property
    def reason(self) -> str | None:
        """The reason in plain text, its sentences joined by '; '."""
        said = "; ".join("".join(p if isinstance(p, str) else pretty(p) for p in parts)
                         for parts in self.reason_parts)
        return said or None

    def __str__(self) -> str:
        return threshold_text(self)

    def __repr__(self) -> str:
        return threshold_summary(self)


def threshold_text(t: Threshold, values: Mapping[str, object] | None = None, latency: str | None = None,
                   step: int = 1) -> str:
    """A threshold in lines: the rule, the exact answer with its condition, the reason; on
    a mesh, then the same against the network. The text report shows it with the sizes
    (`values`), the network's latency floor in words (`latency`) and the `step` a dim
    split over chips moves in."""
    parts = []
    if t.rule is not None:
        how = f"[rule: {', '.join(t.rule_as)} -> oo]" if t.rule_as else \
            "[exact: no other named dim to take to infinity]"
        parts.append(f"{_bound_on(t.var, t.op, t.rule, step)}  {how}")
    if t.exact is not None and t.rule_as and t.exact != t.rule:
        exact = f"exact: {_bound_on(t.var, t.op, t.exact, step)}"
        if t.condition is not None:
            exact += f", when {pretty(t.condition)}"
            exact += {"never": " (never otherwise)", "always": f" (at every {t.var} otherwise)"}.get(
                t.otherwise or "", "")
        if values:
            exact += "  [at " + ", ".join(f"{k} = {v}" for k, v in values.items()) + "]"
        parts.append(exact)
    if t.reason:
        parts.extend(t.reason.split("; "))
    if not parts:
        parts.append(f"no threshold on {t.var}")
    if t.network is not None:
        head = "against the network (bandwidth-bound regime" + (f"; {latency}):" if latency else "):")
        parts = [f"against HBM: {parts[0]}", *parts[1:], head,
                 *("  " + line for line in threshold_text(t.network, values, step=step).split("\n"))]
    return "\n".join(parts)


def threshold_summary(t: Threshold) -> str:
    """A threshold's repr: what it is on, then `threshold_text`, each line at most
    `REPR_WIDTH` wide."""
    lines = [f"Threshold: where {t.var} makes the analysis compute-bound",
             *("  " + line for line in threshold_text(t).split("\n"))]
    return "\n".join(cut(line, REPR_WIDTH) for line in lines)


def _bound_on(var: str, op: str | None, value: sympy.Expr, step: int = 1) -> str:
    """`B > 240.24 (B >= 241)`; a dim split over chips moves in steps of that many."""
    if not value.is_number:
        return f"{var} {op} {pretty(value)}"
    shown = f"{float(value):.2f}".rstrip("0").rstrip(".") if 1e-2 <= abs(float(value)) < 1e12 else pretty(value)
    text = f"{var} {op} {shown}"
    if op == ">":
        if value < 1:
            return f"{text}: every {var} >= 1"
        first = (int(sympy.floor(value)) // step + 1) * step
        return f"{text} ({var} >= {first}" + (f", a multiple of {step}" if step > 1 else "") + ")"
    return text


def solve(sized: Sized, t_math: sympy.Expr, x: sympy.Symbol, roof: Roof,
          grow: Sequence[str] | None = None) -> Threshold:
    """The threshold on x against one roof, for a program's counts at its sizes (`sized`)
    and its T_math. The rule takes `grow` (dim names) to infinity, by default every dim
    without a size but x; dims with sizes keep them in the rule too."""
    t_math, time = cleared(t_math, roof.time)
    roof = dataclasses.replace(roof, time=time)
    exact = positive_region(t_math - roof.time, x)
    # the mesh's axes without a size stay as they are, like the chip's figures, unless named
    axes = {dim_symbol(a) for a in sized.mesh.symbolic} if sized.mesh is not None else set()
    free = (t_math + roof.time).free_symbols - {x} - _figures(t_math + roof.time) - axes
    symbols = sorted(free if grow is None else {dim_symbol(d) for d in grow} & free, key=str)
    notes: list[tuple] = []
    if symbols:
        if not path_independent(t_math, roof.time, symbols):
            notes.append((f"the rule depends on how {', '.join(map(str, symbols))} grow; it takes them equal",))
        math_poly, roof_poly = polys(t_math, roof.time, extra=(x,))
        rule = _compute_bound_region(math_poly, roof_poly, symbols, x)
        if rule.condition is not None and rule.kind in ("above", "below"):  # else the reason says it
            notes.append(("the rule holds when ", rule.condition) + _otherwise(rule, x))
    else:
        rule = exact
    return _threshold(x, rule, exact, tuple(map(str, symbols)), sized, roof, notes)


def _figures(expr: sympy.Expr) -> set[sympy.Symbol]:
    """The symbols of a symbolic chip's figures (dims are integers; figures are not):
    constants of the chip, not dims to grow."""
    return {s for s in expr.free_symbols if not s.is_integer}


def _compute_bound_region(t_math: PolyElement, t_roof: PolyElement, grow: Sequence[sympy.Symbol],
                          x: sympy.Symbol) -> Region:
    """Where T_math > the roof's time for x > 0 as the `grow` dims go to infinity: compare
    the two times' leading parts (a byte count leads with a positive part)."""
    parts = limit_parts(t_math, t_roof, grow)
    if parts[0] == "zero":
        return Region("none")
    if parts[0] == "infinite":
        return Region("all")
    _, math, other = parts
    return positive_region(math - other, x)


def _threshold(x: sympy.Symbol, rule: Region, exact: Region, rule_as: tuple[str, ...], sized: Sized, roof: Roof,
               notes: list[tuple]) -> Threshold:
    """Put the rule's and the exact answer's regions into one `Threshold`, with a reason
    in words wherever a number alone would mislead."""
    op = None
    for region in (exact, rule):
        if region.kind in ("above", "below"):
            op = ">" if region.kind == "above" else "<"
            break
    reasons = []  # each a tuple of words and expressions
    if rule_as and rule.kind not in ("above", "below"):
        reasons.append((f"as {', '.join(rule_as)} -> oo: ",) + _region_words(rule, x, sized, roof, rule_as))
    if exact.kind not in ("above", "below"):
        where = ("at " + ", ".join(f"{k} = {v}" for k, v in sized.values.items())) if sized.values else \
            ("with the other dims free" if rule_as else "")
        words = _region_words(exact, x, sized, roof, ())
        reasons.append(((f"{where}: ",) if where else ()) + words)
    reasons += notes

    def value(region: Region) -> sympy.Expr | None:
        return region.root if region.kind in ("above", "below") else None

    otherwise = {"none": "never", "all": "always"}.get(exact.otherwise or "")
    return Threshold(str(x), op, value(rule), value(exact), exact.condition, otherwise,
                     tuple(reasons), rule_as, roof.name)


def _otherwise(region: Region, x: sympy.Symbol) -> tuple:
    """What holds where a region's condition fails, in words."""
    return {"none": (", never otherwise",), "all": (", at every ", x, " otherwise")}.get(region.otherwise or "", ())


def _region_words(region: Region, x: sympy.Symbol, sized: Sized, roof: Roof, grow: Sequence[str]) -> tuple:
    when = (" when ", region.condition) if region.condition is not None else ()
    otherwise = _otherwise(region, x)
    if region.kind == "all":
        return ("compute-bound at every ", x) + when + otherwise
    if region.kind == "none":
        return _never(x, sized, roof, grow)
    if region.kind in ("above", "below"):
        op = ">" if region.kind == "above" else "<"
        return ("compute-bound for ", sympy.Rel(x, region.root, op)) + when + otherwise
    return (region.reason,)


def _never(x: sympy.Symbol, sized: Sized, roof: Roof, grow: Sequence[str]) -> tuple:
    """Why x never makes it compute-bound: how high the intensity gets, against the critical."""
    critical = (f"the critical {'network ' if roof.name == 'network' else ''}intensity ", roof.critical)
    what = "network intensity" if roof.name == "network" else "intensity"
    if grow:
        tends = ratio_limit(sized.flops, roof.traffic, [dim_symbol(d) for d in grow])
        head = (f"never compute-bound: the {what} tends to ", tends)
    else:
        numbers = sized.flops.is_number and roof.traffic.is_number
        num, den = polys(*cleared(sized.flops, roof.traffic)) if not numbers else (None, None)
        tends = fraction_expr(num, den) if num is not None else sized.flops / roof.traffic
        head = (f"never compute-bound: the {what} is ", tends)
    if x not in tends.free_symbols:
        return head + (" whatever ", x, " is, below ") + critical
    num, den = sympy.fraction(tends)
    ends = (ratio_limit(num, den, [x]), tends.xreplace({x: 1}))  # monotone in x: its range ends
    top = max((e for e in ends if e.is_number), key=float, default=None)
    most = (", at most ", top, " for ", sympy.Ge(x, 1, evaluate=False)) if top is not None else ()
    return head + most + (", below ",) + critical
