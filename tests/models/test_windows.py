"""Sliding-window (local) layers and soft-capping (models/windows.py, templates.py): Gemma 2's
local and global layers in turn with capped scores and logits, Mistral 7B v0.1's window in
every layer, against hand counts, the same models written without them, a step-by-step
sum, and their config.json files."""

from __future__ import annotations

import json

import pytest
import sympy

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.hardware.machines import machine
from symroof.ir import dim_symbol
from symroof.lang.structure import read_source
from symroof.models import templates
from symroof.models.catalogue import get_model
from symroof.models.decls import Options
from symroof.models.strategies import parse_strategy
from symroof.models.whole import Model

GEMMA = get_model("gemma-2-9b")
D, L, N, K, H, F, V = (GEMMA["sizes"][d] for d in ("D", "L", "N", "K", "H", "F", "V"))
W, LOCAL = GEMMA["sliding_window"]["window"], GEMMA["sliding_window"]["layers"]


def _without(config: dict, *fields: str) -> dict:
    out = json.loads(json.dumps(config))
    for field in fields:
        out.pop(field)
    return out


def _model(config: dict, mode: str, sizes: dict, strategy: str = "") -> Model:
    p = templates.program(config, mode, strategy=parse_strategy(strategy) if strategy else {})
    return Model(read_source(p), machine("h100"), sizes, Options(mode=mode))


def test_gemma_2_counts_by_hand():
    # a layer: q and o (D x N x H each), k and v (D x K x H), the GeGLU's three matrices, and
    # four norms (one before and one after each sublayer); tied embeddings, a final norm
    layer = 2 * D * N * H + 2 * D * K * H + 3 * D * F + 4 * D
    assert symroof.model("gemma-2-9b").params == L * layer + V * D + D
    # 42 layers, every other one local from the first: 21
    assert LOCAL == 21 and W == 4096


@pytest.mark.parametrize("S", [1000, W, 8192, 20000])
def test_a_decode_steps_cache_holds_a_window_in_the_local_layers(S):
    m = _model(GEMMA, "decode", {"B": 1, "S": S})
    # k and v, K heads of H, 2 bytes: S tokens in each global layer, min(S, W) in each local one
    assert m.kv_bytes == 2 * K * H * 2 * ((L - LOCAL) * S + LOCAL * min(S, W))
    # the same model without its window attends the whole context in every layer: the local
    # layers' share of the attention's extra keys, S - min(S, W), is all that differs
    full = _model(_without(GEMMA, "sliding_window"), "decode", {"B": 1, "S": S})
    per_key = (full.flops - _model(_without(GEMMA, "sliding_window"), "decode", {"B": 1, "S": S - 1}).flops) / L
    assert full.flops - m.flops == LOCAL * per_key * (S - min(S, W))


def test_soft_capping_is_two_flops_and_a_tanh_a_score_and_a_logit():
    sizes = {"B": 2, "S": 3000}
    capped, plain = _model(GEMMA, "decode", sizes), _model(_without(GEMMA, "softcap"), "decode", sizes)
    # scores: B x N queries x the keys each layer attends; logits: B x V
    scores = 2 * N * ((L - LOCAL) * 3000 + LOCAL * min(3000, W))
    assert capped.flops - plain.flops == 2 * (scores + 2 * V)
    assert capped.step_analysis.transcendentals - plain.step_analysis.transcendentals == scores + 2 * V


def test_a_requests_closed_form_sum_crosses_the_window_exactly():
    r = symroof.serving.request("gemma-2-9b", "h100", 3000, 2000, 8)
    assert [(p.first, p.last) for p in r.pieces] == [(3000, W), (W + 1, 4999)]
    assert r.t_request == r.ttft + sum(r.tpot_at(3000 + g) for g in range(2000))
    assert any(c.startswith("sliding window") for c in r.conventions())


def test_mistral_v01_is_v03_with_every_layer_local_and_its_vocabulary():
    old, new = symroof.model("mistral-7b-v0.1", "decode", "h100", {"B": 4, "S": 16384}), \
        symroof.model("mistral-7b-v0.3", "decode", "h100", {"B": 4, "S": 16384})
    assert new.params - old.params == 2 * (32768 - 32000) * 4096
    # every layer's cache a window of 4096 where v0.3's holds all 16384
    assert old.kv_bytes * 16384 == new.kv_bytes * 4096


def test_a_printed_program_reads_back_with_its_min():
    p = templates.program(GEMMA, "decode")
    assert "let W = 4096, Ll = 21, Sl = min(S, W)" in str(p)
    again = Model(read_source(p), machine("h100"), {"B": 8, "S": 8192}, Options(mode="decode"))
    assert again.t_step == symroof.model("gemma-2-9b", "decode", "h100", {"B": 8, "S": 8192}).t_step
    assert dim_symbol("Sl") in again.structured.relations
    assert again.structured.relations[dim_symbol("Sl")] == sympy.Min(dim_symbol("S"), 4096)


@pytest.mark.parametrize("strategy", ["pp=2,dp=2", "sp=2"])
def test_sequence_and_pipeline_splits_are_refused(strategy):
    with pytest.raises(SpecError, match="not written for sliding-window layers"):
        templates.program(GEMMA, "train", strategy=parse_strategy(strategy))


