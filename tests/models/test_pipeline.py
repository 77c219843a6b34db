"""Pipeline parallelism: its stages, schedules, memory and sends, against hand derivations
on a TPU torus (v5p) and on H100s (NVLink inside a node, InfiniBand between)."""

from __future__ import annotations

import json

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.hardware.chips import get_chip
from symroof.models import pipeline, strategy_costs
from symroof.models.catalogue import get_model

CONFIG = get_model("llama-3-8b")
S = CONFIG["sizes"]
D, L, V = S["D"], S["L"], S["V"]


def _block_params() -> int:
    return symroof.model("llama-3-8b", "prefill").params_per_block


@pytest.mark.parametrize("schedule, bubble", [("gpipe", sympy.Rational(3, 3 + 8)), ("1f1b", sympy.Rational(3, 11)),
                                              ("interleaved", sympy.Rational(3, 2 * 8 + 3)),
                                              ("interleaved:4", sympy.Rational(3, 4 * 8 + 3))])
def test_the_bubble_is_p_minus_1_over_m_plus_p_minus_1(schedule, bubble):
    m = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": 16, "T": 1024}, strategy="pp=4", microbatches=8,
                      schedule=schedule)
    assert m.pipeline.bubble_fraction == bubble  # (P - 1)/(v M + P - 1), P = 4, M = 8
    found = strategy_costs.report(m)
    assert found["bubble_fraction"] == bubble
    # the step: (M + (P - 1)/v) slots of the slower end stage's microbatch, then the exposed sends
    first, last = m.pipeline._slots
    v = 1 if ":" not in schedule and schedule != "interleaved" else int(schedule.partition(":")[2] or 2)
    slots = 8 + sympy.Rational(3, v)
    assert found["t_step_exposed"] == slots * sympy.Max(first["slot"], last["slot"]) + 6 * m.pipeline.t_send
    assert m.t_step <= found["t_step_exposed"]


@pytest.mark.parametrize("chip", ["tpu-v5p", "h100"])
@pytest.mark.parametrize("schedule, in_flight", [("gpipe", 16), ("1f1b", 4),
                                                 ("interleaved", sympy.Rational(2 * 3 + 4 + 1, 2))])
