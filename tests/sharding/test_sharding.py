"""Sharding: meshes, the four cases of a sharded contraction, written collectives, the link
model of each collective, the network roofline, and properties over random layouts."""

import pytest
import sympy
from hypothesis import event, given, settings
from hypothesis import strategies as st

from symroof import SpecError, analyze, get_chip, parse
from symroof.ir import MeshAxis, dim_symbol
from symroof.roofline.collectives import time
from symroof.sharding.lowering import ShardingError, lower

B, D, F, I, J, K, V = (dim_symbol(n) for n in ("B", "D", "F", "I", "J", "K", "V"))
V5E = get_chip("tpu-v5e")    # 2D torus: wraparound on axes of 16, 4.5e10 one way, 9e10 bidi, 1 us hops
V5P = get_chip("tpu-v5p")    # 3D torus: wraparound on axes of 4, 9e10 one way, 1.8e11 bidi
H100 = get_chip("h100")      # NVLink switch: 4.5e11 egress, an estimated 1 us hop
ONE_WAY, BIDI, HOP = sympy.Integer(45 * 10**9), sympy.Integer(90 * 10**9), sympy.Rational(1, 10**6)


def plan(spec, mesh=None):
    program = parse(spec, mesh=mesh)
    return [str(item) for item in lower(program.statements[-1], program.mesh).items]


# ---- the book's two-chip example -------------------------------------------------------------

def test_two_chip_matmul_as_the_book_says():
    a = analyze("mesh X=2\nbf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="tpu-v5e")
    assert a.flops == B * D * F and a.flops_total == 2 * B * D * F and a.replication == 1
    assert a.t_math == B * D * F / 197_000_000_000_000
    assert a.t_network == 2 * B * F / ONE_WAY
    assert a.network_intensity == D / 2
    assert a.critical_network_intensity == sympy.Rational(197_000_000_000_000, 45_000_000_000)
    t = a.threshold("D")
    assert t.network.op == ">" and t.network.rule == t.network.exact == sympy.Rational(394000, 45)
    assert float(t.network.rule) == pytest.approx(8755.556, rel=1e-6)
    assert t.op == ">" and t.rule is not None  # the HBM threshold stands beside it
    assert a.t_network_latency == 2 * HOP   # an AllReduce over 2 chips: 2 hops


# ---- the four cases --------------------------------------------------------------------------

def test_case_1_nothing_sharded_along_the_contraction():
    steps = plan("mesh X=2; bf16[B_X, D] @ bf16[D, F] -> bf16[B_X, F]")
    assert steps == ["bf16[B/X, D] * bf16[D, F] -> bf16[B/X, F]"]


def test_case_2_one_side_sharded_along_the_contraction_is_gathered():
    steps = plan("mesh X=2; bf16[B, D_X] @ bf16[D, F] -> bf16[B, F]")
    assert steps[0].startswith("AllGather_X bf16[B, D_X]") and "inserted" in steps[0]
    assert steps[1] == "bf16[B, D] * bf16[D, F] -> bf16[B, F]"


@pytest.mark.parametrize("result, after", [
    ("bf16[B, F]", "AllReduce_X bf16[B, F] {U_X}"),
    ("bf16[B, F_X]", "ReduceScatter_{X,F} bf16[B, F] {U_X}"),
    ("bf16[B, F] {U_X}", None),
])
def test_case_3_both_sharded_alike_reduce_as_the_result_asks(result, after):
    steps = plan(f"mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> {result}")
    assert steps[0] == "bf16[B, D/X] * bf16[D/X, F] -> bf16[B, F] {U_X}"
    assert (steps[1].split(" (")[0] if len(steps) > 1 else None) == after


def test_case_4_same_axis_on_two_result_dims_is_refused_with_both_fixes():
    with pytest.raises(ShardingError, match="X would split both B and F of the result") as info:
        parse("mesh X=2; bf16[B_X, D] @ bf16[D, F_X] -> bf16[B, F]")
    err = info.value
    assert [what for what, _, _ in err.fixes] == ["AllGather_X the left operand's B first",
                                                  "AllGather_X the right operand's F first"]
    assert [V for _, _, V in err.fixes] == [2 * B * D, 2 * D * F]
    assert "gather one side first: AllGather_X bf16[B_X, D] -> bf16[B, D] (2*B*D bytes per chip)" in str(err) and err.column == 11


def test_two_axes_and_batch_slices():
    a = analyze("mesh X=4, Y=2; bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F]", chip="v5e")
    assert a.flops == B * D * F / 4 and a.flops_total == 2 * B * D * F and a.replication == 1
    (move, t), = a.collectives
    assert move.move.kind == "AllReduce" and move.bytes == B * F / 2  # the B/4 x F block, bf16
    # replicated batch side is sliced locally: no communication
    assert plan("mesh X=2; bf16[B_X, D] * bf16[B, D] -> bf16[B_X]") == ["bf16[B/X, D] * bf16[B/X, D] -> bf16[B/X]"]


def test_multi_axis_subscripts_mean_the_same():
    one = parse("mesh X=2, Y=2; bf16[B, D_{XY}] -> bf16[B]")
    assert parse("mesh X=2, Y=2; bf16[B, D_XY] -> bf16[B]") == one
    assert parse("mesh X=2, Y=2; bf16[B, D_{X,Y}] -> bf16[B]") == one
    assert parse(str(one)) == one


def test_mesh_from_outside_and_multi_line_results():
    a = analyze("AllGather_X bf16[B_X, D] -> bf16[B, D]; bf16[B, D] @ bf16[D, F] -> bf16[B, F]",
                chip="v5e", mesh="X=4")
    first, second = a.lines
    assert first.flops == 0 and second.flops == 2 * B * D * F
    assert a.t_network == first.t_network and a.flops == first.flops + second.flops
    with pytest.raises(SpecError, match=r"the spec's mesh \(X=2, Y@dcn\) and the mesh given with it \(X=4, Y@dcn\) "
                                        "disagree"):
        parse("mesh X=2, Y@dcn; bf16[B_X] -> bf16[B_X]", mesh="X=4, Y@dcn")


# ---- written collectives ---------------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    "AllGather_X bf16[I_X, J] -> bf16[I, J]",
    "AllGather_{XY} bf16[I, J_{XY}] -> bf16[I, J]",
    "ReduceScatter_{X,K} bf16[I, K] {U_X} -> bf16[I, K_X]",
    "AllReduce_Y bf16[I_X, J] {U_Y} -> bf16[I_X, J]",
    "AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]",
])
def test_written_collectives_parse_and_round_trip(spec):
    program = parse("mesh X=2, Y=2\n" + spec)
    assert parse(str(program)) == program


