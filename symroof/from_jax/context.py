"""The conversion's context: everything the rules (rules.py) share while a jaxpr is
written, held in one object and passed to each rule: the program written so far
(`out`), the name each jaxpr dim is written with, the labels each array was written
with, the splits each carries over a mesh, and what XLA folds (xla.py). A `cond`'s
branches are each written in a fork of it (`fork`), so trying one leaves the rest as it was.

Dims and labels. Labels are chosen per statement: each axis its dim's name, and an alias
where two axes of one statement have the same size (`let T2 = T`: the scores' two axes in
attention). Which axis gets the alias would then depend on the statement alone, and one
array could be written [B, N, T, T2] where it is made and [B, N, T2, T] where it is read:
counted alike, but a `fused { ... }` block keeps a tensor on chip only where the statement
that reads it names it as the one that wrote it. So each array (View.array) remembers the
labels it was written with, and a statement reads it with those wherever they fit (each
label still its axis's dim, no label twice). Where two operands' labels clash (the
probabilities [B, N, T, T2] against the values [B, T, N, H] in `probs @ v`: T is the
values' sequence and the probabilities' queries), as few axes as can be are read with
other labels (v as [B, T2, N, H], one axis, rather than the probabilities, two), the first
operand keeping its labels where it is a tie (q in `q @ k`: the queries stay T).
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy
import sympy

from .. import dtypes
from ..errors import SpecError
from ..ir import dim_symbol
from ..lang import source
from .program import Converted, Env, Eqn, Line, Statement, View, join_label, same, split_label, tensor, union

_NAME = re.compile(r"[^\W\d_][^\W_]*")

# a branch's lines (in a context: the program written so far, its mesh and lets) -> its
# counts, by cond.COUNTS; the importer's (this layer cannot analyse a program)
Price = Callable[["Context", list[tuple[int, Line]]], dict[str, sympy.Expr]]


class Folded:
    """What XLA folds (xla.py): equation (by id) -> whether it is folded, once per visit in
    the order the rules walk it; `converts`: the scalar converts XLA counts and symroof not."""

    def __init__(self, marks: dict[int, list[bool]] | None = None, converts: int = 0) -> None:
        self.marks = marks or {}
        self.converts = converts


@dataclass
class Context:
    """The state of one conversion. `rename`: a jaxpr dim's text -> the text it stands for
    (a trace whose dims were scaled so that shard_map's splits divide them: importer.py),
    or None; `folded`: what XLA folds; `price`: how a cond's branch is priced (None: a
    cond is not costed)."""

    rename: Callable[[str], str] | None = None
    folded: Folded = field(default_factory=Folded)
    price: Price | None = None
    out: Converted = field(default_factory=Converted)
    names: dict[str, str] = field(default_factory=dict)  # a dim's text (str of the jaxpr dim) -> its name
    used: set[str] = field(default_factory=set)  # every name given out
    aliases: dict[str, str] = field(default_factory=dict)  # an alias (T2) -> the name it stands for (T)
    # inside shard_map, a chip's share of a split dim (T2Y, let T2Y = T2/4) -> its label (T2_Y)
    locals: dict[str, str] = field(default_factory=dict)
    # by array (View.array): the label each of its dims was written with (by the statement
    # that made it, or the first that read it), and how many statements have read it
    written: dict[int, dict[int, str]] = field(default_factory=dict)
    reads: Counter = field(default_factory=Counter)
    # by array: the statement that made it (its index in out.statements and in out.lines,
    # its dtype and labels), and the mesh axes each of its dims is split over outside shard_map
    made: dict[int, tuple[int, int, str, list[str | None]]] = field(default_factory=dict)
    splits: dict[int, tuple[str, ...]] = field(default_factory=dict)
    loops: int = 0  # while loops of unknown trip count so far (W1, W2, ...)
    visits: Counter = field(default_factory=Counter)  # equation (by id) -> times walked (Folded's marks)

    def fork(self) -> Context:
        """A copy to write a branch in: its state copied (each array's labels too, which a
        read adds to), what is fixed for the conversion shared."""
        out = self.out
        return replace(
            self, names=dict(self.names), used=set(self.used), aliases=dict(self.aliases), locals=dict(self.locals),
            written={k: dict(v) for k, v in self.written.items()}, reads=Counter(self.reads), made=dict(self.made),
            splits=dict(self.splits), visits=Counter(self.visits),
            out=replace(out, lets=dict(out.lets), mesh=dict(out.mesh), axis_names=dict(out.axis_names),
                        lines=list(out.lines), statements=list(out.statements), skipped=Counter(out.skipped),
                        layout=Counter(out.layout), notes=list(out.notes), xla_extra=list(out.xla_extra),
                        closed={k: (d, s, list(a)) for k, (d, s, a) in out.closed.items()},
                        params=list(out.params), scans=dict(out.scans), loops=list(out.loops)))

    def folds(self, eqn: Eqn) -> bool:
        """Whether XLA folds this equation, at this visit of it."""
        marks = self.folded.marks.get(id(eqn), [])
        k = self.visits[id(eqn)]
        self.visits[id(eqn)] += 1
        return bool(marks) and marks[min(k, len(marks) - 1)]

    # -- values ---------------------------------------------------------------------

    def dim_text(self, dim: Any) -> str:
        """A jaxpr dim as text in the user's dim names: B*T, B/2."""
        text = str(dim).replace(" ", "")
        return text if self.rename is None or isinstance(dim, int) else self.rename(text)

    @staticmethod
    def dtype(aval_dtype: Any) -> str:
        name = str(aval_dtype)
        if name.startswith("key<"):  # a PRNG key (key<fry>): its words are uint32s (random_wrap's operand)
            return "uint32"
        found = dtypes.lookup(name)
        if found is None:
            raise SpecError(f"a jaxpr value has dtype {name}, which symroof does not know")
        return found.name

    def view(self, var: Any, env: Env) -> View:
        if type(var).__name__ == "Literal":
            return replace(View.whole(self.dtype(var.aval.dtype), tuple(var.aval.shape), const=True),
                           zero=bool(numpy.all(numpy.asarray(var.val) == 0)))
        if var not in env:  # a closed-over constant
            env[var] = View.whole(self.dtype(var.aval.dtype), tuple(var.aval.shape))
        return env[var]

    def constant(self, var: Any, value: Any) -> View:
        """A closed jaxpr's constant (an array the function closes over: a weight), read as
        an array of its own; remembered, so the program declares it (importer.py)."""
        view = View.whole(self.dtype(var.aval.dtype), tuple(var.aval.shape))
        self.out.closed.setdefault(id(value), (view.dtype, view.dims, []))[2].append(view.array)
        return view

    def result(self, eqn: Eqn, env: Env, k: int = 0, unreduced: str | None = None,
               labels: list[str | None] | None = None, splits: list[str] | None = None) -> View:
        """A statement's result: an array of its own, written with `labels` (one per axis)
        and, outside shard_map, `splits`; inside shard_map, partial sums over the axes its
        operands' are (a local op on partial sums), or over `unreduced`."""
        v = eqn.outvars[k]
        if unreduced is None:
            unreduced = union(*(self.view(u, env).unreduced for u in eqn.invars))
        env[v] = View.whole(self.dtype(v.aval.dtype), tuple(v.aval.shape), unreduced=unreduced)
        if labels is not None:
            self.remember(env[v], labels, splits)
        return env[v]

    def whole(self, var: Any, groups: list, env: Env, what: str) -> View:
        """An operand's view; where an axis of it that the statement labels is a broadcast
        (no array holds it: the ones a gradient scatters, a size-1 axis padded), the
        broadcast array, read at the operand's shape (its splits and labels kept), as
        XLA's lowered module materializes it (an upper bound on a fused kernel's bytes)."""
        view = self.view(var, env)
        if not any(g is not None and k is None for g, k in zip(groups, view.axes)):
            return view
        shape = tuple(var.aval.shape)
        if any(g is not None and k is None and not same(d, 1) for g, k, d in zip(groups, view.axes, shape)):
            self.said(f"{what}: a broadcast operand is read at its full shape, as XLA's lowered module "
                      "materializes it, so its bytes are an upper bound (a fused kernel reads less)")
        wide = View.whole(view.dtype, shape, const=view.const)
        split, known = self.splits.get(view.array, ()), self.written.get(view.array, {})
        if any(split):
            self.splits[wide.array] = tuple(split[k] if k is not None and k < len(split) else "" for k in view.axes)
        self.written[wide.array] = {j: known[k] for j, k in enumerate(view.axes) if k in known}
        return wide

    # -- writing --------------------------------------------------------------------

    def emit(self, item: source.Contraction | source.Apply | source.Collective, primitive: str, depth: int,
             xla_flops: sympy.Expr | None = None, why: str = "", xla_transcendentals: sympy.Expr | None = None) -> None:
        """A statement written: the primitive it came from its comment."""
        self.out.lines.append((depth, replace(item, comment=primitive)))
        inside = self.out.shard_maps > 0
        self.out.statements.append(Statement(item, primitive, depth, xla_flops or sympy.Integer(0), why, inside,
                                             self.out.shardings_read and not inside,
                                             xla_transcendentals or sympy.Integer(0), len(self.out.lines) - 1))

    def said(self, note: str) -> None:
        """A note for the warnings, once."""
        if note not in self.out.notes:
            self.out.notes.append(note)

    # -- dims and labels ------------------------------------------------------------


    def dim_name(self, dim: Any) -> str:
        """The name (or literal) a jaxpr dim is written with."""
        if isinstance(dim, int):
            return str(dim)
        text = floors(self.dim_text(dim))
        if text in self.names:
            return self.names[text]
        if _NAME.fullmatch(text):
            name = text
        else:
            if "//" in text or "mod" in text or "max" in text or "min" in text or "floordiv" in text:
                raise SpecError(f"the dim {dim} cannot be written in symroof notation (only +, -, * of dims "
                                "and integers): give sizes that divide evenly, or concrete ones")
            base = "".join(ch for ch in text if ch.isalnum()) or "N"
            name = self.fresh(base if base[0].isalpha() else "n" + base)
            self.out.lets[name] = text
        self.names[text] = name
        self.used.add(name)
        return name

    def fresh(self, base: str) -> str:
        name, k = base, 2
        while name in self.used or name in self.names.values():
            name, k = f"{base}{k}", k + 1
        self.used.add(name)
        return name

    def labels(self, dims: list, named: frozenset[int] = frozenset(),
               prefer: list[list[tuple[int, str]]] | None = None) -> list[str]:
        """Names for axes of one statement (a list of jaxpr dims, one per distinct axis):
        first the labels its operands' arrays were written with (`prefer`: for each
        operand, (axis, label) pairs), where each still names its axis's dim and is not
        taken, the operands taken in the order that keeps the most of them (the first
        operand first where orders tie); then each other axis its dim's name, or a fresh
        alias where the name is taken. The axes in `named` (a contraction's summed ones,
        which symroof wants named) never a literal size."""
        if prefer:
            best = min(itertools.permutations(prefer), key=lambda order: self._misses(dims, named, order))
            out = self._assign(dims, named, [c for operand in best for c in operand])
        else:
            out = [None] * len(dims)
        taken = {split_label(label)[0] for label in out if label is not None}
        for i, dim in enumerate(dims):
            if out[i] is not None:
                continue
            name, axes = split_label(self.dim_name(dim))  # inside shard_map, a split dim: B_X
            if name in taken or (i in named and name.isdigit()):
                base = name if name[0].isalpha() else "n" + name
                alias = next((a for a, e in self.aliases.items() if e == name and a not in taken), None)
                if alias is None:
                    alias = self.fresh(base)
                    self.out.lets[alias] = name
                    self.aliases[alias] = name
                name = alias
            taken.add(name)
            out[i] = join_label(name, axes)
        if self.out.shard_maps:
            self._local(out)  # type: ignore[arg-type]
        return out  # type: ignore[return-value]

    def _local(self, out: list[str]) -> None:
        """Inside shard_map a mesh axis splits at most one of a statement's axes: where a
        chip's block pairs two dims split over one axis (q @ k.T with the sequence split
        on both sides: ring attention's scores, a block of [T/4, T/4]), the later is
        written as a local dim of its own (`let T2Y = T2/4`), the chip's share, so every
        count per chip is the block's."""
        seen: set[str] = set()
        for i, label in enumerate(out):
            axes = split_label(label)[1]
            if set(axes) & seen:
                out[i] = self.share(label)
            seen |= set(axes)

    def share(self, label: str) -> str:
        """Inside shard_map, a chip's share of a split dim (T_Y) as a local dim of its own,
        the same one each time: `T2Y`, with `let T2Y = T2/4`."""
        local = next((k for k, v in self.locals.items() if v == label), None)
        if local is None:
            name, axes = split_label(label)
            local = self.fresh(name + axes)
            self.out.lets[local] = f"{name}/{math.prod(self.out.mesh[a] for a in axes)}"
            self.locals[local] = label
        return local

    def _assign(self, dims: list, named: frozenset[int], candidates: list[tuple[int, str]]) -> list[str | None]:
        """The axes given a remembered label, in the candidates' order (None: not given)."""
        out: list[str | None] = [None] * len(dims)
        taken: set[str] = set()
        for i, label in candidates:
            name = split_label(label)[0]
            if out[i] is None and name not in taken and not (i in named and name.isdigit()) \
                    and self._stands_for(label, dims[i]):
                out[i] = label
                taken.add(name)
        return out

    def _misses(self, dims: list, named: frozenset[int], order: tuple) -> int:
        """How many operand axes an order of the operands reads with another label than
        their arrays were written with."""
        out = self._assign(dims, named, [c for operand in order for c in operand])
        return sum(1 for operand in order for i, label in operand if out[i] != label)

    def _stands_for(self, label: str, dim: Any) -> bool:
        """Whether a label (T2, B_X) names this dim here: an alias stands for its name, and
        inside shard_map the dim's label carries its splits (B outside is B_X inside)."""
        name, axes = split_label(self.locals.get(label, label))  # a chip's share (T2Y) stands for its split dim
        return join_label(self.aliases.get(name, name), axes) == self.dim_name(dim)

    def axis_labels(self, shape: tuple, named: frozenset[int] = frozenset(),
                    reads: tuple[View, ...] = ()) -> tuple[list[str], list[str | None]]:
        """A value's axes named for one statement: the names of those not of size 1, and a
        label per axis (None for a size-1 axis, which a written tensor leaves out); the
        axes in `named` never a literal size; `reads`, operands of the value's shape
        (axis j is axis j), read with the labels their arrays were written with."""
        axes = [j for j, d in enumerate(shape) if d != 1]
        at = {j: i for i, j in enumerate(axes)}
        prefer = self.prefer([(v, [at.get(j) for j in range(len(v.axes))]) for v in reads])
        names = self.labels([shape[j] for j in axes], frozenset(at[j] for j in named if j in at), prefer)
        labels: list[str | None] = [None] * len(shape)
        for j, n in zip(axes, names):
            labels[j] = n
        return names, labels

    def prefer(self, reads: list[tuple[View, list[int | None]]]) -> list[list[tuple[int, str]]]:
        """For each operand (a view, and the statement's axis each of its axes is, or None),
        the labels its array was written with: (axis, label) pairs."""
        out = []
        for view, axes in reads:
            known = self.written.get(view.array, {})
            out.append([(i, known[k]) for k, i in zip(view.axes, axes)
                        if k is not None and i is not None and k in known])
        return out

    def remember(self, view: View, labels: list[str | None], splits: list[str] | None = None) -> None:
        """The array of `view` (a whole one: axis k is dim k) was made by the statement just
        written, with these labels (None: a size-1 axis) and, outside shard_map, splits."""
        self.written[view.array] = {k: label for k, label in enumerate(labels) if label is not None}
        self.made[view.array] = (len(self.out.statements) - 1, len(self.out.lines) - 1, view.dtype, list(labels))
        if splits is not None and any(splits):
            self.splits[view.array] = tuple(splits)

    def tensor(self, view: View, axis_labels: list[str | None], summed: list[str] | None = None) -> source.Tensor:
        """An operand written with the labels of the value's axes: the array's dims in its
        own order, each labelled by the value axis that reads it (unlabelled: size-1 axes,
        left out), and outside shard_map each with the mesh axes the array splits it over.
        A summed label the array lacks (a size-1 axis a reshape added) is written last: it
        is of size 1, and the contraction needs it on both sides."""
        by_data: dict[int, str] = {}
        for j, k in enumerate(view.axes):
            if k is not None and axis_labels[j] is not None:
                by_data[k] = axis_labels[j]  # type: ignore[assignment]
        known = self.written.setdefault(view.array, {})
        for k, label in by_data.items():
            known.setdefault(k, label)  # an input is known by the labels it is first read with
        self.reads[view.array] += 1
        split = self.splits.get(view.array, ()) if not self.out.shard_maps else ()
        dims = [with_split(by_data[k], split[k] if k < len(split) else "") for k in range(len(view.dims))
                if k in by_data]
        dims += [label for label in summed or () if label not in by_data.values()]
        return tensor(view.dtype, dims)

    def size(self, labels: list[str]) -> sympy.Expr:
        """The elements of a tensor with these labels on one chip, in symroof's dim symbols."""
        out = sympy.Integer(1)
        for label in labels:
            name, axes = split_label(label)
            n = sympy.Integer(int(name)) if name.isdigit() else dim_symbol(name)
            out *= n / math.prod(self.out.mesh[a] for a in axes)
        return out


def with_split(label: str, axes: str) -> str:
    """A label split over more mesh axes: 'B', 'X' -> 'B_X'."""
    name, had = split_label(label)
    return join_label(name, union(had, axes))


def floors(text: str) -> str:
    """JAX's `floordiv(a, b)` in a dim (a strided convolution's output) as symroof's
    `floor((a)/(b))`."""
    while (at := text.find("floordiv(")) >= 0:
        depth, comma, k = 0, -1, at + len("floordiv(")
        for k in range(at + len("floordiv("), len(text)):
            if text[k] == "(":
                depth += 1
            elif text[k] == ")":
                if depth == 0:
                    break
                depth -= 1
            elif text[k] == "," and depth == 0:
                comma = k
        if comma < 0:
            return text
        a, b = text[at + len("floordiv("):comma], text[comma + 1:k]
        text = f"{text[:at]}floor(({a})/({b})){text[k + 1:]}"
    return text
