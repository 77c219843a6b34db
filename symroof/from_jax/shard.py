"""shard_map in symroof's sharded notation: the rules of shard_map and its collectives.

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
operands out (gspmd.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import sympy

from ..errors import SpecError
from ..lang import source
from .program import Env, Eqn, View, join_label, split_label, tensor, union
from .rules import not_costed, rule, walk

if TYPE_CHECKING:
    from .context import Context

# JAX's mesh axis -> symroof's letter, where the name is not one letter already
_LETTERS = "XYZWVST"


# -- the mesh and the body ------------------------------------------------------


def letters(ctx: Context, names: Any) -> str:
    """JAX's mesh axis names (one, or a tuple) as symroof's letters."""
    names = names if isinstance(names, (tuple, list)) else (names,)
    unknown = [n for n in names if n not in ctx.out.axis_names]
    if unknown:
        raise SpecError(f"a collective over mesh axis {unknown[0]!r}, outside any shard_map over it")
    return "".join(ctx.out.axis_names[n] for n in names)


def read_mesh(ctx: Context, mesh: Any) -> None:
    for name, size in dict(mesh.shape).items():
        if name in ctx.out.axis_names:
            if ctx.out.mesh[ctx.out.axis_names[name]] != size:
                raise SpecError(f"two meshes give mesh axis {name!r} two sizes: symroof costs one mesh")
            continue
        text = str(name)
        free = [c for c in (text.upper()[:1], *_LETTERS, *map(chr, range(65, 91)))
                if c.isalpha() and c != "U" and c not in ctx.out.mesh and c not in ctx.used]
        letter = text.upper() if len(text) == 1 and text.upper() in free else free[0]
        ctx.out.axis_names[name] = letter
        ctx.out.mesh[letter] = size


def _bind(ctx: Context, local: Any, label: str, bound: dict[str, str]) -> None:
    """Inside a body, the local dim `local` is labelled `label` (B_X)."""
    if isinstance(local, int):
        raise SpecError(f"shard_map splits a dim given as a number ({label}): name it in --shapes "
                        "(x=bf16[B, D]), so that its local size cannot be taken for another dim's")
    text = ctx.dim_text(local)
    if bound.get(text, label) != label:
        raise SpecError(f"inside shard_map the local size {text} is both {bound[text]} and {label}: "
                        "symroof cannot tell which dim each axis is")
    bound[text] = label
    _name(ctx, local, label)


@rule("shard_map")
def shard_map(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    p = eqn.params
    read_mesh(ctx, p["mesh"])
    body = getattr(p["jaxpr"], "jaxpr", p["jaxpr"])
    saved, bound = dict(ctx.names), dict[str, str]()
    inner = {}
    for var, outer, spec in zip(body.invars, eqn.invars, p["in_specs"]):
        split = ctx.splits.get(ctx.view(outer, env).array, ())  # as jit's shardings laid it out
        for j, (whole, local) in enumerate(zip(outer.aval.shape, var.aval.shape)):
            axes = letters(ctx, spec_axes(spec, j))  # "" for an axis not split
            if axes:
                _bind(ctx, local, join_label(split_label(ctx.dim_name(whole))[0], axes), bound)
            k = ctx.view(outer, env).axes[j]
            if k is not None and k < len(split) and set(split[k]) - set(axes):
                ctx.said("an operand split more than its in_specs split it is gathered at shard_map's "
                         "boundary: that AllGather is not costed")
        inner[var] = ctx.view(outer, env)
    ctx.out.extra(-2, "XLA's lowered module counts each shard_map's two boundary calls as -1 FLOP")
    ctx.out.shard_maps += 1
    walk(ctx, body, inner, depth)
    ctx.out.shard_maps -= 1
    ctx.names = saved
    for v, spec in zip(eqn.outvars, p["out_specs"]):
        env[v] = View.whole(ctx.dtype(v.aval.dtype), tuple(v.aval.shape))
        if ctx.out.shardings_read:  # laid out by out_specs for the statements GSPMD splits after it
            ctx.splits[env[v].array] = tuple(letters(ctx, spec_axes(spec, j)) for j in range(len(v.aval.shape)))


# -- collectives ----------------------------------------------------------------


def _collective(ctx: Context, kind: str, subscript: tuple[str, ...], primitive: str, x: Any, out: Any, env: Env,
                depth: int, labels_in: list[str], labels_out: list[str], reduced: str = "",
                xla_flops: sympy.Expr | None = None, why: str = "") -> None:
    """Write `kind_subscript x -> out`: the operand's partial sums over `reduced` summed."""
    pending = union(ctx.view(x, env).unreduced, reduced)
    left = "".join(a for a in pending if a not in reduced)
    operand = tensor(ctx.dtype(x.aval.dtype), labels_in, pending)
    result = tensor(ctx.dtype(out.aval.dtype), labels_out, left)
    ctx.emit(source.Collective(kind, subscript, operand, result), primitive, depth, xla_flops, why)
    env[out] = View.whole(ctx.dtype(out.aval.dtype), tuple(out.aval.shape), unreduced=left)
    ctx.remember(env[out], [label if label != "1" else None for label in labels_out])


