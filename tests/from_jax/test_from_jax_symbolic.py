"""The symbolic import, evaluated at sizes, is the import at those sizes (issue 30): for
each function in a small library of them (a matmul, an MLP, attention, a transformer
block, a scan of layers, a pad and a slice, a causal mask, a reduction, a gradient), one
import with named dims, then hypothesis draws sizes; the program traced with those sizes
as literals must cost exactly what the symbolic one costs there: FLOPs, transcendentals,
bytes and the declared parameters.

Tracing with literals takes another path through the importer (no dim names, XLA-style
folding of constants known at trace time, literal labels): a dim name lost, a let written
wrong, a size-1 axis treated as broadcast, all show up here as a difference.

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from data import jax_blocks  # noqa: E402
from jax import lax  # noqa: E402

import symroof  # noqa: E402
from symroof.from_jax.importer import Imported  # noqa: E402
from symroof.from_jax.xla import FOLDED  # noqa: E402
from symroof.models.whole import Model  # noqa: E402


def _padded(x):
    """A pad (T -> T + 3) and a slice (the first T - 1 rows), as a convolution's halo or a
    shifted target would make them."""
    y = jnp.pad(x, ((0, 0), (1, 2)))
    return y[:, 1:] * 2.0


def _causal(x):
    """A causal mask built from iotas: a [T, T] bool."""
    t = x.shape[-1]
    mask = lax.broadcasted_iota(jnp.int32, (t, t), 0) >= lax.broadcasted_iota(jnp.int32, (t, t), 1)
    return jnp.where(mask, x, -1e9)


def _causal_arange(x):
    """The same mask from jnp.arange, as flax's make_causal_mask and transformers' classes
    build it: traced with a symbolic T, jnp.arange is iota * 1 + 0."""
    t = x.shape[-1]
    return jnp.where(jnp.arange(t)[:, None] >= jnp.arange(t)[None, :], x, -1e9)


def _loss(x, w_up, w_down):
    """A mean-squared loss of the MLP: its gradient is the backward pass."""
    return jnp.mean(jax_blocks.mlp(x, w_up, w_down) ** 2)


def _softmax_sum(x):
    return jnp.sum(jax.nn.softmax(x, axis=-1), axis=0)


# name -> (function, shapes with dims, the dims it has, which arguments are weights)
CASES: dict[str, tuple[Callable, str, tuple[str, ...], str]] = {
    "matmul": (jax_blocks.matmul, "x=bf16[B, D]; w=bf16[D, F]", ("B", "D", "F"), "w"),
    "mlp": (jax_blocks.mlp, "x=fp32[B, D]; w_up=fp32[D, F]; w_down=fp32[F, D]", ("B", "D", "F"), "w_up,w_down"),
    "attention": (jax_blocks.attention, "q=bf16[B, S, N, H]; k=bf16[B, T, N, H]; v=bf16[B, T, N, H]",
                  ("B", "S", "T", "N", "H"), ""),
    "block": (jax_blocks.block, "x=bf16[B, T, D]; g1=bf16[D]; wq=bf16[D, N, H]; wk=bf16[D, N, H]; "
                                "wv=bf16[D, N, H]; wo=bf16[N, H, D]; g2=bf16[D]; w_up=bf16[D, F]; w_down=bf16[F, D]",
              ("B", "T", "D", "N", "H", "F"), "g1,wq,wk,wv,wo,g2,w_up,w_down"),
    "layers": (jax_blocks.layers, "x=fp32[B, D]; ws=fp32[L, D, D]", ("B", "D", "L"), "ws"),
    "padded": (_padded, "x=fp32[B, T]", ("B", "T"), ""),
    "causal": (_causal, "x=fp32[B, T, T]", ("B", "T"), ""),
    "softmax_sum": (_softmax_sum, "x=fp32[B, T]", ("B", "T"), ""),
    "grad": (jax.grad(_loss, argnums=(1, 2)), "x=fp32[B, D]; w_up=fp32[D, F]; w_down=fp32[F, D]",
             ("B", "D", "F"), "w_up,w_down"),
}


@functools.cache
def _symbolic(name: str) -> Imported:
    fn, shapes, _, params = CASES[name]
    return symroof.from_jax(fn, shapes, params)


def _at(shapes: str, sizes: dict[str, int]) -> str:
    """The shapes with each dim name replaced by its size (whole words only: T, not T2)."""
    return re.sub(r"\b[A-Z]\w*\b", lambda m: str(sizes.get(m.group(0), m.group(0))), shapes)


def _case(least: int) -> st.SearchStrategy[tuple[str, dict[str, int]]]:
    return st.sampled_from(sorted(CASES)).flatmap(
        lambda name: st.fixed_dictionaries({d: st.integers(least, 7) for d in CASES[name][2]}).map(
            lambda sizes: (name, sizes)))


def _both(name: str, sizes: dict[str, int]) -> tuple[Model, Model]:
    fn, shapes, _, params = CASES[name]
    return _symbolic(name).model(None, sizes), symroof.from_jax(fn, _at(shapes, sizes), params).model(None, {})


@settings(max_examples=40, deadline=None)
@given(case=_case(2))
def test_the_symbolic_import_at_sizes_is_the_import_at_those_sizes(case):
    name, sizes = case
    symbolic, concrete = _both(name, sizes)
    for quantity in ("flops", "flops_exact", "transcendentals", "bytes"):
        assert getattr(symbolic.analysis, quantity) == getattr(concrete.analysis, quantity), (name, sizes, quantity)
    assert symbolic.params == concrete.params and symbolic.weight_bytes == concrete.weight_bytes


@settings(max_examples=25, deadline=None)
@given(case=_case(1))
def test_at_a_size_of_one_the_exact_counts_still_agree(case):
    """A dim of size 1 traced as a literal is no axis at all: a reduction over it is the
    array itself (free), where the symbolic program, a formula for every size, keeps the
    reduction. The exact count (T - 1 adds per row: 0 at T = 1) agrees all the same; the
    leading count (T per row) and the reduction's one pass over its operand are the
    formula's, the price of one program for every size (tests below pin the difference)."""
    name, sizes = case
    symbolic, concrete = _both(name, sizes)
    for quantity in ("flops_exact", "transcendentals"):
        assert getattr(symbolic.analysis, quantity) == getattr(concrete.analysis, quantity), (name, sizes, quantity)
    assert symbolic.params == concrete.params and symbolic.weight_bytes == concrete.weight_bytes


