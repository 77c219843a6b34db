"""A mesh's ICI axes laid onto a torus chip's physical axes (`interconnect.pod_shape`).

A 2D torus of 16 x 16 (v5e) has no axis of 64: mesh X=64 spans two physical axes, a ring
of 16 and a line of 4, and X=256 spans both, two rings of 16. Each expected time below is
derived by hand from hardware.json's own figures (read here independently of symroof),
with the multi-axis model of collectives.py: over axes that are all rings, V / (sum of
the bidirectional bandwidths); otherwise one axis after another, the fastest moving the
whole V and each later one V divided by the chips gathered before it; AllToAll axis by
axis; hops summed (a ring of N: N/2; a line: N - 1).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import re
from fractions import Fraction
from types import MappingProxyType

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import symroof
from symroof.cli.command import main
from symroof.errors import HardwareError
from symroof.hardware.chips import get_chip, list_chips, load_hardware
from symroof.hardware.topology import lay_out as laid_pieces
from symroof.ir import MeshAxis
from symroof.render.chip_card import chip_card
from symroof.resources import resource_path
from symroof.roofline.collectives import check_domain, time


def lengths(mesh, chip):
    """Each axis's pieces' lengths (lay_out gives each piece with whether it is a ring)."""
    return {name: tuple(size for size, _ in pieces) for name, pieces in laid_pieces(mesh, chip).items()}


V = sympy.Symbol("V", positive=True)


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(resource_path("hardware.json").read_text(encoding="utf-8"))


def exact(value) -> sympy.Rational:
    """A figure as the file writes it, read independently of symroof's reader."""
    value = Fraction(repr(value) if isinstance(value, float) else str(value))
    return sympy.Rational(value.numerator, value.denominator)


def ici(chip_id: str) -> dict:
    """A chip's interconnect block from the shipped file, figures exact."""
    raw = json.loads(resource_path("hardware.json").read_text(encoding="utf-8"))
    block = next(c for c in raw["chips"] if c["id"] == chip_id)["interconnect"]
    return {k: exact(v) if isinstance(v, (int, float)) else v for k, v in block.items()}


def unshaped(chip):
    """The chip as it was costed before pod shapes: every ICI axis one physical axis."""
    return dataclasses.replace(chip, shapes=MappingProxyType({}))


def axes(**sizes) -> list[MeshAxis]:
    return [MeshAxis(name, size) for name, size in sizes.items()]


def ring_hops(n: int) -> int:
    return n // 2


def line_hops(n: int) -> int:
    return n - 1


# -- the shipped shapes -------------------------------------------------------------

def test_each_torus_pod_has_the_references_shape_and_its_own_source(shipped):
    # hardware.md: v3 32x32, v4 16x16x16, v5e and v6e 16x16, v5p 16x20x28; not TPU v2 or TPU7x
    expected = {"tpu-v3": (32, 32), "tpu-v4p": (16, 16, 16), "tpu-v5e": (16, 16), "tpu-v5p": (16, 20, 28),
                "tpu-v6e": (16, 16), "tpu-v2": None, "tpu7x": None}
    for chip_id, shape in expected.items():
        chip = get_chip(chip_id)
        assert chip.pod_shape == shape, chip_id
        raw = next(c for c in shipped["chips"] if c["id"] == chip_id)
        if shape is not None:
            assert math.prod(shape) == raw["interconnect"]["domain_size"], chip_id
            assert "interconnect.pod_shape" in raw["sources"], chip_id  # its own, not the block's
            assert "x".join(map(str, shape)) in chip.sources["interconnect.pod_shape"], chip_id
    assert "not the lengths of its axes" in get_chip("tpu7x").sources["interconnect.pod_shape"]
    for chip in list_chips():
        if chip.kind == "gpu":
            assert chip.pod_shape is None, chip.id


