"""A mixture of experts' decode step reads only the experts its tokens touch (templates.py):
Et = E*(1 - (1 - A/E)**n) under uniform, independent routing, against an enumeration of
every routing and a seeded sampling, against Mixtral's sizes counted by hand, and the
decode-batch threshold it makes non-polynomial in B."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest
import sympy

import symroof
from symroof.cli.command import main
from symroof.hardware.machines import machine
from symroof.ir import dim_symbol
from symroof.lang.relations import Power
from symroof.lang.source import Let, Program
from symroof.lang.structure import read_source
from symroof.models import templates
from symroof.models.catalogue import get_model
from symroof.models.decls import Options
from symroof.models.strategies import parse_strategy
from symroof.models.whole import Model
from symroof.roofline.solve import positive_region

CONFIG = get_model("mixtral-8x7b")
D, F, L = CONFIG["sizes"]["D"], CONFIG["sizes"]["F"], CONFIG["sizes"]["L"]
E, A = CONFIG["moe"]["experts"], CONFIG["moe"]["active"]
EXPERT_BYTES = 3 * D * F * 2  # one SwiGLU expert's gate, up and down matrices in bf16
Et, B = dim_symbol("Et"), dim_symbol("B")


def _touched(experts: int, active: int, tokens: int) -> sympy.Expr:
    """The template's Et for a mixture of `experts` experts, `active` a token, at B = tokens."""
    config = {**CONFIG, "moe": {"experts": experts, "active": active}}
    return read_source(templates.whole(config, "decode")).relations[Et].xreplace({B: tokens})


def _enumerated(experts: int, active: int, tokens: int) -> Fraction:
    """The mean of the distinct experts touched over every routing: each token any of the
    C(E, A) sets of A distinct experts, all equally likely, tokens independent."""
    sets = list(itertools.combinations(range(experts), active))
    total = sum(len(set().union(*routing)) for routing in itertools.product(sets, repeat=tokens))
    return Fraction(total, len(sets) ** tokens)


@pytest.mark.parametrize(("experts", "active", "tokens"),
                         [(8, 2, 1), (8, 2, 2), (8, 2, 3), (4, 1, 3), (6, 3, 2), (5, 2, 4), (8, 8, 2)])
def test_the_experts_touched_are_the_mean_over_every_routing(experts, active, tokens):
    assert _touched(experts, active, tokens) == sympy.Rational(_enumerated(experts, active, tokens))


@pytest.mark.parametrize("tokens", [4, 5])
def test_the_experts_touched_match_sampled_routings(tokens):
    rng, trials = random.Random(29), 40_000
    seen = sum(len(set().union(*(rng.sample(range(E), A) for _ in range(tokens)))) for _ in range(trials))
    # the count's standard deviation is under 1.5 experts: 6 standard errors of the mean
    assert abs(seen / trials - float(_touched(E, A, tokens))) < 6 * 1.5 / trials ** 0.5


def test_a_large_batch_touches_every_expert():
    assert abs(float(_touched(E, A, 256)) - E) < 1e-6


def _reading_all(p: Program) -> Program:
    """The program with every expert's weights read (Et = E): what decode read before."""
    return Program(tuple(Let(tuple((n, "E" if n == "Et" else v) for n, v in item.entries))
                         if isinstance(item, Let) else item for item in p.items))


def _pair(strategy: str, sizes: dict[str, int]) -> tuple[Model, Model]:
    p = templates.program(CONFIG, "decode", strategy=parse_strategy(strategy) if strategy else {})
    return tuple(Model(read_source(q), machine("h100"), sizes, Options(mode="decode"))  # type: ignore[return-value]
                 for q in (p, _reading_all(p)))


