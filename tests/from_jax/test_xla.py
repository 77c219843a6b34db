"""symroof's FLOPs, transcendentals and HBM bytes against XLA's own cost analysis.

Each case pairs a symroof spec with the JAX function that computes the same thing, and
compares, at two sets of sizes, symroof's counts with what
`jax.jit(f).lower(*args).cost_analysis()` reports for the lowered (unoptimised) HLO.
What XLA counts, and why the figures below differ where they do, is written up in
`benchmarks/xla_conventions.md` (measured with jax 0.10.2).

The comparison is exact. Where symroof counts differently from XLA by design, the case
says so with an adjustment (XLA's figure minus symroof's), built from the helpers below,
each of which states the reason. Bytes are compared in one of two ways:

* "exact": the JAX function lowers to a single HLO instruction, which XLA counts as its
  inputs read once and its output written once, as symroof does;
* "io": a composite op (softmax, a norm, gelu, ...) or a block of statements. The lowered
  HLO writes and reads every intermediate; symroof counts what one kernel per statement
  (or per `fused` block) moves. symroof's bytes must equal that figure, computed here from
  the arrays, and can never exceed XLA's lowered bytes (fusion never adds traffic).

JAX is optional: the core never needs it, and without it this file is skipped.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import symroof  # noqa: E402

F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32
ITEMSIZE = {F32: 4, BF16: 2, I32: 4}
EPS = 1e-6

Sizes = dict[str, int]
Shape = tuple[tuple[str, ...], object]  # (dim names, dtype)


def n(z: Sizes, *dims: str) -> int:
    """Elements of an array with these dims."""
    return math.prod(z[d] for d in dims)


def nbytes(z: Sizes, dtype, *dims: str) -> int:
    return n(z, *dims) * ITEMSIZE[dtype]


# --- Where XLA's lowered count differs from symroof's, by design (XLA − symroof) -----


def exact_reduce(z: Sizes, *out_dims: str) -> int:
    """XLA counts a reduce as T − 1 combines per output (the first element needs none);
    symroof's `flops` is the leading count, T per output, as it counts a matmul's 2·D
    rather than 2·D − 1."""
    return -n(z, *out_dims)


def convert(z: Sizes, *dims: str) -> int:
    """XLA counts a convert as one flop per element; symroof counts casts as data movement
    (no FLOPs). Also JAX's hidden casts: `jnp.sum` and `jnp.mean` of bf16 convert to fp32
    before the reduce and back after it (n + R converts)."""
    return n(z, *dims)


def max_initial(z: Sizes, *out_dims: str) -> int:
    """`jax.nn.softmax` takes its max with `initial=-inf`: one more `maximum` per row."""
    return n(z, *out_dims)


def index_wrap(z: Sizes, *index_dims: str) -> int:
    """`table[ids]` wraps negative indices (compare, add, select): 3 flops per index.
    symroof's gather does no arithmetic."""
    return 3 * n(z, *index_dims)


def reduce_init(dtype) -> int:
    """A reduce reads its init value, one scalar, which XLA counts; symroof does not."""
    return ITEMSIZE[dtype]


def operand_twice(z: Sizes, dtype, *dims: str) -> int:
    """`x * x` is `multiply(x, x)`: XLA counts the operand once per use, so x twice; a
    kernel reads it once."""
    return nbytes(z, dtype, *dims)


# --- JAX references ----------------------------------------------------------------


def rmsnorm(x):
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS)


def layernorm(x):
    d = x - jnp.mean(x, axis=-1, keepdims=True)
    return d * jax.lax.rsqrt(jnp.mean(d * d, axis=-1, keepdims=True) + EPS)


def softmax_by_hand(x):
    e = jnp.exp(x - jnp.max(x, axis=-1, keepdims=True))
    return e / jnp.sum(e, axis=-1, keepdims=True)


def attention(q, k, v):
    s = jnp.einsum("bnsh,bnth->bnst", q, k, preferred_element_type=F32)
    p = jax.nn.softmax(s, axis=-1).astype(BF16)
    return jnp.einsum("bnst,bnth->bnsh", p, v)


def mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2


_GATHER_ROWS = jax.lax.GatherDimensionNumbers(
    offset_dims=(2,), collapsed_slice_dims=(0,), start_index_map=(0,)
)


def lax_gather(table, ids):
    """One `gather` instruction (ids come as [B, T, 1], the same bytes as [B, T])."""
    return jax.lax.gather(
        table, ids, _GATHER_ROWS, (1, table.shape[1]), mode="promise_in_bounds"
    )


