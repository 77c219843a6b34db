"""Recomputation (remat) costed: the model FLOPs (3x the forward, what an MFU counts) beside the
hardware FLOPs (with what the backward computes again, what an HFU counts and what the step
runs), under each policy, against hand counts from the model's configuration; and the KV
cache's bytes per token, a property of the architecture, in every mode."""

from __future__ import annotations

import json

import by_hand
import pytest
import sympy

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.hardware.chips import get_chip
from symroof.hardware.machines import machine
from symroof.models import strategy_costs
from symroof.models.catalogue import get_model

NAME, CHIP, B, T = "llama-2-7b", "h100", 1, 4096
SIZES = get_model(NAME)["sizes"]


def _matrix_by_hand() -> dict[str, int]:
    """Each LLaMA-2 layer's matmuls (2 FLOPs a multiply-add), and the LM head's, by hand."""
    D, F, N, K, H, V = (SIZES[k] for k in "DFNKHV")
    S = T
    return {"qkv": 2 * B * T * D * (N * H + 2 * K * H), "scores": 2 * B * T * S * N * H,
            "pv": 2 * B * T * S * N * H, "out": 2 * B * T * N * H * D, "mlp": 3 * 2 * B * T * D * F,
            "head": 2 * B * T * D * V}


def _model(remat: str):
    return symroof.model(NAME, "train", CHIP, {"B": B, "T": T}, remat=remat)


def _matrix(a) -> sympy.Expr:
    return a.cost.flops - a.cost.flops_vector


def _vector_alone(spec: str, **values) -> sympy.Expr:
    """A statement's work on the vector unit: its FLOPs there and its transcendentals (each
    charged one vector op)."""
    a = symroof.analyze(spec, values=values)
    return a.flops_vector + a.transcendentals


def _vector(a) -> sympy.Expr:
    return a.cost.flops_vector + a.cost.transcendentals


@pytest.mark.parametrize("remat", ["full", "none", "save=x,o,h"])
def test_the_recomputed_matmuls_are_counted_by_hand(remat):
    m = _model(remat)
    L = SIZES["L"]
    mm = _matrix_by_hand()
    layer = mm["qkv"] + mm["scores"] + mm["pv"] + mm["out"] + mm["mlp"]
    forward = L * layer + mm["head"]
    assert _matrix(m.analysis) == forward
    # the model FLOPs: forward and backward, nothing recomputed, whatever the policy
    assert m.flops_train == 3 * m.flops
    # what the backward computes again: flash attention's scores under every policy (the
    # fused block keeps them on chip); remat full each layer's whole forward; save=x,o,h every
    # matmul of a layer whose output is not x, o or h (the attention block, o, is kept)
    again = {"none": L * mm["scores"],
             "full": L * layer + L * mm["scores"],
             "save=x,o,h": L * (mm["qkv"] + mm["out"] + mm["mlp"]) + L * mm["scores"]}[remat]
    assert _matrix(m.step_analysis) == 3 * forward + again
    # the vector unit's work again: the softmax (flash), and under full every other vector
    # statement of a layer; under save=x,o,h those but the one named h (silu(g) * u)
    D, F, N, K, H = (SIZES[k] for k in "DFNKH")
    G = N // K
    softmax = _vector_alone("softmax_S fp32[B, K, G, T, S] -> bf16[B, K, G, T, S]", B=B, K=K, G=G, T=T, S=T)
    final_norm = _vector_alone("rmsnorm_D bf16[B, T, D], bf16[D] -> bf16[B, T, D]", B=B, T=T, D=D)
    h = _vector_alone("bf16[B, T, F] * bf16[B, T, F] -> bf16[B, T, F]", B=B, T=T, F=F)
    layers = _vector(m.analysis) - final_norm  # the gather before the blocks has no FLOPs
    vector_again = {"none": L * softmax, "full": layers + L * softmax,
                    "save=x,o,h": layers - L * softmax - L * h + L * softmax}[remat]
    assert _vector(m.step_analysis) == 3 * _vector(m.analysis) + vector_again
    assert m.flops_train_hardware == m.step_analysis.flops == 3 * m.flops + again + \
        (m.step_analysis.cost.flops_vector - 3 * m.analysis.cost.flops_vector)
    # the step runs the hardware FLOPs: T_math from the hand counts and the chip's figures
    chip = machine(CHIP)
    vector = get_chip(CHIP).figure("vector_flops_per_s.fp32")  # H100's only one: bf16 work runs at it too
    assert get_chip(CHIP).figure("vector_flops_per_s.bf16") is None
    t_math = _matrix(m.step_analysis) / chip.peak("bf16") + (3 * _vector(m.analysis) + vector_again) / vector
    assert m.step_analysis.t_math == t_math
    assert m.t_step == max(t_math, m.step_analysis.t_comms)
    # MFU on the model FLOPs, HFU on the hardware's, both against the matrix unit's peak
    assert m.mfu == m.flops_train / (m.t_step * chip.peak("bf16"))
    assert m.hfu == m.flops_train_hardware / (m.t_step * chip.peak("bf16"))


