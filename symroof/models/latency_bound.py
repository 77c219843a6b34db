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
from ..render.json_report import json_value
from ..show import number, pretty, seconds
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
        # B* only where V is proportional to the batch alone (a context in it, say, leaves V* the figure)
        linear = V.free_symbols == {B} and V.is_polynomial(B) and sympy.degree(V, B) == 1 and V.subs(B, 0) == 0
        b_star = v_star / V.coeff(B, 1) if linear else None
        at = V.subs(B, batch)
        bound = bool(at < v_star) if (at - v_star).is_number else None
        out.append(LatencyBound(kind, axes, tensor, count, V, floor, per_byte, v_star, b_star, bound))
    return tuple(out)


NO_MEMORY_LATENCY = ("none for the HBM: the chips' figures carry no per-step (kernel launch) latency for memory, "
                     "so no byte count below which a step's reads are latency-bound is derived")


def rows(found: tuple[LatencyBound, ...], chip: str, batch: int | None) -> list[tuple[str, str]]:
    """The report's rows: each collective's V, V* and B*, and the HBM's lack of a figure."""
    if not found:  # no collectives (a strategy that only copies the weights): nothing to weigh
        return []
    out = []
    for b in found:
        head = f"{b.kind} over {b.axes} of {b.tensor} ({b.count} a step): V = {pretty(b.bytes)} bytes"
        if b.floor is None:
            out.append(("latency_bound", f"{head}; WARNING: {chip} gives no hop latency for its link, so no "
                                         "latency-bound threshold (no floor to weigh the bandwidth time against)"))
            continue
        where = "" if b.threshold_batch is None else f", B* = {number(b.threshold_batch, 6)}"
        state = "" if b.latency_bound is None or batch is None else \
            f"; at B = {batch}: {'latency-bound' if b.latency_bound else 'bandwidth-bound'}"
        out.append(("latency_bound", f"{head}; V* = {number(b.threshold_bytes, 6)} bytes{where} (bandwidth time = "
                                     f"its {seconds(b.floor)} latency floor){state}"))
    out.append(("latency_memory", NO_MEMORY_LATENCY))
    return out


def step_bound(found: tuple[LatencyBound, ...]) -> bool | None:
    """Whether any of a step's collectives is latency-bound at the batch (None with none, or
    where one's floor is unknown)."""
    if not found or any(b.latency_bound is None for b in found):
        return None
    return any(b.latency_bound for b in found)


def of_model(model: Model) -> tuple[LatencyBound, ...] | None:
    """A decode model's collectives' thresholds, from its formulas (B a symbol), at its
    batch; None without a strategy or a chip, or where the formulas are not at hand."""
    free = model.formulas
    if model.options.mode != "decode" or not model.options.strategy or model.machine is None or free is None \
            or model.pipeline is not None or model.accumulation is not None:
        return None
    batch = model.sizes.get("B")
    return bounds(free, batch if isinstance(batch, int) else 0)
