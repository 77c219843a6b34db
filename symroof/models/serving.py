"""What a served request costs (`symroof.serving.request`, `symroof model NAME --serve`): a
request of P prompt tokens and G generated tokens, B of them batched in lockstep, on a
named model and chip.

* `ttft`: the prefill step of P tokens for each of the B sequences (the prefill model's
  t_step at T = P);
* `tpot(S)`: one decode step at context S (the decode model's t_step); the g-th generated
  token's step (g = 0 .. G-1) reads a context of P + g tokens;
* `t_request = ttft + sum over g = 0 .. G-1 of tpot(P + g)`, in closed form: the decode
  step's time is a Max of roofs linear in S, so the sum is split where the roofs cross and
  each piece summed as an arithmetic series (`series`), not a loop over G;
* throughput in lockstep (B requests start and end together: B / t_request requests a
  second) and under continuous batching at steady state (every slot busy decoding, the
  running sequences' contexts spread evenly over P .. P + G - 1, whose mean
  P + (G - 1)/2 a step's time is taken at: exact where each roof is linear in the batch's
  summed context, as the template's KV reads and attention FLOPs are; prefill's time not
  counted: it runs elsewhere);
* `max_batch` under a per-token latency target: the largest B whose step at the last
  context P + G stays within it (solved per roof) and whose KV caches fit;
* `kv_caches_fit`: sequences at context P + G whose caches fit in the HBM the weights leave
  (this and `max_batch` whole multiples of the data-parallel replicas, a batch's split);
* speculative decoding (`Speculative`): k draft steps, then one target step verifying
  k + 1 tokens a sequence, (1 - a^(k+1))/(1 - a) tokens expected from it.

* under a strategy, the latency-bound bytes of each collective of the decode step
  (latency_bound.py): V* where its bandwidth time equals its hops' latency floor, the batch
  B* whose V is V*, and whether it is latency-bound at the batch given.

The HBM has no such threshold: the chips' figures carry no fixed per-step (kernel launch)
latency for memory, only the networks' hop latencies, so nothing here could derive one
without inventing a floor; the output says so.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from fractions import Fraction

import sympy

from ..errors import SpecError
from ..hardware.machines import Machine, machine
from ..ir import dim_symbol
from ..lang.relations import Power
from ..render.json_report import json_value
from ..show import number, pretty, seconds, wrapped
from . import chunked as chunking
from . import context as contexts
from . import strategy_costs, windows
from .accumulation import replicas
from .latency_bound import NO_MEMORY_LATENCY, LatencyBound, bounds, step_bound
from .latency_bound import rows as latency_rows
from .report import model, named
from .templates import TOUCHED_EXPERTS, touches_experts
from .whole import Model

# what a request's figures follow, each with when it applies: "strategy" (a sharded step's),
# "slo" (with a tpot target: max_batch), or always (None)
CONVENTIONS: tuple[tuple[str | None, str], ...] = (
    (None, "ttft: one prefill step of the P prompt tokens for each of the B sequences together"),
    ("strategy", "under a strategy every step's time is its t_step_exposed: the activations' collectives (tensor "
                 "parallelism's AllReduces) wait on the critical path after the work, each at least its hops' latency "
                 "floor; the parameters' overlap"),
    (None, "tpot(S): one decode step of the B sequences at a context of S tokens; the g-th generated token "
           "(g = 0 .. G-1) is decoded at S = P + g"),
    (None, "t_request = ttft + the sum of tpot(P + g) over g = 0 .. G-1, summed in closed form"),
    (None, "lockstep: the B requests of a batch start and end together; requests/s = B / t_request"),
    (None, "steady state: continuous batching keeps B slots decoding, their contexts spread evenly over P .. P+G-1: "
           "a step at the mean context P + (G-1)/2; prefill runs elsewhere and is not counted"),
    ("strategy", "latency_bound (under a strategy): a collective is latency-bound where its bandwidth time, V x its "
                 "time per byte, is below its hops' latency floor (hops x the chip's hop_latency_s): below "
                 "V* = floor / time per byte"),
    ("slo", "max_batch: the largest B whose decode step at the last context P + G takes at most the target "
            "and whose weights and KV caches fit the chips' usable HBM"),
)


@dataclasses.dataclass(frozen=True, slots=True)
class Piece:
    """Where one roof sets the decode step's time: contexts `first` .. `last`, the roof's
    time in S, and its sum over them."""

    first: int
    last: int
    roof: sympy.Expr
    total: sympy.Expr


def crossings(step: sympy.Expr, var: sympy.Symbol) -> set[sympy.Expr]:
    """Where any Max inside `step` changes which argument is on top: the values of `var` at
    which two of its arguments (linear in `var`) are equal. Between them `step` is linear."""
    found: set[sympy.Expr] = set()
    for node in sympy.preorder_traversal(step):
        if isinstance(node, (sympy.Max, sympy.Min)):  # Min: a sliding window's keys, min(S, W)
            for a, b in itertools.combinations(node.args, 2):
                gap = sympy.expand(a - b)
                slope = gap.coeff(var, 1) if gap.is_polynomial(var) else None
                if slope is not None and slope != 0 and not gap.free_symbols - {var}:
                    found.add(-gap.coeff(var, 0) / slope)
    return found


def linear_at(step: sympy.Expr, var: sympy.Symbol, where: sympy.Expr) -> sympy.Expr:
    """The linear piece of `step` (sums and positive multiples of Max of terms linear in
    `var`) on top at `var = where`: each Max replaced by its argument largest there.
    Refused where it is not linear in `var` with numbers for the rest: else the closed
    forms built on it would be wrong."""
    def top(node: sympy.Expr) -> sympy.Expr:
        if isinstance(node, (sympy.Max, sympy.Min)):  # Min: a sliding window's keys, min(S, W)
            pick = max if isinstance(node, sympy.Max) else min
            try:
                return pick((top(a) for a in node.args), key=lambda a: a.subs(var, where))
            except TypeError:  # roofs in the chip's symbols: which is on top is unknown
                raise SpecError(f"the step's time is not linear in {var} with numbers for the rest ({step}): give "
                                "every other size and a chip with numeric figures") from None
        if not node.args:
            return node
        return node.func(*(top(a) for a in node.args))

    # a free symbol besides `var` (a symbolic chip's figures) leaves the Max's order undecided: refused first
    piece = None if step.free_symbols - {var} else sympy.expand(top(step))
    if piece is None or not piece.is_polynomial(var) or sympy.degree(piece, var) > 1:
        raise SpecError(f"the step's time is not linear in {var} with numbers for the rest "
                        f"({step}): give every other size and a chip with numeric figures")
    return piece


def series(step: sympy.Expr, var: sympy.Symbol, first: int, last: int) -> tuple[sympy.Expr, tuple[Piece, ...]]:
    """The sum of `step` (sums of Max of roofs linear in `var`: the roofline's time, a mesh's
    compute and network terms) over var = first .. last, in closed form: the range is cut
    where two roofs of a Max cross, and each piece, linear, summed as an arithmetic series,
    n c0 + c1 (a + b) n / 2. No loop over the range: as many pieces as there are crossings
    inside it."""
    if last < first:
        return sympy.Integer(0), ()
    cuts = {first, last + 1}
    for cross in crossings(step, var):
        if first < cross < last + 1:
            cuts.add(int(sympy.floor(cross)) + 1)  # the first whole context past the crossing
    edges = sorted(cuts)
    pieces = []
    for lo, end in zip(edges, edges[1:]):
        hi = end - 1
        # no two roofs cross strictly inside [lo, hi]: the pieces on top at its middle are on top throughout
        line = linear_at(step, var, sympy.Rational(lo + hi, 2))
        n = hi - lo + 1
        total = n * line.coeff(var, 0) + line.coeff(var, 1) * sympy.Rational((lo + hi) * n, 2)
        pieces.append(Piece(lo, hi, line, total))
    return sympy.Add(*(p.total for p in pieces)), tuple(pieces)


def expected_tokens(accept: sympy.Expr, k: int) -> sympy.Expr:
    """Tokens a target step yields when it verifies k draft tokens, each accepted with
    probability `accept` until the first rejection, plus the target's own token:
    sum of a^i for i = 0 .. k, (1 - a^(k+1))/(1 - a), and k + 1 at a = 1.

    Examples:
        >>> expected_tokens(sympy.Rational(1, 2), 2), expected_tokens(sympy.Integer(1), 4)
        (7/4, 5)
    """
    if accept == 1:
        return sympy.Integer(k + 1)
    return (1 - accept ** (k + 1)) / (1 - accept)


@dataclasses.dataclass(frozen=True, slots=True)
class Speculative:
    """Speculative decoding at context `context`: k draft decode steps (contexts S .. S+k-1,
    summed as `series` does), then one target step verifying k + 1 tokens a sequence.

    the verify step is bracketed: at most the target's decode step at B·(k+1) sequences (its
    FLOPs and weight reads are the verify's, but each of the k + 1 rows reads its sequence's
    KV cache, where a fused verify reads it once: `t_verify`), and at least that step less
    the k extra cache reads at the HBM's bandwidth, and at least one decode step
    (`t_verify_low`); the time per token and the speedup are given at both ends. The draft
    runs on the same chips, split the same way."""

    draft: str
    k: int
    accept: sympy.Expr
    context: int
    t_draft: sympy.Expr
    t_verify: sympy.Expr
    tokens_per_step: sympy.Expr
    t_per_token: sympy.Expr
    speedup: sympy.Expr
    t_verify_low: sympy.Expr
    speedup_high: sympy.Expr
    caches_fit: sympy.Expr | None = None  # sequences at P + G whose caches fit beside both models' weights


@dataclasses.dataclass(frozen=True, slots=True)
class Request:
    """A request's serving quantities (the module docstring); `to_dict` and `table` print them."""

    name: str
    chip: str
    chips: sympy.Expr
    prompt: int
    generate: int
    batch: int
    tpot: sympy.Expr  # in S, the context
    ttft: sympy.Expr
    t_request: sympy.Expr
    pieces: tuple[Piece, ...]
    tokens_per_s: sympy.Expr
    tokens_per_s_per_chip: sympy.Expr
    requests_per_s: sympy.Expr
    tpot_steady: sympy.Expr
    tokens_per_s_steady: sympy.Expr
    requests_per_s_steady: sympy.Expr
    kv_caches_fit: sympy.Expr | None
    tpot_slo: sympy.Expr | None
    max_batch: sympy.Expr | None
    max_batch_bound: str | None
    speculative: Speculative | None
    context: int | None = None  # the model's context (max positions); a request past it is said
    weights_fit: bool = True  # the weights alone within the chips' usable HBM
    touched_experts: bool = False  # a mixture's decode reads only the experts its batch touches (stated)
    latency: tuple[LatencyBound, ...] | None = None  # under a strategy: the decode step's collectives
    chunked: chunking.Chunked | None = None  # with a chunk size: chunked prefill (chunked.py)
    windowed: tuple[str, ...] = ()  # a sliding window's and soft caps' conventions (windows.py)
    storage: tuple[str, ...] = ()  # the weights' and KV cache's formats and scales (models/quant.py), where not bf16

    @property
    def past_context(self) -> bool:
        """Whether the last token's context, P + G - 1, is past the model's context."""
        return contexts.past(self.prompt + self.generate - 1, self.context)

    def tpot_at(self, context: int) -> sympy.Expr:
        """The decode step's time at a context of `context` tokens."""
        return self.tpot.subs(dim_symbol("S"), context)

    def decode_formula(self) -> sympy.Expr | None:
        """The decode steps' total, sum of tpot(P + g) over g = 0 .. G-1, as a formula in the
        request's P and G (the symbols P and G here, not the model's dims), where one piece
        of the roofline holds over the whole range: G c0 + c1 (G P + G (G - 1)/2). None
        where the roofs cross inside it (the total is then the pieces' sums)."""
        if len(self.pieces) != 1:
            return None
        line, (P, G) = self.pieces[0].roof, sympy.symbols("P G", positive=True, integer=True)
        S = dim_symbol("S")
        return line.coeff(S, 0) * G + line.coeff(S, 1) * (G * P + G * (G - 1) / 2)

    def quantities(self) -> dict[str, sympy.Expr | None]:
        """Each figure by name (in seconds, tokens/s, requests/s; counts)."""
        P, G = self.prompt, self.generate
        out: dict[str, sympy.Expr | None] = {
            "ttft": self.ttft, "tpot_first": self.tpot_at(P), "tpot_last": self.tpot_at(P + G - 1),
            "t_request": self.t_request, "tokens_per_s": self.tokens_per_s,
            "tokens_per_s_per_chip": self.tokens_per_s_per_chip, "requests_per_s": self.requests_per_s,
            "tpot_steady": self.tpot_steady, "tokens_per_s_steady": self.tokens_per_s_steady,
            "requests_per_s_steady": self.requests_per_s_steady, "kv_caches_fit": self.kv_caches_fit}
        if self.tpot_slo is not None:
            out["max_batch"] = self.max_batch
        if self.chunked is not None:
            ch = self.chunked
            out.update(chunked_ttft=ch.ttft, chunked_ttft_alone=ch.ttft_alone, chunked_tpot_first=ch.step_at(0),
                       chunked_tpot_last=ch.step_at(ch.chunks - 1),
                       chunked_tpot_plain=ch.tpot_plain, chunked_busy=ch.busy, chunked_tokens_per_s=ch.tokens_per_s,
                       chunked_tokens_per_s_per_chip=ch.tokens_per_s / self.chips,
                       chunked_requests_per_s=ch.requests_per_s)
        if self.speculative is not None:
            sp = self.speculative
            out.update(spec_caches_fit=sp.caches_fit, spec_tokens_per_step=sp.tokens_per_step,
                       spec_t_draft=sp.t_draft, spec_t_verify=sp.t_verify, spec_t_per_token=sp.t_per_token,
                       spec_speedup=sp.speedup, spec_t_verify_low=sp.t_verify_low,
                       spec_speedup_high=sp.speedup_high)
        return out

    def to_dict(self) -> dict:
        """One JSON object: the request, each figure, the pieces of the sum and the conventions."""
        out = {"model": self.name, "chip": self.chip, "chips": json_value(self.chips), "prompt": self.prompt,
               "generate": self.generate, "B": self.batch, "tpot_formula": str(self.tpot),
               "decode_total_formula": None if self.decode_formula() is None else str(self.decode_formula()),
               "pieces": [{"contexts": [p.first, p.last], "roof": str(p.roof), "sum": json_value(p.total)}
                          for p in self.pieces]}
        out.update({k: json_value(v) for k, v in self.quantities().items()})
        out["context_limit"], out["past_context"] = self.context, self.past_context
        out["weights_fit"] = self.weights_fit
        if self.tpot_slo is not None:
            out["tpot_slo"] = json_value(self.tpot_slo)
            out["max_batch_bound"] = self.max_batch_bound
        if self.speculative is not None:
            out["speculative"] = {"draft": self.speculative.draft, "k": self.speculative.k,
                                  "accept": json_value(self.speculative.accept),
                                  "context": self.speculative.context}
        if self.chunked is not None:
            out["chunked"] = {"chunk": self.chunked.chunk, "chunks": self.chunked.chunks, "last": self.chunked.last,
                              "context": json_value(self.chunked.context), "step_formula": str(self.chunked.step),
                              "prefill_bound": self.chunked.prefill_bound}
        if self.latency is not None:
            out["latency_bound"] = {"collectives": [b.to_dict() for b in self.latency],
                                    "step_latency_bound": self.step_latency_bound, "memory": NO_MEMORY_LATENCY}
        out["conventions"] = list(self.conventions())
        return out

    @property
    def step_latency_bound(self) -> bool | None:
        """Whether any of the decode step's collectives is latency-bound at the batch given
        (None with no strategy, or where a link's hop latency is unknown)."""
        return None if self.latency is None else step_bound(self.latency)

    def _chunked_rows(self) -> list[tuple[str, str]]:
        ch = self.chunked
        if ch is None:
            return []
        n, C, B = ch.chunks, ch.chunk, self.batch
        rows = [("chunked_ttft", f"{seconds(ch.ttft)}  ({n} mixed steps of C = {C} prompt tokens"
                                 + (f", the last {ch.last}" if ch.last != C else "") + f", beside B = {B} decoding; "
                                 f"vs {seconds(ch.ttft_alone)} for the prompt prefilled alone in one step)"),
                ("chunked_tpot", f"{seconds(ch.step_at(0))} (first chunk) .. {seconds(ch.step_at(n - 1))} (last) "
                                 f"while a chunk is in flight; {seconds(ch.tpot_plain)} with none  (the decoding "
                                 f"sequences at S = {number(ch.context)})"),
                ("chunked_step", f"{pretty(ch.step)}  (seconds; a full chunk's mixed step, c = 0 .. {n - 1} the "
                                 "chunk's index)"),
                ("chunked_tokens_per_s", f"{number(ch.tokens_per_s, 6)} "
                                         f"({number(ch.tokens_per_s / self.chips, 6)} a chip), "
                                         f"{number(ch.requests_per_s, 6)} requests/s  (steady state: "
                                         f"f = B x {n}/G = {number(ch.busy, 4)}, the share of steps a chunk rides "
                                         "in, at most 1)")]
        if ch.prefill_bound:
            rows.append(("chunked_bound", f"prefill-bound: {n} chunks a request and one prefill at a time admit a "
                                          f"request every {n} steps, fewer than B = {B} decoding ({number(ch.busy, 4)} "
                                          f"> 1); tokens/s = G / chunked_ttft"))
        return rows

    def _latency_rows(self) -> list[tuple[str, str]]:
        return [] if self.latency is None else latency_rows(self.latency, self.chip, self.batch)

    def conventions(self) -> tuple[str, ...]:
        extra = "speculative decoding: " + (Speculative.__doc__ or "").split("\n\n")[1].replace("\n    ", " ").strip()
        # a strategy's step (its exposed collectives, their latency bounds); a tpot target's max_batch
        applies = {None, "strategy" if self.latency is not None else None, "slo" if self.tpot_slo is not None else None}
        said = tuple(text for when, text in CONVENTIONS if when in applies)
        return (said + ((TOUCHED_EXPERTS,) if self.touched_experts else ())
                + ((extra,) if self.speculative is not None else ())
                + (chunking.CONVENTIONS if self.chunked is not None else ())
                + self.storage + self.windowed)

    def _decode_text(self) -> str:
        formula = self.decode_formula()
        if formula is not None:
            return f"{pretty(formula)}  (seconds; P prompt and G generated tokens, while this roof holds)"
        return "; ".join(f"S = {p.first} .. {p.last}: {seconds(p.total)} at {pretty(p.roof)} a step"
                         for p in self.pieces) + "  (the roofs cross inside the range)"

    def table(self) -> str:
        """The figures as text, each with what it is measured at."""
        P, G, B = self.prompt, self.generate, self.batch
        rows = [("request", f"{self.name} on {number(self.chips)} x {self.chip}: B = {B}, P = {P} prompt tokens, "
                            f"G = {G} generated"),
                ("ttft", f"{seconds(self.ttft)}  (prefill of {P} tokens x {B} sequences)"),
                ("tpot", f"{seconds(self.tpot_at(P))} at S = {P} .. {seconds(self.tpot_at(P + G - 1))} at "
                         f"S = {P + G - 1}"),
                ("t_request", f"{seconds(self.t_request)}  (ttft + {G} decode steps, S = {P} .. {P + G - 1})"),
                ("decode_total", self._decode_text()),
                ("tokens_per_s", f"{number(self.tokens_per_s, 6)} tokens/s"
                                 + (f" ({number(self.tokens_per_s_per_chip, 6)} a chip)" if self.chips > 1 else "")
                                 + "  (lockstep: G x B / t_request)"),
                ("requests_per_s", f"{number(self.requests_per_s, 6)} requests/s  (lockstep: B / t_request)"),
                ("tpot_steady", f"{seconds(self.tpot_steady)}  (continuous batching: S = {P} + ({G} - 1)/2)"),
                ("tokens_per_s_steady", f"{number(self.tokens_per_s_steady, 6)} tokens/s  (B / tpot_steady)"),
                ("requests_per_s_steady", f"{number(self.requests_per_s_steady, 6)} requests/s  "
                                          "(B / (G x tpot_steady); prefill not counted)")]
        if self.kv_caches_fit is not None:
            rows.append(("kv_caches_fit", f"{self.kv_caches_fit}  (sequences at S = {P + G} beside the weights)"))
            if not self.weights_fit:
                rows.append(("fits", "NO: the weights alone are more than the chips' usable HBM: more chips, a "
                                     "strategy, or smaller --weights"))
            elif self.kv_caches_fit == 0:
                rows.append(("fits", f"NO: not one sequence's KV cache at S = {P + G} fits beside the weights"))
            elif self.kv_caches_fit < B:
                rows.append(("fits", f"NO: B = {B} sequences at S = {P + G} need more HBM than the weights leave"))
        if self.tpot_slo is not None:
            rows.append(("max_batch", f"{self.max_batch}  (tpot at S = {P + G} at most {seconds(self.tpot_slo)}; "
                                      f"bound by {self.max_batch_bound})"))
        if self.past_context:
            assert self.context is not None  # past_context says so
            rows.insert(1, ("context", contexts.warning(self.name, P + G - 1, self.context,
                                                        "the request's last token's context S")))
        rows += self._latency_rows()
        rows += self._chunked_rows()
        sp = self.speculative
        if sp is not None:
            rows += [("draft", f"{sp.draft}, k = {sp.k}, acceptance {number(sp.accept)}, at S = {sp.context}"),
                     ("caches_fit", f"{sp.caches_fit}  (sequences at S = {P + G} beside both models' weights, "
                                    "their caches both kept)"),
                     ("tokens_per_step", f"{number(sp.tokens_per_step, 6)}  ((1 - a^(k+1))/(1 - a))"),
                     ("t_draft", f"{seconds(sp.t_draft)}  ({sp.k} draft decode steps)"),
                     ("t_verify", f"{seconds(sp.t_verify_low)} .. {seconds(sp.t_verify)}  (bounds: the target's "
                                  f"step at B x {sp.k + 1} less and with its {sp.k} extra cache reads)"),
                     ("t_per_token", f"{seconds((sp.t_draft + sp.t_verify_low) / sp.tokens_per_step)} .. "
                                     f"{seconds(sp.t_per_token)}  (vs tpot {seconds(self.tpot_at(sp.context))})"),
                     ("speedup", f"{number(sp.speedup, 4)} .. {number(sp.speedup_high, 4)}  (over plain decode "
                                 "at the same context; the t_verify bounds')")]
        width = max(len(k) for k, _ in rows) + 2
        lines = [f"{k:<{width}}{v}" for k, v in rows]
        lines.append("")
        lines += wrapped("conventions: " + "; ".join(self.conventions()))
        return "\n".join(lines)


