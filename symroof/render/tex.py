"""Numbers, dim names and words in LaTeX, in the chapter's style: what `latex` builds its
derivations from.

Dim names print as written: a multi-letter name is one italic word (`\\mathit{seq}`), set
apart from its neighbours by a thin space, never a product of letters; Greek letters
print as their commands (`\\Delta`), other non-ASCII names as text.
"""

from __future__ import annotations

import re
import unicodedata

import sympy
from sympy.printing.latex import LatexPrinter

from ..show import Value, number


def tex_number(value: Value, digits: int = 4) -> str:
    """1.97e14 as 1.97\\times10^{14}; 240.2439 as 240.2; 8755.556 as 8755.6.

    Examples:
        >>> tex_number(sympy.Integer(197000000000000)), tex_number(sympy.Rational(9850, 41))
        ('1.97\\\\times10^{14}', '240.2')
    """
    if 100 <= abs(float(value)) < 10**7 and not sympy.Rational(value).is_Integer:
        return f"{float(value):.1f}"  # 240.2, 961.0, 8755.6: as the book writes thresholds
    text = number(value, digits)
    if "e" in text:
        mantissa, exponent = text.split("e")
        return (f"{mantissa}\\times10^{{{int(exponent)}}}" if mantissa != "1"
                else f"10^{{{int(exponent)}}}")
    return text


class TexPrinter(LatexPrinter):
    """sympy's LaTeX with the spec's names and numbers in the book's style."""

    def __init__(self, names: dict[sympy.Symbol, str], words: bool) -> None:
        # a thin space between factors keeps "seq dmodel" from reading as one word: \mkern3mu, which
        # is what \, is, written as the primitive (KaTeX expands each \, into several macros, and a
        # long product of many dims ran past its 1000 expansions)
        super().__init__({"symbol_names": names, "mul_symbol": r"\mkern3mu " if words else None})

    def _print_Float(self, expr: sympy.Float) -> str:
        return tex_number(expr)

    def _print_Rational(self, expr: sympy.Rational) -> str:
        if expr.is_Integer:  # counts are exact: 33554432 B, not 3.355e7 B
            return tex_number(expr) if abs(expr) >= 10**16 else super()._print_Rational(expr)
        if abs(expr.p) < 10**4 and expr.q < 10**4:
            return super()._print_Rational(expr)
        return tex_number(expr)


def tex_name(name: str) -> str:
    """A dim's name in math: B, \\mathit{seq}, \\Delta, \\text{批次}.

    Examples:
        >>> tex_name("B"), tex_name("seq"), tex_name("Δ")
        ('B', '\\\\mathit{seq}', '\\\\Delta')
    """
    if name.isascii():
        return name if len(name) == 1 else rf"\mathit{{{name}}}"
    if len(name) == 1 and unicodedata.name(name, "").startswith("GREEK"):
        letter = unicodedata.name(name).split()[-1].lower()
        capital = "CAPITAL" in unicodedata.name(name)
        return "\\" + (letter.capitalize() if capital else letter)
    return rf"\text{{{tex_words(name)}}}"


# the spec's operators that are not ASCII (a step keeps the one written): as math, for KaTeX
_OPERATORS = {"÷": r"$\div$", "×": r"$\times$", "·": r"$\cdot$", "⋅": r"$\cdot$", "∙": r"$\cdot$",
              "•": r"$\bullet$", "−": "-"}


def tex_words(words: str) -> str:
    """Plain words made safe inside \\text{...}: LaTeX's special characters escaped, -> oo
    and >= as math."""
    words = re.sub(r"([#$%&_{}])", r"\\\1", words).replace("^", r"\^{}").replace("~", r"\~{}")
    words = re.sub(r"(\d) us\b", r"\1 $\\mu$s", words)
    # KaTeX knows no Greek letters in text mode: they go in as math (a dim named Δ)
    words = "".join(f"${tex_name(ch)}$" if unicodedata.name(ch, "").startswith("GREEK") else _OPERATORS.get(ch, ch)
                    for ch in words)
    return words.replace("-> oo", r"$\to\infty$").replace(">=", r"$\ge$").replace("->", r"$\to$")
