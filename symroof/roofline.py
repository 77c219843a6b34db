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
import math
import numbers
import warnings
from dataclasses import dataclass
from typing import Mapping, NamedTuple

import sympy

from . import dtypes
from .collectives import Time as CollectiveTime, check_domain, time as collective_time
from .cost import Cost, MoveCost, cost, statement_cost
from .errors import HardwareError, SpecError, SymroofError, SymroofWarning
from .hardware import Chip, exact_value, get_chip
from .ir import Program, dim_symbol
from .oneline import collective_line
from .parse import parse
from .show import seconds
from .sizes import size_value
from .solve import fraction_expr, path_independent, polys, positive_region, ratio_limit, sign_of
from .thresholds import Roof, Threshold, solve

CONVENTIONS = ("1 FLOP = one multiply or one add (a multiply-add is 2); int dtypes count OPs alike; "
               "peaks are dense (no 2:4 sparsity); bytes are HBM bytes; GB = 1e9 bytes; "
               "times in seconds")


# Figures outside this range are typos (a bandwidth of 1e-300 bytes/s), and printing
# what they lead to would overflow a float.
_SMALLEST, _LARGEST = sympy.Rational(1, 10**30), sympy.Integer(10**40)


def exact_number(value, what: str = "value", example: str = "8.2e11",
                 allow_zero: bool = False, error=HardwareError) -> sympy.Rational:
    """A positive figure as an exact rational: 1.97e14 is 197000000000000, never a binary
    float. Strings must be plain decimal numbers; nothing is evaluated.

    Examples:
        >>> exact_number(8.2e11), exact_number("1e-6")
        (820000000000, 1/1000000)
    """
    if allow_zero and not isinstance(value, bool) and isinstance(value, (int, float, str)) \
            and str(value).strip() in ("0", "0.0"):
        return sympy.Integer(0)
    try:
        number = exact_value(value)
    except ValueError as problem:
        raise error(f"{what} {problem}; e.g. {example}") from None
    if not _SMALLEST <= number <= _LARGEST:
        raise error(f"{what} {value} is out of range (1e-30 to 1e40); e.g. {example}")
    return number


@dataclass(frozen=True)
class Machine:
    """The figures an analysis runs against: a chip, or bare numbers, or a chip with
    some figures replaced for this analysis.

    Attributes:
        name: what to call it in output ("TPU v5e", or "custom").
        chip: the chip, with overrides applied; None for bare numbers.
        flat_peak: a peak FLOPs/s that applies to every dtype (`--peak-flops`), or None.
        hbm_bw: HBM bandwidth in bytes/s, or None when unknown.
        ici_bw: a one-way per-link ICI bandwidth to use in place of the chip's (`--ici-bw`).
    """

    name: str
    chip: Chip | None
    flat_peak: sympy.Rational | None
    hbm_bw: sympy.Rational | None
    ici_bw: sympy.Rational | None = None

    def peak(self, rate: str) -> sympy.Rational:
        if self.flat_peak is not None:
            return self.flat_peak
        if self.chip is not None:
            return self.chip.peak_flops(rate)
        raise HardwareError("no peak FLOPs/s to run against: name a chip or give --peak-flops")

    def bandwidth(self) -> sympy.Rational:
        if self.hbm_bw is None:
            raise HardwareError(f"{self.name} has no HBM bandwidth: give --hbm-bw")
        return self.hbm_bw


def machine(chip: str | Chip | None = None, *, peak_flops=None, hbm_bw=None, ici_bw=None,
            overrides: Mapping[str, object] | None = None, variant: str | None = None,
            hardware=None) -> Machine | None:
    """Build the machine an analysis runs against; None when nothing at all is given."""
    if isinstance(chip, str):
        chip = get_chip(chip, hardware, variant=variant)
    elif chip is not None and not isinstance(chip, Chip):
        raise HardwareError(f"chip must be a chip's name or a Chip, got {chip!r}")
    elif chip is not None and variant is not None:
        chip = chip.with_variant(variant)
    if overrides:
        if chip is None:
            raise HardwareError("figure overrides need a chip to override (--chip)")
        chip = chip.with_figures(dict(overrides))
    peak = None if peak_flops is None else exact_number(peak_flops, "peak FLOPs/s", "1.97e14")
    bw = None if hbm_bw is None else exact_number(hbm_bw, "HBM bandwidth", "8.2e11")
    ici = None if ici_bw is None else exact_number(ici_bw, "ICI bandwidth (one way, per link)", "4.5e10")
    if chip is None and peak is None and bw is None and ici is None:
        return None
    if bw is None and chip is not None:
        bw = chip.figure("hbm_bandwidth_bytes_per_s")
    return Machine(chip.name if chip is not None else "custom", chip, peak, bw, ici)


