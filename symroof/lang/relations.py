"""Named sizes and relations between dims: `let F = 4*D`, `let D = N*H`, `let L = 80`.

An expression is read token by token into sympy (never through `sympify`): names are
dims, numbers are integers, with + - * / ** and parentheses (`**` binds tightest and to the
right, as in Python: a mixture of experts' expected experts touched, E*(1 - (1 - A/E)**tokens)).
`resolve_relations` turns the `let` lines of a program into one substitution, each name
defined in terms of the dims no `let` defines, and refuses a cycle, a name defined twice,
and a size that contradicts a relation.

Examples:
    >>> from symroof.ir import dim_symbol
    >>> subs = resolve_relations([("F", expression("4*D")), ("D", expression("N*H"))])
    >>> subs[dim_symbol("F")]
    4*H*N
"""

from __future__ import annotations

import math
import re
from typing import Any, NoReturn

import mpmath
import sympy

from ..errors import SpecError
from ..ir import dim_symbol

_TOKEN = re.compile(r"\s*(?:(?P<name>[^\W\d_][^\W_]*)|(?P<int>\d+)|(?P<op>\*\*|[-+*/(),]))")


def expression(text: str, where: tuple[str, int] | None = None) -> sympy.Expr:
    """An arithmetic expression over dim names and integers, as sympy.

    `where` (the whole text and the offset of `text` in it) places errors."""
    tokens: list[tuple[str, str, int]] = []
    pos = 0
    while pos < len(text.rstrip()):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            _fail(f"cannot read {text[pos:].strip()[:1]!r} in a size expression", where, pos)
        assert match is not None
        kind = match.lastgroup or "op"
        if kind == "int" and len(match.group(kind)) > MAX_DIGITS:
            _fail(f"a number of {len(match.group(kind)):,} digits in a size expression (at most {MAX_DIGITS})",
                  where, match.start(kind))
        tokens.append((kind, match.group(kind), match.start(kind)))
        pos = match.end()
    if not tokens:
        _fail("a size expression is missing", where, 0)
    reader = _Reader(tokens, where)
    value = reader.sum()
    if reader.i < len(tokens):
        _fail(f"unexpected {tokens[reader.i][1]!r} in a size expression", where, tokens[reader.i][2])
    return value


# The most bits an exact power's numerator or denominator may have (about 1,200 digits): past
# it, a power of numbers is a 30-digit float. A size that large is no size, and an exact
# 10**100000000 (or a mixture's (3/4)**B at a batch of 10**12) would never finish. A `let`
# that comes to a whole number past it is refused, as is one whose expression would expand
# to more than MAX_TERMS terms or raise a dim to a power past EXACT_BITS: 40 lines of
# `let X2 = X1*X1` would otherwise square their way past any memory.
EXACT_BITS = 4096
FLOAT_DIGITS = 30
MAX_DIGITS = 18  # of a number written in a size expression, as of a dim's size
MAX_DEPTH = 100  # parentheses and signs nested in a size expression
MAX_TERMS = 4096  # of a `let`'s value, expanded


class Power(sympy.Function):
    """base**exponent in a size expression, evaluated only where that is cheap: exactly where
    the result has at most EXACT_BITS bits a part, else as a FLOAT_DIGITS-digit float (an
    expectation such as a mixture's experts touched, E*(1 - (1 - A/E)**B), is an estimate
    anyway; a power past EXACT_BITS is refused as a size where it must be one). Unevaluated
    while either side is a symbol, printed as base**exponent."""

    nargs = 2

    @classmethod
    def eval(cls, base: sympy.Expr, exponent: sympy.Expr) -> sympy.Expr | None:  # safe: sympy's Function hook, no text
        if not (base.is_number and exponent.is_number and base.is_real and exponent.is_real):
            return None
        if exponent == 0:
            return sympy.Integer(1)
        if base.is_Rational and exponent.is_Integer:
            p, q = sympy.fraction(base)
            if max(abs(int(p)).bit_length(), int(q).bit_length()) * abs(int(exponent)) <= EXACT_BITS:
                return base**exponent
        if base < 0 and not exponent.is_Integer:
            return None  # not a real number: left unevaluated, and refused as a size
        if base == 0:
            return sympy.Integer(0) if exponent > 0 else None
        sign = -1 if base < 0 and int(exponent) % 2 else 1
        with mpmath.workdps(FLOAT_DIGITS + 5):
            value = mpmath.power(mpmath.mpf(abs(base).evalf(FLOAT_DIGITS + 5)),
                                 mpmath.mpf(exponent.evalf(FLOAT_DIGITS + 5)))
            return sign * sympy.Float(value, FLOAT_DIGITS)

    def _eval_is_positive(self) -> bool | None:
        return True if self.args[0].is_positive else None

    def _eval_is_real(self) -> bool | None:
        return True if self.args[0].is_positive and self.args[1].is_real else None

    def fdiff(self, argindex: int = 1) -> sympy.Expr:
        base, exponent = self.args
        if argindex == 1:
            return exponent * Power(base, exponent - 1)
        return Power(base, exponent) * sympy.log(base)

    def _sympystr(self, printer: Any) -> str:
        return "**".join(printer.parenthesize(arg, sympy.printing.precedence.PRECEDENCE["Pow"] + 1)
                         for arg in self.args)


