"""Training under a strategy: the backward pass written out, its gradient collectives found
by the sharding engine, each checked against a hand derivation and against the same
collective analysed on its own, on a TPU torus (v5p) and GPUs on NVLink and InfiniBand
(H100)."""

from __future__ import annotations

import json

import by_hand
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.models import strategy_costs
from symroof.models.catalogue import get_model

CHIPS = ["tpu-v5p", "h100"]  # a 3D torus with wraparound; NVLink nodes of 8 joined by InfiniBand


def _weights(s: dict) -> dict[str, tuple[int, int]]:
    """Each LLaMA-3 weight's elements and how many a step has (L per layer's)."""
    D, F, K, H, L, V = (s[k] for k in "DFKHLV")
    N = s["N"]
    return {"Wq": (D * N * H, L), "Wk": (D * K * H, L), "Wv": (D * K * H, L), "Wo": (N * H * D, L),
            "Wg": (D * F, L), "Wu": (D * F, L), "Wd": (F * D, L), "Wn1": (D, L), "Wn2": (D, L),
            "Wnf": (D, 1), "Emb": (V * D, 1), "Wout": (D * V, 1)}


@pytest.mark.parametrize("chip,mesh", [("tpu-v5p", "X=16"), ("h100", "X=4@dcn")])
def test_data_parallel_all_reduces_each_gradient_once_by_hand(chip, mesh):
    s = get_model("llama-3-8b")["sizes"]
    X = int(mesh.split("=")[1].split("@")[0])
    sizes = {"B": 2 * X, "T": 2048}
    m = symroof.model("llama-3-8b", "train", chip=chip, sizes=sizes, strategy="dp=X", mesh=mesh, remat="none")
    rows = strategy_costs.collectives(m)
    assert {c.kind for c in rows} == {"AllReduce"} and all(c.backward and c.overlaps for c in rows)
    # one AllReduce of each weight's bf16 gradient, as often as the weight is (L for a layer's)
    got = sorted((c.bytes, c.count) for c in rows)
    assert got == sorted((2 * n, count) for n, count in _weights(s).values())
    # each takes what the same AllReduce takes analysed on its own
    alone = {n: symroof.analyze("AllReduce_X bf16[W] {U_X} -> bf16[W]", chip=chip, mesh=mesh,
                                values={"W": n}).t_network for n, _ in _weights(s).values()}
    t_net = sum(count * alone[n] for n, count in _weights(s).values())
    assert m.step_analysis.t_network == t_net
    # the threshold: per-chip tokens where the step's T_math (each chip a 1/X of the batch,
    # T_math linear in B) reaches the gradients' AllReduces: 3x the forward's, and with remat
    # none only flash attention's recomputed scores and softmax in the backward, each layer
    per_chip_batch = t_net / by_hand.step_t_math("llama-3-8b", chip, 2048, "none")  # sequences a chip holds there
    found = strategy_costs.thresholds(m, {"dp": "X"})["dp"]["per_chip_tokens"]
    assert found == per_chip_batch * 2048


@pytest.mark.parametrize("chip", CHIPS)
def test_fsdp_gathers_twice_and_reduce_scatters_once_a_weight_by_hand(chip):
    s = get_model("llama-3-8b")["sizes"]
    m = symroof.model("llama-3-8b", "train", chip=chip, sizes={"B": 8, "T": 2048}, strategy="fsdp=8")
    rows = strategy_costs.collectives(m)
    params = get_model("llama-3-8b")["params_published"]

    def moved(kind, backward):
        return sum(c.count * c.bytes for c in rows if c.kind == kind and c.backward == backward)

    # the textbook's FSDP: every parameter gathered for the forward, again for the backward
    # (all but the input table, whose gradient is scattered into rows without reading it),
    # and every gradient reduce-scattered back to its shard; V the whole bf16 parameter
    assert moved("AllGather", False) == 2 * params
    assert moved("AllGather", True) == 2 * (params - s["V"] * s["D"])
    assert moved("ReduceScatter", True) == 2 * params
    assert {c.kind for c in rows} == {"AllGather", "ReduceScatter"} and all(c.overlaps for c in rows)
    # each chip holds an eighth of every parameter, its gradient and its Adam state
    assert m.weight_bytes == m.grad_bytes == 2 * params // 8
    assert m.optimizer_bytes == 12 * params // 8
    whole = symroof.model("llama-3-8b", "train", chip=chip, sizes={"B": 8, "T": 2048})
    assert m.activation_bytes == whole.activation_bytes / 8
    assert m.hbm_per_chip == m.memory_bytes  # on a mesh, bytes are per chip


