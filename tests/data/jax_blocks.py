"""Functions written in plain JAX that tests/from_jax/test_from_jax.py imports (and the docs'
`symroof from-jax` example reads): a matmul, an MLP, attention, a transformer block, and
a stack of layers under a scan."""

import jax
import jax.numpy as jnp
from jax import lax


def matmul(x, w):
    return x @ w


def mlp(x, w_up, w_down):
    return jax.nn.gelu(x @ w_up) @ w_down


def rmsnorm(x, g):
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def attention(q, k, v):
    """q [B, S, N, H], k and v [B, T, N, H]: scores in fp32, softmax, weighted values."""
    scores = jnp.einsum("bsnh,btnh->bnst", q, k, preferred_element_type=jnp.float32)
    probs = jax.nn.softmax(scores / jnp.sqrt(q.shape[-1]).astype(jnp.float32), axis=-1).astype(v.dtype)
    return jnp.einsum("bnst,btnh->bsnh", probs, v)


def block(x, g1, wq, wk, wv, wo, g2, w_up, w_down):
    """A pre-norm transformer block: x [B, T, D]; wq, wk, wv [D, N, H]; wo [N, H, D]."""
    h = rmsnorm(x, g1)
    q, k, v = (jnp.einsum("btd,dnh->btnh", h, w) for w in (wq, wk, wv))
    x = x + jnp.einsum("btnh,nhd->btd", attention(q, k, v), wo)
    return x + mlp(rmsnorm(x, g2), w_up, w_down)


def layers(x, ws):
    """L layers of relu(h @ w), the weights stacked [L, D, D], under a scan."""
    def body(h, w):
        return jax.nn.relu(h @ w), None
    return lax.scan(body, x, ws)[0]


def sorted_scores(x):
    return jnp.sort(x, axis=-1) * jnp.sort(x, axis=0)