def request(name: str, chip: str | Machine, prompt: int, generate: int, batch: int = 1, *,
            strategy: str | None = None, mesh: str | None = None, chips: int = 1, weights: str = "bf16",
            kv: str = "bf16", tpot_slo: float | Fraction | None = None, draft: str | None = None,
            draft_tokens: int = 4, accept: float | Fraction | None = None, models_file: str | None = None,
            hbm_usable: float = 0.9, chunk: int | None = None) -> Request:
    """A request of `prompt` tokens in and `generate` out, `batch` of them in lockstep, on
    `chip` (the module docstring).

    Examples:
        >>> r = request("llama-3-8b", "h100", 1000, 500, 8)
        >>> r.t_request == r.ttft + sum(r.tpot_at(1000 + g) for g in range(500))
        True
    """
    for what, value in (("the prompt", prompt), ("the tokens generated", generate), ("the batch", batch)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{what} must be a whole number of at least 1, got {value!r}")
    for who in (name, draft):
        if who is not None and named(who, models_file) is None:
            raise SpecError(f"serving costs a named model's prefill and decode programs, each built from its "
                            f"models.json entry; {who!r} is a program: give a model's name")
    if chunk is not None and (strategy is not None or mesh is not None):
        raise SpecError("--chunk costs a mixed step unsharded (--chips N splits it evenly): a strategy's "
                        "collectives are not yet costed for it; drop --strategy")
    target = chip if isinstance(chip, Machine) else machine(chip)
    if target is None:
        raise SpecError("a request's times need a chip (--chip)")
    common = dict(strategy=strategy, mesh=mesh, chips=chips, weights=weights, kv=kv, models_file=models_file,
                  hbm_usable=hbm_usable)
    S, B = dim_symbol("S"), dim_symbol("B")
    P, G = prompt, generate

    def decode(b: int | None, s: int | None, who: str = name) -> Model:
        return model(who, "decode", target, {"B": b, "S": s}, **common)  # type: ignore[arg-type]

    step = decode(batch, None)
    tpot = step_time(step)
    ttft = step_time(model(name, "prefill", target, {"B": batch, "T": P}, **common))  # type: ignore[arg-type]
    summed, pieces = series(tpot, S, P, P + G - 1)
    t_request = ttft + summed
    n_chips = step._chips_in_all
    steady = tpot.subs(S, sympy.Rational(2 * P + G - 1, 2))
    last = decode(None, P + G)
    # a batch splits evenly over the data-parallel replicas: the largest batches are whole multiples of them
    split = replicas(last.structured, last.about.get("strategy", {}))
    fit = last.max_batch()
    fit = None if fit is None else fit - fit % split
    slo = None if tpot_slo is None else _rational(tpot_slo, "--tpot-slo")
    most, bound = (None, None) if slo is None else _max_batch(step_time(last), B, slo, fit)
    most = None if most is None else most - most % split
    weights_fit = not bool(last.hbm_left_per_chip.subs(B, 0) < 0)
    if not weights_fit and bound is not None and bound.startswith("memory"):
        bound = "memory (the weights alone are more than the chips' usable HBM)"
    spec = None
    if draft is not None:
        rate = _rational(accept if accept is not None else 0.8, "--accept", zero=True)
        spec = _speculative(draft, draft_tokens, rate, P + G // 2, batch, tpot, decode, target.bandwidth())
        spec = dataclasses.replace(spec, caches_fit=_fit_beside(last, decode(None, P + G, draft), split))
    elif accept is not None:
        raise SpecError("--accept goes with --draft MODEL: the draft's acceptance rate")
    mixed = None
    if chunk is not None:
        alone = model(name, "prefill", target, {"B": 1, "T": None}, **common)  # type: ignore[arg-type]
        mixed = chunking.chunked(step, decode(1, None), alone, P, G, batch, chunk, n_chips, series)
    tokens = sympy.Integer(G * batch)
    return Request(name=step.about.get("name", name), chip=target.name, chips=n_chips, prompt=P, generate=G,
                   batch=batch, tpot=tpot, ttft=ttft, t_request=t_request, pieces=pieces,
                   tokens_per_s=tokens / t_request, tokens_per_s_per_chip=tokens / t_request / n_chips,
                   requests_per_s=batch / t_request, tpot_steady=steady, tokens_per_s_steady=batch / steady,
                   requests_per_s_steady=batch / (G * steady), kv_caches_fit=fit, tpot_slo=slo, max_batch=most,
                   max_batch_bound=bound, speculative=spec,
                   context=(named(name, models_file) or {}).get("sizes", {}).get("context"),
                   weights_fit=weights_fit,
                   touched_experts=touches_experts(step.structured),
                   latency=None if strategy is None else bounds(last, batch), chunked=mixed,
                   storage=tuple(step.about.get("storage", ())), windowed=tuple(windows.stated(step.structured)))


def step_time(m: Model) -> sympy.Expr:
    """A step's time as a request waits it: the roofline's t_step, and under a strategy
    t_step_exposed (the activations' collectives, tensor parallelism's AllReduces, on the
    critical path after the work; strategy_costs.py), as an engine's tpot measures them."""
    return strategy_costs.times(m)["t_step_exposed"] if strategy_costs.collectives(m) else m.t_step


def _rational(value: float | Fraction | str, flag: str, zero: bool = False) -> sympy.Rational:
    """A user's number as an exact rational (through `fractions`, never sympify); positive,
    or with `zero` at least 0."""
    try:
        exact = Fraction(str(value)) if not isinstance(value, Fraction) else value
    except (ValueError, ZeroDivisionError):
        raise SpecError(f"{flag} takes a number, got {value!r}") from None
    if exact < 0 or (exact == 0 and not zero):
        raise SpecError(f"{flag} must be {'at least 0' if zero else 'positive'}, got {value!r}")
    return sympy.Rational(exact.numerator, exact.denominator)


def _max_batch(step: sympy.Expr, B: sympy.Symbol, slo: sympy.Expr,
               fit: sympy.Expr | None) -> tuple[sympy.Expr, str]:
    """The largest whole B with `step` (piecewise linear in B, rising) at most `slo`, and
    within `fit` (the memory's largest batch): solved on each piece between the roofs'
    crossings, not tried batch by batch. A step not piecewise linear in B (a mixture of
    experts' decode, reading the E*(1 - (1 - A/E)**B) experts its batch touches: rising in
    B, but not linearly) is searched instead: doubling, then halving, about 2 log2(B) steps."""
    if any(isinstance(node, Power) for node in sympy.preorder_traversal(step)):
        return _within_fit(_rising_search(step, B, slo), fit)
    edges = sorted({sympy.Integer(1)} | {c for c in crossings(step, B) if c > 1})
    best: sympy.Expr | None = None
    if step.subs(B, 1) > slo:
        best = sympy.Integer(0)
    for k, start in enumerate(edges):
        if best is not None:
            break
        line = linear_at(step, B, start + 1 if k + 1 == len(edges) else (start + edges[k + 1]) / 2)
        slope, fixed = line.coeff(B, 1), line.coeff(B, 0)
        if slope < 0:
            raise SpecError(f"the decode step's time falls as the batch grows ({line}): no batch bound follows")
        if k + 1 < len(edges) and step.subs(B, edges[k + 1]) <= slo:
            continue  # the target still met at this piece's end
        if slope == 0:
            break  # the last piece is flat and within the target: no latency bound
        best = sympy.Integer(int(sympy.floor((slo - fixed) / slope)))
    return _within_fit(best, fit)


def _within_fit(best: sympy.Expr | None, fit: sympy.Expr | None) -> tuple[sympy.Expr, str]:
    if fit is not None and (best is None or fit < best):
        if fit == 0:
            return fit, "memory (not one sequence's KV cache fits beside the weights in the usable HBM)"
        return fit, "memory (the KV caches and weights fit the usable HBM)"
    if best is None:
        raise SpecError("the decode step's time does not grow with the batch, and memory gives no bound")
    return best, "latency (tpot at most the target)"


_FARTHEST_BATCH = 2**50  # past any batch a chip could hold: no latency bound short of it


def _rising_search(step: sympy.Expr, B: sympy.Symbol, slo: sympy.Expr) -> sympy.Expr | None:
    """The largest whole B with `step` at most `slo`, for a step that rises with B (checked
    at every batch tried: a fall is refused, not searched past); None where none below
    _FARTHEST_BATCH exceeds it."""
    def at(b: int) -> sympy.Expr:
        value = step.xreplace({B: sympy.Integer(b)})
        if not value.is_number:
            raise SpecError(f"the step's time is not a number at B = {b} ({value}): give every other size "
                            "and a chip with numeric figures")
        return value

    if at(1) > slo:
        return sympy.Integer(0)
    low, high, last = 1, 2, at(1)
    while (now := at(high)) <= slo:
        if now < last:
            raise SpecError(f"the decode step's time falls as the batch grows (at B = {high}): no batch bound follows")
        if high >= _FARTHEST_BATCH:
            return None
        low, high, last = high, 2 * high, now
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if at(mid) <= slo else (low, mid)
    return sympy.Integer(low)


def _fit_beside(target: Model, draft: Model, split: int) -> sympy.Expr | None:
    """Sequences whose target and draft caches both fit a chip's usable HBM beside both
    models' weights (each model's memory linear in B), a whole multiple of `split`."""
    B = dim_symbol("B")
    left = sympy.expand(target.hbm_left_per_chip - draft.hbm_per_chip)
    if left.free_symbols != {B} or sympy.degree(left, B) != 1:
        return None
    most = int(sympy.floor(-left.coeff(B, 0) / left.coeff(B, 1)))
    return sympy.Integer(max(0, most - most % split))


MAX_DRAFT_TOKENS = 256  # alpha**(k + 1) is exact: a bound keeps it quick


def _speculative(draft: str, k: int, accept: sympy.Rational, context: int, batch: int,
                 tpot: sympy.Expr, decode: Callable[..., Model], bandwidth: sympy.Expr) -> Speculative:
    if not isinstance(k, int) or not 1 <= k <= MAX_DRAFT_TOKENS:
        raise SpecError(f"--draft-tokens takes a whole number from 1 to {MAX_DRAFT_TOKENS} (drafts run a few tokens "
                        f"ahead), got {k!r}")
    if accept > 1:
        raise SpecError(f"--accept is a probability: at most 1, got {number(accept)}")
    vocab = [m.at(dim_symbol("V")) for m in (decode(batch, context), decode(batch, context, draft))]
    if vocab[0] != vocab[1]:
        raise SpecError(f"--draft {draft}: its vocabulary of {vocab[1]} tokens is not the target's {vocab[0]}: a draft "
                        "proposes the target's tokens, so the two share one tokenizer")
    S = dim_symbol("S")
    t_draft, _ = series(step_time(decode(batch, None, draft)), S, context, context + k - 1)
    t_verify = step_time(decode(batch * (k + 1), context))
    # a chip's KV bytes for the batch at this context: the B-proportional part of its memory
    per_chip = decode(None, context).hbm_per_chip
    kv_chip = sympy.expand(per_chip).coeff(dim_symbol("B"), 1) * batch
    step = tpot.subs(S, context)
    t_low = sympy.Max(step, t_verify - k * kv_chip / bandwidth)
    tokens = expected_tokens(accept, k)
    per_token = (t_draft + t_verify) / tokens
    return Speculative(draft=draft, k=k, accept=accept, context=context, t_draft=t_draft, t_verify=t_verify,
                       tokens_per_step=tokens, t_per_token=per_token, speedup=step / per_token,
                       t_verify_low=t_low, speedup_high=step * tokens / (t_draft + t_low))