# --- The cases ---------------------------------------------------------------------

Adjust = Callable[[Sizes], int]


def _zero(z: Sizes) -> int:
    return 0


@dataclass(frozen=True)
class Case:
    id: str
    spec: str
    fn: Callable
    args: tuple[Shape, ...]
    sizes: tuple[Sizes, Sizes]
    bytes: str = "exact"  # or "io"
    # XLA − symroof, by design (see the helpers above); zero where they agree.
    flops: Adjust = _zero
    transcendentals: Adjust = _zero
    xla_bytes: Adjust = _zero  # "exact" cases only
    # "io" cases: the bytes symroof must report; None = the JAX arguments + the result.
    io: Callable[[Sizes], int] | None = None


BD = ({"B": 8, "D": 16}, {"B": 4, "D": 24})
BTD = ({"B": 2, "T": 4, "D": 16}, {"B": 3, "T": 5, "D": 8})
BNST = ({"B": 2, "N": 2, "S": 4, "T": 8}, {"B": 1, "N": 3, "S": 5, "T": 6})
BDF = ({"B": 8, "D": 16, "F": 32}, {"B": 4, "D": 24, "F": 40})
GATHER = ({"V": 100, "D": 16, "B": 2, "T": 3}, {"V": 50, "D": 8, "B": 4, "T": 5})
ATTN = ({"B": 2, "N": 2, "S": 4, "T": 8, "H": 16}, {"B": 1, "N": 3, "S": 5, "T": 6, "H": 8})

X = (("B", "D"), BF16)
X32 = (("B", "D"), F32)
XTD = (("B", "T", "D"), BF16)
W = (("D",), BF16)
SCORES = (("B", "N", "S", "T"), BF16)
SCORES32 = (("B", "N", "S", "T"), F32)
Q = (("B", "N", "S", "H"), BF16)
KV = (("B", "N", "T", "H"), BF16)


def _attention_io_unfused(z: Sizes) -> int:
    """Three kernels: QKᵀ writes fp32 scores, softmax reads them and writes bf16, PV reads
    those."""
    q, kv = nbytes(z, BF16, "B", "N", "S", "H"), nbytes(z, BF16, "B", "N", "T", "H")
    s32, s16 = nbytes(z, F32, "B", "N", "S", "T"), nbytes(z, BF16, "B", "N", "S", "T")
    return (q + kv + s32) + (s32 + s16) + (s16 + kv + q)


def _attention_io_fused(z: Sizes) -> int:
    """One kernel: Q, K, V read, the output written; the scores never reach HBM."""
    q, kv = nbytes(z, BF16, "B", "N", "S", "H"), nbytes(z, BF16, "B", "N", "T", "H")
    return q + 2 * kv + q


def _mlp_io_unfused(z: Sizes) -> int:
    x, h = nbytes(z, BF16, "B", "D"), nbytes(z, BF16, "B", "F")
    w = nbytes(z, BF16, "D", "F")
    return (x + w + h) + (h + h) + (h + w + x)


def _mlp_io_fused(z: Sizes) -> int:
    x, w = nbytes(z, BF16, "B", "D"), nbytes(z, BF16, "D", "F")
    return x + 2 * w + x


def _gather_io(z: Sizes) -> int:
    """The rows gathered (not the whole table), the indices, the output."""
    rows = nbytes(z, BF16, "B", "T", "D")
    return rows + nbytes(z, I32, "B", "T") + rows


def _binary(name: str, spec_op: str, fn, dtype=BF16) -> Case:
    t = "bf16" if dtype is BF16 else "fp32"
    if spec_op in ("max", "min"):
        spec = f"{spec_op}({t}[B, D], {t}[B, D]) -> {t}[B, D]"
    else:
        spec = f"{t}[B, D] {spec_op} {t}[B, D] -> {t}[B, D]"
    return Case(name, spec, fn, ((("B", "D"), dtype),) * 2, BD)


def _unary(name: str, fn, **kw) -> Case:
    return Case(name, f"{name}(bf16[B, D]) -> bf16[B, D]", fn, (X,), BD, **kw)


ELEMENTWISE = [
    _binary("add", "+", jnp.add),
    _binary("add-fp32", "+", jnp.add, F32),
    _binary("sub", "-", jnp.subtract),
    _binary("mul", "*", jnp.multiply),
    _binary("div", "/", jnp.divide),
    _binary("max", "max", jnp.maximum),
    _binary("min", "min", jnp.minimum),
    Case(
        "broadcast-mul", "bf16[B, D] * bf16[D] -> bf16[B, D]", jnp.multiply, (X, W), BD,
        # jnp lowers the broadcast of w as reshape/broadcast instructions that write a
        # [B, D] copy the multiply then reads.
        bytes="io",
    ),
]

