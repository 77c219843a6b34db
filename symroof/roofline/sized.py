"""An analysis's counts at its sizes: FLOPs, transcendentals, bytes and intensities of a
costed program, with the sizes given to its dims, and quantities as plain numbers.

The first of the parts `symroof.Analysis` holds: `Sized` (the counts), `times.Times`
(on the machine's units and links) and `bounds.Bounds` (which time bounds the work, its
limits and thresholds). Each part reads the ones before it, never the whole analysis.
"""

from __future__ import annotations

import difflib
import functools
import math
import numbers
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import sympy
from sympy.polys.polyerrors import CoercionFailed

from .. import cancel, dtypes
from ..errors import HardwareError, SpecError
from ..hardware.chips import Chip
from ..hardware.machines import Machine
from ..ir import Program, dim_symbol, tensors_of
from ..lang.sizes import size_value
from ..mesh import Mesh
from .collectives import case_at
from .cost import Cost, StepCost
from .solve import fraction_expr, polys
from .stored import Stored, stored


def read_only(self: object, name: str, value: object) -> None:
    """The `__setattr__` of an analysis and its parts: a result is read, never changed, so
    that renderers and callers see what was derived. (Lazily derived fields are cached in
    `__dict__` directly, as cached_property does.)"""
    if getattr(self, "_frozen", False):
        raise AttributeError(f"an analysis is read-only: '{name}' cannot be set; use at(...) for "
                             "other sizes, or analyze again")
    object.__setattr__(self, name, value)


