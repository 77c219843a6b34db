"""Sequence (context) parallelism: each sequence's tokens split over an axis, the keys and
values gathered for attention; against hand derivations on H100s (an NVLink switch) and
on a TPU v5p ring."""

from __future__ import annotations

import pytest
import sympy

import symroof
from symroof.errors import SpecError
from symroof.hardware.chips import get_chip
from symroof.ir import dim_symbol
from symroof.models import strategy_costs
from symroof.models.catalogue import get_model

S = get_model("llama-3-8b")["sizes"]
D, L, K, H = S["D"], S["L"], S["K"], S["H"]


def _params() -> int:
    return symroof.model("llama-3-8b", "prefill").params


def _gather(V, n: int, chip: str):
    """By hand: an AllGather that leaves V bytes on each of n chips (a ReduceScatter that
    starts from them): through an NVLink switch (n - 1)/n of V at the GPU's egress; on a
    v5p ring with wraparound V over both directions of its links."""
    c = get_chip(chip)
    if chip == "h100":
        return sympy.Rational(n - 1, n) * V / c.figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
    return V / c.figure("interconnect.link_bandwidth_bidi_bytes_per_s")


@pytest.mark.parametrize("chip", ["h100", "tpu-v5p"])
def test_keys_and_values_gathered_and_gradients_reduced_over_the_sequence_axis(chip):
    n, B, T = 8, 2, 8192
    m = symroof.model("llama-3-8b", "train", chip, {"B": B, "T": T}, strategy=f"sp={n}")
    rows = strategy_costs.collectives(m)
    kv = B * T * K * H * 2  # bf16[B, S, K, H], the whole sequence's keys (or values)
    gathers = [c for c in rows if c.kind == "AllGather"]
    scatters = [c for c in rows if c.kind == "ReduceScatter"]
    # keys and values, in the forward and again where remat full (the default) recomputes it
    assert sum(c.count for c in gathers if c.when == "forward") == 2 * L
    assert sum(c.count for c in gathers if c.when == "recompute") == 2 * L
    assert all(c.bytes == kv for c in gathers)
    assert sum(c.count for c in scatters) == 2 * L and all(c.bytes == kv for c in scatters)  # their gradients
    assert not any(c.overlaps for c in gathers + scatters)  # attention waits for them
    reduced = [c for c in rows if c.kind == "AllReduce"]
    assert sum(c.bytes * c.count for c in reduced) == 2 * _params()  # each weight's gradient, once
    by_hand = 6 * L * _gather(kv, n, chip) + 2 * _gather(2 * _params(), n, chip)  # AllReduce: RS + AG
    assert strategy_costs.thresholds(m, {"sp": "I"})["sp"]["t_network"] == by_hand
    # each chip holds T/n of every sequence: activations an nth
    plain = symroof.model("llama-3-8b", "train", chip, {"B": B, "T": T})
    assert m.activation_bytes == plain.activation_bytes / n
    assert m.flops_train == plain.flops_train


def test_the_context_threshold_is_where_the_work_outgrows_the_collectives():
    # the work grows as T and T^2 (the scores), the gathers as T, the gradients' reductions
    # not at all: above the threshold T_math wins
    n, B = 8, 1
    found = []
    for T in (4096, 8192, 16384):
        m = symroof.model("llama-3-8b", "train", "h100", {"B": B, "T": T}, strategy=f"sp={n}")
        entry = strategy_costs.thresholds(m, {"sp": "I"})["sp"]
        found.append((T // n, entry["context_per_chip"], entry["ratio"]))
    threshold = found[0][1]
    assert all(t == threshold for _, t, _ in found)  # one threshold, whatever T is now
    for per_chip, _, ratio in found:
        assert (ratio > 1) == (per_chip > threshold)
    at = symroof.model("llama-3-8b", "train", "h100", {"B": B, "T": 8192}, strategy=f"sp={n}")
    free = symroof.model("llama-3-8b", "train", "h100", {"B": B, "T": None}, strategy=f"sp={n}")
    t_net = sum(c.time for c in strategy_costs.collectives(free))
    T = dim_symbol("T")
    gap = (free.step_analysis.t_math - t_net).subs(T, threshold * n)
    assert abs(sympy.N(gap / t_net.subs(T, threshold * n), 30)) < 1e-20  # T_math = T_network there
    assert at.step_analysis.t_math.subs(T, 8192) == free.step_analysis.t_math.subs(T, 8192)


def test_sequence_parallelism_errors_and_combinations():
    with pytest.raises(SpecError, match="one a sequence"):
        symroof.model("llama-3-8b", "decode", "h100", strategy="sp=2")
    m = symroof.model("llama-3-8b", "prefill", "h100", {"B": 1, "T": 32768}, strategy="sp=8")
    assert {c.kind for c in strategy_costs.collectives(m)} == {"AllGather"}  # serving: no gradients
    both = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": 8, "T": 8192}, strategy="dp=2,sp=4,tp=2")
    assert both.flops_train == symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": 8, "T": 8192}).flops_train
    assert strategy_costs.tokens_per_chip(both) == 8 * 8192 // (2 * 4)
