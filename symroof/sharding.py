"""Sharded statements -> what each chip does: local steps on shards, and the collectives
between them, inserted where the layouts demand them and shown, never hidden.

A tensor's layout says which mesh axes split each of its dims, and over which axes it
holds unreduced partial sums. For each binary step:

1. A dim that two inputs share must be split alike. A summed (contracting) dim split on
   one side only is gathered there first (the book's case 2: AllGather it). A batch dim
   split on one side only is sliced locally on the other (free: that side is replicated).
2. A summed dim split alike on both sides leaves partial sums over those axes (case 3).
3. The result takes its inputs' splits. An axis that would split two of its dims is not
   a valid layout (case 4): symroof says so and offers both AllGather fixes.
4. The last step's result must be laid out as written: partial sums are AllReduced, or
   ReduceScattered where the result asks for a dim split over that axis, or kept where it
   says `{U_X}`; a dim split more than written is AllGathered, less than written is sliced
   locally, and a split that moves from one dim to another is an AllToAll.

Examples:
    >>> from symroof.parse import parse
    >>> plan = lower(parse("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]").statements[0],
    ...              parse("mesh X=2; bf16[B] -> bf16[B]").mesh)
    >>> [str(item) for item in plan.items]
    ['bf16[B, D/X] * bf16[D/X, F] -> bf16[B, F] {U_X}', 'AllReduce_X bf16[B, F] {U_X} (inserted: partial sums over X)']
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sympy

from .dtypes import DType
from .errors import SpecError
from .ir import Collective, Contraction, Mesh, Step, Tensor, label_text, subscript

Axes = tuple[str, ...]


@dataclass(frozen=True)
class Layout:
    """Which axes split each dim (in the order of `labels`), and the unreduced axes."""

    labels: tuple[str, ...]
    axes: tuple[Axes, ...]
    unreduced: Axes = ()

    def of(self, label: str) -> Axes:
        return self.axes[self.labels.index(label)]

    def with_axes(self, label: str, axes: Axes) -> "Layout":
        i = self.labels.index(label)
        return Layout(self.labels, self.axes[:i] + (axes,) + self.axes[i + 1:], self.unreduced)

    def text(self, dtype: DType, local: bool = False) -> str:
        """`bf16[B, D_X]`, or with `local` each dim's shard, `bf16[B, D/X]`."""
        dims = []
        for label, axes in zip(self.labels, self.axes):
            name = label_text(label)
            if local and axes:
                dims.append(f"{name}/{''.join(axes) if all(len(a) == 1 for a in axes) else '/'.join(axes)}")
            else:
                dims.append(name + ("" if local else subscript(axes)))
        notes = f" {{U{subscript(self.unreduced)}}}" if self.unreduced else ""
        return f"{dtype}[{', '.join(dims)}]{notes}"


@dataclass(frozen=True)
class Move:
    """A collective: written in the spec, or inserted by symroof (with why)."""

    kind: str
    axes: Axes
    dtype: DType
    before: Layout
    after: Layout
    dim: str | None = None
    why: str | None = None  # None: written in the spec

    def __str__(self) -> str:
        items = (*self.axes, label_text(self.dim)) if self.dim is not None else self.axes
        tail = f" (inserted: {self.why})" if self.why else ""
        return f"{self.kind}{subscript(items)} {self.before.text(self.dtype)}{tail}"


@dataclass(frozen=True)
class Local:
    """A step every chip runs on its own shards: inputs and result laid out consistently."""

    step: Step
    inputs: tuple[Layout, ...]
    output: Layout

    def __str__(self) -> str:
        ins = " * ".join(lay.text(t.dtype, local=True) for t, lay in zip(self.step.inputs, self.inputs))
        return f"{ins} -> {self.output.text(self.step.output.dtype, local=True)}"


@dataclass(frozen=True)
class Plan:
    """What one statement becomes on the mesh, in order."""

    items: tuple[Move | Local, ...]
    sizes: dict = field(default_factory=dict)  # label -> global size


class ShardingError(SpecError):
    """A layout symroof cannot run as written, with the collectives that would fix it
    (`fixes`: (description, Move, V) triples, V the bytes per chip once `bytes_known`) and
    the mesh, so that the caller can cost them on a chip."""

    def __init__(self, message: str, fixes=(), text: str | None = None, start: int | None = None,
                 end: int | None = None, mesh: Mesh | None = None):
        self.fixes = tuple(fixes)
        self.mesh = mesh
        super().__init__(message, text, start, end)


