"""Changing a layout into another (the collectives that do it), and the cheapest route for
a step that works element by element: `lower.py` lowers each statement with these.

`to_layout` turns one layout into another: partial sums reduced (AllReduce, or a
ReduceScatter where the target asks for a dim split over that axis), a split moved from
one dim to another (AllToAll), a split removed (AllGather), and what is left to split
further sliced locally, for free, only where the split held is a prefix of the one wanted
(D_Y cannot be sliced into D_{X,Y}: chip (x, y) needs block 2x + y of D, and D_Y's chip y
holds block y of 2; it gathers Y first).

`cheapest`: a step with no summed dim (an elementwise op, a unary op, a select, a cast,
a product with no sum) computes its result in some layout C; each operand is first laid
out as C (restricted to its dims), and the result then as written. The routes tried: C the
written result's layout (GSPMD's: its partitioner reshards an elementwise op's operands to
the op's sharding, HandleElementwise in XLA's spmd_partitioner.cc), the one the operands'
splits agree on (`sharding._lower_step`'s), and each operand's own layout (with the result's
splits on the dims it lacks, or without). The route kept moves the fewest bytes over the
network (the collectives' V summed, per chip); on a tie, the one with the least work per
chip (its result's elements on each chip); on a tie there too, GSPMD's. Where which is
cheaper depends on the sizes (a broadcast operand against a whole array), the route kept
is the first that no other is known to beat, and its first collective says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

import sympy

from ..dtypes import DType
from ..ir import Mesh, Step, label_text
from .layout import Axes, Layout, Local, Move, ShardingError, local_elements


def kept_axes(have: Axes, other: Axes) -> Axes:
    """The axes a dim split over `have` keeps when it gathers the rest, so that `other` can
    be reached from it by slicing alone: their longest common prefix. Gathering a dim's
    inner axes leaves its outer split whole (K_{P,Y} gathered over Y is K_P); gathering an
    outer one leaves each chip strided blocks, no layout at all (K_{P,Y} gathered over P
    gives chip y blocks y, |Y| + y, ..., where K_Y's chip y holds block y: the first
    |P| blocks of the |P| x |Y|). So K_Y against K_{P,Y} keeps nothing (Y gathered, then P, Y
    sliced), and so does K_{P,Y} against K_Y (P and Y gathered, then Y sliced)."""
    n = 0
    while n < min(len(have), len(other)) and have[n] == other[n]:
        n += 1
    return tuple(have[:n])


def valid(layout: Layout) -> bool:
    """No axis splits two dims, or splits a dim and holds partial sums too."""
    used = [a for axes in layout.axes for a in axes] + list(layout.unreduced)
    return len(used) == len(set(used))


def to_layout(have: Layout, want: Layout, dtype: DType, items: list[Move | Local], whose: str = "the result") -> Layout:
    """Collectives that turn `have` into `want` (the layout the spec wrote for a result, or
    the one an operand is resharded to: `whose` names it in each collective's why)."""
    stray = [a for a in want.unreduced if a not in have.unreduced]
    if stray:
        raise ShardingError(f"the result is written unreduced over {', '.join(stray)}, but it holds "
                            f"no partial sums over {'it' if len(stray) == 1 else 'them'}")
    reduce_all, kept_unreduced = [], []
    scatter: list[tuple[str, str]] = []  # (axis, the dim it splits): one ReduceScatter a run
    for axis in have.unreduced:
        if axis in want.unreduced:
            kept_unreduced.append(axis)
            continue
        target = next((l for l, axes in zip(want.labels, want.axes)
                       if axis in axes and axis not in have.of(l)), None)
        if target is not None and not any(axis in axes for axes in have.axes):
            scatter.append((axis, target))
        else:
            reduce_all.append(axis)
    # consecutive axes scattering onto one dim go in one ReduceScatter over them all, as an
    # AllGather over several axes runs: over their rings at once, not one axis after another
    for target, group in itertools.groupby(scatter, key=lambda s: s[1]):
        run = [a for a, _ in group]
        after = Layout(have.labels, have.axes, tuple(a for a in have.unreduced if a not in run))
        after = after.with_axes(target, have.of(target) + tuple(run))
        over = ", ".join(run)
        items.append(Move("ReduceScatter", tuple(run), dtype, have, after, target,
                          why=f"partial sums over {over}, and {whose} asks for "
                              f"{label_text(target)} split over {over}"))
        have = after
    if reduce_all:
        after = Layout(have.labels, have.axes, tuple(kept_unreduced))
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
                                  why=f"{whose} moves the split over {axis} from "
                                      f"{label_text(source)} to {label_text(label)}"))
                have = after
    # gathers where the layout wanted is split less, or otherwise than a slice of it reaches
    for label, axes in zip(want.labels, want.axes):
        extra = tuple(a for a in have.of(label) if a not in kept_axes(have.of(label), axes))
        if extra:
            after = have.with_axes(label, tuple(a for a in have.of(label) if a not in extra))
            items.append(Move("AllGather", extra, dtype, have, after,
                              why=f"{whose} has {label_text(label)} split over "
                                  f"{', '.join(axes) or 'nothing'}"))
            have = after
    # what is left to split further is a local slice of replicated data: free
    for label, axes in zip(want.labels, want.axes):
        have = have.with_axes(label, axes)
    return have


