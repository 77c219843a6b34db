"""The public analysis: `roofline.Analysis` with its renderings.

roofline computes; the renderers (render, json_report, latex) read its results and sit
above it. This module, above both, joins them: its `Analysis` shows itself as a short
table (`repr`), the full report (`str`, `print`), a JSON-ready dict (`to_dict`) and LaTeX
in notebooks (`_repr_latex_`), and `analyze` and `roofline` here are the ones
`symroof` exports.

Examples:
    >>> a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e")
    >>> type(a).__name__, type(a.at(B=128)) is Analysis, a.to_dict()["flops"]
    ('Analysis', True, '2*B*D*F')
"""

from __future__ import annotations

import functools

from .render import latex
from .render.json_report import to_json_dict
from .render.text import summary, table
from .roofline import bounds as _roofline


class Analysis(_roofline.Analysis):
    __doc__ = _roofline.Analysis.__doc__

    def to_dict(self, limit=None, solve=None) -> dict:
        """A JSON-ready dict (see `json_report.to_json_dict`)."""
        return to_json_dict(self, limit=limit, solve=solve)

    def __repr__(self) -> str:
        """A short table (`render.summary`); `str()` and `print()` give the full report."""
        return summary(self)

    def __str__(self) -> str:
        return table(self)

    def _repr_latex_(self) -> str:
        # looked up on the module when called: the test suite wraps it to render what it gives
        return latex.latex_summary(self)


@functools.wraps(_roofline.analyze)
def analyze(*args, **kwargs) -> Analysis:
    result = _roofline.analyze(*args, **kwargs, cls=Analysis)
    assert isinstance(result, Analysis)
    return result


@functools.wraps(_roofline.roofline)
def roofline(*args, **kwargs) -> Analysis:
    result = _roofline.roofline(*args, **kwargs, cls=Analysis)
    assert isinstance(result, Analysis)
    return result
