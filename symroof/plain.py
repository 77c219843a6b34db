"""sympy's str printer, made fast on what costs are made of: sums of monomials.

sympy orders the terms of a sum through `as_terms` and the factors of a product through
sort keys, and both are slow: a 24-layer program whose layers have their own dim names
has totals of hundreds of terms, and printing them took most of its report's time. For a
sum of monomials in plain symbols with integer powers, the order sympy picks is simple
(gens sorted by name; terms by their exponent tuples, highest first: its 'lex' order;
factors by name), so `Printer` builds the same text directly and hands every other shape
back to sympy. The text is identical to `sympy.sstr`'s (tests/roofline/test_plain.py checks
it on random sums); only the time differs.
"""

from __future__ import annotations

import sympy
from sympy.printing.str import StrPrinter


def _power(factor: sympy.Expr) -> tuple[sympy.Symbol, int] | None:
    """(symbol, exponent) of a plain symbol or its integer power; None for anything else."""
    if type(factor) is sympy.Symbol:
        return factor, 1
    if factor.is_Pow and type(factor.base) is sympy.Symbol and factor.exp.is_Integer:
        return factor.base, int(factor.exp)
    return None


def _monomial(term: sympy.Expr, seen: dict[str, sympy.Symbol]) -> dict[str, int] | None:
    """A term's powers, {symbol name: exponent}, or None where it is not a number times
    a monomial in plain symbols (a sum inside, a function, a non-integer power), or a
    name in it stands for two symbols (`seen` maps the names met so far to symbols)."""
    coeff, rest = term.as_coeff_Mul()
    if not (coeff.is_Rational or coeff.is_Float):
        return None
    powers: dict[str, int] = {}
    if rest is not sympy.S.One:
        for factor in sympy.Mul.make_args(rest):
            found = _power(factor)
            if found is None or seen.setdefault(found[0].name, found[0]) is not found[0]:
                return None
            powers[found[0].name] = found[1]
    return powers


_END = ((1,),)  # closes a sparse key: a monomial that goes on past another one is larger


def _ordered_terms(expr: sympy.Add) -> list | None:
    """The terms of a sum in the order sympy prints them (descending lex on exponents,
    gens by name), or None where the fast order does not apply (sympy then orders them
    itself)."""
    terms = expr.args
    if len(terms) == 2 and any(t.is_Number for t in terms):
        return None  # sympy's special case: 1 - 2*x keeps the number first
    seen: dict[str, sympy.Symbol] = {}
    monoms = []
    for term in terms:
        powers = _monomial(term, seen)
        if powers is None:
            return None
        monoms.append(powers)
    keys: list[tuple]
    if any(e < 0 for powers in monoms for e in powers.values()):
        # with negative powers a missing gen (power 0) is not the smallest: dense keys
        names = sorted(seen)
        keys = [tuple(-powers.get(n, 0) for n in names) for powers in monoms]
    else:
        # sparse keys, ascending where sympy's are descending: a gen earlier by name with
        # a power, or a higher power, comes first
        keys = [(*((0, n, -e) for n, e in sorted(powers.items())), *_END) for powers in monoms]
    order = sorted(range(len(terms)), key=keys.__getitem__)
    return [terms[i] for i in order]