def test_tp_splits_a_local_layers_cache_too():
    one, eight = _model(GEMMA, "decode", {"B": 8, "S": 8192}), _model(GEMMA, "decode", {"B": 8, "S": 8192}, "tp=8")
    assert eight.kv_bytes * 8 == one.kv_bytes  # K = 8 heads over 8 chips, global and local layers alike


def _write(tmp_path, fields: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(fields), encoding="utf-8")
    return str(path)


# google/gemma-2-9b's config.json, and mistralai/Mistral-7B-v0.1's
GEMMA2_9B = {"architectures": ["Gemma2ForCausalLM"], "attention_bias": False, "attn_logit_softcapping": 50.0,
             "cache_implementation": "hybrid", "final_logit_softcapping": 30.0, "head_dim": 256,
             "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 3584,
             "intermediate_size": 14336, "max_position_embeddings": 8192, "model_type": "gemma2",
             "num_attention_heads": 16, "num_hidden_layers": 42, "num_key_value_heads": 8,
             "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "sliding_window": 4096,
             "sliding_window_size": 4096, "vocab_size": 256000}
MISTRAL_V01 = {"architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
               "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
               "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
               "rope_theta": 10000.0, "sliding_window": 4096, "tie_word_embeddings": False, "vocab_size": 32000}


@pytest.mark.parametrize(("fields", "name"), [(GEMMA2_9B, "gemma-2-9b"), (MISTRAL_V01, "mistral-7b-v0.1")])
def test_a_config_json_reads_as_the_catalogue_entry(tmp_path, fields, name):
    m, entry = (symroof.model(x, "decode", "h100", {"B": 2, "S": 6000}) for x in (_write(tmp_path, fields), name))
    assert (m.params, m.kv_bytes, m.flops) == (entry.params, entry.kv_bytes, entry.flops)


def test_gemma_2s_layer_types_set_the_local_layers(tmp_path):
    kinds = ["sliding_attention", "full_attention"] * 20 + ["full_attention"] * 2
    m = symroof.model(_write(tmp_path, {**GEMMA2_9B, "layer_types": kinds}), "decode", "h100", {"B": 1, "S": 8192})
    assert m.kv_bytes == 2 * K * H * 2 * (22 * 8192 + 20 * W)


@pytest.mark.parametrize(("fields", "message"), [
    ({"sliding_window": {"window": 4096}}, "'sliding_window' must be an object"),
    ({"sliding_window": {"window": 4096, "layers": 43}}, "43 local layers, more than the model's 42"),
    ({"sliding_window": {"window": 8192, "layers": 21}}, "not below the context"),
    ({"softcap": {"attention": -1}}, "'softcap' must be an object of positive caps"),
    ({"softcap": {"scores": 50}}, "'softcap' must be an object"),
])
def test_a_bad_entry_is_refused_naming_the_field(tmp_path, capsys, fields, message):
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": [{**GEMMA, **fields}]}), encoding="utf-8")
    assert main(["model", "gemma-2-9b", "--models", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


# google/gemma-3-27b's text_config, as a config of its own
GEMMA3_27B_TEXT = {"architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "head_dim": 128,
                   "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 5376, "intermediate_size": 21504,
                   "max_position_embeddings": 131072, "model_type": "gemma3_text", "num_attention_heads": 32,
                   "num_hidden_layers": 62, "num_key_value_heads": 16, "query_pre_attn_scalar": 168,
                   "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000.0, "rope_theta": 1000000.0,
                   "sliding_window": 1024, "sliding_window_pattern": 6, "vocab_size": 262208}


def test_gemma_3_counts_by_hand_and_reads_from_its_config(tmp_path):
    D3, L3, N3, K3, H3, F3, V3 = 5376, 62, 32, 16, 128, 21504, 262208
    # four norms and a q_norm and k_norm of one head's width (H) a layer; tied embeddings
    layer = 2 * D3 * N3 * H3 + 2 * D3 * K3 * H3 + 3 * D3 * F3 + 4 * D3 + 2 * H3
    entry = symroof.model("gemma-3-27b", "decode", "h200", {"B": 2, "S": 32768})
    assert entry.params == L3 * layer + V3 * D3 + D3
    # every sixth layer global (10 of 62), the other 52 holding a window of 1024
    assert entry.kv_bytes == 2 * 2 * K3 * H3 * 2 * (10 * 32768 + 52 * 1024)
    m = symroof.model(_write(tmp_path, GEMMA3_27B_TEXT), "decode", "h200", {"B": 2, "S": 32768})
    assert (m.params, m.kv_bytes, m.flops) == (entry.params, entry.kv_bytes, entry.flops)


def test_a_per_head_qk_norm_needs_no_collective_under_tp():
    config = get_model("gemma-3-27b")
    plain = {**json.loads(json.dumps(config)), "qk_norm": "none"}
    from symroof.models import strategy_costs
    count = [sum(c.count for c in strategy_costs.collectives(_model(c, "decode", {"B": 8, "S": 4096}, "tp=8")))
             for c in (config, plain)]
    assert count[0] == count[1]  # each head's norm is whole on its chip