@pytest.mark.parametrize("spec, message", [
    ("AllGather_X bf16[I, J] -> bf16[I_X, J]", "X splits no dim of the input"),
    ("AllGather_X bf16[I_X, J] -> bf16[I, J_X]", "the result adds X to J"),
    ("AllReduce_X bf16[I, J] -> bf16[I, J]", r"the input needs \{U_X\}"),
    ("ReduceScatter_{X,K} bf16[I, K] {U_X} -> bf16[I, K]", "K is split over X, not nothing"),
    ("AllToAll_{X,J} bf16[I, J] -> bf16[I, J_X]", "no other dim of the input is split over X"),
    ("AllGather_Z bf16[I_X, J] -> bf16[I, J]", "Z is not an axis of the mesh"),
    ("AllGater_X bf16[I_X, J] -> bf16[I, J]", "unknown collective 'AllGater'; did you mean 'AllGather'"),
    ("AllGather_X bf16[I_X, J] -> fp32[I, J]", "keeps its dtype"),
    ("bf16[B, D_Z] -> bf16[B]", "Z is not an axis of the mesh"),
    ("bf16[B, D_{XX}] -> bf16[B]", "D is split over X twice"),
    ("bf16[B_X, D_X] -> bf16[B]", "X already splits B of this tensor"),
    ("bf16[B, 4095_X] -> bf16[B]", "4095 does not split evenly over X"),
    ("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F] {U_Y}", "unreduced over Y, but it holds no partial sums"),
    ("bf16[B, D] {U_X} @ bf16[D, F] -> bf16[B, F]", "annotations go after the result"),
])
def test_bad_layouts_are_clear_errors(spec, message):
    with pytest.raises(SpecError, match=message) as info:
        parse("mesh X=2, Y=2\n" + spec)
    assert info.value.column is not None


