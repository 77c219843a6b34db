"""Where a mesh's ICI axes lie on a torus chip's pod: its physical axes, `pod_shape` in
hardware.json (16 x 16 on v5e, 16 x 20 x 28 on v5p).

A logical axis no longer than a physical axis lies along one of them, where the axes
before it leave room, and is costed as it always was, by its own length. A longer one
cannot: a 2D torus of 16 x 16 has no axis of 64. It spans several physical axes, whole
ones first and the rest on the next: v5e's X=64 is 16 (a whole axis, a ring) x 4 (a part
of the other, a line), and collectives.py costs it as a collective over those two.
Several logical axes may share one physical axis (v5e's X=4, Y=4 lie along one axis of
16); together the ICI axes must fit the pod, and where the axes before one leave no
single physical axis room for it, it too spans several (X=8, Y=8, Z=4: Z is 2 x 2).

The axes are laid in mesh order; for each, the placement with the fewest pieces, then
the most of them closing into rings (v5p's X=32 is 8 x 4, two rings, not 16 x 2, a ring
and a line), then the largest pieces, then the most pieces filling what is left of a
physical axis, then the earlier physical axes. Where that leaves no room for a later axis, an earlier one
takes its next placement (a search, small: a pod has at most three axes).

Real slices are smaller boxes of the pod (256 v5p chips are sold as 4x8x8, not 16x16):
`--slice 4x8x8` (`Chip.on_slice`) lays the axes on the slice instead, where a piece closes
into a ring only when it takes a whole axis of the slice, one long enough to wrap. On the
pod, each piece is taken as a slice of its own, a ring by its own length.

Examples (each piece: its length, and True/False where the slice decides if it is a ring):
    >>> from symroof.hardware.chips import get_chip
    >>> v5e = get_chip("v5e")
    >>> lay_out([MeshAxis("X", 64)], v5e)
    {'X': ((16, None), (4, None))}
    >>> lay_out([MeshAxis("X", 4), MeshAxis("Y", 4), MeshAxis("Z", 16)], v5e)
    {'X': ((4, None),), 'Y': ((4, None),), 'Z': ((16, None),)}
    >>> lay_out([MeshAxis("X", 256)], get_chip("v5p"))
    {'X': ((16, None), (16, None))}
    >>> lay_out([MeshAxis("X", 256)], get_chip("v5p").on_slice("4x8x8"))
    {'X': ((8, True), (8, True), (4, True))}
    >>> lay_out([MeshAxis("X", 16), MeshAxis("Y", 16)], get_chip("v5p").on_slice("4x8x8"))
    {'X': ((8, True), (2, False)), 'Y': ((8, True), (2, False))}
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence

from ..errors import HardwareError
from ..ir import MeshAxis
from .chips import Chip


def pod_shape(chip: Chip | None) -> tuple[int, ...] | None:
    """The physical axes a chip's ICI axes are laid on: the slice given (`Chip.on_slice`),
    else its torus pod's shape; None for no chip (a symbolic one), a switch or fully
    connected node, or a shape no source gives."""
    if chip is None or not chip.texts.get("interconnect.topology", "").startswith("torus"):
        return None
    return chip.slice or chip.pod_shape


# A piece of a logical axis: its length, and whether it closes into a ring (None: judged
# by its own length, as a slice of its own would be: collectives.link)
Piece = tuple[int, "bool | None"]


def lay_out(axes: Sequence[MeshAxis], chip: Chip | None) -> dict[str, tuple[Piece, ...]]:
    """Each ICI axis's pieces by name: the lengths it takes on the physical axes it spans,
    largest first; one piece, its own size, where it lies along one. On a slice a piece is
    a ring only where it takes a whole axis of the slice, one long enough to wrap; on the
    pod each piece is taken as a slice of its own. Empty where the chip has no pod shape;
    a HardwareError, saying what would fit, where the axes do not fit."""
    shape = pod_shape(chip)
    # an axis without a size is not laid: its formulas take it as one physical axis of its own
    ici = [a for a in axes if a.link == "ici" and not a.symbolic]
    if shape is None or not ici:
        return {}
    assert chip is not None  # a shape comes from a chip
    whole = shape if chip.slice else None
    placed = _place(tuple(a.number for a in ici), shape, _wrap(chip), whole)
    if placed is None:
        raise HardwareError(_unplaceable(ici, shape, chip))
    return {a.name: _pieces(split, _wrap(chip), whole) for a, split in zip(ici, placed)}


def placement(axes: Sequence[MeshAxis], chip: Chip | None) -> str | None:
    """Where the ICI axes are laid, in words: on the slice given; or, where the chip's
    vendor slice of that many chips would cost them otherwise (its axes are shorter, and
    may not close into rings), that they were laid on the pod and how to cost them on the
    slice, so that the choice is never silent. None where there is nothing to say.

    Examples:
        >>> from symroof.hardware.chips import get_chip
        >>> placement([MeshAxis("X", 256)], get_chip("v5p"))
        "ICI axes laid on TPU v5p's 16x20x28 pod; on its 256-chip slice, 4x8x8, they cost otherwise (--slice 4x8x8)"
        >>> placement([MeshAxis("X", 256)], get_chip("v5p").on_slice("4x8x8"))
        'ICI axes laid on a 4x8x8 slice'
        >>> placement([MeshAxis(a, 4) for a in "XYZ"], get_chip("v5p")) is None  # 4x4x4: rings either way
        True
    """
    if chip is None or pod_shape(chip) is None or not any(a.link == "ici" for a in axes):
        return None
    symbolic = [a.name for a in axes if a.link == "ici" and a.symbolic]
    if symbolic:
        return (f"ICI axis{'es' if len(symbolic) > 1 else ''} without a size ({', '.join(symbolic)}) taken as one "
                f"physical axis each, not laid on {chip.name}'s pod: the formulas hold while each fits one axis "
                f"of it ({' x '.join(map(str, pod_shape(chip) or ()))})")
    if chip.slice:
        return f"ICI axes laid on a {'x'.join(map(str, chip.slice))} slice"
    vendor = chip.vendor_slice(math.prod(a.number for a in axes if a.link == "ici"))
    if vendor is None or vendor == chip.pod_shape:
        return None
    try:
        wrap = _wrap(chip)
        same = _rings_of(lay_out(axes, chip.on_slice(vendor)), wrap) == _rings_of(lay_out(axes, chip), wrap)
    except HardwareError:
        same = False
    if same:
        return None
    shown, pod = "x".join(map(str, vendor)), "x".join(map(str, chip.pod_shape or ()))
    return f"ICI axes laid on {chip.name}'s {pod} pod; on its {math.prod(vendor)}-chip slice, {shown}, " \
           f"they cost otherwise (--slice {shown})"


def _rings_of(laid: dict[str, tuple[Piece, ...]], wrap: int) -> dict[str, list[tuple[int, bool]]]:
    """Each axis's pieces with whether each is a ring, decided (by its length where undecided)."""
    return {name: sorted((size, _rings(size, wrap) if ring is None else ring) for size, ring in pieces)
            for name, pieces in laid.items()}


