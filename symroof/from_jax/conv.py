"""Convolutions: `conv_general_dilated` (lax.conv, flax's Conv, a ViT's patch embedding,
and the transposed convolutions of a convolution's gradient) written as ops/conv.py's
`conv_{H,W} x, w -> y`, its axes named from the traced dims whatever the layout
(dimension_numbers). The output's spatial sizes are JAX's own expressions of the input's
(strides, padding and dilation in them: `floordiv(H - 3, 2) + 1`, written as a let).

FLOPs are the dense window's (padding counted); XLA's cost analysis counts only the
window positions that meet the input (and, for an input dilated by a gradient, not its
holes): the cross-check explains the difference exactly, position by position
(`xla_flops`). A grouped convolution (feature_group_count > 1) or a batch-grouped one
(the kernel's gradient of a grouped convolution) is not costed yet: named in the
warning with its count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from ..lang import source
from .gspmd import operands, result_text
from .program import Env, Eqn
from .rules import not_costed, rule
from .scatter import grouping

if TYPE_CHECKING:
    from .context import Context


@rule("conv_general_dilated")
def conv(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    p = eqn.params
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        not_costed(ctx, eqn, env)
        return
    x_var, w_var = eqn.invars
    xs, ws, os = (tuple(v.aval.shape) for v in (x_var, w_var, eqn.outvars[0]))
    lhs, rhs, out = p["dimension_numbers"]
    dims: list = []
    group = grouping(dims)
    batch, feature, f_out = group(xs[lhs[0]]), group(xs[lhs[1]], True), group(ws[rhs[0]])
    spatial = [group(xs[j], True) for j in lhs[2:]]
    window = [group(ws[j], True) for j in rhs[2:]]
    result = [group(os[j], True) for j in out[2:]]
    x_at: list[int | None] = [None] * len(xs)
    w_at: list[int | None] = [None] * len(ws)
    o_at: list[int | None] = [None] * len(os)
    for at, spec, groups in ((x_at, lhs, [batch, feature, *spatial]), (w_at, rhs, [f_out, feature, *window]),
                             (o_at, out, [batch, f_out, *result])):
        for j, g in zip(spec, groups):
            at[j] = g
    x, w = ctx.whole(x_var, x_at, env, "conv"), ctx.whole(w_var, w_at, env, "conv")
    summed = frozenset(g for g in (feature, *window) if g is not None)
    # the subscript names the spatial dims, and every dim the kind pairs by name is named
    named = summed | frozenset(g for g in (*spatial, *result) if g is not None)
    names = ctx.labels(dims, named=named, prefer=ctx.prefer([(x, x_at), (w, w_at)]))
    label: list[str | None] = list(names)
    (xt, wt), splits = operands(ctx, [(x, [label[g] if g is not None else None for g in x_at], x_at),
                                      (w, [label[g] if g is not None else None for g in w_at], w_at)],
                                len(dims), depth, summed, what="conv")
    out_labels: list[str | None] = [None if g is None else label[g] for g in o_at]
    out_splits = ["" if g is None else splits[g] for g in o_at]
    over = tuple(str(label[g]) for g in spatial if g is not None)
    word = "conv_transpose" if any(d != 1 for d in p["lhs_dilation"]) else "conv"
    xla = _xla_count(ctx, xs, ws, (lhs, rhs, out), p)
    counted = None if xla is None else xla - _symroof_count(ctx, xs, ws, os, (lhs, rhs, out), word)
    if counted is not None and sympy.simplify(counted) == 0:
        counted = None
    ctx.emit(source.Apply(word, over, "prefix", (xt, wt),
                          result_text(ctx.dtype(eqn.outvars[0].aval.dtype), out_labels, out_splits)),
             "conv_general_dilated", depth, counted, VALID if counted else "")
    ctx.result(eqn, env, labels=out_labels, splits=out_splits)


VALID = ("XLA counts a convolution's window positions that meet the input, not those on its padding (nor an "
         "input dilation's holes); symroof the dense window, as the hardware multiplies the zeros (a transposed "
         "convolution: each input element's taps, the padding's included)")


def _symroof_count(ctx: Context, xs: tuple, ws: tuple, os: tuple, numbers: tuple, word: str) -> sympy.Expr:
    """ops/conv.py's leading count of this convolution, from the traced dims."""
    lhs, rhs, out = numbers
    window = sympy.Mul(*(_size(ctx, ws[j]) for j in rhs[2:]))
    features = _size(ctx, ws[rhs[1]]) if word == "conv" else _size(ctx, ws[rhs[0]])
    points = sympy.Mul(*(_size(ctx, d) for d in (os if word == "conv" else xs)))
    return 2 * points * window * features


def _xla_count(ctx: Context, xs: tuple, ws: tuple, numbers: tuple, p: dict) -> sympy.Expr | None:
    """XLA's cost analysis's FLOPs of a convolution: per spatial dim, the (output position, tap) pairs that
    fall on the padding, low (a number) and high (a floor expression of the input's size),
    the pairs of an N-d window the product of its dims'. Exact for an input no smaller
    than the window; an input dilation (a gradient's transposed convolution) is counted
    position by position, its sizes concrete (None where they are not: unexplained)."""
    lhs, rhs, _ = numbers
    size_of = [_size(ctx, d) for d in xs]
    valid = sympy.Integer(1)
    for k in range(len(lhs) - 2):
        n, kernel = size_of[lhs[2 + k]], ws[rhs[2 + k]]
        lo, hi = p["padding"][k]
        s, ldil, d = p["window_strides"][k], p["lhs_dilation"][k], p["rhs_dilation"][k]
        if not all(isinstance(v, int) for v in (kernel, lo, hi)):  # SAME padding of a symbolic size, strided
            return None
        span = (n - 1) * ldil + 1 + lo + hi - d * (kernel - 1) - 1  # the padded input less the window, less 1
        outs = sympy.floor(span / s) + 1
        if ldil != 1:
            if not n.is_Integer:
                return None
            count = sum(1 for o in range(int(outs)) for i in range(kernel)
                        if 0 <= o * s + i * d - lo <= (int(n) - 1) * ldil and (o * s + i * d - lo) % ldil == 0)
        else:
            low = sum(max(0, -(-(lo - i * d) // s)) for i in range(kernel))
            high = sum(sympy.floor(span / s) - sympy.floor((span + d * (kernel - 1 - i) - hi) / s)
                       for i in range(kernel) if d * (kernel - 1 - i) - hi < 0)
            count = outs * kernel - low - high
        valid *= count
    # per valid pair, each input feature times each output feature, for each batch element
    return 2 * size_of[lhs[0]] * size_of[lhs[1]] * _size(ctx, ws[rhs[0]]) * valid


def _size(ctx: Context, dim: object) -> sympy.Expr:
    return sympy.Integer(dim) if isinstance(dim, int) else ctx.size([ctx.dim_name(dim)])