UNARY = [
    _unary("exp", jnp.exp),
    _unary("log", jnp.log),
    _unary("tanh", jnp.tanh),
    _unary("rsqrt", jax.lax.rsqrt),
    _unary("sqrt", jnp.sqrt),
    _unary("abs", jnp.abs),
    _unary("neg", jnp.negative),
    _unary(
        "square", jnp.square,
        xla_bytes=lambda z: operand_twice(z, BF16, "B", "D"),
    ),
    # The rest lower to several instructions (a broadcast constant at least).
    _unary("relu", jax.nn.relu, bytes="io"),  # maximum(x, 0): 1 flop
    _unary("sigmoid", jax.nn.sigmoid, bytes="io"),  # 1/(1+exp(-x)): 3 flops + 1 transc.
    _unary("silu", jax.nn.silu, bytes="io"),  # x·sigmoid(x): 4 flops + 1 transc.
    # symroof's gelu is the tanh approximation (jax.nn.gelu's default): 8 flops + 1
    # transcendental. The erf form is ~66 flops in XLA's expansion.
    _unary("gelu", partial(jax.nn.gelu, approximate=True), bytes="io"),
]

REDUCTIONS = [
    Case(
        "einsum-sum-fp32", "fp32[B, D] -> fp32[B]",
        partial(jnp.einsum, "bd->b"), (X32,), BD,
        flops=lambda z: exact_reduce(z, "B"),
        xla_bytes=lambda z: reduce_init(F32),
    ),
    Case(
        "einsum-sum-bf16-to-fp32", "bf16[B, D] -> fp32[B]",
        partial(jnp.einsum, "bd->b", preferred_element_type=F32), (X,), BD,
        # JAX converts the bf16 input to fp32, then reduces.
        flops=lambda z: convert(z, "B", "D") + exact_reduce(z, "B"),
        bytes="io",
    ),
    Case(
        "sum", "sum_D fp32[B, D] -> fp32[B]",
        partial(jnp.sum, axis=-1), (X32,), BD,
        flops=lambda z: exact_reduce(z, "B"),
        xla_bytes=lambda z: reduce_init(F32),
    ),
    Case(
        "sum-bf16", "sum_D bf16[B, D] -> bf16[B]",
        partial(jnp.sum, axis=-1), (X,), BD,
        flops=lambda z: exact_reduce(z, "B") + convert(z, "B", "D") + convert(z, "B"),
        bytes="io",
    ),
    Case(
        "max-reduce", "max_D bf16[B, D] -> bf16[B]",
        partial(jnp.max, axis=-1), (X,), BD,  # no upcast for max/min
        flops=lambda z: exact_reduce(z, "B"),
        xla_bytes=lambda z: reduce_init(BF16),
    ),
    Case(
        "min-reduce", "min_D bf16[B, D] -> bf16[B]",
        partial(jnp.min, axis=-1), (X,), BD,
        flops=lambda z: exact_reduce(z, "B"),
        xla_bytes=lambda z: reduce_init(BF16),
    ),
    Case(
        # mean = sum + one divide per output: B·D + B in symroof's leading count.
        "mean", "mean_D fp32[B, D] -> fp32[B]",
        partial(jnp.mean, axis=-1), (X32,), BD,
        flops=lambda z: exact_reduce(z, "B"),
        bytes="io",  # the divisor is a broadcast constant
    ),
    Case(
        "mean-bf16", "mean_D bf16[B, D] -> bf16[B]",
        partial(jnp.mean, axis=-1), (X,), BD,
        flops=lambda z: exact_reduce(z, "B") + convert(z, "B", "D") + convert(z, "B"),
        bytes="io",
    ),
]

ROWS = ("B", "N", "S")  # the rows of a softmax over T
NORM_ROWS = ("B", "T")

