"""The latency-throughput curve (symroof/models/pareto.py, `symroof plot serve`): each
point's numbers against serving.request and against a hand count of the bytes a decode
step reads, the frontier against a brute-force dominance check, the SLO's feasible side,
the CLI's errors, and the files it writes."""

from __future__ import annotations

import dataclasses
import io
import json
import random
from fractions import Fraction
from pathlib import Path

import matplotlib
import pytest
import sympy

import symroof
from symroof.cli.command import main
from symroof.models import pareto, serving

matplotlib.use("Agg")  # headless, whatever the environment says

P, G = 1000, 500
MID = sympy.Rational(2 * P + G - 1, 2)  # the steady state's mean context, 1249.5


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def even() -> pareto.Curve:
    return pareto.curve("llama-3-8b", "h100", P, G, [1, 8, 64, 256, 512, 1024], chips=[1, 2], tpot_slo="0.01")


def _dominated(points: list[pareto.Point], i: int) -> bool:
    p = points[i]
    return any(q.fits is not False and q.latency <= p.latency and q.throughput >= p.throughput
               and (q.latency < p.latency or q.throughput > p.throughput) for j, q in enumerate(points) if j != i)


def test_points_are_serving_requests_numbers(even: pareto.Curve) -> None:
    for p in even.points:
        n = 1 if p.placement == "1 chip" else 2
        r = serving.request("llama-3-8b", "h100", P, G, p.batch, chips=n)
        assert p.latency == r.tpot_steady
        assert p.throughput == r.tokens_per_s_steady / n == p.batch / r.tpot_steady / n
        # the decode step is linear in S between the roofs' crossings: at S = 1249.5 it is the
        # mean of the engine's steps at 1249 and 1250 (no crossing there at these batches)
        steps = [symroof.model("llama-3-8b", "decode", "h100", {"B": p.batch, "S": s}, chips=n).t_step
                 for s in (1249, 1250)]
        assert p.latency == (steps[0] + steps[1]) / 2
        assert p.fits == (r.kv_caches_fit >= p.batch)


def test_latency_against_a_hand_count_of_the_bytes_read() -> None:
    # LLaMA-3 8B (D 4096, L 32, 32 query heads and 8 KV heads of 128, F 14336, V 128256), bf16:
    # a decode step reads every weight but the embedding table (a gather of B rows):
    # 32 layers x (2·D·D for q and o, 2·D·8·128 for k and v, 3·D·F for the MLP, 2·D norms)
    # + the final norm + the unembedding V·D, 2 bytes each
    layer = 2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    weights = 2 * (32 * layer + 4096 + 128256 * 4096)
    kv_token = 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 heads of 128, bf16: 131072 bytes
    c = pareto.curve("llama-3-8b", "h100", P, G, [1, 8])
    for p in c.points:
        hand = (weights + p.batch * float(MID) * kv_token) / 3.35e12  # memory-bound at these batches
        # what the count leaves out: activations and logits, a fraction of a percent
        assert 1 <= float(p.latency) / hand < 1.01
        assert float(p.throughput) == pytest.approx(p.batch / float(p.latency))


def test_fits_against_a_hand_count_of_the_hbm(even: pareto.Curve) -> None:
    # 0.9 x 80 GB usable a chip; the weights (8.03e9 parameters, 2 bytes) and each sequence's
    # cache at S = 1500 (131072 bytes a token) split evenly over the chips
    weights, seq = 2 * 8.03e9, 131072 * 1500
    for p in even.points:
        n = 1 if p.placement == "1 chip" else 2
        room = (0.9 * 80e9 * n - weights) / seq  # 284 sequences on one chip, 650 on two, activations aside
        if p.batch < 0.97 * room:
            assert p.fits is True
        elif p.batch > room:
            assert p.fits is False
    assert [p.batch for p in even.excluded()] == [512, 1024, 1024]


