"""The `--json` object of an analysis.

Expressions are strings in the spec's dim names that `sympy.parse_expr` reads back (pass
`local_dict` built from `symbols`, since names such as N, E, I, S mean other things to
sympy); numbers are JSON numbers (strings holding the exact value where a float cannot: past
1.8e308); nothing is NaN or Infinity.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING

import sympy

from .. import plain
from ..roofline.bounds import CONVENTIONS
from ..roofline.quantities import QUANTITIES, QUANTITY, available
from ..roofline.sized import dim_names
from ..roofline.thresholds import Threshold
from ..sharding.lowering import Local

if TYPE_CHECKING:
    from ..analysis import Analysis

# The top-level keys that are not quantities: what was analysed, on what, and the answers
# to questions asked (a limit, a threshold). Every other top-level key is a declared
# quantity (quantities.py).
STRUCTURE_KEYS = ("spec", "symbols", "steps", "values", "mesh", "chips", "per_chip", "local_steps", "chip",
                  "collectives", "t_network_latency_known", "bound", "intensity_limit", "limit_as",
                  "threshold", "lines", "unfused", "conventions")


def _vector(a: Analysis) -> dict:
    """The vector unit's rate where the analysis runs vector work, with a flag saying whether
    it is an estimate, and every estimated figure the analysis runs at (path: value, source)."""
    m = a.machine
    rates = a.rates if m is not None and a.has_peak else {}
    vector = [rate for rate in rates if rate.startswith("vector")]
    out: dict = {}
    if m is not None and vector:
        out["vector_flops_per_s"] = json_value(rates[vector[0]])
        out["vector_flops_estimate"] = any(m.estimated(rate) for rate in vector)
    if m is not None:
        out["estimates"] = {path: {"value": json_value(value), "source": source}
                            for path, (value, source) in m.estimates(rates).items()}
    return out


def json_value(value: object) -> object:
    """A number as a JSON number, an expression as a string sympy.parse_expr reads back."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if value is sympy.nan:
        return None
    if isinstance(value, sympy.Basic) and value.is_number:
        if value.is_Integer:
            return int(value)
        if value in (sympy.oo, -sympy.oo):
            return str(value)
        shown = float(value)
        if not math.isfinite(shown) or (shown == 0 and value != 0):
            # beyond a float's range (2e600 FLOPs): the exact value, as a string parse_expr reads
            return sympy.sstr(value)
        return shown
    return _text(value)


@functools.lru_cache(maxsize=8192)
def _text(expr: sympy.Basic) -> str:
    """An expression as text. Cached: a model's layers repeat the same expressions, and
    sympy's printer is the slowest part of a large report."""
    return plain.text(expr)


def to_json_dict(a: Analysis, limit: str | Iterable[str] | None = None, solve: str | None = None) -> dict:
    """The whole analysis as a JSON-ready dict. With several statements, `lines` holds each
    one's object and the top level the totals."""
    out = _one(a, dim_names(limit or ()), solve)
    lines = a.lines
    if len(lines) > 1:
        out["lines"] = [_one(line, [d for d in dim_names(limit or ()) if d in line.dims],
                             solve if solve in line.dims else None, line=True) for line in lines]
    if a.unfused is not None:  # the same program with its fused blocks opened
        out["unfused"] = {key: json_value(getattr(a.unfused, key)) for key in ("bytes", "bytes_read", "bytes_written")}
        if a.machine is not None:
            out["unfused"].update(t_comms=json_value(a.unfused.t_comms), t_lower=json_value(a.unfused.t_lower))
    out["conventions"] = CONVENTIONS
    return out


def _group(needs: str, mesh: bool | None = None) -> tuple[str, ...]:
    """The declared quantities (quantities.py) that need this of the machine (and exist
    only on a mesh, or not), in their declared order."""
    return tuple(q.name for q in QUANTITIES if q.needs == needs and (mesh is None or q.mesh == mesh))


def _put(out: dict, a: Analysis, names: Iterable[str], line: bool = False) -> None:
    """The quantities' values under their names, leaving out those roofline does not
    derive (yet), and for one line of a program those reported for the whole only."""
    for name in available(a, names):
        if QUANTITY[name].line or not line:
            out[name] = json_value(getattr(a, name))


