"""Importing conditionals (symroof/from_jax/cond.py): `lax.cond` and `lax.switch` written as the
branch that costs the most in every count, as XLA's cost analysis counts a conditional
(the most of its branches' counts, each on its own); not costed, and said, where no branch
does. Each against XLA's lowered module at two shapes, and the dominance test behind the
choice against numbers (hypothesis).

JAX is optional: without it the import tests are skipped."""

from __future__ import annotations

import random
import warnings

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symroof.from_jax.cond import at_least, costliest

B, D = (sympy.Symbol(n, positive=True, integer=True) for n in ("B", "D"))


# ---- the choice, without JAX -----------------------------------------------------------

def counts(flops, transcendentals=0, nbytes=0, network=0) -> dict:
    return dict(zip(("FLOPs", "transcendentals", "bytes", "collective bytes"),
                    map(sympy.sympify, (flops, transcendentals, nbytes, network))))


def test_the_costliest_branch_is_the_first_that_costs_at_least_as_much_in_every_count():
    none, mul, mul_add = counts(0), counts(B * D, 0, 8 * B * D), counts(2 * B * D, 0, 8 * B * D)
    assert costliest([({}, none), ({}, mul_add), ({}, mul)]) == 1
    assert costliest([({}, mul), ({}, mul)]) == 0  # equal: the first
    exp = counts(0, B * D, 8 * B * D)
    assert costliest([({}, mul), ({}, exp)]) is None  # more FLOPs against more transcendentals
    # a branch that might cost more, not costed (a sort), or not priced: no choice
    assert costliest([({}, mul_add), ({"sort": 1}, none)]) is None
    assert costliest([({"sort": 1}, mul_add), ({}, mul)]) == 0  # the costliest holds it: it is only more
    assert costliest([({}, mul_add), ({}, None)]) is None


def test_at_least_is_proved_on_the_formulas_or_not_claimed():
    assert at_least(2 * B * D, B * D) and at_least(B * D, B * D) and not at_least(B * D, 2 * B * D)
    assert at_least(B * D / 2 + B, B * D / 2)  # a mesh's shares
    assert not at_least(B * D, B + D)  # false at B = D = 1
    assert not at_least(B ** 2, 2 * B)  # false at B = 1
    assert not at_least(B * sympy.log(D), B)  # not a polynomial: not claimed


