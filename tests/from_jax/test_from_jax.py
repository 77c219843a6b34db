"""Importing JAX functions: each primitive family, symbolic dims surviving into the
program, warnings for what cannot be costed, and the counts against XLA's own cost
analysis of the same function (benchmarks/xla_conventions.md says what XLA counts).

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402

import symroof  # noqa: E402
from symroof.cli.command import main  # noqa: E402
from symroof.errors import SpecError, SymroofWarning  # noqa: E402
from symroof.from_jax.importer import read_shapes  # noqa: E402

BLOCKS = Path(__file__).resolve().parents[1] / "data" / "jax_blocks.py"


def sym(name):
    return symroof.dim_symbol(name)


def statements(imported) -> list[str]:
    return [s.text for s in imported.converted.statements]


def test_a_matmul_keeps_its_symbolic_dims():
    im = symroof.from_jax(lambda x, w: x @ w, "x=bf16[B, D]; w=bf16[D, F]")
    assert statements(im) == ["bf16[B, D] *_D bf16[D, F] -> bf16[B, F]"]
    a = im.analysis
    b, d, f = sym("B"), sym("D"), sym("F")
    assert a.flops == 2 * b * d * f and a.bytes == 2 * (b * d + d * f + b * f)
    assert "# inputs: x: bf16[B, D], w: bf16[D, F]" in im.text


def test_elementwise_unary_compare_select_and_powers():
    def f(x, y):
        z = jnp.where(x > y, jnp.exp(x) * 2.0, jnp.maximum(x, y) - y / x)
        return jnp.tanh(z) ** 3 + lax.rsqrt(jnp.abs(z) + 1.0)
    im = symroof.from_jax(f, "x=fp32[B, D]; y=fp32[B, D]")
    words = " ".join(statements(im))
    for word in ("compare(", "select(", "exp(", "max(", "tanh(", "rsqrt(", "abs(", " / ", " - ", " + "):
        assert word in words
    # x^3: two multiplies, as XLA lowers integer_pow
    assert sum(1 for s in im.converted.statements if s.primitive == "integer_pow") == 2
    assert im.xla({"B": 3, "D": 5})["flops_agree"]


def test_reductions_casts_and_layout_ops():
    def f(x):
        y = x.astype(jnp.float32).reshape(x.shape[0] * x.shape[1], x.shape[2]).T
        return jnp.max(y, axis=0) + jnp.sum(y, axis=0)
    im = symroof.from_jax(f, "x=bf16[B, T, D]")
    assert "let BT = B*T" in im.text  # a merged dim gets a name and a let line
    texts = statements(im)
    assert "bf16[B, T, D] -> fp32[B, T, D]" in texts
    assert any(t.startswith("max_D fp32[BT, D]") or t.startswith("max_D fp32[D, BT]") for t in texts)
    assert im.converted.layout["reshape"] == 1 and im.converted.layout["transpose"] == 1
    check = im.xla({"B": 2, "T": 3, "D": 4})
    assert check["flops_agree"] and check["bytes_within_lowered"]
    # the explained differences, by hand: the convert (2·3·4 elements), and two reductions
    # over D of the transposed [D, B·T] array, B·T = 6 outputs each
    assert check["explained_flops"] == {"XLA counts a convert as 1 FLOP per element": 24,
                                        "XLA counts T - 1 combines per output, symroof T": -12}


def test_a_square_weight_gets_an_alias_for_its_second_axis():
    im = symroof.from_jax(lambda x, w: x @ w, "x=fp32[B, D]; w=fp32[D, D]")
    assert statements(im) == ["fp32[B, D] *_D fp32[D, D2] -> fp32[B, D2]"] and "let D2 = D" in im.text
    assert im.analysis.flops == 2 * sym("B") * sym("D") ** 2


def test_batched_contractions_and_an_embedding_gather():
    im = symroof.from_jax(lambda q, k: jnp.einsum("bsh,bth->bst", q, k), "q=bf16[B, T, H]; k=bf16[B, T, H]")
    assert statements(im) == ["bf16[B, T, H] *_H bf16[B, T2, H] -> bf16[B, T, T2]"]
    im = symroof.from_jax(lambda table, ids: table[ids], "table=bf16[V, D]; ids=int32[B, T]")
    assert "gather bf16[V, D], int32[B, T] -> bf16[B, T, D]" in statements(im)
    assert im.xla({"V": 50, "D": 8, "B": 2, "T": 3})["flops_agree"]


def self_attention(q, k, v):
    """q, k, v [B, T, N, H]: S = T, so the scores' two axes are of one size."""
    scores = jnp.einsum("btnh,bsnh->bnts", q, k)
    return jnp.einsum("bnts,bsnh->btnh", jax.nn.softmax(scores, axis=-1), v)


