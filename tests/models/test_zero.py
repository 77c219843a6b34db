"""ZeRO stages 1 and 2: data parallelism with the optimizer state (zero1), and the
gradients too (zero2), split over the data-parallel axis; ZeRO-3 is fsdp. Memory by hand
from the parameter count, collectives against plain data parallelism's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import symroof
from symroof.errors import SpecError
from symroof.models import strategy_costs

SIZES = {"B": 16, "T": 4096}


def _params(name: str) -> int:
    return symroof.model(name, "prefill").params


@settings(max_examples=8, deadline=None)
@given(st.sampled_from(["llama-3-8b", "mixtral-8x7b"]), st.sampled_from([2, 4, 8]), st.sampled_from(["h100", "v5p"]))
def test_each_stage_splits_what_it_says_and_communicates_as_data_parallelism(name, n, chip):
    P = _params(name)
    dp = symroof.model(name, "train", chip, SIZES, strategy=f"dp={n}")
    for kind, grads, state in (("zero1", 2 * P, 12 * P / n), ("zero2", 2 * P / n, 12 * P / n)):
        m = symroof.model(name, "train", chip, SIZES, strategy=f"{kind}={n}")
        # by hand: bf16 weights whole on every chip, bf16 gradients, Adam's 12 bytes a parameter
        assert (m.weight_bytes, m.grad_bytes, m.optimizer_bytes) == (2 * P, grads, state)
        assert m.hbm_per_chip == dp.hbm_per_chip - (dp.grad_bytes - grads) - (dp.optimizer_bytes - state)
        # a ReduceScatter of the gradients and an AllGather of the updated weights: an AllReduce's time
        assert [(c.kind, c.bytes, c.count, c.time) for c in strategy_costs.collectives(m)] == \
            [(c.kind, c.bytes, c.count, c.time) for c in strategy_costs.collectives(dp)]
        assert m.t_step == dp.t_step
        entry = strategy_costs.thresholds(m, {kind: "X"})[kind]
        assert entry["per_chip_tokens"] == strategy_costs.thresholds(dp, {"dp": "X"})["dp"]["per_chip_tokens"]


def test_a_pipeline_keeps_each_stages_share():
    m = symroof.model("llama-3-70b", "train", "h100", {"B": 64, "T": 4096}, strategy="zero2=4,pp=4,tp=8",
                      microbatches=16)
    plain = symroof.model("llama-3-70b", "train", "h100", {"B": 64, "T": 4096}, strategy="dp=4,pp=4,tp=8",
                          microbatches=16)
    assert m.grad_bytes * 4 == plain.grad_bytes and m.optimizer_bytes * 4 == plain.optimizer_bytes
    assert m.weight_bytes == plain.weight_bytes and m.t_step == plain.t_step


def test_zero_errors_say_what_would_work():
    with pytest.raises(SpecError, match="dp and zero1 each split the batch"):
        symroof.model("llama-3-8b", "train", strategy="dp=2,zero1=4")
    with pytest.raises(SpecError, match="zero2 shards the optimizer state"):
        symroof.model("llama-3-8b", "decode", strategy="zero2=4")
    # zero3 is fsdp by another name
    a = symroof.model("llama-3-8b", "train", "h100", SIZES, strategy="zero3=8")
    b = symroof.model("llama-3-8b", "train", "h100", SIZES, strategy="fsdp=8")
    assert (a.hbm_per_chip, a.t_step) == (b.hbm_per_chip, b.t_step)
