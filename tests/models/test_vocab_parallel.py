"""Tensor parallelism splits the input embedding table by vocabulary, as Megatron-LM's
VocabParallelEmbedding and vLLM do: each tp chip holds V/t rows of `Emb [V, D]`, looks up
the tokens in its range (the others' rows zero) and the lookup's partial sums are
all-reduced over tp (with Megatron sequence parallelism: reduce-scattered into the
sequence-split stream). Its backward needs the stream's gradient whole on each chip (each
scatters it into its own rows): already so without sequence parallelism, one AllGather
with it. Each count below is derived by hand from the model's sizes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import symroof
from symroof.errors import SpecError
from symroof.models import strategy_costs
from symroof.models.catalogue import get_model
from symroof.models.strategies import parse_strategy
from symroof.models.templates import program


def _sizes(name: str) -> dict[str, int]:
    return dict(get_model(name)["sizes"])


def _per_chip_params(name: str, t: int) -> int:
    """A tp=t chip's parameters in a dense model with separate input and output tables
    (LLaMA): the attention's and MLP's matrices split t ways, the norms whole, both tables
    V/t rows each, the final norm whole."""
    s = _sizes(name)
    D, F, N, K, H, L, V = (s[k] for k in ("D", "F", "N", "K", "H", "L", "V"))
    layer = (D * N * H + 2 * D * K * H + N * H * D + 3 * D * F) // t + 2 * D
    return L * layer + 2 * (V * D // t) + D


@pytest.mark.parametrize("kind", ["tp", "tp-nosp"])
def test_llama_3_8b_tp8_training_holds_an_eighth_of_the_input_table(kind: str) -> None:
    s = _sizes("llama-3-8b")
    V, D = s["V"], s["D"]
    m = symroof.model("llama-3-8b", "train", "h100", {"B": 2, "T": 2048}, strategy=f"{kind}=8")
    assert V % 8 == 0
    per_chip = _per_chip_params("llama-3-8b", 8)
    assert per_chip == 1_004_015_616
    assert m.weight_bytes == 2 * per_chip == 2_008_031_232  # bf16
    assert m.grad_bytes == 2 * per_chip  # gradients in the parameters' dtype
    assert m.optimizer_bytes == 12 * per_chip  # Adam: an fp32 master copy and two fp32 moments
    # against the table kept whole on every chip: 7/8 of V x D fewer parameters a chip,
    # 0.919 GB of bf16 weights and, at 16 bytes a parameter with gradients and Adam, 7.35 GB
    saved = V * D * 7 // 8
    assert saved * 2 == 919_339_008
    assert saved * 16 == 7_354_712_064
    assert m.weight_bytes + m.grad_bytes + m.optimizer_bytes == 16 * per_chip
    # the model's FLOPs are not changed by how it is split (the lookup has none)
    whole = symroof.model("llama-3-8b", "train", "h100", {"B": 2, "T": 2048})
    assert m.flops == whole.flops and m.flops_train == whole.flops_train == 3 * whole.flops
    assert m.params == whole.params


def test_the_lookup_is_reduced_once_forward_and_gathered_once_backward_under_sp() -> None:
    s = _sizes("llama-3-8b")
    B, T, D = 2, 2048, s["D"]
    stream = B * T * D * 2  # bf16[B, T, D], each chip's larger side
    rows = strategy_costs.collectives(symroof.model("llama-3-8b", "train", "h100", {"B": B, "T": T},
                                                    strategy="tp=8"))
    once = [(c.when, c.kind, c.axes, c.bytes) for c in rows if c.count == 1]  # the statements outside the layers
    # forward: the lookup's partial sums reduce-scattered into the sequence-split stream (first),
    # then the output layer's input gathered whole
    assert once[:2] == [("forward", "ReduceScatter", "Y", stream), ("forward", "AllGather", "Y", stream)]
    # backward: the output layer's input gradient reduce-scattered, its input gathered again for
    # its weight's gradient, the final norm's scale's gradient summed, and last the lookup's
    # gradient gathered whole (the mirror of its forward ReduceScatter), nothing after it
    assert once[2:] == [("backward", "ReduceScatter", "Y", stream), ("backward", "AllGather", "Y", stream),
                        ("backward", "AllReduce", "Y", 2 * D), ("backward", "AllGather", "Y", stream)]
    text = str(program(get_model("llama-3-8b"), "train", strategy=parse_strategy("tp=8")))
    assert "embedding Emb: bf16[V_Y, D]\ngather bf16[V_Y, D], int32[B, T] -> bf16[B, T_Y, D]\n" in text
    assert text.endswith("  AllGather_Y bf16[B, T_Y, D] -> bf16[B, T, D]   # Megatron sequence parallelism: the "
                         "tokens made whole\n"
                         "  gather bf16[V_Y, D], int32[B, T] -> bf16[B, T, D] {U_Y}\n"
                         "  gather bf16[V_Y, D], int32[B, T] -> bf16[B, T, D] {U_Y}\n}\n")


def test_without_sp_the_lookup_is_all_reduced_and_its_backward_needs_nothing() -> None:
    s = _sizes("llama-3-8b")
    B, T, D, L = 2, 2048, s["D"], s["L"]
    stream = B * T * D * 2
    rows = strategy_costs.collectives(symroof.model("llama-3-8b", "train", "h100", {"B": B, "T": T},
                                                    strategy="tp-nosp=8"))
    once = [(c.when, c.kind, c.bytes) for c in rows if c.count == 1]
    # forward: the lookup's AllReduce; backward: only the output layer's input gradient's (the
    # stream's gradient is whole on every chip: each scatters it into its own rows)
    assert once == [("forward", "AllReduce", stream), ("backward", "AllReduce", stream)]
    assert sum(c.count for c in rows if c.when == "forward") == 2 * L + 1
    assert sum(c.count for c in rows if c.when == "backward") == 2 * L + 1


@pytest.mark.parametrize("chip", ["h100", "tpu-v5p"])
def test_decode_all_reduces_the_lookup_of_b_tokens(chip: str) -> None:
    s = _sizes("llama-3-8b")
    B, D, L = 16, s["D"], s["L"]
    m = symroof.model("llama-3-8b", "decode", chip, {"B": B, "S": 4096}, strategy="tp=8")
    assert m.weight_bytes == 2 * _per_chip_params("llama-3-8b", 8)
    moves = [(c.move.move.kind, c.move.count, c.move.bytes) for c in m.analysis.collectives]
    # the lookup's AllReduce of bf16[B, D], once, before the layers' two a layer
    assert moves == [("AllReduce", 1, B * D * 2)] + [("AllReduce", L, B * D * 2)] * 2
    one = symroof.analyze("AllReduce_Y bf16[B, D] {U_Y} -> bf16[B, D]", chip=chip, mesh="Y=8",
                          values={"B": B, "D": D})
    assert m.analysis.t_network == (2 * L + 1) * one.t_network


def test_tied_embeddings_hold_one_table_split_and_its_gradient_is_summed_over_dp() -> None:
    # Gemma 7B reads Emb again as its output layer: one table, V/4 rows a chip at tp=4
    s = _sizes("gemma-7b")
    D, F, N, K, H, L, V = (s[k] for k in ("D", "F", "N", "K", "H", "L", "V"))
    B, T = 2, 2048
    m = symroof.model("gemma-7b", "train", "h100", {"B": B, "T": T}, strategy="dp=2,tp=4")
    layer = (D * N * H + 2 * D * K * H + N * H * D + 3 * D * F) // 4 + 2 * D
    assert m.weight_bytes == 2 * (L * layer + V * D // 4 + D) == 4_269_103_104
    rows = strategy_costs.collectives(m)
    # the table's gradient (the output layer's and the lookups', one tensor) all-reduced over dp
    # once, at the table's split: V/4 x D in bf16
    assert [(c.kind, c.axes, c.count, c.bytes) for c in rows if c.tensor.startswith("bf16[V_Y, D]")] == \
        [("AllReduce", "X", 1, V // 4 * D * 2)]
    # the lookup reduce-scattered over tp into the stream, [B/2, T, D] on each chip
    assert rows[0].when == "forward" and (rows[0].kind, rows[0].axes, rows[0].count, rows[0].bytes) == \
        ("ReduceScatter", "Y", 1, B // 2 * T * D * 2)


def test_learned_positions_stay_whole_and_share_the_gradients_gather(tmp_path: Path) -> None:
    # GPT-3's 50257 tokens split no way: padded to 50304 = 393 x 128, as Megatron-LM pads them
    config = dict(get_model("gpt-3-175b"))
    config |= {"id": "gpt-3-padded", "name": "GPT-3 padded", "aliases": [],
               "sizes": dict(config["sizes"]) | {"V": 50304}}
    text = str(program(config, "train", strategy=parse_strategy("dp=2,tp=8")))
    assert "gather bf16[V_Y, D], int32[B_X, T] -> bf16[B_X, T_Y, D]" in text  # reduce-scattered
    assert "embedding Pos: bf16[Tmax, D]\ngather bf16[Tmax, D], int32[B_X, T] -> bf16[B_X, T, D]\n" in text
    # the backward: one AllGather of the stream's gradient serves both tables; the positions'
    # gradient (whole on every tp chip) is summed over dp alone; the tied table's by its matmul
    assert text.endswith(
        "  AllGather_Y bf16[B_X, T_Y, D] -> bf16[B_X, T, D]   # Megatron sequence parallelism: the tokens made whole\n"
        "  gather bf16[Tmax, D], int32[B_X, T] -> bf16[B_X, T, D]\n"
        "  gather bf16[Tmax, D], int32[B_X, T] -> bf16[B_X, T, D]\n"
        "  AllReduce_X bf16[Tmax, D] {U_X} -> bf16[Tmax, D]   # a parameter's gradient\n"
        "  gather bf16[V_Y, D], int32[B_X, T] -> bf16[B_X, T, D] {U_Y}\n"
        "  gather bf16[V_Y, D], int32[B_X, T] -> bf16[B_X, T, D] {U_Y}\n}\n")
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"about": "GPT-3 with its vocabulary padded", "models": [config]}))
    s = config["sizes"]
    D, F, N, H, L, V, context = (s[k] for k in ("D", "F", "N", "H", "L", "V", "context"))
    m = symroof.model("gpt-3-padded", "decode", sizes={"B": 1, "S": 2048}, strategy="tp=8", models_file=str(path))
    # a layer (biases, LayerNorms' scales and shifts): q, k, v, o and their biases split 8 ways
    # but o's bias; a plain GELU MLP, its up bias split, its down bias not; two LayerNorms whole
    layer = (4 * D * N * H + 2 * D * F) // 8 + (3 * N * H + F) // 8 + D + D + 4 * D
    assert m.weight_bytes == 2 * (L * layer + V * D // 8 + context * D + 2 * D)


def test_a_vocabulary_tp_does_not_split_is_refused_at_the_table() -> None:
    # GPT-3's 50257 (prime to every tp size): refused as before, now at the input table's line
    with pytest.raises(SpecError, match=r"embedding Emb: V = 50257 does not split evenly over Y \(2 chips\)"):
        symroof.model("gpt-3-175b", "decode", strategy="tp=2")