@pytest.mark.parametrize(("strategy", "batch", "touched", "chips_sharing"), [
    ("", 1, 2, 1),  # one token: its A = 2 experts, 8*(1 - 6/8)
    ("", 3, sympy.Rational(37, 8), 1),  # 8*(1 - (3/4)^3) = 8*37/64
    ("dp=2", 2, 2, 1),  # each replica routes its one token through its own 8 experts
    ("ep=2", 2, sympy.Rational(7, 2), 2),  # the 2 chips pool 2 tokens: 8*(1 - 9/16), half each
    # each replica (2 chips of ep) its 8 tokens: 8*(1 - (3/4)^8) = 8*58975/65536
    ("dp=2,ep=2", 16, sympy.Rational(58975, 8192), 2),
    ("tp=2", 1, 2, 2),  # each chip half of each touched expert's F
])
def test_decode_reads_the_touched_experts_weights_and_nothing_else_changes(strategy, batch, touched, chips_sharing):
    sizes = {"B": batch, "S": 4096}
    now, before = _pair(strategy, sizes)
    a, b = now.step_analysis, before.step_analysis
    # by hand: each chip reads its share of Et experts' weights a layer where it read all E's
    untouched = (E - touched) * EXPERT_BYTES * L / chips_sharing
    assert sympy.simplify(a.bytes - (b.bytes - untouched)) == 0
    assert (a.flops, now.flops, now.weight_bytes, now.memory_bytes) == \
        (b.flops, before.flops, before.weight_bytes, before.memory_bytes)  # the work and what is stored


def test_mixtral_at_one_sequence_reads_two_experts_a_layer():
    m = symroof.model("mixtral-8x7b", "decode", "h100", {"B": 1, "S": 4096})
    block = m.per_block()["bytes"]
    # by hand, one layer at B = 1: the attention's weights (q and o D x N*H, k and v D x K*H),
    # the router's D x E, two norms' D, 2 experts' 3 x D x F, in bf16, and the context's keys
    # and values, 2 x S x K x H; the rest is activations: each of some 20 statements reads and
    # writes a token's vectors of width D (8 kB in bf16) or F (28 kB), under 1 MB in all
    N, K, H = 32, 8, 128
    weights = 2 * (2 * D * N * H + 2 * D * K * H + D * E + 2 * D + 2 * 3 * D * F)
    kv = 2 * 2 * 4096 * K * H
    assert 0 < block - weights - kv < 1_000_000  # with all 8 experts' weights it was 2.1 GB more
    assert m.at(Et) == 2


def test_the_decode_threshold_does_not_depend_on_the_batch_given():
    found = set()
    for batch in (1, 64):
        m = symroof.model("mixtral-8x7b", "decode", "h100", {"B": batch, "S": 4096})
        assert m.decode_batch(True).kind == "none"  # the KV cache's reads outgrow the work at any batch
        region = m.decode_batch(False)
        assert region.kind == "above"
        found.add(region.root)
    (root,) = found
    # at the root the step turns compute-bound: memory-bound one batch below, compute-bound one above
    for batch, bound in ((int(root), "memory"), (int(root) + 1, "compute")):
        m = symroof.model("mixtral-8x7b", "decode", "h100", {"B": batch, "S": 4096})
        a = m.analysis
        kv = 2 * 2 * batch * 4096 * 8 * 128 * L
        t_bytes = (a.bytes - kv) / m._chip().bandwidth()
        assert (a.t_math > t_bytes) == (bound == "compute"), batch


def test_a_gap_the_solver_cannot_solve_is_said_so():
    S = dim_symbol("S")
    region = positive_region(3 * B - 100 + 50 * Power(sympy.Rational(3, 4), B) - S, B)
    assert region.kind == "unknown" and "not a polynomial" in (region.reason or "")
    assert positive_region(-3 * B - 100 + 50 * Power(sympy.Rational(3, 4), B), B).kind == "none"
    region = positive_region(3 * B - 100 + 50 * Power(sympy.Rational(3, 4), B), B)
    root = float(region.root)  # 3x - 100 + 50 (3/4)^x = 0: by hand near 33.33, (3/4)^33 ~ 7.6e-5
    assert region.kind == "above" and abs(3 * root - 100 + 50 * 0.75 ** root) < 1e-6