def layout_of(tensor: Tensor, labels=None) -> Layout:
    labels = labels or tuple(d.name or str(d.size) for d in tensor.dims)
    return Layout(tuple(labels), tuple(d.axes for d in tensor.dims), tensor.unreduced)


def lower(statement: Contraction | Collective, mesh: Mesh) -> Plan:
    """Lower one statement onto the mesh."""
    if isinstance(statement, Collective):
        before, after = layout_of(statement.input), layout_of(statement.output)
        return Plan((Move(statement.kind, statement.axes, statement.input.dtype, before, after,
                          statement.dim),), {})
    items: list = []
    # Intermediates not yet read, oldest first. A step reads them in the order they were
    # written: a chain's running result, then the operand a step of its own summed a dim
    # out of (`bf16[H, B] * bf16[N, M] -> bf16[B]` writes two before the step reads both).
    pending: list[Layout] = []
    for k, step in enumerate(statement.steps):
        layouts = []
        for i, term in enumerate(step.inputs):
            if term.axes is None:  # an intermediate: as the step that wrote it left it
                layouts.append(pending.pop(0))
            else:
                layouts.append(Layout(term.labels, term.axes, term.unreduced))
        final = k == len(statement.steps) - 1
        carried = _lower_step(step, layouts, final, items)
        if not final:
            pending.append(carried)
    for item in items:
        for layout in ((item.before, item.after) if isinstance(item, Move) else (*item.inputs, item.output)):
            if not _valid(layout):
                raise ShardingError(f"symroof found no valid way to run this layout ({layout.text(DType('?', 0, '?', False))} "
                                    "would split two dims over one axis); write the collectives out")
    # a collective over axes of one chip each moves nothing
    items = [i for i in items if not (isinstance(i, Move) and all(mesh.axis(a).size == 1 for a in i.axes))]
    return Plan(tuple(items), dict(statement.sizes))


def _valid(layout: Layout) -> bool:
    """No axis splits two dims, or splits a dim and holds partial sums too."""
    used = [a for axes in layout.axes for a in axes] + list(layout.unreduced)
    return len(used) == len(set(used))


def _lower_step(step: Step, layouts: list[Layout], final: bool, items: list) -> Layout:
    summed = set(step.summed)
    dtypes = [t.dtype for t in step.inputs]
    every = list(dict.fromkeys(l for t in step.inputs for l in t.labels))
    # contracting dims first: gathering them frees axes that a batch dim may then take
    order = [l for l in every if l in summed] + [l for l in every if l not in summed]
    # 1. shared dims split alike
    for label in order:
        holders = [i for i, lay in enumerate(layouts) if label in lay.labels]
        splits = [layouts[i].of(label) for i in holders]
        if len(holders) < 2 or len(set(splits)) == 1:
            continue
        if label in summed:
            target = _common(splits)
            why = ("a contracting dim split on one side only is gathered first" if () in splits else
                   f"the contracting dim {label_text(label)} is split differently on each side: "
                   "gathered to the split they share")
        else:
            target = max(splits, key=len) if _nested(splits) else _common(splits)
            # a side can take the longer split only where those axes are free in it
            if any(not _free(layouts[i], label, target) for i in holders):
                target = _common(splits)
        for i in holders:
            have = layouts[i].of(label)
            if have == target:
                continue
            if target[:len(have)] == have and label not in summed:
                # replicated over the extra axes: each chip slices its part, no communication
                layouts[i] = layouts[i].with_axes(label, target)
                continue
            extra = tuple(a for a in have if a not in target)
            gathered = layouts[i].with_axes(label, tuple(a for a in have if a in target))
            items.append(Move("AllGather", extra, dtypes[i], layouts[i], gathered,
                              why=why if label in summed else f"{label_text(label)} is split differently "
                                                               "on each side"))
            layouts[i] = gathered
            if gathered.of(label) != target:  # what is left is now a prefix: slice to match
                layouts[i] = layouts[i].with_axes(label, target)
    # 2. partial sums over the axes of split summed dims
    split = {l: next(lay.of(l) for lay in layouts if l in lay.labels) for l in every}
    partial = tuple(dict.fromkeys(a for l in every if l in summed for a in split[l]))
    if final:
        # a result split where its inputs are not: each chip computes only its part (its
        # inputs are replicated there, so it slices them locally, for free)
        for label, want in zip(step.output.labels, step.output.axes):
            if label in split and not split[label] and want and not set(want) & set(partial) and \
                    all(_free(lay, label, want) for lay in layouts if label in lay.labels) and \
                    not any(set(want) & set(split[l]) for l in every if l != label):
                layouts = [lay.with_axes(label, want) if label in lay.labels else lay for lay in layouts]
                split[label] = want
    # 3. the natural result, and case 4
    out_labels = step.output.labels
    natural = Layout(out_labels, tuple(split.get(l, ()) for l in out_labels), partial)
    _check_distinct(natural, step, layouts)
    items.append(Local(step, tuple(layouts), natural))
    if not final:
        if partial:  # a chain reduces its partial sums before the next step reads them
            reduced = Layout(natural.labels, natural.axes)
            items.append(Move("AllReduce", partial, step.output.dtype, natural, reduced,
                              why=f"partial sums over {', '.join(partial)} before the next step"))
            return reduced
        return natural
    written = Layout(out_labels, step.output.axes, step.output.unreduced)
    return _to_written(natural, written, step.output.dtype, items)


