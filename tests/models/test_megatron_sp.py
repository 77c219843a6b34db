"""Megatron sequence parallelism inside tensor parallelism (issue 28; Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models"): `tp` splits the residual
stream along the sequence over its axes in training and prefill, `tp-nosp` does not. Every
figure is checked against a count made here from the model's sizes and single collectives
analysed on their own."""

from __future__ import annotations

import pytest
import sympy

import symroof
from symroof.errors import SpecError
from symroof.models import strategy_costs
from symroof.models.catalogue import get_model
from symroof.models.strategies import parse_strategy

CHIP = "h100"
t = 8  # the tensor-parallel chips


def _sizes(name: str) -> dict[str, int]:
    return dict(get_model(name)["sizes"])


def test_remat_full_keeps_each_layers_input_split_over_the_tp_chips() -> None:
    s = _sizes("llama-2-70b")
    L, D, V = s["L"], s["D"], s["V"]
    B, T = 1, 4096  # the case: 5.37 GB of layer inputs on each chip without, llm-analysis 0.74 GB with
    m = symroof.model("llama-2-70b", "train", CHIP, {"B": B, "T": T}, strategy=f"tp={t}")
    # each layer keeps its input x, bf16[B, T_Y, D]: an eighth of B x T x D x 2 on each chip; after the
    # blocks, the final norm's input and output (split as the stream is) and the logits (V split)
    per_layer = B * T * D * 2 // t
    assert m.activation_bytes == L * per_layer + 2 * per_layer + B * T * V * 2 // t
    # without sequence parallelism each chip holds the layers' inputs whole: today's count
    plain = symroof.model("llama-2-70b", "train", CHIP, {"B": B, "T": T}, strategy=f"tp-nosp={t}")
    assert plain.activation_bytes == L * B * T * D * 2 + 2 * B * T * D * 2 + B * T * V * 2 // t
    assert L * B * T * D * 2 == 5_368_709_120 and m.activation_bytes == 720_633_856  # 0.67 GB of layers, 0.72 in all


