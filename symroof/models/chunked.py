"""Chunked prefill (Sarathi-Serve, vLLM's chunked prefill): a prompt of P tokens is
prefilled C tokens a step, each chunk riding in a decode step of the B sequences already
decoding, so the weights are read once for both.

A mixed step is derived from the two programs' analyses, not by adding two step times:
its T_math is the decode step's plus the chunk's (a prefill of C tokens, its attention over
its own C) plus the chunk's attention to the c·C prompt tokens before it (C queries x c·C
keys, at the decode step's T_math a query a token of context); its T_comms is the decode
step's (the weights once, the batch's activations and KV reads) plus the chunk's activations
and KV writes (the prefill's T_comms less its weights', the part free of T) plus the c·C
earlier tokens' KV read once. The step takes the larger, over the chips (an even split).

Assumed, and said in the output: one prefill in flight at a time; the decoding sequences'
contexts at their steady-state mean P + (G - 1)/2 (as continuous batching's figures take
them); the full chunks first, the remainder last; no strategy (a mesh's collectives are not
yet costed for a mixed step: refused)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import sympy

from ..errors import SpecError
from ..ir import dim_symbol
from .templates import touches_experts
from .whole import Model

CHUNK_INDEX = sympy.Symbol("c", integer=True, nonnegative=True)

CONVENTIONS = (
    "chunked prefill: the prompt prefilled C tokens a step in ceil(P/C) mixed steps, each carrying the B decoding "
    "sequences too (the weights read once for both); one prefill in flight at a time; the decoding sequences at "
    "their mean context P + (G-1)/2; a chunk's attention covers its own C tokens (all C x C scores, as a prefill's "
    "are counted) and the c·C before it (their KV read once a step), not the later chunks': the chunks' attention "
    "FLOPs total less than one prefill's full P x P; the last chunk takes the remainder",
    "chunked steady state: a slot is held for G decode steps, so B/G requests a step start their ceil(P/C) chunks: "
    "a fraction f = B·ceil(P/C)/G of the steps carry a chunk (above 1: prefill-bound, a step a chunk, fewer than B "
    "sequences decoding, each step still timed with B)",
)


@dataclasses.dataclass(frozen=True, slots=True)
class Parts:
    """A step's roofs and counts, in the chunk index c and its size: T_math, T_comms,
    FLOPs and HBM bytes."""

    t_math: sympy.Expr
    t_comms: sympy.Expr
    flops: sympy.Expr
    bytes: sympy.Expr


def mixed(decode: Model, one: Model, prefill: Model, chunk: int, size: int, context: sympy.Expr) -> Parts:
    """The mixed step of a chunk of `size` tokens, the c-th (c = CHUNK_INDEX; c·`chunk`
    prompt tokens before it), beside `decode`'s batch (B a number, S a symbol set to
    `context`); `one` is the decode model at B = 1 with S a symbol (a query's attention a
    token of context, a sequence's KV bytes a token), `prefill` at B = 1 with T a symbol."""
    S, T = dim_symbol("S"), dim_symbol("T")
    d, q, p = decode.step_analysis, one.step_analysis, prefill.step_analysis
    before = CHUNK_INDEX * chunk
    out = {}
    for name, work in (("t_math", True), ("t_comms", False), ("flops", True), ("bytes", False)):
        batch = sympy.expand(getattr(d, name)).subs(S, context)
        per_token = sympy.expand(getattr(q, name))
        per_token = _slope(per_token, S, name)
        own = sympy.expand(getattr(p, name))
        if work:  # each of the chunk's queries attends to every earlier prompt token
            out[name] = batch + own.subs(T, size) + size * before * per_token
        else:  # the weights already read by the decode step; the earlier tokens' KV read once
            if not own.is_polynomial(T) or sympy.degree(own, T) > 1:
                raise SpecError(f"the prefill's {name} is not linear in T ({own}): its weights' part cannot be told")
            out[name] = batch + own.subs(T, size) - own.subs(T, 0) + before * per_token
    return Parts(**out)


def _slope(expr: sympy.Expr, var: sympy.Symbol, name: str) -> sympy.Expr:
    if expr.free_symbols - {var} or not expr.is_polynomial(var) or sympy.degree(expr, var) > 1:
        raise SpecError(f"the decode step's {name} is not linear in the context S with numbers for the rest ({expr})")
    return expr.coeff(var, 1)


def step_time(parts: Parts, chips: sympy.Expr) -> sympy.Expr:
    """The mixed step's roofline time: the larger roof, over the chips."""
    return sympy.Max(parts.t_math, parts.t_comms) / chips


@dataclasses.dataclass(frozen=True, slots=True)
class Chunked:
    """Chunked prefill's figures (the module docstring)."""

    chunk: int
    chunks: int          # ceil(P/C)
    last: int            # the last chunk's tokens
    context: sympy.Expr  # the decoding sequences' context
    step: sympy.Expr     # a full chunk's mixed step, in c
    step_last: sympy.Expr  # the last chunk's, at c = chunks - 1
    ttft: sympy.Expr
    ttft_alone: sympy.Expr  # the same prompt prefilled alone in one step, no decode beside it
    tpot_plain: sympy.Expr  # a decode step with no chunk, at `context`
    busy: sympy.Expr     # the fraction of steps carrying a chunk, B·chunks/G
    tokens_per_s: sympy.Expr
    requests_per_s: sympy.Expr

    @property
    def prefill_bound(self) -> bool:
        return bool(self.busy > 1)

    def step_at(self, c: int) -> sympy.Expr:
        """The c-th chunk's mixed step (c = 0 .. chunks - 1)."""
        return self.step_last if c == self.chunks - 1 else self.step.subs(CHUNK_INDEX, c)


def chunked(decode: Model, one: Model, prefill: Model, prompt: int, generate: int, batch: int, chunk: int,
            chips: sympy.Expr, summed: Callable[[sympy.Expr, sympy.Symbol, int, int], tuple[sympy.Expr, tuple]]
            ) -> Chunked:
    """Chunked prefill of a `prompt`-token prompt in chunks of `chunk` beside `batch`
    decoding sequences; `summed` is serving.series (the closed-form sum over c)."""
    if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
        raise SpecError(f"--chunk takes a whole number of prompt tokens, at least 1, got {chunk!r}")
    if touches_experts(decode.structured):
        # the decode step reads only the experts its B tokens touch; a chunk's tokens touch
        # others, which neither program's weights say: refused rather than undercounted
        raise SpecError("chunked prefill of a mixture of experts is not costed yet: a mixed step reads the experts "
                        "both the chunk's and the batch's tokens touch, which symroof does not derive")
    n = -(-prompt // chunk)
    last = prompt - (n - 1) * chunk
    context = sympy.Rational(2 * prompt + generate - 1, 2)
    full = step_time(mixed(decode, one, prefill, chunk, chunk, context), chips)
    if full.free_symbols - {CHUNK_INDEX}:
        raise SpecError(f"a mixed step's time needs numbers for everything but the chunk's index ({full}): give "
                        "a chip whose figures are numbers (not --chip symbolic)")
    tail = step_time(mixed(decode, one, prefill, chunk, last, context), chips).subs(CHUNK_INDEX, n - 1)
    head, _ = summed(full, CHUNK_INDEX, 0, n - 2)
    ttft = head + tail
    S = dim_symbol("S")
    plain = decode.t_step.subs(S, context)
    busy = sympy.Rational(batch * n, generate)
    if busy <= 1:  # per step: B decode tokens; on average B/G requests' chunks, the rest plain decode steps
        per_step = sympy.Rational(batch, generate) * ttft + (1 - busy) * plain
        tokens = batch / per_step
    else:  # every step carries a chunk: a request admitted every `n` steps, G tokens each
        tokens = generate / ttft
    return Chunked(chunk=chunk, chunks=n, last=last, context=context, step=full, step_last=tail, ttft=ttft,
                   ttft_alone=prefill.t_step.subs(dim_symbol("T"), prompt), tpot_plain=plain, busy=busy,
                   tokens_per_s=tokens, requests_per_s=tokens / generate)
