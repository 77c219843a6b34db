"""Reductions and scans (their rules): reduce_sum, reduce_max,
reduce_min, argmax and argmin over named dims, and the cumulative ops along one.

* reduce_sum, reduce_max, reduce_min, reduce_prod, reduce_and, reduce_or: `sum_D`,
  `max_D`, `min_D`, `prod_D`, `all_D`, `any_D`. XLA counts T - 1 combines per output,
  symroof T (its leading count).
* argmax, argmin: `argmax_D fp32[B, D] -> int32[B]`, one compare per term (ops/reduce.py).
  JAX lowers each to one reduce of (value, index) pairs whose comparator XLA counts as 9
  ops (4 compares: greater, NaN, equal, lower index; 2 ors and an and; 2 selects): 9(T - 1)
  per output, where symroof counts T.
* cumsum, cumprod, cummax, cummin, cumlogsumexp (reverse too): `cumsum_T x -> y`, one
  combine per element (ops/cumulative.py). JAX lowers each to a reduce_window over the
  whole prefix (a window of T, padded by T - 1), which XLA counts as T - 1 combines for
  every element: c·n·(T - 1) against symroof's c·n, c the combine's FLOPs (and, for
  cumlogsumexp's logaddexp, its 2 transcendentals).

A reduction or scan of a constant (`jnp.cumsum(jnp.ones(T))`) is a statement: XLA folds
elementwise ops on constants before it counts, not a reduce or a reduce_window. An
operand dim that only a broadcast carries is read as the broadcast array (XLA's lowered
module materializes it too; its bytes an upper bound, said).

Split dims. Outside shard_map (jit's shardings): a sum's or max's dim split over a mesh
axis leaves partial results, which symroof's engine AllReduces; an argmax's, each row's
max and index AllReduced (GSPMD all-gathers each chip's pair and reduces again: said). A
scan's dim split is gathered first (an AllGather written out), as GSPMD does; the result
is computed whole on each chip and sliced back to the split the input had. Inside
shard_map the body's reductions are local: over a dim it holds split, a sum's or max's
results are partial, written {U_X} (its psum sums them, not symroof); an argmax's local
index, and a scan over such a dim, have no symroof form: not costed, and said.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..lang import source
from ..ops import cumulative as ops_cumulative
from .gspmd import collective_move, operands, result_text
from .program import Env, Eqn, View, split_label, union
from .rules import not_costed, rule

if TYPE_CHECKING:
    from .context import Context

REDUCE = {"reduce_sum": "sum", "reduce_max": "max", "reduce_min": "min", "reduce_prod": "prod", "reduce_and": "all",
          "reduce_or": "any", "argmax": "argmax", "argmin": "argmin"}
# a cumulative op's combine, (FLOPs, transcendentals), as symroof counts it per element
# (ops/cumulative.py's table) and XLA in the reduce_window JAX lowers it to, T - 1 per element
COMBINE = ops_cumulative.FUNCTIONS
ARG_OPS = 9  # argmax's comparator, as XLA counts it

REDUCE_WHY = "XLA counts T - 1 combines per output, symroof T"
ARG_WHY = ("XLA counts argmax/argmin as a reduce of (value, index) pairs, 9 ops per combine (compares, and/or, "
           "2 selects) and T - 1 combines per output; symroof one compare per term, T")
SCAN_WHY = ("XLA counts a cumulative op as JAX lowers it, a reduce_window over the whole prefix: T - 1 combines "
            "for every element; symroof one per element (a sequential scan)")


@rule(*REDUCE, on_constants=True)
def reduce(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    name = eqn.primitive.name
    var = eqn.invars[0]
    shape, x = tuple(var.aval.shape), ctx.view(var, env)
    reduced = set(eqn.params["axes"])
    names, labels = ctx.axis_labels(shape, frozenset(reduced), reads=(x,))
    over = [labels[j] for j in sorted(reduced) if labels[j] is not None]
    kept = [labels[j] for j in range(len(shape)) if j not in reduced and labels[j] is not None]
    arg = name in ("argmax", "argmin")
    if not over:  # only size-1 axes: nothing to reduce (an argmax's index: 0, an array of its own)
        out = eqn.outvars[0]
        # the input itself, read without the reduced axes (a sum over [B, T, 1]'s last: [B, T])
        env[out] = View.whole(ctx.dtype(out.aval.dtype), tuple(out.aval.shape)) if arg else \
            replace(x, axes=tuple(k for j, k in enumerate(x.axes) if j not in reduced))
        ctx.out.layout[name] += 1
        return
    x = ctx.whole(var, labels, env, name)
    split_over = union(*(split_label(label)[1] for label in over))  # inside shard_map: the body's splits
    if arg and split_over:
        ctx.said(f"{name} over a dim shard_map's body holds split ({', '.join(over)}): its local index has "
                 "no symroof form (not costed)")
        return not_costed(ctx, eqn, env)
    # outside shard_map, a reduced dim split over a mesh axis leaves partial results:
    # symroof's engine AllReduces them (an argmax's max and index, per row)
    (operand,), splits = operands(ctx, [(x, labels, list(range(len(shape))))], len(shape), depth,
                                       frozenset(reduced))
    split = ctx.splits.get(x.array, ())
    if arg and not ctx.out.shard_maps and any(k is not None and k < len(split) and split[k]
                                              for k in (x.axes[j] for j in reduced)):
        ctx.said(f"{name} over a dim split by jit's shardings: symroof AllReduces each row's max and its "
                 "index (2 fp32 values); GSPMD all-gathers every chip's pair and reduces them again")
    out_labels = [labels[j] for j in range(len(shape)) if j not in reduced]
    out_splits = [splits[j] for j in range(len(shape)) if j not in reduced]
    unreduced = union(x.unreduced, split_over)  # inside shard_map: partial results, the body's to reduce
    out = result_text(ctx.dtype(eqn.outvars[0].aval.dtype), out_labels, out_splits, unreduced)
    n, rows = ctx.size(names), ctx.size(kept)  # type: ignore[arg-type]
    xla, why = (ARG_OPS * (n - rows) - n, ARG_WHY) if arg else (-rows, REDUCE_WHY)
    ctx.emit(source.Apply(REDUCE[name], subscript(over), "prefix", (operand,), out), name, depth, xla, why)
    ctx.result(eqn, env, unreduced=unreduced, labels=out_labels, splits=out_splits)


@rule(*COMBINE, on_constants=True)
def cumulative(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    name, var, axis = eqn.primitive.name, eqn.invars[0], eqn.params["axis"]
    shape, x = tuple(var.aval.shape), ctx.view(var, env)
    names, labels = ctx.axis_labels(shape, frozenset({axis}), reads=(x,))
    what = name + (" (reverse)" if eqn.params["reverse"] else "")
    if labels[axis] is None:  # along a size-1 axis: the input itself
        env[eqn.outvars[0]] = x
        ctx.out.layout[name] += 1
        return
    if split_label(labels[axis])[1]:
        ctx.said(f"{name} along a dim shard_map's body holds split ({labels[axis]}): a prefix of each chip's "
                 "own part has no symroof form (not costed)")
        return not_costed(ctx, eqn, env)
    x = ctx.whole(var, labels, env, name)
    split = ctx.splits.get(x.array, ()) if not ctx.out.shard_maps else ()
    k = x.axes[axis]
    had = split[k] if k is not None and k < len(split) else ""
    if had:  # each element needs every one before it: GSPMD gathers the dim first, as written here
        after = tuple("" if d == k else s for d, s in enumerate(split))
        x = collective_move(ctx, x, labels, after, "AllGather", (had,), depth, name)
        ctx.said(f"{name} along a dim split by jit's shardings: gathered first (an AllGather, written out), "
                 "as GSPMD does; each chip computes the whole scan and keeps its part")
    (operand,), splits = operands(ctx, [(x, labels, list(range(len(shape))))], len(shape), depth, what=name)
    splits[axis] = had  # computed whole, then sliced back to the input's split (symroof's engine: free)
    out = result_text(ctx.dtype(eqn.outvars[0].aval.dtype), labels, splits)
    flops, transcendentals = COMBINE[name]
    n, t = ctx.size(names), ctx.size([labels[axis]])
    ctx.emit(source.Apply(name, subscript([labels[axis]]), "prefix", (operand,), out), what, depth, flops * n * (t - 2),
             SCAN_WHY, transcendentals * n * (t - 2))
    ctx.result(eqn, env, labels=labels, splits=splits)


def subscript(labels: list) -> tuple[str, ...]:
    """A subscript's dims by name (a split dim by its name: D_X is D)."""
    return tuple(split_label(label)[0] for label in labels)
