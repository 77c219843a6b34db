"""The text report of an analysis.

Numbers appear only here and in the JSON: expressions keep exact rationals inside and
are shown with six significant figures; a count that is a number has its SI-scaled figure
beside it (`268435456 (268.4 MFLOPs)`), and rates and times are scaled (`197 TFLOPs/s`,
`820 GB/s`, `1.364 ms`). `table` is the full report; `summary` the short table an
analysis shows as its repr. A threshold says itself (`thresholds.threshold_text`), and
the other results show themselves on one line (`oneline`). The rows of quantities take
their labels and units from `quantities`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import sympy

from .. import ops
from ..hardware.topology import placement
from ..ir import label_text, subscript
from ..roofline.bounds import CONVENTIONS
from ..roofline.collectives import link_name
from ..roofline.oneline import REPR_WIDTH, spec_line
from ..roofline.oneline import cut as _cut
from ..roofline.quantities import QUANTITY, nonzero
from ..roofline.sized import dim_names
from ..roofline.thresholds import threshold_text
from ..sharding.lowering import Local
from ..show import beside, duration, human, number, over, pretty, seconds, wrapped
from . import arrays_report

if TYPE_CHECKING:
    from ..analysis import Analysis
    from ..hardware.machines import Machine
    from ..sharding.layout import Move

# Row labels and units, as declared (quantities.py)
_L = {name: q.label for name, q in QUANTITY.items()}
_U = {name: q.unit for name, q in QUANTITY.items()}


# Past this many terms an expression is scrolled past, not read: the report names it and
# says how long it is (the JSON, LaTeX and Python keep every expression whole).
_LONG = 40


def _terms(expr: sympy.Basic) -> int:
    """The terms an expression shows: of its sums, through products, powers and max."""
    if expr.is_Add:
        return len(expr.args)
    if expr.is_Mul or expr.is_Pow or isinstance(expr, (sympy.Max, sympy.Min)):
        return sum(_terms(arg) for arg in expr.args)
    return 1


def _long(expr: sympy.Basic) -> bool:
    return not expr.is_number and _terms(expr) > _LONG


def _readable(expr: sympy.Basic, what: str = "an expression") -> str:
    """pretty(expr), or for one too long to read, what it is and how long."""
    if not _long(expr):
        return pretty(expr)
    return f"{what} ({_terms(expr)} terms: --json has it whole; sizes for the dims give a number)"


def _count(a: Analysis, name: str) -> str:
    """A count with its scaled figure beside it, in its declared unit."""
    return beside(getattr(a, name), _U[name])


def latency_text(a: Analysis) -> str:
    """The network's latency floor in words, saying where hop latencies are unknown."""
    floor = a.t_network_latency
    if a.t_network_latency_known:
        return f"latency floor {duration(floor)}"
    if floor:
        return f"latency floor at least {duration(floor)} (some links' hop latency is unknown)"
    return "latency floor unknown (no hop latency figure for these links)"


