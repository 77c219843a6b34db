"""Every network in the shipped hardware file has a hop latency with a source, and
collectives on every link pay it.

A latency that no source states is an estimate, marked as one: its own entry in the chip's
`sources` starts with "estimate:" and says how it was reached. A sourced one cites a key
of the file's table other than "estimate" and "derived". Either way the entry is the
latency's own: the block's source speaks for the block's bandwidths, not for its latency.
"""

from __future__ import annotations

import json
from fractions import Fraction

import pytest
import sympy

import symroof
from symroof.errors import HardwareError
from symroof.hardware.chips import cited_keys, get_chip, list_chips, load_hardware
from symroof.ir import MeshAxis
from symroof.render.chip_card import chip_card
from symroof.resources import resource_path
from symroof.roofline.collectives import link, time

NETWORKS = ("interconnect", "dcn", "scaleout")   # the blocks that describe a network between chips


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(resource_path("hardware.json").read_text(encoding="utf-8"))


def chips_and_networks(data):
    for raw in data["chips"]:
        for block in NETWORKS:
            if block in raw:
                yield raw, block


def exact(value) -> sympy.Rational:
    """A figure as the file writes it, read independently of symroof's reader."""
    value = Fraction(repr(value) if isinstance(value, float) else str(value))
    return sympy.Rational(value.numerator, value.denominator)


def test_every_network_of_every_shipped_chip_has_a_hop_latency(shipped):
    missing = [f"{raw['id']}: {block}.hop_latency_s" for raw, block in chips_and_networks(shipped)
               if raw[block].get("hop_latency_s") is None]
    assert not missing, "networks without a hop latency: " + ", ".join(missing)
    # every chip with a network is covered: TPUs have ICI and DCN, GPUs NVLink or Infinity Fabric
    for chip in list_chips():
        assert chip.figure("interconnect.hop_latency_s") is not None, chip.id
        if chip.kind == "tpu":
            assert chip.figure("dcn.hop_latency_s") is not None, chip.id


def test_every_hop_latency_has_its_own_source_sourced_or_marked_an_estimate(shipped):
    keys = shipped["source_keys"]
    assert "estimate" in keys
    for raw, block in chips_and_networks(shipped):
        path = f"{block}.hop_latency_s"
        text = raw["sources"].get(path, "")
        assert text.strip(), f"{raw['id']}: {path} has no source of its own"
        cited = cited_keys(text, keys)
        if text.startswith("estimate"):
            assert cited[0] == "estimate", (raw["id"], path, text)
            reasoning = text.partition(":")[2]
            assert len(reasoning.split()) >= 8, f"{raw['id']}: {path}: an estimate needs its reasoning"
        else:
            assert "estimate" not in cited, f"{raw['id']}: {path}: an estimate must start with 'estimate:'"
            assert set(cited) - {"derived"}, f"{raw['id']}: {path}: cites no source ({text!r})"


def test_estimates_are_said_in_the_chip_and_its_card(shipped):
    v5p = get_chip("v5p")
    assert v5p.sources["interconnect.hop_latency_s"].startswith("estimate:")
    assert v5p.sources["dcn.hop_latency_s"].startswith("estimate:")
    # v5e's ICI hop is the book's own figure, not an estimate
    assert not get_chip("v5e").sources["interconnect.hop_latency_s"].startswith("estimate")
    card = chip_card(v5p, shipped["source_keys"])
    assert "DCN latency" in card and "dcn.hop_latency_s" in card and "estimate" in card


def test_the_loader_still_reads_a_user_file_without_latencies(tmp_path, shipped):
    """A user's hardware file may leave hop latencies out: their floors are then unknown
    and said so; the requirement is on the shipped file."""
    chip = dict(next(raw for raw in shipped["chips"] if raw["id"] == "tpu-v5p"))
    chip["interconnect"] = {k: v for k, v in chip["interconnect"].items() if k != "hop_latency_s"}
    chip["dcn"] = {k: v for k, v in chip["dcn"].items() if k != "hop_latency_s"}
    chip["sources"] = {k: v for k, v in chip["sources"].items() if not k.endswith("hop_latency_s")}
    chip["variants"] = {}
    chip["sources"] = {k: v for k, v in chip["sources"].items() if not k.startswith("variants.")}
    file = tmp_path / "hardware.json"
    file.write_text(json.dumps({"chips": [chip]}), encoding="utf-8")
    mine = load_hardware(file)["tpu-v5p"]
    assert mine.figure("dcn.hop_latency_s") is None
    a = symroof.analyze("AllGather_X bf16[W_X] -> bf16[W]", chip=mine, mesh="X=2@dcn", values={"W": 8})
    assert not a.t_network_latency_known


