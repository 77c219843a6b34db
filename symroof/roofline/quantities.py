"""The output quantities of an analysis, each declared once.

Every name here is an attribute of `symroof.Analysis`, a key of the `--json` object, a
key a claim may expect (`symroof check`) and, where it has a value, a row of the text
report and of the LaTeX derivation. Those readers take the names, units, labels and
symbols from here rather than keeping lists of their own.

A module without imports from symroof (but the `Analysis` its helpers' annotations name):
roofline, which computes the quantities, and the renderers above it both read it.

Examples:
    >>> QUANTITY["t_math"].label, QUANTITY["t_math"].unit, QUANTITY["t_math"].machine
    ('T_math', 's', True)
    >>> [q.name for q in QUANTITIES if q.needs == "roof"]
    ['critical_intensity', 't_lower', 't_upper', 'achieved_flops_per_s']
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import sympy

if TYPE_CHECKING:  # analysis imports this module
    from ..analysis import Analysis

# What a quantity needs of the machine: nothing (counts of the spec), a peak FLOPs/s, an
# HBM bandwidth, both (a "roof"), or the links between chips (on a mesh).
NEEDS = ("", "peak", "bandwidth", "roof", "links")


@dataclass(frozen=True)
class Quantity:
    """One output quantity.

    Attributes:
        name: the `Analysis` attribute; also its JSON key and the key a claim expects.
        unit: "FLOPs", "bytes", "FLOPs/byte", "s", "FLOPs/s", "transcendentals", or ""
            for a pure number.
        meaning: what it is, in one line.
        symbol: its LaTeX symbol (math mode).
        label: its row label in the text report.
        needs: what of the machine it needs (see `NEEDS`); "" for counts of the spec.
        mesh: whether it exists only on a mesh (the network, the total over the chips).
        check: whether `symroof check` accepts it as an expected key.
        expression: True for a function of the spec's dims (an expression in them until
            they have sizes), which `Analysis.value`, `evaluate` and `numbers` take; False
            for a ratio of the machine's figures (the critical intensities), a number
            whatever the sizes (for work in one compute dtype), which a claim may check
            with no spec at all.
        line: whether each statement of a program reports it too (the `lines` of the
            JSON object): counts and times do; quantities derived from them (exact
            intensity, the roofs' ratios, T_upper) are reported for the whole program
            only, since deriving them per statement costs a long program seconds.
    """

    name: str
    unit: str
    meaning: str
    symbol: str
    label: str
    needs: str = ""
    mesh: bool = False
    check: bool = True
    expression: bool = True
    line: bool = True

    def __post_init__(self) -> None:
        if self.needs not in NEEDS:
            raise ValueError(f"{self.name}: needs is one of {NEEDS}, not {self.needs!r}")

    @property
    def machine(self) -> bool:
        """Whether it needs a machine (a chip, or a peak and bandwidth given as numbers)."""
        return bool(self.needs)


QUANTITIES: tuple[Quantity, ...] = (
    # counts of the spec (per chip on a mesh)
    Quantity("flops", "FLOPs", "FLOPs, leading terms (a multiply-add is 2; a sum of n terms n adds)",
             r"\text{FLOPs}", "FLOPs"),
    Quantity("flops_exact", "FLOPs", "FLOPs counted exactly (a sum of n terms is n - 1 adds)",
             r"\text{FLOPs}_\text{exact}", "FLOPs (exact)"),
    Quantity("bytes", "bytes", "HBM bytes read and written", r"\text{bytes}", "bytes"),
    Quantity("bytes_read", "bytes", "HBM bytes read", r"\text{bytes}_\text{read}", "bytes read"),
    Quantity("bytes_written", "bytes", "HBM bytes written", r"\text{bytes}_\text{written}", "bytes written"),
    Quantity("intensity", "FLOPs/byte", "arithmetic intensity: FLOPs per HBM byte", r"\text{Intensity}",
             "intensity"),
    Quantity("intensity_exact", "FLOPs/byte", "exact FLOPs per HBM byte", r"\text{Intensity}_\text{exact}",
             "intensity (exact)", line=False),
    Quantity("transcendentals", "transcendentals",
             "evaluations of transcendental functions (exp, log, tanh, rsqrt, ...), counted apart from "
             "FLOPs as XLA does", r"\text{transcendentals}", "transcendentals"),
    Quantity("flops_vector", "FLOPs", "the FLOPs that run on the vector unit (the rest run on the matrix unit)",
             r"\text{FLOPs}_\text{vector}", "vector FLOPs"),
    # bare arrays (`bf16[I_XY, J]`), as stored: what they take of memory, not what moves
    Quantity("bytes_per_chip", "bytes", "the bare arrays' bytes held on each chip (their shards, stored)",
             r"\text{bytes per chip}", "bytes per chip"),
    Quantity("bytes_total", "bytes", "the bare arrays' bytes held on all chips together, replicas included",
             r"\text{bytes in all}", "bytes in all"),
    # on a machine
    Quantity("critical_intensity", "FLOPs/byte",
             "peak FLOPs/s over HBM bandwidth: the intensity above which the work is compute-bound",
             r"\text{Intensity}_\text{critical}", "critical", needs="roof", expression=False, line=False),
    Quantity("t_math", "s", "the FLOPs' time at the peak of their compute dtype", r"T_\text{math}", "T_math",
             needs="peak"),
    Quantity("t_vector", "s", "the part of T_math spent on the vector unit", r"T_\text{vector}", "T_vector",
             needs="peak"),
    Quantity("t_comms", "s", "HBM bytes over HBM bandwidth", r"T_\text{comms}", "T_comms", needs="bandwidth"),
    Quantity("t_lower", "s", "the larger of T_math, T_comms (and T_network): the time with full overlap",
             r"T_\text{lower}", "T_lower", needs="roof"),
    Quantity("t_upper", "s", "T_math + T_comms (+ T_network): the time with no overlap", r"T_\text{upper}",
             "T_upper", needs="roof", line=False),
    Quantity("achieved_flops_per_s", "FLOPs/s", "FLOPs / T_lower: the peak when compute-bound",
             r"\text{FLOPs/s}_\text{achieved}", "achieved", needs="roof", line=False),
    # on a mesh
    Quantity("flops_total", "FLOPs", "FLOPs of the whole computation over the mesh, each counted once",
             r"\text{FLOPs in all}", "FLOPs total", mesh=True),
    Quantity("replication", "", "how many chips do each FLOP: chips x per-chip FLOPs / total FLOPs (for bare "
             "arrays alone: how many chips hold each element)",
             r"\text{replication}", "replication", mesh=True),
    Quantity("t_network", "s", "the collectives' time on the links, bandwidth-bound", r"T_\text{network}",
             "T_network", needs="links", mesh=True),
    Quantity("t_network_latency", "s", "the collectives' latency floor: hops x per-hop latency, summed",
             r"T_\text{latency}", "latency floor", needs="links", mesh=True),
    Quantity("network_bytes", "bytes", "the collectives' V summed: the bytes each chip holds of their larger sides",
             r"V", "network bytes", needs="links", mesh=True),
    Quantity("network_intensity", "FLOPs/byte", "per-chip FLOPs per byte of the collectives' V",
             r"\text{Intensity}_\text{network}", "network intensity", needs="links", mesh=True),
    Quantity("critical_network_intensity", "FLOPs/byte",
             "peak FLOPs/s over the links' effective bandwidth (V / T_network)",
             r"\text{Intensity}_\text{network, critical}", "critical network intensity", needs="links",
             mesh=True, expression=False, line=False),
)

QUANTITY: dict[str, Quantity] = {q.name: q for q in QUANTITIES}

# The quantities `Analysis.value`, `evaluate` and `numbers` take, and those of them that
# exist only on a mesh.
EVALUABLE: tuple[str, ...] = tuple(q.name for q in QUANTITIES if q.expression)
MESH_ONLY: tuple[str, ...] = tuple(q.name for q in QUANTITIES if q.mesh)


def label(name: str) -> str:
    """A quantity's row label in the text report."""
    return QUANTITY[name].label


def unit(name: str) -> str:
    """A quantity's unit."""
    return QUANTITY[name].unit


def symbol(name: str) -> str:
    """A quantity's LaTeX symbol."""
    return QUANTITY[name].symbol


def derived(analysis: Analysis, name: str) -> bool:
    """Whether an analysis has the quantity at all (without computing it): a quantity
    declared here may be one that roofline does not derive yet."""
    return hasattr(type(analysis), name) or name in getattr(analysis, "__dict__", {})


def available(analysis: Analysis, names: Iterable[str]) -> list[str]:
    """Of `names`, those the analysis derives, in order."""
    return [name for name in names if derived(analysis, name)]


def nonzero(analysis: Analysis, name: str) -> sympy.Expr | None:
    """A quantity that only some analyses have (transcendentals, vector FLOPs and time),
    where it is not zero; None where it is, or where roofline does not derive it (yet)."""
    if not derived(analysis, name):
        return None
    value = getattr(analysis, name)
    return None if value == 0 else value
