"""shard_map in symroof's sharded notation (a part of jax_convert.Converter).

    shard_map(body, mesh=Mesh('x': 2, 'y': 4), in_specs=(P('x', 'y'), P('y', None)))

becomes a `mesh X=2, Y=4` line, and the body's statements are written with global dims
and subscripts for the splits (`bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F] {U_Y}`):
symroof's own per-chip counts are then the body's. Inside the body, a local dim (B/2 for
B split over 'x') is labelled with its global dim and the axes (B_X), bound from the
in_specs and from what each collective makes. A contraction over a split dim leaves
partial sums (`{U_Y}`: symroof inserts no AllReduce of its own); the body's collectives
are written out:

    psum / psum_invariant   AllReduce_Y bf16[B_X, F] {U_Y} -> bf16[B_X, F]
    pmax / pmin             the same (an AllReduce that keeps the max: the same bytes moved)
    ppermute (neighbours)   Permute_Y bf16[B_X, F] -> bf16[B_X, F]
    all_gather (tiled)      AllGather_X bf16[B_X, F] -> bf16[B, F]
    psum_scatter (tiled)    ReduceScatter_{Y,F} bf16[B_X, F] {U_Y} -> bf16[B_X, F_Y]
    all_to_all (tiled)      AllToAll_{X,F} bf16[B_X, F] -> bf16[B, F_X]

A ppermute to other than a neighbour along one axis, and untiled gathers, scatters or
all-to-alls, have no symroof form: not costed, named in the warning. A statement outside
shard_map is costed whole on every chip, and said so, unless jit's shardings lay its
operands out (jax_gspmd.py).
"""

from __future__ import annotations

from typing import Any

from ..errors import SpecError
from .program import Parts, View, join_label, split_label, union

# JAX's mesh axis -> symroof's letter, where the name is not one letter already
_LETTERS = "XYZWVST"


