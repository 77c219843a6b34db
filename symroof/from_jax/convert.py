"""A jaxpr as a symroof program: one statement per equation that computes, in the
notation a person would write, with the jaxpr's symbolic dims as dim names. Each
primitive's rule is in the table (rules.py); this module holds the arithmetic, cast and
layout families' rules, and imports every other family's, so that the table is whole.

    c:bf16[B,F] = dot_general[(([1], [0]), ([], []))] a b   ->   bf16[B, D] *_D bf16[D, F] -> bf16[B, F]

How each family is written (and what XLA's lowered module counts for it, which the
cross-check in importer.py relies on; benchmarks/xla_conventions.md):

* dot_general: a contraction, its contracted dims named (`*_{D}`), batch dims shared.
* elementwise arithmetic, comparisons, selects, shifts, unary functions: symroof's
  elementwise, unary and select kinds, one FLOP (or one transcendental) per element as XLA
  counts; `integer_pow` as the multiplies XLA emits for it (x^3: two); the functions XLA
  expands into polynomials (erfc, lgamma, digamma, erf_inv, asin, sinh, ...) at the
  FLOPs and transcendentals XLA counts for its expansion (ops/unary.py), a 16-bit float's
  two converts to fp32 and back explained.
* reduce_sum, reduce_max, reduce_min, reduce_prod, reduce_and, reduce_or, argmax, argmin:
  `sum_D`, `max_D`, `min_D`, `prod_D`, `all_D`, `any_D`, `argmax_D fp32[B, D] -> int32[B]`;
  cumsum, cumprod, cummax, cummin, cumlogsumexp: `cumsum_T fp32[B, T] -> fp32[B, T]`
  (scans.py).
* convert_element_type, and bitcast_convert_type between dtypes of one width: a cast
  (`fp32[B, D] -> bf16[B, D]`), bytes only.
* gathers, slices, concatenation, updates: data.py.
* shard_map and its collectives: shard.py (a `mesh` line, splits as subscripts).
* jit's in/out shardings and sharding constraints: gspmd.py (the splits carried
  through each statement as GSPMD carries them; symroof inserts the collectives).
* broadcast_in_dim, reshape, transpose, squeeze, expand_dims, rev, stop_gradient, copy: no
  statement. They change how an array is indexed, not its data (XLA's lowered module
  counts a transpose or reshape as a layout change, free); the next statement reads the
  array it came from, broadcasting by dim name (`bf16[B, D] + bf16[D]`).
* pjit, closed calls, custom_jvp/vjp calls and remat: their body, inline.
* scan: `repeat LENGTH { body }`, the body's slices of the scanned arrays as its operands;
  a while loop with a trip count known from its condition (`fori_loop`) the same, any
  other `repeat W1 {...}` with a symbol for the unknown trip count, and a warning.
* cond and switch: the branch that costs the most in every count (cond.py), as XLA
  counts a conditional; not costed where no branch does.
* a PRNG key is its uint32 words (random_wrap, random_unwrap: no statement).
* conv_general_dilated: conv (conv.py), any layout, grouped, its gradients transposed;
  a pooling window that tiles its input, a reduction over the window's dims.
* anything else (sort, random_bits, ppermute, an overlapping reduce_window, ...):
  not costed, named in a warning with its count. Never dropped silently.

Dims: a symbolic dim is its own name (B); an integer its literal (4096); a composite dim
(B*T, from a reshape) a name of its own with a `let` line (`let BT = B*T`). Where one
statement has two axes of the same size (a square weight, D x D), the second gets an
alias (`let D2 = D`), so that each axis has its own label and the contraction is the
jaxpr's, not a guess; an array is read with the labels it was written with wherever they
fit (context.py), so that a `fused { ... }` block around its writer and its reader
keeps it on chip.

This module reads jaxprs and never imports JAX itself: importer.py traces.
"""

from __future__ import annotations

from dataclasses import replace

