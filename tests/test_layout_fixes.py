"""Operands split over the same axes in another order (K_Y against K_{P,Y}): the gathers
that make them alike, by hand, and never a crash (issue 26, item 8: the fuzzer's case)."""

import io

import pytest
import sympy

from symroof import SpecError, analyze
from symroof.cli import main
from symroof.ir import dim_symbol

B, D, F, K = (dim_symbol(n) for n in "BDFK")

FUZZED = ("mesh X=1, P=3, Y=8@ici\n"
          "AllGather_X fp8[T_X, F] -> fp8[T, F]\n"
          "ReduceScatter_{X,P,F} fp32[T, F] {U_{X,P}} -> fp32[T, F_{XP}]\n"
          "int8[K_Y, D] * int8[K, D_{XP}] * int8[K_{PY}, F] -> int8[K, F]")


def test_the_fuzzers_case_is_a_one_line_error_naming_both_gathers():
    out, err = io.StringIO(), io.StringIO()
    assert main(["analyze", FUZZED, "--chip", "h100"], out=out, err=err) == 2
    message = err.getvalue().splitlines()[0]
    assert "internal error" not in message and "K is split over Y on the left and P, Y on the right" in message
    # K_Y's blocks of K/8 are not K_{P,Y}'s blocks of K/24 (chip (p, y) holds block 8p + y): the
    # left gathers Y, all of K (int8: K bytes), and slices K_{P,Y} from it; the right gathers P,
    # leaving K_Y: K/8 x F int8 bytes
    assert "AllGather_Y int8[K_Y] -> int8[K] (K bytes per chip" in message
    assert "AllGather_P int8[K_{P,Y}, F] -> int8[K_Y, F] (F*K/8 bytes per chip" in message


@pytest.mark.parametrize("spec, fixes", [
    # D_X against D_{Y,X}: the left gathers X (all of D, 2BD bytes); the right gathers Y and
    # keeps X, then equal to the left (2 x B x D/2 = BD bytes)
    ("mesh X=2, Y=2; bf16[B, D_X] + bf16[B, D_{YX}] -> bf16[B, D_{YX}]",
     ["AllGather_X bf16[B, D_X] -> bf16[B, D] (2*B*D bytes", "AllGather_Y bf16[B, D_{Y,X}] -> bf16[B, D_X] (B*D"]),
    # D_{X,Y} against D_{Y,X}: each keeps the first axis of the other's order, gathers the other
    ("mesh X=2, Y=2; bf16[B, D_{XY}] + bf16[D_{YX}] -> bf16[B, D_{XY}]",
     ["AllGather_X bf16[B, D_{X,Y}] -> bf16[B, D_Y] (B*D bytes", "AllGather_Y bf16[D_{Y,X}] -> bf16[D_X] (D bytes"]),
])
def test_splits_in_another_order_name_a_gather_each(spec, fixes):
    with pytest.raises(SpecError) as caught:
        analyze(spec)
    for fix in fixes:
        assert fix in str(caught.value)


def test_a_norms_scale_split_in_another_order_is_gathered_not_relabelled_for_free():
    # x is D_{X,Y}; the scale D_{Y,X}: chip (x, y) holds block 2y + x of the scale but needs
    # block 2x + y. It gathers Y (keeping D_X: 2 x D/2 = D bytes), then slices D_{X,Y}. The
    # row statistics: 1 fp32 per row of B, all-reduced over X, Y: 4B bytes.
    a = analyze("mesh X=2, Y=2; rmsnorm_D bf16[B, D_{XY}], bf16[D_{YX}] -> bf16[B, D_{XY}]")
    kinds = [(m.move.kind, m.move.axes) for m in a.cost.moves]
    assert kinds == [("AllGather", ("Y",)), ("AllReduce", ("X", "Y"))]
    assert sympy.simplify(_v(a) - (D + 4 * B)) == 0
    # the same scale written in x's order moves nothing of it
    same = analyze("mesh X=2, Y=2; rmsnorm_D bf16[B, D_{XY}], bf16[D_{XY}] -> bf16[B, D_{XY}]")
    assert sympy.simplify(_v(same) - 4 * B) == 0


def _v(analysis):
    """The collectives' V summed, bytes per chip (no chip needed)."""
    return sympy.Add(*(m.count * m.bytes for m in analysis.cost.moves))
