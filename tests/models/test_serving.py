"""A request's serving quantities (symroof/models/serving.py), each against a derivation
written here: step times from symroof.model at the sizes asked, memory by arithmetic from
the model's bytes and the chip's capacity, sums by a loop over the steps."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

import symroof
from symroof.errors import SpecError
from symroof.ir import dim_symbol
from symroof.models import serving

S = dim_symbol("S")


def _decode_step(name: str, b: int, s: int, **kw: object) -> sympy.Expr:
    return symroof.model(name, "decode", "h100", {"B": b, "S": s}, **kw).t_step  # type: ignore[arg-type]


def test_t_request_is_the_sum_of_its_steps() -> None:
    r = serving.request("llama-3-8b", "h100", 1000, 500, 8)
    ttft = symroof.model("llama-3-8b", "prefill", "h100", {"B": 8, "T": 1000}).t_step
    assert r.ttft == ttft
    # the independent check: each of the 500 decode steps costed by the engine at its own context
    steps = [_decode_step("llama-3-8b", 8, 1000 + g) for g in range(500)]
    assert r.t_request == ttft + sympy.Add(*steps)  # exact: rationals
    assert r.tokens_per_s == sympy.Integer(500 * 8) / r.t_request
    assert r.requests_per_s == 8 / r.t_request
    assert r.tpot_steady == _decode_step("llama-3-8b", 8, 1000 + 250) - (
        _decode_step("llama-3-8b", 8, 1250) - _decode_step("llama-3-8b", 8, 1249)) / 2  # S = 1249.5, linear


def test_t_request_with_a_crossover_inside_the_range() -> None:
    # llama-3-8b decode on the h100: the math roof grows as 2*B*(264192*S + ...)/peak, the memory
    # roof as (131072*B*S + weights + activations)/bw. At B = 1024 the matmuls' FLOPs (15.5 ms) outweigh
    # the weights' and activations' reads (about 8.9 ms) at a short context, and the KV reads (131072
    # bytes against 528384 FLOPs a token of context: intensity 4, far under the H100's 295) take over
    # as S grows, past S = 179: compute-bound first, memory-bound later.
    B, P, G = 1024, 50, 300
    r = serving.request("llama-3-8b", "h100", P, G, B)
    assert len(r.pieces) == 2
    early, late = r.pieces
    # the later roof is the HBM's: a token of context more reads 131072 bytes of KV cache a sequence,
    # at the H100 SXM's 3.35e12 bytes/s
    assert late.roof.coeff(S, 1) == sympy.Rational(131072 * B, 335 * 10**10)
    # the earlier is the FLOPs': the 528384 attention FLOPs a token of context at 989e12 FLOP/s (at least)
    assert sympy.Rational(528384 * B, 989 * 10**12) <= early.roof.coeff(S, 1) < late.roof.coeff(S, 1)
    assert (early.first, early.last, late.first, late.last) == (P, 179, 180, P + G - 1)
    steps = [_decode_step("llama-3-8b", B, P + g) for g in range(G)]
    assert r.t_request == r.ttft + sympy.Add(*steps)


def test_series_is_closed_form() -> None:
    step = sympy.Max(3 * S + 1, 10 * S - 40)  # cross at S = 41/7
    total, pieces = serving.series(step, S, 0, 10)
    assert total == sum(max(3 * s + 1, 10 * s - 40) for s in range(11))
    assert [(p.first, p.last) for p in pieces] == [(0, 5), (6, 10)]
    with pytest.raises(SpecError, match="not linear in S"):
        serving.series(sympy.Max(S**2, S), S, 0, 3)
    # a mesh's step: compute and network terms added, each a Max of its own
    mesh = sympy.Max(S, 20 - S) + 2 * sympy.Max(1, S / 4)
    total, pieces = serving.series(mesh, S, 0, 30)
    assert total == sum(max(s, 20 - s) + 2 * max(sympy.Integer(1), sympy.Rational(s, 4)) for s in range(31))
    assert len(pieces) == 3


def test_kv_caches_fit_and_max_batch() -> None:
    P, G = 1000, 500
    r = serving.request("llama-3-8b", "h100", P, G, 8, tpot_slo=0.02)
    m = symroof.model("llama-3-8b", "decode", "h100")
    usable = sympy.Rational(9, 10) * 80 * 10**9  # the H100 SXM's 80 GB, 0.9 of it usable
    fit = sympy.floor((usable - m.weight_bytes) / (m.kv_bytes_per_token * (P + G)))
    assert r.kv_caches_fit == fit
    # the SLO bound: B whose step at S = P + G takes at most 20 ms, by trying batches here
    meets = [b for b in range(1, 400) if _decode_step("llama-3-8b", b, P + G) <= sympy.Rational(2, 100)]
    assert r.max_batch == min(max(meets), fit)
    assert r.max_batch_bound is not None


def test_max_batch_bound_by_latency() -> None:
    P, G = 1000, 500
    r = serving.request("llama-3-8b", "h100", P, G, 1, tpot_slo=0.006)
    meets = [b for b in range(1, 400) if _decode_step("llama-3-8b", b, P + G) <= sympy.Rational(6, 1000)]
    assert r.kv_caches_fit is not None and r.max_batch_bound is not None
    assert r.max_batch == max(meets) < r.kv_caches_fit
    assert r.max_batch_bound.startswith("latency")


def test_speculative_expectation_matches_monte_carlo() -> None:
    a, k = 0.8, 4
    rng = np.random.default_rng(29)
    draws = rng.random((200_000, k)) < a
    # tokens a target step yields: the drafts accepted before the first rejection, plus the target's own
    accepted = np.where(draws.all(axis=1), k, np.argmin(draws, axis=1))
    simulated = float(np.mean(accepted + 1))
    exact = float(serving.expected_tokens(sympy.Rational(4, 5), k))
    assert abs(simulated - exact) / exact < 0.01
    assert serving.expected_tokens(sympy.Integer(1), k) == k + 1
    assert serving.expected_tokens(sympy.Integer(0), k) == 1  # every draft rejected: the target's own token


def test_speculative_times() -> None:
    P, G, B, k = 1000, 500, 4, 3
    r = serving.request("llama-3-70b", "h100", P, G, B, chips=2, draft="llama-3-8b", draft_tokens=k, accept=0.5)
    sp = r.speculative
    assert sp is not None
    s = P + G // 2
    draft = sum(_decode_step("llama-3-8b", B, s + j, chips=2) for j in range(k))
    verify = _decode_step("llama-3-70b", B * (k + 1), s, chips=2)
    tokens = 1 + sympy.Rational(1, 2) + sympy.Rational(1, 4) + sympy.Rational(1, 8)
    assert sp.tokens_per_step == tokens
    assert sp.t_per_token == (draft + verify) / tokens
    assert sp.speedup == _decode_step("llama-3-70b", B, s, chips=2) / sp.t_per_token
    # the verify's lower bound: the k extra reads of each sequence's cache (327680 bytes a token of
    # context for llama-3-70b, half on each of the 2 chips) taken off at the H100's 3.35e12 bytes/s
    extra = k * sympy.Rational(327680 * B * s, 2) / (335 * 10**10)
    plain = _decode_step("llama-3-70b", B, s, chips=2)
    assert sp.t_verify_low == max(plain, verify - extra) < verify
    assert sp.speedup_high == plain * tokens / (draft + sp.t_verify_low) > sp.speedup


def test_bad_input_is_refused() -> None:
    with pytest.raises(SpecError, match="at least 1"):
        serving.request("llama-3-8b", "h100", 0, 10)
    with pytest.raises(SpecError, match="--accept is a probability"):
        serving.request("llama-3-8b", "h100", 10, 10, draft="llama-3-8b", accept=1.5)
    with pytest.raises(SpecError, match="--tpot-slo takes a number"):
        serving.request("llama-3-8b", "h100", 10, 10, tpot_slo="fast")  # type: ignore[arg-type]
    with pytest.raises(SpecError, match="--accept goes with --draft"):
        serving.request("llama-3-8b", "h100", 10, 10, accept=0.5)


def _cli(*argv: str) -> tuple[int, str, str]:
    import io

    from symroof.cli.command import main
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


def test_cli_serve_prints_the_request_and_its_conventions() -> None:
    import json
    code, out, _ = _cli("model", "llama-3-8b", "--serve", "--chip", "h100", "--prompt", "1000", "--generate", "500",
                        "--set", "B=8", "--tpot-slo", "0.02", "--json")
    assert code == 0
    got = json.loads(out)
    r = serving.request("llama-3-8b", "h100", 1000, 500, 8, tpot_slo=0.02)
    assert got["t_request"] == pytest.approx(float(r.t_request), rel=1e-12)
    assert got["max_batch"] == r.max_batch and got["kv_caches_fit"] == r.kv_caches_fit
    assert any(c.startswith("lockstep") for c in got["conventions"])
    code, text, _ = _cli("model", "llama-3-8b", "--serve", "--chip", "h100", "--prompt", "1000", "--generate", "500")
    assert code == 0 and "t_request" in text and "continuous batching" in text


@pytest.mark.parametrize("argv, message", [
    (("--serve", "--chip", "h100", "--prompt", "10"), "--serve needs --prompt P and --generate G"),
    (("--chip", "h100", "--prompt", "10"), "--prompt goes with --serve"),
    (("--serve", "--decode", "--chip", "h100", "--prompt", "10", "--generate", "5"), "drop --decode"),
    (("--serve", "--chip", "h100", "--prompt", "10", "--generate", "5", "--set", "S=4"), "--set B=... only"),
    (("--serve", "--chip", "h100", "--prompt", "10", "--generate", "5", "--tpot-slo", "x"), "--tpot-slo takes"),
    (("--serve", "--chip", "h100", "--prompt", "10", "--generate", "5", "--draft-tokens", "3"),
     "--draft-tokens goes with --draft MODEL"),
    (("--chip", "h100", "--draft-tokens", "3"), "--draft-tokens goes with --serve"),
])
def test_cli_serve_bad_input(argv: tuple[str, ...], message: str) -> None:
    code, _, err = _cli("model", "llama-3-8b", *argv)
    assert code == 2 and message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_on_a_mesh() -> None:
    # llama-3-70b, dp=2 x tp=4 on 8 H100s: the step adds compute and network terms, each a Max
    P, G, B = 1000, 40, 8
    r = serving.request("llama-3-70b", "h100", P, G, B, strategy="dp=2,tp=4", tpot_slo=0.03)
    # each step as a request waits it: t_step_exposed, the AllReduces on the critical path
    steps = [serving.step_time(symroof.model("llama-3-70b", "decode", "h100", {"B": B, "S": P + g},
                                             strategy="dp=2,tp=4")) for g in range(G)]
    assert r.t_request == r.ttft + sympy.Add(*steps)
    assert r.chips == 8
    # memory: a chip holds a quarter of the weights (tp=4) and its replica's half of the batch's
    # caches, a quarter of each (the 8 KV heads over tp=4): per chip (usable - weights/4) / (kv(S)/4)
    # sequences for its replica, twice that in all, and a whole multiple of the 2 replicas
    m = symroof.model("llama-3-70b", "decode", "h100")
    usable = sympy.Rational(9, 10) * 80 * 10**9
    per_replica = sympy.floor((usable - m.weight_bytes / 4) / (m.kv_bytes_per_token * (P + G) / 4))
    assert r.kv_caches_fit == 2 * per_replica - (2 * per_replica) % 2
    assert r.max_batch is not None and r.max_batch % 2 == 0


def test_speculative_caches_fit_beside_both_models() -> None:
    P, G = 1000, 500
    r = serving.request("llama-3-70b", "h100", P, G, 1, chips=4, draft="llama-3-8b")
    assert r.speculative is not None
    big, small = (symroof.model(n, "decode", "h100") for n in ("llama-3-70b", "llama-3-8b"))
    usable = sympy.Rational(9, 10) * 80 * 10**9 * 4  # four H100s, memory split evenly
    per_sequence = (big.kv_bytes_per_token + small.kv_bytes_per_token) * (P + G)
    assert r.speculative.caches_fit == sympy.floor((usable - big.weight_bytes - small.weight_bytes) / per_sequence)
    assert r.kv_caches_fit == sympy.floor((usable - big.weight_bytes) / (big.kv_bytes_per_token * (P + G)))


def test_decode_total_as_a_formula_in_p_and_g() -> None:
    r = serving.request("llama-3-8b", "h100", 1000, 500, 8)
    formula = r.decode_formula()
    assert formula is not None
    P, G = sympy.symbols("P G", positive=True, integer=True)
    assert formula.subs({P: 1000, G: 500}) == r.t_request - r.ttft
    # the same roof at another request inside its range: a loop over its steps
    assert formula.subs({P: 1100, G: 300}) == sympy.Add(*(r.tpot_at(1100 + g) for g in range(300)))
    crossed = serving.request("llama-3-8b", "h100", 50, 300, 1024)
    assert crossed.decode_formula() is None


def test_a_program_file_is_refused(tmp_path: object) -> None:
    import pathlib
    path = pathlib.Path(str(tmp_path)) / "m.sr"
    path.write_text(str(symroof.model("llama-3-8b", "decode").structured.program), encoding="utf-8")
    with pytest.raises(SpecError, match="is a program: give a model's name"):
        serving.request(str(path), "h100", 10, 10)


def test_a_draft_of_too_many_tokens_is_refused_in_one_line():
    # alpha**(k + 1) is kept exact: a bound on k keeps it quick (a hundred million hung)
    from symroof.models import serving
    with pytest.raises(SpecError, match="--draft-tokens takes a whole number from 1 to 256"):
        serving.request("llama-3-8b", "h100", 100, 10, draft="llama-3.2-1b", draft_tokens=10**8, accept=0.9)


def test_a_request_past_the_models_context_is_said():
    from symroof.models import serving
    from symroof.models.catalogue import get_model
    context = get_model("llama-3-8b")["sizes"]["context"]
    inside = serving.request("llama-3-8b", "h100", context - 500, 500)  # its last token at S = context - 1
    past = serving.request("llama-3-8b", "h100", context - 500, 502)
    assert not inside.past_context and "WARNING" not in inside.table()
    assert past.past_context and f"past LLaMA-3 8B's context of {context} tokens" in past.table()
    assert past.to_dict()["past_context"] is True and past.to_dict()["context_limit"] == context


@pytest.mark.parametrize(("mode", "dim"), [("decode", "S"), ("prefill", "T"), ("train", "T")])
def test_a_step_past_the_models_context_is_said(mode: str, dim: str) -> None:
    # LLaMA-3 8B's max_position_embeddings is 8192: a step at 8192 tokens is within it, at 8193 past it
    from symroof.cli import command as cli
    assert symroof.model("llama-3-8b").about["context_limit"] == 8192
    at, past = (symroof.model("llama-3-8b", mode, "h100", {"B": 1, dim: n}) for n in (8192, 8193))
    assert at.to_dict()["past_context"] is False and "WARNING" not in at.table()
    assert past.to_dict()["past_context"] is True and past.to_dict()["context_limit"] == 8192
    row = next(line for line in past.table().splitlines() if line.startswith("context "))
    assert f"WARNING: the step's {dim} = 8193 tokens, past LLaMA-3 8B's context of 8192 tokens" in row
    import io
    out = io.StringIO()
    assert cli.main(["model", "llama-3-8b", f"--{mode}", "--chip", "h100", "--set", f"B=1,{dim}=9000"], out=out) == 0
    assert f"the step's {dim} = 9000 tokens, past" in out.getvalue()


def test_tp_decodes_allreduce_is_latency_bound_below_a_batch() -> None:
    # LLaMA-3 70B (D = 8192) on 8 H100s, tp=8: each layer's (and the LM head's) AllReduce sums
    # bf16[B, D], V = 2 bytes x 8192 x B = 16384 B bytes. Through the NVLink switch an AllReduce is a
    # ReduceScatter and an AllGather, each (N - 1)/N x V at the GPU's 450e9 B/s egress:
    # 2 x 7/8 / 450e9 s a byte; each one hop at the H100's 1 us: a floor of 2 us.
    per_byte = sympy.Rational(2 * 7, 8) / sympy.Integer(450 * 10**9)
    floor = sympy.Rational(2, 10**6)
    v_star = floor / per_byte                        # 514285.7 bytes
    b_star = v_star / 16384                          # 31.39 sequences
    assert float(v_star) == pytest.approx(514285.714, rel=1e-9) and float(b_star) == pytest.approx(31.3895, rel=1e-5)
    small = serving.request("llama-3-70b", "h100", 1000, 10, 8, strategy="tp=8")
    large = serving.request("llama-3-70b", "h100", 1000, 10, 32, strategy="tp=8")
    assert small.latency is not None and large.latency is not None
    (b,) = small.latency  # the 80 layers' and the LM head's AllReduces alike: one kind, 161 a step (2 x 80 + 1)
    assert b.kind == "AllReduce" and b.count == 161 and b.bytes == 16384 * dim_symbol("B")
    assert b.floor == floor and b.per_byte == per_byte
    assert b.threshold_bytes == v_star and b.threshold_batch == b_star
    assert b.latency_bound is True and small.step_latency_bound is True  # 8 < 31.39
    assert large.latency[0].latency_bound is False and large.step_latency_bound is False  # 32 > 31.39
    table = small.table()
    assert "V* = 514286 bytes, B* = 31.3895" in table and "at B = 8: latency-bound" in table
    assert "none for the HBM" in table  # memory has no latency figure: said, no number
    out = small.to_dict()["latency_bound"]
    assert out["step_latency_bound"] is True
    assert out["collectives"][0]["threshold_batch"] == pytest.approx(31.3895, 1e-5)
    # with no strategy there are no collectives: nothing said about them
    assert serving.request("llama-3-8b", "h100", 100, 10).latency is None


def test_a_chip_without_a_hop_latency_gets_no_threshold(tmp_path: object) -> None:
    import json
    from pathlib import Path

    from symroof.hardware.machines import machine
    from symroof.resources import resource_path
    data = json.loads(resource_path("hardware.json").read_text())
    h100 = next(c for c in data["chips"] if c["id"] == "h100-sxm")
    del h100["interconnect"]["hop_latency_s"]
    path = Path(str(tmp_path)) / "hw.json"
    path.write_text(json.dumps(data))
    r = serving.request("llama-3-70b", machine("h100", hardware=path), 1000, 10, 8, strategy="tp=8")
    assert r.latency is not None and r.latency[0].threshold_bytes is None and r.latency[0].latency_bound is None
    assert r.step_latency_bound is None
    assert "WARNING: H100 SXM gives no hop latency for its link, so no latency-bound threshold" in r.table()
    assert "bytes; V* =" not in r.table()  # no number: the conventions name V* only as a rule


def _chunk_models(batch: int) -> tuple:
    decode = symroof.model("llama-3-8b", "decode", "h100", {"B": batch, "S": None})
    one = symroof.model("llama-3-8b", "decode", "h100", {"B": 1, "S": None})
    prefill = symroof.model("llama-3-8b", "prefill", "h100", {"B": 1, "T": None})
    return decode, one, prefill


def test_a_mixed_steps_flops_and_bytes_by_hand() -> None:
    # LLaMA-3 8B: L = 32 layers, N = 32 query heads, K = 8 KV heads, H = 128, D = 4096, V = 128256.
    # The 3rd chunk (c = 2) of C = 256 tokens beside B = 8 decoding sequences at S = 1249.5:
    from symroof.models import chunked
    decode, one, prefill = _chunk_models(8)
    S, T = dim_symbol("S"), dim_symbol("T")
    context = sympy.Rational(2499, 2)
    parts = chunked.mixed(decode, one, prefill, 256, 256, context)
    L, N, K, H, D, V = 32, 32, 8, 128, 4096, 128256
    before = 2 * 256  # the prompt tokens before the 3rd chunk
    # each of the chunk's 256 queries attends to the 512 before it: QK and PV, 2 FLOPs a multiply-add over H
    # each, and the softmax's 4 FLOPs a score (the ops' count), in N heads and L layers
    attention = 256 * before * (4 * H + 4) * N * L
    flops_alone = decode.analysis.flops.subs(S, context) + prefill.analysis.flops.subs(T, 256)
    assert parts.flops.subs(chunked.CHUNK_INDEX, 2) == flops_alone + attention
    # the weights are read once, not twice: every parameter's 2 bytes but the embedding table's, whose gather reads
    # only its rows; the 512 earlier tokens' K and V read once: 2 x L x K x H x 2 bytes = 131072 a token
    weights = 2 * (int(symroof.model("llama-3-8b").params) - V * D)
    kv = before * 2 * L * K * H * 2
    bytes_alone = decode.analysis.bytes.subs(S, context) + prefill.analysis.bytes.subs(T, 256)
    assert parts.bytes.subs(chunked.CHUNK_INDEX, 2) == bytes_alone - weights + kv
    # the HBM's roof: those bytes at the H100's 3.35e12 B/s
    t_comms = parts.t_comms.subs(chunked.CHUNK_INDEX, 2)
    assert t_comms == parts.bytes.subs(chunked.CHUNK_INDEX, 2) / sympy.Rational(335 * 10**10)


def test_chunked_ttft_is_the_sum_of_its_mixed_steps() -> None:
    # P = 8000 in chunks of 512: 16 chunks, the last 8000 - 15 x 512 = 320 tokens. The roofs cross inside: the
    # first chunks' steps are the HBM's (the weights and 8 caches of ~8100 tokens), the later ones the FLOPs'
    # (a chunk's attention to the c x 512 tokens before it grows as C x c x C). The closed-form sum over c must
    # equal the steps costed one at a time, each at its own size
    from symroof.models import chunked
    r = serving.request("llama-3-8b", "h100", 8000, 200, 8, chunk=512)
    ch = r.chunked
    assert ch is not None and ch.chunks == 16 and ch.last == 320
    decode, one, prefill = _chunk_models(8)
    context = sympy.Rational(2 * 8000 + 200 - 1, 2)
    steps = []
    for c in range(16):
        size = min(512, 8000 - c * 512)
        p = chunked.mixed(decode, one, prefill, 512, size, context)
        steps.append(sympy.Max(p.t_math, p.t_comms).subs(chunked.CHUNK_INDEX, c))
    assert ch.ttft == sum(steps)
    first = chunked.mixed(decode, one, prefill, 512, 512, context)
    at = {k: (first.t_math.subs(chunked.CHUNK_INDEX, k), first.t_comms.subs(chunked.CHUNK_INDEX, k)) for k in (0, 14)}
    assert at[0][0] < at[0][1] and at[14][0] > at[14][1]  # the HBM's first, then the FLOPs': a crossing inside
    assert ch.step_at(0) == steps[0] and ch.step_at(15) == steps[15]
    assert "chunked_ttft" in r.table() and r.to_dict()["chunked"]["chunks"] == 16


def test_chunked_steady_state_throughput_by_hand() -> None:
    # B = 8 slots, each held G = 500 steps: 8/500 requests start a step, each with ceil(1000/256) = 4 chunks, so
    # f = 8 x 4/500 = 0.064 of the steps carry a chunk. Per step B tokens; the mean step:
    # (B/G) x (the 4 mixed steps' sum) + (1 - f) x a plain decode step at S = 1000 + 499/2
    r = serving.request("llama-3-8b", "h100", 1000, 500, 8, chunk=256)
    ch = r.chunked
    assert ch is not None and ch.busy == sympy.Rational(32, 500)
    plain = symroof.model("llama-3-8b", "decode", "h100", {"B": 8, "S": None}).t_step.subs(S, sympy.Rational(2499, 2))
    assert ch.tpot_plain == plain == r.tpot_steady
    per_step = sympy.Rational(8, 500) * ch.ttft + (1 - sympy.Rational(32, 500)) * plain
    assert ch.tokens_per_s == 8 / per_step and ch.requests_per_s == 8 / per_step / 500
    assert plain < ch.step_at(0)  # a step with a chunk in flight is slower than one without
    # prefill-bound: B = 64 slots held G = 10 steps each need 64 x 4/10 = 25.6 chunks a step, one at a time:
    # a step a chunk, a request every 4 steps, G tokens each
    bound = serving.request("llama-3-8b", "h100", 1000, 10, 64, chunk=256)
    assert bound.chunked is not None and bound.chunked.prefill_bound
    assert bound.chunked.tokens_per_s == 10 / bound.chunked.ttft and "prefill-bound" in bound.table()


def test_one_chunk_holding_the_whole_prompt() -> None:
    from symroof.models import chunked
    r = serving.request("llama-3-8b", "h100", 100, 50, 4, chunk=4096)
    decode, one, prefill = _chunk_models(4)
    p = chunked.mixed(decode, one, prefill, 4096, 100, sympy.Rational(2 * 100 + 49, 2))
    assert r.chunked is not None and r.chunked.chunks == 1 and r.chunked.last == 100
    assert r.chunked.ttft == sympy.Max(p.t_math, p.t_comms).subs(chunked.CHUNK_INDEX, 0)


def test_chunk_refusals() -> None:
    from symroof.cli import command as cli
    with pytest.raises(SpecError, match="--chunk takes a whole number of prompt tokens, at least 1, got 0"):
        serving.request("llama-3-8b", "h100", 100, 10, chunk=0)
    with pytest.raises(SpecError, match="drop --strategy"):
        serving.request("llama-3-70b", "h100", 100, 10, 8, strategy="tp=8", chunk=64)
    import io
    err = io.StringIO()
    assert cli.main(["model", "llama-3-8b", "--decode", "--chip", "h100", "--chunk", "64"], out=io.StringIO(),
                    err=err) == 2
    assert "--chunk goes with --serve" in err.getvalue()


def test_a_symbolic_chip_is_refused_in_words() -> None:
    # the Max of roofs in C, W_hbm cannot be ordered: a one-line error, not a TypeError from comparing them
    for chunk in (None, 8):
        with pytest.raises(SpecError, match="not linear in S with numbers for the rest"):
            serving.request("llama-3-8b", "symbolic", 30, 10, chunk=chunk)


def test_the_decode_report_gives_each_collectives_latency_bound_batch() -> None:
    # symroof model --decode --strategy: the same figures in the model's report. On 8 H100s (tp=8) as in
    # test_tp_decodes_allreduce_is_latency_bound_below_a_batch: B* = 2 us / (2 x 7/8 / 450e9 s a byte) / 16384
    b_star_h100 = sympy.Rational(2, 10**6) / (sympy.Rational(14, 8) / 450e9) / 16384
    m = symroof.model("llama-3-70b", "decode", "h100", {"B": 64, "S": 4096}, strategy="tp=8")
    assert f"B* = {float(b_star_h100):.6g}" in m.table() and "at B = 64: bandwidth-bound" in m.table()
    out = m.to_dict()["latency_bound"]
    assert out["step_latency_bound"] is False and "none for the HBM" in out["memory"]
    # on v5e, dp=2 x tp=8: Y = 8 is shorter than the 16 a ring needs, so a line: an AllGather moves (N - 1)/N of V
    # at a link's 45e9 B/s one way over N - 1 = 7 hops of 1 us; an AllReduce twice that. Each chip holds B/2
    # sequences: V = B/2 x D x 2 bytes = 8192 B
    floor = 2 * 7 * sympy.Rational(1, 10**6)
    per_byte = 2 * sympy.Rational(7, 8) / sympy.Integer(45 * 10**9)
    v = symroof.model("llama-3-70b", "decode", "v5e", {"B": 64, "S": 4096}, strategy="dp=2,tp=8")
    (row,) = [line for line in v.table().splitlines() if line.startswith("latency_bound")]
    assert "V = 8192*B bytes" in row and f"V* = {float(floor / per_byte):.6g} bytes" in row
    assert f"B* = {float(floor / per_byte / 8192):.6g}" in row and "its 14 us latency floor" in row
    # dp alone has no collective in decode: no rows
    assert "latency_bound" not in symroof.model("llama-3-8b", "decode", "h100", {"B": 64, "S": 4096},
                                                strategy="dp=8").table()


def test_under_tensor_parallelism_a_requests_steps_wait_for_their_allreduces():
    from symroof.models import serving as serving_module
    r = symroof.serving.request("llama-3-70b", "h100", 1000, 500, 1, strategy="tp=8")
    step = symroof.model("llama-3-70b", "decode", "h100", {"B": 1, "S": 1000}, strategy="tp=8")
    # at B = 1 each of the 161 AllReduces (2 a layer, 80 layers, and the logits') takes its
    # latency floor, 2 hops of the NVLink's 1 us, on the critical path after the work
    assert r.tpot_at(1000) - step.t_step == 161 * 2 * sympy.Rational(1, 10**6)
    assert r.tpot_at(1000) == serving_module.step_time(step)
    assert any("t_step_exposed" in c for c in r.conventions())


def test_a_draft_of_another_vocabulary_and_a_bool_are_refused():
    with pytest.raises(symroof.SpecError, match="vocabulary of 32000 tokens is not the target's 128256"):
        serving.request("llama-3-8b", "h100", 100, 50, draft="llama-2-7b")
    with pytest.raises(symroof.SpecError, match="the prompt must be a whole number"):
        serving.request("llama-3-8b", "h100", True, 50)  # type: ignore[arg-type]


def test_weights_that_do_not_fit_are_said_so_not_their_caches():
    # LLaMA-3 70B's 141 GB of bf16 weights against one H100's usable 72 GB
    r = serving.request("llama-3-70b", "h100", 1000, 500, 1, tpot_slo=1)
    assert not r.weights_fit and r.kv_caches_fit == 0 and r.max_batch == 0
    assert "weights alone are more than" in r.table() and "weights alone" in (r.max_batch_bound or "")
    assert r.to_dict()["weights_fit"] is False
    # on two, the weights fit and the caches bound the batch
    two = serving.request("llama-3-70b", "h100", 1000, 500, 1, chips=2, tpot_slo=1)
    assert two.weights_fit and two.kv_caches_fit > 0