def _one(a: Analysis, limit: list[str], solve: str | None, line: bool = False) -> dict:
    """The object of an analysis, or with `line` of one statement of a program: its
    spec, counts, times, bound and collectives, and the answers asked of it (what the
    whole program's object says of its symbols, steps and chip is not repeated)."""
    out: dict = {}
    if line:
        out["spec"] = a.spec
    elif a.program is not None:
        out["spec"] = a.spec
        out["symbols"] = {name: "positive integer" for name in a.dims}
        local = [str(i) for plan in a.cost.plans for i in plan.items if isinstance(i, Local)]
        out["steps"] = [{
            "step": str(s.step), **({"per_chip": local[k]} if a.mesh is not None else {}),
            "kind": s.step.kind, "unit": s.unit,
            "compute_dtype": s.step.compute.name,
            "flops": json_value(a.substitute(s.flops)),
            "transcendentals": json_value(a.substitute(s.transcendentals)),
            "flops_exact": json_value(a.substitute(s.flops_exact)),
            "bytes_read": json_value(a.substitute(s.bytes_read)),
            "bytes_written": json_value(a.substitute(s.bytes_written)),
        } for k, s in enumerate(a.steps) if s.step is not None]  # a program's steps each have one
    if not line:
        out["values"] = {k: int(v) for k, v in a.values.items()}
    _put(out, a, _group("", mesh=False), line)
    if a.arrays:
        out["arrays"] = [{"array": str(s.tensor), "local_shape": [json_value(d) for d in s.local_shape],
                          "bytes_per_chip": json_value(s.bytes_per_chip), "bytes_total": json_value(s.bytes_total),
                          "replication": json_value(s.replication)} for s in a.arrays]
    if a.mesh is not None:
        if not line:
            # an axis without a size has size null, its chips a formula in its name
            out["mesh"] = {axis.name: {"size": axis.size, "link": axis.link,
                                       **({} if axis.ring is None else {"ring": axis.ring})}
                           for axis in a.mesh.axes}
            out["chips"] = json_value(a.mesh.chips)
            out["per_chip"] = True
        _put(out, a, _group("", mesh=True), line)
        out["local_steps"] = [str(item) for plan in a.cost.plans for item in plan.items
                              if isinstance(item, Local)]
    m = a.machine
    if m is not None:
        if not line:
            out["chip"] = {"name": m.name, "id": m.chip.id if m.chip is not None else None,
                           "compute_dtypes": [d.name for d in a.compute_dtypes],
                           "peak_flops_per_s": json_value(a.peak_flops) if a.has_peak else None,
                           "hbm_bandwidth_bytes_per_s": json_value(m.hbm_bw), **_vector(a)}
        if a.has_peak:
            _put(out, a, _group("peak"), line)
        if m.hbm_bw is not None:
            _put(out, a, _group("bandwidth"), line)
        if a.cost.moves and a.has_links:
            out.update(_network(a, line))
        elif a.cost.moves:
            out["collectives"] = _bare_collectives(a)
        if m.hbm_bw is not None and a.has_peak and (a.has_links or not a.cost.moves):
            _put(out, a, _group("roof"), line)
            # a line's bound: the word, or null where it depends on the sizes (compare
            # its t_math and t_comms); the whole program's object gives the condition
            out["bound"] = a.settled_bound if line else json_value(a.bound)
    elif a.cost.moves:
        out["collectives"] = _bare_collectives(a)
    if limit:
        out["intensity_limit"] = json_value(a.limit(*limit))
        out["limit_as"] = list(limit)
    if solve:
        out["threshold"] = threshold_dict(a.threshold(solve))
        if a.cost.moves and a.has_links and out["threshold"].get("network") is not None:
            out["threshold"]["network"]["latency_floor"] = json_value(a.t_network_latency) \
                if a.t_network_latency_known else None
    return out


def _bare_collectives(a: Analysis) -> list:
    """The collectives without times, where no link figures are given."""
    return [{"op": move.move.kind, "axes": list(move.move.axes), "array": move.move.before.text(move.move.dtype),
             "bytes": json_value(a.substitute(move.bytes)), "inserted": move.move.why is not None,
             "why": move.move.why} for move in a.cost.moves]


def _network(a: Analysis, line: bool = False) -> dict:
    entries = []
    for move, t in a.collectives:
        entries.append({"op": move.move.kind, "axes": list(move.move.axes),
                        "array": move.move.before.text(move.move.dtype),
                        "bytes": json_value(move.bytes), "link": t.links,
                        "t": json_value(t.total), "t_bandwidth": json_value(t.bandwidth),
                        "t_latency": json_value(t.latency) if t.latency_known else None, "hops": json_value(t.hops),
                        "inserted": move.move.why is not None, "why": move.move.why})
    out: dict = {"collectives": entries}
    _put(out, a, _group("links", mesh=True), line)
    out["t_network_latency_known"] = a.t_network_latency_known
    return out


def threshold_dict(t: Threshold) -> dict:
    out = {"var": t.var, "op": t.op, "rule": json_value(t.rule), "exact": json_value(t.exact),
           "condition": json_value(t.condition), "otherwise": t.otherwise,
           "rule_as": list(t.rule_as), "reason": t.reason}
    if t.network is not None:
        out["network"] = {**{k: v for k, v in threshold_dict(t.network).items() if k != "var"},
                          "regime": "bandwidth-bound", "past_latency": json_value(t.network.past_latency)}
    return out