def table(a: Analysis, limit: str | Iterable[str] | None = None, solve: str | None = None) -> str:
    """The readable report of an analysis."""
    limit = dim_names(limit or ())
    rows: list[tuple[str, str]] = []
    if a.program is not None:
        rows.append(("spec", spec_line(a.spec)))
    if a.mesh is not None:
        rows.append(("mesh", _axes(a) + "; the counts below are per chip"))
        laid = placement(a.mesh.axes, a.chip)
        if laid and (a.cost.moves or not a.mesh.symbolic):  # where the links play a part
            rows.append(("", laid))
    lines = a.lines
    if len(lines) > 1:
        for i, line in enumerate(lines, 1):
            rows.append((f"line {i}", spec_line(line.spec)))
            rows.append(("", _line_summary(line)))
    rows += _steps(a)
    if a.values:
        rows.append(("sizes", ", ".join(f"{k} = {v}" for k, v in a.values.items())))
    m = a.machine
    if m is not None:
        rows.append(("chip", _machine_text(a)))
    rows += arrays_report.rows(a)
    if a.arrays and not a.steps and not a.cost.moves:  # arrays alone: what they take is the report
        return "\n".join([*_aligned(rows), "", *wrapped("arrays: as stored, bytes held in memory (not moved); "
                                                          "GB = 1e9 bytes")])
    rows.append((_L["flops"], _count(a, "flops") + ("" if a.flops_exact == a.flops
                                                      else f"   (exact: {_readable(a.flops_exact)})")))
    vector, transcendentals = nonzero(a, "flops_vector"), nonzero(a, "transcendentals")
    if vector is not None:
        rows.append((_L["flops_vector"], f"{_count(a, 'flops_vector')} on the vector unit (the rest on the "
                                         "matrix unit)"))
    if transcendentals is not None:
        # "268.4 M", not "268.4 Mtranscendentals": the row's label names the unit
        rows.append((_L["transcendentals"], f"{beside(transcendentals, '')} (exp, log, tanh, rsqrt, ...: "
                                            "counted apart from FLOPs)"))
    if a.mesh is not None:
        rows.append((_L["flops_total"], f"{_count(a, 'flops_total')} over the mesh (replication "
                                        f"{pretty(a.replication)})"))
    if a.program is not None:  # bare counts have no reads and writes to tell apart
        rows.append((_L["bytes_read"], _count(a, "bytes_read")))
        rows.append((_L["bytes_written"], _count(a, "bytes_written")))
    rows.append((_L["bytes"], _count(a, "bytes") + (" (HBM)" if a.mesh is not None else "")))
    if a.intensity is sympy.nan:
        rows.append((_L["intensity"], "undefined: no FLOPs and no HBM bytes"))
    else:
        rows.append((_L["intensity"], _readable(a.intensity, "FLOPs / bytes")
                     + ("" if _long(a.intensity) else f" {_U['intensity']}")
                     + ("" if _long(a.intensity) or a.intensity_exact == a.intensity
                        else f"   (exact: {pretty(a.intensity_exact)})")))
    network = bool(a.cost.moves) and a.has_links
    if m is not None and a.has_peak:
        if m.hbm_bw is not None:
            rows.append((_L["critical_intensity"], _critical_text(a)))
        if network and a.critical_network_intensity is sympy.nan:
            rows.append((_L["network_intensity"], "0 FLOPs/byte of collectives' V (no FLOPs: all network)"))
        elif network:
            rows.append((_L["network_intensity"], f"{pretty(a.network_intensity)} FLOPs/byte of collectives' V "
                                                  f"(critical {pretty(a.critical_network_intensity)}: peak / link "
                                                  "bandwidth)"))
        rows.append((_L["t_math"], _time(a, "math")))
        t_vector = nonzero(a, "t_vector")
        if t_vector is not None:
            shown = seconds(t_vector) if t_vector.is_number else f"{pretty(t_vector)} s" if not _long(t_vector) \
                else _readable(t_vector, "the vector steps' work / the vector rate, in s")
            guessed = [rate for rate in a.rates if rate.startswith("vector") and m.estimated(rate)]
            rows.append((_L["t_vector"], f"{shown} of T_math on the vector unit"
                         + (" (at an estimated rate: --vector-flops gives a measured one)" if guessed else "")))
    if m is not None and m.hbm_bw is not None:
        rows.append((_L["t_comms"], _time(a, "comms") + (" (HBM)" if a.mesh is not None else "")))
    if network:
        rows.append((_L["t_network"], _network_time(a) + " (bandwidth-bound); " + latency_text(a)))
    elif a.cost.moves and m is not None:
        rows.append(("note", "costing the collectives needs link figures: name a chip (--chip) or "
                             "give --ici-bw"))
    if m is not None and m.hbm_bw is not None and a.has_peak and (network or not a.cost.moves):
        three = ", T_network" if network else ""
        rows.append((_L["t_lower"], seconds(a.t_lower) if a.t_lower.is_number
                     else f"max(T_math, T_comms{three})"))
        rows.append((_L["t_upper"], seconds(a.t_upper) if a.t_upper.is_number
                     else "T_math + T_comms" + (" + T_network" if network else "")))
        rows.append(("bound", _bound_text(a)))
        rows += [("on chip", str(item)) for item in a.on_chip]  # a fused block's intermediates
        if a.unfused is not None:
            saved, t = a.unfused.bytes - a.bytes, a.unfused.t_lower
            rows.append(("unfused", f"bytes {beside(a.unfused.bytes, 'bytes')}, T_lower "
                                    f"{seconds(t) if t.is_number else _readable(t, 'its max(T_math, T_comms)')}"
                                    f" (fusing saves {beside(saved, 'bytes')} of HBM traffic)"))
        if a.achieved_flops_per_s.is_number and a.flops != 0:
            share = a.achieved_flops_per_s / a.peak_flops
            # work on several units (the matrix unit and the vector unit): its peak is FLOPs / T_math,
            # below the matrix unit's the chip line gives; said, so that 100% under 459 reads right
            rates = {name: rate for name, rate in a.rates.items() if rate.is_number}
            of = "of peak"
            if (len(a.rates) > 1 or a.transcendentals != 0) and rates:
                name, top = max(rates.items(), key=lambda item: item[1])
                of = (f"of what its mix of matrix and vector work can reach, FLOPs / T_math; "
                      f"{float(a.achieved_flops_per_s / top):.1%} of the {human(top, 'FLOPs/s')} {name} peak")
            rows.append((_L["achieved_flops_per_s"], f"{human(a.achieved_flops_per_s, _U['achieved_flops_per_s'])} "
                                                     f"at T_lower ({float(share):.1%} {of})"))
    elif m is not None and (m.hbm_bw is None or not a.has_peak):
        rows.append(("note", "give both a peak (a chip or --peak-flops) and --hbm-bw for the "
                             "times, the bound and thresholds"))
    if limit:
        rows.append(("limit", f"intensity -> {pretty(a.limit(*limit))} as {', '.join(limit)} -> oo"))
    if solve:
        rows.append(("threshold", threshold_text(a.threshold(solve), a.values,
                                                 latency_text(a) if network else None, a.granularity(solve))))
    out = _aligned(rows)
    out += ["", *wrapped(f"conventions: {CONVENTIONS}")]
    if a.mesh is not None:
        out += wrapped("collectives: V = bytes each chip holds of the larger side; their HBM traffic is "
                        "not counted, and partial-sum adds are left out of FLOPs, as in the book")
    return "\n".join(out)


