"""Importing gathers, scatters and pads (from_jax/data.py, scatter.py): what each is written
as, its counts by hand, and XLA's lowered cost analysis of the same function at two or
more shapes (benchmarks/xla_conventions.md says what XLA counts for each: a gather the
elements it takes, a scatter the indices and three times its updates, a pad its operand
and its result; the masks and clamps JAX's lowering adds explained per statement).

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import warnings

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402
from jax.sharding import AbstractMesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import symroof  # noqa: E402
from symroof.errors import SymroofWarning  # noqa: E402
from symroof.from_jax.scatter import CLIP, FILL  # noqa: E402

B, D, H, K, T, V = (symroof.dim_symbol(n) for n in ("B", "D", "H", "K", "T", "V"))
WRAP = 3  # x[ids], jnp.take: lt, add, select per index, negative indices wrapped (jaxpr equations)
MESH = AbstractMesh((2, 4), ("x", "y"))


def statements(imported) -> list[str]:
    return [s.text for s in imported.converted.statements]


def quiet(f, shapes: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymroofWarning)
        return symroof.from_jax(f, shapes)


def agrees(imported, sizes: dict) -> dict:
    """XLA's lowered counts beside symroof's: FLOPs agree, every difference explained, and
    symroof's bytes within the lowered module's."""
    check = imported.xla(sizes)
    assert check["flops_agree"], check
    assert check["flops_unexplained"] == 0 and check["bytes_within_lowered"], check
    assert check["transcendentals_agree"] and not check["not_costed"], check
    return check


# ---- gathers ---------------------------------------------------------------------------

def pick_labels(logits, labels):
    """Cross-entropy's label pick: a gather with a batch dim (operand_batching_dims)."""
    return jnp.take_along_axis(logits, labels[..., None], axis=-1)


@pytest.mark.parametrize("sizes", [{"B": 3, "T": 5, "V": 7}, {"B": 2, "T": 7, "V": 11}])
def test_take_along_axis_is_a_gather_with_batch_dims(sizes):
    im = symroof.from_jax(pick_labels, "logits=fp32[B, T, V]; labels=int32[B, T]")
    assert statements(im)[-1] == "gather fp32[B, T, V], int32[B, T] -> fp32[B, T]"
    gather = next(s for s in im.analysis.steps if s.step.kind == "gather")
    assert gather.flops == 0 and gather.bytes == 4 * B * T + 4 * B * T + 4 * B * T  # taken, indices, result
    check = agrees(im, sizes)
    n = sizes["B"] * sizes["T"]
    # XLA: the wrap (3 per index), the fill mode's bounds mask (3 per index) and a select per element
    assert check["xla_lowered"]["flops"] == 7 * n
    assert check["explained_flops"] == {FILL: 4 * n}


@pytest.mark.parametrize("sizes", [{"B": 2, "V": 7, "D": 5, "K": 3}, {"B": 3, "V": 5, "D": 7, "K": 9}])
def test_take_on_a_later_axis_indexes_that_dim_and_keeps_the_result_axes_in_order(sizes):
    def f(x, ids):
        y = jnp.take(x, ids, axis=1)  # [B, K, D]
        return jnp.sum(y, axis=1)  # sums K: the result's axis 1 is the indices'
    im = symroof.from_jax(f, "x=fp32[B, V, D]; ids=int32[K]")
    texts = statements(im)
    assert "gather fp32[B, V, D], int32[K] -> fp32[B, K, D]" in texts
    assert texts[-1] == "sum_K fp32[B, K, D] -> fp32[B, D]"
    check = agrees(im, sizes)
    b, k, d = sizes["B"], sizes["K"], sizes["D"]
    assert check["explained_flops"][FILL] == 3 * k + b * k * d
    assert check["xla_lowered"]["flops"] == WRAP * k + 3 * k + b * k * d + b * (k - 1) * d


