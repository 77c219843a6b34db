"""Programs as objects (symroof/lang/source.py): each prints as the spec text it stands for,
and resolved directly (`structure.read_source`, no parse) it is the program its printed text
reads as, costs and all; where its text is refused, it is refused with the same words."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symroof.errors import SpecError
from symroof.ir import dim_symbol
from symroof.lang import syntax
from symroof.lang.source import (
    Apply,
    Backward,
    Blank,
    Collective,
    Comment,
    Contraction,
    Declare,
    Dim,
    Fused,
    Let,
    MeshLine,
    Op,
    Part,
    Program,
    Repeat,
    Tensor,
)
from symroof.lang.structure import Structured, read_source, read_structured
from symroof.roofline.cost import cost


def t(dtype: str, *dims: str, name: str | None = None, unreduced: str = "") -> Tensor:
    """bf16[B_X, D] as t("bf16", "B_X", "D")."""
    return Tensor(dtype, tuple(Dim(*d.split("_", 1)) for d in dims), name, unreduced)


def mm(a: Tensor, over: tuple[str, ...], w: Tensor, y: Tensor, comment: str | None = None) -> Contraction:
    return Contraction((a, w), (Op("*", over),), y, comment)


EVERY_FORM = Program((
    Comment("every form a program's objects print"),
    MeshLine((("X", 2, "ici"), ("Y", 4, "dcn"))),
    Let((("D", "8*H"), ("H", "128"), ("F", "4*D"))),
    Let((("tokens", "B*T"),)),
    Blank(),
    Declare("embedding", (t("bf16", "V", "D", name="Emb"),)),
    Apply("gather", (), "prefix", (t("bf16", "V", "D"), t("int32", "B_X", "T")), t("bf16", "B_X", "T", "D")),
    Repeat("L/2", (
        Part("mlp", (
            Declare("param", (t("bf16", "D", "F_Y", name="W1"), t("bf16", "F_Y", "D", name="W2")), "the MLP"),
            Declare("cache", (t("bf16", "B_X", "T", "D", name="Kc"),)),
            mm(t("bf16", "B_X", "T", "D", name="x"), ("D",), t("bf16", "D", "F_Y"), t("bf16", "B_X", "T", "F_Y")),
            Apply("gelu", (), "call", (t("bf16", "B_X", "T", "F_Y"),), t("bf16", "B_X", "T", "F_Y", name="h")),
            Fused((mm(t("bf16", "B_X", "T", "F_Y"), ("F",), t("bf16", "F_Y", "D"), t("fp32", "B_X", "T", "D")),
                   Apply("softmax", ("D",), "prefix", (t("fp32", "B_X", "T", "D"),), t("bf16", "B_X", "T", "D"))),
                  "one kernel"),
            Contraction((t("bf16", "B_X", "T", "D"), t("bf16", "B_X", "T", "D")), (Op("+"),),
                        t("bf16", "B_X", "T", "D"), "residual"),
        )),
    ), "half the layers"),
    Blank(),
    Collective("AllGather", ("X",), t("bf16", "B_X", "T", "D"), t("bf16", "B", "T", "D")),
    Blank(),
    Backward((
        Let((("J1", "2*F"),)),
        Collective("ReduceScatter", ("X", "T"), t("bf16", "B", "T", "D", unreduced="X"), t("bf16", "B", "T_X", "D"),
                   "a gradient"),
        Collective("AllReduce", ("XY",), t("bf16", "D", "J1", unreduced="XY"), t("bf16", "D", "J1")),
        Collective("AllToAll", ("X", "T"), t("bf16", "B_X", "T", "D"), t("bf16", "B", "T_X", "D")),
        mm(t("bf16", "B", "T_X", "J1"), ("J1",), t("bf16", "D", "J1"), t("bf16", "B", "T_X", "D")),
        mm(t("bf16", "B", "T_X", "D"), ("B", "T"), t("bf16", "B", "T_X", "F_Y"), t("bf16", "D", "F_Y")),
    ), "the backward pass"),
))

EVERY_FORM_TEXT = """\
# every form a program's objects print
mesh X=2, Y=4@dcn
let D = 8*H, H = 128, F = 4*D
let tokens = B*T

embedding Emb: bf16[V, D]
gather bf16[V, D], int32[B_X, T] -> bf16[B_X, T, D]
repeat L/2 {   # half the layers
  part mlp {
    param W1: bf16[D, F_Y], W2: bf16[F_Y, D]   # the MLP
    cache Kc: bf16[B_X, T, D]
    x: bf16[B_X, T, D] *_D bf16[D, F_Y] -> bf16[B_X, T, F_Y]
    gelu(bf16[B_X, T, F_Y]) -> h: bf16[B_X, T, F_Y]
    fused {   # one kernel
      bf16[B_X, T, F_Y] *_F bf16[F_Y, D] -> fp32[B_X, T, D]
      softmax_D fp32[B_X, T, D] -> bf16[B_X, T, D]
    }
    bf16[B_X, T, D] + bf16[B_X, T, D] -> bf16[B_X, T, D]   # residual
  }
}

AllGather_X bf16[B_X, T, D] -> bf16[B, T, D]

