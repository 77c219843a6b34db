"""LaTeX renderings of an analysis."""

from __future__ import annotations

import sympy


def latex_summary(a) -> str:
    """A few aligned equations for Jupyter (`_repr_latex_`)."""
    names = {sympy.Symbol(n, positive=True, integer=True): (n if len(n) == 1 else rf"\mathit{{{n}}}")
             for n in a.dims}
    tex = lambda e: sympy.latex(e, symbol_names=names) if not isinstance(e, str) else rf"\text{{{e}}}"
    rows = [(r"\text{FLOPs}", tex(a.flops)), (r"\text{bytes}", tex(a.bytes)),
            (r"\text{intensity}", tex(a.intensity))]
    if a.machine is not None and a.machine.hbm_bw is not None and a.has_peak:
        rows += [(r"\text{critical intensity}", tex(sympy.Float(a.critical_intensity, 6))
                  if a.critical_intensity.is_number else tex(a.critical_intensity)),
                 (r"T_\text{math}", tex(a.t_math)), (r"T_\text{comms}", tex(a.t_comms))]
    body = r" \\ ".join(f"{k} &= {v}" for k, v in rows)
    return rf"$$\begin{{aligned}} {body} \end{{aligned}}$$"
