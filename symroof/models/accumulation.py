"""Gradient accumulation: a training step's batch run as M microbatches, one after another
on the same chips, their gradients summed before the one optimizer update (issue 28).

The step is built from the model of one microbatch (B/M sequences), as a pipeline's is from
its stages' models (pipeline.py):

* FLOPs: M microbatches of B/M are the step's, model and hardware FLOPs alike (they grow
  linearly in B): the whole model's, unchanged.
* HBM traffic: each microbatch reads the weights again, so T_comms is M times a
  microbatch's: the activations' bytes the step's, the weights' M times.
* Memory per chip: the weights, gradients and optimizer state as without accumulation, and
  the activations of one microbatch. The gradients are accumulated in place, in the
  gradients' own buffer and dtype: no second buffer (PyTorch DDP under `no_sync` and
  DeepSpeed add into it; Megatron's fp32 `main_grad`, under
  `accumulate_allreduce_grads_in_fp32`, is its gradient buffer, the weight-gradient matmul
  adding into it: a stack that keeps one counts fp32 gradients).
* Collectives:
  - the gradients' reductions over axes on which every chip holds the whole gradient (dp,
    zero1, the sums over sp's and ep's axes) run once a step, after the last microbatch
    (DDP's `no_sync`, Megatron, DeepSpeed's ZeRO-1);
  - where the gradients are kept split over the axis they are reduced over, the reduction
    runs every microbatch, as PyTorch FSDP and DeepSpeed's ZeRO-2 and ZeRO-3 run it by
    default: FSDP's ReduceScatter, and ZeRO-2's, whose AllReduce-equivalent becomes a
    ReduceScatter each microbatch and one AllGather of the updated parameters (each half
    the AllReduce's time). Reducing them once instead needs the whole unreduced gradient
    held on each chip until then (FSDP's `no_sync`): not what is counted here;
  - FSDP's parameter gathers run every microbatch, forward and backward (a stack keeping
    the gathered weights across microbatches would save them, holding the whole weights);
  - the collectives on activations (tp's AllReduces, sp's keys, ep's AllToAlls) move each
    microbatch's share: the same total.
* Time: `t_step`, the roofline's bound with every collective overlapped, is
  max(M·T_math, M·T_comms, M·T_network(microbatch) + the once-a-step reductions).
  `t_step_exposed`: each microbatch takes max(its work, its overlappable collectives) +
  its collectives on activations, and the once-a-step reductions overlap the last
  microbatch's work only (as a step without accumulation overlaps them with its work):
  what of them cannot hide behind it is exposed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import sympy

from ..errors import SpecError
from ..hardware.machines import Machine
from ..ir import dim_symbol
from ..lang.structure import Structured
from ..roofline.sized import pick_max
from . import kinds
from .decls import Options
from .strategy_costs import Collective, collectives, thresholds, tokens_per_chip
from .whole import Model

ONCE, EACH, SPLIT = "once", "each", "split"  # a collective's place in the step (`Accumulation.role`)


def check(microbatches: object, mode: str) -> int:
    """The microbatch count, where it may be given: a whole number, in training."""
    if isinstance(microbatches, bool) or not isinstance(microbatches, int) or not 1 <= microbatches <= 65536:
        raise SpecError(f"--microbatches takes a whole number from 1 to 65536, not {microbatches!r}")
    if mode != "train":
        raise SpecError(f"--microbatches splits a training step's batch to accumulate its gradients; --{mode} "
                        "has no gradients: give a smaller batch instead (--set B=...)")
    return microbatches


def allowed(sequences: int) -> list[int]:
    """The microbatch counts that split `sequences` evenly."""
    return [m for m in range(1, sequences + 1) if sequences % m == 0]


def replicas(structured: Structured, strategy: Mapping[str, str]) -> sympy.Expr:
    """The chips a step's sequences are split over (the data-parallel, FSDP and expert axes):
    a number, or a strategy family's formula in its deferred axes."""
    mesh = structured.program.mesh
    if mesh is None:
        return sympy.Integer(1)
    return mesh.over("".join(strategy[kind.name] for kind in kinds.where(lambda k: k.splits_batch, strategy)))


def _axes(strategy: Mapping[str, str], test: Callable[[kinds.Kind], bool]) -> set[str]:
    return {a for k in kinds.where(test, strategy) for a in strategy[k.name]}


