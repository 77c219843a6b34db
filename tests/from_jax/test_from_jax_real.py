"""What kept real JAX models from importing (issue 26, item 7), each as a minimal repro:
a cast after a broadcast (a causal LM's mask), a sum over a size-1 axis (jax.grad of
GPT-2), `--xla` at fully concrete shapes, an einsum with no summed index, an unrolled
scan, and a function whose only op XLA folds away. Each import's counts are checked
against a hand count, and against XLA's where the cross-check applies.

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import pytest
import sympy

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402

import symroof  # noqa: E402
from symroof.cli.command import main  # noqa: E402


def sym(name):
    return symroof.dim_symbol(name)


def statements(imported) -> list[str]:
    return [s.text for s in imported.converted.statements]


def _mask(x, m):
    """A causal LM's mask as transformers' Flax classes build it: a bool [T, T2] mask,
    broadcast to the batch, then cast to the scores' dtype."""
    return x * jnp.broadcast_to(m[None, None], x.shape).astype(jnp.float32)


def test_a_cast_after_a_broadcast_casts_the_array_and_reads_it_broadcast():
    im = symroof.from_jax(_mask, "x=fp32[B, N, T, T2]; m=bool[T, T2]")
    assert statements(im)[0] == "bool[T, T2] -> fp32[T, T2]"
    b, n, t, t2 = sym("B"), sym("N"), sym("T"), sym("T2")
    a = im.analysis
    # by hand: the multiply, one FLOP per score; the cast moves bytes only
    assert a.flops == b * n * t * t2
    # cast: T·T2 bools read, T·T2 fp32 written; multiply: the scores and the mask read, the scores written
    assert sympy.expand(a.bytes - (t * t2 * (1 + 4) + 4 * b * n * t * t2 * 2 + 4 * t * t2)) == 0
    sizes = {"B": 2, "N": 3, "T": 5, "T2": 7}
    check = im.xla(sizes)
    assert check["flops_agree"] and check["bytes_within_lowered"]
    # XLA casts every element of the broadcast (B·N·T·T2 converts) and multiplies as many
    assert check["xla_lowered"]["flops"] == 2 * 2 * 3 * 5 * 7
    assert sum(check["explained_flops"].values()) == 2 * 3 * 5 * 7


def test_a_sum_over_a_size_one_axis_is_the_array_itself():
    im = symroof.from_jax(lambda x, y: jnp.sum(x, axis=2) * y, "x=fp32[B, T, 1]; y=fp32[B, T]")
    assert statements(im) == ["fp32[B, T] * fp32[B, T] -> fp32[B, T]"]
    b, t = sym("B"), sym("T")
    assert im.analysis.flops == b * t and im.analysis.bytes == 3 * 4 * b * t
    check = im.xla({"B": 4, "T": 6})
    assert check["flops_agree"] and check["xla_lowered"]["flops"] == 4 * 6  # a sum of one term: no add


def test_a_gradient_through_a_size_one_sum_imports():
    # jax.grad of GPT-2's loss sums over such an axis; the gradient of sum(x, axis=2) * y
    def loss(x, y):
        return jnp.sum(jnp.sum(x, axis=2) * y)
    im = symroof.from_jax(jax.grad(loss), "x=fp32[B, T, 1]; y=fp32[B, T]")
    check = im.xla({"B": 3, "T": 5})
    assert check["flops_agree"] and check["bytes_within_lowered"]


def test_xla_at_fully_concrete_shapes_needs_no_set(tmp_path, capsys):
    module = tmp_path / "concrete.py"
    module.write_text("def f(x, w):\n    return x @ w\n")
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[4, 8]; w=fp32[8, 16]", "--xla"]) == 0
    out = capsys.readouterr().out
    assert "XLA cost analysis at the shapes given" in out
    # 2·4·8·16 FLOPs, by hand, in both columns
    assert any(line.split()[:3] == ["flops", "1024", "1024"] for line in out.splitlines())
    # with a symbolic dim, --xla still asks for its size, in one line, exit 2
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[B, 8]; w=fp32[8, 16]", "--xla"]) == 2
    assert "--set (B=...)" in capsys.readouterr().err


