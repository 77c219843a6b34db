"""The convolution op kind (issue 30): N-d, any layout (dims matched by name), grouped and
depthwise; its FLOPs and bytes by hand, brute force over the loop nest at small sizes, its
errors one line each, and its sharding over batch, channels and space."""

from __future__ import annotations

import itertools

import pytest
import sympy

import symroof
from symroof.errors import SpecError


def s(name: str) -> sympy.Symbol:
    return symroof.dim_symbol(name)


def _brute(out_shape: dict[str, int], window: dict[str, int], cin: int) -> int:
    """Multiply-adds of a dense convolution, counted one loop iteration at a time: for each
    result element, each window position and input feature, one multiply and one add."""
    n = 0
    for _ in itertools.product(*(range(k) for k in out_shape.values())):
        for _ in itertools.product(*(range(k) for k in window.values()), range(cin)):
            n += 2
    return n


@pytest.mark.parametrize("spec, sizes, out, window, cin", [
    # 2-d NHWC, 3x3, stride 1 VALID: H2 = H - 2
    ("conv_{H,W} bf16[B, H, W, C], bf16[KH, KW, C, F] -> bf16[B, H2, W2, F]",
     {"B": 2, "H": 6, "W": 5, "C": 3, "KH": 3, "KW": 3, "F": 4, "H2": 4, "W2": 3},
     {"B": 2, "H2": 4, "W2": 3, "F": 4}, {"KH": 3, "KW": 3}, 3),
    # NCHW, stride 2: only the result's sizes matter
    ("conv_{H,W} fp32[B, C, H, W], fp32[F, C, KH, KW] -> fp32[B, F, H2, W2]",
     {"B": 1, "C": 2, "H": 7, "W": 7, "F": 3, "KH": 3, "KW": 3, "H2": 3, "W2": 3},
     {"B": 1, "F": 3, "H2": 3, "W2": 3}, {"KH": 3, "KW": 3}, 2),
    # 1-d
    ("conv_{T} bf16[B, T, C], bf16[K, C, F] -> bf16[B, T2, F]",
     {"B": 2, "T": 9, "C": 4, "K": 4, "F": 5, "T2": 6}, {"B": 2, "T2": 6, "F": 5}, {"K": 4}, 4),
    # 3-d
    ("conv_{D,H,W} bf16[B, D, H, W, C], bf16[KD, KH, KW, C, F] -> bf16[B, D2, H2, W2, F]",
     {"B": 1, "D": 4, "H": 4, "W": 4, "C": 2, "KD": 2, "KH": 2, "KW": 2, "F": 3, "D2": 3, "H2": 3, "W2": 3},
     {"B": 1, "D2": 3, "H2": 3, "W2": 3, "F": 3}, {"KD": 2, "KH": 2, "KW": 2}, 2),
    # grouped: G groups of Cg input features, M outputs each; the group dim in all three
    ("conv_{H,W} bf16[B, H, W, G, Cg], bf16[KH, KW, G, Cg, M] -> bf16[B, H2, W2, G, M]",
     {"B": 1, "H": 5, "W": 5, "G": 2, "Cg": 3, "KH": 3, "KW": 3, "M": 2, "H2": 3, "W2": 3},
     {"B": 1, "H2": 3, "W2": 3, "G": 2, "M": 2}, {"KH": 3, "KW": 3}, 3),
    # depthwise: a group per channel, one input feature each
    ("conv_{H,W} bf16[B, H, W, C], bf16[KH, KW, C] -> bf16[B, H2, W2, C]",
     {"B": 2, "H": 5, "W": 5, "C": 4, "KH": 3, "KW": 3, "H2": 3, "W2": 3},
     {"B": 2, "H2": 3, "W2": 3, "C": 4}, {"KH": 3, "KW": 3}, 1),
])
def test_flops_are_the_loop_nest_and_bytes_each_tensor_once(spec, sizes, out, window, cin):
    a = symroof.analyze(spec)
    at = {s(k): v for k, v in sizes.items()}
    assert int(a.flops.xreplace(at)) == _brute(out, window, cin)
    # exact: one add fewer per result element
    n_out = 1
    for v in out.values():
        n_out *= v
    assert int(a.flops_exact.xreplace(at)) == _brute(out, window, cin) - n_out
    step = a.steps[0]
    width = 4 if spec.startswith("conv_{H,W} fp32") else 2
    tensors = [t.labels for t in (*step.step.inputs, step.step.output)] if hasattr(step, "step") else None
    if tensors is None:
        return
    expected = sum(width * sympy.Mul(*(s(label) for label in labels)) for labels in tensors)
    assert sympy.expand(a.bytes - expected) == 0


