"""Training's state as stated options (--grads, --optimizer, --master, --hbm-usable) and
token budgets (--tokens, --price): each count by hand from LLaMA-2 7B's sizes and the
chip's figures, written here."""

from __future__ import annotations

import pytest
import sympy

import symroof
from symroof.errors import SpecError
from symroof.hardware.machines import machine
from symroof.models import planner
from symroof.models.decls import Options, state_bytes
from symroof.show import number

# LLaMA-2 7B (models.json): V = 32000, D = 4096, L = 32, N = K = 32 heads of H = 128, F = 11008;
# the embedding and the untied output (V x D each), per layer two norm scales (D), Wq, Wk, Wv, Wo
# (D x D each) and the gated MLP's three D x F; the final norm (D)
V, D, L, H, F = 32000, 4096, 32, 128, 11008
P = sympy.Integer(2 * V * D + L * (2 * D + 4 * D * D + 3 * D * F) + D)  # 6738415616
SIZES = {"B": 1, "T": 4096}


def _model(**options: object) -> symroof.models.whole.Model:
    return symroof.model("llama-2-7b", "train", "h100", SIZES, **options)


def test_the_parameter_count_the_counts_below_start_from():
    assert P == 6738415616 == _model().params


@pytest.mark.parametrize("optimizer, grads, master, g, o", [
    # gradient bytes, then optimizer bytes (master copy + moments) a parameter, all bf16 parameters
    ("adam", None, None, 2, 4 + 8),          # today's default: 2 + 12
    ("adam", "fp32", None, 4, 4 + 8),
    ("adam", None, "none", 2, 8),
    ("adam-bf16", None, None, 2, 4 + 4),     # two bf16 moments
    ("adam-bf16", "fp32", "none", 4, 4),
    ("adam8bit", None, None, 2, 4 + 2 * (1 + sympy.Rational(4, 256))),  # 8-bit moments + an fp32 scale / 256
    ("adam8bit", "bf16", "none", 2, 2 * (1 + sympy.Rational(4, 256))),
    ("sgd", None, None, 2, 0),               # today's: no state, no master copy by default
    ("sgd", None, "fp32", 2, 4),
    ("sgd-momentum", None, None, 2, 4 + 4),  # an fp32 momentum and the master copy
    ("sgd-momentum", "fp32", "none", 4, 4),
])
def test_each_option_combination_by_hand(optimizer, grads, master, g, o):
    m = _model(optimizer=optimizer, grads=grads, master=master)
    assert m.weight_bytes == 2 * P
    assert m.grad_bytes == g * P
    assert m.optimizer_bytes == o * P
    assert m.memory_bytes == (2 + g + o) * P + m.activation_bytes
    # the one table says the same
    s = state_bytes(m.options, 2)
    assert (s.grads, s.optimizer_state) == (g, o)


def test_adafactor_counts_its_factored_moment_from_the_program_shapes():
    # optax's Adafactor: a tensor's second moment over its two largest dims d0 >= d1 keeps
    # elements/d0 + elements/d1 fp32 values; vectors whole. The template stores Wq as
    # [D, K, G, H] = [4096, 32, 1, 128] (and Wk, Wv, Wo alike): 32*128 + 4096*32 = 135168;
    # a D x F matrix D + F = 15104; the V x D embeddings V + D = 36096 each; norm scales D
    layer = 2 * D + 4 * (32 * 128 + 4096 * 32) + 3 * (D + F)
    factored = 2 * (V + D) + L * layer + D
    assert factored == 19089920
    m = _model(optimizer="adafactor")
    assert m.optimizer_bytes == 4 * P + 4 * factored  # the master copy, and no first moment
    assert _model(optimizer="adafactor", master="none").optimizer_bytes == 4 * factored


def test_fp32_parameters_are_their_own_master_copy():
    program = "param W: fp32[D, F]\nlet tokens = B\nbf16[B, D] @ fp32[D, F] -> bf16[B, F]\n"
    m = symroof.model(program, "train", None, {"B": 8, "D": 1024, "F": 4096})
    # 4 bytes of weight, 4 of fp32 gradient, Adam's two fp32 moments and no copy: 16 a parameter
    assert (m.weight_bytes, m.grad_bytes, m.optimizer_bytes) == (4 * 1024 * 4096, 4 * 1024 * 4096, 8 * 1024 * 4096)