COMPOSITES = [
    Case(
        # max, subtract, exp, sum, divide: 4 flops + 1 transcendental per element.
        "softmax", "softmax_T bf16[B, N, S, T] -> bf16[B, N, S, T]",
        partial(jax.nn.softmax, axis=-1), (SCORES,), BNST, bytes="io",
        flops=lambda z: (
            2 * exact_reduce(z, *ROWS)  # the max and the sum
            + max_initial(z, *ROWS)
            + convert(z, "B", "N", "S", "T") + convert(z, *ROWS)  # the sum's upcast
        ),
    ),
    Case(
        "softmax-by-hand-fp32", "softmax_T fp32[B, N, S, T] -> fp32[B, N, S, T]",
        softmax_by_hand, (SCORES32,), BNST, bytes="io",
        flops=lambda z: 2 * exact_reduce(z, *ROWS),
    ),
    Case(
        # square, sum, divide by D, + eps, rsqrt, multiply: 3n + 2R flops, R transc.
        "rmsnorm", "rmsnorm_D bf16[B, T, D] -> bf16[B, T, D]",
        rmsnorm, (XTD,), BTD, bytes="io",
        flops=lambda z: (
            exact_reduce(z, *NORM_ROWS)
            + convert(z, "B", "T", "D") + convert(z, *NORM_ROWS)  # mean's upcast
        ),
    ),
    Case(
        "rmsnorm-weight",
        "fused {\n  rmsnorm_D bf16[B, T, D] -> bf16[B, T, D]\n"
        "  bf16[B, T, D] * bf16[D] -> bf16[B, T, D]\n}",
        lambda x, w: rmsnorm(x) * w, (XTD, W), BTD, bytes="io",
        flops=lambda z: (
            exact_reduce(z, *NORM_ROWS)
            + convert(z, "B", "T", "D") + convert(z, *NORM_ROWS)
        ),
    ),
    Case(
        # mean, subtract, square, mean, + eps, rsqrt, multiply: 5n + 3R flops, R transc.
        "layernorm", "layernorm_D bf16[B, T, D] -> bf16[B, T, D]",
        layernorm, (XTD,), BTD, bytes="io",
        flops=lambda z: 2 * (
            exact_reduce(z, *NORM_ROWS)
            + convert(z, "B", "T", "D") + convert(z, *NORM_ROWS)  # two means
        ),
    ),
    Case(
        "layernorm-scale-bias",
        "fused {\n  layernorm_D bf16[B, T, D] -> bf16[B, T, D]\n"
        "  bf16[B, T, D] * bf16[D] -> bf16[B, T, D]\n"
        "  bf16[B, T, D] + bf16[D] -> bf16[B, T, D]\n}",
        lambda x, g, b: layernorm(x) * g + b, (XTD, W, W), BTD, bytes="io",
        flops=lambda z: 2 * (
            exact_reduce(z, *NORM_ROWS)
            + convert(z, "B", "T", "D") + convert(z, *NORM_ROWS)
        ),
    ),
]

DATA = [
    Case(
        "gather", "gather bf16[V, D], int32[B, T] -> bf16[B, T, D]",
        lambda table, ids: table[ids], ((("V", "D"), BF16), (("B", "T"), I32)), GATHER,
        flops=lambda z: index_wrap(z, "B", "T"),
        bytes="io", io=_gather_io,
    ),
    Case(
        "gather-one-instruction", "gather bf16[V, D], int32[B, T] -> bf16[B, T, D]",
        lax_gather, ((("V", "D"), BF16), (("B", "T", "1"), I32)), GATHER,
    ),
    Case(
        "cast", "fp32[B, D] -> bf16[B, D]",
        lambda x: x.astype(BF16), (X32,), BD,
        flops=lambda z: convert(z, "B", "D"),
    ),
]

MATMULS = [
    Case(
        "matmul", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]",
        jnp.matmul, (X, (("D", "F"), BF16)), BDF,
    ),
    Case(
        "matmul-einsum", "bf16[B, D] * bf16[D, F] -> bf16[B, F]",
        jnp.matmul, (X, (("D", "F"), BF16)), BDF,
    ),
    Case(
        # One dot with an fp32 result: the same 2·B·D·F as the bf16 one.
        "matmul-fp32-out", "bf16[B, D] @ bf16[D, F] -> fp32[B, F]",
        partial(jnp.matmul, preferred_element_type=F32), (X, (("D", "F"), BF16)), BDF,
    ),
    Case(
        "matmul-fp32", "fp32[B, D] @ fp32[D, F] -> fp32[B, F]",
        jnp.matmul, (X32, (("D", "F"), F32)), BDF,
    ),
]

_MLP_STEPS = (
    "bf16[B, D] @ bf16[D, F] -> bf16[B, F]\n"
    "gelu(bf16[B, F]) -> bf16[B, F]\n"
    "bf16[B, F] @ bf16[F, D] -> bf16[B, D]"
)
_ATTENTION_STEPS = (
    "bf16[B, N, S, H] *_H bf16[B, N, T, H] -> fp32[B, N, S, T]\n"
    "softmax_T fp32[B, N, S, T] -> bf16[B, N, S, T]\n"
    "bf16[B, N, S, T] *_T bf16[B, N, T, H] -> bf16[B, N, S, H]"
)


