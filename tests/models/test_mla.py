"""DeepSeek's multi-head latent attention, shared experts and dense-first layers
(models/mla.py): the published counts of DeepSeek-V3, V2 and V2-Lite out of the template,
each derived by hand here from the published configuration; the latent KV cache; the
decode FLOPs in the absorbed form; a hand-written config.json of each model_type."""

from __future__ import annotations

import io
import json

import pytest

import symroof
import symroof.models.catalogue
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.models import mla
from symroof.models.catalogue import get_model

# The published configurations (deepseek-ai/DeepSeek-V3 inference/configs/config_671B.json;
# the Hugging Face config.json of DeepSeek-V2 and V2-Lite), as Hugging Face names them
V3 = {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
      "num_hidden_layers": 61, "first_k_dense_replace": 3, "intermediate_size": 18432, "moe_intermediate_size": 2048,
      "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 256, "n_shared_experts": 1,
      "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5,
      "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True, "q_lora_rank": 1536,
      "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
      "vocab_size": 129280, "max_position_embeddings": 163840, "moe_layer_freq": 1, "num_nextn_predict_layers": 1,
      "hidden_act": "silu", "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "attention_bias": False}
V2 = {"architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2", "hidden_size": 5120,
      "num_hidden_layers": 60, "first_k_dense_replace": 1, "intermediate_size": 12288, "moe_intermediate_size": 1536,
      "num_attention_heads": 128, "num_key_value_heads": 128, "n_routed_experts": 160, "n_shared_experts": 2,
      "num_experts_per_tok": 6, "n_group": 8, "topk_group": 3, "topk_method": "group_limited_greedy",
      "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
      "vocab_size": 102400, "max_position_embeddings": 163840, "moe_layer_freq": 1, "hidden_act": "silu",
      "rms_norm_eps": 1e-06, "tie_word_embeddings": False, "attention_bias": False}
V2_LITE = {**V2, "hidden_size": 2048, "num_hidden_layers": 27, "intermediate_size": 10944,
           "moe_intermediate_size": 1408, "num_attention_heads": 16, "num_key_value_heads": 16, "n_routed_experts": 64,
           "n_group": 1, "topk_group": 1, "topk_method": "greedy", "q_lora_rank": None}


def _sizes(c: dict) -> tuple:
    return (c["hidden_size"], c["num_hidden_layers"], c["first_k_dense_replace"], c["num_attention_heads"],
            c["q_lora_rank"], c["kv_lora_rank"], c["qk_nope_head_dim"], c["qk_rope_head_dim"], c["v_head_dim"],
            c["intermediate_size"], c["moe_intermediate_size"], c["n_routed_experts"], c["n_shared_experts"],
            c["num_experts_per_tok"], c["vocab_size"], c["topk_method"] == "noaux_tc")


def by_hand(c: dict) -> tuple[int, int]:
    """(total, activated) from the config, as DeepSeek's inference/model.py builds it: per
    layer MLA (wq_a, q_norm, wq_b, or wq where q_lora_rank is null; wkv_a of kv_lora_rank +
    qk_rope_head_dim; kv_norm; wkv_b of heads x (nope + v); wo) and two norms; the first k
    layers a dense gated MLP, the rest a router (E x D, and V3's fp32 bias of E) with E
    routed and the shared experts (three D x F_e matrices each); then the embedding, the
    untied head and the final norm. Activated: A of the E routed experts, and one row (D) of
    the embedding table."""
    D, L, Ld, N, qr, kvr, dn, dr, dv, F, Fe, E, Es, A, V, router_bias = _sizes(c)
    q = D * N * (dn + dr) if qr is None else D * qr + qr + qr * N * (dn + dr)
    attention = q + D * (kvr + dr) + kvr + kvr * N * (dn + dv) + N * dv * D
    router = E * D + (E if router_bias else 0)
    expert = 3 * D * Fe
    common = L * (attention + 2 * D) + Ld * 3 * D * F + (L - Ld) * (router + Es * expert) + V * D + D
    return common + (L - Ld) * E * expert + V * D, common + (L - Ld) * A * expert + D


# the model's id: (its config, published total, published activated)
CASES = {"deepseek-v3": (V3, 671e9, 37e9), "deepseek-v2": (V2, 236e9, 21e9),
         "deepseek-v2-lite": (V2_LITE, 15.7e9, 2.4e9)}


@pytest.mark.parametrize("name", CASES)
def test_the_published_counts_come_out_of_the_template(name):
    config, total, activated = CASES[name]
    m = symroof.model(name, "decode")
    hand_total, hand_activated = by_hand(config)
    assert m.params == hand_total and mla.activated_params(m) == hand_activated
    # the publishers round ("671B"): models.json's params_rounded, 1%
    assert get_model(name)["params_rounded"] and abs(hand_total / total - 1) < 0.01
    # the activated counts: V3 36.63B and V2 20.85B round to the published 37B and 21B;
    # V2-Lite's 2.45B is 2.1% above its 2.4B (the template cannot say how DeepSeek rounded it)
    if name == "deepseek-v2-lite":
        assert abs(hand_activated / activated - 1) < 0.025
    else:
        assert round(hand_activated / 1e9) == activated / 1e9


def test_v3_by_hand_to_the_parameter():
    # the hand count above, spelled out once for V3
    attention = 7168 * 1536 + 1536 + 1536 * 128 * 192 + 7168 * 576 + 512 + 512 * 128 * 256 + 128 * 128 * 7168
    moe = 256 * 7168 + 256 + (256 + 1) * 3 * 7168 * 2048
    total = 61 * (attention + 2 * 7168) + 3 * 3 * 7168 * 18432 + 58 * moe + 2 * 129280 * 7168 + 7168
    assert total == 671_026_419_200 == symroof.model("deepseek-v3").params


@pytest.mark.parametrize("name", CASES)
def test_the_cache_is_the_latent_and_the_rope_key(name):
    c = CASES[name][0]
    layers, latent = c["num_hidden_layers"], c["kv_lora_rank"] + c["qk_rope_head_dim"]
    assert symroof.model(name, "decode").kv_bytes_per_token == layers * latent * 2
    assert symroof.model(name, "decode", kv="fp8").kv_bytes_per_token == layers * latent
    if name == "deepseek-v3":
        assert layers * latent * 2 == 61 * 576 * 2 == 70_272


def decode_flops(c: dict, B: int, S: int) -> int:
    """One decode step's FLOPs by hand, attention in the absorbed form: a matmul 2 per
    multiply-add; an RMSNorm 4 an element and 2 a row, softmax and SiLU 4 an element, an
    add or a product 1 (ops/norm.py, softmax.py, unary.py's leading counts). The latent
    attention per head and context token: the query taken to the latent (2 Ckv), the rope
    part (2 Hr), softmax (4) and the weighted sum of the latents (2 Ckv)."""
    D, L, Ld, N, qr, kvr, dn, dr, dv, F, Fe, E, Es, A, V, router_bias = _sizes(c)
    norm = lambda width: B * (4 * width + 2)  # noqa: E731
    q = 2 * B * D * N * (dn + dr) if qr is None else 2 * B * D * qr + norm(qr) + 2 * B * qr * N * (dn + dr)
    attention = norm(D) + q + 2 * B * D * kvr + norm(kvr) + 2 * B * D * dr + 2 * B * N * dn * kvr \
        + B * N * S * (2 * kvr + 2 * dr + 4 + 2 * kvr) + 2 * B * N * kvr * dv + 2 * B * N * dv * D + B * D

    def gated(rows: int, width: int) -> int:  # gate and up, SiLU, their product, down
        return 2 * 2 * rows * D * width + 4 * rows * width + rows * width + 2 * rows * width * D

    dense = norm(D) + gated(B, F) + B * D
    moe = norm(D) + gated(B, Es * Fe) + B * D + 2 * B * D * E + (B * E if router_bias else 0) + 4 * B * E \
        + gated(B * A, Fe) + 2 * B * A * D + B * D
    return L * attention + Ld * dense + (L - Ld) * moe + norm(D) + 2 * B * D * V


@pytest.mark.parametrize("name", CASES)
def test_decode_flops_are_the_absorbed_forms(name):
    c = CASES[name][0]
    for B, S in ((1, 4096), (8, 32768)):
        m = symroof.model(name, "decode", sizes={"B": B, "S": S})
        assert m.flops == decode_flops(c, B, S)


def test_absorbed_decode_per_context_token():
    # per layer, head and context token: absorbed 2(Ckv + Hr) + 2 Ckv (+ softmax's 4), where
    # expanding each cached latent to a key and a value would cost 2 Ckv (Hn + Hv) more
    m1 = symroof.model("deepseek-v3", "decode", sizes={"B": 1, "S": 1000})
    m2 = symroof.model("deepseek-v3", "decode", sizes={"B": 1, "S": 2000})
    assert m2.flops - m1.flops == 61 * 128 * 1000 * (2 * (512 + 64) + 4 + 2 * 512)


def test_prefill_runs_the_expanded_form():
    # per layer, the latent up-projected to every head's keys and values over the S tokens:
    # 2 B S Ckv N (Hn + Hv); then attention over them, 2 B N T S (Hn + Hr) + 2 B N T S Hv
    B, T = 1, 512
    p = symroof.model("deepseek-v2-lite", "prefill", sizes={"B": B, "T": T})
    statements = [str(a.program.statements[0]) for a in p.analysis.lines]
    ups = [a.flops for a, s in zip(p.analysis.lines, statements) if s.startswith("bf16[B, S, Ckv] *_{Ckv}")]
    assert sorted(set(ups)) == sorted({2 * B * T * 512 * 16 * 128 * 26, 2 * B * T * 512 * 16 * 128})


@pytest.mark.parametrize("name", CASES)
def test_a_config_json_reads_as_the_catalogue_entry(tmp_path, name):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CASES[name][0]), encoding="utf-8")
    m, entry = symroof.model(str(path), "decode"), symroof.model(name, "decode")
    assert m.params == entry.params == by_hand(CASES[name][0])[0]
    assert m.kv_bytes_per_token == entry.kv_bytes_per_token and m.flops == entry.flops