def _aligned(rows: list[tuple[str, str]], cut: int | None = None) -> list[str]:
    """`name  value` rows, the values aligned; with `cut`, each line at most that wide."""
    width = max(len(k) for k, _ in rows) + 2
    out = []
    for key, value in rows:
        first, *rest = str(value).split("\n")
        out.append(f"{key:<{width}}{first}")
        out.extend(" " * width + r for r in rest)
    return out if cut is None else [_cut(line, cut) for line in out]


def summary(a: Analysis) -> str:
    """The short table an analysis shows as its repr: a handful of aligned `name  value`
    rows (spec, chip, FLOPs, bytes, intensity, the times, the bound), numbers scaled, no
    line past `REPR_WIDTH`; `table` gives the full report.

    Examples:
        >>> from symroof import analyze
        >>> print(summary(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(B=4096, D=4096, F=4096)))
        spec       bf16[B, D] @ bf16[D, F] -> bf16[B, F]
        chip       TPU v5e: 197 TFLOPs/s bf16 peak (dense), HBM 820 GB/s
        sizes      B = 4096, D = 4096, F = 4096
        FLOPs      137438953472 (137.4 GFLOPs)
        bytes      100663296 (100.7 MB)
        intensity  1365.33 FLOPs/byte (critical 240.244 FLOPs/byte)
        T_math     697.66 us
        T_comms    122.76 us
        T_lower    697.66 us
        bound      compute-bound (T_math is the largest)
        (print(a) for the full report, with the steps and the conventions)
    """
    rows: list[tuple[str, str]] = []
    if a.program is not None:
        rows.append(("spec", spec_line(a.spec)))
    if a.mesh is not None:
        rows.append(("mesh", _axes(a) + "; counts per chip"))
    if len(a.lines) > 1:
        rows.append(("lines", f"{len(a.lines)} statements; the totals below"))
    m = a.machine
    if m is not None:
        rows.append(("chip", _machine_text(a)))
    if a.values:
        rows.append(("sizes", ", ".join(f"{k} = {v}" for k, v in a.values.items())))
    if a.arrays and not a.steps and not a.cost.moves:  # arrays alone: what they take
        return "\n".join(_aligned(rows + arrays_report.rows(a), REPR_WIDTH))
    rows.append((_L["flops"], _count(a, "flops")))
    rows.append((_L["bytes"], _count(a, "bytes") + (" HBM" if a.mesh is not None else "")))
    if a.intensity is sympy.nan:
        rows.append((_L["intensity"], "undefined: no FLOPs and no HBM bytes"))
    else:
        critical = (f" (critical {pretty(a.critical_intensity)} FLOPs/byte)"
                    if m is not None and a.has_peak and m.hbm_bw is not None and a.critical_intensity.is_number
                    and a.critical_intensity is not sympy.nan else "")
        rows.append((_L["intensity"], f"{pretty(a.intensity)} {_U['intensity']}{critical}"))
    network = bool(a.cost.moves) and a.has_links
    if a.cost.moves:
        times = {id(move.move): t for move, t in a.collectives} if network else {}
        shown = []
        for move in a.cost.moves:
            V = a.substitute(move.bytes)
            text = f"{move.move.kind}{subscript(move.move.axes)}: V = " \
                   f"{human(V, 'bytes') if V.is_number else pretty(V) + ' bytes'}"
            t = times.get(id(move.move))
            if t is not None and t.bandwidth.is_number:
                text += f", {seconds(t.bandwidth)}"
            shown.append(text)
        rows.append(("collectives", "; ".join(shown)))
    if m is not None and a.has_peak:
        rows.append((_L["t_math"], _time(a, "math")))
    if m is not None and m.hbm_bw is not None:
        rows.append((_L["t_comms"], _time(a, "comms")))
    if network:
        rows.append((_L["t_network"], _network_time(a) + "; " + latency_text(a)))
    elif a.cost.moves and m is not None:
        rows.append(("note", "costing the collectives needs link figures: give --ici-bw or a chip"))
    if m is not None and m.hbm_bw is not None and a.has_peak and (network or not a.cost.moves):
        rows.append((_L["t_lower"], seconds(a.t_lower) if a.t_lower.is_number
                     else "max(T_math, T_comms" + (", T_network)" if network else ")")))
        rows.append(("bound", _bound_text(a)))
    elif m is not None and (m.hbm_bw is None or not a.has_peak):
        rows.append(("note", "the times and the bound need both a peak and an HBM bandwidth"))
    out = _aligned(rows, REPR_WIDTH)
    out.append("(print(a) for the full report, with the steps and the conventions)")
    return "\n".join(out)


