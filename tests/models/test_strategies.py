"""Strategies as shardings of a model's program: data and tensor parallelism for prefill
and decode, each against a hand derivation and an independently analysed collective."""

from __future__ import annotations

import pytest

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.models.catalogue import get_model


@pytest.mark.parametrize("chip", ["h100", "tpu-v5p"])  # an NVLink domain and a TPU torus
def test_tensor_parallel_decode_pays_two_allreduces_a_layer(chip):
    s = get_model("llama-3-70b")["sizes"]
    L, D, B = s["L"], s["D"], 32
    m = symroof.model("llama-3-70b", "decode", chip=chip, sizes={"B": B, "S": 4096}, strategy="tp=8")
    moves = m.analysis.collectives
    # Megatron: the attention output and the MLP down projections hold partial sums over
    # the heads and the MLP width: one AllReduce of the [B, D] activations each, per layer;
    # and the embedding's lookup in its table split by vocabulary (each chip its V/8 rows,
    # the other tokens' rows zero): one more, once
    assert [(c.move.move.kind, c.move.count, c.move.bytes) for c in moves] == \
        [("AllReduce", 1, B * D * 2)] + [("AllReduce", L, B * D * 2)] * 2
    one = symroof.analyze("AllReduce_Y bf16[B, D] {U_Y} -> bf16[B, D]", chip=chip, mesh="Y=8",
                          values={"B": B, "D": D})
    assert m.analysis.t_network == (2 * L + 1) * one.t_network
    assert m.analysis.t_network_latency == (2 * L + 1) * one.t_network_latency


