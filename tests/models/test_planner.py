"""The planner: its ranking on cases whose answer is known by hand."""

from __future__ import annotations

import dataclasses
import functools
import json
from types import MappingProxyType

import by_hand
import pytest
import sympy

import symroof
from symroof.cli.command import main
from symroof.hardware.chips import get_chip
from symroof.models import planner, strategy_costs
from symroof.models.catalogue import get_model
from symroof.symbols import dim_symbol


def test_a_model_too_big_for_data_parallelism_is_sharded():
    # LLaMA-3 70B in training keeps 2 + 2 + 12 = 16 bytes a parameter: 1.13 TB, on every chip
    # under pure data parallelism, where an H100 has 80 GB; even ZeRO-2, which splits the
    # gradients and Adam's state over the 64 chips, leaves each the bf16 weights (141 GB)
    # and 14/64 bytes a parameter more; sharding the weights (FSDP) is the answer
    p = planner.plan("llama-3-70b", "h100", 64, 64 * 8192, "train")
    params = get_model("llama-3-70b")["params_published"]
    dp = next(c for c in p.candidates if c.sizes == {"dp": 64, "fsdp": 1, "tp": 1, "pp": 1})
    floor = f"{(2 + 14 / 64) * params / 1e9:.4g}"
    assert dp.rejected.startswith(f"out of memory: the parameters, their gradients and optimizer state alone take "
                                  f"{floor} GB a chip, past")
    best = p.ranked[0]
    assert best.sizes["fsdp"] > 1 and best.figures["memory_per_chip"] <= 80e9 * 0.9
    assert all(c.figures["memory_per_chip"] <= 80e9 * 0.9 for c in p.ranked)  # every ranked one fits
    times = [c.figures["t_step_exposed"] for c in p.ranked]
    assert times == sorted(times)


def test_a_batch_too_small_for_fsdp_alone_loses_to_a_mixed_strategy():
    # 256 sequences of 1024 tokens on 256 v5p: FSDP alone leaves each chip 1024 tokens, fewer
    # than it needs to hide its gathers: 3x the forward's T_math against gathering every
    # parameter twice and reduce-scattering its gradient once, on the 256-chip ring
    # (remat none: no layer's forward recomputed, which would add work enough to hide them)
    p = planner.plan("llama-3-8b", "tpu-v5p", 256, 256 * 1024, "train", context=1024, remat="none")
    fsdp = next(c for c in p.ranked if c.sizes == {"dp": 1, "fsdp": 256, "tp": 1, "pp": 1})
    s, params = get_model("llama-3-8b")["sizes"], get_model("llama-3-8b")["params_published"]

    def alone(kind, n):
        spec = "AllGather_Z bf16[W_Z] -> bf16[W]" if kind == "AllGather" else \
            "ReduceScatter_{Z,W} bf16[W] {U_Z} -> bf16[W_Z]"
        return symroof.analyze(spec, chip="tpu-v5p", mesh="Z=256", values={"W": n}).t_network

    # AllGather and ReduceScatter cost V / W on the ring whatever V is split into
    t_net = 2 * alone("AllGather", params) - alone("AllGather", s["V"] * s["D"]) + alone("ReduceScatter", params)
    assert fsdp.model.step_analysis.t_network == t_net
    # per-chip tokens where the step's T_math reaches t_net: 3x the forward's, and flash
    # attention's scores again in the backward
    threshold = t_net / by_hand.step_t_math("llama-3-8b", "tpu-v5p", 1024, "none") * 1024
    found = strategy_costs.thresholds(fsdp.model, {"fsdp": "Z"})["fsdp"]["per_chip_tokens"]
    assert found == threshold and threshold > 1024  # so FSDP alone is network-bound ...
    assert fsdp.figures["bound"] == "network"
    best = p.ranked[0]
    assert best.sizes != fsdp.sizes and best.figures["t_step_exposed"] < fsdp.figures["t_step_exposed"]
    assert "wins" in planner.why(p) and best.text in planner.why(p)
    # remat full recomputes each layer's forward: work enough that FSDP alone hides its collectives
    recomputing = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": 256, "T": 1024}, strategy="fsdp=256")
    again = strategy_costs.thresholds(recomputing, {"fsdp": "Z"})["fsdp"]["per_chip_tokens"]
    assert again == t_net / by_hand.step_t_math("llama-3-8b", "tpu-v5p", 1024, "full") * 1024 < 1024


