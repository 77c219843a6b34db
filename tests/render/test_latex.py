"""LaTeX: derivations in the chapter's style, rendered through KaTeX (every LaTeX output of
the suite is, by conftest.py), and pinned by golden files for a few cases."""

import io
import itertools
import warnings
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symroof import analyze
from symroof.cli.command import main
from symroof.errors import HardwareError, SpecError, SymroofError, SymroofWarning
from symroof.render.latex import derivation, tex_name, tex_number

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CHAPTER = yaml.safe_load((Path(__file__).resolve().parents[1] / "data" / "rooflines_chapter.yaml").read_text())

CASES = {
    "matmul_v5e": ("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", dict(chip="tpu-v5e"),
                   dict(solve="B", limit=["D", "F"])),
    "dot_product": ("bf16[N] *_N bf16[N] -> bf16[1]", dict(chip="tpu-v5e"), dict(solve="N", limit=["N"])),
    "int8_weights_markdown": ("bf16[B, D] * int8[D, F] -> bf16[B, F]",
                              dict(chip="tpu-v5e", values={"D": 4096, "F": 4096}), dict(solve="B", markdown=True)),
    "two_chip": ("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", dict(chip="tpu-v5e"), dict(solve="D")),
    # per-chip counts with fractions: no fraction inside a fraction
    "two_axes": ("mesh X=4, Y=2; bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F]", dict(chip="tpu-v5e"),
                 dict(solve="B")),
    # steps at two rates: a critical intensity for each, T_math as each dtype's FLOPs over its peak
    "mixed_chain_h100": ("int8[B, D] *_D int8[D, F] *_F fp16[F, G] -> fp16[B, G]", dict(chip="h100"),
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
    assert r"2\mkern3mu \mathit{Fx}\mkern3mu \mathit{batch}\mkern3mu \mathit{dm}" in tex  # words, thin spaces apart
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


# ---- every spec that `analyze` takes renders (issue 9) ----------------------------------------

def rows(tex: str) -> list[str]:
    """The rows of a derivation (align* or $$ aligned $$), without their trailing \\\\."""
    lines = tex.strip().splitlines()
    if lines[0] == "$$":
        lines = lines[1:-1]
    assert lines[0].startswith(r"\begin{align") and lines[-1].startswith(r"\end{align"), tex
    return [line.removesuffix(r" \\") for line in lines[1:-1]]


def left_sides(tex: str) -> list[str]:
    """The left side of every row; a row without one fails here."""
    found = []
    for row in rows(tex):
        left, amp, _ = row.partition("&")
        assert amp and left.strip(), f"a row with an empty left-hand side: {row!r}\n{tex}"
        found.append(left.strip())
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_rows_all_have_left_sides(name):
    left_sides((GOLDEN / f"{name}.tex").read_text(encoding="utf-8"))


def test_a_row_with_an_empty_left_side_is_caught():
    with pytest.raises(AssertionError, match="empty left-hand side"):
        left_sides("\\begin{align*}\nB &> 1 \\\\\n &: \\text{why}\n\\end{align*}")


MIXED = "int8[B, D] *_D int8[D, F] *_F fp16[F, G] -> fp16[B, G]"


@pytest.mark.parametrize("solve", [None, "B"])
def test_a_chain_of_int8_and_fp16_steps_on_h100(solve):
    # was: TypeError (float() of the peak, FLOPs / T_math, an expression in D and G) with --solve;
    # and without it, no T_math row at all
    tex = derivation(analyze(MIXED, chip="h100"), solve=solve)
    assert r"\text{Intensity}(\text{chain}) &= " in tex
    assert (r"\text{Intensity}(\text{H100 SXM, int8}) &= \frac{1.979\times10^{15}}{3.35\times10^{12}} "
            r"\approx 590.7 \\" in tex)
    assert (r"\text{Intensity}(\text{H100 SXM, fp16}) &= \frac{9.89\times10^{14}}{3.35\times10^{12}} "
            r"\approx 295.2 \\" in tex)
    # each dtype's FLOPs over its own peak
    assert r"T_\text{math} &= \frac{2 B D F}{1.979\times10^{15}} + \frac{2 B F G}{9.89\times10^{14}}\ \text{s}" in tex
    if solve:
        assert r"B &> 295.3 \quad (D, F, G \to \infty) \\" in tex  # no one peak / bandwidth to show it as
        assert left_sides(tex)[-1] == "B"


@pytest.mark.parametrize("solve", [None, "B"])
def test_a_chain_of_int8_and_fp16_steps_on_v5e(solve):
    # the v5e has no fp16 rate: an error that says so, as analyze gives it
    with pytest.raises(HardwareError, match=r"tpu-v5e has no figure for peak_flops_per_s\.fp16"):
        derivation(analyze(MIXED, chip="tpu-v5e"), solve=solve)
    given = analyze(MIXED, chip="tpu-v5e", overrides={"peak_flops_per_s.fp16": 1.97e14})
    tex = derivation(given, solve=solve)
    assert r"\text{Intensity}(\text{TPU v5e, int8}) &= \frac{3.94\times10^{14}}{8.2\times10^{11}} \approx 480.5" in tex
    assert r"\text{Intensity}(\text{TPU v5e, fp16}) &= \frac{1.97\times10^{14}}{8.2\times10^{11}} \approx 240.2" in tex
    assert r"T_\text{math} &= \frac{2 B D F}{3.94\times10^{14}} + \frac{2 B F G}{1.97\times10^{14}}" in tex
    if solve:
        assert r"B &> 240.2 \quad (D, F, G \to \infty)" in tex


def test_a_mixed_chain_under_one_flat_peak_has_one_critical_intensity():
    tex = derivation(analyze(MIXED, peak_flops=1e15, hbm_bw=3e12), solve="B")
    assert r"\text{Intensity}(\text{custom, int8, fp16}) &= \frac{10^{15}}{3\times10^{12}} \approx 333.3 \\" in tex
    assert r"T_\text{math} &= \frac{2 B D F + 2 B F G}{10^{15}}\ \text{s}" in tex
    assert r"B &> \frac{3}{4} \cdot \frac{10^{15}}{3\times10^{12}} \approx 250 \quad (D, F, G \to \infty)" in tex


def test_a_mixed_chain_on_a_mesh():
    # was: TypeError (mpmath of the replication, (D + 2G)/(D + G))
    a = analyze("mesh X=2; int8[B, D_X] *_D int8[D_X, F] *_F fp16[F, G] -> fp16[B, G]", chip="h100")
    tex = derivation(a, solve="B")
    assert r"T_\text{math} &= \frac{B D F}{1.979\times10^{15}} + \frac{2 B F G}{9.89\times10^{14}}\ \text{s}" in tex
    assert r"\text{Intensity}(\text{chain, per chip})" in tex
    assert "(against the network)" in tex


def test_a_bf16_chain_on_h100_solved_for_b():
    tex = derivation(analyze("bf16[B, D] *_D bf16[D, F] *_F bf16[F, D] -> bf16[B, D]", chip="h100"), solve="B")
    assert r"T_\text{math} &= \frac{4 B D F}{9.89\times10^{14}}\ \text{s}" in tex
    assert r"B &> \frac{9.89\times10^{14}}{3.35\times10^{12}} \approx 295.2 \quad (D, F \to \infty) \\" in tex
    assert r"B &> \frac{295.2 D F}{D F - 295.2 D - 295.2 F} \quad \text{when } \frac{D F}{D + F} > 295.2" in tex


def test_replication_that_depends_on_the_sizes():
    # was: TypeError (mpmath cannot make a number of (D + 2G)/(D + G))
    a = analyze("mesh X=2; bf16[B, D_X] *_D bf16[D_X, F] *_F bf16[F, G] -> bf16[B, G]", chip="tpu-v5e")
    assert not a.replication.is_number
    tex = derivation(a, solve="B")
    assert (r"\text{FLOPs in all} &= 2 B D F + 2 B F G \quad \text{(over 2 chips, replication } "
            r"\frac{D + 2 G}{D + G}\text{)} \\" in tex)
    both = analyze("mesh X=2, Y=2; bf16[B_X, D] *_D bf16[D, F] *_F bf16[F, G_Y] -> bf16[B_X, G_Y]", chip="v5e")
    assert r"\text{(over 4 chips, replication } \frac{2 D + G}{D + G}\text{)}" in derivation(both)
    # at sizes it is a number again
    assert r"\text{(over 2 chips, replication 1.5)}" in derivation(a.at(D=8, G=8))
    # an operand repeated on two chips: a number
    twice = analyze("bf16[B_X, D] @ bf16[D, F] -> bf16[B_X, F]", chip="v5e", mesh="X=2, Y=2")
    assert r"\text{(over 4 chips, replication 2)}" in derivation(twice)


@pytest.mark.parametrize("spec", ["AllGather_X bf16[I_X, J] -> bf16[I, J]",
                                  "AllReduce_X bf16[I, J] {U_X} -> bf16[I, J]",
                                  "ReduceScatter_{X,J} bf16[I, J] {U_X} -> bf16[I, J_X]",
                                  "AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]"])
def test_a_collective_over_an_axis_of_one_chip(spec):
    # was: TypeError (a link bandwidth of V / 0 s, complex infinity, as a float)
    tex = derivation(analyze(spec, chip="tpu-v5e", mesh="X=1"), solve="I")
    assert r"T_\text{network} &= 0\ \text{s} \\" in tex
    assert r"\text{(over 1 chip, replication 1)}" in tex
    assert r"I &: \text{no FLOPs to run: it is never compute-bound}" in tex


def test_a_mesh_axis_of_size_one():
    tex = derivation(analyze("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="tpu-v5e", mesh="X=1"), solve="B")
    assert r"\text{(over 1 chip, replication 1)}" in tex
    assert r"B &> \frac{1.97\times10^{14}}{8.2\times10^{11}} \approx 240.2 \quad (D, F \to \infty)" in tex
    # a collective over it costs nothing: T_math always beats T_network
    program = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]\nAllGather_X bf16[B_X, F] -> bf16[B, F]"
    tex = derivation(analyze(program, chip="tpu-v5e", mesh="X=1"), solve="B")
    assert r"T_\text{network} &= 0\ \text{s} \\" in tex
    assert (r"B &: \text{with the other dims free: compute-bound at every $B$ (against the network)}"
            in tex)
    left_sides(tex)


SHARDED = "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]"


@pytest.mark.parametrize("solve, values, expected", [
    ("D", None, [r"D &> 2 \cdot \frac{1.97\times10^{14}}{4.5\times10^{10}} \approx 8755.6 \quad (B, F \to \infty) "
                 r"\quad \text{(against the network)}"]),
    # the network threshold on B is "always, where D is large enough": words, on B's row
    ("B", None, [r"B &: \text{as D, F $\to\infty$: compute-bound at every $B$ (against the network)}",
                 r"B &: \text{with the other dims free: compute-bound at every $B$ when $D > 8755.6$, "
                 r"never otherwise (against the network)}"]),
    ("D", {"B": 8, "F": 8}, [r"D &> 8755.6 \quad (B = 8, F = 8) \quad \text{(against the network)}",
                             r"D &: \text{with the latency floor (2 $\mu$s) it takes $D > 6156250$ "
                             r"(against the network)}"]),
    # never compute-bound against the network
    ("B", {"D": 8, "F": 8}, [r"B &: \text{at D = 8, F = 8: never compute-bound: the network intensity is $4$ "
                             r"whatever $B$ is, below the critical network intensity $4377.8$ (against the network)}"]),
    # always compute-bound against the network
    ("B", {"D": 16384, "F": 16384}, [r"B &: \text{at D = 16384, F = 16384: compute-bound at every $B$ "
                                     r"(against the network)}"]),
])
def test_network_threshold_rows(solve, values, expected):
    tex = derivation(analyze(SHARDED, chip="tpu-v5e", mesh="X=2", values=values), solve=solve)
    for row in expected:
        assert row in rows(tex) or row + r" \\" in tex, f"{row}\nnot in\n{tex}"
    assert set(left_sides(tex)[-len(expected):]) == {solve}


def test_network_threshold_rows_from_the_command_line(katex):
    for extra in (["--solve", "D"], ["--solve", "B"], ["--solve", "D", "--set", "B=8,F=8"]):
        out, err = io.StringIO(), io.StringIO()
        code = main(["latex", SHARDED, "--mesh", "X=2", "--chip", "tpu-v5e", *extra], out=out, err=err)
        assert code == 0 and err.getvalue() == "", err.getvalue()
        assert "(against the network)" in out.getvalue()
        left_sides(out.getvalue())
        katex.check(out.getvalue())


# ---- what the intensity's row is called ----------------------------------------------------------

@pytest.mark.parametrize("spec, mesh, kind", [
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", None, "matmul"),
    ("bf16[B, 4096] * int8[4096, 4096] -> bf16[B, 4096]", None, "matmul"),
    ("bf16[N] *_N bf16[N] -> bf16[1]", None, "dot product"),
    ("x: bf16[N] * y: bf16[N] -> bf16[]", None, "dot product"),
    # a literal 16 is not a scalar's 1: this was called a dot product
    ("bf16[16, N] *_N bf16[N] -> bf16[16]", None, "matrix-vector product"),
    ("bf16[D, F] @ bf16[F] -> bf16[D]", None, "matrix-vector product"),
    ("int8[B, D] *_D int8[B, D, F] -> int8[B, F]", None, "batched matrix-vector product"),
    ("bf16[B, S, D] @ bf16[B, D, T] -> bf16[B, S, T]", None, "batched matmul"),
    ("bf16[B, S, H, D] *_D bf16[B, T, H, D] -> bf16[B, H, S, T]", None, "batched matmul"),  # attention's scores
    ("bf16[B, N] *_N bf16[B, N] -> bf16[B]", None, "batched dot product"),
    ("bf16[B, S, D] *_D bf16[D, F] -> bf16[B, S, F]", None, "contraction"),
    ("bf16[B, D] * bf16[B, D] -> bf16[B, D]", None, "elementwise"),
    ("bf16[B, D] * bf16[D] -> bf16[B, D]", None, "elementwise"),
    ("bf16[B] * bf16[F] -> bf16[B, F]", None, "outer product"),
    ("bf16[B, D] -> bf16[B]", None, "reduction"),
    ("fp8[K, V] -> bf16[K, V]", None, "cast"),
    ("bf16[B, D] *_D bf16[D, F] *_F bf16[F, D] -> bf16[B, D]", None, "chain"),
    ("bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", "X=2", "matmul, per chip"),
    ("bf16[B, D_X] *_D bf16[D_X, F] *_F bf16[F, G] -> bf16[B, G]", "X=2", "chain, per chip"),
    ("AllGather_X bf16[I_X, J] -> bf16[I, J]", "X=2", "per chip"),
])
def test_the_intensity_is_named_for_what_the_spec_is(spec, mesh, kind):
    tex = derivation(analyze(spec, chip="tpu-v5p", mesh=mesh))
    labels = [left for left in left_sides(tex) if left.startswith(r"\text{Intensity}")]
    assert labels[0] == rf"\text{{Intensity}}(\text{{{kind}}})"


def test_the_intensity_has_no_name_where_no_word_fits():
    two = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]\nbf16[B, F] @ bf16[F, G] -> bf16[B, G]"  # two statements
    assert r"\text{Intensity}" in left_sides(derivation(analyze(two)))
    assert r"\text{Intensity}(\text{per chip})" in left_sides(derivation(analyze(two, mesh="X=2")))


def test_bare_counts_name_no_spec():
    from symroof import roofline
    tex = derivation(roofline(flops=1e12, bytes=1e9, chip="h100"))
    assert r"\text{Intensity} &= " in tex and "matmul" not in tex and "spec" not in tex


# ---- limits over dims with sizes ---------------------------------------------------------------------

@pytest.mark.parametrize("a", [
    analyze("bf16[B, D=4096] @ bf16[D, F] -> bf16[B, F]", chip="v5e"),
    analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e", values={"D": 4096}),
    analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(D=4096),
    analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e", values={"D": 4096}),
], ids=["in the spec", "values", "at", "on a mesh"])
def test_no_limit_over_a_dim_that_has_a_size(a):
    for limit in ("D", "D,F", ["F", "D"]):
        with pytest.raises(SpecError, match=r"D has a size \(4096\)"):
            derivation(a, limit=limit, solve="B")
    # over the free dims it is taken, and D keeps its size
    tex = derivation(a, limit="F")
    assert r"\quad (F \to \infty)" in tex and r"D \to" not in tex and r"D, F \to" not in tex


def test_no_rule_over_dims_that_have_sizes():
    # the rule takes the other dims to infinity: with D and F given, only the exact answer
    tex = derivation(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e", values={"D": 4096, "F": 4096}),
                     solve="B")
    assert r"\to \infty" not in tex and r"\to\infty" not in tex
    assert r"B &> 272.2 \quad (D = 4096, F = 4096)" in tex


def test_no_limit_over_a_set_dim_from_the_command_line():
    out, err = io.StringIO(), io.StringIO()
    code = main(["latex", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "v5e", "--limit", "D,F",
                 "--set", "D=4096"], out=out, err=err)
    assert code == 2 and out.getvalue() == ""
    assert "D has a size (4096)" in err.getvalue()


def test_an_unknown_limit_dim_is_an_error_even_without_bytes():
    a = analyze("mesh X=2; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip="v5e")
    with pytest.raises(SpecError, match="unknown dim 'Q'"):
        derivation(a, limit="Q")


# ---- the property, over many specs: analyze takes it, so derivation renders it ------------------

CHIPS = ["tpu-v5e", "h100", "a100", "tpu-v5p"]


def analysis_and_derivation(katex, spec, chip=None, mesh=None, values=None, solve=None, limit=None, **figures):
    """Where `analyze` takes the spec, and its threshold and limit are taken, `derivation` gives
    LaTeX that KaTeX renders, every row with a left side, the threshold's rows and the limit in
    it; where analyze refuses, derivation may refuse too, with a SymroofError (never a
    TypeError or the like). Returns the LaTeX, or None where analyze refused."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymroofWarning)
        try:
            a = analyze(spec, chip=chip, mesh=mesh, values=values, **figures)
        except SymroofError:
            return None
        try:
            a.flops, a.bytes, a.intensity
            if a.machine is not None:
                a.t_math, a.t_comms, a.bound
            if solve is not None:
                a.threshold(solve)
            if limit:
                a.limit(*limit)
            accepted = True
        except SymroofError:  # a chip without the dtype's rate, a limit over a dim with a size, ...
            accepted = False
        try:
            tex = derivation(a, solve=solve, limit=limit, markdown=bool(solve) and not limit)
        except SymroofError:
            assert not accepted, f"analyze took it, derivation refused: {spec!r} {chip} {mesh} {values} {solve} {limit}"
            return None
    katex.check(tex)
    lefts = left_sides(tex)
    assert any(left.startswith(r"\text{Intensity}") for left in lefts)
    if accepted and solve is not None:
        assert lefts[-1] == tex_name(solve), tex
    if accepted and limit and a.bytes != 0:  # an undefined intensity (no bytes) has no limit to show
        assert r" \quad (" + ", ".join(tex_name(d) for d in limit) + r" \to \infty)" in tex, tex
    return tex if accepted else None


SHAPES = [
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", [None]),
    ("bf16[N] *_N bf16[N] -> bf16[1]", [None]),
    (MIXED, [None]),
    ("fp8[B, D] *_D fp8[D, F] *_F bf16[F, G] -> bf16[B, G]", [None]),
    ("bf16[B, D] *_D bf16[D, F] *_F bf16[F, D] -> bf16[B, D]", [None]),
    ("bf16[B, D] * int8[D, F] -> bf16[B, F]", [None]),
    ("bf16[B, S, D] @ bf16[B, D, T] -> bf16[B, S, T]", [None]),
    ("bf16[B, D] * bf16[B, D] -> bf16[B, D]", [None]),
    ("fp8[K, V] -> bf16[K, V]", [None]),
    ("bf16[B, D=4096] @ bf16[D, F] -> bf16[B, F]", [None, "X=2"]),
    (SHARDED, ["X=1", "X=2", "X=4", "X=2@dcn"]),
    ("bf16[B_X, D] @ bf16[D, F] -> bf16[B_X, F]", ["X=2,Y=2"]),
    ("bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F]", ["X=2,Y=2", "X=4,Y=1"]),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B_X, F]", ["X=2"]),
    ("bf16[B, D_X] *_D bf16[D_X, F] *_F bf16[F, G] -> bf16[B, G]", ["X=2"]),
    ("int8[B, D_X] *_D int8[D_X, F] *_F fp16[F, G] -> fp16[B, G]", ["X=2"]),
    ("AllGather_X bf16[I_X, J] -> bf16[I, J]", ["X=1", "X=2"]),
    ("AllReduce_Y bf16[I_X, J] {U_Y} -> bf16[I_X, J]", ["X=2,Y=2"]),
    ("ReduceScatter_{X,K} bf16[I, K] {U_X} -> bf16[I, K_X]", ["X=4"]),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F]\nAllGather_X bf16[B_X, F] -> bf16[B, F]", ["X=1", "X=2"]),
]


@pytest.mark.parametrize("spec, meshes", SHAPES, ids=[s.replace("\n", "; ") for s, _ in SHAPES])
def test_every_spec_analyze_takes_derives_renderable_latex(katex, spec, meshes):
    """Each spec on each mesh and each chip; solved for each free dim, the limit over the
    free dims, and with one dim given a size, solved for another, each on the chips in turn
    (every option on every chip would take four times as long, and find nothing more)."""
    rendered = 0
    chips = itertools.cycle(CHIPS)
    for mesh in meshes:
        free = list(analyze(spec, mesh=mesh).free_dims)
        options = [{"solve": d} for d in free] + [{"limit": free}]
        if len(free) > 1:
            options.append({"values": {free[0]: 4096}, "solve": free[-1], "limit": free[1:-1] or None})
        runs = [(chip, {}) for chip in CHIPS] + [(next(chips), option) for option in options]
        # bare figures: with them, collectives need --ici-bw to be costed
        runs += [(None, dict(peak_flops=1e15, hbm_bw=3e12, solve=free[0] if free else None))]
        if mesh is not None:
            runs += [(None, dict(peak_flops=1e15, hbm_bw=3e12, ici_bw=5e10, solve=free[-1] if free else None))]
        for chip, option in runs:
            rendered += analysis_and_derivation(katex, spec, chip, mesh, **option) is not None
    # most of these are accepted (the v5e refuses fp16): the loop is not vacuous
    assert rendered >= len(meshes) * 2


@st.composite
def programs(draw):
    """A spec from the parts the issue names: chains of 1 to 3 steps, int8/fp8/fp16/bf16 mixes,
    meshes of 1, 2 and 4 chips with dims split over their axes, collectives written out;
    a chip, and options: a dim to solve for, dims to take the limit over, sizes."""
    mesh = draw(st.sampled_from([None, "X=1", "X=2", "X=4", "X=2,Y=2", "X=2@dcn"]))
    axes = [""] + ([f"_{name}" for name in ("X", "Y") if f"{name}=" in mesh] if mesh else [])

    def split():
        return draw(st.sampled_from(axes))

    def dtype():
        return draw(st.sampled_from(["int8", "fp8", "fp16", "bf16"]))

    kind = draw(st.sampled_from(["chain", "chain", "dot", "batched", "elementwise", "collective"]))
    if kind == "chain":
        steps = draw(st.integers(1, 3))
        names = ["B", "D", "F", "G", "H"][: steps + 2]
        subs = [split() for _ in names]
        dims = [n + s for n, s in zip(names, subs)]
        text = f"{dtype()}[{dims[0]}, {dims[1]}]"
        for i in range(1, steps + 1):
            text += f" *_{names[i]} {dtype()}[{dims[i]}, {dims[i + 1]}]"
        text += f" -> {dtype()}[{dims[0]}, {dims[-1]}]"
    elif kind == "dot":
        n = "N" + split()
        text = f"{dtype()}[{n}] *_N {dtype()}[{n}] -> {dtype()}[1]"
    elif kind == "batched":
        b, s = "B" + split(), "S" + split()
        text = f"{dtype()}[{b}, {s}, D] @ {dtype()}[{b}, D, T] -> {dtype()}[{b}, {s}, T]"
    elif kind == "elementwise":
        b = "B" + split()
        text = f"{dtype()}[{b}, D] * {dtype()}[{b}, D] -> {dtype()}[{b}, D]"
    else:
        x = draw(st.sampled_from(axes[1:] or ["_X"]))
        text = draw(st.sampled_from([f"AllGather{x} bf16[I{x}, J] -> bf16[I, J]",
                                     f"AllReduce{x} bf16[I, J] {{U{x}}} -> bf16[I, J]",
                                     "bf16[I, J] @ bf16[J, K] -> bf16[I, K]\n"
                                     f"AllGather{x} bf16[I{x}, K] -> bf16[I, K]"]))
    return text, mesh, draw(st.sampled_from(CHIPS))


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=programs(), data=st.data())
def test_random_specs_derive_renderable_latex_or_a_symroof_error(katex, program, data):
    spec, mesh, chip = program
    try:
        dims = list(analyze(spec, mesh=mesh).dims)
    except SymroofError:
        return  # not a spec analyze takes (an axis splitting two dims of a tensor, ...)
    solve = data.draw(st.sampled_from([None, *dims]))
    others = [d for d in dims if d != solve]
    sized = data.draw(st.lists(st.sampled_from(others), unique=True, max_size=len(others) - 1)) if others else []
    values = {d: data.draw(st.sampled_from([8, 4096])) for d in sized} or None
    limit = data.draw(st.lists(st.sampled_from(dims), unique=True, max_size=2)) or None
    tex = analysis_and_derivation(katex, spec, chip, mesh, values=values, solve=solve, limit=limit)
    if limit and values and set(limit) & set(values):
        assert tex is None  # a limit over a dim with a size is refused, never printed


def test_greek_dims_inside_words_render(katex):
    # found by the command-line fuzzer: a collective's text held Δ, which KaTeX refuses in \text
    tex = derivation(analyze("mesh X=4@dcn, Y=3\nAllGather_Y bf16[Δ_Y, G] -> bf16[Δ, G]\n"
                             "f16[K, S_X] @ f16[S_X, Δ] -> f16[K, Δ] {U_X}"))
    assert r"bf16[$\Delta$\_Y, G]" in tex
    katex.check(tex)


@pytest.mark.parametrize("op", ["÷", "×", "·", "−"])
def test_a_step_keeps_the_operator_written_and_katex_reads_it(katex, op):
    # was: KaTeX "Unrecognized Unicode character ÷" in a fused block's step (found by the fuzzer)
    tex = derivation(analyze(f"fused {{ fp32[B, T] {op} fp32[T] -> fp32[B, T] }}", chip="tpu-v5e",
                             vector_flops=1e12))
    katex.check(tex)
    assert op not in tex


@pytest.mark.parametrize("mesh", ["X", "X@line", "X, Y=4@dcn"])
def test_a_mesh_axis_without_a_size_renders(katex, mesh):
    spec = "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]; AllToAll_{X,F} bf16[B_X, F] -> bf16[B, F_X]"
    tex = derivation(analyze(spec, chip="tpu-v5e", mesh=mesh), solve="D")
    katex.check(tex)
    assert "|X|" in tex


def test_a_product_of_many_multi_letter_dims_renders(katex):
    """A tensor of 32 named dims: its products, thin-spaced between factors, stay within KaTeX's
    1000 macro expansions (found by the fuzzer: each \\, expanded into several macros)."""
    dims = ", ".join(f"Q{k}" for k in range(32))
    out = io.StringIO()
    assert main(["latex", f"fp8[F, {dims}] -> bf16[F]", "--chip", "tpu-v4p"], out=out) == 0
    katex.check(out.getvalue())
    assert r"\mathit{Q0}\mkern3mu \mathit{Q1}" in out.getvalue()