def spans(axis: MeshAxis, laid: dict[str, tuple[Piece, ...]]) -> list[tuple[MeshAxis, bool | None]]:
    """The physical sub-axes a logical axis spans (itself, where it lies along one), each
    with whether it is a ring (None: by its own length)."""
    if axis.symbolic:
        return [(axis, axis.ring)]
    pieces = laid.get(axis.name, ((axis.size, None),))
    if len(pieces) == 1:
        return [(axis, pieces[0][1])]
    return [(MeshAxis(axis.name, size, axis.link), ring) for size, ring in pieces]


def _wrap(chip: Chip | None) -> int:
    """The length from which (and whose multiples) a torus axis closes into a ring; 0: never."""
    wrap = chip.figure("interconnect.wraparound_min_axis_size") if chip is not None else None
    return int(wrap) if wrap else 0


@functools.lru_cache(maxsize=1024)
def _place(sizes: tuple[int, ...], room: tuple[int, ...], wrap: int = 0,
           whole: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], ...] | None:
    """Each size's split (one factor per physical axis), placed in order in the room left
    on each physical axis (a length, divided by each piece laid along it); None where they
    do not fit. `whole` is the slice's shape, where the room is a slice."""
    if not sizes:
        return ()
    for split in _choices(sizes[0], room, wrap, whole):
        rest = _place(sizes[1:], tuple(r // f for r, f in zip(room, split)), wrap, whole)
        if rest is not None:
            return (split, *rest)
    return None


def _pieces(split: tuple[int, ...], wrap: int = 0, whole: tuple[int, ...] | None = None) -> tuple[Piece, ...]:
    """A placement's pieces, largest first: when two pieces cost the same per byte, the
    larger one moving the whole array is the faster order (collectives.time). On a slice,
    a piece is a ring where it is the whole slice axis and that wraps; a line otherwise."""
    pieces = [(f, None if whole is None else (f == w and _rings(f, wrap)))
              for f, w in zip(split, whole or split) if f > 1]
    return tuple(sorted(pieces, key=lambda p: -p[0])) or ((1, None),)


def closes_into_ring(chip: Chip, length: int) -> bool:
    """Whether a whole torus axis of this length closes into a ring on the chip (at its
    `wraparound_min_axis_size` and multiples; never where the file gives none)."""
    return _rings(length, _wrap(chip))


def _rings(length: int, wrap: int) -> bool:
    return bool(wrap) and length >= wrap and length % wrap == 0


@functools.lru_cache(maxsize=1024)
def _choices(n: int, room: tuple[int, ...], wrap: int = 0,
             whole: tuple[int, ...] | None = None) -> tuple[tuple[int, ...], ...]:
    """Every way to lay an axis of n on the physical axes (one factor each, within its
    room), the preferred first: fewest pieces (one, where it fits: the cost as before),
    then the most rings, then the largest pieces (whole axes first), then those filling
    what is left of an axis, then the earlier axes."""
    def preference(split: tuple[int, ...]) -> tuple:
        pieces = _pieces(split, wrap, whole)
        lines = sum(1 for p, ring in pieces if not (_rings(p, wrap) if ring is None else ring))
        filled = sum(1 for f, r in zip(split, room) if f > 1 and f == r)
        return (len(pieces), lines, tuple(-p for p, _ in pieces), -filled)
    return tuple(sorted(_splits(n, room), key=preference))


def _splits(n: int, room: tuple[int, ...]) -> Iterator[tuple[int, ...]]:
    """n as a product of one factor per physical axis, each at most its room; the larger
    factors first on the earlier axes."""
    if not room:
        if n == 1:
            yield ()
        return
    for f in range(min(n, room[0]), 0, -1):
        if n % f == 0:
            for rest in _splits(n // f, room[1:]):
                yield (f, *rest)


def _unplaceable(ici: list[MeshAxis], shape: tuple[int, ...], chip: Chip) -> str:
    """Which axis does not fit beside the ones before it, and the nearest sizes that would."""
    k = next(i for i in range(len(ici)) if _place(tuple(a.number for a in ici[:i + 1]), shape) is None)
    axis, before = ici[k], tuple(a.number for a in ici[:k])
    def fits(m: int) -> bool:
        return _place((*before, m), shape) is not None
    smaller = next((m for m in range(axis.number - 1, 0, -1) if fits(m)), None)
    larger = next((m for m in range(axis.number + 1, math.prod(shape) // math.prod(before) + 1) if fits(m)), None)
    near = [m for m in (smaller, larger) if m is not None]
    beside = f" beside {', '.join(map(str, ici[:k]))}" if k else ""
    would = " or ".join(f"{axis.name}={m}" for m in near)
    where = f"the {'x'.join(map(str, shape))} slice of {chip.name}" if chip.slice else \
        f"{chip.name}'s {'x'.join(map(str, shape))} ICI torus"
    return (f"mesh axis {axis} does not fit {where}{beside}: "
            f"an axis lies along one physical axis or spans several, its size the product of the "
            f"lengths it takes on each; {would} would fit, or put it on DCN ({axis.name}={axis.size}@dcn)")


def check_cases(axes: Sequence[MeshAxis], chip: Chip | None) -> None:
    """An ICI axis written `@ring` or `@line` is costed as written, or refused, with why:
    where no chip decides (a symbolic chip, --ici-bw alone) it is taken as written; on a
    switch or fully connected chip (NVLink, Infinity Fabric) there is no ring to choose; on
    a torus an axis with a size is what the chip makes of it (v5p's X=8 closes into a ring,
    v5e's X=8 does not, v5e's X=64 spans a ring of 16 and a line of 4), and the case written
    must be that one; a ring written without a size needs a chip whose axes can close."""
    if chip is None:
        return
    for axis in axes:
        if axis.link != "ici" or axis.ring is None:
            continue
        topology = chip.texts.get("interconnect.topology", "")
        name = chip.texts.get("interconnect.name", "ICI")
        if not topology.startswith("torus"):
            size = "" if axis.symbolic else f"={axis.size}"
            raise HardwareError(f"mesh axis {axis}: {chip.name}'s {name} is a {topology or 'network'}, not a torus: "
                                f"there is no ring or line to choose; write {axis.name}{size}")
        if axis.symbolic:
            if axis.ring and not chip.figure("interconnect.wraparound_min_axis_size"):
                raise HardwareError(f"mesh axis {axis}: no source gives the length at which {chip.name}'s axes "
                                    "close into rings (wraparound_min_axis_size), so symroof takes them as lines: "
                                    f"write {axis.name}@line")
            continue
        pieces = spans(axis, lay_out([a for a in axes if a.link == "ici"], chip))
        if len(pieces) > 1:
            raise HardwareError(f"mesh axis {axis} spans {len(pieces)} of {chip.name}'s physical axes "
                                f"({' x '.join(str(p.size) for p, _ in pieces)}), not one "
                                f"{'ring' if axis.ring else 'line'}: write {axis.name}={axis.size} for what it "
                                "costs laid on them")
        ring = pieces[0][1]
        if ring is None:  # by its own length
            ring = _rings(axis.number, _wrap(chip))
        if ring != axis.ring:
            raise HardwareError(case_refused(axis, chip, ring))


def case_refused(axis: MeshAxis, chip: Chip, ring: bool) -> str:
    """Why an axis with a size is not the case written on this torus chip."""
    wrap = chip.figure("interconnect.wraparound_min_axis_size")
    rule = (f"its axes close into rings at multiples of {int(wrap)}" if wrap else
            "no source gives when its axes close into rings, so symroof takes them as lines")
    where = f" on the {'x'.join(map(str, chip.slice))} slice" if chip.slice else ""
    return (f"mesh axis {axis}: on {chip.name}{where} an axis of {axis.size} "
            f"{'closes' if ring else 'does not close'} into a ring ({rule}): write "
            f"{axis.name}={axis.size}{'@ring' if ring else '@line'}, or {axis.name}={axis.size}")
