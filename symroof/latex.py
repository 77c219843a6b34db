"""LaTeX derivations of an analysis, in the chapter's style.

    >>> from symroof import analyze
    >>> print(derivation(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="tpu-v5e"),
    ...                  solve="B", limit=["D", "F"]))
    \\begin{align*}
    \\text{FLOPs} &= 2 B D F \\quad \\text{(exactly } B F \\left(2 D - 1\\right)\\text{)} \\\\
    \\text{bytes} &= \\underbrace{2 B D + 2 D F}_{\\text{read}} + \\underbrace{2 B F}_{\\text{written}} \\\\
    \\text{Intensity}(\\text{matmul}) &= \\frac{2 B D F}{2 B D + 2 B F + 2 D F} = \\frac{B D F}{B D + B F + D F} \\to B \\quad (D, F \\to \\infty) \\\\
    \\text{Intensity}(\\text{TPU v5e}) &= \\frac{1.97\\times10^{14}}{8.2\\times10^{11}} \\approx 240.2 \\\\
    T_\\text{math} &= \\frac{2 B D F}{1.97\\times10^{14}}\\ \\text{s} \\\\
    T_\\text{comms} &= \\frac{2 B D + 2 B F + 2 D F}{8.2\\times10^{11}}\\ \\text{s} \\\\
    B &> \\frac{1.97\\times10^{14}}{8.2\\times10^{11}} \\approx 240.2 \\quad (D, F \\to \\infty) \\\\
    B &> \\frac{240.2 D F}{D F - 240.2 D - 240.2 F} \\quad \\text{when } \\frac{D F}{D + F} > 240.2
    \\end{align*}

Dim names print as written: a multi-letter name is one italic word (`\\mathit{seq}`), never
a product of letters.
"""

from __future__ import annotations

import re

import sympy
from sympy.printing.latex import LatexPrinter

from .show import number


def tex_number(value, digits: int = 4) -> str:
    """1.97e14 as 1.97\\times10^{14}; 240.2439 as 240.2.

    Examples:
        >>> tex_number(sympy.Integer(197000000000000)), tex_number(sympy.Rational(9850, 41))
        ('1.97\\\\times10^{14}', '240.2')
    """
    if 1000 <= abs(float(value)) < 10**7 and not sympy.Rational(value).is_Integer:
        return f"{float(value):.1f}"  # 8755.6, as the book writes thresholds
    text = number(value, digits)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return (f"{mantissa}\\times10^{{{int(exponent)}}}" if mantissa != "1"
                else f"10^{{{int(exponent)}}}")
    return text


class _Printer(LatexPrinter):
    """sympy's LaTeX with multi-letter dims as one word and numbers in the book's style."""

    def __init__(self, names):
        super().__init__({"symbol_names": names})

    def _print_Float(self, expr):
        return tex_number(expr)

    def _print_Rational(self, expr):
        if expr.is_Integer or (abs(expr.p) < 10**4 and expr.q < 10**4):
            return super()._print_Rational(expr)
        return tex_number(expr)


def _names(a) -> dict:
    names = {}
    for name in a.dims:
        symbol = sympy.Symbol(name, positive=True, integer=True)
        names[symbol] = name if len(name) == 1 else rf"\mathit{{{_escape(name)}}}"
    return names


def _escape(name: str) -> str:
    return re.sub(r"([#$%&_{}])", r"\\\1", name)


