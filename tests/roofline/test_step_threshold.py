"""The kinds together: the per-chip tokens above which T_math exceeds every collective of
the step (FSDP's, which do not grow with the batch, and tensor parallelism's, which do),
and the largest mesh a batch keeps above it; checked against two concrete batches."""

from __future__ import annotations

import math

import pytest

import symroof
from symroof.models import strategy_costs


@pytest.mark.parametrize("chip, strategy, data", [("tpu-v5p", "fsdp=64,tp=4", 64), ("h100", "dp=4,tp=8", 4),
                                                  ("tpu-v5p", "fsdp=16,tp=2", 16)])
def test_the_whole_steps_threshold_is_where_the_work_overtakes_every_collective(chip, strategy, data):
    T = 4096
    gaps = {}
    for B in (data, 2 * data):  # T_math - T_network is linear in B: two points give its root
        m = symroof.model("llama-3-70b", "train", chip, {"B": B, "T": T}, strategy=strategy)
        gaps[B] = m.step_analysis.t_math - m.step_analysis.t_network
    (b1, g1), (b2, g2) = gaps.items()
    root = b1 - g1 * (b2 - b1) / (g2 - g1)
    by_hand = root * T / data  # the tokens a chip holds: the batch over the data-parallel chips
    step = strategy_costs.thresholds(m, dict(m.options.strategy))["step"]
    assert abs(float(step["per_chip_tokens"] / by_hand) - 1) < 1e-9
    now = 2 * data * T / data
    assert step["max_chips"] == math.floor(m.step_analysis.mesh.chips * now / float(by_hand))