@pytest.mark.parametrize("sizes", [{"V": 7, "H": 3, "D": 5, "B": 2, "T": 3}, {"V": 5, "H": 2, "D": 3, "B": 3, "T": 7}])
def test_rows_of_a_table_with_more_than_two_dims(sizes):
    im = symroof.from_jax(lambda table, ids: table[ids], "table=bf16[V, H, D]; ids=int32[B, T]")
    assert statements(im)[-1] == "gather bf16[V, H, D], int32[B, T] -> bf16[B, T, H, D]"
    gather = im.analysis.steps[-1]
    assert gather.bytes == 2 * 2 * B * T * H * D + 4 * B * T  # rows taken and written, the indices
    check = agrees(im, sizes)
    assert check["xla_lowered"]["flops"] == WRAP * sizes["B"] * sizes["T"]  # promise_in_bounds: no mask
    assert check["explained_flops"] == {}


def test_a_column_gather_and_a_clipped_take():
    im = symroof.from_jax(lambda x, ids: x[:, ids], "x=fp32[B, V]; ids=int32[K]")
    assert statements(im)[-1] == "gather fp32[B, V], int32[K] -> fp32[B, K]"
    agrees(im, {"B": 3, "V": 7, "K": 5})
    im = symroof.from_jax(lambda x, ids: jnp.take(x, ids, axis=1, mode="clip"), "x=fp32[B, V, D]; ids=int32[K]")
    assert statements(im) == ["gather fp32[B, V, D], int32[K] -> fp32[B, K, D]"]
    for sizes in ({"B": 2, "V": 7, "D": 5, "K": 3}, {"B": 5, "V": 3, "D": 2, "K": 7}):
        check = agrees(im, sizes)
        assert check["xla_lowered"]["flops"] == 0 and check["explained_flops"] == {}  # XLA's gather clamps
        b, k, d = sizes["B"], sizes["K"], sizes["D"]
        # the lowered module: the gather (taken, indices, result) and the indices' reshape (read, written)
        assert check["symroof"]["bytes"] == 8 * b * k * d + 4 * k
        assert check["xla_lowered"]["bytes"] == 8 * b * k * d + 4 * k + 8 * k


def test_a_gather_or_scatter_along_two_axes_or_of_part_of_a_row_is_not_costed_and_said():
    with pytest.warns(SymroofWarning, match="not costed: gather x 1"):
        im = symroof.from_jax(lambda x, i, j: x[i, j], "x=fp32[V, W, D]; i=int32[B]; j=int32[B]")
    assert "# NOT COSTED: gather x 1" in im.text
    assert not any(t.startswith("gather") for t in statements(im))
    with pytest.warns(SymroofWarning, match="not costed: scatter-add x 1"):
        im = symroof.from_jax(lambda x, i, j, u: x.at[i, j].add(u), "x=fp32[V, W]; i=int32[B]; j=int32[B]; u=fp32[B]")
    assert not any(t.startswith("scatter") for t in statements(im))
    with pytest.warns(SymroofWarning) as said:
        im = symroof.from_jax(lambda x, i, u: x.at[i, :3].set(u), "x=fp32[V, 8]; i=int32[B]; u=fp32[B, 3]")
    assert [str(w.message) for w in said][:1] == ["not costed: scatter x 1 (no cost model; left out of every figure)"]
    assert not any(t.startswith("scatter") for t in statements(im))
    # what is costed still is: the indices made (one a broadcast zero, copied at its full shape)
    assert statements(im)[-1] == "copy(int32[B]) -> int32[B]"
    assert im.xla({"V": 7, "B": 3})["not_costed"] == {"scatter": 1}


# ---- scatters --------------------------------------------------------------------------

SCATTERS = {
    "scatter_add": (lambda x, ids, u: x.at[ids].add(u), 1),
    "scatter": (lambda x, ids, u: x.at[ids].set(u), 0),
    "scatter_mul": (lambda x, ids, u: x.at[ids].multiply(u), 1),
    "scatter_min": (lambda x, ids, u: x.at[ids].min(u), 1),
    "scatter_max": (lambda x, ids, u: x.at[ids].max(u), 1),
}


