"""jit's shardings and sharding constraints read as GSPMD reads them (the rules of
sharding_constraint and reshard, and how every rule lays out its operands: `operands`),
in its simple cases:

    jax.jit(f, in_shardings=(NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P(None, "y"))))

writes a `mesh X=2, Y=4` line and the inputs with their splits (`bf16[B_X, D]`, global
dims), and carries the splits through each statement as GSPMD propagates them:

* an elementwise op's or a reduction's result keeps its operands' splits; a contraction's
  result keeps the splits of the operand dims each of its dims comes from;
* a dim summed over (a contraction's, a reduction's) split over an axis is left to
  symroof's own engine (sharding/lowering.py): split alike on both sides it leaves partial sums,
  AllReduced because the result is written without `{U_X}`; split on one side only, that
  side is gathered first;
* where GSPMD could choose between layouts (two operands split different dims over one
  mesh axis, or one dim over different axes), the first operand's split is kept, the
  other operand's dim is gathered first (an AllGather statement, written out), and a
  warning names the choice;
* `with_sharding_constraint` and `out_shardings` give the layout the value must have:
  the statement that made it is written with that result (symroof inserts the AllGather,
  ReduceScatter or AllToAll that moves it there, or slices it locally); where that
  statement's result has been read already (or no statement made it: an input), the
  move is written out as AllGather and AllToAll statements.

Under a mesh of explicit axes (jax.sharding.AxisType.Explicit) each value's type carries
its layout, as JAX's sharding rules derive it (a product's `out_sharding` among them):
after each equation the type's layout holds where it differs from the carried one, as a
constraint's would, and `jax.sharding.reshard` is read as a constraint.

Splits are kept per array (View.array), as the labels are (context.py). Inside
shard_map the body's own splits hold (shard.py); shardings that are not
NamedShardings, and constraints inside shard_map, are said in a warning, not read.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..lang import source
from .context import with_split
from .program import Env, Eqn, View, split_label, tensor
from .rules import after_each, rule
from .shard import letters, read_mesh, spec_axes

if TYPE_CHECKING:
    from .context import Context

# one operand of a statement: its view, its axes' labels, and the statement's axis
# (group) each of its axes is (None: one it does not have, a broadcast scalar's)
Read = tuple[View, list, list]


# -- a statement's layout ---------------------------------------------------------


def operands(ctx: Context, reads: list[Read], groups: int, depth: int, summed: frozenset[int] = frozenset(),
             summed_labels: list[str] | None = None, what: str = "") -> tuple[list[source.Tensor], list[str]]:
    """A statement's operands as written, and the split of each of its axes (groups)
    in the result: the operands' splits, as GSPMD keeps them (none inside shard_map,
    whose labels carry their own)."""
    if ctx.out.shard_maps or not any(ctx.splits.get(v.array) for v, _, _ in reads):
        return [ctx.tensor(v, labels, summed_labels) for v, labels, _ in reads], [""] * groups
    splits, clash = _choose(ctx, reads, groups, summed)
    before = len(ctx.out.statements)
    texts = [ctx.tensor(_gather_to(ctx, v, labels, at, splits, summed, depth, what), labels, summed_labels)
             for v, labels, at in reads]
    if clash:
        kept = ", ".join(with_split(clash[1][g], splits[g]) for g in range(groups) if splits[g]) or "none"
        gathered = len(ctx.out.statements) - before
        ctx.said(f"{what}: its operands' splits could be resolved more than one way ({clash[0]}); symroof "
                 f"keeps the first operand's splits in the result (split: {kept})"
                 + (f", gathers {gathered} operand dim(s) first (AllGather, written out)" if gathered else "")
                 + ("; a summed dim split on one side only its engine gathers" if summed else ""))
    return texts, splits


def result_text(dtype: str, labels: list, splits: list[str], unreduced: str = "") -> source.Tensor:
    """A result as written: its labels (None: a size-1 axis, left out), each split."""
    return tensor(dtype, [with_split(label, s) for label, s in zip(labels, splits) if label is not None], unreduced)


def _choose(ctx: Context, reads: list[Read], groups: int,
            summed: frozenset[int]) -> tuple[list[str], tuple[str, dict[int, str]] | None]:
    """Each group's split in the result: the first operand's that splits it, unless a
    mesh axis of it already splits another group; and where operands disagree (GSPMD
    could choose otherwise), what they disagree on and the groups' names."""
    chosen = [""] * groups
    owner: dict[str, int] = {}  # mesh axis -> the group it splits in the result
    seen: dict[str, set[str]] = {}  # mesh axis -> the dims it splits, in any operand
    names: dict[int, str] = {}
    for view, labels, at in reads:
        split = ctx.splits.get(view.array, ())
        for j, (k, g) in enumerate(zip(view.axes, at)):
            if k is None or g is None:
                continue
            names.setdefault(g, split_label(labels[j] or "1")[0])
            if k >= len(split) or not split[k]:
                continue
            for a in split[k]:
                seen.setdefault(a, set()).add(names[g])
            if g in summed or chosen[g] or any(owner.get(a, g) != g for a in split[k]):
                continue
            chosen[g] = split[k]
            owner.update({a: g for a in split[k]})
    said = [f"mesh axis {_axis(ctx, a)} splits {' and '.join(sorted(d))}" for a, d in seen.items() if len(d) > 1]
    for view, _, at in reads:  # an operand's dim split otherwise than the result's
        split = ctx.splits.get(view.array, ())
        for k, g in zip(view.axes, at):
            if k is not None and g is not None and g not in summed and k < len(split) and split[k] \
                    and split[k] != chosen[g]:
                said.append(f"{names[g]} is split over {split[k]} and over {chosen[g] or 'nothing'}")
    return chosen, ("; ".join(dict.fromkeys(said)), names) if said else None