@pytest.mark.parametrize("chip", CHIPS)
def test_tensor_parallel_training_all_reduces_activations_four_times_a_layer(chip):
    # tp-nosp: tensor parallelism without Megatron sequence parallelism (test_megatron_sp.py has tp's)
    s = get_model("llama-3-8b")["sizes"]
    L, D, V = s["L"], s["D"], s["V"]
    B, T = 4, 2048
    m = symroof.model("llama-3-8b", "train", chip=chip, sizes={"B": B, "T": T}, strategy="tp-nosp=8")
    rows = strategy_costs.collectives(m)
    # Megatron: forward, the attention output and MLP down projections; backward, the
    # gradients into each sublayer's input (q, k, v at once; the gated MLP's two at once);
    # and once the output layer's (vocabulary split) gradient into the final norm; remat full
    # (the default) runs each layer's forward again in the backward, its two AllReduces too;
    # and once the input embedding's lookup in its table split by vocabulary (VocabParallelEmbedding),
    # whose backward needs none: the stream's gradient is whole on every chip, each scattering its rows
    assert sorted((c.kind, c.when, c.bytes, c.count) for c in rows) == sorted(
        [("AllReduce", "forward", B * T * D * 2, L)] * 2 + [("AllReduce", "backward", B * T * D * 2, L)] * 2
        + [("AllReduce", "backward", B * T * D * 2, 1)] + [("AllReduce", "recompute", B * T * D * 2, L)] * 2
        + [("AllReduce", "forward", B * T * D * 2, 1)])
    assert not any(c.overlaps for c in rows)  # activations: the next statement waits for them
    one = symroof.analyze("AllReduce_Y bf16[B, T, D] {U_Y} -> bf16[B, T, D]", chip=chip, mesh="Y=8",
                          values={"B": B, "T": T, "D": D}).t_network
    assert m.step_analysis.t_network == (6 * L + 2) * one
    found = strategy_costs.times(m)
    a = m.step_analysis
    assert found["t_step_exposed"] == max(a.t_math, a.t_comms) + (6 * L + 2) * one
    ratio = strategy_costs.thresholds(m, {"tp-nosp": "Y"})["tp-nosp"]["ratio"]
    assert ratio == a.t_math / ((6 * L + 2) * one)
    kept = symroof.model("llama-3-8b", "train", chip=chip, sizes={"B": B, "T": T}, strategy="tp-nosp=8",
                         remat="none")
    assert kept.step_analysis.t_network == (4 * L + 2) * one  # nothing recomputed: Megatron's four a layer
    assert V % 8 == 0


STRATEGIES = ["dp=4", "fsdp=4", "tp=4", "dp=2,tp=4", "fsdp=2,tp=2", "dp=2,fsdp=2", "dp=2,fsdp=2,tp=2"]


@pytest.mark.parametrize("name,strategy", [(n, s) for n in ("llama-3-8b", "gemma-7b") for s in STRATEGIES]
                         + [("gpt-3-175b", s) for s in STRATEGIES if "tp" not in s])  # V = 50257 splits no way
def test_training_flops_are_three_times_the_forward_under_every_strategy(name, strategy):
    m = symroof.model(name, "train", chip="tpu-v5p", sizes={"B": 8, "T": 1024}, strategy=strategy)
    assert m.written_backward
    assert m.flops_train == 3 * m.flops  # the written backward: 2x each matmul exactly, 2x the rest
    plain = symroof.model(name, "train", chip="tpu-v5p", sizes={"B": 8, "T": 1024})
    assert m.flops == plain.flops and m.params == plain.params