def _attention_flops(z: Sizes) -> int:
    # fp32 softmax: no upcast, but the max's initial=-inf, and the cast to bf16 after it.
    return (
        2 * exact_reduce(z, *ROWS) + max_initial(z, *ROWS)
        + convert(z, "B", "N", "S", "T")
    )


BLOCKS = [
    Case(
        "mlp", _MLP_STEPS, mlp, (X, (("D", "F"), BF16), (("F", "D"), BF16)), BDF,
        bytes="io", io=_mlp_io_unfused,
    ),
    Case(
        "mlp-fused", "fused {\n" + _MLP_STEPS + "\n}",
        mlp, (X, (("D", "F"), BF16), (("F", "D"), BF16)), BDF,
        bytes="io", io=_mlp_io_fused,
    ),
    Case(
        "attention", _ATTENTION_STEPS, attention, (Q, KV, KV), ATTN,
        flops=_attention_flops, bytes="io", io=_attention_io_unfused,
    ),
    Case(
        # The third statement's bf16[B, N, T, H] is V, a new input (same type as K).
        "attention-fused", "fused {\n" + _ATTENTION_STEPS + "\n}",
        attention, (Q, KV, KV), ATTN,
        flops=_attention_flops, bytes="io", io=_attention_io_fused,
    ),
]

CASES = ELEMENTWISE + UNARY + REDUCTIONS + COMPOSITES + DATA + MATMULS + BLOCKS


# --- The harness ---------------------------------------------------------------------

_CPU = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])


def _struct(z: Sizes, shape: Shape):
    dims, dtype = shape
    return jax.ShapeDtypeStruct(
        tuple(int(d) if d.isdigit() else z[d] for d in dims), dtype, sharding=_CPU
    )


def xla_lowered(case: Case, z: Sizes) -> tuple[dict[str, int], int]:
    """XLA's lowered figures, and the bytes of the JAX arguments plus the result."""
    args = [_struct(z, s) for s in case.args]
    lowered = jax.jit(case.fn).lower(*args)
    costs = lowered.cost_analysis()
    if isinstance(costs, (list, tuple)):  # older jax: one dict per computation
        costs = costs[0]
    figures = {
        "flops": int(costs.get("flops", 0)),
        "transcendentals": int(costs.get("transcendentals", 0)),
        "bytes": int(costs.get("bytes accessed", 0)),
    }
    out = jax.eval_shape(case.fn, *args)
    io = sum(a.size * a.dtype.itemsize for a in [*args, out])
    return figures, io


def symroof_counts(case: Case, z: Sizes) -> dict[str, int]:
    a = symroof.analyze(case.spec, values=z)
    counts = {}
    for key in ("flops", "transcendentals", "bytes"):
        value = getattr(a, key)
        assert value.is_number, f"{case.id}: {key} = {value} is not a number at {z}"
        counts[key] = int(value)
    return counts


@pytest.mark.parametrize(
    "case, z",
    [pytest.param(c, z, id=f"{c.id}-{i}") for c in CASES for i, z in enumerate(c.sizes)],
)
def test_matches_xla(case: Case, z: Sizes):
    xla, io = xla_lowered(case, z)
    got = symroof_counts(case, z)
    want = {
        "flops": xla["flops"] - case.flops(z),
        "transcendentals": xla["transcendentals"] - case.transcendentals(z),
    }
    if case.bytes == "exact":
        want["bytes"] = xla["bytes"] - case.xla_bytes(z)
    else:
        want["bytes"] = case.io(z) if case.io else io
    wrong = {k: (got[k], want[k]) for k in want if got[k] != want[k]}
    assert not wrong, (
        f"{case.spec!r} at {z}: (symroof, expected) {wrong}; XLA lowered {xla}"
    )
    if case.bytes == "io":
        assert got["bytes"] <= xla["bytes"], (
            f"{case.spec!r} at {z}: symroof's {got['bytes']} bytes exceed XLA's "
            f"unfused {xla['bytes']}"
        )


def test_cases_well_formed():
    """Two distinct size sets per case, and each gives every dim of the spec's arrays."""
    for case in CASES:
        a, b = case.sizes
        assert a != b and a.keys() == b.keys(), case.id
        for dims, _ in case.args:
            assert all(d.isdigit() or d in a for d in dims), case.id
