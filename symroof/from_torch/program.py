"""What the rules build: each ATen value as symroof sees it (`Value`: dtype and symbolic
shape, in the user's dim names), the labels a statement writes its tensors with
(`Writer.labels`), and the program so far (statements, lets, what was left out).

This module never imports torch: importer.py exports the module and hands over each
node's dtype and shape, its dims already sympy expressions in the user's dim names.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import sympy

from ..errors import SpecError
from ..lang import source
from ..symbols import dim_symbol

Statement = source.Contraction | source.Apply | source.Fused


@dataclass(frozen=True)
class Value:
    """A tensor of the graph: symroof's dtype name and its dims (sympy integers or
    expressions in the user's dim symbols); `param`: its declared name where it is a
    parameter (read as the declaration)."""

    dtype: str
    shape: tuple[sympy.Expr, ...]
    param: str | None = None
    # under torch.vmap: the dims vmapped away, (level, size) by level; `shape` is then what
    # the function vmapped sees (an element's), `full()` the whole
    levels: tuple[tuple[int, sympy.Expr], ...] = ()

    @property
    def rank(self) -> int:
        return len(self.shape)


def vmapped(operands: Sequence) -> tuple[tuple[int, sympy.Expr], ...]:
    """The vmapped dims of an op's operands, together (by level)."""
    found = {level: size for x in operands if isinstance(x, Value) for level, size in x.levels}
    return tuple(sorted(found.items()))


def batched(value: Any, levels: tuple[tuple[int, sympy.Expr], ...]) -> Any:
    """An op's result under vmap: vmapped over its operands' levels."""
    if isinstance(value, tuple):
        return tuple(batched(v, levels) for v in value)
    return Value(value.dtype, value.shape, value.param, levels) if isinstance(value, Value) else value


def full(value: Value, levels: tuple[tuple[int, sympy.Expr], ...]) -> Value:
    """A vmapped value whole: the op's levels first, in order (size 1 where this operand
    is not vmapped over one: broadcast), then its own dims."""
    own = dict(value.levels)
    return Value(value.dtype, tuple(own.get(level, sympy.Integer(1)) for level, _ in levels) + value.shape,
                 value.param)