class Accumulation:
    """A step of `microbatches` microbatches, each the model `micro` (B/M sequences)."""

    def __init__(self, micro: Model, microbatches: int, strategy: Mapping[str, str]):
        self.model, self.microbatches = micro, microbatches
        # the axes over which each chip holds the whole gradient (reduced once a step), and those
        # over which it keeps its share of them (ZeRO-2: reduce-scattered each microbatch)
        self.once = _axes(strategy, lambda k: k.defers_gradients and k.zero < 2)
        self.split = _axes(strategy, lambda k: k.zero >= 2)
        B = dim_symbol("B")
        self._micro = {} if "B" in micro.sizes else {B: B / microbatches}  # a free B is the step's

    def micro(self, expr: sympy.Expr) -> sympy.Expr:
        """An expression of a microbatch in the step's dims."""
        return expr.xreplace(self._micro) if self._micro else expr

    def role(self, c: Collective) -> str:
        """ONCE a step, EACH microbatch, or SPLIT (ZeRO-2's AllReduce: a ReduceScatter each
        microbatch, an AllGather of the updated parameters once)."""
        axes = set(c.axes)
        if not (c.overlaps and c.backward and axes):
            return EACH
        if axes <= self.once:
            return ONCE
        if c.kind == "AllReduce" and axes & self.split and axes <= self.once | self.split:
            return SPLIT
        return EACH

    @functools.cached_property
    def _rows(self) -> list[tuple[Collective, bool]]:
        """The step's collectives, each with whether it runs every microbatch."""
        m = self.microbatches
        out: list[tuple[Collective, bool]] = []
        for c in collectives(self.model):
            role = self.role(c)
            each = Collective(c.backward, c.kind, c.axes, c.tensor, self.micro(c.bytes), m * c.count,
                              m * self.micro(c.time), c.overlaps, m * self.micro(c.latency), c.recomputed)
            if role == ONCE:
                out.append((c, False))
            elif role == EACH:
                out.append((each, True))
            else:
                half = sympy.Rational(1, 2)
                out.append((Collective(True, "ReduceScatter", c.axes, c.tensor, c.bytes, m * c.count,
                                       m * half * c.time, True, m * half * c.latency), True))
                out.append((Collective(True, "AllGather", c.axes, c.tensor, c.bytes, c.count, half * c.time,
                                       True, half * c.latency), False))
        return out

    def collectives(self) -> list[Collective]:
        """The step's collectives: those of each microbatch M times, the reductions once."""
        return [c for c, _ in self._rows]

    def every_microbatch(self, c: Collective) -> bool:
        """Whether a collective of `collectives()` runs every microbatch (else once a step)."""
        return next(each for row, each in self._rows if row is c)

    @functools.cached_property
    def times(self) -> dict[str, sympy.Expr]:
        """The step's roofline bound, its network time split and its exposed step time (see
        the module docstring)."""
        a, m = self.model.step_analysis, self.microbatches
        chips = self.model.options.chips  # off a mesh, the chips' even split; 1 on a mesh
        t_math, t_comms = (self.micro(t) / chips for t in (a.t_math, a.t_comms))
        work = pick_max(t_math, t_comms)
        rows = self._rows
        hidden = sympy.Add(*(c.floored for c, each in rows if each and c.overlaps)) / m
        exposed = sympy.Add(*(c.floored for c, each in rows if each and not c.overlaps)) / m
        once = sympy.Add(*(c.floored for c, each in rows if not each))
        t_step = (m - 1) * (pick_max(work, hidden) + exposed) + pick_max(work, hidden + once) + exposed
        lower = [m * t_math, m * t_comms] + ([m * (hidden + exposed) + once] if rows else [])
        return {"t_step": sympy.Max(*lower, evaluate=all(t.is_number for t in lower)),
                "t_network_overlapped": m * hidden + once,
                "t_network_exposed": m * exposed, "t_comm_exposed": t_step - m * work, "t_step_exposed": t_step}

    def describe(self) -> str:
        """The accumulation in a line: microbatches, what each holds, what runs how often."""
        m = self.microbatches
        return (f"{m} microbatch{'es' if m > 1 else ''} of B/{m}, gradients accumulated in place (their own "
                "buffer and dtype, no second one): activations one microbatch's, weights read and FSDP's gathers "
                "run every microbatch (a stack keeping the gathered weights would not gather again), FSDP's "
                "and ZeRO-2's gradient reduce-scatters too (the gradients kept split); the whole gradients' "
                "reductions (dp, zero1, sp, ep) once a step, overlapping only the last microbatch")

    def to_dict(self, value: Callable[[object], object]) -> dict[str, object]:
        """The accumulation for the JSON report (`value` turns a sympy value into JSON)."""
        B = dim_symbol("B")
        return {"microbatches": self.microbatches, "microbatch_B": value(self.micro(self.model.at(B))),
                "activation_bytes_per_microbatch": value(self.micro(self.model.activation_bytes)),
                "convention": self.describe()}

    def note(self, c: Collective) -> str:
        """How often a collective of `collectives()` runs, for the report."""
        if c.kind == "AllGather" and not self.every_microbatch(c) and set(c.axes) & self.split:
            return "once a step: the updated parameters (ZeRO-2)"
        return "every microbatch" if self.every_microbatch(c) else "once a step, after the last microbatch"

    def thresholds(self, strategy: dict[str, str]) -> dict[str, dict]:
        """Each kind's threshold: a microbatch's (its tokens per chip against its own
        collectives) where the kind's collectives on parameters and gradients all run every
        microbatch, the step's where they run once (the reductions against M microbatches'
        work); none where they mix (ZeRO-2's). The ratios are the step's."""
        out = thresholds(self.model, strategy)
        m, rows = self.microbatches, self._rows
        work = m * self.micro(self.model.step_analysis.t_math)
        mixed = any(not each for _, each in rows)
        if mixed:
            out.pop("step", None)
        else:
            if "step" in out:
                out["step"]["now"] = self.micro(tokens_per_chip(self.model))
                out["step"]["tokens_of"] = "a microbatch"
        for kind, entry in out.items():
            if kind == "step":
                entry["ratio"] = self.micro(entry["ratio"]) if entry.get("ratio") is not None else None
                entry["t_network"] = m * self.micro(entry["t_network"])
                continue
            names = set(strategy[kind])
            mine = [(c, each) for c, each in rows if set(c.axes) & names]
            t_net = sympy.Add(*(c.time for c, _ in mine))
            entry["t_network"], entry["collectives"] = t_net, len(mine)
            entry["ratio"] = work / t_net if mine and t_net != 0 else None
            if entry.get("exchange_ratio") is not None:
                entry["exchange_ratio"] = self.micro(entry["exchange_ratio"])
            weighed = {each for c, each in mine if c.overlaps}
            if weighed == {True}:  # a microbatch's tokens against its own gathers and reductions
                entry["now"] = self.micro(tokens_per_chip(self.model))
                entry["tokens_of"] = "a microbatch"  # said beside the figures: a chip's step holds M of them
                if mixed:
                    entry.pop("max_chips", None)
            elif weighed == {True, False}:
                entry["per_chip_tokens"] = None  # no single batch: some every microbatch, some once
                entry.pop("max_chips", None)
            else:
                entry.pop("max_chips", None)  # the step's tokens against one reduction: `now` is the step's
            for key in ("per_chip_tokens", "context_per_chip", "max_chips"):
                if entry.get(key) is not None:
                    entry[key] = self.micro(entry[key])
        return out


