"""Meshes with axes left symbolic (`mesh X, Y=4`) and bare arrays (`bf16[I_XY, J]`): the
formulas against hand derivations from the chip's figures, and numbers substituted into
them against what the numeric mesh gives."""

import json
import math

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symroof import HardwareError, SpecError, analyze, get_chip, parse
from symroof.cli.command import main
from symroof.ir import dim_symbol

B, D, F, I, J, X, Y = (dim_symbol(n) for n in ("B", "D", "F", "I", "J", "X", "Y"))
V5E, V5P, H100 = get_chip("tpu-v5e"), get_chip("tpu-v5p"), get_chip("h100")


def figure(chip, name):
    return chip.figure(f"interconnect.{name}")


def network(spec, chip=V5E):
    """(bandwidth-bound time, hops, latency floor) of the spec's one collective."""
    a = analyze(spec, chip=chip)
    ((_, t),) = a.collectives
    return sympy.simplify(t.bandwidth), t.hops, t.latency


# ---- collectives over a symbolic axis, by hand ------------------------------------------------

def test_all_gather_on_a_ring_is_the_array_over_both_directions_whatever_x_is():
    bidi, hop = figure(V5E, "link_bandwidth_bidi_bytes_per_s"), figure(V5E, "hop_latency_s")
    bandwidth, hops, latency = network("mesh X; AllGather_X bf16[I_X, J] -> bf16[I, J]")
    V = 2 * I * J  # bytes each chip holds after the gather
    assert bandwidth == V / bidi and X not in bandwidth.free_symbols
    assert hops == X / 2 and latency == X / 2 * hop


def test_all_gather_without_wraparound_goes_one_way_on_x_minus_one_hops():
    one_way, hop = figure(V5E, "link_bandwidth_one_way_bytes_per_s"), figure(V5E, "hop_latency_s")
    bandwidth, hops, latency = network("mesh X@line; AllGather_X bf16[I_X, J] -> bf16[I, J]")
    assert sympy.simplify(bandwidth - (X - 1) / X * 2 * I * J / one_way) == 0
    assert hops == X - 1 and latency == (X - 1) * hop


def test_reduce_scatter_costs_what_the_gather_of_its_larger_side_costs():
    bidi = figure(V5E, "link_bandwidth_bidi_bytes_per_s")
    bandwidth, hops, _ = network("mesh X; ReduceScatter_{X,J} bf16[I, J] {U_X} -> bf16[I, J_X]")
    assert bandwidth == 2 * I * J / bidi and hops == X / 2


def test_all_reduce_is_twice_a_gather_both_ways_and_on_a_line():
    bidi, one_way = figure(V5E, "link_bandwidth_bidi_bytes_per_s"), figure(V5E, "link_bandwidth_one_way_bytes_per_s")
    ring = network("mesh X; AllReduce_X bf16[I, J] {U_X} -> bf16[I, J]")
    line = network("mesh X@line; AllReduce_X bf16[I, J] {U_X} -> bf16[I, J]")
    assert ring[0] == 2 * 2 * I * J / bidi and ring[1] == X
    assert sympy.simplify(line[0] - 2 * (X - 1) / X * 2 * I * J / one_way) == 0 and line[1] == 2 * (X - 1)


def test_all_to_all_a_quarter_of_the_array_across_the_middle():
    bidi, one_way = figure(V5E, "link_bandwidth_bidi_bytes_per_s"), figure(V5E, "link_bandwidth_one_way_bytes_per_s")
    V = 2 * I * J / X  # each chip's block, before and after
    ring, _, _ = network("mesh X; AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]")
    assert sympy.simplify(ring - X * V / (4 * bidi)) == 0
    a = analyze("mesh X@line; AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]", chip=V5E)
    ((_, t),) = a.collectives
    # the middle link carries floor(X/2) * ceil(X/2) blocks one way: X^2/4 for an even X, the
    # case taken and said; an odd size is refused
    assert sympy.simplify(t.bandwidth - X * X / 4 * V / (X * one_way)) == 0
    assert "taken over an even number of chips" in t.links
    with pytest.raises(SpecError, match="odd number of chips"):
        a.at(X=5)
    exact = analyze("mesh X=5@ici; AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]", chip=V5E).collectives[0][1]
    assert sympy.simplify(exact.bandwidth - 2 * 3 * (2 * I * J / 5) / (5 * one_way)) == 0