def test_no_mesh_and_bad_meshes():
    with pytest.raises(SpecError, match="there is no mesh"):
        parse("bf16[B, D_X] -> bf16[B]")
    with pytest.raises(SpecError, match="unknown link 'dnc'; did you mean 'dcn'"):
        parse("mesh X=2@dnc; bf16[B] -> bf16[B]")
    with pytest.raises(SpecError, match="one mesh; this is a second"):
        parse("mesh X=2\nmesh Y=2\nbf16[B] -> bf16[B]")
    with pytest.raises(SpecError, match="'mash X=...' is not a statement; did you mean 'mesh'"):
        parse("mash X=2\nbf16[B] -> bf16[B]")


# ---- the link model ------------------------------------------------------------------------------

def axes(*sizes, link="ici"):
    return [MeshAxis("XYZ"[i], n, link) for i, n in enumerate(sizes)]


@pytest.mark.parametrize("kind, factor", [("AllGather", 1), ("ReduceScatter", 1), ("AllReduce", 2)])
def test_one_axis_with_and_without_wraparound(kind, factor):
    ring = time(kind, axes(16), V, V5E)          # 16 closes the v5e ring
    assert ring.bandwidth == factor * V / BIDI
    line = time(kind, axes(4), V, V5E)           # 4 does not
    assert line.bandwidth == factor * sympy.Rational(3, 4) * V / ONE_WAY
    hops = {"AllReduce": 2}.get(kind, 1)
    assert ring.latency == hops * 8 * HOP and line.latency == hops * 3 * HOP


def test_all_to_all_is_a_quarter_of_gathering_the_whole_array():
    # V is each chip's block; the array is N x V. On the ring a quarter of it crosses the
    # middle each way over two links: a quarter of an AllGather of the whole array.
    ring = time("AllToAll", axes(16), V, V5E)
    assert ring.bandwidth == time("AllGather", axes(16), 16 * V, V5E).bandwidth / 4 == 4 * V / BIDI
    assert ring.hops == 8
    # a line: the middle link carries a quarter of the array one way (2 x 2 of 4 x 4 blocks)
    assert time("AllToAll", axes(4), V, V5E).bandwidth == 4 * V / 4 / ONE_WAY
    assert time("AllToAll", axes(2), V, V5E).bandwidth == V / 2 / ONE_WAY      # half of each block crosses
    assert time("AllToAll", axes(3), V, V5E).bandwidth == sympy.Rational(2, 3) * V / ONE_WAY
    # a switch: (N - 1)/N of each block leaves through the GPU's egress
    assert time("AllToAll", axes(8), V, H100).bandwidth == sympy.Rational(7, 8) * V / 450_000_000_000
    # brute force on a line: each block in N pieces, the busiest link (half its load each way)
    for n in range(2, 9):
        load = [0] * n
        for src in range(n):
            for dst in range(n):
                for hop in range(min(src, dst), max(src, dst)):
                    load[hop] += sympy.Rational(1, n)
        assert time("AllToAll", axes(n), V, V5E).bandwidth == max(load) / 2 * V / ONE_WAY


def test_two_and_three_axes():
    assert time("AllGather", axes(16, 16), V, V5E).bandwidth == V / (2 * BIDI)
    # without wraparound one axis after the other: X moves V/2, then Y moves all of V
    assert time("AllGather", axes(4, 2), V, V5E).bandwidth == \
        sympy.Rational(3, 4) * (V / 2) / ONE_WAY + sympy.Rational(1, 2) * V / ONE_WAY
    v5p_bidi = 2 * 90 * 10**9
    assert time("AllGather", axes(4, 4, 4), V, V5P).bandwidth == V / (3 * v5p_bidi)
    assert time("AllReduce", axes(4, 4, 4), V, V5P).bandwidth == 2 * V / (3 * v5p_bidi)
    assert time("AllGather", axes(4, 4, 4), V, V5P).hops == 6


def test_bandwidth_bound_and_latency_bound():
    small = time("AllGather", axes(4), sympy.Integer(1024), V5E)
    assert small.latency > small.bandwidth and small.total == small.latency   # 3 us beats 17 ns
    big = time("AllGather", axes(4), sympy.Integer(10**9), V5E)
    assert big.bandwidth > big.latency and big.total == big.bandwidth


def test_dcn_and_switch_links():
    dcn = time("AllGather", axes(4, link="dcn"), V, V5E)
    assert dcn.bandwidth == sympy.Rational(3, 4) * V / V5E.figure("dcn.bandwidth_one_way_bytes_per_s_per_chip")
    # one hop through the data-center network, at the chip's DCN hop latency
    assert dcn.latency_known and dcn.hops == 1 and dcn.latency == V5E.figure("dcn.hop_latency_s")
    nvlink = time("AllGather", axes(8), V, H100)
    assert nvlink.bandwidth == sympy.Rational(7, 8) * V / 450_000_000_000 and nvlink.hops == 1
    assert nvlink.latency == H100.figure("interconnect.hop_latency_s")


