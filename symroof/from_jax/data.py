"""Gathers, slices and concatenation (a part of jax_convert.Converter): the primitives that
move data and compute nothing; scatters and pads are jax_scatter.py's.

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
* scatter, scatter-add, -mul, -min, -max and pad: jax_scatter.py.
"""

from __future__ import annotations

from .program import View
from .scatter import FILL, Scatters, indexed


class DataMoves(Scatters):
    """The gather, slice and concatenation handlers (and jax_scatter's scatter and pad);
    the converter provides the rest."""

    def _gather(self, eqn, env, depth: int) -> None:
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
            return self._slice(eqn, env, depth)
        found = indexed(ts, ix, result, tuple(d.offset_dims), tuple(d.start_index_map),
                        tuple(d.collapsed_slice_dims), batch, tuple(getattr(d, "start_indices_batching_dims", ())),
                        tuple(eqn.params["slice_sizes"]))
        if found is None:
            return self._skip(eqn, env)
        table_groups, ids_groups, out_groups, dims = found
        reads = [(self.whole(table, table_groups, env, "gather"), table_groups),
                 (self.whole(ids, ids_groups, env, "gather"), ids_groups)]
        picked = frozenset(g for g in table_groups if g is not None and g not in out_groups)
        fill = None
        if getattr(eqn.params.get("mode"), "name", "") == "FILL_OR_DROP":
            # XLA's lowering: index >= 0, index <= bound, and (3 per index), then a select per element
            def fill(names):
                return 3 * self.size([names[g] for g in ids_groups if g is not None]) + \
                    self.size([names[g] for g in out_groups if g is not None])
        # a table split along the picked axis leaves partial sums (each chip has some rows):
        # symroof AllReduces them
        self.indexing(eqn, env, depth, "gather", reads, dims, picked, out_groups, fill, FILL)

    def _slice(self, eqn, env, depth: int) -> None:
        """A window of the array: read where it is read (every output of `split` one)."""
        for out in eqn.outvars:
            env[out] = self.view(eqn.invars[0], env)
        self.out.layout[eqn.primitive.name] += 1

    _dynamic_slice = _slice
    _split = _slice

    def _concatenate(self, eqn, env, depth: int) -> None:
        for var in eqn.invars:
            self._copy(var, env, depth, "concatenate")
        self._split_as(self.result(eqn, env), self.view(eqn.invars[0], env), eqn.params["dimension"])

    def _dynamic_update_slice(self, eqn, env, depth: int) -> None:
        self._copy(eqn.invars[1], env, depth, "dynamic_update_slice")
        self._split_as(self.result(eqn, env), self.view(eqn.invars[0], env))

    def _split_as(self, out: View, x: View, whole: int | None = None) -> None:
        """The result split as the array it was made from (the dim concatenated along whole)."""
        split = self.splits.get(x.array)
        if split:
            axes = ["" if k is None or k >= len(split) or j == whole else split[k] for j, k in enumerate(x.axes)]
            self.splits[out.array] = tuple(axes)

    def _copy(self, var, env, depth: int, primitive: str) -> None:
        """An array copied into a new one (its own size read and written)."""
        shape = tuple(var.aval.shape)
        x = self.view(var, env)
        names, labels = self.axis_labels(shape, reads=(x,))
        if not names:  # a scalar (an index): nothing worth a statement
            return
        x = self.whole(var, labels, env, primitive)  # a broadcast (a constant's) copied: materialized
        (operand,), splits = self.operands([(x, labels, list(range(len(shape))))], len(shape), depth)
        self.emit(f"copy({operand}) -> {self.result_text(self.dtype(var.aval.dtype), labels, splits)}", primitive,
                  depth)
