"""The text report of an analysis, and thresholds in words.

Numbers appear only here and in the JSON: expressions keep exact rationals inside and
are shown with six significant figures; a count that is a number has its SI-scaled figure
beside it (`268435456 (268.4 MFLOPs)`), and rates and times are scaled (`197 TFLOPs/s`,
`820 GB/s`, `1.364 ms`). `table` is the full report; `summary` the short table an
analysis shows as its repr; `threshold_summary`, `move_line`, `time_line`, `link_line`
and `counts_line` are the reprs of the other results.
"""

from __future__ import annotations

import sympy

from .collectives import link_name
from .ir import label_text, subscript
from .roofline import CONVENTIONS, Analysis, Threshold, dim_names
from .sharding import Local
from .oneline import REPR_WIDTH, cut as _cut
from .show import beside, human, over, pretty, seconds, wrapped

# the widest line of a repr; a value past it is cut short with "..."
# text reports wrap their notes (the conventions) at this width


def threshold_text(t: Threshold, values: dict | None = None, latency=None, step: int = 1) -> str:
    """A threshold in lines: the rule, the exact answer with its condition, the reason; on
    a mesh, then the same against the network."""
    parts = []
    if t.rule is not None:
        how = f"[rule: {', '.join(t.rule_as)} -> oo]" if t.rule_as else \
            "[exact: no other named dim to take to infinity]"
        parts.append(f"{_bound_on(t.var, t.op, t.rule, step)}  {how}")
    if t.exact is not None and t.rule_as and t.exact != t.rule:
        exact = f"exact: {_bound_on(t.var, t.op, t.exact, step)}"
        if t.condition is not None:
            exact += f", when {pretty(t.condition)}"
            exact += {"never": " (never otherwise)", "always": f" (at every {t.var} otherwise)"}.get(
                t.otherwise, "")
        if values:
            exact += "  [at " + ", ".join(f"{k} = {v}" for k, v in values.items()) + "]"
        parts.append(exact)
    if t.reason:
        parts.extend(t.reason.split("; "))
    if not parts:
        parts.append(f"no threshold on {t.var}")
    if t.network is not None:
        head = "against the network (bandwidth-bound regime" + (f"; {latency}):" if latency else "):")
        parts = [f"against HBM: {parts[0]}", *parts[1:], head,
                 *("  " + line for line in threshold_text(t.network, values, step=step).split("\n"))]
    return "\n".join(parts)


def latency_text(a: Analysis) -> str:
    """The network's latency floor in words, saying where hop latencies are unknown."""
    floor = a.t_network_latency
    if a.t_network_latency_known:
        return f"latency floor {seconds(floor)}"
    if floor:
        return f"latency floor at least {seconds(floor)} (some links' hop latency is unknown)"
    return "latency floor unknown (the chip has no hop latency figure)"