def test_a_small_hand_written_config_of_each_type(tmp_path):
    # deepseek_v2, the query straight from D, no shared experts, one dense layer of two
    small = {"model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 2, "first_k_dense_replace": 1,
             "intermediate_size": 96, "moe_intermediate_size": 16, "num_attention_heads": 4, "n_routed_experts": 4,
             "n_shared_experts": None, "num_experts_per_tok": 2, "q_lora_rank": None, "kv_lora_rank": 32,
             "qk_nope_head_dim": 8, "qk_rope_head_dim": 4, "v_head_dim": 8, "vocab_size": 100,
             "max_position_embeddings": 256, "hidden_act": "silu"}
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(small), encoding="utf-8")
    # MLA 64*4*12 + 64*36 + 32 + 32*4*16 + 4*8*64 = 3072 + 2304 + 32 + 2048 + 2048 = 9504,
    # norms 128; dense 3*64*96 = 18432; MoE 4*64 (router) + 4*3*64*16 = 256 + 12288
    assert symroof.model(str(path)).params == 2 * (9504 + 128) + 18432 + 256 + 12288 + 2 * 100 * 64 + 64
    # deepseek_v3: a low-rank query, one shared expert, the router's bias (noaux_tc by default)
    small3 = {**small, "model_type": "deepseek_v3", "q_lora_rank": 16, "n_shared_experts": 1}
    path = tmp_path / "v3.json"
    path.write_text(json.dumps(small3), encoding="utf-8")
    # the query: 64*16 + 16 + 16*4*12 = 1024 + 16 + 768 = 1808 in place of 3072
    mla_layer = 1808 + 2304 + 32 + 2048 + 2048
    moe = 256 + 4 + (4 + 1) * 3 * 64 * 16
    assert symroof.model(str(path)).params == 2 * (mla_layer + 128) + 18432 + moe + 2 * 100 * 64 + 64


