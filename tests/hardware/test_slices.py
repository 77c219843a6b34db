"""--slice: a mesh laid on a vendor slice of a torus pod (4x8x8 for 256 v5p chips), where an
axis closes into a ring only when it takes a whole slice axis long enough to wrap; and the
note that says when the pod was used instead. Each time is derived by hand from the
figures in hardware.json, read independently of symroof's reader."""

from __future__ import annotations

import copy
import json
import math
import re
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import symroof
from symroof.cli.command import main
from symroof.errors import HardwareError
from symroof.hardware.chips import get_chip, load_hardware
from symroof.hardware.topology import lay_out, placement
from symroof.ir import MeshAxis
from symroof.models import strategy_costs
from symroof.resources import resource_path
from symroof.roofline.collectives import time

V = sympy.Symbol("V", positive=True)
SHIPPED = json.loads(resource_path("hardware.json").read_text(encoding="utf-8"))


def block(chip_id: str) -> dict:
    return next(c for c in SHIPPED["chips"] if c["id"] == chip_id)["interconnect"]


def exact(value) -> sympy.Rational:
    f = Fraction(repr(value) if isinstance(value, float) else str(value))
    return sympy.Rational(f.numerator, f.denominator)


def test_the_vendor_slices_are_the_references_and_fit_the_pod():
    # hardware.md, from the vendor's pages: the slice topologies of v5e and v5p
    assert block("tpu-v5e")["slice_shapes"] == [[1, 1], [2, 2], [2, 4], [4, 4], [4, 8], [8, 8], [8, 16], [16, 16]]
    assert block("tpu-v5p")["slice_shapes"][5] == [4, 8, 8] and block("tpu-v5p")["slice_shapes"][-1] == [16, 16, 24]
    for chip_id in ("tpu-v5e", "tpu-v5p"):
        chip = get_chip(chip_id)
        assert "GC-" in chip.sources["interconnect.slice_shapes"]
        for shape in chip.slice_shapes:
            assert all(s <= p for s, p in zip(sorted(shape), sorted(chip.pod_shape)))
            assert chip.vendor_slice(math.prod(shape)) == shape


def test_v5p_256_on_its_slice_is_three_rings_not_two():
    f = block("tpu-v5p")
    bidi, hop = exact(f["link_bandwidth_bidi_bytes_per_s"]), exact(f["hop_latency_s"])
    wrap = f["wraparound_min_axis_size"]
    assert all(side % wrap == 0 for side in (4, 8, 8))  # every axis of 4x8x8 wraps
    chip = get_chip("v5p")
    on_pod = time("AllGather", [MeshAxis("Z", 256)], V, chip)
    on_slice = time("AllGather", [MeshAxis("Z", 256)], V, chip.on_slice("4x8x8"))
    assert on_pod.bandwidth == V / (2 * bidi)  # 16 x 16 on the pod: two rings at once
    assert on_slice.bandwidth == V / (3 * bidi)  # 8 x 8 x 4: three
    assert on_slice.hops == 8 // 2 + 8 // 2 + 4 // 2 and on_slice.latency == 10 * hop
    assert on_slice.links == "Z=256: ICI 8 x 8 x 4 (rings with wraparound)"
    assert time("AllToAll", [MeshAxis("Z", 256)], V, chip.on_slice("4x8x8")).bandwidth == \
        V * sympy.Rational(8 + 8 + 4, 4) / bidi


def test_v5e_16_on_its_4x4_slice_is_two_lines():
    # v5e wraps only an axis of 16: on a 4x4 slice neither axis is a ring. Gathering over one
    # line of 4 then the other: (4-1)/4 of a quarter of V, then (4-1)/4 of V, one way
    f = block("tpu-v5e")
    one_way, bidi = exact(f["link_bandwidth_one_way_bytes_per_s"]), exact(f["link_bandwidth_bidi_bytes_per_s"])
    assert f["wraparound_min_axis_size"] > 4
    chip = get_chip("v5e")
    t = time("AllGather", [MeshAxis("X", 16)], V, chip.on_slice("4x4"))
    assert t.bandwidth == sympy.Rational(3, 4) * (V / 4 + V) / one_way
    assert t.hops == 3 + 3 and t.links == "X=16: ICI 4 x 4 (no wraparound)"
    assert time("AllGather", [MeshAxis("X", 16)], V, chip).bandwidth == V / bidi  # the pod's ring of 16
    # a whole axis of a 16x16 slice is a ring, as on the pod
    assert time("AllGather", [MeshAxis("X", 16)], V, chip.on_slice("16x16")).bandwidth == V / bidi