@settings(max_examples=12, deadline=None)
@given(dp=st.sampled_from([1, 2, 4]), fsdp=st.sampled_from([1, 2, 4]), tp=st.sampled_from([1, 2, 4]))
def test_sharding_never_adds_memory_and_fsdp_and_tp_split_the_weights(dp, fsdp, tp):
    text = ",".join(f"{k}={v}" for k, v in (("dp", dp), ("fsdp", fsdp), ("tp", tp)))
    m = symroof.model("llama-2-7b", "train", chip="tpu-v5p", sizes={"B": 16, "T": 512}, strategy=text)
    plain = symroof.model("llama-2-7b", "train", chip="tpu-v5p", sizes={"B": 16, "T": 512})
    assert m.memory_bytes <= plain.memory_bytes
    assert m.weight_bytes <= plain.weight_bytes / (fsdp * tp) + 2 * 2 * 4096 * 32 + 2 * 4096 * 32000  # + replicas
    assert m.flops_train == plain.flops_train
    assert m.step_analysis.flops * dp * fsdp * tp >= m.flops_train  # per chip at least its share


def test_training_strategy_errors_and_json(capsys):
    with pytest.raises(SpecError, match="does not split evenly"):  # 3 sequences over 2 data-parallel chips
        symroof.model("llama-3-8b", "train", sizes={"B": 3, "T": 1024}, strategy="dp=2").analysis
    with pytest.raises(SpecError, match="has none"):
        symroof.model("llama-3-8b", "train", strategy="ep=4")
    with pytest.raises(SpecError, match="no mesh axis W"):
        symroof.model("llama-3-8b", "train", strategy="fsdp=W", mesh="X=4")
    assert main(["model", "llama-3-8b", "--chip", "tpu-v5p", "--strategy", "fsdp=X,tp=Y", "--mesh", "X=16,Y=4",
                 "--set", "B=64", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["strategy"] == {"fsdp": "X", "tp": "Y"}
    assert {"t_comm_exposed", "t_step_exposed", "memory_per_chip", "threshold", "collectives"} <= set(out)
    assert out["threshold"]["fsdp"]["per_chip_tokens"] > 0 and out["threshold"]["tp"]["ratio"] > 0
    # tp's collectives (Megatron sequence parallelism's) run again where the backward recomputes a layer
    # (remat full, the default)
    assert {c["pass"] for c in out["collectives"]} == {"forward", "backward", "recompute"}
    assert {c["kind"] for c in out["collectives"] if c["pass"] == "recompute"} == {"AllGather", "ReduceScatter"}
    assert main(["model", "llama-3-8b", "--chip", "tpu-v5p", "--strategy", "fsdp=4", "--print"]) == 0
    printed = capsys.readouterr().out
    assert "backward {" in printed and "AllGather_Z" in printed


def test_a_printed_program_with_its_backward_reads_back_the_same(tmp_path):
    named = symroof.model("llama-3-8b", "train", chip="h100", sizes={"B": 8, "T": 2048}, strategy="fsdp=4,tp=2")
    path = tmp_path / "fsdp.sr"
    path.write_text(named.structured.text)
    again = symroof.model(str(path), "train", chip="h100", sizes={"B": 8, "T": 2048})
    assert again.written_backward and again.t_step == named.t_step and again.flops_train == named.flops_train
    text = named.structured.text
    for broken, message in ((text.replace("\nbackward {", "\n  backward {"), "starts at the left margin"),
                            (text.rstrip("\n").rstrip("}") + "}\nbf16[B] + bf16[B] -> bf16[B]\n",
                             "ends the program")):
        with pytest.raises(SpecError, match=message):
            symroof.model(broken, "train")


def test_a_strategy_that_does_not_fit_says_so(capsys):
    # LLaMA-3 8B's 16 bytes a parameter on every chip of dp=2: 128 GB, where an H100 has 80
    assert main(["model", "llama-3-8b", "--chip", "h100", "--strategy", "dp=2", "--set", "B=8,T=2048",
                 "--mfu", "0.5"]) == 0
    fits = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("fits"))
    assert "NO:" in fits and "shard the weights (fsdp, tp)" in fits
