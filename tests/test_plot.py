"""Plots: the data on the returned Axes is what the engine derives; files are written."""

import io

import numpy
import pytest

from symroof import SymroofError, analyze
from symroof.cli import main
from symroof.plot import plot_roofline, plot_sweep, save

PROBLEM_3 = "bf16[B, D] * int8[D, F] -> bf16[B, F]"


def problem_3():
    big = analyze(PROBLEM_3, chip="tpu-v5e").at(D=4096, F=4096)
    small = analyze(PROBLEM_3, chip="tpu-v5e").at(D=1024, F=1024)
    return plot_sweep([big, small], "B", numpy.arange(1, 513), labels=["D = F = 4096", "D = F = 1024"])


def test_problem_3_both_curves_reach_the_roof_and_the_small_model_knees_later():
    ax = problem_3()
    curves = [line for line in ax.get_lines() if line.get_label().startswith("D = F")]
    peak = 1.97e14
    knees = []
    for line in curves:
        b, flops = line.get_xdata(), line.get_ydata()
        assert flops[-1] == pytest.approx(peak)            # both reach the peak by B = 512
        assert flops[0] < peak / 100                       # and start far below it
        assert numpy.all(numpy.diff(flops) >= -1e-3)       # never falling as B grows
        knees.append(b[numpy.argmax(flops >= peak * (1 - 1e-9))])
    assert knees == [137, 227]                             # the exact thresholds 136.09 and 226.31
    marks = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert marks == pytest.approx([136.0857, 226.3148], rel=1e-5)
    assert ax.get_xlabel() == "B (size)" and "FLOPs/s" in ax.get_ylabel()


def test_roofline_places_points_where_the_engine_says():
    points = [analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(B=b, D=4096, F=4096)
              for b in (32, 2048)]
    ax = plot_roofline(points, labels=["small batch", "large batch"])
    roof = ax.get_lines()[0]
    x, y = roof.get_xdata(), roof.get_ydata()
    assert y.max() == pytest.approx(1.97e14) and y[0] == pytest.approx(x[0] * 8.2e11)
    offsets = [c.get_offsets()[0] for c in ax.collections]
    for a, (ix, iy) in zip(points, offsets):
        assert ix == pytest.approx(float(a.intensity)) and iy == pytest.approx(float(a.achieved_flops_per_s))
    labels = [c.get_label() for c in ax.collections]
    assert labels == ["small batch: memory-bound", "large batch: compute-bound"]
    assert ax.get_xscale() == "log" and "FLOPs/byte" in ax.get_xlabel()


def test_network_roof_for_sharded_specs():
    a = analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e").at(B=4096, D=4096, F=4096)
    ax = plot_roofline(a)
    network = [l for l in ax.get_lines() if l.get_label().startswith("network roof")]
    assert network and network[0].get_ydata().max() == pytest.approx(1.97e14)


def test_plots_need_sizes_and_a_chip():
    with pytest.raises(SymroofError, match="give sizes for B, D, F"):
        plot_roofline(analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e"))
    with pytest.raises(SymroofError, match="needs a chip"):
        plot_roofline(analyze("bf16[B] -> bf16[]").at(B=4))
    with pytest.raises(SymroofError, match="give sizes for D, F to sweep B"):
        plot_sweep(analyze(PROBLEM_3, chip="v5e"), "B", [1, 2])


@pytest.mark.parametrize("suffix, magic", [("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")])
def test_plot_command_writes_files(tmp_path, suffix, magic):
    path = tmp_path / f"p3.{suffix}"
    out, err = io.StringIO(), io.StringIO()
    code = main(["plot", "sweep", "bf16[B, 4096] * int8[4096, 4096] -> bf16[B, 4096]",
                 "bf16[B, 1024] * int8[1024, 1024] -> bf16[B, 1024]", "--chip", "v5e",
                 "--sweep", "B=1:512", "-o", str(path)], out=out, err=err)
    assert code == 0, err.getvalue()
    assert path.read_bytes().startswith(magic) and path.stat().st_size > 5000


def test_plot_command_errors(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    code = main(["plot", "sweep", PROBLEM_3, "--chip", "v5e", "--sweep", "B=9:1", "-o", str(tmp_path / "x.png")],
                out=out, err=err)
    assert code == 2 and "expected DIM=LO:HI" in err.getvalue()
    code = main(["plot", "roofline", PROBLEM_3, "--chip", "v5e", "--set", "B=1,D=2,F=2", "-o",
                 str(tmp_path / "x.jpg")], out=out, err=err)
    assert code == 2 and ".png, .svg or .pdf" in err.getvalue()


def test_one_roof_per_peak_on_one_chip():
    sizes = dict(B=128, D=4096, F=4096)
    bf16 = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(**sizes)
    int8 = analyze("int8[B, D] @ int8[D, F] -> int8[B, F]", chip="v5e").at(**sizes)
    ax = plot_roofline([bf16, int8])
    roofs = {l.get_label().split()[0]: l for l in ax.get_lines() if "HBM roof" in l.get_label()}
    assert roofs["bf16"].get_ydata().max() == pytest.approx(1.97e14)
    assert roofs["int8"].get_ydata().max() == pytest.approx(3.94e14)
    assert roofs["bf16"].get_linestyle() != roofs["int8"].get_linestyle()
    circle, triangle = (len(c.get_paths()[0].vertices) for c in ax.collections)   # each roof its marker
    assert circle != triangle
    free = [analyze(spec, chip="v5e").at(D=4096, F=4096) for spec in (bf16.spec, int8.spec)]
    sweep = plot_sweep(free, "B", numpy.arange(1, 600))
    assert sweep.get_ylim()[1] == pytest.approx(3.94e14 * 1.1)     # the higher peak is on the plot


def test_a_sharded_sweep_marks_the_roof_it_reaches_last():
    two_chips = analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e").at(B=1024, F=1024)
    ax = plot_sweep(two_chips, "D", numpy.arange(128, 65536, 64))
    marks = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
    network = two_chips.threshold("D").network.exact
    assert marks == pytest.approx([float(network)])          # D > 8755.6, not the HBM's 905.2
    assert any("(network)" in t.get_text() for t in ax.texts)


def test_plots_refuse_what_they_cannot_show(tmp_path):
    sizes = dict(B=128, D=4096, F=4096)
    matmul = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
    with pytest.raises(SymroofError, match="one chip"):
        plot_roofline([analyze(matmul, chip="v5e").at(**sizes), analyze(matmul, chip="h100").at(**sizes)])
    with pytest.raises(SymroofError, match="does no FLOPs"):
        plot_roofline(analyze("mesh X=2; AllGather_X bf16[I_X, J] -> bf16[I, J]", chip="v5e").at(I=8, J=8))
    with pytest.raises(SymroofError, match="nothing to plot"):
        plot_sweep([], "B", [1, 2])
    with pytest.raises(SymroofError, match="cannot write"):
        save(plot_roofline(analyze(matmul, chip="v5e").at(**sizes)), tmp_path / "missing" / "x.png")
