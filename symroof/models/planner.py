"""The planner: every way to split N chips among data, FSDP, tensor, pipeline, sequence
and (for a mixture of experts) expert parallelism, those that fit in memory ranked by step
time, each with its binding roof and its thresholds.

    symroof plan llama-3-70b --chip tpu-v5p --chips 256 --batch 1M --train

Candidates are the factorizations N = dp x fsdp x tp x pp x sp x ep (fsdp and pp in
training only; ep dividing the experts; sp dividing the context, tried only when the batch
has fewer sequences than chips). Where plain data parallelism does not fit in training,
ZeRO-1 and then ZeRO-2 over the same axis are tried: the same time, less memory. Where no
stage fits either, a candidate without a pipeline runs its batch as the fewest microbatches
that fit (gradient accumulation, accumulation.py: its activations 1/M, the weights read and
FSDP's gathers M times; ZeRO first because it costs no time), the count worked out from its
memory at one microbatch, the activations' share of which is linear in the batch. Before any is
costed, arithmetic on the model's figures prunes those that cannot work: tp must divide
the KV heads, or be a multiple of them dividing the query heads (each KV head then copied,
as Megatron and vLLM do: "tp=16 (KV heads x2)"), and divide the MLP width and the
vocabulary (Megatron's splits), dp x fsdp the batch of sequences; tp must stay inside the
chip's fast-link domain (an NVLink node); and memory has a floor, the parameters' bytes
per chip (with their gradients and optimizer state in training, the gradients and
optimizer state over dp too, as ZeRO-2 splits them) over fsdp x
tp x pp x ep, which no sharding lowers. Each survivor is then costed whole,
forward and backward, by the sharding engine (strategy_costs.py), and ranked by
`t_step_exposed`: the roofline step with the activations' collectives on the critical path.
"""

from __future__ import annotations

import functools
import gc
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ParamSpec, TypeVar

import sympy

from ..analysis import Analysis
from ..errors import HardwareError, SpecError
from ..hardware.chips import Chip
from ..hardware.machines import Machine
from ..mesh import Mesh
from ..render.chip_card import estimates_text
from ..render.json_report import json_value
from ..render.tex import tex_number, tex_words
from ..roofline.collectives import check_domain
from ..show import columns, number, seconds, wrapped
from . import kinds, mla, strategies, strategy_costs
from .catalogue import get_model
from .counted import NEEDS_CONFIG, is_counted
from .decls import (
    Options,
    budget,
    budget_json,
    budget_rows,
    price_exact,
    state_bytes,
    state_json,
    state_text,
    usable_text,
)
from .families import Costing, Families, for_plan
from .report import conventions, model
from .strategies import Strategy, mesh_axes, strategy_of
from .templates import TOUCHED_EXPERTS, touches_experts
from .whole import Model

_P = ParamSpec("_P")
_R = TypeVar("_R")
_RARELY = (200_000, 30, 30)  # the garbage collector's thresholds while a plan runs (mypy's own)