def test_axes_sharing_a_slice_axis_are_lines():
    # 4x8x8 with X=16, Y=16: each takes a whole axis of 8 (a ring) and half of another (a line)
    laid = lay_out([MeshAxis("X", 16), MeshAxis("Y", 16)], get_chip("v5p").on_slice("4x8x8"))
    for pieces in laid.values():
        assert sorted(pieces) == [(2, False), (8, True)]


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_mesh_on_any_vendor_slice_is_laid_whole_and_its_rings_are_whole_axes(data):
    chip = get_chip(data.draw(st.sampled_from(["v5e", "v5p"])))
    shape = data.draw(st.sampled_from([s for s in chip.slice_shapes if math.prod(s) > 1]))
    chips = math.prod(shape)
    first = data.draw(st.sampled_from([d for d in range(1, chips + 1) if chips % d == 0]))
    mesh = [MeshAxis("X", first), MeshAxis("Y", chips // first)]
    try:
        laid = lay_out(mesh, chip.on_slice(shape))
    except HardwareError as error:
        assert "slice" in str(error)  # no room for it: said so, naming the slice
        return
    wrap = int(chip.figure("interconnect.wraparound_min_axis_size"))
    for axis in mesh:
        pieces = laid.get(axis.name, ((axis.size, None),))
        assert math.prod(size for size, _ in pieces) == axis.size
        for size, ring in pieces:
            if ring:  # a ring is a whole axis of the slice, one that wraps
                assert size in shape and size % wrap == 0


def test_the_report_says_where_the_axes_were_laid(capsys):
    spec = "AllGather_Z bf16[W_Z] -> bf16[W]"
    assert main(["analyze", spec, "--chip", "v5p", "--mesh", "Z=256"]) == 0
    assert "ICI axes laid on TPU v5p's 16x20x28 pod; on its 256-chip slice, 4x8x8, they cost otherwise " \
           "(--slice 4x8x8)" in capsys.readouterr().out
    assert main(["analyze", spec, "--chip", "v5p", "--mesh", "Z=256", "--slice", "4x8x8"]) == 0
    out = capsys.readouterr().out
    assert "ICI axes laid on a 4x8x8 slice" in out and "8 x 8 x 4 (rings with wraparound)" in out
    # where the vendor's slice costs the same (4x4x4: each axis a ring either way), nothing to say
    assert placement([MeshAxis(a, 4) for a in "XYZ"], get_chip("v5p")) is None
    assert placement([MeshAxis("X", 8)], get_chip("h100")) is None  # no torus


def test_the_slice_reaches_models_and_the_planner():
    on_pod = symroof.model("llama-3-70b", "train", chip="v5p", sizes={"B": 256, "T": 4096}, strategy="fsdp=256")
    chip = get_chip("v5p").on_slice("4x8x8")
    on_slice = symroof.model("llama-3-70b", "train", chip=chip, sizes={"B": 256, "T": 4096}, strategy="fsdp=256")
    # the gathers' bandwidth over three rings in place of two: network time 2/3 of what it was
    # (the latency floors aside), and so the FSDP threshold
    assert on_slice.step_analysis.t_network < on_pod.step_analysis.t_network
    pod_threshold = strategy_costs.thresholds(on_pod, {"fsdp": "Z"})["fsdp"]["per_chip_tokens"]
    slice_threshold = strategy_costs.thresholds(on_slice, {"fsdp": "Z"})["fsdp"]["per_chip_tokens"]
    assert slice_threshold == pod_threshold * sympy.Rational(2, 3)


@pytest.mark.parametrize("argv, message", [
    (["--slice", "32x8"], "--slice 32x8 on TPU v5e: a slice 32x8 does not fit the 16x16 pod (its vendor slices: 1x1,"),
    (["--slice", "4x4x4"], "--slice 4x4x4 on TPU v5e: a slice 4x4x4 does not fit the 16x16 pod"),
    (["--slice", "4by4"], "--slice '4by4': expected axis lengths joined by x, e.g. 4x8x8"),
    (["--slice", "2x2"], "mesh axis X=16 does not fit the 2x2 slice of TPU v5e"),
])
def test_a_bad_slice_is_a_one_line_error(capsys, argv, message):
    spec = "AllGather_X bf16[W_X] -> bf16[W]"
    assert main(["analyze", spec, "--chip", "v5e", "--mesh", "X=16", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_a_slice_needs_a_torus_chip(capsys):
    with pytest.raises(HardwareError, match=r"a slice 8 is a box of a torus pod, but no pod shape is given"):
        get_chip("h100").on_slice("8")
    assert main(["roofline", "--flops", "1e12", "--bytes", "1e9", "--chip", "v5e", "--slice", "4x4"]) == 2
    assert "bare counts have none" in capsys.readouterr().err


def test_a_file_slice_that_does_not_fit_its_pod_is_named(tmp_path):
    data = copy.deepcopy(SHIPPED)
    next(c for c in data["chips"] if c["id"] == "tpu-v5e")["interconnect"]["slice_shapes"] = [[4, 4], [32, 2]]
    path = tmp_path / "hw.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    message = "interconnect.slice_shapes: a slice 32x2 does not fit the 16x16 pod"
    with pytest.raises(HardwareError, match=re.escape(message)):
        load_hardware(path)