class AccumulatedModel(Model):
    """A training step run as microbatches: its parameters, FLOPs and tokens are the whole
    batch's (this model's), its activations and step time its microbatches' (`accumulation`)."""

    accumulation: Accumulation

    def __init__(self, structured: Structured, machine: Machine | None, sizes: dict[str, int], options: Options,
                 microbatches: int, about: Mapping[str, Any] | None = None,
                 origin: Callable[[dict[str, int]], Model] | None = None):
        if options.mode != "train":
            check(microbatches, options.mode)
        strategy = dict(options.strategy)
        split = replicas(structured, strategy)
        if "B" in sizes and split.is_Integer and sizes["B"] % split == 0 and (sizes["B"] // split) % microbatches:
            sequences = sizes["B"] // split  # (a batch the replicas do not split: Model's check says so)
            fits = allowed(sequences)
            raise SpecError(f"{microbatches} microbatches do not split the {sequences} sequence"
                            f"{'s' if sequences > 1 else ''} each replica holds: --microbatches is one of "
                            f"{', '.join(map(str, fits[:12]))}{', ...' if len(fits) > 12 else ''}")
        micro = {**sizes, "B": sizes["B"] // microbatches} if "B" in sizes else dict(sizes)
        super().__init__(structured, machine, sizes, options, about, origin)
        self.accumulation = Accumulation(Model(structured, machine, micro, options), microbatches, strategy)

    @functools.cached_property
    def activation_bytes(self) -> sympy.Expr:
        """One microbatch's: the step holds one at a time."""
        return self.accumulation.micro(self.accumulation.model.activation_bytes)

    @functools.cached_property
    def t_step(self) -> sympy.Expr:
        if self.options.mfu is not None:  # from the model FLOPs, which accumulation does not change
            return super().t_step
        self._chip()
        self._check_mesh()
        self.accumulation.model._check_split()  # a microbatch's tokens split over the chips
        return self.accumulation.times["t_step"]

    def time_split(self) -> dict[str, sympy.Expr]:
        """A microbatch's parts, M times (each statement at its own roofline, as a
        pipeline's split: a once-a-step reduction counted in each microbatch's statements)."""
        acc = self.accumulation
        return {part: acc.microbatches * acc.micro(t) for part, t in acc.model.time_split().items()}

    def max_batch(self) -> sympy.Expr | None:
        """M times the largest microbatch whose memory fits."""
        largest = self.accumulation.model.max_batch()
        return None if largest is None else self.accumulation.microbatches * largest