class Sized:
    """A costed program at the sizes given to its dims: its counts (FLOPs, bytes,
    intensities, the bare arrays' bytes), and the checks on those sizes."""

    def __init__(self, counts: Cost, target: Machine | None, *, program: Program | None = None,
                 values: Mapping[str, int | str] | None = None, compute: dtypes.DType | None = None,
                 grow: str | Iterable[str] | None = None, settled: Mapping[str, sympy.Expr] | None = None):
        self.cost = counts
        self.machine = target
        self.program = program
        self.compute_default = compute
        # names already in the counts (a model's sizes, its lets): no longer dims; a size for
        # one is taken where it agrees with them, else refused, never ignored
        self.settled = dict(settled or {})
        fixed = dict(program.values) if program is not None else {}
        given = {name: size(name, v) for name, v in (values or {}).items()}
        for name in [n for n in given if n in self.settled]:
            if self.settled[name].xreplace({dim_symbol(n): v for n, v in given.items()}) != given[name]:
                raise SpecError(f"{name} is {self.settled[name]} in this analysis: {name}={given[name]} does not agree")
            del given[name]
        for name, value in given.items():
            if program is not None and name not in self.dims:
                raise SpecError(_unknown_dim(name, self.dims))
            if name in fixed and fixed[name] != value:
                raise SpecError(f"{name} is {fixed[name]} in the spec; a size of {value} for it "
                                "contradicts the spec")
        self.values = {name: sympy.Integer(v) for name, v in {**fixed, **given}.items()}
        if program is not None and program.mesh is not None:
            _check_splits(program, self.values)
            for name, value in given.items():
                self.check_case(name, value)
        self.subs = {dim_symbol(name): v for name, v in (self.settled | self.values).items()}
        self._compiled: dict[tuple[str, tuple[str, ...]], Callable[..., Any]] = {}
        self.grow = self.grown(grow)
        self._frozen = True

    __setattr__ = read_only

    def check_case(self, name: str, value: int) -> None:
        """A size for a symbolic mesh axis a collective crosses: in its formulas' case (case_at)."""
        mesh = self.program.mesh if self.program is not None else None
        over = [m.move.kind for m in self.cost.moves if name in m.move.axes]
        if mesh is None or name not in mesh.symbolic or not over:
            return
        if wrong := case_at(mesh.axis(name), int(value), self.chip, "AllToAll" in over):
            raise SpecError(wrong)

    def substitute(self, expr: sympy.Expr) -> sympy.Expr:
        """An expression in the dims with the sizes given (and the settled names) put in."""
        return expr.xreplace(self.subs) if self.subs else expr

    def dim(self, name: object) -> sympy.Symbol:
        """A dim of the spec by name (or symbol); an unknown one is refused with a suggestion."""
        name = str(name)
        dims = self.dims
        if name not in dims:
            raise SpecError(_unknown_dim(name, dims))
        return dim_symbol(name)

    @property
    def dims(self) -> tuple[str, ...]:
        """The spec's named dims and mesh axes without a size (symbols alike), less the settled."""
        if self.program is None:
            return ()
        mesh = self.program.mesh
        names = self.program.dims + (mesh.symbolic if mesh is not None else ())
        return tuple(n for n in names if n not in self.settled) if self.settled else names

    @property
    def free_dims(self) -> tuple[str, ...]:
        """The named dims without a size."""
        return tuple(d for d in self.dims if d not in self.values)

    @property
    def spec(self) -> str:
        return str(self.program) if self.program is not None else ""

    @property
    def steps(self) -> tuple[StepCost, ...]:
        return self.cost.steps

    @property
    def chip(self) -> Chip | None:
        return self.machine.chip if self.machine is not None else None

    @property
    def compute_dtypes(self) -> tuple[dtypes.DType, ...]:
        """The dtypes the FLOPs run in: steps that do no FLOPs (copies, casts) run in none."""
        found = dict.fromkeys(s.step.compute for s in self.cost.steps
                              if s.step is not None and (s.flops != 0 or s.transcendentals != 0))
        if not self.cost.steps and self.compute_default is not None:
            found[self.compute_default] = None
        return tuple(found)

    @property
    def has_peak(self) -> bool:
        """Whether the machine has a peak FLOPs/s to run against (a chip, or --peak-flops)."""
        return self.machine is not None and (self.machine.chip is not None
                                             or self.machine.flat_peak is not None)

    def need_machine(self) -> Machine:
        """The machine, where the caller needs one; a HardwareError says how to give one."""
        if self.machine is None:
            raise HardwareError("this needs a chip (--chip) or --peak-flops and --hbm-bw")
        return self.machine

    @functools.cached_property
    def flops(self) -> sympy.Expr:
        return self.substitute(self.cost.flops)

    @functools.cached_property
    def flops_exact(self) -> sympy.Expr:
        return self.substitute(self.cost.flops_exact)

    @functools.cached_property
    def bytes_read(self) -> sympy.Expr:
        return self.substitute(self.cost.bytes_read)

    @functools.cached_property
    def bytes_written(self) -> sympy.Expr:
        return self.substitute(self.cost.bytes_written)

    @functools.cached_property
    def bytes(self) -> sympy.Expr:
        return self.substitute(self.cost.bytes)

    @functools.cached_property
    def intensity(self) -> sympy.Expr:
        """FLOPs per HBM byte (leading FLOPs)."""
        return ratio(self.flops, self.bytes)

    @functools.cached_property
    def intensity_exact(self) -> sympy.Expr:
        return ratio(self.flops_exact, self.bytes)

    @functools.cached_property
    def transcendentals(self) -> sympy.Expr:
        """exp, log, tanh, rsqrt, ... evaluations, counted apart from FLOPs as XLA does."""
        return self.substitute(self.cost.transcendentals)

    @functools.cached_property
    def flops_vector(self) -> sympy.Expr:
        """The FLOPs that run on the vector unit (the rest run on the matrix unit)."""
        return self.substitute(self.cost.flops_vector)

    @property
    def mesh(self) -> Mesh | None:
        return self.cost.mesh

    @functools.cached_property
    def flops_total(self) -> sympy.Expr:
        """FLOPs of the whole computation, counted once (on one chip, the same as `flops`)."""
        return self.substitute(self.cost.flops_total) if self.cost.flops_total is not None else self.flops

    @functools.cached_property
    def replication(self) -> sympy.Expr:
        """How many chips do each FLOP: chips x per-chip FLOPs / total FLOPs (1: no chip
        repeats another's work). For bare arrays alone, how many chips hold each element."""
        if self.mesh is None or (self.flops_total == 0 and not self.arrays):
            return sympy.Integer(1)
        if self.flops_total == 0:  # bare arrays alone: their bytes in all over their bytes held once
            return ratio(self.bytes_total, sympy.Add(*(a.bytes_total / a.replication for a in self.arrays)))
        return ratio(self.substitute(self.mesh.count) * self.flops, self.flops_total)

    @functools.cached_property
    def arrays(self) -> tuple[Stored, ...]:
        """The spec's bare arrays (`bf16[I_XY, J]`) as stored (stored.py), at the sizes given."""
        return tuple(a.at(self.subs) for a in stored(self.program)) if self.program is not None else ()

    @functools.cached_property
    def bytes_per_chip(self) -> sympy.Expr:  # the bare arrays' bytes on each chip, summed
        return sympy.Add(*(a.bytes_per_chip for a in self.arrays))

    @functools.cached_property
    def bytes_total(self) -> sympy.Expr:  # the bare arrays' bytes on all chips, replicas included
        return sympy.Add(*(a.bytes_total for a in self.arrays))

    def granularity(self, dim: object) -> int:
        """The step a dim's size moves in: the chips that split it (1 where no axis does)."""
        step = 1
        if self.program is not None and self.mesh is not None:
            given = _given(self.values)
            for statement in self.program.statements:
                for tensor in tensors_of(statement):
                    for d in tensor.dims:
                        chips = _chips(self.mesh, d.axes, given)
                        if d.name == str(dim) and chips is not None:  # a symbol's: no step in numbers
                            step = step * chips // math.gcd(step, chips)
        return step

    def grown(self, grow: str | Iterable[str] | None) -> tuple[str, ...] | None:
        """The dims a threshold's rule takes to infinity, checked: dims of the spec, none
        with a size."""
        if grow is None:
            return None
        names = dim_names([grow])
        if not names:
            raise SpecError("name the dims that grow, e.g. grow='B,T'")
        for name in names:
            self.dim(name)
            if name in self.values:
                raise SpecError(f"{name} has a size ({self.values[name]}) and cannot also grow: "
                                "leave it free, or drop it from the dims that grow")
        return tuple(dict.fromkeys(names))

    def evaluate(self, quantity: str, expr: sympy.Expr, arrays: Mapping[str, Any]) -> Any:
        """A quantity's expression over arrays of sizes, vectorised with numpy: the dims left
        free take the arrays (broadcast together); see `symroof.Analysis.evaluate`."""
        # numpy is imported here, not at the top: it adds a tenth of a second to every
        # start-up, and only sweeps and plots need it.
        import numpy

        for name in arrays:
            if name in self.values:
                raise SpecError(f"{name} already has the size {self.values[name]}; "
                                "evaluate() takes arrays for the dims left free")
            self.dim(name)
        names = tuple(sorted(arrays))
        missing = sorted(str(s) for s in expr.free_symbols if str(s) not in arrays)
        if missing:
            raise SpecError(f"give sizes for {', '.join(missing)} to evaluate {quantity}")
        key = (quantity, names)
        if key not in self._compiled:
            self._compiled[key] = sympy.lambdify([dim_symbol(n) for n in names], expr,
                                                    modules=[{"Power": numpy.power}, "numpy"])
        values = [numpy.asarray(arrays[n], dtype=float) for n in names]
        for name, v in zip(names, values):
            # sizes need not be whole here (a smooth curve), but they are sizes: positive
            if not numpy.all(numpy.isfinite(v) & (v > 0)):
                raise SpecError(f"the sizes given for {name} must be positive and finite")
            if self.mesh is not None and name in self.mesh.symbolic:  # chips: whole, and in the case taken
                if not numpy.all(v == numpy.round(v)):
                    raise SpecError(f"the sizes given for mesh axis {name} must be whole numbers of chips")
                for value in numpy.unique(v):
                    self.check_case(name, int(value))
        try:
            shape = numpy.broadcast_shapes(*(v.shape for v in values))
        except ValueError:
            raise SpecError(f"the arrays for {', '.join(names)} have shapes "
                            f"{[v.shape for v in values]} that do not broadcast together") from None
        return numpy.broadcast_to(self._compiled[key](*values), shape)