def test_mla_without_experts_or_with_every_layer_dense(tmp_path):
    small = {"model_type": "deepseek_v2", "hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96,
             "num_attention_heads": 4, "q_lora_rank": None, "kv_lora_rank": 32, "qk_nope_head_dim": 8,
             "qk_rope_head_dim": 4, "v_head_dim": 8, "vocab_size": 100, "max_position_embeddings": 256,
             "hidden_act": "silu"}
    # the small config's MLA layer (9504) and norms (128) as above; a dense MLP (18432) a layer
    by_hand = 2 * (9504 + 128 + 18432) + 2 * 100 * 64 + 64
    for fields in (small, {**small, "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                           "first_k_dense_replace": 2}):
        path = tmp_path / "config.json"
        path.write_text(json.dumps(fields), encoding="utf-8")
        m = symroof.model(str(path), "decode", sizes={"B": 1, "S": 10})
        assert m.params == by_hand and m.kv_bytes_per_token == 2 * (32 + 4) * 2


@pytest.mark.parametrize("change, message", [
    ({"moe_layer_freq": 2}, "moe_layer_freq: 2: experts in every 2th layer only"),
    ({"kv_lora_rank": None}, "missing field 'kv_lora_rank'"),
    ({"num_experts_per_tok": 300}, "num_experts_per_tok: 300 experts a token, more than n_routed_experts = 256"),
    ({"topk_method": "magic"}, "topk_method 'magic': not a routing symroof knows"),
    ({"first_k_dense_replace": 99}, "first_k_dense_replace must be a whole number of layers"),
])
def test_a_config_json_past_the_template_is_refused(tmp_path, change, message):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**V3, **change}), encoding="utf-8")
    with pytest.raises(SpecError, match=message):
        symroof.model(str(path))


