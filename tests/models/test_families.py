"""Strategy families (families.py): a member's figures by its family's formulas equal its
strategy costed whole (`symroof.model`), on every figure the planner reads, and a plan
costed by families ranks and sets aside exactly as one costed strategy by strategy."""

from __future__ import annotations

import dataclasses
import functools
import json
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import symroof
from symroof.errors import HardwareError, SpecError
from symroof.hardware.chips import get_chip
from symroof.hardware.machines import machine
from symroof.models import families, kinds, planner
from symroof.models.catalogue import get_model
from symroof.models.families import Costing, Families, _Family
from symroof.models.strategies import strategy_of

# (model, chip, chips, tokens, mode, context): a dense model, a mixture of experts across
# NVLink nodes, a torus, a small model past an A100 node, a sliding window, and serving (a
# mixture of experts' decode step, where the experts each replica touches depend on the
# replicas' sizes: costed whole, strategy by strategy)
PLANS = [
    ("llama-3-8b", "h100", 16, 2**19, "train", 4096),
    ("mixtral-8x7b", "b200", 16, 2**19, "train", 4096),
    ("llama-3.2-1b", "tpu-v5p", 64, 2**18, "train", 2048),
    ("qwen2.5-0.5b", "a100-sxm-80gb", 32, 2**18, "train", 4096),
    ("gemma-2-9b", "tpu-v5e", 16, 2**16, "prefill", 4096),
    ("mixtral-8x7b", "h100", 16, 64, "decode", 4096),
]


def _same(a: planner.Candidate, b: planner.Candidate) -> bool:
    return (a.sizes, a.rejected, a.zero, a.schedule, a.microbatches, a.layout, a.layout_note, a.figures) == \
        (b.sizes, b.rejected, b.zero, b.schedule, b.microbatches, b.layout, b.layout_note, b.figures)


@pytest.mark.parametrize("name, chip, chips, tokens, mode, context", PLANS)
def test_a_plan_by_families_is_the_plan_costed_whole(name, chip, chips, tokens, mode, context):
    fast = planner.plan(name, chip, chips, tokens, mode, context=context)
    whole = planner.plan(name, chip, chips, tokens, mode, context=context, families=False)
    assert len(fast.candidates) == len(whole.candidates)
    differ = [a.sizes for a, b in zip(fast.candidates, whole.candidates) if not _same(a, b)]
    assert not differ
    assert [c.text for c in fast.ranked] == [c.text for c in whole.ranked]
    assert fast.table().split("\n")[2:] == whole.table().split("\n")[2:]  # all but the seconds it took
    # and the families did the costing, but for the decode step whose touched experts need numbers
    by_formula = [c for c in fast.candidates if c.costing is not None and c.costing.model is None]
    costed = [c for c in fast.candidates if c.costing is not None]
    assert costed and len(by_formula) == (0 if mode == "decode" and get_model(name).get("moe") else len(costed))


def test_a_plan_where_no_mesh_lies_on_the_torus_says_so_before_costing():
    # 8192 v5p: no mesh of power-of-two axes lies on the 16 x 20 x 28 pod, so every strategy
    # that passes the model's arithmetic is set aside for its placement, uncosted, and the
    # plan says that, not the first arithmetic reason it met
    p = planner.plan("llama-3-70b", "tpu-v5p", 8192, 2**22, "train")
    assert not p.ranked
    placed = [c for c in p.candidates if c.rejected and "torus" in c.rejected]
    assert placed and all(c.costing is None for c in p.candidates)
    why = planner.why(p)
    assert why.startswith(f"no strategy fits: {len(placed)} set aside (does not lie on the torus), e.g. mesh axis")
    assert "16x20x28 ICI torus" in why


@functools.cache
def _families(name: str, chip: str, mode: str, batch: tuple[tuple[str, int], ...]) -> tuple[Families, object]:
    config, target = get_model(name), machine(chip)
    probe = symroof.model(name, mode, target, dict(batch))
    searched = [k.name for k in kinds.KINDS if k.search is not None]
    return Families(config, mode, target, dict(batch), searched, probe.options, outer=True), target


CASES = [("llama-3-8b", "h100", "train"), ("llama-3-8b", "tpu-v5p", "train"), ("mixtral-8x7b", "b200", "train"),
         ("llama-3.2-1b", "tpu-v5e", "prefill"), ("qwen2.5-7b", "mi300x", "decode"),
         ("deepseek-v2-lite", "tpu-v5p", "train")]