def test_the_shape_is_shown_on_the_chip_card_and_in_json(capsys):
    assert re.search(r"pod shape\s+16 x 20 x 28 chips\s+\[\d+\]\s+interconnect\.pod_shape", chip_card(get_chip("v5p")))
    assert main(["chip", "v5e", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["figures"]["interconnect.pod_shape"] == [16, 16]


def test_a_shape_is_not_a_figure():
    with pytest.raises(HardwareError, match=r"'interconnect\.pod_shape' is a list of axis lengths, not a figure"):
        get_chip("v5e").figure("interconnect.pod_shape")
    with pytest.raises(HardwareError, match=r"cannot override 'interconnect\.pod_shape'"):
        get_chip("v5e").with_figures({"interconnect.pod_shape": 16})


def _chip_of(data, chip_id):
    return next(c for c in data["chips"] if c["id"] == chip_id)


def _shape(chip_id, value):
    return lambda data: _chip_of(data, chip_id)["interconnect"].update(pod_shape=value)


@pytest.mark.parametrize("mutate, message", [
    (_shape("tpu-v5e", [16, 32]),
     r"interconnect\.pod_shape: 16x32 is 512 chips, more than interconnect\.domain_size \(256\)"),
    (_shape("tpu-v5e", [16, 16, 1]), r"interconnect\.pod_shape: a torus_2d has 2 axes, got 3 \(16x16x1\)"),
    (_shape("tpu-v5e", [16, 0]),
     r"interconnect\.pod_shape: each axis length must be a positive whole number, got the number 0"),
    (_shape("tpu-v5e", [16, 16.0]),
     r"interconnect\.pod_shape: each axis length must be a positive whole number, got the number 16\.0"),
    (_shape("tpu-v5e", [16, True]), r"each axis length must be a positive whole number, got true"),
    (_shape("tpu-v5e", []), r"interconnect\.pod_shape: must be a non-empty list of axis lengths"),
    (_shape("tpu-v5e", "16x16"), r"interconnect\.pod_shape: must be a non-empty list .* got a string"),
    (_shape("h100-sxm", [8]),
     r"'h100-sxm': interconnect\.pod_shape: is the shape of a torus, but interconnect\.topology is switch"),
])
def test_a_broken_shape_names_the_chip_and_what_is_wrong(tmp_path, shipped, mutate, message):
    data = copy.deepcopy(shipped)
    mutate(data)
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(HardwareError, match=re.escape(str(path)) + r": .*" + message):
        load_hardware(path)


def test_a_shape_needs_a_source_like_a_figure(tmp_path):
    data = {"chips": [{
        "id": "my-tpu", "name": "My TPU", "vendor": "acme", "kind": "tpu",
        "peak_flops_per_s": {"fp64": None, "fp32": None, "tf32": None, "bf16": 1e15, "fp16": None,
                             "fp8": None, "int8": None, "int4": None, "fp4": None},
        "hbm_capacity_bytes": 10**11, "hbm_bandwidth_bytes_per_s": 2.5e12,
        "interconnect": {"topology": "torus_2d", "pod_shape": [4, 4]},
        "sources": {"peak_flops_per_s": "spec", "hbm_capacity_bytes": "spec", "hbm_bandwidth_bytes_per_s": "spec"}}]}
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(HardwareError, match=r"'my-tpu': interconnect\.pod_shape: has no source"):
        load_hardware(path)
    data["chips"][0]["sources"]["interconnect.pod_shape"] = "measured"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert get_chip("my tpu", path).pod_shape == (4, 4)


def test_a_shape_with_no_source_of_its_own_takes_its_blocks(tmp_path, shipped):
    data = copy.deepcopy(shipped)
    _chip_of(data, "tpu-v5e")["sources"].pop("interconnect.pod_shape")
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    chip = get_chip("v5e", path)
    assert chip.pod_shape == (16, 16)
    assert chip.sources["interconnect.pod_shape"] == chip.sources["interconnect.topology"]


# -- v5e: X=64 and X=256 by hand ----------------------------------------------------

def test_v5e_x64_is_a_ring_of_16_and_a_line_of_4():
    f = ici("tpu-v5e")
    one_way, bidi, hop = (f["link_bandwidth_one_way_bytes_per_s"], f["link_bandwidth_bidi_bytes_per_s"],
                          f["hop_latency_s"])
    longest, wrap = max(f["pod_shape"]), f["wraparound_min_axis_size"]
    assert longest < 64 and 64 % longest == 0 and longest % wrap == 0  # a whole axis (a ring), the rest a line
    rest = 64 // longest
    assert rest < wrap  # no wraparound on the 4
    chip = get_chip("v5e")
    # AllGather: not all rings, so one after another; per byte the ring (1/W_bidi) is faster
    # than the line ((4-1)/4 / W_one_way), so it moves the whole V and the line V/16
    ring_per_byte, line_per_byte = 1 / bidi, sympy.Rational(rest - 1, rest) / one_way
    assert ring_per_byte < line_per_byte
    gather = V * ring_per_byte + V / longest * line_per_byte
    hops = ring_hops(longest) + line_hops(rest)
    t = time("AllGather", axes(X=64), V, chip)
    assert t.bandwidth == gather and t.hops == hops == 11 and t.latency == hops * hop
    assert t.links == "X=64: ICI 16 (ring with wraparound) x 4 (no wraparound)"
    r = time("AllReduce", axes(X=64), V, chip)
    assert r.bandwidth == 2 * gather and r.hops == 2 * hops and r.latency == 2 * hops * hop
    # AllToAll axis by axis: a quarter of the ring's array over both directions, the line's
    # middle link carrying 2 x 2 of its 4 blocks one way
    a = time("AllToAll", axes(X=64), V, chip)
    assert a.bandwidth == V * sympy.Rational(longest, 4) / bidi + V * sympy.Rational(2 * 2, rest) / one_way
    assert a.hops == hops


def test_v5e_x256_is_two_rings_of_16():
    f = ici("tpu-v5e")
    one_way, bidi, hop = (f["link_bandwidth_one_way_bytes_per_s"], f["link_bandwidth_bidi_bytes_per_s"],
                          f["hop_latency_s"])
    side, other = f["pod_shape"]
    assert side * other == 256 and side % f["wraparound_min_axis_size"] == other % f["wraparound_min_axis_size"] == 0
    chip = get_chip("v5e")
    t = time("AllGather", axes(X=256), V, chip)
    assert t.bandwidth == V / (2 * bidi)  # both rings at once
    assert t.hops == ring_hops(side) + ring_hops(other) == 16 and t.latency == 16 * hop  # not 128 hops
    assert t.links == "X=256: ICI 16 x 16 (rings with wraparound)"
    assert time("AllReduce", axes(X=256), V, chip).bandwidth == 2 * V / (2 * bidi)
    a = time("AllToAll", axes(X=256), V, chip)
    assert a.bandwidth == V * (sympy.Rational(side, 4) + sympy.Rational(other, 4)) / bidi == 8 * V / bidi
    # a single ring of 256, as before: V / W_bidi and 256/4 = 64 V / W_bidi
    old = unshaped(chip)
    assert time("AllGather", axes(X=256), V, old).bandwidth == V / bidi
    assert time("AllToAll", axes(X=256), V, old).bandwidth == 64 * V / bidi
    assert time("AllGather", axes(X=256), V, old).hops == 128
    assert one_way * 2 == bidi


def test_the_analysis_says_how_a_long_axis_is_laid(capsys):
    spec = "AllGather_X bf16[B_X, D] -> bf16[B, D]"
    assert main(["analyze", spec, "--chip", "v5e", "--mesh", "X=256", "--set", "B=4096,D=4096"]) == 0
    assert "per chip; X=256: ICI 16 x 16 (rings with wraparound): 186.414 us, at least 16 us (16 hops)" \
        in capsys.readouterr().out
    a = symroof.analyze(spec, chip="v5e", mesh="X=256")
    bidi = ici("tpu-v5e")["link_bandwidth_bidi_bytes_per_s"]
    assert a.at(B=4096, D=4096).t_network == 2 * 4096 * 4096 / (2 * bidi)


# -- v5p: derived from its pod shape --------------------------------------------------

def _fewest_pieces(n: int, shape: tuple[int, ...]) -> tuple[int, int]:
    """The two-piece split of n over two different physical axes with the largest piece."""
    pairs = [(a, n // a) for i, a_len in enumerate(shape) for j, b_len in enumerate(shape) if i != j
             for a in range(1, a_len + 1) if n % a == 0 and n // a <= b_len]
    return max(pairs)


def test_v5p_x64_spans_two_of_its_three_axes():
    f = ici("tpu-v5p")
    shape, wrap, bidi, hop = tuple(f["pod_shape"]), f["wraparound_min_axis_size"], \
        f["link_bandwidth_bidi_bytes_per_s"], f["hop_latency_s"]
    assert max(shape) < 64  # no physical axis holds it
    big, small = _fewest_pieces(64, shape)
    assert big * small == 64 and big % wrap == 0 and small % wrap == 0  # two rings
    chip = get_chip("v5p")
    assert lengths(axes(X=64), chip) == {"X": (big, small)}
    t = time("AllGather", axes(X=64), V, chip)
    assert t.bandwidth == V / (2 * bidi)
    assert t.hops == ring_hops(big) + ring_hops(small) and t.latency == t.hops * hop
    a = time("AllToAll", axes(X=64), V, chip)
    assert a.bandwidth == V * (sympy.Rational(big, 4) + sympy.Rational(small, 4)) / bidi
    assert t.links == f"X=64: ICI {big} x {small} (rings with wraparound)"


def test_v5p_whole_pod_spans_all_three_axes():
    f = ici("tpu-v5p")
    shape, bidi = tuple(f["pod_shape"]), f["link_bandwidth_bidi_bytes_per_s"]
    chip = get_chip("v5p")
    n = math.prod(shape)
    assert sorted(lengths(axes(X=n), chip)["X"]) == sorted(shape)
    t = time("AllGather", axes(X=n), V, chip)
    assert t.bandwidth == V / (3 * bidi) and t.hops == sum(ring_hops(s) for s in shape)


# -- what stays as it was --------------------------------------------------------------

KINDS = ("AllGather", "ReduceScatter", "AllReduce", "AllToAll")
SHAPED = [chip.id for chip in list_chips() if chip.pod_shape is not None]


@pytest.mark.parametrize("chip_id", SHAPED)
def test_an_axis_along_one_physical_axis_costs_what_it_did(chip_id):
    chip = get_chip(chip_id)
    for n in range(1, max(chip.pod_shape) + 1):
        for kind in KINDS:
            new, old = time(kind, axes(X=n), V, chip), time(kind, axes(X=n), V, unshaped(chip))
            assert new == old, (chip_id, n, kind)


@pytest.mark.parametrize("mesh", [dict(X=4, Y=4, Z=16), dict(X=16, Y=16), dict(X=2, Y=8, Z=16), dict(X=4, Y=16, Z=4)])
def test_axes_sharing_a_physical_axis_cost_what_they_did(mesh):
    chip = get_chip("v5e")
    laid = lengths(axes(**mesh), chip)
    assert all(len(pieces) == 1 for pieces in laid.values())
    for kind in KINDS:
        for name in mesh:
            new = time(kind, [MeshAxis(name, mesh[name])], V, chip, mesh=axes(**mesh))
            assert new == time(kind, [MeshAxis(name, mesh[name])], V, unshaped(chip)), (mesh, name, kind)
        new = time(kind, axes(**mesh), V, chip, mesh=axes(**mesh))
        assert new == time(kind, axes(**mesh), V, unshaped(chip))


def test_symbolic_links_gpus_and_dcn_are_as_they_were():
    # no chip, only --ici-bw: one line of 256 links, as before
    w = sympy.Symbol("W_ici", positive=True)
    t = time("AllGather", axes(X=256), V, None, w)
    assert t.bandwidth == sympy.Rational(255, 256) * V / w and t.hops == 255
    h100 = get_chip("h100")
    assert time("AllToAll", axes(X=8), V, h100) == time("AllToAll", axes(X=8), V, unshaped(h100))
    v5e = get_chip("v5e")
    dcn = [MeshAxis("X", 16), MeshAxis("Y", 64, "dcn")]
    assert time("AllGather", dcn, V, v5e) == time("AllGather", dcn, V, unshaped(v5e))
    assert lengths(dcn, v5e) == {"X": (16,)}
    # TPU7x's shape is not known: its axes are costed as before, with nothing new said
    tpu7x = get_chip("tpu7x").with_figures({"interconnect.link_bandwidth_one_way_bytes_per_s": 10**11})
    t = time("AllGather", axes(X=256), V, tpu7x)
    assert t == time("AllGather", axes(X=256), V, unshaped(tpu7x)) and t.links == "X: ICI (no wraparound)"


# -- the mesh decides where each axis lies -------------------------------------------------

def test_an_axis_beside_others_takes_what_they_leave():
    chip = get_chip("v5e")
    f = ici("tpu-v5e")
    one_way = f["link_bandwidth_one_way_bytes_per_s"]
    # X=8 and Y=8 take one physical axis each, leaving 2 on each: Z=4 is 2 x 2, two lines of 2
    mesh = axes(X=8, Y=8, Z=4)
    assert lengths(mesh, chip) == {"X": (8,), "Y": (8,), "Z": (2, 2)}
    t = time("AllGather", [MeshAxis("Z", 4)], V, chip, mesh=mesh)
    per_byte = sympy.Rational(1, 2) / one_way
    assert t.bandwidth == V * per_byte + V / 2 * per_byte and t.hops == 2
    assert t.links == "Z=4: ICI 2 x 2 (no wraparound)"
    # X=4 leaves 4 of the first axis: Y=64 is the whole second axis and those 4
    assert lengths(axes(X=4, Y=64), chip) == {"X": (4,), "Y": (16, 4)}


def test_a_mesh_that_does_not_fit_the_pod_says_what_would():
    v5e = get_chip("v5e")
    with pytest.raises(HardwareError, match=r"mesh axis X=17 does not fit TPU v5e's 16x16 ICI torus: .*"
                                            r"X=16 or X=18 would fit, or put it on DCN \(X=17@dcn\)"):
        check_domain(axes(X=17), v5e)
    with pytest.raises(HardwareError, match=r"mesh axis Z=5 does not fit TPU v5e's 16x16 ICI torus beside X=5, Y=5: "
                                            r".*Z=4 or Z=6 would fit"):
        time("AllGather", axes(X=5), V, v5e, mesh=axes(X=5, Y=5, Z=5))
    with pytest.raises(HardwareError, match=r"does not fit TPU v5e's 16x16 ICI torus"):
        symroof.analyze("AllGather_X bf16[B_X] -> bf16[B]", chip="v5e", mesh="X=17").t_network
    # more chips than the pod: the domain's message, as before
    with pytest.raises(HardwareError, match="span 512 chips, but TPU v5e's ICI reaches 256"):
        check_domain(axes(X=32, Y=16), v5e)
    # without a shape, as before: a line of 17
    assert time("AllGather", axes(X=17), V, unshaped(v5e)).hops == 16


# -- properties -------------------------------------------------------------------------

def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


SIZES = st.sampled_from([(chip_id, n) for chip_id in SHAPED for n in _divisors(math.prod(get_chip(chip_id).pod_shape))])


@settings(max_examples=150, deadline=None)
@given(case=SIZES, kind=st.sampled_from(KINDS))
def test_a_laid_axis_costs_what_its_pieces_cost_as_a_mesh_written_by_hand(case, kind):
    chip_id, n = case
    chip = get_chip(chip_id)
    pieces = lengths(axes(X=n), chip)["X"]
    assert math.prod(pieces) == n
    by_hand = [MeshAxis(f"P{i}", p) for i, p in enumerate(pieces)]
    assert all(len(v) == 1 for v in lengths(by_hand, chip).values())  # each piece along one physical axis
    laid, written = time(kind, axes(X=n), V, chip), time(kind, by_hand, V, chip)
    assert (laid.bandwidth, laid.latency, laid.hops) == (written.bandwidth, written.latency, written.hops)
    # and a piece never takes more hops than one long axis did
    assert laid.hops <= time(kind, axes(X=n), V, unshaped(chip)).hops
