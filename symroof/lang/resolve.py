"""Statements as written -> IR: what each name means, which dims each step sums, with checks.

The rules, in the order they apply:

* The word before `[` is a dtype when it is one (`bf16`, `bfloat16`); a misspelt dtype
  (`bf61`) is an error; any other word names the tensor, whose dtype is the default.
* Named dims are einsum labels: the same name is the same dim everywhere.
* `@` contracts the left's last dim with the right's second-to-last (its first, for
  1-D and 2-D tensors), as numpy's matmul does. `*_D` contracts the dims it names,
  which must be in both operands. Plain `*` is einsum: a dim that no later operand
  and not the result needs is summed in the step where it last appears.
* Literal sizes are dims without names, matched by position: in `*`, equal literals
  at the matmul positions are the contracted pair (`[B, 4096] * [4096, 4096]` is a
  matmul); other literals pair up by size, in order (`[B, 4096] * [B, 4096]` is
  elementwise); the result's literals take the surviving ones in order. Where the
  matmul reading leaves the result unmatched, the elementwise reading is tried.
* A chain is taken left to right, one binary step at a time; each intermediate is
  written to HBM in the result's dtype and read back by the next step.
"""

from __future__ import annotations

import difflib
import keyword
from collections.abc import Callable, Sequence

from .. import dtypes
from ..errors import SpecError, column_of
from ..ir import (
    Apply,
    Arrays,
    Collective,
    Contraction,
    Dim,
    Fused,
    Mesh,
    MeshAxis,
    Operator,
    Program,
    Tensor,
    subscripted,
)
from ..sharding.layout import ShardingError, check_collective
from .resolve_apply import is_infix, resolve_apply, resolve_infix
from .resolve_steps import Context, EinsumSteps
from .written import Span, WApply, WArrays, WCollective, WDim, WFused, WMesh, WOp, Written, WStatement, WTensor

# Limits that keep a hostile or mistaken spec from hanging sympy; far above real use.
MAX_DIMS_PER_TENSOR = 64
MAX_OPERANDS = 64
MAX_DIMS = 256
MAX_STATEMENTS = 1000

_MATMUL = {"@"}
# Names a dim cannot take: they would not read back through sympy.parse_expr, which
# symroof's JSON promises (Python keywords, and names the parser itself relies on).
RESERVED = frozenset(keyword.kwlist) | {"Integer", "Float", "Rational", "Symbol", "Function",
                                        "Max", "Min", "oo", "zoo", "nan"}


LINKS = ("ici", "dcn", "pcie")
# An ICI axis without a size, with the case its formulas take: a ring with wraparound, a line
RING_CASES = {"ring": True, "line": False}


def resolve(statements: Sequence[Written], text: str, default_dtype: str = "bf16", mesh: Mesh | None = None,
            check: Callable[[Contraction | Apply, Mesh], None] | None = None) -> Program:
    """Resolve written statements into a `Program` (see the module docstring for the rules).

    `mesh` is a mesh given from outside the text (`--mesh`); a `mesh` line in the text
    must agree with it. `check` (sharding's `check_layout`, which `parse` hands over: the
    lowering sits above this layer) raises ShardingError for a layout that cannot run; the
    error is given the statement's place here."""
    default = dtypes.lookup(default_dtype)
    if default is None:
        hint = dtypes.suggest(default_dtype)
        raise SpecError(f"unknown default dtype '{default_dtype}'" + (f"; did you mean '{hint}'?" if hint else ""))
    if len(statements) > MAX_STATEMENTS:
        raise SpecError(f"{len(statements)} statements; symroof reads at most {MAX_STATEMENTS}", text, 0)
    ctx = Context(text, default, check=check)
    ctx.mesh = _mesh(ctx, [s for s in statements if isinstance(s, WMesh)], mesh)
    resolved = [_resolve_one(ctx, written) for written in statements if not isinstance(written, WMesh)]
    if not resolved:
        raise SpecError("the spec declares a mesh but nothing to run on it", text, 0)
    for name, (value, span) in ctx.values.items():
        chips = ctx.chips(ctx.splits.get(name, ()))
        if isinstance(chips, int) and value % chips:
            raise ctx.error(f"{name} = {value} does not split evenly over "
                            f"{', '.join(sorted(ctx.splits[name]))} ({chips} chips)", span)
    # Values in the order their dims first appear, as str() prints them, so that
    # parse(str(program)) == program.
    order = Program(tuple(resolved)).dims
    values = sorted(ctx.values.items(), key=lambda item: order.index(item[0]))
    return Program(tuple(resolved), tuple((name, value) for name, (value, _) in values), ctx.mesh)


