"""Renderings of an analysis: the text table, the JSON dict, a short LaTeX summary.

Numbers appear only here: expressions keep exact rationals inside, and are shown
with six significant figures (text) or as exact strings plus floats (JSON).
"""

from __future__ import annotations

import sympy

from .roofline import CONVENTIONS, Analysis, Threshold

_TIME_UNITS = [(1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"), (1e-12, "ps")]


# ---- numbers and expressions for people ---------------------------------------------------

def number(value, digits: int = 6) -> str:
    """A number for people: 240.244, 1.97e14, 4096.

    Examples:
        >>> number(sympy.Rational(9850, 41)), number(197000000000000), number(4096)
        ('240.244', '1.97e14', '4096')
    """
    if isinstance(value, int):
        value = sympy.Integer(value)
    elif isinstance(value, float):
        value = sympy.Float(value)
    if value.is_Integer and abs(value) < 10**7:
        return str(int(value))
    if value in (sympy.oo, -sympy.oo) or value is sympy.nan:
        return {sympy.oo: "oo", -sympy.oo: "-oo"}.get(value, "nan")
    f = float(value)
    if f == 0:
        return "0"
    if 1e-4 <= abs(f) < 1e7:
        text = f"{f:.{digits}g}"
    else:
        mantissa, exponent = f"{f:.{digits - 1}e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        text = f"{mantissa}e{int(exponent)}"
    return text


def seconds(value) -> str:
    """A time with a unit: 1.01112 ms."""
    f = float(value)
    for scale, unit in _TIME_UNITS:
        if abs(f) >= scale:
            return f"{f / scale:.6g} {unit}"
    return f"{f:.6g} s"


def pretty(expr: sympy.Basic) -> str:
    """An expression for people: common factors pulled out, a fraction with large
    coefficients scaled so its denominator leads with 1, large or non-integer numbers
    as six-figure decimals.

    Examples:
        >>> D, F = sympy.symbols("D F", positive=True)
        >>> pretty(9850*D*F/(41*D*F - 9850*D - 9850*F))
        '240.244*D*F/(D*F - 240.244*D - 240.244*F)'
        >>> pretty((2*D*F - F)/(2*D + 2*F))
        'F*(2*D - 1)/(2*(D + F))'
    """
    if isinstance(expr, str):
        return expr
    if isinstance(expr, sympy.Rel):
        return f"{pretty(expr.lhs)} {expr.rel_op} {pretty(expr.rhs)}"
    if expr.is_number:
        return number(expr)
    if isinstance(expr, (sympy.Max, sympy.Min)):
        return f"{type(expr).__name__.lower()}({', '.join(pretty(a) for a in expr.args)})"
    num, den = sympy.fraction(sympy.cancel(expr))
    if den == 1:
        shown = expr
    elif not den.is_number and _large_coefficients(num, den):
        lead = sympy.Poly(den, *sorted(den.free_symbols, key=str)).LC()
        shown = sympy.expand(num / lead) / sympy.expand(den / lead)
    else:
        shown = sympy.factor_terms(num) / sympy.factor_terms(den)
    # Small fractions (1/2) read better exact; 9850/41 reads better as 240.244.
    floats = {a: sympy.Float(a, 6) for a in shown.atoms(sympy.Rational)
              if abs(a.p) >= 10**10 or (not a.is_Integer and (abs(a.p) > 1000 or a.q > 1000))}
    return sympy.sstr(shown.xreplace(floats) if floats else shown)


def _large_coefficients(*polys) -> bool:
    return any(abs(c) > 100 for p in polys for c in sympy.expand(p).as_coefficients_dict().values())


def over(expr: sympy.Expr, divisor) -> str:
    """`expr / divisor` as a person writes it: 2*B*D*F / 1.97e14."""
    shown = pretty(expr)
    if isinstance(expr, sympy.Add):
        shown = f"({shown})"
    return f"{shown} / {number(divisor)}"


def threshold_text(t: Threshold, values: dict | None = None) -> str:
    if t.op is None:
        return t.reason or f"no threshold on {t.var}"
    parts = []
    if t.rule is not None:
        rule = f"{t.var} {t.op} {pretty(t.rule)}"
        if t.rule.is_number and t.op == ">":
            rule += f" ({t.var} >= {int(sympy.floor(t.rule)) + 1})"
        parts.append(rule + (f"  [rule: {', '.join(t.rule_as)} -> oo]" if t.rule_as
                             else "  [exact: no other named dim to take to infinity]"))
    if t.exact is not None and (t.rule is None or t.rule_as):
        exact = f"exact: {t.var} {t.op} {pretty(t.exact)}"
        if t.condition is not None:
            exact += f", when {pretty(t.condition)}"
        if values:
            exact += "  [at " + ", ".join(f"{k} = {v}" for k, v in values.items()) + "]"
        parts.append(exact)
    elif t.exact is None and t.rule_as:
        parts.append("exact: none at these sizes")
    if t.reason:
        parts.append(t.reason)
    return "\n".join(parts)


# ---- the text table -----------------------------------------------------------------------

def table(a: Analysis, limit=None, solve=None) -> str:
    """The readable report of an analysis."""
    rows: list[tuple[str, str]] = []
    if a.program is not None:
        rows.append(("spec", a.spec.replace("\n", "; ")))
        if len(a.steps) > 1 or str(a.steps[0].step) != a.spec:
            for i, s in enumerate(a.steps, 1):
                rows.append((f"step {i}", f"{s.step}   [{s.step.compute} compute; FLOPs {pretty(s.flops)}, "
                                          f"bytes {pretty(s.bytes)}]"))
    if a.values:
        rows.append(("sizes", ", ".join(f"{k} = {v}" for k, v in a.values.items())))
    m = a.machine
    if m is not None:
        rows.append(("chip", _machine_text(a)))
    rows.append(("FLOPs", pretty(a.flops) + ("" if a.flops_exact == a.flops
                                             else f"   (exact: {pretty(a.flops_exact)})")))
    rows.append(("bytes read", pretty(a.bytes_read)))
    rows.append(("bytes written", pretty(a.bytes_written)))
    rows.append(("bytes", pretty(a.bytes)))
    rows.append(("intensity", f"{pretty(a.intensity)} FLOPs/byte"
                 + ("" if a.intensity_exact == a.intensity else f"   (exact: {pretty(a.intensity_exact)})")))
    if m is not None and m.hbm_bw is not None:
        rows.append(("critical", f"{pretty(a.critical_intensity)} FLOPs/byte (peak / HBM bandwidth)"))
        rows.append(("T_math", _time(a.t_math, a, "math")))
        rows.append(("T_comms", _time(a.t_comms, a, "comms")))
        rows.append(("T_lower", seconds(a.t_lower) if a.t_lower.is_number else "max(T_math, T_comms)"))
        rows.append(("T_upper", seconds(a.t_upper) if a.t_upper.is_number else "T_math + T_comms"))
        rows.append(("bound", _bound_text(a)))
        if a.achieved_flops_per_s.is_number:
            share = a.achieved_flops_per_s / a.peak_flops
            rows.append(("achieved", f"{number(a.achieved_flops_per_s)} FLOPs/s at T_lower "
                                     f"({float(share):.1%} of peak)"))
    elif m is not None:
        rows.append(("T_math", _time(a.t_math, a, "math")))
    if limit:
        rows.append(("limit", f"intensity -> {pretty(a.limit(*limit))} as {', '.join(limit)} -> oo"))
    if solve:
        text = threshold_text(a.threshold(solve), _other_values(a, solve))
        rows.append(("threshold", text))
    width = max(len(k) for k, _ in rows) + 2
    lines = []
    for key, value in rows:
        first, *rest = str(value).split("\n")
        lines.append(f"{key:<{width}}{first}")
        lines.extend(" " * width + r for r in rest)
    lines.append("")
    lines.append(f"conventions: {CONVENTIONS}")
    return "\n".join(lines)


def _other_values(a: Analysis, solve) -> dict:
    return {k: v for k, v in a.values.items() if k != str(solve)}


def _machine_text(a: Analysis) -> str:
    m = a.machine
    parts = []
    rates = ", ".join(dict.fromkeys(d.name for d in a.compute_dtypes))
    if len(a.compute_dtypes) == 1:
        parts.append(f"{number(m.peak(a.compute_dtypes[0].rate))} {rates} FLOPs/s peak (dense)")
    else:
        parts.append(f"peaks for {rates}")
    if m.hbm_bw is not None:
        parts.append(f"HBM {number(m.hbm_bw)} bytes/s")
    return f"{m.name}: " + ", ".join(parts)


def _time(value, a: Analysis, which: str) -> str:
    if value.is_number:
        return seconds(value)
    m = a.machine
    if which == "comms":
        return over(a.bytes, m.hbm_bw) + " s"
    if len(a.steps) <= 1:
        return over(a.flops, m.peak(a.compute_dtypes[0].rate)) + " s"
    return " + ".join(over(s.flops.xreplace(a._subs), m.peak(s.step.compute.rate)) for s in a.steps) + " s"


def _bound_text(a: Analysis) -> str:
    bound = a.bound
    if isinstance(bound, str):
        return {"compute": "compute-bound (T_math >= T_comms)", "memory": "memory-bound (T_comms > T_math)",
                "balanced": "balanced (T_math = T_comms)"}[bound]
    return f"compute-bound when {pretty(bound)}, else memory-bound"


# ---- JSON ---------------------------------------------------------------------------------

def json_value(value):
    """A number as a JSON number, an expression as a string sympy.parse_expr reads back."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
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
                       "peak_flops_per_s": json_value(a.peak_flops),
                       "hbm_bandwidth_bytes_per_s": json_value(m.hbm_bw)}
        out["t_math"] = json_value(a.t_math)
        if m.hbm_bw is not None:
            out["critical_intensity"] = json_value(a.critical_intensity)
            for key in ("t_comms", "t_lower", "t_upper", "achieved_flops_per_s"):
                out[key] = json_value(getattr(a, key))
            out["bound"] = json_value(a.bound)
    if limit:
        out["intensity_limit"] = json_value(a.limit(*limit))
        out["limit_as"] = list(limit)
    if solve:
        t = a.threshold(solve)
        out["threshold"] = {"var": t.var, "op": t.op, "rule": json_value(t.rule),
                            "exact": json_value(t.exact), "condition": json_value(t.condition),
                            "rule_as": list(t.rule_as), "reason": t.reason}
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
