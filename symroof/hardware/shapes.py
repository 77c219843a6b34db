"""A torus pod's shape in hardware.json (`interconnect.pod_shape`: 16 x 16 on v5e) read and
checked: a list of axis lengths, one per axis of the torus, holding no more chips than
the interconnect's domain. file.py names the file, chip and field of a problem."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sympy

Shape = tuple[int, ...]


def read_shape(value: object, describe: Callable[[object], str]) -> tuple[int, ...] | None:
    """The axis lengths as a tuple of ints (None for null); ValueError, saying what is
    wrong with `describe`'s words for the value, otherwise.

    Examples:
        >>> read_shape([16, 20, 28], repr), read_shape(None, repr)
        ((16, 20, 28), None)
        >>> read_shape([16, 0], repr)
        Traceback (most recent call last):
        ...
        ValueError: each axis length must be a positive whole number, got 0
    """
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a non-empty list of axis lengths (e.g. [16, 16]) or null, got {describe(value)}")
    for length in value:
        if type(length) is not int or length < 1:
            raise ValueError(f"each axis length must be a positive whole number, got {describe(length)}")
    return tuple(value)


def read_shapes(value: object, describe: Callable[[object], str]) -> tuple[Shape, ...] | None:
    """A list of shapes (a torus's slice shapes) as a tuple of them; None for null.

    Examples:
        >>> read_shapes([[2, 2], [4, 4]], repr)
        ((2, 2), (4, 4))
    """
    if value is None:
        return None
    if not isinstance(value, list) or not value:
        raise ValueError(f"must be a non-empty list of shapes (e.g. [[2, 2], [4, 4]]) or null, got {describe(value)}")
    shapes = []
    for shape in value:
        read = read_shape(shape, describe)
        if read is None:
            raise ValueError("a shape in the list cannot be null")
        shapes.append(read)
    return tuple(shapes)


def fits(shape: Shape, room: Shape) -> bool:
    """Whether a box of `shape` fits in one of `room` (same number of axes, in some order).

    Examples:
        >>> fits((4, 8, 8), (16, 20, 28)), fits((32, 4), (16, 16))
        (True, False)
    """
    return len(shape) == len(room) and all(s <= r for s, r in zip(sorted(shape), sorted(room)))


def slice_problem(shape: Shape, pod: Shape | None) -> str | None:
    """What keeps `shape` from being a slice of a pod of `pod`, if anything."""
    shown = "x".join(map(str, shape))
    if pod is None:
        return f"a slice {shown} is a box of a torus pod, but no pod shape is given"
    if not fits(shape, pod):
        return f"a slice {shown} does not fit the {'x'.join(map(str, pod))} pod"
    return None


def slice_shapes_problem(shapes: tuple[Shape, ...] | None, pod: Shape | None) -> str | None:
    """What is wrong with a torus's slice shapes beside its pod's shape, if anything.

    Examples:
        >>> slice_shapes_problem(((4, 4), (32, 2)), (16, 16))
        'a slice 32x2 does not fit the 16x16 pod'
    """
    for shape in shapes or ():
        problem = slice_problem(shape, pod)
        if problem:
            return problem
    return None


def pod_shape_problem(shape: tuple[int, ...] | None, topology: str | None,
                      domain: int | sympy.Rational | None) -> str | None:
    """What is wrong with a pod's shape beside the chip's topology and domain size, if anything.

    Examples:
        >>> pod_shape_problem((16, 32), "torus_2d", 256)
        '16x32 is 512 chips, more than interconnect.domain_size (256)'
    """
    if shape is None:
        return None
    shown = "x".join(map(str, shape))
    if topology not in ("torus_2d", "torus_3d"):
        return f"is the shape of a torus, but interconnect.topology is {topology or 'not given'}"
    axes = int(topology[len("torus_")])
    if len(shape) != axes:
        return f"a {topology} has {axes} axes, got {len(shape)} ({shown})"
    if domain is not None and math.prod(shape) > domain:
        return f"{shown} is {math.prod(shape)} chips, more than interconnect.domain_size ({domain})"
    return None
