"""The figures an analysis runs against: a chip from hardware.json, bare numbers, or a
chip with some figures replaced (`--peak-flops`, `--hbm-bw`, `--vector-flops`, ...).

Elementwise work runs on the vector unit at the chip's `vector_flops_per_s` for its dtype,
or the fp32 figure where the chip lists none for that dtype (TPUs' vector units compute in
fp32). A chip without a vector figure is an error that asks for `--vector-flops`: the
matrix peak is never used in its place. Where the chip's figure is an estimate (TPU v4, v5e
and v6e: derived from the book's VPU and the MXU peak, hardware.json says how), `estimates`
names it, for every report to say so; `--vector-flops` replaces it.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

import sympy

from ..dtypes import RATES, DType
from ..errors import HardwareError, SymroofError
from .chips import Chip, exact_value, get_chip
from .shapes import Shape

# A figure as given: a number, its decimal text (from the command line), or sympy's
Figure: TypeAlias = "int | float | str | sympy.Expr"

# Figures outside this range are typos (a bandwidth of 1e-300 bytes/s), and printing
# what they lead to would overflow a float.
_SMALLEST, _LARGEST = sympy.Rational(1, 10**30), sympy.Integer(10**40)


def exact_number(value: object, what: str = "value", example: str = "8.2e11",
                 allow_zero: bool = False, error: type[SymroofError] = HardwareError) -> sympy.Rational:
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
        vector_flops: vector-unit FLOPs/s for every dtype (`--vector-flops`), or None.
    """

    name: str
    chip: Chip | None
    flat_peak: sympy.Expr | None
    hbm_bw: sympy.Expr | None
    ici_bw: sympy.Expr | None = None
    vector_flops: sympy.Expr | None = None
    hbm_capacity: sympy.Expr | None = None  # in place of the chip's (a symbolic chip's M_hbm)

    def capacity(self) -> sympy.Expr | None:
        """HBM bytes a chip holds: the chip's figure, or the symbol of a symbolic chip."""
        if self.hbm_capacity is not None:
            return self.hbm_capacity
        return self.chip.figure("hbm_capacity_bytes") if self.chip is not None else None

    def peak(self, rate: str) -> sympy.Rational:
        if self.flat_peak is not None:
            return self.flat_peak
        if self.chip is not None:
            return self.chip.peak_flops(rate)
        raise HardwareError("no peak FLOPs/s to run against: name a chip or give --peak-flops")

    def vector_peak(self, dtype: DType) -> tuple[str, sympy.Rational]:
        """FLOPs/s of the vector unit for elementwise work in this dtype, and the rate whose
        figure it is ("fp32" where the chip lists none for the dtype, or --vector-flops)."""
        if self.vector_flops is not None:
            return "fp32", self.vector_flops
        if self.chip is not None:
            for rate in dict.fromkeys((dtype.rate, "fp32")):
                figure = self.chip.figure(f"vector_flops_per_s.{rate}") if rate in RATES else None
                if figure is not None:
                    return rate, figure
        raise HardwareError(f"{self.name} has no vector-unit figure (vector_flops_per_s) to run the "
                            "elementwise work of this spec against: give one with --vector-flops "
                            "(FLOPs/s; TPU v5p's VPU, for scale, is 1.4e13). symroof does not cost "
                            "vector work at the matrix peak")

    def figure_path(self, rate: str) -> str | None:
        """The chip figure a rate of an analysis (`Times.rates` in roofline/times.py: "bf16",
        "vector", "vector bf16") is read from, or None where a flag gives it (--peak-flops,
        --vector-flops, --symbolic) or there is no chip."""
        vector, _, dtype = rate.partition(" ") if rate.startswith("vector") else ("", "", rate)
        if self.chip is None or (self.vector_flops if vector else self.flat_peak) is not None:
            return None
        return f"vector_flops_per_s.{dtype or 'fp32'}" if vector else f"peak_flops_per_s.{dtype}"

    def estimated(self, rate: str) -> bool:
        """Whether the figure a rate runs at is an estimate (hardware.json marks it so).

        Examples:
            >>> machine("v5e").estimated("vector"), machine("v5e").estimated("bf16")
            (True, False)
            >>> machine("v5e", vector_flops="6e12").estimated("vector"), machine("v5p").estimated("vector")
            (False, False)
        """
        return bool(self.estimates([rate]))

    def estimates(self, rates: Iterable[str]) -> dict[str, tuple[sympy.Rational, str]]:
        """The estimated figures among the rates an analysis runs at: each figure's path
        with its value and the source text that says how it was estimated."""
        found = {}
        for rate in rates:
            path = self.figure_path(rate)
            if path is not None and self.chip is not None and self.chip.is_estimate(path):
                found[path] = (self.chip.require(path), self.chip.sources[path])
        return found

    def bandwidth(self) -> sympy.Rational:
        if self.hbm_bw is None:
            raise HardwareError(f"{self.name} has no HBM bandwidth: give --hbm-bw")
        return self.hbm_bw