@st.composite
def members(draw):
    name, chip, mode = draw(st.sampled_from(CASES))
    chips = draw(st.sampled_from([4, 8, 16, 32]))
    shape = get_model(name)["sizes"]
    context = 2048 if mode != "decode" else 4096
    sequences = draw(st.sampled_from([8, 16, 32, 64]))
    search = kinds.Search(mode, chips, sequences, context, get_model(name).get("moe", {}).get("experts", 1),
                          bool(get_model(name).get("moe")))
    sizes = draw(st.sampled_from(planner._splits(chips, search)))
    sizes = {k: v for k, v in sizes.items() if v > 1} or {"dp": 1}
    piped = sizes.get("pp", 1) > 1
    zero = draw(st.sampled_from([0, 1, 2])) if mode == "train" and sizes.get("dp", 1) > 1 else 0
    schedule = draw(st.sampled_from(["1f1b", "interleaved"])) if piped else None
    split = sizes.get("dp", 1) * sizes.get("fsdp", 1) * sizes.get("ep", 1)
    each = sequences // split if sequences % split == 0 else 1
    microbatches = draw(st.sampled_from([m for m in (2, 4) if each % m == 0] or [None])) \
        if mode == "train" and not piped else None
    return name, chip, mode, sizes, zero, schedule, microbatches, {"B": sequences, ("S" if mode == "decode" else "T"):
                                                                   context}, shape


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(members())
def test_a_members_figures_are_its_strategy_costed_whole(member):
    # every figure the planner reads, exactly (rationals, not floats), or the family declines
    # and the member is costed whole, as is anything its own costing refuses
    name, chip, mode, sizes, zero, schedule, microbatches, batch, _ = member
    named = {kinds.zero_stage(zero).name if k == "dp" else k: v for k, v in sizes.items()}
    text = ",".join(f"{k}={v}" for k, v in named.items())
    families, target = _families(name, chip, mode, tuple(sorted(batch.items())))
    try:
        whole = Costing.of(symroof.model(name, mode, target, dict(batch), strategy=text, schedule=schedule,
                                         microbatches=microbatches))
    except (SpecError, HardwareError):
        whole = None
    try:
        member_axes = strategy_of(text, None, mode, get_model(name), 1, target)
        fast = families.costing(member_axes, zero, schedule, microbatches)
    except (SpecError, HardwareError):
        fast = None
    if fast is None:
        return  # costed whole by the planner: nothing to compare
    assert whole is not None, f"{text}: the family costs what its own costing refuses"
    for field in ("mode", "piped", "accumulated", "hbm_per_chip", "optimizer_bytes", "grad_bytes",
                  "activation_bytes", "t_step", "tokens", "roofs", "times", "batch", "dp_chips", "rates"):
        assert getattr(fast, field) == getattr(whole, field), (text, field)


# pipelines of 8, 4 and 2 stages, on the fast links (P), between NVLink domains (J) or on both,
# with other kinds beside them: (strategy, mesh)
_PIPES = [("pp=P", "P=8"), ("pp=J", "J=8@dcn"), ("pp=JP,dp=X", "J=2@dcn, P=4, X=2"), ("pp=J,tp=Y", "J=8@dcn, Y=4"),
          ("pp=P,dp=X", "P=4, X=2"), ("pp=JP", "J=2@dcn, P=2"), ("pp=J,dp=X", "J=2@dcn, X=8")]


@pytest.mark.parametrize("schedule", ["1f1b", "interleaved"])
def test_a_pipeline_family_is_every_stage_count_whichever_axes_carry_them(schedule):
    # a pipeline's family is its schedule, its pp axes sized member by member: its stage count
    # (their sizes together), the layers of each end stage (L/P) and the microbatches (4P) are
    # formulas, each member's sends between stages take its own slower link (a symbol of the
    # family, timed on the member's mesh), and every figure is its strategy's costed whole
    families, target = _families("llama-3.2-1b", "b200", "train", (("B", 64), ("T", 2048)))
    found = {}
    for text, mesh in _PIPES:
        whole = Costing.of(symroof.model("llama-3.2-1b", "train", target, {"B": 64, "T": 2048}, strategy=text,
                                         mesh=mesh, schedule=schedule))
        member = strategy_of(text, mesh, "train", get_model("llama-3.2-1b"), 1, target)
        fast = families.costing(member, 0, schedule, None)
        assert fast is not None and fast.model is None, text  # by the family's formulas
        for field in ("hbm_per_chip", "activation_bytes", "t_step", "tokens", "roofs", "times", "dp_chips"):
            assert getattr(fast, field) == getattr(whole, field), (text, field)
        found[text] = fast
    kept = [k for k in families._found if k.pipeline and k.schedule == schedule]
    assert len(kept) == 1 and kept[0].pipeline == (("J", "dcn"), ("P", "ici"))
    # the same program on NVLink and across the network: only the sends' link differs
    assert found["pp=J"].times["t_network_exposed"] > found["pp=P"].times["t_network_exposed"] > 0
    # as the disk keeps it (its stages' B a formula checked member by member): the same figures
    family = families._found[kept[0]]
    assert family is not None and any(isinstance(value, str) for value, _ in family.splits)
    again = _Family.read(json.loads(json.dumps(family.to_json())), target, families._superset(kept[0]), 64, None)
    for text, mesh in _PIPES:
        member = strategy_of(text, mesh, "train", get_model("llama-3.2-1b"), 1, target)
        assert again.evaluate(member) == family.evaluate(member) == found[text], text


