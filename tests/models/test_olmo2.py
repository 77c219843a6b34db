"""OLMo 2's layer (templates.py: norm_position post, qk_norm whole): each sublayer's norm on
its output before the residual, and an RMSNorm over the whole query and key projections,
against the same model written pre-norm without QK-norm, counted by hand."""

from __future__ import annotations

import json

import pytest
import sympy

import symroof
from symroof.hardware.machines import machine
from symroof.ir import dim_symbol
from symroof.lang.structure import read_source
from symroof.models import strategy_costs, templates
from symroof.models.catalogue import get_model
from symroof.models.decls import Options
from symroof.models.strategies import parse_strategy
from symroof.models.whole import Model

OLMO = get_model("olmo-2-13b")
PLAIN = {**json.loads(json.dumps(OLMO)), "norm_position": "pre", "qk_norm": "none"}
D, L, N, K, H = (OLMO["sizes"][d] for d in ("D", "L", "N", "K", "H"))


def _model(config: dict, mode: str, sizes: dict, strategy: str = "") -> Model:
    p = templates.program(config, mode, strategy=parse_strategy(strategy) if strategy else {})
    return Model(read_source(p), machine("h100"), sizes, Options(mode=mode))


def _norm_flops(rows: str, over: str) -> sympy.Expr:
    """One RMSNorm's FLOPs as the op table counts it, from a one-line spec of it."""
    return symroof.analyze(f"rmsnorm_{{{over}}} bf16[{rows}, {over}], bf16[{over}] -> bf16[{rows}, {over}]").flops


@pytest.mark.parametrize(("mode", "sizes", "rows_q", "rows_k"), [
    ("prefill", {"B": 2, "T": 512}, "B, T", "B, S"),
    ("decode", {"B": 8, "S": 2048}, "B", "B"),
])
def test_the_qk_norms_are_all_a_layer_adds(mode, sizes, rows_q, rows_k):
    olmo, plain = _model(OLMO, mode, sizes), _model(PLAIN, mode, sizes)
    # parameters: q_norm over N*H and k_norm over K*H, a layer
    assert olmo.params - plain.params == L * (N * H + K * H)
    # FLOPs: the two norms a layer (the post-norms are the pre-norms moved: the same count)
    G = N // K
    at = {dim_symbol(k): v for k, v in {**sizes, "S": sizes.get("S", sizes.get("T")), "K": K, "G": G, "H": H}.items()}
    extra = L * (_norm_flops(rows_q, "K, G, H") + _norm_flops(rows_k, "K, H")).xreplace(at)
    assert olmo.flops - plain.flops == extra


def test_tensor_parallel_qk_norms_reduce_over_the_heads_split():
    # the norm's sum of squares spans the heads tp splits: one AllReduce each, q's and k's, a layer
    olmo, plain = (_model(c, "decode", {"B": 8, "S": 2048}, "tp=8") for c in (OLMO, PLAIN))
    count = [sum(c.count for c in strategy_costs.collectives(m) if c.kind == "AllReduce") for m in (olmo, plain)]
    assert count[0] - count[1] == 2 * L


def test_the_catalogue_entry_is_the_checkpoints_sum():
    # the hand count of the template beside the published checkpoint (total_size / 4 bytes)
    layer = 2 * D * N * H + 2 * D * K * H + 3 * D * OLMO["sizes"]["F"] + 2 * D + N * H + K * H
    assert symroof.model("olmo-2-13b").params == L * layer + 2 * OLMO["sizes"]["V"] * D + D == 54_864_793_600 // 4