class Printer(StrPrinter):
    """`StrPrinter` with fast paths for sums of monomials, monomials and Max/Min of sums."""

    def _print_Add(self, expr: sympy.Add, order: str | None = None) -> str:
        terms = _ordered_terms(expr) if order is None and self.order is None else None
        if terms is None:
            return super()._print_Add(expr, order=order)
        terms = self._arrange(terms)
        parts = []
        for term in terms:
            shown = self._print(term)  # a monomial never needs parentheses in a sum
            if shown.startswith("-"):
                parts += ["-", shown[1:]]
            else:
                parts += ["+", shown]
        sign = parts.pop(0)
        return ("" if sign == "+" else sign) + " ".join(parts)

    def _arrange(self, terms: list) -> list:
        """The terms of a sum in the order printed: sympy's here; a printer for people may
        put them otherwise."""
        return terms

    def _print_Mul(self, expr: sympy.Mul) -> str:
        if self.order is not None or expr.args[0] is sympy.S.One:
            return super()._print_Mul(expr)  # ordered otherwise, or an unevaluated product
        coeff = expr.as_coeff_Mul()[0]
        factors = expr.args[1:] if expr.args[0].is_Number else expr.args  # a product inside stays whole
        found = [_factor_key(f) for f in factors]
        keys = [k for k in found if k is not None]
        if not (coeff.is_Rational or coeff.is_Float) or len(keys) != len(found) \
                or len({k[:2] for k in keys}) != len(keys):
            return super()._print_Mul(expr)  # a factor sympy orders by deeper keys
        sign = ""
        if coeff < 0:
            sign, coeff = "-", -coeff
        up: list[str] = []
        down: list[str] = []
        if coeff.is_Rational:  # integers print as themselves (StrPrinter's _print_Integer)
            if coeff.p != 1:
                up.append(str(coeff.p))
            if coeff.q != 1:
                down.append(str(coeff.q))
        elif coeff != 1:
            up.append(self._print(coeff))
        for (_, _, exp), factor in sorted(zip(keys, factors), key=lambda kf: kf[0]):
            head = factor.base if factor.is_Pow else factor
            shown = head.name if head.is_Symbol else f"({self._print(head)})"  # a sum in parentheses
            power = f"{shown}**{abs(exp)}" if abs(exp) != 1 else shown
            (down if exp < 0 else up).append(power)
        shown = sign + "*".join(up or ["1"])
        if len(down) == 1:
            return f"{shown}/{down[0]}"
        return f"{shown}/({'*'.join(down)})" if down else shown

    def _print_LatticeOp(self, expr: sympy.Max | sympy.Min) -> str:
        # sympy sorts the arguments by their sort keys, which compare the class first and,
        # for sums, the number of terms next: where those differ, no deeper key is needed
        heads = [a if a.is_Number else a.as_coeff_Mul()[1] for a in expr.args]
        found = [_head_key(h) for h in heads]
        keys = [k for k in found if k is not None]
        if len(keys) != len(found) or len(set(keys)) != len(keys):
            return super()._print_LatticeOp(expr)
        ordered = [a for _, a in sorted(zip(keys, expr.args), key=lambda ka: ka[0])]
        return f"{expr.func.__name__}({', '.join(self._print(a) for a in ordered)})"


def _head_key(head: sympy.Expr) -> tuple | None:
    """The part of sympy's sort key that orders Max/Min arguments by what is left of each
    without its coefficient: the class; then for a sum its number of terms; for a product of
    plain symbols its number of factors and their (name, power) in order; for a symbol its
    name. None for anything else (sympy then orders them itself)."""
    key = type(head).class_key()
    if head.is_Number:
        return (key,)
    if head.is_Add:
        return key, (len(head.args),)
    if type(head) is sympy.Symbol:
        return key, (head.name,)
    if head.is_Mul:
        factors = [_power(f) for f in head.args]
        if any(f is None for f in factors):
            return None
        return key, (len(factors), tuple(sorted((f[0].name, f[1]) for f in factors if f is not None)))
    return None


def _factor_key(factor: sympy.Expr) -> tuple | None:
    """The part of sympy's sort key that orders the factors of a product of plain
    symbols, sums and their integer powers: class, then name (a symbol) or number of
    terms (a sum), then power. None for any other factor."""
    head, exp = (factor.base, factor.exp) if factor.is_Pow else (factor, sympy.S.One)
    if not exp.is_Integer:
        return None
    if type(head) is sympy.Symbol:
        return sympy.Symbol.class_key(), (1, head.name), int(exp)
    if head.is_Add:
        return sympy.Add.class_key(), (len(head.args),), int(exp)
    return None


def text(expr: sympy.Basic) -> str:
    """`sympy.sstr(expr)`, faster on costs."""
    return Printer().doprint(expr)