def test_frontier_is_the_non_dominated_set(even: pareto.Curve) -> None:
    points = list(even.points)
    assert set(even.on_frontier) == {i for i, p in enumerate(points) if p.fits is not False
                                     and not _dominated(points, i)}
    # an even split is ideal (no collectives): two chips halve the step at the same tokens/s a chip
    assert all(points[i].placement == "2 chips" for i in even.on_frontier)


def test_frontier_against_brute_force_with_ties_and_misfits() -> None:
    base = serving.request("llama-3-8b", "h100", P, G, 1)
    rng = random.Random(29)
    for _ in range(200):
        points = []
        for _ in range(rng.randint(1, 14)):
            # few distinct values: ties in latency, throughput and both at once
            t, y = sympy.Rational(rng.randint(1, 6), 1000), sympy.Integer(rng.randint(1, 6))
            fit = rng.choice([None, sympy.Integer(0), sympy.Integer(10)])
            r = dataclasses.replace(base, tpot_steady=t, tokens_per_s_steady=y, kv_caches_fit=fit)
            points.append(pareto.Point("x", r))
        on = pareto.frontier(points)
        assert set(on) == {i for i, p in enumerate(points) if p.fits is not False and not _dominated(points, i)}
        assert len(on) == len(set(on))


def test_slo_feasible_side_and_best(even: pareto.Curve) -> None:
    slo = sympy.Rational(1, 100)
    assert even.tpot_slo == slo
    for p in even.points:
        assert even.meets(p) == (float(p.latency) <= 0.01)
    fitting = [i for i, p in enumerate(even.points) if p.fits and p.latency <= slo]
    best = max(fitting, key=lambda i: even.points[i].throughput)
    assert even.best == best
    # by hand, two chips splitting 15.01e9 bytes of weights and 131072 bytes a token of context: the
    # reads alone take at least (15.01e9 + 512 x 1249.5 x 131072) / 6.7e12 = 14.8 ms at B = 512, past
    # 10 ms; at B = 256, at least 8.5 ms (the engine's 9.0 ms adds activations and each op's own roof)
    assert 0.0085 < float(even.points[9].latency) < 0.01 < 0.0148 < float(even.points[10].latency)
    assert (even.points[best].placement, even.points[best].batch) == ("2 chips", 256)
    # a target exactly at a point's latency admits it
    at = even.points[0].latency
    edge = pareto.curve("llama-3-8b", "h100", P, G, [1], tpot_slo=Fraction(int(at.p), int(at.q)))
    assert edge.meets(edge.points[0]) and edge.best == 0
    tight = pareto.curve("llama-3-8b", "h100", P, G, [1], tpot_slo="1e-6")
    assert tight.best is None and "none" in tight.table()


def test_strategies_are_placements() -> None:
    c = pareto.curve("llama-3-70b", "h100", P, G, [1, 64], strategies=["tp=4", "tp=8"], tpot_slo="0.03")
    for p in c.points:
        r = serving.request("llama-3-70b", "h100", P, G, p.batch, strategy=p.placement)
        assert p.chips == int(p.placement.split("=")[1]) == r.chips
        assert p.latency == r.tpot_steady and p.throughput == r.tokens_per_s_steady / p.chips
    m = pareto.curve("llama-3-70b", "h100", P, G, [8], strategies=["dp=X,tp=Y"], mesh="X=2,Y=4").points[0]
    r = serving.request("llama-3-70b", "h100", P, G, 8, strategy="dp=X,tp=Y", mesh="X=2,Y=4")
    assert m.placement == "dp=X,tp=Y on X=2,Y=4" and m.chips == 8 and m.throughput == r.tokens_per_s_steady / 8


