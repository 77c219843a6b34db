"""Importing argmax, argmin and the cumulative ops (cumsum, cumprod, cummax, cummin,
cumlogsumexp): the statements written, counts by hand, XLA's lowered counts (argmax a
reduce of (value, index) pairs, a scan a reduce_window over the whole prefix) with every
difference explained per statement, symbolic dims kept, and what a split dim does.

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import warnings

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import AbstractMesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import symroof  # noqa: E402
from symroof.cli.command import main  # noqa: E402
from symroof.errors import SymroofWarning  # noqa: E402
from symroof.from_jax.scans import ARG_WHY, SCAN_WHY  # noqa: E402

B, T, V = (symroof.dim_symbol(n) for n in "BTV")
MESH = AbstractMesh((2, 4), ("x", "y"))

# word -> the JAX function along the last axis, and XLA's count of one combine: (FLOPs,
# transcendentals). cumlogsumexp's combine is logaddexp: max, subtract, abs, negate, exp,
# log1p, add, and a NaN guard (compare, add, select): 8 FLOPs, 2 transcendentals.
SCANS = {
    "cumsum": (lambda x, reverse=False: lax.cumsum(x, x.ndim - 1, reverse=reverse), 1, 0),
    "cumprod": (lambda x, reverse=False: lax.cumprod(x, x.ndim - 1, reverse=reverse), 1, 0),
    "cummax": (lambda x, reverse=False: lax.cummax(x, x.ndim - 1, reverse=reverse), 1, 0),
    "cummin": (lambda x, reverse=False: lax.cummin(x, x.ndim - 1, reverse=reverse), 1, 0),
    "cumlogsumexp": (lambda x, reverse=False: lax.cumlogsumexp(x, x.ndim - 1, reverse=reverse), 8, 2),
}
ARGS = {"argmax": lambda x: jnp.argmax(x, -1), "argmin": lambda x: jnp.argmin(x, -1)}
# powers of two and odd sizes, T = 2 (one combine per row) among them
SIZES = [{"B": 4, "T": 8}, {"B": 4, "T": 16}, {"B": 3, "T": 7}, {"B": 5, "T": 13}, {"B": 6, "T": 2}]


def statements(imported) -> list[str]:
    return [s.text for s in imported.converted.statements]


def quiet(function, shapes: str):
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)  # nothing left uncosted, nothing said
        return symroof.from_jax(function, shapes)


# -- argmax, argmin ------------------------------------------------------------------------

@pytest.mark.parametrize("word", list(ARGS))
@pytest.mark.parametrize("dtype, size", [("fp32", 4), ("bf16", 2)])
def test_argmax_is_a_reduction_to_indices_and_agrees_with_xla(word, dtype, size):
    im = quiet(ARGS[word], f"x={dtype}[B, V]")
    assert statements(im) == [f"{word}_V {dtype}[B, V] -> int32[B]"]
    a = im.analysis
    # by hand: one compare per term (n leading, n - 1 exact); the input read, the indices written
    assert a.flops == B * V and sympy.expand(a.flops_exact - B * (V - 1)) == 0 and a.transcendentals == 0
    assert a.bytes == size * B * V + 4 * B
    for sizes in ({"B": 4, "V": 8}, {"B": 3, "V": 13}, {"B": 1, "V": 2}):
        b, v = sizes["B"], sizes["V"]
        check = im.xla(sizes)
        # XLA: a reduce of (value, index) pairs, 9 ops per combine, V - 1 combines per row
        assert check["xla_lowered"]["flops"] == 9 * b * (v - 1)
        # and its bytes: an iota [V], broadcast to [B, V], and the reduce's operands, inits and results
        assert check["xla_lowered"]["bytes"] == (size + 8) * b * v + (size + 4) * b + 8 * v + size + 4
        assert check["explained_flops"] == {ARG_WHY: 9 * b * (v - 1) - b * v}
        assert check["flops_agree"] and check["flops_unexplained"] == 0, check
        assert check["transcendentals_agree"] and check["bytes_within_lowered"], check


def test_argmax_over_a_size_one_axis_is_no_statement():
    im = quiet(lambda x: jnp.argmax(x, -1) * 2, "x=fp32[B, 1]")
    assert statements(im) == ["int32[B] * int32[] -> int32[B]"]  # the index, 0, an array of its own
    check = im.xla({"B": 5})
    assert check["flops_agree"] and check["xla_lowered"]["flops"] == 5, check  # XLA: no combine, 5 multiplies


def test_greedy_decoding_agrees_with_xla():
    im = quiet(lambda x, w: jnp.argmax(jax.nn.log_softmax(x @ w), -1), "x=fp32[B, D]; w=fp32[D, V]")
    assert statements(im)[-1] == "argmax_V fp32[B, V] -> int32[B]"
    for sizes in ({"B": 2, "D": 8, "V": 32}, {"B": 3, "D": 5, "V": 11}):
        check = im.xla(sizes)
        assert check["flops_agree"] and check["transcendentals_agree"] and check["bytes_within_lowered"], check


# -- the cumulative ops --------------------------------------------------------------------

@pytest.mark.parametrize("word", list(SCANS))
@pytest.mark.parametrize("reverse", [False, True])
def test_each_scan_is_one_statement_counted_by_hand_and_against_xla(word, reverse):
    function, flops, transcendentals = SCANS[word]
    im = quiet(lambda x: function(x, reverse), "x=fp32[B, T]")
    assert statements(im) == [f"{word}_T fp32[B, T] -> fp32[B, T]"]  # T stays a symbol
    assert im.converted.statements[0].primitive == word + (" (reverse)" if reverse else "")
    a = im.analysis
    # by hand: a sequential scan, one combine per element (T - 1 per row exact); read once, written once
    assert a.flops == flops * B * T and sympy.expand(a.flops_exact - flops * B * (T - 1)) == 0
    assert a.transcendentals == transcendentals * B * T and a.bytes == 8 * B * T
    for sizes in SIZES if not reverse else SIZES[2:4]:
        b, t = sizes["B"], sizes["T"]
        check = im.xla(sizes)
        low = check["xla_lowered"]
        # XLA: a reduce_window of T over the prefix padded by T - 1: T - 1 combines per element
        assert low["flops"] == flops * b * t * (t - 1)
        assert low["transcendentals"] == transcendentals * b * t * (t - 1)
        assert low["bytes"] == 8 * b * t + 4  # the input, the result, and the init value
        assert check["explained_flops"] == {SCAN_WHY: flops * b * t * (t - 2)}
        assert check["explained_transcendentals"] == (
            {SCAN_WHY: transcendentals * b * t * (t - 2)} if transcendentals else {})
        assert check["flops_agree"] and check["flops_unexplained"] == 0, check
        assert check["transcendentals_agree"] and check["transcendentals_unexplained"] == 0, check
        assert check["bytes_within_lowered"], check


def test_a_bf16_scan_is_not_upcast_and_a_bool_one_is_cast_first():
    half = quiet(lambda x: jnp.cumsum(x, -1), "x=bf16[B, T]")
    assert statements(half) == ["cumsum_T bf16[B, T] -> bf16[B, T]"] and half.analysis.bytes == 4 * B * T
    counted = quiet(lambda x: jnp.cumsum(x > 0, -1), "x=fp32[B, T]")
    assert statements(counted)[-2:] == ["bool[B, T] -> int32[B, T]", "cumsum_T int32[B, T] -> int32[B, T]"]
    for im in (half, counted):
        for sizes in SIZES[:3]:
            check = im.xla(sizes)
            assert check["flops_agree"] and check["transcendentals_agree"] and check["bytes_within_lowered"], check


def test_a_scan_of_the_flattened_array_and_the_gradients_reverse_scan():
    flat = quiet(lambda x: jnp.cumsum(x), "x=fp32[B, T]")  # along B*T: a name of its own
    assert "let BT = B*T" in flat.text and statements(flat) == ["cumsum_BT fp32[BT] -> fp32[BT]"]
    grad = quiet(jax.grad(lambda x: (jnp.cumsum(x, -1) ** 2).sum()), "x=fp32[B, T]")
    # the transpose of a cumsum is a reverse cumsum
    assert [s.primitive for s in grad.converted.statements if s.primitive.startswith("cumsum")] == \
        ["cumsum", "cumsum (reverse)"]
    for im in (flat, grad):
        for sizes in ({"B": 2, "T": 8}, {"B": 3, "T": 5}):
            check = im.xla(sizes)
            assert check["flops_agree"] and check["transcendentals_agree"] and check["bytes_within_lowered"], check


def test_a_scan_along_a_size_one_axis_is_the_input():
    im = symroof.from_jax(lambda x: jnp.cumsum(x, -1) * 2, "x=fp32[B, 1]")
    assert statements(im) == ["fp32[B] * fp32[] -> fp32[B]"]
    assert im.xla({"B": 4})["flops_agree"]


@pytest.mark.parametrize("reduce, statement", [
    (jnp.sum, "sum_T fp32[T] -> fp32[]"), (jnp.cumsum, "cumsum_T fp32[T] -> fp32[T]"),
    (jnp.argmax, "argmax_T fp32[T] -> int32[]")])
def test_a_reduction_or_scan_of_a_constant_is_computed_as_xla_counts_it(reduce, statement):
    # XLA folds elementwise ops on constants, not a reduce or a reduce_window: jnp.ones(T)
    # is read as the broadcast array it is (its bytes an upper bound, said)
    with pytest.warns(SymroofWarning, match="operand is read at its full shape"):
        im = symroof.from_jax(lambda x: x + reduce(jnp.ones(x.shape[-1], x.dtype)), "x=fp32[B, T]")
    assert statements(im)[0] == statement
    for sizes in SIZES[:3]:
        check = im.xla(sizes)
        assert check["flops_agree"] and check["flops_unexplained"] == 0 and check["bytes_within_lowered"], check


@settings(max_examples=12, deadline=None)
@given(word=st.sampled_from([*SCANS, *ARGS]), reverse=st.booleans(), b=st.integers(1, 5), t=st.integers(2, 9))
def test_the_symbolic_import_at_sizes_is_the_concrete_import(word, reverse, b, t):
    function = ARGS[word] if word in ARGS else (lambda x: SCANS[word][0](x, reverse))
    symbolic = symroof.from_jax(function, "x=fp32[B, T]").model(None, {"B": b, "T": t}).analysis
    concrete = symroof.from_jax(function, f"x=fp32[{b}, {t}]").analysis
    for key in ("flops", "flops_exact", "transcendentals", "bytes"):
        assert sympy.Integer(getattr(symbolic, key)) == sympy.Integer(getattr(concrete, key)), key


def test_the_command_says_the_transcendentals_are_explained(capsys, tmp_path):
    module = tmp_path / "scans.py"
    module.write_text("from jax import lax\n\ndef f(x):\n    return lax.cumlogsumexp(x, 1)\n")
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[B, T]", "--set", "B=3,T=7", "--xla"]) == 0
    out = capsys.readouterr().out
    assert "cumlogsumexp_T fp32[B, T] -> fp32[B, T]" in out
    assert f"transcendentals {2 * 21 * 5:+d}: XLA counts a cumulative op" in out  # 2 per combine, (T - 2) more
    assert "FLOPs: agree" in out and "transcendentals: agree, every difference explained above" in out


# -- split dims ----------------------------------------------------------------------------

def named(*spec):
    return NamedSharding(MESH, P(*spec))


def moves(analysis) -> list[tuple[str, tuple, sympy.Expr]]:
    return [(m.move.kind, m.move.axes, m.bytes) for m in analysis.cost.moves]


def test_an_argmax_over_a_dim_split_by_jit_all_reduces_each_rows_max_and_index():
    f = jax.jit(lambda x: jnp.argmax(x, -1), in_shardings=named(None, "y"))
    with pytest.warns(SymroofWarning, match="GSPMD all-gathers every chip's pair"):
        im = symroof.from_jax(f, "x=fp32[B, V]")
    assert statements(im) == ["argmax_V fp32[B, V_Y] -> int32[B]"]
    a = im.model("tpu-v5p").analysis
    assert a.flops == B * V / 4 and moves(a) == [("AllReduce", ("Y",), 8 * B)]  # 2 fp32 values per row
    batch = symroof.from_jax(jax.jit(lambda x: jnp.argmax(x, -1), in_shardings=named("x", None)), "x=fp32[B, V]")
    assert statements(batch) == ["argmax_V fp32[B_X, V] -> int32[B_X]"]
    assert moves(batch.model("tpu-v5p").analysis) == [] and not batch.warnings


def test_a_scan_along_a_dim_split_by_jit_gathers_it_first_as_gspmd_does():
    f = jax.jit(lambda x: jnp.cumsum(x, -1) * 2, in_shardings=named("x", "y"))
    with pytest.warns(SymroofWarning, match="gathered first"):
        im = symroof.from_jax(f, "x=fp32[B, T]")
    assert statements(im) == ["AllGather_Y fp32[B_X, T_Y] -> fp32[B_X, T]",
                              "cumsum_T fp32[B_X, T] -> fp32[B_X, T_Y]",  # whole on each chip, its part kept
                              "fp32[B_X, T_Y] * fp32[] -> fp32[B_X, T_Y]"]
    a = im.model("tpu-v5p").analysis
    assert a.flops == B * T / 2 + B * T / 8  # each chip: all of T for its rows, then its part doubled
    assert [m[:2] for m in moves(a)] == [("AllGather", ("Y",))]
    batch = symroof.from_jax(jax.jit(lambda x: jnp.cumsum(x, -1), in_shardings=named("x", None)), "x=fp32[B, T]")
    assert statements(batch) == ["cumsum_T fp32[B_X, T] -> fp32[B_X, T]"]
    assert batch.model("tpu-v5p").analysis.flops == B * T / 2 and not batch.warnings


def test_inside_shard_map_a_local_scan_is_costed_per_chip_and_a_split_one_is_said():
    def local(x):
        return jax.shard_map(lambda x: jnp.cumsum(x, -1), mesh=MESH, in_specs=P("y", None),
                             out_specs=P("y", None))(x)
    im = quiet(local, "x=fp32[B, T]")
    assert statements(im) == ["cumsum_T fp32[B_Y, T] -> fp32[B_Y, T]"]
    assert im.analysis.flops == B * T / 4
    check = im.xla({"B": 8, "T": 16})
    assert check["flops_agree"] and check["bytes_within_lowered"], check

    def split(x):  # each chip scans its own part of T: a local prefix, no symroof form
        return jax.shard_map(lambda x: jnp.cumsum(x, -1) + jnp.argmax(x, -1)[:, None], mesh=MESH,
                             in_specs=P(None, "y"), out_specs=P(None, "y"))(x)
    with pytest.warns(SymroofWarning) as said:
        im = symroof.from_jax(split, "x=fp32[B, T]")
    text = " ".join(str(w.message) for w in said)
    assert "not costed: argmax x 1" in text and "not costed: cumsum x 1" in text
    assert "cumsum along a dim shard_map's body holds split (T_Y)" in text
    assert not [s for s in statements(im) if s.startswith(("cumsum", "argmax"))]


def test_inside_shard_map_a_sum_over_a_split_dim_is_reduced_once_by_the_bodys_psum():
    def f(x):
        return jax.shard_map(lambda x: lax.psum(jnp.sum(x, -1), "y"), mesh=MESH, in_specs=P(None, "y"),
                             out_specs=P(None))(x)
    im = quiet(f, "x=fp32[B, T]")
    # the local sums are partial sums over Y: the psum's AllReduce sums them, symroof adds none
    assert statements(im) == ["sum_T fp32[B, T_Y] -> fp32[B] {U_Y}", "AllReduce_Y fp32[B] {U_Y} -> fp32[B]"]
    a = im.model("tpu-v5p").analysis
    assert [m[:2] for m in moves(a)] == [("AllReduce", ("Y",))] and a.flops == B * T / 4
    check = im.xla({"B": 8, "T": 16})
    assert check["flops_agree"], check