def test_remat_full_is_slower_than_none_and_the_issue_case_differs():
    full, none, save = _model("full"), _model("none"), _model("save=x,o,h")
    assert full.t_step > save.t_step > none.t_step
    assert full.flops_train == none.flops_train == save.flops_train  # one model FLOPs count
    assert full.mfu < save.mfu < none.mfu
    # 4x the forward's matmuls under full remat (llm-analysis's count), and flash's scores
    L, mm = SIZES["L"], _matrix_by_hand()
    assert _matrix(full.step_analysis) == 4 * _matrix(full.analysis) - mm["head"] + L * mm["scores"]
    # the roofline's step, derived from single statements by hand (tests/by_hand.py)
    for m, remat in ((full, "full"), (none, "none")):
        assert m.t_step == max(by_hand.step(NAME, CHIP, B, T, remat))


@pytest.mark.parametrize("chip", ["h100", "tpu-v5p"])
def test_fsdp_gathers_are_not_repeated_but_tensor_parallel_reductions_are(chip):
    fsdp = symroof.model("llama-3-8b", "train", chip, {"B": 8, "T": 2048}, strategy="fsdp=8")
    # a parameter gathered for the backward serves its recomputation too: nothing moved again
    assert {c.when for c in strategy_costs.collectives(fsdp)} == {"forward", "backward"}
    assert fsdp.step_analysis.flops * 8 == symroof.model("llama-3-8b", "train", chip,
                                                         {"B": 8, "T": 2048}).step_analysis.flops
    L = get_model("llama-3-8b")["sizes"]["L"]
    tp = symroof.model("llama-3-8b", "train", chip, {"B": 4, "T": 2048}, strategy="tp-nosp=8", remat="save=x,o,h")
    again = [c for c in strategy_costs.collectives(tp) if c.when == "recompute"]
    # save=x,o,h: a (attention's projection) and m (the MLP's) are recomputed, each all-reduced
    assert sum(c.count for c in again) == 2 * L
    # with Megatron sequence parallelism each is reduce-scattered, and q, k, v and g, u, recomputed
    # too, read the stream gathered again before each sublayer
    sp = symroof.model("llama-3-8b", "train", chip, {"B": 4, "T": 2048}, strategy="tp=8", remat="save=x,o,h")
    again = [(c.kind, c.count) for c in strategy_costs.collectives(sp) if c.when == "recompute"]
    assert sorted(again) == [("AllGather", L), ("AllGather", L), ("ReduceScatter", L), ("ReduceScatter", L)]


def test_a_program_file_recomputes_its_blocks_statements_and_fused_intermediates(tmp_path):
    text = """let tokens = B
repeat L {
  param W: bf16[D, F], U: bf16[F, D]
  bf16[B, D] *_D bf16[D, F] -> h: bf16[B, F]
  fused {
    gelu(bf16[B, F]) -> bf16[B, F]
    bf16[B, F] *_F bf16[F, D] -> y: bf16[B, D]
  }
}
bf16[B, D] *_D bf16[D, F] -> bf16[B, F]
"""
    sizes = {"B": 8, "D": 64, "F": 256, "L": 3}
    Bv, D, F, L = (sizes[k] for k in "BDFL")
    gelu = symroof.analyze("gelu(bf16[B, F]) -> bf16[B, F]", values={"B": Bv, "F": F}).flops
    first, second, head = 2 * Bv * D * F, 2 * Bv * F * D, 2 * Bv * D * F
    forward = L * (first + gelu + second) + head
    got = {}
    for remat in ("none", "full", "save=h", "save=y", "save=h,y"):
        m = symroof.model(text, "train", sizes=sizes, remat=remat)
        assert m.flops == forward and m.flops_train == 3 * forward
        got[remat] = m.flops_train_hardware - 3 * forward
    # the fused block's gelu never reaches HBM: its backward computes it again, always
    assert got["none"] == got["save=h,y"] == L * gelu
    assert got["full"] == L * (first + gelu + second) + L * gelu
    assert got["save=h"] == L * (gelu + second) + L * gelu    # y's block again
    assert got["save=y"] == L * first + L * gelu               # h's matmul again
    with pytest.raises(SpecError, match="no tensor named zz"):
        symroof.model(text, "train", sizes=sizes, remat="save=zz").flops_train_hardware