# A symbolic chip's figures, as the textbooks write them; `--symbolic FIELD` makes one
# figure of a real chip symbolic on its own.
SYMBOLS = {"peak": "C", "hbm_bw": "W_hbm", "ici_bw": "W_ici", "vector": "C_vec", "hbm_capacity": "M_hbm"}


def figure_symbol(field: str) -> sympy.Symbol:
    return sympy.Symbol(SYMBOLS[field], positive=True)


def machine(chip: str | Chip | None = None, *, peak_flops: Figure | None = None, hbm_bw: Figure | None = None,
            ici_bw: Figure | None = None, overrides: Mapping[str, object] | None = None, variant: str | None = None,
            hardware: str | os.PathLike | None = None, vector_flops: Figure | None = None,
            symbolic: Iterable[str] = (), slice: str | Shape | None = None) -> Machine | None:
    """Build the machine an analysis runs against; None when nothing at all is given.

    `slice` ("4x8x8") lays mesh axes on that slice of a torus chip's pod (Chip.on_slice).

    `chip="symbolic"` is a chip whose every figure is a symbol (peak C, HBM bandwidth
    W_hbm, link bandwidth W_ici, vector unit C_vec, HBM capacity M_hbm); `symbolic` names
    the figures of a real chip to make symbols ("hbm_bw", "peak", ...)."""
    unknown = [f for f in symbolic if f not in SYMBOLS]
    if unknown:
        raise HardwareError(f"--symbolic takes {', '.join(SYMBOLS)}, not {', '.join(unknown)}")
    if isinstance(chip, str) and chip.strip().lower() == "symbolic":
        return Machine("symbolic chip", None, flat_peak=figure_symbol("peak"), hbm_bw=figure_symbol("hbm_bw"),
                       ici_bw=figure_symbol("ici_bw"), vector_flops=figure_symbol("vector"),
                       hbm_capacity=figure_symbol("hbm_capacity"))
    found = _machine(chip, peak_flops=peak_flops, hbm_bw=hbm_bw, ici_bw=ici_bw, overrides=overrides,
                     variant=variant, hardware=hardware, vector_flops=vector_flops, slice=slice)
    if not symbolic:
        return found
    if found is None:
        raise HardwareError("--symbolic makes figures of a chip symbols: name the chip (--chip), or use "
                            "--chip symbolic")
    return dataclasses.replace(found, **{
        {"peak": "flat_peak", "vector": "vector_flops"}.get(f, f): figure_symbol(f) for f in symbolic})


def _machine(chip: str | Chip | None = None, *, peak_flops: Figure | None = None, hbm_bw: Figure | None = None,
             ici_bw: Figure | None = None, overrides: Mapping[str, object] | None = None, variant: str | None = None,
             hardware: str | os.PathLike | None = None, vector_flops: Figure | None = None,
             slice: str | Shape | None = None) -> Machine | None:
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
    if slice:
        if chip is None:
            raise HardwareError("--slice lays a mesh on a slice of a chip's torus: name the chip (--chip)")
        chip = chip.on_slice(slice)
    peak = None if peak_flops is None else exact_number(peak_flops, "peak FLOPs/s", "1.97e14")
    bw = None if hbm_bw is None else exact_number(hbm_bw, "HBM bandwidth", "8.2e11")
    ici = None if ici_bw is None else exact_number(ici_bw, "ICI bandwidth (one way, per link)", "4.5e10")
    vector = None if vector_flops is None else exact_number(vector_flops, "vector FLOPs/s", "1.4e13")
    if chip is None and peak is None and bw is None and ici is None and vector is None:
        return None
    if bw is None and chip is not None:
        bw = chip.figure("hbm_bandwidth_bytes_per_s")
    return Machine(chip.name if chip is not None else "custom", chip, peak, bw, ici, vector)