def _entry(**change: object) -> dict:
    base = json.loads(json.dumps(get_model("deepseek-v3")))
    base.update(change)
    return base


@pytest.mark.parametrize("change, message", [
    ({"mla": {"q_rank": 1536, "kv_rank": 512, "nope": 128, "rope": 64}}, "'mla' must be an object with exactly"),
    ({"mla": {"q_rank": 0, "kv_rank": 512, "nope": 128, "rope": 64, "v": 128}}, "mla.q_rank must be a positive"),
    ({"mla": {"q_rank": None, "kv_rank": True, "nope": 128, "rope": 64, "v": 128}}, "mla.kv_rank must be"),
    ({"mla": None}, "mla: an object of the latent attention's ranks, not null"),
    ({"qkv_bias": True}, "qkv_bias: MLA's projections have no biases in the template"),
    ({"bias": True}, "bias: MLA's projections have no biases in the template"),
    ({"mlp": "gelu"}, "mlp: MLA's experts are gated \\(swiglu, geglu\\), not 'gelu'"),
    ({"moe": {"experts": 256, "active": 8, "shared": -1}}, "moe.shared must be a whole number"),
    ({"moe": {"experts": 256, "active": 8, "width": 0}}, "moe.width must be a whole number up to .*, above 0"),
    ({"moe": {"experts": 256, "active": 8, "router_bias": "yes"}}, "moe.router_bias must be true or false"),
    ({"moe": {"experts": 256, "active": 8, "dense_layers": 62}}, "moe.dense_layers: 62 dense-first layers, more"),
    ({"moe": {"experts": 256, "active": 8, "sharde": 1}}, "'moe' must be an object"),
])
def test_the_catalogue_checks_the_new_fields(tmp_path, change, message):
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": [_entry(**change)]}), encoding="utf-8")
    with pytest.raises(SpecError, match=message):
        symroof.models.catalogue.models(str(path))