@pytest.mark.parametrize("word", list(SCATTERS))
def test_each_scatter_counts_its_updates_in_place(word):
    f, per = SCATTERS[word]
    im = symroof.from_jax(f, "x=bf16[V, D]; ids=int32[B, T]; u=bf16[B, T, D]")
    assert statements(im)[-1] == f"{word} bf16[V, D], int32[B, T], bf16[B, T, D] -> bf16[V, D]"
    scatter = im.analysis.steps[-1]
    m = B * T * D
    assert scatter.flops == per * m
    # the updates and indices read, the rows they touch read and written: not the whole [V, D]
    assert scatter.bytes_read == 2 * m + 4 * B * T + 2 * m and scatter.bytes_written == 2 * m
    for sizes in ({"V": 7, "D": 5, "B": 3, "T": 2}, {"V": 3, "D": 7, "B": 5, "T": 3}):
        check = agrees(im, sizes)
        n = sizes["B"] * sizes["T"]
        assert check["xla_lowered"]["flops"] == WRAP * n + per * n * sizes["D"]


def test_a_clipped_scatter_clamps_each_index():
    im = symroof.from_jax(lambda x, ids, u: x.at[ids].add(u, mode="clip"), "x=fp32[V, D]; ids=int32[B]; u=fp32[B, D]")
    for sizes in ({"V": 7, "D": 5, "B": 3}, {"V": 5, "D": 3, "B": 9}):
        check = agrees(im, sizes)
        assert check["explained_flops"] == {CLIP: sizes["B"]}
        assert check["xla_lowered"]["flops"] == WRAP * sizes["B"] + sizes["B"] + sizes["B"] * sizes["D"]


@pytest.mark.parametrize("sizes", [{"V": 7, "D": 5, "B": 3, "T": 2}, {"V": 11, "D": 3, "B": 5, "T": 7}])
def test_an_embeddings_gradient_scatters_into_new_zeros_written_whole(sizes):
    im = quiet(lambda table, ids: jax.grad(lambda t: t[ids].sum())(table), "table=bf16[V, D]; ids=int32[B, T]")
    assert statements(im)[-1] == "scatter_add int32[B, T], bf16[B, T, D] -> bf16[V, D]"
    scatter = im.analysis.steps[-1]
    m = B * T * D
    assert scatter.flops == m
    assert scatter.bytes_read == 4 * B * T + 2 * m + 2 * m  # indices, updates, the rows touched
    assert scatter.bytes_written == 2 * V * D + 2 * m  # the zeros written whole, then the rows
    check = agrees(im, sizes)
    n = sizes["B"] * sizes["T"]
    assert check["xla_lowered"]["flops"] == WRAP * n + n * sizes["D"]


ROWS = lax.ScatterDimensionNumbers(update_window_dims=(2,), inserted_window_dims=(0,),
                                  scatter_dims_to_operand_dims=(0,))


@pytest.mark.parametrize("sizes", [{"V": 11, "B": 3, "T": 5, "D": 7}, {"V": 5, "B": 2, "T": 3, "D": 9}])
def test_a_scatter_into_zeros_counts_what_xla_counts_but_the_fill_scalar(sizes):
    def f(table, ids, u):
        return lax.scatter_add(jnp.zeros_like(table), ids[..., None], u, ROWS,
                               mode=lax.GatherScatterMode.PROMISE_IN_BOUNDS)
    im = symroof.from_jax(f, "table=bf16[V, D]; ids=int32[B, T]; u=bf16[B, T, D]")
    assert statements(im) == ["scatter_add int32[B, T], bf16[B, T, D] -> bf16[V, D]"]
    check = agrees(im, sizes)
    v, d, n = sizes["V"], sizes["D"], sizes["B"] * sizes["T"]
    # the zeros written (V x D), the indices read, the updates read and the rows read and written
    assert check["symroof"] == {"flops": n * d, "transcendentals": 0, "bytes": 2 * v * d + 4 * n + 3 * 2 * n * d}
    # XLA's lowered module: the same, and the zeros' scalar (2 bytes) and the indices' reshape
    # to [B, T, 1] (read and written: 8 bytes an index), which symroof does not count
    assert check["xla_lowered"] == {"flops": n * d, "transcendentals": 0,
                                    "bytes": check["symroof"]["bytes"] + 2 + 8 * n}