def test_one_array_is_written_with_the_same_labels_wherever_it_is_read():
    im = symroof.from_jax(self_attention, "q=bf16[B, T, N, H]; k=bf16[B, T, N, H]; v=bf16[B, T, N, H]")
    texts = statements(im)
    # the scores are made [B, N, T, T2] (the keys' axis gets the alias) and read so by every
    # statement of the softmax, and by the values' contraction: v, not the probabilities,
    # is read with the alias there
    assert texts[0] == "bf16[B, T, N, H] *_H bf16[B, T2, N, H] -> bf16[B, N, T, T2]"
    assert texts[-2:] == ["bf16[B, N, T, T2] / bf16[B, N, T] -> bf16[B, N, T, T2]",
                          "bf16[B, T2, N, H] *_T2 bf16[B, N, T, T2] -> bf16[B, N, H, T]"]
    assert not any("T2, T]" in t for t in texts)  # never read the other way round
    # so the two statements fuse as written: the probabilities stay on chip
    made, read = (line for line in im.text.splitlines() if line.startswith(tuple(texts[-2:])))
    fused_text = im.text.replace(f"{made}\n{read}", f"fused {{\n  {made}\n  {read}\n}}")
    assert fused_text != im.text
    plain, fused = (symroof.model(text, "prefill").analysis for text in (im.text, fused_text))
    b, n, t = sym("B"), sym("N"), sym("T")
    saved = sympy.expand((plain.bytes - fused.bytes).subs(sym("T2"), t))
    assert saved == 2 * (2 * b * n * t ** 2)  # bf16[B, N, T, T]: written once and read once
    assert plain.flops == fused.flops


def test_nested_jit_custom_jvp_and_remat_are_inlined():
    inner = jax.jit(lambda x: jax.nn.relu(x) * 2.0)
    im = symroof.from_jax(jax.checkpoint(lambda x: inner(x) + 1.0), "x=fp32[B, D]")
    assert len(statements(im)) == 3  # max(x, 0), * 2, + 1
    assert im.xla({"B": 4, "D": 4})["flops_agree"]


def test_a_scan_is_a_repeat_block_and_a_fori_loop_has_its_trip_count():
    im = symroof.from_jax(_load("layers"), "x=fp32[B, D]; ws=fp32[L, D, D]")
    assert "repeat L {" in im.text
    b, d, layers = sym("B"), sym("D"), sym("L")
    assert sympy.expand(im.analysis.flops - layers * (2 * b * d ** 2 + b * d)) == 0  # a matmul and a relu a layer
    check = im.xla({"B": 4, "D": 8, "L": 3})
    assert check["loops_counted_once"] and check["flops_agree"]  # XLA counts the body once
    assert check["symroof_whole"]["flops"] == 3 * (2 * 4 * 64 + 32)
    im = symroof.from_jax(lambda x, w: lax.fori_loop(0, 5, lambda i, h: jnp.tanh(h @ w), x),
                          "x=fp32[B, D]; w=fp32[D, D]")
    assert "repeat 5 {" in im.text


def test_a_while_loop_without_a_known_count_gets_a_symbol_and_a_warning():
    def f(x, n):
        return lax.while_loop(lambda c: c[0] < n, lambda c: (c[0] + 1, jnp.tanh(c[1])), (0, x))[1]
    with pytest.warns(SymroofWarning, match="trip count is not known"):
        im = symroof.from_jax(f, "x=fp32[B, D]; n=int32[]")
    assert "repeat W1 {" in im.text
    assert im.model(None, {"B": 2, "D": 3, "W1": 4}).analysis.transcendentals == 4 * 6


def test_an_unknown_primitive_is_named_with_its_count():
    with pytest.warns(SymroofWarning, match=r"not costed: sort x 2"):
        im = symroof.from_jax(_load("sorted_scores"), "x=fp32[B, D]")
    assert "# NOT COSTED: sort x 2" in im.text
    check = im.xla({"B": 4, "D": 8})
    assert check["not_costed"] == {"sort": 2}


