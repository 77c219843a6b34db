"""The result of an analysis: one `Analysis`, built from its parts in `roofline/`.

An analysis holds three parts, each a plain class that reads the ones before it: the
counts at the sizes given (`roofline.sized.Sized`), the times on the machine's units and
links (`roofline.times.Times`), and which time bounds the work, with its limits and
thresholds (`roofline.bounds.Bounds`). `Analysis` reads their quantities through, under
the names the report, the JSON and `symroof check` use (`roofline.quantities`), and
shows itself: a short table (`repr`), the full report (`str`, `table()`), a JSON-ready
dict (`to_dict`) and LaTeX in notebooks (`_repr_latex_`), through the renderers, which
sit below this module and read an analysis only through its public attributes.

Examples:
    >>> a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e")
    >>> type(a).__name__, type(a.at(B=128)) is Analysis, a.to_dict()["flops"]
    ('Analysis', True, '2*B*D*F')
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar, overload

import sympy

from . import dtypes
from .errors import SpecError, SymroofError
from .hardware.chips import Chip
from .hardware.machines import Machine, exact_number, machine
from .ir import Fused, Program
from .lang.parsing import parse
from .mesh import Mesh
from .render.text import summary, table
from .roofline.bounds import Bounds
from .roofline.cost import Cost, StepCost, cost
from .roofline.on_chip import OnChip
from .roofline.quantities import EVALUABLE, MESH_ONLY, available
from .roofline.sized import Sized, number, read_only, size
from .roofline.stored import Stored
from .roofline.thresholds import Threshold
from .roofline.times import CollectiveCost, Times

__all__ = ["Analysis", "analyze", "roofline"]

T = TypeVar("T")

_PARTS: dict[str, type] = {"_sized": Sized, "_times": Times, "_bounds": Bounds}


class _Part(Generic[T]):
    """An attribute of one of an analysis's parts, read through: `Analysis.t_math` is its
    `Times`'s `t_math`, with that docstring."""

    def __init__(self, part: str) -> None:
        self.part = part
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        self.__doc__ = getattr(getattr(_PARTS[self.part], name, None), "__doc__", None)

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> _Part[T]: ...

    @overload
    def __get__(self, obj: Analysis, owner: type | None = None) -> T: ...

    def __get__(self, obj: Analysis | None, owner: type | None = None) -> _Part[T] | T:
        if obj is None:
            return self
        result: T = getattr(getattr(obj, self.part), self.name)
        return result


