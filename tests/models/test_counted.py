"""A model given only by its parameter count: the book's back-of-envelope questions, with
the hand arithmetic written here, and the refusals of what needs the configuration."""

from __future__ import annotations

import json

import pytest
import sympy

import symroof
from symroof.errors import SpecError
from symroof.hardware.chips import get_chip
from symroof.hardware.machines import machine
from symroof.models.catalogue import configured, get_model, models
from symroof.models.counted import Counted
from symroof.models.decls import Options


def test_days_to_train_70e9_parameters_on_15e12_tokens_on_8960_v5p_at_40_percent():
    # the 6·N rule: 6 x 70e9 x 15e12 FLOPs over 8960 chips x v5p's bf16 peak (the chip file's
    # 4.59e14 FLOPs/s) x 0.4, in days
    peak = get_chip("tpu-v5p").peak_flops("bf16")
    assert peak == 459 * 10**12
    days = sympy.Rational(6 * 70 * 10**9 * 15 * 10**12) / (8960 * peak * sympy.Rational(2, 5)) / 86400
    m = symroof.counted(70e9, "v5p", chips=8960, mfu=0.4)
    spent = m.budget(15 * 10**12)
    assert spent["days"] == days
    assert round(float(days), 2) == 44.32  # the book: about 44 days
    assert spent["chip_hours"] == 8960 * days * 24
    assert m.tokens_per_s == 8960 * peak * sympy.Rational(2, 5) / (6 * 70 * 10**9)


def test_chips_for_the_weights_and_adam_state_of_7e10_parameters_on_16_gb_chips():
    # bf16 weights 2, bf16 gradients 2, Adam's 12 (fp32 master copy 4 and two fp32 moments 8):
    # 16 bytes a parameter; 7e10 x 16 = 1.12e12 bytes over 16e9 a chip, the whole HBM (1.0)
    chip = machine("v5e", overrides={"hbm_capacity_bytes": "16e9"})
    m = symroof.counted(7 * 10**10, chip, hbm_usable=1.0)
    assert m.memory_bytes == 7 * 10**10 * (2 + 2 + 12)
    assert m.min_chips == sympy.ceiling(sympy.Rational(7 * 10**10 * 16, 16 * 10**9)) == 70
    # at the default 0.9 of HBM: 1.12e12 / 14.4e9 = 77.8, so 78
    assert symroof.counted(7 * 10**10, chip).min_chips == 78
    # with the options: adam8bit's 2 + 8/256 bytes of moments, no master copy, bf16 gradients
    light = symroof.counted(7 * 10**10, chip, hbm_usable=1.0, optimizer="adam8bit", master="none")
    assert light.memory_bytes == 7 * 10**10 * (2 + 2 + 2 + sympy.Rational(8, 256))
    assert light.min_chips == 27  # 6.03125 x 7e10 = 4.22e11 bytes / 16e9 = 26.4


def test_attention_where_the_sizes_allow_it():
    # Chinchilla (models.json: L = 80, N = 64 heads of H = 128) at T = 2048: the scores' QKᵀ
    # and AV, 2 x 8192 x 2048 FLOPs a token and layer each forward, 3x in training
    m = symroof.counted("chinchilla-70b", sizes={"context": 2048})
    attention = 3 * 80 * 2 * (2 * 64 * 128 * 2048)
    assert m.attention_flops_train_per_token == attention == 12 * 80 * 8192 * 2048
    assert m.attention_share == sympy.Rational(attention, 6 * 70 * 10**9 + attention)
    assert m.flops_train_per_token == 6 * 70 * 10**9 and m.flops_per_token == 2 * 70 * 10**9
    with pytest.raises(SpecError, match="give --context"):
        symroof.counted("chinchilla-70b").attention_flops_train_per_token
    with pytest.raises(SpecError, match="give --layers, --dim"):
        symroof.counted(7e10, sizes={"context": 2048}).attention_flops_train_per_token


def test_a_step_at_an_mfu():
    # 64 sequences of 2048 tokens on 256 H100s at 0.5: 6 x 7e10 x 131072 FLOPs over
    # 256 x the bf16 peak x 0.5
    peak = get_chip("h100").peak_flops("bf16")
    m = symroof.counted(7e10, "h100", chips=256, mfu=0.5, sizes={"B": 64, "T": 2048})
    assert m.t_step == 6 * 7 * 10**10 * 64 * 2048 / (256 * peak * sympy.Rational(1, 2))
    assert m.hbm_per_chip == sympy.Rational(16 * 7 * 10**10, 256)


