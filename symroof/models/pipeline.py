"""Pipeline parallelism (pp): the layers split into P stages along a mesh axis, the batch
into M microbatches that pass from stage to stage (issue 12).

Each stage is a program of its own, written from the template and sharded like any
other (dp, fsdp and tp inside it): the first stage holds the embedding and the first L/P
layers, the last the last L/P layers, the final norm and the output layer (a tied
output layer its own copy of the table); the stages between hold layers only, so these
two bound the others in time and memory. Each is costed for one microbatch (B/M
sequences), forward and backward, and the schedule puts the microbatches together:

* GPipe and 1F1B: a stage works M slots of a microbatch each and idles P - 1 (the fill
  and the drain): the step is (M + P - 1) slots and the bubble (P - 1)/(M + P - 1) of it.
  Interleaved (Megatron-LM) with v chunks a chip (v = 2 unless `interleaved:V`): a slot
  is a chunk's, 1/v of the stage's work, the step (v·M + P - 1) chunk slots, the bubble
  (P - 1)/(v·M + P - 1); M must be a multiple of P and L of P·v.
* The slot is the slowest stage's: max(T_math, T_comms, the overlappable collectives) +
  the collectives on activations (tp's), as `strategy_costs.times` has it for a step.
* Activations kept: GPipe keeps all M microbatches' until the backward; 1F1B the P - s
  in flight on stage s (P on the first, 1 on the last); interleaved, on the first stage,
  the warm-up's 2·(P - 1) + (v - 1)·P chunk microbatches + 1, each 1/v of a microbatch
  (Megatron-LM's schedule); at most M. Memory per chip is the larger of the two ends'.
* Between stages each microbatch's activations go forward and their gradients back: one
  send each way of the stage's input (bf16[B/M, T, D] on a chip, whole on each tp rank)
  over the pipeline axis, one hop at its one-way bandwidth (over two axes, the slower);
  interleaved, v times as many (each chunk's). They overlap the next microbatch's work,
  except in the fill and the drain: 2·(P - 1) sends are exposed.
* Data parallelism's gradient reductions happen once a step (the microbatches' gradients
  are accumulated first); the first stage finishes its backward last, so its reductions
  are exposed after the drain. Every other collective (tp's, FSDP's gathers and
  reduce-scatters: FSDP gathers again for every microbatch) runs once a microbatch.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

import sympy

from ..errors import SpecError
from ..hardware.machines import Machine
from ..ir import dim_symbol
from ..lang.source import Blank, Comment, Contraction, Declare, Item, Let, Program, Repeat
from ..lang.structure import Structured
from ..mesh import MeshAxis
from ..roofline.collectives import Link, link, rate_symbols
from ..roofline.sized import pick_max
from . import kinds
from .activations import block_input_bytes
from .decls import Options
from .strategy_costs import Collective, collectives, thresholds, tokens_per_chip
from .whole import Model

SCHEDULES = ("gpipe", "1f1b", "interleaved")
SEND = "Send"  # the kind of a pipeline's sends between stages, as its collectives list them
BUBBLE_TARGETS = (sympy.Rational(1, 10), sympy.Rational(1, 20))  # the bubbles `microbatches_for` is asked


@dataclass(frozen=True)
class Schedule:
    name: str        # gpipe, 1f1b or interleaved
    chunks: int = 1  # v: the layer chunks a chip holds (interleaved)

    def __str__(self) -> str:
        return f"interleaved:{self.chunks}" if self.name == "interleaved" else self.name


def parse_schedule(text: str | None) -> Schedule:
    """`gpipe`, `1f1b` (the default) or `interleaved` (2 chunks a chip; `interleaved:4`)."""
    name, _, chunks = (text or "1f1b").strip().lower().partition(":")
    if name not in SCHEDULES or (chunks and name != "interleaved"):
        raise SpecError(f"--schedule is gpipe, 1f1b or interleaved[:CHUNKS], not {text!r}")
    if name != "interleaved":
        return Schedule(name)
    if chunks and not (chunks.isdigit() and 2 <= int(chunks) <= 64):
        raise SpecError(f"interleaved:CHUNKS takes 2 to 64 layer chunks a chip, not {chunks!r}")
    return Schedule(name, int(chunks) if chunks else 2)


# a stage or microbatch count: a number, or a strategy family's formula (families.py)
Count: TypeAlias = int | sympy.Expr


def _count(n: Count) -> sympy.Expr:
    return sympy.Integer(n) if isinstance(n, int) else n


def bubble_fraction(stages: Count, microbatches: Count, schedule: Schedule) -> sympy.Expr:
    """The fraction of a step each chip idles: (P - 1)/(v·M + P - 1)."""
    return (_count(stages) - 1) / (schedule.chunks * _count(microbatches) + _count(stages) - 1)


def microbatches_default(stages: Count) -> Count:
    """The microbatches of a pipeline not told how many: 4 a stage."""
    return 4 * stages


def microbatches_for(stages: int, schedule: Schedule, bubble: sympy.Rational | float) -> int:
    """The fewest microbatches whose bubble is at most `bubble`: M >= (P - 1)(1 - f)/(f·v)."""
    return max(1, math.ceil((stages - 1) * (1 - bubble) / (bubble * schedule.chunks)))


def in_flight(stages: Count, microbatches: Count, schedule: Schedule, stage: Count) -> sympy.Expr:
    """The microbatches whose activations stage `stage` (0 the first) keeps at its peak."""
    m = _count(microbatches)
    if schedule.name == "gpipe":
        return m
    if schedule.name == "1f1b":
        return sympy.Min(m, _count(stages) - stage)
    v = schedule.chunks
    warmup = 2 * (_count(stages) - stage - 1) + (v - 1) * _count(stages) + 1  # chunk microbatches, 1/v of one each
    return sympy.Min(m, warmup / sympy.Integer(v))


def check(layers: int, stages: int, microbatches: int, replicas_batch: int | None, schedule: Schedule) -> None:
    """Stages the layers split into evenly, microbatches the batch splits into."""
    per = stages * schedule.chunks
    if stages > layers:
        raise SpecError(f"pp={stages}: more stages than the model's {layers} layers; at most pp={layers}")
    if layers % per:
        fits = [p for p in range(2, layers + 1) if layers % (p * schedule.chunks) == 0][:8]
        raise SpecError(f"pp={stages}" + (f" with {schedule.chunks} chunks a chip" if schedule.chunks > 1 else "")
                        + f" does not split {layers} layers evenly; pp of {', '.join(map(str, fits))} would")
    if schedule.name == "interleaved" and microbatches % stages:
        raise SpecError(f"the interleaved schedule needs microbatches a multiple of pp={stages}, not {microbatches}")
    if replicas_batch is not None and replicas_batch % microbatches:
        fits = [m for m in range(1, replicas_batch + 1) if replicas_batch % m == 0 and m >= stages][:6]
        also = f"; --microbatches {' or '.join(map(str, fits))} would" if fits else \
            f": give each replica a batch of at least {microbatches} sequences (--set B=...)"
        raise SpecError(f"{microbatches} microbatches do not split the {replicas_batch} sequence"
                        f"{'s' if replicas_batch > 1 else ''} each replica holds{also}")


def check_batch(layers: int, stages: int, microbatches: int, batch: int | None, replicas: int | None,
                schedule: Schedule) -> None:
    """`check`, the step's `batch` (None: a free B) first split over its data-parallel
    `replicas` (None: not a number yet, as on a strategy family's mesh)."""
    if batch is not None and replicas is not None and batch % replicas:
        raise SpecError(f"a batch of {batch} sequences does not split over {replicas} data-parallel "
                        "replicas: give a multiple of them")
    check(layers, stages, microbatches, None if batch is None or replicas is None else batch // replicas, schedule)


def stage_program(p: Program, stage: str, stages: Count) -> Program:
    """A template's (unsharded) program cut to its first or last pipeline stage (`stages`: a
    number, or a strategy family's product of its pp axes' sizes, `(J*P)`)."""
    head, block = next((k, item) for k, item in enumerate(p.items) if isinstance(item, Repeat))
    stages = stages if isinstance(stages, int) else f"({stages})"
    layers = replace(block, count=f"L/{stages}", comment=f"this stage's layers: L/{stages} of L")
    if stage == "first":
        title = Comment(f"the first of {stages} pipeline stages: the embedding and the first L/{stages} layers")
        return Program((p.items[0], title, *p.items[1:head], layers))
    title = Comment(f"the last of {stages} pipeline stages: the last L/{stages} layers, the final norm and the "
                    "output layer")
    setup = [item for item in p.items[1:head] if isinstance(item, (Let, Comment, Blank))]
    tail: list[Item] = []
    for item in p.items[head + 1:]:
        if isinstance(item, Contraction) and item.comment and item.comment.startswith("tied"):
            # the last stage holds its own copy of the tied table
            table = item.operands[1]
            tail.append(Declare("embedding", (replace(table, name="Emb"),),
                                "tied: the output layer's copy of the table"))
        tail.append(item)
    return Program((p.items[0], title, *setup, layers, *tail))


def send_link(axes: Sequence[MeshAxis], machine: Machine) -> Link:
    """The link a pipeline's sends between stages take over its axes: the slower one's of
    those with more than one chip (an axis of one chip carries no send: `J=1@dcn, P=4` sends
    over P's links, not the network)."""
    crossed = [a for a in axes if a.size != 1] or list(axes)
    return min((link(a, machine.chip, machine.ici_bw) for a in crossed), key=lambda k: k.one_way)


class Pipeline:
    """A pipeline's two end stages (Models of one microbatch) and its schedule."""

    def __init__(self, first: Model, last: Model, stages: Count, microbatches: Count, schedule: Schedule,
                 axes: str, summed: str):
        self.first, self.last = first, last
        self.stages, self.microbatches, self.schedule = stages, microbatches, schedule
        self.axes = axes
        # the axes gradients are summed over once a step: dp's, sp's, ep's and tp's (kinds.defers_gradients)
        self.summed = set(summed)
        B = dim_symbol("B")
        # a free B is the step's, but for a strategy family's stages (their microbatches a
        # formula), where it is a microbatch's, put in member by member (families.py)
        self._micro = {} if "B" in last.sizes or not isinstance(microbatches, int) else {B: B / microbatches}

    def micro(self, expr: sympy.Expr) -> sympy.Expr:
        """An expression of a stage's microbatch in the step's dims."""
        return expr.xreplace(self._micro) if self._micro else expr

    def describe(self, show: Callable[[sympy.Expr], str]) -> str:
        """The pipeline in a line: stages, microbatches, schedule, bubble."""
        return (f"{self.stages} stages over {self.axes} of L/{self.stages} layers each, {self.microbatches} "
                f"microbatches of B/{self.microbatches}, {self.schedule}: bubble {show(self.bubble_fraction)} "
                f"= (P - 1)/({'v·' if self.schedule.chunks > 1 else ''}M + P - 1); time from the slower end "
                "stage, memory from the fuller")

    # ---- time -----------------------------------------------------------------------------

    def _once(self, c: Collective) -> bool:
        """The gradients' reductions over the data-parallel and sequence axes: once a step,
        after the microbatches' gradients are accumulated, not once a microbatch."""
        return c.overlaps and c.backward and bool(set(c.axes)) and set(c.axes) <= self.summed

    def _once_weight(self, c: Collective) -> sympy.Expr:
        """`_once` as 1 or 0, to sum by. On a strategy family's mesh (families.py) a member's
        axes of one chip are not its own, so a collective over the summed axes and others
        runs once where each of those others has one chip: the product of their
        `MeshAxis.alone`, 1 or 0 member by member."""
        mesh = self.last.structured.program.mesh
        if mesh is None or not mesh.deferred or not (c.overlaps and c.backward and c.axes):
            return sympy.Integer(self._once(c))
        return sympy.Mul(*(mesh.axis(a).alone for a in sorted(set(c.axes) - self.summed)))

    def _slot(self, m: Model) -> dict[str, sympy.Expr]:
        rows = collectives(m)
        a = m.step_analysis
        work = pick_max(a.t_math, a.t_comms)
        once = [self._once_weight(c) for c in rows]
        hidden = sympy.Add(*((1 - w) * c.floored for c, w in zip(rows, once) if c.overlaps))
        exposed = sympy.Add(*(c.floored for c in rows if not c.overlaps))
        return {k: self.micro(v) for k, v in {
            "work": work, "hidden": hidden, "exposed": exposed,
            "lower": pick_max(work, hidden + exposed), "slot": pick_max(work, hidden) + exposed,
            "once": sympy.Add(*(w * c.floored for c, w in zip(rows, once)))}.items()}

    @functools.cached_property
    def _slots(self) -> tuple[dict, dict]:
        return self._slot(self.first), self._slot(self.last)

    @functools.cached_property
    def link(self) -> Link:
        """The pipeline axis's link (over two axes, the slower)."""
        mesh = self.last.structured.program.mesh
        assert mesh is not None  # a pipeline's stages are on a mesh
        chip = self.last.machine
        assert chip is not None  # a pipeline's sends are timed on a chip
        return send_link([mesh.axis(a) for a in self.axes], chip)

    @functools.cached_property
    def send_bytes(self) -> sympy.Expr:
        """One microbatch's activations into a stage, on a chip."""
        return self.micro(self.last.at(block_input_bytes(self.last.structured)))

    @functools.cached_property
    def t_send(self) -> sympy.Expr:
        mesh = self.last.structured.program.mesh
        if mesh is not None and mesh.deferred:
            # a strategy family's (families.py): its axes are the members' pp axes, and the
            # slower of those a member has (send_link) is worked out member by member
            return self.send_bytes * rate_symbols(SEND, self.axes)[0]
        return self.send_bytes / self.link.one_way

    @functools.cached_property
    def slots(self) -> sympy.Expr:
        """The step in slots of a microbatch's work on a stage: M + (P - 1)/v."""
        return self.microbatches + (_count(self.stages) - 1) / sympy.Integer(self.schedule.chunks)

    @functools.cached_property
    def bubble_fraction(self) -> sympy.Expr:
        return bubble_fraction(self.stages, self.microbatches, self.schedule)

    @functools.cached_property
    def times(self) -> dict[str, sympy.Expr]:
        """The step (t_step, t_step_exposed), its network time split and its bubble."""
        first, last = self._slots
        slot = pick_max(first["slot"], last["slot"])
        work = pick_max(first["work"], last["work"])
        fill = 2 * (self.stages - 1) * self.t_send
        t_step = self.slots * slot + fill + first["once"]
        m = self.microbatches
        return {"t_step": self.slots * pick_max(first["lower"], last["lower"]),
                "t_network_overlapped": m * last["hidden"] + last["once"] + 2 * self.schedule.chunks * m * self.t_send
                - fill,
                "t_network_exposed": m * last["exposed"] + fill + first["once"],
                "t_comm_exposed": t_step - self.slots * work, "t_step_exposed": t_step,
                "bubble_fraction": self.bubble_fraction}

    def collectives(self) -> list[Collective]:
        """The last stage's collectives a step (M times a microbatch's, data parallelism's
        reductions once) and the sends between stages."""
        out = [c if self._once(c) else Collective(c.backward, c.kind, c.axes, c.tensor, self.micro(c.bytes),
                                                   self.microbatches * c.count, self.microbatches * self.micro(c.time),
                                                   c.overlaps, self.microbatches * self.micro(c.latency),
                                                   c.recomputed)
               for c in collectives(self.last)]
        count = self.schedule.chunks * _count(self.microbatches)  # interleaved: each chunk's boundary
        for backward in (False, True):
            out.append(Collective(backward, SEND, self.axes, "the stage's input", self.send_bytes, count,
                                  count * self.t_send, True))
        return out

    # ---- memory ---------------------------------------------------------------------------

    def memory(self, stage: int) -> dict[str, sympy.Expr]:
        m = self.first if stage == 0 else self.last
        kept = in_flight(self.stages, self.microbatches, self.schedule, stage if stage == 0 else self.stages - 1)
        return {"weight_bytes": m.weight_bytes, "grad_bytes": m.grad_bytes, "optimizer_bytes": m.optimizer_bytes,
                "activation_bytes": self.micro(m.activation_bytes) * kept}

    @functools.cached_property
    def fullest(self) -> dict[str, sympy.Expr]:
        """The memory of the stage that holds the most (the first, where it cannot be told)."""
        first, last = self.memory(0), self.memory(1)
        larger = sympy.Add(*last.values()) - sympy.Add(*first.values())
        return last if larger.is_number and larger > 0 else first

    # ---- thresholds -----------------------------------------------------------------------

    def thresholds(self, strategy: dict[str, str]) -> dict[str, dict]:
        """Each kind's threshold inside a stage (tokens per chip: a step's for dp, whose
        reductions come once a step; a microbatch's for fsdp), and the pipeline's own."""
        stages = kinds.stages().name
        inner = {k: v for k, v in strategy.items() if k != stages}
        out = thresholds(self.last, inner)
        out.pop("step", None)  # the whole step's is the schedule's, bubble and all: not a stage's
        for kind, entry in out.items():
            entry.pop("max_chips", None)
            for key in ("t_network", "ratio", "per_chip_tokens"):
                if entry.get(key) is not None:
                    entry[key] = self.micro(entry[key])
            declared = kinds.kind(kind)
            if declared.data and entry["ratio"] is not None:  # M microbatches' work against one reduction
                entry["ratio"] = self.microbatches * entry["ratio"]
            if declared.splits_params:  # gathered again each microbatch: a microbatch's tokens count
                entry["now"] = self.micro(tokens_per_chip(self.last))
        m = self.last
        work = self.micro(m.step_analysis.t_math)
        out[stages] = {"axes": self.axes, "t_network": self.t_send, "collectives": 2,
                       "ratio": work / self.t_send, "bubble_fraction": self.bubble_fraction,
                       "microbatches_for_bubble": {f"{float(f):g}": microbatches_for(self.stages, self.schedule, f)
                                                   for f in BUBBLE_TARGETS}}
        return out


class PipelinedModel(Model):
    """A model whose layers a pipeline splits: its parameters, FLOPs and tokens are the
    whole program's (`structured`), its memory per chip the fuller end stage's and its
    step time the schedule's (`pipeline`)."""

    pipeline: Pipeline

    def __init__(self, structured: Structured, machine: Machine | None, sizes: dict[str, int], options: Options,
                 pipeline: Pipeline, about: Mapping[str, Any] | None = None,
                 origin: Callable[[dict[str, int]], Model] | None = None):
        super().__init__(structured, machine, sizes, options, about, origin)
        self.pipeline = pipeline

    @functools.cached_property
    def weight_bytes(self) -> sympy.Expr:
        return self.pipeline.fullest["weight_bytes"]

    @functools.cached_property
    def grad_bytes(self) -> sympy.Expr:
        return self.pipeline.fullest["grad_bytes"]

    @functools.cached_property
    def optimizer_bytes(self) -> sympy.Expr:
        return self.pipeline.fullest["optimizer_bytes"]

    @functools.cached_property
    def activation_bytes(self) -> sympy.Expr:
        return self.pipeline.fullest["activation_bytes"]

    @functools.cached_property
    def t_step(self) -> sympy.Expr:
        if self.options.mfu is not None:
            raise SpecError("--mfu times a step from its FLOPs; a pipeline's step is its schedule's: drop --mfu")
        return self.pipeline.times["t_step"]

    def time_split(self) -> dict[str, sympy.Expr]:
        """The last stage's parts over the step's M microbatches, and the bubble."""
        p = self.pipeline
        each = {part: p.micro(t) for part, t in p.last.time_split().items()}  # one microbatch's
        split = {part: p.microbatches * t for part, t in each.items()}
        split["bubble"] = (p.slots - p.microbatches) * sympy.Add(*each.values())  # (P - 1)/v idle slots
        return split

    def max_batch(self) -> None:
        return None  # a pipeline's memory is its microbatches': --microbatches sets it

    def per_block(self) -> dict[str, sympy.Expr]:
        return {}  # the whole program's block is on the pipeline's mesh minus its axis: not per chip
