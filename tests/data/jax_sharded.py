"""Sharded functions written with shard_map (tests/test_from_jax_sharded.py imports them):
on an abstract mesh, so that tracing and XLA's lowered cost analysis need no devices."""

import jax
import jax.numpy as jnp
from jax.sharding import AbstractMesh
from jax.sharding import PartitionSpec as P

MESH = AbstractMesh((2, 4), ("x", "y"))


def megatron_mlp(mesh=MESH):
    """The batch over 'x'; w_up split by columns and w_down by rows over 'y' (Megatron):
    one psum, of the partial sums in fp32."""
    def body(x, w_up, w_down):
        h = jax.nn.gelu(x @ w_up)
        return jax.lax.psum((h @ w_down).astype(jnp.float32), "y")

    def mlp(x, w_up, w_down):
        return jax.shard_map(body, mesh=mesh, in_specs=(P("x", None), P(None, "y"), P("y", None)),
                             out_specs=P("x", None))(x, w_up, w_down)
    return mlp


def matmul(x, w):
    """x [B, D] split over x and y, w [D, F] over y: the contraction's partial sums psummed."""
    return jax.shard_map(lambda x, w: jax.lax.psum(x @ w, "y"), mesh=MESH, in_specs=(P("x", "y"), P("y", None)),
                         out_specs=P("x", None))(x, w)


def collectives(x, w):
    def body(x, w):
        y = jax.lax.psum_scatter(x @ w, "y", scatter_dimension=1, tiled=True)
        z = jax.lax.all_to_all(y, "x", 1, 0, tiled=True)
        return jax.lax.all_gather(z, "x", axis=1, tiled=True)
    return jax.shard_map(body, mesh=MESH, in_specs=(P("x", "y"), P("y", None)), out_specs=P(None, "y"),
                         check_vma=False)(x, w)


def permuted(x):
    return jax.shard_map(lambda x: jax.lax.ppermute(x, "x", [(0, 1), (1, 0)]) * 2, mesh=MESH,
                         in_specs=P("x", None), out_specs=P("x", None))(x)


def after(x, w):
    """A statement outside the shard_map: costed whole on every chip, and said so."""
    return jnp.tanh(matmul(x, w))


def ambiguous(x, y):
    """B split over 'a' in one argument and over 'b' in the other, both of 2: inside the
    body both are B/2."""
    mesh = AbstractMesh((2, 2), ("a", "b"))
    return jax.shard_map(lambda x, y: x * y, mesh=mesh, in_specs=(P("a", None), P("b", None)),
                         out_specs=P("a", None), check_vma=False)(x, y)


def data_moves(x, y, u):
    """Slices, a concatenation, an in-place update, a split."""
    a = x[:, :4]
    b = jnp.concatenate([a, y], axis=1)
    c = jax.lax.dynamic_slice(x, (0, 2), (x.shape[0], 4))
    d = jax.lax.dynamic_update_slice(x, u, (0, 0))
    p, q = jnp.split(x, 2, axis=1)
    return b.sum() + c.sum() + d.sum() + (p * q).sum()
