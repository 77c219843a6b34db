"""LaTeX derivations of an analysis, in the chapter's style.

    >>> from symroof import analyze
    >>> print(derivation(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="tpu-v5e"),
    ...                  solve="B", limit=["D", "F"]))
    \\begin{align*}
    \\text{FLOPs} &= 2 B D F \\quad \\text{(exactly } B F \\left(2 D - 1\\right)\\text{)} \\\\
    \\text{bytes} &= \\underbrace{2 B D + 2 D F}_{\\text{read}} + \\underbrace{2 B F}_{\\text{written}} \\\\
    \\text{Intensity}(\\text{matmul}) &= \\frac{2 B D F}{2 B D + 2 B F + 2 D F} = \\frac{B D F}{B D + B F + D F} \\to B \\quad (D, F \\to \\infty) \\\\
    \\text{Intensity}(\\text{TPU v5e, bf16}) &= \\frac{1.97\\times10^{14}}{8.2\\times10^{11}} \\approx 240.2 \\\\
    T_\\text{math} &= \\frac{2 B D F}{1.97\\times10^{14}}\\ \\text{s} \\\\
    T_\\text{comms} &= \\frac{2 B D + 2 B F + 2 D F}{8.2\\times10^{11}}\\ \\text{s} \\\\
    B &> \\frac{1.97\\times10^{14}}{8.2\\times10^{11}} \\approx 240.2 \\quad (D, F \\to \\infty) \\\\
    B &> \\frac{240.2 D F}{D F - 240.2 D - 240.2 F} \\quad \\text{when } \\frac{D F}{D + F} > 240.2\\text{, never otherwise}
    \\end{align*}

Dim names print as written: a multi-letter name is one italic word (`\\mathit{seq}`), set
apart from its neighbours by a thin space, never a product of letters; Greek letters
print as their commands (`\\Delta`), other non-ASCII names as text.
"""  # noqa: E501 (the doctest's LaTeX lines are as long as the derivation writes them)

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING

import sympy

from ..ir import dim_symbol, label_text
from ..roofline.quantities import nonzero, symbol
from ..roofline.sized import dim_names
from ..show import number
from .tex import TexPrinter, tex_name, tex_number, tex_words

if TYPE_CHECKING:
    from ..analysis import Analysis
    from ..ir import Term
    from ..roofline.thresholds import Threshold

Tex = Callable[[sympy.Basic], str]  # an expression in LaTeX, its dims named as the analysis's printer names them

_SECONDS = r"\ \text{s}"


def _printer(a: Analysis) -> TexPrinter:
    names = {dim_symbol(n): tex_name(n) for n in a.dims}
    if a.mesh is not None:  # a mesh axis's size, where it has none: |X|, the chips along X
        names.update({dim_symbol(n): rf"|{tex_name(n)}|" for n in a.mesh.symbolic})
    return TexPrinter(names, words=any(len(n) > 1 for n in a.dims))