def test_tensor_parallel_splits_the_weights_and_the_cache_by_hand():
    s = get_model("llama-3-70b")["sizes"]
    D, L, N, K, H, F, V = (s[k] for k in "DLNKHFV")
    m = symroof.model("llama-3-70b", "decode", sizes={"B": 16, "S": 2048}, strategy="tp=8")
    block = D * N * H * 2 + 2 * D * K * H + 3 * D * F  # split eight ways; the two norms are not
    per_chip = L * (block // 8 + 2 * D) + 2 * (V * D // 8) + D  # both tables split by vocabulary
    assert m.weight_bytes == 2 * per_chip
    assert m.kv_bytes == L * 2 * 16 * 2048 * (K // 8) * H * 2  # each chip the cache of its KV heads
    assert m.params == get_model("llama-3-70b")["params_published"]  # the model is the same
    assert m.flops == symroof.model("llama-3-70b", "decode", sizes={"B": 16, "S": 2048}).flops


def test_data_parallel_splits_the_batch_not_the_weights():
    whole = symroof.model("llama-3-8b", "prefill", chip="tpu-v5p", sizes={"B": 8, "T": 1024})
    dp = symroof.model("llama-3-8b", "prefill", chip="tpu-v5p", sizes={"B": 8, "T": 1024}, strategy="dp=4")
    assert dp.weight_bytes == whole.weight_bytes  # every chip holds them all
    assert dp.analysis.flops * 4 == whole.analysis.flops  # a quarter of the batch each
    assert not dp.analysis.collectives  # the forward pass needs none
    both = symroof.model("llama-3-8b", "prefill", chip="tpu-v5p", sizes={"B": 8, "T": 1024},
                         strategy="dp=X,tp=Y", mesh="X=2,Y=4")
    # Megatron sequence parallelism: an AllGather and a ReduceScatter per sublayer, the output layer's gather,
    # and the embedding's lookup (its table split by vocabulary) reduce-scattered into the stream's shard
    assert both.analysis.mesh.chips == 8 and len(both.analysis.collectives) == 6
    lookup = both.analysis.collectives[0].move
    assert (lookup.move.kind, lookup.count, lookup.bytes) == ("ReduceScatter", 1, (8 // 2) * 1024 * 4096 * 2)
    plain = symroof.model("llama-3-8b", "prefill", chip="tpu-v5p", sizes={"B": 8, "T": 1024},
                          strategy="dp=X,tp-nosp=Y", mesh="X=2,Y=4")
    # without it: an AllReduce per sublayer, and the lookup's, once, of the [B/2, T, D] stream
    assert [(c.move.move.kind, c.move.count, c.move.bytes) for c in plain.analysis.collectives] == \
        [("AllReduce", 1, (8 // 2) * 1024 * 4096 * 2)] + [("AllReduce", 32, (8 // 2) * 1024 * 4096 * 2)] * 2


def test_strategy_errors_say_what_would_work(capsys):
    cases = [
        (dict(mode="decode", strategy="fsdp=8"), r"fsdp shards the optimizer state \(and more\) for training"),
        (dict(mode="decode", strategy="ep=8"), "LLaMA-3 70B has none: split its weights with tp"),
        (dict(mode="decode", strategy="xp=8"), r"unknown strategy 'xp': dp \(data\), zero1, zero2, fsdp \(zero3\), tp"),
        (dict(mode="decode", strategy="tp=Y"), "no mesh to name axes of"),
        (dict(mode="decode", strategy="dp=X,tp=X", mesh="X=4"), "used by two strategies"),
        (dict(mode="decode", strategy="tp=8", chips=16), "spans 8 chips, not the 16 of --chips"),
        (dict(mode="decode", strategy="tp=3"), "does not split evenly"),  # 8 KV heads over 3 chips
        # past the 8 KV heads, tp copies them: a multiple of them dividing the 64 query heads
        (dict(mode="decode", strategy="tp=24"), "tp is one of 1, 2, 4, 8, 16, 32, 64 "),
    ]
    for kwargs, message in cases:
        mode = kwargs.pop("mode")
        with pytest.raises(SpecError, match=message):
            symroof.model("llama-3-70b", mode, **kwargs).analysis
    with pytest.raises(SpecError, match="ep is one of 1, 2, 4, 8"):
        symroof.model("mixtral-8x7b", "decode", strategy="ep=16")
    assert main(["model", "llama-3-70b", "--decode", "--chip", "h100", "--strategy", "tp=8", "--json"]) == 0
    assert main(["model", "llama-3-70b", "--strategy", "ep=8"]) == 2
    assert "has none" in capsys.readouterr().err


def test_a_given_mesh_keeps_its_links_and_every_axis_has_a_strategy():
    m = symroof.model("llama-3-70b", "decode", chip="h100", sizes={"B": 32, "S": 1024}, strategy="dp=X,tp=Y",
                      mesh="X=2@dcn,Y=8")
    assert [(a.name, a.size, a.link) for a in m.analysis.mesh.axes] == [("X", 2, "dcn"), ("Y", 8, "ici")]
    # built from sizes past the NVLink domain of 8: data parallelism goes between the nodes
    built = symroof.model("llama-3-70b", "decode", chip="h100", sizes={"B": 32, "S": 1024}, strategy="dp=2,tp=8")
    assert [(a.name, a.size, a.link) for a in built.analysis.mesh.axes] == [("R", 2, "dcn"), ("Y", 8, "ici")]
    assert built.t_step == m.t_step
    # tensor parallelism past it: the domain filled, the rest between nodes, costed on InfiniBand
    wide = symroof.model("llama-2-7b", "decode", chip="h100", sizes={"B": 32}, strategy="tp=16")
    assert [(a.name, a.size, a.link) for a in wide.analysis.mesh.axes] == [("O", 2, "dcn"), ("Y", 8, "ici")]
    with pytest.raises(symroof.HardwareError, match="NVLink reaches 8"):  # a mesh given by hand: refused
        symroof.model("llama-2-7b", "decode", chip="h100", sizes={"B": 32}, strategy="tp=Y",
                      mesh="Y=16").analysis.t_network
    with pytest.raises(SpecError, match="given to no strategy"):
        symroof.model("llama-3-70b", "decode", strategy="tp=Y", mesh="X=2,Y=8")
