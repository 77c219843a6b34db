"""Gathers, slices and concatenation (their rules): the primitives that move data and
compute nothing; scatters and pads are scatter.py's.

* gather along one axis, the indices' last dim of size 1 and whole rows along the other
  axes: `table[ids]` (`gather bf16[V, D], int32[B, T] -> bf16[B, T, D]`), `jnp.take` on
  any axis (`gather fp32[B, V, D], int32[K] -> fp32[B, K, D]`: the picked dim is the one
  the result lacks), `take_along_axis` (a batch dim, in the table and the indices both:
  `gather fp32[B, T, V], int32[B, T] -> fp32[B, T]`). The result's labels are remembered
  for the jaxpr's axes in the jaxpr's order. In mode "fill" (jnp.take's and
  take_along_axis's default) XLA's lowering masks out-of-bounds indices: 3 FLOPs per index
  and a select per element, explained in the cross-check. A gather of one window (what
  `x[:, :4]` traces to where a dim is symbolic) is a slice; any other gather (along
  several axes at once, of part of a row) is not costed, and said so.
* slice, dynamic_slice, split: no statement. A slice is a window of the array: the
  next statement reads only the window's elements, as XLA's fusion of a slice into its
  reader does (the lowered module, unfused, reads and writes the window once more).
* concatenate: each operand copied into its place (`copy(bf16[B, K]) -> bf16[B, K]`):
  the operands read once (a broadcast one at its full shape, as XLA materializes it),
  the result written once.
* dynamic_update_slice (`x.at[i].set(u)`): the update copied into the array, in place as
  XLA runs it: the update read and written, the rest of the array untouched.
* scatter, scatter-add, -mul, -min, -max and pad: scatter.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sympy

from ..lang import source
from .gspmd import operands, result_text
from .program import Env, Eqn, View
from .rules import not_costed, rule
from .scatter import FILL, indexed, indexing

if TYPE_CHECKING:
    from .context import Context


@rule("gather")
def gather(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """Elements of a table picked along one axis by index (`table[ids]`, `jnp.take`,
    `take_along_axis`); one window (`x[:, :4]` with a symbolic dim) a slice; any other
    gather is not costed."""
    table, ids = eqn.invars
    d = eqn.params["dimension_numbers"]
    ts, ix = tuple(table.aval.shape), tuple(ids.aval.shape)
    result = tuple(eqn.outvars[0].aval.shape)
    batch = tuple(getattr(d, "operand_batching_dims", ()))
    window = (not d.collapsed_slice_dims and tuple(d.offset_dims) == tuple(range(len(ts)))
              and len(ix) == 1 and not batch and result == tuple(eqn.params["slice_sizes"]))
    if window:  # one window at a computed start (x[:, :4] with a symbolic dim): a slice
        return sliced(ctx, eqn, env, depth)
    found = indexed(ts, ix, result, tuple(d.offset_dims), tuple(d.start_index_map),
                    tuple(d.collapsed_slice_dims), batch, tuple(getattr(d, "start_indices_batching_dims", ())),
                    tuple(eqn.params["slice_sizes"]))
    if found is None:
        return not_costed(ctx, eqn, env)
    table_groups, ids_groups, out_groups, dims = found
    reads = [(ctx.whole(table, table_groups, env, "gather"), table_groups),
             (ctx.whole(ids, ids_groups, env, "gather"), ids_groups)]
    picked = frozenset(g for g in table_groups if g is not None and g not in out_groups)
    fill = None
    if getattr(eqn.params.get("mode"), "name", "") == "FILL_OR_DROP":
        # XLA's lowering: index >= 0, index <= bound, and (3 per index), then a select per element
        def fill(names: list) -> sympy.Expr:
            return 3 * ctx.size([names[g] for g in ids_groups if g is not None]) + \
                ctx.size([names[g] for g in out_groups if g is not None])
    # a table split along the picked axis leaves partial sums (each chip has some rows):
    # symroof AllReduces them
    indexing(ctx, eqn, env, depth, "gather", reads, dims, picked, out_groups, fill, FILL)


@rule("slice", "dynamic_slice", "split")
def sliced(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """A window of the array: read where it is read (every output of `split` one)."""
    for out in eqn.outvars:
        env[out] = ctx.view(eqn.invars[0], env)
    ctx.out.layout[eqn.primitive.name] += 1


@rule("concatenate")
def concatenate(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    for var in eqn.invars:
        _copy(ctx, var, env, depth, "concatenate")
    _split_as(ctx, ctx.result(eqn, env), ctx.view(eqn.invars[0], env), eqn.params["dimension"])


@rule("dynamic_update_slice")
def dynamic_update_slice(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    _copy(ctx, eqn.invars[1], env, depth, "dynamic_update_slice")
    _split_as(ctx, ctx.result(eqn, env), ctx.view(eqn.invars[0], env))


def _split_as(ctx: Context, out: View, x: View, whole: int | None = None) -> None:
    """The result split as the array it was made from (the dim concatenated along whole)."""
    split = ctx.splits.get(x.array)
    if split:
        axes = ["" if k is None or k >= len(split) or j == whole else split[k] for j, k in enumerate(x.axes)]
        ctx.splits[out.array] = tuple(axes)


def _copy(ctx: Context, var: Any, env: Env, depth: int, primitive: str) -> None:
    """An array copied into a new one (its own size read and written)."""
    shape = tuple(var.aval.shape)
    x = ctx.view(var, env)
    names, labels = ctx.axis_labels(shape, reads=(x,))
    if not names:  # a scalar (an index): nothing worth a statement
        return
    x = ctx.whole(var, labels, env, primitive)  # a broadcast (a constant's) copied: materialized
    (operand,), splits = operands(ctx, [(x, labels, list(range(len(shape))))], len(shape), depth)
    ctx.emit(source.Apply("copy", (), "call", (operand,), result_text(ctx.dtype(var.aval.dtype), labels, splits)),
             primitive, depth)