@pytest.mark.parametrize("spec, shapes, sizes", [
    ("bnt,n->bnt", "s=fp32[B, N, T]; h=fp32[N]", {"B": 2, "N": 4, "T": 8}),  # a head mask
    ("btd,d->btd", "s=bf16[B, T, D]; h=bf16[D]", {"B": 3, "T": 5, "D": 7}),  # a norm's scale
    ("b,f->bf", "s=fp32[B]; h=fp32[F]", {"B": 2, "F": 5}),  # an outer product
])
def test_an_einsum_with_no_summed_index_is_explained(spec, shapes, sizes):
    im = symroof.from_jax(lambda s, h: jnp.einsum(spec, s, h), shapes)
    elements = 1
    for d in sizes.values():
        elements *= d
    assert im.model(None, sizes).analysis.flops == elements  # one multiply per product
    check = im.xla(sizes)
    assert check["xla_lowered"]["flops"] == 2 * elements  # XLA: a dot, 2 per product
    assert check["flops_agree"] and list(check["explained_flops"].values()) == [elements]
    assert "no summed dim" in next(iter(check["explained_flops"]))


def _scan(unroll):
    def f(x, ws):
        return lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws, unroll=unroll)[0]
    return f


@pytest.mark.parametrize("length, unroll", [(3, 1), (5, 1), (3, 2), (5, 2), (3, True), (5, True), (5, 3),
                                            (4, 4), (4, 0), (7, 3)])
def test_an_unrolled_scan_is_compared_as_xla_counts_it(length, unroll):
    im = symroof.from_jax(_scan(unroll), f"x=fp32[B, D]; ws=fp32[{length}, D, D]")
    sizes = {"B": 2, "D": 8}
    body = 2 * 2 * 8 * 8  # one trip's matmul, by hand (the tanh: a transcendental)
    assert im.model(None, sizes).analysis.flops == length * body  # the whole scan: every trip
    check = im.xla(sizes)
    # JAX lowers a scan unrolled k as k copies of its body in a while loop (with a counter:
    # an add and a compare) and the remainder after it; all of them, with no loop, where one
    # trip would hold them all (unroll=True, or k = length; unroll=0)
    u = length if unroll is True else unroll  # (True == 1 in Python: named apart)
    k = u or length
    trips, rest = divmod(length, k)
    copies, looped = (k + rest, trips > 0) if (trips, rest) != (1, 0) else (length, False)
    if u == 1:
        copies, looped = 1, True
    assert check["symroof"]["flops"] == copies * body
    assert check["xla_lowered"]["flops"] == copies * body + 2 * looped
    assert check["symroof"]["transcendentals"] == check["xla_lowered"]["transcendentals"] == copies * 2 * 8
    assert check["flops_agree"] and check["transcendentals_agree"]


def test_an_unrolled_scan_inside_a_scan():
    def f(x, ws):
        def outer(h, w):
            return lax.scan(lambda g, v: (jnp.tanh(g @ v), None), h, w, unroll=2)[0], None
        return lax.scan(outer, x, ws)[0]
    im = symroof.from_jax(f, "x=fp32[B, D]; ws=fp32[3, 4, D, D]")
    check = im.xla({"B": 2, "D": 8})
    body = 2 * 2 * 8 * 8
    # the outer loop once, the inner's 2 copies in its loop: two counters
    assert check["xla_lowered"]["flops"] == 2 * body + 2 + 2
    assert check["flops_agree"]


def test_a_function_xla_folds_away_is_explained(capsys, tmp_path):
    im = symroof.from_jax(lambda x: x * 1.0, "x=fp32[B, D]")
    assert im.analysis.flops == sym("B") * sym("D")  # symroof counts what the jaxpr says
    check = im.xla({"B": 2, "D": 8})
    assert check["xla_lowered"]["flops"] == 0 and check["xla_lowered"]["bytes"] == 0
    assert check["flops_agree"] and check["bytes_within_lowered"] and check["bytes_without_folded"] == 0
    module = tmp_path / "folded.py"
    module.write_text("def f(x):\n    return x * 1.0\n")
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[B, D]", "--set", "B=2,D=8", "--xla"]) == 0
    out = capsys.readouterr().out
    assert "a bug" not in out and "less what XLA folds away" in out