def _to_written(have: Layout, want: Layout, dtype: DType, items: list) -> Layout:
    """Collectives that turn the natural result into the layout the spec wrote."""
    stray = [a for a in want.unreduced if a not in have.unreduced]
    if stray:
        raise ShardingError(f"the result is written unreduced over {', '.join(stray)}, but it holds "
                            f"no partial sums over {'it' if len(stray) == 1 else 'them'}")
    reduce_all, kept = [], []
    for axis in have.unreduced:
        if axis in want.unreduced:
            kept.append(axis)
            continue
        target = next((l for l, axes in zip(want.labels, want.axes)
                       if axis in axes and axis not in have.of(l)), None)
        if target is not None and not any(axis in axes for axes in have.axes):
            after = Layout(have.labels, have.axes, tuple(a for a in have.unreduced if a != axis))
            after = after.with_axes(target, have.of(target) + (axis,))
            items.append(Move("ReduceScatter", (axis,), dtype, have, after, target,
                              why=f"partial sums over {axis}, and the result asks for "
                                  f"{label_text(target)} split over {axis}"))
            have = after
        else:
            reduce_all.append(axis)
    if reduce_all:
        after = Layout(have.labels, have.axes, tuple(kept))
        items.append(Move("AllReduce", tuple(reduce_all), dtype, have, after,
                          why=f"partial sums over {', '.join(reduce_all)}"))
        have = after
    # moves of an axis from one dim to another
    for label, axes in zip(want.labels, want.axes):
        for axis in axes:
            if axis in have.of(label):
                continue
            source = next((l for l in have.labels if axis in have.of(l)), None)
            if source is not None and axis not in want.of(source):
                after = have.with_axes(source, tuple(a for a in have.of(source) if a != axis))
                after = after.with_axes(label, after.of(label) + (axis,))
                items.append(Move("AllToAll", (axis,), dtype, have, after, label,
                                  why=f"the result moves the split over {axis} from "
                                      f"{label_text(source)} to {label_text(label)}"))
                have = after
    # gathers where the result is split less than the work was
    for label, axes in zip(want.labels, want.axes):
        extra = tuple(a for a in have.of(label) if a not in axes)
        if extra:
            after = have.with_axes(label, tuple(a for a in have.of(label) if a in axes))
            items.append(Move("AllGather", extra, dtype, have, after,
                              why=f"the result has {label_text(label)} split over "
                                  f"{', '.join(axes) or 'nothing'}"))
            have = after
    # what is left to split further is a local slice of replicated data: free
    for label, axes in zip(want.labels, want.axes):
        have = have.with_axes(label, axes)
    return have


def _check_distinct(natural: Layout, step: Step, layouts: list[Layout]) -> None:
    """Case 4: one axis would split two dims of the result."""
    owner: dict[str, str] = {}
    for label, axes in zip(natural.labels, natural.axes):
        for axis in axes:
            if axis in owner or axis in natural.unreduced:
                other = owner.get(axis)
                fixes = []
                for i, lay in enumerate(layouts):
                    for l in (label, other):
                        if l is not None and l in lay.labels and axis in lay.of(l):
                            gathered = lay.with_axes(l, tuple(a for a in lay.of(l) if a != axis))
                            side = "left" if i == 0 else "right"
                            fixes.append((f"AllGather_{axis} the {side} operand's {label_text(l)} first",
                                          Move("AllGather", (axis,), step.inputs[i].dtype, lay, gathered,
                                               why=f"fix: {label_text(l)} no longer split over {axis}"),
                                          None))
                what = (f"both {label_text(other)} and {label_text(label)}" if other is not None
                        else f"{label_text(label)} and the contracting dim")
                raise ShardingError(f"{axis} would split {what} of the result, and an axis splits at "
                                    "most one dim of a tensor", fixes)
            owner[axis] = label