def test_cross_entropys_gradient_scatters_one_element_a_row():
    im = quiet(lambda logits, labels: jax.grad(lambda x: pick_labels(x, labels).sum())(logits),
               "logits=fp32[B, V]; labels=int32[B]")
    # the updates (ones) a broadcast, read at their shape as XLA materializes them
    assert statements(im)[-1] == "scatter_add int32[B], fp32[B] -> fp32[B, V]"
    assert im.analysis.steps[-1].bytes_written == 4 * B * V + 4 * B
    for sizes in ({"B": 3, "V": 7}, {"B": 5, "V": 2}):
        agrees(im, sizes)


def lm_loss(emb, w, ids, labels):
    logits = emb[ids] @ w  # [B, T, V]
    return -pick_labels(jax.nn.log_softmax(logits, axis=-1), labels).mean()


@pytest.mark.parametrize("sizes", [{"V": 11, "D": 5, "B": 3, "T": 7}, {"V": 9, "D": 7, "B": 5, "T": 3}])
def test_a_language_models_loss_and_its_gradient_agree_with_xla(sizes):
    shapes = "emb=fp32[V, D]; w=fp32[D, V]; ids=int32[B, T]; labels=int32[B, T]"
    loss = symroof.from_jax(lm_loss, shapes)
    assert "gather fp32[V, D], int32[B, T] -> fp32[B, T, D]" in statements(loss)
    agrees(loss, sizes)
    grad = quiet(jax.grad(lm_loss, argnums=(0, 1)), shapes)
    texts = statements(grad)
    assert "scatter_add int32[B, T], fp32[B, T] -> fp32[B, T, V]" in texts  # the label pick's gradient
    assert texts[-1] == "scatter_add int32[B, T], fp32[B, T, D] -> fp32[V, D]"  # the embedding's
    agrees(grad, sizes)


# ---- pad -------------------------------------------------------------------------------

@pytest.mark.parametrize("sizes", [{"B": 3, "T": 5}, {"B": 7, "T": 2}])
def test_a_pad_names_its_padded_dim_and_writes_it_whole(sizes):
    im = symroof.from_jax(lambda x: jnp.pad(x, ((0, 0), (1, 2))), "x=fp32[B, T]")
    assert "let T3 = T+3" in im.text and statements(im) == ["pad fp32[B, T] -> fp32[B, T3]"]
    a = im.analysis
    assert a.flops == 0 and sympy.expand(a.bytes - (4 * B * T + 4 * B * (T + 3))) == 0
    check = agrees(im, sizes)
    b, t = sizes["B"], sizes["T"]
    # XLA: the pad reads its operand and the fill scalar, writes its result; jnp.pad's
    # fill is a jit's argument, converted (1 FLOP, 4 bytes read, 4 written)
    assert check["xla_lowered"] == {"flops": 1, "transcendentals": 0, "bytes": 4 * b * t + 4 + 4 * b * (t + 3) + 8}