def test_json_gives_every_ranked_strategys_figures_and_the_top_ones_thresholds(capsys):
    # a plan's JSON lists every ranked strategy with its figures and mesh, and the thresholds
    # (which cost each one's model) of the --top best: 364 of them at 70b on 1024 v5p took 50 s
    base = ["plan", "llama-3-8b", "--chip", "h100", "--chips", "32", "--batch", "512k", "--json"]
    assert main([*base, "--top", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["thresholds_of"] == 2 and len(out["ranked"]) > 2
    assert ["threshold" in entry for entry in out["ranked"]] == [True, True] + [False] * (len(out["ranked"]) - 2)
    p = planner.plan("llama-3-8b", "h100", 32, 512 * 1024, "train")
    assert [c.to_dict() for c in p.ranked[:2]] == out["ranked"][:2]
    assert [c.to_dict(thresholds=False) for c in p.ranked] == \
        [{k: v for k, v in entry.items() if k != "threshold"} for entry in out["ranked"]]
    # the mesh each shows, from the axes it was costed with, is its model's (made here)
    unmade = [c for c in p.ranked if c._model is None]
    assert len(unmade) > 10 and all(c._member is not None for c in unmade)
    for c in unmade:
        shown = c.mesh
        assert shown == planner._mesh_text(c.model.structured.program.mesh), c.text
    for top in ("0", "-1"):
        assert main([*base, "--top", top]) == 2
        assert "--top takes how many ranked strategies to show, at least 1" in capsys.readouterr().err


def test_decode_plans_tensor_parallelism_inside_the_nvlink_node():
    p = planner.plan("llama-3-70b", "h100", 16, 64, "decode")
    assert all("fsdp" not in c.sizes for c in p.candidates)  # FSDP is for training
    best = p.ranked[0]
    mesh = best.model.structured.program.mesh
    assert best.sizes == {"dp": 2, "tp": 8}  # the weights split over a node, each node a replica
    assert [(a.name, a.size, a.link) for a in mesh.axes] == [("R", 2, "dcn"), ("Y", 8, "ici")]


def test_plan_command(capsys):
    assert main(["plan", "llama-3-8b", "--chip", "tpu-v5p", "--chips", "16", "--batch", "128k", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["considered"] == len(out["ranked"]) + len(out["set_aside"]) and out["ranked"]
    first = out["ranked"][0]
    assert {"strategy", "mesh", "bound", "t_step", "t_step_exposed", "t_comm_exposed", "memory_per_chip",
            "threshold"} <= set(first)
    assert main(["plan", "llama-3-8b", "--chip", "tpu-v5p", "--chips", "16", "--batch", "128k"]) == 0
    text = capsys.readouterr().out
    assert "considered" in text and "why:" in text and first["strategy"] in text
    for argv, message in ((["--batch", "1000"], "not a whole number of 8192-token sequences"),
                          (["--chips", "0"], "--chips: 0 must be a positive integer"),
                          (["--chips", "100000"], "--chips is from 1 to 65536")):
        base = ["plan", "llama-3-8b", "--chip", "tpu-v5p", "--chips", "16", "--batch", "128k"]
        assert main([*base, *argv]) == 2
        assert message in capsys.readouterr().err
    for chip in ([], ["--chip", "symbolic"]):
        assert main(["plan", "llama-3-8b", *chip, "--chips", "8", "--batch", "64k"]) == 2
        assert "needs a named chip" in capsys.readouterr().err
    # plan's --symbolic is a flag (the strategy formulas, test_derive.py), not a chip figure made a symbol
    with pytest.raises(SystemExit) as stopped:  # argparse's own usage error
        main(["plan", "llama-3-8b", "--chip", "v5p", "--symbolic", "hbm_bw", "--chips", "8", "--batch", "64k"])
    assert stopped.value.code == 2 and "unrecognized arguments: hbm_bw" in capsys.readouterr().err
    # on a symbolic chip a strategy's report gives its threshold as a formula in the chip's figures
    assert main(["model", "llama-3-8b", "--chip", "symbolic", "--strategy", "fsdp=16", "--set", "B=16,T=4096"]) == 0
    assert "compute-bound once per-chip tokens > " in capsys.readouterr().out


@pytest.mark.parametrize("chips", [1, 3])
def test_small_and_odd_chip_counts(chips):
    p = planner.plan("llama-2-7b", "h100", chips, 6 * 4096, "train")
    for c in p.candidates:
        assert c.sizes["dp"] * c.sizes["fsdp"] * c.sizes["tp"] * c.sizes["pp"] == chips
    assert all(c.rejected for c in p.candidates if 3 in (c.sizes["tp"], c.sizes["pp"]))  # 32 KV heads, 32 layers


def test_sequence_parallelism_is_planned_where_the_batch_has_too_few_sequences():
    # 8 sequences of 128k tokens on 64 H100s: data parallelism splits at most 8 ways, so the
    # other chips must split the model or the sequences
    p = planner.plan("llama-3-8b", "h100", 64, 8 * 131072, mode="train", context=131072)
    texts = {c.text for c in p.candidates}
    assert "dp=64" not in texts or "do not split" in next(c.rejected for c in p.candidates if c.text == "dp=64")
    assert any(c.sizes.get("sp") == 8 for c in p.candidates)
    assert all(131072 % c.sizes.get("sp", 1) == 0 for c in p.candidates)  # sp divides the context
    best = p.ranked[0]
    assert best.sizes.get("sp", 1) * best.sizes["tp"] * best.sizes.get("pp", 1) >= 8  # 64 chips, 8 sequences
    # with a sequence a chip to spare, sequence parallelism is not tried
    q = planner.plan("llama-3-8b", "tpu-v5p", 16, 32 * 8192, mode="train")
    assert not any("sp" in c.sizes for c in q.candidates)


def test_zero_is_planned_where_plain_data_parallelism_does_not_fit():
    # LLaMA-3 8B in training on 8 H100s: 16 bytes a parameter (128 GB) on every chip under
    # plain data parallelism; ZeRO-1 splits Adam's 12 over the 8, ZeRO-2 the gradients' 2 too
    p = planner.plan("llama-3-8b", "h100", 8, 8 * 8192, "train")
    params = get_model("llama-3-8b")["params_published"]
    usable = 0.9 * 80e9
    assert 16 * params > usable
    dp = next(c for c in p.candidates if c.sizes == {"dp": 8, "fsdp": 1, "tp": 1, "pp": 1})
    assert dp.rejected is None and dp.zero in (1, 2) and dp.text == f"zero{dp.zero}=8"
    assert dp.figures["memory_per_chip"] <= usable
    plain = symroof.model("llama-3-8b", "train", chip="h100", sizes={"B": 8, "T": 8192}, strategy="dp=8")
    assert plain.hbm_per_chip > usable  # so the planner had to go further
    if dp.zero == 2:  # the lowest stage that fits: ZeRO-1 did not
        one = symroof.model("llama-3-8b", "train", chip="h100", sizes={"B": 8, "T": 8192}, strategy="zero1=8")
        assert one.hbm_per_chip > usable
    # the same time as plain data parallelism: the same volume, a ReduceScatter and an AllGather
    assert dp.figures["t_step"] == plain.t_step
    assert main(["plan", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch", "64k", "--json"]) == 0


@pytest.mark.parametrize("sizes", [{"dp": 4, "fsdp": 1, "tp": 1, "pp": 4}, {"dp": 1, "fsdp": 2, "tp": 4, "pp": 2}])
def test_a_pipeline_keeps_the_faster_of_1f1b_and_interleaved(sizes):
    batch, usable = {"B": 64, "T": 4096}, 0.9 * 80e9
    c = planner.Candidate(dict(sizes))
    run = functools.partial(symroof.model, "llama-2-7b", "train", "h100", batch)
    planner._cost(c, planner._Coster(run, run().machine), usable)
    planner._interleaved(c, planner._Coster(run, run().machine), usable)
    times = {}
    for schedule in ("1f1b", "interleaved"):
        m = symroof.model("llama-2-7b", "train", chip="h100", sizes=batch, strategy=c.strategy, schedule=schedule)
        times[schedule] = strategy_costs.times(m)["t_step_exposed"]
    assert times["1f1b"] != times["interleaved"]  # a choice to make
    assert c.schedule == min(times, key=times.get)
    assert c.figures["t_step_exposed"] == times[c.schedule]
    assert ("interleaved" in c.text) == (c.schedule == "interleaved") and "interleaved" not in c.strategy


def test_a_candidate_needing_a_figure_the_chip_lacks_is_set_aside():
    # 16 A100s are two nodes; a file that gives no scale-out bandwidth for them (the shipped one
    # does: DGX A100's NICs) leaves strategies across nodes uncosted: set aside, saying why, not a crash
    a100 = get_chip("a100")
    bare = dataclasses.replace(a100, figures=MappingProxyType(
        {**a100.figures, "scaleout.bandwidth_one_way_bytes_per_s_per_chip": None}))
    p = planner.plan("llama-3-8b", bare, 16, 64 * 8192, "train")
    across = [c for c in p.candidates if c.rejected and "has no figure for dcn" in c.rejected]
    assert across and all(c.sizes["tp"] < 16 for c in across)


def test_a_strategy_over_one_chip_has_no_ratio_and_says_why(capsys):
    # dp=1 on one chip: its gradients' AllReduces run over an axis of one chip and take no
    # time, so T_math / T_network has no value (it was zoo, and --json failed converting it)
    assert main(["plan", "llama-2-7b", "--chip", "b200", "--chips", "1", "--batch", "64k", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ranked"][0]["threshold"]["dp"]["ratio"] is None
    m = symroof.model("llama-2-7b", "train", "b200", {"B": 16, "T": 4096}, strategy="dp=1")
    entry = strategy_costs.thresholds(m, {"dp": "X"})["dp"]
    assert entry["collectives"] > 0 and entry["t_network"] == 0 and entry["ratio"] is None
    assert main(["model", "llama-2-7b", "--chip", "b200", "--strategy", "dp=1", "--set", "B=16,T=4096"]) == 0
    assert "its collectives take no time" in capsys.readouterr().out


@pytest.mark.parametrize("strategy, mode", [("fsdp=16,sp=4", "train"), ("dp=4,tp=4", "train"),
                                            ("dp=2,ep=4", "train"), ("sp=4", "train"), ("dp=8", "prefill")])
def test_thresholds_read_the_models_own_figures_at_its_sizes(strategy, mode):
    # the thresholds take the step's figures from a model with B and T symbols, put back (so
    # the model is not costed twice): each kind's T_network, its ratio and the step's are the
    # model's own costing's, at the sizes given
    name = "mixtral-8x7b" if "ep" in strategy else "llama-3-8b"
    m = symroof.model(name, mode, "tpu-v5p", {"B": 32, "T": 4096}, strategy=strategy)
    found = strategy_costs.thresholds(m, dict(m.options.strategy))
    rows, a = strategy_costs.collectives(m), m.step_analysis
    for kind, axes in m.options.strategy:
        mine = [c for c in rows if set(c.axes) & set(axes)]
        t_net = sympy.Add(*(c.time for c in mine))
        assert found[kind]["t_network"] == t_net and found[kind]["collectives"] == len(mine)
        assert found[kind]["ratio"] == (a.t_math / t_net if mine and t_net else None)
    if "step" in found:
        assert found["step"]["t_network"] == a.t_network and found["step"]["ratio"] == a.t_math / a.t_network
        assert found["step"]["collectives"] == len(rows)


@pytest.mark.parametrize("strategy", ["fsdp=8,sp=2", "dp=4,tp=4"])
def test_thresholds_of_a_model_whose_batch_is_a_symbol(strategy):
    # B left a symbol (sizes {"B": None}): the per-chip token thresholds do not depend on it, and
    # each ratio is the given batch's at that B (the thresholds' own model frees B and T of it)
    free, given = (symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": b, "T": 4096}, strategy=strategy)
                   for b in (None, 64))
    loose, fixed = (strategy_costs.thresholds(m, dict(m.options.strategy)) for m in (free, given))
    assert loose.keys() == fixed.keys() and "step" in loose
    B = dim_symbol("B")
    assert all(B in e["ratio"].free_symbols for e in loose.values())
    for kind, entry in loose.items():
        assert entry["per_chip_tokens" if "per_chip_tokens" in entry else "ratio"] is not None
        assert entry.get("per_chip_tokens") == fixed[kind].get("per_chip_tokens")
        assert entry["ratio"].subs(B, 64) == fixed[kind]["ratio"]
