"""Importing the rest of jax.lax's elementwise and reduction families (symroof/from_jax/convert.py,
scans.py): functions XLA expands into polynomials (erfc, lgamma, digamma, erf_inv, the
inverse and hyperbolic trigonometric ones), integer bit operations, the logical and
product reductions, bitcasts, reversals, unsigned dtypes, and pmax/pmin under shard_map.
Each is written with symroof's word and counted as XLA's lowered module counts it (its
measured FLOPs and transcendentals per element, a statement's own), at two shapes, every
difference explained.

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import pytest
import sympy

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402
from jax.sharding import AbstractMesh  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import symroof  # noqa: E402
from symroof.from_jax.convert import UPCAST_WHY  # noqa: E402
from symroof.from_jax.xla import CONSTANT_ARGUMENT  # noqa: E402
from symroof.ops import unary  # noqa: E402

SHAPES = [(3, 5), (8, 16)]


def agrees(imported, sizes: dict) -> dict:
    check = imported.xla(sizes)
    assert check["flops_agree"] and check["flops_unexplained"] == 0, check
    assert check["transcendentals_agree"] and check["bytes_within_lowered"] and not check["not_costed"], check
    return check


# (jax function, symroof's word, XLA's FLOPs and transcendentals per element in fp32): each
# measured, benchmarks/xla_conventions.md
EXPANDED = [
    (lax.erfc, "erfc", 62, 1),
    (lax.erf_inv, "erfinv", 37, 2),
    (lax.lgamma, "lgamma", 53, 4),
    (lax.digamma, "digamma", 73, 3),
    (jnp.arcsin, "asin", 5, 2),
    (jnp.arccos, "acos", 3, 2),
    (jnp.arctan, "atan", 0, 1),
    (jnp.sinh, "sinh", 10, 3),
    (jnp.cosh, "cosh", 3, 2),
    (jnp.arcsinh, "asinh", 11, 3),
    (jnp.arccosh, "acosh", 7, 4),
    (jnp.arctanh, "atanh", 6, 2),
]


@pytest.mark.parametrize("f, word, flops, transcendentals", EXPANDED, ids=[e[1] for e in EXPANDED])
@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_function_xla_expands_counts_what_xla_counts(f, word, flops, transcendentals, dtype):
    assert unary.FUNCTIONS[word][:2] == (flops, transcendentals)  # the op's declaration is the measurement
    im = symroof.from_jax(f, f"x={dtype}[A, B]")
    assert [s.text for s in im.converted.statements] == [f"{word}({dtype}[A, B]) -> {dtype}[A, B]"]
    for a, b in SHAPES:
        check = agrees(im, {"A": a, "B": b})
        n = a * b
        upcast = 2 * n if dtype == "bf16" and word in ("erfc", "erfinv", "lgamma", "digamma", "sinh", "cosh") else 0
        assert check["xla_lowered"]["flops"] == flops * n + upcast
        assert check["xla_lowered"]["transcendentals"] == transcendentals * n
        assert check["explained_flops"] == ({UPCAST_WHY: upcast} if upcast else {})


BITS = [
    (lambda x: lax.shift_left(x, 3), "shl", "int32"),
    (lambda x: lax.shift_right_logical(x, 3), "shr", "int32"),
    (lambda x: lax.shift_right_arithmetic(x, 3), "shr", "int32"),
    (lax.population_count, "popcount", "uint32"),
    (lax.clz, "clz", "uint16"),
    (lambda x: x ^ (x >> 7), "xor", "uint32"),
]


@pytest.mark.parametrize("f, word, dtype", BITS, ids=[f"{b[1]}-{b[2]}" for b in BITS])
def test_integer_bit_operations_are_one_flop_per_element(f, word, dtype):
    im = symroof.from_jax(f, f"x={dtype}[A, B]")
    assert word in im.converted.statements[-1].text and f"{dtype}[A, B]" in im.converted.statements[-1].text
    for a, b in SHAPES:
        check = agrees(im, {"A": a, "B": b})
        assert check["symroof"]["flops"] == check["xla_lowered"]["flops"] == len(im.converted.statements) * a * b


@pytest.mark.parametrize("f, word", [(lambda x: jnp.prod(x, -1), "prod"), (lambda x: jnp.all(x > 0, -1), "all"),
                                     (lambda x: jnp.any(x > 0, -1), "any")])
def test_product_and_logical_reductions(f, word):
    im = symroof.from_jax(f, "x=fp32[A, B]")
    assert im.converted.statements[-1].text.startswith(f"{word}_B ")
    for a, b in SHAPES:
        agrees(im, {"A": a, "B": b})
    assert im.analysis.steps[-1].flops == symroof.dim_symbol("A") * symroof.dim_symbol("B")


def test_a_bitcast_is_a_cast_and_a_reversal_is_free():
    im = symroof.from_jax(lambda x: lax.bitcast_convert_type(x, jnp.int32) + 1, "x=fp32[A, B]")
    assert [s.text for s in im.converted.statements] == ["fp32[A, B] -> int32[A, B]",
                                                         "int32[A, B] + int32[] -> int32[A, B]"]
    for a, b in SHAPES:
        agrees(im, {"A": a, "B": b})  # XLA counts the bitcast 1 FLOP per element, as a convert: explained
    im = symroof.from_jax(lambda x: jnp.flip(x, -1) * 2, "x=fp32[A, B]")
    assert [s.text for s in im.converted.statements] == ["fp32[A, B] * fp32[] -> fp32[A, B]"]
    assert "rev x 1" in im.text  # read backwards by the multiply: free
    agrees(im, {"A": 3, "B": 5})


@pytest.mark.parametrize("a, b", SHAPES)
def test_ops_on_a_jits_constant_arguments_are_counted_by_xla_and_explained(a, b):
    # jnp.remainder is a jit of its own: its checks of the divisor 2, a constant to the
    # caller, are ops on an argument inside it (XLA counts them; symroof folds them)
    im = symroof.from_jax(lambda x: x % 2, "x=int32[A, B]")
    check = agrees(im, {"A": a, "B": b})
    assert check["explained_flops"] == {CONSTANT_ARGUMENT: 3}  # eq, select, lt on the scalar divisor


def test_pmax_and_pmin_are_all_reduces_under_shard_map():
    mesh = AbstractMesh((2, 4), ("x", "y"))
    def across(collective):
        def f(x):
            return jax.shard_map(lambda x: collective(x * 2, "y"), mesh=mesh, in_specs=P("x", None),
                                 out_specs=P("x", None), check_vma=False)(x)
        return f
    for name, collective in (("pmax", lax.pmax), ("pmin", lax.pmin)):
        im = symroof.from_jax(across(collective), "x=fp32[B, D]")
        assert im.converted.statements[-1].text == "AllReduce_Y fp32[B_X, D] {U_Y} -> fp32[B_X, D]"
        assert im.converted.statements[-1].primitive == name
        b = symroof.dim_symbol("B")
        d = symroof.dim_symbol("D")
        (c,) = im.model("tpu-v5p").analysis.collectives
        assert sympy.simplify(c.move.bytes - 4 * b * d / 2) == 0
        for sizes in ({"B": 8, "D": 16}, {"B": 6, "D": 5}):
            agrees(im, sizes)  # XLA counts a max's combine as a sum's: 1 FLOP per element


def test_a_prng_key_and_random_bits_are_named_not_costed():
    with pytest.warns(symroof.SymroofWarning, match="not costed: random_bits x 1"):
        im = symroof.from_jax(lambda k, x: x * jax.random.uniform(k, x.shape), "k=uint32[2]; x=fp32[B, D]")
    assert "# NOT COSTED:" in im.text and "random_bits x 1" in im.text
