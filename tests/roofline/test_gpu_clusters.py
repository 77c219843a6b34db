"""GPU clusters as they are wired: NVLink nodes (8 GPUs on HGX, 72 on GB200 NVL72) joined by
InfiniBand, each GPU its own NIC. A collective over GPUs inside and across nodes is costed as
NCCL's hierarchical algorithm runs it; every expected time here is worked by hand from the
chip's figures, as hardware.json gives them (one-way, per GPU)."""

import sympy

from symroof import analyze, get_chip
from symroof.ir import MeshAxis
from symroof.roofline.collectives import link, time

V = sympy.Symbol("V", positive=True)
H100, GB200, A100 = get_chip("h100"), get_chip("gb200"), get_chip("a100")


def test_the_file_figures_the_hand_counts_use():
    # NVLink 4: 18 links x 25 GB/s one way = 450 GB/s a GPU; one 400 Gb/s NIC a GPU = 50 GB/s
    assert H100.figure("interconnect.chip_bandwidth_one_way_bytes_per_s") == 18 * 25 * 10**9 == 450 * 10**9
    assert H100.figure("scaleout.bandwidth_one_way_bytes_per_s_per_chip") == 400 * 10**9 // 8
    # NVLink 5 on GB200 NVL72: 1.8 TB/s both ways = 900 GB/s one way, over 72 GPUs in one domain
    assert GB200.figure("interconnect.chip_bandwidth_one_way_bytes_per_s") == 18 * 50 * 10**9 == 1_800 * 10**9 // 2
    assert GB200.figure("interconnect.domain_size") == 72 and H100.figure("interconnect.domain_size") == 8
    # A100: NVLink 3, 12 x 25 GB/s; one 200 Gb/s HDR NIC a GPU
    assert A100.figure("interconnect.chip_bandwidth_one_way_bytes_per_s") == 300 * 10**9
    assert A100.figure("scaleout.bandwidth_one_way_bytes_per_s_per_chip") == 200 * 10**9 // 8


def test_allreduce_across_hgx_nodes_is_the_hierarchical_algorithm():
    # 8 nodes of 8 H100s: ReduceScatter in the node over NVLink (7/8 of V at 450e9), AllReduce
    # across the 8 nodes of the V/8 each GPU then holds on its own NIC (2 x 7/8 of V/8 at 50e9),
    # AllGather in the node: 2(n-1)/n V/W_nvlink + 2(m-1)/m (V/n)/W_ib
    n, m, nvlink, ib = 8, 8, sympy.Integer(450 * 10**9), sympy.Integer(50 * 10**9)
    hand = 2 * sympy.Rational(n - 1, n) * V / nvlink + 2 * sympy.Rational(m - 1, m) * (V / n) / ib
    axes = [MeshAxis("Z", n), MeshAxis("Q", m, "dcn")]
    assert time("AllReduce", axes, V, H100).bandwidth == hand
    # the axes' order as written does not matter: the slow link always takes the small array
    assert time("AllReduce", axes[::-1], V, H100).bandwidth == hand
    # AllGather and ReduceScatter: half of it each
    for kind in ("AllGather", "ReduceScatter"):
        assert time(kind, axes, V, H100).bandwidth == hand / 2
    # a hop in the node and one across: the latency floor, estimates both (1 us, 5 us)
    assert time("AllGather", axes, V, H100).latency == sympy.Rational(1, 10**6) + sympy.Rational(5, 10**6)


def test_allreduce_across_nvl72_racks():
    # 2 racks of 72 GB200s: 2 x 71/72 of V at 900e9 in the rack, 2 x 1/2 of V/72 at 50e9 across
    hand = 2 * sympy.Rational(71, 72) * V / (900 * 10**9) + 2 * sympy.Rational(1, 2) * (V / 72) / (50 * 10**9)
    axes = [MeshAxis("Z", 72), MeshAxis("Q", 2, "dcn")]
    assert time("AllReduce", axes, V, GB200).bandwidth == hand


def test_the_nodes_egress_limits_where_less_than_a_nic_a_gpu():
    # a node of 8 GPUs whose NICs share 200 GB/s of egress: 25 GB/s each, not its NIC's 50
    shared = H100.with_figures({"scaleout.node_egress_bytes_per_s": 2 * 10**11})
    across = link(MeshAxis("Q", 4, "dcn"), shared)
    assert across.one_way == 2 * 10**11 // 8 and "egress" in across.describe()
    assert time("AllGather", [MeshAxis("Q", 4, "dcn")], V, shared).bandwidth == \
        sympy.Rational(3, 4) * V / (25 * 10**9)
    # the shipped figures: a node's egress is its 8 NICs', so each GPU has its own NIC's
    assert link(MeshAxis("Q", 4, "dcn"), H100).one_way == 50 * 10**9


def test_links_are_called_by_their_names():
    assert link(MeshAxis("Q", 2, "dcn"), H100).name == "InfiniBand"
    assert link(MeshAxis("Z", 8), H100).name == "NVLink"
    assert link(MeshAxis("Q", 2, "dcn"), get_chip("v5p")).name == "DCN"   # a TPU's data-center network


def test_a_gradient_reduce_scattered_over_nodes_and_gpus_is_one_hierarchical_collective():
    # the gradient of an FSDP weight: partial sums over both axes, the result split over both.
    # One ReduceScatter over Q and Z (NVLink on the whole array, InfiniBand on an eighth), not one
    # over Q on the whole array and then one over Z
    a = analyze("bf16[B_{QZ}, D] *_B bf16[B_{QZ}, F] -> bf16[D_{QZ}, F]", chip="h100", mesh="Q=2@dcn, Z=8")
    (rs,) = a.collectives
    assert "ReduceScatter_{Q,Z,D}" in str(rs)
    Dm, Fm = sympy.Symbol("D", positive=True, integer=True), sympy.Symbol("F", positive=True, integer=True)
    block = 2 * Dm * Fm   # bf16 D x F: the unreduced block each GPU holds
    hand = sympy.Rational(7, 8) * block / (450 * 10**9) + sympy.Rational(1, 2) * (block / 8) / (50 * 10**9)
    assert sympy.simplify(a.t_network - hand) == 0
