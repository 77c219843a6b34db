"""What a strategy costs a model: its collectives (forward and backward, which of them can
overlap with compute), the communication a step cannot hide, and each kind's threshold.

Overlap: a collective on parameters or their gradients (FSDP's gathers, the gradients'
AllReduce and ReduceScatter) does not feed the very next statement, so it can run while
other layers compute (prefetched, or deferred); a collective on activations (tensor
parallelism's AllReduces) does, and waits on the critical path unless it is written as a
collective matmul. So beside the roofline's `t_step` (everything overlapped:
max(T_math, T_comms, T_network)) comes `t_step_exposed`: max(T_math, T_comms, T_network of
the overlappable ones) + T_network of the activations' ones.

Thresholds (each kind's collectives against the step's T_math, both per chip):
* dp, fsdp: their collectives do not grow with the batch while T_math does, so there is a
  batch B above which the kind is compute-bound: given as per-chip tokens (B x T over the
  chips the batch is split over), the figure the "per-chip batch > C / W_ici" rule names;
* tp: its AllReduces grow with the batch as T_math does, so the batch does not decide it:
  the ratio T_math / T_network(tp) does (above 1: compute-bound), set by the model's width
  over the axis's size;
* ep: its AllToAlls grow with the tokens as T_math does (`exchange_ratio`, set by the
  experts' width F against the link), and the gradients its axis sums do not (a batch
  threshold, as for dp);
* the kinds together (`step`, FSDP with tensor parallelism, say): the per-chip tokens above
  which T_math exceeds every collective of the step, and `max_chips`, the largest mesh this
  batch keeps above it.

A batch threshold weighs the collectives on parameters and gradients only: those on
activations grow with the batch as T_math does.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import sympy

from ..errors import SpecError
from ..hardware.topology import placement
from ..ir import dim_symbol, tensors_of
from ..roofline.collectives import link
from ..roofline.sized import pick_max
from ..roofline.solve import cleared, positive_region
from ..show import number
from . import kinds
from .activations import carries_tokens
from .strategies import megatron_note
from .whole import Model


@dataclass(frozen=True)
class Collective:
    """One collective of a step: in which pass, over which axes, on what, how often. A
    collective of a statement the backward pass recomputes (remat) is `backward` and
    `recomputed`."""

    backward: bool
    kind: str
    axes: str
    tensor: str        # as written, e.g. bf16[D_Z, F_Y]
    bytes: sympy.Expr  # V, each time
    count: sympy.Expr  # how many times a step (L for a layer's)
    time: sympy.Expr   # all `count` of them, bandwidth-bound
    overlaps: bool     # on parameters or gradients (True), or on activations (False)
    latency: sympy.Expr = sympy.Integer(0)  # all `count` of them, their hops' latency floor
    recomputed: bool = False
    latency_known: bool = True  # False where a link's chip gives no hop latency: `latency` then leaves it out

    @property
    def when(self) -> str:
        """The pass it runs in, in words: forward, backward, or recompute (in the backward)."""
        return "recompute" if self.recomputed else "backward" if self.backward else "forward"

    @property
    def floored(self) -> sympy.Expr:
        """The time, each at least its latency floor: what the step waits (the roofline's
        T_network counts each collective so)."""
        if not self.latency:
            return self.time
        return sympy.Max(self.time, self.latency, evaluate=self.time.is_number)


def collectives(model: Model) -> list[Collective]:
    """The step's collectives in order (forward, then a written backward's; a pipeline's:
    its last stage's and the sends between stages)."""
    if model.pipeline is not None:
        return model.pipeline.collectives()
    if model.accumulation is not None:
        return model.accumulation.collectives()
    a = model.step_analysis
    if a.mesh is None:
        return []
    forward = len(model.structured.program.statements)
    again = len(a.cost.statements) - len(model.recomputed)  # the recomputed statements come last
    passes = [(k >= forward, k >= again) for k, c in enumerate(a.cost.statements) for _ in c.moves]
    out = []
    for (backward, recomputed), (move, t) in zip(passes, a.collectives):
        before = move.move.before  # activations carry the tokens; parameters and gradients do not
        out.append(Collective(backward, move.move.kind, "".join(move.move.axes), before.text(move.move.dtype),
                              move.bytes, model.at(move.count), t.bandwidth, not carries_tokens(before.labels),
                              model.at(t.latency), recomputed, t.latency_known))
    return out


