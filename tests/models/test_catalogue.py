"""The catalogue (`symroof models`) and Hugging Face config.json files read
(models/hf_config.py): each config below is written by hand from the published
config.json (the fields symroof reads and a few it reads past), nothing downloaded; each
count is derived by hand here and held to its publisher's figure."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.models.catalogue import configured, get_model, models


def _dense(D: int, L: int, N: int, K: int, H: int, F: int, V: int, *, tied: bool = False, qkv_bias: bool = False,
           experts: int = 0) -> int:
    """A pre-norm RMSNorm decoder with a gated MLP, by hand: per layer q and o (D·N·H each),
    k and v (D·K·H each), biases on q, k, v where the model has them, the three MLP
    matrices (once an expert, with a D·E router), two norm scales; then the embedding,
    the output layer unless tied, and the final norm."""
    mlp = 3 * D * F * experts + D * experts if experts else 3 * D * F
    layer = 2 * D * N * H + 2 * D * K * H + (N * H + 2 * K * H if qkv_bias else 0) + mlp + 2 * D
    return L * layer + V * D * (1 if tied else 2) + D


def _gpt2(D: int, L: int, V: int, context: int) -> int:
    """GPT-2 by hand: per layer c_attn (D x 3D and its bias), c_proj (D x D, bias), c_fc
    (D x 4D, bias), the MLP's c_proj (4D x D, bias), two LayerNorms (scale and bias); then
    the token and position tables (the output tied to the first) and the final LayerNorm."""
    layer = (3 * D * D + 3 * D) + (D * D + D) + (4 * D * D + 4 * D) + (4 * D * D + D) + 2 * 2 * D
    return L * layer + V * D + context * D + 2 * D


# (file's fields, the count by hand, the published count, its tolerance)
LLAMA_31_8B = {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
               "bos_token_id": 128000, "eos_token_id": 128001, "hidden_act": "silu", "hidden_size": 4096,
               "initializer_range": 0.02, "intermediate_size": 14336, "max_position_embeddings": 131072,
               "mlp_bias": False, "model_type": "llama", "num_attention_heads": 32, "num_hidden_layers": 32,
               "num_key_value_heads": 8, "pretraining_tp": 1, "rms_norm_eps": 1e-05,
               "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192, "rope_type": "llama3"},
               "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
               "use_cache": True, "vocab_size": 128256}
QWEN25_7B = {"architectures": ["Qwen2ForCausalLM"], "attention_dropout": 0.0, "bos_token_id": 151643,
             "eos_token_id": 151643, "hidden_act": "silu", "hidden_size": 3584, "initializer_range": 0.02,
             "intermediate_size": 18944, "max_position_embeddings": 131072, "max_window_layers": 28,
             "model_type": "qwen2", "num_attention_heads": 28, "num_hidden_layers": 28, "num_key_value_heads": 4,
             "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "sliding_window": 131072, "tie_word_embeddings": False,
             "torch_dtype": "bfloat16", "use_cache": True, "use_sliding_window": False, "vocab_size": 152064}
MIXTRAL_8X7B = {"architectures": ["MixtralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
                "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mixtral",
                "num_attention_heads": 32, "num_experts_per_tok": 2, "num_hidden_layers": 32,
                "num_key_value_heads": 8, "num_local_experts": 8, "output_router_logits": False,
                "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "router_aux_loss_coef": 0.02,
                "sliding_window": None, "tie_word_embeddings": False, "vocab_size": 32000}
MISTRAL_7B_V03 = {"architectures": ["MistralForCausalLM"], "hidden_act": "silu", "hidden_size": 4096,
                  "intermediate_size": 14336, "max_position_embeddings": 32768, "model_type": "mistral",
                  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
                  "rms_norm_eps": 1e-05, "rope_theta": 1000000.0, "sliding_window": None,
                  "tie_word_embeddings": False, "vocab_size": 32768}
GEMMA_7B = {"architectures": ["GemmaForCausalLM"], "head_dim": 256, "hidden_act": "gelu", "hidden_size": 3072,
            "intermediate_size": 24576, "max_position_embeddings": 8192, "model_type": "gemma",
            "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 16, "rms_norm_eps": 1e-06,
            "rope_theta": 10000.0, "vocab_size": 256000}
GPT2 = {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
        "embd_pdrop": 0.1, "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": 1024, "n_embd": 768,
        "n_head": 12, "n_layer": 12, "n_positions": 1024, "resid_pdrop": 0.1, "vocab_size": 50257}
PHI3_MINI_128K = {"architectures": ["Phi3ForCausalLM"], "hidden_act": "silu", "hidden_size": 3072,
                  "intermediate_size": 8192, "max_position_embeddings": 131072, "model_type": "phi3",
                  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 32,
                  "original_max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
                  "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]},
                  "sliding_window": 262144, "tie_word_embeddings": False, "vocab_size": 32064}
# allenai/OLMo-2-1124-13B's config.json (norms after each sublayer, q_norm and k_norm)
OLMO2_13B = {"architectures": ["Olmo2ForCausalLM"], "attention_bias": False, "hidden_act": "silu",
             "hidden_size": 5120, "intermediate_size": 13824, "max_position_embeddings": 4096,
             "model_type": "olmo2", "num_attention_heads": 40, "num_hidden_layers": 40, "num_key_value_heads": 40,
             "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 500000, "tie_word_embeddings": False,
             "torch_dtype": "float32", "vocab_size": 100352}

CASES = {
    # Hugging Face's "Model size" of the checkpoint: 8.03B (rounded)
    "llama-3.1-8b": (LLAMA_31_8B, _dense(4096, 32, 32, 8, 128, 14336, 128256), 8.03e9, 0.01),
    # the model card: "Number of Parameters: 7.61B" (rounded)
    "qwen2.5-7b": (QWEN25_7B, _dense(3584, 28, 28, 4, 128, 18944, 152064, qkv_bias=True), 7.61e9, 0.01),
    # the checkpoint's sum, as models.json states it
    "mixtral-8x7b": (MIXTRAL_8X7B, _dense(4096, 32, 32, 8, 128, 14336, 32000, experts=8), 46_702_792_704, 0.005),
    "mistral-7b-v0.3": (MISTRAL_7B_V03, _dense(4096, 32, 32, 8, 128, 14336, 32768), 7.25e9, 0.01),
    "gemma-7b": (GEMMA_7B, _dense(3072, 28, 16, 16, 256, 24576, 256000, tied=True), 8_537_680_896, 0.005),
    # OpenAI's checkpoint name, 124M
    "gpt2": (GPT2, _gpt2(768, 12, 50257, 1024), 124e6, 0.01),
    # keras-hub's preset: 3821079552
    "phi-3-mini-128k": (PHI3_MINI_128K, _dense(3072, 32, 32, 32, 96, 8192, 32064), 3_821_079_552, 0.005),
    # the checkpoint's sum: its index's total_size, 54864793600 bytes at float32, over 4; a
    # layer's two norms sit after its sublayers (the same count), plus q_norm (N*H) and k_norm (K*H)
    "olmo-2-13b": (OLMO2_13B, _dense(5120, 40, 40, 40, 128, 13824, 100352) + 40 * (40 * 128 + 40 * 128),
                   54_864_793_600 // 4, 0.005),
}


def _write(tmp_path: Path, fields: dict, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(fields), encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("name", CASES)
def test_a_config_json_reads_as_its_published_count(tmp_path, name):
    fields, by_hand, published, tolerance = CASES[name]
    path = _write(tmp_path, fields)
    m = symroof.model(path, "decode")
    assert m.params == by_hand
    assert abs(by_hand / published - 1) < tolerance
    # the same model as the catalogue's entry of it
    entry = symroof.model(name, "decode")
    assert m.params == entry.params and m.kv_bytes_per_token == entry.kv_bytes_per_token


def test_a_config_json_sets_the_context_and_the_kv_cache(tmp_path):
    m = symroof.model(_write(tmp_path, LLAMA_31_8B), "decode")
    # 2 (k and v) x L x K x H x 2 bytes
    assert m.kv_bytes_per_token == 2 * 32 * 8 * 128 * 2
    assert m.about["sizes"]["S"] == 131072  # max_position_embeddings


def test_layer_types_of_full_attention_read(tmp_path):
    m = symroof.model(_write(tmp_path, {**QWEN25_7B, "layer_types": ["full_attention"] * 28}))
    assert m.params == CASES["qwen2.5-7b"][1]


def test_llama_attention_bias_puts_a_bias_on_every_projection(tmp_path):
    m = symroof.model(_write(tmp_path, {**LLAMA_31_8B, "attention_bias": True}))
    D, L, N, K, H = 4096, 32, 32, 8, 128
    assert m.params == _dense(4096, 32, 32, 8, 128, 14336, 128256) + L * (N * H + 2 * K * H + D)


@pytest.mark.parametrize("fields, message", [
    ({**GEMMA_7B, "model_type": "gemma3"},
     "model_type 'gemma3': its vision tower \\(its text_config, written as a gemma3_text config of its own, is "
     "read\\) the transformer template cannot write yet"),
    ({**GEMMA_7B, "model_type": "gemma2", "sliding_window": 4096, "layer_types": ["sliding_attention"] * 3},
     "layer_types: .*one of sliding_attention or full_attention a layer"),
    ({"model_type": "qwen2_moe", "n_shared_experts": 1}, "model_type 'qwen2_moe': its shared experts"),
    ({**PHI3_MINI_128K, "max_position_embeddings": 4096, "sliding_window": 2047},
     "sliding_window: 2047: attention over a sliding window"),
    ({**QWEN25_7B, "use_sliding_window": True, "sliding_window": 4096},
     "sliding_window: 4096: attention over a sliding window"),
    ({**LLAMA_31_8B, "model_type": "bloom"}, r"model_type 'bloom' is not one symroof reads \(it reads llama, "),
    ({k: v for k, v in LLAMA_31_8B.items() if k != "intermediate_size"},
     "missing field 'intermediate_size' \\(a llama config gives it\\)"),
    ({k: v for k, v in LLAMA_31_8B.items() if k != "model_type"}, "no model_type"),
    ({**LLAMA_31_8B, "mlp_bias": True}, "mlp_bias: biases on the gated MLP, which the transformer template"),
    ({**LLAMA_31_8B, "final_logit_softcapping": 30.0}, "final_logit_softcapping: logit soft-capping"),
    ({**LLAMA_31_8B, "hidden_size": "4096"}, "hidden_size must be a positive whole number, not a string"),
    ({**LLAMA_31_8B, "num_key_value_heads": 7},
     "num_attention_heads: 32 query heads do not group evenly over 7 KV heads"),
    ({**LLAMA_31_8B, "hidden_act": "relu"}, "hidden_act 'relu': a gated MLP of silu or gelu"),
    ({**LLAMA_31_8B, "tie_word_embeddings": "yes"}, "tie_word_embeddings must be true or false"),
    ({**MIXTRAL_8X7B, "num_experts_per_tok": 9}, "num_experts_per_tok: 9 experts a token, more than"),
    ([1, 2], "a config is a JSON object"),
    ({**LLAMA_31_8B, "model_type": ["llama"]}, "model_type must be text, not a list"),
    ({**QWEN25_7B, "attention_bias": True}, "attention_bias: not a field a qwen2 model reads"),
    ({**GPT2, "add_cross_attention": True}, "add_cross_attention: cross-attention layers"),
    ({**LLAMA_31_8B, "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}},
     "quantization_config: a quantized checkpoint's scheme: remove the field and name the scheme with --weights"),
    ({**QWEN25_7B, "layer_types": ["full_attention", "sliding_attention"]}, "layer_types: .*layers other than full"),
])
def test_a_config_the_template_cannot_write_is_refused_naming_why(tmp_path, fields, message):
    path = _write(tmp_path, fields)
    with pytest.raises(SpecError, match=f"config file {path}: {message}"):
        symroof.model(path)


def test_a_config_file_that_is_not_json_or_too_big_is_one_line(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "llama",', encoding="utf-8")
    with pytest.raises(SpecError, match=r"not valid JSON: .* \(line 1, column 24\)"):
        get_model(str(path))
    path.write_text(" " * 1_000_001, encoding="utf-8")
    with pytest.raises(SpecError, match="more than 1000000 bytes"):
        get_model(str(path))
    with pytest.raises(SpecError, match="cannot read config file .*missing.json"):
        get_model(str(tmp_path / "missing.json"))
    path.write_text("[" * 5000, encoding="utf-8")
    with pytest.raises(SpecError, match="config file .*config.json: "):
        get_model(str(path))
    path.write_text('{"model_type": "llama", "model_type": "gpt2"}', encoding="utf-8")
    with pytest.raises(SpecError, match="model_type"):
        get_model(str(path))
    odd = tmp_path / "a\nb.json"  # a line break in the path: the error stays on one line
    odd.write_text(json.dumps({"model_type": "bloom"}), encoding="utf-8")
    with pytest.raises(SpecError) as err:
        get_model(str(odd))
    assert "\n" not in str(err.value) and "config file a\nb.json" not in str(err.value)


def test_the_command_reads_a_config_json_and_refuses_in_one_line(tmp_path):
    path = _write(tmp_path, GPT2)
    out = io.StringIO()
    assert main(["model", path, "--json", "--print"], out=out) == 0
    printed = json.loads(out.getvalue())["program"]
    assert "let Tmax = 1024" in printed and "Pos: bf16[Tmax, D]" in printed  # learned positions
    bad, err = _write(tmp_path, {**GPT2, "model_type": "gemma3"}, "bad.json"), io.StringIO()
    assert main(["model", bad], out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and "model_type 'gemma3'" in err.getvalue()


def test_every_catalogue_entry_names_its_sources_and_has_thirty_models():
    assert len(models()) >= 30
    for config in configured():
        assert config["sources"]["sizes"].strip() and config["sources"]["params_published"].strip()


def test_qwen_biases_are_on_q_k_v_only():
    """Qwen2.5 72B by hand: q, k and v carry biases (N·H + 2·K·H a layer), o_proj and the MLP none."""
    s = get_model("qwen2.5-72b")["sizes"]
    got = symroof.model("qwen2.5-72b").params
    assert got == _dense(s["D"], s["L"], s["N"], s["K"], s["H"], s["F"], s["V"], qkv_bias=True)
    assert got - _dense(s["D"], s["L"], s["N"], s["K"], s["H"], s["F"], s["V"]) == 80 * (64 * 128 + 2 * 8 * 128)


def test_gpt2_sizes_by_hand():
    for name, D, L in (("gpt2", 768, 12), ("gpt2-medium", 1024, 24), ("gpt2-large", 1280, 36), ("gpt2-xl", 1600, 48)):
        assert symroof.model(name).params == _gpt2(D, L, 50257, 1024), name


def test_symroof_models_lists_counted_beside_published():
    out = io.StringIO()
    assert main(["models", "--json"], out=out) == 0
    rows = {row["id"]: row for row in json.loads(out.getvalue())}
    assert set(rows) == {m["id"] for m in models()}
    assert rows["gpt2"]["params"] == _gpt2(768, 12, 50257, 1024) == rows["gpt2"]["params_published"]
    assert rows["gpt2"]["rounded"] is False and "openai/gpt-2" in rows["gpt2"]["source"]
    assert rows["qwen2.5-7b"]["rounded"] is True and rows["qwen2.5-7b"]["params_published"] == 7_610_000_000
    assert rows["chinchilla-70b"]["params"] == 70 * 10**9 and rows["chinchilla-70b"]["params_published"] is None
    text = io.StringIO()
    assert main(["models"], out=text) == 0
    line = next(ln for ln in text.getvalue().splitlines() if ln.startswith("qwen2.5-7b "))
    # the hand count beside the card's rounded 7.61B: (7615616512 - 7.61e9) / 7.61e9 = +0.07%
    assert _dense(3584, 28, 28, 4, 128, 18944, 152064, qkv_bias=True) == 7_615_616_512
    assert "7.616 G" in line and "7.61 G~" in line and "+0.07%" in line


@pytest.mark.parametrize("change, message", [
    ({"qkv_bias": True, "bias": True}, "qkv_bias: 'bias' already puts biases on q, k and v"),
    ({"qkv_bias": "yes"}, "qkv_bias must be true or false"),
    ({"params_rounded": 1}, "params_rounded must be true or false"),
])
def test_the_catalogues_new_flags_are_checked(tmp_path, change, message):
    entry = {**get_model("llama-3-8b"), **change}
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": [entry]}), encoding="utf-8")
    with pytest.raises(SpecError, match=f"model llama-3-8b: {message}"):
        models(str(path))


def test_gemma_2b_matches_the_papers_non_embedding_count():
    """Gemma's paper (arXiv:2403.08295, Table 2) splits 2B's count: 1,981,884,416 outside the
    embedding, which the template's count less the 256000 x 2048 table matches exactly."""
    got = symroof.model("gemma-2b").params
    assert got == _dense(2048, 18, 8, 1, 256, 16384, 256000, tied=True)
    assert got - 256000 * 2048 == 1_981_884_416