def test_json_and_table_share_the_points(even: pareto.Curve) -> None:
    code, out, err = _run("plot", "serve", "llama-3-8b", "--chip", "h100", "--prompt", str(P), "--generate", str(G),
                          "--batches", "1,8,64,256,512,1024", "--chips", "1,2", "--tpot-slo", "0.01", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["frontier"] == list(even.on_frontier) and data["best"] == even.best
    assert data["context"] == 1249.5 and data["tpot_slo"] == 0.01
    for row, p in zip(data["points"], even.points, strict=True):
        assert row["tpot_steady"] == pytest.approx(float(p.latency), rel=1e-12)
        assert row["tokens_per_s_steady_per_chip"] == pytest.approx(float(p.throughput), rel=1e-12)
        assert row["fits"] is p.fits
    code, out, _ = _run("plot", "serve", "llama-3-8b", "--chip", "h100", "--prompt", str(P), "--generate", str(G),
                        "--batches", "1,8,64,256,512,1024", "--chips", "1,2", "--tpot-slo", "0.01")
    assert code == 0 and even.table() == out.rstrip("\n")
    assert "best under tpot <= 10 ms: 2 chips, B = 256" in out and "3 point(s) left off" in out


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG\r\n\x1a\n"), ("svg", b"<?xml")])
def test_the_plot_file(tmp_path: Path, suffix: str, magic: bytes) -> None:
    path = tmp_path / f"pareto.{suffix}"
    code, out, err = _run("plot", "serve", "llama-3-8b", "--chip", "h100", "--prompt", str(P), "--generate", str(G),
                          "--batches", "1,8,64,256,512", "--chips", "1,2", "--tpot-slo", "0.01", "-o", str(path))
    assert code == 0, err
    assert out.rstrip().endswith(f"wrote {path}")
    assert path.read_bytes().startswith(magic)
    if suffix == "svg":
        assert b"</svg>" in path.read_bytes()


def test_the_drawing(even: pareto.Curve) -> None:
    ax = pareto.draw(even)
    frontier = next(line for line in ax.get_lines() if line.get_label() == "Pareto frontier")
    want = sorted(even.on_frontier, key=lambda i: even.points[i].latency)
    assert list(frontier.get_xdata()) == [float(even.points[i].latency) for i in want]
    slo = next(line for line in ax.get_lines() if str(line.get_label()).startswith("tpot SLO"))
    assert list(slo.get_xdata()) == [0.01, 0.01] and slo.get_label() == "tpot SLO 10 ms"
    drawn = sum(len(line.get_xdata()) for line in ax.get_lines()
                if line.get_label() not in ("Pareto frontier",) and not str(line.get_label()).startswith("tpot"))
    assert drawn == len(even.points) - len(even.excluded())
    assert ax.get_xscale() == ax.get_yscale() == "log"
    ax.figure.canvas.draw()  # type: ignore[union-attr]
    ticks = [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels() if t.get_text()]
    assert ticks and not any("^" in t or "e+" in t or "times" in t for t in ticks)
    assert "ms" in " ".join(ticks)
    notes = [t.get_text() for t in ax.texts]
    assert any("3 point(s) left off:\ntheir KV caches do not fit" in n for n in notes)
    assert any("best under the SLO: 2 chips, B=256" in n for n in notes)
    assert "P = 1000, G = 500" in ax.get_title() and "S = 1249.5" in ax.get_title()


@pytest.mark.parametrize("argv, message", [
    (["--prompt", "1000", "--generate", "500"], "needs --prompt P, --generate G and --batches"),
    (["--prompt", "1000", "--generate", "500", "--batches", "1,x"], "--batches takes whole numbers"),
    (["--prompt", "1000", "--generate", "500", "--batches", "1,,2"], "--batches takes whole numbers"),
    (["--prompt", "1000", "--generate", "500", "--batches", "0,4"], "--batches takes 1 to 64"),
    (["--prompt", "1000", "--generate", "500", "--batches", "4", "--chips", "0"], "--chips takes 1 to 16"),
    (["--prompt", "1000", "--generate", "500", "--batches", "4", "--tpot-slo", "-1"], "--tpot-slo must be positive"),
    (["--prompt", "1000", "--generate", "500", "--batches", "4", "--tpot-slo", "fast"], "--tpot-slo takes a number"),
    (["--prompt", "0", "--generate", "500", "--batches", "4"], "the prompt must be a whole number"),
    (["--prompt", "1000", "--generate", "500", "--batches", "4", "--sweep", "B=1:4"], "--sweep is for plots of specs"),
    (["--prompt", "1000", "--generate", "500", "--batches", "4", "--mesh", "X=2"], "--mesh names the axes"),
    (["--prompt", "1000", "--generate", "500", "--batches", "4", "-o", "x.gif"], ".png, .svg or .pdf"),
    # a point that cannot be costed is named: 1 x 1000 prompt tokens do not split over 3 chips
    (["--prompt", "1000", "--generate", "500", "--batches", "1", "--chips", "1,3"], "at B = 1 on 3 chips: "),
])
def test_bad_inputs_are_one_line_errors(argv: list[str], message: str) -> None:
    code, out, err = _run("plot", "serve", "llama-3-8b", "--chip", "h100", *argv)
    assert code == 2 and out == "" and message in err and err.count("\n") == 1, err


def test_bad_commands_around_serve() -> None:
    for argv, message in [
        (["plot", "serve", "llama-3-8b", "mistral-7b", "--chip", "h100"], "takes one model's name, got 2"),
        (["plot", "serve", "llama-3-8b", "--prompt", "1", "--generate", "1", "--batches", "1"], "needs a chip"),
        (["plot", "serve", "no-such-model", "--chip", "h100", "--prompt", "1", "--generate", "1", "--batches", "1"],
         "no-such-model"),
        (["plot", "roofline", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "v5e", "--prompt", "5", "-o", "x.png"],
         "--prompt goes with 'symroof plot serve MODEL'"),
        (["plot", "roofline", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "v5e"], "give -o FILE"),
    ]:
        code, out, err = _run(*argv)
        assert code == 2 and out == "" and message in err and err.count("\n") == 1, (argv, err)


def test_what_the_curve_cannot_show_is_said() -> None:
    # a symbolic chip: which roof is on top is unknown, so no curve (an error, not a crash)
    code, out, err = _run("plot", "serve", "llama-3-8b", "--chip", "symbolic", "--prompt", "1000", "--generate", "500",
                          "--batches", "1,4")
    assert code == 2 and "a chip with numeric figures" in err and err.count("\n") == 1
    # LLaMA-3 70B's 140 GB of bf16 weights (70.6e9 parameters x 2 bytes) are past one H100's usable
    # 0.9 x 80 GB: no point fits; the table says so, a plot is refused
    c = pareto.curve("llama-3-70b", "h100", P, G, [1, 4])
    assert [p.fits for p in c.points] == [False, False] and c.on_frontier == ()
    assert "2 point(s) left off the frontier" in c.table()
    with pytest.raises(symroof.SpecError, match="no point fits"):
        pareto.draw(c)
    # past the model's context (8192): the warning of serving's request, in the table, the JSON and the plot
    late = pareto.curve("llama-3-8b", "h100", 8000, 500, [1, 4])
    assert "WARNING: the request reaches S = 8499, past LLaMA-3 8B's context of 8192" in late.table()
    assert late.to_dict()["past_context"] is True and late.to_dict()["context_limit"] == 8192
    assert any("past LLaMA-3 8B's context\nof 8192" in t.get_text() for t in pareto.draw(late).texts)
    assert _tpot_last_is_the_engines(late)


def _tpot_last_is_the_engines(c: pareto.Curve) -> bool:
    """Each point's JSON gives the last token's step beside the mean's: the engine's step at S = P + G - 1."""
    for row, p in zip(c.to_dict()["points"], c.points, strict=True):
        last = symroof.model("llama-3-8b", "decode", "h100", {"B": p.batch, "S": c.prompt + c.generate - 1}).t_step
        assert row["tpot_last"] == pytest.approx(float(last), rel=1e-12) and row["tpot_last"] > row["tpot_steady"]
    return True


def test_serve_on_a_symbolic_chip_is_an_error_in_model_too() -> None:
    code, out, err = _run("model", "llama-3-8b", "--serve", "--chip", "symbolic", "--prompt", "1000",
                          "--generate", "500")
    assert code == 2 and out == "" and "a chip with numeric figures" in err and err.count("\n") == 1