def derivation(a, solve=None, limit=None, markdown: bool = False, name: str | None = None) -> str:
    """The analysis as aligned equations: FLOPs, bytes, the intensity as a fraction and
    simplified, its limit, the chip's critical intensity with its numbers, the times, and
    the threshold by rule and exactly. `markdown` gives `$$ ... $$` (an `aligned` block)
    for docs sites; otherwise an `align*` block."""
    from .roofline import dim_names

    tex = _Printer(_names(a)).doprint
    rows = [(r"\text{FLOPs}", tex(a.flops) + _exact(a, tex))]
    if a.program is not None and a.bytes_written != 0:
        rows.append((r"\text{bytes}", rf"\underbrace{{{tex(a.bytes_read)}}}_{{\text{{read}}}} + "
                                      rf"\underbrace{{{tex(a.bytes_written)}}}_{{\text{{written}}}}"))
    else:
        rows.append((r"\text{bytes}", tex(a.bytes)))
    if a.mesh is not None:
        for plan in a.cost.plans:
            for item in plan.items:
                rows.append((r"\text{per chip}" if hasattr(item, "inputs") else r"\text{collective}",
                             rf": \texttt{{{_text(str(item))}}}"))
    label = name or _kind(a)
    intensity = rf"\frac{{{tex(a.flops)}}}{{{tex(a.bytes)}}}" if a.bytes != 0 else r"\infty"
    if a.bytes != 0 and sympy.simplify(a.intensity - a.flops / a.bytes) == 0 and \
            tex(a.intensity) != intensity:
        intensity += f" = {_frac(a.intensity, tex)}"
    dims = dim_names(limit or ())
    if dims:
        intensity += rf" \to {tex(a.limit(*dims))} \quad ({', '.join(_dim(d) for d in dims)} \to \infty)"
    rows.append((rf"\text{{Intensity}}(\text{{{label}}})", intensity))
    m = a.machine
    if m is not None and m.hbm_bw is not None and a.has_peak and a.critical_intensity.is_number \
            and a.critical_intensity is not sympy.nan:
        peak, bw = a.peak_flops, m.hbm_bw
        rows.append((rf"\text{{Intensity}}(\text{{{m.name}}})",
                     rf"\frac{{{tex_number(peak)}}}{{{tex_number(bw)}}} \approx {tex_number(peak / bw)}"))
        rows.append((r"T_\text{math}", _time(a.flops, peak, tex)))
        rows.append((r"T_\text{comms}", _time(a.bytes, bw, tex)))
        if a.collectives:
            parts = [_time(move.bytes, move.bytes / t.bandwidth, tex)[:-len(r"\ \text{s}")]
                     for move, t in a.collectives]
            rows.append((r"T_\text{network}", " + ".join(parts) + r"\ \text{s}"))
        if solve:
            rows += _threshold_rows(a, solve, tex)
    relation = lambda right: "" if right.startswith((">", "<", ":", "\\text")) else "= "
    body = " \\\\\n".join(f"{left} &{relation(right)}{right}" for left, right in rows)
    if markdown:
        return f"$$\n\\begin{{aligned}}\n{body}\n\\end{{aligned}}\n$$"
    return f"\\begin{{align*}}\n{body}\n\\end{{align*}}"


def _exact(a, tex) -> str:
    if a.flops_exact == a.flops:
        return ""
    return rf" \quad \text{{(exactly }} {tex(a.flops_exact)}\text{{)}}"


def _frac(expr, tex) -> str:
    num, den = sympy.fraction(expr)
    if den == 1:
        return tex(expr)
    if not den.is_number and _large(num, den):
        # 9850 D F / (41 D F - ...) reads better as 240.2 D F / (D F - 240.2 D - ...)
        lead = sympy.Poly(den, *sorted(den.free_symbols, key=str)).LC()
        decimals = lambda e: e.xreplace({r: sympy.Float(r, 6) for r in e.atoms(sympy.Rational)
                                         if not r.is_Integer})
        num, den = decimals(sympy.expand(num / lead)), decimals(sympy.expand(den / lead))
    return rf"\frac{{{tex(num)}}}{{{tex(den)}}}"


def _large(*polys) -> bool:
    return any(abs(c) > 100 for p in polys for c in sympy.expand(p).as_coefficients_dict().values())


def _time(amount, rate, tex) -> str:
    if amount.is_number:
        return rf"{tex_number(amount / rate)}\ \text{{s}}"
    return rf"\frac{{{tex(amount)}}}{{{tex_number(rate)}}}\ \text{{s}}"


def _dim(name: str) -> str:
    return name if len(name) == 1 else rf"\mathit{{{_escape(name)}}}"


