"""A model: a program with structure (structure.py) analysed as a whole, for training,
prefill or decode.

The program is costed once: each statement's counts are multiplied by how many times it
runs (its `repeat` blocks' counts, symbolic: L, not L copies), relations substituted
(`let F = 4*D`), then handed to the roofline as one analysis. On top of it come what
models are asked about, each declared once in `decls.MODEL_QUANTITIES`: parameters, FLOPs per
token, training FLOPs (forward + backward, the backward twice the forward), the bytes of
weights, gradients, optimizer state, activations and KV cache, the chips they need, and
the time of a step.

Conventions (stated in docs/models.md and in every report):
* a training step's model FLOPs (`flops_train`, what an MFU counts) are 3x the forward
  FLOPs (backward = 2x forward, the backward with the forward's intensity), unless the
  program carries its backward pass written out (a `backward { ... }` section, as the
  templates write under a parallelism strategy): then forward and backward are costed
  together, collectives and all (`model_analysis`). Its hardware FLOPs
  (`flops_train_hardware`, an HFU's) add what the remat policy recomputes
  (`activations.recomputed`), and the step's time is theirs (`step_analysis`);
* Adam keeps 12 bytes per parameter (fp32 master copy and two fp32 moments) unless
  told otherwise (`Options.optimizer`, `master`: `decls.state_bytes`); gradients are in
  the parameters' dtype unless `Options.grads` says fp32 or bf16;
* activations kept for the backward pass: with remat "full" (the default), each
  repeated block keeps its input (the first tensor its first statement reads); with
  "none", every statement keeps its output (a fused block's intermediates are
  recomputed, as flash attention does);
* on N chips (`chips`), memory and time split evenly (an ideal split, no collectives; a
  program with a mesh costs its collectives instead), and a chip's usable HBM is
  `headroom` (0.9 by default, --hbm-usable) of its capacity.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import sympy

from ..analysis import Analysis
from ..errors import SpecError
from ..hardware.machines import Machine
from ..ir import Program, dim_symbol
from ..lang.relations import check_sizes
from ..lang.structure import Block, Declared, Structured
from ..roofline.cost import Cost, combine, repeated, statement_costs
from ..roofline.sized import ratio
from ..roofline.solve import Region, cleared, positive_region
from . import kinds
from .activations import activation_bytes, recomputed
from .checks import both, check_names, check_shards
from .decls import MODEL_QUANTITIES, OPTIMIZERS, Options, budget, factored_elements, state_bytes, usable_hbm


class Model:
    """A structured program's model quantities (see the module docstring). Args:
        structured: the program (`structure.read_structured`).
        machine: a `machine.Machine`, or None for counts and bytes only.
        sizes: sizes for the dims ({"B": 1, "T": 4096}); relations give the rest.
        options: mode, chips, optimizer, remat, MFU, headroom.
        about: what its report calls it and how it was asked for (name, strategy, mode,
            sizes, chip: `report.model` fills it), printed at the head of `to_dict()`.
        origin: how to make the same model at other sizes (`report.assemble`'s partial): the
            report's formulas (`formulas`) are its model with B, T and S left symbols.
    """

    pipeline: Any = None  # a pipeline.Pipeline where the layers are split into stages (pipeline.PipelinedModel)
    accumulation: Any = None  # an accumulation.Accumulation where the batch runs as microbatches

    def __init__(self, structured: Structured, machine: Machine | None = None, sizes: dict[str, int] | None = None,
                 options: Options | None = None, about: Mapping[str, Any] | None = None,
                 origin: Callable[[dict[str, int]], Model] | None = None):
        self.structured = structured
        self.machine = machine
        self.options = options or Options()
        self.sizes = dict(sizes or {})
        self.about = dict(about or {})
        self._origin = origin
        check_names(structured, self.sizes)
        check_sizes(structured.relations, self.sizes)
        self._subs = _substitutions(structured, self.sizes)
        check_shards(structured, self.at)

    def at(self, expr: sympy.Expr) -> sympy.Expr:
        """An expression in the program's dims, relations and sizes substituted."""
        return (sympy.Integer(expr) if isinstance(expr, int) else expr).xreplace(self._subs)

    # ---- the program, costed once ---------------------------------------------------

    @functools.cached_property
    def analysis(self) -> Analysis:
        """The forward step as one roofline analysis, at the sizes given."""
        return self._analysis(self._subs)

    def _analysis(self, subs: dict) -> Analysis:
        program = self.structured.program
        return Analysis(combine(_scaled(self.structured, subs), program.mesh), self.machine, program=program,
                        settled=_names(subs))  # the sizes and lets: no longer the analysis's dims

    @functools.cached_property
    def model_analysis(self) -> Analysis:
        """The step whose FLOPs are the model's (what an MFU counts): in training with a
        written backward section, forward and backward together (their collectives
        overlapping the work of the whole step); otherwise the forward's (a training step's
        backward then counted as twice it: `backward_factor`). Nothing recomputed."""
        back = self.structured.backward
        if self.options.mode != "train" or back is None:
            return self.analysis
        check_names(back, self.sizes)
        subs = _substitutions(back, self.sizes)
        check_shards(back, lambda e: e.xreplace(subs))
        both_ = _scaled(self.structured, self._subs) + _scaled(back, subs)
        forward = self.structured.program
        program = Program(forward.statements + back.program.statements, (), forward.mesh)
        return Analysis(combine(both_, forward.mesh), self.machine, program=program,
                        settled=_names(self._subs) | _names(subs))

    @functools.cached_property
    def recomputed(self) -> list[tuple[int, Cost]]:
        """What a training step's backward pass computes again under the remat policy
        (activations.recomputed): each forward statement's index and the cost of what is
        run again of it, as often as the statement runs. Empty outside training."""
        if self.options.mode != "train":
            return []
        counts = self.structured.counts
        memo: dict[tuple[sympy.Expr, sympy.Expr], sympy.Expr] = {}  # shared: the statements' formulas recur
        return [(i, repeated(c, counts[i], self._subs, memo)) for i, c in recomputed(self.structured, self.options)]

    @functools.cached_property
    def step_analysis(self) -> Analysis:
        """The whole step as the chips run it, as one roofline analysis: in training the
        model's step (`model_analysis`, its forward three times over where no backward is
        written) and what the remat policy recomputes; otherwise the forward's. Its FLOPs
        are the hardware FLOPs; its time is the step's."""
        base = self.model_analysis
        if self.options.mode != "train":
            return base
        factor = self.backward_factor
        costs = [c if factor == 1 else repeated(c, factor, {}) for c in base.cost.statements]
        costs += [c for _, c in self.recomputed]
        forward = self.structured.program
        assert base.program is not None  # a model's analyses carry their program
        program = Program(base.program.statements + tuple(forward.statements[i] for i, _ in self.recomputed),
                          base.program.values, forward.mesh)
        return Analysis(combine(costs, forward.mesh), self.machine, program=program, settled=base.settled)

    @property
    def written_backward(self) -> bool:
        """Whether a training step is costed from its written backward section (else 3x)."""
        return self.options.mode == "train" and self.structured.backward is not None

    @property
    def backward_factor(self) -> int:
        """How many times `model_analysis` a step's model FLOPs are: 3 in training by the
        convention (no written backward: the backward twice the forward), else 1."""
        return 3 if self.options.mode == "train" and not self.written_backward else 1

    # ---- parameters and counts --------------------------------------------------------

    def _declared(self, *words: str) -> sympy.Expr:
        return self.at(sympy.Add(*(d.count * d.elements for d in self.structured.declared if d.word in words)))

    @functools.cached_property
    def params(self) -> sympy.Expr:
        return self._declared("param", "embedding")

    @functools.cached_property
    def params_embedding(self) -> sympy.Expr:
        return self._declared("embedding")

    @functools.cached_property
    def params_per_block(self) -> sympy.Expr:
        """The parameters of one pass through the first outermost repeated block (its
        nested blocks' included)."""
        blocks = self.structured.blocks
        outer = next((k for k, b in enumerate(blocks) if b.parent is None), None)
        if outer is None:
            return sympy.Integer(0)
        inside = [d for d in self.structured.declared if d.word == "param" and _within(blocks, d.block, outer)]
        return self.at(sympy.Add(*(d.elements * d.count for d in inside)) / blocks[outer].count)

    @functools.cached_property
    def tokens(self) -> sympy.Expr:
        symbol = dim_symbol("tokens")
        if symbol not in self.structured.relations:
            raise SpecError("the program does not say how many tokens a step processes: add "
                            "'let tokens = B*T' (or B for decode)")
        return self.at(symbol)

    @functools.cached_property
    def flops(self) -> sympy.Expr:
        """The whole step's FLOPs (on a mesh: over all chips, each counted once)."""
        return _all_chips(self.analysis)

    @functools.cached_property
    def flops_per_token(self) -> sympy.Expr:
        return ratio(self.flops, self.tokens)

    @functools.cached_property
    def flops_train(self) -> sympy.Expr:
        """The model FLOPs of a training step: forward and backward, nothing recomputed."""
        return self.backward_factor * _all_chips(self.model_analysis)

    @functools.cached_property
    def flops_train_per_token(self) -> sympy.Expr:
        return ratio(self.flops_train, self.tokens)

    @functools.cached_property
    def flops_train_hardware(self) -> sympy.Expr:
        """The hardware FLOPs of a training step: the model FLOPs and what is recomputed."""
        return _all_chips(self.step_analysis)

    @functools.cached_property
    def flops_train_hardware_per_token(self) -> sympy.Expr:
        return ratio(self.flops_train_hardware, self.tokens)

    # ---- memory -------------------------------------------------------------------------

    # On a mesh (a `mesh` line), bytes are per chip, as every count on a mesh is: each
    # declared tensor's shard (bf16[D_X, F] on X=8: an eighth), a replica where unsplit.

    @functools.cached_property
    def weight_bytes(self) -> sympy.Expr:
        return self.at(sympy.Add(*(d.count * d.local_bytes for d in self.structured.declared
                                   if d.word in ("param", "embedding"))))

    def _params_declared(self) -> list:
        return [d for d in self.structured.declared if d.word in ("param", "embedding")]

    @functools.cached_property
    def grad_bytes(self) -> sympy.Expr:
        """Each parameter's gradient (its own dtype, or --grads), a chip's share of it; ZeRO-2
        splits them over its axes."""
        here = sympy.Add(*(d.count * d.elements / d.split * state_bytes(self.options, d.dtype.bytes).grads
                           for d in self._params_declared()))
        return self.at(here) / self._zero_split(2)

    @functools.cached_property
    def optimizer_bytes(self) -> sympy.Expr:
        """The optimizer state of the parameters a chip updates: the fp32 master copy (of those
        narrower than fp32) and the moments (`decls.state_bytes`; Adafactor's factored moment
        from each tensor's dims, split with it); ZeRO-1 and up split it over their axes."""
        factored = OPTIMIZERS[self.options.optimizer].factored
        here = sympy.Add(*(d.count * (d.elements * state_bytes(self.options, d.dtype.bytes).optimizer_state
                                      + (4 * factored_elements(tuple(self.at(x) for x in d.dims))
                                         if factored else 0)) / d.split
                           for d in self._params_declared()))
        return self.at(here) / self._zero_split(1)

    def _zero_split(self, stage: int) -> sympy.Expr:
        """The chips the axes of the ZeRO stages from `stage` up span (1 without them): each
        keeps its share of the optimizer state (stage 1 up) and of the gradients (stage 2)."""
        mesh = self.structured.program.mesh
        named = {k.name for k in kinds.where(lambda k: k.zero >= stage > 0)}
        axes = "".join(a for kind, a in self.options.strategy if kind in named)
        return mesh.over(axes) if axes and mesh is not None else sympy.Integer(1)

    @functools.cached_property
    def activation_bytes(self) -> sympy.Expr:
        return self.at(activation_bytes(self.structured, self.options))

    @functools.cached_property
    def kv_bytes(self) -> sympy.Expr:
        return self.at(sympy.Add(*(d.count * d.local_bytes for d in self.structured.declared if d.word == "cache")))

    @functools.cached_property
    def kv_bytes_per_token(self) -> sympy.Expr:
        caches = [d for d in self.structured.declared if d.word == "cache"]
        if not caches:
            return sympy.Integer(0)
        B, S = dim_symbol("B"), dim_symbol("S")
        # a sliding window's cache holds Sl = min(S, W) tokens (windows.py): its bytes per
        # token of context are its bytes over S, at the S given
        relations = self.structured.relations
        dims = {S} | relations.get(S, S).free_symbols  # S, or what it is (T in training and prefill)

        def context(d: Declared) -> bool:
            return any(relations.get(x, x).free_symbols & dims for x in d.dims)

        if any(B not in d.dims or not context(d) for d in caches):
            raise SpecError("a KV cache's bytes per token need its batch and context dims named B and S")
        return sympy.expand(self.at(sympy.Add(*(d.count * d.bytes / (B * S) for d in caches))))

    @functools.cached_property
    def memory_bytes(self) -> sympy.Expr:
        if self.options.mode == "train":
            return self.weight_bytes + self.grad_bytes + self.optimizer_bytes + self.activation_bytes
        return self.weight_bytes + self.kv_bytes

    def _check_mesh(self) -> None:
        if self.structured.program.mesh is not None and self.options.chips != 1:
            raise SpecError(f"the program's mesh ({self.structured.program.mesh.chips} chips) already splits "
                            "the work: drop --chips")

    def _check_split(self) -> None:
        """Training and prefill split the batch's tokens over the chips; decode may run one
        sequence on many (its weights split), so it needs no such division."""
        chips = self.options.chips
        if chips > 1 and self.options.mode != "decode" and dim_symbol("tokens") in self.structured.relations:
            tokens = self.tokens
            if tokens.is_Integer and tokens % chips:
                raise SpecError(f"the step's {tokens} tokens do not split evenly over {chips} chips: "
                                "give a batch (B, or B*T) that is a multiple of the chips")

    @functools.cached_property
    def hbm_per_chip(self) -> sympy.Expr:
        self._check_mesh()
        self._check_split()
        return self.memory_bytes / self.options.chips

    def usable(self) -> sympy.Expr:
        """The HBM a chip may fill: its capacity times the usable fraction (`--hbm-usable`)."""
        return usable_hbm(self._chip(), self.options)

    def _chip(self) -> Machine:
        if self.machine is None:
            raise SpecError("memory per chip, the chips a model needs and its step time need a chip (--chip)")
        return self.machine

    @functools.cached_property
    def hbm_left_per_chip(self) -> sympy.Expr:
        return self.usable() - self.hbm_per_chip

    @functools.cached_property
    def min_chips(self) -> sympy.Expr:
        need = self.memory_bytes / self.usable()
        return sympy.ceiling(need) if need.is_number else need

    # ---- time -----------------------------------------------------------------------------

    @functools.cached_property
    def t_step(self) -> sympy.Expr:
        self._chip()
        self._check_mesh()
        self._check_split()
        if self.options.mfu is not None:  # the model FLOPs over every chip's share of the peak, at the MFU
            return self._model_flops / (self._chips_in_all * self.matrix_peak * self.options.mfu_exact)
        return self.step_analysis.t_lower / self.options.chips  # on a mesh, per chip already

    @property
    def _chips_in_all(self) -> sympy.Expr:
        mesh = self.structured.program.mesh
        return mesh.chips if mesh is not None else sympy.Integer(self.options.chips)

    @property
    def _model_flops(self) -> sympy.Expr:
        return self.flops_train if self.options.mode == "train" else self.flops

    @functools.cached_property
    def mfu(self) -> sympy.Expr:
        """Model FLOPs utilisation at t_step: the model FLOPs over t_step times every
        chip's matrix peak (the most a step can reach, t_step being a lower bound)."""
        return self._model_flops / (self.t_step * self._chips_in_all * self.matrix_peak)

    @functools.cached_property
    def hfu(self) -> sympy.Expr:
        """Hardware FLOPs utilisation at t_step: as `mfu`, with what is recomputed counted."""
        return self.flops_train_hardware / (self.t_step * self._chips_in_all * self.matrix_peak)

    @functools.cached_property
    def matrix_peak(self) -> sympy.Expr:
        """The matrix unit's peak for the dtype doing most of the work: what an MFU is a
        fraction of (not FLOPs over T_math, which the vector unit's work drags down)."""
        a = self.analysis
        matrix = self._matrix_work()
        if not matrix:
            raise SpecError("an MFU is a fraction of the matrix unit's peak, and this model has no matrix work")
        busiest = max(matrix, key=lambda name: a.substitute(matrix[name]).xreplace(
            {s: 1 for s in a.substitute(matrix[name]).free_symbols}))
        return a.rates[busiest]

    def _matrix_work(self) -> dict:
        return {name: work for name, work in self.analysis.work.items() if not name.startswith("vector")}

    @functools.cached_property
    def tokens_per_s(self) -> sympy.Expr:
        return self.tokens / self.t_step

    def days_to_train(self, total_tokens: int | float) -> sympy.Expr:
        """Days to train on `total_tokens` tokens at `tokens_per_s`."""
        return sympy.Integer(total_tokens) / self.tokens_per_s / 86400

    def budget(self, total_tokens: int | float, price: float | None = None,
               step: sympy.Expr | None = None) -> dict[str, sympy.Expr]:
        """A token budget's days, hours, chip-hours (every chip of the step) and, with a price
        per chip-hour, cost (`decls.budget`), each step taking `step` (t_step by default; a
        report under a strategy passes its t_step_exposed)."""
        rate = self.tokens_per_s if step is None else self.tokens / step
        return budget(rate, self._chips_in_all, total_tokens, price)

    def decode_batch(self, with_kv: bool = True) -> Region:
        """The batch B above which a decode step is compute-bound (T_math above T_comms, and
        on a mesh above the collectives' bandwidth-bound T_network too), with the KV cache's
        reads counted or left out: a `solve.Region`."""
        # the relations anew with B free: those in B (a mixture's tokens, C, Et) move with it
        free = _substitutions(self.structured, {k: v for k, v in self.sizes.items() if k != "B"})
        a = self._analysis(free)
        B = dim_symbol("B")
        t_comms = a.t_comms
        if not with_kv:  # each chip's shard of the cache, read once a step
            kv = sympy.Add(*(d.count * d.local_bytes for d in self.structured.declared if d.word == "cache"))
            t_comms = (a.bytes - kv.xreplace(free)) / self._chip().bandwidth()
        roofs = [t_comms] + ([a.t_network] if a.collectives else [])
        regions = []
        for roof in roofs:
            t_math, t_roof = cleared(a.t_math, roof)  # a symbolic chip's figures out of the denominators
            regions.append(positive_region(sympy.expand(t_math - t_roof), B))
        return both(regions)

    def per_block(self) -> dict[str, sympy.Expr]:
        """One pass through the (first, outermost) repeated block: its parameters, forward
        FLOPs and HBM bytes; empty for a program without one."""
        s = self.structured
        block = next((b for b in s.blocks if b.parent is None), None)
        if block is None:
            return {}
        each, count = self.analysis.cost.statements, self.at(block.count)
        return {"params": self.params_per_block,
                "flops": sympy.expand(sympy.Add(*(each[i].flops if each[i].flops_total is None else each[i].flops_total
                                                   for i in block.statements)) / count),  # all chips', as `flops`
                "bytes": sympy.expand(sympy.Add(*(each[i].bytes for i in block.statements)) / count)}

    def time_split(self) -> dict[str, sympy.Expr]:
        """Each named part's time in a step (the template's attention and mlp; "rest" for
        what is in no part): its statements' roofline times, each bound on its own, run as
        often as they run (in training: the forward three times over, or with its written
        backward, and what is recomputed), over the chips."""
        self._chip()
        factor = 1 / sympy.Integer(self.options.chips)
        back = self.structured.backward
        parts = self.structured.parts + (back.parts if self.written_backward and back is not None else ()) \
            + tuple(self.structured.parts[i] for i, _ in self.recomputed)
        found: dict[str, sympy.Expr] = {}
        for line, part in zip(self.step_analysis.lines, parts):
            found[part or "rest"] = found.get(part or "rest", sympy.Integer(0)) + factor * line.t_lower
        return found

    def max_batch(self) -> sympy.Expr | None:
        """The largest batch B whose memory fits the chips' usable HBM (memory grows
        linearly in B); None where memory does not depend on B or the chip has no capacity
        figure, 0 where not even B = 1 fits."""
        if self.machine is None or self.machine.capacity() is None:
            return None
        free = Model(self.structured, self.machine, {k: v for k, v in self.sizes.items() if k != "B"},
                     self.options)
        B = dim_symbol("B")
        memory = sympy.expand(free.memory_bytes)
        poly = sympy.Poly(memory, B) if memory.has(B) else None
        if poly is None or poly.degree() != 1 or memory.free_symbols != {B}:
            return None
        per_batch, fixed = poly.all_coeffs()
        most = (self.usable() * self.options.chips - fixed) / per_batch
        return sympy.Integer(max(0, sympy.floor(most))) if most.is_number else most  # symbolic: M_hbm

    def quantities(self) -> dict[str, sympy.Expr]:
        """Every model quantity this model has (training ones in training, those on a chip
        with a chip), by name."""
        train = self.options.mode == "train"
        has = {"train_only": train, "inference_only": not train, "needs_chip": self.machine is not None,
               "needs_capacity": self.machine is not None and self.machine.capacity() is not None,
               "needs_tokens": dim_symbol("tokens") in self.structured.relations,
               "unmeshed": self.structured.program.mesh is None}
        found = {}
        for q in MODEL_QUANTITIES:
            # matrix work is asked last, where all else holds: it costs the step's analysis
            if all(has[need] for need in q.needs if need in has) and \
                    (not q.needs_matrix_work or self._matrix_work()):
                found[q.name] = getattr(self, q.name)
        return found

    # ---- its report: what `symroof model` prints -----------------------------------------
    # report.py renders it; it imports this module at its top, so these methods import it
    # when called.

    @functools.cached_property
    def formulas(self) -> Model | None:
        """This model with B, T and S left symbols, whose quantities are the report's
        formulas; None for a model not made by `report.assemble`. Made when first asked
        for: a plan makes hundreds of models and reports on a few."""
        if self._origin is None:
            return None
        return self._origin({k: v for k, v in self.sizes.items() if k not in ("B", "T", "S")})

    def to_dict(self, total_tokens: int | None = None, price: float | None = None) -> dict[str, Any]:
        """A JSON-ready dict: what `symroof model ... --json` prints (with `total_tokens`,
        the days, chip-hours and with a `price` per chip-hour the cost to train on them, as
        --tokens and --price)."""
        from . import report
        return report.to_dict(self, self.formulas, self.about, total_tokens, price)

    def table(self, total_tokens: int | None = None, price: float | None = None) -> str:
        """The report `symroof model` prints, title and conventions included."""
        from . import report
        return report.table(self, self.formulas, report.title(self), total_tokens, price)

    def __str__(self) -> str:
        return self.table()

    def _repr_latex_(self) -> str:
        from . import report
        return report.latex(self, self.formulas)


def _substitutions(structured: Structured, sizes: dict[str, int]) -> dict:
    """The relations first (in the free dims), then the sizes: a number where all are given."""
    given = {dim_symbol(k): sympy.Integer(v) for k, v in sizes.items()}
    return {s: e.xreplace(given) for s, e in structured.relations.items()} | given


def _names(subs: dict) -> dict[str, sympy.Expr]:  # what an analysis is told is in its counts already
    return {str(s): v for s, v in subs.items()}


def _all_chips(a: Analysis) -> sympy.Expr:
    """An analysis's FLOPs, on a mesh over all its chips (each counted once)."""
    return a.flops_total if a.mesh is not None else a.flops


def _scaled(structured: Structured, subs: dict) -> list[Cost]:
    """Each statement's cost times how often it runs."""
    memo: dict[tuple[sympy.Expr, sympy.Expr], sympy.Expr] = {}  # shared: the statements' formulas recur
    return [repeated(c, k, subs, memo) for c, k in zip(statement_costs(structured.program), structured.counts)]


def _within(blocks: tuple[Block, ...], block: int | None, outer: int) -> bool:
    """Whether a block is `outer` or lies inside it."""
    while block is not None and block != outer:
        block = blocks[block].parent
    return block == outer