class _Reader:
    """Recursive descent: sum := product (('+'|'-') product)*; product := power (('*'|'/') power)*;
    power := atom ['**' power] (right-associative); atom := int | name | '(' sum ')' | '-' power."""

    def __init__(self, tokens: list[tuple[str, str, int]], where: tuple[str, int] | None):
        self.tokens, self.where, self.i = tokens, where, 0
        self.depth = 0  # of the '(' and '-' being read (MAX_DEPTH)

    def _deeper(self, at: int) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            _fail(f"a size expression nested more than {MAX_DEPTH} deep", self.where, at)

    def _peek(self) -> str | None:
        return self.tokens[self.i][1] if self.i < len(self.tokens) else None

    def sum(self) -> sympy.Expr:
        value = self.product()
        while self._peek() in ("+", "-"):
            op = self.tokens[self.i][1]
            self.i += 1
            value = value + self.product() if op == "+" else value - self.product()
        return value

    def product(self) -> sympy.Expr:
        value = self.power()
        while self._peek() in ("*", "/"):
            op = self.tokens[self.i][1]
            at = self.tokens[self.i][2]
            self.i += 1
            right = self.power()
            if op == "/" and right == 0:
                _fail("division by zero in a size expression", self.where, at)
            value = value * right if op == "*" else value / right
        return value

    def power(self) -> sympy.Expr:
        base = self.atom()
        if self._peek() != "**":
            return base
        at = self.tokens[self.i][2]
        self.i += 1
        exponent = self.power()
        if base == 0 and exponent.is_number and not exponent > 0:
            _fail("zero to a power that is not positive in a size expression", self.where, at)
        return Power(base, exponent)

    def _call(self, name: str, at: int) -> sympy.Expr:
        """min(a, b, ...): the least of its arguments (a sliding window's keys, min(S, W));
        floor(a): a rounded down (a strided convolution's output, floor((H - 3)/2) + 1)."""
        self.i += 1  # the '('
        self._deeper(at)
        args = [self.sum()]
        while self._peek() == ",":
            self.i += 1
            args.append(self.sum())
        if self._peek() != ")":
            _fail(f"a '{name}(' is not closed", self.where, at)
        self.i += 1
        self.depth -= 1
        if name == "floor":
            if len(args) != 1:
                _fail("floor takes one size", self.where, at)
            return sympy.floor(args[0])
        if len(args) < 2:
            _fail("min takes two or more sizes", self.where, at)
        return sympy.Min(*args)

    def atom(self) -> sympy.Expr:
        if self.i >= len(self.tokens):
            end = self.tokens[-1][2] + len(self.tokens[-1][1]) if self.tokens else 0
            _fail("a size expression ends too soon", self.where, end)
        kind, text, at = self.tokens[self.i]
        self.i += 1
        if kind == "int":
            return sympy.Integer(int(text))
        if kind == "name" and text in ("min", "floor") and self._peek() == "(":
            return self._call(text, at)
        if kind == "name":
            return dim_symbol(text)
        if text == "(":
            self._deeper(at)
            value = self.sum()
            if self._peek() != ")":
                _fail("a '(' is not closed", self.where, at)
            self.i += 1
            self.depth -= 1
            return value
        if text == "-":
            self._deeper(at)
            value = -self.power()
            self.depth -= 1
            return value
        _fail(f"unexpected {text!r} in a size expression", self.where, at)
        raise AssertionError  # _fail raises


def _fail(message: str, where: tuple[str, int] | None, pos: int) -> NoReturn:
    if where is None:
        raise SpecError(message)
    text, offset = where
    raise SpecError(message, text, offset + pos)


