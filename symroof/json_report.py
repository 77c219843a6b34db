"""The `--json` object of an analysis.

Expressions are strings in the spec's dim names that `sympy.parse_expr` reads back (pass
`local_dict` built from `symbols`, since names such as N, E, I, S mean other things to
sympy); numbers are JSON numbers (strings holding the exact value where a float cannot: past
1.8e308); nothing is NaN or Infinity.
"""

from __future__ import annotations

import math

import sympy

from .roofline import CONVENTIONS, Analysis, Threshold, dim_names
from .sharding import Local


def json_value(value):
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
    return sympy.sstr(value)


def to_json_dict(a: Analysis, limit=None, solve=None) -> dict:
    """The whole analysis as a JSON-ready dict. With several statements, `lines` holds each
    one's object and the top level the totals."""
    out = _one(a, dim_names(limit or ()), solve)
    lines = a.lines
    if len(lines) > 1:
        out["lines"] = [_one(line, [d for d in dim_names(limit or ()) if d in line.dims],
                             solve if solve in line.dims else None) for line in lines]
    out["conventions"] = CONVENTIONS
    return out


def _one(a: Analysis, limit, solve) -> dict:
    out: dict = {}
    if a.program is not None:
        out["spec"] = a.spec
        out["symbols"] = {name: "positive integer" for name in a.dims}
        local = [str(i) for plan in a.cost.plans for i in plan.items if isinstance(i, Local)]
        out["steps"] = [{
            "step": str(s.step), **({"per_chip": local[k]} if a.mesh is not None else {}),
            "compute_dtype": s.step.compute.name,
            "flops": json_value(a._at(s.flops)),
            "flops_exact": json_value(a._at(s.flops_exact)),
            "bytes_read": json_value(a._at(s.bytes_read)),
            "bytes_written": json_value(a._at(s.bytes_written)),
        } for k, s in enumerate(a.steps)]
    out["values"] = {k: int(v) for k, v in a.values.items()}
    for key in ("flops", "flops_exact", "bytes", "bytes_read", "bytes_written", "intensity",
                "intensity_exact"):
        out[key] = json_value(getattr(a, key))
    if a.mesh is not None:
        out["mesh"] = {axis.name: {"size": axis.size, "link": axis.link} for axis in a.mesh.axes}
        out["chips"] = a.mesh.chips
        out["per_chip"] = True
        out["flops_total"] = json_value(a.flops_total)
        out["replication"] = json_value(a.replication)
        out["local_steps"] = [str(item) for plan in a.cost.plans for item in plan.items
                              if isinstance(item, Local)]
    m = a.machine
    if m is not None:
        out["chip"] = {"name": m.name, "id": m.chip.id if m.chip is not None else None,
                       "compute_dtypes": [d.name for d in a.compute_dtypes],
                       "peak_flops_per_s": json_value(a.peak_flops) if a.has_peak else None,
                       "hbm_bandwidth_bytes_per_s": json_value(m.hbm_bw)}
        if a.has_peak:
            out["t_math"] = json_value(a.t_math)
        if m.hbm_bw is not None:
            out["t_comms"] = json_value(a.t_comms)
        if a.cost.moves and a.has_links:
            out.update(_network(a))
        elif a.cost.moves:
            out["collectives"] = _bare_collectives(a)
        if m.hbm_bw is not None and a.has_peak and (a.has_links or not a.cost.moves):
            out["critical_intensity"] = json_value(a.critical_intensity)
            for key in ("t_lower", "t_upper", "achieved_flops_per_s"):
                out[key] = json_value(getattr(a, key))
            out["bound"] = json_value(a.bound)
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
             "bytes": json_value(a._at(move.bytes)), "inserted": move.move.why is not None,
             "why": move.move.why} for move in a.cost.moves]


def _network(a: Analysis) -> dict:
    entries = []
    for move, t in a.collectives:
        entries.append({"op": move.move.kind, "axes": list(move.move.axes),
                        "array": move.move.before.text(move.move.dtype),
                        "bytes": json_value(move.bytes), "link": t.links,
                        "t": json_value(t.total), "t_bandwidth": json_value(t.bandwidth),
                        "t_latency": json_value(t.latency) if t.latency_known else None, "hops": t.hops,
                        "inserted": move.move.why is not None, "why": move.move.why})
    return {"collectives": entries, "t_network": json_value(a.t_network),
            "t_network_latency": json_value(a.t_network_latency),
            "t_network_latency_known": a.t_network_latency_known,
            "network_bytes": json_value(a.network_bytes),
            "network_intensity": json_value(a.network_intensity),
            "critical_network_intensity": json_value(a.critical_network_intensity)}


def threshold_dict(t: Threshold) -> dict:
    out = {"var": t.var, "op": t.op, "rule": json_value(t.rule), "exact": json_value(t.exact),
           "condition": json_value(t.condition), "otherwise": t.otherwise,
           "rule_as": list(t.rule_as), "reason": t.reason}
    if t.network is not None:
        out["network"] = {**{k: v for k, v in threshold_dict(t.network).items() if k != "var"},
                          "regime": "bandwidth-bound", "past_latency": json_value(t.network.past_latency)}
    return out

