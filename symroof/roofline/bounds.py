"""Which time bounds a program on a machine: T_lower, T_upper, the bound, the FLOPs/s
achieved, the intensity's limits as dims grow, and the thresholds where the work turns
compute-bound. The third part of `symroof.Analysis`, read from its counts
(`sized.Sized`) and times (`times.Times`).

    T_math  = FLOPs / peak FLOPs/s of the compute dtype (summed over steps)
    T_comms = HBM bytes / HBM bandwidth
    T_lower = max(T_math, T_comms),  T_upper = T_math + T_comms
    intensity = FLOPs / bytes;  critical intensity = peak / bandwidth

Everything is a sympy expression in the spec's dim names; chip figures are exact
rationals, so numbers stay exact until they are printed.

Examples:
    >>> from symroof import analyze
    >>> a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", peak_flops=1.97e14, hbm_bw=8.2e11)
    >>> a.intensity
    B*D*F/(B*D + B*F + D*F)
    >>> a.limit("D", "F")
    B
    >>> t = a.threshold("B")
    >>> t.op, float(t.rule)
    ('>', 240.2439024390244)
    >>> float(a.at(D=4096, F=4096).threshold("B").exact)
    272.171...
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from collections.abc import Iterable

import sympy

from ..errors import SpecError, SymroofWarning, caller_level
from ..show import duration
from .sized import Sized, dim_names, pick_max, read_only
from .solve import cleared, path_independent, positive_region, ratio_limit, sign_of
from .thresholds import Roof, Threshold, solve
from .times import Times

__all__ = ["CONVENTIONS", "Bounds"]

CONVENTIONS = ("1 FLOP = one multiply or one add (a multiply-add is 2); int dtypes count OPs alike; "
               "peaks are dense (no 2:4 sparsity); bytes are HBM bytes; GB = 1e9 bytes; "
               "times in seconds")


class Bounds:
    """Which of an analysis's times bounds it, and where that changes."""

    def __init__(self, sized: Sized, times: Times):
        self.sized = sized
        self.times = times
        self._frozen = True

    __setattr__ = read_only

    @functools.cached_property
    def t_lower(self) -> sympy.Expr:
        """max(T_math, T_comms), and on a mesh the network's time (latency floors included)."""
        times = self.times
        if times.collectives:
            each = [times.t_math, times.t_comms, times.t_network_floored]
            if all(t.is_number for t in each):
                return sympy.Max(*each)
            return sympy.Max(*each, evaluate=False)
        return pick_max(times.t_math, times.t_comms)

    @functools.cached_property
    def t_upper(self) -> sympy.Expr:
        times = self.times
        return times.t_math + times.t_comms + (times.t_network_floored if times.collectives else 0)

    @functools.cached_property
    def bound(self) -> str | sympy.Basic:
        """"compute", "memory", "balanced", on a mesh "network", or the condition for
        compute-bound when it depends on dims that have no value."""
        if self.settled_bound is not None:
            return self.settled_bound
        times = self.times
        # evaluate=False: sympy would ask its assumption system, slowly, what sign_of
        # has just found to be open.
        if times.collectives:
            return sympy.StrictGreaterThan(times.t_math, sympy.Max(times.t_comms, times.t_network_floored,
                                                                   evaluate=False), evaluate=False)
        if times.critical_intensity.is_number and times.critical_intensity is not sympy.nan:
            return sympy.StrictGreaterThan(self.sized.intensity, times.critical_intensity, evaluate=False)
        return sympy.StrictGreaterThan(times.t_math, times.t_comms, evaluate=False)

    @functools.cached_property
    def settled_bound(self) -> str | None:
        """`bound` where it is one word for every size of the free dims, else None (it is
        then a condition): cheaper than `bound`, which derives the condition."""
        if self.times.collectives:
            return self._bound_of_three()
        sign = sign_of(self.times.t_math - self.times.t_comms)
        return None if sign is None else {1: "compute", -1: "memory", 0: "balanced"}[sign]

    def _bound_of_three(self) -> str | None:
        times = self.times
        floored = {"compute": times.t_math, "memory": times.t_comms, "network": times.t_network_floored}
        if all(t == 0 for t in floored.values()):  # a collective over an axis of one chip moves nothing
            return "balanced"
        if all(t.is_number for t in floored.values()):
            return max(floored, key=lambda k: (floored[k], k == "compute"))
        # with free dims, decide on the bandwidth-bound times; the latency floor is a number
        bandwidth_bound = {"compute": times.t_math, "memory": times.t_comms, "network": times.t_network}
        for name, t in bandwidth_bound.items():
            if all(sign_of(t - other) == 1 for key, other in bandwidth_bound.items() if key != name):
                return name
        return None

    @functools.cached_property
    def achieved_flops_per_s(self) -> sympy.Expr:
        """FLOPs / T_lower: the peak when compute-bound, intensity x bandwidth when not."""
        sized = self.sized
        if sized.flops == 0:
            return sympy.Integer(0)
        if self.times.collectives:
            return sized.flops / self.t_lower
        return pick_max(self.times.peak_flops, sized.intensity * sized.need_machine().bandwidth(), sympy.Min)

    def limit(self, *dims: object) -> sympy.Expr:
        """The intensity's limit as the named dims grow together, e.g. `limit("D", "F")`.

        Warns (SymroofWarning) where the limit depends on how they grow.
        """
        sized = self.sized
        symbols = [sized.dim(d) for d in dim_names(dims)]
        if not symbols:
            raise SpecError("name the dims to take the limit over, e.g. limit('D', 'F')")
        for s in symbols:
            if s in sized.subs:
                raise SpecError(f"{s} has a size ({sized.subs[s]}): a limit takes a dim without one "
                                "to infinity; drop it from the limit, or leave it free")
        keep = {s: v for s, v in sized.subs.items() if s not in symbols}
        num, den = sized.cost.flops.xreplace(keep), sized.cost.bytes.xreplace(keep)
        value = ratio_limit(num, den, symbols)
        if not path_independent(num, den, symbols):
            warnings.warn(f"the intensity's limit as {', '.join(map(str, symbols))} -> oo depends on "
                          f"how they grow; taking them equal gives {value}", SymroofWarning, stacklevel=caller_level())
        return value

    def threshold(self, dim: object, grow: str | Iterable[str] | None = None) -> Threshold:
        """Solve for the sizes of `dim` that make the analysis compute-bound: T_math above
        T_comms (HBM), and on a mesh with collectives, above T_network too (`.network`,
        taken in the bandwidth-bound regime).

        Gives the rule (the other named dims without a size taken to infinity together, as
        the book does; or only the dims in `grow`, given here or to `analyze`, the others
        kept as symbols) and the exact value at the other dims' sizes, or an expression in
        them with the condition under which it exists.
        """
        sized, times = self.sized, self.times
        x = sized.dim(dim)
        grown = sized.grown(grow) if grow is not None else sized.grow
        if x in sized.subs:
            raise SpecError(f"{x} has a value ({sized.subs[x]}): leave it free to solve for it")
        sized.need_machine()
        if sized.flops == 0:
            return Threshold(str(x), None, None, None,
                             reason_parts=(("no FLOPs to run: it is never compute-bound",),))
        found = solve(sized, times.t_math, x, Roof("HBM", times.t_comms, sized.bytes, times.critical_intensity),
                      grown)
        if sized.cost.moves and times.has_links:
            network = solve(sized, times.t_math, x, Roof("network", times.t_network, times.network_bytes,
                                                         times.critical_network_intensity), grown)
            found = dataclasses.replace(found, network=self._with_latency(network, x))
        return found

    def _with_latency(self, network: Threshold, x: sympy.Symbol) -> Threshold:
        """The network threshold is taken in the bandwidth-bound regime; where the sizes are
        known and the latency floor lies beyond it, say where T_math clears the floor too."""
        floor = self.times.t_network_latency
        if not (self.times.t_network_latency_known and floor and network.op == ">" and network.exact is not None
                and network.exact.is_number):
            return network
        t_math, floor_cleared = cleared(self.times.t_math, floor)  # X in a denominator: cleared first
        region = positive_region(t_math - floor_cleared, x)
        if region.kind != "above" or region.root is None or not region.root.is_number \
                or region.root <= network.exact:
            return network
        words = (f"with the latency floor ({duration(floor)}) it takes ", sympy.Gt(x, region.root))
        return dataclasses.replace(network, reason_parts=network.reason_parts + (words,),
                                   past_latency=region.root)