class Analysis:
    """The result of an analysis: sympy expressions, evaluated lazily.

    Counts: `flops` (leading: a multiply-add is 2 FLOPs), `flops_exact`, `bytes_read`,
    `bytes_written`, `bytes`, `intensity`, `intensity_exact`, and `steps` (each step's
    own `StepCost`). With a machine: `critical_intensity`, `t_math`, `t_comms`,
    `t_lower`, `t_upper`, `bound`, `achieved_flops_per_s`. Methods: `limit(*dims)`,
    `threshold(dim)`, `at(**sizes)`, `value(name)`, `evaluate(name, **arrays)`,
    `numbers()`, `to_dict()`, `table()`. Built from three parts (see the module
    docstring); `analyze` and `roofline` make one.
    """

    def __init__(self, counts: Cost, target: Machine | None, *, program: Program | None = None,
                 values: Mapping[str, int | str] | None = None, compute: dtypes.DType | None = None,
                 grow: str | Iterable[str] | None = None, settled: Mapping[str, sympy.Expr] | None = None):
        sized = Sized(counts, target, program=program, values=values, compute=compute, grow=grow,
                      settled=settled)
        times = Times(sized)
        self._sized = sized
        self._times = times
        self._bounds = Bounds(sized, times)
        self._frozen = True

    __setattr__ = read_only

    # ---- the counts at the sizes given (roofline.sized) ----------------------------------

    cost: _Part[Cost] = _Part("_sized")
    machine: _Part[Machine | None] = _Part("_sized")
    program: _Part[Program | None] = _Part("_sized")
    compute_default: _Part[dtypes.DType | None] = _Part("_sized")
    settled: _Part[dict[str, sympy.Expr]] = _Part("_sized")
    values: _Part[dict[str, sympy.Integer]] = _Part("_sized")
    grow: _Part[tuple[str, ...] | None] = _Part("_sized")
    dims: _Part[tuple[str, ...]] = _Part("_sized")
    free_dims: _Part[tuple[str, ...]] = _Part("_sized")
    spec: _Part[str] = _Part("_sized")
    steps: _Part[tuple[StepCost, ...]] = _Part("_sized")
    chip: _Part[Chip | None] = _Part("_sized")
    mesh: _Part[Mesh | None] = _Part("_sized")
    compute_dtypes: _Part[tuple[dtypes.DType, ...]] = _Part("_sized")
    has_peak: _Part[bool] = _Part("_sized")
    flops: _Part[sympy.Expr] = _Part("_sized")
    flops_exact: _Part[sympy.Expr] = _Part("_sized")
    bytes_read: _Part[sympy.Expr] = _Part("_sized")
    bytes_written: _Part[sympy.Expr] = _Part("_sized")
    bytes: _Part[sympy.Expr] = _Part("_sized")
    intensity: _Part[sympy.Expr] = _Part("_sized")
    intensity_exact: _Part[sympy.Expr] = _Part("_sized")
    transcendentals: _Part[sympy.Expr] = _Part("_sized")
    flops_vector: _Part[sympy.Expr] = _Part("_sized")
    flops_total: _Part[sympy.Expr] = _Part("_sized")
    replication: _Part[sympy.Expr] = _Part("_sized")
    arrays: _Part[tuple[Stored, ...]] = _Part("_sized")
    bytes_per_chip: _Part[sympy.Expr] = _Part("_sized")
    bytes_total: _Part[sympy.Expr] = _Part("_sized")

    # ---- the times on the machine's units and links (roofline.times) ---------------------

    rates: _Part[dict[str, sympy.Rational]] = _Part("_times")
    work: _Part[dict[str, sympy.Expr]] = _Part("_times")
    t_math: _Part[sympy.Expr] = _Part("_times")
    t_vector: _Part[sympy.Expr] = _Part("_times")
    t_comms: _Part[sympy.Expr] = _Part("_times")
    peak_flops: _Part[sympy.Expr] = _Part("_times")
    critical_intensity: _Part[sympy.Expr] = _Part("_times")
    on_chip: _Part[tuple[OnChip, ...]] = _Part("_times")
    has_links: _Part[bool] = _Part("_times")
    collectives: _Part[tuple[CollectiveCost, ...]] = _Part("_times")
    t_network: _Part[sympy.Expr] = _Part("_times")
    t_network_latency: _Part[sympy.Expr] = _Part("_times")
    t_network_latency_known: _Part[bool] = _Part("_times")
    t_network_floored: _Part[sympy.Expr] = _Part("_times")
    network_bytes: _Part[sympy.Expr] = _Part("_times")
    network_intensity: _Part[sympy.Expr] = _Part("_times")
    critical_network_intensity: _Part[sympy.Expr] = _Part("_times")

    # ---- the bounds (roofline.bounds) ------------------------------------------------------

    t_lower: _Part[sympy.Expr] = _Part("_bounds")
    t_upper: _Part[sympy.Expr] = _Part("_bounds")
    bound: _Part[str | sympy.Basic] = _Part("_bounds")
    settled_bound: _Part[str | None] = _Part("_bounds")
    achieved_flops_per_s: _Part[sympy.Expr] = _Part("_bounds")

    # limit, threshold and granularity are the parts' own, read through with their
    # docstrings (as `_Part` reads the quantities')

    def limit(self, *dims: object) -> sympy.Expr:
        return self._bounds.limit(*dims)

    limit.__doc__ = Bounds.limit.__doc__

    def threshold(self, dim: object, grow: str | Iterable[str] | None = None) -> Threshold:
        return self._bounds.threshold(dim, grow)

    threshold.__doc__ = Bounds.threshold.__doc__

    def granularity(self, dim: object) -> int:
        return self._sized.granularity(dim)

    granularity.__doc__ = Sized.granularity.__doc__

    def substitute(self, expr: sympy.Expr) -> sympy.Expr:
        """An expression in the program's dims with this analysis's sizes put in (a step's
        counts, a collective's V, the mesh's chips)."""
        return self._sized.substitute(expr)

    # ---- quantities by name, as numbers ----------------------------------------------------

    def _quantity(self, quantity: str, refusal: str) -> sympy.Expr:
        """A quantity by name; a name that is not one is refused in the caller's words."""
        known = available(self, EVALUABLE)  # declared in quantities.py; some may not be derived yet
        if quantity not in known:
            raise SpecError(f"{refusal} {quantity!r}; quantities: {', '.join(known)}")
        expr: sympy.Expr = getattr(self, quantity)
        return expr

    def evaluate(self, quantity: str, **arrays: Any) -> Any:
        """A quantity over arrays of sizes, vectorised with numpy: the dims left free take
        the arrays (broadcast together), e.g. `a.at(D=4096, F=4096).evaluate("t_lower",
        B=numpy.arange(1, 10**6))`."""
        return self._sized.evaluate(quantity, self._quantity(quantity, "cannot evaluate"), arrays)

    def value(self, quantity: str) -> int | float:
        """A quantity as a plain Python number, for code that wants one (formatting, numpy,
        JSON): an int where it is a whole number, else a float. The fields themselves stay
        exact sympy numbers. Every dim it depends on needs a size.

        Examples:
            >>> from symroof import analyze
            >>> a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="tpu-v5e")
            >>> a.at(B=128, D=4096, F=4096).value("flops"), f"{a.at(B=128, D=4096, F=4096).value('t_lower'):.3e}"
            (4294967296, '4.348e-05')
        """
        return number(quantity, self._quantity(quantity, "no quantity"))

    def numbers(self) -> dict[str, int | float]:
        """Every quantity that is a number at this analysis's sizes, as plain Python numbers
        (see `value`)."""
        found = {}
        for quantity in available(self, EVALUABLE):
            if self.mesh is None and quantity in MESH_ONLY:
                continue
            try:
                expr = getattr(self, quantity)
            except SymroofError:  # a time without a chip, say
                continue
            if expr.is_number:
                found[quantity] = number(quantity, expr)
        return found

    # ---- other analyses of the same program ------------------------------------------------

    def at(self, **sizes: int | str) -> Analysis:
        """The same analysis with named dims given sizes: `a.at(B=128)`. A dim that already
        has a size keeps it: giving it another is an error."""
        for name, value in sizes.items():
            if name in self.values and self.values[name] != size(name, value):
                raise SpecError(f"{name} already has the size {self.values[name]}")
        merged: dict[str, int | str] = {name: int(v) for name, v in self.values.items()}
        merged.update(sizes)
        grow = [d for d in self.grow or () if d not in sizes] if self.grow else None
        return Analysis(self.cost, self.machine, program=self.program, values=merged,
                        compute=self.compute_default, grow=grow or None, settled=self.settled)

    @functools.cached_property
    def lines(self) -> tuple[Analysis, ...]:
        """One analysis per statement of the spec (just this one for a single statement)."""
        program = self.program
        if program is None or len(program.statements) < 2:
            return (self,)
        found = []
        for statement, counts in zip(program.statements, self.cost.statements):
            line = Program((statement,), (), program.mesh)
            values = {k: int(v) for k, v in self.values.items() if k in line.dims}
            grow = [d for d in self.grow or () if d in line.dims]
            found.append(Analysis(counts, self.machine, program=line, values=values, grow=grow or None,
                                  settled=self.settled))
        return tuple(found)

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
        return Analysis(cost(program), self.machine, program=program, values=values, grow=self.grow,
                        settled=self.settled)

    # ---- what people read (render/) ----------------------------------------------------------

    def to_dict(self, limit: str | Iterable[str] | None = None, solve: str | None = None) -> dict:
        """A JSON-ready dict (see `json_report.to_json_dict`)."""
        from .render.json_report import to_json_dict  # each output's module imported where asked for
        return to_json_dict(self, limit=limit, solve=solve)

    def table(self, limit: str | Iterable[str] | None = None, solve: str | None = None) -> str:
        """The full report (`render.text.table`), with limits over `limit` and the threshold
        on `solve`; `str()` gives it without them."""
        return table(self, limit=limit, solve=solve)

    def __repr__(self) -> str:
        """A short table (`render.summary`); `str()` and `print()` give the full report."""
        return summary(self)

    def __str__(self) -> str:
        return table(self)

    def _repr_latex_(self) -> str:
        # looked up on the module when called: the test suite wraps it to render what it gives
        from .render import latex
        return latex.latex_summary(self)


