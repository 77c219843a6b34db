"""The planner lays a strategy's kinds on fast-link domains (GPU nodes of NVLink, joined by
InfiniBand) in a few ways, tp always inside, and keeps the fastest; each cost here is worked
by hand from the model's parameters and the chip's links."""

from __future__ import annotations

import functools

import sympy

from symroof.models import planner, strategy_costs
from symroof.models.report import model
from symroof.models.strategies import layouts

NVLINK, IB = sympy.Integer(450 * 10**9), sympy.Integer(50 * 10**9)  # H100: a GPU's egress; its NIC
P = sympy.Integer(8030261248)  # LLaMA-3 8B's parameters
E = 128256 * 4096         # its input embedding table, V x D: read by a lookup, not gathered in the backward


def test_the_layouts_tried():
    # 2 x 16 on nodes of 8: as the sizes lay it, fsdp fills the node (8) and the rest goes across;
    # with dp first, dp's 2 inside, fsdp's 4 beside it, its other 4 across
    assert [(axes, mesh.axes_text()) for axes, mesh in layouts({"dp": 2, "fsdp": 16, "tp": 1}, 8)] == [
        ({"dp": "R", "fsdp": "QZ"}, "R=2@dcn, Q=2@dcn, Z=8"),
        ({"dp": "X", "fsdp": "QZ"}, "X=2, Q=4@dcn, Z=4")]
    # tp stays inside whatever goes first: tp=4 and 2 of fsdp, or 2 of dp
    assert [mesh.axes_text() for _, mesh in layouts({"dp": 4, "fsdp": 4, "tp": 4}, 8)] == \
        ["R=4@dcn, Q=2@dcn, Z=2, Y=4", "R=2@dcn, X=2, Q=4@dcn, Y=4"]
    # nothing to choose inside one domain
    assert layouts({"fsdp": 8, "tp": 1}, 8) == []


def test_each_layout_costed_as_the_hand_count_and_the_faster_kept():
    # dp=2, fsdp=8 on 16 H100s, 16 sequences of 512: the step waits on the parameters' and
    # gradients' collectives (bf16: 2 bytes a parameter). Every parameter is gathered in the
    # forward, all but the embedding table again in the backward, each gradient reduce-scattered
    # over fsdp, and its 1/8 shard all-reduced over dp.
    # As the sizes lay it (fsdp's 8 on NVLink, dp's 2 across on InfiniBand):
    fsdp = sympy.Rational(7, 8) / NVLINK
    by_sizes = (2 * P + 2 * (P - E) + 2 * P) * fsdp + 2 * sympy.Rational(1, 2) * (2 * P / 8) / IB
    # dp first (dp's 2 and fsdp's 4 on NVLink, fsdp's other 2 across): fsdp hierarchical,
    # 3/4 of each array on NVLink and 1/2 of its quarter on InfiniBand; dp's AllReduce on NVLink
    fsdp = sympy.Rational(3, 4) / NVLINK + sympy.Rational(1, 2) / 4 / IB
    dp_first = (2 * P + 2 * (P - E) + 2 * P) * fsdp + 2 * sympy.Rational(1, 2) * (2 * P / 8) / NVLINK
    run = functools.partial(model, "llama-3-8b", "train", "h100", {"B": 16, "T": 512})
    usable = run().usable()
    costed = {}
    for layout in (None, layouts({"dp": 2, "fsdp": 8}, 8)[1]):
        candidate = planner.Candidate({"dp": 2, "fsdp": 8}, layout=layout)
        planner._cost(candidate, planner._Coster(run, run().machine), usable)
        # bandwidth-bound (the step's figure floors the smallest, the norms' scales, at their hops)
        rows = strategy_costs.collectives(candidate.model)
        costed[layout is None] = (sum(c.time for c in rows if c.overlaps),
                                  candidate.figures["t_step_exposed"])
        assert all(c.overlaps for c in rows)  # nothing on activations: fsdp and dp only
    assert costed[True][0] == by_sizes and costed[False][0] == dp_first
    # 0.13 s against 0.20 s, both more than the work: the sizes' own is kept, and nothing said
    assert costed[True][1] < costed[False][1]
    kept = planner.Candidate({"dp": 2, "fsdp": 8})
    planner._cost(kept, planner._Coster(run, run().machine), usable)
    planner._laid_out(kept, planner._Coster(run, run().machine), usable, 8)
    assert kept.layout is None and kept.layout_note == ""


def test_the_fastest_layout_is_kept_and_said():
    # LLaMA-2 70B on 64 A100s, fsdp=32 with 2 pipeline stages (the plan's best before gradient
    # accumulation let the pipeline-free splits fit): putting the stages inside a node (their
    # sends on NVLink, exposed in the fill and drain) beats filling it with fsdp (8 over NVLink,
    # the sends across on InfiniBand)
    sizes = {"dp": 1, "fsdp": 32, "pp": 2}
    batch = {"B": 1024, "T": 4096}
    run = functools.partial(model, "llama-2-70b", "train", "a100", batch)
    usable = run().usable()
    best = planner.Candidate(dict(sizes), schedule="interleaved")
    planner._cost(best, planner._Coster(run, run().machine), usable)
    planner._laid_out(best, planner._Coster(run, run().machine), usable, 8)
    assert best.layout is not None
    options = layouts(sizes, 8)
    exposed = []
    for axes, mesh in options:
        m = model("llama-2-70b", "train", "a100", batch, strategy=",".join(
            f"{k}={a}" for k, a in axes.items()), mesh=mesh, schedule="interleaved")
        exposed.append(strategy_costs.times(m)["t_step_exposed"])
    assert best.figures["t_step_exposed"] == min(exposed) < exposed[0]
    kept = options[exposed.index(min(exposed))][1].axes_text()
    assert kept == "Q=8@dcn, Z=4, P=2"
    assert f"laid out as {kept}" in best.layout_note and "as Q=4@dcn, Z=8, J=2@dcn" in best.layout_note


def test_gpu_domains_are_used_in_part_tori_are_tiled():
    from symroof.models.strategies import parse_strategy
    # GB200 NVL72: tp's 8 leave room for 72 / 8 = 9 more in the rack; dp=16 puts its largest
    # divisor that fits, 8, inside (64 GPUs of each rack) and 2 racks across, not 16 racks of 8
    rack = parse_strategy("tp=8,dp=16", domain=72, partial=True)
    assert rack == {"tp": (("Y", 8, "ici"),), "dp": (("R", 2, "dcn"), ("X", 8, "ici"))}
    assert "R=2@dcn" in str(model("llama-3-8b", "train", "gb200", {"B": 16}, strategy="tp=8,dp=16")
                            .structured.program.mesh)
    # an HGX node of 8 is full with tp=8: dp all across, as before
    assert parse_strategy("tp=8,dp=16", domain=8, partial=True)["dp"] == (("R", 16, "dcn"),)
    # a torus's axes must tile its pod: 16384 chips on v5p's pod of 8960 keep gcd(16384, 8960) = 256
    assert parse_strategy("fsdp=16384", domain=8960)["fsdp"] == (("Q", 64, "dcn"), ("Z", 256, "ici"))