def number(quantity: str, expr: sympy.Expr) -> int | float:
    """A quantity's value as a plain Python number: an int where it is a whole number, else
    a float; one that still depends on dims is refused (see `symroof.Analysis.value`)."""
    if not expr.is_number:
        missing = ", ".join(sorted(str(s) for s in expr.free_symbols))
        raise SpecError(f"{quantity} depends on {missing}: give {'it' if ',' not in missing else 'them'} "
                        "a size with at(...) first")
    if expr is sympy.nan:
        return math.nan
    if expr in (sympy.oo, -sympy.oo):
        return math.inf if expr > 0 else -math.inf
    return int(expr) if expr.is_Integer else float(expr)


@functools.lru_cache(maxsize=8192)  # a model's layers ask the same ratios again and again
def ratio(num: sympy.Expr, den: sympy.Expr) -> sympy.Expr:
    """num / den, simply cancelled (common monomial and numeric factor, see
    `solve.cancel_simple`): costs are polynomials in the dims."""
    if den == 0:
        return sympy.oo if num != 0 else sympy.nan
    if num == 0 or num.is_number and den.is_number:
        return num / den
    fast = cancel.fraction(num, den)  # sums of monomials: the same result without a ring
    if fast is not None:
        return fast
    parts = cancel.in_parts(num, den)  # products of sums, too large to multiply out
    if parts is not None:
        return parts
    try:  # costs are polynomials (rational coefficients on a mesh): no need to bring them together
        return fraction_expr(*polys(num, den))
    except (ValueError, CoercionFailed):  # a symbol in a denominator
        (n1, d1), (n2, d2) = sympy.fraction(sympy.together(num)), sympy.fraction(sympy.together(den))
        try:
            return fraction_expr(*polys(n1 * d2, d1 * n2))
        except (ValueError, CoercionFailed):  # not a polynomial: a sliding window's min(S, W), a power
            return sympy.cancel(num / den)


