"""The bytes below which a step's collectives are latency-bound (`symroof model --serve
--strategy ...`): each collective takes at least its hops' latency floor (the chip's
`hop_latency_s`, collectives.py), and its bandwidth time grows with the bytes V it moves,
so below V* = floor / (bandwidth time per byte) the floor sets its time. A decode step's
V grows with the batch (tensor parallelism's AllReduce of bf16[B, D]: 2·B·D bytes), so
V* is a batch too, B* where V(B) = V*: in closed form, from the collective's V in B.

Only the networks carry such a figure. Memory has none (no per-step or kernel-launch
latency in the chips' data), so nothing here gives an HBM threshold; a chip without a
hop latency for a link gets no number for that link's collectives, and says so."""

from __future__ import annotations

import dataclasses

import sympy

from ..errors import SpecError
from ..ir import dim_symbol
from .strategy_costs import Collective, collectives
from .whole import Model


@dataclasses.dataclass(frozen=True, slots=True)
class LatencyBound:
    """One kind of collective of a step (those alike in kind, axes, tensor and time per
    call, summed: `count` calls a step), with V and V* per call."""

    kind: str
    axes: str
    tensor: str
    count: sympy.Expr
    bytes: sympy.Expr  # V per call, in B
    floor: sympy.Expr | None  # seconds per call: hops x hop latency; None where a link's latency is unknown
    per_byte: sympy.Expr  # the bandwidth time per byte of V
    threshold_bytes: sympy.Expr | None  # V*: bandwidth time = floor
    threshold_batch: sympy.Expr | None  # B*: V(B*) = V*; None where V does not grow with B
    latency_bound: bool | None  # at the batch given (None where the floor is unknown)

    def to_dict(self) -> dict:
        from ..render.json_report import json_value
        return {"kind": self.kind, "axes": self.axes, "tensor": self.tensor, "count": json_value(self.count),
                "bytes": str(self.bytes), "latency_floor": json_value(self.floor),
                "threshold_bytes": json_value(self.threshold_bytes),
                "threshold_batch": json_value(self.threshold_batch), "latency_bound": self.latency_bound}


def bounds(free: Model, batch: int) -> tuple[LatencyBound, ...]:
    """Each collective of `free`'s step (a model with its batch B a symbol): its V* and B*,
    and whether it is latency-bound at `batch`."""
    B = dim_symbol("B")
    groups: dict[tuple, list[Collective]] = {}
    for c in collectives(free):
        each, floor = c.time / c.count, c.latency / c.count
        groups.setdefault((c.kind, c.axes, c.tensor, c.bytes, each, floor, c.latency_known), []).append(c)
    out = []
    for (kind, axes, tensor, V, each, floor, known), alike in groups.items():
        per_byte = sympy.simplify(each / V)
        if per_byte.free_symbols:
            raise SpecError(f"a {kind}'s bandwidth time is not proportional to its bytes ({each} for {V}): "
                            "no latency-bound threshold follows")
        count = sympy.Add(*(c.count for c in alike))
        if not known:
            out.append(LatencyBound(kind, axes, tensor, count, V, None, per_byte, None, None, None))
            continue
        v_star = floor / per_byte
        b_star = None
        if V.has(B):
            if V.free_symbols != {B} or not sympy.Poly(V, B).is_linear or V.subs(B, 0) != 0:
                raise SpecError(f"a {kind}'s bytes are not proportional to the batch ({V}): no batch threshold")
            b_star = v_star / V.coeff(B, 1)
        at = V.subs(B, batch)
        out.append(LatencyBound(kind, axes, tensor, count, V, floor, per_byte, v_star, b_star, bool(at < v_star)))
    return tuple(out)