backward {   # the backward pass
  let J1 = 2*F
  ReduceScatter_{X,T} bf16[B, T, D] {U_X} -> bf16[B, T_X, D]   # a gradient
  AllReduce_{XY} bf16[D, J1] {U_{XY}} -> bf16[D, J1]
  AllToAll_{X,T} bf16[B_X, T, D] -> bf16[B, T_X, D]
  bf16[B, T_X, J1] *_J1 bf16[D, J1] -> bf16[B, T_X, D]
  bf16[B, T_X, D] *_{B,T} bf16[B, T_X, F_Y] -> bf16[D, F_Y]
}
"""


def same(a: Structured, b: Structured) -> None:
    """Two structured programs alike in all but the positions errors point at."""
    assert a.text == b.text and a.program == b.program
    assert a.counts == b.counts and a.parts == b.parts
    assert [(k.count, k.statements, k.parent) for k in a.blocks] == \
        [(k.count, k.statements, k.parent) for k in b.blocks]
    assert [(d.word, d.name, d.dtype, d.dims, d.count, d.block, d.split, d.axes) for d in a.declared] == \
        [(d.word, d.name, d.dtype, d.dims, d.count, d.block, d.split, d.axes) for d in b.declared]
    assert a.relations == b.relations and a.lets == b.lets
    assert (a.backward is None) == (b.backward is None)
    if a.backward is not None and b.backward is not None:
        same(a.backward, b.backward)
    assert cost(a.program).flops == cost(b.program).flops and cost(a.program).bytes == cost(b.program).bytes


def test_every_form_prints_as_written():
    assert str(EVERY_FORM) == EVERY_FORM_TEXT


def test_objects_resolve_as_their_text_reads_without_a_parse(monkeypatch):
    direct = read_structured(EVERY_FORM)
    same(direct, read_structured(EVERY_FORM_TEXT))
    assert direct.parts == (None, "mlp", "mlp", "mlp", "mlp", None)
    assert direct.counts == (1, L / 2, L / 2, L / 2, L / 2, 1)
    assert direct.backward is not None and len(direct.backward.program.statements) == 5

    def refuse(*args):
        raise AssertionError("an object program was parsed")
    monkeypatch.setattr(syntax, "_parser", refuse)
    syntax._chunk.cache_clear()
    same(read_source(EVERY_FORM), direct)


def test_a_program_refused_as_objects_says_what_its_text_says():
    p = Program((MeshLine((("X", 3, "ici"),)), Let((("D", "64"),)), Declare("param", (t("bf16", "D_X", name="W"),)),
                 Apply("gelu", (), "call", (t("bf16", "B_X", "D"),), t("bf16", "B_X", "D"))))
    with pytest.raises(SpecError) as from_text:
        read_structured(str(p))
    with pytest.raises(SpecError) as from_objects:
        read_source(p)
    assert "does not split evenly over X (3 chips)" in str(from_objects.value)
    assert str(from_objects.value) == str(from_text.value)  # caret and all
    assert str(from_text.value).split("\n")[1].strip() == "param W: bf16[D_X]"  # the line the caret is under


DIMS = ("B", "T", "D", "F")
L = dim_symbol("L")


@st.composite
def programs(draw: st.DrawFn) -> Program:
    """Small programs: a mesh maybe, lets, declarations, matmuls, elementwise ops,
    collectives, inside repeat and part blocks drawn at random; most are valid."""
    axes = draw(st.sampled_from(["", "X", "XY"]))
    split = dict.fromkeys(DIMS, "")  # B over X, F over Y: an axis splits one dim of a tensor
    split["B"] = draw(st.sampled_from(["", "X"])) if axes else ""
    split["F"] = draw(st.sampled_from(["", "Y"])) if axes == "XY" else ""
    declared = iter(range(1000))

    def dims(*names: str) -> Tensor:
        return Tensor(draw(st.sampled_from(["bf16", "fp32", "int8"])), tuple(Dim(n, split[n]) for n in names))

    def statement() -> Contraction | Apply | Collective:
        kind = draw(st.integers(0, 3))
        if kind == 0:
            return mm(dims("B", "T", "D"), ("D",), dims("D", "F"), dims("B", "T", "F"))
        if kind == 1:
            return Apply(draw(st.sampled_from(["gelu", "silu"])), (), "call", (dims("B", "T", "F"),),
                         dims("B", "T", "F"))
        if kind == 2 or not split["B"]:
            return Apply("softmax", ("F",), "prefix", (dims("B", "T", "F"),), dims("B", "T", "F"))
        source = dims("B", "T", "D")
        return Collective("AllGather", (axes[0],), replace_dim(source, "B", axes[0]), replace_dim(source, "B", ""))

    def body(depth: int) -> tuple:
        items: list = []
        for _ in range(draw(st.integers(1, 3))):
            roll = draw(st.integers(0, 5))
            if roll == 0 and depth < 2:
                items.append(Repeat(draw(st.sampled_from(["L", "2", "L/2"])), body(depth + 1)))
            elif roll == 1 and depth < 2:
                items.append(Part(draw(st.sampled_from(["attention", "mlp"])), body(depth + 1)))
            elif roll == 2:
                name = f"W{next(declared)}"
                items.append(Declare("param", (replace_name(dims("D", "F"), name),)))
            else:
                items.append(statement())
        return tuple(items)

    mesh = (MeshLine(tuple((a, 2, "ici") for a in axes)),) if axes else ()
    lets = Let((("L", "4"), ("F", draw(st.sampled_from(["4*D", "2*D + 6", "8192"])))))
    return Program((*mesh, lets, *body(0)))


def replace_dim(t: Tensor, name: str, axes: str) -> Tensor:
    return t.with_dims([Dim(name, axes) if d.name == name else d for d in t.dims])


def replace_name(t: Tensor, name: str) -> Tensor:
    return Tensor(t.dtype, t.dims, name)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(p=programs())
def test_objects_and_their_printed_text_resolve_alike_or_fail_alike(p):
    try:
        from_text = read_structured(str(p))
    except SpecError as err:
        with pytest.raises(SpecError) as from_objects:
            read_source(p)
        assert str(from_objects.value) == str(err)
        return
    same(read_source(p), from_text)