def test_an_nvlink_axis_is_a_switch_at_any_size():
    egress = H100.figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
    bandwidth, hops, _ = network("mesh X; AllGather_X bf16[I_X, J] -> bf16[I, J]", H100)
    assert sympy.simplify(bandwidth - (X - 1) / X * 2 * I * J / egress) == 0 and hops == 1


def test_the_case_taken_is_said_where_the_links_are_described():
    a = analyze("mesh X; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip=V5E)
    assert "assumed: needs X a multiple of 16" in a.collectives[0][1].links
    b = analyze("mesh X@line; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip=V5E)
    assert "written X@line" in b.collectives[0][1].links


# ---- a sharded matmul with a symbolic axis ----------------------------------------------------

def test_sharded_matmul_per_chip_flops_and_network_threshold():
    a = analyze("mesh X; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip=V5E)
    assert a.flops == 2 * B * D * F / X and a.flops_total == 2 * B * D * F and a.replication == 1
    # T_math = 2BDF/(X C) against the AllReduce of 2BF bytes, 2 x 2BF / W_bidi on a ring:
    # compute-bound once D > 2 X C / W_bidi (the book's 8755 at X = 2 on a v5e)
    peak, bidi = V5E.figure("peak_flops_per_s.bf16"), figure(V5E, "link_bandwidth_bidi_bytes_per_s")
    t = a.threshold("D")
    assert t.network is not None and t.network.op == ">"
    for value in (t.network.exact, t.network.rule):  # B and F cancel: exact and rule agree
        assert sympy.simplify(value - 2 * X * peak / bidi) == 0
    assert float(t.network.rule.subs(X, 2)) == pytest.approx(8755.56, abs=0.01)


def test_limit_as_the_axis_grows():
    a = analyze("mesh X; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip=V5E)
    # per chip 2BDF/X FLOPs over 2BD/X + 2DF/X + 2BF bytes: as X grows the result's bytes,
    # which no split shrinks, leave nothing; as B and F grow, the book's D/X
    assert a.limit("X") == 0
    assert a.limit("B", "F") == D / X
    assert a.limit("D") == B * F / (B + F)


# ---- numbers substituted into the formulas give what the numeric mesh gives ------------------

SPECS = [
    "AllGather_X bf16[I_X, J] -> bf16[I, J]",
    "ReduceScatter_{X,J} bf16[I, J] {U_X} -> bf16[I, J_X]",
    "AllReduce_X bf16[I, J] {U_X} -> bf16[I, J]",
    "AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]",
    "Permute_X bf16[I_X, J] -> bf16[I_X, J]",
    "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]",
    "bf16[B_X, D] @ bf16[D, F_Y] -> bf16[B_X, F_Y]",
    "bf16[I_XY, J], int8[B, D_Y, F]",
]
QUANTITIES = ("flops", "flops_total", "bytes", "t_network", "t_network_latency", "network_bytes",
              "bytes_per_chip", "bytes_total", "replication")
# (chip, the case written, sizes in that case on that chip)
CASES = [("v5e", "", [16]), ("v5e", "@line", range(2, 16)), ("v5p", "", [4, 8, 12, 16]), ("v5p", "@line", [2, 3]),
         ("h100", "", range(2, 9)), ("v5e", "@dcn", [2, 4, 8, 16, 32, 64]),
         # no chip decides: the case written, a ring taken even (its formulas' X/2 hops)
         ("symbolic", "@ring", [2, 4, 6, 8]), ("symbolic", "@line", range(2, 9)), ("symbolic", "", range(2, 9))]


def _y(chip, x):
    """The second axis beside X: 2, but 1 where the H100's NVLink node (8) holds no more."""
    return 2 if chip != "h100" or x <= 4 else 1


# a dim's size, a multiple of every X x Y drawn (a dim split over both, I_XY, splits evenly
# on each chip: X=64, Y=2 is 128 = 2^7 chips), drawn as 1 or 2 of that
UNIT = math.lcm(*(x * _y(chip, x) for chip, _, xs in CASES for x in xs))


@settings(max_examples=60, deadline=None)
@given(spec=st.sampled_from(SPECS), case=st.sampled_from(CASES), data=st.data(),
       sizes=st.fixed_dictionaries({d: st.sampled_from([UNIT, 2 * UNIT]) for d in "BDFIJ"}))
def test_substituting_sizes_gives_what_the_numeric_mesh_gives(spec, case, data, sizes):
    chip, written, choices = case
    if spec.startswith("AllToAll") and (written == "@line" or chip == "symbolic"):
        # the even case its formula takes: a line, and a symbolic chip's axis with no case
        # written, which is costed as a line too (an odd X is refused there, by design)
        choices = [c for c in choices if c % 2 == 0]
    x = data.draw(st.sampled_from(list(choices)), label="X")
    y = _y(chip, x)
    symbolic = analyze(f"mesh X{written}, Y={y}\n{spec}", chip=chip)
    numeric = analyze(f"mesh X={x}{written}, Y={y}\n{spec}", chip=chip)  # the case written, at a size
    used = {d: v for d, v in sizes.items() if d in symbolic.dims}
    at, expected = symbolic.at(X=x, **used), numeric.at(**used)
    for name in QUANTITIES:
        assert sympy.simplify(getattr(at, name) - getattr(expected, name)) == 0, name


def test_every_case_drawn_splits_every_dim_evenly():
    # the property above draws only valid cases: each dim divides over every X x Y drawn
    for chip, _, xs in CASES:
        for x in xs:
            assert UNIT % (x * _y(chip, x)) == 0, (chip, x)
    assert UNIT % (64 * 2) == 0  # the draw that once failed: X=64@dcn beside Y=2


# ---- a ring or a line written where no chip decides, and where one does (issue 26, item 2) --------

W_ICI = sympy.Symbol("W_ici", positive=True)


def _in_w(e):
    """A symbolic chip's figures as the symbols written here (W_ici)."""
    return e.xreplace({s: W_ICI for s in e.free_symbols if str(s) == "W_ici"})


@pytest.mark.parametrize("mesh, n", [("X@ring", X), ("X=8@ring", sympy.Integer(8))])
def test_a_ring_on_a_symbolic_chip_is_costed_as_a_ring(mesh, n):
    # a bidirectional ring: the gathered array V = 2IJ over both directions of a link,
    # W_bidi = 2 W_ici, X/2 hops; the line it was costed as: (X - 1)/X V / W_ici, X - 1 hops
    a = analyze(f"mesh {mesh}; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip="symbolic")
    ((_, t),) = a.collectives
    assert sympy.simplify(_in_w(t.bandwidth) - 2 * I * J / (2 * W_ICI)) == 0
    assert t.hops == n / 2 and f"written {mesh}" in t.links and "ring with wraparound" in t.links
    # an AllReduce: a ReduceScatter and an AllGather, each V / W_bidi and X/2 hops
    r = analyze(f"mesh {mesh}; AllReduce_X bf16[I, J] {{U_X}} -> bf16[I, J]", chip="symbolic")
    ((_, t),) = r.collectives
    assert sympy.simplify(_in_w(t.bandwidth) - 2 * 2 * I * J / (2 * W_ICI)) == 0 and t.hops == n


@pytest.mark.parametrize("mesh, n", [("X@line", X), ("X=8@line", sympy.Integer(8)), ("X", X),
                                     ("X=8", sympy.Integer(8))])
def test_a_line_on_a_symbolic_chip_is_costed_as_a_line(mesh, n):
    a = analyze(f"mesh {mesh}; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip="symbolic")
    ((_, t),) = a.collectives
    assert sympy.simplify(_in_w(t.bandwidth) - (n - 1) / n * 2 * I * J / W_ICI) == 0 and t.hops == n - 1


@pytest.mark.parametrize("mesh, ring", [("X@ring", True), ("X=6@ring", True), ("X@line", False), ("X=6", False)])
def test_ici_bw_alone_costs_the_case_written(mesh, ring):
    w = 1e11  # one way per link; a ring uses both directions
    a = analyze(f"mesh {mesh}; AllGather_X bf16[I_X, J] -> bf16[I, J]", ici_bw=w)
    ((_, t),) = a.collectives
    n = X if "=" not in mesh else sympy.Integer(6)
    V = 2 * I * J
    want = V / (2 * sympy.Float(w)) if ring else (n - 1) / n * V / sympy.Float(w)
    assert sympy.simplify(t.bandwidth - want) == 0 and t.hops == (n / 2 if ring else n - 1)


def test_an_all_to_all_on_a_numeric_ring_where_no_chip_decides():
    # X=5@ring: floor(5/2) ceil(5/2) = 6 of each chip's 5 pieces... of the array's 25 blocks of
    # V/5, 6 cross the middle each way over 2 links: 6/5 V / W_bidi, V = 2IJ/5
    a = analyze("mesh X=5@ring; AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]", chip="symbolic")
    ((_, t),) = a.collectives
    assert sympy.simplify(_in_w(t.bandwidth) - sympy.Rational(6, 5) * (2 * I * J / 5) / (2 * W_ICI)) == 0
    assert t.hops == 2
    # over an axis without a size, the ring's formulas take X even: an odd size is refused
    with pytest.raises(SpecError, match="X@ring take X even"):
        analyze("mesh X@ring; AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]", chip="symbolic").at(X=5)


def test_a_ring_with_a_size_on_a_torus_is_the_chips_or_refused():
    bidi = figure(V5P, "link_bandwidth_bidi_bytes_per_s")
    written = analyze("mesh X=8@ring; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip=V5P)
    ((_, t),) = written.collectives
    assert t.bandwidth == 2 * I * J / bidi and t.hops == 4  # a v5p axis of 8 closes (a multiple of 4)
    refused = [("mesh X=6@ring", V5P, "an axis of 6 does not close into a ring"),
               ("mesh X=8@line", V5P, "an axis of 8 closes into a ring"),
               ("mesh X=8@ring", V5E, "an axis of 8 does not close into a ring"),
               ("mesh X=64@line", V5E, r"spans 2 of TPU v5e's physical axes \(16 x 4\)"),
               ("mesh X=8@ring", H100, "NVLink is a switch, not a torus"),
               ("mesh X@ring", H100, "NVLink is a switch, not a torus")]
    for mesh, chip, message in refused:
        a = analyze(f"{mesh}; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip=chip)
        with pytest.raises(HardwareError, match=message):
            a.collectives


def test_the_cli_says_the_ring_written_on_a_symbolic_chip():
    out, _ = _run(["analyze", "AllGather_X bf16[I_X, J] -> bf16[I, J]", "--mesh", "X@ring", "--chip", "symbolic"])
    assert "X: ICI (ring with wraparound; written X@ring): I*J/W_ici s (X/2 hops" in out
    out, err = _run(["analyze", "AllGather_X bf16[I_X, J] -> bf16[I, J]", "--mesh", "X=6@ring", "--chip", "v5p"], 2)
    assert err.count("\n") == 1 and "X=6@ring: on TPU v5p an axis of 6 does not close into a ring" in err


def test_a_size_outside_the_case_taken_is_refused_not_costed():
    a = analyze("mesh X; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip=V5E)
    with pytest.raises(SpecError, match="does not close into a ring.*X@line"):
        a.at(X=4)
    with pytest.raises(SpecError, match="spans 2 of TPU v5e's physical axes"):
        a.at(X=32)
    line = analyze("mesh X@line; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip=V5E)
    with pytest.raises(SpecError, match="closes into a ring.*X@ring"):
        line.at(X=16)
    # with no collective over X, its links play no part: any size is taken
    assert analyze("mesh X; bf16[I_X, J]", chip=V5E).at(X=4, I=8, J=8).bytes_per_chip == 32


@pytest.mark.parametrize("spec, message", [
    ("mesh X; bf16[X, I_X]", "X is the mesh axis X's size"),
    ("mesh X@rung; bf16[I_X]", "unknown link 'rung'; did you mean 'ring'"),
])
def test_refusals(spec, message):
    with pytest.raises(SpecError, match=message):
        parse(spec)


def test_a_model_needs_sizes_for_its_mesh():
    from symroof.models.strategies import parse_strategy
    with pytest.raises(SpecError, match="needs a size for every mesh axis; X has none"):
        parse_strategy("tp=X", parse("mesh X; bf16[I_X]").mesh)


# ---- bare arrays --------------------------------------------------------------------------------

def test_a_bare_array_on_a_partly_symbolic_mesh():
    a = analyze("mesh X, Y=4; bf16[I_XY, J]", chip=V5E)
    (s,) = a.arrays
    assert s.local_shape == (I / (4 * X), J)
    assert a.bytes_per_chip == 2 * I * J / (4 * X) and a.bytes_total == 2 * I * J and a.replication == 1
    assert a.flops == 0 and a.bytes == 0  # stored, not moved


def test_arrays_sum_over_a_line_and_over_lines_with_their_replication():
    a = analyze("mesh X=2, Y=4; bf16[I_XY, J], int8[B, D_X]\nfp32[F]", chip=V5E)
    per_chip = 2 * I * J / 8 + B * D / 2 + 4 * F
    assert a.bytes_per_chip == per_chip and a.bytes_total == 8 * per_chip
    assert [s.replication for s in a.arrays] == [1, 4, 8]
    one = analyze("int4[B, D]")
    assert one.bytes_per_chip == one.bytes_total == B * D / 2  # one chip: all it stores


def test_arrays_in_json_text_and_latex():
    out, err = _run(["analyze", "bf16[I_XY, J]", "--mesh", "X,Y=4", "--chip", "v5e", "--json"])
    got = json.loads(out)
    assert got["mesh"]["X"]["size"] is None and got["chips"] == "4*X"
    (entry,) = got["arrays"]
    assert entry["local_shape"] == ["I/(4*X)", "J"] and entry["replication"] == 1
    assert sympy.sympify(got["bytes_per_chip"], locals={"X": X, "I": I, "J": J}) == I * J / (2 * X)
    text, _ = _run(["analyze", "mesh X=16, Y=16; bf16[I_XY, J]", "--chip", "v5e", "--set", "I=65536,J=8192"])
    assert "on each chip bf16[256, 8192], 4194304 bytes (4.194 MB)" in text
    assert "fits in TPU v5e's 17.18 GB" in text
    tex, _ = _run(["latex", "mesh X, Y=4; bf16[I_XY, J]", "--chip", "v5e"])
    assert r"\frac{I J}{2 |X|}" in tex


def test_check_takes_the_arrays_quantities(tmp_path):
    claims = tmp_path / "c.yaml"
    claims.write_text("- id: shard\n  spec: 'bf16[I_XY, J]'\n  mesh: {X: 4, Y: 4}\n  set: {I: 1024, J: 1024}\n"
                      "  expect: {bytes_per_chip: 131072, bytes_total: 2097152, replication: 1}\n"
                      "- id: symbolic\n  spec: 'mesh X, Y=4; bf16[I_XY, J]'\n"
                      "  expect: {bytes_per_chip: 'I*J/(2*X)', bytes_total: '2*I*J'}\n"
                      "- id: wrong\n  spec: 'bf16[I_X, J]'\n  mesh: {X: 4}\n  expect: {bytes_per_chip: 'I*J'}\n")
    out, _ = _run(["check", str(claims)], code=1)  # the third claim is wrong, and is caught
    assert "3 claims: 2 passed, 1 failed" in out and "FAIL  wrong     bytes_per_chip: got I*J/2" in out


def _run(argv, code=0):
    import io
    out, err = io.StringIO(), io.StringIO()
    assert main(argv, out=out, err=err) == code, err.getvalue()
    return out.getvalue(), err.getvalue()


def test_on_a_symbolic_chip_the_threshold_is_in_its_figures_and_the_axis():
    # no torus: a line of links, the AllReduce 2 (X - 1)/X x 2BF / W_ici against 2BDF/(X C)
    a = analyze("mesh X; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="symbolic")
    C, W = sympy.Symbol("C", positive=True), sympy.Symbol("W_ici", positive=True)
    rule = a.threshold("D").network.rule
    assert sympy.simplify(rule.subs({s: {"C": C, "W_ici": W}.get(str(s), s) for s in rule.free_symbols})
                          - 2 * C * (X - 1) / W) == 0


def test_a_sweep_over_the_axis_stays_in_its_case():
    import numpy
    a = analyze("mesh X; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip=V5E).at(B=4096, D=8192, F=8192)
    with pytest.raises(SpecError, match="at X=2 a TPU v5e axis does not close into a ring"):
        a.evaluate("t_lower", X=numpy.arange(2, 17))
    with pytest.raises(SpecError, match="whole numbers of chips"):
        a.evaluate("t_lower", X=numpy.array([2.5]))
    line = analyze("mesh X@line; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip=V5E).at(B=4096, D=8192, F=8192)
    swept = line.evaluate("t_lower", X=numpy.array([2, 4, 8]))
    assert [float(line.at(X=x).t_lower) for x in (2, 4, 8)] == pytest.approx(list(swept))