def _kind(a) -> str:
    """What to call the contraction in `\\text{Intensity}(...)`."""
    steps = a.steps
    if a.program is None or len(steps) != 1:
        return "spec"
    if a.mesh is not None:
        return "per chip"
    step = steps[0].step
    if len(step.inputs) == 2 and step.summed:
        if not step.output.labels or all(l.startswith("1") for l in step.output.labels):
            return "dot product"
        return "matmul"
    return "spec"


def _threshold_rows(a, solve, tex) -> list[tuple[str, str]]:
    t = a.threshold(solve)
    var = _dim(t.var)
    rows = []
    peak, bw = a.peak_flops, a.machine.hbm_bw
    if t.op is None:
        return [("", _never(a, t, tex))]
    if t.rule is not None and t.rule_as:
        k = sympy.nsimplify(t.rule / (peak / bw))
        ratio = rf"\frac{{{tex_number(peak)}}}{{{tex_number(bw)}}}"
        scaled = ratio if k == 1 else (rf"{tex(k)} \cdot {ratio}" if k.is_Rational and k.q < 100 else None)
        shown = f"{scaled} \\approx {tex_number(t.rule)}" if scaled else tex_number(t.rule)
        grow = ", ".join(_dim(d) for d in t.rule_as)
        rows.append((var, rf"{t.op} {shown} \quad ({grow} \to \infty)"))
    if t.exact is not None and (t.exact != t.rule or not t.rule_as):
        exact = tex_number(t.exact) if t.exact.is_number else _frac(t.exact, tex)
        sized = [(k, v) for k, v in a.values.items() if k != t.var]
        if sized and t.exact.is_number:
            exact += r" \quad (" + ", ".join(f"{_dim(k)} = {v}" for k, v in sized) + ")"
        if t.condition is not None:
            exact += rf" \quad \text{{when }} {tex(t.condition.lhs)} > {tex_number(t.condition.rhs)}"
        rows.append((var, f"{t.op} {exact}"))
    if t.network is not None and t.network.rule is not None:
        n = t.network
        critical = a.critical_network_intensity
        k = sympy.nsimplify(n.rule / critical) if critical.is_number else None
        link = peak / critical if critical.is_number else None
        ratio = rf"\frac{{{tex_number(peak)}}}{{{tex_number(link)}}}" if link is not None else None
        scaled = None if ratio is None else (ratio if k == 1 else
                                             (rf"{tex(k)} \cdot {ratio}" if k.is_Rational and k.q < 100 else None))
        shown = f"{scaled} \\approx {tex_number(n.rule)}" if scaled else tex_number(n.rule)
        rows.append((var, rf"{n.op} {shown} \quad \text{{(against the network)}}"))
    return rows


def _text(words: str) -> str:
    """Plain words made safe inside \\text{...}, with -> oo and >= as math."""
    words = re.sub(r"([#$%&_{}])", r"\\\1", words).replace("^", r"\^{}").replace("~", r"\~{}")
    return words.replace("-> oo", r"$\to\infty$").replace(">=", r"$\ge$")


def _never(a, t, tex) -> str:
    """No threshold: in symbols where the intensity has a bound, else the reason in words."""
    from .solve import ratio_limit
    x = sympy.Symbol(t.var, positive=True, integer=True)
    reason = _first(t.reason)
    if not reason.startswith("never") or a.bytes == 0 or a.intensity.free_symbols - {x}:
        return rf"\text{{{_text(reason)}}}"
    num, den = sympy.fraction(a.intensity)
    ends = [ratio_limit(num, den, [x]), a.intensity.xreplace({x: 1})]
    top = max((e for e in ends if e.is_number), key=float)
    return (rf"\text{{never compute-bound: }} \text{{Intensity}} \le {tex(top)} < "
            rf"{tex_number(a.critical_intensity)} \quad ({_dim(t.var)} \ge 1)")


def _first(reason: str | None) -> str:
    return (reason or "no threshold").split(";")[0]


def latex_summary(a) -> str:
    """The derivation for Jupyter (`_repr_latex_`): display math that notebooks render."""
    return derivation(a, markdown=True).replace("$$\n", "$$", 1)