def _bound_on(var: str, op: str, value, step: int = 1) -> str:
    """`B > 240.24 (B >= 241)`; a dim split over chips moves in steps of that many."""
    if not value.is_number:
        return f"{var} {op} {pretty(value)}"
    shown = f"{float(value):.2f}".rstrip("0").rstrip(".") if 1e-2 <= abs(float(value)) < 1e12 else pretty(value)
    text = f"{var} {op} {shown}"
    if op == ">":
        if value < 1:
            return f"{text}: every {var} >= 1"
        first = (int(sympy.floor(value)) // step + 1) * step
        return f"{text} ({var} >= {first}" + (f", a multiple of {step}" if step > 1 else "") + ")"
    return text


def table(a: Analysis, limit=None, solve=None) -> str:
    """The readable report of an analysis."""
    limit = dim_names(limit or ())
    rows: list[tuple[str, str]] = []
    if a.program is not None:
        rows.append(("spec", a.spec.replace("\n", "; ")))
    if a.mesh is not None:
        rows.append(("mesh", ", ".join(f"{x.name}={x.size} ({link_name(x, a.chip)})" for x in a.mesh.axes)
                     + f": {a.mesh.chips} chip{'s' if a.mesh.chips != 1 else ''}; the counts below are per chip"))
    lines = a.lines
    if len(lines) > 1:
        for i, line in enumerate(lines, 1):
            rows.append((f"line {i}", line.spec.split("\n")[-1]))
            rows.append(("", _line_summary(line)))
    rows += _steps(a)
    if a.values:
        rows.append(("sizes", ", ".join(f"{k} = {v}" for k, v in a.values.items())))
    m = a.machine
    if m is not None:
        rows.append(("chip", _machine_text(a)))
    rows.append(("FLOPs", beside(a.flops, "FLOPs") + ("" if a.flops_exact == a.flops
                                                      else f"   (exact: {pretty(a.flops_exact)})")))
    if a.mesh is not None:
        rows.append(("FLOPs total", f"{beside(a.flops_total, 'FLOPs')} over the mesh (replication "
                                    f"{pretty(a.replication)})"))
    if a.program is not None:  # bare counts have no reads and writes to tell apart
        rows.append(("bytes read", beside(a.bytes_read, "bytes")))
        rows.append(("bytes written", beside(a.bytes_written, "bytes")))
    rows.append(("bytes", beside(a.bytes, "bytes") + (" (HBM)" if a.mesh is not None else "")))
    if a.intensity is sympy.nan:
        rows.append(("intensity", "undefined: no FLOPs and no HBM bytes"))
    else:
        rows.append(("intensity", f"{pretty(a.intensity)} FLOPs/byte"
                     + ("" if a.intensity_exact == a.intensity else f"   (exact: {pretty(a.intensity_exact)})")))
    network = bool(a.cost.moves) and a.has_links
    if m is not None and a.has_peak:
        if m.hbm_bw is not None:
            rows.append(("critical", _critical_text(a)))
        if network and a.critical_network_intensity is sympy.nan:
            rows.append(("network intensity", "0 FLOPs/byte of collectives' V (no FLOPs: all network)"))
        elif network:
            rows.append(("network intensity", f"{pretty(a.network_intensity)} FLOPs/byte of collectives' V "
                                              f"(critical {pretty(a.critical_network_intensity)})"))
        rows.append(("T_math", _time(a, "math")))
    if m is not None and m.hbm_bw is not None:
        rows.append(("T_comms", _time(a, "comms") + (" (HBM)" if a.mesh is not None else "")))
    if network:
        rows.append(("T_network", _network_time(a) + " (bandwidth-bound); " + latency_text(a)))
    elif a.cost.moves and m is not None:
        rows.append(("note", "costing the collectives needs link figures: name a chip (--chip) or "
                             "give --ici-bw"))
    if m is not None and m.hbm_bw is not None and a.has_peak and (network or not a.cost.moves):
        three = ", T_network" if network else ""
        rows.append(("T_lower", seconds(a.t_lower) if a.t_lower.is_number else f"max(T_math, T_comms{three})"))
        rows.append(("T_upper", seconds(a.t_upper) if a.t_upper.is_number
                     else "T_math + T_comms" + (" + T_network" if network else "")))
        rows.append(("bound", _bound_text(a)))
        if a.achieved_flops_per_s.is_number and a.flops != 0:
            share = a.achieved_flops_per_s / a.peak_flops
            rows.append(("achieved", f"{human(a.achieved_flops_per_s, 'FLOPs/s')} at T_lower "
                                     f"({float(share):.1%} of peak)"))
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
        >>> from symroof.roofline import analyze
        >>> print(summary(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(B=4096, D=4096, F=4096)))
        spec       bf16[B, D] @ bf16[D, F] -> bf16[B, F]
        chip       TPU v5e: 197 TFLOPs/s bf16 peak (dense), HBM 820 GB/s
        sizes      B = 4096, D = 4096, F = 4096
        FLOPs      137438953472 (137.4 GFLOPs)
        bytes      100663296 (100.7 MB)
        intensity  1365.33 FLOPs/byte (critical 240.244)
        T_math     697.66 us
        T_comms    122.76 us
        T_lower    697.66 us
        bound      compute-bound (T_math is the largest)
        (print(a) for the full report, with the steps and the conventions)
    """
    rows: list[tuple[str, str]] = []
    if a.program is not None:
        rows.append(("spec", a.spec.replace("\n", "; ")))
    if a.mesh is not None:
        rows.append(("mesh", ", ".join(f"{x.name}={x.size} ({link_name(x, a.chip)})" for x in a.mesh.axes)
                     + f": {a.mesh.chips} chip{'s' if a.mesh.chips != 1 else ''}; counts per chip"))
    if len(a.lines) > 1:
        rows.append(("lines", f"{len(a.lines)} statements; the totals below"))
    m = a.machine
    if m is not None:
        rows.append(("chip", _machine_text(a)))
    if a.values:
        rows.append(("sizes", ", ".join(f"{k} = {v}" for k, v in a.values.items())))
    rows.append(("FLOPs", beside(a.flops, "FLOPs")))
    rows.append(("bytes", beside(a.bytes, "bytes") + (" HBM" if a.mesh is not None else "")))
    if a.intensity is sympy.nan:
        rows.append(("intensity", "undefined: no FLOPs and no HBM bytes"))
    else:
        critical = (f" (critical {pretty(a.critical_intensity)})"
                    if m is not None and a.has_peak and m.hbm_bw is not None and a.critical_intensity.is_number
                    and a.critical_intensity is not sympy.nan else "")
        rows.append(("intensity", f"{pretty(a.intensity)} FLOPs/byte{critical}"))
    network = bool(a.cost.moves) and a.has_links
    if a.cost.moves:
        times = {id(move.move): t for move, t in a.collectives} if network else {}
        shown = []
        for move in a.cost.moves:
            V = a._at(move.bytes)
            text = f"{move.move.kind}{subscript(move.move.axes)}: V = " \
                   f"{human(V, 'bytes') if V.is_number else pretty(V) + ' bytes'}"
            t = times.get(id(move.move))
            if t is not None and t.bandwidth.is_number:
                text += f", {seconds(t.bandwidth)}"
            shown.append(text)
        rows.append(("collectives", "; ".join(shown)))
    if m is not None and a.has_peak:
        rows.append(("T_math", _time(a, "math")))
    if m is not None and m.hbm_bw is not None:
        rows.append(("T_comms", _time(a, "comms")))
    if network:
        rows.append(("T_network", _network_time(a) + "; " + latency_text(a)))
    elif a.cost.moves and m is not None:
        rows.append(("note", "costing the collectives needs link figures: give --ici-bw or a chip"))
    if m is not None and m.hbm_bw is not None and a.has_peak and (network or not a.cost.moves):
        rows.append(("T_lower", seconds(a.t_lower) if a.t_lower.is_number
                     else "max(T_math, T_comms" + (", T_network)" if network else ")")))
        rows.append(("bound", _bound_text(a)))
    elif m is not None and (m.hbm_bw is None or not a.has_peak):
        rows.append(("note", "the times and the bound need both a peak and an HBM bandwidth"))
    out = _aligned(rows, REPR_WIDTH)
    out.append("(print(a) for the full report, with the steps and the conventions)")
    return "\n".join(out)


def threshold_summary(t: Threshold) -> str:
    """A threshold's repr: what it is on, then `threshold_text`, each line at most
    `REPR_WIDTH` wide."""
    lines = [f"Threshold: where {t.var} makes the analysis compute-bound",
             *("  " + line for line in threshold_text(t).split("\n"))]
    return "\n".join(_cut(line, REPR_WIDTH) for line in lines)


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
            summed = ", ".join(label_text(l) for l in s.step.summed) or "nothing"
            rows.append((f"step {i}", f"{s.step}   [sums {summed}; {s.step.compute} compute; "
                                      f"FLOPs {beside(s.flops, 'FLOPs')}, bytes {beside(s.bytes, 'bytes')}]"))
    return rows


def _collective_text(a: Analysis, move) -> str:
    V = a._at(next(m.bytes for m in a.cost.moves if m.move is move))
    text = f"V = {pretty(V)} bytes" + (f" ({human(V, 'bytes')})" if V.is_number and V >= 1000 else "") \
        + " per chip"
    if not a.has_links:
        return text
    t = next(t for m, t in a.collectives if m.move is move)
    shown = seconds(t.bandwidth) if t.bandwidth.is_number else over(V, V / t.bandwidth) + " s"
    hops = f"{t.hops} hop{'s' if t.hops != 1 else ''}"
    floor = f", at least {seconds(t.latency)} ({hops})" if t.latency_known else f" ({hops}; latency unknown)"
    return f"{text}; {t.links}: {shown}{floor}"


def _line_summary(line: Analysis) -> str:
    parts = [f"FLOPs {beside(line.flops, 'FLOPs')}", f"bytes {beside(line.bytes, 'bytes')}"]
    m = line.machine
    if m is not None and m.hbm_bw is not None and line.has_peak and (line.has_links or not line.cost.moves):
        parts += [f"T_math {_time(line, 'math')}", f"T_comms {_time(line, 'comms')}"]
        if line.cost.moves:
            parts.append(f"T_network {_network_time(line)}")
        bound = line.bound
        parts.append(f"bound {bound if isinstance(bound, str) else 'depends on the sizes'}")
    return "; ".join(parts)


def _rates(a: Analysis) -> dict:
    """Each compute dtype's rate, and the peak it runs at."""
    return {d.rate: a.machine.peak(d.rate) for d in a.compute_dtypes}


def _machine_text(a: Analysis) -> str:
    m = a.machine
    parts = []
    if a.has_peak and a.compute_dtypes:
        peaks = " + ".join(f"{human(peak, 'FLOPs/s')} {rate}" for rate, peak in _rates(a).items())
        parts.append(f"{peaks} peak (dense)")
    if m.hbm_bw is not None:
        parts.append(f"HBM {human(m.hbm_bw, 'bytes/s')}")
    if m.ici_bw is not None:
        parts.append(f"ICI {human(m.ici_bw, 'bytes/s')} one way per link (given)")
    return f"{m.name}: " + ", ".join(parts)


def _critical_text(a: Analysis) -> str:
    if a.critical_intensity is sympy.nan:
        return "none: no FLOPs to run"
    if a.critical_intensity.is_number:
        return f"{pretty(a.critical_intensity)} FLOPs/byte (peak / HBM bandwidth)"
    each = ", ".join(f"{pretty(peak / a.machine.hbm_bw)} ({rate})" for rate, peak in _rates(a).items())
    return f"{each} FLOPs/byte: the steps compute in different dtypes"


def _time(a: Analysis, which: str) -> str:
    value = a.t_math if which == "math" else a.t_comms
    if value.is_number:
        return seconds(value)
    if which == "comms":
        return over(a.bytes, a.machine.hbm_bw) + " s"
    by_rate: dict[str, sympy.Expr] = {}
    for s in a.steps:
        if s.flops != 0:
            by_rate[s.step.compute.rate] = by_rate.get(s.step.compute.rate, 0) + a._at(s.flops)
    if not a.steps:
        by_rate = {a.compute_dtypes[0].rate: a.flops}
    return " + ".join(over(flops, a.machine.peak(rate)) for rate, flops in by_rate.items()) + " s"


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
    if a.critical_intensity.is_number:
        return f"compute-bound when {pretty(bound)}, else memory-bound"
    return (f"compute-bound when T_math > T_comms: {_time(a, 'math')[:-2]} > {_time(a, 'comms')[:-2]}, "
            "else memory-bound")