def _steps(a: Analysis) -> list[tuple[str, str]]:
    """The steps (and on a mesh, what each chip runs and the collectives between)."""
    rows = []
    if a.mesh is not None:
        for plan in a.cost.plans:
            for item in plan.items:
                if isinstance(item, Local):
                    rows.append(("per chip", str(item)))
                else:
                    rows.append(("collective", str(item)))
                    rows.append(("", _collective_text(a, item)))
        return rows
    if a.program is None:
        return rows
    if a.steps:  # even a spec that reads as its one step: the line says what is summed, and how
        for i, s in enumerate(a.steps, 1):
            step = s.step
            assert step is not None  # a program's steps: each costs a step of it
            kind = ops.kind_of(step.kind)
            summed = ", ".join(label_text(l) for l in step.summed) or "nothing"
            does = f"{kind.over_word} {summed}; " if step.summed or kind.over_word == "sums" else ""
            unit = {ops.VECTOR: " on the vector unit", ops.NONE: ", no arithmetic"}.get(kind.unit, "")
            extra = f", transcendentals {beside(s.transcendentals, '')}" if s.transcendentals != 0 else ""
            rows.append((f"step {i}", f"{step}   [{does}{step.compute} compute{unit}; "
                                      f"FLOPs {beside(s.flops, 'FLOPs')}{extra}, bytes {beside(s.bytes, 'bytes')}]"))
    return rows


def _collective_text(a: Analysis, move: Move) -> str:
    V = a.substitute(next(m.bytes for m in a.cost.moves if m.move is move))
    text = f"V = {pretty(V)} bytes" + (f" ({human(V, 'bytes')})" if V.is_number and V >= 1000 else "") \
        + " per chip"
    if not a.has_links:
        return text
    t = next(t for m, t in a.collectives if m.move is move)
    shown = seconds(t.bandwidth) if t.bandwidth.is_number else over(V, V / t.bandwidth) + " s"
    hops = f"{t.hops} hop{'s' if t.hops != 1 else ''}"
    floor = f", at least {duration(t.latency)} ({hops})" if t.latency_known else f" ({hops}; latency unknown)"
    return f"{text}; {t.links}: {shown}{floor}"


def _line_summary(line: Analysis) -> str:
    if line.arrays and not line.steps and not line.cost.moves:
        return f"stored: {beside(line.bytes_per_chip, 'bytes')} bytes" + (" per chip" if line.mesh is not None else "")
    parts = [f"FLOPs {beside(line.flops, 'FLOPs')}", f"bytes {beside(line.bytes, 'bytes')}"]
    m = line.machine
    if m is not None and m.hbm_bw is not None and line.has_peak and (line.has_links or not line.cost.moves):
        parts += [f"T_math {_time(line, 'math')}", f"T_comms {_time(line, 'comms')}"]
        if line.cost.moves:
            parts.append(f"T_network {_network_time(line)}")
        parts.append(f"bound {line.settled_bound or 'depends on the sizes'}")
    return "; ".join(parts)


