"""Operands split over the same axes in another order (K_Y against K_{P,Y}): the gathers
that make them alike, by hand, and never a crash (issue 26, item 8: the fuzzer's case)."""

import io
import itertools

import pytest
import sympy

from symroof import SpecError, analyze
from symroof.cli.command import main
from symroof.ir import dim_symbol
from symroof.sharding.routes import kept_axes

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
    # left gathers Y, all of K (int8: K bytes), and slices K_{P,Y} from it. The right cannot
    # gather P alone: chip y would hold blocks y, 8 + y, 16 + y, not K_Y's block y (the 3
    # blocks 3y, 3y + 1, 3y + 2), so it gathers P and Y, all of K x F (K*F int8 bytes)
    assert "AllGather_Y int8[K_Y] -> int8[K] (K bytes per chip" in message
    assert "AllGather_{P,Y} int8[K_{P,Y}, F] -> int8[K, F] (F*K bytes per chip" in message


@pytest.mark.parametrize("spec, fixes", [
    # D_X against D_{Y,X}: the left gathers X (all of D, 2BD bytes) and slices D_{Y,X}. The
    # right cannot gather Y alone and keep X: with D in 4 blocks, chip (y, x) holds block
    # 2y + x, and gathered over Y chip x holds blocks x and 2 + x, where D_X's chip x holds
    # blocks 2x and 2x + 1. So it gathers both, all of D: 2BD bytes
    ("mesh X=2, Y=2; bf16[B, D_X] + bf16[B, D_{YX}] -> bf16[B, D_{YX}]",
     ["AllGather_X bf16[B, D_X] -> bf16[B, D] (2*B*D bytes",
      "AllGather_{Y,X} bf16[B, D_{Y,X}] -> bf16[B, D] (2*B*D bytes"]),
    # D_{X,Y} against D_{Y,X}: no common outer axis, so each side gathers both, all of D
    ("mesh X=2, Y=2; bf16[B, D_{XY}] + bf16[D_{YX}] -> bf16[B, D_{XY}]",
     ["AllGather_{X,Y} bf16[B, D_{X,Y}] -> bf16[B, D] (2*B*D bytes",
      "AllGather_{Y,X} bf16[D_{Y,X}] -> bf16[D] (2*D bytes"]),
])
def test_splits_in_another_order_name_a_gather_each(spec, fixes):
    with pytest.raises(SpecError) as caught:
        analyze(spec)
    for fix in fixes:
        assert fix in str(caught.value)


def test_a_norms_scale_split_in_another_order_is_gathered_not_relabelled_for_free():
    # x is D_{X,Y}; the scale D_{Y,X}: chip (x, y) holds block 2y + x of the scale but needs
    # block 2x + y. Gathered over Y alone, chip x would hold blocks x and 2 + x, not the
    # needed 2x and 2x + 1; so it gathers Y and X (all of the bf16 scale: 2D bytes), then
    # slices D_{X,Y}. The row statistics: 1 fp32 per row of B, all-reduced over X, Y: 4B bytes.
    a = analyze("mesh X=2, Y=2; rmsnorm_D bf16[B, D_{XY}], bf16[D_{YX}] -> bf16[B, D_{XY}]")
    kinds = [(m.move.kind, m.move.axes) for m in a.cost.moves]
    assert kinds == [("AllGather", ("Y", "X")), ("AllReduce", ("X", "Y"))]
    assert sympy.simplify(_v(a) - (2 * D + 4 * B)) == 0
    # the same scale written in x's order moves nothing of it
    same = analyze("mesh X=2, Y=2; rmsnorm_D bf16[B, D_{XY}], bf16[D_{XY}] -> bf16[B, D_{XY}]")
    assert sympy.simplify(_v(same) - 4 * B) == 0


def _v(analysis):
    """The collectives' V summed, bytes per chip (no chip needed)."""
    return sympy.Add(*(m.count * m.bytes for m in analysis.cost.moves))


MESH = {"X": 2, "Y": 3, "Z": 2}


def _splits():
    """Every split of one dim over the mesh's axes: none, one, two or three, in every order."""
    return [s for n in range(4) for s in itertools.permutations(MESH, n)]


def _held(axes, chip, n):
    """The elements of a dim of n a chip holds under a split (outermost axis first): block
    ((c1 * s2 + c2) * s3 + c3) of s1 * s2 * s3."""
    block, count = 0, 1
    for a in axes:
        block, count = block * MESH[a] + chip[a], count * MESH[a]
    size = n // count
    return set(range(block * size, (block + 1) * size))


def _gathered(axes, gather, chip, n):
    """What a chip holds once the split `axes` is gathered over `gather`: the union over the
    chips that differ from it only along those axes."""
    held = set()
    for values in itertools.product(*(range(MESH[a]) for a in gather)):
        held |= _held(axes, {**chip, **dict(zip(gather, values))}, n)
    return held


def test_what_a_gather_keeps_is_a_layout_that_slices_to_the_other_and_no_fewer_axes_would_do():
    """Brute force over every pair of splits of a dim of 12 on a 2 x 3 x 2 mesh, element by
    element: gathering the axes `kept_axes` does not keep leaves each chip exactly the layout
    of the kept axes (a layout, not strided blocks), holding every element the other split
    needs there; and gathering any fewer of them leaves some chip without one it needs, or
    leaves strided blocks that no split describes. (Strided blocks can still hold what is
    needed: X, Y gathered over X gives chip y blocks y and 3 + y of 6, which Z, Y's chips need
    where X and Z are both 2. symroof's layouts cannot say so, and it gathers both: more
    bytes than the least, never fewer than the needed.)"""
    n = 12
    chips = [dict(zip(MESH, c)) for c in itertools.product(*(range(s) for s in MESH.values()))]

    def a_layout(got: dict) -> bool:
        return any(all(got[k] == _held(split, c, n) for k, c in enumerate(chips)) for split in _splits())

    for have, other in itertools.product(_splits(), _splits()):
        kept = kept_axes(have, other)
        gather = tuple(a for a in have if a not in kept)
        for chip in chips:
            got = _gathered(have, gather, chip, n)
            assert got == _held(kept, chip, n), (have, other, kept)
            assert _held(other, chip, n) <= got, (have, other, kept)
        for fewer in (g for k in range(len(gather)) for g in itertools.combinations(gather, k)):
            got = {k: _gathered(have, fewer, c, n) for k, c in enumerate(chips)}
            covers = all(_held(other, c, n) <= got[k] for k, c in enumerate(chips))
            assert not (covers and a_layout(got)), (have, other, fewer)