def times(model: Model) -> dict[str, sympy.Expr]:
    """t_network split into what can overlap and what cannot, and the step's time with the
    latter exposed (see the module docstring); a pipeline's by its schedule."""
    if model.pipeline is not None:
        return {k: v for k, v in model.pipeline.times.items() if k != "t_step"}
    if model.accumulation is not None:
        return {k: v for k, v in model.accumulation.times.items() if k != "t_step"}
    a = model.step_analysis
    rows = collectives(model)
    hidden = sympy.Add(*(c.floored for c in rows if c.overlaps))
    exposed = sympy.Add(*(c.floored for c in rows if not c.overlaps))
    work = pick_max(a.t_math, a.t_comms)
    t_step = pick_max(work, hidden) + exposed
    return {"t_network_overlapped": hidden, "t_network_exposed": exposed,
            "t_comm_exposed": t_step - work, "t_step_exposed": t_step}


def thresholds(model: Model, strategy: dict[str, str]) -> dict[str, dict]:
    """Each kind's collectives against T_math (see the module docstring); `strategy` maps
    each kind to its axes ({"dp": "X", "tp": "Y"})."""
    if not strategy:
        return {}
    if model.pipeline is not None:
        return model.pipeline.thresholds(strategy)
    if model.accumulation is not None:
        return model.accumulation.thresholds(strategy)
    # the model with B, and T where a context threshold may be asked for, symbols (only the
    # kinds that split them can ask): costed once for every threshold, each putting back the
    # sizes it does not solve for (_Free.fixed), and for the figures at the sizes given (None:
    # all put back), the same numbers as the model's own, without costing it again
    sequence = "T" in model.sizes and bool(kinds.where(lambda k: k.splits_sequence, strategy))
    dims = ("B",) * bool(kinds.where(lambda k: k.splits_batch, strategy)) + ("T",) * sequence
    free = _Free(model, dims) if dims else None
    if free is not None:
        rows = [dataclasses.replace(c, time=free.fixed(c.time, None)) for c in free.rows]  # (their times are read)
        t_math, t_network = (free.fixed(t, None) for t in (free.model.step_analysis.t_math,
                                                            free.model.step_analysis.t_network))
    else:
        rows, t_math, t_network = collectives(model), model.step_analysis.t_math, model.step_analysis.t_network
    mine = {kind: [c for c in rows if set(c.axes) & set(axes)] for kind, axes in strategy.items()}
    batch = rows and kinds.where(lambda k: k.splits_batch, strategy)
    context = sequence and any(kinds.kind(kind).splits_sequence and mine[kind] for kind in strategy)
    out: dict[str, dict] = {}
    for kind, axes in strategy.items():
        names = set(axes)
        t_net = sympy.Add(*(c.time for c in mine[kind]))
        entry: dict = {"axes": "".join(sorted(names)), "t_network": t_net, "collectives": len(mine[kind])}
        # None where the kind's collectives take no time (an axis of one chip): no ratio to give
        entry["ratio"] = t_math / t_net if mine[kind] and t_net != 0 else None
        declared = kinds.kind(kind)
        # the AllToAlls grow with the tokens as T_math does; the gradients' do not
        if declared.splits_experts and mine[kind]:
            exchange = sympy.Add(*(c.time for c in mine[kind] if c.kind == "AllToAll"))
            entry["exchange_ratio"] = t_math / exchange if exchange else None
        if declared.splits_batch and any(c.overlaps for c in mine[kind]):
            assert free is not None
            entry["per_chip_tokens"] = _batch_threshold(free, names)
        if context and declared.splits_sequence and mine[kind]:
            assert free is not None
            entry["context_per_chip"] = _context_threshold(free, names)
        out[kind] = entry
    if batch:
        assert free is not None
        step = _whole_step(model, rows, free, t_math, t_network)
        if len(strategy) > 1:
            out["step"] = step
        else:  # one kind: its own threshold is the step's
            out[next(iter(strategy))]["max_chips"] = step.get("max_chips")
    return out