@pytest.mark.parametrize("kind, n", [("zero1", 4), ("zero2", 4), ("zero2", 8)])
def test_zero_splits_the_optimizer_state_and_master_copy_and_at_stage_2_the_gradients(kind, n):
    # fp32 gradients and bf16 moments with the master copy: 4 + 4 + 4 bytes a parameter beyond
    # the weight; ZeRO-1 splits the optimizer's 8 over dp, ZeRO-2 the gradients' 4 too
    m = symroof.model("llama-2-7b", "train", "h100", {"B": 8, "T": 4096}, strategy=f"{kind}={n}",
                      optimizer="adam-bf16", grads="fp32")
    assert m.weight_bytes == 2 * P
    assert m.optimizer_bytes == 8 * P / n
    assert m.grad_bytes == (4 * P / n if kind == "zero2" else 4 * P)


def test_usable_hbm_is_the_fraction_given():
    # an H100's 80 GB; the default 0.9 and the book's 1.0
    assert _model().usable() == sympy.Rational(9, 10) * 80 * 10**9
    whole = _model(hbm_usable=1.0)
    assert whole.usable() == 80 * 10**9
    # 16 bytes a parameter and the kept activations (B*T = 4096 tokens, 342528 bytes a token
    # with remat full: each block's input, the head's input and logits) over 80 GB: 2 chips
    assert whole.min_chips == sympy.ceiling(sympy.Rational(16 * P + whole.activation_bytes, 80 * 10**9)) == 2
    assert "a chip's usable HBM is 1.0 of its capacity" in " ".join(whole.table().split())
    assert whole.to_dict()["training_state"]["hbm_usable"] == 1


@pytest.mark.parametrize("field, value, words", [
    ("optimizer", "adamw", "optimizer is one of adam, adam-bf16, adam8bit, adafactor, sgd, sgd-momentum"),
    ("grads", "fp16", r"grads \(the gradients' dtype\) is one of fp32, bf16, not 'fp16'"),
    ("master", "bf16", r"master \(the weights' master copy\) is one of fp32, none, not 'bf16'"),
    ("headroom", 1.5, r"a fraction in \(0, 1\]"),
    ("headroom", 0, r"a fraction in \(0, 1\]"),
    ("headroom", float("nan"), r"a fraction in \(0, 1\]"),
])
def test_a_bad_option_is_refused_with_the_choices(field, value, words):
    with pytest.raises(SpecError, match=words):
        Options(**{field: value})


def test_the_report_states_the_options_it_used():
    m = _model(optimizer="adam8bit", grads="fp32", master="none")
    text = " ".join(m.table().split())  # the conventions wrapped: read as one line
    assert "gradients in fp32 (4 bytes/param" in text and "no master copy" in text
    assert "bitsandbytes' blocks" in text and "2.03125 bytes/param" in text
    # the rows say what they count: 4 + 2.03125 bytes a parameter of optimizer state, by hand
    assert "[fp32: 4 bytes/param]" in text
    assert "[master copy 0 + adam8bit moments 2.03125 = 2.03125 bytes/param]" in text
    assert m.optimizer_bytes == P * (2 + sympy.Rational(8, 256))
    state = m.to_dict()["training_state"]
    assert state["bytes_per_param"] == {"param_bytes": 2, "grads": 4, "master": 0, "moments": 2.03125,
                                        "optimizer": 2.03125}
    # the defaults' report is today's: no notes on those rows
    default = _model().table()
    assert "Adam keeps 12 bytes per parameter (fp32 master copy and two moments)" in " ".join(default.split())
    assert "bytes/param]" not in default


def test_a_token_budget_by_hand():
    m = symroof.model("llama-2-7b", "train", "h100", {"B": 8}, chips=8, mfu=0.4)
    # at an MFU the step's model FLOPs over 8 chips x the bf16 peak x 0.4
    peak = machine("h100").peak("bf16")
    tokens_per_s = 8 * 4096 / (m.flops_train / (8 * peak * sympy.Rational(2, 5)))
    assert m.tokens_per_s == tokens_per_s
    spent = m.budget(2 * 10**12, 2.5)
    seconds = 2 * 10**12 / tokens_per_s
    assert spent["days"] == seconds / 86400 == m.days_to_train(2 * 10**12)
    assert spent["chip_hours"] == 8 * seconds / 3600
    assert spent["cost"] == 8 * seconds / 3600 * sympy.Rational(5, 2)
    text = m.table(2 * 10**12, 2.5)
    assert "chip_hours" in text and "price units (2.5 per chip-hour, as given; no prices are shipped)" in text
    budget = m.to_dict(2 * 10**12, 2.5)["budget"]
    assert budget["cost"] == pytest.approx(float(spent["cost"])) and budget["price_per_chip_hour"] == 2.5


