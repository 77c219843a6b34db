"""Gradient accumulation (models/accumulation.py): a training step's batch run as M
microbatches, checked against hand counts from the models' sizes and the chips' figures."""

from __future__ import annotations

import json

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.hardware.machines import machine
from symroof.ir import dim_symbol
from symroof.models import planner, strategy_costs
from symroof.models.catalogue import get_model

GB = 1e9


def params_from_sizes(name: str) -> int:
    """A LLaMA's parameters from its configuration: per layer the query and output
    projections (D x N·H each), the keys' and values' (D x K·H each), the SwiGLU MLP's three
    D x F matrices and two norms of D; the embedding and the (untied) LM head V x D each, the
    final norm D."""
    s = get_model(name)["sizes"]
    D, H, heads, K, F, V, L = s["D"], s["H"], s["N"], s["K"], s["F"], s["V"], s["L"]
    layer = D * H * (2 * heads + 2 * K) + 3 * D * F + 2 * D
    return L * layer + 2 * V * D + D


def test_params_from_sizes_are_the_published_counts():
    for name in ("llama-2-7b", "llama-2-70b"):
        assert params_from_sizes(name) == get_model(name)["params_published"]


def test_llama_2_70b_on_64_a100s_plans_fsdp_64_with_accumulation():
    # 4M tokens of 4096: 1024 sequences, 16 a chip under fsdp=64. Remat full keeps each of the
    # 80 layers' input (b x T x D bf16), and after the blocks the last one's output, the
    # final norm's output (b x T x D each) and the logits (b x T x V, bf16); FSDP splits the
    # bf16 weights, their bf16 gradients and Adam's 12 bytes a parameter over the 64 chips
    s = get_model("llama-2-70b")["sizes"]
    N, T, D, V, L = params_from_sizes("llama-2-70b"), 4096, s["D"], s["V"], s["L"]
    usable = 0.9 * 80e9  # an A100 SXM4 80GB, 0.9 of it usable

    def memory(b: int) -> float:
        return (2 + 2 + 12) * N / 64 + (L + 2) * b * T * D * 2 + b * T * V * 2

    assert memory(16) > usable >= memory(8)  # one microbatch does not fit; two of 8 sequences do
    p = planner.plan("llama-2-70b", "a100", 64, 4 * 2**20, "train")
    fsdp = next(c for c in p.candidates if c.strategy == "fsdp=64")
    assert fsdp in p.ranked and fsdp.microbatches == 2 and fsdp.text == "fsdp=64, 2 microbatches"
    assert abs(float(fsdp.figures["memory_per_chip"]) - memory(8)) <= 0.05 * memory(8)
    assert fsdp.to_dict()["microbatches"] == 2
    assert "fsdp=64, 2 microbatches" in p.table(top=len(p.ranked))
    # pure data parallelism: 16 bytes a parameter, which no microbatch count lowers
    dp = next(c for c in p.candidates if c.strategy == "dp=64")
    assert dp.rejected is not None and dp.rejected.startswith("out of memory")
    assert all(c.figures["memory_per_chip"] <= usable for c in p.ranked)