class _Free:
    """A model with some of its sizes (B, T) left symbols, costed once for a strategy's
    thresholds: each threshold reads its figures with the sizes it does not solve for put
    back (`fixed`), the very numbers of a model costed with those sizes given."""

    def __init__(self, model: Model, dims: tuple[str, ...]):
        self.model = Model(model.structured, model.machine, {k: v for k, v in model.sizes.items() if k not in dims},
                           model.options)
        self._given = {dim_symbol(d): sympy.Integer(model.sizes[d]) for d in dims if d in model.sizes}

    def fixed(self, expr: sympy.Expr, solved: str | None) -> sympy.Expr:
        """`expr` of the free model with every freed size but `solved` given (None: all)."""
        symbol = dim_symbol(solved) if solved is not None else None
        return expr.xreplace({s: v for s, v in self._given.items() if s != symbol})

    @functools.cached_property
    def rows(self) -> list[Collective]:
        return collectives(self.model)

    def times(self, names: set[str] | None, solved: str, overlapping: bool = False) -> tuple[sympy.Expr, sympy.Expr]:
        """T_math and T_network of the collectives over `names` (all: None; only those that
        can overlap: `overlapping`), with every size but `solved` given."""
        t_net = sympy.Add(*(c.time for c in self.rows if (names is None or set(c.axes) & names)
                            and (c.overlaps or not overlapping)))
        return self.fixed(self.model.step_analysis.t_math, solved), self.fixed(t_net, solved)

    def tokens_per_chip(self, solved: str) -> sympy.Expr:
        return self.fixed(tokens_per_chip(self.model), solved)


def _whole_step(model: Model, rows: list[Collective], free: _Free, t_math_now: sympy.Expr,
                t_network_now: sympy.Expr) -> dict:
    """The kinds together (FSDP with tensor parallelism, say): the per-chip tokens above
    which T_math exceeds every collective of the step, those on activations too (they grow
    with the batch as T_math does, so a threshold exists only while T_math grows faster),
    and the largest mesh this batch keeps above it: the chips, with the batch spread over
    more data-parallel chips until each holds that many tokens (the collectives' times
    taken as they are, as on rings, where they do not depend on the axis's size). Its ratio
    is the step's T_math over T_network at the sizes given (`t_math_now`, `t_network_now`)."""
    B = dim_symbol("B")
    t_math, t_roof = cleared(*free.times(None, "B"))
    gap = sympy.expand(t_math - t_roof)
    entry: dict = {"axes": "".join(sorted({x for c in rows for x in c.axes})), "t_network": t_network_now,
                   "collectives": len(rows), "ratio": t_math_now / t_network_now if t_network_now != 0 else None}
    line = sympy.Poly(gap, B) if gap.is_polynomial(B) else None
    if line is None or line.degree() != 1 or not line.LC().is_positive:
        entry["per_chip_tokens"] = None  # T_math never outgrows the collectives on activations
        return entry
    slope, start = line.all_coeffs()
    tokens = free.model.at(-start / slope * free.tokens_per_chip("B") / B)
    now = tokens_per_chip(model)
    mesh = model.structured.program.mesh
    assert mesh is not None  # a strategy writes one
    chips = mesh.chips
    entry["per_chip_tokens"] = tokens
    entry["max_chips"] = sympy.floor(chips * now / tokens) if tokens.is_positive else None
    return entry


def _batch_threshold(free: _Free, names: set[str]) -> sympy.Expr | None:
    """The per-chip tokens above which T_math exceeds the collectives over `names`, from
    the model with its batch B a symbol."""
    B = dim_symbol("B")
    # the collectives on parameters and gradients: those on activations grow with B as T_math does
    t_math, t_net = free.times(names, "B", overlapping=True)
    if not (t_math.has(B) and not t_net.has(B)):
        raise SpecError("a batch threshold needs T_math to grow with the batch B and the collectives not to")
    t_math, t_roof = cleared(t_math, t_net)
    region = positive_region(sympy.expand(t_math - t_roof), B)
    if region.root is None:
        return None
    return free.model.at(region.root * free.tokens_per_chip("B") / B)


def _context_threshold(free: _Free, names: set[str]) -> sympy.Expr | None:
    """The tokens of a sequence each chip holds (T over the sequence axes) above which
    T_math exceeds the collectives over `names`, from the model with T a symbol: the
    work grows as T and T^2 (the scores), the keys' and values' gathers as T and the
    weights' gradient reductions not at all."""
    T = dim_symbol("T")
    t_math, t_roof = cleared(*free.times(names, "T"))
    gap = sympy.Poly(sympy.expand(t_math - t_roof), T)  # a quadratic: the scores' T^2 against T
    if not (gap.degree() == 2 and all(c.is_number for c in gap.all_coeffs()) and gap.LC() > 0):
        return None
    roots = [r for r in sympy.roots(gap) if r.is_real and r > 0]
    return max(roots) / _split(free.model, lambda k: k.splits_sequence) if roots else None