def test_shared_experts_without_mla_are_refused(tmp_path):
    entry = json.loads(json.dumps(get_model("mixtral-8x7b")))
    entry["moe"]["shared"] = 1
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": [entry]}), encoding="utf-8")
    with pytest.raises(SpecError, match="moe.shared: shared experts, dense-first layers and a router bias are "
                                        "written with MLA only"):
        symroof.models.catalogue.models(str(path))


def test_weights_in_int8_store_the_latent_attention_too():
    # the layers' matrices in one byte plus a 2-byte scale per output channel (models/quant.py);
    # the embedding and LM head, the norm scales, the router (and its bias) stay bf16
    m16, m8 = symroof.model("deepseek-v2-lite", "decode"), symroof.model("deepseek-v2-lite", "decode", weights="int8")
    D, L, E, V, F = 2048, 27, 64, 102400, 10944
    N, Hn, Hr, Hv, Ckv, Fe, Fs = 16, 128, 64, 128, 512, 1408, 2 * 1408  # no q_lora: q straight from x
    small = L * (2 * D + 512) + D + (L - 1) * E * D  # norms (2 a layer, kv_norm, final), router
    matrices = m16.params - small - 2 * V * D
    outputs = (L * (N * (Hn + Hr) + Ckv + Hr + N * Hn + N * Hv + D)  # q, the latent, the rope key, k, v, o
               + (2 * F + D)  # the one dense-first layer's MLP
               + (L - 1) * (2 * Fs + D + E * (2 * Fe + D)))  # the shared experts and the routed
    # each matrix: 2 bytes an element in bf16, 1 + 2/width in int8 (2 bytes a row of outputs)
    assert m16.weight_bytes - m8.weight_bytes == matrices - 2 * outputs


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stderr
    with redirect_stderr(err):
        code = main(list(argv), out=out)
    return code, out.getvalue(), err.getvalue()


def test_the_cli_decodes_serves_and_refuses_a_strategy():
    code, out, _ = _run("model", "deepseek-v3", "--decode", "--chip", "h100", "--json")
    assert code == 0 and json.loads(out)["kv_bytes_per_token"] == 70272
    code, out, _ = _run("model", "deepseek-v3", "--serve", "--chip", "h100", "--prompt", "1000", "--generate", "100")
    assert code == 0 and "tpot" in out
    for mode, text in (("--decode", "tp=8"), ("--decode", "dp=2,tp=4"), ("--train", "fsdp=2"),
                       ("--prefill", "sp=2"), ("--train", "dp=2,pp=2")):
        code, _, err = _run("model", "deepseek-v3", mode, "--chip", "h100", "--strategy", text)
        kind = text.split(",")[-1].split("=")[0]
        assert code == 2 and f"{kind} on multi-head latent attention (MLA) is not written yet; MLA models shard by " \
            "dp and ep only" in err
    code, _, err = _run("plan", "deepseek-v3", "--decode", "--chip", "h100", "--chips", "64", "--batch", "64")
    assert code == 2 and "a plan searches every kind of sharding, and only dp and ep are written" in err