def derivation(a: Analysis, solve: str | None = None, limit: str | Iterable[str] | None = None,
               markdown: bool = False, name: str | None = None) -> str:
    """The analysis as aligned equations: FLOPs, bytes, the intensity as a fraction and
    simplified, its limit, the chip's critical intensity with its numbers, the times, and
    the threshold by rule and exactly, with what the text report says in words where no
    number says it. `markdown` gives `$$ ... $$` (an `aligned` block) for docs sites;
    otherwise an `align*` block. `name` names the intensity's row (by default what the
    spec is: a matmul, a dot product, a chain, ...).

    Every spec that `analyze` takes renders, or the reason it cannot is a `SymroofError`
    (a dim with a size named in `limit`, a chip without a peak for a dtype, ...)."""
    tex = _printer(a).doprint
    on_mesh = a.mesh is not None
    rows: list[tuple[str, str, str]] = []  # (left, relation, right); no left is ever empty
    if a.arrays and not a.steps and not a.cost.moves:  # arrays alone: what they take of memory
        return _block(_arrays(a, tex), markdown)
    rows.append((_per_chip(symbol("flops"), on_mesh), "=", tex(a.flops) + _exact(a, tex)))
    vector, transcendentals = nonzero(a, "flops_vector"), nonzero(a, "transcendentals")
    if vector is not None:
        rows.append((symbol("flops_vector"), "=", rf"{tex(vector)} \quad \text{{(on the vector unit)}}"))
    if transcendentals is not None:
        rows.append((symbol("transcendentals"), "=", rf"{tex(transcendentals)} \quad "
                                                     r"\text{(exp, log, tanh, rsqrt, ...: apart from FLOPs)}"))
    if a.mesh is not None:
        chips = a.substitute(a.mesh.count)
        count = str(chips) if chips.is_number else rf"}} {tex(chips)} \text{{"  # |X| chips: in math
        rows.append((symbol("flops_total"), "=", f"{tex(a.flops_total)} \\quad "
                     rf"\text{{(over {count} chip{'s' if chips != 1 else ''}, replication "
                     + (f"{number(a.replication)})}}" if a.replication.is_number
                        else rf"}} {_frac(a.replication, tex)}\text{{)}}")))
    bytes_label = _per_chip(symbol("bytes"), on_mesh)
    if a.program is not None and a.bytes_written != 0:
        rows.append((bytes_label, "=", rf"\underbrace{{{tex(a.bytes_read)}}}_{{\text{{read}}}} + "
                                       rf"\underbrace{{{tex(a.bytes_written)}}}_{{\text{{written}}}}"))
    else:
        rows.append((bytes_label, "=", tex(a.bytes)))
    for plan in a.cost.plans:
        for item in plan.items:
            kind = r"\text{on each chip}" if hasattr(item, "inputs") else r"\text{collective}"
            rows.append((kind, ":", rf"\text{{{tex_words(str(item))}}}"))
    rows.append((_intensity_label(a, name), "=", _intensity(a, tex, limit)))
    m = a.machine
    if m is not None and m.hbm_bw is not None and a.has_peak:
        bw = m.hbm_bw
        if a.flops != 0:
            groups = _peaks(a)  # peak -> the dtypes that run at it
            for peak, rates in groups.items():
                named = ", ".join(rate + (" (estimate)" if m.estimated(rate) else "") for rate in rates)
                rows.append((rf"{symbol('intensity')}(\text{{{tex_words(m.name)}, {named}}})", "=",
                             rf"{_ratio(peak, bw)} \approx {tex_number(peak / bw)}"))
            if len(groups) == 1:
                peak = next(iter(groups))
                t_math = _over(_flops_at(a, groups[peak]), peak, tex)
            else:  # steps at different rates: each dtype's FLOPs over its own peak
                t_math = " + ".join(_over(_flops_at(a, rates), peak, tex) for peak, rates in groups.items())
            rows.append((symbol("t_math"), "=", t_math + _SECONDS))
        else:
            rows.append((symbol("t_math"), "=", "0" + _SECONDS))
        t_vector = nonzero(a, "t_vector")
        if t_vector is not None:
            guessed = any(m.estimated(rate) for rate in a.rates if rate.startswith("vector"))
            rows.append((symbol("t_vector"), "=", _value(t_vector, tex) + _SECONDS
                         + r" \quad \text{(of } T_\text{math} \text{, on the vector unit"
                         + (r", at an estimated rate" if guessed else "") + r")}"))
        rows.append((symbol("t_comms"), "=", _over(a.bytes, bw, tex) + _SECONDS))
        if a.cost.moves and a.has_links:
            rows.append((symbol("t_network"), "=", _network(a, tex)))
        elif a.cost.moves:
            rows.append((symbol("t_network"), ":", r"\text{needs link figures (a chip, or --ici-bw)}"))
        if (not a.cost.moves or a.has_links) and isinstance(a.bound, str):
            rows.append((r"\text{bound}", ":", rf"\text{{{a.bound}}}"))
    if solve:
        rows += _threshold_rows(a, solve, tex)  # without a chip, a.threshold says what it needs
    return _block(rows + (_arrays(a, tex) if a.arrays else []), markdown)


def _arrays(a: Analysis, tex: Tex) -> list[tuple[str, str, str]]:
    """Bare arrays: each one's bytes per chip (its shard) and in all, with replication."""
    rows = []
    for s in a.arrays:
        shard = rf" \quad \text{{(a shard {tex_words(s.local_text())}; in all }} {tex(s.bytes_total)}" \
                rf"\text{{, replication }} {tex(s.replication)}\text{{)}}" if a.mesh is not None else ""
        rows.append((rf"\text{{bytes of {tex_words(str(s.tensor))}}}", "=", tex(s.bytes_per_chip) + shard))
    if len(a.arrays) > 1 or a.mesh is not None:
        rows.append((_per_chip(r"\text{bytes stored}", a.mesh is not None), "=", tex(a.bytes_per_chip)))
    if a.mesh is not None:
        rows.append((symbol("bytes_total"), "=", tex(a.bytes_total) + r" \quad \text{(replicas included)}"))
    return rows


