"""Permute, the neighbour exchange (`Permute_X x -> y`: ppermute's ring shift): its time on
each kind of link by hand from the chip's figures, its refusals, and from-jax's reading of
ppermute (neighbours only) against XLA's lowered module, ring attention's step among them."""

from __future__ import annotations

import json
import warnings

import pytest
import sympy

from symroof import SpecError, analyze, get_chip
from symroof.cli.command import main
from symroof.ir import dim_symbol

I, J, X = (dim_symbol(n) for n in ("I", "J", "X"))
V5E, V5P, H100 = get_chip("tpu-v5e"), get_chip("tpu-v5p"), get_chip("h100")


def one(spec, chip):
    ((move, t),) = analyze(spec, chip=chip).collectives
    return move, t


def test_on_a_ring_each_chip_sends_its_block_over_one_link_one_way_in_one_hop():
    one_way, hop = V5E.figure("interconnect.link_bandwidth_one_way_bytes_per_s"), \
        V5E.figure("interconnect.hop_latency_s")
    move, t = one("mesh X=16\nPermute_X bf16[I_X, J] -> bf16[I_X, J]", V5E)
    V = 2 * I * J / 16  # each chip's block
    assert move.bytes == V and t.bandwidth == V / one_way and t.hops == 1 and t.latency == hop
    assert "ring with wraparound" in t.links


def test_on_a_line_the_last_block_crosses_back_over_every_link():
    one_way, hop = V5E.figure("interconnect.link_bandwidth_one_way_bytes_per_s"), \
        V5E.figure("interconnect.hop_latency_s")
    _, t = one("mesh X=4\nPermute_X bf16[I_X, J] -> bf16[I_X, J]", V5E)
    assert t.bandwidth == 2 * I * J / 4 / one_way  # both directions of each link at once: no more time
    assert t.hops == 3 and t.latency == 3 * hop and "cyclic shift across the line" in t.links
    _, t = one("mesh X@line\nPermute_X bf16[I, J] -> bf16[I, J]", V5E)
    assert t.bandwidth == 2 * I * J / one_way and t.hops == X - 1


def test_through_a_switch_and_across_dcn_one_hop_at_the_egress():
    egress = H100.figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
    _, t = one("mesh X=8\nPermute_X bf16[I, J] -> bf16[I, J]", H100)
    assert t.bandwidth == 2 * I * J / egress and t.hops == 1
    dcn = V5P.figure("dcn.bandwidth_one_way_bytes_per_s_per_chip")
    _, t = one("mesh X=4@dcn\nPermute_X bf16[I_X, J] -> bf16[I_X, J]", V5P)
    assert t.bandwidth == 2 * I * J / 4 / dcn and t.hops == 1


def test_a_permute_keeps_the_layout_and_runs_along_one_axis():
    with pytest.raises(SpecError, match="keeps its layout"):
        analyze("mesh X=4\nPermute_X bf16[I_X, J] -> bf16[I, J]", chip=V5E)
    with pytest.raises(SpecError, match="along one mesh axis"):
        analyze("mesh X=4, Y=4\nPermute_{X,Y} bf16[I_X, J] -> bf16[I_X, J]", chip=V5E)
    a = analyze("mesh X=4\nPermute_X fp32[I, J] {U_X} -> fp32[I, J] {U_X}", chip=V5E)  # partial sums travel too
    assert a.collectives[0][0].bytes == 4 * I * J