def _collecting_rarely(run: Callable[_P, _R]) -> Callable[_P, _R]:
    """`run` with the garbage collector's passes made rare, its thresholds put back after. A
    plan makes millions of short-lived sympy objects, few of them in reference cycles; a
    young-generation pass every 700 of them, the default, walks them all over again and
    takes about a tenth of a plan's time (benchmarks/speed.py)."""
    @functools.wraps(run)
    def rarely(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        before = gc.get_threshold()
        gc.set_threshold(*(max(now, rare) for now, rare in zip(before, _RARELY)))
        try:
            return run(*args, **kwargs)
        finally:
            gc.set_threshold(*before)
    return rarely


@dataclass
class Candidate:
    """One strategy: its sizes, and either why it was set aside or what it costs."""

    sizes: dict[str, int]
    rejected: str | None = None
    zero: int = 0  # the ZeRO stage its data parallelism runs at: 0 (plain dp), 1 or 2
    schedule: str = "1f1b"  # a pipeline's
    microbatches: int = 1  # outside a pipeline: the microbatches its gradients are accumulated over
    costing: Costing | None = None  # what it costs, where costed (by its family's formulas, or whole)
    figures: dict = field(default_factory=dict)
    _thresholds: dict | None = field(default=None, repr=False)
    # where its kinds do not fit one fast-link domain: the axes each takes and the mesh, where
    # not as the sizes alone lay them (strategies.layouts), and why this one was kept
    layout: tuple[dict[str, str], Mesh] | None = None
    layout_note: str = ""
    layouts_tried: int = 0
    _build: Callable[[Candidate], Model] | None = field(default=None, repr=False)  # its model, as `plan` makes one
    _member: Strategy | None = field(default=None, repr=False)  # its axes, as costed (its mesh's, in order)
    _model: Model | None = field(default=None, repr=False)

    @property
    def model(self) -> Model | None:
        """Its model (None for one set aside): as costed whole, or made when first asked for
        where its family's formulas costed it (the same figures: families.py)."""
        if self.costing is None or self.rejected is not None:
            return None
        if self._model is None:
            self._model = self.costing.model
        if self._model is None:
            assert self._build is not None  # set where it is costed
            self._model = self._build(self)
        return self._model

    @property
    def thresholds(self) -> dict:
        """Its thresholds (strategy_costs.thresholds), worked out when first asked for: they
        cost a costed candidate's time again, and a plan shows only its best few."""
        assert self.model is not None, "a candidate set aside has no thresholds"
        if self._thresholds is None:
            self._thresholds = strategy_costs.thresholds(self.model, dict(self.model.options.strategy))
        return self._thresholds

    @property
    def strategy(self) -> str:
        """As `--strategy` takes it."""
        rest = kinds.rest().name
        named = {kinds.zero_stage(self.zero).name if kind == rest else kind: size for kind, size in self.sizes.items()}
        return ",".join(f"{kind}={size}" for kind, size in named.items() if size > 1) or f"{rest}=1"

    def placed(self) -> tuple[str, Mesh | None]:
        """The strategy and mesh to cost it with: by sizes, or on its layout's axes."""
        if self.layout is None:
            return self.strategy, None
        axes, mesh = self.layout
        rest = kinds.rest().name
        named = {kinds.zero_stage(self.zero).name if kind == rest else kind: axis for kind, axis in axes.items()}
        return ",".join(f"{kind}={axis}" for kind, axis in named.items()), mesh

    @property
    def text(self) -> str:
        """As the plan shows it: the strategy, the KV heads' copies where tp is wider than
        them, a pipeline's schedule where not 1F1B, and the microbatches its gradients are
        accumulated over where more than one."""
        copied = strategy_costs.kv_copies(self.model) if self.model is not None else None
        return self.strategy + (f" (KV heads x{copied[1]})" if copied else "") \
            + (f" ({self.schedule})" if self.schedule != "1f1b" else "") \
            + (f", {self.microbatches} microbatches" if self.microbatches > 1 else "")

    @property
    def analysis(self) -> Analysis | None:
        """Its model's analysis (`Model.analysis`); None for one set aside."""
        return self.model.analysis if self.model is not None else None

    @property
    def mesh(self) -> str:
        """Its mesh's axes as a spec writes them (a costed one's): the mesh its program is
        written on, from the axes it was costed with, without making its model."""
        if self._member is not None and self._model is None:
            return Mesh(mesh_axes(self._member)).axes_text()
        assert self.model is not None, "a candidate set aside has no mesh"
        return _mesh_text(self.model.structured.program.mesh)

    def to_dict(self, thresholds: bool = True) -> dict[str, Any]:
        """Its entry in `symroof plan --json`: a ranked one's figures and, where asked for,
        its thresholds (which cost its model: `thresholds`), or the strategy and why it was
        set aside."""
        if self.costing is None or self.rejected is not None:
            return {"strategy": self.strategy, "why": self.rejected}
        f = self.figures
        return {"strategy": self.strategy,
                **({"schedule": self.schedule} if self.sizes.get(kinds.stages().name, 1) > 1 else {}),
                **({"microbatches": self.microbatches} if self.microbatches > 1 else {}),
                "mesh": self.mesh, "bound": f["bound"],
                **{k: json_value(f[k]) for k in ("t_step", "t_step_exposed", "t_comm_exposed", "memory_per_chip",
                                                 "tokens_per_s")},
                **({"threshold": {kind: {k: _json(v) for k, v in entry.items()}
                                  for kind, entry in self.thresholds.items()}} if thresholds else {})}

    def _repr_latex_(self) -> str:
        if self.model is None:
            return rf"$$\text{{{tex_words(self.strategy)}, set aside: {tex_words(self.rejected or '')}}}$$"
        return self.model._repr_latex_()

    def _threshold_text(self) -> str:
        """Its thresholds as the plan's table shows them: a kind's per-chip tokens now / above
        which T_math outlasts its collectives ("any" where every batch does; sp: the tokens of
        a sequence a chip holds), else T_math over its collectives' time."""
        out = []
        assert self.model is not None
        for kind, entry in self.thresholds.items():
            tokens, context = entry.get("per_chip_tokens"), entry.get("context_per_chip")
            if tokens is not None:
                now = entry.get("now", strategy_costs.tokens_per_chip(self.model))
                out.append(f"{kind} {number(now, 4)}/{number(tokens, 4) if tokens else 'any'}")
            elif context is not None:
                out.append(f"{kind} {number(strategy_costs.sequence_per_chip(self.model), 4)}/{number(context, 4)} "
                           "of a sequence")
            elif entry.get("ratio") is not None:
                out.append(f"{kind} T_math/T_net {number(entry['ratio'], 3)}")
            if entry.get("exchange_ratio"):
                out[-1] += f", T_math/T_AllToAll {number(entry['exchange_ratio'], 3)}"
        return "; ".join(out)


def _mesh_text(mesh: Mesh | None) -> str:
    # (a program without a mesh line has printed as "None" here)
    return mesh.axes_text() if mesh is not None else "None"


def _json(v: object) -> object:
    """A threshold's value: text as it is, a table (microbatches for each bubble target) entry by entry."""
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    return v if isinstance(v, str) or v is None else json_value(v)


@dataclass
class Plan:
    """Every strategy tried (`candidates`), those that fit `ranked`; `str()` and `table()`
    give what `symroof plan` prints, `to_dict()` its JSON."""

    name: str  # the model's, as asked for
    machine: Machine
    mode: str
    chips: int
    batch: dict[str, int]
    candidates: list[Candidate]
    seconds: float  # what the plan took to make
    options: Options = field(default_factory=Options)  # the models' (training state, usable HBM)
    total_tokens: int | None = None  # a token budget: each ranked strategy's days, chip-hours, cost
    price: float | None = None  # per chip-hour, in price units
    context_given: bool = True  # whether --context set T (S in decode), or it is the model's own

    def budget(self, candidate: Candidate) -> dict[str, sympy.Expr]:
        """A ranked strategy's time, chip-hours and cost on the plan's token budget, each step
        taking its `t_step_exposed` (what ranks it: the collectives that wait included)."""
        assert self.total_tokens is not None and candidate.costing is not None
        f = candidate.figures
        return budget(f["tokens"] / f["t_step_exposed"], self.chips, self.total_tokens, self.price)

    @property
    def ranked(self) -> list[Candidate]:
        fits = [candidate for candidate in self.candidates if candidate.rejected is None]
        # ties (all compute-bound) go to the one with the least network time, then memory: the most slack
        return sorted(fits, key=lambda candidate: tuple(float(candidate.figures[key]) for key in (
            "t_step_exposed", "t_step", "t_network", "memory_per_chip")))

    def estimates(self) -> dict[str, tuple[sympy.Rational, str]]:
        """The estimated chip figures the costed strategies run at (path -> (value, source))."""
        rates = {rate for c in self.candidates if c.costing is not None and c.rejected is None
                 for rate in c.costing.rates}
        return self.machine.estimates(sorted(rates))

    def to_dict(self, timed: bool = False, top: int | None = None) -> dict[str, Any]:
        """What `symroof plan --json` prints: every ranked strategy's figures, and the
        thresholds of the `top` best (all: None; each costs its model, as the table's rows
        do); the seconds the plan took only if `timed` (the command prints them; they
        differ from run to run)."""
        out: dict[str, Any] = {"model": self.name, "mode": self.mode, "chips": self.chips, "batch": dict(self.batch)}
        if timed:
            out["seconds"] = round(self.seconds, 3)
        ranked = [c.to_dict(thresholds=top is None or k < top) for k, c in enumerate(self.ranked)]
        out["thresholds_of"] = len(ranked) if top is None else min(top, len(ranked))  # the best, in rank order
        if self.total_tokens is not None:
            out["budget_tokens"] = self.total_tokens
            out["budget_step"] = "t_step_exposed"  # the time each step of a budget takes
            for entry, c in zip(ranked, self.ranked):
                entry["budget"] = budget_json(self.budget(c), self.price)
        if self.mode == "train":
            out["training_state"] = state_json(self.options)
        return {**out, "considered": len(self.candidates), "ranked": ranked,
                "set_aside": [c.to_dict() for c in self.candidates if c.rejected], "why": why(self),
                "conventions": conventions(self.options, sharded=True)
                + ([TOUCHED_EXPERTS] if self._touches_experts() else []),
                "estimates": {path: {"value": json_value(value), "source": source}
                              for path, (value, source) in self.estimates().items()}}

    @_collecting_rarely
    def table(self, top: int = 10) -> str:
        """What `symroof plan` prints: the `top` ranked strategies, how many were set aside
        and why, why the best wins, and the chip's estimated figures."""
        ranked = self.ranked
        batch = ", ".join(f"{k} = {v}" + ("" if k == "B" or self.context_given else " (the model's context)")
                          for k, v in self.batch.items())
        aside = Counter(_category(c.rejected) for c in self.candidates if c.rejected)
        lines = [f"{self.name}, {self.mode} on {self.chips} x {self.machine.name}; {batch}",
                 f"considered {len(self.candidates)} strateg{'y' if len(self.candidates) == 1 else 'ies'} in "
                 f"{self.seconds:.2f} s: {len(ranked)} fit and are "
                 "ranked; " + (", ".join(f"{n} set aside ({k})" for k, n in aside.items()) or "none set aside"), ""]
        shown = ranked[:top]
        meshes = [c.mesh for c in shown]
        if shown:
            cells = [(str(k), c.text, mesh, f"{float(c.figures['memory_per_chip']) / 1e9:.3g} GB",
                     seconds(c.figures["t_step"]), seconds(c.figures["t_step_exposed"]), str(c.figures["bound"]),
                     c._threshold_text()) for k, (c, mesh) in enumerate(zip(shown, meshes), 1)]
            head = ("#", "strategy", "mesh", "HBM/chip", "t_step", "exposed", "bound",
                    "thresholds (per-chip tokens now/needed to outrun each kind's collectives; else T_math/T_net)")
            lines += columns([head, *cells], right=(0, 3, 4, 5))
        if len(ranked) > top:
            lines.append(f"    ... {len(ranked) - top} more (--top {len(ranked)})")
        lines += ([""] if shown else []) + [*wrapped("why: " + why(self)), ""]
        if self.total_tokens is not None and ranked:
            rows = budget_rows(self.budget(ranked[0]), self.total_tokens, self.price, "t_step_exposed")
            lines += wrapped(f"budget ({ranked[0].text}): "
                             + "; ".join(f"{name} {text}" for name, text in rows))
            lines.append("")
        if not self.options.default_state:
            lines += wrapped("training state: " + state_text(self.options) + f"; usable HBM "
                             f"{usable_text(self.options)} of capacity" if self.mode == "train" else
                             f"usable HBM {usable_text(self.options)} of capacity")
            lines.append("")
        if ranked:  # what the table's columns mean: only where there is a table
            lines += wrapped(" ".join(text for modes, text in _FOOTER if self.mode in modes))
        used = dict.fromkeys((f"zero{c.zero}" if k == "dp" and c.zero else k) for c in shown
                             for k, n in c.sizes.items() if n > 1)
        if used:
            lines += ["", *wrapped("mesh: each kind's axis: " + ", ".join(
                f"{name} {kinds.kind(name).axis} ({kinds.kind(name).outer} between domains)" for name in used)
                                   + "; @dcn marks an axis between fast-link domains (GPU nodes, TPU pods), on "
                                     "the network between them")]
        if self._touches_experts():
            lines += ["", *wrapped("experts: " + TOUCHED_EXPERTS)]
        spanned = max((c.layouts_tried for c in self.candidates), default=0)
        if spanned > 1:
            lines += ["", *wrapped("layouts: a strategy past the chip's fast-link domain (a GPU node of NVLink, a TPU "
                                   "pod) is costed laid out up to " + f"{spanned} ways (tp inside; as its sizes lay "
                                   "it, then each other kind in turn filling the domain first, the rest across); the "
                                   "fastest is kept, its mesh shown")]
        guessed = self.estimates()
        if guessed:
            assert self.machine.chip is not None  # a plan's machine is a named chip's
            lines += ["", *wrapped("estimates: " + estimates_text(guessed, self.machine.chip.id))]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def _touches_experts(self) -> bool:
        """Whether its costed programs read only the experts a decode step touches."""
        best = next(iter(self.ranked), None)  # one program's experts are every strategy's
        return best is not None and best.model is not None and touches_experts(best.model.structured)

    def _repr_latex_(self) -> str:
        return self.latex()

    def latex(self, top: int = 10) -> str:
        """The `top` best strategies as display math (notebooks, `symroof plan --latex`): the
        plan's title, then each one's step time (the roofline's, and with its exposed
        collectives, which ranks them), MFU, memory per chip and bound."""
        ranked = self.ranked
        if not ranked:
            return rf"$$\text{{{tex_words(why(self))}}}$$"
        batch = ", ".join(f"{k} = {v}" for k, v in self.batch.items())
        title = tex_words(f"{self.name}, {self.mode} on {self.chips} x {self.machine.name}; {batch}")
        head = r"\# & \text{strategy} & \text{t\_step} & \text{exposed} & \text{MFU} & \text{HBM per chip} & " \
               r"\text{bound}"
        lines = []
        for k, c in enumerate(ranked[:top], 1):
            assert c.model is not None  # ranked ones are costed
            f = c.figures
            lines.append(rf"{k} & \text{{{tex_words(c.text)}}} & {tex_number(f['t_step'])}\ \text{{s}} & "
                         rf"{tex_number(f['t_step_exposed'])}\ \text{{s}} & {tex_number(c.model.mfu)} & "
                         rf"{tex_number(f['memory_per_chip'] / 10**9, 3)}\ \text{{GB}} & \text{{{f['bound']}}}")
        if len(ranked) > top:
            lines.append(rf"& \text{{... {len(ranked) - top} more}} & & & & &")
        body = head + " \\\\ \\hline\n" + " \\\\\n".join(lines)
        return (f"$$\n\\begin{{array}}{{l}}\n\\text{{{title}}} \\\\\n\\begin{{array}}{{rlrrrrl}}\n{body}\n"
                f"\\end{{array}}\n\\end{{array}}\n$$")


# what the table's columns mean and how the plan searched, each sentence with the modes it applies to
_FOOTER = (
    (("train", "prefill", "decode"), "t_step: the roofline's bound, every collective overlapped; exposed: the "
     "activations' collectives (tensor parallelism's) waiting on the critical path, and a pipeline's bubble and "
     "exposed sends; ranked by exposed."),
    (("train", "prefill"), "Pipelines run 4 x pp microbatches, 1F1B, or interleaved (2 chunks a chip) where that "
     "is faster. Context parallelism (sp) is tried where the batch has fewer sequences than chips."),
    (("train",), "ZeRO-1, then ZeRO-2, where plain data parallelism does not fit; then the fewest microbatches that "
     "fit (gradients accumulated: the weights read and FSDP's gathers again each microbatch, the whole gradients "
     "reduced once a step; a threshold's per-chip tokens then a microbatch's where the kind's collectives run every "
     "microbatch)."),
    (("train", "prefill"), "tp runs with Megatron sequence parallelism (norms and residuals split over the "
     "sequence, each AllReduce a ReduceScatter and an AllGather; tp-nosp, not searched, runs without)."),
    (("decode",), "A decode step's tokens are its sequences' next tokens, one each: tp's AllReduces run on them "
     "every layer; a threshold of 'any' is one every batch clears."),
)


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _splits(chips: int, search: kinds.Search) -> list[dict[str, int]]:
    """Every way to give each searched kind a size it allows, in the order of their
    `Kind.search`, with the chips left to plain data parallelism."""
    rest = kinds.rest().name
    out: list[dict[str, int]] = [{rest: chips}]
    for kind in sorted(kinds.where(lambda k: k.search is not None), key=lambda k: k.search or 0):
        out = [{**split, kind.name: size, rest: split[rest] // size} for split in out
               for size in _divisors(split[rest]) if kind.allows(search, size)]
    return out


@_collecting_rarely
def plan(name: str, chip: str | Chip | Machine, chips: int, tokens: int | None, mode: str = "train",
         context: int | None = None, models_file: str | None = None, remat: str = "full", *,
         optimizer: str = "adam", grads: str | None = None, master: str | None = None, hbm_usable: float = 0.9,
         total_tokens: int | None = None, price: float | None = None, families: bool = True,
         sequences: int | None = None) -> Plan:
    """Every strategy for `name` on `chips` chips of `chip` with a batch of `tokens` tokens
    (sequences of `context`, the model's by default; in decode, `tokens` sequences of one
    new token each over a context of `context`), or of `sequences` sequences in any mode
    (`tokens` None: `--sequences` on the command line), training under the `remat` policy (what
    each chip keeps of its activations, and what its backward recomputes), its state set by
    `optimizer`, `grads` and `master`, filling `hbm_usable` of each chip's HBM
    (`symroof.model`'s). With `total_tokens`, each ranked strategy's days, chip-hours and
    (with a `price` per chip-hour) cost to train on them. `str()` of the plan is what
    `symroof plan` prints; `to_dict()` its JSON. Strategies are costed by their family's
    formulas (families.py: the same figures as each costed whole); `families=False` costs
    every one whole, the reference the tests hold the families to.

    Examples:
        >>> import symroof
        >>> p = symroof.plan("llama-3-8b", "h100", 8, 2**20, "train", context=4096)
        >>> p.batch, len(p.candidates), len(p.ranked)
        ({'B': 256, 'T': 4096}, 20, 10)
        >>> best = p.ranked[0]
        >>> best.text, best.figures["bound"], f"{float(best.figures['memory_per_chip']) / 1e9:.3g} GB"
        ('zero2=8, 2 microbatches', 'compute', '65.2 GB')
        >>> best.to_dict()["strategy"], best.to_dict()["microbatches"]
        ('zero2=8', 2)
        >>> sum("bubble alone" in (c.rejected or "") for c in p.candidates)  # the pipelines: slower
        10
    """
    started = time.perf_counter()
    config = get_model(name, models_file)
    if is_counted(config):
        raise SpecError(f"a plan costs strategies on the model's tensors: {config['id']} is given by its parameter "
                        f"count only, and a plan needs {NEEDS_CONFIG}")
    mla.check_plan(config)
    if price is not None:
        price_exact(price)  # checked before the search
        if total_tokens is None:
            raise SpecError("--price is per chip-hour: give a token budget (--tokens 15e12) to cost")
    if not isinstance(chips, int) or not 1 <= chips <= 65536:
        raise SpecError(f"--chips is from 1 to 65536, not {chips}")
    shape = config["sizes"]
    context_given = bool(context)
    context = context or shape["context"]
    if (tokens is None) == (sequences is None):
        raise SpecError("give the batch once: as tokens (--batch; sequences in decode) or as sequences (--sequences)")
    if sequences is not None:
        if not isinstance(sequences, int) or sequences < 1:
            raise SpecError(f"--sequences is how many sequences a step processes, at least 1, not {sequences}")
        tokens = sequences if mode == "decode" else sequences * context
    assert tokens is not None
    if mode == "decode":
        batch = {"B": tokens, "S": context}
        sequences = tokens
    else:
        if tokens % context:
            raise SpecError(f"a batch of {tokens} tokens is not a whole number of {context}-token sequences: "
                            f"give a multiple of {context} (or --context)")
        sequences = tokens // context
        batch = {"B": sequences, "T": context}
    train = mode == "train"
    experts = config["moe"]["experts"] if config.get("moe") else 1
    # the kinds tried, each with the sizes it may take (`Kind.allows`)
    search = kinds.Search(mode, chips, sequences, context, experts, bool(config.get("moe")))
    found = [Candidate({kind.name: split[kind.name] for kind in kinds.where(lambda k: True, split)
                        if kind.lists(search, split[kind.name])})
             for split in _splits(chips, search)]
    run = functools.partial(model, name, mode, chip, batch, models_file=models_file, remat=remat,
                            optimizer=optimizer, grads=grads, master=master, hbm_usable=hbm_usable)
    probe = run()  # one chip, unsharded: the floors
    usable = probe.usable()
    if not (usable.is_number and probe.analysis.t_lower.is_number):
        raise SpecError("a plan ranks step times: it needs a chip whose figures are numbers (not --chip symbolic "
                        "or --symbolic); symroof model NAME --strategy ... --chip symbolic gives the formulas")
    # the bytes a parameter takes (its weight, and in training its state: decls.state_bytes, the
    # model's own table; Adafactor's factored moment, per matrix, is left out of this floor)
    width = probe.weight_bytes / probe.params
    per_param = width + (state_bytes(probe.options, width).per_param if train else 0)
    assert probe.machine is not None  # plan's chip made it
    domain = probe.machine.chip.figure("interconnect.domain_size") if probe.machine.chip is not None else None
    for candidate in found:
        candidate.rejected = _pruned(candidate.sizes, shape, sequences, probe.params, per_param, usable, domain, width)
    # the kinds its strategies use (each family carries them all, on axes of one chip where a strategy has none)
    searched = {kind for c in found if c.rejected is None for kind, size in c.sizes.items() if size > 1}
    target = probe.machine

    coster = _Coster(run, target, for_plan(config, mode, target, batch, sorted(searched), probe.options,
                                           outer=bool(domain) and chips > int(domain or 0)) if families else None,
                     functools.partial(strategy_of, mode=mode, config=config, chips=1, target=target))
    for candidate in found:  # a mesh its chip's links cannot hold: set aside before anything is costed
        if candidate.rejected is None:
            candidate.rejected = _unplaced(candidate, coster, mode)
    # pipelines last: each is bounded below by its bubble, (M + (P - 1)/v)/M of the chips' share of
    # the work at the peak (v = 2 where the interleaved schedule can run), and set aside uncosted
    # where that bound is slower than a strategy already costed
    ideal = probe.flops_train_hardware / (chips * probe.matrix_peak) if train else \
        probe.flops / (chips * probe.matrix_peak)
    best = None
    stages = kinds.stages().name
    for candidate in sorted(found, key=lambda candidate: candidate.sizes.get(stages, 1)):
        pp = candidate.sizes.get(stages, 1)
        if candidate.rejected is None and pp > 1 and best is not None:
            chunks = 2 if shape["L"] % (2 * pp) == 0 else 1
            floor = ideal * (4 * pp + sympy.Rational(pp - 1, chunks)) / (4 * pp)  # the default 4 x P microbatches
            if floor > best:
                candidate.rejected = f"{stages}={pp}: its bubble alone makes it at least " \
                                     f"{float(floor) * 1e3:.4g} ms, slower than {float(best) * 1e3:.4g} ms " \
                                     "already found"
        if candidate.rejected is None:
            _cost(candidate, coster, usable)
            if candidate.rejected is None and pp > 1 and shape["L"] % (2 * pp) == 0:
                _interleaved(candidate, coster, usable)
            if candidate.rejected is None:
                _laid_out(candidate, coster, usable, domain)
            if candidate.rejected is None:
                step = candidate.figures["t_step_exposed"]
                best = step if best is None or step < best else best
    return Plan(name, probe.machine, mode, chips, batch, found, time.perf_counter() - started, probe.options,
                total_tokens, price, context_given)


def _pruned(sizes: dict[str, int], shape: dict[str, int], sequences: int, params: sympy.Expr,
            per_param: sympy.Expr, usable: sympy.Expr, domain: float | None, weight: sympy.Expr) -> str | None:
    def chips(test: Callable[[kinds.Kind], bool]) -> int:
        return math.prod(sizes[kind.name] for kind in kinds.where(test, sizes))

    width = kinds.where(lambda k: k.splits_width, sizes)
    split = chips(lambda k: k.splits_batch)  # the sequences are split over these
    for kind in width:  # Megatron's splits
        if kinds.copies(sizes[kind.name], shape["K"], shape["N"]) is None:
            return f"{kind.name}={sizes[kind.name]} does not divide the KV heads (K = {shape['K']}), nor is it a " \
                   f"multiple of them dividing the query heads (N = {shape['N']})"
        for dim, what in (("F", "MLP width"), ("V", "vocabulary")):
            if shape[dim] % sizes[kind.name]:
                return f"{kind.name}={sizes[kind.name]} does not divide the {what} ({dim} = {shape[dim]})"
    if sequences % split:
        over = " x ".join(k.name for k in kinds.where(lambda k: k.splits_batch)
                          if k.listed or sizes.get(k.name, 1) > 1)
        return f"{sequences} sequences do not split over {over} = {split}"
    for kind in width:  # its all-reduces are on activations: on the fast links
        if domain and sizes[kind.name] > domain:
            return f"{kind.name}={sizes[kind.name]} spans more than the fast-link domain of {int(domain)} chips"
    for kind in kinds.where(lambda k: k.stages, sizes):
        pp = sizes[kind.name]
        if pp > 1 and (shape["L"] % pp or (sequences // split) % (4 * pp)):
            return f"{kind.name}={pp} does not divide the {shape['L']} layers" if shape["L"] % pp else \
                f"{kind.name}={pp}: its 4 x {pp} microbatches do not split the {sequences // split} sequences " \
                "of a replica"
    # a stage holds 1/pp or more; ep splits only the experts' share, so over it too is a floor
    # still; ZeRO-2 may split the gradients and optimizer state over dp too, never the weights
    floor = (weight + (per_param - weight) / sizes[kinds.rest().name]) * params / chips(lambda k: k.splits_weights)
    if floor > usable:
        return f"out of memory: the parameters, their gradients and optimizer state alone take " \
            f"{float(floor) / 1e9:.4g} GB a chip, past the {float(usable) / 1e9:.4g} GB usable"
    return None


class _Coster:
    """Costs a plan's candidates: by their family's formulas where one stands for them
    (families.py; None: every one whole), else whole, as `run` (`symroof.model` with the
    plan's name, mode, chip, batch and options) costs a strategy; `strategy` reads a
    strategy's text and mesh into its axes, as `run` does first (a plan's, which the
    families and the placement check need)."""

    def __init__(self, run: Callable[..., Model], target: Machine, families: Families | None = None,
                 strategy: Callable[[str, Mesh | None], Strategy] | None = None):
        self.run, self.target, self.families, self.strategy = run, target, families, strategy
        self._members: dict[tuple[str, Mesh | None], Strategy] = {}  # read once: placed, then costed

    def member(self, candidate: Candidate) -> Strategy:
        """The candidate's strategy as axes (its errors are its model's first)."""
        text, mesh = candidate.placed()
        assert text is not None and self.strategy is not None  # a strategy's text; a plan's coster
        if (text, mesh) not in self._members:
            self._members[text, mesh] = self.strategy(text, mesh)
        return self._members[text, mesh]

    def __call__(self, candidate: Candidate) -> Costing:
        given = self._given(candidate)
        if self.families is not None:
            member = self.member(candidate)
            found = self.families.costing(member, candidate.zero, given["schedule"], given["microbatches"])
            if found is not None:
                return found
        return Costing.of(self.model(candidate))

    def model(self, candidate: Candidate) -> Model:
        """The candidate's model, as it stands (its stage, schedule, microbatches, layout)."""
        text, mesh = candidate.placed()
        return self.run(strategy=text, mesh=mesh, **self._given(candidate))

    @staticmethod
    def _given(candidate: Candidate) -> dict[str, Any]:
        piped = candidate.sizes.get(kinds.stages().name, 1) > 1
        return {"schedule": candidate.schedule if piped else None,
                "microbatches": candidate.microbatches if candidate.microbatches > 1 else None}


def _unplaced(candidate: Candidate, coster: _Coster, mode: str) -> str | None:
    """Why a strategy's mesh does not lie on its chip's links (its ICI axes past the chip's
    domain, or not on a torus's physical axes: topology.lay_out), as costing it would say;
    None where it does, or needs no links (data parallelism alone has no collective outside
    training)."""
    if mode != "train" and all(size == 1 for kind, size in candidate.sizes.items() if kind != kinds.rest().name):
        return None
    try:
        member = coster.member(candidate)
        check_domain(list(mesh_axes(member)), coster.target.chip)
    except (SpecError, HardwareError) as err:
        return str(err).split("\n", 1)[0]
    return None


def _cost(candidate: Candidate, coster: _Coster, usable: sympy.Expr) -> None:
    """Cost a candidate; where plain data parallelism does not fit in training, the same split
    with ZeRO-1, then ZeRO-2 (the same step time, less memory: strategy_costs costs them alike).
    A figure the chip lacks for it (a pipeline's sends over a network with no bandwidth) or a
    mesh past the chip's domain sets it aside, saying so."""
    try:
        costed = coster(candidate)
        if costed.hbm_per_chip > usable and (stage := _zero_stage(costed, candidate, usable)):
            candidate.zero = stage  # costed again with it, its memory checked as any other's
            return _cost(candidate, coster, usable)
        if costed.hbm_per_chip > usable and not costed.piped and (chosen := _accumulate(costed, candidate, usable)):
            candidate.zero, candidate.microbatches = chosen  # costed again, its memory checked as any other's
            return _cost(candidate, coster, usable)
    except (SpecError, HardwareError) as err:
        candidate.rejected = str(err).split("\n", 1)[0]
        return
    if costed.hbm_per_chip > usable:
        candidate.rejected = (f"out of memory: {float(costed.hbm_per_chip) / 1e9:.4g} GB a chip "
                              f"(usable {float(usable) / 1e9:.4g})" + _no_microbatches(costed, candidate, usable))
        return
    # the roofs of a pipeline's slowest stage; a step's network time (a pipeline's and an
    # accumulation's analysis is one microbatch's)
    found = costed.times
    network = costed.roofs["t_network"] if not costed.piped and not costed.accumulated else \
        found["t_network_overlapped"] + found["t_network_exposed"]
    roofs = {"compute": costed.roofs["t_math"], "HBM": costed.roofs["t_comms"], "network": costed.roofs["t_network"]}
    candidate.costing, candidate._build = costed, coster.model
    candidate._member = coster.member(candidate) if coster.strategy is not None else None
    candidate.figures = {"t_step": costed.t_step, "t_network": network, **found,
                         "memory_per_chip": costed.hbm_per_chip,
                         "bound": max(roofs, key=lambda roof: float(roofs[roof])),
                         "tokens_per_s": costed.tokens / costed.t_step, "tokens": costed.tokens}


def _zero_stage(costed: Costing, candidate: Candidate, usable: sympy.Expr) -> int:
    """The ZeRO stage to cost a training candidate with next, where as costed it does not
    fit; 0 for none. Without a pipeline, the lowest stage (1, 2) under which it would fit,
    worked out from its memory (the optimizer state, and at stage 2 the gradients, split
    over dp), so that a split no stage rescues is not re-costed; a pipeline's stages keep
    their memory apart, so there each stage is tried in turn."""
    dp = candidate.sizes[kinds.rest().name]
    if costed.mode != "train" or dp == 1 or candidate.zero == 2:
        return 0
    if costed.piped:
        return candidate.zero + 1
    if candidate.zero:  # the stage worked out below: its memory was exact, so none fits
        return 0
    spare = sympy.Rational(dp - 1, dp)
    one = costed.hbm_per_chip - costed.optimizer_bytes * spare
    if one <= usable:
        return 1
    return 2 if one - costed.grad_bytes * spare <= usable else 0


def _fixed(costed: Costing, stage: int) -> sympy.Expr:
    """A chip's memory less its activations, at ZeRO stage `stage` over the data-parallel axis
    (`costed` at stage 0): what no microbatch count lowers."""
    spare = 1 - sympy.Rational(1, costed.dp_chips)
    return costed.hbm_per_chip - (costed.activation_bytes + spare * costed.optimizer_bytes * (stage >= 1)
                                  + spare * costed.grad_bytes * (stage >= 2))


def _replica_sequences(costed: Costing, candidate: Candidate) -> int:
    """The sequences each replica holds: the batch over dp x fsdp x ep."""
    split = math.prod(candidate.sizes[k.name] for k in kinds.where(lambda k: k.splits_batch, candidate.sizes))
    assert costed.batch is not None  # a plan's batch has sequences
    return costed.batch // split


def _accumulate(costed: Costing, candidate: Candidate, usable: sympy.Expr) -> tuple[int, int] | None:
    """The ZeRO stage and the fewest microbatches under which a training candidate that
    does not fit at one microbatch would (None where none would), from its memory at one:
    its activations are linear in the batch, so M microbatches hold 1/M of them, the rest
    unchanged. ZeRO-1 and ZeRO-2 cost no time and were tried first (`_zero_stage`); each
    microbatch costs the weights' reads and FSDP's gathers again (and under ZeRO-2 its
    gradients' reduce-scatter), so the fewest microbatches win, then the lowest stage.
    Set once: `_cost` checks the memory as costed, and an estimate that missed (it cannot:
    the activations are exactly linear in B) sets the candidate aside."""
    if costed.mode != "train" or candidate.microbatches > 1 or candidate.zero or costed.accumulated \
            or costed.batch is None:
        return None
    sequences = _replica_sequences(costed, candidate)
    stages = (0, 1, 2) if candidate.sizes[kinds.rest().name] > 1 else (0,)
    found = []
    for stage in stages:
        room = usable - _fixed(costed, stage)
        if room <= 0:
            continue
        need = costed.activation_bytes / room
        fits = [m for m in _divisors(sequences) if m >= need and m > 1]
        if fits:
            found.append((fits[0], stage))
    if not found:
        return None
    microbatches, stage = min(found)
    return stage, microbatches


def _no_microbatches(costed: Costing, candidate: Candidate, usable: sympy.Expr) -> str:
    """Why no microbatch count rescues a training candidate set aside for its memory."""
    if costed.mode != "train" or candidate.sizes.get(kinds.stages().name, 1) > 1 or costed.batch is None:
        return ""
    if candidate.microbatches > 1:
        return f" at {candidate.microbatches} microbatches"
    fixed = _fixed(costed, 2 if candidate.sizes[kinds.rest().name] > 1 else 0)
    if fixed > usable:
        return f"; {float(fixed) / 1e9:.4g} GB without activations: no microbatch count fits"
    sequences = _replica_sequences(costed, candidate)
    return f"; even {sequences} microbatches of one sequence do not fit" if sequences > 1 else \
        "; its replica's one sequence does not fit, and no microbatch is smaller"


def _interleaved(candidate: Candidate, coster: _Coster, usable: sympy.Expr) -> None:
    """Keep the interleaved schedule (2 layer chunks a chip: a bubble half 1F1B's, twice the
    sends) in place of 1F1B where it is faster."""
    other = Candidate(dict(candidate.sizes), zero=candidate.zero, schedule="interleaved",
                      microbatches=candidate.microbatches)
    _cost(other, coster, usable)
    if other.rejected is None and other.figures["t_step_exposed"] < candidate.figures["t_step_exposed"]:
        candidate.schedule, candidate.zero = other.schedule, other.zero
        _take(candidate, other)


def _take(candidate: Candidate, other: Candidate) -> None:
    """The candidate costed as `other` (its schedule, stage, layout already taken)."""
    candidate.costing, candidate._build, candidate._model = other.costing, other._build, other._model
    candidate._member = other._member
    candidate.figures = other.figures


def _laid_out(candidate: Candidate, coster: _Coster, usable: sympy.Expr, domain: sympy.Expr | None) -> None:
    """Where its kinds span several fast-link domains (GPU nodes, TPU pods), keep the fastest
    of the few layouts `strategies.layouts` gives (tp inside, each other kind in turn filling
    the domain first), as costed, and say which it kept where that is not the sizes' own."""
    costed = candidate.costing
    assert costed is not None  # a candidate that fits is costed
    options = strategies.layouts(candidate.sizes, int(domain) if domain else None,
                                 strategies.fills_in_part(coster.target))
    if not costed.piped:
        work = sympy.Max(costed.roofs["t_math"], costed.roofs["t_comms"])
        if candidate.figures["t_step_exposed"] <= work:  # no collective in the way: no layout is faster
            return
    candidate.layouts_tried = len(options)
    best = candidate
    for layout in options[1:]:  # the first is the sizes' own: the candidate as costed
        other = Candidate(dict(candidate.sizes), zero=candidate.zero, schedule=candidate.schedule, layout=layout,
                          microbatches=candidate.microbatches)
        _cost(other, coster, usable)
        if other.rejected is None and other.figures["t_step_exposed"] < best.figures["t_step_exposed"]:
            best = other
    if best is not candidate and best.layout is not None:
        slower = seconds(candidate.figures["t_step_exposed"] - best.figures["t_step_exposed"])
        candidate.layout_note = (f"laid out as {best.layout[1].axes_text()} (of {len(options)} layouts tried on "
                                 f"{int(domain or 0)}-chip fast-link domains; as {options[0][1].axes_text()}: "
                                 f"{slower} slower)")
        candidate.layout, candidate.zero, candidate.microbatches = best.layout, best.zero, best.microbatches
        _take(candidate, best)


# why a strategy was set aside, by what its reason says, in the order a strategy meets the
# checks (the last it failed first: the one that decides where earlier ones passed)
_CATEGORIES = (("chip lacks a figure", ("has no figure",)), ("does not lie on the torus", ("torus",)),
               ("out of memory", ("memory",)), ("its bubble alone is slower", ("bubble alone",)),
               ("tp past the fast-link domain", ("fast-link domain",)), ("does not divide", ("divide", "split")))


def _category(reason: str) -> str:
    """What a reason a strategy was set aside comes to (the plan's table counts them so)."""
    return next((name for name, words in _CATEGORIES if any(w in reason for w in words)), "other")


def _none_fit(planned: Plan) -> str:
    """Why no strategy fits: each kind of reason, those that decide first (a figure the chip
    lacks, which the user can supply; then the checks strategies that passed the others
    failed), how many it set aside, and its most common reason."""
    found: dict[str, dict[str, int]] = {}
    for c in planned.candidates:
        if c.rejected:
            each = found.setdefault(_category(c.rejected), {})
            each[c.rejected] = each.get(c.rejected, 0) + 1
    order = [name for name, _ in _CATEGORIES] + ["other"]
    parts = []
    for name in sorted(found, key=order.index):
        reasons = found[name]
        common = max(reasons, key=lambda r: (reasons[r], -len(r)))
        parts.append(f"{sum(reasons.values())} set aside ({name}), e.g. {common}")
    return "no strategy fits: " + "; ".join(parts)


def why(planned: Plan) -> str:
    """Why the best strategy wins, against the runner-up and the simplest alternatives."""
    ranked = planned.ranked
    if not ranked:
        return _none_fit(planned)
    best = ranked[0]
    assert best.model is not None  # ranked ones are costed
    figures = best.figures
    text = [f"{best.text} wins: {figures['bound']}-bound, {float(figures['memory_per_chip']) / 1e9:.3g} GB a chip"]
    if best.layout_note:
        text.append(best.layout_note)
    if figures["t_network_exposed"] == 0:
        text.append("no collective waits on the critical path")
    else:
        text.append(f"{_ms(figures['t_network_exposed'])} of activation collectives exposed")
    for kind, entry in best.thresholds.items():
        tokens = entry.get("per_chip_tokens")
        if tokens is not None:
            now = entry.get("now", strategy_costs.tokens_per_chip(best.model))
            text.append(f"{kind}: T_math outruns its collectives at any batch" if tokens == 0 else
                        f"{kind} per-chip tokens {number(now, 4)} {'>' if now > tokens else '<'} "
                        f"threshold {number(tokens, 4)}")
    ties = [other for other in ranked[1:] if other.figures["t_step_exposed"] == figures["t_step_exposed"]
            and other.figures["t_step"] == figures["t_step"]]
    if ties:
        text.append(f"{len(ties)} other{'s take' if len(ties) > 1 else ' takes'} the same time ({ties[0].text}"
                    f"{', ...' if len(ties) > 1 else ''}); it has the least network time among them "
                    f"({_ms(figures['t_network'])} against {_ms(ties[0].figures['t_network'])}), the most slack")
    elif len(ranked) > 1:
        second = ranked[1]
        ratio = float(second.figures["t_step_exposed"] / figures["t_step_exposed"])
        text.append(f"next: {second.text}, {ratio:.3g}x the time ({second.figures['bound']}-bound"
                    + (f", {_ms(second.figures['t_network_exposed'])} exposed" if second.figures["t_network_exposed"]
                       else "") + ")")
    return "; ".join(text)


def _ms(t: sympy.Expr) -> str:
    return f"{float(t) * 1e3:.4g} ms"

