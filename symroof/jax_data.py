"""Gathers, slices and concatenation (a part of jax_convert.Converter): the primitives that
move data and compute nothing.

* gather of rows (`table[ids]`): `gather bf16[V, D], int32[B, T] -> bf16[B, T, D]`; a
  gather of one window (what `x[:, :4]` traces to where a dim is symbolic) a slice; any
  other gather is not costed, and said so.
* slice, dynamic_slice, split: no statement. A slice is a window of the array: the
  next statement reads only the window's elements, as XLA's fusion of a slice into its
  reader does (the lowered module, unfused, reads and writes the window once more).
* concatenate: each operand copied into its place (`copy(bf16[B, K]) -> bf16[B, K]`):
  the operands read once, the result written once.
* dynamic_update_slice (`x.at[i].set(u)`): the update copied into the array, in place as
  XLA runs it: the update read and written, the rest of the array untouched.
* pad: not costed (its fill's writes have no symroof form), and said so.
"""

from __future__ import annotations

from .jax_program import Parts, View


class DataMoves(Parts):
    """The gather, slice and concatenation handlers; the converter provides the rest."""

    def _gather(self, eqn, env, depth: int) -> None:
        """Rows of a table by index (`table[ids]`, an embedding lookup); any other gather is
        not costed."""
        table, ids = eqn.invars
        d = eqn.params["dimension_numbers"]
        ts, ix = tuple(table.aval.shape), tuple(ids.aval.shape)
        rows = (len(ts) == 2 and ix and ix[-1] == 1 and tuple(d.collapsed_slice_dims) == (0,)
                and tuple(d.start_index_map) == (0,) and tuple(eqn.params["slice_sizes"]) == (1, ts[1])
                and tuple(d.offset_dims) == (len(ix) - 1,))
        window = (not d.collapsed_slice_dims and tuple(d.offset_dims) == tuple(range(len(ts)))
                  and len(ix) == 1 and not getattr(d, "operand_batching_dims", ())
                  and tuple(eqn.outvars[0].aval.shape) == tuple(eqn.params["slice_sizes"]))
        if window:  # one window at a computed start (x[:, :4] with a symbolic dim): a slice
            return self._slice(eqn, env, depth)
        if not rows:
            return self._skip(eqn, env)
        # the statement's axes: the table's two, then the ids' (but the index vector's, of
        # size 1, and any other of size 1)
        at: list[int | None] = [None] * len(ix)
        for j in (j for j in range(len(ix) - 1) if ix[j] != 1):
            at[j] = 2 + sum(1 for x in ix[:j] if x != 1)
        views = (self.view(table, env), self.view(ids, env))
        names = self.labels([*ts, *[x for x in ix[:-1] if x != 1]], prefer=self.prefer([(views[0], [0, 1]),
                                                                                         (views[1], at)]))
        # a table split by rows leaves partial sums (each chip has some rows): symroof AllReduces
        (rows_text, ids_text), splits = self.operands(
            [(views[0], names[:2], [0, 1]), (views[1], [None if i is None else names[i] for i in at], at)],
            len(names), depth, frozenset({0}), what="gather")
        out = [None if i is None else names[i] for i in at[:-1]] + [names[1]]
        out_splits = [splits[i] if i is not None else "" for i in at[:-1]] + [splits[1]]
        result = self.result_text(self.dtype(eqn.outvars[0].aval.dtype), out, out_splits)
        self.emit(f"gather {rows_text}, {ids_text} -> {result}", "gather", depth)
        self.result(eqn, env, labels=out, splits=out_splits)

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
        (operand,), splits = self.operands([(x, labels, list(range(len(shape))))], len(shape), depth)
        self.emit(f"copy({operand}) -> {self.result_text(self.dtype(var.aval.dtype), labels, splits)}", primitive,
                  depth)