def test_a_folded_op_beside_others_keeps_the_others_bytes():
    im = symroof.from_jax(lambda x, y: (x * 1.0) @ y, "x=fp32[B, D]; y=fp32[D, F]")
    check = im.xla({"B": 2, "D": 8, "F": 4})
    # without the folded multiply: the matmul's reads and write, by hand
    assert check["bytes_without_folded"] == 4 * (2 * 8 + 8 * 4 + 2 * 4)
    assert check["bytes_within_lowered"]


def test_an_unrolled_scan_of_a_symbolic_length():
    im = symroof.from_jax(_scan(2), "x=fp32[B, D]; ws=fp32[L, D, D]")
    body = 2 * 2 * 8 * 8
    for length, copies, looped in ((5, 3, True), (2, 2, False), (1, 1, False)):  # 2 in a loop and 1 after; all
        check = im.xla({"B": 2, "D": 8, "L": length})
        assert check["symroof"]["flops"] == copies * body
        assert check["xla_lowered"]["flops"] == copies * body + 2 * looped and check["flops_agree"]


def test_the_program_as_xla_counts_it():
    """Each repeat block's body counted as many times as XLA's lowered module holds it (its
    copies), read from the program's blocks, not its text; dropped statements left out."""
    from symroof.from_jax.importer import _as_xla_counts
    from symroof.lang import read_structured
    s = read_structured("fp32[B] + fp32[B] -> fp32[B]\nrepeat 5 {\n  exp(fp32[B]) -> fp32[B]\n  repeat 4 {\n"
                        "    neg(fp32[B]) -> fp32[B]\n  }\n}\nsqrt(fp32[B]) -> fp32[B]\n")
    assert s.counts == (1, 5, 20, 1)
    # the outer body (exp, and the inner loop's body once, neg dropped) three times
    once = _as_xla_counts(s, [3, 1], drop={2})
    assert once.counts == (1, 3, 1) and [b.count for b in once.blocks] == [3, 1]
    assert [str(st) for st in once.program.statements] == ["fp32[B] + fp32[B] -> fp32[B]", "exp(fp32[B]) -> fp32[B]",
                                                          "sqrt(fp32[B]) -> fp32[B]"]
    assert [b.statements for b in once.blocks] == [(1,), ()]
    assert _as_xla_counts(s, [1, 1]).counts == (1, 1, 1, 1)


def test_the_gradient_of_a_slice_with_a_symbolic_dim_is_a_pad():
    # x[:, :-1] with T symbolic traces to a gather of one window; its gradient scatters the
    # window into zeros (scatter-add), where at concrete sizes JAX traces a pad: GPT-2's loss
    im = symroof.from_jax(jax.grad(lambda x: jnp.sum(jnp.sin(x[:, :-1]))), "x=fp32[B, T]", least={"T": 2})
    assert statements(im)[-1] == "pad fp32[B, T1] -> fp32[B, T]"
    assert not im.converted.skipped
    b, t = sym("B"), sym("T")
    # by hand: the multiply by 1 on B·(T-1) (cos a transcendental each); the pad none
    assert sympy.expand(im.analysis.flops - b * (t - 1)) == 0
    assert sympy.expand(im.analysis.transcendentals - b * (t - 1)) == 0
    check = im.xla({"B": 4, "T": 8})
    assert check["flops_agree"] and check["not_costed"] == {}
    # cos: 28 read and written; the multiply 28 and the scalar read, 28 written; the pad 28 read, 32 written
    assert check["symroof"]["bytes"] == check["xla_lowered"]["bytes"] == 4 * (28 * 5 + 1 + 32)