def _machine(a: Analysis) -> Machine:
    """The analysis's machine, for the rows about it (shown only where there is one)."""
    m = a.machine
    assert m is not None, "a row about the machine, for an analysis without one"
    return m


def _rates(a: Analysis) -> dict[str, sympy.Rational]:
    """Each rate the work runs at (a dtype's matrix peak, the vector unit's), by name."""
    return a.rates


def _machine_text(a: Analysis) -> str:
    m = _machine(a)
    parts = []
    if a.has_peak and a.compute_dtypes:
        peaks = " + ".join(f"{human(peak, 'FLOPs/s')} {rate}" + (" (estimate)" if m.estimated(rate) else "")
                           for rate, peak in _rates(a).items())
        parts.append(f"{peaks} peak (dense)")
    if m.hbm_bw is not None:
        parts.append(f"HBM {human(m.hbm_bw, 'bytes/s')}")
    if m.ici_bw is not None:
        parts.append(f"ICI {human(m.ici_bw, 'bytes/s')} one way per link (given)")
    return f"{m.name}: " + ", ".join(parts)


def _critical_text(a: Analysis) -> str:
    if a.critical_intensity is sympy.nan:
        return "none: no FLOPs to run"
    guessed = " (an estimate: so is the peak)" if any(map(_machine(a).estimated, _rates(a))) else ""
    if not any(s.is_integer for s in a.critical_intensity.free_symbols):  # a number, or C/W_hbm
        return f"{pretty(a.critical_intensity)} FLOPs/byte (peak / HBM bandwidth){guessed}"
    each = ", ".join(f"{pretty(peak / _machine(a).hbm_bw)} ({rate})" for rate, peak in _rates(a).items())
    return f"{each} FLOPs/byte: the steps run at different rates (dtypes or units){guessed}"


def _time(a: Analysis, which: str) -> str:
    value = a.t_math if which == "math" else a.t_comms
    if value.is_number:
        return seconds(value)
    if which == "comms":
        return (f"bytes / {number(_machine(a).hbm_bw)}" if _long(a.bytes) else over(a.bytes, _machine(a).hbm_bw)) + " s"
    rates = a.rates
    if _long(value):
        return _readable(value, "the steps' work / their rates, in s")
    return " + ".join(over(work, rates[name]) for name, work in a.work.items()) + " s"


def _network_time(a: Analysis) -> str:
    if a.t_network.is_number:
        return seconds(a.t_network)
    parts = []
    for move, t in a.collectives:
        V, bandwidth = move.bytes, t.bandwidth
        parts.append(over(V, V / bandwidth))
    return " + ".join(parts) + " s"


def _network_bound(a: Analysis) -> str:
    if a.t_network.is_number and a.t_network_latency.is_number and a.t_network_latency > a.t_network:
        return "network-bound (latency: the collectives are too small to fill the links)"
    return "network-bound (T_network)"


def _bound_text(a: Analysis) -> str:
    bound = a.bound
    if isinstance(bound, str):
        return {"compute": "compute-bound (T_math is the largest)", "memory": "memory-bound (T_comms, HBM)",
                "network": _network_bound(a), "balanced": "balanced (T_math = T_comms)"}[bound]
    if a.cost.moves:
        return "compute-bound when T_math > max(T_comms, T_network); which bound depends on the sizes"
    if _long(a.t_math) or _long(a.t_comms):
        return "compute-bound when T_math > T_comms, else memory-bound: which depends on the sizes"
    if a.critical_intensity.is_number:
        return f"compute-bound when {pretty(bound)}, else memory-bound"
    return (f"compute-bound when T_math > T_comms: {_time(a, 'math')[:-2]} > {_time(a, 'comms')[:-2]}, "
            "else memory-bound")


def _axes(a: Analysis) -> str:
    """The mesh's axes with their links and its chips: "X=2 (ICI), Y=4 (DCN): 8 chips";
    an axis without a size is its symbol, "X (ICI), Y=4 (ICI): 4*X chips"."""
    mesh = a.mesh
    assert mesh is not None  # the report's mesh row
    axes = ", ".join(f"{x.name}{'' if x.symbolic else f'={x.size}'} ({link_name(x, a.chip)})" for x in mesh.axes)
    chips = a.substitute(mesh.count)
    return f"{axes}: {pretty(chips)} chip{'' if chips == 1 else 's'}"
