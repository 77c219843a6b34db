"""What a collective costs on a chip's links.

The model, with V the bytes each chip holds of the collective's larger side (after an
AllGather, before a ReduceScatter, the unreduced block of an AllReduce) and N the chips
along an axis:

* AllGather and ReduceScatter over ICI axes that all close into rings (a torus axis at
  least as long as the chip's `wraparound_min_axis_size`) use both directions of every
  axis at once: V / (W_bidirectional x number of axes).
* Otherwise each axis is a line (or, for DCN and PCIe, a unidirectional ring): the
  shards take N - 1 hops at the one-way bandwidth, (N - 1)/N x V / W_one_way, one axis
  after another (gathering over X then Y, the array grows by N_X before crossing Y).
  On a switch (NVLink), the one-way bandwidth is the GPU's egress.
* AllReduce costs a ReduceScatter plus an AllGather: twice either. AllToAll costs a
  quarter of an AllGather of the same V.
* Each collective takes at least hops x the per-hop latency (a ring of N with
  wraparound: N/2 hops; without: N - 1; a switch: 1), so small arrays come out
  latency-bound. Where the chip has no hop latency, there is no floor, and the
  result says so.

Examples:
    >>> from symroof.hardware import get_chip
    >>> from symroof.ir import MeshAxis
    >>> t = time("AllReduce", [MeshAxis("X", 2)], 2 * sympy.Symbol("V"), get_chip("v5e"))
    >>> t.bandwidth, t.latency
    (V/22500000000, 1/500000)
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from .errors import HardwareError
from .hardware import Chip
from .ir import MeshAxis


@dataclass(frozen=True)
class Link:
    """How one mesh axis connects its chips."""

    name: str                        # "ICI", "NVLink", "DCN", "PCIe"
    one_way: sympy.Rational
    bidi: sympy.Rational | None
    ring: bool                       # closes into a ring with wraparound (both directions used)
    switch: bool                     # every chip reaches every other in one hop
    latency: sympy.Rational | None   # seconds per hop

    def describe(self) -> str:
        shape = "switch" if self.switch else ("ring with wraparound" if self.ring else "no wraparound")
        return f"{self.name} ({shape})"


@dataclass(frozen=True)
class Time:
    """A collective's time: bandwidth-bound, latency floor, and what it ran on."""

    bandwidth: sympy.Expr
    latency: sympy.Expr
    hops: int
    links: str
    latency_known: bool

    @property
    def total(self) -> sympy.Expr:
        """The larger of the two (unevaluated where it depends on free dims)."""
        if self.bandwidth.is_number and self.latency.is_number:
            return sympy.Max(self.bandwidth, self.latency)
        return sympy.Max(self.bandwidth, self.latency, evaluate=False) if self.latency else self.bandwidth


def link(axis: MeshAxis, chip: Chip, ici_one_way=None) -> Link:
    """The link along a mesh axis, from the chip's figures (`ici_one_way` replaces the
    chip's per-link ICI figure, and makes the bidirectional one twice it)."""
    if axis.link == "dcn":
        return Link("DCN", chip.require("dcn.bandwidth_one_way_bytes_per_s_per_chip", f"mesh axis {axis.name}"),
                    None, False, False, None)
    if axis.link == "pcie":
        return Link("PCIe", chip.require("pcie_bandwidth_one_way_bytes_per_s", f"mesh axis {axis.name}"),
                    None, False, False, None)
    name = chip.texts.get("interconnect.name", "ICI")
    latency = chip.figure("interconnect.hop_latency_s")
    if chip.texts.get("interconnect.topology") == "switch":
        egress = ici_one_way or chip.require("interconnect.chip_bandwidth_one_way_bytes_per_s",
                                             f"mesh axis {axis.name}")
        return Link(name, egress, None, False, True, latency)
    one_way = ici_one_way or chip.require("interconnect.link_bandwidth_one_way_bytes_per_s",
                                          f"mesh axis {axis.name}")
    bidi = 2 * ici_one_way if ici_one_way else (chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")
                                                or 2 * one_way)
    wrap = chip.figure("interconnect.wraparound_min_axis_size")
    ring = chip.texts.get("interconnect.topology", "").startswith("torus") and wrap is not None \
        and axis.size >= wrap
    return Link(name, one_way, bidi, ring, False, latency)


def time(kind: str, axes: list[MeshAxis], V: sympy.Expr, chip: Chip | None, ici_one_way=None) -> Time:
    """The time of one collective over `axes` moving V bytes per chip."""
    if chip is None:
        raise HardwareError("collectives need a chip's link figures: name a chip (--chip)")
    links = [link(a, chip, ici_one_way) for a in axes]
    if kind == "AllReduce":
        once = time("AllGather", axes, V, chip, ici_one_way)
        return Time(2 * once.bandwidth, 2 * once.latency, 2 * once.hops, once.links, once.latency_known)
    if all(l.ring for l in links):
        bandwidth = V / (links[0].bidi * len(axes)) if len({l.bidi for l in links}) == 1 else \
            V / sympy.Add(*(l.bidi for l in links))
    else:
        bandwidth, grown = sympy.Integer(0), V
        for axis, l in reversed(list(zip(axes, links))):  # the last axis moves the whole V
            part = grown if l.ring else sympy.Rational(axis.size - 1, axis.size) * grown
            bandwidth += part / (l.bidi if l.ring else l.one_way)
            grown = grown / axis.size
    if kind == "AllToAll":
        bandwidth = bandwidth / 4
    hops = sum(_hops(a, l) for a, l in zip(axes, links))
    known = all(l.latency is not None for l in links)
    latency = sympy.Add(*(_hops(a, l) * (l.latency or 0) for a, l in zip(axes, links)))
    described = ", ".join(f"{a.name}: {l.describe()}" for a, l in zip(axes, links))
    return Time(bandwidth, latency, hops, described, known)


def _hops(axis: MeshAxis, l: Link) -> int:
    return 1 if l.switch else (axis.size // 2 if l.ring else axis.size - 1)