@pytest.mark.parametrize("name, shapes, sizes", [
    ("matmul", "x=bf16[B, D]; w=bf16[D, F]", [{"B": 8, "D": 16, "F": 32}, {"B": 3, "D": 5, "F": 7}]),
    ("mlp", "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]", [{"B": 4, "D": 8, "F": 32}, {"B": 5, "D": 3, "F": 7}]),
    ("attention", "q=bf16[B, S, N, H]; k=bf16[B, T, N, H]; v=bf16[B, T, N, H]",
     [{"B": 2, "S": 4, "T": 8, "N": 2, "H": 16}, {"B": 1, "S": 3, "T": 5, "N": 3, "H": 4}]),
    ("block", "x=bf16[B, T, D]; g1=bf16[D]; wq=bf16[D, N, H]; wk=bf16[D, N, H]; wv=bf16[D, N, H]; "
              "wo=bf16[N, H, D]; g2=bf16[D]; w_up=bf16[D, F]; w_down=bf16[F, D]",
     [{"B": 2, "T": 8, "D": 16, "N": 2, "H": 8, "F": 32}, {"B": 1, "T": 5, "D": 12, "N": 3, "H": 4, "F": 20}]),
])
def test_the_xla_cross_check_agrees_at_several_shapes(name, shapes, sizes):
    im = symroof.from_jax(_load(name), shapes)
    assert not im.warnings
    for at in sizes:
        check = im.xla(at)
        # FLOPs exactly, once converts (1 FLOP each in XLA) and reductions (T - 1) are counted
        # XLA's way; transcendentals exactly; bytes within the lowered module's, which writes
        # and reads every intermediate
        assert check["flops_agree"], check
        assert check["transcendentals_agree"], check
        assert check["bytes_within_lowered"], check
        # and the symbolic program, evaluated at these sizes, is the concrete one
        assert im.model(None, at).analysis.flops == check["symroof"]["flops"]


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 6), d=st.integers(1, 9), f=st.integers(1, 9))
def test_symbolic_import_at_sizes_is_the_concrete_import(b, d, f):
    mlp = _load("mlp")
    symbolic = symroof.from_jax(mlp, "x=fp32[B, D]; w_up=fp32[D, F]; w_down=fp32[F, D]")
    concrete = symroof.from_jax(mlp, f"x=fp32[{b}, {d}]; w_up=fp32[{d}, {f}]; w_down=fp32[{f}, {d}]")
    at = symbolic.model(None, {"B": b, "D": d, "F": f}).analysis
    assert at.flops == concrete.analysis.flops and at.bytes == concrete.analysis.bytes
    assert at.transcendentals == concrete.analysis.transcendentals


def test_bad_shapes_are_one_line_errors():
    for text, message in (("x=bf61[B, D]", "'bf61' is not a dtype"), ("x bf16[B]", "expected NAME=DTYPE"),
                          ("x=bf16[B, D+1]", "a dim is a name or a whole number"),
                          ("x=bf16[B]; x=bf16[D]", "given twice")):
        with pytest.raises(SpecError, match=message):
            read_shapes(text)
    with pytest.raises(SpecError, match="does not take"):
        symroof.from_jax(lambda x: x, "x=fp32[B]; y=fp32[B]")
    with pytest.raises(SpecError, match="JAX could not trace it"):
        symroof.from_jax(lambda x, w: x @ w, "x=fp32[B, D]; w=fp32[F, D]")


def test_the_command(capsys, tmp_path):
    target = f"{BLOCKS}:mlp"
    shapes = "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]"
    out_file = tmp_path / "mlp.sym"
    assert main(["from-jax", target, "--shapes", shapes, "--set", "B=4,D=8,F=32", "--xla", "--chip", "h100",
                 "-o", str(out_file)]) == 0
    text = capsys.readouterr().out
    assert "bf16[B, D] *_D bf16[D, F] -> bf16[B, F]" in text and "FLOPs: agree" in text and "T_lower" in text
    assert main(["model", str(out_file), "--prefill", "--set", "B=4,D=8,F=32"]) == 0  # the saved program runs
    capsys.readouterr()
    assert main(["from-jax", target, "--shapes", shapes, "--set", "B=4,D=8,F=32", "--xla", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["xla"]["flops_agree"] and found["flops"] == found["xla"]["symroof"]["flops"]
    # the chip's figures as given: an HBM bandwidth override sets T_comms = bytes / 1e9
    assert main(["from-jax", target, "--shapes", shapes, "--set", "B=4,D=8,F=32", "--chip", "h100",
                 "--hbm-bw", "1e9", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert found["t_comms"] == pytest.approx(found["bytes"] / 1e9, rel=1e-12)
    for argv, message in ((["nowhere:f"], "cannot import nowhere"), ([f"{BLOCKS}:missing"], "has no function"),
                          ([f"{BLOCKS}:mlp", "--xla"], "--xla compares at concrete sizes")):
        assert main(["from-jax", *argv, "--shapes", shapes]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert main(["from-jax", f"{BLOCKS}:sorted_scores", "--shapes", "x=fp32[B, D]"]) == 0
    assert "symroof: warning: not costed: sort x 2" in capsys.readouterr().err


def _load(name: str):
    from symroof.from_jax.importer import load_function
    return load_function(f"{BLOCKS}:{name}")
