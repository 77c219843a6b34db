"""Convolutions: `conv_general_dilated` (lax.conv, flax's Conv, a ViT's patch embedding,
and the transposed convolutions of a convolution's gradient) written as ops/conv.py's
`conv_{H,W} x, w -> y`, its axes named from the traced dims whatever the layout
(dimension_numbers). The output's spatial sizes are JAX's own expressions of the input's
(strides, padding and dilation in them: `floordiv(H - 3, 2) + 1`, written as a let).

FLOPs are the dense window's (padding counted); XLA's cost analysis counts only the
window positions that meet the input (and, for an input dilated by a gradient, not its
holes): the cross-check explains the difference exactly, position by position
(`xla_flops`). XLA counts a grouped convolution per output element over its group's input
features (measured: 2 x B x Cg x O x the valid pairs), as symroof does.

A grouped convolution (feature_group_count G: flax's Conv(feature_group_count=...),
depthwise where G is the input's features) is written with the group as a dim of all
three, the input's features as G x Cg and the output's as G x M (groups major, as XLA
splits them); a batch-grouped one (batch_group_count G: the kernel's gradient of a
grouped convolution) splits the input's batch instead. Both need the split sizes to be
numbers G divides and the operands whole (not split over a mesh); otherwise, and
where the padding of a strided SAME convolution is symbolic (XLA's count then unexplained),
the warning names it.

Pooling (reduce_window_max, _min, _sum: flax's max_pool and avg_pool) where the window
tiles its input (the stride the window, no padding): a reduction over the window's dims,
`max_{KH,KW} fp32[B, H2, KH, W2, KW, C] -> fp32[B, H2, W2, C]`; an overlapping or padded
window is named in the warning, not costed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import sympy

from ..errors import SpecError
from ..lang import source
from ..lang.relations import expression
from .context import floors
from .gspmd import operands, result_text
from .program import Env, Eqn, View, tensor
from .rules import not_costed, rule
from .scans import REDUCE_WHY
from .scatter import grouping

if TYPE_CHECKING:
    from .context import Context


@rule("conv_general_dilated")
def conv(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    p = eqn.params
    x_var, w_var = eqn.invars
    xs, ws, os = (tuple(v.aval.shape) for v in (x_var, w_var, eqn.outvars[0]))
    lhs, rhs, out = p["dimension_numbers"]
    _unclamped(ctx, eqn)
    if p["feature_group_count"] != 1 or p["batch_group_count"] != 1:
        if not _grouped(ctx, eqn, env, depth):
            ctx.said(f"conv_general_dilated: a grouped convolution (feature_group_count {p['feature_group_count']}, "
                     f"batch_group_count {p['batch_group_count']}) is costed only with its operands whole (not "
                     "split over a mesh) and its split sizes numbers the groups divide")
            not_costed(ctx, eqn, env)
        return
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
    _emit(ctx, eqn, depth, over, xt, wt, result_text(ctx.dtype(eqn.outvars[0].aval.dtype), out_labels, out_splits))
    ctx.result(eqn, env, labels=out_labels, splits=out_splits)


def _unclamped(ctx: Context, eqn: Eqn) -> None:
    """An unstrided convolution's output size of a symbolic input is JAX's `max(H - 2, 0)`,
    which symroof cannot write: written `H - 2` instead (a dim is at least 1, so the input
    is taken to be no smaller than the dilated window), and said so."""
    p = eqn.params
    xs, ws, os = (tuple(v.aval.shape) for v in (*eqn.invars, eqn.outvars[0]))
    lhs, rhs, out = p["dimension_numbers"]
    for k, j in enumerate(out[2:]):
        text = "" if isinstance(os[j], int) else floors(ctx.dim_text(os[j]))
        (lo, hi), kernel = p["padding"][k], ws[rhs[2 + k]]
        if "max(" not in text or text in ctx.names or p["window_strides"][k] != 1 \
                or not all(isinstance(v, int) for v in (lo, hi, kernel)):
            continue
        size = (xs[lhs[2 + k]] - 1) * p["lhs_dilation"][k] + 1 + lo + hi - p["rhs_dilation"][k] * (kernel - 1)
        ctx.names[text] = ctx.dim_name(size)
        ctx.said(f"conv_general_dilated: its output size {os[j]} is written {ctx.names[text]}: symroof's dims are "
                 "at least 1, so the input is taken to be no smaller than the (dilated) window")


def _emit(ctx: Context, eqn: Eqn, depth: int, over: tuple[str, ...], xt: source.Tensor, wt: source.Tensor,
          ot: source.Tensor) -> None:
    """The statement written, with XLA's count where it differs (the padding's positions)."""
    p = eqn.params
    xs, ws, os = (tuple(v.aval.shape) for v in (*eqn.invars, eqn.outvars[0]))
    numbers = p["dimension_numbers"]
    word = "conv_transpose" if any(d != 1 for d in p["lhs_dilation"]) else "conv"
    xla = _xla_count(ctx, xs, ws, os, numbers, p)
    counted = None if xla is None else xla - _symroof_count(ctx, xs, ws, os, numbers, word,
                                                            p["feature_group_count"] * p["batch_group_count"])
    if counted is not None and sympy.expand(counted) == 0:  # (simplify takes seconds on the floors)
        counted = None
    ctx.emit(source.Apply(word, over, "prefix", (xt, wt), ot), "conv_general_dilated", depth, counted,
             VALID if counted else "")


def _grouped(ctx: Context, eqn: Eqn, env: Env, depth: int) -> bool:
    """A grouped convolution: feature_group_count G (the input's features G x Cg, a group's
    Cg summed; depthwise is Cg = 1) or batch_group_count G (a grouped convolution's kernel
    gradient: the input's batch G x B' ... each group's outputs summed over its own share),
    the output features G x M. Written with the group as a dim of all three (ops/conv.py),
    the split axes as two each; the tensors read whole (False where they are split over a
    mesh, or a size is not a number that G divides: not costed, named in the warning)."""
    p = eqn.params
    x_var, w_var = eqn.invars
    xs, ws, os = (tuple(v.aval.shape) for v in (x_var, w_var, eqn.outvars[0]))
    lhs, rhs, out = p["dimension_numbers"]
    fg, bg = p["feature_group_count"], p["batch_group_count"]
    g = fg * bg
    at = lhs[1] if bg == 1 else lhs[0]  # the input axis the groups split
    if (fg != 1 and bg != 1) or ctx.out.shard_maps or not all(isinstance(d, int) and d % g == 0
                                                              for d in (xs[at], ws[rhs[0]])):
        return False
    x, w = ctx.view(x_var, env), ctx.view(w_var, env)
    if any(ctx.splits.get(v.array) or len(v.axes) != len(v.dims) or set(v.axes) != set(range(len(v.dims)))
           for v in (x, w)):
        return False  # split over a mesh, broadcast, or a part of an array: not read whole
    dims: list = []
    group = grouping(dims)
    lanes = group(g, True)
    batch = group(xs[lhs[0]] // bg)
    feature = group(ws[rhs[1]])
    f_out = group(ws[rhs[0]] // g)
    spatial = [group(xs[j], True) for j in lhs[2:]]
    window = [group(ws[j], True) for j in rhs[2:]]
    result = [group(os[j], True) for j in out[2:]]
    named = frozenset(i for i in (lanes, feature, f_out, *spatial, *window, *result) if i is not None)
    # the group's own sizes named for what they are (let G = 2, Cg = 3, M = 4), not aliases of literals
    own = {i: name for i, name in ((lanes, "G"), (feature, "Cg" if bg == 1 else "Ci"), (f_out, "M"))
           if i is not None and isinstance(dims[i], int)}
    rest = [i for i in range(len(dims)) if i not in own]
    label: list[str | None] = [None] * len(dims)
    for i, name in zip(rest, ctx.labels([dims[i] for i in rest], named=frozenset(k for k, i in enumerate(rest)
                                                                                if i in named))):
        label[i] = name
    for i, name in own.items():
        fresh = label[i] = ctx.fresh(name)
        ctx.out.lets[fresh] = str(dims[i])

    def written(rank: int, spec: tuple, groups: list, split: int, pair: tuple) -> list[list[str | None]]:
        """The labels of each axis of an array, the split axis's two."""
        by_axis = dict(zip(spec, groups))
        return [[None if q is None else label[q] for q in (pair if j == split else (by_axis[j],))]
                for j in range(rank)]

    # the groups major in each split axis, as XLA splits it: feature j of group j // Cg
    xt = _read(ctx, x, written(len(xs), lhs, [batch, feature, *spatial], at, (lanes, feature if bg == 1 else batch)))
    wt = _read(ctx, w, written(len(ws), rhs, [f_out, feature, *window], rhs[0], (lanes, f_out)))
    ot = tensor(ctx.dtype(eqn.outvars[0].aval.dtype),
                [q for axis in written(len(os), out, [batch, f_out, *result], out[1], (lanes, f_out)) for q in axis])
    _emit(ctx, eqn, depth, tuple(str(label[i]) for i in spatial if i is not None), xt, wt, ot)
    ctx.result(eqn, env)
    return True


def _read(ctx: Context, view: View, labels: list[list[str | None]]) -> source.Tensor:
    """An operand read whole, its axes in its array's order (a transposed view reads them
    in another)."""
    ctx.reads[view.array] += 1
    order = sorted(range(len(labels)), key=lambda j: view.axes[j] or 0)  # whole: every axis an array axis
    return tensor(view.dtype, [q for j in order for q in labels[j]])


VALID = ("XLA counts a convolution's window positions that meet the input, not those on its padding (nor an "
         "input dilation's holes); symroof the dense window, as the hardware multiplies the zeros (a transposed "
         "convolution: each input element's taps, the padding's included)")


def _symroof_count(ctx: Context, xs: tuple, ws: tuple, os: tuple, numbers: tuple, word: str,
                   groups: int) -> sympy.Expr:
    """ops/conv.py's leading count of this convolution, from the traced dims: a group's
    input features per output element (a transposed one's: a group's output features per
    input element)."""
    lhs, rhs, out = numbers
    window = sympy.Mul(*(_size(ctx, ws[j]) for j in rhs[2:]))
    features = _size(ctx, ws[rhs[1]]) if word == "conv" else _size(ctx, ws[rhs[0]]) / groups
    points = sympy.Mul(*(_size(ctx, d) for d in (os if word == "conv" else xs)))
    return 2 * points * window * features


def _xla_count(ctx: Context, xs: tuple, ws: tuple, os: tuple, numbers: tuple, p: dict) -> sympy.Expr | None:
    """XLA's cost analysis's FLOPs of a convolution: per spatial dim, the (output position, tap) pairs that
    fall on the padding, low (a number) and high (a floor expression of the input's size),
    the pairs of an N-d window the product of its dims'. Exact for an input no smaller
    than the window; an input dilation (a gradient's transposed convolution) is counted
    position by position, its sizes concrete (None where they are not: unexplained)."""
    lhs, rhs, out = numbers
    size_of = [_size(ctx, d) for d in xs]
    valid = sympy.Integer(1)
    for k in range(len(lhs) - 2):
        n, kernel = size_of[lhs[2 + k]], ws[rhs[2 + k]]
        s, ldil, d = p["window_strides"][k], p["lhs_dilation"][k], p["rhs_dilation"][k]
        # a strided SAME convolution's padding is symbolic: JAX's floordiv expression of the size
        lo, hi = (_expression(ctx, v) for v in p["padding"][k])
        if not isinstance(kernel, int) or lo is None or hi is None:
            return None
        span = (n - 1) * ldil + 1 + lo + hi - d * (kernel - 1) - 1  # the padded input less the window, less 1
        outs = sympy.floor(span / s) + 1
        if ldil != 1:
            if not (n.is_Integer and lo.is_Integer):
                return None
            count = sum(1 for o in range(int(outs)) for i in range(kernel)
                        if 0 <= o * s + i * d - lo <= (int(n) - 1) * ldil and (o * s + i * d - lo) % ldil == 0)
        else:
            # tap i meets the low padding for the outputs o with o·s + i·d < lo, the high for those
            # past the padded input's end less hi; where the padding's sign is symbolic, a Max
            low = sum(sympy.Max(0, sympy.ceiling((lo - i * d) / s)) for i in range(kernel))
            over = [d * (kernel - 1 - i) - hi for i in range(kernel)]
            high = sum(sympy.floor(span / s) - sympy.floor((span + t) / s) if t.is_negative
                       else sympy.Max(0, sympy.floor(span / s) - sympy.floor((span + t) / s))
                       for t in over if not t.is_nonnegative)
            count = outs * kernel - low - high
        valid *= count
    # per valid pair, each output element times its group's input features (the kernel's;
    # measured: a grouped convolution's count is its dense one's over G)
    return 2 * _size(ctx, os[out[0]]) * _size(ctx, ws[rhs[1]]) * _size(ctx, ws[rhs[0]]) * valid


def _expression(ctx: Context, dim: object) -> sympy.Expr | None:
    """A jaxpr dim that may be 0 or negative (a padding) as a sympy expression of the dims:
    JAX's text read as a let's value is (+ - * / and floor, nothing evaluated); None where
    it holds anything else (mod, max)."""
    if isinstance(dim, int):
        return sympy.Integer(dim)
    try:
        return expression(floors(ctx.dim_text(dim)))
    except SpecError:
        return None


def _size(ctx: Context, dim: object) -> sympy.Expr:
    return sympy.Integer(dim) if isinstance(dim, int) else ctx.size([ctx.dim_name(dim)])


POOLS = {"reduce_window_max": "max", "reduce_window_min": "min", "reduce_window_sum": "sum"}


@rule(*POOLS)
def pool(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """A pooling window that tiles its input (flax's max_pool and avg_pool with the stride
    the window, no padding): a reduction over the window's dims of the input read as
    [B, H2, KH, W2, KW, C] (`max_{KH,KW}`), exact in FLOPs (T per output; XLA T - 1) and
    in bytes (the rows a VALID window leaves are not read). An overlapping, padded or
    dilated window, or an input split over a mesh: not costed, named in the warning."""
    p, name = eqn.params, eqn.primitive.name
    var = eqn.invars[0]
    xs, os = tuple(var.aval.shape), tuple(eqn.outvars[0].aval.shape)
    x = ctx.view(var, env)
    window = p["window_dimensions"]
    if tuple(p["window_strides"]) != tuple(window) or any(pad != (0, 0) for pad in p["padding"]) \
            or any(d != 1 for d in (*p["base_dilation"], *p["window_dilation"])) or ctx.out.shard_maps \
            or ctx.splits.get(x.array) or len(x.axes) != len(x.dims) or set(x.axes) != set(range(len(x.dims))):
        ctx.said(f"{name}: a pooling window is costed only where it tiles its input (the stride the window, no "
                 "padding or dilation) and the input is whole (not split over a mesh)")
        return not_costed(ctx, eqn, env)
    dims: list = []
    group = grouping(dims)
    kept = [group(os[j]) for j in range(len(xs))]
    taps = [group(k, True) if k != 1 else None for k in window]
    named = frozenset(i for i in taps if i is not None)
    label = list(ctx.labels(dims, named=named))
    per_axis = [[None if i is None else label[i] for i in ((kept[j], taps[j]) if taps[j] is not None else (kept[j],))]
                for j in range(len(xs))]
    out_labels = [None if i is None else label[i] for i in kept]
    over = tuple(str(label[i]) for i in taps if i is not None)
    outputs = ctx.size([lb for lb in out_labels if lb is not None])
    ctx.emit(source.Apply(POOLS[name], over, "prefix", (_read(ctx, x, per_axis),),
                          tensor(ctx.dtype(eqn.outvars[0].aval.dtype), out_labels)),
             name, depth, -outputs, REDUCE_WHY)
    ctx.result(eqn, env)
