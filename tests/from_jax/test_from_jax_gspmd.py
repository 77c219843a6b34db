"""Importing jit's shardings (GSPMD): the mesh, the inputs' splits, the splits carried
through each statement, the collectives symroof's engine inserts where layouts demand
them, what is ambiguous said; per-chip counts by hand and against XLA's partitioned module.

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")

import symroof  # noqa: E402
from symroof.errors import SymroofError, SymroofWarning  # noqa: E402
from symroof.from_jax.importer import load_function  # noqa: E402

SHARDED = Path(__file__).resolve().parents[1] / "data" / "jax_sharded.py"
B, D, F, T = (symroof.dim_symbol(n) for n in "BDFT")
MATMUL = "x=bf16[B, D]; w=bf16[D, F]"


def load(name: str):
    return load_function(f"{SHARDED}:{name}")


def statements(imported) -> list[str]:
    return [s.text for s in imported.converted.statements]


def collectives(analysis) -> list[str]:
    return [str(c).split(":")[0] for c in analysis.collectives]


def test_a_batch_split_matmul_is_costed_per_chip_with_no_collective():
    im = symroof.from_jax(load("jit_matmul")(("x", None), (None, None)), MATMUL)
    assert "mesh X=2, Y=4" in im.text and "# inputs: x: bf16[B_X, D], w: bf16[D, F]" in im.text
    assert statements(im) == ["bf16[B_X, D] *_D bf16[D, F] -> bf16[B_X, F]"]
    a = im.model("tpu-v5p").analysis
    assert a.flops == 2 * B * D * F / 2  # each chip multiplies its half of the batch by all of w
    assert collectives(a) == []
    assert not [w for w in im.warnings if "costed whole" in w]


def test_a_contraction_split_on_both_sides_is_allreduced_by_symroofs_engine():
    im = symroof.from_jax(load("jit_matmul")((None, "y"), ("y", None)), MATMUL)
    # written without {U_Y}: the result is whole, so symroof inserts the AllReduce
    assert statements(im) == ["bf16[B, D_Y] *_D bf16[D_Y, F] -> bf16[B, F]"]
    a = im.model("tpu-v5p").analysis
    assert a.flops == 2 * B * D * F / 4
    assert collectives(a) == ["AllReduce_Y bf16[B, F] {U_Y}"]
    both = symroof.from_jax(load("jit_matmul")(("x", "y"), ("y", None)), MATMUL).model("tpu-v5p").analysis
    assert both.flops == 2 * B * D * F / 8 and collectives(both) == ["AllReduce_Y bf16[B_X, F] {U_Y}"]


def test_a_constraint_lays_the_result_out_and_symroof_moves_it_there():
    im = symroof.from_jax(load("constrained"), MATMUL)
    # the constraint F_Y on the partial sums: a ReduceScatter; out_shardings whole: an AllGather
    assert statements(im) == ["bf16[B, D_Y] *_D bf16[D_Y, F] -> bf16[B, F_Y]", "tanh(bf16[B, F_Y]) -> bf16[B, F]"]
    a = im.model("tpu-v5p").analysis
    assert collectives(a) == ["ReduceScatter_{Y,F} bf16[B, F] {U_Y}", "AllGather_Y bf16[B, F_Y]"]
    assert a.flops == 2 * B * D * F / 4 and a.transcendentals == B * F / 4
    im = symroof.from_jax(load("jit_matmul")(("x", None), (None, None), (None, "x")), MATMUL)
    assert statements(im) == ["bf16[B_X, D] *_D bf16[D, F] -> bf16[B, F_X]"]
    assert collectives(im.model("tpu-v5p").analysis) == ["AllToAll_{X,F} bf16[B_X, F]"]


def test_a_constraint_on_a_value_already_read_writes_the_move_out():
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P
    mesh = jax.sharding.AbstractMesh((2,), ("x",))

    def f(x):
        y = x * 2
        z = y * 3  # y read as made, then constrained: the move is written out
        return z + jax.lax.with_sharding_constraint(y, NamedSharding(mesh, P(None, "x")))
    with pytest.warns(SymroofWarning, match="add: its operands' splits could be resolved more than one way"):
        im = symroof.from_jax(jax.jit(f, in_shardings=NamedSharding(mesh, P("x", None))), "x=fp32[B, D]")
    assert statements(im) == ["fp32[B_X, D] * fp32[] -> fp32[B_X, D]", "fp32[B_X, D] * fp32[] -> fp32[B_X, D]",
                              "AllToAll_{X,D} fp32[B_X, D] -> fp32[B, D_X]",
                              # the add's operands disagree: the first's split kept, the other's gathered
                              "AllGather_X fp32[B, D_X] -> fp32[B, D]", "fp32[B_X, D] + fp32[B, D] -> fp32[B_X, D]"]


def test_splits_carry_through_an_mlp_and_a_merging_reshape():
    im = symroof.from_jax(load("jit_mlp")(), "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]")
    texts = statements(im)
    assert texts[0] == "bf16[B_X, D] *_D bf16[D, F_Y] -> bf16[B_X, F_Y]"
    assert all("[B_X, F_Y]" in t for t in texts[1:-1])  # gelu's elementwise work keeps both splits
    assert texts[-1] == "bf16[B_X, F_Y] *_F bf16[F_Y, D] -> bf16[B_X, D]"
    assert collectives(im.model("tpu-v5p").analysis) == ["AllReduce_Y bf16[B_X, D] {U_Y}"]
    im = symroof.from_jax(load("flattened"), "x=bf16[B, T, D]; w=bf16[D, F]")
    assert statements(im) == ["bf16[BT_X, D] *_D bf16[D, F_Y] -> bf16[BT_X, F_Y]"]  # B was the major dim
    assert im.analysis.flops == 2 * B * T * D * F / 8


def test_a_scan_and_a_shard_map_under_jit_keep_their_splits():
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P
    mesh = jax.sharding.AbstractMesh((2, 4), ("x", "y"))

    def layers(x, ws):
        return jax.lax.scan(lambda h, w: (jax.numpy.tanh(h @ w), None), x, ws)[0] * 2
    im = symroof.from_jax(jax.jit(layers, in_shardings=(NamedSharding(mesh, P("x", None)),
                                                        NamedSharding(mesh, P(None, None, "y")))),
                          "x=bf16[B, D]; ws=bf16[L, D, D]")
    # each layer's slice of ws keeps its split, and the loop's result is split as the body
    # left it (the body is written as its first trip reads the carry)
    assert statements(im) == ["bf16[B_X, D] *_D bf16[D, D2_Y] -> bf16[B_X, D2_Y]",
                              "tanh(bf16[B_X, D2_Y]) -> bf16[B_X, D2_Y]", "bf16[B_X, D_Y] * bf16[] -> bf16[B_X, D_Y]"]
    # a shard_map's results are laid out by its out_specs for what GSPMD splits after it
    im = symroof.from_jax(jax.jit(lambda x, w: jax.numpy.tanh(load("matmul")(x, w)),
                                  in_shardings=(NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P()))), MATMUL)
    assert statements(im)[-1] == "tanh(bf16[B_X, F]) -> bf16[B_X, F]"
    assert not [w for w in im.warnings if "costed whole" in w]


def test_an_ambiguous_layout_is_said_with_the_choice_made():
    # B and F both split over 'x': the result can keep only one
    with pytest.warns(SymroofWarning, match=r"mesh axis 'x' splits B and F.*keeps the first operand's splits in the "
                                            r"result \(split: B_X\), gathers 1 operand dim"):
        im = symroof.from_jax(load("jit_matmul")(("x", None), (None, "x")), MATMUL)
    assert statements(im) == ["AllGather_X bf16[D, F_X] -> bf16[D, F]", "bf16[B_X, D] *_D bf16[D, F] -> bf16[B_X, F]"]
    a = im.model("tpu-v5p").analysis
    assert a.flops == 2 * B * D * F / 2 and collectives(a) == ["AllGather_X bf16[D, F_X]"]


def test_what_is_not_read_is_said():
    from jax.sharding import SingleDeviceSharding
    f = jax.jit(lambda x: x * 2, in_shardings=SingleDeviceSharding(jax.devices()[0]))
    with pytest.warns(SymroofWarning, match=r"jit's in_shardings \(a SingleDeviceSharding\) is not read"):
        im = symroof.from_jax(f, "x=fp32[B]")
    assert statements(im) == ["fp32[B] * fp32[] -> fp32[B]"]
    with pytest.raises(SymroofError, match="not yet partitioned: not compared"):
        symroof.from_jax(load("jit_matmul")(), MATMUL).xla({"B": 4, "D": 4, "F": 4})


@settings(max_examples=10, deadline=None)
@given(mx=st.sampled_from([1, 2, 4]), my=st.sampled_from([1, 2, 4]), layout=st.sampled_from(["megatron", "mixed"]),
       b=st.integers(1, 3), d=st.integers(1, 3), f=st.integers(1, 3))
def test_per_chip_flops_times_chips_is_the_unsharded_count(mx, my, layout, b, d, f):
    """Where every statement is split over every mesh axis (no chip repeats another's work),
    the chips' FLOPs add up to the function's."""
    from jax.sharding import AbstractMesh, NamedSharding
    from jax.sharding import PartitionSpec as P
    mesh = AbstractMesh((mx, my), ("x", "y"))
    specs = {"megatron": (P("x", None), P(None, "y"), P("y", None)),  # batch; columns, then rows
             "mixed": (P("x", "y"), P("y", None), P(None, None))}[layout]  # the first contraction split
    body = (lambda x, w1, w2: jax.nn.gelu(x @ w1) @ w2) if layout == "megatron" else (lambda x, w1, w2: x @ w1)
    shapes = "x=fp32[B, D]; w1=fp32[D, F]; w2=fp32[F, D]"
    sharded = symroof.from_jax(jax.jit(body, in_shardings=tuple(NamedSharding(mesh, s) for s in specs)), shapes)
    plain = symroof.from_jax(body, shapes)
    sizes = {"B": b * mx, "D": d * my, "F": f * my}
    assert sharded.model(None, sizes).analysis.flops * mx * my == plain.model(None, sizes).analysis.flops


_COMPILED = textwrap.dedent("""
    import importlib.util, json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax, jax.numpy as jnp
    spec = importlib.util.spec_from_file_location("fixtures", sys.argv[1])
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    out = {}
    for name, args, shapes in json.loads(sys.argv[2]):
        f = getattr(fixtures, name)(*[tuple(a) if a is not None else None for a in args])
        lowered = jax.jit(f).trace(*[jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]).lower(
            lowering_platforms=("cpu",))
        out[name + repr(args)] = lowered.compile(device_assignment=tuple(jax.devices()[:8])).cost_analysis()["flops"]
    print(json.dumps(out))
""")


def test_per_chip_flops_against_xlas_partitioned_module():
    """XLA's lowered module of a jit with shardings is the whole program before it is
    partitioned (its counts are the mesh's); the compiled one is one chip's, and compiles
    only with a device per chip: 8 host devices, in a process of its own (XLA_FLAGS is read
    when JAX starts). Its FLOPs are symroof's per chip plus XLA's AllReduce combine, one
    FLOP per element of the result on a chip."""
    sizes = {"B": 16, "D": 32, "F": 64}
    cases = [("jit_matmul", [["x", None], [None, None]], 0),
             ("jit_matmul", [[None, "y"], ["y", None]], 16 * 64),     # AllReduce of [B, F]
             ("jit_matmul", [["x", "y"], ["y", None]], 8 * 64),       # of [B/2, F]
             ("jit_mlp", [], 8 * 32)]                                 # of [B/2, D]
    shapes = {"jit_matmul": [[16, 32], [32, 64]], "jit_mlp": [[16, 32], [32, 64], [64, 32]]}
    done = subprocess.run([sys.executable, "-c", _COMPILED, str(SHARDED),
                           json.dumps([(name, args, shapes[name]) for name, args, _ in cases])],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "XLA_FLAGS": ""})
    assert done.returncode == 0, done.stderr
    xla = json.loads(done.stdout.splitlines()[-1])
    for name, args, combine in cases:
        function = load(name)(*[tuple(a) if a is not None else None for a in args])
        im = symroof.from_jax(function, "x=fp32[B, D]; w=fp32[D, F]" if name == "jit_matmul"
                              else "x=fp32[B, D]; w_up=fp32[D, F]; w_down=fp32[F, D]")
        per_chip = im.model(None, sizes).analysis.flops
        assert int(xla[name + repr(args)]) == int(per_chip) + combine, (name, args)
    assert sympy.Integer(per_chip) == 2 * 2 * 8 * 32 * 16 + 8 * 8 * 16  # the MLP: two matmuls, gelu's 8 ops


# -- explicit sharding: each value's type carries its layout ------------------------------

def explicit(*args):
    return symroof.from_jax(load("explicit_matmul")(*args), "x=fp32[B, D]; w=fp32[D, F]")


def test_reshard_under_explicit_axes_lays_out_each_value_as_its_type_says():
    im = explicit()
    assert "# inputs: x: fp32[B_X, D], w: fp32[D, F_Y]" in im.text and "reshard x 3" in im.text
    # the product as JAX's rule types it (B over x, F over y); the last reshard gathers F
    assert statements(im) == ["fp32[B_X, D] *_D fp32[D, F_Y] -> fp32[B_X, F_Y]",
                              "tanh(fp32[B_X, F_Y]) -> fp32[B_X, F]"]
    a = im.model("tpu-v5p").analysis
    assert a.flops == 2 * B * D * F / 8 and a.transcendentals == B * F / 8
    assert collectives(a) == ["AllGather_Y fp32[B_X, F_Y]"]
    assert not im.warnings


def test_a_products_out_sharding_is_its_type_a_reduce_scatter_not_an_allreduce():
    # the contraction split over y: the product typed P('x', 'y') is scattered over y
    scattered = explicit(("x", "y"), ("y", None), ("x", None), ("x", "y"))
    assert statements(scattered)[0] == "fp32[B_X, D_Y] *_D fp32[D_Y, F] -> fp32[B_X, F_Y]"
    assert collectives(scattered.model("tpu-v5p").analysis) == ["ReduceScatter_{Y,F} fp32[B_X, F] {U_Y}",
                                                                "AllGather_Y fp32[B_X, F_Y]"]
    # typed P('x', None): summed whole, an AllReduce
    summed = explicit(("x", "y"), ("y", None), ("x", None), ("x", None))
    assert statements(summed)[0] == "fp32[B_X, D_Y] *_D fp32[D_Y, F] -> fp32[B_X, F]"
    assert collectives(summed.model("tpu-v5p").analysis) == ["AllReduce_Y fp32[B_X, F] {U_Y}"]
    # JAX's own refusal, typed out of the split dims' scaling: no out_sharding given
    with pytest.raises(symroof.SpecError, match="ambiguous how the output should be sharded"):
        explicit(("x", "y"), ("y", None), ("x", None))


_EXPLICIT = textwrap.dedent("""
    import importlib.util, json, os, sys
    os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    os.environ["JAX_PLATFORMS"] = "cpu"
    import jax, jax.numpy as jnp
    spec = importlib.util.spec_from_file_location("fixtures", sys.argv[1])
    fixtures = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixtures)
    mesh = jax.make_mesh((2, 4), ("x", "y"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    out = []
    for args in json.loads(sys.argv[2]):
        with jax.set_mesh(mesh):
            lowered = jax.jit(fixtures.explicit_matmul(*[tuple(a) for a in args])).trace(
                jax.ShapeDtypeStruct((16, 32), jnp.float32), jax.ShapeDtypeStruct((32, 64), jnp.float32)).lower()
            costs = lowered.compile().cost_analysis()
        out.append([costs["flops"], costs["transcendentals"]])
    print(json.dumps(out))
""")


def test_explicit_sharding_per_chip_against_xlas_partitioned_module():
    """One chip's FLOPs and transcendentals against the compiled module on 8 host devices
    under a mesh of explicit axes. XLA's FLOPs add its AllReduce's combine, 1 per element
    of [B/2, F] (512); on CPU a ReduceScatter is that AllReduce and then a slice at the
    chip's offset, whose index arithmetic (clamp, convert, multiply) XLA counts too (3)."""
    sizes = {"B": 16, "D": 32, "F": 64}
    cases = [([["x", None], [None, "y"], ["x", None]], 0),
             ([["x", "y"], ["y", None], ["x", None], ["x", None]], 512),
             ([["x", "y"], ["y", None], ["x", None], ["x", "y"]], 512 + 3)]
    done = subprocess.run([sys.executable, "-c", _EXPLICIT, str(SHARDED), json.dumps([args for args, _ in cases])],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "XLA_FLAGS": ""})
    assert done.returncode == 0, done.stderr
    for (args, combine), (flops, transcendentals) in zip(cases, json.loads(done.stdout.splitlines()[-1])):
        a = explicit(*[tuple(s) for s in args]).model(None, sizes).analysis
        assert int(flops) == int(a.flops) + combine, args
        assert int(transcendentals) == int(a.transcendentals), args
