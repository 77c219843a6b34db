"""Read an arithmetic expression written by a person (a claim's expected value) into sympy,
without `sympify`, `eval` or `exec`: Python's own parser builds a syntax tree (it
evaluates nothing), and only numbers, names, + - * / **, parentheses and the
functions Max, Min, sqrt are turned into sympy objects. Anything else is refused.

Numbers are read exactly: 1.97e14 is the integer 197000000000000, 0.5 is 1/2.

Examples:
    >>> read_expression("2*B*D*F/1.97e14", {"B", "D", "F"})
    B*D*F/98500000000000
    >>> read_expression("__import__('os')", set())
    Traceback (most recent call last):
    ...
    symroof.errors.SpecError: cannot read '__import__('os')': calls other than Max, Min, sqrt are not allowed
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Iterable

import sympy

from ..errors import SpecError
from ..ir import dim_symbol

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow}
_FUNCTIONS = {"Max": sympy.Max, "Min": sympy.Min, "sqrt": sympy.sqrt}
_CONSTANTS = {"oo": sympy.oo}
MAX_CHARS = 10_000


def read_expression(text: object, names: Iterable[str]) -> sympy.Expr:
    """Parse `text` into a sympy expression whose names are the dims in `names`.

    Relations (`a > b`) are read too. Unknown names are an error, so a typo in a claim
    never silently becomes a new symbol.
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text)
    if not isinstance(text, str) or not text.strip():
        raise SpecError(f"cannot read {text!r}: expected an expression")
    if len(text) > MAX_CHARS:
        raise SpecError(f"cannot read an expression of {len(text)} characters")
    try:
        tree = ast.parse(text.strip().replace("^", "**"), mode="eval")
        return _build(tree.body, set(names), text)
    except SpecError:
        raise
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError) as err:
        raise SpecError(f"cannot read '{text}': {type(err).__name__.lower()}") from None


def _number(value: int | float) -> sympy.Expr:
    if isinstance(value, bool):
        raise ValueError("a bool is not a number")
    if isinstance(value, int):
        return sympy.Integer(value)
    return sympy.Rational(repr(value))


def _build(node: ast.AST, names: set[str], text: str) -> sympy.Expr:
    def fail(why: str) -> SpecError:
        return SpecError(f"cannot read '{text}': {why}")

    if isinstance(node, ast.Constant):
        if isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return _number(node.value)
        raise fail(f"{node.value!r} is not a number")
    if isinstance(node, ast.Name):
        if node.id in names:
            return dim_symbol(node.id)
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        known = ", ".join(sorted(names)) or "none"
        raise fail(f"unknown name '{node.id}' (the dims here: {known})")
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _build(node.left, names, text), _build(node.right, names, text)
        if isinstance(node.op, ast.Pow):
            if not right.is_number or abs(right) > 64:
                raise fail("powers must be small numbers")
            # (10**64)**64 is a number of 4096 digits: refuse before computing it
            if left.is_number and left != 0 and abs(right * sympy.log(abs(left), 10)) > 400:
                raise fail("the number is too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _build(node.operand, names, text)
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS \
            and not node.keywords:
        return _FUNCTIONS[node.func.id](*(_build(a, names, text) for a in node.args))
    if isinstance(node, ast.Call):
        raise fail(f"calls other than {', '.join(_FUNCTIONS)} are not allowed")
    if isinstance(node, ast.Compare) and len(node.ops) == 1:
        relation = {ast.Gt: sympy.StrictGreaterThan, ast.Lt: sympy.StrictLessThan,
                    ast.GtE: sympy.GreaterThan, ast.LtE: sympy.LessThan}.get(type(node.ops[0]))
        if relation is not None:
            return relation(_build(node.left, names, text), _build(node.comparators[0], names, text))
    raise fail(f"'{ast.unparse(node)}' is not arithmetic")
