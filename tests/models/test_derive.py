"""The training chapter's strategy formulas (How To Scale Your Model, part 5), derived by the
engine from the book's MLP layer, against the book's formulas written here by hand.

Symbols: C the chip's bf16 peak, W_ici the engine's per-link ICI bandwidth (one direction,
as the chip files give it); the book's W_ici is bidirectional, written here W = 2 W_ici, and
alpha = C / W. B tokens, D and F the MLP's widths, X the FSDP (or DP) chips, Y the TP chips,
N = X Y; a kind over n torus axes (rings) moves its collectives over n rings at once.
"""

from __future__ import annotations

import json

import pytest
import sympy

from symroof.errors import SpecError
from symroof.hardware.chips import get_chip
from symroof.ir import dim_symbol
from symroof.models import derive
from symroof.models.catalogue import get_model

B, D, F, X, Y, N = (dim_symbol(n) for n in ("B", "D", "F", "X", "Y", "N"))
C, W_ici = sympy.Symbol("C", positive=True), sympy.Symbol("W_ici", positive=True)
W = 2 * W_ici          # the book's W_ici: both directions of a link
alpha = C / W


def threshold(condition: sympy.Basic, var: sympy.Expr) -> tuple[str, sympy.Expr]:
    """(">" or "<", the other side) of a strict relation with `var` on one side."""
    assert isinstance(condition, (sympy.StrictGreaterThan, sympy.StrictLessThan)), condition
    if condition.gts == var:
        return ">", condition.lts
    assert condition.lts == var, condition
    return "<", condition.gts


def same(a: sympy.Expr, b: sympy.Expr) -> bool:
    return sympy.simplify(a - b) == 0


@pytest.mark.parametrize("n", [1, 2, 3])
def test_data_parallel(n: int) -> None:
    f = derive.strategy_formulas(kinds=("dp",), n_axes={"dp": n})["dp"]
    # forward: no collectives; backward: 4 matmuls of 2BDF/X, and the gradients' two
    # AllReduces of 2DF bytes, each 2 AllGathers: 2 x 2 x 2DF / (W n)
    assert f.forward.t_comms == 0 and f.forward.condition == sympy.true
    assert same(f.backward.t_math, 8 * B * D * F / (X * C))
    assert same(f.backward.t_comms, 8 * D * F / (W * n))
    assert f.book_pass == "backward"
    assert threshold(f.per_pass.condition, B / X) == (">", sympy.simplify(alpha / n))
    # the whole step overlaps the AllReduces with forward and backward: 12BDF/X against 8DF/(W n)
    sign, rhs = threshold(f.step.condition, B / X)
    assert sign == ">" and same(rhs, sympy.Rational(2, 3) * alpha / n)
    # in the book's symbols (W_bidi, alpha)
    a = derive.ALPHA
    assert threshold(f.per_pass.book()["condition"], B / X) == (">", a / n)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_fsdp_forward(n: int) -> None:
    f = derive.strategy_formulas(kinds=("fsdp",), n_axes={"fsdp": n})["fsdp"]
    # forward: W_in and W_out gathered, 2DF bytes each over n rings: 2 x 2DF/(W n)
    assert same(f.forward.t_comms, 4 * D * F / (W * n))
    assert same(f.forward.t_math, 4 * B * D * F / (X * C))
    sign, rhs = threshold(f.per_pass.condition, B / X)
    assert sign == ">" and same(rhs, alpha / n)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_fsdp_backward(n: int) -> None:
    f = derive.strategy_formulas(kinds=("fsdp",), n_axes={"fsdp": n})["fsdp"]
    # backward: the two weights gathered again and their gradients reduce-scattered, 2DF
    # bytes each over n rings at once, against its 8BDF/X
    assert same(f.backward.t_comms, 4 * 2 * D * F / (W * n))
    sign, rhs = threshold(f.backward.condition, B / X)
    assert sign == ">" and same(rhs, alpha / n)
    # whole step: 12BDF/(XC) against 12DF/(W n): the same alpha / n
    assert same(threshold(f.step.condition, B / X)[1], alpha / n)
    assert not f.notes