def _free(layout: Layout, label: str, axes: Axes) -> bool:
    """Whether `label` of this layout may be split over `axes`: no other dim uses them."""
    return not any(set(axes) & set(other) for l, other in zip(layout.labels, layout.axes) if l != label) \
        and not set(axes) & set(layout.unreduced)


def _common(splits) -> Axes:
    """The split every side can reach by gathering: the axes all sides share (D_{YZ} and
    D_Z share Z: gathering Y from the first leaves D_Z), where they come in one order."""
    shared = tuple(a for a in splits[0] if all(a in s for s in splits))
    if all(tuple(a for a in s if a in shared) == shared for s in splits):
        return shared
    n = 0
    while all(len(s) > n and s[n] == splits[0][n] for s in splits):
        n += 1
    return splits[0][:n]


def _nested(splits) -> bool:
    """Whether every split is a prefix of the longest (one side replicated over the rest)."""
    longest = max(splits, key=len)
    return all(longest[:len(s)] == s for s in splits)


def check_collective(kind: str, axes: Axes, dim: str | None, source: Tensor, target: Tensor) -> str | None:
    """What is wrong with a written collective's layouts, in words, or None."""
    before, after = layout_of(source), layout_of(target)
    names = before.labels
    if kind in ("AllGather", "AllToAll") and before.unreduced != after.unreduced:
        return f"an {kind} does not reduce: the result keeps {{U{subscript(before.unreduced)}}}" \
            if before.unreduced else f"an {kind} leaves nothing unreduced"
    if kind == "AllGather":
        missing = [a for a in axes if not any(a in s for s in before.axes)]
        if missing:
            return f"{missing[0]} splits no dim of the input: there is nothing to gather over it"
        expected = tuple(tuple(a for a in s if a not in axes) for s in before.axes)
        for name, want, got, had in zip(names, expected, after.axes, before.axes):
            added = [a for a in got if a not in had]
            if added:
                return f"an AllGather removes a split, but the result adds {added[0]} to {name}"
            if got != want:
                return f"after AllGather over {', '.join(axes)}, {name} is split over " \
                       f"{', '.join(want) or 'nothing'}, not {', '.join(got) or 'nothing'}"
        return None
    if kind in ("AllReduce", "ReduceScatter"):
        missing = [a for a in axes if a not in before.unreduced]
        if missing:
            return f"{kind} over {missing[0]} reduces partial sums: the input needs {{U_{missing[0]}}}"
        left = tuple(a for a in before.unreduced if a not in axes)
        if after.unreduced != left:
            return f"after {kind} over {', '.join(axes)} the result is unreduced over " \
                   f"{', '.join(left) or 'nothing'}"
        for name, had, got in zip(names, before.axes, after.axes):
            want = had + axes if kind == "ReduceScatter" and name == dim else had
            if kind == "ReduceScatter" and name == dim and any(a in s for s in before.axes for a in axes):
                return f"{', '.join(axes)} already splits a dim of the input"
            if got != want:
                return f"after {kind}, {name} is split over {', '.join(want) or 'nothing'}, not " \
                       f"{', '.join(got) or 'nothing'}"
        return None
    # AllToAll: the axes leave the dim they split and go to `dim`
    source_dim = next((n for n, s in zip(names, before.axes) if all(a in s for a in axes)), None)
    if source_dim is None or source_dim == dim:
        return f"an AllToAll moves {', '.join(axes)} from the dim it splits to {dim}; " \
               f"no other dim of the input is split over {', '.join(axes)}"
    for name, had, got in zip(names, before.axes, after.axes):
        want = tuple(a for a in had if a not in axes) if name == source_dim else \
            (had + axes if name == dim else had)
        if got != want:
            return f"after AllToAll, {name} is split over {', '.join(want) or 'nothing'}, not " \
                   f"{', '.join(got) or 'nothing'}"
    return None


def local_size(layout: Layout, label: str, sizes: dict, mesh: Mesh) -> sympy.Expr:
    """A dim's extent on one chip: its size over the chips along the axes that split it."""
    chips = 1
    for axis in layout.of(label):
        chips *= mesh.axis(axis).size
    return sizes[label] / chips


def local_elements(layout: Layout, sizes: dict, mesh: Mesh) -> sympy.Expr:
    return sympy.Mul(*(local_size(layout, l, sizes, mesh) for l in layout.labels))