polynomials = st.lists(st.tuples(st.integers(-4, 6), st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=4)


@settings(max_examples=200, deadline=None)
@given(a=polynomials, b=polynomials, seed=st.integers(0, 2 ** 16))
def test_what_at_least_claims_holds_at_every_size_tried(a, b, seed):
    """Soundness: where at_least(a, b), a >= b at positive sizes (random ones here)."""
    def poly(terms):
        return sympy.Add(*(c * B ** i * D ** j for c, i, j in terms))
    pa, pb = poly(a), poly(b)
    if at_least(pa, pb):
        r = random.Random(seed)
        for _ in range(20):
            sizes = {B: r.randint(1, 50), D: r.randint(1, 50)}
            assert pa.subs(sizes) >= pb.subs(sizes)
    # and a polynomial plus one with no negative coefficient is always at least it
    extra = sympy.Add(*(abs(c) * B ** i * D ** j for c, i, j in b))
    assert at_least(pa + extra, pa)


# ---- imports -------------------------------------------------------------------------

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402
from jax.sharding import AbstractMesh  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import symroof  # noqa: E402
from symroof.errors import SpecError, SymroofWarning  # noqa: E402

SIZES = ({"B": 4, "D": 8}, {"B": 3, "D": 5})


def statements(imported) -> list[str]:
    return [s.text for s in imported.converted.statements]


def agrees(imported, sizes: dict) -> dict:
    check = imported.xla(sizes)
    assert check["flops_agree"] and check["flops_unexplained"] == 0, check
    assert check["transcendentals_agree"] and check["bytes_within_lowered"] and not check["not_costed"], check
    return check


@pytest.mark.parametrize("sizes", SIZES)
def test_a_cond_is_written_as_its_costlier_branch_and_agrees_with_xla(sizes):
    im = symroof.from_jax(lambda p, x: lax.cond(p, lambda x: x * 2 + 1, lambda x: x, x), "p=bool[]; x=fp32[B, D]")
    # lax.cond's branches are (false, true): the true one is branch 1
    assert statements(im) == ["fp32[B, D] * fp32[] -> fp32[B, D]", "fp32[B, D] + fp32[] -> fp32[B, D]"]
    assert "# cond: branch 1 of 2 written, the costliest in every count" in im.text
    assert "# cond: branch 0, not written: (no statement)" in im.text
    check = agrees(im, sizes)
    n = sizes["B"] * sizes["D"]
    assert check["xla_lowered"]["flops"] == 2 * n + 1  # the branch, and the predicate's convert to an index


@pytest.mark.parametrize("sizes", SIZES)
def test_a_switch_takes_the_branch_that_costs_most_and_comments_the_others(sizes):
    def f(i, x, w):
        return lax.switch(i, [lambda x: x @ w, lambda x: jnp.tanh(x) @ w, lambda x: x[:, :w.shape[1]]], x)
    im = symroof.from_jax(f, "i=int32[]; x=fp32[B, D]; w=fp32[D, D]")
    assert statements(im)[1:] == ["tanh(fp32[B, D]) -> fp32[B, D]", "fp32[B, D] *_D fp32[D, D2] -> fp32[B, D2]"]
    assert "#   fp32[B, D] *_D fp32[D, D2] -> fp32[B, D2]   # dot_general" in im.text  # branch 0, as a comment
    a = im.analysis
    assert (a.flops, a.transcendentals) == (2 * B * D * D + 1, B * D)  # the matmul and the index's clamp; tanh
    check = agrees(im, sizes)
    b, d = sizes["B"], sizes["D"]
    assert check["xla_lowered"]["flops"] == 2 * b * d * d + 1 and check["xla_lowered"]["transcendentals"] == b * d


def test_where_no_branch_costs_most_in_every_count_the_cond_is_not_costed_and_said():
    def f(p, x):
        return lax.cond(p, lambda x: x * 2 + 1, lambda x: jnp.exp(x), x) + 1
    with pytest.warns(SymroofWarning, match=r"cond: none of its 2 branches is proved to cost the most in every "
                                            r"count \(each costs more"):
        im = symroof.from_jax(f, "p=bool[]; x=fp32[B, D]")
    assert dict(im.converted.skipped) == {"cond": 1} and "# NOT COSTED: cond x 1" in im.text
    assert "# cond: branch 0, not written:\n#   exp(fp32[B, D]) -> fp32[B, D]   # exp" in im.text
    assert statements(im) == ["fp32[B, D] + fp32[] -> fp32[B, D]"]  # what follows it is costed
    assert im.xla(SIZES[0])["not_costed"] == {"cond": 1}
    # alone, nothing is left to cost: an error that says why
    with warnings.catch_warnings(), pytest.raises(SpecError, match="nothing symroof can cost.*none of its 2 branches"):
        warnings.simplefilter("ignore", SymroofWarning)
        symroof.from_jax(lambda p, x: lax.cond(p, lambda x: x * 2 + 1, jnp.exp, x), "p=bool[]; x=fp32[B, D]")


def test_a_branch_not_taken_leaves_no_names_behind():
    def f(p, x):
        return lax.cond(p, lambda x: (x.reshape(-1) * 2).reshape(x.shape), lambda x: x * 2 + 1, x)
    im = symroof.from_jax(f, "p=bool[]; x=fp32[B, D]")
    assert "# cond: branch 0 of 2 written" in im.text
    assert "\nlet " not in im.text  # BD = B*D only in the comment of the branch that needs it
    assert "# cond: branch 1, not written (with let BD = B*D):\n#   fp32[BD] * fp32[] -> fp32[BD]" in im.text
    agrees(im, SIZES[1])


def test_a_not_costed_primitive_in_the_costliest_branch_is_named():
    with pytest.warns(SymroofWarning, match="not costed: sort x 1"):
        im = symroof.from_jax(lambda p, x: lax.cond(p, lambda x: jnp.sort(x, -1), lambda x: x, x) + 1,
                              "p=bool[]; x=fp32[B, D]")
    assert dict(im.converted.skipped) == {"sort": 1}  # only what it holds: the sort branch can only cost more
    with pytest.warns(SymroofWarning, match="none of its 2 branches is proved.*branch 1 holds sort x 1, not costed"):
        im = symroof.from_jax(lambda p, x: lax.cond(p, lambda x: jnp.sort(x, -1), lambda x: x * 3, x) + 1,
                              "p=bool[]; x=fp32[B, D]")
    assert dict(im.converted.skipped) == {"cond": 1}


@pytest.mark.parametrize("sizes", SIZES)
def test_a_cond_in_a_loop_on_its_counter_and_nested_conds(sizes):
    def loop(x):
        return lax.fori_loop(0, 4, lambda i, x: lax.cond(i % 2 == 0, lambda x: jnp.tanh(x) * 2, lambda x: x, x), x)
    im = symroof.from_jax(loop, "x=fp32[B, D]")
    lines = im.text.splitlines()
    assert lines.index("repeat 4 {   # scan") < lines.index("  tanh(fp32[B, D]) -> fp32[B, D]   # tanh")
    # the counter is a carry: a constant on the first trip only, so its arithmetic is written
    assert "  rem(int32[], int32[]) -> int32[]   # rem" in lines
    agrees(im, sizes)

    def nested(p, q, x):
        return lax.cond(p, lambda x: lax.cond(q, lambda x: jnp.exp(x) * 2, jnp.exp, x), lambda x: x, x)
    im = symroof.from_jax(nested, "p=bool[]; q=bool[]; x=fp32[B, D]")
    assert statements(im) == ["exp(fp32[B, D]) -> fp32[B, D]", "fp32[B, D] * fp32[] -> fp32[B, D]"]
    agrees(im, sizes)


def test_inside_shard_map_a_collective_counts_as_cost():
    mesh = AbstractMesh((2, 4), ("x", "y"))

    def f(x):
        def body(x):
            return lax.cond(x[0, 0] > 0, lambda x: lax.psum(x, "y") * 2, lambda x: x * 2, x)
        return jax.shard_map(body, mesh=mesh, in_specs=P("x", None), out_specs=P("x", None), check_vma=False)(x)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = symroof.from_jax(f, "x=fp32[B, D]")
    assert statements(im)[1:] == ["AllReduce_Y fp32[B_X, D] {U_Y} -> fp32[B_X, D]",
                                  "fp32[B_X, D] * fp32[] -> fp32[B_X, D]"]
    assert [str(c).split(":")[0] for c in im.model("tpu-v5p").analysis.collectives] == \
        ["AllReduce_Y fp32[B_X, D] {U_Y}"]


@settings(max_examples=10, deadline=None)
@given(b=st.integers(2, 6), d=st.integers(2, 6))  # (a size-1 axis is no axis to a concrete import)
def test_symbolic_import_at_sizes_is_the_concrete_import(b, d):
    def f(i, x, w):
        return lax.switch(i, [lambda x: x @ w, lambda x: jnp.tanh(x) @ w * 2, lambda x: x], x).sum()
    symbolic = symroof.from_jax(f, "i=int32[]; x=fp32[B, D]; w=fp32[D, D]")
    concrete = symroof.from_jax(f, f"i=int32[]; x=fp32[{b}, {d}]; w=fp32[{d}, {d}]")
    at = symbolic.model(None, {"B": b, "D": d}).analysis
    assert (at.flops, at.bytes, at.transcendentals) == \
        (concrete.analysis.flops, concrete.analysis.bytes, concrete.analysis.transcendentals)
