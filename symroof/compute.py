"""An analysis on a machine: the rates its work runs at (the matrix unit's peak for each
dtype, the vector unit's figure), T_math, T_vector, T_comms, the critical intensity, and
what fused blocks keep on chip. The second layer of `roofline.Analysis`.
"""

from __future__ import annotations

import functools
import warnings

import sympy

from . import ops
from .errors import SymroofWarning
from .on_chip import OnChip, capacity
from .sized import SizedCost, ratio


class Compute(SizedCost):
    """The times on the chip's units and HBM (see `roofline.Analysis`)."""

    def _rate(self, step) -> sympy.Rational | None:
        """The FLOPs/s a step runs at: its compute dtype's peak on the matrix unit, the
        vector unit's figure, or None for a step that does no arithmetic."""
        if step.unit == ops.NONE or (step.flops == 0 and step.transcendentals == 0):
            return None
        target = self._need_machine()
        if step.unit == ops.VECTOR:
            return target.vector_peak(step.step.compute)
        return target.peak(step.step.compute.rate)

    @functools.cached_property
    def _t_math_base(self) -> sympy.Expr:
        target = self._need_machine()
        if not self.cost.steps:  # bare counts (`roofline()`): one dtype for all of them
            if self.cost.flops == 0 or self.compute_default is None:
                return sympy.Integer(0)
            return self.cost.flops / target.peak(self.compute_default.rate)
        # Transcendentals are charged one vector-unit op each (README: conventions).
        return sympy.Add(*((s.flops + s.transcendentals) / self._rate(s) for s in self.cost.steps
                           if self._rate(s) is not None))

    def _rate_name(self, step) -> str:
        """How a step's rate is named in output: its compute dtype on the matrix unit
        ("bf16"), or "vector" (with the dtype where it is not fp32) on the vector unit."""
        if step.unit == ops.VECTOR:
            rate = step.step.compute.rate  # "fp8" for both fp8 formats, as the matrix peaks are named
            return "vector" if rate in ("fp32", "bf16", "fp16") else f"vector {rate}"
        return step.step.compute.rate

    @functools.cached_property
    def rates(self) -> dict[str, sympy.Rational]:
        """Each rate the work runs at, by name: a dtype's matrix peak ("bf16"), the vector
        unit's ("vector"). T_math is the sum over them of `work` / rate."""
        if not self.cost.steps:
            return {self.compute_default.rate: self._need_machine().peak(self.compute_default.rate)} \
                if self.compute_default is not None and self.cost.flops != 0 else {}
        return {self._rate_name(s): rate for s in self.cost.steps if (rate := self._rate(s)) is not None}

    @functools.cached_property
    def work(self) -> dict[str, sympy.Expr]:
        """The operations run at each of `rates`: FLOPs, and on the vector unit the
        transcendentals too (each charged one vector op)."""
        if not self.cost.steps:
            return {name: self.flops for name in self.rates}
        found: dict[str, sympy.Expr] = {}
        for s in self.cost.steps:
            if self._rate(s) is not None:
                name = self._rate_name(s)
                found[name] = found.get(name, sympy.Integer(0)) + self._at(s.flops + s.transcendentals)
        return found

    @functools.cached_property
    def _t_vector_base(self) -> sympy.Expr:
        return sympy.Add(*((s.flops + s.transcendentals) / self._rate(s) for s in self.cost.steps
                           if s.unit == ops.VECTOR and self._rate(s) is not None))

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
                warnings.warn(f"fused: {item}", SymroofWarning, stacklevel=2)
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
        if not self.cost.steps:
            if self.compute_default is None or self.cost.flops == 0:
                return sympy.nan
            return self._need_machine().peak(self.compute_default.rate)
        peaks = {self._rate(s) for s in self.cost.steps} - {None}
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
        return ratio(self.peak_flops, self._need_machine().bandwidth())