def _gather_to(ctx: Context, view: View, labels: list, at: list, splits: list[str], summed: frozenset[int], depth: int,
               what: str) -> View:
    """The operand with each dim it splits over an axis the result does not split that
    dim over gathered first (an AllGather written out): GSPMD's reshard."""
    for k, g in zip(view.axes, at):
        split = ctx.splits.get(view.array, ())
        if k is None or g is None or g in summed or k >= len(split):
            continue
        lost = "".join(a for a in split[k] if a not in splits[g])
        if lost:
            after = tuple(s if d != k else "".join(a for a in s if a not in lost) for d, s in enumerate(split))
            view = collective_move(ctx, view, labels, after, "AllGather", (lost,), depth, what)
    return view


def collective_move(ctx: Context, view: View, labels: list, after: tuple[str, ...], kind: str,
                    subscript: tuple[str, ...], depth: int, what: str) -> View:
    """`kind_subscript view -> the same array split as `after``, written out; the moved array."""
    before = ctx.tensor(view, labels)
    moved = view.moved()
    ctx.splits[moved.array] = after
    ctx.written[moved.array] = dict(ctx.written.get(view.array, {}))
    ctx.emit(source.Collective(kind, subscript, before, ctx.tensor(moved, labels)), f"{what}: GSPMD's reshard", depth)
    return moved


def _axis(ctx: Context, letter: str) -> str:
    names = {v: k for k, v in ctx.out.axis_names.items()}
    return f"{names.get(letter, letter)!r}"


# -- shardings read -----------------------------------------------------------------


def read_shardings(ctx: Context, eqn: Eqn, jaxpr: Any, env: Env, key: str, depth: int) -> None:
    """A jit's in_shardings (key "in_shardings": its body's inputs) or out_shardings
    (its body's outputs), each the layout its value takes there."""
    variables = jaxpr.invars if key == "in_shardings" else jaxpr.outvars
    for var, sharding in zip(variables, eqn.params.get(key, ())):
        if "Unspecified" in type(sharding).__name__ or type(var).__name__ == "Literal":
            continue
        view = constrain(ctx, var, sharding, env, depth, f"jit's {key}")
        if view is not None:
            env[var] = view