def test_json_and_the_text_report_name_it(capsys):
    assert main(["analyze", "mesh X=16\nPermute_X bf16[I_X, J] -> bf16[I_X, J]", "--chip", "tpu-v5e",
                 "--set", "I=4096,J=4096", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    text = json.dumps(out)
    assert "Permute_X" in text
    t = 2 * 4096 * 4096 / 16 / V5E.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
    assert out["t_network"] == pytest.approx(float(t))


# ---- from JAX ---------------------------------------------------------------------------

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402
from jax.sharding import AbstractMesh  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import symroof  # noqa: E402
from symroof.errors import SymroofWarning  # noqa: E402

MESH = AbstractMesh((2, 4), ("x", "y"))
T, H = dim_symbol("T"), dim_symbol("H")


def on_mesh(body, specs, out):
    """`body` under shard_map, as a function of x (one spec) or of q, k, v (three): from_jax
    reads the parameters' names."""
    run = jax.shard_map(body, mesh=MESH, in_specs=specs, out_specs=out, check_vma=False)
    if isinstance(specs, tuple):
        return lambda q, k, v: run(q, k, v)
    return lambda x: run(x)


def statements(im) -> list[str]:
    return [s.text for s in im.converted.statements]


@pytest.mark.parametrize("perm", [
    [(i, (i + 1) % 4) for i in range(4)],  # a ring shift
    [(i, (i - 1) % 4) for i in range(4)],  # the other way
    [(i, i + 1) for i in range(3)],  # a pipeline's send to the next stage
    [(0, 1), (1, 0), (2, 3), (3, 2)],  # pairwise swaps
])
def test_a_ppermute_to_neighbours_is_a_permute(perm):
    im = symroof.from_jax(on_mesh(lambda x: lax.ppermute(x * 2, "y", perm), P("y", None), P("y", None)),
                          "x=fp32[T, H]")
    assert statements(im)[-1] == "Permute_Y fp32[T_Y, H] -> fp32[T_Y, H]"
    for sizes in ({"T": 16, "H": 8}, {"T": 8, "H": 3}):
        check = im.xla(sizes)
        assert check["flops_agree"] and check["bytes_within_lowered"] and not check["not_costed"], check


def test_a_ppermute_farther_than_a_neighbour_is_named_not_costed():
    with pytest.warns(SymroofWarning, match="other than to a neighbour"):
        im = symroof.from_jax(on_mesh(lambda x: lax.ppermute(x, "y", [(i, (i + 2) % 4) for i in range(4)]) * 2,
                                      P("y", None), P("y", None)), "x=fp32[T, H]")
    assert dict(im.converted.skipped) == {"ppermute": 1}


def ring_attention(q, k, v):
    """One chip's queries against every chip's keys and values, passed round the ring: the
    scores of a block, a softmax-free accumulation, and the keys and values sent on."""
    def step(i, carry):
        acc, k, v = carry
        acc = acc + (q @ k.T) @ v
        return acc, lax.ppermute(k, "y", RING), lax.ppermute(v, "y", RING)
    return lax.fori_loop(0, 4, step, (jnp.zeros_like(q), k, v))[0]


RING = [(i, (i + 1) % 4) for i in range(4)]


def test_ring_attention_costs_a_chips_blocks_and_its_ring_shifts():
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = symroof.from_jax(on_mesh(ring_attention, (P("y", None),) * 3, P("y", None)),
                              "q=bf16[T, H]; k=bf16[T, H]; v=bf16[T, H]")
    texts = statements(im)
    # the block of scores pairs the chip's queries with the keys it holds now: [T/4, T/4]
    # (the keys and values a chip holds, T2Y, a local dim: the queries are split over Y already)
    assert texts == ["bf16[T_Y, H] *_H bf16[T2Y, H] -> bf16[T_Y, T2Y]",
                     "bf16[T_Y, T2Y] *_T2Y bf16[T2Y, H] -> bf16[T_Y, H]",  # summed on chip: no partial sums
                     "bf16[T_Y, H] + bf16[T_Y, H] -> bf16[T_Y, H]",  # the accumulator, an array after trip one
                     "Permute_Y bf16[T2Y, H] -> bf16[T2Y, H]", "Permute_Y bf16[T2Y, H] -> bf16[T2Y, H]"]
    assert "T2Y = T2/4" in im.text
    a = im.model("tpu-v5p").analysis
    block = 2 * (T / 4) * (T / 4) * H  # one matmul of a block
    assert sympy.simplify(a.flops - 4 * (2 * block + T / 4 * H)) == 0  # 4 trips: two matmuls and the add
    moves = [c for c in a.collectives]
    assert len(moves) == 2 and all(m.move.count == 4 and m.move.bytes == 2 * T / 4 * H for m in moves)
    one_way = V5P.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
    assert sympy.simplify(a.t_network - 8 * (2 * T / 4 * H) / one_way) == 0
    for sizes in ({"T": 16, "H": 8}, {"T": 32, "H": 4}):
        check = im.xla(sizes)  # XLA counts the loop's body once
        assert check["flops_agree"] and check["bytes_within_lowered"] and not check["not_costed"], check
