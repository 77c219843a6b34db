"""Numbers and expressions for people: six significant figures, one exponent style,
fractions that read the way a person writes them. Used by every rendering."""

from __future__ import annotations

import functools
import math
import textwrap
from fractions import Fraction
from typing import TypeAlias

import mpmath
import sympy

from . import cancel
from .plain import Printer

# A number as the renderings take it: Python's, or sympy's (a figure may be a symbol: C, W_hbm)
Value: TypeAlias = "int | float | sympy.Basic"

_FACTOR_TERMS = 40
_TIME_UNITS = [(1, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"), (1e-12, "ps"), (1e-15, "fs")]


@functools.lru_cache(maxsize=4096, typed=True)  # a program's lines print the same rates again and again
def number(value: Value, digits: int = 6) -> str:
    """A number for people: 240.244, 1.97e14, 4096, 1e-300; any magnitude.

    Examples:
        >>> number(sympy.Rational(9850, 41)), number(197000000000000), number(4096)
        ('240.244', '1.97e14', '4096')
        >>> number(sympy.Rational(1, 10**300)), number(2.5e-5)
        ('1e-300', '2.5e-5')
    """
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        value = sympy.Integer(value)
    elif isinstance(value, float):
        value = sympy.Float(value)
    if value is sympy.nan:
        return "nan"
    if isinstance(value, sympy.Basic) and not value.is_number:  # a symbolic chip's figure: C, W_hbm
        return _Printer().doprint(value)
    if value in (sympy.oo, -sympy.oo, sympy.zoo):
        return "-oo" if value == -sympy.oo else "oo"
    if value.is_Integer and abs(value) < 10**7:
        return str(int(value))
    if value == 0:
        return "0"
    # mpmath keeps any exponent (a float would overflow past 1e308)
    exact = value if value.is_Rational or value.is_Float else value.evalf(digits + 10)  # a root with sqrt: 1 + sqrt(2)
    text = mpmath.nstr(sympy.Float(exact, digits + 3)._to_mpmath(60), digits, min_fixed=-4, max_fixed=7)
    if "e" in text:
        mantissa, exponent = text.split("e")
        if "." in mantissa:
            mantissa = mantissa.rstrip("0").rstrip(".")
        text = f"{mantissa}e{int(exponent)}"
    elif "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


class _Printer(Printer):
    """sympy's str printer with numbers written by `number`, and max and min as `pretty`
    writes them at the top (t_step = max(...), tokens/s = B/max(...): one form)."""

    def _print_Float(self, expr: sympy.Float) -> str:
        return number(expr)

    def _arrange(self, terms: list) -> list:
        """A sum's positive terms first, as a person writes it: B*F*W_hbm - B*C - C*F, 54361573376
        - 40960*B*S; each part in sympy's order."""
        first = [t for t in terms if not t.as_coeff_Mul()[0].is_negative]
        return first + [t for t in terms if t.as_coeff_Mul()[0].is_negative]

    def _as_ordered_terms(self, expr: sympy.Expr, order: str | None = None) -> list:
        return self._arrange(super()._as_ordered_terms(expr, order=order))

    def _print_Max(self, expr: sympy.Max) -> str:
        return "max" + self._print_LatticeOp(expr)[len("Max"):]  # its arguments in sympy's order

    def _print_Min(self, expr: sympy.Min) -> str:
        return "min" + self._print_LatticeOp(expr)[len("Min"):]


# SI prefixes, up (counts, bytes, rates) and down (times)
_UP = ["", "k", "M", "G", "T", "P", "E", "Z", "Y", "R", "Q"]
_DOWN = ["", "m", "u", "n", "p", "f"]


def human(value: Value, unit: str = "", digits: int = 4) -> str:
    """A number scaled by an SI prefix, with its unit, to `digits` significant figures
    (trailing zeros dropped): what a person reads at a glance. SI throughout: 1 GB is
    1e9 bytes. Units "bytes" and "bytes/s" take the prefix as B ("33.55 MB", "820 GB/s");
    "s" scales down (ms, us, ns); other units scale up ("268.4 MFLOPs", "197 TFLOPs/s").
    Past the prefixes, below 1 where the unit does not scale down, and for seconds from
    1 s up, the number is written as `number` writes it. Symbolic expressions are left as
    they are.

    Examples:
        >>> human(268435456, "FLOPs"), human(2 * 4096**3, "FLOPs"), human(33554432, "bytes")
        ('268.4 MFLOPs', '137.4 GFLOPs', '33.55 MB')
        >>> human(197 * 10**12, "FLOPs/s"), human(1.97e15, "FLOPs/s"), human(819e9, "bytes/s")
        ('197 TFLOPs/s', '1.97 PFLOPs/s', '819 GB/s')
        >>> human(0.0013642, "s"), human(sympy.Rational(1, 10**6), "s"), human(512, "bytes")
        ('1.364 ms', '1 us', '512 bytes')
        >>> human(999_960, "bytes"), human(1.5e9, "Hz"), human(0.5, "bytes"), human(3e40, "FLOPs")
        ('1 MB', '1.5 GHz', '0.5 bytes', '3e40 FLOPs')
        >>> human(2.5, "s"), human(12345.6, "s"), human(-2048, "FLOPs"), human(float("nan"), "s")
        ('2.5 s', '12350 s', '-2.048 kFLOPs', 'nan s')
        >>> human(17179869184, "bytes", digits=6), human(sympy.Symbol("B") * 2, "FLOPs")
        ('17.1799 GB', '2*B FLOPs')
    """
    value = _sympified(value)
    if not value.is_number:
        return _with_unit(pretty(value), "", unit)
    if value is sympy.nan or value.is_infinite or value == 0:
        return _with_unit(number(value), "", unit)
    magnitude = abs(value)
    down = unit == "s" and magnitude < 1
    if (down or magnitude >= 1 and unit != "s") and sympy.Rational(1, 10**18) <= magnitude < 10**33:
        prefixes = _DOWN if down else _UP
        power = math.floor(math.log10(float(magnitude)))
        index = (-power + 2) // 3 if down else power // 3
        for _ in range(3):  # 999.96 rounds up to the next prefix
            if not 0 <= index < len(prefixes):
                break
            text = _figures(float(value) * 1000.0 ** (index if down else -index), digits)
            if abs(float(text)) >= 1000:
                index += -1 if down else 1
            elif abs(float(text)) < 1 and (index > 0 if not down else index < len(prefixes) - 1):
                index += 1 if down else -1
            else:
                return _with_unit(text, prefixes[index], unit)
    return _with_unit(number(value, digits), "", unit)


def _sympified(value: Value | Fraction) -> sympy.Basic:
    """A Python or sympy number as sympy, built from its type, never parsed from text."""
    if isinstance(value, bool):
        raise TypeError("a number, not a bool")
    if isinstance(value, int):
        return sympy.Integer(value)
    if isinstance(value, float):
        if math.isnan(value):
            return sympy.nan
        return sympy.Float(value) if math.isfinite(value) else (sympy.oo if value > 0 else -sympy.oo)
    if isinstance(value, Fraction):
        return sympy.Rational(value.numerator, value.denominator)
    if isinstance(value, sympy.Basic):
        return value
    raise TypeError(f"a number or a sympy expression, not {type(value).__name__}")


def _figures(value: float, digits: int) -> str:
    """`value` (1 <= |value| < 1000, or a little over after rounding) to `digits`
    significant figures, trailing zeros dropped."""
    places = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    text = f"{value:.{places}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _with_unit(text: str, prefix: str, unit: str) -> str:
    if unit in ("bytes", "bytes/s") and prefix:
        unit = unit.replace("bytes", "B", 1)
    return f"{text} {prefix}{unit}".rstrip()


def beside(value: Value, unit: str) -> str:
    """An exact count with its scaled figure beside it, where the scaling says something:
    a number of 1000 or more; a smaller one with its unit. Expressions are shown as they are.

    Examples:
        >>> beside(sympy.Integer(268435456), "FLOPs"), beside(sympy.Integer(512), "bytes")
        ('268435456 (268.4 MFLOPs)', '512 bytes')
        >>> beside(33554432 * sympy.Symbol("B"), "bytes"), beside(208.115, "tokens/s"), beside(7, "")
        ('33554432*B', '208.115 tokens/s', '7')
    """
    value = _sympified(value)
    if value.is_number and value.is_finite and abs(value) >= 1000:
        return f"{pretty(value)} ({human(value, unit)})"
    return f"{pretty(value)} {unit}" if unit and value.is_number else pretty(value)


def capacity(size: Value, digits: int = 4) -> str:
    """A capacity in bytes, SI, with the binary figure beside it where the size is a whole
    number of TiB, GiB, MiB or KiB and not of TB, GB, MB or kB (a source that quoted binary
    units; the SI figure beside it then has four significant figures, the binary one being
    exact), else to `digits` significant figures.

    Examples:
        >>> capacity(17179869184), capacity(80 * 10**9), capacity(1048576), capacity(50 * 2**20)
        ('17.18 GB (16 GiB)', '80 GB', '1.049 MB (1 MiB)', '52.43 MB (50 MiB)')
        >>> capacity(123456789012, digits=6), capacity(96 * 2**30, digits=6)
        ('123.457 GB', '103.1 GB (96 GiB)')
    """
    size = _sympified(size)
    if size.is_Integer:
        for scale, si, binary in ((2**40, 10**12, "TiB"), (2**30, 10**9, "GiB"), (2**20, 10**6, "MiB"),
                                  (2**10, 10**3, "KiB")):
            if size >= scale and size % scale == 0 and size % si != 0:
                return f"{human(size, 'bytes')} ({size // scale} {binary})"
    return human(size, "bytes", digits)


def seconds(value: Value) -> str:
    """A time with a unit: 1.01112 ms."""
    f = float(value)
    for scale, unit in _TIME_UNITS:
        if abs(f) >= scale:
            return f"{f / scale:.6g} {unit}"
    return f"{f:.6g} s"


def duration(value: Value) -> str:
    """A time with a unit: a number as `seconds` shows it, a formula (in a mesh axis's
    size: a latency floor of X/2 hops) as itself, in seconds."""
    formula = isinstance(value, sympy.Basic) and not value.is_number
    return f"{pretty(value)} s" if formula else seconds(value)


@functools.lru_cache(maxsize=8192)  # a model's layers show the same expressions again and again
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
    if expr.is_Rational and not expr.is_Integer and _reads_as_fraction(expr):
        return str(expr)  # 1/2 reads better than 0.5, 1/64 than 0.015625, 5.42254 than 385/71
    if expr.is_Integer and abs(expr) < 10**15:
        return str(expr)  # an exact count stays exact
    if expr.is_number:
        return number(expr)
    if isinstance(expr, (sympy.Max, sympy.Min)):
        return f"{type(expr).__name__.lower()}({', '.join(pretty(a) for a in expr.args)})"
    num, den = sympy.fraction(expr)  # analyses hand over expressions already cancelled
    if not den.is_number and _negative(num):  # as a person writes it: C*D*F/(D*F*W - C*D - C*F)
        num, den = -num, -den
    if den == 1:
        shown = expr
    elif not den.is_number and not den.has(sympy.Max, sympy.Min) and _large_coefficients(num, den) \
            and not _small_integer(lead := leading_coefficient(den)):
        # 9850*D*F/(41*D*F - ...) reads as 240.244*D*F/(D*F - ...); a count's fraction whose
        # denominator leads with a small whole number (5*B*T**2 + ...) reads best as it is
        shown = _divided(num, lead) / _divided(den, lead)
    elif len(sympy.Add.make_args(num)) + len(sympy.Add.make_args(den)) <= _FACTOR_TERMS:
        shown = sympy.factor_terms(num) / sympy.factor_terms(den)
    else:  # pulling common factors out of hundreds of terms costs seconds and reads no better
        shown = num / den
    # Exact counts stay exact; 9850/41 reads better as 240.244 and 1/2 as 1/2.
    floats = {a: sympy.Float(a, 6) for a in shown.atoms(sympy.Rational)
              if abs(a.p) >= 10**15 or (not a.is_Integer and (abs(a.p) > 1000 or a.q > 1000))}
    return _Printer().doprint(shown.xreplace(floats) if floats else shown)


def _reads_as_fraction(q: sympy.Rational) -> bool:
    """Whether a number alone reads better as a fraction: a small one (5/2, 2/3) or a unit
    fraction (1/64); 385/71 reads better as 5.42254."""
    return (abs(q.p) <= 1000 and q.q <= 12) or (abs(q.p) == 1 and q.q <= 1000)


def _negative(p: sympy.Expr) -> bool:
    """Whether every term of p has a negative coefficient (-C*D*F, -C*D - C*F): a fraction's
    numerator a person would write with the sign taken into its denominator."""
    found = cancel.terms(p)
    if found is not None:
        return bool(found) and all(c < 0 for c in found.values())
    return all(term.could_extract_minus_sign() for term in sympy.Add.make_args(p))


def leading_coefficient(p: sympy.Expr) -> sympy.Expr:
    """The coefficient of p's leading term, its dims sorted by name and the terms in lex
    order, as `sympy.Poly(p, *dims).LC()` gives it; read off the term list where p is a
    sum of monomials (a dense Poly over a program's hundred dims took seconds to build).
    Where p is no polynomial in its dims (a floor of one), the coefficient of its leading
    term in sympy's own generators, else 1.

    Examples:
        >>> D, F = sympy.symbols("D F", positive=True)
        >>> leading_coefficient(41*D*F - 9850*D - 9850*F)
        41
    """
    found = cancel.terms(p)
    gens = sorted(p.free_symbols, key=str)
    if found is None or not found:
        try:
            return sympy.Poly(p, *gens).LC()
        except sympy.PolynomialError:  # floor(H/2) (a strided convolution's output) is no polynomial in H
            try:
                return sympy.Poly(p).LC()  # its generators sympy's own: floor(H/2) one of them
            except sympy.PolynomialError:
                return sympy.Integer(1)
    order = {g: k for k, g in enumerate(gens)}

    def exponents(monomial: tuple) -> tuple[int, ...]:
        out = [0] * len(gens)
        for symbol, e in monomial:
            out[order[symbol]] = e
        return tuple(out)

    c = found[max(found, key=exponents)]
    return sympy.Rational(c.numerator, c.denominator)


def _divided(p: sympy.Expr, lead: sympy.Expr) -> sympy.Expr:
    """`expand(p / lead)`: a sum of monomials as it stands term by term (expanding hundreds
    of terms that need no expanding took seconds), anything else expanded."""
    if not cancel.as_written(p):
        return sympy.expand(p / lead)
    return sympy.Add(*(term / lead for term in sympy.Add.make_args(p)))


def _small_integer(c: sympy.Expr) -> bool:
    return bool(c.is_Integer and abs(c) <= 12)


def _large_coefficients(*polys: sympy.Expr) -> bool:
    for p in polys:
        found = cancel.terms(p)  # a sum of monomials as it stands: no need to expand it
        coefficients = found.values() if found is not None else sympy.expand(p).as_coefficients_dict().values()
        if any(abs(c) > 100 for c in coefficients):
            return True
    return False


def over(expr: sympy.Expr, divisor: Value) -> str:
    """`expr / divisor` as a person writes it: 2*B*D*F / 1.97e14. A divisor that is a
    formula (in a mesh axis's size) is divided through, its number kept apart:
    I*J*(X - 1)/X / 2.25e10."""
    if isinstance(divisor, sympy.Basic) and not divisor.is_number:
        coeff, rest = sympy.factor_terms(sympy.cancel(expr / divisor)).as_coeff_Mul()
        if coeff.is_Rational and coeff.q != 1:
            return over(coeff.p * rest, coeff.q)
        return pretty(expr / divisor)
    shown = pretty(expr)
    if isinstance(expr, sympy.Add):
        shown = f"({shown})"
    return f"{shown} / {number(divisor)}"




WRAP = 100  # the width reports and chip cards wrap their notes at


def columns(rows: list[tuple[str, ...]], right: tuple[int, ...] = ()) -> list[str]:
    """Rows of cells as aligned columns two spaces apart, the columns numbered in `right` set
    flush right; the last column runs free (no padding after it).

    Examples:
        >>> columns([("#", "strategy", "t_step"), ("1", "fsdp=256", "5.55 s"), ("10", "dp=2,fsdp=128", "12 s")],
        ...         right=(0,))
        [' #  strategy       t_step', ' 1  fsdp=256       5.55 s', '10  dp=2,fsdp=128  12 s']
    """
    widths = [max(len(row[k]) for row in rows) for k in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.rjust(w) if k in right else cell.ljust(w) for k, (cell, w) in enumerate(zip(row, widths))]
        cells[-1] = row[-1].rjust(widths[-1]) if len(row) - 1 in right else row[-1]
        out.append("  ".join(cells).rstrip())
    return out


def wrapped(text: str, indent: str = "", hang: int = 2) -> list[str]:
    """A note wrapped at `WRAP` columns, after `indent`; its continuation lines `hang` further in."""
    return textwrap.wrap(text, WRAP, initial_indent=indent, subsequent_indent=indent + " " * hang,
                         break_on_hyphens=False, break_long_words=False)