def _block(rows: list[tuple[str, str, str]], markdown: bool) -> str:
    """The rows as one aligned block."""
    body = " \\\\\n".join(f"{left} &{'' if rel == '>' or rel == '<' else rel + ' '}{right}"
                          if rel in ("=", ":") else f"{left} &{rel} {right}" for left, rel, right in rows)
    if markdown:
        return f"$$\n\\begin{{aligned}}\n{body}\n\\end{{aligned}}\n$$"
    return f"\\begin{{align*}}\n{body}\n\\end{{align*}}"


def _per_chip(label: str, on_mesh: bool) -> str:
    """`\\text{FLOPs}` as `\\text{FLOPs per chip}` on a mesh."""
    return label[:-1] + " per chip}" if on_mesh and label.startswith(r"\text{") else label


def _peaks(a: Analysis) -> dict[sympy.Expr, list[str]]:
    """Each peak FLOPs/s the steps run at, with the dtypes that run at it, in the steps'
    order: one entry for a spec in one dtype (or a flat --peak-flops), one per rate for a
    chain whose steps compute in different dtypes (int8 then fp16)."""
    groups: dict[sympy.Expr, list[str]] = {}
    for name, peak in a.rates.items():
        groups.setdefault(peak, []).append(name)
    return groups


def _flops_at(a: Analysis, rates: Collection[str]) -> sympy.Expr:
    """The work run at these rates (at the analysis's sizes): FLOPs, and transcendentals on
    the vector unit."""
    return sympy.Add(*(work for name, work in a.work.items() if name in rates))


def _intensity(a: Analysis, tex: Tex, limit: str | Iterable[str] | None) -> str:
    dims = dim_names(limit or ())
    # asked first: a bad dim, or one with a size, is an error whatever follows
    tends = a.limit(*dims) if dims else None
    if a.bytes == 0:
        return r"\text{undefined (no bytes)}" if a.flops == 0 else r"\infty"
    # per-chip counts such as BDF/4 over BD/4 + ...: both sides times 4, no fraction in a fraction
    scale = sympy.ilcm(_denominator(a.flops), _denominator(a.bytes))
    shown = rf"\frac{{{tex(sympy.expand(a.flops * scale))}}}{{{tex(sympy.expand(a.bytes * scale))}}}"
    simplified = _frac(a.intensity, tex)
    if simplified != shown:
        shown += f" = {simplified}"
    if a.intensity.is_number and not a.intensity.is_Integer:
        shown += rf" \approx {tex_number(a.intensity)}"
    if dims:
        shown += rf" \to {tex(tends)} \quad ({', '.join(tex_name(d) for d in dims)} \to \infty)"
    return shown


def _exact(a: Analysis, tex: Tex) -> str:
    if a.flops_exact == a.flops:
        return ""
    return rf" \quad \text{{(exactly }} {tex(a.flops_exact)}\text{{)}}"


def _frac(expr: sympy.Expr, tex: Tex) -> str:
    num, den = sympy.fraction(expr)
    if den == 1:
        return tex(expr)
    if not den.is_number and _large(num, den):
        # 9850 D F / (41 D F - ...) reads better as 240.2 D F / (D F - 240.2 D - ...)
        lead = sympy.Poly(den, *sorted(den.free_symbols, key=str)).LC()

        def decimals(e: sympy.Expr) -> sympy.Expr:
            return e.xreplace({r: sympy.Float(r, 6) for r in e.atoms(sympy.Rational) if not r.is_Integer})

        num, den = decimals(sympy.expand(num / lead)), decimals(sympy.expand(den / lead))
    return rf"\frac{{{tex(num)}}}{{{tex(den)}}}"


def _large(*polys: sympy.Expr) -> bool:
    return any(abs(c) > 100 for p in polys for c in sympy.expand(p).as_coefficients_dict().values())


def _ratio(top: sympy.Expr, bottom: sympy.Expr) -> str:
    return rf"\frac{{{tex_number(top)}}}{{{tex_number(bottom)}}}"


def _denominator(expr: sympy.Expr) -> int:
    """The common denominator of an expression's coefficients: 4 for BD/4 + BF/2."""
    return int(expr.as_content_primitive()[0].q)