def analyze(spec: str | Program, chip: str | Chip | None = None, *, dtype: str = "bf16",
            peak_flops=None, hbm_bw=None, ici_bw=None, overrides=None, variant=None, hardware=None,
            values: Mapping[str, int] | None = None, mesh=None, grow=None) -> "Analysis":
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
        hardware: path of a hardware file to use in place of the shipped one.
        values: sizes for named dims, as `--set` gives them: integers, or text such as
            "4096", "1e6", "2**20", "128k" (k, M, G, T are powers of 1024).
        grow: the dims a threshold's rule takes to infinity ("B,T"), such as batch-like
            dims; by default every named dim without a size but the one solved for.
        mesh: the mesh for sharded dims ("X=2, Y=4@dcn", {"X": 2} or a `Mesh`), unless the
            spec has a `mesh` line.
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
                     variant=variant, hardware=hardware)
    return Analysis(cost(program), target, program=program, values=values, grow=grow)


def roofline(flops, bytes=0, chip: str | Chip | None = None, *, dtype: str = "bf16",
             peak_flops=None, hbm_bw=None, overrides=None, variant=None, hardware=None) -> "Analysis":
    """The roofline of bare counts: `roofline(flops=1e12, chip="h100").t_math`.

    Examples:
        >>> roofline(flops=1e12, peak_flops=9.89e14).t_math
        1/989
    """
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
    return Analysis(counts, target, compute=compute)


class CollectiveCost(NamedTuple):
    """A collective (its V) and its time on the links: a pair, shown on one line."""

    move: MoveCost
    time: CollectiveTime

    def __repr__(self) -> str:
        return collective_line(self.move, self.time)


