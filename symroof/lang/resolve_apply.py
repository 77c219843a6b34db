"""Statements that name their op (`softmax_T x -> y`, `gelu(x) -> y`, `a + b -> c`) ->
`Apply`, with one step per op, its kind asked of `symroof.ops`.

Dims are matched by name, as in an einsum; literal sizes pair up by size, in order.
The kind checks the shapes (`Kind.summed`) and says which dims it reduces over.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import dtypes, ops
from ..ir import Apply, Operator, Step, Tensor, Term, is_literal_label, label_text, step_sizes, subscripted
from .syntax import COLLECTIVES
from .written import Span, WApply, WOp, WStatement, WTensor

if TYPE_CHECKING:  # resolve imports this module
    from .resolve import Statement


def resolve_apply(st: Statement) -> Apply:
    """`st` is the resolver's `Statement` for a `WApply`: its context, spans and tensors."""
    assert isinstance(st.w, WApply)
    w = st.w
    if w.subscript is not None and len(w.subscript) == 1 and f"{w.word}_{w.subscript[0][0]}" in ops.WORDS:
        # a word with an underscore (gelu_erf) lexes as a word and a subscript: joined again
        w = dataclasses.replace(w, word=f"{w.word}_{w.subscript[0][0]}", subscript=None)
    kinds = ops.WORDS.get(w.word)
    if kinds is None:
        raise st.ctx.error(_unknown(w.word), w.word_span)
    operands = tuple(st.tensor(t) for t in w.operands)
    output = st.tensor(w.output, allow_compute=True)
    compute = st.compute_dtype(w.output)
    st.check_names(operands)
    over = _over(st, w)
    kind = _pick(st, w, kinds, len(operands), over)
    return _applied(st, kind, w.word, w.form, over, operands, output, compute, w.operands, w.output)


def resolve_infix(st: Statement, operands: tuple[Tensor, ...], ops_written: list[WOp], output: Tensor,
                  compute: dtypes.DType | None) -> Apply:
    """`a + b -> c`: elementwise operators, one step each, left to right. Mixed with the
    einsum's '@' or '*' they are refused: one kind of op per statement."""
    assert isinstance(st.w, WStatement)
    w = st.w
    symbols = {op.symbol for op in ops_written}
    if len(symbols) > 1:
        mixed = next(op for op in ops_written if op.symbol != ops_written[0].symbol)
        raise st.ctx.error(f"'{ops_written[0].symbol}' and '{mixed.symbol}' in one statement: write one "
                           "op per statement (the intermediate as its own line)", mixed.span)
    for op in ops_written:
        if op.subscript is not None:
            raise st.ctx.error(f"'{op.symbol}' is elementwise: it takes no subscript", op.span)
    kind, word = ops.INFIX[ops_written[0].symbol]
    if len(operands) > 2:
        raise st.ctx.error(f"'{ops_written[0].symbol}' joins two operands here; write a longer sum as "
                           "several statements", ops_written[1].span)
    return _applied(st, kind, ops_written[0].symbol, "infix", (), operands, output, compute, w.operands,
                    w.output, checked_as=word)


def is_infix(op: Operator | WOp) -> bool:
    return op.symbol in ops.INFIX


def _unknown(word: str) -> str:
    known = sorted(ops.WORDS) + list(COLLECTIVES)
    close = difflib.get_close_matches(word, known, n=1)
    if close:
        what = "collective" if close[0] in COLLECTIVES else "op"
        return f"unknown {what} '{word}'; did you mean '{close[0]}'?"
    return f"unknown op '{word}' (ops: {', '.join(sorted(ops.WORDS))}; collectives: {', '.join(COLLECTIVES)})"


def _over(st: Statement, w: WApply) -> tuple[str, ...]:
    if w.subscript is None:
        return ()
    names = []
    for item, span in w.subscript:
        if not item[0].isalpha():
            raise st.ctx.error(f"name the dim {w.word} works over, not its size ({item})", span)
        if item in names:
            raise st.ctx.error(f"{item} is named twice", span)
        names.append(item)
    return tuple(names)


def _pick(st: Statement, w: WApply, kinds: Sequence[ops.Kind], count: int, over: tuple[str, ...]) -> ops.Kind:
    fits = [k for k in kinds if k.arity[0] <= count <= k.arity[1] and bool(over) == k.takes_dims]
    if fits:
        return fits[0]
    kind = next((k for k in kinds if bool(over) == k.takes_dims), kinds[0])
    if bool(over) != kind.takes_dims:
        if kind.takes_dims:
            raise st.ctx.error(f"{w.word} works over named dims: write {subscripted(w.word, ('D',))}, naming them",
                               w.word_span)
        raise st.ctx.error(f"{w.word} takes no subscript", w.word_span)
    low, high = kind.arity
    want = str(low) if low == high else f"{low} to {high}"
    raise st.ctx.error(f"{w.word} takes {want} operand{'s' if high > 1 else ''}, got {count}",
                       w.operands[min(count, high) - 1].span if count > high else w.span)


def _applied(st: Statement, kind: ops.Kind, word: str, form: str, over: tuple[str, ...],
             operands: tuple[Tensor, ...], output: Tensor, compute: dtypes.DType | None,
             written: list[WTensor], written_out: WTensor, checked_as: str | None = None) -> Apply:
    labels = _labels(st, operands)
    out = _output_labels(st, labels, output, written_out, kind.makes_dims)
    try:
        summed = kind.summed(checked_as or word, labels, over, out)
    except ops.ShapeError as err:
        span: Span = written_out.span if err.operand is None else written[err.operand].span
        raise st.ctx.error(str(err), span) from None
    terms = tuple(Term(t.dtype, tuple(l), t.name, tuple(d.axes for d in t.dims))
                  for t, l in zip(operands, labels))
    result = Term(output.dtype, tuple(out), output.name, tuple(d.axes for d in output.dims), output.unreduced)
    floats = [t.dtype for t in terms if t.dtype.is_float] or [t.dtype for t in terms]
    step = Step(terms, result, tuple(summed), compute or dtypes.compute_dtype(floats), kind=kind.name,
                fn=word, form=form, over=tuple(over))
    return Apply(operands, output, (step,), step_sizes((step,)))


def _labels(st: Statement, operands: tuple[Tensor, ...]) -> list[list[str]]:
    """Each operand's dims as labels: names, and literal sizes paired by size with the
    earlier operands' literals (`[B, 4096] + [4096]`: one dim)."""
    found: list[list[str]] = []
    for tensor in operands:
        earlier = [l for labels in found for l in labels]
        found.append(st.pair_by_size(earlier, [d.name for d in tensor.dims], tensor, set()))
    return found


def _output_labels(st: Statement, labels: list[list[str]], output: Tensor, written: WTensor,
                   makes_dims: bool) -> list[str]:
    """The result's dims as labels: each an input's (a literal paired by size with an
    unpaired input literal), or, for a kind whose result has dims of its own (a pad's),
    a dim of its own."""
    present = list(dict.fromkeys(l for ls in labels for l in ls))
    out: list[str] = []
    for dim, wdim in zip(output.dims, written.dims):
        if dim.name is not None:
            if dim.name not in present and not makes_dims:
                raise st.ctx.error(f"result dim {dim.name} is not in any input", wdim.span)
            out.append(dim.name)
            continue
        match = next((l for l in present if is_literal_label(l) and l not in out and
                      int(label_text(l)) == dim.size), None)
        if match is None and makes_dims:
            match = st.fresh(dim.size)
        if match is None:
            raise st.ctx.error(f"result dim {dim.size} matches no input dim of that size", wdim.span)
        out.append(match)
    return out