def test_a_short_budget_is_also_in_hours():
    m = symroof.model("llama-2-7b", "train", "h100", {"B": 8}, chips=8, mfu=0.4)
    hours = 10**10 / m.tokens_per_s / 3600  # 10 Gtokens: under three days
    assert 0 < hours < 72
    assert f"days ({number(hours, 4)} hours) for 10 Gtokens" in m.table(10**10)
    assert "hours)" not in m.table(10**13)  # a longer one in days alone, as before


def test_the_planner_floor_uses_the_same_bytes():
    # LLaMA-2 70B's bf16 weights under dp=8 on H100s: with adam-bf16 moments, fp32 gradients and
    # no master copy the floor is (2 + (4 + 4)/8) bytes a parameter (ZeRO-2 splits the state)
    p = planner.plan("llama-2-70b", "h100", 8, 8 * 4096, "train", optimizer="adam-bf16", grads="fp32",
                     master="none", hbm_usable=1.0)
    params = symroof.model("llama-2-70b", "prefill").params
    dp = next(c for c in p.candidates if c.sizes == {"dp": 8, "fsdp": 1, "tp": 1, "pp": 1})
    floor = f"{(2 + 8 / 8) * params / 1e9:.4g}"
    assert dp.rejected.startswith(f"out of memory: the parameters, their gradients and optimizer state alone take "
                                  f"{floor} GB a chip, past")
    assert p.options.headroom == 1
    assert "training state: gradients in fp32" in p.table()
    # the default's floor is today's 2 + 14/8
    q = planner.plan("llama-2-70b", "h100", 8, 8 * 4096, "train")
    dp = next(c for c in q.candidates if c.sizes == {"dp": 8, "fsdp": 1, "tp": 1, "pp": 1})
    floor = f"{(2 + 14 / 8) * params / 1e9:.4g}"
    assert dp.rejected.startswith(f"out of memory: the parameters, their gradients and optimizer state alone take "
                                  f"{floor} GB a chip, past")


def test_a_plan_costs_its_ranked_strategies_on_a_token_budget():
    p = planner.plan("llama-3-8b", "h100", 8, 2**20, "train", context=4096, total_tokens=15 * 10**12, price=2)
    best = p.ranked[0]
    # the budget's steps, each 2**20 tokens, take the time that ranks them: t_step_exposed
    seconds = 15 * 10**12 / 2**20 * best.figures["t_step_exposed"]
    data = p.to_dict()
    entry = data["ranked"][0]["budget"]
    assert entry["days"] == pytest.approx(float(seconds / 86400))
    assert entry["chip_hours"] == pytest.approx(float(8 * seconds / 3600))
    assert entry["cost"] == pytest.approx(float(2 * 8 * seconds / 3600))
    assert all("budget" in c for c in data["ranked"])
    assert f"budget ({best.text}): days_to_train" in p.table() and "(each step t_step_exposed)" in p.table()
    with pytest.raises(SpecError, match="--price is per chip-hour"):
        planner.plan("llama-3-8b", "h100", 8, 2**20, "train", price=2)


def test_a_model_claim_takes_the_training_options():
    # LLaMA-2 7B with bf16 moments and no master copy: 4 bytes a parameter of optimizer state,
    # fp32 gradients 4; on an H100's whole 80 GB (hbm_usable 1) 2 + 4 + 4 = 10 bytes a parameter
    # and the activations (342528 bytes a token at B*T = 4096: remat full) need 1 chip
    claim = {"id": "state", "model": "llama-2-7b", "chip": "h100", "optimizer": "adam-bf16", "grads": "fp32",
             "master": "none", "hbm_usable": 1.0,
             "expect": {"optimizer_bytes": int(4 * P), "grad_bytes": int(4 * P), "min_chips": 1}}
    assert 10 * P + 342528 * 4096 < 80 * 10**9
    result = symroof.check_case(claim)
    assert result.ok, result
    bad = symroof.check_case({**claim, "grads": "fp16"})
    assert not bad.ok and "grads (the gradients' dtype) is one of fp32, bf16" in str(bad.error)