def test_interior_and_negative_padding_and_a_padded_size_one_axis():
    im = symroof.from_jax(lambda x: lax.pad(x, jnp.bfloat16(0), ((2, 0, 0), (1, 2, 1))), "x=bf16[B, T]")
    assert statements(im) == ["pad bf16[B, T] -> bf16[B2, n2T2]"] and "n2T2 = 2*T+2" in im.text
    for sizes in ({"B": 3, "T": 5}, {"B": 1, "T": 7}):
        check = agrees(im, sizes)
        b, t = sizes["B"], sizes["T"]
        assert check["xla_lowered"]["bytes"] == 2 * b * t + 2 + 2 * (b + 2) * (2 * t + 2)  # no FLOPs, no convert
    im = symroof.from_jax(lambda x: lax.pad(x, 0.0, ((0, 0, 0), (-1, 2, 0))), "x=fp32[B, T]")
    assert statements(im) == ["pad fp32[B, T] -> fp32[B, T1]"] and "T1 = T+1" in im.text
    agrees(im, {"B": 3, "T": 5})
    im = symroof.from_jax(lambda x: jnp.pad(x[:, None, :], ((0, 0), (0, 3), (0, 0))), "x=fp32[B, T]")
    assert statements(im) == ["pad fp32[B, 1, T] -> fp32[B, 4, T]"]  # the size-1 axis written: it is padded
    agrees(im, {"B": 3, "T": 5})
    im = symroof.from_jax(lambda x: jnp.pad(x.T, ((0, 0), (1, 2))), "x=fp32[B, T]")
    assert statements(im) == ["pad fp32[B, T] -> fp32[T, B3]"]  # the array as stored; the result by the jaxpr
    agrees(im, {"B": 3, "T": 5})


# ---- properties ------------------------------------------------------------------------

def moves(emb, ids, x):
    h = emb[ids]  # [B, T, D]
    padded = jnp.pad(h * x[..., None], ((0, 0), (1, 2), (0, 0)))  # [B, T + 3, D]
    grad = jnp.zeros_like(emb).at[ids].add(h)  # [V, D]
    return padded.sum(), grad, jnp.take_along_axis(x, ids, axis=1)


@settings(max_examples=15, deadline=None)
@given(v=st.integers(1, 9), d=st.integers(1, 6), b=st.integers(1, 5), t=st.integers(1, 6))
def test_symbolic_import_at_sizes_is_the_concrete_import(v, d, b, t):
    symbolic = quiet(moves, "emb=fp32[V, D]; ids=int32[B, T]; x=fp32[B, T]")
    concrete = quiet(moves, f"emb=fp32[{v}, {d}]; ids=int32[{b}, {t}]; x=fp32[{b}, {t}]")
    at_sizes = symbolic.model(None, {"V": v, "D": d, "B": b, "T": t}).analysis
    assert at_sizes.flops == concrete.analysis.flops and at_sizes.bytes == concrete.analysis.bytes
    assert not symbolic.converted.skipped and not concrete.converted.skipped


@settings(max_examples=8, deadline=None)
@given(v=st.integers(1, 9), d=st.integers(1, 6), b=st.integers(1, 5), t=st.integers(1, 6))
def test_flops_agree_with_xla_across_small_shapes(v, d, b, t):
    im = quiet(moves, "emb=fp32[V, D]; ids=int32[B, T]; x=fp32[B, T]")
    agrees(im, {"V": v, "D": d, "B": b, "T": t})


# ---- meshes ----------------------------------------------------------------------------

def test_without_a_mesh_nothing_is_split():
    im = quiet(moves, "emb=fp32[V, D]; ids=int32[B, T]; x=fp32[B, T]")
    assert "mesh" not in im.text and not any("_" in t.split("->")[-1] for t in statements(im)
                                              if t.startswith(("gather", "scatter", "pad")))


def jit(f, *specs):
    return jax.jit(f, in_shardings=tuple(NamedSharding(MESH, P(*s)) for s in specs))


def collectives(analysis) -> list[str]:
    return [str(c).split(":")[0] for c in analysis.collectives]


def test_a_data_parallel_embedding_gradient_all_reduces_the_table_it_made():
    f = jit(lambda table, ids: jax.grad(lambda t: t[ids].sum())(table), (None, None), ("x", None))
    im = quiet(f, "table=fp32[V, D]; ids=int32[B, T]")
    # the ones (a broadcast) laid out as the indices beside them, as GSPMD lays a constant out
    assert statements(im)[-1] == "scatter_add int32[B_X, T], fp32[B_X, T, D] -> fp32[V, D]"
    a = im.model("tpu-v5p").analysis
    assert collectives(a) == ["AllReduce_X fp32[V, D] {U_X}"]
    scatter = a.steps[-1]
    assert scatter.flops == B * T * D / 2 and scatter.bytes_written == 4 * V * D + 4 * B * T * D / 2


