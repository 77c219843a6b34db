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
import warnings
from dataclasses import dataclass, field

import sympy

from . import dtypes
from .errors import SpecError, SymroofWarning, column_of
from .ir import (Collective, Contraction, Dim, Mesh, MeshAxis, Operator, Program, Step, Tensor, Term,
                 dim_symbol, is_literal_label, label_text)
from .sharding import ShardingError, check_collective, local_elements, lower
from .syntax import Span, WCollective, WDim, WMesh, WOp, WStatement, WTensor

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


def resolve(statements: list, text: str, default_dtype: str = "bf16", mesh: Mesh | None = None) -> Program:
    """Resolve written statements into a `Program` (see the module docstring for the rules).

    `mesh` is a mesh given from outside the text (`--mesh`); a `mesh` line in the text
    must agree with it."""
    default = dtypes.lookup(default_dtype)
    if default is None:
        hint = dtypes.suggest(default_dtype)
        raise SpecError(f"unknown default dtype '{default_dtype}'" + (f"; did you mean '{hint}'?" if hint else ""))
    if len(statements) > MAX_STATEMENTS:
        raise SpecError(f"{len(statements)} statements; symroof reads at most {MAX_STATEMENTS}", text, 0)
    ctx = _Context(text, default)
    ctx.mesh = _mesh(ctx, [s for s in statements if isinstance(s, WMesh)], mesh)
    resolved = []
    for written in statements:
        if isinstance(written, WCollective):
            resolved.append(_Statement(ctx, written).collective())
        elif isinstance(written, WStatement):
            resolved.append(_Statement(ctx, written).resolve())
    if not resolved:
        raise SpecError("the spec declares a mesh but nothing to run on it", text, 0)
    for name, (value, span) in ctx.values.items():
        chips = 1
        for axis in ctx.splits.get(name, ()):
            chips *= ctx.mesh.axis(axis).size
        if value % chips:
            raise ctx.error(f"{name} = {value} does not split evenly over "
                            f"{', '.join(sorted(ctx.splits[name]))} ({chips} chips)", span)
    # Values in the order their dims first appear, as str() prints them, so that
    # parse(str(program)) == program.
    order = Program(tuple(resolved)).dims
    values = sorted(ctx.values.items(), key=lambda item: order.index(item[0]))
    return Program(tuple(resolved), tuple((name, value) for name, (value, _) in values), ctx.mesh)


def fix_message(problem: str, fixes, times=None) -> str:
    """A layout that cannot run, and the collectives that would fix it as a spec line
    writes them, with the bytes each moves per chip (and its time, where given)."""
    if not fixes:
        return problem
    said = []
    for i, (_, fix, V) in enumerate(fixes):
        cost = f"{V} bytes per chip" + (f", {times[i]}" if times else "")
        said.append(f"{fix.kind}_{fix.axes[0]} {fix.before.text(fix.dtype)} -> {fix.after.text(fix.dtype)} "
                    f"({cost})")
    return f"{problem}; gather one side first: " + ", or ".join(said)


def mesh_from(written: WMesh, text: str) -> Mesh:
    """The mesh a `mesh` line describes, checked."""
    return _mesh(_Context(text, dtypes.lookup("bf16")), [written], None)


def _mesh(ctx: "_Context", written: list[WMesh], given: Mesh | None) -> Mesh | None:
    if len(written) > 1:
        raise ctx.error("a spec has one mesh; this is a second", written[1].span)
    if not written:
        return given
    axes = []
    for axis in written[0].axes:
        if axis.name in [a.name for a in axes]:
            raise ctx.error(f"the mesh has two axes named {axis.name}", axis.span)
        if axis.size <= 0:
            raise ctx.error(f"a mesh axis has a positive number of chips, got {axis.size}", axis.span)
        link = axis.link or "ici"
        if link not in LINKS:
            close = [l for l in LINKS if l.startswith(link.lower()[:1])]
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise ctx.error(f"unknown link '{link}'{hint} (links: {', '.join(LINKS)})", axis.link_span)
        axes.append(MeshAxis(axis.name, axis.size, link))
    mesh = Mesh(tuple(axes))
    if given is not None and given != mesh:
        raise ctx.error(f"the spec's mesh ({str(mesh)[5:]}) and the mesh given with it "
                        f"({str(given)[5:]}) disagree", written[0].span)
    return mesh


