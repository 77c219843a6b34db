"""Importing shard_map: the mesh, the splits as subscripts, the body's collectives written
out, per-chip counts by hand and against XLA's lowered module; and the primitives that
move data (slices, concatenation, updates).

JAX is optional: without it this file is skipped."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")

import symroof  # noqa: E402
from symroof.errors import SpecError, SymroofWarning  # noqa: E402
from symroof.from_jax.importer import load_function  # noqa: E402

SHARDED = Path(__file__).resolve().parents[1] / "data" / "jax_sharded.py"
B, D, F = (symroof.dim_symbol(n) for n in "BDF")


def load(name: str):
    return load_function(f"{SHARDED}:{name}")


def statements(imported) -> list[str]:
    return [s.text for s in imported.converted.statements]


def test_a_sharded_matmul_is_written_with_its_mesh_splits_and_psum():
    im = symroof.from_jax(load("matmul"), "x=bf16[B, D]; w=bf16[D, F]")
    assert "mesh X=2, Y=4" in im.text
    # JAX needs each split dim to divide: it was traced as multiples and read back in B, D
    assert statements(im) == ["bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F] {U_Y}",
                              "AllReduce_Y bf16[B_X, F] {U_Y} -> bf16[B_X, F]"]
    m = im.model("tpu-v5p")
    a = m.analysis
    # by hand: each chip multiplies its [B/2, D/4] by [D/4, F]
    assert a.flops == 2 * (B / 2) * (D / 4) * F
    assert a.bytes == 2 * (B * D / 8 + D * F / 4 + B * F / 2)
    # the psum: an AllReduce over Y of the [B/2, F] bf16 partial sums on a chip
    assert a.t_network.free_symbols == {B, F}


def test_megatron_mlp_per_chip_counts_by_hand_and_against_xla():
    im = symroof.from_jax(load("megatron_mlp")(), "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]")
    texts = statements(im)
    assert texts[0] == "bf16[B_X, D] *_D bf16[D, F_Y] -> bf16[B_X, F_Y]"  # column-parallel: no partial sums
    assert "bf16[B_X, F_Y] *_F bf16[F_Y, D] -> bf16[B_X, D] {U_Y}" in texts  # row-parallel
    assert texts[-1] == "AllReduce_Y fp32[B_X, D] {U_Y} -> fp32[B_X, D]"
    a = im.analysis
    matmuls = 2 * (2 * (B / 2) * D * (F / 4))
    assert (a.flops - matmuls).free_symbols <= {B, F}  # the rest is gelu's elementwise work on [B/2, F/4]
    for sizes in ({"B": 16, "D": 32, "F": 64}, {"B": 6, "D": 12, "F": 8}):
        check = im.xla(sizes)
        # per chip, once XLA's conventions are counted its way: converts, the AllReduce's
        # combine (1 FLOP an element), and the shard_map's two boundary calls (-1 each)
        assert check["flops_agree"], check
        assert check["transcendentals_agree"] and check["bytes_within_lowered"], check
        whys = " ".join(check["explained_flops"])
        assert "AllReduce" in whys and "shard_map" in whys


@settings(max_examples=8, deadline=None)
@given(mx=st.sampled_from([1, 2, 4]), my=st.sampled_from([1, 2, 4]), b=st.integers(1, 4), d=st.integers(1, 4),
       f=st.integers(1, 4))
def test_per_chip_flops_times_chips_is_the_unsharded_count(mx, my, b, d, f):
    from jax.sharding import AbstractMesh
    sharded = symroof.from_jax(load("megatron_mlp")(AbstractMesh((mx, my), ("x", "y"))),
                               "x=fp32[B, D]; w_up=fp32[D, F]; w_down=fp32[F, D]")
    plain = symroof.from_jax(lambda x, w_up, w_down: jax.nn.gelu(x @ w_up) @ w_down,
                             "x=fp32[B, D]; w_up=fp32[D, F]; w_down=fp32[F, D]")
    sizes = {"B": b * mx, "D": d, "F": f * my}
    per_chip = sharded.model(None, sizes).analysis.flops
    assert per_chip * mx * my == plain.model(None, sizes).analysis.flops


def test_the_collectives_each_written_out():
    im = symroof.from_jax(load("collectives"), "x=bf16[B, D]; w=bf16[D, F]")
    assert statements(im)[1:] == [
        "ReduceScatter_{Y,F} bf16[B_X, F] {U_Y} -> bf16[B_X, F_Y]",  # psum_scatter: F split over y
        "AllToAll_{X,F} bf16[B_X, F_Y] -> bf16[B, F_{YX}]",          # B gathered, F split over x too
        "AllGather_X bf16[B, F_{YX}] -> bf16[B, F_Y]"]               # and gathered back
    check = im.xla({"B": 16, "D": 32, "F": 64})
    assert check["flops_agree"], check
    a = im.model("tpu-v5p", {"B": 16, "D": 32, "F": 64}).analysis
    assert a.t_network > 0


def test_what_has_no_form_is_said():
    assert "Permute_X fp32[B_X, D] -> fp32[B_X, D]" in statements(symroof.from_jax(load("permuted"), "x=fp32[B, D]"))
    with pytest.warns(SymroofWarning, match="not costed: ppermute x 1"):
        symroof.from_jax(load("permuted_far"), "x=fp32[B, D]")
    with pytest.warns(SymroofWarning, match="outside shard_map are costed whole on every chip"):
        im = symroof.from_jax(load("after"), "x=bf16[B, D]; w=bf16[D, F]")
    assert statements(im)[-1] == "tanh(bf16[B, F]) -> bf16[B, F]"
    with pytest.raises(SpecError, match="local size B/2 is both B_A and B_X"):
        symroof.from_jax(load("ambiguous"), "x=fp32[B, D]; y=fp32[B, D]")
    with pytest.raises(SpecError, match="splits a dim given as a number"):
        symroof.from_jax(load("matmul"), "x=bf16[16, D]; w=bf16[D, F]")


def test_slices_concatenation_and_updates():
    im = symroof.from_jax(load("data_moves"), "x=fp32[B, 8]; y=fp32[B, K]; u=fp32[B, 2]")
    assert not im.warnings
    texts = statements(im)
    assert texts[:3] == ["copy(fp32[B, 4]) -> fp32[B, 4]", "copy(fp32[B, K]) -> fp32[B, K]",  # concatenate
                         "copy(fp32[B, 2]) -> fp32[B, 2]"]                                    # the update only
    # the slices are windows read in place: the product of split's halves reads [B, 4] twice
    assert "fp32[B, 4] * fp32[B, 4] -> fp32[B, 4]" in texts
    for sizes in ({"B": 16, "K": 3}, {"B": 5, "K": 7}):
        check = im.xla(sizes)
        assert check["flops_agree"] and check["bytes_within_lowered"], check


def test_xla_counts_in_float32_and_the_cross_check_says_so():
    im = symroof.from_jax(lambda x: x * 2, "x=fp32[N]")
    check = im.xla({"N": 2**24 + 1})
    # XLA's figure is 2^24: the count rounded to float32; symroof's is exact
    assert check["xla_lowered"]["flops"] == 2**24 and check["symroof"]["flops"] == 2**24 + 1
    assert check["flops_agree"] and check["flops_unexplained"] == -1 and check["xla_resolution"] >= 2
    small = im.xla({"N": 1000})  # below 2^24 every count is exact, and must agree exactly
    assert small["flops_agree"] and small["flops_unexplained"] == 0 and small["xla_resolution"] == 0
