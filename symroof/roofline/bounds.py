"""A program's costs on a machine: times, bounds, intensities, their limits, and thresholds.

    T_math  = FLOPs / peak FLOPs/s of the compute dtype (summed over steps)
    T_comms = HBM bytes / HBM bandwidth
    T_lower = max(T_math, T_comms),  T_upper = T_math + T_comms
    intensity = FLOPs / bytes;  critical intensity = peak / bandwidth

Everything is a sympy expression in the spec's dim names; chip figures are exact
rationals, so numbers stay exact until they are printed.

Examples:
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
from collections.abc import Mapping

import sympy

from .. import dtypes
from ..errors import SpecError, SymroofWarning, caller_level
from ..hardware.chips import Chip
from ..hardware.machine import exact_number, machine
from ..ir import Fused, Program
from ..lang.parse import parse
from ..show import duration
from .cost import Cost, cost
from .network import CollectiveCost, Network
from .oneline import spec_line
from .sized import dim_names, pick_max, size
from .solve import cleared, path_independent, positive_region, ratio_limit, sign_of
from .thresholds import Roof, Threshold, solve

__all__ = ["CONVENTIONS", "Analysis", "CollectiveCost", "Threshold", "analyze", "dim_names", "roofline"]

CONVENTIONS = ("1 FLOP = one multiply or one add (a multiply-add is 2); int dtypes count OPs alike; "
               "peaks are dense (no 2:4 sparsity); bytes are HBM bytes; GB = 1e9 bytes; "
               "times in seconds")


def analyze(spec: str | Program, chip: str | Chip | None = None, *, dtype: str = "bf16",
            peak_flops=None, hbm_bw=None, ici_bw=None, overrides=None, variant=None, hardware=None,
            values: Mapping[str, int] | None = None, mesh=None, grow=None, vector_flops=None,
            symbolic=(), slice=None, cls: type[Analysis] | None = None) -> Analysis:
    """Analyse a spec, optionally on a chip.

    Args:
        spec: spec text (or a parsed `Program`).
        chip: a chip name (`"tpu-v5e"`, `"v5e"`, `"H100"`) or a `Chip`.
        dtype: the dtype of tensors written without one.
        peak_flops: FLOPs/s to use in place of the chip's peak (for every dtype).
        hbm_bw: HBM bytes/s to use in place of the chip's.
        overrides: other chip figures to replace, by dotted path.
        variant: a named variant of the chip's figures (see `symroof chip CHIP`).
        ici_bw: one-way per-link ICI bytes/s to use in place of the chip's.
        vector_flops: vector-unit FLOPs/s (elementwise ops, reductions, softmax, norms) to use
            in place of the chip's, for every dtype.
        hardware: path of a hardware file to use in place of the shipped one.
        values: sizes for named dims, as `--set` gives them: integers, or text such as
            "4096", "1e6", "2**20", "128k" (k, M, G, T are powers of 1024).
        grow: the dims a threshold's rule takes to infinity ("B,T"), such as batch-like
            dims; by default every named dim without a size but the one solved for.
        mesh: the mesh for sharded dims ("X=2, Y=4@dcn", {"X": 2} or a `Mesh`), unless the
            spec has a `mesh` line.
        symbolic: chip figures to make symbols ("peak", "hbm_bw", "ici_bw", "vector",
            "hbm_capacity"), so that thresholds come out as B > C/W_hbm; chip="symbolic"
            makes them all symbols.
        slice: a slice of a torus chip's pod ("4x8x8") to lay the mesh's ICI axes on, in
            place of the whole pod (where a slice's axis closes into a ring only when whole).
    """
    if not isinstance(dtype, str):
        raise SpecError(f"dtype must be a dtype's name such as 'bf16', got {dtype!r}")
    if isinstance(spec, Program) and mesh is not None:
        raise SpecError("a parsed Program carries its mesh: give the mesh to parse(), not analyze()")
    program = spec if isinstance(spec, Program) else parse(spec, dtype, mesh)
    if ici_bw is not None and program.mesh is None:
        raise SpecError("an ICI bandwidth (--ici-bw) costs collectives between chips, and this spec has "
                        "no mesh: add one (--mesh X=2, or a line 'mesh X=2'), or drop --ici-bw")
    target = machine(chip, peak_flops=peak_flops, hbm_bw=hbm_bw, ici_bw=ici_bw, overrides=overrides,
                     variant=variant, hardware=hardware, vector_flops=vector_flops, symbolic=tuple(symbolic),
                     slice=slice)
    return (cls or Analysis)(cost(program), target, program=program, values=values, grow=grow)


def roofline(flops, bytes=0, chip: str | Chip | None = None, *, dtype: str = "bf16",
             peak_flops=None, hbm_bw=None, overrides=None, variant=None, hardware=None,
             vector_flops=None, cls: type[Analysis] | None = None) -> Analysis:
    """The roofline of bare counts: `roofline(flops=1e12, chip="h100").t_math`.

    Examples:
        >>> roofline(flops=1e12, peak_flops=9.89e14).t_math
        1/989
    """
    if vector_flops is not None:
        raise SpecError("vector_flops costs elementwise work; bare counts run at the matrix peak of "
                        "their dtype (analyze a spec to split the work between the units)")
    target = machine(chip, peak_flops=peak_flops, hbm_bw=hbm_bw, overrides=overrides,
                     variant=variant, hardware=hardware)
    compute = dtypes.lookup(dtype) if isinstance(dtype, str) else None
    if compute is None:
        raise SpecError(f"unknown dtype {dtype!r}")
    flops = exact_number(flops, "flops", "1e12", allow_zero=True, error=SpecError)
    moved = exact_number(bytes, "bytes", "4e9", allow_zero=True, error=SpecError)
    if flops == 0 and moved == 0:
        raise SpecError("nothing to cost: give FLOPs, bytes or both (both are 0)")
    counts = Cost(flops, flops, moved, sympy.Integer(0))
    return (cls or Analysis)(counts, target, compute=compute)


class Analysis(Network):
    """The result of an analysis: sympy expressions, evaluated lazily.

    Counts: `flops` (leading: a multiply-add is 2 FLOPs), `flops_exact`, `bytes_read`,
    `bytes_written`, `bytes`, `intensity`, `intensity_exact`, and `steps` (each step's
    own `StepCost`). With a machine: `critical_intensity`, `t_math`, `t_comms`,
    `t_lower`, `t_upper`, `bound`, `achieved_flops_per_s`. Methods: `limit(*dims)`,
    `threshold(dim)`, `at(**sizes)`; `symroof.Analysis` adds `to_dict()` and the
    renderings. Built in layers: `sized.SizedCost` (counts), `compute.Compute` (times on
    the chip), `network.Network` (collectives), then this class (bounds, limits,
    thresholds).
    """

    @functools.cached_property
    def t_lower(self) -> sympy.Expr:
        """max(T_math, T_comms), and on a mesh the network's time (latency floors included)."""
        if self.collectives:
            times = [self.t_math, self.t_comms, self.t_network_floored]
            if all(t.is_number for t in times):
                return sympy.Max(*times)
            return sympy.Max(*times, evaluate=False)
        return pick_max(self.t_math, self.t_comms)

    @functools.cached_property
    def t_upper(self) -> sympy.Expr:
        return self.t_math + self.t_comms + (self.t_network_floored if self.collectives else 0)

    @functools.cached_property
    def lines(self) -> tuple[Analysis, ...]:
        """One analysis per statement of the spec (just this one for a single statement)."""
        if self.program is None or len(self.program.statements) < 2:
            return (self,)
        found = []
        for statement, counts in zip(self.program.statements, self.cost.statements):
            program = Program((statement,), (), self.program.mesh)
            values = {k: v for k, v in self.values.items() if k in program.dims}
            grow = [d for d in self.grow or () if d in program.dims]
            found.append(type(self)(counts, self.machine, program=program, values=values, grow=grow or None,
                                    settled=self.settled))
        return tuple(found)

    @functools.cached_property
    def bound(self) -> str | sympy.Basic:
        """"compute", "memory", "balanced", on a mesh "network", or the condition for
        compute-bound when it depends on dims that have no value."""
        if self.settled_bound is not None:
            return self.settled_bound
        # evaluate=False: sympy would ask its assumption system, slowly, what sign_of
        # has just found to be open.
        if self.collectives:
            return sympy.StrictGreaterThan(self.t_math, sympy.Max(self.t_comms, self.t_network_floored,
                                                                  evaluate=False), evaluate=False)
        if self.critical_intensity.is_number and self.critical_intensity is not sympy.nan:
            return sympy.StrictGreaterThan(self.intensity, self.critical_intensity, evaluate=False)
        return sympy.StrictGreaterThan(self.t_math, self.t_comms, evaluate=False)

    @functools.cached_property
    def settled_bound(self) -> str | None:
        """`bound` where it is one word for every size of the free dims, else None (it is
        then a condition): cheaper than `bound`, which derives the condition."""
        if self.collectives:
            return self._bound_of_three()
        sign = sign_of(self.t_math - self.t_comms)
        return None if sign is None else {1: "compute", -1: "memory", 0: "balanced"}[sign]

    def _bound_of_three(self) -> str | None:
        floored = {"compute": self.t_math, "memory": self.t_comms, "network": self.t_network_floored}
        if all(t == 0 for t in floored.values()):  # a collective over an axis of one chip moves nothing
            return "balanced"
        if all(t.is_number for t in floored.values()):
            return max(floored, key=lambda k: (floored[k], k == "compute"))
        # with free dims, decide on the bandwidth-bound times; the latency floor is a number
        times = {"compute": self.t_math, "memory": self.t_comms, "network": self.t_network}
        for name, t in times.items():
            if all(sign_of(t - other) == 1 for key, other in times.items() if key != name):
                return name
        return None

    @functools.cached_property
    def achieved_flops_per_s(self) -> sympy.Expr:
        """FLOPs / T_lower: the peak when compute-bound, intensity x bandwidth when not."""
        if self.flops == 0:
            return sympy.Integer(0)
        if self.collectives:
            return self.flops / self.t_lower
        return pick_max(self.peak_flops, self.intensity * self._need_machine().bandwidth(), sympy.Min)

    def limit(self, *dims) -> sympy.Expr:
        """The intensity's limit as the named dims grow together, e.g. `limit("D", "F")`.

        Warns (SymroofWarning) where the limit depends on how they grow.
        """
        symbols = [self._dim(d) for d in dim_names(dims)]
        if not symbols:
            raise SpecError("name the dims to take the limit over, e.g. limit('D', 'F')")
        for s in symbols:
            if s in self._subs:
                raise SpecError(f"{s} has a size ({self._subs[s]}): a limit takes a dim without one "
                                "to infinity; drop it from the limit, or leave it free")
        keep = {s: v for s, v in self._subs.items() if s not in symbols}
        num, den = self.cost.flops.xreplace(keep), self.cost.bytes.xreplace(keep)
        value = ratio_limit(num, den, symbols)
        if not path_independent(num, den, symbols):
            warnings.warn(f"the intensity's limit as {', '.join(map(str, symbols))} -> oo depends on "
                          f"how they grow; taking them equal gives {value}", SymroofWarning, stacklevel=caller_level())
        return value

    def threshold(self, dim, grow=None) -> Threshold:
        """Solve for the sizes of `dim` that make the analysis compute-bound: T_math above
        T_comms (HBM), and on a mesh with collectives, above T_network too (`.network`,
        taken in the bandwidth-bound regime).

        Gives the rule (the other named dims without a size taken to infinity together, as
        the book does; or only the dims in `grow`, given here or to `analyze`, the others
        kept as symbols) and the exact value at the other dims' sizes, or an expression in
        them with the condition under which it exists.
        """
        x = self._dim(dim)
        grow = self._grow(grow) if grow is not None else self.grow
        if x in self._subs:
            raise SpecError(f"{x} has a value ({self._subs[x]}): leave it free to solve for it")
        self._need_machine()
        if self.flops == 0:
            return Threshold(str(x), None, None, None,
                             reason_parts=(("no FLOPs to run: it is never compute-bound",),))
        found = solve(self, x, Roof("HBM", self.t_comms, self.bytes, self.critical_intensity), grow)
        if self.cost.moves and self.has_links:
            network = solve(self, x, Roof("network", self.t_network, self.network_bytes,
                                          self.critical_network_intensity), grow)
            found = dataclasses.replace(found, network=self._with_latency(network, x))
        return found

    def _with_latency(self, network: Threshold, x) -> Threshold:
        """The network threshold is taken in the bandwidth-bound regime; where the sizes are
        known and the latency floor lies beyond it, say where T_math clears the floor too."""
        floor = self.t_network_latency
        if not (self.t_network_latency_known and floor and network.op == ">" and network.exact is not None
                and network.exact.is_number):
            return network
        t_math, floor_cleared = cleared(self.t_math, floor)  # X in a denominator: cleared first
        region = positive_region(t_math - floor_cleared, x)
        if region.kind != "above" or region.root is None or not region.root.is_number \
                or region.root <= network.exact:
            return network
        words = (f"with the latency floor ({duration(floor)}) it takes ", sympy.Gt(x, region.root))
        return dataclasses.replace(network, reason_parts=network.reason_parts + (words,),
                                   past_latency=region.root)

    def at(self, **sizes) -> Analysis:
        """The same analysis with named dims given sizes: `a.at(B=128)`. A dim that already
        has a size keeps it: giving it another is an error."""
        for name, value in sizes.items():
            if name in self.values and self.values[name] != size(name, value):
                raise SpecError(f"{name} already has the size {self.values[name]}")
        merged = {name: int(v) for name, v in self.values.items()}
        merged.update(sizes)
        grow = [d for d in self.grow or () if d not in sizes] if self.grow else None
        return type(self)(self.cost, self.machine, program=self.program, values=merged,
                          compute=self.compute_default, grow=grow or None, settled=self.settled)

    @functools.cached_property
    def unfused(self) -> Analysis | None:
        """The same program with its `fused { ... }` blocks opened, every intermediate
        written to HBM and read back: the side-by-side view of what fusing saves. None for a
        program without a fused block."""
        if self.program is None or not any(isinstance(s, Fused) for s in self.program.statements):
            return None
        opened = tuple(inner for s in self.program.statements
                       for inner in (s.statements if isinstance(s, Fused) else (s,)))
        program = Program(opened, self.program.values, self.program.mesh)
        values = {k: int(v) for k, v in self.values.items() if k not in dict(self.program.values)}
        return type(self)(cost(program), self.machine, program=program, values=values, grow=self.grow,
                          settled=self.settled)

    def __repr__(self) -> str:
        """One line; `symroof.analyze` gives the `analysis.Analysis` that shows itself as
        a table, a report, JSON and LaTeX (the renderers sit above this module)."""
        on = f" on {self.machine.name}" if self.machine is not None else ""
        return f"<{type(self).__name__} of {spec_line(self.spec) or 'bare counts'!r}{on}>"
