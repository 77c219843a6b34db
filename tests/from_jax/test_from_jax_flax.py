"""Small real library models end to end (issue 26, item 7): flax.linen's MLP and a
pre-norm causal self-attention block, imported with their variables as a pytree argument
named as the params, their counts against a hand count and against XLA's.

Needs JAX and flax: without either this file is skipped."""

from __future__ import annotations

import warnings

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
nn = pytest.importorskip("flax.linen")

import symroof  # noqa: E402
from symroof.errors import SymroofWarning  # noqa: E402


class _MLP(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(16)(nn.gelu(nn.Dense(32)(x)))


class _Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        mask = nn.make_causal_mask(jnp.ones(x.shape[:2], jnp.int32))
        h = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=16)(nn.LayerNorm()(x), mask=mask)
        return x + h


def _leaves(module, shape) -> str:
    """The module's variables as --shapes leaves (v.params.Dense_0.kernel=fp32[16, 32]),
    read from flax's own init, traced abstractly."""
    tree = jax.eval_shape(module.init, jax.random.key(0), jnp.zeros(shape))
    out = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        name = ".".join(str(getattr(k, "key", k)) for k in path)
        out.append(f"v.{name}=fp32[{', '.join(map(str, leaf.shape))}]")
    return "; ".join(out)


def test_a_flax_mlp():
    im = symroof.from_jax(lambda v, x: _MLP().apply(v, x), "x=fp32[B, T, 16]; " + _leaves(_MLP(), (2, 8, 16)),
                          params="v")
    b, t = 2, 8
    m = symroof.model(im.text, "prefill", None, {"B": b, "T": t})
    assert m.params == 16 * 32 + 32 + 32 * 16 + 16  # by hand: two kernels, two biases
    assert m.weight_bytes == 4 * m.params
    # by hand, per token: 2·16·32 + 32 (bias), gelu's tanh form 8 per element, 2·32·16 + 16
    assert m.analysis.flops == b * t * (2 * 16 * 32 + 32 + 8 * 32 + 2 * 32 * 16 + 16)
    assert m.analysis.transcendentals == b * t * 32
    check = im.xla({"B": b, "T": t})
    assert check["flops_agree"] and check["transcendentals_agree"] and check["bytes_within_lowered"]
    assert check["xla_lowered"]["flops"] == m.analysis.flops


def test_a_flax_causal_attention_block():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymroofWarning)  # the mask's broadcast read at full size: said
        im = symroof.from_jax(lambda v, x: _Block().apply(v, x), "x=fp32[B, T, 16]; " + _leaves(_Block(), (2, 8, 16)),
                              params="v")
    b, t = 2, 8
    m = symroof.model(im.text, "prefill", None, {"B": b, "T": t})
    # by hand: LayerNorm's scale and bias; q, k, v kernels [16, 2, 8] with biases [2, 8]; out [2, 8, 16] + [16]
    assert m.params == 16 + 16 + 3 * (16 * 2 * 8 + 2 * 8) + 2 * 8 * 16 + 16
    # the matmuls, by hand: the q, k, v and out projections 2·T·16·16 each per batch row,
    # the scores and the weighted values 2·2·T·T·8 each (2 heads of 8)
    lets = [line for line in im.text.splitlines() if line.startswith("let ")]
    dots = [s.text for s in im.converted.statements if s.primitive == "dot_general"]
    matmuls = symroof.model("\n".join(lets + dots) + "\n", "prefill", None, {"B": b, "T": t}).analysis.flops
    assert len(dots) == 6 and matmuls == b * (4 * 2 * t * 16 * 16 + 2 * 2 * 2 * t * t * 8)
    check = im.xla({"B": b, "T": t})
    assert check["flops_agree"] and check["transcendentals_agree"] and check["bytes_within_lowered"]
    assert m.analysis.transcendentals == b * 2 * t * t + b * t  # by hand: the softmax's exps, LayerNorm's rsqrts


def test_a_flax_nnx_model_closed_over_declares_its_weights():
    nnx = pytest.importorskip("flax.nnx")

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.norm = nnx.RMSNorm(16, rngs=rngs)
            self.up = nnx.Linear(16, 32, rngs=rngs)
            self.down = nnx.Linear(32, 16, rngs=rngs)

        def __call__(self, x):
            return self.down(nnx.gelu(self.up(self.norm(x))))
    model = MLP(nnx.Rngs(0))
    im = symroof.from_jax(lambda x: model(x), "x=fp32[B, 16]")  # the weights: arrays it closes over
    b = 4
    m = symroof.model(im.text, "prefill", None, {"B": b})
    assert m.params == 16 + 16 * 32 + 32 + 32 * 16 + 16  # by hand: the norm's scale, two kernels, two biases
    assert m.weight_bytes == 4 * m.params
    # and the gradient through a causal attention block, its variables closed over (jax.grad of a loss)
    v = _Block().init(jax.random.key(0), jnp.zeros((2, 8, 16)))
    grad = jax.grad(lambda v, x: jnp.mean(_Block().apply(v, x) ** 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymroofWarning)
        g = symroof.from_jax(lambda x: grad(v, x), "x=fp32[B, T, 16]")
    assert symroof.model(g.text, "prefill", None, {"B": 2, "T": 8}).params == 16 + 16 + 3 * (16 * 2 * 8 + 2 * 8) \
        + 2 * 8 * 16 + 16
    for imported, sizes in ((im, {"B": b}), (g, {"B": 2, "T": 8})):
        # XLA folds what closed-over constants make identities (a zero bias added, a unit scale): explained
        check = imported.xla(sizes)
        assert check["flops_agree"] and check["transcendentals_agree"] and check["bytes_within_lowered"]