@dataclass
class Writer:
    """The program being written: its statements (each with the ATen op it came from), the
    lets naming composite dims (`BT = B*T`) and aliases (`T2 = T`, `n64 = 64`), what was
    layout (no statement) and what could not be costed, by op."""

    statements: list[tuple[Statement, str]] = field(default_factory=list)
    lets: dict[str, str] = field(default_factory=dict)
    layout: Counter = field(default_factory=Counter)
    skipped: Counter = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)
    # FLOPs torch's FlopCounterMode counts otherwise (check.py): (symroof's less its, in
    # the user's dims; why), by statement
    differences: list[tuple[sympy.Expr, str]] = field(default_factory=list)
    # a dim's expression -> its name, and every alias of it
    _names: dict[sympy.Expr, str] = field(default_factory=dict)
    _aliases: dict[sympy.Expr, list[str]] = field(default_factory=dict)
    _used: set[str] = field(default_factory=set)

    def name_symbols(self, names: dict[sympy.Symbol, str]) -> None:
        for symbol, name in names.items():
            self._names[symbol] = name
            self._used.add(name)

    def emit(self, item: Statement, op: str) -> None:
        self.statements.append((item, op))

    def differs(self, flops: sympy.Expr, why: str) -> None:
        """FLOPs symroof counts and FlopCounterMode does not (negative: it counts more)."""
        user = {s: dim_symbol(self._names[s]) for s in flops.free_symbols if s in self._names}
        self.differences.append((flops.xreplace(user), why))

    def said(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    # -- labels ----------------------------------------------------------------------

    def dim_name(self, dim: sympy.Expr) -> str:
        """A dim's own label: its user name, its size where it is a number, or the name of
        a let for a composite (`BT`, let BT = B*T)."""
        dim = as_expr(dim)
        if dim.is_Integer:
            return str(int(dim))
        if dim in self._names:
            return self._names[dim]
        if dim.free_symbols - set(self._names):
            raise SpecError(f"a dim of the exported graph, {dim}, depends on a size torch.export named itself: "
                            "name every dynamic dim with torch.export.Dim in the factory's dynamic shapes")
        base = "".join(self._names[s] for s in sorted(dim.free_symbols, key=lambda s: self._names[s])) or "n"
        name = self._fresh(base)
        self.lets[name] = expression_text(dim, self._names)
        self._names[dim] = name
        return name

    def labels(self, dims: Sequence[sympy.Expr], named: Sequence[int] = ()) -> list[str]:
        """Labels for one statement's distinct axes (one per axis, none alike): each its
        dim's name; where that is taken in the statement (a [T, T] mask), or is a number
        for an axis in `named` (a contraction's summed dim, which symroof wants named), an
        alias (`let T2 = T`, `let n64 = 64`), the same alias each time one is needed."""
        taken: set[str] = set()
        out = []
        for i, dim in enumerate(dims):
            name = self.dim_name(dim)
            if name in taken or (i in named and name.isdigit()):
                name = self._alias(as_expr(dim), name, taken)
            taken.add(name)
            out.append(name)
        return out

    def _alias(self, dim: sympy.Expr, name: str, taken: set[str]) -> str:
        for alias in self._aliases.get(dim, []):
            if alias not in taken:
                return alias
        alias = self._fresh(name if name[0].isalpha() else "n" + name)
        self.lets[alias] = name
        self._aliases.setdefault(dim, []).append(alias)
        return alias

    def _fresh(self, base: str) -> str:
        """`base`, or where it is taken `base` and a letter (a digit would run into a
        literal's: n64 then n64b, not n642)."""
        name, letters = base, iter("bcdefghijklmnopqrstuvwxyz")
        while name in self._used:
            name = base + next(letters, "z" * len(name))
        self._used.add(name)
        return name

    def program(self, declarations: Sequence[source.Declare], header: Sequence[str]) -> source.Program:
        items: list[source.Item] = [source.Comment(line) for line in header]
        if self.lets:
            items.append(source.Let(tuple(self.lets.items())))
        items += declarations
        items += [_commented(item, op) for item, op in self.statements]
        return source.Program(tuple(items))


def _commented(item: Statement, op: str) -> Statement:
    return replace(item, comment=op)


def as_expr(dim: sympy.Expr | int) -> sympy.Expr:
    """A dim as an expression: a rule's own sizes (a pool's window, 2) are Python ints."""
    return sympy.Integer(dim) if isinstance(dim, int) else dim


def present(shape: Sequence[sympy.Expr], labels: Sequence[str | None]) -> list[str | None]:
    """The labels of a tensor's axes, each of size 1 None (left out where it is written)."""
    return [None if d == 1 else label for d, label in zip(shape, labels)]


def first(out: Any) -> Any:
    """An op's main result: the first of several (native_layer_norm's output, not its statistics)."""
    return out[0] if isinstance(out, tuple | list) else out


def tensor(value: Value, labels: Sequence[str | None], name: str | None = None) -> source.Tensor:
    """The value written with these labels, its size-1 axes (label None) left out."""
    return source.Tensor(value.dtype, tuple(source.Dim(label) for label in labels if label is not None),
                         name or value.param)


def expression_text(expr: sympy.Expr, names: dict[sympy.Symbol, str]) -> str:
    """A dim's expression as a let writes it (`B*T`, `T + 1`, `floor(T/2)`), in the user's
    names: sums, products, integer powers and floor divisions of dims and integers."""
    expr = as_expr(expr)
    if expr.is_Integer:
        return str(int(expr))
    if expr.is_Symbol:
        return names[expr]
    if expr.is_Add:
        return " + ".join(f"({expression_text(a, names)})" if a.is_Add else expression_text(a, names)
                          for a in expr.args)
    if expr.is_Mul:
        return "*".join(f"({expression_text(a, names)})" if a.is_Add else expression_text(a, names)
                        for a in expr.args)
    if expr.is_Pow and expr.exp.is_Integer and expr.exp > 0:
        return f"({expression_text(expr.base, names)})**{int(expr.exp)}"
    if type(expr).__name__ == "FloorDiv":
        a, b = expr.args
        return f"floor(({expression_text(a, names)})/({expression_text(b, names)}))"
    raise SpecError(f"a dim of the exported graph is {expr}, which symroof cannot write as a let")