def pick_max(a: sympy.Expr, b: sympy.Expr, pick: Callable[..., sympy.Expr] = sympy.Max) -> sympy.Expr:
    """Max or Min without sympy's search for which argument wins, which is slow and, for
    costs with free dims, never succeeds; numbers still come out as one number."""
    if a.is_number and b.is_number:
        return pick(a, b)
    # one Max of every argument, not a Max of Maxes: max(a, b, c) reads as the roofline does
    args = [x for arg in (a, b) for x in (arg.args if arg.func is pick else (arg,))]
    return pick(*dict.fromkeys(args), evaluate=False)


def _check_splits(program: Program, values: Mapping[str, sympy.Integer]) -> None:
    """A size given to a sharded dim must split evenly over its axes."""
    mesh = program.mesh
    if mesh is None:
        return
    given = _given(values)
    chips: dict[tuple[str, ...], int | None] = {}  # what each dim's axes span at these sizes
    for statement in program.statements:
        for tensor in tensors_of(statement):
            for dim in tensor.dims:
                if not (dim.axes and dim.name is not None and dim.name in values):
                    continue
                if dim.axes not in chips:
                    chips[dim.axes] = _chips(mesh, dim.axes, given)
                spanned = chips[dim.axes]
                if spanned is not None and values[dim.name] % spanned:
                    raise SpecError(f"{dim.name} = {values[dim.name]} does not split evenly over "
                                    f"{', '.join(dim.axes)} ({spanned} chips)")


def _given(values: Mapping[str, sympy.Integer]) -> dict[sympy.Basic, sympy.Integer]:
    return {dim_symbol(n): v for n, v in values.items()}


def _chips(mesh: Mesh, axes: tuple[str, ...], given: Mapping[sympy.Basic, sympy.Integer]) -> int | None:
    """The chips axes span together at the sizes `given` (`_given`); None where one is still a symbol."""
    count = mesh.over(axes).xreplace(given)
    return int(count) if count.is_Integer else None


def size(name: str, value: object) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str):
        return size_value(value, f"{name}={value}")
    if isinstance(value, bool) or not isinstance(value, (numbers.Integral, sympy.Integer)):
        raise SpecError(f"{name}={value!r}: a dim's size must be a positive integer")
    if not 0 < int(value) < 10**18:
        raise SpecError(f"{name}={value}: a dim's size must be a positive integer below 1e18")
    return int(value)


def _unknown_dim(name: str, dims: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(dims), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    known = ", ".join(dims) if dims else "none"
    return f"unknown dim '{name}'{hint} (the spec's named dims: {known})"


def dim_names(dims: Iterable[object]) -> list[str]:
    """Dim names from strings ("D,F"), lists or symbols, flattened."""
    out: list[str] = []
    for d in dims:
        if isinstance(d, str):
            out.extend(p.strip() for p in d.split(",") if p.strip())
        elif isinstance(d, (list, tuple)):
            out.extend(dim_names(d))
        else:
            out.append(str(d))
    return out
