"""Layouts on a mesh, and what a statement becomes there: the vocabulary of `lower.py`.

A `Layout` says which mesh axes split each dim of a tensor and which axes it holds
unreduced partial sums over; a `Plan` is a statement lowered onto the mesh, its items
the `Local` steps each chip runs on its shards and the collectives (`Move`) between
them. `lower.py` decides the plan; the cost model reads it (`local_size` and
`local_elements` are the shard sizes it costs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import sympy

from ..dtypes import DType
from ..errors import SpecError
from ..ir import Mesh, Step, Tensor, applied, label_text, subscripted

Axes = tuple[str, ...]


@dataclass(frozen=True)
class Layout:
    """Which axes split each dim (in the order of `labels`), and the unreduced axes."""

    labels: tuple[str, ...]
    axes: tuple[Axes, ...]
    unreduced: Axes = ()

    def of(self, label: str) -> Axes:
        return self.axes[self.labels.index(label)]

    def with_axes(self, label: str, axes: Axes) -> Layout:
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
                dims.append(subscripted(name, () if local else axes))
        notes = f" {{{subscripted('U', self.unreduced)}}}" if self.unreduced else ""
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
    copies: int = 1  # values per element of `before`/`after` (a softmax's max and sum: 2)

    def __str__(self) -> str:
        items = (*self.axes, label_text(self.dim)) if self.dim is not None else self.axes
        tail = f" (inserted: {self.why})" if self.why else ""
        return f"{subscripted(self.kind, items)} {self.before.text(self.dtype)}{tail}"

    def bytes_per_chip(self, sizes: Mapping[str, sympy.Expr], mesh: Mesh) -> sympy.Expr:
        """V: the bytes each chip holds of the collective's larger side (after an AllGather,
        before anything else), what its time on the links is charged for."""
        larger = self.after if self.kind == "AllGather" else self.before
        return self.dtype.bytes * self.copies * local_elements(larger, sizes, mesh)


@dataclass(frozen=True)
class Local:
    """A step every chip runs on its own shards: inputs and result laid out consistently."""

    step: Step
    inputs: tuple[Layout, ...]
    output: Layout

    def __str__(self) -> str:
        ins = [lay.text(t.dtype, local=True) for t, lay in zip(self.step.inputs, self.inputs)]
        out = self.output.text(self.step.output.dtype, local=True)
        if self.step.form != "einsum":  # a named op keeps its word on each chip: gelu(bf16[B/X]) -> ...
            return applied(self.step.fn or self.step.kind, self.step.over, self.step.form, ins, out)
        return f"{' * '.join(ins)} -> {out}"


@dataclass(frozen=True)
class Plan:
    """What one statement becomes on the mesh, in order."""

    items: tuple[Move | Local, ...]
    sizes: dict[str, sympy.Expr] = field(default_factory=dict)  # label -> global size


def layout_of(tensor: Tensor, labels: Sequence[str] | None = None) -> Layout:
    labels = labels or tuple(d.name or str(d.size) for d in tensor.dims)
    return Layout(tuple(labels), tuple(d.axes for d in tensor.dims), tensor.unreduced)


def local_size(layout: Layout, label: str, sizes: Mapping[str, sympy.Expr], mesh: Mesh) -> sympy.Expr:
    """A dim's extent on one chip: its size over the chips along the axes that split it."""
    return sizes[label] / mesh.over(layout.of(label))


def local_elements(layout: Layout, sizes: Mapping[str, sympy.Expr], mesh: Mesh) -> sympy.Expr:
    return sympy.Mul(*(local_size(layout, l, sizes, mesh) for l in layout.labels))


# A collective that would make a layout run: how to say it, the move, and the bytes it moves
# per chip (None until the sizes are known)
Fix = tuple[str, "Move", "sympy.Expr | None"]


class ShardingError(SpecError):
    """A layout symroof cannot run as written, with the collectives that would fix it
    (`fixes`: (description, Move, V) triples, V the bytes per chip once `bytes_known`) and
    the mesh, so that the caller can cost them on a chip. `problem` is the message without
    the fixes, for a caller that words them again (with their times)."""

    def __init__(self, message: str, fixes: Sequence[Fix] = (), text: str | None = None, start: int | None = None,
                 end: int | None = None, mesh: Mesh | None = None, problem: str | None = None):
        self.fixes = tuple(fixes)
        self.mesh = mesh
        self.problem = message if problem is None else problem
        super().__init__(message, text, start, end)


def fix_message(problem: str, fixes: Sequence[Fix], times: Sequence[str] | None = None) -> str:
    """A layout that cannot run, and the collectives that would fix it as a spec line
    writes them, with the bytes each moves per chip (and its time, where given)."""
    if not fixes:
        return problem
    said = []
    for i, (_, fix, V) in enumerate(fixes):
        cost = f"{V} bytes per chip" + (f", {times[i]}" if times else "")
        said.append(f"{subscripted(fix.kind, fix.axes)} {fix.before.text(fix.dtype)} -> {fix.after.text(fix.dtype)} "
                    f"({cost})")
    return f"{problem}; gather {'one side' if len(said) > 1 else 'it'} first: " + ", or ".join(said)


def check_collective(kind: str, axes: Axes, dim: str | None, source: Tensor, target: Tensor) -> str | None:
    """What is wrong with a written collective's layouts, in words, or None."""
    before, after = layout_of(source), layout_of(target)
    names = before.labels
    if kind == "Permute":  # each chip's block moves to its neighbour: the layout stays
        if len(axes) != 1:
            return "a Permute sends each chip's block to its neighbour along one mesh axis: Permute_X"
        if before != after:
            return "a Permute moves each chip's block to its neighbour and keeps its layout: the result is " \
                   "split and unreduced as the input is"
        return None
    if kind in ("AllGather", "AllToAll") and before.unreduced != after.unreduced:
        return f"an {kind} does not reduce: the result keeps {{{subscripted('U', before.unreduced)}}}" \
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
            return f"{kind} over {missing[0]} reduces partial sums: the input needs {{{subscripted('U', missing[:1])}}}"
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
