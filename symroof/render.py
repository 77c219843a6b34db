"""Renderings of an analysis: the text table, the JSON dict, a short LaTeX summary.

Numbers appear only here: expressions keep exact rationals inside, and are shown
with six significant figures (text) or as exact strings plus floats (JSON).
"""

from __future__ import annotations

import sympy

from .ir import label_text
from .roofline import CONVENTIONS, Analysis, Threshold, dim_names
from .show import number, over, pretty, seconds

def threshold_text(t: Threshold, values: dict | None = None) -> str:
    """A threshold in lines: the rule, the exact answer with its condition, then the reason."""
    parts = []
    if t.rule is not None:
        how = f"[rule: {', '.join(t.rule_as)} -> oo]" if t.rule_as else \
            "[exact: no other named dim to take to infinity]"
        parts.append(f"{_bound_on(t.var, t.op, t.rule)}  {how}")
    if t.exact is not None and t.rule_as and t.exact != t.rule:
        exact = f"exact: {_bound_on(t.var, t.op, t.exact)}"
        if t.condition is not None:
            exact += f", when {pretty(t.condition)}"
            exact += {"never": " (never otherwise)", "always": f" (at every {t.var} otherwise)"}.get(
                t.otherwise, "")
        if values:
            exact += "  [at " + ", ".join(f"{k} = {v}" for k, v in values.items()) + "]"
        parts.append(exact)
    if t.reason:
        parts.extend(t.reason.split("; "))
    return "\n".join(parts) or f"no threshold on {t.var}"


def _bound_on(var: str, op: str, value) -> str:
    text = f"{var} {op} {pretty(value)}"
    if value.is_number and op == ">":
        if value < 1:
            return f"{text}: every {var} >= 1"
        return f"{text} ({var} >= {int(sympy.floor(value)) + 1})"
    return text


# ---- the text table -----------------------------------------------------------------------

def table(a: Analysis, limit=None, solve=None) -> str:
    """The readable report of an analysis."""
    limit = dim_names(limit or ())
    rows: list[tuple[str, str]] = []
    if a.program is not None:
        rows.append(("spec", a.spec.replace("\n", "; ")))
        if len(a.steps) > 1 or str(a.steps[0].step) != a.spec:
            for i, s in enumerate(a.steps, 1):
                summed = ", ".join(label_text(l) for l in s.step.summed) or "nothing"
                rows.append((f"step {i}", f"{s.step}   [sums {summed}; {s.step.compute} compute; "
                                          f"FLOPs {pretty(s.flops)}, bytes {pretty(s.bytes)}]"))
    if a.values:
        rows.append(("sizes", ", ".join(f"{k} = {v}" for k, v in a.values.items())))
    m = a.machine
    if m is not None:
        rows.append(("chip", _machine_text(a)))
    rows.append(("FLOPs", pretty(a.flops) + ("" if a.flops_exact == a.flops
                                             else f"   (exact: {pretty(a.flops_exact)})")))
    if a.program is not None:  # bare counts have no reads and writes to tell apart
        rows.append(("bytes read", pretty(a.bytes_read)))
        rows.append(("bytes written", pretty(a.bytes_written)))
    rows.append(("bytes", pretty(a.bytes)))
    rows.append(("intensity", f"{pretty(a.intensity)} FLOPs/byte"
                 + ("" if a.intensity_exact == a.intensity else f"   (exact: {pretty(a.intensity_exact)})")))
    if m is not None and a.has_peak:
        if m.hbm_bw is not None:
            rows.append(("critical", _critical_text(a)))
        rows.append(("T_math", _time(a, "math")))
    if m is not None and m.hbm_bw is not None:
        rows.append(("T_comms", _time(a, "comms")))
    if m is not None and m.hbm_bw is not None and a.has_peak:
        rows.append(("T_lower", seconds(a.t_lower) if a.t_lower.is_number else "max(T_math, T_comms)"))
        rows.append(("T_upper", seconds(a.t_upper) if a.t_upper.is_number else "T_math + T_comms"))
        rows.append(("bound", _bound_text(a)))
        if a.achieved_flops_per_s.is_number and a.flops != 0:
            share = a.achieved_flops_per_s / a.peak_flops
            rows.append(("achieved", f"{number(a.achieved_flops_per_s)} FLOPs/s at T_lower "
                                     f"({float(share):.1%} of peak)"))
    elif m is not None:
        rows.append(("note", "give both a peak (a chip or --peak-flops) and --hbm-bw for the "
                             "times, the bound and thresholds"))
    if limit:
        rows.append(("limit", f"intensity -> {pretty(a.limit(*limit))} as {', '.join(limit)} -> oo"))
    if solve:
        rows.append(("threshold", threshold_text(a.threshold(solve), a.values)))
    width = max(len(k) for k, _ in rows) + 2
    lines = []
    for key, value in rows:
        first, *rest = str(value).split("\n")
        lines.append(f"{key:<{width}}{first}")
        lines.extend(" " * width + r for r in rest)
    lines.append("")
    lines.append(f"conventions: {CONVENTIONS}")
    return "\n".join(lines)


def _rates(a: Analysis) -> dict:
    """Each compute dtype's rate, and the peak it runs at."""
    return {d.rate: a.machine.peak(d.rate) for d in a.compute_dtypes}