def sequence_per_chip(model: Model) -> sympy.Expr:
    """The tokens of a sequence each chip holds: T over the chips of the kinds that split it."""
    return model.at(dim_symbol("T")) / _split(model, lambda k: k.splits_sequence)


def _split(model: Model, test: Callable[[kinds.Kind], bool]) -> int:
    """The chips the axes of the kinds that pass `test` span together."""
    mesh = model.structured.program.mesh
    assert mesh is not None  # a strategy writes one
    strategy = dict(model.options.strategy)
    out = 1
    for axis in "".join(strategy.get(kind.name, "") for kind in kinds.where(test)):
        out *= mesh.axis(axis).number
    return out


def tokens_per_chip(model: Model) -> sympy.Expr:
    """The tokens each chip holds: the step's over the chips its batch and its sequences
    are split over (the data-parallel, FSDP, sequence and expert axes)."""
    return model.tokens / _split(model, lambda k: k.splits_tokens)


def _link(model: Model, axes: str) -> str:
    mesh = model.structured.program.mesh
    assert mesh is not None  # a strategy writes one
    machine = model.machine
    assert machine is not None  # a strategy's report is made on a chip
    return ", ".join(f"{mesh.axis(a).size} over {link(mesh.axis(a), machine.chip, machine.ici_bw).name}"
                     for a in axes)


def report(model: Model) -> dict:
    """A strategy's figures as sympy values: the strategy, its collectives, the exposed
    communication and step time, memory per chip and each kind's threshold."""
    kinds = dict(model.options.strategy)
    if not kinds or model.machine is None:
        return {}
    found = times(model)
    return {"strategy": kinds, "collectives": collectives(model), **found,
            "memory_per_chip": model.hbm_per_chip, "threshold": thresholds(model, kinds)}


def rows(model: Model, show: Callable[[sympy.Expr], str], seconds: Callable[[sympy.Expr], str]
         ) -> list[tuple[str, str]]:
    """The report's rows for a strategy (`show` writes a value, `seconds` a time)."""
    found = report(model)
    if not found:
        return []
    notes = _notes(model, found["strategy"])
    out = [("strategy", ", ".join(f"{kind} over {axes} ({_link(model, axes)}"
                                  f"{'; ' + notes[kind] if kind in notes else ''})"
                                  for kind, axes in found["strategy"].items()))]
    mesh = model.structured.program.mesh
    laid = placement(mesh.axes, model.machine.chip) if mesh is not None and model.machine is not None else None
    if laid:
        out.append(("", laid))
    copied = kv_copies(model)
    if copied:
        axes, count = copied
        heads = model.at(dim_symbol("K"))
        which = "the one KV head" if heads == 1 else f"each of the {show(heads)} KV heads"
        out.append(("", f"KV heads x{count}: {which} copied on {count} chips (over {axes}), tp being wider than "
                        "them; each chip holds its head's K and V weights and cache and computes its projections, "
                        "its query heads a share of the head's"))
    if model.pipeline is not None:
        out.append(("pipeline", model.pipeline.describe(show)))
    groups: dict[tuple, list] = {}
    for c in found["collectives"]:
        groups.setdefault((c.when, c.kind, c.axes, c.overlaps), []).append(c)
    for (when, kind, axes, overlaps), group in groups.items():
        count = sympy.Add(*(c.count for c in group))
        zero = "".join(a for k, a in found["strategy"].items() if kinds.kind(k).zero)
        what = "between stages: overlap the next microbatch but in the fill and the drain" if kind == "Send" else \
            "params/grads: can overlap" if overlaps else "activations: on the critical path"
        if model.accumulation is not None:
            what += f"; {model.accumulation.note(group[0])}"
        if kind == "AllReduce" and zero and set(zero) & set(axes):
            what += "; ZeRO runs it as a ReduceScatter of the gradients and an AllGather of the updated " \
                    "parameters, in the same time"
        bandwidth, charged = sympy.Add(*(c.time for c in group)), sympy.Add(*(c.floored for c in group))
        took = seconds(bandwidth) if charged == bandwidth or not (charged - bandwidth).is_positive else \
            f"{seconds(charged)} at the hops' latency floor ({seconds(bandwidth)} bandwidth-bound)"
        out.append(("collectives", f"{when}: {show(count)} x {kind} over {axes}, {took} ({what})"))
    out.append(("t_step_exposed", f"{seconds(found['t_step_exposed'])} (the activations' collectives exposed; "
                                  f"t_comm_exposed {seconds(found['t_comm_exposed'])})"))
    for kind, entry in found["threshold"].items():
        text = []
        tokens = entry.get("per_chip_tokens")
        if tokens is not None:
            now = entry.get("now", tokens_per_chip(model))
            of = f" of {entry['tokens_of']}" if entry.get("tokens_of") else ""
            text.append(f"compute-bound once per-chip tokens{of} > {show(tokens)} (now {number(now, 6)})")
        context = entry.get("context_per_chip")
        if context is not None:
            now = sequence_per_chip(model)
            text.append(f"compute-bound once each chip holds more than {show(context)} tokens of a sequence "
                        f"(now {number(now, 6)})")
        if kind == "step" and entry.get("per_chip_tokens") is None:
            text.append("T_math never outgrows the collectives on activations: no batch makes the step "
                        "compute-bound")
        if entry.get("max_chips") is not None:
            mesh = model.step_analysis.mesh
            assert mesh is not None  # a strategy writes one
            text.append(f"this batch stays compute-bound up to about {show(entry['max_chips'])} chips "
                        f"(now {mesh.chips})")
        if entry.get("exchange_ratio") is not None:
            text.append(f"T_math / the AllToAlls' time = {show(entry['exchange_ratio'])} (above 1: the experts' "
                        "work outlasts their tokens' exchange; more tokens grow both alike)")
        if entry["ratio"] is not None:
            text.append(f"T_math / T_network over {entry['axes']} = {show(entry['ratio'])}"
                        + (kinds.kind(kind).ratio_note if kind != "step" else ""))
        if "bubble_fraction" in entry:
            text.append(f"bubble {show(entry['bubble_fraction'])}; at most "
                        + ", ".join(f"{float(sympy.Rational(f)):.0%} from M >= {m}"
                                    for f, m in entry["microbatches_for_bubble"].items()))
        out.append((f"threshold {kind}", "; ".join(text) or ("no collectives" if not entry.get("collectives") else
                                                             "its collectives take no time (an axis of one chip)")))
    return out