def resolve_relations(lets: list[tuple[str, sympy.Expr]], spans: list[tuple[str, int, int]] | None = None
                      ) -> dict[sympy.Symbol, sympy.Expr]:
    """Each `let` name -> its expression in the dims no `let` defines (a number where it
    comes to one). `spans` (text, start, end per let) place errors."""
    defined: dict[sympy.Symbol, sympy.Expr] = {}
    where: dict[sympy.Symbol, tuple[str, int, int] | None] = {}
    for k, (name, expr) in enumerate(lets):
        symbol = dim_symbol(name)
        span = spans[k] if spans else None
        if symbol in defined:
            raise _error(f"{name} is defined twice (let {name} = {defined[symbol]}, and again)", span)
        defined[symbol], where[symbol] = expr, span
    resolved: dict[sympy.Symbol, sympy.Expr] = {}

    def value_of(symbol: sympy.Symbol, path: tuple[sympy.Symbol, ...]) -> sympy.Expr:
        if symbol in resolved:
            return resolved[symbol]
        if symbol in path:
            cycle = " -> ".join(s.name for s in (*path[path.index(symbol):], symbol))
            raise _error(f"the relations go round in a circle: {cycle}", where[symbol])
        expr = defined[symbol]
        inner = {s: value_of(s, (*path, symbol)) for s in expr.free_symbols if s in defined}
        value = expr.xreplace(inner) if inner else expr
        _check_size(symbol, value, where[symbol])
        value = sympy.expand(value) if inner else value
        if value.is_Integer and abs(int(value)).bit_length() > EXACT_BITS:
            raise _error(f"{symbol.name} comes to a number of {len(str(abs(int(value)))):,} digits: too large to be "
                         f"a size (past {EXACT_BITS} bits)", where[symbol])
        if value.is_Float:  # a power past EXACT_BITS: huge, or a fraction's tiny power (never whole)
            said = (f"too large to be a size (past {EXACT_BITS} bits)" if abs(value) >= 1
                    else "a size is a positive whole number")
            raise _error(f"{symbol.name} = {sympy.Float(value, 6)}: {said}", where[symbol])
        if value.is_number and not (value.is_Integer and value > 0):
            raise _error(f"{symbol.name} = {value}: a size is a positive whole number", where[symbol])
        resolved[symbol] = value
        return value

    for symbol in defined:
        value_of(symbol, ())
    return resolved


def _check_size(symbol: sympy.Symbol, value: sympy.Expr, span: tuple[str, int, int] | None) -> None:
    """A let's value, its lets put in, before it is expanded: at most MAX_TERMS terms once
    expanded, no dim to a power past EXACT_BITS, no number past EXACT_BITS bits (each
    checked on the way: an unexpanded square of a square stays small to look at)."""
    if _terms(value, symbol, span) > MAX_TERMS:
        raise _error(f"{symbol.name} would expand to more than {MAX_TERMS:,} terms: too large a size expression "
                     "(write it with fewer products of sums)", span)


def _terms(e: sympy.Expr, symbol: sympy.Symbol, span: tuple[str, int, int] | None) -> int:
    """At most how many terms `e` expands to (MAX_TERMS + 1 where it is more), its powers
    and numbers checked against EXACT_BITS."""
    if e.is_Integer or e.is_Rational:
        if max(abs(int(e.p)).bit_length(), int(e.q).bit_length()) > EXACT_BITS:
            raise _error(f"{symbol.name} comes to a number past {EXACT_BITS} bits: too large to be a size", span)
        return 1
    if e.is_Add:
        return min(sum(_terms(a, symbol, span) for a in e.args), MAX_TERMS + 1)
    if e.is_Mul:
        count = 1
        for a in e.args:
            count = min(count * _terms(a, symbol, span), MAX_TERMS + 1)
        return count
    if e.is_Pow and e.exp.is_Integer:
        if abs(int(e.exp)) > EXACT_BITS:
            raise _error(f"{symbol.name} raises a size to the power {e.exp}: past {EXACT_BITS}, too large to be a "
                         "size", span)
        base, n = _terms(e.base, symbol, span), abs(int(e.exp))
        return 1 if base == 1 else min(math.comb(base + n - 1, n), MAX_TERMS + 1)  # a sum's n-th power's monomials
    return min(sum(_terms(a, symbol, span) for a in e.args if isinstance(a, sympy.Expr)) or 1, MAX_TERMS + 1)


def _error(message: str, span: tuple[str, int, int] | None) -> SpecError:
    return SpecError(message) if span is None else SpecError(message, *span)


def check_sizes(relations: dict[sympy.Symbol, sympy.Expr], sizes: dict[str, int]) -> None:
    """A size given for a name a relation defines must agree with it at the other sizes
    (`let F = 4*D` with F=1000, D=300 is refused)."""
    at = {dim_symbol(name): sympy.Integer(value) for name, value in sizes.items()}
    for symbol, expr in relations.items():
        if symbol.name not in sizes:
            continue
        value = expr.xreplace(at)
        if value.is_number and value != sizes[symbol.name]:
            shown = ", ".join(f"{s.name} = {sizes[s.name]}" for s in sorted(expr.free_symbols, key=str))
            raise SpecError(f"{symbol.name} = {sizes[symbol.name]} contradicts let {symbol.name} = {expr}"
                            + (f" (= {value} at {shown})" if shown else ""))
