"""Whole models: programs with structure, models.json, and the model quantities, each
against a hand derivation written here from the published sizes."""

from __future__ import annotations

import json
import math

import by_hand
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.hardware.machines import machine
from symroof.ir import dim_symbol
from symroof.lang.relations import expression
from symroof.lang.structure import read_structured
from symroof.models.catalogue import configured, get_model, models
from symroof.models.templates import program
from symroof.models.whole import Model, Options


def _model(name, mode="train", chip=None, sizes=None, weights="bf16", **options) -> Model:
    return Model(read_structured(program(get_model(name), mode, weights)), machine(chip) if chip else None, sizes,
                 Options(mode=mode, **options))


def _dense_params(s: dict) -> int:
    """A LLaMA-style decoder's parameters, by hand: per layer the four attention
    projections (K KV heads), the gated MLP's three matrices and two norms; then the
    embedding and the untied output layer, and the final norm."""
    D, L, N, K, H, F, V = (s[k] for k in "DLNKHFV")
    layer = D * N * H * 2 + 2 * D * K * H + 3 * D * F + 2 * D
    return L * layer + 2 * V * D + D


@pytest.mark.parametrize("config", configured(), ids=lambda m: m["id"])
def test_every_model_matches_its_published_parameter_count(config):
    """Within 0.5% of a checkpoint's exact sum, 1% of a figure the publisher rounded ("7.61B")."""
    params = Model(read_structured(program(config, "train"))).params
    assert abs(params / config["params_published"] - 1) < (0.01 if config.get("params_rounded") else 0.005)


def test_llama_3_70b_parameters_by_hand():
    config = get_model("llama-3-70b")
    m = Model(read_structured(program(config)))
    assert m.params == _dense_params(config["sizes"]) == 70_553_706_496
    D, V = config["sizes"]["D"], config["sizes"]["V"]
    assert m.params_embedding == 2 * V * D
    assert m.params == m.params_embedding + config["sizes"]["L"] * m.params_per_block + D


def test_kv_cache_per_token_is_2_L_K_H_bytes():
    for name, dtype_bytes in (("llama-3-70b", 2), ("llama-2-7b", 2), ("mixtral-8x7b", 2)):
        s = get_model(name)["sizes"]
        assert _model(name, "decode").kv_bytes_per_token == 2 * s["L"] * s["K"] * s["H"] * dtype_bytes
    assert _model("llama-3-70b", "decode").kv_bytes_per_token == 327_680  # the figure


def test_training_flops_are_six_n_d_plus_attention():
    # matrix FLOPs per token of a dense model: 2 per parameter a token meets (all but the
    # input embedding, a lookup) and 4*L*N*H*T for the attention scores and their use;
    # training is 3x that (the backward twice the forward)
    config = get_model("llama-3-8b")
    s = config["sizes"]
    m = _model("llama-3-8b")
    B, T = dim_symbol("B"), dim_symbol("T")
    matrix = sympy.expand((m.analysis.flops - m.analysis.flops_vector) / (B * T))
    dense = 2 * (m.params - s["V"] * s["D"]) - 2 * (2 * s["L"] + 1) * s["D"]  # norms are vector work
    assert matrix == dense + 4 * s["L"] * s["N"] * s["H"] * T
    assert m.flops_train == 3 * m.flops


def test_repeat_costs_what_the_unrolled_program_costs():
    block = ["bf16[B, D] *_D bf16[D, F] -> bf16[B, F]", "gelu(bf16[B, F]) -> bf16[B, F]",
             "bf16[B, F] *_F bf16[F, D] -> bf16[B, D]"]
    structured = read_structured("repeat L {\n" + "\n".join(block) + "\n}\n")
    L = dim_symbol("L")
    for n in (1, 2, 5):
        unrolled = symroof.analyze("\n".join(block * n), chip="tpu-v5p")
        rolled = Model(structured, machine("tpu-v5p"), {"L": n}).analysis
        for field in ("flops", "flops_exact", "bytes", "transcendentals", "t_math", "t_comms"):
            assert getattr(rolled, field) == getattr(unrolled, field), field
    assert Model(structured).flops.has(L)  # costed once and multiplied, not unrolled


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 64), st.integers(1, 64), st.integers(1, 8))
def test_relations_substitute_like_numbers(d, h, n):
    text = "let D = N*H, F = 4*D\nrepeat L {\n  param W: bf16[D, F]\n  bf16[B, D] *_D bf16[D, F] -> bf16[B, F]\n}\n"
    m = Model(read_structured(text), sizes={"N": n, "H": h, "L": 3, "B": 2})
    D = n * h
    assert m.params == 3 * D * 4 * D
    assert m.flops == 3 * 2 * 2 * D * 4 * D
    assert d  # the strategy's first size only shakes the cache