def _notes(model: Model, strategy: dict[str, str]) -> dict[str, str]:
    """What the report says of a kind beside its axes, where it says anything (tp's Megatron
    sequence parallelism, or its absence)."""
    statements = model.structured.program.statements
    notes = {kind: megatron_note(kind, axes, statements, model.options.mode) for kind, axes in strategy.items()}
    return {kind: note for kind, note in notes.items() if note}


def kv_copies(model: Model) -> tuple[str, int] | None:
    """Where tensor parallelism is wider than the KV heads (strategies.py): the axes each KV
    head is copied over (its query groups G split over them) and how many copies, else None."""
    mesh = model.structured.program.mesh
    axes = next((d.axes for s in model.structured.program.statements for t in tensors_of(s) for d in t.dims
                 if d.name == "G" and d.axes), ())
    if mesh is None or not axes:
        return None
    return "".join(axes), math.prod(mesh.axis(a).number for a in axes)


def as_json(model: Model, value: Callable[[object], object]) -> dict:
    """A strategy's figures for the JSON report (`value` turns a sympy value into JSON)."""
    found = report(model)
    if not found:
        return {}
    acc = model.accumulation
    copied = kv_copies(model)
    return {"strategy": found["strategy"], "strategy_notes": _notes(model, found["strategy"]),
            **({"kv_heads_copied": {"axes": copied[0], "copies": copied[1]}} if copied else {}),
            "collectives": [{"pass": c.when, "kind": c.kind, "axes": c.axes,
                             "tensor": c.tensor, "bytes": value(c.bytes), "count": value(c.count),
                             "t": value(c.time), "overlaps": c.overlaps,
                             **({"every_microbatch": acc.every_microbatch(c)} if acc is not None else {})}
                            for c in found["collectives"]],
            **{k: value(found[k]) for k in ("t_network_overlapped", "t_network_exposed", "t_comm_exposed",
                                            "t_step_exposed", "memory_per_chip", "bubble_fraction") if k in found},
            "threshold": {kind: {k: _plain(v, value) for k, v in entry.items()}
                          for kind, entry in found["threshold"].items()}}


def _plain(v: object, value: Callable[[object], object]) -> object:
    """A threshold entry's value for JSON."""
    if isinstance(v, dict):
        return {k: _plain(x, value) for k, x in v.items()}
    return v if isinstance(v, (str, int)) or v is None else value(v)
