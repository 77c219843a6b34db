"""Every plot a command makes, checked on its drawn artists (tests/drawn.py): ticks, labels
inside the frame, no text over another, a legend that explains every marker and line."""

from __future__ import annotations

import numpy
import pytest
from drawn import check_drawn

import symroof
from symroof.hardware.machines import machine
from symroof.measure import validate
from symroof.measure.kernels import Timing
from symroof.models import pareto
from symroof.models import plot as model_plot
from symroof.render.plot import plot_roofline, plot_sweep

MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
PROBLEM_3 = "bf16[B, D] * int8[D, F] -> bf16[B, F]"


def sweeps():
    yield plot_sweep([symroof.analyze(PROBLEM_3, chip="tpu-v5e").at(D=n, F=n) for n in (4096, 1024)], "B",
                     numpy.arange(1, 513))
    two = symroof.analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="tpu-v5e")
    one = symroof.analyze(MATMUL, chip="tpu-v5e")
    yield plot_sweep([two.at(D=8192, F=8192), one.at(D=8192, F=8192)], "B", numpy.arange(1, 4097))
    yield plot_sweep([one.at(D=8192, F=8192)], "B", numpy.arange(1, 100001), quantity="time")


def rooflines():
    yield plot_roofline([symroof.analyze(MATMUL, chip="tpu-v5e").at(B=b, D=8192, F=8192) for b in (16, 128, 1024)]
                        + [symroof.analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]",
                                           chip="tpu-v5e").at(B=4096, D=4096, F=4096)])
    sizes = dict(B=128, D=4096, F=4096)
    yield plot_roofline([symroof.analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(**sizes),
                         symroof.analyze("int8[B, D] @ int8[D, F] -> int8[B, F]", chip="v5e").at(**sizes)])


@pytest.mark.parametrize("ax", [*sweeps(), *rooflines()])
def test_sweeps_and_rooflines(ax):
    check_drawn(ax)


@pytest.mark.parametrize("batches", [(1, 4, 16, 64, 256), (1, 2), (8, 16, 32, 64, 128, 256, 512, 1024)])
def test_the_decode_curve(batches):
    m = symroof.model("llama-3-70b", "decode", chip="h100", sizes={"S": 8192}, chips=8)
    rows = model_plot.sweep(m, batches)
    ax = model_plot.draw(rows, "LLaMA-3 70B, decode on 8 x H100 SXM; S = 8192")
    check_drawn(ax)
    hollow = [line for line in ax.get_lines() if line.get_fillstyle() == "none"]
    assert bool(hollow) == any(r["fits"] is False for r in rows)  # the batches that do not fit, drawn hollow
    assert {t.get_text() for t in ax.texts} == {f"B={b}" for b in batches}


def test_the_serving_curve():
    found = pareto.curve("llama-3-70b", machine("h100"), 1000, 500, [1, 4, 16, 64, 256],
                         strategies=["tp=4", "tp=8"], tpot_slo=0.008)
    check_drawn(pareto.draw(found))


def test_the_validation_plot():
    """validate's plot, of a sweep timed by a fake stopwatch (each op measured at 2/3 of its roof),
    on a chip whose vector unit is slower than its matrix unit, as a CPU's is: two roofs."""
    chip = symroof.get_chip("h100").with_figures({"vector_flops_per_s.fp32": 10**13})

    def timer(point):
        t = float(symroof.analyze(point.spec, chip=chip, values=dict(point.sizes)).t_lower) * 1.5
        return Timing((t, t * 1.05, t * 1.1))

    ax = validate.draw(validate.run_sweep(chip, quick=True, timer=timer, cache=50 * 2**20))
    check_drawn(ax)
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("vector unit") for t in texts) and any(t.startswith("matrix unit") for t in texts)
    assert not any("-bound" in t for t in texts)  # an op's sizes span both regimes: its entry names no bound


def test_the_checks_catch_a_plot_drawn_carelessly():
    """matplotlib's defaults (exponent ticks), a label past the frame and a hollow point the
    legend does not explain: each fails the check."""
    from matplotlib.figure import Figure

    def careless(**change):
        ax = Figure(figsize=(6.4, 4.4), dpi=150).add_subplot()
        ax.plot([5.3, 6.0, 31.4], [23.6, 166, 1018], "o-", color="C0", label="tokens/s")
        ax.plot([31.4], [1018], "o", fillstyle="none", color="C0", label=change.get("hollow", "_hidden"))
        ax.annotate("B=256", (31.4, 1018), textcoords="offset points", xytext=change.get("at", (60, 40)))
        ax.set_xscale("log")
        ax.set_yscale("log")
        if change.get("ticks"):
            from symroof.render.plot_labels import log_ticks, plain
            log_ticks(ax.xaxis, plain)
            log_ticks(ax.yaxis, plain)
        ax.margins(0.2)
        ax.legend(loc="lower right")
        return ax

    for ax in (careless(), careless(ticks=True), careless(ticks=True, hollow="does not fit")):
        with pytest.raises(AssertionError):
            check_drawn(ax)
    check_drawn(careless(ticks=True, hollow="does not fit", at=(-40, -12)))  # fixed: it passes
