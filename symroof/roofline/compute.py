"""An analysis on a machine: the rates its work runs at (the matrix unit's peak for each
dtype, the vector unit's figure), T_math, T_vector, T_comms, the critical intensity, and
what fused blocks keep on chip. The second layer of `roofline.Analysis`.
"""

from __future__ import annotations

import functools
import warnings

import sympy

from .. import ops
from ..errors import SymroofWarning, caller_level
from .on_chip import OnChip, capacity
from .sized import SizedCost, ratio


class Compute(SizedCost):
    """The times on the chip's units and HBM (see `roofline.Analysis`)."""

    @functools.cached_property
    def _runs(self) -> tuple[tuple[str, str, sympy.Rational, sympy.Expr], ...]:
        """Each step that does arithmetic: its unit, the name of the rate it runs at (a
        dtype's matrix peak, "bf16"; the vector unit's, "vector", with the rate where the
        figure is not the fp32 one), that rate, and its work: FLOPs, and transcendentals,
        each charged one vector op (README: conventions)."""
        target = self._need_machine() if self.cost.steps else None
        found = []
        for s in self.cost.steps:
            if s.unit == ops.NONE or (s.flops == 0 and s.transcendentals == 0):
                continue
            assert target is not None and s.step is not None
            if s.unit == ops.VECTOR:
                rate, figure = target.vector_peak(s.step.compute)
                name = "vector" if rate == "fp32" else f"vector {rate}"
            else:
                name = s.step.compute.rate
                figure = target.peak(name)
            found.append((s.unit, name, figure, s.flops + s.transcendentals))
        if not self.cost.steps and self.cost.flops != 0 and self.compute_default is not None:
            # bare counts (`roofline()`): one dtype for all of them
            rate = self.compute_default.rate
            found.append((ops.MATRIX, rate, self._need_machine().peak(rate), self.cost.flops))
        return tuple(found)

    @functools.cached_property
    def _t_math_base(self) -> sympy.Expr:
        self._need_machine()
        return sympy.Add(*(work / figure for _, _, figure, work in self._runs))

    @functools.cached_property
    def rates(self) -> dict[str, sympy.Rational]:
        """Each rate the work runs at, by name: a dtype's matrix peak ("bf16"), the vector
        unit's ("vector"). T_math is the sum over them of `work` / rate."""
        return {name: figure for _, name, figure, _ in self._runs}

    @functools.cached_property
    def work(self) -> dict[str, sympy.Expr]:
        """The operations run at each of `rates`: FLOPs, and on the vector unit the
        transcendentals too (each charged one vector op)."""
        terms: dict[str, list[sympy.Expr]] = {}
        for _, name, _, work in self._runs:
            terms.setdefault(name, []).append(work)
        # one Add of all the terms: adding them one at a time re-sorts the sum each time
        return {name: self._at(sympy.Add(*each)) for name, each in terms.items()}

    @functools.cached_property
    def _t_vector_base(self) -> sympy.Expr:
        return sympy.Add(*(work / figure for unit, _, figure, work in self._runs if unit == ops.VECTOR))

    @functools.cached_property
    def t_vector(self) -> sympy.Expr:
        """The part of T_math spent on the vector unit (elementwise ops, reductions,
        softmax, norms, and their transcendentals)."""
        return self._at(self._t_vector_base)

    @functools.cached_property
    def on_chip(self) -> tuple[OnChip, ...]:
        """The intermediates fused blocks keep on chip, with the chip's on-chip memory; a
        SymroofWarning says where one does not fit."""
        store, name = capacity(self.chip)
        found = tuple(OnChip(str(s.step.output), self._at(s.kept), store, name)
                      for s in self.cost.steps if s.kept != 0 and s.step is not None)
        for item in found:
            if item.fits is False:
                warnings.warn(f"fused: {item}", SymroofWarning, stacklevel=caller_level())
        return found

    @functools.cached_property
    def _t_comms_base(self) -> sympy.Expr:
        return self.cost.bytes / self._need_machine().bandwidth()

    @functools.cached_property
    def t_math(self) -> sympy.Expr:
        return self._at(self._t_math_base)

    @functools.cached_property
    def t_comms(self) -> sympy.Expr:
        return self._at(self._t_comms_base)

    @functools.cached_property
    def peak_flops(self) -> sympy.Expr:
        """The peak FLOPs/s the analysis runs at: the compute dtype's, or FLOPs / T_math for
        a chain whose steps compute in different dtypes."""
        self._need_machine()
        peaks = {figure for _, _, figure, _ in self._runs}
        if not peaks or self.flops == 0:  # no FLOPs at all: no peak is in play
            return sympy.nan
        if len(peaks) == 1 and self.transcendentals == 0:  # one rate for all the work
            return peaks.pop()
        # several units or rates, or transcendentals beside the FLOPs: the rate the FLOPs
        # actually run at, FLOPs / T_math
        return ratio(self.flops, self.t_math)

    @functools.cached_property
    def critical_intensity(self) -> sympy.Expr:
        """Peak FLOPs/s / HBM bandwidth: the intensity above which the work is compute-bound
        (nan for work without FLOPs)."""
        if self.peak_flops is sympy.nan:
            return sympy.nan
        bandwidth = self._need_machine().bandwidth()
        if self.peak_flops.is_number:
            return ratio(self.peak_flops, bandwidth)
        # FLOPs / T_math / bandwidth in one ratio of polynomials: a ratio of a ratio
        # would take sympy's `together`, a hundred times slower on a long program
        return ratio(self.flops, self.t_math * bandwidth)