def test_memory_and_chips_by_hand():
    config = get_model("llama-3-70b")
    m = _model("llama-3-70b", chip="tpu-v5p", sizes={"B": 8, "T": 4096}, chips=16)
    P, s = config["params_published"], config["sizes"]
    # remat full: each layer's input, and the head's: the final norm's input and output and
    # the logits, bf16
    activations = s["L"] * 8 * 4096 * s["D"] * 2 + 8 * 4096 * (2 * s["D"] + s["V"]) * 2
    total = 2 * P + 2 * P + 12 * P + activations
    assert m.memory_bytes == total
    assert m.hbm_per_chip == sympy.Rational(total, 16)
    capacity = machine("tpu-v5p").chip.figure("hbm_capacity_bytes")
    assert m.min_chips == math.ceil(total / (capacity * sympy.Rational(9, 10)))
    none = _model("llama-3-70b", sizes={"B": 8, "T": 4096}, remat="none")
    assert none.activation_bytes > m.activation_bytes


def test_decode_batch_threshold_balances_the_roofline():
    m = _model("llama-3-70b", "decode", chip="h100", sizes={"S": 1024})
    region = m.decode_batch(with_kv=False)
    assert region.kind == "above"
    bandwidth = m.machine.bandwidth()
    for batch, compute_bound in ((math.floor(region.root), False), (math.floor(region.root) + 1, True)):
        at = Model(m.structured, m.machine, {"S": 1024, "B": batch}, Options(mode="decode"))
        t_comms_no_kv = at.analysis.t_comms - at.kv_bytes / bandwidth  # the cache read once a step
        assert bool(at.analysis.t_math > t_comms_no_kv) is compute_bound
    with_kv = m.decode_batch(with_kv=True)  # the cache's reads grow with B too: later, or never
    assert with_kv.kind == "none" or with_kv.root > region.root


def test_bad_input_is_a_clear_error():
    with pytest.raises(SpecError, match="contradicts let F = 4"):
        Model(read_structured("let F = 4*D\nbf16[B, D] *_D bf16[D, F] -> bf16[B, F]"), sizes={"F": 1000, "D": 300})
    with pytest.raises(SpecError, match="circle"):
        read_structured("let A = 2*C, C = A\nbf16[B, A] -> bf16[B, A]")
    with pytest.raises(SpecError, match="not closed"):
        read_structured("repeat L {\nbf16[B, D] -> bf16[B, D]\n")
    with pytest.raises(SpecError, match="repeat count must be positive; this one is 0"):  # was: nan in the report
        read_structured("repeat L-L {\nbf16[B, D] -> bf16[B, D]\n}")
    with pytest.raises(SpecError, match="did you mean 'bf16'"):
        read_structured("param W: bf61[D]\nbf16[B, D] -> bf16[B, D]")
    with pytest.raises(SpecError, match="declared twice"):
        read_structured("param W: bf16[D]\nparam W: bf16[D]\nbf16[B, D] -> bf16[B, D]")
    with pytest.raises(SpecError, match="did you mean llama-3-70b"):
        get_model("llama-3-7Ob")
    with pytest.raises(SpecError) as caught:
        expression("4 * * D", ("let F = 4 * * D", 8))
    assert caught.value.start == 12  # the second '*'


