"""Causal masks, and what XLA folds before it counts (symroof/from_jax/xla.py).

`jnp.tril` computes `iota + k`, and with k = 0 that add is an identity the StableHLO ->
HLO conversion folds away before XLA's cost analysis counts the lowered module: symroof
counts it as written (T^2 FLOPs), XLA does not, and the cross-check says so. Each rule
is checked here on its own, XLA's figure pinned per element, at two shapes or more.

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402

import symroof  # noqa: E402
from symroof.from_jax.xla import FOLDED, SCALAR_CONVERT  # noqa: E402

CONVERT = "XLA counts a convert as 1 FLOP per element"


def check(f, shapes: str, sizes: dict) -> dict:
    return symroof.from_jax(f, shapes).xla(sizes)


def agrees(c: dict) -> None:
    assert c["flops_agree"] and c["flops_unexplained"] == 0, c


# -- causal attention -------------------------------------------------------------------

def _scores(q, k):
    return jnp.einsum("btd,bsd->bts", q, k)


def where_mask(q, k):
    t = q.shape[1]
    return jnp.where(jnp.tril(jnp.ones((t, t))), _scores(q, k), -jnp.inf)


def bool_mask(q, k):
    t = q.shape[1]
    return jnp.where(jnp.tril(jnp.ones((t, t), bool)), _scores(q, k), -jnp.inf)


def multiplied_mask(q, k):
    t = q.shape[1]
    return _scores(q, k) * jnp.tril(jnp.ones((t, t)))


def additive_mask(q, k):
    t = q.shape[1]
    return _scores(q, k) + (jnp.tril(jnp.ones((t, t))) - 1) * 1e9


def tri_mask(q, k):
    t = q.shape[1]
    return _scores(q, k) * jnp.tri(t, dtype=q.dtype)


def arange_mask(q, k):  # iota + 0 twice (arange's start), each of T elements
    t = jnp.arange(q.shape[1])
    return jnp.where(t[:, None] >= t[None, :], _scores(q, k), -jnp.inf)


def causal_attention(q, k, v):
    t = q.shape[1]
    s = jnp.einsum("bth,bsh->bts", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
    s = jnp.where(jnp.tril(jnp.ones((t, t), bool)), s, -jnp.inf)
    return jnp.einsum("bts,bsh->bth", jax.nn.softmax(s, axis=-1), v)


@pytest.mark.parametrize("mask", [where_mask, bool_mask, multiplied_mask, additive_mask, tri_mask])
@pytest.mark.parametrize("sizes", [{"B": 2, "T": 128, "D": 4}, {"B": 3, "T": 17, "D": 5}, {"B": 1, "T": 6, "D": 2}])
def test_a_causal_mask_agrees_once_the_folded_iota_plus_zero_is_explained(mask, sizes):
    c = check(mask, "q=fp32[B, T, D]; k=fp32[B, T, D]", sizes)
    agrees(c)
    assert c["explained_flops"][FOLDED] == -sizes["T"] ** 2  # jnp.tril's iota + 0, T x T


@pytest.mark.parametrize("sizes", [{"B": 2, "T": 16, "D": 4}, {"B": 3, "T": 9, "D": 5}])
def test_a_causal_mask_from_arange_folds_its_starts(sizes):
    c = check(arange_mask, "q=fp32[B, T, D]; k=fp32[B, T, D]", sizes)
    agrees(c)
    assert c["explained_flops"][FOLDED] == -2 * sizes["T"]


def test_the_reported_disagreement_is_jnp_trils_add_of_zero():
    # s * tril(ones): symroof 5 T^2 (iota + 0, >=, select, and B = 2 multiplies), XLA 4 T^2
    c = check(lambda s: s * jnp.tril(jnp.ones((s.shape[1], s.shape[1]))), "s=fp32[B, T, T]", {"B": 2, "T": 128})
    assert (c["symroof"]["flops"], c["xla_lowered"]["flops"]) == (81920, 65536)
    assert c["explained_flops"] == {FOLDED: -128 * 128}
    agrees(c)


@pytest.mark.parametrize("sizes", [{"B": 2, "T": 16}, {"B": 3, "T": 64}])
def test_causal_attention_in_bf16_with_where_fill_and_softmax(sizes):
    c = check(causal_attention, "q=bf16[B, T, 8]; k=bf16[B, T, 8]; v=bf16[B, T, 8]", sizes)
    agrees(c)
    t = sizes["T"]
    assert c["explained_flops"][FOLDED] == -t * t
    assert c["explained_flops"][SCALAR_CONVERT] == 1  # -inf, converted to bf16 inside jnp.where's jit
    assert c["transcendentals_agree"] and c["bytes_within_lowered"]


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("sizes", [{"B": 2, "T": 128, "N": 4}, {"B": 1, "T": 9, "N": 3}])
def test_jax_nn_dot_product_attention_imports_and_agrees(causal, sizes):
    def attend(q, k, v):
        return jax.nn.dot_product_attention(q, k, v, is_causal=causal)
    im = symroof.from_jax(attend, "q=bf16[B, T, N, 16]; k=bf16[B, T, N, 16]; v=bf16[B, T, N, 16]")
    # its causal mask is `and`ed with a broadcast True of [B, N, T, T]: no operand carries
    # B or N but that constant, so it is read at the result's shape, said in a warning
    assert any("comes only from a broadcast" in w for w in im.warnings) == causal
    c = im.xla(sizes)
    agrees(c)
    b, t, n = sizes["B"], sizes["T"], sizes["N"]
    # the two contractions, by hand: 2 B N T^2 16 each
    assert c["symroof"]["flops"] >= 2 * 2 * b * n * t * t * 16
    # folded: tril's iota + 0 (T^2), and True & mask (B N T^2), XLA's identity and(~0, x)
    assert c["explained_flops"].get(FOLDED, 0) == (-t * t - b * n * t * t if causal else 0)
    assert c["transcendentals_agree"] and c["bytes_within_lowered"]


def test_a_result_dim_only_a_broadcast_carries_is_read_at_the_results_shape():
    im = symroof.from_jax(lambda x, y: jnp.broadcast_to(x, y.shape + x.shape) * 2.0, "x=fp32[D]; y=fp32[B]")
    assert [s.text for s in im.converted.statements] == ["fp32[D] * fp32[B, D] -> fp32[B, D]"]
    b, d = symroof.dim_symbol("B"), symroof.dim_symbol("D")
    assert im.analysis.flops == b * d  # one multiply per result element, as XLA counts it
    assert any("upper bound" in w for w in im.warnings)
    agrees(check(lambda x, y: jnp.broadcast_to(x, y.shape + x.shape) * 2.0, "x=fp32[D]; y=fp32[B]", {"B": 3, "D": 5}))


# -- each primitive on its own ----------------------------------------------------------

def iota(x, dim=0):
    return lax.broadcasted_iota(jnp.int32, x.shape, dim)


@jax.custom_jvp
def _custom_add(x, z):
    return x + z


_custom_add.defjvp(lambda primals, tangents: (_custom_add(*primals), tangents[0]))
_jit_add = jax.jit(lambda x, z: x + z)
_jit_select = jax.jit(lambda p, x, y: lax.select(p, x, y))

# (name, function, dtype of x [A, B], XLA's FLOPs per element, symroof's that XLA folds per element)
PRIMITIVES = [
    # the mask's pieces: only the add of 0 is folded
    ("tril", lambda x: jnp.tril(x), "fp32", 2, 1),  # iota + 0 (folded), >=, select
    ("iota + 0", lambda x: x + (iota(x) + 0), "int32", 1, 1),
    ("iota + 1", lambda x: x + (iota(x) + 1), "int32", 2, 0),
    ("iota >= iota", lambda x: jnp.where(iota(x) >= iota(x, 1), x, 0.0), "fp32", 2, 0),
    ("select on a pred", lambda x: jnp.where(x > 0, x, 0.0), "fp32", 2, 0),
    ("convert of a pred", lambda x: (x > 0).astype(jnp.float32), "fp32", 2, 0),  # compare, convert
    # identities with a constant: folded, whatever the dtype
    ("x + 0", lambda x: x + 0.0, "fp32", 0, 1),
    ("0 + x", lambda x: 0.0 + x, "fp32", 0, 1),
    ("x - 0", lambda x: x - 0.0, "fp32", 0, 1),
    ("x + -0.0", lambda x: x + (-0.0), "fp32", 0, 1),
    ("x * 1", lambda x: x * 1.0, "fp32", 0, 1),
    ("1 * x", lambda x: 1.0 * x, "fp32", 0, 1),
    ("x * 1, bf16", lambda x: x * jnp.bfloat16(1), "bf16", 0, 1),
    ("x + zeros", lambda x: x + jnp.zeros(x.shape), "fp32", 0, 1),
    ("x * ones", lambda x: x * jnp.ones(x.shape), "fp32", 0, 1),
    ("x + full(0)", lambda x: x + jnp.full(x.shape, 0.0), "fp32", 0, 1),
    ("x + zeros[B]", lambda x: x + jnp.zeros(x.shape[1:]), "fp32", 0, 1),
    ("-zeros + x", lambda x: -jnp.zeros(x.shape) + x, "fp32", 0, 1),  # neg(0) = -0.0, a constant
    ("custom_jvp(x, zeros)", lambda x: _custom_add(x, jnp.zeros(x.shape)), "fp32", 0, 1),
    ("checkpoint(x + 0)", lambda x: jax.checkpoint(lambda a: a + 0.0)(x), "fp32", 0, 1),
    ("scan body x * 2 + 0", lambda x: lax.scan(lambda c, _: (c * 2.0 + 0.0, None), x, None, length=3)[0],
     "fp32", 1, 1),  # the body once, as XLA counts it (its counter's 2: xla_extra)
    # integers and booleans
    ("i * 0", lambda x: x * 0, "int32", 0, 1),
    ("i & 0", lambda x: x & 0, "int32", 0, 1),
    ("i & -1", lambda x: x & -1, "int32", 0, 1),
    ("i | 0", lambda x: x | 0, "int32", 0, 1),
    ("i | -1", lambda x: x | -1, "int32", 0, 1),
    ("i ^ 0", lambda x: x ^ 0, "int32", 0, 1),
    ("u8 & 255", lambda x: x & jnp.uint8(255), "uint8", 0, 1),
    ("i - i", lambda x: x - x, "int32", 0, 1),
    ("i ^ i", lambda x: x ^ x, "int32", 0, 1),
    ("i == i", lambda x: x == x, "int32", 0, 1),
    ("i < i", lambda x: x < x, "int32", 0, 1),
    ("(i - i) + i", lambda x: (x - x) + x, "int32", 0, 2),  # 0 + x, with the 0 a fold's
    ("p & True", lambda x: (x > 0) & True, "fp32", 1, 1),
    ("p | False", lambda x: (x > 0) | False, "fp32", 1, 1),
    # not folded: XLA counts them as symroof does
    ("0 - x", lambda x: 0.0 - x, "fp32", 1, 0),
    ("x / 1", lambda x: x / 1.0, "fp32", 1, 0),
    ("x * 0, float", lambda x: x * 0.0, "fp32", 1, 0),
    ("x - x, float", lambda x: x - x, "fp32", 1, 0),
    ("x == x, float", lambda x: (x == x).astype(jnp.float32), "fp32", 2, 0),
    ("x * -1", lambda x: x * -1.0, "fp32", 1, 0),
    ("max(x, -inf)", lambda x: jnp.maximum(x, -jnp.inf), "fp32", 1, 0),
    ("max(i, i)", lambda x: jnp.maximum(x, x), "int32", 1, 0),
    ("i & i", lambda x: x & x, "int32", 1, 0),
    ("where(True, x, 1)", lambda x: jnp.where(jnp.ones(x.shape, bool), x, 1.0), "fp32", 1, 0),
    ("jit(x + z)(x, zeros)", lambda x: _jit_add(x, jnp.zeros(x.shape)), "fp32", 1, 0),  # z: an argument
    ("jit(select)(p, x, x)", lambda x: _jit_select(x > 0, x, x), "fp32", 2, 0),
]


@pytest.mark.parametrize("name, f, dtype, xla, folded", PRIMITIVES, ids=[p[0] for p in PRIMITIVES])
@pytest.mark.parametrize("a, b", [(3, 5), (8, 16)])
def test_what_xla_folds_one_primitive_at_a_time(name, f, dtype, xla, folded, a, b):
    c = check(f, f"x={dtype}[A, B]", {"A": a, "B": b})
    n = a * b
    assert c["xla_lowered"]["flops"] - 2 * ("scan" in name) == xla * n  # the measurement the rule rests on
    assert c["explained_flops"].get(FOLDED, 0) == -folded * n
    agrees(c)


def test_a_closed_over_array_of_zeros_is_a_constant_and_one_of_values_is_not():
    zeros, values = np.zeros((4, 8), np.float32), np.arange(32, dtype=np.float32).reshape(4, 8)
    c = check(lambda x: x + zeros, "x=fp32[4, 8]", {})
    assert c["xla_lowered"]["flops"] == 0 and c["explained_flops"] == {FOLDED: -32}
    agrees(c)
    c = check(lambda x: x + values, "x=fp32[4, 8]", {})
    assert c["xla_lowered"]["flops"] == 32 and FOLDED not in c["explained_flops"]
    agrees(c)


@pytest.mark.parametrize("f, shapes, converts", [
    (lambda p, x: jnp.where(p, x, -jnp.inf), "p=bool[A, B]; x=bf16[A, B]", 1),
    (lambda p, x: jnp.where(p, jnp.where(p, x, -jnp.inf), 0.0), "p=bool[A, B]; x=bf16[A, B]", 2),
    (lambda s, x: x * s.astype(jnp.bfloat16), "s=fp32[]; x=bf16[A, B]", 1),
    (lambda x: x.sum().astype(jnp.bfloat16), "x=fp32[A, B]", 1),
    (lambda p, x: jnp.where(p, x, -jnp.inf), "p=bool[A, B]; x=fp32[A, B]", 0),  # fp32 -> fp32: no convert
])
@pytest.mark.parametrize("a, b", [(3, 5), (8, 16)])
def test_xla_counts_a_scalar_convert_that_is_no_constant_in_its_function(f, shapes, converts, a, b):
    c = check(f, shapes, {"A": a, "B": b})
    assert c["explained_flops"].get(SCALAR_CONVERT, 0) == converts
    agrees(c)


def test_symroof_keeps_its_count_as_written():
    im = symroof.from_jax(lambda x: jnp.tril(x), "x=fp32[T, T]")
    t = symroof.dim_symbol("T")
    assert im.analysis.flops == 3 * t ** 2  # iota + 0, >=, select: one FLOP per element each
    folded = [s for s in im.converted.statements if s.why == FOLDED]
    assert [s.primitive for s in folded] == ["add"]
    assert folded[0].xla_flops.subs(symroof.dim_symbol("T2"), t) == -t ** 2  # T2: the second T, aliased


@pytest.mark.parametrize("a, b", [(3, 5), (8, 16)])
def test_a_select_of_one_value_either_way_is_folded(a, b):
    c = check(lambda p, x: lax.select(p, x + 0.0, x), "p=bool[A, B]; x=fp32[A, B]", {"A": a, "B": b})
    assert c["xla_lowered"]["flops"] == 0 and c["explained_flops"] == {FOLDED: -2 * a * b}  # x + 0, select
    agrees(c)


def test_what_a_fold_leaves_dead_is_explained():
    # select(p, x + 0, x) folds to x, and then nothing reads the compare: XLA drops it
    c = check(lambda x: lax.select(x > 0, x + 0.0, x), "x=fp32[A, B]", {"A": 3, "B": 5})
    agrees(c)
    assert c["explained_flops"][FOLDED] == -3 * 15  # the add, the compare and the select
    assert c["xla_lowered"]["flops"] == 0


def test_dead_code_is_dropped_as_jit_drops_it():
    @jax.jit
    def inner(x):
        jnp.log(x)  # dead inside a jit's body too
        return x * 3.0

    def f(x):
        jnp.exp(x) * 2.0  # nothing reads it
        inner(x)
        return x + inner(x)

    im = symroof.from_jax(f, "x=fp32[A, B]")
    assert [s.primitive for s in im.converted.statements] == ["mul", "add"]
    assert im.converted.dead == 6  # exp, mul; the first call (its jit and two equations); the second's log
    assert "# dropped: 6 jaxpr equation(s)" in im.text
    a, b = symroof.dim_symbol("A"), symroof.dim_symbol("B")
    assert im.analysis.flops == 2 * a * b and im.analysis.transcendentals == 0
    c = check(f, "x=fp32[A, B]", {"A": 3, "B": 5})
    agrees(c)
    assert c["xla_lowered"]["flops"] == 30 and c["transcendentals_agree"]