Figure = float | str | None  # a chip figure given in numbers: 1.97e14, or "1.97e14"


def analyze(spec: str | Program, chip: str | Chip | None = None, *, dtype: str = "bf16",
            peak_flops: Figure = None, hbm_bw: Figure = None, ici_bw: Figure = None,
            overrides: Mapping[str, object] | None = None, variant: str | None = None,
            hardware: str | os.PathLike | None = None, values: Mapping[str, int | str] | None = None,
            mesh: Mesh | str | dict | None = None, grow: str | Iterable[str] | None = None,
            vector_flops: Figure = None, symbolic: Iterable[str] = (), slice: str | None = None) -> Analysis:
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
    return Analysis(cost(program), target, program=program, values=values, grow=grow)


def roofline(flops: float | str, bytes: float | str = 0, chip: str | Chip | None = None, *, dtype: str = "bf16",
             peak_flops: Figure = None, hbm_bw: Figure = None, overrides: Mapping[str, object] | None = None,
             variant: str | None = None, hardware: str | os.PathLike | None = None,
             vector_flops: Figure = None) -> Analysis:
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
    work = exact_number(flops, "flops", "1e12", allow_zero=True, error=SpecError)
    moved = exact_number(bytes, "bytes", "4e9", allow_zero=True, error=SpecError)
    if work == 0 and moved == 0:
        raise SpecError("nothing to cost: give FLOPs, bytes or both (both are 0)")
    return Analysis(Cost(work, work, moved, sympy.Integer(0)), target, compute=compute)