def _resolve_one(ctx: Context, written: WStatement | WApply | WCollective | WFused | WArrays
                 ) -> Contraction | Apply | Collective | Fused | Arrays:
    if isinstance(written, WCollective):
        return Statement(ctx, written).collective()
    if isinstance(written, WArrays):
        return Statement(ctx, written).arrays()
    if isinstance(written, WFused):
        return Fused(tuple(_resolve_op(ctx, inner) for inner in written.statements))
    return _resolve_op(ctx, written)


def _resolve_op(ctx: Context, written: WStatement | WApply) -> Contraction | Apply:
    """A contraction or a named op (what a fused block may hold), its layout checked."""
    statement = Statement(ctx, written)
    return statement.checked(resolve_apply(statement) if isinstance(written, WApply) else statement.resolve())


def mesh_from(written: WMesh, text: str) -> Mesh:
    """The mesh a `mesh` line describes, checked."""
    return _mesh_line(Context(text, dtypes.DTYPES["bf16"]), written)


def _mesh(ctx: Context, written: list[WMesh], given: Mesh | None) -> Mesh | None:
    """The program's mesh: its `mesh` line's, which must agree with one given from outside."""
    if len(written) > 1:
        raise ctx.error("a spec has one mesh; this is a second", written[1].span)
    if not written:
        return given
    mesh = _mesh_line(ctx, written[0])
    if given is not None and given.written() != mesh:
        raise ctx.error(f"the spec's mesh ({mesh.axes_text()}) and the mesh given with it "
                        f"({given.axes_text()}) disagree", written[0].span)
    return given if given is not None and given.deferred else mesh  # a strategy family's, as given


def _mesh_line(ctx: Context, written: WMesh) -> Mesh:
    axes: list[MeshAxis] = []
    for axis in written.axes:
        if axis.name in [a.name for a in axes]:
            raise ctx.error(f"the mesh has two axes named {axis.name}", axis.span)
        if axis.size is not None and axis.size <= 0:
            raise ctx.error(f"a mesh axis has a positive number of chips, got {axis.size}", axis.span)
        if axis.size is None and axis.name in RESERVED:  # its size would be a symbol of that name
            raise ctx.error(f"'{axis.name}' cannot name an axis without a size", axis.span)
        link = axis.link or "ici"
        if link in RING_CASES:
            # an ICI axis with wraparound or without, as written: honoured where no chip decides
            # (a symbolic chip, --ici-bw), checked against the chip's torus where one does
            # (collectives.check_cases)
            axes.append(MeshAxis(axis.name, axis.size, "ici", RING_CASES[link]))
            continue
        if link not in LINKS:
            close = [l for l in (*LINKS, *RING_CASES) if l.startswith(link.lower()[:1])]
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ctx.error(f"unknown link '{link}'{hint} (links: {', '.join(LINKS)}; for an ICI axis with "
                            "wraparound or without, ring or line)", axis.link_span)
        axes.append(MeshAxis(axis.name, axis.size, link))
    return Mesh(tuple(axes))