def test_cli_model_json_and_print(tmp_path, capsys):
    assert main(["model", "llama-3-70b", "--chip", "v5p", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in ("params", "params_embedding", "flops_per_token", "flops_train_per_token", "weight_bytes",
                "optimizer_bytes", "activation_bytes", "kv_bytes_per_token", "hbm_per_chip", "min_chips",
                "t_step", "tokens_per_s"):
        assert key in data, key
    assert data["params"] == 70_553_706_496
    assert main(["model", "gemma-7b", "--print"]) == 0
    path = tmp_path / "gemma.sr"
    path.write_text(capsys.readouterr().out)
    assert main(["model", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params"] == 8_537_680_896
    assert main(["model", "llama-9"]) == 2
    assert "unknown model" in capsys.readouterr().err


def test_max_batch_and_time_split_by_hand():
    config = get_model("llama-3-70b")
    m = _model("llama-3-70b", "decode", chip="h100", sizes={"B": 8, "S": 8192}, chips=8)
    s = config["sizes"]
    usable = machine("h100").chip.figure("hbm_capacity_bytes") * sympy.Rational(9, 10) * 8
    per_sequence = 2 * s["L"] * s["K"] * s["H"] * 2 * 8192  # K and V, bf16, at S = 8192
    assert m.max_batch() == math.floor((usable - m.weight_bytes) / per_sequence)
    split = m.time_split()
    assert set(split) == {"attention", "mlp", "rest"}
    # each statement at its own roofline: the parts add up to at least the whole step's bound
    assert sum(split.values()) >= m.t_step
    assert _model("gemma-7b", "decode", weights="int8").weight_bytes < _model("gemma-7b", "decode").weight_bytes


def test_symbolic_chip_gives_the_textbook_thresholds():
    C, W_hbm, W_ici = (sympy.Symbol(n, positive=True) for n in ("C", "W_hbm", "W_ici"))
    matmul = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
    assert symroof.analyze(matmul, chip="symbolic").threshold("B").rule == C / W_hbm
    sharded = symroof.analyze("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="symbolic", mesh="X=2")
    assert sharded.threshold("D").network.rule == 2 * C / W_ici
    # one figure symbolic on a real chip: putting the figure back gives the chip's own threshold
    v5e = machine("tpu-v5e")
    half = symroof.analyze(matmul, chip="tpu-v5e", symbolic=["hbm_bw"]).threshold("B").rule
    assert half.xreplace({W_hbm: v5e.hbm_bw}) == symroof.analyze(matmul, chip="tpu-v5e").threshold("B").rule


def test_symbolic_chip_model_is_the_chip_model_with_figures_put_back():
    v5p = machine("tpu-v5p")
    figures = {sympy.Symbol("C", positive=True): v5p.peak("bf16"),
               sympy.Symbol("C_vec", positive=True): v5p.vector_peak(symroof.dtypes.DTYPES["fp32"])[1],
               sympy.Symbol("W_hbm", positive=True): v5p.hbm_bw,
               sympy.Symbol("M_hbm", positive=True): v5p.chip.figure("hbm_capacity_bytes")}
    symbolic = symroof.model("llama-3-8b", "decode", chip="symbolic", sizes={"B": 16, "S": 2048})
    real = symroof.model("llama-3-8b", "decode", chip="tpu-v5p", sizes={"B": 16, "S": 2048})
    assert symbolic.t_step.xreplace(figures) == real.t_step
    assert symbolic.hbm_left_per_chip.xreplace(figures) == real.hbm_left_per_chip
    assert symbolic.decode_batch(False).root.xreplace(figures) == real.decode_batch(False).root


def test_throughput_against_latency(tmp_path, capsys):
    from symroof.models import plot as model_plot
    m = _model("llama-3-70b", "decode", chip="h100", sizes={"S": 4096}, chips=8)
    rows = model_plot.sweep(m, [1, 16, 256, 1024])
    # a bigger batch: each step takes longer, more tokens come out, and at some batch the
    # KV cache no longer fits
    assert all(a["t_step"] < b["t_step"] and a["tokens_per_s"] < b["tokens_per_s"] for a, b in zip(rows, rows[1:]))
    assert [r["fits"] for r in rows] == [True, True, True, False]
    assert rows[1]["tokens_per_s"] == 16 / rows[1]["t_step"]
    path = tmp_path / "tl.png"
    assert main(["model", "llama-3-70b", "--decode", "--chip", "h100", "--chips", "8", "--set", "S=4096",
                 "--batches", "1,16,256", "-o", str(path)]) == 0
    assert path.stat().st_size > 1000 and "tokens/s/chip" in capsys.readouterr().out
    assert main(["model", "llama-3-70b", "--chip", "h100", "--chips", "3", "--set", "B=1,T=4096"]) == 2
    assert "do not split evenly over 3 chips" in capsys.readouterr().err


def test_the_throughput_table_says_what_each_row_holds_fixed(capsys):
    # a user comparing with another S got another step: the table names its context (the
    # model's own unless given) and the HBM its "fits" allows
    context = get_model("llama-3-8b")["sizes"]["context"]
    assert main(["model", "llama-3-8b", "--decode", "--chip", "h100", "--batches", "1,8"]) == 0
    head, fits = capsys.readouterr().out.splitlines()[:2]
    assert head.endswith(f"; S = {context} (the model's context; --set S=... for another)")
    assert fits == "fits: the step's memory within 90% of each chip's HBM (--hbm-usable)"
    assert main(["model", "llama-3-8b", "--decode", "--chip", "h100", "--batches", "1,8", "--set", "S=2048",
                 "--hbm-usable", "0.5"]) == 0
    head, fits = capsys.readouterr().out.splitlines()[:2]
    assert head.endswith("; S = 2048") and "within 50% of each chip's HBM" in fits


def test_per_block_is_the_total_over_L_without_the_rest():
    m = _model("llama-3-8b", sizes={"B": 2, "T": 512})
    s = get_model("llama-3-8b")["sizes"]
    block = m.per_block()
    assert block["params"] == m.params_per_block
    # the block's FLOPs: its matmuls (2 per parameter per token, norms aside) and attention
    matrix = 2 * 2 * 512 * (m.params_per_block - 2 * s["D"]) + 4 * 2 * 512 * 512 * s["N"] * s["H"]
    assert block["flops"] > matrix and block["flops"] - matrix < block["flops"] / 100  # the rest: vector work
    assert s["L"] * block["flops"] < m.flops  # plus the final norm and the output layer


def test_step_time_tokens_and_days_by_hand():
    config = get_model("llama-3-8b")
    m = _model("llama-3-8b", chip="tpu-v5p", sizes={"B": 64, "T": 4096}, chips=64, mfu=0.5)
    peak = machine("tpu-v5p").peak("bf16")
    # the model FLOPs (3x forward, nothing recomputed: MFU's definition) over chips x peak x MFU
    assert m.t_step == 3 * m.flops / (64 * peak * sympy.Rational(1, 2))
    assert m.mfu == sympy.Rational(1, 2)  # the MFU given is the MFU the step runs at
    assert m.hfu == m.mfu * m.flops_train_hardware / m.flops_train > m.mfu  # remat full recomputes
    assert m.tokens_per_s == 64 * 4096 / m.t_step
    assert m.days_to_train(15 * 10**12) == 15 * 10**12 / m.tokens_per_s / 86400
    for remat in ("full", "none"):  # the roofline: the step's hardware work, what remat recomputes too
        roof = _model("llama-3-8b", chip="tpu-v5p", sizes={"B": 64, "T": 4096}, chips=64, remat=remat)
        assert roof.t_step == max(by_hand.step("llama-3-8b", "tpu-v5p", 64, 4096, remat)) / 64
    assert config["sizes"]["context"] == 8192


def test_models_file_entry_missing_a_field(tmp_path):
    entries = models()
    broken = [dict(entries[0])]
    del broken[0]["params_published"]
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": broken}))
    with pytest.raises(SpecError, match="missing field 'params_published'"):
        get_model(broken[0]["id"], str(path))
    unsourced = [dict(entries[0], sources={"sizes": "x"})]
    path.write_text(json.dumps({"models": unsourced}))
    with pytest.raises(SpecError, match="sources.params_published is missing"):
        get_model(unsourced[0]["id"], str(path))


MEGATRON = """mesh X=4
let tokens = B*T
repeat L {
  param W1: bf16[D, F_X], W2: bf16[F_X, D]
  bf16[B, T, D] *_D bf16[D, F_X] -> bf16[B, T, F_X]
  bf16[B, T, F_X] *_F bf16[F_X, D] -> bf16[B, T, D]
}
"""


def test_a_sharded_model_costs_its_collectives_each_time_and_its_shards_per_chip():
    structured = read_structured(MEGATRON)
    sizes = {"L": 3, "B": 8, "T": 1024, "D": 4096, "F": 16384}
    rolled = Model(structured, machine("tpu-v5p"), sizes, Options(mode="decode"))
    body = MEGATRON.split("repeat L {\n")[1].split("}")[0].splitlines()
    unrolled_text = "mesh X=4\n" + "\n".join(line for line in body * 3 if "param" not in line)
    unrolled = symroof.analyze(unrolled_text, chip="tpu-v5p", values={k: v for k, v in sizes.items() if k != "L"})
    a = rolled.analysis
    # three AllReduces, each paying its own latency: the unrolled program's network time exactly
    assert a.t_network == unrolled.t_network and a.t_network_latency == unrolled.t_network_latency
    assert a.t_network_latency == 3 * unrolled.at().collectives[0][1].latency
    assert a.flops == unrolled.flops and a.t_lower == unrolled.t_lower
    # each chip holds a quarter of each weight matrix
    assert rolled.weight_bytes == 3 * 2 * 4096 * 16384 * 2 // 4
    assert rolled.params == 3 * 2 * 4096 * 16384  # all of them, counted once
    assert rolled.flops == 2 * rolled.params * 8 * 1024  # the whole step's, over the four chips
    assert "min_chips" not in rolled.quantities()
    with pytest.raises(SpecError, match="already splits the work"):
        Model(structured, machine("tpu-v5p"), sizes, Options(mode="decode", chips=2)).hbm_per_chip


def test_remat_save_keeps_the_named_tensors():
    s = get_model("llama-3-8b")["sizes"]
    m = _model("llama-3-8b", sizes={"B": 2, "T": 1024}, remat="save=x,o,h")
    per_token = s["D"] * 2 + s["N"] * s["H"] * 2 + s["F"] * 2  # x, attention's output o, the MLP's h; bf16
    head = (2 * s["D"] + s["V"]) * 2  # the final norm's input and output, the logits: not recomputed
    assert m.activation_bytes == s["L"] * 2 * 1024 * per_token + 2 * 1024 * head
    with pytest.raises(SpecError, match="no tensor named zz"):
        _model("llama-3-8b", remat="save=x,zz").activation_bytes


def test_a_size_for_a_dim_the_model_lacks_is_refused():
    with pytest.raises(SpecError, match="no dim b; did you mean B"):
        _model("llama-3-8b", sizes={"b": 4})
    nested = read_structured("repeat L {\n  param W: bf16[D]\n  repeat 2 {\n    param U: bf16[D, D2]\n"
                             "    bf16[B, D] *_D bf16[D, D2] -> bf16[B, D2]\n  }\n}\n")
    m = Model(nested, sizes={"L": 3, "D": 8, "D2": 4})
    assert m.params_per_block == 8 + 2 * 8 * 4  # W once, U twice per pass through the outer block
    assert m.params == 3 * m.params_per_block


@settings(max_examples=15, deadline=None)
@given(st.sampled_from(["llama-2-7b", "gemma-7b", "mixtral-8x7b", "gpt-3-175b"]),
       st.sampled_from(["train", "prefill", "decode"]), st.integers(1, 64), st.integers(1, 4096))
def test_formulas_at_sizes_are_the_model_at_those_sizes(name, mode, b, t):
    config = get_model(name)
    structured = read_structured(program(config, mode))
    seq = "S" if mode == "decode" else "T"
    free = Model(structured, machine("tpu-v5p"), {}, Options(mode=mode))
    sized = Model(structured, machine("tpu-v5p"), {"B": b, seq: t}, Options(mode=mode))
    at = {dim_symbol("B"): b, dim_symbol(seq): t}
    for name_ in ("params", "flops", "flops_per_token", "weight_bytes", "kv_bytes", "memory_bytes", "t_step",
                  "tokens_per_s"):
        assert getattr(free, name_).xreplace(at) == getattr(sized, name_), name_


def test_a_models_analysis_has_only_its_free_dims():
    # was: at(D2=9999) accepted and ignored (D2 = D already in the counts), and free_dims
    # listing D2 and D, which plot_roofline then asked sizes for
    m = Model(read_structured("let D2 = D\nbf16[B, D] *_D bf16[D, D2] -> bf16[B, D2]"), sizes={"D": 64})
    a = m.analysis
    assert a.free_dims == ("B",) and a.flops == 2 * 64 * 64 * sympy.Symbol("B", positive=True, integer=True)
    for name in ("D2", "D"):
        with pytest.raises(SpecError, match=f"{name} is 64 in this analysis: {name}=9999 does not agree"):
            a.at(**{name: 9999})
    assert a.at(B=2).flops == 2 * 2 * 64 * 64 and a.at(B=2).free_dims == ()
    assert a.at(B=2, D2=64).flops == a.at(B=2).flops  # a size that agrees is taken