from .. import dtypes
from ..lang import source
from . import cond, conv, data, loops, scans, scatter, shard  # noqa: F401 (each registers its family's rules)
from .context import Context
from .gspmd import operands, read_shardings, reshaped, result_text
from .program import Env, Eqn, View, split_label, union
from .rules import BINARY, CONSTANT, FREE, UNARY, not_costed, rule, walk
from .xla import constant_counted, convert_folded, elementwise_folded

# computed in fp32 where the operand is a 16-bit float: XLA counts a convert in and out
UPCAST = ("erfc", "erf_inv", "lgamma", "digamma", "sinh", "cosh")
UPCAST_WHY = ("XLA computes erfc, erf_inv, lgamma, digamma, sinh and cosh of a 16-bit float in fp32: a convert in "
              "and out, 2 FLOPs per element")
CONVERT_WHY = "XLA counts a convert as 1 FLOP per element"
CONVERT_BROADCAST_WHY = ("XLA counts a convert of a broadcast array as 1 FLOP per element of the broadcast; symroof "
                         "casts the array before it is broadcast, bytes only")
DOT_NO_SUM_WHY = ("XLA counts a dot with no summed dim (an einsum like 'bnt,n->bnt') as a dot, 2 FLOPs per "
                  "product (a multiply and an add); symroof writes it as an elementwise product, 1 FLOP per element")
# no data moved: the next statement reads the array these index differently
LAYOUT = ("broadcast_in_dim", "reshape", "transpose", "squeeze", "expand_dims", "stop_gradient", "copy", "copy_p",
          "optimization_barrier", "reduce_precision", "pvary", "rev", "random_wrap", "random_unwrap")
INLINE = {"pjit": "jaxpr", "jit": "jaxpr", "closed_call": "call_jaxpr", "core_call": "call_jaxpr",
          "custom_jvp_call": "call_jaxpr", "custom_vjp_call": "call_jaxpr", "custom_vjp_call_jaxpr": "fun_jaxpr",
          "remat": "jaxpr", "remat2": "jaxpr", "checkpoint": "jaxpr"}