@pytest.mark.parametrize("n", [1, 2, 3])
def test_tensor_parallel(n: int) -> None:
    f = derive.strategy_formulas(kinds=("tp",), n_axes={"tp": n})["tp"]
    # forward: the output's partial sums all-reduced, 2BD bytes: 2 x 2BD/(W n) (the book's
    # AllGather of the input and ReduceScatter of the output, the same bytes)
    assert same(f.forward.t_comms, 4 * B * D / (W * n))
    assert same(f.forward.t_math, 4 * B * D * F / (Y * C))
    sign, rhs = threshold(f.per_pass.condition, Y)
    assert sign == "<" and same(rhs, n * F / alpha)


@pytest.mark.parametrize("m_x, m_y", [(1, 1), (2, 1), (1, 2)])
def test_mixed(m_x: int, m_y: int) -> None:
    f = derive.strategy_formulas(kinds=("fsdp+tp",), n_axes={"fsdp": m_x, "tp": m_y})["fsdp+tp"]
    # the book: T_math = 4BDF/(NC), T_comms = 4DF/(Y W M_X) + 4BD/(X W M_Y)
    assert same(f.forward.t_math, 4 * B * D * F / (X * Y * C))
    assert same(f.forward.t_comms, 4 * D * F / (Y * W * m_x) + 4 * B * D / (X * W * m_y))
    # d/dX of T_comms at Y = N/X: 4DF/(N W M_X) - 4BD/(X^2 W M_Y) = 0
    assert same(derive.x_opt(m_x, m_y), sympy.sqrt(B * N * m_x / (F * m_y)))
    sign, rhs = threshold(f.per_pass.condition, B / N)
    assert sign == ">" and same(rhs, 4 * alpha**2 / (m_x * m_y * F))
    # backward: the weights gathered again and their gradients reduce-scattered (FSDP), the
    # input's gradient all-reduced (TP), against twice the forward's matmuls
    assert same(f.backward.t_comms, 8 * D * F / (Y * W * m_x) + 4 * B * D / (X * W * m_y))
    # at its own X_opt (sqrt(2 B N M_X / (F M_Y))): 8BDF/(NC) > 2 sqrt(8DF/(N W M_X) 4BD/(W M_Y))
    assert same(threshold(f.backward.condition, B / N)[1], 2 * alpha**2 / (m_x * m_y * F))


def test_alpha_on_v5p() -> None:
    chip = get_chip("tpu-v5p")
    hand = chip.peak_flops("bf16") / chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")
    assert derive.chip_values(chip)[derive.ALPHA] == hand == 2550
    f = derive.strategy_formulas("tpu-v5p", kinds=("dp",), n_axes={"dp": 3})["dp"]
    # the book: about 850 tokens per chip over 3 axes
    assert threshold(f.numbers(f.per_pass.condition), B / X) == (">", sympy.Integer(850))


def test_optimal_split() -> None:
    s = derive.optimal_split(64, 48000, 32768, 2, 1)
    hand = (48000 / 32768 * 2 * 64) ** 0.5  # sqrt(187.5); the book rounds B/F to 1.5 and writes 13.9
    assert abs(float(s.x_opt) - hand) < 1e-9 and round(hand, 2) == 13.69
    assert (s.x, s.y) == (16, 4)
    # in units of 4D/W: F X/(N M_X) + B/(X M_Y) at X = 16: 32768*16/128 + 48000/16
    costs = {(x, y): t for x, y, t in s.candidates}
    assert costs[(16, 4)] == 32768 * 16 // 128 + 48000 // 16
    # one chip for a kind: no collectives of its own, the other's alone (F / M_X; B / M_Y)
    assert costs[(64, 1)] == 32768 // 2 and costs[(1, 64)] == 48000


def test_optimal_split_on_slice() -> None:
    s = derive.optimal_split(64, 48000, 32768, chip="tpu-v5p", slice="4x4x4")
    # X = 16 lies on two axes of 4 (M_X = 2), Y = 4 on one (M_Y = 1): the book's case
    assert (s.x, s.y) == (16, 4)
    assert "M_X = 2, M_Y = 1" in s.how
    assert abs(float(s.x_opt) - 187.5 ** 0.5) < 1e-9