def test_ici_override_is_one_way_per_link():
    a = analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e", ici_bw=5e10)
    assert a.t_network == 2 * B * F / 50_000_000_000


# ---- properties ----------------------------------------------------------------------------------

@st.composite
def sharded_matmuls(draw):
    sizes = draw(st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=3))
    names = "XYZ"[:len(sizes)]
    pool = list(names) + [None] * 3
    split = {d: draw(st.sampled_from(pool)) for d in "BDF"}
    left_d = split["D"] if draw(st.booleans()) else None
    right_d = split["D"] if draw(st.booleans()) else draw(st.sampled_from(pool))
    out_f = split["F"] if draw(st.booleans()) else None
    sub = lambda a: f"_{a}" if a else ""
    mesh = ", ".join(f"{n}={s}" for n, s in zip(names, sizes))
    spec = (f"mesh {mesh}; bf16[B{sub(split['B'])}, D{sub(left_d)}] @ "
            f"bf16[D{sub(right_d)}, F{sub(split['F'])}] -> bf16[B{sub(split['B'])}, F{sub(out_f)}]")
    return spec, dict(zip(names, sizes))


@settings(max_examples=150, deadline=None)
@given(sharded_matmuls(), st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))
def test_properties_of_random_layouts(case, b, d, f):
    """Total FLOPs, replication, HBM bytes and rendering over random 2-D layouts."""
    spec, mesh = case
    try:
        a = analyze(spec, chip="v5e")
    except SpecError as err:  # an invalid layout is said plainly, with a place
        assert err.column is not None
        event("refused")
        return
    event("analysed")
    unsharded = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]")
    # the total over the mesh is the unsharded count, whatever the layout
    assert sympy.expand(a.flops_total - unsharded.flops) == 0
    # no chip does less than its share of the work; where every axis splits the result or
    # the contraction on both sides, as written, no chip repeats another's work
    assert sympy.expand(a.flops * a.mesh.chips - a.flops_total).xreplace({B: 3, D: 3, F: 3}) >= 0
    written = set(spec.split("-> ")[1].replace("]", "").split("_")[1:]) | \
        ({spec.split("D_")[1][0]} if spec.count("D_") == 2 and spec.split("D_")[1][0] == spec.split("D_")[2][0] else set())
    if written >= set(mesh):
        assert a.replication == 1, spec
    # sharding never increases the HBM bytes each chip moves
    sizes = {B: 4 * 3 * b, D: 4 * 3 * d, F: 4 * 3 * f}
    assert a.bytes.xreplace(sizes) <= unsharded.bytes.xreplace(sizes)
    # everything renders
    assert "T_math" in repr(a)


def test_allreduce_costs_a_reducescatter_plus_an_allgather_end_to_end():
    """The AllReduce symroof inserts costs what the same reduction written as a
    ReduceScatter then an AllGather costs, on rings, lines and mixed links."""
    for mesh in ("X=16", "X=4", "X=16, Y=4", "X=4, Y=2@dcn"):
        split = "D_{XY}" if "Y" in mesh else "D_X"
        inserted = analyze(f"mesh {mesh}; bf16[B, {split}] @ bf16[{split}, F] -> bf16[B, F]", chip="v5e")
        axes = "{X,Y}" if "Y" in mesh else "X"
        unreduced = "{U_{X,Y}}" if "Y" in mesh else "{U_X}"
        written = analyze(f"mesh {mesh}\nReduceScatter_{{{axes[1:-1] if '{' in axes else axes},F}} "
                          f"bf16[B, F] {unreduced} -> bf16[B, F_{axes}]\n"
                          f"AllGather_{axes} bf16[B, F_{axes}] -> bf16[B, F]", chip="v5e")
        assert sympy.simplify(inserted.t_network - written.t_network) == 0, mesh