class Analysis:
    """The result of an analysis: sympy expressions, evaluated lazily.

    Counts: `flops` (leading: a multiply-add is 2 FLOPs), `flops_exact`, `bytes_read`,
    `bytes_written`, `bytes`, `intensity`, `intensity_exact`, and `steps` (each step's
    own `StepCost`). With a machine: `critical_intensity`, `t_math`, `t_comms`,
    `t_lower`, `t_upper`, `bound`, `achieved_flops_per_s`. Methods: `limit(*dims)`,
    `threshold(dim)`, `at(**sizes)`, `to_dict()`.
    """

    def __init__(self, counts: Cost, target: Machine | None, *, program: Program | None = None,
                 values: Mapping[str, int] | None = None, compute: dtypes.DType | None = None,
                 grow=None):
        self.cost = counts
        self.machine = target
        self.program = program
        self.compute_default = compute
        fixed = dict(program.values) if program is not None else {}
        given = {name: _size(name, v) for name, v in (values or {}).items()}
        for name, value in given.items():
            if program is not None and name not in program.dims:
                raise SpecError(_unknown_dim(name, program.dims))
            if name in fixed and fixed[name] != value:
                raise SpecError(f"{name} is {fixed[name]} in the spec; a size of {value} for it "
                                "contradicts the spec")
        self.values = {name: sympy.Integer(v) for name, v in {**fixed, **given}.items()}
        if program is not None and program.mesh is not None:
            _check_splits(program, self.values)
        self._subs = {dim_symbol(name): v for name, v in self.values.items()}
        self._compiled: dict = {}
        self.grow = self._grow(grow)

    # -- plumbing ----------------------------------------------------------------------

    def _at(self, expr: sympy.Expr) -> sympy.Expr:
        return expr.xreplace(self._subs) if self._subs else expr

    def _dim(self, name) -> sympy.Symbol:
        name = str(name)
        dims = self.dims
        if name not in dims:
            raise SpecError(_unknown_dim(name, dims))
        return dim_symbol(name)

    @property
    def dims(self) -> tuple[str, ...]:
        """The spec's named dims."""
        return self.program.dims if self.program is not None else ()

    @property
    def free_dims(self) -> tuple[str, ...]:
        """The named dims without a size."""
        return tuple(d for d in self.dims if d not in self.values)

    @property
    def spec(self) -> str:
        return str(self.program) if self.program is not None else ""

    @property
    def steps(self):
        return self.cost.steps

    @property
    def chip(self) -> Chip | None:
        return self.machine.chip if self.machine is not None else None

    @property
    def compute_dtypes(self) -> tuple[dtypes.DType, ...]:
        """The dtypes the FLOPs run in: steps that do no FLOPs (copies, casts) run in none."""
        found = dict.fromkeys(s.step.compute for s in self.cost.steps if s.flops != 0)
        if not self.cost.steps and self.compute_default is not None:
            found[self.compute_default] = None
        return tuple(found)

    @property
    def has_peak(self) -> bool:
        """Whether the machine has a peak FLOPs/s to run against (a chip, or --peak-flops)."""
        return self.machine is not None and (self.machine.chip is not None
                                             or self.machine.flat_peak is not None)

    def _need_machine(self) -> Machine:
        if self.machine is None:
            raise HardwareError("this needs a chip (--chip) or --peak-flops and --hbm-bw")
        return self.machine

    # -- counts ------------------------------------------------------------------------

    @functools.cached_property
    def flops(self) -> sympy.Expr:
        return self._at(self.cost.flops)

    @functools.cached_property
    def flops_exact(self) -> sympy.Expr:
        return self._at(self.cost.flops_exact)

    @functools.cached_property
    def bytes_read(self) -> sympy.Expr:
        return self._at(self.cost.bytes_read)

    @functools.cached_property
    def bytes_written(self) -> sympy.Expr:
        return self._at(self.cost.bytes_written)

    @functools.cached_property
    def bytes(self) -> sympy.Expr:
        return self._at(self.cost.bytes)

    @functools.cached_property
    def intensity(self) -> sympy.Expr:
        """FLOPs per HBM byte (leading FLOPs)."""
        return _ratio(self.flops, self.bytes)

    @functools.cached_property
    def intensity_exact(self) -> sympy.Expr:
        return _ratio(self.flops_exact, self.bytes)

    # -- on the machine ----------------------------------------------------------------

    @functools.cached_property
    def _t_math_base(self) -> sympy.Expr:
        target = self._need_machine()
        if not self.cost.steps:
            return self.cost.flops / target.peak(self.compute_default.rate) if self.cost.flops else \
                sympy.Integer(0)
        return sympy.Add(*(s.flops / target.peak(s.step.compute.rate) for s in self.cost.steps
                           if s.flops != 0))

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
    def t_lower(self) -> sympy.Expr:
        """max(T_math, T_comms), and on a mesh the network's time (latency floors included)."""
        if self.collectives:
            times = [self.t_math, self.t_comms, self.t_network_floored]
            if all(t.is_number for t in times):
                return sympy.Max(*times)
            return sympy.Max(*times, evaluate=False)
        return _max(self.t_math, self.t_comms)

    @functools.cached_property
    def t_upper(self) -> sympy.Expr:
        return self.t_math + self.t_comms + (self.t_network_floored if self.collectives else 0)

    @functools.cached_property
    def lines(self) -> tuple["Analysis", ...]:
        """One analysis per statement of the spec (just this one for a single statement)."""
        if self.program is None or len(self.program.statements) < 2:
            return (self,)
        found = []
        for statement in self.program.statements:
            program = Program((statement,), (), self.program.mesh)
            values = {k: v for k, v in self.values.items() if k in program.dims}
            grow = [d for d in self.grow or () if d in program.dims]
            found.append(Analysis(statement_cost(statement, self.program.mesh), self.machine,
                                  program=program, values=values, grow=grow or None))
        return tuple(found)

    # -- on the mesh -------------------------------------------------------------------------

    @property
    def mesh(self):
        return self.cost.mesh

    @functools.cached_property
    def flops_total(self) -> sympy.Expr:
        """FLOPs of the whole computation, counted once (on one chip, the same as `flops`)."""
        return self._at(self.cost.flops_total) if self.cost.flops_total is not None else self.flops

    @functools.cached_property
    def replication(self) -> sympy.Expr:
        """How many chips do each FLOP: chips x per-chip FLOPs / total FLOPs (1: no chip
        repeats another's work)."""
        if self.mesh is None or self.flops_total == 0:
            return sympy.Integer(1)
        return _ratio(self.mesh.chips * self.flops, self.flops_total)

    def granularity(self, dim) -> int:
        """The step a dim's size moves in: the chips that split it (its sizes must divide
        evenly), 1 for a dim no axis splits."""
        step = 1
        if self.program is not None and self.mesh is not None:
            for statement in self.program.statements:
                for tensor in (*statement.operands, statement.output):
                    for d in tensor.dims:
                        if d.name == str(dim):
                            chips = 1
                            for axis in d.axes:
                                chips *= self.mesh.axis(axis).size
                            step = step * chips // math.gcd(step, chips)
        return step

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
        return tuple((move, collective_time(move.move.kind, [self.mesh.axis(a) for a in move.move.axes],
                                            move.bytes, self.chip, ici)) for move in self.cost.moves)

    @functools.cached_property
    def collectives(self) -> tuple:
        """Each collective, at the analysis's sizes, with its time on the chip's links:
        (MoveCost, collectives.Time) pairs, each shown on one line."""
        return tuple(CollectiveCost(dataclasses.replace(move, bytes=self._at(move.bytes)),
                                    dataclasses.replace(t, bandwidth=self._at(t.bandwidth)))
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
        return sympy.Add(*(m.bytes for m, _ in self._collectives_base))

    @functools.cached_property
    def network_bytes(self) -> sympy.Expr:
        """The collectives' V summed: the bytes each chip holds of their larger sides."""
        return self._at(self._network_bytes_base)

    @functools.cached_property
    def network_intensity(self) -> sympy.Expr:
        """Per-chip FLOPs per byte of the collectives' V."""
        return _ratio(self.flops, self.network_bytes)

    @functools.cached_property
    def critical_network_intensity(self) -> sympy.Expr:
        """Peak FLOPs/s over the links' effective bandwidth (V / T_network): the network
        intensity above which T_math exceeds T_network (1.97e14 / 4.5e10 = 4377.8 for a
        v5e axis of 2)."""
        if self.peak_flops is sympy.nan:  # no FLOPs: no peak is in play
            return sympy.nan
        return _ratio(self.peak_flops * self.t_network, self.network_bytes)

    @functools.cached_property
    def peak_flops(self) -> sympy.Expr:
        """The peak FLOPs/s the analysis runs at: the compute dtype's, or FLOPs / T_math for
        a chain whose steps compute in different dtypes."""
        rates = {d.rate for d in self.compute_dtypes}
        if not rates:  # no FLOPs at all: no dtype's peak is in play
            return sympy.nan
        peaks = {self._need_machine().peak(rate) for rate in rates}
        if len(peaks) == 1:  # one dtype, or several at one rate (--peak-flops)
            return peaks.pop()
        return _ratio(self.flops, self.t_math)

    @functools.cached_property
    def critical_intensity(self) -> sympy.Expr:
        """Peak FLOPs/s / HBM bandwidth: the intensity above which the work is compute-bound
        (nan for work without FLOPs)."""
        if self.peak_flops is sympy.nan:
            return sympy.nan
        return _ratio(self.peak_flops, self._need_machine().bandwidth())

    @functools.cached_property
    def bound(self) -> str | sympy.Basic:
        """"compute", "memory", "balanced", on a mesh "network", or the condition for
        compute-bound when it depends on dims that have no value."""
        if self.collectives:
            return self._bound_of_three()
        sign = sign_of(self.t_math - self.t_comms)
        if sign is not None:
            return {1: "compute", -1: "memory", 0: "balanced"}[sign]
        # evaluate=False: sympy would ask its assumption system, slowly, what sign_of
        # has just found to be open.
        if self.critical_intensity.is_number and self.critical_intensity is not sympy.nan:
            return sympy.StrictGreaterThan(self.intensity, self.critical_intensity, evaluate=False)
        return sympy.StrictGreaterThan(self.t_math, self.t_comms, evaluate=False)

    def _bound_of_three(self):
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
        return sympy.StrictGreaterThan(self.t_math, sympy.Max(self.t_comms, self.t_network_floored,
                                                              evaluate=False), evaluate=False)

    @functools.cached_property
    def achieved_flops_per_s(self) -> sympy.Expr:
        """FLOPs / T_lower: the peak when compute-bound, intensity x bandwidth when not."""
        if self.flops == 0:
            return sympy.Integer(0)
        if self.collectives:
            return self.flops / self.t_lower
        return _max(self.peak_flops, self.intensity * self._need_machine().bandwidth(), sympy.Min)

    # -- limits and thresholds -----------------------------------------------------------

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
                          f"how they grow; taking them equal gives {value}", SymroofWarning, stacklevel=2)
        return value

    def _grow(self, grow) -> tuple[str, ...] | None:
        """The dims a threshold's rule takes to infinity, checked: dims of the spec, none
        with a size."""
        if grow is None:
            return None
        names = dim_names([grow])
        if not names:
            raise SpecError("name the dims that grow, e.g. grow='B,T'")
        for name in names:
            self._dim(name)
            if name in self.values:
                raise SpecError(f"{name} has a size ({self.values[name]}) and cannot also grow: "
                                "leave it free, or drop it from the dims that grow")
        return tuple(dict.fromkeys(names))

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
        region = positive_region(self.t_math - floor, x)
        if region.kind != "above" or not region.root.is_number or region.root <= network.exact:
            return network
        words = (f"with the latency floor ({seconds(floor)}) it takes ", sympy.Gt(x, region.root))
        return dataclasses.replace(network, reason_parts=network.reason_parts + (words,),
                                   past_latency=region.root)

    # -- other views -----------------------------------------------------------------------

    def at(self, **sizes) -> "Analysis":
        """The same analysis with named dims given sizes: `a.at(B=128)`. A dim that already
        has a size keeps it: giving it another is an error."""
        for name, value in sizes.items():
            if name in self.values and self.values[name] != _size(name, value):
                raise SpecError(f"{name} already has the size {self.values[name]}")
        merged = {name: int(v) for name, v in self.values.items()}
        merged.update(sizes)
        grow = [d for d in self.grow or () if d not in sizes] if self.grow else None
        return Analysis(self.cost, self.machine, program=self.program, values=merged,
                        compute=self.compute_default, grow=grow or None)

    def evaluate(self, quantity: str, **arrays):
        """A quantity over arrays of sizes, vectorised with numpy: the dims left free take
        the arrays (broadcast together), e.g. `a.at(D=4096, F=4096).evaluate("t_lower",
        B=numpy.arange(1, 10**6))`."""
        import numpy

        expr = self._quantity(quantity, "cannot evaluate")
        for name in arrays:
            if name in self.values:
                raise SpecError(f"{name} already has the size {self.values[name]}; "
                                "evaluate() takes arrays for the dims left free")
            self._dim(name)
        names = tuple(sorted(arrays))
        missing = sorted(str(s) for s in expr.free_symbols if str(s) not in arrays)
        if missing:
            raise SpecError(f"give sizes for {', '.join(missing)} to evaluate {quantity}")
        key = (quantity, names)
        if key not in self._compiled:
            self._compiled[key] = sympy.lambdify([dim_symbol(n) for n in names], expr, modules="numpy")
        values = [numpy.asarray(arrays[n], dtype=float) for n in names]
        for name, v in zip(names, values):
            # sizes need not be whole here (a smooth curve), but they are sizes: positive
            if not numpy.all(numpy.isfinite(v) & (v > 0)):
                raise SpecError(f"the sizes given for {name} must be positive and finite")
        try:
            shape = numpy.broadcast_shapes(*(v.shape for v in values))
        except ValueError:
            raise SpecError(f"the arrays for {', '.join(names)} have shapes "
                            f"{[v.shape for v in values]} that do not broadcast together") from None
        return numpy.broadcast_to(self._compiled[key](*values), shape)

    def _quantity(self, quantity: str, refusal: str) -> sympy.Expr:
        """A quantity by name; a name that is not one is refused in the caller's words."""
        if quantity not in _QUANTITIES:
            raise SpecError(f"{refusal} {quantity!r}; quantities: {', '.join(_QUANTITIES)}")
        return getattr(self, quantity)

    def value(self, quantity: str) -> int | float:
        """A quantity as a plain Python number, for code that wants one (formatting, numpy,
        JSON): an int where it is a whole number, else a float. The fields themselves stay
        exact sympy numbers. Every dim it depends on needs a size.

        Examples:
            >>> a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="tpu-v5e")
            >>> a.at(B=128, D=4096, F=4096).value("flops"), f"{a.at(B=128, D=4096, F=4096).value('t_lower'):.3e}"
            (4294967296, '4.348e-05')
        """
        expr = self._quantity(quantity, "no quantity")
        if not expr.is_number:
            missing = ", ".join(sorted(str(s) for s in expr.free_symbols))
            raise SpecError(f"{quantity} depends on {missing}: give {'it' if ',' not in missing else 'them'} "
                            "a size with at(...) first")
        if expr is sympy.nan:
            return math.nan
        if expr in (sympy.oo, -sympy.oo):
            return math.inf if expr > 0 else -math.inf
        return int(expr) if expr.is_Integer else float(expr)

    def numbers(self) -> dict[str, int | float]:
        """Every quantity that is a number at this analysis's sizes, as plain Python numbers
        (see `value`)."""
        found = {}
        for quantity in _QUANTITIES:
            if self.mesh is None and quantity in _MESH_ONLY:
                continue
            try:
                expr = getattr(self, quantity)
            except SymroofError:  # a time without a chip, say
                continue
            if expr.is_number:
                found[quantity] = self.value(quantity)
        return found

    def to_dict(self, limit=None, solve=None) -> dict:
        """A JSON-ready dict (see `json_report.to_json_dict`)."""
        from .json_report import to_json_dict
        return to_json_dict(self, limit=limit, solve=solve)

    def __repr__(self) -> str:
        """A short table (`render.summary`); `str()` and `print()` give the full report."""
        from .render import summary
        return summary(self)

    def __str__(self) -> str:
        from .render import table
        return table(self)

    def _repr_latex_(self) -> str:
        from .latex import latex_summary
        return latex_summary(self)


