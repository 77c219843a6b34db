"""Sharded functions written with shard_map (tests/from_jax/test_from_jax_sharded.py imports them):
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
    """A swap between the two chips of 'x': neighbours, a Permute."""
    return jax.shard_map(lambda x: jax.lax.ppermute(x, "x", [(0, 1), (1, 0)]) * 2, mesh=MESH,
                         in_specs=P("x", None), out_specs=P("x", None))(x)


def permuted_far(x):
    """A shift by two along 'y' (4 chips): no neighbour exchange, not costed."""
    return jax.shard_map(lambda x: jax.lax.ppermute(x, "y", [(i, (i + 2) % 4) for i in range(4)]) * 2,
                         mesh=MESH, in_specs=P("y", None), out_specs=P("y", None))(x)


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


# -- jit's shardings (GSPMD): read by symroof/from_jax/gspmd.py -------------------------------

def _named(mesh, *spec):
    return jax.sharding.NamedSharding(mesh, P(*spec))


def jit_matmul(x_spec=("x", None), w_spec=(None, None), out_spec=None, mesh=MESH):
    """x @ w under jit, laid out by in_shardings (and out_shardings, where given)."""
    out = {} if out_spec is None else {"out_shardings": _named(mesh, *out_spec)}
    return jax.jit(lambda x, w: x @ w, in_shardings=(_named(mesh, *x_spec), _named(mesh, *w_spec)), **out)


def jit_mlp(mesh=MESH):
    """Megatron's MLP as GSPMD is given it: the batch over 'x', w_up by columns and w_down
    by rows over 'y'; no psum written: the partitioner (here, symroof) inserts it."""
    return jax.jit(lambda x, w_up, w_down: jax.nn.gelu(x @ w_up) @ w_down,
                   in_shardings=(_named(mesh, "x", None), _named(mesh, None, "y"), _named(mesh, "y", None)))


def constrained(x, w):
    """A sharding constraint on a contraction's partial sums: a ReduceScatter, not an
    AllReduce; then the result gathered back for out_shardings."""
    def f(x, w):
        y = jax.lax.with_sharding_constraint(x @ w, _named(MESH, None, "y"))
        return jnp.tanh(y)
    return jax.jit(f, in_shardings=(_named(MESH, None, "y"), _named(MESH, "y", None)),
                   out_shardings=_named(MESH, None, None))(x, w)


def flattened(x, w):
    """[B, T, D] split over 'x' by batch, merged to [B*T, D]: the merged dim keeps the split."""
    def f(x, w):
        return x.reshape(x.shape[0] * x.shape[1], x.shape[2]) @ w
    return jax.jit(f, in_shardings=(_named(MESH, "x", None, None), _named(MESH, None, "y")))(x, w)


# -- explicit sharding: each value's type carries its layout (read by jax_gspmd.typed) ----

EXPLICIT = AbstractMesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)


def explicit_matmul(x_spec=("x", None), w_spec=(None, "y"), out_spec=("x", None), product=None):
    """x @ w under a mesh of explicit axes: the operands resharded, the product laid out
    as `product` says (None: as JAX's sharding rule derives it, B over 'x' and F over 'y'
    by default), then resharded as `out_spec` says."""
    def f(x, w):
        with jax.sharding.use_abstract_mesh(EXPLICIT):
            x = jax.sharding.reshard(x, P(*x_spec))
            w = jax.sharding.reshard(w, P(*w_spec))
            y = jnp.matmul(x, w, out_sharding=None if product is None else P(*product))
            return jax.sharding.reshard(jnp.tanh(y), P(*out_spec))
    return f