@st.composite
def batched_layouts(draw):
    """3-D batched contractions with splits anywhere, and the dims of each operand in any order."""
    left = draw(st.permutations(["L", "B", "D"]))
    right = draw(st.permutations(["L", "D", "F"]))
    axis = lambda: draw(st.sampled_from(["", "_X", "_Y"]))
    splits = {("l", d): axis() for d in left} | {("r", d): axis() for d in right}
    for side, dims in (("l", left), ("r", right)):  # one axis splits at most one dim of a tensor
        seen = set()
        for d in dims:
            if splits[(side, d)] in seen:
                splits[(side, d)] = ""
            seen.add(splits[(side, d)] or d)
    out = ["L", "B", "F"]
    text = lambda side, dims: ", ".join(d + splits[(side, d)] for d in dims)
    return f"mesh X=2, Y=4; bf16[{text('l', left)}] *_D bf16[{text('r', right)}] -> bf16[{', '.join(out)}]"


def _plain(spec):
    """The same spec with every split removed, dims in one order: the unsharded work."""
    return "bf16[L, B, D] *_D bf16[L, D, F] -> bf16[L, B, F]"


@settings(max_examples=150, deadline=None)
@given(batched_layouts())
def test_every_layout_in_a_plan_is_valid_and_order_does_not_matter(spec):
    try:
        a = analyze(spec, chip="v5e")
    except SpecError as err:
        assert err.column is not None
        event("refused")
        return
    event("analysed")
    for plan in a.cost.plans:
        for item in plan.items:
            layouts = (item.before, item.after) if hasattr(item, "before") else (*item.inputs, item.output)
            for layout in layouts:
                used = [x for axes in layout.axes for x in axes] + list(layout.unreduced)
                assert len(used) == len(set(used)), (spec, str(item))
    # the same layout with each operand's dims in canonical order costs the same
    canonical = analyze(_canonical(spec), chip="v5e")
    for key in ("flops", "bytes", "t_network"):
        assert sympy.simplify(getattr(a, key) - getattr(canonical, key)) == 0, (spec, key)
    assert sympy.expand(a.flops_total - analyze(_plain(spec)).flops) == 0


def _canonical(spec):
    head, body = spec.split("; ", 1)
    left, rest = body.split(" *_D ")
    right, out = rest.split(" -> ")
    def order(tensor, names):
        dims = tensor[len("bf16["):-1].split(", ")
        return "bf16[" + ", ".join(sorted(dims, key=lambda d: names.index(d[0]))) + "]"
    return f"{head}; {order(left, 'LBD')} *_D {order(right, 'LDF')} -> {out}"


def test_the_reviewed_batch_case_is_order_independent():
    one = analyze("bf16[L_X, B, D] *_D bf16[L, D_X, F] -> bf16[L_X, B, F]", chip="v5e", mesh="X=4")
    two = analyze("bf16[B, D, L_X] *_D bf16[L, D_X, F] -> bf16[L_X, B, F]", chip="v5e", mesh="X=4")
    assert one.network_bytes == two.network_bytes == 2 * dim_symbol("L") * D * F


def test_a_result_split_where_the_inputs_are_not_is_computed_in_parts():
    a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B_X, F]", chip="v5e", mesh="X=4")
    assert a.flops == 2 * B * D * F / 4 and a.replication == 1 and not a.cost.moves


def test_wraparound_and_domains():
    from symroof.roofline.collectives import link
    assert link(MeshAxis("X", 8), V5P).ring and not link(MeshAxis("X", 6), V5P).ring
    assert link(MeshAxis("X", 16), V5E).ring and not link(MeshAxis("X", 8), V5E).ring
    from symroof import HardwareError
    with pytest.raises(HardwareError, match="span 4096 chips, but TPU v5e's ICI reaches 256"):
        analyze("bf16[B, D_{XY}] -> bf16[B]", chip="v5e", mesh="X=64, Y=64").t_network
    with pytest.raises(HardwareError, match="NVLink reaches 8"):
        analyze("bf16[B, D_X] -> bf16[B]", chip="h100", mesh="X=16").t_network
    assert analyze("bf16[B, D_X] -> bf16[B]", chip="h100", mesh="X=2@dcn").t_network == \
        2 * sympy.Rational(1, 2) * 2 * B / 50_000_000_000  # an AllReduce on the scale-out NIC


def test_mixed_links_cost_the_same_in_either_order():
    xy = analyze("AllGather_{X,Y} bf16[B, D_{XY}] -> bf16[B, D]", chip="v5e", mesh="X=16, Y=4@dcn")
    yx = analyze("AllGather_{Y,X} bf16[B, D_{YX}] -> bf16[B, D]", chip="v5e", mesh="X=16, Y=4@dcn")
    assert xy.t_network == yx.t_network