class Statement(EinsumSteps):
    """One statement being resolved: its tensors and dims read and checked here, its
    steps built by `EinsumSteps` (or, for a named op, by `resolve_apply`)."""

    def __init__(self, ctx: Context, written: WStatement | WCollective | WApply | WArrays):
        super().__init__(ctx, written)
        tensors = ([written.input, written.output] if isinstance(written, WCollective) else
                   written.tensors if isinstance(written, WArrays) else [*written.operands, written.output])
        # One tensor with a dtype makes every word before '[' in the statement a dtype: a bare
        # name there is far likelier a misspelt dtype than a tensor's name.
        self.typed = next((t for t in tensors if t.head is not None and
                           (t.name is not None or dtypes.lookup(t.head) is not None)), None)

    # -- tensors ------------------------------------------------------------------------

    def resolve(self) -> Contraction | Apply:
        w = self.w
        assert isinstance(w, WStatement)  # _resolve_one sends the other statements elsewhere
        if len(w.operands) > MAX_OPERANDS:
            raise self.ctx.error(f"{len(w.operands)} operands; symroof handles at most {MAX_OPERANDS}",
                                 w.operands[MAX_OPERANDS].span)
        for operand in w.operands:
            if operand.annotations:
                raise self.ctx.error("annotations go after the result, not after an operand (an input "
                                     "is never unreduced: reduce it first)", operand.annotations[0].span)
        operands = tuple(self.tensor(t) for t in w.operands)
        output = self.tensor(w.output, allow_compute=True)
        compute = self.compute_dtype(w.output)
        self.check_names(operands)
        if any(is_infix(op) for op in w.ops):
            return resolve_infix(self, operands, w.ops, output, compute)
        ops = tuple(self._operator(op) for op in w.ops)
        steps, sizes = self._steps(w, operands, ops, output, compute)
        return Contraction(operands, ops, output, compute, steps, sizes)

    def arrays(self) -> Arrays:
        """Arrays as stored: each read as a tensor is, its dims' splits checked on the mesh."""
        w = self.w
        assert isinstance(w, WArrays)
        if len(w.tensors) > MAX_OPERANDS:
            raise self.ctx.error(f"{len(w.tensors)} arrays; symroof reads at most {MAX_OPERANDS} on a line",
                                 w.tensors[MAX_OPERANDS].span)
        return Arrays(tuple(self.tensor(t) for t in w.tensors))

    def checked(self, statement: Contraction | Apply) -> Contraction | Apply:
        """The statement, once its layout is known to run on the mesh: a layout that cannot
        is a spec error, found here where it has a place."""
        if self.ctx.mesh is None:
            return statement
        if self.ctx.check is None:
            return statement
        try:
            self.ctx.check(statement, self.ctx.mesh)
        except ShardingError as err:
            raise ShardingError(err.message, err.fixes, self.ctx.text, *self.w.span, mesh=err.mesh,
                                problem=err.problem) from None
        return statement

    def compute_dtype(self, w: WTensor) -> dtypes.DType | None:
        compute = None
        for note in w.annotations:
            # (a `compute` with no value was refused with the result's other annotations)
            if note.key == "compute" and note.value is not None:
                if compute is not None:
                    raise self.ctx.error("the compute dtype is given twice", note.span)
                compute = self._dtype(note.value, note.span)
        return compute

    def _unreduced(self, w: WTensor, allow_compute: bool) -> tuple[str, ...]:
        """The axes of `{U_X}`, checking every annotation is one symroof knows."""
        axes: list[str] = []
        for note in w.annotations:
            if note.key == "compute" and note.value is not None and note.subscript is None and allow_compute:
                continue
            if note.key == "U" and note.subscript and note.value is None:
                for item in self._axis_items(note.subscript, note.span):
                    if item in axes:
                        raise self.ctx.error(f"unreduced over {item} twice", note.span)
                    axes.append(item)
                continue
            known = "{U_X} or {compute=DTYPE}" if allow_compute else "{U_X}"
            raise self.ctx.error(f"unknown annotation '{note.key}'; symroof knows {known}", note.span)
        return tuple(axes)

    def _axis_items(self, items: Sequence[tuple[str, Span | None]], span: Span | None) -> list[str]:
        """Mesh axes named in a subscript: `X`, `{X,Y}`, or `XY` for the axes X and Y."""
        mesh = self.ctx.mesh
        if mesh is None:
            raise self.ctx.error("'_' names mesh axes, but there is no mesh: add a line such as "
                                 "'mesh X=2' (or --mesh X=2), or, if the '_' is part of a name, "
                                 "drop it (dmodel, not d_model)", span)
        axes: list[str] = []
        for item, where in items:
            if item in mesh.names:
                axes.append(item)
            elif item.isalpha() and all(ch in mesh.names for ch in item):
                axes.extend(item)  # D_XY: the axes X and Y, as the book writes it
            else:
                close = difflib.get_close_matches(item, mesh.names, n=1)
                hint = f"; did you mean {close[0]}?" if close else ""
                raise self.ctx.error(f"{item} is not an axis of the mesh{hint} (its axes: "
                                     f"{', '.join(mesh.names)})", where)
        return axes

    def collective(self) -> Collective:
        w = self.w
        assert isinstance(w, WCollective)
        items = [item for item, _ in w.subscript]
        scatters = w.kind in ("ReduceScatter", "AllToAll")
        if scatters and len(items) < 2:
            raise self.ctx.error(f"{subscripted(w.kind, ('X', 'K'))} names the mesh axes, then the dim to move the "
                                 "sharding to", w.subscript_span)
        dim = items[-1] if scatters else None
        axes = tuple(self._axis_items(w.subscript[:-1] if scatters else w.subscript, w.subscript_span))
        if len(set(axes)) != len(axes):
            raise self.ctx.error("an axis is named twice", w.subscript_span)
        source, target = self.tensor(w.input), self.tensor(w.output)
        if target.dtype != source.dtype:
            raise self.ctx.error(f"a collective moves data and keeps its dtype ({source.dtype}), "
                                 f"got {target.dtype}", w.output.head_span or w.output.span)
        if [d.name or d.size for d in source.dims] != [d.name or d.size for d in target.dims]:
            raise self.ctx.error("a collective keeps the tensor's dims; only their sharding changes",
                                 w.output.span)
        if dim is not None and dim not in [d.name for d in source.dims]:
            raise self.ctx.error(f"{dim} is not a dim of this tensor", w.subscript[-1][1])
        problem = check_collective(w.kind, axes, dim, source, target)
        if problem:
            raise self.ctx.error(problem, w.output.span)
        return Collective(w.kind, axes, dim, source, target)

    def _dtype(self, word: str, span: Span | None) -> dtypes.DType:
        found = dtypes.lookup(word)
        if found is None:
            hint = dtypes.suggest(word)
            raise self.ctx.error(f"unknown dtype '{word}'" + (f"; did you mean '{hint}'?" if hint else ""), span)
        return found

    def tensor(self, w: WTensor, allow_compute: bool = False) -> Tensor:
        name = w.name
        if w.head is None:
            dtype = self.ctx.default
            self._check_einsum_term(w)
        elif dtypes.lookup(w.head) is not None or name is not None or dtypes.near_dtype(w.head):
            dtype = self._dtype(w.head, w.head_span)
        elif self.typed is not None:
            after = self.ctx.text[w.head_span[1]:w.span[1]] if w.head_span else ""
            shown = after if after.startswith("[") else "[...]"
            raise self.ctx.error(f"unknown dtype '{w.head}': the statement's other tensors have dtypes "
                                 f"({self.typed.head}), so this one needs one too; to name a tensor, write "
                                 f"'{w.head}: {self.typed.head}{shown}'", w.head_span)
        else:  # X[B, D] with no dtype anywhere in the statement: a tensor's name, dtype from the default
            dtype, name = self.ctx.default, w.head
        if len(w.dims) > MAX_DIMS_PER_TENSOR:
            raise self.ctx.error(f"{len(w.dims)} dims in one tensor; symroof handles at most "
                                 f"{MAX_DIMS_PER_TENSOR}", w.dims[MAX_DIMS_PER_TENSOR].span)
        seen: dict[str, WDim] = {}
        dims = []
        split_by: dict[str, WDim] = {}
        for d in w.dims:
            dims.append(self._dim(d))
            for axis in dims[-1].axes:
                if axis in split_by:
                    raise self.ctx.error(f"{axis} already splits {split_by[axis].text} of this tensor: an "
                                         "axis splits at most one dim of a tensor", d.axes_span or d.span)
                split_by[axis] = d
            if d.name is not None:
                if d.name in seen:
                    raise self.ctx.error(
                        f"{d.name} appears twice in one tensor; give the second its own name "
                        f"(e.g. {d.name}2) or write the sizes as numbers", d.span)
                seen[d.name] = d
        unreduced = self._unreduced(w, allow_compute)
        for axis in unreduced:
            if axis in split_by:
                raise self.ctx.error(f"{axis} splits {split_by[axis].text} and holds partial sums too: an "
                                     "axis either splits a dim or is unreduced", w.annotations[0].span)
        return Tensor(dtype, tuple(dims), name, unreduced)

    def _check_einsum_term(self, w: WTensor) -> None:
        letters = [d.name or "" for d in w.dims]  # an einsum term's dims are all named
        for i, (d, letter) in enumerate(zip(w.dims, letters)):
            if not letter.isalpha():
                raise self.ctx.error(f"einsum subscripts are letters; '{letter}' is not", d.span)
            if letter in letters[:i]:
                term = "".join(letters)
                raise self.ctx.error(f"'{letter}' appears twice in '{term}': a diagonal is not a "
                                     "contraction symroof costs", d.span)

    def _dim(self, d: WDim) -> Dim:
        if d.value is not None and d.value <= 0:
            raise self.ctx.error(f"a dim's size must be a positive integer, got {d.value}", d.span)
        axes: tuple[str, ...] = ()
        if d.axes:
            axes = tuple(self._axis_items([(a, d.axes_span) for a in d.axes], d.axes_span))
            twice = [a for a in axes if axes.count(a) > 1]
            if twice:
                raise self.ctx.error(f"{d.text} is split over {twice[0]} twice", d.axes_span)
            chips = self.ctx.chips(axes)
            # over an axis without a size, the formulas take the split as even
            if d.value is not None and isinstance(chips, int) and d.value % chips:
                raise self.ctx.error(f"{d.value} does not split evenly over {', '.join(axes)} "
                                     f"({chips} chips)", d.span)
        if d.name is None:
            return Dim(size=d.value, axes=axes)
        if d.name in RESERVED or not d.name.isidentifier():
            # isidentifier: letters that are numbers (Ethiopic ten, U+1372) lex as name characters
            # but would not read back through sympy.parse_expr
            raise self.ctx.error(f"'{d.name}' cannot name a dim (it does not read back as a name in "
                                 "Python or sympy); choose another name", d.span)
        if self.ctx.mesh is not None and d.name in self.ctx.mesh.symbolic:
            raise self.ctx.error(f"{d.name} is the mesh axis {d.name}'s size (the mesh gives it none); "
                                 "a dim needs a name of its own", d.span)
        self.spans.setdefault(d.name, d.span)
        if len(self.ctx.names) >= MAX_DIMS and d.name not in self.ctx.names:
            raise self.ctx.error(f"more than {MAX_DIMS} distinct dims; symroof handles at most {MAX_DIMS}",
                                 d.span)
        self.ctx.names.add(d.name)
        self.ctx.splits.setdefault(d.name, set()).update(axes)
        if d.value is not None:
            known = self.ctx.values.get(d.name)
            if known is not None and known[0] != d.value:
                col = column_of(self.ctx.text, known[1][0])
                raise self.ctx.error(f"{d.name} is {known[0]} at column {col} but {d.value} here", d.span)
            self.ctx.values.setdefault(d.name, (d.value, d.span))
        return Dim(name=d.name, axes=axes)

    def check_names(self, operands: tuple[Tensor, ...]) -> None:
        """Two operands with one name are one tensor: they must agree on its type."""
        # (never asked of a collective, nor of bare arrays)
        written = [] if isinstance(self.w, (WCollective, WArrays)) else self.w.operands
        first: dict[str, int] = {}
        for i, t in enumerate(operands):
            if t.name is None:
                continue
            if t.name in first and operands[first[t.name]] != t:
                earlier = written[first[t.name]]
                col = column_of(self.ctx.text, earlier.span[0])
                before = Tensor(operands[first[t.name]].dtype, operands[first[t.name]].dims)
                raise self.ctx.error(f"{t.name} is {before} at column {col} but "
                                     f"{Tensor(t.dtype, t.dims)} here: one name, one tensor",
                                     written[i].span)
            first.setdefault(t.name, i)

    def _operator(self, op: WOp) -> Operator:
        symbol = "@" if op.symbol in _MATMUL else "*"
        if op.subscript is None:
            return Operator(symbol)
        if symbol == "@":
            raise self.ctx.error("'@' contracts the left's last dim with the right's first; "
                                 "to name the contracted dims write '*_D'", op.span)
        for item, span in op.subscript:
            if not item[0].isalpha():
                raise self.ctx.error(f"name the contracted dim in '*_...', not its size ({item})", span)
        names = [item for item, _ in op.subscript]
        if len(set(names)) != len(names):
            raise self.ctx.error("a dim is named twice in this subscript", op.span)
        return Operator("*", tuple(names))