@pytest.mark.parametrize("strategy, mesh, batch, why", [
    ("pp=P", "P=3", 48, "does not split 16 layers"),  # its stages (48 sequences: 4 in each of 12 microbatches)
    ("pp=P,dp=X", "P=8, X=1", 16, "32 microbatches do not split the 16 sequences"),  # its microbatches (4 a stage)
    ("pp=P,dp=X", "P=2, X=4", 10, "does not split over 4 data-parallel replicas")])  # its replicas
def test_a_pipeline_its_own_costing_refuses_is_no_familys_member(strategy, mesh, batch, why):
    # a pipeline family's stage count is a formula, so what its own costing checks of a
    # number (pipeline.check) is checked member by member: refused, it is costed whole (and
    # says why), never by formula
    target = machine("b200")
    with pytest.raises(SpecError, match=why):
        symroof.model("llama-3.2-1b", "train", target, {"B": batch, "T": 2048}, strategy=strategy, mesh=mesh)
    families, _ = _families("llama-3.2-1b", "b200", "train", (("B", batch), ("T", 2048)))
    member = strategy_of(strategy, mesh, "train", get_model("llama-3.2-1b"), 1, target)
    assert families.costing(member, 0, "1f1b", None) is None


def test_the_formulas_are_exact_rationals():
    families, target = _families("llama-3-8b", "tpu-v5p", "train", (("B", 64), ("T", 4096)))
    member = strategy_of("fsdp=16,tp=4", None, "train", get_model("llama-3-8b"), 1, target)
    found = families.costing(member, 0, None, None)
    assert found is not None and all(v.is_Rational for v in (found.t_step, found.hbm_per_chip,
                                                              *found.times.values()))


def test_the_disk_keeps_a_family_and_reads_back_the_same_figures(tmp_path, monkeypatch):
    # kept in the user's cache, read back on the next plan: the same figures, exactly; a kept
    # file that is not what symroof writes (edited, truncated, hostile) is costed again, not read
    monkeypatch.setenv("SYMROOF_CACHE", "on")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    args = ("llama-3-8b", "h100", 16, 2**19, "train")
    fresh = families.Families  # each plan below its own, not the process's (for_plan keeps them)
    monkeypatch.setattr(planner, "for_plan", lambda *a, **k: fresh(*a, **k))
    first = planner.plan(*args, context=4096)
    kept = sorted((tmp_path / "symroof" / "families").glob("*.json"))
    assert kept
    again = planner.plan(*args, context=4096)
    assert [c.figures for c in again.candidates] == [c.figures for c in first.candidates]
    for path, text in zip(kept, ['{"names": ["t_step"], "symbols": [], "trees": [["exec", 1]], "layout": {}, '
                                 '"splits": [], "rates": []}', "[" * 100000, "not json", '{"names": 1}']):
        path.write_text(text)
    hostile = planner.plan(*args, context=4096)
    assert [c.figures for c in hostile.candidates] == [c.figures for c in first.candidates]
    assert all("exec" not in p.read_text() and (json.loads(p.read_text()) is None or "trees" in
                                                 json.loads(p.read_text())) for p in kept)  # kept afresh


@pytest.mark.parametrize("disk", [False, True])
def test_a_chip_of_the_same_name_with_other_figures_keeps_families_of_its_own(tmp_path, monkeypatch, disk):
    # a user's file may give a shipped chip's name other figures: the families kept for the
    # shipped chip (in this process, or on disk by an earlier one) are not its; keyed by name,
    # its plan read the shipped chip's figures (a100's peaks and NVLink where its own are slower)
    monkeypatch.setenv("SYMROOF_CACHE", "on" if disk else "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if disk:  # each plan its own families, as two processes': only the disk is shared
        monkeypatch.setattr(planner, "for_plan", lambda *a, **k: families.Families(*a, **k))
    a100 = get_chip("a100")
    slower = dataclasses.replace(a100, figures=MappingProxyType(  # its peaks half, NVLink and NICs a quarter
        {k: v if v is None else v / 2 if k.startswith("peak_flops") else v / 4 if "bandwidth" in k
         and k.startswith(("interconnect.", "scaleout.")) else v for k, v in a100.figures.items()}))
    args = (16, 2**19, "train")
    shipped = planner.plan("llama-3-8b", a100, *args, context=4096)
    assert not disk or sorted((tmp_path / "symroof" / "families").glob("*.json"))
    kept = planner.plan("llama-3-8b", slower, *args, context=4096)
    monkeypatch.setenv("SYMROOF_CACHE", "off")
    monkeypatch.setattr(planner, "for_plan", lambda *a, **k: families.Families(*a, **k))
    own = planner.plan("llama-3-8b", slower, *args, context=4096)  # nothing kept to read
    assert [c.figures for c in kept.candidates] == [c.figures for c in own.candidates]
    assert [c.figures for c in own.candidates] != [c.figures for c in shipped.candidates]


@pytest.mark.parametrize("tree", [["exec", 1], ["a", 5], ["q", 1, 0], ["pow", 1, 10**6], 10**500, "__import__",
                                  ["+"], ["max", ["a", -1]]])
def test_a_kept_formula_that_is_no_formula_is_refused(tree):
    with pytest.raises(ValueError):
        families._Compiled([tree], ["X"])