def test_a_softmax_over_a_size_one_axis_differs_by_its_reductions_alone():
    """softmax then sum over B at B = T = 1: the symbolic program's max_T and sum_T and
    sum_B each count 1 leading FLOP per output (T or B per row, the leading convention)
    where the concrete trace has no reduction; each reads its one-element operand and
    writes one element, 4 + 4 bytes, which the concrete trace neither reads nor writes."""
    symbolic, concrete = _both("softmax_sum", {"B": 1, "T": 1})
    assert symbolic.analysis.flops - concrete.analysis.flops == 3 * 1
    assert symbolic.analysis.bytes - concrete.analysis.bytes == 3 * (4 + 4)


def test_jnp_arange_traced_symbolically_costs_the_identities_xla_folds():
    """With a symbolic T, jnp.arange(T) is traced as iota * 1 + 0; with a literal T it is a
    constant. symroof writes the symbolic program's four identity statements as traced
    (xla.py: XLA folds them, and the cross-check explains them), so the two imports differ
    by exactly those: 4 statements of T int32 elements, 1 FLOP each, each reading its T
    elements and a scalar and writing T elements."""
    symbolic = symroof.from_jax(_causal_arange, "x=fp32[B, T, T]")
    for b, t in ((2, 3), (1, 5), (3, 8)):
        at = symbolic.model(None, {"B": b, "T": t}).analysis
        concrete = symroof.from_jax(_causal_arange, f"x=fp32[{b}, {t}, {t}]").analysis
        assert at.flops - concrete.flops == 4 * t
        assert at.bytes - concrete.bytes == 4 * (4 * t + 4 + 4 * t)
        check = symbolic.xla({"B": b, "T": t})
        assert check["flops_agree"] and check["explained_flops"][FOLDED] == -4 * t


def test_the_symbolic_import_keeps_every_dim():
    """Not vacuous: each symbolic program is a formula in its dims (a dim lost to a literal
    would make the property above hold by accident at that literal)."""
    for name, (_, _, dims, _) in CASES.items():
        flops = _symbolic(name).analysis.flops
        free = {str(s) for s in flops.free_symbols}
        # attention's N·H are always multiplied together, as are a grad's; every dim appears
        assert free == set(dims), (name, free)
