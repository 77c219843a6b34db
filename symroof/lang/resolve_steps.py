"""Written contractions -> their steps: how `@`, `*_D` and plain `*` read the dims of a
chain, which dims each binary step sums, and what each intermediate holds.

The rules are in `resolve.py`'s docstring; this is their einsum half, apart from the
reading of tensors and dims, which `resolve.py` keeps. `EinsumSteps` is the base of the
resolver's statement, so that the step building sees the same context, written statement
and dims; the program's `Context` lives here for the same reason (this module cannot
import `resolve.py`, which imports it).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Sequence, Set
from dataclasses import dataclass, field

import sympy

from .. import dtypes
from ..errors import SpecError, SymroofWarning
from ..ir import Apply, Contraction, Dim, Mesh, Operator, Step, Tensor, Term, is_literal_label, label_text, step_sizes
from .written import Span, WApply, WArrays, WCollective, WDim, WOp, WStatement, WTensor

# A step's input as the chain builds it: dtype, name, the axes each dim is split over (None
# for an intermediate), and its labels.
_Input = tuple[dtypes.DType, str | None, tuple[tuple[str, ...], ...] | None, list[str]]


@dataclass
class Context:
    """What a whole program shares: the text (for carets), the default dtype, the mesh,
    and the values given to named dims."""

    text: str
    default: dtypes.DType
    mesh: Mesh | None = None
    values: dict[str, tuple[int, Span]] = field(default_factory=dict)
    names: set[str] = field(default_factory=set)
    splits: dict[str, set[str]] = field(default_factory=dict)  # the axes each named dim is split over
    # checks a statement's layout on the mesh (see resolve.resolve)
    check: Callable[[Contraction | Apply, Mesh], None] | None = None

    def chips(self, axes: Iterable[str]) -> int | sympy.Expr:
        """How many chips mesh axes span together (1 for none): an int, or a product of
        symbols over axes without a size. Only the mesh's own axes come here: every
        subscript is checked against the mesh as it is read."""
        axes = tuple(axes)
        if not axes:
            return 1
        assert self.mesh is not None
        count = self.mesh.over(axes)
        return int(count) if count.is_Integer else count

    def error(self, message: str, span: Span | None) -> SpecError:
        if span is None:
            return SpecError(message, self.text, None)
        return SpecError(message, self.text, span[0], span[1])


def _axes_of(tensor: Tensor) -> tuple[tuple[str, ...], ...]:
    return tuple(d.axes for d in tensor.dims)


class EinsumSteps:
    """A statement being resolved, as far as its steps are concerned: the program's context,
    the statement as written, where each named dim first appears, and how many distinct
    dims of each literal size it has labelled (`4096`, then `4096#2`)."""

    def __init__(self, ctx: Context, written: WStatement | WCollective | WApply | WArrays):
        self.ctx = ctx
        self.w = written
        self.literal_counts: dict[int | None, int] = {}
        self.spans: dict[str, Span] = {}  # where each named dim first appears

    def _steps(self, w: WStatement, operands: tuple[Tensor, ...], ops: tuple[Operator, ...], output: Tensor,
               compute: dtypes.DType | None) -> tuple[tuple[Step, ...], tuple[tuple[str, sympy.Expr], ...]]:
        """A chain's steps, left to right, and the size of every label they use."""
        current = [d.name if d.name is not None else self.fresh(d.size) for d in operands[0].dims]
        left: tuple[dtypes.DType, str | None, tuple[tuple[str, ...], ...] | None] = (
            operands[0].dtype, operands[0].name, _axes_of(operands[0]))
        steps: list[Step] = []
        if not ops:
            labels_out, summed = self._finish(current, [], w.output, strict=False, op_span=None)
            steps.append(self._step([(*left, current)], output, True, labels_out, summed, compute))
        for k, op in enumerate(ops):
            right_tensor, final = operands[k + 1], k == len(ops) - 1
            later = {d.name for t in (*operands[k + 2:], output) for d in t.dims if d.name}
            error: SpecError | None = None
            found: list[tuple[list[str], list[str], list[str]]] = []  # (right's labels, result's, summed)
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
                assert error is not None  # every reading failed: the first one says why
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
        return tuple(steps), step_sizes(steps)

    def _sum_alone_first(self, inputs: list[_Input], summed: list[str], output: Tensor,
                         compute: dtypes.DType | None, steps: list[Step]) -> list[str]:
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

    def _step(self, inputs: Sequence[_Input], output: Tensor, final: bool, labels_out: Sequence[str],
              summed: Sequence[str], compute: dtypes.DType | None) -> Step:
        terms = tuple(Term(dtype, tuple(labels), name, axes) for dtype, name, axes, labels in inputs)
        if final:
            # The result's labels follow its written dims, except a scalar's unit label.
            by_label = dict(zip(labels_out, _axes_of(output))) if len(labels_out) == len(output.dims) else {}
            out = Term(output.dtype, tuple(labels_out), output.name,
                       tuple(by_label.get(l, ()) for l in labels_out), output.unreduced)
        else:
            out = Term(output.dtype, tuple(labels_out))
        chosen = compute or dtypes.compute_dtype([t.dtype for t in terms])
        # What an einsum step is: two operands summing what they share contract (the matrix
        # unit); two that sum nothing multiply elementwise; one operand is summed or copied.
        if len(terms) == 2:
            kind, fn = ("contract", None) if summed else ("elementwise", "mul")
        else:
            kind, fn = ("reduce", "sum") if summed else ("copy", None)
        return Step(terms, out, tuple(summed), chosen, kind=kind, fn=fn)

    def fresh(self, value: int | None) -> str:
        """A new label for a literal dim of this size (a `Dim` with no name, so its size is
        set): `4096` the first time in the statement, then `4096#2`, `4096#3`, ..."""
        count = self.literal_counts.get(value, 0) + 1
        self.literal_counts[value] = count
        return str(value) if count == 1 else f"{value}#{count}"

    def _readings(self, left: list[str], right_tensor: Tensor, right_w: WTensor, op: Operator,
                  op_w: WOp) -> list[tuple[list[str], set[str]]]:
        """The ways to label the right operand's dims: a list of (labels, contracted)."""
        right: list[str | None] = [d.name for d in right_tensor.dims]
        if op.contract is not None:  # checked first: a scalar side has nothing to contract either
            written = self.ctx.text[op_w.span[0]:op_w.span[1]]
            for name, span in op_w.subscript or ():
                if name not in left or name not in right:
                    where = "the left" if name not in left else "the right"
                    raise self.ctx.error(f"{name} in '{written}' is not in {where} operand: a contracted "
                                         "dim must be in both", span)
            contracted = set(op.contract)
            return [(self.pair_by_size(left, right, right_tensor, contracted), contracted)]
        if not left or not right:
            if op.symbol == "@":
                raise self.ctx.error("'@' needs at least one dim on each side", op_w.span)
            return [(self.pair_by_size(left, right, right_tensor, set()), set())]
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
        readings.append((self.pair_by_size(left, right, right_tensor, set()), set()))
        return readings

    def _check_matmul_pair(self, left_label: str, rdim: Dim, rdim_w: WDim, op_w: WOp) -> None:
        same = (rdim.name == left_label if rdim.name is not None
                else is_literal_label(left_label) and int(label_text(left_label)) == rdim.size)
        if not same:
            left_text, right_text = label_text(left_label), str(rdim)
            kind = "sizes differ" if rdim.name is None and is_literal_label(left_label) else "they must be the same dim"
            raise self.ctx.error(f"'@' contracts the left's last dim {left_text} with the right's "
                                 f"{right_text}: {kind}", rdim_w.span)

    def _align_batch(self, left: Sequence[str], right: Sequence[str | None], right_tensor: Tensor,
                     used: Set[str]) -> list[str]:
        """Matmul reading: literal batch dims (all but the last two) pair up from the right,
        as numpy broadcasts them; the rest of the right's literals are new dims."""
        right = list(right)
        for offset in range(3, min(len(left), len(right)) + 1):
            l, i = left[-offset], len(right) - offset
            if right[i] is None and is_literal_label(l) and l not in used and \
                    int(label_text(l)) == right_tensor.dims[i].size:
                right[i] = l
                used = used | {l}
        return [r if r is not None else self.fresh(d.size) for r, d in zip(right, right_tensor.dims)]

    def pair_by_size(self, left: Sequence[str], right: Sequence[str | None], right_tensor: Tensor,
                     used: Iterable[str]) -> list[str]:
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
        return [r if r is not None else self.fresh(d.size) for r, d in zip(right, right_tensor.dims)]

    def _carry(self, left: Sequence[str], right: Sequence[str], op: Operator, contracted: Set[str],
               later: Set[str]) -> tuple[list[str], list[str]]:
        """A step inside a chain: what it sums, and the labels of its intermediate."""
        summed = set(contracted)
        if op.symbol == "*" and op.contract is None:
            summed |= {l for l in (*left, *right) if not is_literal_label(l) and l not in later}
        out = [l for l in dict.fromkeys((*left, *right)) if l not in summed]
        return out, [l for l in dict.fromkeys((*left, *right)) if l in summed]

    def _finish(self, left: Sequence[str], right: Sequence[str], out_w: WTensor, strict: bool, op_span: Span | None,
                contracted: Set[str] = frozenset()) -> tuple[list[str], list[str]]:
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
                    match = self.fresh(1)
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