@rule("sharding_constraint")
def sharding_constraint(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    ctx.out.layout["sharding_constraint"] += 1
    view = constrain(ctx, eqn.invars[0], eqn.params["sharding"], env, depth, "a sharding constraint",
                          frozenset(eqn.params.get("unconstrained_dims", ())))
    env[eqn.outvars[0]] = view if view is not None else ctx.view(eqn.invars[0], env)


@rule("reshard")
def reshard(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """jax.sharding.reshard under a mesh of explicit axes: the layout the value takes,
    as a constraint gives it."""
    ctx.out.layout["reshard"] += 1
    view = constrain(ctx, eqn.invars[0], eqn.params["dst_sharding"], env, depth, "a reshard")
    env[eqn.outvars[0]] = view if view is not None else ctx.view(eqn.invars[0], env)


@after_each
def typed(ctx: Context, eqn: Eqn, env: Env, depth: int) -> None:
    """Under a mesh of explicit axes each value's type carries its layout, as JAX's
    sharding rules derive it: where it differs from the splits symroof carried, the
    type's holds (the statement that made it is written so, or the value is moved)."""
    if ctx.out.shard_maps:
        return
    for var in eqn.outvars:
        sharding = getattr(var.aval, "sharding", None)
        types = getattr(getattr(sharding, "mesh", None), "axis_types", ())
        if var in env and any(str(t).endswith("Explicit") for t in types):
            view = constrain(ctx, var, sharding, env, depth, f"{eqn.primitive.name}'s type")
            if view is not None:
                env[var] = view


def constrain(ctx: Context, var: Any, sharding: Any, env: Env, depth: int, what: str,
              unconstrained: frozenset[int] = frozenset()) -> View | None:
    """The value `var` laid out as `sharding` says (a NamedSharding): its view, or
    None where the sharding is not read (said)."""
    if ctx.out.shard_maps or not (hasattr(sharding, "spec") and hasattr(sharding, "mesh")):
        where = "inside shard_map" if ctx.out.shard_maps else f"a {type(sharding).__name__}"
        ctx.said(f"{what} ({where}) is not read: the values it lays out keep the splits they have")
        return None
    read_mesh(ctx, sharding.mesh)
    ctx.out.shardings_read = True
    view = ctx.view(var, env)
    if view.const:
        return view
    current = ctx.splits.get(view.array, ("",) * len(view.dims))
    target = list(current)
    for j, k in enumerate(view.axes):
        entry = sharding.spec[j] if j < len(sharding.spec) else None
        if j in unconstrained or type(entry).__name__ == "UnconstrainedSingleton":
            continue  # GSPMD's choice: the split it has
        axes = letters(ctx, spec_axes(sharding.spec, j))
        if k is not None:
            target[k] = axes
        elif axes:
            ctx.said(f"{what} splits an axis that is a broadcast (no array holds it): not read")
    if tuple(target) == current:
        return view
    if view.array in ctx.made and not ctx.reads[view.array]:
        _relayout(ctx, view.array, tuple(target))  # the statement that made it writes it so
        return view
    if view.array not in ctx.made and not ctx.reads[view.array] and not any(current):
        ctx.splits[view.array] = tuple(target)  # an input, laid out here
        return view
    return _move(ctx, view, tuple(var.aval.shape), tuple(target), depth, what)


def _relayout(ctx: Context, array: int, target: tuple[str, ...]) -> None:
    """The statement that made `array` rewritten with its result split as `target`:
    symroof inserts the collective that moves it there (ReduceScatter where it holds
    partial sums, AllGather, AllToAll) or slices it locally."""
    index, line, dtype, labels = ctx.made[array]
    statement = ctx.out.statements[index]
    output = result_text(dtype, labels, list(target))
    ctx.out.statements[index] = replace(statement, item=replace(statement.item, output=output),
                                        derived=True)  # split from here: not whole
    depth, written = ctx.out.lines[line]
    assert isinstance(written, (source.Contraction, source.Apply, source.Collective))  # (the statement's line)
    ctx.out.lines[line] = (depth, replace(written, output=output))
    ctx.splits[array] = target


def _move(ctx: Context, view: View, shape: tuple, target: tuple[str, ...], depth: int, what: str) -> View:
    """The array moved to `target`, written out: an axis moved from one dim to another
    an AllToAll, one dropped an AllGather; one added is a local slice (no statement)."""
    _, labels = ctx.axis_labels(shape, reads=(view,))
    current = ctx.splits.get(view.array, ("",) * len(view.dims))
    for a in dict.fromkeys("".join(current)):
        src = next(k for k, s in enumerate(current) if a in s)
        dst = next((k for k, s in enumerate(target) if a in s), None)
        if src == dst:
            continue
        after = [s.replace(a, "") for s in current]
        subscript: tuple[str, ...]
        if dst is None:
            kind, subscript = "AllGather", (a,)
        else:
            after[dst] += a
            axis = next((j for j, k in enumerate(view.axes) if k == dst), None)
            kind, subscript = "AllToAll", (a, split_label(labels[axis] or "1")[0] if axis is not None else "1")
        view = collective_move(ctx, view, labels, tuple(after), kind, subscript, depth, what)
        current = tuple(after)
    moved = view.moved()  # the axes added: a local slice of what each chip holds
    ctx.splits[moved.array] = target
    ctx.written[moved.array] = dict(ctx.written.get(view.array, {}))
    return moved


def reshaped(ctx: Context, x: View, new: View, shape_in: tuple, shape_out: tuple) -> None:
    """A reshape's splits: a group of dims merged (or one split into several) keeps the
    split of its major dim, as GSPMD does; a split minor dim is not carried, and said."""
    split = ctx.splits.get(x.array)
    if not split or ctx.out.shard_maps:
        return
    axes = [split[k] if k is not None and k < len(split) else "" for k in x.axes]
    out = [""] * len(shape_out)
    try:
        groups = _groups(shape_in, shape_out)
    except Exception:  # noqa: BLE001 (a symbolic product JAX cannot compare: said below)
        groups = None
    if groups is None:
        ctx.said("a reshape of a split array whose dims symroof cannot match: its splits are not carried")
        return
    for ins, outs in groups:
        major = [i for i in ins if shape_in[i] != 1]
        if any(axes[i] for i in major[1:]):
            ctx.said("a reshape merges (or splits) dims of which a minor one is split: that split is not "
                     "carried (GSPMD would reshard it)")
        if major and axes[major[0]] and outs:
            out[next((o for o in outs if shape_out[o] != 1), outs[0])] = axes[major[0]]
    if any(out):
        ctx.splits[new.array] = tuple(out)


def _groups(shape_in: tuple, shape_out: tuple) -> list[tuple[list[int], list[int]]] | None:
    """The dims of a reshape in groups that hold the same elements: a group ends where the
    running products of the two shapes meet. None where they do not end together."""
    def running(shape: tuple) -> list:
        out, p = [], 1
        for d in shape:
            p = p * d
            out.append(p)
        return out

    cin, cout = running(shape_in), running(shape_out)
    cuts = [(-1, -1)]
    for a in range(len(shape_in)):
        b = next((b for b in range(cuts[-1][1] + 1, len(shape_out)) if cin[a] == cout[b]), None)
        if b is not None:
            cuts.append((a, b))
    a, b = cuts[-1]
    if any(d != 1 for d in (*shape_in[a + 1:], *shape_out[b + 1:])):
        return None
    cuts[-1] = (len(shape_in) - 1, len(shape_out) - 1)  # trailing size-1 dims join the last group
    return [(list(range(a0 + 1, a1 + 1)), list(range(b0 + 1, b1 + 1))) for (a0, b0), (a1, b1) in zip(cuts, cuts[1:])]
