"""LaTeX: derivations in the chapter's style, rendered through KaTeX (every LaTeX output of
the suite is, by conftest.py), and pinned by golden files for a few cases."""

import io
from pathlib import Path

import pytest
import yaml

from symroof import analyze
from symroof.cli import main
from symroof.latex import derivation, tex_number

GOLDEN = Path(__file__).parent / "golden"
CHAPTER = yaml.safe_load((Path(__file__).parent / "data" / "rooflines_chapter.yaml").read_text())

CASES = {
    "matmul_v5e": ("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", dict(chip="tpu-v5e"), dict(solve="B", limit=["D", "F"])),
    "dot_product": ("bf16[N] *_N bf16[N] -> bf16[1]", dict(chip="tpu-v5e"), dict(solve="N", limit=["N"])),
    "int8_weights_markdown": ("bf16[B, D] * int8[D, F] -> bf16[B, F]", dict(chip="tpu-v5e", values={"D": 4096, "F": 4096}),
                              dict(solve="B", markdown=True)),
    "two_chip": ("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", dict(chip="tpu-v5e"), dict(solve="D")),
    # per-chip counts with fractions: no fraction inside a fraction
    "two_axes": ("mesh X=4, Y=2; bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F]", dict(chip="tpu-v5e"),
                 dict(solve="B")),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_derivations(name):
    spec, setup, options = CASES[name]
    got = derivation(analyze(spec, **setup), **options)
    assert got == (GOLDEN / f"{name}.tex").read_text(encoding="utf-8").rstrip("\n")


def test_the_books_lines_are_there():
    tex = derivation(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="tpu-v5e"), solve="B", limit="D,F")
    assert r"\text{Intensity}(\text{matmul}) &= \frac{2 B D F}{2 B D + 2 B F + 2 D F} = " \
           r"\frac{B D F}{B D + B F + D F} \to B" in tex
    assert r"B &> \frac{1.97\times10^{14}}{8.2\times10^{11}} \approx 240.2" in tex


def test_what_the_text_says_in_words_the_latex_says_too():
    tex = derivation(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(D=100, F=100), solve="B")
    assert "never compute-bound" in tex
    sharded = derivation(analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e"), solve="B")
    assert "against the network" in sharded and "FLOPs per chip" in sharded and "AllReduce" in sharded
    bare = derivation(analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", peak_flops=1e15, hbm_bw=3e12))
    assert "needs link figures" in bare
    cast = derivation(analyze("fp8[K, V] -> bf16[K, V]", chip="v5e"), solve="K")
    assert r"T_\text{comms}" in cast and "no FLOPs" in cast
    named = derivation(analyze("bf16[N] -> bf16[]"), name="layer_1 & co")
    assert r"layer\_1 \& co" in named


def test_multi_letter_dims_are_words_not_products():
    tex = derivation(analyze("bf16[batch, dm] @ bf16[dm, Fx] -> bf16[batch, Fx]"))
    assert r"2\,\mathit{Fx}\,\mathit{batch}\,\mathit{dm}" in tex  # words, set apart by thin spaces
    assert "b a t c h" not in tex and r"\mathit{batch}\mathit" not in tex
    greek = derivation(analyze("bf16[Δ, N] -> bf16[Δ]"))
    assert r"\Delta" in greek


@pytest.mark.parametrize("case", [c for c in CHAPTER if c.get("spec")], ids=lambda c: c["id"])
def test_every_chapter_spec_derives_renderable_latex(case):
    chip = case.get("chip") or {}
    a = analyze(case["spec"], chip=chip.get("name"), peak_flops=chip.get("peak_flops"),
                hbm_bw=chip.get("hbm_bw"), ici_bw=chip.get("ici_bw"), variant=chip.get("variant"),
                mesh=case.get("mesh"), values=case.get("set"))
    solve = (case["expect"].get("threshold") or {}) if isinstance(case["expect"].get("threshold"), dict) else {}
    tex = derivation(a, solve=solve.get("var") if a.machine is not None else None)
    assert tex.startswith(r"\begin{align*}") and tex.endswith(r"\end{align*}")
    assert a._repr_latex_().startswith("$$")


def test_latex_command(katex):
    out, err = io.StringIO(), io.StringIO()
    code = main(["latex", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "v5e", "--solve", "B",
                 "--format", "markdown"], out=out, err=err)
    assert code == 0 and out.getvalue().startswith("$$\n\\begin{aligned}")
    katex.check(out.getvalue())


def test_invalid_latex_would_fail(katex):
    with pytest.raises(AssertionError, match="KaTeX cannot render"):
        katex.check(r"\frac{a")


@pytest.mark.parametrize("value, text", [(1.97e14, r"1.97\times10^{14}"), (8.2e11, r"8.2\times10^{11}"),
                                         (240.2439, "240.2"), (8755.556, "8755.6"), (1e-6, "10^{-6}")])
def test_numbers_in_the_books_style(value, text):
    import sympy
    assert tex_number(sympy.Rational(repr(value))) == text