def test_first_stage_memory_by_hand(chip, schedule, in_flight):
    P, M, dp, B, T = 4, 16, 2, 64, 2048
    m = symroof.model("llama-3-8b", "train", chip, {"B": B, "T": T}, strategy=f"dp={dp},pp={P}", microbatches=M,
                      schedule=schedule)
    params = V * D + L // P * _block_params()  # the embedding table and this stage's blocks
    state = (2 + 2 + 12) * params
    kept = in_flight * (L // P) * (B // M // dp) * T * D * 2  # each block's input, per microbatch in flight
    assert m.pipeline.memory(0) == {"weight_bytes": 2 * params, "grad_bytes": 2 * params,
                                    "optimizer_bytes": 12 * params, "activation_bytes": kept}
    last_params = L // P * _block_params() + D + D * V  # its blocks, the final norm, the output layer
    # each block's input, and the head's (the final norm's input and output, the logits: not
    # recomputed), per microbatch in flight
    last_kept = (16 if schedule == "gpipe" else 1 if schedule == "1f1b" else sympy.Rational(4 + 1, 2)) * \
        ((L // P) * (B // M // dp) * T * D * 2 + (B // M // dp) * T * (2 * D + V) * 2)
    assert sum(m.pipeline.memory(1).values()) == 16 * last_params + last_kept
    assert m.hbm_per_chip == max(state + kept, 16 * last_params + last_kept)


def test_sends_between_stages_by_hand_on_a_torus_and_across_gpu_nodes():
    # v5p: 4 stages on an ICI ring; each microbatch's block input, bf16[B/M, T, D], one hop
    # on one link, one way
    v5p = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": 32, "T": 1024}, strategy="pp=4", microbatches=8)
    link = get_chip("tpu-v5p").figure("interconnect.link_bandwidth_one_way_bytes_per_s")
    assert v5p.pipeline.send_bytes == 32 // 8 * 1024 * D * 2
    assert v5p.pipeline.t_send == v5p.pipeline.send_bytes / link
    # H100: tensor parallelism fills the 8-GPU node, so the 2 stages sit in two nodes and the
    # sends cross InfiniBand at each GPU's share of its NIC; under Megatron sequence parallelism every
    # tp rank sends its eighth of the microbatch's stream (its tokens), without it the whole input
    h100 = symroof.model("llama-3-8b", "train", "h100", {"B": 32, "T": 1024}, strategy="tp=8,pp=2", microbatches=8)
    mesh = h100.pipeline.last.structured.program.mesh
    assert [(a.name, a.size, a.link) for a in mesh.axes if a.name in h100.pipeline.axes] == [("J", 2, "dcn")]
    nic = get_chip("h100").figure("scaleout.bandwidth_one_way_bytes_per_s_per_chip")
    assert h100.pipeline.t_send * nic == 32 // 8 * 1024 * D * 2 // 8
    whole = symroof.model("llama-3-8b", "train", "h100", {"B": 32, "T": 1024}, strategy="tp-nosp=8,pp=2",
                          microbatches=8)
    assert whole.pipeline.t_send == 32 // 8 * 1024 * D * 2 / nic
    sends = [c for c in strategy_costs.collectives(h100) if c.kind == "Send"]
    assert [(c.backward, c.count) for c in sends] == [(False, 8), (True, 8)]  # each microbatch, each way
    # the fill and the drain expose 2 (P - 1) of them; after the last microbatch the first stage's
    # norms' scales' gradients (2 a layer, its 16 layers) are summed over tp once (each chip's
    # tokens', under Megatron sequence parallelism): each AllReduce at its latency floor
    first, last = h100.pipeline._slots
    norm = symroof.analyze("AllReduce_Y bf16[D] {U_Y} -> bf16[D]", chip="h100", mesh="Y=8", values={"D": D})
    assert first["once"] == 2 * 16 * sympy.Max(norm.t_network, norm.t_network_latency)
    assert strategy_costs.times(h100)["t_step_exposed"] == \
        (8 + 1) * sympy.Max(first["slot"], last["slot"]) + 2 * h100.pipeline.t_send + first["once"]


def test_a_pp_axis_of_one_chip_carries_no_send():
    # pp over J and P with J of one chip: the stages sit on P's NVLink, and the sends take it,
    # not J's InfiniBand (the slower link was picked among every pp axis, one-chip ones too)
    run = {"B": 64, "T": 2048}
    both = symroof.model("llama-3.2-1b", "train", "b200", run, strategy="pp=JP", mesh="J=1@dcn, P=4")
    alone = symroof.model("llama-3.2-1b", "train", "b200", run, strategy="pp=P", mesh="P=4")
    nvlink = get_chip("b200").figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
    assert both.pipeline.link.name == alone.pipeline.link.name == "NVLink"
    assert both.pipeline.t_send == alone.pipeline.t_send == both.pipeline.send_bytes / nvlink
    assert strategy_costs.times(both) == strategy_costs.times(alone)


@pytest.mark.parametrize("chip", ["tpu-v5p", "h100"])
def test_data_parallel_reductions_come_once_a_step(chip):
    # each of the last stage's parameters is all-reduced once a step, however many
    # microbatches: 2 bytes each, V the whole gradient
    m = symroof.model("llama-3-8b", "train", chip, {"B": 64, "T": 1024}, strategy="dp=4,pp=4", microbatches=8)
    rows = [c for c in strategy_costs.collectives(m) if c.kind == "AllReduce"]
    last_params = L // 4 * _block_params() + D + D * V
    assert sum(c.bytes * c.count for c in rows) == 2 * last_params
    # with sequence parallelism too, the gradients are summed over both axes, once a step
    both = symroof.model("llama-3-8b", "train", chip, {"B": 64, "T": 1024}, strategy="dp=2,sp=2,pp=4",
                         microbatches=8)
    reduced = [c for c in strategy_costs.collectives(both) if c.kind == "AllReduce"]
    assert {c.axes for c in reduced} == {"XI"} and sum(c.bytes * c.count for c in reduced) == 2 * last_params
    # the threshold: M microbatches' T_math against one reduction
    entry = strategy_costs.thresholds(m, dict(m.options.strategy))["dp"]
    t_math = m.pipeline.last.step_analysis.t_math
    assert entry["ratio"] == 8 * t_math / sum(c.time for c in rows)


@settings(max_examples=12, deadline=None)
@given(P=st.sampled_from([2, 4, 8]), M=st.sampled_from([1, 2, 4, 8]), tp=st.sampled_from([1, 2]))
def test_the_stages_together_do_the_whole_models_work(P, M, tp):
    # the first stage, P - 2 middle ones (the first's layers without the embedding's gather,
    # which does no FLOPs) and the last, each for M microbatches: the whole step's FLOPs
    B, T = 16, 512
    m = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": B, "T": T}, strategy=f"pp={P},tp={tp}",
                      microbatches=M)
    first, last = m.pipeline.first, m.pipeline.last
    assert M * ((P - 1) * first.flops_train + last.flops_train) == m.flops_train
    whole = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": B, "T": T})
    assert m.flops_train == whole.flops_train and m.params == whole.params


def test_pipeline_thresholds_and_microbatches_for_a_bubble():
    m = symroof.model("llama-3-8b", "train", "h100", {"B": 64, "T": 1024}, strategy="pp=8", microbatches=16)
    entry = strategy_costs.thresholds(m, dict(m.options.strategy))["pp"]
    for bubble, fewest in entry["microbatches_for_bubble"].items():
        f = sympy.Rational(bubble)
        assert pipeline.bubble_fraction(8, fewest, pipeline.Schedule("1f1b")) <= f
        assert pipeline.bubble_fraction(8, fewest - 1, pipeline.Schedule("1f1b")) > f
    assert entry["microbatches_for_bubble"]["0.1"] == 63  # 7 x 9
    assert entry["ratio"] == m.pipeline.last.step_analysis.t_math / m.pipeline.t_send


def test_pipeline_errors_say_what_would_work(capsys):
    cases = [("pp=64", {}, "more stages than the model's 32 layers; at most pp=32"),
             ("pp=3", {}, "does not split 32 layers evenly; pp of 2, 4, 8, 16, 32 would"),
             ("pp=4", {"schedule": "interleaved", "microbatches": 6}, "a multiple of pp=4"),
             ("pp=4", {"microbatches": 7}, "do not split the 64 sequences"),
             ("pp=4", {"schedule": "zigzag"}, "gpipe, 1f1b or interleaved"),
             ("dp=2", {"schedule": "gpipe"}, "goes with a pipeline")]
    for strategy, extra, message in cases:
        with pytest.raises(SpecError, match=message):
            symroof.model("llama-3-8b", "train", "h100", {"B": 64, "T": 1024}, strategy=strategy, **extra).t_step
    with pytest.raises(SpecError, match="costed for training"):
        symroof.model("llama-3-8b", "decode", "h100", strategy="pp=4")
    with pytest.raises(SpecError, match="drop --mfu"):
        symroof.model("llama-3-8b", "train", "h100", {"B": 64}, strategy="pp=4", mfu=0.5).t_step
    assert main(["model", "llama-3-8b", "--chip", "h100", "--strategy", "pp=3"]) == 2
    assert "32 layers" in capsys.readouterr().err
    assert main(["model", "llama-3-8b", "--chip", "h100", "--strategy", "pp=4"]) == 2  # B = 1 by default
    assert "at least 16 sequences (--set B=...)" in capsys.readouterr().err
    assert main(["model", "llama-3-8b", "--chip", "h100", "--strategy", "pp=4", "--batches", "16,32"]) == 2
    assert "--microbatches instead" in capsys.readouterr().err


def test_pipeline_report_json_and_printed_stages(capsys):
    args = ["model", "llama-3-8b", "--chip", "tpu-v5p", "--strategy", "dp=2,pp=4", "--set", "B=64,T=1024",
            "--microbatches", "8", "--schedule", "gpipe"]
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pipeline"] == {"stages": 4, "layers": 32, "microbatches": 8, "schedule": "gpipe",
                               "microbatches_default": False}
    assert out["bubble_fraction"] == pytest.approx(3 / 11)
    assert out["threshold"]["pp"]["microbatches_for_bubble"] == {"0.1": 27, "0.05": 57}
    assert {c["kind"] for c in out["collectives"]} == {"AllReduce", "Send"}
    assert "stage_programs" not in out
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "4 stages over P" in text and "bubble" in text and "Send over P" in text
    assert main(args + ["--print"]) == 0
    printed = capsys.readouterr().out
    assert "the first of 4 pipeline stages" in printed and "the last of 4 pipeline stages" in printed
    assert printed.count("repeat L/4 {") == 4  # each stage's forward and backward