@rule("psum", "psum_invariant", "pmax", "pmin")
def psum(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    if any(isinstance(a, int) for a in eqn.params["axes"]):  # pmap's positional axes
        return not_costed(ctx, eqn, env)
    axes = letters(ctx, eqn.params["axes"])
    for x, out in zip(eqn.invars, eqn.outvars):  # psum takes several arrays at once
        labels = [label for label in ctx.axis_labels(tuple(x.aval.shape), reads=(ctx.view(x, env),))[1]
                  if label is not None]
        _collective(ctx, "AllReduce", (axes,), eqn.primitive.name, x, out, env, depth, labels, labels, axes,
                         ctx.size(labels), "XLA counts an AllReduce's combine as 1 FLOP per element on a chip "
                         "(a ReduceScatter's as none)")

# a max or min across chips moves what a sum does (XLA counts its combine alike)


@rule("ppermute")
def ppermute(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """A ppermute whose every pair is a neighbour along one mesh axis (the ring shift of
    ring attention, a pipeline's send to the next stage, pairwise swaps): symroof's
    Permute, costed as a cyclic shift (on a line, its latency floor an upper bound for
    a shift that does not wrap). Another permutation, or one over several axes: not
    costed, and said."""
    names = eqn.params["axis_name"]
    names = names if isinstance(names, (tuple, list)) else (names,)
    if any(isinstance(a, int) for a in names):  # pmap's positional axes
        return not_costed(ctx, eqn, env)
    axes = letters(ctx, names)
    n = ctx.out.mesh[axes[0]] if len(axes) == 1 else 0
    near = all((d - s) % n in (1, n - 1) for s, d in eqn.params["perm"]) if n else False
    if not near:
        ctx.said(f"ppermute over {', '.join(map(str, names))} other than to a neighbour along one mesh axis "
                 f"(perm {list(eqn.params['perm'])[:4]}...): not costed")
        return not_costed(ctx, eqn, env)
    for x, out in zip(eqn.invars, eqn.outvars):
        labels = _labels(ctx, x, env)
        _collective(ctx, "Permute", (axes,), eqn.primitive.name, x, out, env, depth, labels, labels)


@rule("all_gather")
def all_gather(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    p = eqn.params
    if not p["tiled"]:
        return not_costed(ctx, eqn, env)
    axes, d = letters(ctx, p["axis_name"]), p["all_gather_dimension"]
    before = _labels(ctx, eqn.invars[0], env)
    after = list(before)
    before[d], after[d] = _gathered(ctx, before[d], eqn.outvars[0].aval.shape[d], axes)
    _collective(ctx, "AllGather", (axes,), *_one(eqn), env, depth, before, after)


@rule("reduce_scatter")
def reduce_scatter(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    p = eqn.params
    if not p["tiled"]:
        return not_costed(ctx, eqn, env)
    axes, d = letters(ctx, p["axis_name"]), p["scatter_dimension"]
    before = _labels(ctx, eqn.invars[0], env)
    after = list(before)
    after[d] = _scattered(ctx, before[d], eqn.outvars[0].aval.shape[d], axes)
    _collective(ctx, "ReduceScatter", (*axes, split_label(before[d])[0]), *_one(eqn), env, depth,
                     before, after, axes)


@rule("all_to_all")
def all_to_all(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """The concat axis gathered (B_X -> B), the split axis split (F -> F_X)."""
    p = eqn.params
    if not p.get("tiled", False):
        return not_costed(ctx, eqn, env)
    axes, split, concat = letters(ctx, p["axis_name"]), p["split_axis"], p["concat_axis"]
    shape = eqn.outvars[0].aval.shape
    before = _labels(ctx, eqn.invars[0], env)
    after = list(before)
    before[concat], after[concat] = _gathered(ctx, before[concat], shape[concat], axes)
    after[split] = _scattered(ctx, before[split], shape[split], axes)
    _collective(ctx, "AllToAll", (*axes, split_label(before[split])[0]), *_one(eqn), env, depth,
                     before, after)


def _labels(ctx: Context, var: Any, env: Env) -> list[str]:
    """Every axis of a value labelled, a size-1 one as 1 (a collective's axes are written
    all: the one it gathers may be of size 1 on a chip)."""
    return [label or "1" for label in ctx.axis_labels(tuple(var.aval.shape), reads=(ctx.view(var, env),))[1]]


def _gathered(ctx: Context, label: str, whole: Any, axes: str) -> tuple[str, str]:
    """An axis gathered over `axes`: its label split and whole (B_X, B); the whole dim
    (`whole`, the result's size) bound to its label."""
    name, had = split_label(label)
    if all(a in had for a in axes):  # the dim the in_specs (or a scatter) split over them
        out = join_label(name, "".join(a for a in had if a not in axes))
        _name(ctx, whole, out)
        return label, out
    out = ctx.dim_name(whole)  # a dim of the body's own: split over `axes` from here
    base, split = split_label(out)
    return join_label(base, union(split, axes)), out


def _scattered(ctx: Context, label: str, part: Any, axes: str) -> str:
    """An axis split over `axes` (F -> F_Y); the local dim `part` bound to its label."""
    name, had = split_label(label)
    out = join_label(name, union(had, axes))
    _name(ctx, part, out)
    return out


def _name(ctx: Context, dim: Any, label: str) -> None:
    """A symbolic local dim's label from here on (a number keeps its literal: it could
    stand for any dim of that size)."""
    if not isinstance(dim, int):
        ctx.names[ctx.dim_text(dim)] = label


def spec_axes(spec: Any, j: int) -> tuple:
    """The mesh axes a PartitionSpec splits axis j over (a name, a tuple, or none)."""
    if j >= len(spec) or spec[j] is None:
        return ()
    return tuple(spec[j]) if isinstance(spec[j], (tuple, list)) else (spec[j],)


def _one(eqn: Eqn) -> tuple[str, Any, Any]:
    """A one-operand collective's primitive, operand and result."""
    return eqn.primitive.name, eqn.invars[0], eqn.outvars[0]


def _sub(axes: str) -> str:
    return axes if len(axes) == 1 else "{" + axes + "}"