def test_a_hop_latency_needs_a_source_like_any_figure(tmp_path, shipped):
    data = json.loads(json.dumps(shipped))
    v4 = next(raw for raw in data["chips"] if raw["id"] == "tpu-v4p")
    assert "dcn" not in v4["sources"]                 # no block source to fall back on
    del v4["sources"]["dcn.hop_latency_s"]
    file = tmp_path / "hardware.json"
    file.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(HardwareError, match=r"'tpu-v4p': dcn\.hop_latency_s: has no source"):
        load_hardware(file)


# -- the latency floor on each kind of link ------------------------------------------------


@pytest.mark.parametrize("chip_id", ["tpu-v5p", "tpu-v5e", "tpu-v6e"])
def test_an_allgather_over_dcn_has_the_files_dcn_latency_as_its_floor(shipped, chip_id):
    raw = next(raw for raw in shipped["chips"] if raw["id"] == chip_id)
    hop = exact(raw["dcn"]["hop_latency_s"])
    a = symroof.analyze("AllGather_X bf16[W_X] -> bf16[W]", chip=chip_id, mesh="X=2@dcn", values={"W": 8})
    assert a.t_network_latency_known
    assert a.t_network_latency == hop                  # one hop through the network's switches
    (_, collective), = a.collectives
    assert collective.latency == hop and collective.hops == 1 and collective.latency_known
    # 16 bytes is far below what fills a link: the floor is the collective's time
    assert a.t_network < hop and a.t_network_floored == hop


def test_an_allreduce_over_dcn_pays_the_floor_twice(shipped):
    raw = next(raw for raw in shipped["chips"] if raw["id"] == "tpu-v5p")
    hop = exact(raw["dcn"]["hop_latency_s"])
    t = time("AllReduce", [MeshAxis("X", 4, "dcn")], sympy.Integer(16), get_chip("v5p"))
    assert t.latency == 2 * hop and t.latency_known and t.total == 2 * hop


@pytest.mark.parametrize("chip_id", ["h100-sxm", "h200", "b200", "gb200"])
def test_a_gpu_axis_off_the_node_pays_the_scale_out_latency(shipped, chip_id):
    raw = next(raw for raw in shipped["chips"] if raw["id"] == chip_id)
    hop = exact(raw["scaleout"]["hop_latency_s"])
    l = link(MeshAxis("X", 2, "dcn"), get_chip(chip_id))
    assert l.latency == hop
    assert l.one_way == exact(raw["scaleout"]["bandwidth_one_way_bytes_per_s_per_chip"])
    a = symroof.analyze("AllGather_X bf16[W_X] -> bf16[W]", chip=chip_id, mesh="X=2@dcn", values={"W": 8})
    assert a.t_network_latency_known and a.t_network_latency == hop


@pytest.mark.parametrize("chip_id", ["tpu-v2", "tpu-v3", "tpu-v4p", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu7x",
                                     "a100-sxm-80gb", "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "mi300x"])
def test_the_interconnect_latency_reaches_the_collective(shipped, chip_id):
    raw = next(raw for raw in shipped["chips"] if raw["id"] == chip_id)
    hop = exact(raw["interconnect"]["hop_latency_s"])
    assert link(MeshAxis("X", 2), get_chip(chip_id), sympy.Integer(10**10)).latency == hop
    t = time("AllGather", [MeshAxis("X", 2)], sympy.Integer(16), get_chip(chip_id), sympy.Integer(10**10))
    assert t.latency_known and t.latency == t.hops * hop


def test_pcie_has_no_latency_figure_and_says_so():
    t = time("AllGather", [MeshAxis("X", 2, "pcie")], sympy.Integer(16), get_chip("v5e"))
    assert not t.latency_known and t.latency == 0