class Sharding(Parts):
    """The shard_map and collective handlers; the converter provides the rest."""

    # -- the mesh and the body ------------------------------------------------------

    def _letters(self, names) -> str:
        """JAX's mesh axis names (one, or a tuple) as symroof's letters."""
        names = names if isinstance(names, (tuple, list)) else (names,)
        unknown = [n for n in names if n not in self.out.axis_names]
        if unknown:
            raise SpecError(f"a collective over mesh axis {unknown[0]!r}, outside any shard_map over it")
        return "".join(self.out.axis_names[n] for n in names)

    def _mesh(self, mesh) -> None:
        for name, size in dict(mesh.shape).items():
            if name in self.out.axis_names:
                if self.out.mesh[self.out.axis_names[name]] != size:
                    raise SpecError(f"two meshes give mesh axis {name!r} two sizes: symroof costs one mesh")
                continue
            text = str(name)
            free = [c for c in (text.upper()[:1], *_LETTERS, *map(chr, range(65, 91)))
                    if c.isalpha() and c != "U" and c not in self.out.mesh and c not in self.used]
            letter = text.upper() if len(text) == 1 and text.upper() in free else free[0]
            self.out.axis_names[name] = letter
            self.out.mesh[letter] = size

    def _bind(self, local, label: str, bound: dict[str, str]) -> None:
        """Inside a body, the local dim `local` is labelled `label` (B_X)."""
        if isinstance(local, int):
            raise SpecError(f"shard_map splits a dim given as a number ({label}): name it in --shapes "
                            "(x=bf16[B, D]), so that its local size cannot be taken for another dim's")
        text = self.dim_text(local)
        if bound.get(text, label) != label:
            raise SpecError(f"inside shard_map the local size {text} is both {bound[text]} and {label}: "
                            "symroof cannot tell which dim each axis is")
        bound[text] = label
        self._name(local, label)

    def _shard_map(self, eqn, env, depth: int) -> None:
        p = eqn.params
        self._mesh(p["mesh"])
        body = getattr(p["jaxpr"], "jaxpr", p["jaxpr"])
        saved, bound = dict(self.names), dict[str, str]()
        inner = {}
        for var, outer, spec in zip(body.invars, eqn.invars, p["in_specs"]):
            split = self.splits.get(self.view(outer, env).array, ())  # as jit's shardings laid it out
            for j, (whole, local) in enumerate(zip(outer.aval.shape, var.aval.shape)):
                axes = self._letters(_spec_axes(spec, j))  # "" for an axis not split
                if axes:
                    self._bind(local, join_label(split_label(self.dim_name(whole))[0], axes), bound)
                k = self.view(outer, env).axes[j]
                if k is not None and k < len(split) and set(split[k]) - set(axes):
                    self._said("an operand split more than its in_specs split it is gathered at shard_map's "
                               "boundary: that AllGather is not costed")
            inner[var] = self.view(outer, env)
        self.out.extra(-2, "XLA's lowered module counts each shard_map's two boundary calls as -1 FLOP")
        self.out.shard_maps += 1
        self.walk(body, inner, depth)
        self.out.shard_maps -= 1
        self.names = saved
        for v, spec in zip(eqn.outvars, p["out_specs"]):
            env[v] = View.whole(self.dtype(v.aval.dtype), tuple(v.aval.shape))
            if self.out.shardings_read:  # laid out by out_specs for the statements GSPMD splits after it
                self.splits[env[v].array] = tuple(self._letters(_spec_axes(spec, j)) for j in range(len(v.aval.shape)))

    def _said(self, note: str) -> None:
        """A note for the warnings, once."""
        if note not in self.out.notes:
            self.out.notes.append(note)

    # -- collectives ----------------------------------------------------------------

    def _collective(self, word: str, primitive: str, x, out, env, depth: int, labels_in: list[str],
                    labels_out: list[str], reduced: str = "", xla_flops=None, why: str = "") -> None:
        """Write `word x -> out`: the operand's partial sums over `reduced` summed."""
        pending = union(self.view(x, env).unreduced, reduced)
        left = "".join(a for a in pending if a not in reduced)
        operand = f"{self.dtype(x.aval.dtype)}[{', '.join(labels_in)}]" + (
            f" {{{join_label('U', pending)}}}" if pending else "")
        result = f"{self.dtype(out.aval.dtype)}[{', '.join(labels_out)}]" + (
            f" {{{join_label('U', left)}}}" if left else "")
        self.emit(f"{word} {operand} -> {result}", primitive, depth, xla_flops, why)
        env[out] = View.whole(self.dtype(out.aval.dtype), tuple(out.aval.shape), unreduced=left)
        self.remember(env[out], [label if label != "1" else None for label in labels_out])

    def _psum(self, eqn, env, depth: int) -> None:
        if any(isinstance(a, int) for a in eqn.params["axes"]):  # pmap's positional axes
            return self._skip(eqn, env)
        axes = self._letters(eqn.params["axes"])
        for x, out in zip(eqn.invars, eqn.outvars):  # psum takes several arrays at once
            labels = [label for label in self.axis_labels(tuple(x.aval.shape), reads=(self.view(x, env),))[1]
                      if label is not None]
            self._collective(f"AllReduce_{_sub(axes)}", eqn.primitive.name, x, out, env, depth, labels, labels, axes,
                             self.size(labels), "XLA counts an AllReduce's combine as 1 FLOP per element on a chip "
                             "(a ReduceScatter's as none)")

    # a max or min across chips moves what a sum does (XLA counts its combine alike)
    _psum_invariant = _pmax = _pmin = _psum

    def _ppermute(self, eqn, env, depth: int) -> None:
        """A ppermute whose every pair is a neighbour along one mesh axis (the ring shift of
        ring attention, a pipeline's send to the next stage, pairwise swaps): symroof's
        Permute, costed as a cyclic shift (on a line, its latency floor an upper bound for
        a shift that does not wrap). Another permutation, or one over several axes: not
        costed, and said."""
        names = eqn.params["axis_name"]
        names = names if isinstance(names, (tuple, list)) else (names,)
        if any(isinstance(a, int) for a in names):  # pmap's positional axes
            return self._skip(eqn, env)
        axes = self._letters(names)
        n = self.out.mesh[axes[0]] if len(axes) == 1 else 0
        near = all((d - s) % n in (1, n - 1) for s, d in eqn.params["perm"]) if n else False
        if not near:
            self._said(f"ppermute over {', '.join(map(str, names))} other than to a neighbour along one mesh axis "
                       f"(perm {list(eqn.params['perm'])[:4]}...): not costed")
            return self._skip(eqn, env)
        for x, out in zip(eqn.invars, eqn.outvars):
            labels = self._labels(x, env)
            self._collective(f"Permute_{axes}", eqn.primitive.name, x, out, env, depth, labels, labels)

    def _all_gather(self, eqn, env, depth: int) -> None:
        p = eqn.params
        if not p["tiled"]:
            return self._skip(eqn, env)
        axes, d = self._letters(p["axis_name"]), p["all_gather_dimension"]
        before = self._labels(eqn.invars[0], env)
        after = list(before)
        before[d], after[d] = self._gathered(before[d], eqn.outvars[0].aval.shape[d], axes)
        self._collective(f"AllGather_{_sub(axes)}", *_one(eqn), env, depth, before, after)

    def _reduce_scatter(self, eqn, env, depth: int) -> None:
        p = eqn.params
        if not p["tiled"]:
            return self._skip(eqn, env)
        axes, d = self._letters(p["axis_name"]), p["scatter_dimension"]
        before = self._labels(eqn.invars[0], env)
        after = list(before)
        after[d] = self._scattered(before[d], eqn.outvars[0].aval.shape[d], axes)
        self._collective(f"ReduceScatter_{{{','.join(axes)},{split_label(before[d])[0]}}}", *_one(eqn), env, depth,
                         before, after, axes)

    def _all_to_all(self, eqn, env, depth: int) -> None:
        """The concat axis gathered (B_X -> B), the split axis split (F -> F_X)."""
        p = eqn.params
        if not p.get("tiled", False):
            return self._skip(eqn, env)
        axes, split, concat = self._letters(p["axis_name"]), p["split_axis"], p["concat_axis"]
        shape = eqn.outvars[0].aval.shape
        before = self._labels(eqn.invars[0], env)
        after = list(before)
        before[concat], after[concat] = self._gathered(before[concat], shape[concat], axes)
        after[split] = self._scattered(before[split], shape[split], axes)
        self._collective(f"AllToAll_{{{','.join(axes)},{split_label(before[split])[0]}}}", *_one(eqn), env, depth,
                         before, after)

    def _labels(self, var, env) -> list[str]:
        """Every axis of a value labelled, a size-1 one as 1 (a collective's axes are written
        all: the one it gathers may be of size 1 on a chip)."""
        return [label or "1" for label in self.axis_labels(tuple(var.aval.shape), reads=(self.view(var, env),))[1]]

    def _gathered(self, label: str, whole, axes: str) -> tuple[str, str]:
        """An axis gathered over `axes`: its label split and whole (B_X, B); the whole dim
        (`whole`, the result's size) bound to its label."""
        name, had = split_label(label)
        if all(a in had for a in axes):  # the dim the in_specs (or a scatter) split over them
            out = join_label(name, "".join(a for a in had if a not in axes))
            self._name(whole, out)
            return label, out
        out = self.dim_name(whole)  # a dim of the body's own: split over `axes` from here
        base, split = split_label(out)
        return join_label(base, union(split, axes)), out

    def _scattered(self, label: str, part, axes: str) -> str:
        """An axis split over `axes` (F -> F_Y); the local dim `part` bound to its label."""
        name, had = split_label(label)
        out = join_label(name, union(had, axes))
        self._name(part, out)
        return out

    def _name(self, dim, label: str) -> None:
        """A symbolic local dim's label from here on (a number keeps its literal: it could
        stand for any dim of that size)."""
        if not isinstance(dim, int):
            self.names[self.dim_text(dim)] = label


def _spec_axes(spec, j: int) -> tuple:
    """The mesh axes a PartitionSpec splits axis j over (a name, a tuple, or none)."""
    if j >= len(spec) or spec[j] is None:
        return ()
    return tuple(spec[j]) if isinstance(spec[j], (tuple, list)) else (spec[j],)


def _one(eqn) -> tuple[str, Any, Any]:
    """A one-operand collective's primitive, operand and result."""
    return eqn.primitive.name, eqn.invars[0], eqn.outvars[0]


def _sub(axes: str) -> str:
    return axes if len(axes) == 1 else "{" + axes + "}"


