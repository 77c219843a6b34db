"""An analysis's times on a machine: the rates its work runs at (the matrix unit's peak
for each dtype, the vector unit's figure), T_math, T_vector, T_comms, the critical
intensity and what fused blocks keep on chip; on a mesh, the collectives each chip runs,
their times on the links, and the network roof (T_network, its latency floor, network
intensity). The second part of `symroof.Analysis`, read from its counts (`sized.Sized`).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import NamedTuple

import sympy

from .. import ops
from ..errors import SymroofWarning, caller_level
from .collectives import Time as CollectiveTime
from .collectives import check_domain
from .collectives import time as collective_time
from .cost import MoveCost
from .on_chip import OnChip, capacity
from .oneline import collective_line
from .sized import Sized, ratio, read_only


class CollectiveCost(NamedTuple):
    """A collective (its V) and its time on the links: a pair, shown on one line."""

    move: MoveCost
    time: CollectiveTime

    def __repr__(self) -> str:
        return collective_line(self.move, self.time)


class Run(NamedTuple):
    """A step that does arithmetic: its unit, the name of the rate it runs at, that rate,
    and its work."""

    unit: str
    rate: str
    figure: sympy.Rational
    work: sympy.Expr


class Times:
    """The times on the chip's units, HBM and links of a costed program at its sizes."""

    def __init__(self, sized: Sized):
        self.sized = sized
        self._frozen = True

    __setattr__ = read_only

    @functools.cached_property
    def _runs(self) -> tuple[Run, ...]:
        """Each step that does arithmetic: its unit, the name of the rate it runs at (a
        dtype's matrix peak, "bf16"; the vector unit's, "vector", with the rate where the
        figure is not the fp32 one), that rate, and its work: FLOPs, and transcendentals,
        each charged one vector op (docs/conventions.md)."""
        sized = self.sized
        target = sized.need_machine() if sized.cost.steps else None
        found = []
        for s in sized.cost.steps:
            if s.unit == ops.NONE or (s.flops == 0 and s.transcendentals == 0):
                continue
            assert target is not None and s.step is not None
            if s.unit == ops.VECTOR:
                rate, figure = target.vector_peak(s.step.compute)
                name = "vector" if rate == "fp32" else f"vector {rate}"
            else:
                name = s.step.compute.rate
                figure = target.peak(name)
            found.append(Run(s.unit, name, figure, s.flops + s.transcendentals))
        if not sized.cost.steps and sized.cost.flops != 0 and sized.compute_default is not None:
            # bare counts (`roofline()`): one dtype for all of them
            rate = sized.compute_default.rate
            found.append(Run(ops.MATRIX, rate, sized.need_machine().peak(rate), sized.cost.flops))
        return tuple(found)

    @functools.cached_property
    def _t_math_base(self) -> sympy.Expr:
        self.sized.need_machine()
        return sympy.Add(*(run.work / run.figure for run in self._runs))

    @functools.cached_property
    def rates(self) -> dict[str, sympy.Rational]:
        """Each rate the work runs at, by name: a dtype's matrix peak ("bf16"), the vector
        unit's ("vector"). T_math is the sum over them of `work` / rate."""
        return {run.rate: run.figure for run in self._runs}

    @functools.cached_property
    def work(self) -> dict[str, sympy.Expr]:
        """The operations run at each of `rates`: FLOPs, and on the vector unit the
        transcendentals too (each charged one vector op)."""
        terms: dict[str, list[sympy.Expr]] = {}
        for run in self._runs:
            terms.setdefault(run.rate, []).append(run.work)
        # one Add of all the terms: adding them one at a time re-sorts the sum each time
        return {name: self.sized.substitute(sympy.Add(*each)) for name, each in terms.items()}

    @functools.cached_property
    def t_vector(self) -> sympy.Expr:
        """The part of T_math spent on the vector unit (elementwise ops, reductions,
        softmax, norms, and their transcendentals)."""
        return self.sized.substitute(sympy.Add(*(run.work / run.figure for run in self._runs
                                                 if run.unit == ops.VECTOR)))

    @functools.cached_property
    def on_chip(self) -> tuple[OnChip, ...]:
        """The intermediates fused blocks keep on chip, with the chip's on-chip memory; a
        SymroofWarning says where one does not fit."""
        store, name = capacity(self.sized.chip)
        found = tuple(OnChip(str(s.step.output), self.sized.substitute(s.kept), store, name)
                      for s in self.sized.cost.steps if s.kept != 0 and s.step is not None)
        for item in found:
            if item.fits is False:
                warnings.warn(f"fused: {item}", SymroofWarning, stacklevel=caller_level())
        return found

    @functools.cached_property
    def t_math(self) -> sympy.Expr:
        return self.sized.substitute(self._t_math_base)

    @functools.cached_property
    def t_comms(self) -> sympy.Expr:
        return self.sized.substitute(self.sized.cost.bytes / self.sized.need_machine().bandwidth())

    @functools.cached_property
    def peak_flops(self) -> sympy.Expr:
        """The peak FLOPs/s the analysis runs at: the compute dtype's, or FLOPs / T_math for
        a chain whose steps compute in different dtypes."""
        self.sized.need_machine()
        peaks = {run.figure for run in self._runs}
        if not peaks or self.sized.flops == 0:  # no FLOPs at all: no peak is in play
            return sympy.nan
        if len(peaks) == 1 and self.sized.transcendentals == 0:  # one rate for all the work
            return peaks.pop()
        # several units or rates, or transcendentals beside the FLOPs: the rate the FLOPs
        # actually run at, FLOPs / T_math
        return ratio(self.sized.flops, self.t_math)

    @functools.cached_property
    def critical_intensity(self) -> sympy.Expr:
        """Peak FLOPs/s / HBM bandwidth: the intensity above which the work is compute-bound
        (nan for work without FLOPs)."""
        if self.peak_flops is sympy.nan:
            return sympy.nan
        bandwidth = self.sized.need_machine().bandwidth()
        if self.peak_flops.is_number:
            return ratio(self.peak_flops, bandwidth)
        # FLOPs / T_math / bandwidth in one ratio of polynomials: a ratio of a ratio
        # would take sympy's `together`, a hundred times slower on a long program
        return ratio(self.sized.flops, self.t_math * bandwidth)

    # ---- between chips ----------------------------------------------------------------

    @property
    def has_links(self) -> bool:
        """Whether the collectives can be costed: a chip's figures, or --ici-bw for ICI axes."""
        machine, mesh = self.sized.machine, self.sized.mesh
        if machine is None or mesh is None:
            return False
        if machine.chip is not None:
            return True
        return machine.ici_bw is not None and all(a.link == "ici" for a in mesh.axes)

    @functools.cached_property
    def t_network_latency_known(self) -> bool:
        """Whether every link's hop latency is known (else the floor is a lower bound)."""
        return all(t.latency_known for _, t in self.collectives)

    @functools.cached_property
    def _collectives_base(self) -> tuple[tuple[MoveCost, CollectiveTime], ...]:
        sized, mesh = self.sized, self.sized.mesh
        if not sized.cost.moves:
            return ()
        assert mesh is not None  # collectives run between the chips of a mesh
        ici = sized.machine.ici_bw if sized.machine is not None else None
        check_domain(list(mesh.axes), sized.chip)
        return tuple((move, _times(collective_time(move.move.kind, [mesh.axis(a) for a in move.move.axes],
                                                   move.bytes, sized.chip, ici, mesh.axes), move.count))
                     for move in sized.cost.moves)

    @functools.cached_property
    def collectives(self) -> tuple[CollectiveCost, ...]:
        """Each collective, at the analysis's sizes, with its time on the chip's links:
        (MoveCost, collectives.Time) pairs, each shown on one line."""
        at = self.sized.substitute
        return tuple(CollectiveCost(dataclasses.replace(move, bytes=at(move.bytes)),
                                    # latency and hops too: over an axis without a size, formulas in it
                                    dataclasses.replace(t, bandwidth=at(t.bandwidth),
                                                        latency=at(t.latency), hops=at(t.hops)))
                     for move, t in self._collectives_base)

    @functools.cached_property
    def t_network(self) -> sympy.Expr:
        """The collectives' time, bandwidth-bound (the book's T_comms between chips)."""
        return self.sized.substitute(sympy.Add(*(t.bandwidth for _, t in self._collectives_base)))

    @functools.cached_property
    def t_network_latency(self) -> sympy.Expr:
        """The collectives' latency floor: hops x per-hop latency, summed."""
        return sympy.Add(*(t.latency for _, t in self.collectives))

    @functools.cached_property
    def t_network_floored(self) -> sympy.Expr:
        """Each collective's time as the larger of bandwidth and latency, summed."""
        return sympy.Add(*(t.total for _, t in self.collectives))

    @functools.cached_property
    def network_bytes(self) -> sympy.Expr:
        """The collectives' V summed: the bytes each chip holds of their larger sides."""
        return self.sized.substitute(sympy.Add(*(m.count * m.bytes for m, _ in self._collectives_base)))

    @functools.cached_property
    def network_intensity(self) -> sympy.Expr:
        """Per-chip FLOPs per byte of the collectives' V."""
        return ratio(self.sized.flops, self.network_bytes)

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
