"""Objects on one line, for their reprs: a collective and its V, its time on the links, a
link, FLOP and byte counts. Kept below the modules whose objects they show (cost,
collectives, roofline), which import them directly."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir import label_text, subscript
from ..show import beside, duration, human, over, pretty, seconds

if TYPE_CHECKING:  # these modules import this one
    from .collectives import Link, Time
    from .cost import Counts, MoveCost

REPR_WIDTH = 120  # no repr line is wider


def cut(line: str, width: int) -> str:
    return line if len(line) <= width else line[:width - 3] + "..."


def spec_line(spec: str) -> str:
    """A spec of several lines on one: statements joined by '; ', a fused block's
    braces by spaces (`fused { a; b }`)."""
    out = ""
    for part in (p.strip() for p in spec.split("\n")):
        if not part:
            continue
        out += part if not out else (" " if out.endswith("{") or part == "}" else "; ") + part
    return out


def _move_text(move: MoveCost) -> str:
    """`AllReduce_Y bf16[B_X, F] {U_Y}: V = 16777216 bytes (16.78 MB)`."""
    m, V = move.move, move.bytes
    shown = f"{pretty(V)} bytes" + (f" ({human(V, 'bytes')})" if V.is_number and V >= 1000 else "")
    times = f", {move.count} times" if move.count != 1 else ""
    return (f"{m.kind}{subscript((*m.axes, label_text(m.dim)) if m.dim else m.axes)} "
            f"{m.before.text(m.dtype)}: V = {shown}{times}")


def _time_parts(t: Time) -> tuple[str, str]:
    """A collective's time, bandwidth-bound (`372.827 us`, `B*F / 9e10 s`), and its latency
    floor in words."""
    bandwidth = t.bandwidth
    if bandwidth.is_number:
        shown = seconds(bandwidth)
    else:
        coeff, rest = bandwidth.as_coeff_Mul()
        shown = (over(coeff.p * rest, coeff.q) if coeff.is_Rational and coeff.q != 1
                 else pretty(bandwidth)) + " s"
    hops = f"{t.hops} hop{'s' if t.hops != 1 else ''}"
    return shown, (f"at least {duration(t.latency)} ({hops})" if t.latency_known else f"{hops}, latency unknown")


def move_line(move: MoveCost) -> str:
    """A collective and its V, the bytes per chip, on one line (the repr of `cost.MoveCost`;
    `str(move.move)` says why an inserted one is there)."""
    return cut(f"MoveCost({_move_text(move)})", REPR_WIDTH)


def time_line(t: Time) -> str:
    """A collective's time on one line, bandwidth-bound, then its latency floor and the links
    (the repr of `collectives.Time`)."""
    shown, floor = _time_parts(t)
    return cut(f"Time({shown}; {floor}; {t.links})", REPR_WIDTH)


def collective_line(move: MoveCost, t: Time | None = None) -> str:
    """One collective of an analysis (a `MoveCost` and its `Time`, as `Analysis.collectives`
    pairs them) on one line: what moves, V, the time on which links, the latency floor.

    Examples:
        >>> from symroof import analyze
        >>> a = analyze("bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F]", chip="v5e", mesh="X=4,Y=2")
        >>> print(collective_line(*a.at(B=4096, D=8192, F=8192).collectives[0]))
        AllReduce_Y bf16[B_X, F] {U_Y}: V = 16777216 bytes (16.78 MB), 372.827 us on Y: ICI (no wraparound), >= 2 us
    """
    text = _move_text(move)
    if t is not None:
        shown, _ = _time_parts(t)
        text += f", {shown} on {t.links}" + (f", >= {duration(t.latency)}" if t.latency_known else "; latency unknown")
    return cut(text, REPR_WIDTH)


def link_line(link: Link) -> str:
    """A mesh axis's link on one line (the repr of `collectives.Link`)."""
    parts = [f"{human(link.one_way, 'bytes/s')} one-way"]
    if link.bidi is not None:
        parts.append(f"{human(link.bidi, 'bytes/s')} bidirectional")
    parts.append(f"{seconds(link.latency)} per hop" if link.latency is not None else "hop latency unknown")
    return f"Link({link.describe()}: {', '.join(parts)})"


def counts_line(counts: Counts) -> str:
    """FLOPs and bytes on one line (the repr of `cost.Counts`, `StepCost` and `Cost`)."""
    name = type(counts).__name__
    parts = [f"FLOPs {beside(counts.flops, 'FLOPs')}", f"bytes {beside(counts.bytes, 'bytes')}"]
    step = getattr(counts, "step", None)
    if step is not None:
        parts.insert(0, str(step))
    steps, moves = getattr(counts, "steps", None), getattr(counts, "moves", None)
    if steps is not None:
        parts.append(f"{len(steps)} step{'s' if len(steps) != 1 else ''}")
    if moves:
        parts.append(f"{len(moves)} collective{'s' if len(moves) != 1 else ''}")
    mesh = getattr(counts, "mesh", None)  # a Cost's: a step's counts have none
    if mesh is not None:
        parts.append(f"per chip of {mesh.chips}")
    return cut(f"{name}({'; '.join(parts)})", REPR_WIDTH)