def _over(amount: sympy.Expr, rate: sympy.Expr, tex: Tex) -> str:
    """amount / rate, as the book writes a time: 2BDF / 1.97e14, and BDF/4 over a rate
    as BDF / (4 * rate)."""
    if amount.is_number:
        return tex_number(amount / rate)
    q = _denominator(amount)
    below = tex_number(rate) if q == 1 else rf"{q} \cdot {tex_number(rate)}"
    return rf"\frac{{{tex(sympy.expand(amount * q))}}}{{{below}}}"


def _network(a: Analysis, tex: Tex) -> str:
    parts = []
    for move, t in a.collectives:
        if t.bandwidth == 0 or (move.bytes.is_number and t.bandwidth.is_number):  # 0 s: an axis of 1 chip
            parts.append(tex_number(t.bandwidth))
            continue
        link = move.bytes / t.bandwidth  # bytes over seconds: the link's effective bandwidth
        if not link.is_number:  # a formula in a mesh axis's size: its number kept apart
            coeff, rest = sympy.factor_terms(sympy.cancel(t.bandwidth)).as_coeff_Mul()
            parts.append(rf"\frac{{{tex(coeff.p * rest)}}}{{{tex_number(coeff.q)}}}" if coeff.is_Rational
                         else tex(t.bandwidth))
            continue
        parts.append(_over(move.bytes, link, tex))
    floor = a.t_network_latency
    micro = number(floor * 10**6) if floor.is_number else rf"}} {tex(floor * 10**6)} \text{{"  # |X| in math
    tail = (rf" \quad \text{{(at least {micro} $\mu$s of latency)}}" if floor and a.t_network_latency_known else "")
    return " + ".join(parts) + _SECONDS + tail


def _intensity_label(a: Analysis, name: str | None) -> str:
    """`\\text{Intensity}(\\text{matmul})`, named for what the spec is; plain
    `\\text{Intensity}` where no one word says it."""
    kind = name if name is not None else _kind(a)
    if a.mesh is not None and name is None:
        kind = f"{kind}, per chip" if kind else "per chip"
    return rf"{symbol('intensity')}(\text{{{tex_words(kind)}}})" if kind else symbol("intensity")


def _kind(a: Analysis) -> str | None:
    """What the spec is, for the intensity's row: "matmul" (a 2-D matmul and nothing
    else), "batched matmul", "matrix-vector product", "dot product", "contraction" (any
    other step that sums), "elementwise", "outer product", "reduction", "cast", "copy",
    "chain" (several steps); None where there is no one word (several statements, a
    collective alone, bare counts)."""
    if a.program is None or len(a.program.statements) != 1:
        return None
    steps: tuple = getattr(a.program.statements[0], "steps", ())  # a collective has none
    if len(steps) != 1:
        return "chain" if steps else None
    step = steps[0]
    if step.form != "einsum":  # a named op says what it is
        return "elementwise" if step.form == "infix" else step.fn

    def dims(term: Term) -> set[str]:  # a literal 1 is no dim: bf16[1] is a scalar
        return {label for label in term.labels if label_text(label) != "1"}

    out, summed, ins = dims(step.output), set(step.summed), [dims(t) for t in step.inputs]
    if len(ins) == 1:
        if summed:
            return "reduction"
        return "cast" if step.inputs[0].dtype != step.output.dtype else "copy"
    left, right = ins
    if not summed:
        if left | right == out and (left <= right or right <= left):
            return "elementwise"  # the same dims, or one broadcast over the other
        return "outer product" if not left & right and left | right == out else None
    if not out:
        return "dot product" if left == right == summed else "contraction"
    batch = left & right & out
    if summed != (left & right) - out:
        return "contraction"  # a dim summed on one side only: more than a product
    free_left, free_right = left - summed - batch, right - summed - batch
    if free_left and free_right:
        if batch:
            return "batched matmul"
        return "matmul" if len(left) == len(right) == len(out) == 2 else "contraction"
    if not free_left and not free_right:
        return "batched dot product"  # bf16[B, N] *_N bf16[B, N] -> bf16[B]
    if len(summed) == 1 and len(free_left | free_right) == 1:  # one side a vector: D F x F
        return ("batched " if batch else "") + "matrix-vector product"
    return "contraction"


