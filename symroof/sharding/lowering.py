"""Sharded statements -> what each chip does: local steps on shards, and the collectives
between them, inserted where the layouts demand them and shown, never hidden.

A tensor's layout says which mesh axes split each of its dims, and over which axes it
holds unreduced partial sums. For each binary step:

0. A dim the step needs whole on each chip (a pad's padded dim) is gathered first.
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
    >>> from symroof.lang.parsing import parse
    >>> plan = lower(parse("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]").statements[0],
    ...              parse("mesh X=2; bf16[B] -> bf16[B]").mesh)
    >>> [str(item) for item in plan.items]
    ['bf16[B, D/X] * bf16[D/X, F] -> bf16[B, F] {U_X}', 'AllReduce_X bf16[B, F] {U_X} (inserted: partial sums over X)']
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .. import ops
from ..dtypes import DTYPES, DType
from ..ir import Apply, Collective, Contraction, Mesh, Step, Term, label_text, subscripted
from .layout import (
    Axes,
    Layout,
    Local,
    Move,
    Plan,
    ShardingError,
    check_collective,
    fix_message,
    layout_of,
    local_elements,
    local_size,
)
from .routes import cheapest, kept_axes, to_layout, valid

# The layouts and plans live in `layout.py`; the cost model, the renderers and the resolver
# import them from here, with the lowering that makes them.
__all__ = ["Axes", "Layout", "Local", "Move", "Plan", "ShardingError", "check_collective", "check_layout",
           "fix_message", "layout_of",
           "local_elements", "local_size", "lower"]


# Cached: parse checks each layout by lowering it, and costing lowers it again; statements
# and meshes are frozen, so the second lowering is the first one's plan (never mutated).
@functools.lru_cache(maxsize=4096)
def lower(statement: Contraction | Apply | Collective, mesh: Mesh) -> Plan:
    """Lower one statement onto the mesh."""
    if isinstance(statement, Collective):
        before, after = layout_of(statement.input), layout_of(statement.output)
        return Plan((Move(statement.kind, statement.axes, statement.input.dtype, before, after,
                          statement.dim),), {})
    items: list[Move | Local] = []
    # Intermediates not yet read, oldest first. A step reads them in the order they were
    # written: a chain's running result, then the operand a step of its own summed a dim
    # out of (`bf16[H, B] * bf16[N, M] -> bf16[B]` writes two before the step reads both).
    pending: list[Layout] = []
    for k, step in enumerate(statement.steps):
        layouts = []
        for term in step.inputs:
            if term.axes is None:  # an intermediate: as the step that wrote it left it
                layouts.append(pending.pop(0))
            else:
                layouts.append(Layout(term.labels, term.axes, term.unreduced))
        final = k == len(statement.steps) - 1
        if final and _routes(step, layouts):  # several ways to lay it out: the cheapest
            default: list[Move | Local] = []
            _lower_step(step, list(layouts), final, default)
            items.extend(cheapest(step, layouts, default, _written(step.output), dict(statement.sizes), mesh))
            break
        carried = _lower_step(step, layouts, final, items)
        if not final:
            pending.append(carried)
    for item in items:
        for layout in ((item.before, item.after) if isinstance(item, Move) else (*item.inputs, item.output)):
            if not valid(layout):
                shown = layout.text(DType("?", 0, "?", False))  # its dims and splits: the dtype plays no part
                raise ShardingError(f"symroof found no valid way to run this layout ({shown} would split two "
                                    "dims over one axis); write the collectives out")
    # a collective over axes of one chip each moves nothing
    items = [i for i in items if not (isinstance(i, Move) and all(mesh.axis(a).size == 1 for a in i.axes))]
    return Plan(tuple(items), dict(statement.sizes))


def _routes(step: Step, layouts: list[Layout]) -> bool:
    """Whether a final step is one `routes.cheapest` chooses the layout of: no dim summed
    (an elementwise op, a unary op, a select, a cast, a product with no sum), every operand
    dim in the result, no partial sums in or out, and some operand laid out otherwise than
    the result is written."""
    kind = ops.kind_of(step.kind)
    if step.summed or kind.scans or kind.stats(step.fn) or kind.whole(step) or \
            kind.name not in ("elementwise", "unary", "select", "copy", "contract"):
        return False
    written = _written(step.output)
    if written.unreduced or any(lay.unreduced or not set(lay.labels) <= set(written.labels) for lay in layouts):
        return False
    return any(lay.axes != tuple(written.of(l) for l in lay.labels) for lay in layouts)


def _lower_step(step: Step, layouts: list[Layout], final: bool, items: list[Move | Local]) -> Layout:
    kind = ops.kind_of(step.kind)
    if kind.scans:
        _check_whole(step, layouts)
    if kind.stats(step.fn):
        return _lower_rows(step, kind.stats(step.fn), layouts, final, items)
    if kind.same_layouts:
        _check_same(step, layouts)
    summed = set(step.summed)
    dtypes = [t.dtype for t in step.inputs]
    # 0. dims each chip needs whole (a pad's padded dim: its shards alone cannot be padded)
    for label in kind.whole(step):
        for i, lay in enumerate(layouts):
            if label in lay.labels and lay.of(label):
                gathered = lay.with_axes(label, ())
                items.append(Move("AllGather", lay.of(label), dtypes[i], lay, gathered,
                                  why=f"{step.fn} needs {label_text(label)} whole on each chip"))
                layouts[i] = gathered
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
        for label, want in zip(step.output.labels, _written(step.output).axes):
            # (a scan's dim is not: each chip's part needs every element before it, so it
            # computes the whole scan and slices it)
            if label in split and not split[label] and want and not set(want) & set(partial) and \
                    not (kind.scans and label in summed) and \
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
    return to_layout(natural, _written(step.output), step.output.dtype, items)


def _lower_rows(step: Step, stats: int, layouts: list[Layout], final: bool, items: list[Move | Local]) -> Layout:
    """A softmax or norm: it keeps its input's layout; where a dim it works over is split,
    each row's `stats` fp32 statistics are combined across those axes (an AllReduce of
    stats values per row), not the whole result. A scale or bias is laid out as the input,
    sliced where it is replicated and gathered where it is split otherwise."""
    x = layouts[0]
    for i in range(1, len(layouts)):
        for label in layouts[i].labels:
            have, want = layouts[i].of(label), x.of(label)
            if have != want and want[:len(have)] != have:
                kept = kept_axes(have, want)
                gathered = layouts[i].with_axes(label, kept)
                items.append(Move("AllGather", tuple(a for a in have if a not in kept), step.inputs[i].dtype,
                                  layouts[i], gathered, why=f"{label_text(label)} is split otherwise "
                                                            "than in the input"))
                layouts[i] = gathered
            layouts[i] = layouts[i].with_axes(label, want)
    natural = Layout(step.output.labels, tuple(x.of(l) for l in step.output.labels))
    items.append(Local(step, tuple(layouts), natural))
    split = tuple(dict.fromkeys(a for l in step.summed for a in x.of(l)))
    if split:
        rows = tuple(l for l in x.labels if l not in step.summed)
        stat = Layout(rows, tuple(x.of(l) for l in rows))
        over = subscripted(step.fn or step.kind, [label_text(l) for l in step.summed], short=True)
        items.append(Move("AllReduce", split, DTYPES["fp32"], stat, stat, copies=stats,
                          why=f"{over} over a dim split across {', '.join(split)}: {stats} "
                              f"fp32 statistic{'s' if stats > 1 else ''} per row combined"))
    if not final:
        return natural
    return to_layout(natural, _written(step.output), step.output.dtype, items)


def _check_whole(step: Step, layouts: list[Layout]) -> None:
    """A scan over a dim split across chips: each chip's part needs the totals of the
    chips before it, a prefix across the mesh that symroof does not cost. An error, with
    the AllGather that makes the dim whole first."""
    for i, lay in enumerate(layouts):
        for label in step.summed:
            axes = lay.of(label) if label in lay.labels else ()
            if not axes:
                continue
            gathered = lay.with_axes(label, ())
            fix = (f"{subscripted('AllGather', axes)} {label_text(label)} first",
                   Move("AllGather", axes, step.inputs[i].dtype, lay, gathered,
                        why=f"fix: {label_text(label)} whole on each chip"), None)
            raise ShardingError(f"{subscripted(step.fn or step.kind, (label_text(label),), short=True)} scans "
                                f"{label_text(label)}, which is split over "
                                f"{', '.join(axes)}: each element needs every one before it, on other chips too "
                                "(a prefix across the mesh, which symroof does not cost)", [fix])


def _written(result: Term) -> Layout:
    """The layout the spec wrote for a statement's result. Only an intermediate has no
    axes (its layout is the lowering's to choose), and none is ever asked for here."""
    return Layout(result.labels, result.axes or ((),) * len(result.labels), result.unreduced)


def _check_same(step: Step, layouts: list[Layout]) -> None:
    """Elementwise operands: a dim both have is split alike, or on one side only (the other
    side is replicated there and slices its part for free)."""
    for label in layouts[0].labels:
        if label not in layouts[1].labels:
            continue
        left, right = layouts[0].of(label), layouts[1].of(label)
        if _nested([left, right]):
            continue
        fixes = []
        for i, lay in enumerate(layouts):
            kept = kept_axes(lay.of(label), layouts[1 - i].of(label))
            extra = tuple(a for a in lay.of(label) if a not in kept)
            gathered = lay.with_axes(label, kept)
            side = "left" if i == 0 else "right"
            fixes.append((f"{subscripted('AllGather', extra)} the {side} operand's {label_text(label)} first",
                          Move("AllGather", extra, step.inputs[i].dtype, lay, gathered,
                               why=f"fix: {label_text(label)} split as the other side"), None))
        raise ShardingError(f"{label_text(label)} is split over {', '.join(left) or 'nothing'} on the left "
                            f"and {', '.join(right) or 'nothing'} on the right: an elementwise op needs "
                            "its operands laid out alike", fixes)


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
                            fixes.append((f"{subscripted('AllGather', (axis,))} the {side} operand's {label_text(l)} "
                                          "first",
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


def _common(splits: Sequence[Axes]) -> Axes:
    """The split every side can reach by gathering: the axes all sides share (D_{YZ} and
    D_Z share Z: gathering Y from the first leaves D_Z), where they come in one order."""
    shared = tuple(a for a in splits[0] if all(a in s for s in splits))
    if all(tuple(a for a in s if a in shared) == shared for s in splits):
        return shared
    n = 0
    while all(len(s) > n and s[n] == splits[0][n] for s in splits):
        n += 1
    return splits[0][:n]


def _nested(splits: Sequence[Axes]) -> bool:
    """Whether every split is a prefix of the longest (one side replicated over the rest)."""
    longest = max(splits, key=len)
    return all(longest[:len(s)] == s for s in splits)


def check_layout(statement: Contraction | Apply, mesh: Mesh) -> None:
    """Raise ShardingError where the statement's layout cannot run on the mesh, with the
    fixes costed in bytes per chip. The resolver calls this (`parse` hands it over) so
    that the error points at the statement."""
    try:
        lower(statement, mesh)
    except ShardingError as err:
        sizes = dict(statement.sizes)
        fixes = [(what, fix, fix.bytes_per_chip(sizes, mesh)) for what, fix, _ in err.fixes]
        raise ShardingError(fix_message(err.message, fixes), fixes, mesh=mesh, problem=err.message) from None