def cheapest(step: Step, layouts: list[Layout], default: list[Move | Local], written: Layout,
             sizes: Mapping[str, sympy.Expr], mesh: Mesh) -> list[Move | Local]:
    """The items (collectives and the local step) of the cheapest route for a final step with
    no summed dim, `default` the route `sharding._lower_step` found (see the module's doc)."""
    natural = next(i.output for i in default if isinstance(i, Local))
    out = Layout(written.labels, written.axes)
    candidates = [("the operands laid out as the result (GSPMD's route)", out)]
    names = _operand_names(len(layouts))
    for name, lay in zip(names, layouts):
        own = Layout(out.labels, tuple(lay.of(l) if l in lay.labels else () for l in out.labels))
        candidates.append((f"the result computed as {name} is laid out", own))
        used = {a for axes in own.axes for a in axes}
        filled = Layout(out.labels, tuple(own.of(l) if l in lay.labels or set(out.of(l)) & used else out.of(l)
                                          for l in out.labels))
        candidates.append((f"the result computed as {name} is laid out, split as written on the dims it lacks",
                           filled))
    # in the order ties go: GSPMD's, then the one the splits agree on, then each operand's
    candidates.insert(1, ("the result computed where the operands' splits agree, the operands moved there", natural))
    routes, tried = [], []
    for what, layout in candidates:
        if not valid(layout) or layout in tried:
            continue
        tried.append(layout)
        try:
            routes.append((what, layout, _via(step, layouts, layout, written, names)))
        except ShardingError:
            continue
    # the one the splits agree on, as _lower_step lays its operands out (it may gather where
    # _via moves a split: each is tried)
    routes.insert(min(1, len(routes)), ("the result computed where the operands' splits agree, gathered there",
                                        natural, default))
    costed = [(what, items, _network_bytes(items, sizes, mesh), local_elements(lay, sizes, mesh))
              for what, lay, items in routes]
    best, unsure = costed[0], []
    for other in costed[1:]:
        better = _better(other[2:], best[2:])
        if better is None and _better(best[2:], other[2:]) is None:
            unsure.append(other)
        elif better:
            best = other
    what, items, V, _ = best
    moves = [i for i in items if isinstance(i, Move) and not all(mesh.axis(a).size == 1 for a in i.axes)]
    dearer = [c for c in costed if c[2] != V]
    if moves and (dearer or unsure):
        shown = "; ".join(f"{c[0]}: {c[2]}" for c in (unsure or dearer)[:2])
        note = (f"route: {what}, {V} bytes per chip over the network, the fewest of {len(costed)} routes tried"
                if not unsure else
                f"route: {what}, {V} bytes per chip over the network; which route moves the fewest bytes "
                "depends on the sizes")
        first = moves[0]
        items = [Move(i.kind, i.axes, i.dtype, i.before, i.after, i.dim, f"{i.why}; {note} ({shown})", i.copies)
                 if i is first else i for i in items]
    return items


def _via(step: Step, layouts: list[Layout], compute: Layout, written: Layout, names: list[str]) -> list[Move | Local]:
    """The route that lays each operand out as `compute` (on its own dims), runs the step
    there, and lays its result out as written."""
    items: list[Move | Local] = []
    ins = []
    for i, lay in enumerate(layouts):
        target = Layout(lay.labels, tuple(compute.of(l) for l in lay.labels))
        ins.append(to_layout(lay, target, step.inputs[i].dtype, items, names[i]))
    items.append(Local(step, tuple(ins), compute))
    to_layout(compute, written, step.output.dtype, items)
    for item in items:
        if not all(valid(lay) for lay in ((item.before, item.after) if isinstance(item, Move) else
                                          (*item.inputs, item.output))):
            raise ShardingError("no valid layout on this route")
    return items


def _operand_names(n: int) -> list[str]:
    if n == 2:
        return ["the left operand", "the right operand"]
    if n == 1:
        return ["the operand"]
    return [f"operand {i + 1}" for i in range(n)]


def _network_bytes(items: Sequence[Move | Local], sizes: Mapping[str, sympy.Expr], mesh: Mesh) -> sympy.Expr:
    """The collectives' V summed, per chip (what cost.py charges, `Move.bytes_per_chip`); a
    collective over axes of one chip, nothing."""
    return sympy.Add(*(i.bytes_per_chip(sizes, mesh) for i in items
                       if isinstance(i, Move) and not all(mesh.axis(a).size == 1 for a in i.axes)))


def _better(a: tuple, b: tuple) -> bool | None:
    """Whether (bytes, work) `a` is known to beat `b`: never more bytes and not the same
    count, or the same count and never more work. None where it depends on the sizes."""
    for x, y in zip(a, b):
        sign = _compare(x, y)
        if sign != 0:
            return None if sign is None else sign < 0
    return False


def _compare(x: sympy.Expr, y: sympy.Expr) -> int | None:
    """0 where x and y are the same count; -1 where x <= y at every size (every dim and
    mesh axis a positive integer), 1 where x >= y; None where it depends on the sizes. The
    difference's numerator with each size s written 1 + t (t >= 0): all its coefficients
    of one sign settle it (B*D - D = t_B (1 + t_D) >= 0)."""
    d = sympy.cancel(sympy.together(x - y))
    if d == 0:
        return 0
    num, den = sympy.fraction(d)
    signs = {_sign_everywhere(num), _sign_everywhere(den)}
    if None in signs:
        return None
    return _sign_everywhere(num) * _sign_everywhere(den)  # type: ignore[operator]


def _sign_everywhere(p: sympy.Expr) -> int | None:
    """1 where the polynomial p >= 0 at every positive integer point (not identically 0),
    -1 where p <= 0 there; None where neither is shown."""
    shifted = {s: 1 + sympy.Dummy(nonnegative=True) for s in p.free_symbols}
    q = sympy.expand(p.xreplace(shifted))
    if q.is_number:
        return 1 if q > 0 else -1 if q < 0 else None
    coeffs = sympy.Poly(q, *[t.free_symbols.pop() for t in shifted.values()]).coeffs()
    if all(c >= 0 for c in coeffs):
        return 1
    if all(c <= 0 for c in coeffs):
        return -1
    return None
