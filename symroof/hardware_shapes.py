"""A torus pod's shape in hardware.json (`interconnect.pod_shape`: 16 x 16 on v5e) read and
checked: a list of axis lengths, one per axis of the torus, holding no more chips than
the interconnect's domain. hardware_file.py names the file, chip and field of a problem."""

from __future__ import annotations

import math
from collections.abc import Callable


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


def pod_shape_problem(shape: tuple[int, ...] | None, topology: str | None, domain) -> str | None:
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