# ---- helpers ------------------------------------------------------------------------------

_QUANTITIES = ("flops", "flops_exact", "bytes", "bytes_read", "bytes_written", "intensity",
               "intensity_exact", "t_math", "t_comms", "t_lower", "t_upper", "achieved_flops_per_s",
               "flops_total", "t_network", "t_network_latency", "network_bytes", "network_intensity")

_MESH_ONLY = ("flops_total", "t_network", "t_network_latency", "network_bytes", "network_intensity")


def _ratio(num: sympy.Expr, den: sympy.Expr) -> sympy.Expr:
    """num / den, simply cancelled (common monomial and numeric factor, see
    `solve.cancel_simple`): costs are polynomials in the dims."""
    if den == 0:
        return sympy.oo if num != 0 else sympy.nan
    if num == 0 or num.is_number and den.is_number:
        return num / den
    (n1, d1), (n2, d2) = sympy.fraction(sympy.together(num)), sympy.fraction(sympy.together(den))
    return fraction_expr(*polys(n1 * d2, d1 * n2))


def _max(a: sympy.Expr, b: sympy.Expr, pick=sympy.Max) -> sympy.Expr:
    """Max or Min without sympy's search for which argument wins, which is slow and, for
    costs with free dims, never succeeds; numbers still come out as one number."""
    if a.is_number and b.is_number:
        return pick(a, b)
    return pick(a, b, evaluate=False)