@rule(CONSTANT, *FREE)
def constant(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """No statement: iota's array is made at run time; a dim's value (and arithmetic on
    literals and such values) is a Python number once the sizes are concrete. (A
    reduction or a scan of constants is computed: XLA folds elementwise ops on
    constants, not those.)"""
    name = eqn.primitive.name
    for v in eqn.outvars:
        env[v] = View.whole(ctx.dtype(v.aval.dtype), tuple(v.aval.shape), const=name != "iota")
    ctx.out.layout["constant" if name not in FREE else name] += 1
    constant_counted(ctx, eqn)


@rule(*LAYOUT, on_constants=True)
def layout(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    name, x = eqn.primitive.name, ctx.view(eqn.invars[0], env)
    out = eqn.outvars[0]
    shape_in, shape_out = tuple(eqn.invars[0].aval.shape), tuple(out.aval.shape)
    if name == "broadcast_in_dim":
        axes: list[int | None] = [None] * len(shape_out)
        for k, j in enumerate(eqn.params["broadcast_dimensions"]):
            if shape_in[k] == shape_out[j]:  # kept, not a size-1 axis stretched
                axes[j] = x.axes[k]
        env[out] = replace(x, axes=tuple(axes))
    elif name == "transpose":
        env[out] = replace(x, axes=tuple(x.axes[k] for k in eqn.params["permutation"]))
    elif name in ("reshape", "squeeze", "expand_dims") and _drop_ones(shape_in) == _drop_ones(shape_out):
        kept = iter([a for a, d in zip(x.axes, shape_in) if d != 1])
        env[out] = replace(x, axes=tuple(None if d == 1 else next(kept) for d in shape_out))
    elif name == "reshape":  # merges or splits dims: read as an array of the new shape
        env[out] = View.whole(x.dtype, shape_out, x.const, x.unreduced)
        reshaped(ctx, x, env[out], shape_in, shape_out)
    else:  # stop_gradient, copy, optimization_barrier, reduce_precision, rev (read backwards), a PRNG
        # key's wrapping (its words as a key): the same array
        for i, v in enumerate(eqn.outvars):
            env[v] = ctx.view(eqn.invars[i], env)
    ctx.out.layout[name] += 1


@rule(*INLINE, on_constants=True)
def inline(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    inner = eqn.params[INLINE[eqn.primitive.name]]
    jaxpr = getattr(inner, "jaxpr", inner)  # ClosedJaxpr or Jaxpr
    for var, value in zip(jaxpr.constvars, getattr(inner, "consts", ())):
        if var not in env:
            env[var] = ctx.constant(var, value)
    inner_env = {**{v: env[v] for v in jaxpr.constvars if v in env},
                 **{iv: ctx.view(ov, env) for iv, ov in zip(jaxpr.invars, eqn.invars)}}
    read_shardings(ctx, eqn, jaxpr, inner_env, "in_shardings", depth)  # jit's, where given
    walk(ctx, jaxpr, inner_env, depth)
    read_shardings(ctx, eqn, jaxpr, inner_env, "out_shardings", depth)
    for ov, iv in zip(eqn.outvars, jaxpr.outvars):
        env[ov] = ctx.view(iv, inner_env)


@rule(*BINARY, *UNARY)
def arithmetic(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    name = eqn.primitive.name
    elementwise(ctx, eqn, env, depth, BINARY[name] if name in BINARY else UNARY[name])


def elementwise(ctx: Context, eqn: Eqn, env: Env, depth: int, word: str) -> None:
    """`word` of the operands, elementwise (a unary function's count is ops/unary.py's, a
    binary op's ops/elementwise.py's); what XLA folds of it marked (xla.py)."""
    at = len(ctx.out.statements)
    out = eqn.outvars[0]
    shape = tuple(out.aval.shape)
    views = [ctx.view(var, env) for var in eqn.invars]
    alike = [len(var.aval.shape) == len(shape) for var in eqn.invars]  # the rest: scalars
    names, labels = ctx.axis_labels(shape, reads=tuple(v for v, a in zip(views, alike) if a))
    # an operand's axis of size 1 where the result's is not is broadcast: not read, no label
    axes_of = [[j if a and var.aval.shape[j] == shape[j] else None for j in range(len(v.axes))]
               for var, v, a in zip(eqn.invars, views, alike)]
    reads = [(v, [labels[j] if j is not None else None for j in axes], axes) for v, axes in zip(views, axes_of)]
    _widen(ctx, reads, views, shape, labels, eqn)
    texts, splits = operands(ctx, reads, len(shape), depth, what=eqn.primitive.name)
    result = result_text(ctx.dtype(out.aval.dtype), labels, splits)
    item: source.Contraction | source.Apply
    if word in ("+", "-", "*", "/"):
        item = source.Contraction(tuple(texts), (source.Op(word),) * (len(texts) - 1), result)
    else:
        item = source.Apply(word, (), "call", tuple(texts), result)
    if eqn.primitive.name in UPCAST and dtypes.DTYPES[ctx.dtype(out.aval.dtype)].bytes == 2:
        ctx.emit(item, eqn.primitive.name, depth, 2 * ctx.size(names), UPCAST_WHY)
    else:
        ctx.emit(item, eqn.primitive.name, depth)
    ctx.result(eqn, env, labels=labels, splits=splits)
    elementwise_folded(ctx, eqn, at)


def _widen(ctx: Context, reads: list, views: list[View], shape: tuple, labels: list[str | None], eqn: Eqn) -> None:
    """Where a result axis comes only from a broadcast (`x[D] * 2.0 -> [B, D]`, a mask
    `and`ed with a broadcast True), one operand is read as the broadcast array, at the
    result's shape: symroof's elementwise takes each result dim from an operand, and
    XLA's lowered module materializes the broadcast too. A constant is widened first
    (nothing is read twice), else the operand that carries the most axes; the bytes it
    counts for that operand are an upper bound, said in a note."""
    carried = {j for v, _, at in reads for j, k in zip(at, v.axes) if j is not None and k is not None}
    missing = [j for j in range(len(shape)) if j not in carried and labels[j] is not None]
    if not missing:
        return
    k = max(range(len(reads)), key=lambda i: (views[i].const, sum(k is not None for k in views[i].axes), -i))
    wide = View.whole(views[k].dtype, shape, const=views[k].const)
    reads[k] = (wide, list(labels), list(range(len(shape))))
    ctx.said(f"{eqn.primitive.name}: a result dim ({', '.join(str(labels[j]) for j in missing)}) comes only "
             f"from a broadcast; one operand is read at the result's shape, so its bytes are an upper bound "
             f"(a fused broadcast reads less)")


@rule("integer_pow")
def integer_pow(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """x^y as XLA lowers it: squarings and multiplies (x^3: two), and a divide for y < 0."""
    y = eqn.params["y"]
    if y in (0, 1):
        ctx.out.layout["integer_pow"] += 1
        env[eqn.outvars[0]] = View.whole(ctx.dtype(eqn.outvars[0].aval.dtype), tuple(eqn.outvars[0].aval.shape)) \
            if y == 0 else ctx.view(eqn.invars[0], env)
        return
    multiplies = abs(y).bit_length() - 1 + bin(abs(y)).count("1") - 1
    shape, x = tuple(eqn.outvars[0].aval.shape), ctx.view(eqn.invars[0], env)
    _, labels = ctx.axis_labels(shape, reads=(x,))
    (first,), splits = operands(ctx, [(x, labels, list(range(len(shape))))], len(shape), depth)
    t = result_text(ctx.dtype(eqn.outvars[0].aval.dtype), labels, splits)
    times = source.Op("*")
    for k in range(multiplies):
        ctx.emit(source.Contraction((first, first) if k == 0 else (t, t), (times,), t), "integer_pow", depth)
    if y < 0:
        ctx.emit(source.Apply("recip", (), "call", (t,), t), "integer_pow", depth)
    ctx.result(eqn, env, labels=labels, splits=splits)


@rule("select_n")
def select_n(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    if len(eqn.invars) != 3:
        return not_costed(ctx, eqn, env)
    elementwise(ctx, eqn, env, depth, "select")


@rule("clamp")
def clamp(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    elementwise(ctx, eqn, env, depth, "clamp")


@rule("bitcast_convert_type")
def bitcast_convert_type(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """The same bits read as another dtype of the same width: a cast, bytes only (XLA
    counts it 1 FLOP per element, as a convert); between widths, the shape changes too:
    not costed."""
    if tuple(eqn.invars[0].aval.shape) != tuple(eqn.outvars[0].aval.shape):
        return not_costed(ctx, eqn, env)
    convert_element_type(ctx, eqn, env, depth)


@rule("convert_element_type")
def convert_element_type(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    at = len(ctx.out.statements)
    _convert(ctx, eqn, env, depth)
    convert_folded(ctx, eqn, at)


def _convert(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    var = eqn.invars[0]
    if type(var).__name__ == "Literal" or not var.aval.shape:
        ctx.out.layout["convert_element_type"] += 1  # a scalar constant: folded
        ctx.result(eqn, env)
        return
    shape, x = tuple(eqn.outvars[0].aval.shape), ctx.view(var, env)
    names, labels = ctx.axis_labels(shape, reads=(x,))
    (operand,), splits = operands(ctx, [(x, labels, list(range(len(shape))))], len(shape), depth)
    kept = [j for j in range(len(shape)) if x.axes[j] is not None or labels[j] is None]
    dtype = ctx.dtype(eqn.outvars[0].aval.dtype)
    if len(kept) == len(shape):
        ctx.emit(source.Contraction((operand,), (), result_text(dtype, labels, splits)), eqn.primitive.name, depth,
                 ctx.size(names), CONVERT_WHY)
        ctx.result(eqn, env, labels=labels, splits=splits)
        return
    # a cast of a broadcast (a causal mask's bool[T, T2] broadcast to [B, 1, T, T2], then
    # cast): the array is cast as it is, and its result read broadcast, as the operand was
    # (XLA's lowered module casts every element of the broadcast: 1 FLOP each)
    sub = [labels[j] for j in kept]
    ctx.emit(source.Contraction((operand,), (), result_text(dtype, sub, [splits[j] for j in kept])),
             eqn.primitive.name, depth, ctx.size(names), CONVERT_BROADCAST_WHY)
    made = View.whole(dtype, tuple(shape[j] for j in kept), unreduced=x.unreduced)
    ctx.remember(made, sub, [splits[j] for j in kept])
    env[eqn.outvars[0]] = replace(made, axes=tuple(kept.index(j) if j in kept else None for j in range(len(shape))))


@rule("dot_general")
def dot_general(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lhs, rhs = eqn.invars
    ls, rs = tuple(lhs.aval.shape), tuple(rhs.aval.shape)
    lfree = [j for j in range(len(ls)) if j not in lc and j not in lb]
    rfree = [j for j in range(len(rs)) if j not in rc and j not in rb]
    # one label per distinct axis: batch pairs, the free axes, contracted pairs
    # (the contracted dims named before the free ones: x[B, D] @ w[D, D] keeps D for the
    # summed dim and calls w's free one D2)
    groups = [("b", j, k) for j, k in zip(lb, rb)] + [("c", j, k) for j, k in zip(lc, rc)] + \
        [("l", j, None) for j in lfree] + [("r", None, k) for k in rfree]
    dims = [ls[j] if j is not None else rs[k] for _, j, k in groups]
    # a summed axis of size 1 stays: XLA counts 2·M·N·K with K = 1, not an outer product
    kept = [i for i, d in enumerate(dims) if d != 1 or groups[i][0] == "c"]
    at = {i: n for n, i in enumerate(kept)}
    views = (ctx.view(lhs, env), ctx.view(rhs, env))
    sides: tuple[list, list] = ([None] * len(ls), [None] * len(rs))  # each operand axis's group
    for i, (_, j, k) in enumerate(groups):
        if j is not None:
            sides[0][j] = i
        if k is not None:
            sides[1][k] = i
    # each operand read with the labels its array was written with, where they fit
    prefer = ctx.prefer([(v, [at.get(i) for i in side]) for v, side in zip(views, sides)])
    names = ctx.labels([dims[i] for i in kept], frozenset(n for n, i in enumerate(kept) if groups[i][0] == "c"),
                       prefer)
    label = {i: n for i, n in zip(kept, names)}
    summed = [label[i] for i, g in enumerate(groups) if g[0] == "c" and i in label]
    result = [label.get(i) for i, g in enumerate(groups) if g[0] != "c"]
    op = source.Op("*", tuple(split_label(label)[0] for label in summed))
    # outside shard_map, a contracted dim split alike on both sides is summed by symroof's
    # own AllReduce (the result is written without {U_X}); inside, the body's psum sums it
    contracted = frozenset(i for i, g in enumerate(groups) if g[0] == "c")
    reads = [(v, [label.get(i) for i in side], side) for v, side in zip(views, sides)]
    (left, right), splits = operands(ctx, reads, len(groups), depth, contracted, summed, "dot_general")
    out_splits = [splits[i] for i, g in enumerate(groups) if g[0] != "c"]
    # inside shard_map, a contracted dim split over mesh axes leaves partial sums over
    # them: written {U_X}, so that symroof inserts no AllReduce (the body's psum is one)
    unreduced = union(*(split_label(label)[1] for label in summed),
                      *(ctx.view(v, env).unreduced for v in (lhs, rhs)))
    item = source.Contraction((left, right), (op,),
                              result_text(ctx.dtype(eqn.outvars[0].aval.dtype), result, out_splits, unreduced))
    if summed:
        ctx.emit(item, "dot_general", depth)
    else:  # no summed dim (a head mask, a norm's scale, an outer product): symroof's elementwise product
        ctx.emit(item, "dot_general", depth, ctx.size([r for r in result if r is not None]), DOT_NO_SUM_WHY)
    ctx.result(eqn, env, unreduced=unreduced, labels=result, splits=out_splits)


def _drop_ones(shape: tuple) -> tuple:
    return tuple(d for d in shape if d != 1)
