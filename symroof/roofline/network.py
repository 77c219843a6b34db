"""An analysis on a mesh: the collectives each chip runs, their times on the links, and
the network roof (T_network, its latency floor, network intensity). The third layer of
`roofline.Analysis`.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import sympy

from .collectives import Time as CollectiveTime
from .collectives import check_domain
from .collectives import time as collective_time
from .compute import Compute
from .cost import MoveCost
from .oneline import collective_line
from .sized import ratio


class CollectiveCost(NamedTuple):
    """A collective (its V) and its time on the links: a pair, shown on one line."""

    move: MoveCost
    time: CollectiveTime

    def __repr__(self) -> str:
        return collective_line(self.move, self.time)


class Network(Compute):
    """The collectives and the network roof (see `roofline.Analysis`)."""

    @property
    def has_links(self) -> bool:
        """Whether the collectives can be costed: a chip's figures, or --ici-bw for ICI axes."""
        if self.machine is None or self.mesh is None:
            return False
        if self.machine.chip is not None:
            return True
        return self.machine.ici_bw is not None and all(a.link == "ici" for a in self.mesh.axes)

    @functools.cached_property
    def t_network_latency_known(self) -> bool:
        """Whether every link's hop latency is known (else the floor is a lower bound)."""
        return all(t.latency_known for _, t in self.collectives)

    @functools.cached_property
    def _collectives_base(self) -> tuple:
        if not self.cost.moves:
            return ()
        ici = self.machine.ici_bw if self.machine is not None else None
        check_domain(list(self.mesh.axes), self.chip)
        return tuple((move, _times(collective_time(move.move.kind, [self.mesh.axis(a) for a in move.move.axes],
                                                   move.bytes, self.chip, ici, self.mesh.axes), move.count))
                     for move in self.cost.moves)

    @functools.cached_property
    def collectives(self) -> tuple:
        """Each collective, at the analysis's sizes, with its time on the chip's links:
        (MoveCost, collectives.Time) pairs, each shown on one line."""
        return tuple(CollectiveCost(dataclasses.replace(move, bytes=self._at(move.bytes)),
                                    # latency and hops too: over an axis without a size, formulas in it
                                    dataclasses.replace(t, bandwidth=self._at(t.bandwidth),
                                                        latency=self._at(t.latency), hops=self._at(t.hops)))
                     for move, t in self._collectives_base)

    @functools.cached_property
    def _t_network_base(self) -> sympy.Expr:
        return sympy.Add(*(t.bandwidth for _, t in self._collectives_base))

    @functools.cached_property
    def t_network(self) -> sympy.Expr:
        """The collectives' time, bandwidth-bound (the book's T_comms between chips)."""
        return self._at(self._t_network_base)

    @functools.cached_property
    def t_network_latency(self) -> sympy.Expr:
        """The collectives' latency floor: hops x per-hop latency, summed."""
        return sympy.Add(*(t.latency for _, t in self.collectives))

    @functools.cached_property
    def t_network_floored(self) -> sympy.Expr:
        """Each collective's time as the larger of bandwidth and latency, summed."""
        return sympy.Add(*(t.total for _, t in self.collectives))

    @functools.cached_property
    def _network_bytes_base(self) -> sympy.Expr:
        return sympy.Add(*(m.count * m.bytes for m, _ in self._collectives_base))

    @functools.cached_property
    def network_bytes(self) -> sympy.Expr:
        """The collectives' V summed: the bytes each chip holds of their larger sides."""
        return self._at(self._network_bytes_base)

    @functools.cached_property
    def network_intensity(self) -> sympy.Expr:
        """Per-chip FLOPs per byte of the collectives' V."""
        return ratio(self.flops, self.network_bytes)

    @functools.cached_property
    def critical_network_intensity(self) -> sympy.Expr:
        """Peak FLOPs/s over the links' effective bandwidth (V / T_network): the network
        intensity above which T_math exceeds T_network (1.97e14 / 4.5e10 = 4377.8 for a
        v5e axis of 2)."""
        if self.peak_flops is sympy.nan or self.network_bytes == 0:  # no FLOPs, or no collectives
            return sympy.nan
        return ratio(self.peak_flops * self.t_network, self.network_bytes)


def _times(t: CollectiveTime, count: sympy.Expr) -> CollectiveTime:
    """A collective run `count` times (in a repeated block): each pays its bandwidth time and
    its latency."""
    if count == 1:
        return t
    return dataclasses.replace(t, bandwidth=count * t.bandwidth, latency=count * t.latency)