def test_gpu_topologies():
    mi = time("AllGather", axes(8), V, get_chip("mi300x"))
    assert mi.bandwidth == V / (8 * 64_000_000_000) and mi.hops == 1
    assert time("AllGather", axes(2), V, get_chip("h100-pcie")).bandwidth == V / (2 * 300_000_000_000)
    # --ici-bw is one link: a switch GPU has 18 of them
    assert time("AllGather", axes(8), V, H100, sympy.Integer(25 * 10**9)).bandwidth == \
        sympy.Rational(7, 8) * V / (18 * 25 * 10**9)


def test_unknown_latency_is_said_not_zero():
    # every network in hardware.json has a hop latency (tests/hardware/test_hardware_latency.py); PCIe has none
    a = analyze("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e", mesh="X=2@pcie")
    data = a.to_dict(solve="D")
    assert data["collectives"][0]["t_latency"] is None and data["t_network_latency_known"] is False
    assert data["threshold"]["network"]["latency_floor"] is None
    assert "latency floor unknown" in repr(a)
    mixed = analyze("bf16[B, D_{XY}] @ bf16[D_{XY}, F] -> bf16[B, F]", chip="v5e", mesh="X=16, Y=4@pcie")
    assert "at least" in repr(mixed) and "unknown" in repr(mixed)


def test_bare_figures_on_a_mesh():
    a = analyze("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", mesh="X=2", peak_flops=1.97e14, hbm_bw=8.2e11,
                ici_bw=4.5e10)
    assert a.t_network == 2 * B * F / ONE_WAY
    assert float(a.threshold("D").network.rule) == pytest.approx(8755.556, rel=1e-6)
    bare = analyze("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", mesh="X=2", peak_flops=1.97e14, hbm_bw=8.2e11)
    data = bare.to_dict()
    assert data["collectives"][0]["bytes"] == "2*B*F" and "t_network" not in data
    assert "give --ici-bw" in repr(bare)


def test_invalid_layout_is_reported_even_where_links_are_unknown():
    import io

    from symroof.cli.command import main
    out, err = io.StringIO(), io.StringIO()
    code = main(["analyze", "bf16[B_X, D] @ bf16[D, F_X] -> bf16[B, F]", "--mesh", "X=4@dcn", "--chip", "tpu7x"],
                out=out, err=err)
    assert code == 2 and "X would split both B and F" in err.getvalue()


def test_written_layouts_that_split_and_reduce_over_one_axis_are_refused():
    for spec in ("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B_X, F] {U_X}",
                 "AllReduce_X bf16[I_X, J] {U_X} -> bf16[I_X, J]"):
        with pytest.raises(SpecError, match="an axis either splits a dim or is unreduced"):
            parse("mesh X=2\n" + spec)


def test_sizes_on_split_dims_and_thresholds_in_steps_of_the_split():
    assert parse("mesh X=2; bf16[B, D_X=4096] @ bf16[D_X, F] -> bf16[B, F]").values == (("D", 4096),)
    with pytest.raises(SpecError, match="D = 4096 does not split evenly over X") as info:
        parse("mesh X=3; bf16[B, D=4096] @ bf16[D_X, F] -> bf16[B, F]")
    assert info.value.column == 19
    a = analyze("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e", mesh="X=2")
    from symroof.render.text import table
    shown = table(a, solve="D")
    assert "D > 480.49 (D >= 482, a multiple of 2)" in shown and "(D >= 8756, a multiple of 2)" in shown
    with pytest.raises(SpecError, match="separate mesh axes with ','"):
        parse("mesh X=2 Y=2\nbf16[B] -> bf16[B]")


def test_network_threshold_says_where_the_latency_floor_is_cleared():
    # tiny B and F: the AllReduce is latency-bound, so D must be far past 8755.6
    a = analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e").at(B=8, F=8)
    network = a.threshold("D").network
    assert float(network.exact) == pytest.approx(8755.56, rel=1e-6)
    # T_math = B*D*F / 1.97e14 must reach the floor of 2 hops x 1 us
    assert network.past_latency == sympy.Rational(2, 10**6) * 197 * 10**12 / 64
    assert "latency floor" in network.reason
    assert analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e").threshold("D") \
        .network.past_latency is None                  # with free dims: the bandwidth-bound answer alone