def test_planner_prefers_zero_to_accumulation_and_says_why_none_fits():
    # LLaMA-3 8B on 8 H100s, 32 sequences of 4096 (1M tokens... a quarter): under plain dp=8
    # each chip holds 4 sequences; ZeRO (no time) comes first, microbatches only where no
    # stage fits at one
    p = planner.plan("llama-3-8b", "h100", 8, 2**20, "train", context=4096)
    dp = next(c for c in p.candidates if c.sizes == {"dp": 8, "fsdp": 1, "tp": 1, "pp": 1})
    assert dp.rejected is None
    usable = 0.9 * 80e9
    for c in p.ranked:
        if c.microbatches > 1:  # at one microbatch, under the stage chosen, it would not have fitted
            at_one = symroof.model("llama-3-8b", "train", "h100", {"B": 256, "T": 4096}, strategy=c.strategy)
            assert at_one.hbm_per_chip > usable
            fewer = [m for m in range(2, c.microbatches) if (256 // (c.sizes["dp"] * c.sizes["fsdp"])) % m == 0]
            for m in fewer:  # and no smaller count fits
                assert symroof.model("llama-3-8b", "train", "h100", {"B": 256, "T": 4096}, strategy=c.strategy,
                                     microbatches=m).hbm_per_chip > usable


def test_memory_and_flops_by_hand():
    # LLaMA-2 7B under fsdp=8 on H100s, 32 sequences of 4096, 4 microbatches of 8: FLOPs are
    # the step's; memory holds 16 bytes a parameter over 8 chips and one microbatch's
    # activations: 1 sequence a chip
    s = get_model("llama-2-7b")["sizes"]
    N, T, D, V, L = params_from_sizes("llama-2-7b"), 4096, s["D"], s["V"], s["L"]
    whole = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": T}, strategy="fsdp=8")
    four = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": T}, strategy="fsdp=8", microbatches=4)
    b = 32 // 8 // 4
    assert four.activation_bytes == (L + 2) * b * T * D * 2 + b * T * V * 2
    assert four.hbm_per_chip == 16 * N // 8 + four.activation_bytes
    assert whole.activation_bytes == 4 * four.activation_bytes
    # model FLOPs: 6 a parameter a token for the matrices (the embedding's gather does none)
    # and the attention scores, 3 x 4·B·T²·(N·H) a layer, and the elementwise work (norms,
    # SwiGLU, softmax, rotary positions: 0.13% here): unchanged by the split
    matrices = 6 * (N - V * D - L * 2 * D - D) * 32 * T
    scores = 3 * 4 * 32 * T * T * s["N"] * s["H"] * L
    assert 0 < float(four.flops_train) - (matrices + scores) <= 0.002 * float(four.flops_train)
    assert four.flops_train == whole.flops_train and four.flops_train_hardware == whole.flops_train_hardware


def test_collectives_fsdp_gathers_every_microbatch_dp_reduces_once():
    s = get_model("llama-2-7b")["sizes"]
    N, L, M = params_from_sizes("llama-2-7b"), s["L"], 4
    per_layer, outside = 9, 3  # 4 attention matrices, 3 MLP matrices, 2 norms; embedding, final norm, LM head
    fsdp = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": 4096}, strategy="fsdp=8", microbatches=M)
    rows = strategy_costs.collectives(fsdp)
    forward = [c for c in rows if c.when == "forward" and c.kind == "AllGather"]
    scatter = [c for c in rows if c.kind == "ReduceScatter"]
    # every parameter gathered whole in each microbatch's forward: M x 2 bytes x N
    assert sum(c.count for c in forward) == M * (per_layer * L + outside)
    assert sum(c.count * c.bytes for c in forward) == M * 2 * N
    # FSDP's gradients kept split: each microbatch reduce-scatters its whole (unreduced) gradient
    assert sum(c.count for c in scatter) == M * (per_layer * L + outside)
    assert sum(c.count * c.bytes for c in scatter) == M * 2 * N
    assert all(fsdp.accumulation.every_microbatch(c) for c in rows)
    # data parallelism: each chip holds the whole gradient; one AllReduce of it a step
    dp = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": 4096}, strategy="dp=8", microbatches=M)
    reduce = [c for c in strategy_costs.collectives(dp) if c.kind == "AllReduce"]
    assert sum(c.count for c in reduce) == per_layer * L + outside
    assert sum(c.count * c.bytes for c in reduce) == 2 * N
    assert not any(dp.accumulation.every_microbatch(c) for c in reduce)
    # an AllReduce over 8 chips of NVLink moves 2 x 7/8 of V each way at the NVLink bandwidth
    nvlink = 450 * 10**9  # an H100's NVLink egress, one way (hardware.json)
    assert machine("h100").chip.figure("interconnect.chip_bandwidth_one_way_bytes_per_s") == nvlink
    t = sum(c.time for c in reduce)
    assert abs(float(t) - 2 * 7 / 8 * 2 * N / nvlink) <= 1e-9 * float(t)


def test_zero2_reduce_scatters_every_microbatch_and_gathers_once():
    M = 4
    base = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": 4096}, strategy="zero2=8")
    acc = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": 4096}, strategy="zero2=8", microbatches=M)
    reduce = sum(c.time for c in strategy_costs.collectives(base) if c.kind == "AllReduce")
    rows = strategy_costs.collectives(acc)
    assert {c.kind for c in rows} == {"ReduceScatter", "AllGather"}
    # an AllReduce is a ReduceScatter and an AllGather, each half its time
    assert sum(c.time for c in rows if c.kind == "ReduceScatter") == M * reduce / 2
    assert sum(c.time for c in rows if c.kind == "AllGather") == reduce / 2
    assert acc.grad_bytes == base.grad_bytes  # kept split: the reduce-scatters are what keep it so


def test_time_one_microbatch_is_the_model_and_hbm_rereads_the_weights():
    for strategy in ("fsdp=8", "dp=4,tp=2", "zero1=8"):
        plain = symroof.model("llama-2-7b", "train", "h100", {"B": 16, "T": 2048}, strategy=strategy)
        one = symroof.model("llama-2-7b", "train", "h100", {"B": 16, "T": 2048}, strategy=strategy, microbatches=1)
        assert one.t_step == plain.t_step and one.hbm_per_chip == plain.hbm_per_chip
        assert strategy_costs.times(one) == strategy_costs.times(plain)
    # the step's HBM bytes: each microbatch reads the weights again. Bytes are affine in B
    # (W + A·B), so M microbatches of B/M move M·W + A·B: (M - 1)·W more, W the bytes at B = 0
    M = 4
    plain = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": 2048}, strategy="dp=8")
    acc = symroof.model("llama-2-7b", "train", "h100", {"B": 32, "T": 2048}, strategy="dp=8", microbatches=M)
    free = symroof.model("llama-2-7b", "train", "h100", {"B": None, "T": 2048}, strategy="dp=8")
    weights_only = free.step_analysis.t_comms.subs(dim_symbol("B"), 0)
    micro = acc.accumulation.model.step_analysis
    assert M * micro.t_comms == plain.step_analysis.t_comms + (M - 1) * weights_only
    # W: a pass reads the weights in the forward, again in the blocks' recomputation and in the
    # backward's input gradients, and writes their gradients (the embedding's table read by
    # rows, which go with B): between 3 and 4 times their 2 bytes a parameter
    N = params_from_sizes("llama-2-7b")
    assert 3 * 2 * N <= weights_only * machine("h100").bandwidth() <= 4 * 2 * N
    # the exposed step: the reductions (once) hide only behind the last microbatch's work
    work = sympy.Max(micro.t_math, micro.t_comms)
    once = sum(c.floored for c in strategy_costs.collectives(acc))
    assert strategy_costs.times(acc)["t_step_exposed"] == (M - 1) * work + sympy.Max(work, once)


def test_report_and_json_show_the_microbatches(capsys):
    argv = ["model", "llama-2-70b", "--train", "--chip", "a100", "--strategy", "fsdp=64", "--set", "B=1024",
            "--microbatches", "2"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "microbatches           2 microbatches of B/2" in text
    # 2 microbatches x (9 parameters in each of the 80 layers, and 3 outside them) gathers
    assert "forward: 1446 (1.446 k) x AllGather over QZ" in text and "every microbatch" in text
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["microbatches"] == 2 and out["accumulation"]["microbatch_B"] == 512
    assert out["accumulation"]["activation_bytes_per_microbatch"] == out["activation_bytes"]
    assert all(c["every_microbatch"] for c in out["collectives"])
    assert out["fits"] is True


def test_errors_say_which_microbatches_would_work(capsys):
    with pytest.raises(SpecError, match="3 microbatches do not split the 4 sequences each replica holds: "
                                        "--microbatches is one of 1, 2, 4"):
        symroof.model("llama-2-7b", "train", "h100", {"B": 32}, strategy="fsdp=8", microbatches=3)
    with pytest.raises(SpecError, match="--decode has no gradients"):
        symroof.model("llama-2-7b", "decode", "h100", {"B": 8}, microbatches=2)
    with pytest.raises(SpecError, match="whole number from 1 to 65536"):
        symroof.model("llama-2-7b", "train", "h100", {"B": 8}, microbatches=0)
    assert main(["model", "llama-2-7b", "--prefill", "--chip", "h100", "--microbatches", "2"]) == 2
    err = capsys.readouterr().err
    assert "--prefill has no gradients" in err and len(err.strip().splitlines()) == 1
    assert main(["model", "llama-2-7b", "--train", "--chip", "h100", "--set", "B=6", "--microbatches", "4"]) == 2
    assert "--microbatches is one of 1, 2, 3, 6" in capsys.readouterr().err


# every case drawn is valid: a strategy with the replicas its batch splits over, a batch of
# whole sequences a replica, and M among their divisors
STRATEGIES = [("llama-2-7b", None, 1), ("llama-2-7b", "fsdp=4", 4), ("llama-2-7b", "dp=2,tp=2", 2),
              ("llama-3-8b", "zero2=4", 4), ("llama-3-8b", "zero1=2,fsdp=2", 4), ("llama-3-8b", "tp=4", 1)]


@st.composite
def accumulated(draw: st.DrawFn) -> tuple[str, str | None, int, int]:
    name, strategy, replicas = draw(st.sampled_from(STRATEGIES))
    sequences = draw(st.sampled_from([1, 2, 4, 6, 8, 12]))
    microbatches = draw(st.sampled_from([m for m in range(1, sequences + 1) if sequences % m == 0]))
    return name, strategy, replicas * sequences, microbatches


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(accumulated())
def test_accumulation_keeps_flops_and_never_raises_memory(case):
    name, strategy, B, M = case
    kw = {"strategy": strategy} if strategy else {}
    plain = symroof.model(name, "train", "h100", {"B": B, "T": 1024}, **kw)
    acc = symroof.model(name, "train", "h100", {"B": B, "T": 1024}, microbatches=M, **kw)
    assert acc.flops_train == plain.flops_train
    assert acc.flops_train_hardware == plain.flops_train_hardware
    assert acc.hbm_per_chip <= plain.hbm_per_chip
    assert acc.activation_bytes * M == plain.activation_bytes
    assert acc.t_step >= plain.t_step  # the weights read again, never less time


def test_planner_says_why_no_microbatch_count_fits():
    # 8 sequences of 128k tokens on 8 H100s: under dp=8 each chip holds one sequence, whose
    # activations alone (remat full: 34 layer inputs of T x D bf16 and the T x V bf16 logits)
    # outgrow what ZeRO-2 leaves of 72 GB: 2 bytes a parameter and (2 + 12) / 8 more
    s = get_model("llama-3-8b")["sizes"]
    T, D, V, L = 131072, s["D"], s["V"], s["L"]
    N = get_model("llama-3-8b")["params_published"]
    one_sequence = (L + 2) * T * D * 2 + T * V * 2
    assert one_sequence > 0.9 * 80e9 - (2 + (2 + 12) / 8) * N
    p = planner.plan("llama-3-8b", "h100", 8, 8 * T, "train", context=T)
    dp = next(c for c in p.candidates if c.strategy == "dp=8")
    assert dp.rejected.endswith("its replica's one sequence does not fit, and no microbatch is smaller")
    # tp=8 keeps the 8 sequences on every chip of the one replica, each an eighth of its tokens'
    # activations (Megatron sequence parallelism); the weights an eighth but the input table, whole,
    # 16 bytes a parameter with Adam: the fewest microbatches that fit hold 4 sequences each
    V_D = V * D
    weights = 16 * ((N - V_D) / 8 + V_D)

    def per_chip(M: int) -> float:
        return weights + (8 // M) * one_sequence / 8

    M = min(m for m in (1, 2, 4, 8) if per_chip(m) <= 0.9 * 80e9)
    tp = next(c for c in p.ranked if c.strategy == "tp=8")
    assert tp.microbatches == M == 2 and tp.figures["memory_per_chip"] <= 0.9 * 80e9


def test_thresholds_weigh_each_collective_where_it_runs():
    M = 4
    sizes = {"B": 32, "T": 2048}
    # dp reduces once a step: its threshold is the step's per-chip tokens, as without accumulation,
    # and M microbatches' work stands against the one reduction
    plain = symroof.model("llama-2-7b", "train", "h100", sizes, strategy="dp=8")
    acc = symroof.model("llama-2-7b", "train", "h100", sizes, strategy="dp=8", microbatches=M)
    before, after = (strategy_costs.thresholds(m, {"dp": "X"})["dp"] for m in (plain, acc))
    assert after["per_chip_tokens"] == before["per_chip_tokens"] and "now" not in after
    assert after["ratio"] == before["ratio"]  # T_math is linear in B; the reduction the same
    # fsdp gathers every microbatch: a microbatch's tokens (32 x 2048 / 8 / 4 a chip) against them
    fsdp = symroof.model("llama-2-7b", "train", "h100", sizes, strategy="fsdp=8", microbatches=M)
    entry = strategy_costs.thresholds(fsdp, {"fsdp": "Z"})["fsdp"]
    assert entry["now"] == 32 * 2048 // 8 // M
    whole = strategy_costs.thresholds(symroof.model("llama-2-7b", "train", "h100", sizes, strategy="fsdp=8"),
                                      {"fsdp": "Z"})["fsdp"]
    assert entry["per_chip_tokens"] == whole["per_chip_tokens"] and entry["ratio"] * M == whole["ratio"]


def test_a_plan_runs_microbatches_and_says_tp_runs_sequence_parallelism():
    import io

    from symroof.cli.command import main
    out = io.StringIO()
    assert main(["plan", "llama-2-70b", "--chip", "a100", "--chips", "64", "--batch", "4M", "--top", "8"], out=out) == 0
    printed = out.getvalue()
    assert ", 2 microbatches" in printed and "tp=2, 4 microbatches" in printed
    assert "tp runs with Megatron sequence parallelism" in " ".join(printed.split())


def test_a_plan_weighs_an_accumulated_step_by_its_network_time_not_a_microbatchs():
    # ties on time go to the least network time: a step's, every microbatch's gathers and
    # reductions and the once-a-step ones, not the one microbatch the analysis costs
    p = planner.plan("llama-2-70b", "a100", 64, 4 * 2**20, "train")
    accumulated = [c for c in p.ranked if c.microbatches > 1]
    assert accumulated
    for c in accumulated:
        assert c.model is not None and c.model.accumulation is not None
        found = strategy_costs.times(c.model)
        assert c.figures["t_network"] == found["t_network_overlapped"] + found["t_network_exposed"]
        assert c.figures["t_network"] > c.model.step_analysis.t_network  # more than one microbatch's
