"""Tensor parallelism wider than the KV heads (issue 28): each KV head copied on tp/K chips, as
Megatron and vLLM run it, against hand counts from LLaMA-3 8B's sizes (K = 8 KV heads, N =
32 query heads): tp=16 holds one KV head a chip and two of its query heads."""

from __future__ import annotations

import io

import pytest
import sympy

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.lang.parsing import parse_mesh
from symroof.lang.structure import read_source, read_structured
from symroof.models import kinds, planner, strategy_costs
from symroof.models.catalogue import get_model
from symroof.models.families import Costing
from symroof.models.strategies import parse_strategy, strategy_of
from symroof.models.templates import program
from symroof.models.whole import Model

S = get_model("llama-3-8b")["sizes"]
D, F, K, N, H, L, V = (S[k] for k in "DFKNHLV")


def _statement(m: Model, name: str) -> tuple:
    """A forward statement by its result's name, and its cost (per chip, and over the mesh
    each FLOP once), L times over for a layer's."""
    statements = m.structured.program.statements
    k = next(i for i, s in enumerate(statements) if getattr(s, "output", None) is not None and s.output.name == name)
    return statements[k], m.model_analysis.cost.statements[k]


def test_the_weights_a_chip_holds_by_hand():
    m = symroof.model("llama-3-8b", "train", chip="tpu-v5p", strategy="tp=16")
    # a layer: Wq and Wo split 16 ways (2 of the 32 query heads a chip), Wk and Wv 8 ways
    # (the chip's one KV head, whole), the MLP's three matrices 16 ways, the two norms whole
    layer = D * N * H // 16 + 2 * (D * K * H // 8) + N * H * D // 16 + 3 * D * F // 16 + 2 * D
    # the input table and the output layer split by vocabulary over all 16 chips (V = 16 x 8016), the
    # final norm whole
    assert V % 16 == 0
    assert m.weight_bytes == 2 * (L * layer + V // 16 * D + D * V // 16 + D)
    assert [(a.name, a.size) for a in m.analysis.mesh.axes] == [("Y", 8), ("y", 2)]
    # more a chip than an even 16th of the parameters: the KV weights copied twice over
    assert m.weight_bytes - 2 * (L * (D * N * H // 16 * 2 + 2 * D * K * H // 16 + 3 * D * F // 16 + 2 * D)
                                 + V // 16 * D + D * V // 16 + D) == 2 * L * 2 * D * K * H // 16


def test_each_chip_computes_its_kv_heads_projections_whole():
    B, T = 2, 4096
    m = symroof.model("llama-3-8b", "train", chip="tpu-v5p", sizes={"B": B, "T": T}, strategy="tp=16")
    for name in ("k", "v"):
        statement, cost = _statement(m, name)
        assert str(statement) == f"bf16[B, S, D] *_D bf16[D, K_Y, H] -> {name}: bf16[B, S, K_Y, H]"
        assert cost.flops == L * 2 * B * T * D * H  # one head a chip: 2 B T D H, not 2 B T D K H / 16
        assert cost.flops_total == L * 2 * B * T * D * K * H  # each FLOP once over the mesh
    _, q = _statement(m, "q")
    assert q.flops == L * 2 * B * T * D * (N // 16) * H  # the query heads split 16 ways
    # the model FLOPs (each counted once) are tp=8's and one chip's
    eight = symroof.model("llama-3-8b", "train", chip="tpu-v5p", sizes={"B": B, "T": T}, strategy="tp-nosp=8")
    whole = symroof.model("llama-3-8b", "train", chip="tpu-v5p", sizes={"B": B, "T": T})
    assert m.flops == eight.flops == whole.flops
    assert m.flops_train == eight.flops_train == whole.flops_train
    # what the mesh does beyond each FLOP once, chips x per chip - total: with W whole on every
    # chip (norms, residuals, the gather), tp=8 does (8 - 1) W more, everything else split 8
    # ways; tp=16 does (16 - 1) W more, and the KV projections' work once more (8 heads on 16
    # chips): forward k and v, 2 B T D K H each, and three times that with the backward's two
    # (tp-nosp; under tp's Megatron sequence parallelism the norms and residuals are split too,
    # and the KV projections' work is all that is done twice)
    kv = 3 * L * 2 * (2 * B * T * D * K * H)
    plain = symroof.model("llama-3-8b", "train", chip="tpu-v5p", sizes={"B": B, "T": T}, strategy="tp-nosp=16")
    extra = plain.model_analysis.flops * 16 - plain.model_analysis.flops_total
    extra8 = eight.model_analysis.flops * 8 - eight.model_analysis.flops_total
    assert extra == sympy.Rational(15, 7) * extra8 + kv
    assert m.model_analysis.flops * 16 - m.model_analysis.flops_total == kv


def test_the_kv_weights_gradients_are_summed_over_the_copies_by_hand():
    # tp-nosp: the stream whole on every chip, its partial sums all-reduced (test_megatron_sp.py
    # has tp's sequence parallelism with the copies)
    B, T = 1, 4096
    m = symroof.model("llama-3-8b", "train", chip="tpu-v5p", sizes={"B": B, "T": T}, strategy="tp-nosp=16")
    rows = strategy_costs.collectives(m)
    copies = [c for c in rows if c.axes == "y"]
    # Wk's and Wv's gradients, each a chip's one KV head, D x H in bf16, once a layer each
    assert [(c.kind, c.bytes, c.count, c.backward, c.overlaps) for c in copies] == \
        [("AllReduce", D * (K // 8) * H * 2, L, True, True)] * 2
    one = symroof.analyze("AllReduce_y bf16[D, K_Y, H] {U_y} -> bf16[D, K_Y, H]", chip="tpu-v5p", mesh="Y=8,y=2",
                          values={"D": D, "K": K, "H": H})
    assert sum(c.time for c in copies) == 2 * L * one.t_network
    # the activations' AllReduces over all 16 chips, as tp=8's over its 8: two a layer forward and
    # the embedding's lookup (its table split by vocabulary over all 16), two a layer backward (q, k
    # and v's input gradient once, through both groups) and the LM head's
    wide = [c for c in rows if c.axes == "Yy"]
    assert {(c.kind, c.bytes) for c in wide} == {("AllReduce", B * T * D * 2)}
    assert sum(c.count for c in wide if c.when == "forward") == 2 * L + 1
    assert sum(c.count for c in wide if c.when == "backward") == 2 * L + 1
    eight = symroof.model("llama-3-8b", "train", chip="tpu-v5p", sizes={"B": B, "T": T}, strategy="tp-nosp=8")
    assert [(c.when, c.count) for c in strategy_costs.collectives(eight)] == \
        [(c.when, c.count) for c in wide]


def test_the_backward_sends_the_input_gradient_through_q_and_through_k_v_once():
    mesh = parse_mesh("Y=8,y=2")
    for kind, reduced in (("tp-nosp", "AllReduce_{Yy} bf16[B, T, D] {U_{Yy}} -> bf16[B, T, D]"),
                          # Megatron sequence parallelism: reduce-scattered into each chip's tokens
                          ("tp", "ReduceScatter_{Y,y,T} bf16[B, T, D] {U_{Yy}} -> bf16[B, T_{Yy}, D]")):
        text = str(program(get_model("llama-3-8b"), "train", strategy=parse_strategy(f"{kind}=Yy", mesh)))
        assert "bf16[B, T, K_Y, G_y, H] *_{K,G,H} bf16[D, K_Y, G_y, H] -> bf16[B, T, D] {U_{Yy}}" in text
        assert "let J2 = 2*K*H" in text  # k's and v's weights side by side: one head a chip of each
        assert "bf16[B, S, J2_Y] *_J2 bf16[D, J2_Y] -> bf16[B, S, D] {U_Y}" in text
        assert reduced in text
        assert text.count("AllReduce_y bf16[D, K_Y, H] {U_y} -> bf16[D, K_Y, H]") == 2


def test_a_kv_heads_bias_gradient_is_summed_over_the_copies_too():
    config = {**get_model("llama-3-8b"), "bias": True}
    text = str(program(config, "train", strategy=parse_strategy("dp=X,tp=Yy", parse_mesh("X=2,Y=8,y=2"))))
    # bk and bv: over the data-parallel axis and the copies; bq over the data-parallel axis alone
    assert text.count("AllReduce_{Xy} bf16[K_Y, H] {U_{Xy}} -> bf16[K_Y, H]") == 2
    assert "AllReduce_X bf16[K_Y, G_y, H] {U_X} -> bf16[K_Y, G_y, H]" in text


@pytest.mark.parametrize("mode,sizes", [("decode", {"B": 16, "S": 2048}), ("prefill", {"B": 4, "T": 2048})])
def test_serving_holds_one_kv_heads_cache_a_chip(mode, sizes):
    m = symroof.model("llama-3-8b", mode, chip="h100", sizes=sizes, strategy="tp=16")
    B, S_ = sizes["B"], sizes.get("S", sizes.get("T"))
    # K and V, B x S x H each (one head), in bf16, each layer: not K/16 of a head
    assert m.kv_bytes == L * 2 * B * S_ * H * 2
    assert m.weight_bytes == symroof.model("llama-3-8b", "train", chip="h100", strategy="tp=16").weight_bytes
    # no gradients: nothing over the copies but the stream's (Megatron sequence parallelism's
    # ReduceScatters, run over each of tp's axes in turn)
    assert not [c for c in strategy_costs.collectives(m) if c.axes == "y" and (c.overlaps or c.kind != "ReduceScatter")]
    # across two 8-GPU nodes: the copies inside a node, the heads over both
    assert [(a.name, a.size, a.link) for a in m.analysis.mesh.axes] == \
        [("O", 2, "dcn"), ("Y", 4, "ici"), ("y", 2, "ici")]


def test_a_given_mesh_names_the_copies_axis_last():
    sized = symroof.model("llama-3-8b", "decode", chip="tpu-v5p", sizes={"B": 8, "S": 4096}, strategy="tp=16")
    named = symroof.model("llama-3-8b", "decode", chip="tpu-v5p", sizes={"B": 8, "S": 4096}, strategy="tp=YW",
                          mesh="Y=8,W=2")
    assert named.weight_bytes == sized.weight_bytes and named.kv_bytes == sized.kv_bytes
    assert named.t_step == sized.t_step
    with pytest.raises(SpecError, match=r"tp's last axes must span the copies \(e\.g\. --mesh Y=8,W=2"):
        symroof.model("llama-3-8b", "decode", chip="tpu-v5p", strategy="tp=WY", mesh="W=2,Y=8")


@pytest.mark.parametrize("tp", [12, 24])
def test_tp_neither_dividing_nor_a_multiple_of_the_kv_heads_is_refused(tp, capsys):
    message = (f"tp={tp} does not split the 8 KV heads and 32 query heads of LLaMA-3 8B: tp is one of 1, 2, 4, 8, "
               "16, 32 (past 8, each KV head copied on tp/8 chips)")
    assert [n for n in range(1, N + 1) if K % n == 0 or (n % K == 0 and N % n == 0)] == [1, 2, 4, 8, 16, 32]
    with pytest.raises(SpecError) as info:
        symroof.model("llama-3-8b", "train", chip="h100", strategy=f"tp={tp}")
    assert str(info.value) == message
    assert main(["model", "llama-3-8b", "--train", "--chip", "h100", "--strategy", f"tp={tp}"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"symroof: error: {message}"]


def test_the_report_says_the_kv_heads_are_copied():
    out = io.StringIO()
    assert main(["model", "llama-3-8b", "--train", "--chip", "h100", "--strategy", "tp=16"], out=out) == 0
    text = out.getvalue()
    assert "KV heads x2: each of the 8 KV heads copied on 2 chips (over y)" in text
    assert "16-chip mesh (O=2@dcn, Y=4, y=2)" in text
    out = io.StringIO()
    assert main(["model", "llama-3-8b", "--train", "--chip", "h100", "--strategy", "tp=8"], out=out) == 0
    assert "KV heads x" not in out.getvalue()


def test_the_planner_lets_tp_past_the_kv_heads_through():
    usable, params = 72e9, get_model("llama-3-8b")["params_published"]

    def pruned(tp: int, domain: int | None) -> str | None:
        return planner._pruned({"dp": 1, "tp": tp}, S, 16, params, 16, usable, domain, 2)  # bf16 weights

    assert kinds.copies(16, K, N) == 2 and kinds.copies(32, K, N) == 4 and kinds.copies(64, K, N) is None
    assert pruned(16, None) is None and pruned(32, None) is None  # a TPU pod, a GB200 NVL72
    assert pruned(16, 8) == "tp=16 spans more than the fast-link domain of 8 chips"  # an 8-GPU node
    assert pruned(12, None) == "tp=12 does not divide the KV heads (K = 8), nor is it a multiple of them " \
                               "dividing the query heads (N = 32)"
    m = symroof.model("llama-3-8b", "train", chip="tpu-v5p", sizes={"B": 16, "T": 8192}, strategy="tp=16")
    assert planner.Candidate({"dp": 1, "tp": 16}, costing=Costing.of(m)).text == "tp=16 (KV heads x2)"
    assert planner.Candidate({"dp": 1, "tp": 8}).text == "tp=8"


@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_a_program_with_copies_prints_and_reads_back(mode):
    found = strategy_of("dp=2,tp=16", None, mode, get_model("llama-3-8b"), 1)
    assert found == {"dp": (("X", 2, "ici"),), "tp": (("Y", 8, "ici"), ("y", 2, "ici"))}
    p = program(get_model("llama-3-8b"), mode, strategy=found)
    assert str(p).splitlines()[1] == "mesh X=2, Y=8, y=2"
    direct, read = read_source(p), read_structured(str(p))
    assert direct.program == read.program
    assert (direct.backward is None) == (read.backward is None) == (mode != "train")
    if direct.backward is not None and read.backward is not None:
        assert direct.backward.program == read.backward.program
