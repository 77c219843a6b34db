"""An imported program's parameters (issue 26, item 3): the arguments named as weights
(`params=` in Python, `--params` on the CLI; a pytree argument whole) and the arrays a
function closes over are declared `param`, so `symroof model` on the written program
counts params and weight_bytes, each checked against a hand count of the weights'
elements and bytes; what the program costs (FLOPs, HBM bytes) is unchanged.

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import sympy

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402

import symroof  # noqa: E402
from symroof.cli.command import main  # noqa: E402
from symroof.errors import SpecError, SymroofError  # noqa: E402

BLOCKS = Path(__file__).resolve().parents[1] / "data" / "jax_blocks.py"
MLP_SHAPES = "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]"


def sym(name):
    return symroof.dim_symbol(name)


def _mlp(x, w_up, w_down):
    return jax.nn.gelu(x @ w_up) @ w_down


def test_the_readme_mlp_gets_its_params():
    im = symroof.from_jax(_mlp, MLP_SHAPES, params="w_up, w_down")
    assert "param wUp: bf16[D, F]   # argument w_up" in im.text
    m = symroof.model(im.text, "prefill")
    d, f = sym("D"), sym("F")
    # by hand: w_up D·F and w_down F·D elements, 2 bytes each (bf16)
    assert sympy.expand(m.params - 2 * d * f) == 0
    assert sympy.expand(m.weight_bytes - 2 * 2 * d * f) == 0
    # the declarations count weights; what the program costs stays what it was
    bare = symroof.from_jax(_mlp, MLP_SHAPES)
    assert symroof.model(bare.text, "prefill").params == 0
    assert im.analysis.flops == bare.analysis.flops and im.analysis.bytes == bare.analysis.bytes


def test_the_cli_writes_params_that_symroof_model_counts(tmp_path, capsys):
    out = tmp_path / "mlp.sr"
    assert main(["from-jax", f"{BLOCKS}:mlp", "--shapes", MLP_SHAPES, "--params", "w_up,w_down",
                 "--set", "B=8,D=512,F=2048", "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["model", str(out), "--prefill", "--set", "B=8,D=512,F=2048", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["params"] == 2 * 512 * 2048  # by hand: D·F + F·D
    assert got["weight_bytes"] == 2 * 2 * 512 * 2048  # bf16
    assert got["memory_bytes"] >= got["weight_bytes"]
    # --params given twice adds up; a name --shapes does not give is one line, exit 2
    assert main(["from-jax", f"{BLOCKS}:mlp", "--shapes", MLP_SHAPES, "--params", "w_up", "--params", "w_down",
                 "-o", str(out)]) == 0
    assert out.read_text().count("\nparam ") == 2
    capsys.readouterr()
    assert main(["from-jax", f"{BLOCKS}:mlp", "--shapes", MLP_SHAPES]) == 0  # none named: said
    assert "params: none declared" in capsys.readouterr().out
    assert main(["from-jax", f"{BLOCKS}:mlp", "--shapes", MLP_SHAPES, "--params", "w_down", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["params_declared"] == ["param wDown: bf16[F, D]   # argument w_down"]
    assert main(["from-jax", f"{BLOCKS}:mlp", "--shapes", MLP_SHAPES, "--params", "w_gate"]) == 2
    err = capsys.readouterr().err
    assert "w_gate" in err and "Traceback" not in err and len(err.strip().splitlines()) <= 3


def test_arrays_the_function_closes_over_are_params():
    w = jnp.ones((8, 16), jnp.bfloat16) * 2
    scale = np.arange(16.0, dtype=np.float32)
    shift = jnp.float32(0.5)  # a scalar constant: no weight

    def f(x):
        h = jax.jit(lambda y: y @ w)(x) + jax.jit(lambda y: y @ w)(x)  # w closed over twice: one weight
        return h * scale + shift
    im = symroof.from_jax(f, "x=bf16[B, 8]")
    m = symroof.model(im.text, "prefill")
    assert m.params == 8 * 16 + 16  # by hand: w and scale
    assert m.weight_bytes == 8 * 16 * 2 + 16 * 4
    assert im.text.count("# an array the function closes over") == 2
    check = im.xla({"B": 4})
    assert check["flops_agree"]


def test_a_closed_over_weight_inside_a_scan():
    w = jnp.zeros((16, 16), jnp.float32)

    def f(x):
        return lax.scan(lambda h, _: (jnp.tanh(h @ w), None), x, None, length=3)[0]
    im = symroof.from_jax(f, "x=fp32[B, 16]")
    m = symroof.model(im.text, "prefill")
    assert m.params == 16 * 16 and m.weight_bytes == 16 * 16 * 4  # declared once, outside the loop


def test_a_pytree_argument_named_as_params():
    def f(p, x):
        for layer in p["layers"]:
            x = jnp.tanh(x @ layer["w"] + layer["b"])
        return x * p["scale"]
    shapes = ("x=fp32[B, D]; p.layers.0.w=fp32[D, D]; p.layers.0.b=fp32[D]; p.layers.1.w=fp32[D, D]; "
              "p.layers.1.b=fp32[D]; p.scale=fp32[D]")
    im = symroof.from_jax(f, shapes, params="p")
    m = symroof.model(im.text, "prefill")
    d = sym("D")
    assert sympy.expand(m.params - (2 * d * d + 3 * d)) == 0  # by hand: two D x D, three D
    assert sympy.expand(m.weight_bytes - 4 * (2 * d * d + 3 * d)) == 0
    # one layer's subtree alone
    one = symroof.from_jax(f, shapes, params=["p.layers.1"])
    assert sympy.expand(symroof.model(one.text, "prefill").params - (d * d + d)) == 0
    # the pytree traced as JAX flattens it: the counts agree with XLA's
    b = sym("B")
    assert sympy.expand(im.analysis.flops - (2 * (2 * b * d * d + b * d) + b * d)) == 0
    assert im.xla({"B": 3, "D": 8})["flops_agree"]


def test_pytree_and_params_input_errors():
    with pytest.raises(SpecError, match="both given"):
        symroof.from_jax(lambda p: p, "p=fp32[D]; p.w=fp32[D]")
    with pytest.raises(SpecError, match="which --shapes does not give"):
        symroof.from_jax(_mlp, MLP_SHAPES, params="x_up")
    with pytest.raises(SymroofError, match="give their names"):
        symroof.from_jax(_mlp, MLP_SHAPES, params=[1])
    with pytest.raises(SpecError, match="does not give p"):  # a pytree argument given by no leaf
        symroof.from_jax(lambda p, x: x, "x=fp32[D]")


def _sharded():
    import importlib.util
    path = Path(__file__).resolve().parents[1] / "data" / "jax_sharded.py"
    spec = importlib.util.spec_from_file_location("jax_sharded", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_weight_split_over_the_mesh_is_declared_as_each_chip_holds_it():
    sharded = _sharded()
    sizes = {"B": 64, "D": 32, "F": 16}
    # shard_map's in_specs: w [D, F] split over y (4 chips) on D
    im = symroof.from_jax(sharded.matmul, "x=bf16[B, D]; w=bf16[D, F]", params="w")
    assert "param w: bf16[D_Y, F]   # argument w" in im.text
    m = symroof.model(im.text, "prefill", None, sizes)
    assert m.params == 32 * 16  # every element, once
    assert m.hbm_per_chip == 2 * 32 * 16 // 4  # by hand: a chip holds a quarter, bf16
    # jit's in_shardings: w [D, F] split over y on F; x [B, D] over x on B (2 chips)
    jm = symroof.from_jax(sharded.jit_matmul(("x", None), (None, "y")), "x=bf16[B, D]; w=bf16[D, F]",
                          params="x, w")
    assert "param w: bf16[D, F_Y]" in jm.text and "param x: bf16[B_X, D]" in jm.text
    assert symroof.model(jm.text, "prefill", None, sizes).hbm_per_chip == 2 * 32 * 16 // 4 + 2 * 64 * 32 // 2