@pytest.mark.parametrize("ask, words", [
    (lambda: symroof.counted(7e10, "v5p").tokens_per_s, "no roofline to time: give --mfu"),
    (lambda: symroof.counted(7e10, "v5p", mfu=0.4).t_step, "give --set B=...,T=..."),
    (lambda: symroof.counted(7e10).min_chips, "need a chip"),
    (lambda: Counted(7 * 10**10, None, Options(mode="decode")), "no KV cache or attention shapes"),
    (lambda: Counted(7 * 10**10, None, Options(strategy=(("fsdp", "X"),))), "--strategy shards a model's tensors"),
    (lambda: Counted(7 * 10**10, None, Options(remat="none")), "--remat chooses the activations kept"),
    (lambda: symroof.counted(7.5), "a whole number of parameters"),
    (lambda: symroof.counted(7e10).activation_bytes, "the activations a step keeps need the model's configuration"),
    (lambda: symroof.counted(7e10).kv_bytes_per_token, "a KV cache's bytes need the model's configuration"),
    (lambda: symroof.counted("llama-3-8b"), "has its configuration"),
    (lambda: symroof.model("chinchilla-70b"), "given by its parameter count only"),
    (lambda: symroof.plan("chinchilla-70b", "h100", 8, 2**20), "a plan needs the model's configuration"),
])
def test_what_needs_the_configuration_is_refused(ask, words):
    with pytest.raises(SpecError, match=words):
        ask()


def test_its_report_says_which_convention_each_answer_uses():
    m = symroof.counted(7e10, "v5p", chips=64, mfu=0.4)
    text = m.table(10**12, 1.5)
    for words in ("6·N: forward 2·N + backward 4·N", "N x 12 bytes: master copy 4 + adam moments 8",
                  "activations not counted", "0.9 of HBM", "price units", "activation_bytes       not computed"):
        assert words in text, words
    data = json.loads(json.dumps(m.to_dict(10**12, 1.5)))
    assert data["params"] == 7 * 10**10 and data["counted"] is True
    assert data["memory_bytes"] == 16 * 7 * 10**10
    assert data["budget"]["cost"] == pytest.approx(1.5 * float(m.budget(10**12)["chip_hours"]))
    assert data["notes"]["flops_train_per_token"].startswith("6·N")
    latex = m._repr_latex_()
    assert latex.startswith("$$") and r"\text{params}" in latex and "array" in latex
    # on a symbolic chip the answers are formulas in its figures: 16 x 7e10 bytes over 0.9 x M_hbm
    symbolic = symroof.counted(7e10, machine("symbolic"), mfu=0.4)
    assert symbolic.min_chips == sympy.Rational(16 * 7 * 10**10) / (sympy.Rational(9, 10) * symbolic.machine.capacity())
    assert r"\frac{11200000000000}{9 M_{\text{hbm}}}" in symbolic._repr_latex_()


def test_the_models_file_entry_given_by_its_count():
    entry = get_model("chinchilla-70b")
    assert entry["params"] == 70 * 10**9 and "params_published" not in entry
    assert entry["id"] not in [m["id"] for m in configured()] and entry in models()
    assert "arXiv:2203.15556" in entry["sources"]["params"]


def _entry(**changes: object) -> dict:
    entry = {"id": "tiny", "name": "Tiny", "params": 1000, "sources": {"params": "by hand"}}
    return {**entry, **changes}


@pytest.mark.parametrize("entry, words", [
    (_entry(params=0), "params must be a positive whole number"),
    (_entry(params=True), "params must be a positive whole number"),
    (_entry(mlp="swiglu"), "mlp: a model given by 'params' has no template"),
    (_entry(sizes={"L": 2}), "sources.sizes is missing"),
    (_entry(sizes={"Q": 2}, sources={"params": "x", "sizes": "y"}), "sizes.Q: unknown size"),
    (_entry(sizes={"L": -2}, sources={"params": "x", "sizes": "y"}), "sizes.L must be a positive whole number"),
    (_entry(sources={}), "sources.params is missing"),
    (_entry(sources={"params": "x", "moe": "y"}), "sources.moe: names no sourced field"),
    ({"id": "tiny", "params": 1000, "sources": {"params": "x"}}, "missing field 'name'"),
])
def test_the_models_file_checks_a_counted_entry_strictly(tmp_path, entry, words):
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": [entry]}), encoding="utf-8")
    with pytest.raises(SpecError, match=words):
        get_model("tiny", str(path))
