"""Scatters and pads (their rules), and how a gather's or a scatter's axes pair up
(`indexed`, which data.py's gather uses too).

* scatter, scatter-add, scatter-mul, scatter-min, scatter-max (`x.at[ids].set(u)`,
  `.add(u)`, ...; the gradient of `table[ids]`, `jnp.take` or `take_along_axis`):
  symroof's scatter kind (ops/scatter.py), in place,
  `scatter_add bf16[V, D], int32[B, T], bf16[B, T, D] -> bf16[V, D]`; where the array
  scattered into is a constant (`jnp.zeros`, as a gradient's is) the two-operand form,
  `scatter_add int32[B, T], bf16[B, T, D] -> bf16[V, D]`: a new array, written whole once
  besides the rows (XLA's lowered module writes the broadcast zeros too). One FLOP per
  update element for the combines, none for set (XLA's count); in mode "clip" XLA clamps
  each index, 1 FLOP more each, explained in the cross-check.
* pad (`jnp.pad`, `lax.pad`; low, high, interior, negative): `pad fp32[B, T] -> fp32[B, T3]`,
  each padded dim a name of its own (`let T3 = T+3`; a padded size-1 axis written `1`);
  no FLOPs, the operand read and the result written once.

A scatter of one window of the updates' whole shape into a constant (set; add into
zeros: the gradient of `x[:, :-1]` where T is symbolic, at concrete sizes a pad) is
the pad of the updates: `pad fp32[B, T1] -> fp32[B, T]`, no FLOPs, as XLA counts the pad.
Otherwise only one indexed axis, an index vector of length 1, and whole windows along the other
axes (every element of a row, not a part of one) are written; any other gather or
scatter is not costed, and said so. An operand that is a broadcast (a gradient's ones)
is read at its full shape, as XLA's lowered module materializes it, and said.

On a mesh: outside shard_map, jit's splits are carried as for any statement (a constant
operand laid out as the operands beside it, as GSPMD lays it out); a scatter whose index
dims are split leaves each chip part of the rows, all-reduced by symroof's engine, and a
pad of a split dim is gathered first by the engine, where GSPMD pads the shards in place
(said in a warning). Inside shard_map, a gather from a table split along its indexed dim
(or a scatter of split index dims) leaves partial sums, written `{U_X}` as a
contraction's; a chip pads its own shard, the shard's dim a name of its own (`let TX = T/2`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import sympy

from ..lang import source
from .gspmd import operands, result_text
from .program import Env, Eqn, same, split_label, union
from .rules import not_costed, rule

if TYPE_CHECKING:
    from .context import Context

# what XLA's lowering adds to a gather or a scatter, by mode (jax.lax.GatherScatterMode)
FILL = ("XLA masks a gather's out-of-bounds indices (mode fill: jnp.take, take_along_axis): 3 FLOPs per index "
        "and a select per element")
CLIP = "XLA clamps a scatter's indices (mode clip): 1 FLOP per index"


def grouping(dims: list) -> Callable[..., int | None]:
    """The group (a distinct axis of one statement, its dim appended to `dims`) a new axis
    is: None for an axis of size 1 (unlabelled), unless it must be written."""
    def group(dim: Any, written: bool = False) -> int | None:
        if same(dim, 1) and not written:
            return None
        dims.append(dim)
        return len(dims) - 1
    return group


def indexed(array: tuple, ids: tuple, result: tuple, windows: tuple, picked: tuple, collapsed: tuple,
            batch: tuple, ids_batch: tuple, sizes: tuple | None) -> tuple[list, list, list, list] | None:
    """How a gather's (or a scatter's) axes pair up, as the groups (distinct axes) of one
    statement: the array indexed along `picked` (one axis), the indices `ids` (their last
    axis the index vector), the gathered result (or the scatter's updates) with the
    array's window axes (those neither `collapsed` nor batch axes) at `windows`, in order,
    and the indices' other axes elsewhere, in order; `batch` the array's axes paired with
    the indices' `ids_batch`; `sizes` a gather's slice sizes (None: a scatter's, the
    updates' window axes). Returns the group of each axis of the array, of the indices and
    of the result (None: an axis of size 1, unlabelled), and each group's dim; None where
    it is not one of these (several indexed axes, a part of a row)."""
    if len(picked) != 1 or not ids or not same(ids[-1], 1) or len(batch) != len(ids_batch):
        return None
    a = picked[0]
    kept = [j for j in range(len(array)) if j not in collapsed and j not in batch]
    if a in batch or not set(collapsed) <= {a} or len(kept) != len(windows) \
            or len(result) != len(windows) + len(ids) - 1:
        return None
    window = dict(zip(kept, windows))  # array axis -> its result axis
    for j in kept:  # each window whole (every element of a row), the picked axis's of size 1
        if not same(sizes[j] if sizes is not None else result[window[j]], 1 if j == a else array[j]):
            return None
    dims: list = []
    group = grouping(dims)  # a size-1 axis unlabelled, but the picked one
    ids_groups = [group(ids[i]) for i in range(len(ids) - 1)] + [None]
    pair = dict(zip(batch, ids_batch))
    array_groups = [ids_groups[pair[j]] if j in pair else group(array[j], j == a) for j in range(len(array))]
    inverse = {p: j for j, p in window.items()}
    others = iter(range(len(ids) - 1))
    result_groups = [(None if inverse[p] == a else array_groups[inverse[p]]) if p in inverse
                     else ids_groups[next(others)] for p in range(len(result))]
    return array_groups, ids_groups, result_groups, dims


# JAX names the combining scatters with a dash (scatter-add), or did with an underscore
@rule("scatter", "scatter-add", "scatter-mul", "scatter-min", "scatter-max", "scatter_add", "scatter_mul",
      "scatter_min", "scatter_max")


def scatter(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """Updates written into an array at indices, set or combined (the word from the
    primitive: scatter-add is scatter_add)."""
    word = eqn.primitive.name.replace("-", "_")
    operand, ids, updates = eqn.invars
    d = eqn.params["dimension_numbers"]
    found = indexed(tuple(operand.aval.shape), tuple(ids.aval.shape), tuple(updates.aval.shape),
                    tuple(d.update_window_dims), tuple(d.scatter_dims_to_operand_dims),
                    tuple(d.inserted_window_dims), tuple(getattr(d, "operand_batching_dims", ())),
                    tuple(getattr(d, "scatter_indices_batching_dims", ())), None)
    if found is None:
        if _window(eqn) and ctx.view(operand, env).const and (word == "scatter" or ctx.view(operand, env).zero):
            return padded(ctx, eqn, env, depth, updates, eqn.primitive.name)
        return not_costed(ctx, eqn, env)
    array_groups, ids_groups, update_groups, dims = found
    fresh = ctx.view(operand, env).const  # into a new array (jnp.zeros): the two-operand form
    given = list(zip(eqn.invars, (array_groups, ids_groups, update_groups)))[1 if fresh else 0:]
    reads = [(ctx.whole(v, g, env, word), g) for v, g in given]
    index = frozenset(g for g in ids_groups if g is not None and g not in array_groups)
    clip = None
    if getattr(eqn.params.get("mode"), "name", "") == "CLIP":
        def clip(names: list) -> sympy.Expr:
            return ctx.size([names[g] for g in ids_groups if g is not None])
    indexing(ctx, eqn, env, depth, word, reads, dims, index, array_groups, clip, CLIP)


def indexing(ctx: Context, eqn: Eqn, env: Env, depth: int, word: str, reads: list, dims: list, summed: frozenset[int],
             out_groups: list, xla: Callable[[list], sympy.Expr] | None = None, why: str = "") -> None:
    """A gather's or a scatter's statement: its operands (`reads`: each a view and the
    group of each of its axes) labelled, and split as GSPMD splits them outside
    shard_map; inside, a dim it sums over (`summed`: the gather's indexed one, the
    scatter's index dims) split over mesh axes leaves partial sums over them (`{U_X}`,
    as a contraction's: the body's psum sums them). `xla`: what XLA's lowering adds,
    in FLOPs, given the labels (`why` says what)."""
    like(ctx, reads)
    names = ctx.labels(dims, prefer=ctx.prefer(reads))
    texts, splits = operands(ctx, [(v, [None if g is None else names[g] for g in at], at) for v, at in reads],
                                  len(dims), depth, summed, what=word)
    out = [None if g is None else names[g] for g in out_groups]
    out_splits = ["" if g is None else splits[g] for g in out_groups]
    unreduced = union(*(split_label(names[g])[1] for g in summed), *(v.unreduced for v, _ in reads)) \
        if ctx.out.shard_maps else None
    written = result_text(ctx.dtype(eqn.outvars[0].aval.dtype), out, out_splits, unreduced or "")
    extra = xla(names) if xla is not None else None
    ctx.emit(source.Apply(word, (), "prefix", tuple(texts), written), eqn.primitive.name, depth, extra,
             why if extra is not None else "")
    ctx.result(eqn, env, unreduced=unreduced, labels=out, splits=out_splits)


def like(ctx: Context, reads: list) -> None:
    """A constant read at its full shape (the ones a gradient scatters) split as the
    operands beside it split the same dims, outside shard_map: GSPMD lays a constant
    out as its user needs it."""
    if ctx.out.shard_maps:
        return
    split_of: dict[int, str] = {}
    for view, groups in reads:
        split = ctx.splits.get(view.array, ())
        for g, k in zip(groups, view.axes):
            if g is not None and k is not None and k < len(split) and split[k]:
                split_of.setdefault(g, split[k])
    for view, groups in reads:
        if view.const and not ctx.splits.get(view.array) and any(g in split_of for g in groups):
            axes = [""] * len(view.dims)
            for g, k in zip(groups, view.axes):
                if g is not None and k is not None:
                    axes[k] = split_of.get(g, "")
            ctx.splits[view.array] = tuple(axes)


def _window(eqn: Eqn) -> bool:
    """Whether a scatter writes one window of its updates' whole shape at a computed start
    (what the gradient of `x[:, :-1]` traces to where a dim is symbolic: the transpose of
    the gather data.py reads as a slice)."""
    operand, ids, updates = eqn.invars
    d = eqn.params["dimension_numbers"]
    rank = len(operand.aval.shape)
    return (tuple(d.update_window_dims) == tuple(range(rank)) and not d.inserted_window_dims
            and len(updates.aval.shape) == rank and tuple(ids.aval.shape) == (len(d.scatter_dims_to_operand_dims),)
            and not getattr(d, "operand_batching_dims", ()))


@rule("pad")
def pad(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """The operand padded (low, high, interior; negative: cropped): each padded axis a
    dim of its own in the result."""
    padded(ctx, eqn, env, depth, eqn.invars[0], "pad")


def padded(ctx: Context, eqn: Eqn, env: Env, depth: int, var: Any, primitive: str) -> None:
    """`var` padded to the result's shape: by `pad`, or by a scatter of one window of it
    into a constant (set; add into zeros), which at concrete sizes JAX traces as the pad
    (the transpose of a slice) and XLA counts as one: no FLOPs, `var` read and the result
    written. Each axis whose size differs a dim of its own in the result."""
    shape, result = tuple(var.aval.shape), tuple(eqn.outvars[0].aval.shape)
    padded = {j for j, (lo, hi, interior) in enumerate(eqn.params["padding_config"]) if lo or hi or interior} \
        if primitive == "pad" else {j for j in range(len(shape)) if not same(shape[j], result[j])}
    dims: list = []
    group = grouping(dims)  # a size-1 axis unlabelled, but a padded one
    # the operand's axes, then each padded axis of the result a group of its own
    at = [group(d, j in padded) for j, d in enumerate(shape)]
    groups = [group(result[j], True) if j in padded else at[j] for j in range(len(shape))]
    x = ctx.whole(var, at, env, "pad")
    names = ctx.labels(dims, prefer=ctx.prefer([(x, at)]))
    replaced = [g for j in sorted(padded) if (g := at[j]) is not None]  # (each is: a padded axis is labelled)
    for g in replaced:
        if split_label(names[g])[1] and ctx.out.shard_maps:
            # inside shard_map a chip pads its shard (T_X, T/2 elements), not T: written as a
            # dim of its own (let TX = T/2), or symroof's engine would gather T first
            names[g] = ctx.share(names[g])
    (operand,), splits = operands(ctx, [(x, [None if g is None else names[g] for g in at], at)], len(dims),
                                       depth, what="pad")
    out = [None if g is None else names[g] for g in groups]
    out_splits = ["" if g is None else splits[g] for g in groups]
    lost = [names[g] for g in replaced if splits[g]]
    if lost:
        ctx.said(f"pad of {', '.join(lost)}, split over a mesh axis: symroof's engine gathers it first "
                 "(AllGather) and pads it whole on each chip, where GSPMD pads the shards in place")
    ctx.emit(source.Apply("pad", (), "prefix", (operand,), result_text(ctx.dtype(eqn.outvars[0].aval.dtype), out,
                                                                         out_splits)), primitive, depth)
    ctx.result(eqn, env, labels=out, splits=out_splits)
