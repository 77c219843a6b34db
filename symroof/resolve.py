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

import keyword
import warnings
from dataclasses import dataclass, field

import sympy

from . import dtypes
from .errors import SpecError, SymroofWarning, column_of
from .ir import Contraction, Dim, Operator, Program, Step, Tensor, Term, dim_symbol, is_literal_label, label_text
from .syntax import Span, WDim, WOp, WStatement, WTensor

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


def resolve(statements: list[WStatement], text: str, default_dtype: str = "bf16") -> Program:
    """Resolve written statements into a `Program` (see the module docstring for the rules)."""
    default = dtypes.lookup(default_dtype)
    if default is None:
        hint = dtypes.suggest(default_dtype)
        raise SpecError(f"unknown default dtype '{default_dtype}'" + (f"; did you mean '{hint}'?" if hint else ""))
    if len(statements) > MAX_STATEMENTS:
        raise SpecError(f"{len(statements)} statements; symroof reads at most {MAX_STATEMENTS}", text, 0)
    ctx = _Context(text, default)
    resolved = tuple(_Statement(ctx, s).resolve() for s in statements)
    return Program(resolved, tuple((name, value) for name, (value, _) in ctx.values.items()))


@dataclass
class _Context:
    """What a whole program shares: the text (for carets), the default dtype, and the
    values given to named dims."""

    text: str
    default: dtypes.DType
    values: dict[str, tuple[int, Span]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)

    def error(self, message: str, span: Span | None) -> SpecError:
        if span is None:
            return SpecError(message, self.text, None)
        return SpecError(message, self.text, span[0], span[1])


class _Statement:
    def __init__(self, ctx: _Context, written: WStatement):
        self.ctx = ctx
        self.w = written
        self.literal_counts: dict[int, int] = {}
        self.spans: dict[str, Span] = {}  # where each named dim first appears

    # -- tensors ------------------------------------------------------------------------

    def resolve(self) -> Contraction:
        w = self.w
        if len(w.operands) > MAX_OPERANDS:
            raise self.ctx.error(f"{len(w.operands)} operands; symroof handles at most {MAX_OPERANDS}",
                                 w.operands[MAX_OPERANDS].span)
        compute = self._annotations()
        operands = tuple(self._tensor(t) for t in w.operands)
        output = self._tensor(w.output)
        self._check_names(operands)
        ops = tuple(self._operator(op) for op in w.ops)
        steps, sizes = self._steps(operands, ops, output, compute)
        return Contraction(operands, ops, output, compute, steps, sizes)

    def _annotations(self) -> dtypes.DType | None:
        compute = None
        for note in self.w.annotations:
            if note.key == "compute" and note.value is not None and note.subscript is None:
                if compute is not None:
                    raise self.ctx.error("the compute dtype is given twice", note.span)
                compute = self._dtype(note.value, note.span)
            elif note.key == "U" and note.subscript:
                raise self.ctx.error("'{U_...}' leaves a result unreduced over mesh axes: "
                                     "sharded specs are not costed yet", note.span)
            else:
                raise self.ctx.error(f"unknown annotation '{note.key}'; symroof knows {{compute=DTYPE}}",
                                     note.span)
        return compute

    def _dtype(self, word: str, span: Span) -> dtypes.DType:
        found = dtypes.lookup(word)
        if found is None:
            hint = dtypes.suggest(word)
            raise self.ctx.error(f"unknown dtype '{word}'" + (f"; did you mean '{hint}'?" if hint else ""), span)
        return found

    def _tensor(self, w: WTensor) -> Tensor:
        name = w.name
        if w.head is None:
            dtype = self.ctx.default
            self._check_einsum_term(w)
        elif dtypes.lookup(w.head) is not None or name is not None or dtypes.looks_like_dtype(w.head):
            dtype = self._dtype(w.head, w.head_span)
        else:  # X[B, D]: a tensor's name, dtype from the default
            dtype, name = self.ctx.default, w.head
        if len(w.dims) > MAX_DIMS_PER_TENSOR:
            raise self.ctx.error(f"{len(w.dims)} dims in one tensor; symroof handles at most "
                                 f"{MAX_DIMS_PER_TENSOR}", w.dims[MAX_DIMS_PER_TENSOR].span)
        seen: dict[str, WDim] = {}
        dims = []
        for d in w.dims:
            dims.append(self._dim(d))
            if d.name is not None:
                if d.name in seen:
                    raise self.ctx.error(
                        f"{d.name} appears twice in one tensor; give the second its own name "
                        f"(e.g. {d.name}2) or write the sizes as numbers", d.span)
                seen[d.name] = d
        return Tensor(dtype, tuple(dims), name)

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
        if d.axes:
            raise self.ctx.error(f"'{d.text}_...' shards {d.text} over mesh axes: sharded specs are "
                                 "not costed yet", d.axes_span or d.span)
        if d.value is not None and d.value <= 0:
            raise self.ctx.error(f"a dim's size must be a positive integer, got {d.value}", d.span)
        if d.name is None:
            return Dim(size=d.value)
        if d.name in RESERVED:
            raise self.ctx.error(f"'{d.name}' cannot name a dim (it means something else to "
                                 "Python or sympy); choose another name", d.span)
        self.spans.setdefault(d.name, d.span)
        if len(self.ctx.names) >= MAX_DIMS and d.name not in self.ctx.names:
            raise self.ctx.error(f"more than {MAX_DIMS} distinct dims; symroof handles at most {MAX_DIMS}",
                                 d.span)
        self.ctx.names.add(d.name)
        if d.value is not None:
            known = self.ctx.values.get(d.name)
            if known is not None and known[0] != d.value:
                col = column_of(self.ctx.text, known[1][0])
                raise self.ctx.error(f"{d.name} is {known[0]} at column {col} but {d.value} here", d.span)
            self.ctx.values.setdefault(d.name, (d.value, d.span))
        return Dim(name=d.name)

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
        left = (operands[0].dtype, operands[0].name)
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
            inputs = [(*left, current), (right_tensor.dtype, right_tensor.name, right)]
            steps.append(self._step(inputs, output, final, labels_out, summed, compute))
            # The intermediate goes to HBM in the result's dtype and has no name.
            current, left = labels_out, (output.dtype, None)
        sizes = {}
        for step in steps:
            for term in (*step.inputs, step.output):
                for label in term.labels:
                    sizes[label] = (sympy.Integer(int(label_text(label))) if is_literal_label(label)
                                    else dim_symbol(label))
        return tuple(steps), tuple(sizes.items())

    def _step(self, inputs, output: Tensor, final: bool, labels_out, summed, compute) -> Step:
        terms = tuple(Term(dtype, tuple(labels), name) for dtype, name, labels in inputs)
        out = Term(output.dtype, tuple(labels_out), output.name if final else None)
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
        if op.contract is not None:
            written = self.ctx.text[op_w.span[0]:op_w.span[1]]
            for name, span in op_w.subscript:
                if name not in left or name not in right:
                    where = "the left" if name not in left else "the right"
                    raise self.ctx.error(f"{name} in '{written}' is not in {where} operand: a contracted "
                                         "dim must be in both", span)
            contracted = set(op.contract)
            return [(self._pair_by_size(left, right, right_tensor, contracted), contracted)]
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
