"""Pod, slice and cluster totals (`symroof chip CHIP --chips N`, `hardware.totals`): each
figure is a hand count from the chip's figures as hardware.json gives them."""

import io
import json

import pytest
import sympy

from symroof import HardwareError
from symroof.cli.command import main
from symroof.hardware import get_chip, totals


def test_a_full_v5p_pod_as_the_book_asks():
    # v5p: 4.59e14 bf16 FLOPs/s, 96 GB of HBM at 2.8e12 bytes/s, ICI links of 9e10 one way
    pod = totals(get_chip("v5p"), 8960)
    assert pod.shape == (16, 20, 28)
    assert pod.peak_flops["bf16"] == 8960 * 459 * 10**12            # 4.11e18 FLOPs/s
    assert pod.hbm_capacity == 8960 * 96 * 10**9                      # 860 TB
    assert pod.hbm_bandwidth == 8960 * 28 * 10**11
    # cut across the axis of 28: 16 x 20 = 320 rings along it, each crossing the cut twice (it
    # wraps around): 640 links, each 9e10 one way, 1.8e11 both ways
    (ici,) = pod.cuts
    assert ici.links == 2 * 16 * 20 == 640
    assert ici.one_way == 640 * 9 * 10**10 == sympy.Integer(576 * 10**11)
    assert ici.bidi == 640 * 18 * 10**10
    # the same torus given as a slice
    assert totals(get_chip("v5p"), slice="16x20x28").cuts == pod.cuts


def test_a_v5p_slice_and_the_wraparound():
    # 4x8x8 (the vendor's 256): cut across an axis of 8, 4 x 8 = 32 rings, 64 links
    sliced = totals(get_chip("v5p"), 256)
    assert sliced.shape == (4, 8, 8) and sliced.cuts[0].links == 64
    assert sliced.cuts[0].one_way == 64 * 9 * 10**10
    # 2x2x1: an axis of 2 does not wrap (v5p's close at multiples of 4): 2 lines, once each
    assert totals(get_chip("v5p"), slice="2x2x1").cuts[0].links == 2


def test_tpu_v3_pod_bisection_is_googles_figure():
    # Google gives the v3 pod's bisection as 6.4 TB/s: a 32 x 32 torus cut across an axis of 32,
    # 32 rings crossing twice, 64 links of 1e11 one way
    (ici,) = totals(get_chip("v3"), 1024).cuts
    assert ici.links == 64 and ici.one_way == 64 * 10**11 == sympy.Rational(64, 10) * 10**12


def test_a_gb200_nvl72_rack():
    # 72 GPUs in one NVLink domain: 72 x 2.5e15 bf16, 72 x 186 GB; half (36) send to the other half
    # through the NVSwitches at 9e11 each one way (NVLink 5: 1.8 TB/s both ways a GPU)
    rack = totals(get_chip("gb200"), 72)
    assert rack.peak_flops["bf16"] == 72 * 25 * 10**14 and rack.hbm_capacity == 72 * 186 * 10**9
    (nvlink,) = rack.cuts
    assert (nvlink.network, nvlink.links, nvlink.one_way, nvlink.bidi) == \
        ("NVLink", 36, 36 * 9 * 10**11, 36 * 18 * 10**11)
    # NVIDIA's "130 TB/s" for the rack is every GPU's 1.8 TB/s summed (72 x 1.8e12 = 1.296e14),
    # twice the bisection both ways: not what crosses a cut
    assert 2 * nvlink.bidi == 72 * 18 * 10**11


def test_an_h100_cluster_on_a_fat_tree():
    # 1024 H100s = 128 HGX nodes: each node's NVLink bisection 4 x 4.5e11; across the fat tree
    # (full bisection, as the file says) half the GPUs' NICs, 512 x 5e10 one way
    cluster = totals(get_chip("h100"), 1024)
    assert cluster.peak_flops["bf16"] == 1024 * 989 * 10**12
    nvlink, ib = cluster.cuts
    assert nvlink.one_way == 4 * 450 * 10**9
    assert (ib.network, ib.links, ib.one_way, ib.upper_bound) == ("InfiniBand", 512, 512 * 5 * 10**10, False)


def test_a_fabric_the_file_does_not_describe_is_an_upper_bound():
    # A100: the file says nothing of its fabric, so half the NICs (32 x 2.5e10) is at most the bisection
    ib = totals(get_chip("a100"), 64).cuts[1]
    assert ib.upper_bound and ib.one_way == 32 * 25 * 10**9
    assert "at most 800 GB/s one way" in str(totals(get_chip("a100"), 64))


def test_fully_connected_node():
    # MI300X: 8 GPUs each linked to every other; halves of 4: 16 links of 6.4e10 one way
    (fabric,) = totals(get_chip("mi300x"), 8).cuts
    assert fabric.links == 16 and fabric.one_way == 16 * 64 * 10**9


def test_refusals_say_what_would_do():
    with pytest.raises(HardwareError, match=r"not the pod \(8960\) nor one of the vendor's slices.*--slice"):
        totals(get_chip("v5p"), 96)
    with pytest.raises(HardwareError, match="not whole 8-GPU NVLink domains: give a multiple of 8"):
        totals(get_chip("h100"), 12)
    with pytest.raises(HardwareError, match="disagree"):
        totals(get_chip("v5p"), 255, slice="4x8x8")
    with pytest.raises(HardwareError, match="no torus"):
        totals(get_chip("h100"), slice="4x4")
    # a pod whose shape no source gives: totals, and the bisection said to be unknown
    ironwood = totals(get_chip("tpu7x"), 9216)
    assert not ironwood.cuts and "no shape" in ironwood.unknown[0]


def test_the_command():
    out, err = io.StringIO(), io.StringIO()
    assert main(["chip", "v5p", "--slice", "16x20x28", "--json"], out=out, err=err) == 0
    data = json.loads(out.getvalue())
    assert data["chips"] == 8960 and data["bisection"][0]["links"] == 640
    assert data["peak_flops_per_s"]["bf16"] == 8960 * 459 * 10**12
    out = io.StringIO()
    assert main(["chip", "gb200", "--chips", "72"], out=out) == 0
    assert "NVLink: 32.4 TB/s one way, 64.8 TB/s both ways" in out.getvalue()
    err = io.StringIO()
    assert main(["chip", "h100", "--chips", "12"], out=io.StringIO(), err=err) == 2
    assert err.getvalue().count("\n") == 1 and "multiple of 8" in err.getvalue()