def test_largest_comms_bound_batch() -> None:
    # dp over 3 axes on v5p: B/X > 2550/3 = 850 exactly; at 850 the two times are equal
    assert derive.largest_comms_bound_batch("dp", "tpu-v5p", n_axes={"dp": 3}) == 850
    # mixed at M_X = 2, M_Y = 1 with LLaMA-3 70B's F: B/N > 4 alpha^2 / (2 F)
    F_70b = get_model("llama-3-70b")["sizes"]["F"]
    hand = 4 * 2550**2 / (2 * F_70b)
    got = derive.largest_comms_bound_batch("fsdp+tp", "tpu-v5p", "llama-3-70b", n_axes={"fsdp": 2})
    assert got == int(hand) == 453
    with pytest.raises(SpecError, match="a bound on Y"):
        derive.largest_comms_bound_batch("tp", "tpu-v5p")


def test_attention_share() -> None:
    sizes = get_model("llama-3-70b")["sizes"]
    d, f, k, h, n, layers, v = (sizes[x] for x in ("D", "F", "K", "H", "N", "L", "V"))
    T = dim_symbol("T")
    got = derive.attention_share("llama-3-70b")
    # the book's ratio: Q K^T and P V (2 x 2 N H T per token) over the weight matmuls
    # (q, o: 2 D N H each; k, v: 2 D K H each; the gated MLP's three: 2 D F each)
    matmuls = 2 * d * n * h * 2 + 2 * d * k * h * 2 + 3 * 2 * d * f
    assert same(got["scores_to_matmuls"], 4 * n * h * T / matmuls) and matmuls == 52224 * 4 * n * h
    # the score block's share of the step's FLOPs, every op counted per token (the conventions page's table):
    # softmax 4 per score; rmsnorm 3 per element + 2 per row + 1 per element for its scale
    norm = 4 * d + 2
    scores = 4 * n * h * T + 4 * n * T
    layer = 2 * norm + 2 * d * n * h * 2 + 2 * d * k * h * 2 + scores + 2 * d + 3 * 2 * d * f + 4 * f + f
    total = layers * layer + norm + 2 * d * v
    assert same(got["scores"], layers * scores / total)
    # the book's rule for multi-head attention with F = 4 D: T / (8 D)
    mha = 4 * d * T / (2 * d * d * 4 + 3 * 2 * d * 4 * d)
    assert same(mha, T / (8 * d))


def test_mha_rule_from_a_model_file(tmp_path) -> None:
    config = dict(get_model("llama-3-70b"))
    config |= {"id": "mha-test", "name": "MHA test", "aliases": [],
               "sizes": dict(config["sizes"]) | {"D": 4096, "F": 4 * 4096, "N": 32, "K": 32, "H": 128}}
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"about": "a multi-head model for the rule", "models": [config]}))
    got = derive.attention_share("mha-test", models_file=str(path))
    assert same(got["scores_to_matmuls"], dim_symbol("T") / (8 * 4096))


def test_bad_input() -> None:
    with pytest.raises(SpecError, match="strategy kinds are"):
        derive.strategy_formulas(kinds=("zz",))
    with pytest.raises(SpecError, match="torus axes per kind are 1 to 3"):
        derive.strategy_formulas(n_axes={"dp": 4})
    with pytest.raises(SpecError, match="torus of rings"):
        derive.strategy_formulas("h100")
    with pytest.raises(SpecError, match="has 32 chips, not 64"):
        derive.optimal_split(64, 48000, 32768, chip="tpu-v5p", slice="2x4x4")


def test_results_show_themselves() -> None:
    f = derive.strategy_formulas("tpu-v5p", "llama-3-70b", kinds=("dp",), n_axes={"dp": 3})["dp"]
    out = f.to_dict()
    assert out["backward"]["condition"]["value"] == "B/X > 850"
    assert out["backward"]["book"]["condition"]["formula"] == "B/X > alpha/3"
    assert r"\alpha" in out["backward"]["book"]["condition"]["latex"]
    assert f._repr_latex_().startswith("$") and "per pass" in f._repr_latex_()
    assert "per pass" in out["conventions"]