@dataclass
class _Context:
    """What a whole program shares: the text (for carets), the default dtype, the mesh,
    and the values given to named dims."""

    text: str
    default: dtypes.DType
    mesh: Mesh | None = None
    values: dict[str, tuple[int, Span]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    splits: dict[str, set[str]] = field(default_factory=dict)  # the axes each named dim is split over

    def error(self, message: str, span: Span | None) -> SpecError:
        if span is None:
            return SpecError(message, self.text, None)
        return SpecError(message, self.text, span[0], span[1])


def _axes_of(tensor: Tensor) -> tuple[tuple[str, ...], ...]:
    return tuple(d.axes for d in tensor.dims)


class _Statement:
    def __init__(self, ctx: _Context, written: WStatement | WCollective):
        self.ctx = ctx
        self.w = written
        self.literal_counts: dict[int, int] = {}
        self.spans: dict[str, Span] = {}  # where each named dim first appears
        tensors = ([written.input, written.output] if isinstance(written, WCollective)
                   else [*written.operands, written.output])
        # One tensor with a dtype makes every word before '[' in the statement a dtype: a bare
        # name there is far likelier a misspelt dtype than a tensor's name.
        self.typed = next((t for t in tensors if t.head is not None and
                           (t.name is not None or dtypes.lookup(t.head) is not None)), None)

    # -- tensors ------------------------------------------------------------------------

    def resolve(self) -> Contraction:
        w = self.w
        if len(w.operands) > MAX_OPERANDS:
            raise self.ctx.error(f"{len(w.operands)} operands; symroof handles at most {MAX_OPERANDS}",
                                 w.operands[MAX_OPERANDS].span)
        for operand in w.operands:
            if operand.annotations:
                raise self.ctx.error("annotations go after the result, not after an operand (an input "
                                     "is never unreduced: reduce it first)", operand.annotations[0].span)
        operands = tuple(self._tensor(t) for t in w.operands)
        output = self._tensor(w.output, allow_compute=True)
        compute = self._compute(w.output)
        self._check_names(operands)
        ops = tuple(self._operator(op) for op in w.ops)
        steps, sizes = self._steps(operands, ops, output, compute)
        contraction = Contraction(operands, ops, output, compute, steps, sizes)
        if self.ctx.mesh is not None:
            try:  # a layout that cannot run is a spec error, found here where it has a place
                lower(contraction, self.ctx.mesh)
            except ShardingError as err:
                sizes = dict(sizes)
                fixes = [(what, fix, fix.dtype.bytes * local_elements(fix.after, sizes, self.ctx.mesh))
                         for what, fix, _ in err.fixes]
                error = ShardingError(fix_message(err.message, fixes), fixes, self.ctx.text, *w.span,
                                      mesh=self.ctx.mesh)
                error.problem = err.message
                raise error from None
        return contraction

    def _compute(self, w: WTensor) -> dtypes.DType | None:
        compute = None
        for note in w.annotations:
            if note.key == "compute":
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

    def _axis_items(self, items: list[tuple[str, Span]], span: Span) -> list[str]:
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
        w: WCollective = self.w
        items = [item for item, _ in w.subscript]
        scatters = w.kind in ("ReduceScatter", "AllToAll")
        if scatters and len(items) < 2:
            raise self.ctx.error(f"{w.kind}_{{X,K}} names the mesh axes, then the dim to move the "
                                 "sharding to", w.subscript_span)
        dim = items[-1] if scatters else None
        axes = tuple(self._axis_items(w.subscript[:-1] if scatters else w.subscript, w.subscript_span))
        if len(set(axes)) != len(axes):
            raise self.ctx.error("an axis is named twice", w.subscript_span)
        source, target = self._tensor(w.input), self._tensor(w.output)
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

    def _dtype(self, word: str, span: Span) -> dtypes.DType:
        found = dtypes.lookup(word)
        if found is None:
            hint = dtypes.suggest(word)
            raise self.ctx.error(f"unknown dtype '{word}'" + (f"; did you mean '{hint}'?" if hint else ""), span)
        return found

    def _tensor(self, w: WTensor, allow_compute: bool = False) -> Tensor:
        name = w.name
        if w.head is None:
            dtype = self.ctx.default
            self._check_einsum_term(w)
        elif dtypes.lookup(w.head) is not None or name is not None or dtypes.near_dtype(w.head):
            dtype = self._dtype(w.head, w.head_span)
        elif self.typed is not None:
            dims = self.ctx.text[w.head_span[1]:w.span[1]]
            dims = dims if dims.startswith("[") else "[...]"
            raise self.ctx.error(f"unknown dtype '{w.head}': the statement's other tensors have dtypes "
                                 f"({self.typed.head}), so this one needs one too; to name a tensor, write "
                                 f"'{w.head}: {self.typed.head}{dims}'", w.head_span)
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
        letters = [d.name for d in w.dims]
        for i, d in enumerate(w.dims):
            if not d.name.isalpha():
                raise self.ctx.error(f"einsum subscripts are letters; '{d.name}' is not", d.span)
            if d.name in letters[:i]:
                term = "".join(letters)
                raise self.ctx.error(f"'{d.name}' appears twice in '{term}': a diagonal is not a "
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
            chips = 1
            for a in axes:
                chips *= self.ctx.mesh.axis(a).size
            if d.value is not None and d.value % chips:
                raise self.ctx.error(f"{d.value} does not split evenly over {', '.join(axes)} "
                                     f"({chips} chips)", d.span)
        if d.name is None:
            return Dim(size=d.value, axes=axes)
        if d.name in RESERVED or not d.name.isidentifier():
            # isidentifier: letters that are numbers (Ethiopic ten, U+1372) lex as name characters
            # but would not read back through sympy.parse_expr
            raise self.ctx.error(f"'{d.name}' cannot name a dim (it does not read back as a name in "
                                 "Python or sympy); choose another name", d.span)
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

    def _check_names(self, operands: tuple[Tensor, ...]) -> None:
        """Two operands with one name are one tensor: they must agree on its type."""
        first: dict[str, int] = {}
        for i, t in enumerate(operands):
            if t.name is None:
                continue
            if t.name in first and operands[first[t.name]] != t:
                earlier = self.w.operands[first[t.name]]
                col = column_of(self.ctx.text, earlier.span[0])
                before = Tensor(operands[first[t.name]].dtype, operands[first[t.name]].dims)
                raise self.ctx.error(f"{t.name} is {before} at column {col} but "
                                     f"{Tensor(t.dtype, t.dims)} here: one name, one tensor",
                                     self.w.operands[i].span)
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

    # -- steps --------------------------------------------------------------------------

    def _steps(self, operands, ops, output, compute):
        w = self.w
        current = [d.name if d.name is not None else self._fresh(d.size) for d in operands[0].dims]
        left = (operands[0].dtype, operands[0].name, _axes_of(operands[0]))
        steps: list[Step] = []
        if not ops:
            labels_out, summed = self._finish(current, [], w.output, strict=False, op_span=None)
            steps.append(self._step([(*left, current)], output, True, labels_out, summed, compute))
        for k, op in enumerate(ops):
            right_tensor, final = operands[k + 1], k == len(ops) - 1
            later = {d.name for t in (*operands[k + 2:], output) for d in t.dims if d.name}
            error, found = None, []
            for right, contracted in self._readings(current, right_tensor, w.operands[k + 1], op, w.ops[k]):
                try:
                    if final:
                        strict = op.symbol == "@" or op.contract is not None
                        found.append((right, *self._finish(current, right, w.output, strict,
                                                           w.ops[k].span, contracted)))
                    else:
                        found.append((right, *self._carry(current, right, op, contracted, later)))
                except SpecError as err:
                    error = error or err
                if found and not final:
                    break
            if not found:
                raise error
            # Two readings that sum dims of different sizes cost differently: say which was taken.
            if len(found) > 1 and sorted(map(label_text, found[0][2])) != sorted(map(label_text, found[1][2])):
                warnings.warn(f"{self.ctx.text[w.span[0]:w.span[1]]!r}: read as a matmul (summing "
                              f"{', '.join(label_text(l) for l in found[0][2])}); it could also be "
                              "elementwise. Name the dims to say which.", SymroofWarning, stacklevel=4)
            right, labels_out, summed = found[0]
            inputs = [(*left, current), (right_tensor.dtype, right_tensor.name, _axes_of(right_tensor), right)]
            summed = self._sum_alone_first(inputs, summed, output, compute, steps)
            steps.append(self._step(inputs, output, final, labels_out, summed, compute))
            # The intermediate goes to HBM in the result's dtype and has no name.
            current, left = labels_out, (output.dtype, None, None)
        sizes = {}
        for step in steps:
            for term in (*step.inputs, step.output):
                for label in term.labels:
                    sizes[label] = (sympy.Integer(int(label_text(label))) if is_literal_label(label)
                                    else dim_symbol(label))
        return tuple(steps), tuple(sizes.items())

    def _sum_alone_first(self, inputs: list, summed, output: Tensor, compute, steps: list) -> list:
        """A dim summed in a step but held by one of its two inputs only is summed away
        there first, in a step of its own, as every compiler does: `[B, D, K] * [D, F]`
        costs B*D*K adds and then the matmul, not the 2*B*D*F*K of the full loop nest.
        Rewrites `inputs` in place, appends the extra steps, and returns what is left to sum."""
        for side in (0, 1):
            dtype, name, axes, labels = inputs[side]
            alone = [l for l in summed if l in labels and l not in inputs[1 - side][3]]
            if not alone:
                continue
            kept = [l for l in labels if l not in alone]
            steps.append(self._step([inputs[side]], output, False, kept, alone, compute))
            inputs[side] = (output.dtype, None, None, kept)
            summed = [l for l in summed if l not in alone]
            names = ", ".join(label_text(l) for l in alone)
            which = "left" if side == 0 else "right"
            warnings.warn(f"{self.ctx.text[self.w.span[0]:self.w.span[1]]!r}: {names} is summed in the "
                          f"{which} operand only, so it is summed away first, in a step of its own "
                          "(as a compiler does), then the contraction runs: see the steps",
                          SymroofWarning, stacklevel=5)
        return summed

    def _step(self, inputs, output: Tensor, final: bool, labels_out, summed, compute) -> Step:
        terms = tuple(Term(dtype, tuple(labels), name, axes) for dtype, name, axes, labels in inputs)
        if final:
            # The result's labels follow its written dims, except a scalar's unit label.
            by_label = dict(zip(labels_out, _axes_of(output))) if len(labels_out) == len(output.dims) else {}
            out = Term(output.dtype, tuple(labels_out), output.name,
                       tuple(by_label.get(l, ()) for l in labels_out), output.unreduced)
        else:
            out = Term(output.dtype, tuple(labels_out))
        chosen = compute or dtypes.compute_dtype([t.dtype for t in terms])
        return Step(terms, out, tuple(summed), chosen)

    def _fresh(self, value: int) -> str:
        count = self.literal_counts.get(value, 0) + 1
        self.literal_counts[value] = count
        return str(value) if count == 1 else f"{value}#{count}"

    def _readings(self, left: list[str], right_tensor: Tensor, right_w: WTensor, op: Operator,
                  op_w: WOp) -> list[tuple[list[str | None], set[str]]]:
        """The ways to label the right operand's dims: a list of (labels, contracted)."""
        right: list[str | None] = [d.name for d in right_tensor.dims]
        if op.contract is not None:  # checked first: a scalar side has nothing to contract either
            written = self.ctx.text[op_w.span[0]:op_w.span[1]]
            for name, span in op_w.subscript:
                if name not in left or name not in right:
                    where = "the left" if name not in left else "the right"
                    raise self.ctx.error(f"{name} in '{written}' is not in {where} operand: a contracted "
                                         "dim must be in both", span)
            contracted = set(op.contract)
            return [(self._pair_by_size(left, right, right_tensor, contracted), contracted)]
        if not left or not right:
            if op.symbol == "@":
                raise self.ctx.error("'@' needs at least one dim on each side", op_w.span)
            return [(self._pair_by_size(left, right, right_tensor, set()), set())]
        li = len(left) - 1
        ri = len(right) - 2 if len(right) >= 2 else 0
        if op.symbol == "@":
            self._check_matmul_pair(left[li], right_tensor.dims[ri], right_w.dims[ri], op_w)
            contracted = {left[li]}
            if right[ri] is None:
                right[ri] = left[li]
            return [(self._align_batch(left, right, right_tensor, contracted), contracted)]
        readings = []
        rdim = right_tensor.dims[ri]
        if is_literal_label(left[li]) and rdim.name is None and int(label_text(left[li])) == rdim.size:
            matmul = list(right)
            matmul[ri] = left[li]
            readings.append((self._align_batch(left, matmul, right_tensor, {left[li]}), {left[li]}))
        readings.append((self._pair_by_size(left, right, right_tensor, set()), set()))
        return readings

    def _check_matmul_pair(self, left_label: str, rdim: Dim, rdim_w: WDim, op_w: WOp) -> None:
        same = (rdim.name == left_label if rdim.name is not None
                else is_literal_label(left_label) and int(label_text(left_label)) == rdim.size)
        if not same:
            left_text, right_text = label_text(left_label), str(rdim)
            kind = "sizes differ" if rdim.name is None and is_literal_label(left_label) else "they must be the same dim"
            raise self.ctx.error(f"'@' contracts the left's last dim {left_text} with the right's "
                                 f"{right_text}: {kind}", rdim_w.span)

    def _align_batch(self, left, right, right_tensor, used) -> list[str]:
        """Matmul reading: literal batch dims (all but the last two) pair up from the right,
        as numpy broadcasts them; the rest of the right's literals are new dims."""
        right = list(right)
        for offset in range(3, min(len(left), len(right)) + 1):
            l, i = left[-offset], len(right) - offset
            if right[i] is None and is_literal_label(l) and l not in used and \
                    int(label_text(l)) == right_tensor.dims[i].size:
                right[i] = l
                used = used | {l}
        return [r if r is not None else self._fresh(d.size) for r, d in zip(right, right_tensor.dims)]

    def _pair_by_size(self, left, right, right_tensor, used) -> list[str]:
        """Elementwise reading: each literal of the right pairs with the first unused literal
        of the left of the same size; the rest are new dims."""
        right = list(right)
        taken = set(used)
        for i, r in enumerate(right):
            if r is not None:
                continue
            size = right_tensor.dims[i].size
            for l in left:
                if is_literal_label(l) and l not in taken and int(label_text(l)) == size:
                    right[i] = l
                    taken.add(l)
                    break
        return [r if r is not None else self._fresh(d.size) for r, d in zip(right, right_tensor.dims)]

    def _carry(self, left, right, op, contracted, later):
        """A step inside a chain: what it sums, and the labels of its intermediate."""
        summed = set(contracted)
        if op.symbol == "*" and op.contract is None:
            summed |= {l for l in (*left, *right) if not is_literal_label(l) and l not in later}
        out = [l for l in dict.fromkeys((*left, *right)) if l not in summed]
        return out, [l for l in dict.fromkeys((*left, *right)) if l in summed]

    def _finish(self, left, right, out_w: WTensor, strict: bool, op_span, contracted=frozenset()):
        """The last step: match the result's dims to what survives, and sum the rest."""
        present = list(dict.fromkeys((*left, *right)))
        survivors = [l for l in present if l not in contracted]
        labels_out: list[str] = []
        for d in out_w.dims:
            if d.name is not None:
                if d.name not in present:
                    raise self.ctx.error(f"result dim {d.name} is not in any input", d.span)
                if d.name in contracted:
                    raise self.ctx.error(f"{d.name} is contracted but also in the result", d.span)
                labels_out.append(d.name)
                continue
            match = next((l for l in survivors if is_literal_label(l) and l not in labels_out
                          and int(label_text(l)) == d.value), None)
            if match is None:
                if d.value == 1:  # bf16[1]: a scalar written as one element
                    match = self._fresh(1)
                else:
                    raise self.ctx.error(f"result dim {d.value} matches no input dim of that size "
                                         "left after the contraction", d.span)
            labels_out.append(match)
        summed = [l for l in present if l not in labels_out]
        if strict:
            loose = [l for l in summed if l not in contracted]
            if loose:
                names = ", ".join(label_text(l) for l in loose)
                where = self.spans.get(loose[0], op_span)
                raise self.ctx.error(f"{names} is neither contracted nor in the result: keep it in the "
                                     "result, or let plain '*' sum it ('@' and '*_D' sum only the dims "
                                     "they name)", where)
        return labels_out, summed