def _machine_text(a: Analysis) -> str:
    m = a.machine
    parts = []
    if a.has_peak and a.compute_dtypes:
        peaks = " + ".join(f"{number(peak)} {rate}" for rate, peak in _rates(a).items())
        parts.append(f"{peaks} FLOPs/s peak (dense)")
    if m.hbm_bw is not None:
        parts.append(f"HBM {number(m.hbm_bw)} bytes/s")
    return f"{m.name}: " + ", ".join(parts)


def _critical_text(a: Analysis) -> str:
    if a.critical_intensity is sympy.nan:
        return "none: no FLOPs to run"
    if a.critical_intensity.is_number:
        return f"{pretty(a.critical_intensity)} FLOPs/byte (peak / HBM bandwidth)"
    each = ", ".join(f"{pretty(peak / a.machine.hbm_bw)} ({rate})" for rate, peak in _rates(a).items())
    return f"{each} FLOPs/byte: the steps compute in different dtypes"


def _time(a: Analysis, which: str) -> str:
    value = a.t_math if which == "math" else a.t_comms
    if value.is_number:
        return seconds(value)
    if which == "comms":
        return over(a.bytes, a.machine.hbm_bw) + " s"
    by_rate: dict[str, sympy.Expr] = {}
    for s in a.steps:
        if s.flops != 0:
            by_rate[s.step.compute.rate] = by_rate.get(s.step.compute.rate, 0) + s.flops.xreplace(a._subs)
    if not a.steps:
        by_rate = {a.compute_dtypes[0].rate: a.flops}
    return " + ".join(over(flops, a.machine.peak(rate)) for rate, flops in by_rate.items()) + " s"


def _bound_text(a: Analysis) -> str:
    bound = a.bound
    if isinstance(bound, str):
        return {"compute": "compute-bound (T_math >= T_comms)", "memory": "memory-bound (T_comms > T_math)",
                "balanced": "balanced (T_math = T_comms)"}[bound]
    if a.critical_intensity.is_number:
        return f"compute-bound when {pretty(bound)}, else memory-bound"
    return (f"compute-bound when T_math > T_comms: {_time(a, 'math')[:-2]} > {_time(a, 'comms')[:-2]}, "
            "else memory-bound")


# ---- JSON ---------------------------------------------------------------------------------

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
        return float(value)
    return sympy.sstr(value)


def to_json_dict(a: Analysis, limit=None, solve=None) -> dict:
    """The `--json` object. Expressions are strings in the spec's dim names (pass
    `local_dict=symbols` to `sympy.parse_expr`); numbers are JSON numbers."""
    limit = dim_names(limit or ())
    out: dict = {}
    if a.program is not None:
        out["spec"] = a.spec
        out["symbols"] = {name: "positive integer" for name in a.dims}
        out["steps"] = [{
            "step": str(s.step), "compute_dtype": s.step.compute.name,
            "flops": json_value(s.flops.xreplace(a._subs)),
            "flops_exact": json_value(s.flops_exact.xreplace(a._subs)),
            "bytes_read": json_value(s.bytes_read.xreplace(a._subs)),
            "bytes_written": json_value(s.bytes_written.xreplace(a._subs)),
        } for s in a.steps]
    out["values"] = {k: int(v) for k, v in a.values.items()}
    for key in ("flops", "flops_exact", "bytes", "bytes_read", "bytes_written", "intensity",
                "intensity_exact"):
        out[key] = json_value(getattr(a, key))
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
        if m.hbm_bw is not None and a.has_peak:
            out["critical_intensity"] = json_value(a.critical_intensity)
            for key in ("t_lower", "t_upper", "achieved_flops_per_s"):
                out[key] = json_value(getattr(a, key))
            out["bound"] = json_value(a.bound)
    if limit:
        out["intensity_limit"] = json_value(a.limit(*limit))
        out["limit_as"] = list(limit)
    if solve:
        t = a.threshold(solve)
        out["threshold"] = {"var": t.var, "op": t.op, "rule": json_value(t.rule),
                            "exact": json_value(t.exact), "condition": json_value(t.condition),
                            "otherwise": t.otherwise, "rule_as": list(t.rule_as), "reason": t.reason}
    out["conventions"] = CONVENTIONS
    return out


# ---- LaTeX --------------------------------------------------------------------------------

def latex_summary(a: Analysis) -> str:
    """A few aligned equations for Jupyter (`_repr_latex_`)."""
    names = {sympy.Symbol(n, positive=True, integer=True): (n if len(n) == 1 else rf"\mathit{{{n}}}")
             for n in a.dims}
    tex = lambda e: sympy.latex(e, symbol_names=names) if not isinstance(e, str) else rf"\text{{{e}}}"
    rows = [(r"\text{FLOPs}", tex(a.flops)), (r"\text{bytes}", tex(a.bytes)),
            (r"\text{intensity}", tex(a.intensity))]
    if a.machine is not None and a.machine.hbm_bw is not None:
        rows += [(r"\text{critical intensity}", tex(sympy.Float(a.critical_intensity, 6))
                  if a.critical_intensity.is_number else tex(a.critical_intensity)),
                 (r"T_\text{math}", tex(a.t_math)), (r"T_\text{comms}", tex(a.t_comms))]
    body = r" \\ ".join(f"{k} &= {v}" for k, v in rows)
    return rf"$$\begin{{aligned}} {body} \end{{aligned}}$$"