def test_dp_and_ep_shard_mla_as_any_batch():
    """dp: each chip half the batch (FLOPs and cache halved), every weight whole; ep=8: an
    eighth of the batch and of the routed experts' weights a chip, the shared experts, the
    attention and the dense layer whole on each, the tokens sent to their experts and back."""
    from symroof.hardware.machines import machine
    from symroof.lang.structure import read_source
    from symroof.models.decls import Options
    from symroof.models.strategies import parse_strategy
    from symroof.models.templates import program
    from symroof.models.whole import Model

    config = get_model("deepseek-v2-lite")

    def at(text: str, B: int) -> Model:
        p = program(config, "decode", strategy=parse_strategy(text, None, 256) if text else {})
        return Model(read_source(p), machine("h100"), {"B": B, "S": 1024}, Options(mode="decode"))

    whole, dp = at("", 16), at("dp=2", 16)
    # a chip's FLOPs (Model.flops is the whole step's, over the chips, each counted once)
    assert dp.analysis.flops * 2 == whole.flops == dp.flops and dp.kv_bytes * 2 == whole.kv_bytes
    assert dp.weight_bytes == whole.weight_bytes == 2 * by_hand(V2_LITE)[0]
    whole, ep = at("", 256), at("ep=8", 256)  # C = 256 x 6 / 64 = 24 tokens an expert, 3 a chip
    routed = 26 * 64 * 3 * 2048 * 1408  # the MoE layers' routed experts
    assert ep.weight_bytes == 2 * (by_hand(V2_LITE)[0] - routed + routed // 8)
    assert ep.analysis.flops * 8 == whole.flops == ep.flops and ep.kv_bytes * 8 == whole.kv_bytes
    assert "AllToAll" in str(program(config, "decode", strategy=parse_strategy("ep=8", None, 256)))


def test_the_absorbed_form_is_stated_where_mla_is():
    code, out, _ = _run("model", "deepseek-v2-lite", "--decode", "--chip", "h100", "--json")
    assert code == 0 and any("absorbed form" in c for c in json.loads(out)["conventions"])
    code, out, _ = _run("model", "llama-3-8b", "--decode", "--chip", "h100", "--json")
    assert code == 0 and not any("absorbed" in c for c in json.loads(out)["conventions"])
    assert "params_activated" not in json.loads(out)


def test_the_report_gives_the_activated_count():
    code, out, _ = _run("model", "deepseek-v3", "--decode", "--chip", "h100", "--json")
    assert code == 0 and json.loads(out)["params_activated"] == by_hand(V3)[1]
    code, out, _ = _run("model", "deepseek-v3", "--decode", "--chip", "h100")
    assert code == 0 and "params_activated       36625625600 (36.63 G)" in out


def test_the_config_files_are_the_published_ones():
    # the three entries carry their sources, and the MTP module is stated as left out
    assert "multi-token-prediction" in get_model("deepseek-v3")["sources"]["params_published"]


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2-lite"])
@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_the_printed_program_reads_back_as_the_objects(name, mode):
    # `symroof model NAME --print > my.sr` and back: the same program, the same numbers
    from symroof.hardware.machines import machine
    from symroof.lang.structure import read_source, read_structured
    from symroof.models.decls import Options
    from symroof.models.templates import program
    from symroof.models.whole import Model

    p = program(get_model(name), mode, "int8", "fp8")
    direct, read = read_source(p), read_structured(str(p))
    assert direct.program == read.program
    sizes = {"B": 8, ("S" if mode == "decode" else "T"): 2048}
    a, b = (Model(s, machine("h100"), sizes, Options(mode=mode)) for s in (direct, read))
    assert a.params == b.params and a.quantities() == b.quantities()


def test_a_decode_step_reads_the_latent_cache_once_a_token():
    # FlashMLA's kernel loads each token's latent and rope key once and uses the latent as
    # the keys and the values both: the step's bytes grow by the cache's bytes a token
    # (L x (Ckv + Hr) x 2 bytes = 61 x 576 x 2 for V3), not twice the latent's
    a, b = (symroof.model("deepseek-v3", "decode", "h200", {"B": 4, "S": s}) for s in (4096, 4097))
    assert b.step_analysis.bytes - a.step_analysis.bytes == 4 * 61 * (512 + 64) * 2 == 4 * a.kv_bytes_per_token
