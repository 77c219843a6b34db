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

Examples:
    >>> from symroof.hardware import get_chip
    >>> v5e = get_chip("v5e")
    >>> lay_out([MeshAxis("X", 64)], v5e)
    {'X': (16, 4)}
    >>> lay_out([MeshAxis("X", 4), MeshAxis("Y", 4), MeshAxis("Z", 16)], v5e)
    {'X': (4,), 'Y': (4,), 'Z': (16,)}
    >>> lay_out([MeshAxis("X", 256)], get_chip("v5p"))
    {'X': (16, 16)}
    >>> lay_out([MeshAxis("X", 32)], get_chip("v5p"))
    {'X': (8, 4)}
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator, Sequence

from .errors import HardwareError
from .hardware import Chip
from .ir import MeshAxis


def pod_shape(chip: Chip | None) -> tuple[int, ...] | None:
    """The physical axes a chip's ICI axes are laid on: a torus chip's pod shape; None for
    no chip (a symbolic one), a switch or fully connected node, or a shape no source gives."""
    if chip is None or not chip.texts.get("interconnect.topology", "").startswith("torus"):
        return None
    return chip.pod_shape


def lay_out(axes: Sequence[MeshAxis], chip: Chip | None) -> dict[str, tuple[int, ...]]:
    """Each ICI axis's pieces by name: the lengths it takes on the physical axes it spans,
    largest first; one piece, its own size, where it lies along one. Empty where the chip
    has no pod shape; a HardwareError, saying what would fit, where the axes do not fit."""
    shape = pod_shape(chip)
    ici = [a for a in axes if a.link == "ici"]
    if shape is None or not ici:
        return {}
    placed = _place(tuple(a.size for a in ici), shape, _wrap(chip))
    if placed is None:
        assert chip is not None  # a shape comes from a chip
        raise HardwareError(_unplaceable(ici, shape, chip))
    return {a.name: pieces for a, pieces in zip(ici, placed)}


def spans(axis: MeshAxis, laid: dict[str, tuple[int, ...]]) -> list[MeshAxis]:
    """The physical sub-axes a logical axis spans (itself, where it lies along one)."""
    pieces = laid.get(axis.name, (axis.size,))
    if len(pieces) == 1:
        return [axis]
    return [MeshAxis(axis.name, piece, axis.link) for piece in pieces]


def _wrap(chip: Chip | None) -> int:
    """The length from which (and whose multiples) a torus axis closes into a ring; 0: never."""
    wrap = chip.figure("interconnect.wraparound_min_axis_size") if chip is not None else None
    return int(wrap) if wrap else 0


@functools.lru_cache(maxsize=1024)
def _place(sizes: tuple[int, ...], room: tuple[int, ...], wrap: int = 0) -> tuple[tuple[int, ...], ...] | None:
    """Each size's pieces, placed in order in the room left on each physical axis (a
    length, divided by each piece laid along it); None where they do not fit."""
    if not sizes:
        return ()
    for split in _choices(sizes[0], room, wrap):
        rest = _place(sizes[1:], tuple(r // f for r, f in zip(room, split)), wrap)
        if rest is not None:
            return (_pieces(split), *rest)
    return None


def _pieces(split: tuple[int, ...]) -> tuple[int, ...]:
    """A placement's pieces, largest first: when two pieces cost the same per byte, the
    larger one moving the whole array is the faster order (collectives.time)."""
    return tuple(sorted((f for f in split if f > 1), reverse=True)) or (1,)


@functools.lru_cache(maxsize=1024)
def _choices(n: int, room: tuple[int, ...], wrap: int = 0) -> tuple[tuple[int, ...], ...]:
    """Every way to lay an axis of n on the physical axes (one factor each, within its
    room), the preferred first: fewest pieces (one, where it fits: the cost as before),
    then the most rings (pieces of `wrap` or a multiple), then the largest pieces (whole
    axes first), then those filling what is left of an axis, then the earlier axes."""
    def preference(split: tuple[int, ...]) -> tuple:
        pieces = _pieces(split)
        lines = sum(1 for p in pieces if not (wrap and p >= wrap and p % wrap == 0))
        filled = sum(1 for f, r in zip(split, room) if f > 1 and f == r)
        return (len(pieces), lines, tuple(-p for p in pieces), -filled)
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
    k = next(i for i in range(len(ici)) if _place(tuple(a.size for a in ici[:i + 1]), shape, _wrap(chip)) is None)
    axis, before = ici[k], tuple(a.size for a in ici[:k])
    def fits(m: int) -> bool:
        return _place((*before, m), shape, _wrap(chip)) is not None
    smaller = next((m for m in range(axis.size - 1, 0, -1) if fits(m)), None)
    larger = next((m for m in range(axis.size + 1, math.prod(shape) // math.prod(before) + 1) if fits(m)), None)
    near = [m for m in (smaller, larger) if m is not None]
    beside = f" beside {', '.join(map(str, ici[:k]))}" if k else ""
    would = " or ".join(f"{axis.name}={m}" for m in near)
    return (f"mesh axis {axis} does not fit {chip.name}'s {'x'.join(map(str, shape))} ICI torus{beside}: "
            f"an axis lies along one physical axis or spans several, its size the product of the "
            f"lengths it takes on each; {would} would fit, or put it on DCN ({axis.name}={axis.size}@dcn)")