def _check_splits(program: Program, values: dict) -> None:
    """A size given to a sharded dim must split evenly over its axes."""
    for statement in program.statements:
        for tensor in (*statement.operands, statement.output):
            for dim in tensor.dims:
                if dim.axes and dim.name in values:
                    chips = 1
                    for axis in dim.axes:
                        chips *= program.mesh.axis(axis).size
                    if values[dim.name] % chips:
                        raise SpecError(f"{dim.name} = {values[dim.name]} does not split evenly over "
                                        f"{', '.join(dim.axes)} ({chips} chips)")


def _size(name: str, value) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        return size_value(value, f"{name}={value}")
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, sympy.Integer)):
        raise SpecError(f"{name}={value!r}: a dim's size must be a positive integer")
    if not 0 < int(value) < 10**18:
        raise SpecError(f"{name}={value}: a dim's size must be a positive integer below 1e18")
    return int(value)


def _unknown_dim(name: str, dims) -> str:
    import difflib
    close = difflib.get_close_matches(name, list(dims), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    known = ", ".join(dims) if dims else "none"
    return f"unknown dim '{name}'{hint} (the spec's named dims: {known})"


def dim_names(dims) -> list[str]:
    """Dim names from strings ("D,F"), lists or symbols, flattened."""
    out = []
    for d in dims:
        if isinstance(d, str):
            out.extend(p.strip() for p in d.split(",") if p.strip())
        elif isinstance(d, (list, tuple)):
            out.extend(dim_names(d))
        else:
            out.append(str(d))
    return out