def cli(*argv: str) -> tuple[int, str, str]:
    from io import StringIO

    from symroof.cli.command import main
    out, err = StringIO(), StringIO()
    return main(list(argv), out=out, err=err), out.getvalue(), err.getvalue()


PLAN = ("plan", "llama-3-70b", "--chip", "tpu-v5p", "--chips", "64", "--batch", "48000", "--slice", "4x4x4")


def test_cli_symbolic_and_optimize() -> None:
    code, out, err = cli(*PLAN, "--symbolic", "--optimize")
    assert code == 0, err
    # over 64 chips on a 4x4x4 slice one mesh axis spans the 3 torus axes: alpha / 3 = 850
    assert "dp (dp over 3 torus axes)" in out and "B/X > alpha/3  (B/X > 850)" in out
    assert "Y < 3*F/alpha" in out and "per pass: each pass's collectives" in out
    # mixed at M_X = 2, M_Y = 1 with F = 28672: 4 alpha^2/(2 F) = 453.578
    assert f"B/N > 2*alpha**2/F  (B/N > {4 * 2550**2 / (2 * 28672):.6g})" in out
    assert "whole split: X = 16 (FSDP), Y = 4 (TP)" in out
    # the roots floored: alpha/3 = 850, 2 alpha/9 = 566.7; 2 alpha^2/F = 453.6, 4 alpha^2/(3F) = 302.4
    assert "largest communication-bound batch: B/X = 850 (per pass), 566 (whole step) tokens a chip" in out
    assert f"B/N = {int(2 * 2550**2 / 28672)} (per pass), {int(4 * 2550**2 / (3 * 28672))} (whole step)" in out
    # LLaMA-3 70B: 4 N H T / (2 (2 D N H + 2 D K H) + 6 D F) = T/52224
    assert "score matmuls (Q K^T, P V) / weight matmuls = T/52224" in out
    # at the plan, dp: T_math = 8 B D F / (X C), T_comms = 8 D F / (3 W_bidi)
    t_math, t_comms = 8 * 48000 * 8192 * 28672 / (64 * 4.59e14), 8 * 8192 * 28672 / (3 * 1.8e11)
    assert f"T_math = {t_math * 1e3:.6g} ms, T_comms = {t_comms * 1e3:.6g} ms: communication-bound" in out


def test_cli_json() -> None:
    code, out, err = cli(*PLAN, "--optimize", "--json")
    assert code == 0, err
    found = json.loads(out)
    split = found["optimal_split"]
    # F = 28672 for LLaMA-3 70B: X_opt = sqrt(2 B N / F)
    assert (split["x"], split["y"]) == (16, 4) and abs(split["x_opt"] - (2 * 48000 * 64 / 28672) ** 0.5) < 1e-9
    assert split["x_opt_formula"]["formula"] == "sqrt(2)*sqrt(B)*sqrt(N)/sqrt(F)"
    assert "strategy_formulas" not in found
    code, out, err = cli(*PLAN, "--symbolic", "--json")
    dp = json.loads(out)["strategy_formulas"]["dp"]
    assert dp["backward"]["book"]["condition"]["formula"] == "B/X > alpha/3"
    assert dp["at_plan"]["compute_bound"] == "False"


@pytest.mark.parametrize("extra, message", [
    (("--decode",), "training chapter's formulas: drop --prefill/--decode"),
    (("--peak-flops", "1e15"), "drop --peak-flops"),
    (("--chip", "h100"), "torus of rings"),
    (("--slice", "2x4x4"), "has 32 chips, not 64"),
])
def test_cli_refusals(extra: tuple[str, ...], message: str) -> None:
    code, out, err = cli(*PLAN, "--symbolic", *extra)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err


def test_latex_renders(katex) -> None:
    found = derive.training_formulas("llama-3-70b", "tpu-v5p", 64, 48000, slice="4x4x4", optimize=True)
    shown = [f._repr_latex_() for f in found.formulas.values()]
    assert found.split is not None
    for tex in shown + [found.split._repr_latex_()]:
        assert tex.startswith("$") and tex.endswith("$")
        katex.check(tex.strip("$"))
    for kind in found.formulas:
        for row in found.to_dict()["strategy_formulas"][kind]["backward"].values():
            if "latex" in row:
                katex.check(row["latex"])