def _scaled(value: sympy.Expr, ratio: str | None, unit: sympy.Expr | None, tex: Tex) -> str:
    """`value` as a multiple of a figure ratio, where it is one: 2 \\cdot \\frac{1.97e14}{4.5e10};
    else the number (or the expression, for a rule that keeps some dims as symbols)."""
    if not value.is_number:
        return _frac(value, tex)
    k = sympy.nsimplify(value / unit) if ratio is not None and unit is not None and unit.is_number and unit != 0 \
        else None
    if k == 1:
        return f"{ratio} \\approx {tex_number(value)}"
    if k is not None and k.is_Rational and k.q < 100 and k.p < 100:
        return rf"{tex(k)} \cdot {ratio} \approx {tex_number(value)}"
    return tex_number(value)


def _threshold_rows(a: Analysis, solve: str, tex: Tex) -> list[tuple[str, str, str]]:
    t = a.threshold(solve)
    var = tex_name(t.var)
    # the rule as a multiple of peak / bandwidth only where one peak is in play: a chain of
    # int8 and fp16 steps has no one figure to divide
    groups = _peaks(a) if a.flops != 0 else {}
    peak = next(iter(groups)) if len(groups) == 1 else None
    assert a.machine is not None  # a.threshold has refused an analysis without one
    rows = _bounds(a, t, var, tex, peak, a.machine.hbm_bw, "")
    if t.network is not None:
        link = None  # the links' effective bandwidth, V / T_network, where it is one number
        if a.t_network != 0 and a.network_bytes != 0:
            link = sympy.cancel(a.network_bytes / a.t_network)
            link = link if link.is_number else None
        rows += _bounds(a, t.network, var, tex, peak, link, r" \quad \text{(against the network)}")
    return rows


def _bounds(a: Analysis, t: Threshold, var: str, tex: Tex, peak: sympy.Expr | None, bandwidth: sympy.Expr | None,
            note: str) -> list[tuple[str, str, str]]:
    """The rule's row, the exact row, and one row per sentence of words: each row's left
    side is the dim solved for."""
    rows: list[tuple[str, str, str]] = []
    op = t.op or ""  # a rule or an exact value comes with its side: ">" or "<"
    # the rule takes dims to infinity (never one that has a size: thresholds leave those out)
    rule = t.rule is not None and bool(t.rule_as)
    if rule:
        grow = ", ".join(tex_name(d) for d in t.rule_as)
        if peak is not None and bandwidth is not None:
            shown = _scaled(t.rule, _ratio(peak, bandwidth), peak / bandwidth, tex)
        else:
            shown = _scaled(t.rule, None, None, tex)
        rows.append((var, op, rf"{shown} \quad ({grow} \to \infty){note}"))
    if t.exact is not None and (t.exact != t.rule or not rule):
        exact = _value(t.exact, tex)
        sized = [(k, v) for k, v in a.values.items() if k != t.var]
        if sized:
            exact += r" \quad (" + ", ".join(f"{tex_name(k)} = {v}" for k, v in sized) + ")"
        if t.condition is not None:
            exact += rf" \quad \text{{when }} {_relation(t.condition, tex)}"
            if t.otherwise:
                exact += rf"\text{{, {t.otherwise} otherwise}}"
        rows.append((var, op, exact + note))
    for parts in t.reason_parts:
        # words as text, expressions as math: N/(2N + 1) as a fraction, not as Python
        said = "".join(tex_words(p) if isinstance(p, str) else f"${_part(p, tex)}$" for p in parts)
        rows.append((var, ":", rf"\text{{{said}{tex_words(note and ' (against the network)')}}}"))
    return rows


def _value(expr: sympy.Expr, tex: Tex) -> str:
    """A threshold's value: 136.1 as a number, an expression in the other dims as a fraction."""
    return tex_number(expr) if expr.is_number else _frac(expr, tex)


def _relation(condition: sympy.Basic, tex: Tex) -> str:
    """A condition such as D F / (D + F) > 9850/41, its number as the book writes it."""
    if isinstance(condition, sympy.core.relational.Relational):
        op = {">": ">", "<": "<", ">=": r"\geq", "<=": r"\leq"}.get(condition.rel_op)
        if op is not None:
            return f"{tex(condition.lhs)} {op} {_value(condition.rhs, tex)}"
    return tex(condition)


def _part(expr: sympy.Expr, tex: Tex) -> str:
    """An expression inside words: 1/2 as a fraction, 9850/41 as 240.2."""
    if expr.is_Rational and not expr.is_Integer and expr.q > 10:
        return tex_number(expr)
    return tex(expr)


def latex_summary(a: Analysis) -> str:
    """The derivation for Jupyter (`_repr_latex_`): display math that notebooks render."""
    return derivation(a, markdown=True).replace("$$\n", "$$", 1)