def test_a_vocab_split_table_keeps_its_split_through_a_scatter_and_all_reduces_a_gather():
    im = symroof.from_jax(jit(lambda x, ids, u: x.at[ids].add(u), ("x", None), (None,), (None, None)),
                          "x=fp32[V, D]; ids=int32[B]; u=fp32[B, D]")
    assert statements(im)[-1] == "scatter_add fp32[V_X, D], int32[B], fp32[B, D] -> fp32[V_X, D]"
    assert collectives(im.model("tpu-v5p").analysis) == []
    im = symroof.from_jax(jit(lambda t, ids: t[ids], ("x", None), (None, None)), "t=bf16[V, D]; ids=int32[B, T]")
    assert statements(im)[-1] == "gather bf16[V_X, D], int32[B, T] -> bf16[B, T, D]"
    assert collectives(im.model("tpu-v5p").analysis) == ["AllReduce_X bf16[B, T, D] {U_X}"]
    im = symroof.from_jax(jit(pick_labels, ("x", None, None), ("x", None)), "logits=fp32[B, T, V]; labels=int32[B, T]")
    assert statements(im)[-1] == "gather fp32[B_X, T, V], int32[B_X, T] -> fp32[B_X, T]"


def test_a_pad_of_a_split_dim_is_gathered_first_and_said():
    with pytest.warns(SymroofWarning, match="pad of T, split over a mesh axis: symroof's engine gathers it first"):
        im = symroof.from_jax(jit(lambda x: jnp.pad(x, ((0, 0), (1, 2))), (None, "x")), "x=fp32[B, T]")
    assert statements(im) == ["pad fp32[B, T_X] -> fp32[B, T3]"]
    a = im.model("tpu-v5p").analysis
    assert collectives(a) == ["AllGather_X fp32[B, T_X]"]
    assert sympy.expand(a.bytes - (4 * B * T + 4 * B * (T + 3))) == 0
    im = symroof.from_jax(jit(lambda x: jnp.pad(x, ((0, 0), (1, 2))), ("x", None)), "x=fp32[B, T]")
    assert statements(im) == ["pad fp32[B_X, T] -> fp32[B_X, T3]"]  # a dim it does not pad keeps its split
    assert collectives(im.model("tpu-v5p").analysis) == []


def test_inside_shard_map_a_chip_gathers_scatters_and_pads_its_own_shards():
    def body(t, ids, x):
        rows = jax.lax.psum(t[ids], "x")  # each chip its rows of the vocab: partial sums, psummed
        return rows, jnp.pad(x, ((0, 0), (1, 2))), jnp.zeros((t.shape[0] * 2, t.shape[1]), t.dtype).at[ids].add(rows)

    def f(t, ids, x):
        return jax.shard_map(body, mesh=MESH, in_specs=(P("x", "y"), P(), P(None, "x")),
                             out_specs=(P(None, None, "y"), P(None, "x"), P(None, "y")), check_vma=False)(t, ids, x)
    im = quiet(f, "t=fp32[V, D]; ids=int32[B, T]; x=fp32[B, T]")
    texts = statements(im)
    assert "gather fp32[V_X, D_Y], int32[B, T] -> fp32[B, T, D_Y] {U_X}" in texts
    assert "AllReduce_X fp32[B, T, D_Y] {U_X} -> fp32[B, T, D_Y]" in texts
    # the chip pads its shard of T (T/2 elements a row): a dim of its own, not T gathered
    assert "pad fp32[B, TX] -> fp32[B, T23]" in texts and "T23 = T/2+3" in im.text and "TX = T/2" in im.text
    assert texts[-1] == "scatter_add int32[B, T], fp32[B, T, D_Y] -> fp32[V, D_Y]"
    a = im.model("tpu-v5p").analysis
    assert collectives(a) == ["AllReduce_X fp32[B, T, D_Y] {U_X}"]
    for sizes in ({"V": 6, "D": 8, "B": 3, "T": 10}, {"V": 10, "D": 4, "B": 5, "T": 6}):
        agrees(im, sizes)