def test_remat_none_keeps_every_tensor_at_its_own_layout_and_how_it_differs_from_korthikanti() -> None:
    """Under remat "none" a layer of llama-2-70b (h = D = 8192, N*H = 8192, K*H = 1024, F = 28672)
    keeps on each of the t chips, per token, in bytes (bf16):

        attention: the norm's output 2h/t, q 2h/t, k and v 2(KH)/t each, flash attention's output o
                   2h/t, the output projection's result a 2h/t, the residual 2h/t
        mlp:       the norm's output 2h/t, g and u 2F/t each, silu(g) 2F/t, h = silu(g)*u 2F/t,
                   the down projection's result m 2h/t, the residual 2h/t

    that is (12h + 4h + 4KH + 8F)/t = (12 + 4 + 0.5 + 28) h/t = 44.5 h/t.

    Korthikanti et al. count 34h/t + 5as/t per token (s·b·h·34/t + 5·a·s²·b/t bytes a layer, with
    sequence parallelism and no recomputation, fp16): attention 11h (the QKV input 2h, Q and K 4h,
    V 2h, the output projection's input 2h, its dropout mask h) + 5as (the softmax's output 2as,
    its dropout mask as, the dropout's output 2as), MLP 19h (its input 2h, a 4h GELU's input 8h and
    output 8h, a dropout mask h), the two layer norms' inputs 4h. symroof's block differs: no
    dropout (no masks, no 5as: flash attention keeps no s x s scores, its backward computes them
    again); grouped KV heads (8 KV heads for 64 query heads: k and v 0.25h each, where
    Korthikanti's K and V are 2h each); a SwiGLU MLP of width F = 3.5h with four F-wide tensors
    (g, u, silu(g), h: 28h, where a 4h GELU has two of 8h each); and "none" keeps every
    statement's output, so the projections' results a and m (2h each) are counted beside the
    residuals that read them. The stream the column-parallel matmuls read whole (gathered) is not
    kept: the backward gathers it again, as Megatron-LM does. Under remat "full" both agree: a
    layer's input, 2h/t a token (Korthikanti's full recomputation, 2sbh, over t)."""
    s = _sizes("llama-2-70b")
    L, D, V, F, K, H, N = s["L"], s["D"], s["V"], s["F"], s["K"], s["H"], s["N"]
    B, T = 1, 4096
    m = symroof.model("llama-2-70b", "train", CHIP, {"B": B, "T": T}, strategy=f"tp={t}", remat="none")
    tokens = B * T
    attention = [D, N * H, K * H, K * H, N * H, D, D]  # norm, q, k, v, o, a, residual
    mlp = [D, F, F, F, F, D, D]  # norm, g, u, silu(g), h, m, residual
    layer = sum(2 * tokens * n // t for n in attention + mlp)
    assert sympy.Rational(layer * t, tokens * D) == sympy.Rational(89, 2)  # 44.5 h/t against Korthikanti's 34 h/t
    # outside the blocks: the embedding's lookup (its table split by vocabulary, its partial sums
    # reduce-scattered into the stream's shard: split), the final norm's output (split) and the
    # logits (V split)
    outside = tokens * D * 2 // t + tokens * D * 2 // t + tokens * V * 2 // t
    assert m.activation_bytes == L * layer + outside
    plain = symroof.model("llama-2-70b", "train", CHIP, {"B": B, "T": T}, strategy=f"tp-nosp={t}", remat="none")
    # without sequence parallelism the six D-wide tensors of a layer are whole on every chip, and
    # the lookup and the final norm's output
    assert plain.activation_bytes - m.activation_bytes == L * 6 * tokens * D * 2 * (t - 1) // t + \
        2 * tokens * D * 2 * (t - 1) // t


def test_save_keeps_the_named_tensors_at_their_layouts() -> None:
    s = _sizes("llama-3-8b")
    L, D, V, F, N, H = s["L"], s["D"], s["V"], s["F"], s["N"], s["H"]
    B, T = 2, 2048
    m = symroof.model("llama-3-8b", "train", CHIP, {"B": B, "T": T}, strategy=f"tp={t}", remat="save=x,o,h")
    per_layer = 2 * B * T * (D + N * H + F) // t  # x (the stream, T split), o (heads split), h (F split)
    after = 2 * 2 * B * T * D // t + 2 * B * T * V // t  # the final norm's input and output, the logits
    assert m.activation_bytes == L * per_layer + after


def _one(spec: str, chip: str, B: int, T: int, D: int) -> sympy.Expr:
    return symroof.analyze(spec, chip=chip, mesh=f"Y={t}", values={"B": B, "T": T, "D": D}).t_network


# GPUs on NVLink, and a TPU v5p torus's ring
@pytest.mark.parametrize("chip,remat", [("h100", "full"), ("h100", "none"), ("tpu-v5p", "full")])
def test_the_collectives_each_allreduce_split_into_its_halves(chip: str, remat: str) -> None:
    s = _sizes("llama-3-8b")
    L, D = s["L"], s["D"]
    B, T = 4, 2048
    m = symroof.model("llama-3-8b", "train", chip, {"B": B, "T": T}, strategy=f"tp={t}", remat=remat)
    rows = strategy_costs.collectives(m)
    V = B * T * D * 2  # each holds the whole bf16[B, T, D] on its larger side

    def count(kind: str, when: str, size: int = V) -> sympy.Expr:
        return sum(c.count for c in rows if c.kind == kind and c.when == when and c.bytes == size)

    # forward: an AllGather before q, k, v and one before the MLP's g, u (and the output layer's),
    # a ReduceScatter after the attention output and MLP down projections (and the embedding's
    # lookup: its table split by vocabulary, its partial sums scattered into the stream's shard)
    assert (count("AllGather", "forward"), count("ReduceScatter", "forward")) == (2 * L + 1, 2 * L + 1)
    # backward: the mirror images (the gradients into the row-parallel matmuls' outputs gathered,
    # those out of the column-parallel ones' inputs reduce-scattered; the output layer's too), the
    # column-parallel inputs gathered again for the weights' gradients (2 a layer and the output
    # layer's), and the embeddings' gradient gathered whole for the input table's
    assert count("ReduceScatter", "backward") == 2 * L + 1
    assert count("AllGather", "backward") == 2 * L + (2 * L + 1) + 1
    # the norms' scales see each chip's own tokens: their gradients are summed over Y (2 a layer, the final's)
    assert count("AllReduce", "backward", 2 * D) == 2 * L + 1
    assert {c.kind for c in rows} == {"AllGather", "ReduceScatter", "AllReduce"}
    again = 2 * L if remat == "full" else 0  # remat full runs each layer's forward again, its collectives too
    assert (count("AllGather", "recompute"), count("ReduceScatter", "recompute")) == (again, again)
    assert all(c.overlaps == (c.kind == "AllReduce") for c in rows)  # activations' on the critical path
    # each pair moves what an AllReduce moves: its time, bandwidth-bound, is the AllReduce's
    ar = _one("AllReduce_Y bf16[B, T, D] {U_Y} -> bf16[B, T, D]", chip, B, T, D)
    ag = _one("AllGather_Y bf16[B, T_Y, D] -> bf16[B, T, D]", chip, B, T, D)
    rs = _one("ReduceScatter_{Y,T} bf16[B, T, D] {U_Y} -> bf16[B, T_Y, D]", chip, B, T, D)
    assert ag == rs == ar / 2
    plain = strategy_costs.collectives(symroof.model("llama-3-8b", "train", chip, {"B": B, "T": T},
                                                     strategy=f"tp-nosp={t}", remat=remat))

    def time(found: list, when: str, kinds: set[str]) -> sympy.Expr:
        return sum(c.time for c in found if c.when == when and c.kind in kinds and c.bytes == V)

    halves = {"AllGather", "ReduceScatter"}
    # the forward's 2L + 1 AllReduces (the embedding's lookup's too) become 2L + 1 pairs: the same
    # bytes on the links, the output layer's gather pairing with the lookup's ReduceScatter
    assert time(plain, "forward", {"AllReduce"}) == (2 * L + 1) * ar
    assert time(rows, "forward", halves) == 2 * L * ar + rs + ag == (2 * L + 1) * ar
    assert time(rows, "recompute", halves) == time(plain, "recompute", {"AllReduce"})
    # the backward's 2L + 1 AllReduces become their halves (the output layer's gather's mirror, a
    # ReduceScatter, pairing with the embeddings' gradient's gather, the mirror of the lookup's
    # ReduceScatter; without sequence parallelism that gradient is whole on every chip already and
    # the lookup's backward needs nothing), plus the column-parallel inputs gathered again
    # for the weights' gradients: 2L + 1 more AllGathers than the AllReduces' bytes
    assert time(plain, "backward", {"AllReduce"}) == (2 * L + 1) * ar
    assert time(rows, "backward", halves) == (2 * L + 1) * ar + (2 * L + 1) * ag


def test_with_kv_heads_copied_the_pairs_still_move_the_allreduces_bytes() -> None:
    # tp=16 over LLaMA-3 8B's 8 KV heads (each copied twice: Y=8, y=2); the engine runs the
    # stream's ReduceScatters over Y and then y, its own choice of route
    s = _sizes("llama-3-8b")
    L, D = s["L"], s["D"]
    B, T = 1, 4096
    sizes = {"B": B, "T": T}
    rows = strategy_costs.collectives(symroof.model("llama-3-8b", "train", "tpu-v5p", sizes, strategy="tp=16"))
    plain = strategy_costs.collectives(symroof.model("llama-3-8b", "train", "tpu-v5p", sizes, strategy="tp-nosp=16"))
    ag = symroof.analyze("AllGather_{Yy} bf16[B, T_{Yy}, D] -> bf16[B, T, D]", chip="tpu-v5p", mesh="Y=8,y=2",
                         values={"B": B, "T": T, "D": D}).t_network

    def time(found: list, when: str) -> sympy.Expr:
        return sum(c.time for c in found if c.when == when and not c.overlaps)

    # forward: the AllReduces' time (the output layer's gather and the embedding's lookup's
    # ReduceScatter the halves of the lookup's AllReduce without it); recompute the same; the backward
    # adds the 2L + 1 column-parallel inputs gathered again (test_the_collectives_each_allreduce_...)
    assert time(rows, "forward") == time(plain, "forward")
    assert time(rows, "recompute") == time(plain, "recompute")
    assert time(rows, "backward") == time(plain, "backward") + (2 * L + 1) * ag


def test_prefill_splits_and_decode_has_no_sequence_to_split() -> None:
    sizes = {"B": 2, "T": 1024}
    prefill = str(symroof.model("llama-3-8b", "prefill", CHIP, sizes, strategy=f"tp={t}").structured.program)
    assert "AllGather_Y bf16[B, T_Y, D] -> bf16[B, T, D]" in prefill and "-> a: bf16[B, T_Y, D]" in prefill
    for name, mode in (("llama-3-8b", "decode"), ("mixtral-8x7b", "train")):
        programs = [str(symroof.model(name, mode, CHIP, strategy=f"{kind}={t}").structured.program)
                    for kind in ("tp", "tp-nosp")]
        assert programs[0] == programs[1] and "T_Y" not in programs[0]


def test_the_strategy_row_says_which() -> None:
    def row(strategy: str, mode: str = "train", name: str = "llama-3-8b") -> str:
        m = symroof.model(name, mode, CHIP, {"B": 8} if mode == "decode" else {"B": 8, "T": 1024},
                          strategy=strategy)
        return dict(strategy_costs.rows(m, str, str))["strategy"]

    assert "with Megatron sequence parallelism: norms and residuals split over the sequence" in row("tp=8")
    assert "gathers each column-parallel matmul's input again" in row("tp=8")
    assert "gathers each column-parallel matmul's input again" not in row("tp=8", "prefill")
    assert "no Megatron sequence parallelism in decode" in row("tp=8", "decode")
    assert "no Megatron sequence parallelism: norms and residuals whole" in row("tp-nosp=8")
    assert "not modelled for a mixture of experts" in row("tp=8", name="mixtral-8x7b")
    # and the JSON report, for scripts
    m = symroof.model("llama-3-8b", "train", CHIP, {"B": 8, "T": 1024}, strategy="dp=2,tp=4")
    notes = strategy_costs.as_json(m, str)["strategy_notes"]
    assert list(notes) == ["tp"] and notes["tp"].startswith("with Megatron sequence parallelism")


def test_with_context_parallelism_the_sequence_splits_over_both() -> None:
    s = _sizes("llama-3-8b")
    L, D, V = s["L"], s["D"], s["V"]
    B, T = 1, 8192
    m = symroof.model("llama-3-8b", "train", CHIP, {"B": B, "T": T}, strategy="sp=2,tp=4")
    assert "rmsnorm_D x: bf16[B, T_{I,Y}, D]" in str(m.structured.program)
    # each chip keeps T / (2 x 4) tokens of each layer's input
    assert m.activation_bytes == (L + 2) * B * T * D * 2 // 8 + B * T * V * 2 // 8


def test_one_tensor_parallelism_at_a_time() -> None:
    with pytest.raises(SpecError, match="tp and tp-nosp are one tensor parallelism.*give one"):
        parse_strategy("tp=4,tp-nosp=2")


def test_a_sequence_that_does_not_split_over_tp_says_what_would_work() -> None:
    with pytest.raises(SpecError, match=r"^T = 1001 does not split evenly over Y \(8 chips\): give a multiple .*"
                                        r"tp-nosp runs without\)$"):
        symroof.model("llama-3-8b", "prefill", CHIP, {"B": 1, "T": 1001}, strategy=f"tp={t}").analysis
    plain = symroof.model("llama-3-8b", "prefill", CHIP, {"B": 1, "T": 1001}, strategy=f"tp-nosp={t}")
    # without it, T stays whole: two AllReduces a layer, and the embedding's lookup's
    rows = strategy_costs.collectives(plain)
    assert {c.kind for c in rows} == {"AllReduce"} and sum(c.count for c in rows) == 2 * _sizes("llama-3-8b")["L"] + 1


def test_the_norms_gradients_are_summed_over_tp_once_a_step() -> None:
    # each chip's norm scales see its own tokens: their gradients summed over tp (with dp's sum, over
    # XY), 2 a layer and the final norm's, D x 2 bytes each, once a step however many microbatches
    L, D = _sizes("llama-3-8b")["L"], _sizes("llama-3-8b")["D"]
    m = symroof.model("llama-3-8b", "train", CHIP, {"B": 16, "T": 1024}, strategy="dp=2,tp=4", microbatches=4)
    norms = [c for c in strategy_costs.collectives(m) if c.kind == "AllReduce" and set(c.axes) == {"X", "Y"}]
    assert sum(c.count for c in norms) == 2 * L + 1 and {(c.bytes, c.overlaps) for c in norms} == {(2 * D, True)}
    assert not any(m.accumulation.every_microbatch(c) for c in norms)