def test_the_report_names_both_counts_and_says_the_convention(capsys):
    argv = ["model", NAME, "--train", "--chip", CHIP, "--set", f"B={B},T={T}"]
    steps = {}
    for remat in ("full", "none", "save=x,o,h"):
        assert main([*argv, "--remat", remat]) == 0
        out = capsys.readouterr().out
        rows = {line.split()[0]: line.split()[1] for line in out.splitlines() if line and not line[0].isspace()}
        steps[remat] = rows["t_step"]
        assert {"flops_train", "flops_train_hardware", "mfu", "hfu"} <= set(rows)
        assert "model FLOPs" in out and "hardware FLOPs" in out
    assert len(set(steps.values())) == 3  # the issue: full and none gave one t_step
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    m = _model("full")
    assert out["flops_train"] == int(m.flops_train) and out["flops_train_hardware"] == int(m.flops_train_hardware)
    assert out["hfu"] == pytest.approx(float(m.hfu)) and out["mfu"] == pytest.approx(float(m.mfu))
    assert main(["model", NAME, "--decode", "--remat", "none"]) == 2
    assert "goes with --train" in capsys.readouterr().err
    assert main(["plan", NAME, "--chip", CHIP, "--chips", "8", "--batch", "32", "--decode", "--remat", "none"]) == 2
    assert "goes with --train" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_kv_bytes_per_token_is_the_architectures_in_every_mode(mode):
    for name in ("llama-2-7b", "llama-3-70b", "mixtral-8x7b"):
        s = get_model(name)["sizes"]
        m = symroof.model(name, mode, sizes={"B": 2, ("S" if mode == "decode" else "T"): 1024})
        assert m.kv_bytes_per_token == 2 * s["L"] * s["K"] * s["H"] * 2  # keys and values, bf16
    quantities = m.quantities()
    assert ("kv_bytes" in quantities) == (mode != "train")  # training keeps no cache
    if mode == "prefill":  # the cache the prefill writes is in HBM with the weights
        assert m.memory_bytes == m.weight_bytes + 2 * 1024 * m.kv_bytes_per_token
    int8 = symroof.model("llama-2-7b", mode, kv="int8")
    assert int8.kv_bytes_per_token == 2 * SIZES["L"] * SIZES["K"] * SIZES["H"]


def test_claims_on_kv_bytes_and_hardware_flops_need_no_mode():
    s = SIZES
    case = {"id": "kv", "model": NAME, "expect": {"kv_bytes_per_token": 2 * s["L"] * s["K"] * s["H"] * 2}}
    assert symroof.check_case(case).ok
    wrong = {"id": "kv", "model": NAME, "expect": {"kv_bytes_per_token": 2 * s["L"] * s["K"] * s["H"]}}
    assert not symroof.check_case(wrong).ok
    m = _model("none")
    hw = {"id": "hw", "model": NAME, "sizes": {"B": B, "T": T}, "remat": "none",
          "expect": {"flops_train_hardware": int(3 * m.flops + SIZES["L"] * _matrix_by_hand()["scores"]
                                                 + (m.step_analysis.cost.flops_vector
                                                    - 3 * m.analysis.cost.flops_vector))}}
    assert symroof.check_case(hw).ok


def test_a_program_without_a_repeated_block_recomputes_nothing_and_keeps_every_output():
    text = """let tokens = B
param W: bf16[D, F], U: bf16[F, D]
bf16[B, D] *_D bf16[D, F] -> bf16[B, F]
gelu(bf16[B, F]) -> bf16[B, F]
bf16[B, F] *_F bf16[F, D] -> bf16[B, D]
"""
    sizes = {"B": 8, "D": 64, "F": 256}
    full, none = (symroof.model(text, "train", sizes=sizes, remat=r) for r in ("full", "none"))
    # no block to checkpoint: full rematerialisation has nothing to recompute, and so keeps
    # what "none" keeps, each statement's output (bf16): [B, F] twice and [B, D]
    assert full.activation_bytes == none.activation_bytes == 2 * (2 * 8 * 256 + 8 * 64)
    assert full.flops_train_hardware == full.flops_train == 3 * full.flops