def test_the_report_states_the_routing_assumption(capsys):
    assert main(["model", "mixtral-8x7b", "--decode", "--chip", "h100", "--set", "B=1,S=4096"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "uniformly and independently" in text and "real routers are skewed" in text
    assert main(["model", "mixtral-8x7b", "--chip", "h100"]) == 0  # training reads every expert
    assert "uniformly" not in capsys.readouterr().out


def test_a_decode_plan_states_the_routing_assumption():
    moe = symroof.plan("mixtral-8x7b", "h100", 8, 64, mode="decode")
    assert "uniformly and independently" in " ".join(str(moe).split())
    assert any("uniformly" in c for c in moe.to_dict()["conventions"])
    dense = symroof.plan("llama-3-8b", "h100", 8, 64, mode="decode")
    assert "uniformly" not in str(dense) and not any("uniformly" in c for c in dense.to_dict()["conventions"])


def test_a_size_expression_takes_powers_as_python_does():
    from symroof.lang.relations import expression
    assert [expression(text) for text in ("2**3**2", "-2**2", "2*3**2", "(2*3)**2", "2**-1")] == \
        [512, -4, 18, 36, sympy.Rational(1, 2)]
    p = templates.program(CONFIG, "decode", strategy=parse_strategy("dp=2"))
    assert "let Et = E*(1 - (1 - A/E)**(tokens/2)), Ct = tokens*A/Et" in str(p)


def test_a_power_too_large_to_be_exact_is_refused_as_a_size_at_once():
    from symroof.lang.relations import EXACT_BITS, expression, resolve_relations
    for lets in ((("X", "10**100000000"),), (("n", "100000000"), ("X", "3**n"))):
        with pytest.raises(symroof.SpecError, match=f"X = .*too large to be a size \\(past {EXACT_BITS} bits\\)"):
            resolve_relations([(name, expression(text)) for name, text in lets])
    # a power of numbers within the bound is exact; past it a float, never the exact 3**10**8
    assert expression("3**40") == 3**40
    assert expression("(3/4)**1000000").is_Float and 0 < expression("(3/4)**1000000") < sympy.Float("1e-100000")


def test_a_mixtures_decode_at_a_huge_batch_touches_every_expert_and_finishes():
    m = symroof.model("mixtral-8x7b", "decode", "h100", {"B": 10**12, "S": 4096})
    assert m.step_analysis.bytes.is_number  # the (3/4)**B term a float, not an exact power of 10**12 digits
    # every expert touched: the weights read are all E experts', as before the touched-experts count
    before = Model(read_source(_reading_all(templates.program(CONFIG, "decode"))), machine("h100"),
                   {"B": 10**12, "S": 4096}, Options(mode="decode"))
    assert abs(float(m.step_analysis.bytes) / float(before.step_analysis.bytes) - 1) < 1e-12


def test_the_slo_batch_of_a_mixture_is_the_largest_batch_within_the_target():
    P, G, slo = 1000, 500, sympy.Rational(1, 100)
    r = symroof.serving.request("mixtral-8x7b", "h100", P, G, 8, chips=2, tpot_slo=slo)
    # by brute force: the decode step at the last context, one batch at a time
    last = symroof.model("mixtral-8x7b", "decode", "h100", {"B": None, "S": P + G}, chips=2).t_step
    within = [b for b in range(1, 200) if last.xreplace({B: b}) <= slo]
    assert within == list(range(1, len(within) + 1)) and 1 < len(within) < 199  # rising: a prefix
    assert r.max_batch == len(within) and r.max_batch_bound.startswith("latency")
    assert any("uniformly and independently" in c for c in r.conventions())


def test_chunked_prefill_of_a_mixture_is_refused_not_undercounted():
    # the decode step reads the experts its batch touches; a chunk's tokens touch others
    with pytest.raises(symroof.SpecError, match="chunked prefill of a mixture of experts is not costed"):
        symroof.serving.request("mixtral-8x7b", "h100", 1000, 500, 8, chips=2, chunk=256)


def test_deepseek_v3_at_one_sequence_reads_its_eight_routed_experts_a_layer():
    config = get_model("deepseek-v3")
    D, L, Ld = config["sizes"]["D"], config["sizes"]["L"], config["moe"]["dense_layers"]
    E, A, Fe = config["moe"]["experts"], config["moe"]["active"], config["moe"]["width"]
    p = templates.program(config, "decode")
    now, before = (Model(read_source(q), machine("h200"), {"B": 1, "S": 4096}, Options(mode="decode"))
                   for q in (p, _reading_all(p)))
    # one token touches its A experts: E*(1 - (1 - A/E)) = A; the other E - A experts' gate, up
    # and down (3 x D x Fe in bf16) are not read in any of the L - Ld layers with experts
    assert before.step_analysis.bytes - now.step_analysis.bytes == (E - A) * 3 * D * Fe * 2 * (L - Ld)
    assert now.flops == before.flops and now.weight_bytes == before.weight_bytes