def test_a_literal_kernel_and_lets_for_the_output_size():
    # a 3x3 kernel, stride 1, padding 1 ("same"): H2 = H + 2 - 3 + 1 = H
    m = symroof.model("let H2 = H + 2 - 3 + 1, W2 = W\n"
                      "conv_{H,W} bf16[B, H, W, C], bf16[3, 3, C, F] -> bf16[B, H2, W2, F]", "prefill", None, {})
    b, h, w, c, f = (s(n) for n in "BHWCF")
    assert sympy.expand(m.analysis.flops - 2 * b * h * w * f * 9 * c) == 0


@pytest.mark.parametrize("spec, message", [
    ("conv_{H,W} bf16[B, H, W, C], bf16[KH, C, F] -> bf16[B, H2, W2, F]", "needs as many window dims"),
    ("conv_{H,W} bf16[B, H, W, C], bf16[KH, KW, C, F] -> bf16[B, H2, F]", "makes as many of the result's own"),
    ("conv_{H,Q} bf16[B, H, W, C], bf16[KH, KW, C, F] -> bf16[B, H2, W2, F]", "Q is not a dim of the input"),
    ("conv_{H,W} bf16[B, H, W, C], bf16[H, KW, C, F] -> bf16[B, H2, W2, F]", "spatial dim H is in the kernel"),
    ("conv bf16[B, H, W, C], bf16[KH, KW, C, F] -> bf16[B, H2, W2, F]", "works over named dims"),
])
def test_malformed_convolutions_are_one_line_errors(spec, message):
    with pytest.raises(SpecError, match=message):
        symroof.analyze(spec)


def test_sharding_over_batch_and_channels_needs_nothing_over_space_a_gather():
    flops = 2 * s("B") * s("H2") * s("W2") * s("F") * s("KH") * s("KW") * s("C")
    for split in ("bf16[B_X, H, W, C], bf16[KH, KW, C, F] -> bf16[B_X, H2, W2, F]",
                  "bf16[B, H, W, C], bf16[KH, KW, C, F_X] -> bf16[B, H2, W2, F_X]"):
        a = symroof.analyze("conv_{H,W} " + split, mesh="X=4")
        assert sympy.simplify(a.flops - flops / 4) == 0 and not a.cost.moves
    # the input features split: partial sums, one AllReduce of the result
    a = symroof.analyze("conv_{H,W} bf16[B, H, W, C_X], bf16[KH, KW, C_X, F] -> bf16[B, H2, W2, F]", mesh="X=4")
    assert sympy.simplify(a.flops - flops / 4) == 0
    (move,) = a.cost.moves
    assert "AllReduce" in str(move) and sympy.expand(move.bytes - 2 * s("B") * s("H2") * s("W2") * s("F")) == 0
    # a spatial dim split: gathered first (no halo exchange modelled), then computed whole
    a = symroof.analyze("conv_{H,W} bf16[B, H_X, W, C], bf16[KH, KW, C, F] -> bf16[B, H2, W2, F]", mesh="X=4")
    (move,) = a.cost.moves
    assert "AllGather" in str(move) and sympy.simplify(a.flops - flops) == 0


def test_a_grouped_convolution_split_over_its_groups_or_a_groups_features():
    b, h2, w2, g, cg, m = (s(n) for n in ("B", "H2", "W2", "G", "Cg", "M"))
    # by hand: 2 per multiply-add, every result element [B, H2, W2, G, M], the window, a group's Cg
    flops = 2 * b * h2 * w2 * g * m * s("KH") * s("KW") * cg
    # the groups split: each chip computes its quarter of them, nothing moves
    a = symroof.analyze("conv_{H,W} bf16[B, H, W, G_X, Cg], bf16[KH, KW, G_X, Cg, M] -> bf16[B, H2, W2, G_X, M]",
                        mesh="X=4")
    assert sympy.simplify(a.flops - flops / 4) == 0 and not a.cost.moves
    # a group's input features split: partial sums, one AllReduce of the bf16 result
    a = symroof.analyze("conv_{H,W} bf16[B, H, W, G, Cg_X], bf16[KH, KW, G, Cg_X, M] -> bf16[B, H2, W2, G, M]",
                        mesh="X=4")
    (move,) = a.cost.moves
    assert sympy.simplify(a.flops - flops / 4) == 0 and "AllReduce" in str(move)
    assert sympy.expand(move.bytes - 2 * b * h2 * w2 * g * m) == 0
