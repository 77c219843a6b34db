"""Plots: the data on the returned Axes is what the engine derives; files are written."""

import io
import re

import numpy
import pytest

from symroof import SymroofError, analyze
from symroof.cli.command import main
from symroof.render.plot import plot_roofline, plot_sweep, save

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
    # each roof named by what runs under it: the matrix unit, at its dtype
    roofs = {l.get_label().split("(")[1].split(")")[0]: l for l in ax.get_lines() if "roof: HBM" in l.get_label()}
    assert all(l.get_label().startswith("matrix unit") for l in roofs.values())
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


# What a first user trips on (issue 9): scales, units, labels that collide, long legends, colours.

P3_BIG = "bf16[B, 4096] * int8[4096, 4096] -> bf16[B, 4096]"
P3_SMALL = "bf16[B, 1024] * int8[1024, 1024] -> bf16[B, 1024]"
EXPONENT = re.compile(r"\de[+-]?\d|10\^|\\times|\$")      # 1e-06, 2.5e+14, or matplotlib's 10^{14}


def drawn(ax):
    """Draw the figure with the Agg renderer at the dpi `save` uses; the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(ax.figure)
    ax.figure.set_dpi(150)
    canvas.draw()
    return canvas.get_renderer()


def tick_texts(axis) -> list[str]:
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def cli_sweep(*specs, sweep="B=1:512", time=False):
    analyses = [analyze(s, chip="v5e") for s in specs]
    lo, hi = (int(v) for v in sweep.split("=")[1].split(":"))
    values = numpy.unique(numpy.geomspace(lo, hi, 2000).round()) if hi - lo > 5000 else numpy.arange(lo, hi + 1)
    return plot_sweep(analyses, "B", values, quantity="time" if time else "flops")


def test_a_sweep_over_decades_is_log_log_with_ticks_in_units():
    ax = cli_sweep(P3_BIG, P3_SMALL, sweep="B=1:100000")
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    drawn(ax)
    xs, ys = tick_texts(ax.xaxis), tick_texts(ax.yaxis)
    assert "100k" in xs and "1k" in xs and "10" in xs                  # sizes as 10, 1k, 100k
    assert "TFLOPs/s" in ax.get_ylabel() and "100" in ys and "200" in ys   # 197 TFLOPs/s is about 200
    for text in xs + ys + [ax.yaxis.get_offset_text().get_text(), ax.xaxis.get_offset_text().get_text()]:
        assert not EXPONENT.search(text), text
    marks = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert marks == pytest.approx([136.0857, 226.3148], rel=1e-5)      # still the exact knees


def test_times_are_in_seconds_units_not_raw_floats():
    wide = cli_sweep(P3_BIG, P3_SMALL, sweep="B=1:100000", time=True)
    assert wide.get_xscale() == "log" and wide.get_yscale() == "log"   # 1.3 µs to 17 ms
    drawn(wide)
    ys = tick_texts(wide.yaxis)
    assert {"1 µs", "10 µs", "1 ms", "10 ms"} <= set(ys), ys
    narrow = cli_sweep(P3_SMALL, sweep="B=1:10", time=True)           # 1.28 to 1.33 µs
    assert narrow.get_yscale() == "linear" and narrow.get_ylabel() == "T_lower (µs)"
    drawn(narrow)
    ys = tick_texts(narrow.yaxis)
    assert narrow.yaxis.get_offset_text().get_text() == ""
    assert all(not EXPONENT.search(t) and 1 <= float(t) < 2 for t in ys), ys
    assert len({len(t) for t in ys}) == 1                               # 1.28, 1.30: the same decimals


def test_the_chapters_sweep_keeps_linear_axes():
    ax = cli_sweep(P3_BIG, P3_SMALL)                                    # B = 1 to 512, knees at 136 and 226
    assert ax.get_xscale() == "linear" and ax.get_yscale() == "linear"
    drawn(ax)
    assert ax.yaxis.get_offset_text().get_text() == ""                  # no "1e14" over the axis
    assert tick_texts(ax.yaxis)[:3] == ["0", "25", "50"] and "TFLOPs/s" in ax.get_ylabel()


@pytest.mark.parametrize("sweep, time", [("B=1:512", False), ("B=1:1000000", False), ("B=1:100000", True),
                                         ("B=1:512", True), ("B=1:140", False), ("B=100:300", False)])
def test_threshold_labels_do_not_collide_or_leave_the_axes(sweep, time):
    ax = cli_sweep(P3_BIG, P3_SMALL, "bf16[B, 2048] * int8[2048, 2048] -> bf16[B, 2048]", sweep=sweep, time=time)
    renderer = drawn(ax)
    frame = ax.get_window_extent(renderer)
    legend = ax.get_legend().get_window_extent(renderer)
    boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_visible()]
    assert len(boxes) >= 1
    for i, box in enumerate(boxes):
        assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1
        assert not box.overlaps(legend)
        assert not any(box.overlaps(other) for other in boxes[i + 1:])


def test_legends_are_short_and_inside_the_figure():
    long = ["bf16[B, Sequence, Heads, HeadDim] * bf16[Heads, HeadDim, Model] -> bf16[B, Sequence, Model]",
            "bf16[B, Sequence, Heads, HeadDim] * bf16[Heads, HeadDim, Model] -> bf16[B, Sequence, Model]; "
            "bf16[B, Sequence, Model] @ bf16[Model, Hidden] -> bf16[B, Sequence, Hidden]",
            "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"]
    sizes = dict(Sequence=2048, Heads=32, HeadDim=128, Model=4096, Hidden=16384, D=4096, F=4096)
    free = [analyze(s, chip="v5e") for s in long]
    sweep = plot_sweep([a.at(**{k: v for k, v in sizes.items() if k in a.dims}) for a in free], "B",
                       numpy.arange(1, 4097))
    roofline = plot_roofline([a.at(B=256, **{k: v for k, v in sizes.items() if k in a.dims}) for a in free])
    for ax in (sweep, roofline):
        renderer = drawn(ax)
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        assert all(len(t) <= 60 for t in texts), texts
        assert len(set(texts)) == len(texts)                            # still told apart
        assert "bf16[B, D] @ bf16[D, F] -> bf16[B, F]" in " ".join(texts)   # short specs stay whole
        box, page = ax.get_legend().get_window_extent(renderer), ax.figure.bbox
        assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1


def test_one_spec_at_several_sizes_is_named_by_its_sizes():
    ax = plot_sweep([analyze(PROBLEM_3, chip="v5e").at(D=n, F=n) for n in (4096, 1024)], "B", numpy.arange(1, 513))
    legend = ax.get_legend()
    assert legend.get_title().get_text() == PROBLEM_3
    assert [t.get_text() for t in legend.get_texts()][:2] == ["D=4096, F=4096", "D=1024, F=1024"]
    assert ax.get_lines()[0].get_label() == "D=4096, F=4096"


def colour(collection):
    return tuple(collection.get_edgecolor()[0][:3])


def test_roofline_colours_points_by_series_not_by_bound():
    sizes = dict(B=128, D=4096, F=4096)
    bf16 = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e")
    int8 = analyze("int8[B, D] @ int8[D, F] -> int8[B, F]", chip="v5e")
    two = plot_roofline([bf16.at(**sizes), int8.at(**sizes)])          # both memory-bound
    assert [c.get_label().rsplit(": ", 1)[1] for c in two.collections] == ["memory-bound", "memory-bound"]
    assert colour(two.collections[0]) != colour(two.collections[1])
    one = plot_roofline([bf16.at(B=32, D=4096, F=4096), bf16.at(B=2048, D=4096, F=4096)])
    assert [c.get_label() for c in one.collections] == ["B=32: memory-bound", "B=2048: compute-bound"]
    assert colour(one.collections[0]) == colour(one.collections[1])    # one spec, one colour
    legend = {t.get_text(): h for t, h in zip(two.get_legend().get_texts(), two.get_legend().legend_handles)}
    for c in two.collections:                                            # each entry the colour of its point
        assert tuple(legend[c.get_label()].get_edgecolor()[0][:3]) == colour(c)


def test_a_sharded_point_and_its_network_square_share_their_series_colour():
    sizes = dict(B=4096, D=4096, F=4096)
    sharded = analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e").at(**sizes)
    plain = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").at(**sizes)
    ax = plot_roofline([sharded, plain], labels=["2 chips", "1 chip"])
    circle, square, other = ax.collections
    assert square.get_offsets()[0][0] == pytest.approx(float(sharded.network_intensity))
    assert colour(circle) == colour(square) != colour(other)
    assert "squares" in " ".join(t.get_text() for t in ax.get_legend().get_texts())


def test_specs_that_differ_only_in_sizes_are_named_by_them_when_long_or_many():
    specs = [f"bf16[B, {n}] * int8[{n}, {n}] -> bf16[B, {n}]" for n in (256, 512, 1024, 2048, 4096, 8192)]
    ax = plot_sweep([analyze(s, chip="v5e") for s in specs], "B", numpy.arange(1, 600))
    legend = ax.get_legend()
    assert legend.get_title().get_text() == "bf16[B, n] * int8[n, n] -> bf16[B, n]"
    assert [t.get_text() for t in legend.get_texts()][:6] == [f"n={n}" for n in (256, 512, 1024, 2048, 4096, 8192)]
    two = plot_sweep([analyze(s, chip="v5e") for s in specs[:2]], "B", numpy.arange(1, 600))
    assert [t.get_text() for t in two.get_legend().get_texts()][:2] == specs[:2]     # short and few: whole


def test_sweeps_refuse_a_dim_with_a_size_and_unknown_scales(tmp_path):
    with pytest.raises(SymroofError, match="leave it free to sweep it"):
        plot_sweep(analyze(PROBLEM_3, chip="v5e").at(B=4, D=8, F=8), "B", [1, 2])
    with pytest.raises(SymroofError, match="'auto', 'linear' or 'log'"):
        plot_sweep(analyze(PROBLEM_3, chip="v5e").at(D=8, F=8), "B", [1, 2], xscale="symlog")
    with pytest.raises(SymroofError, match="2 labels for 1 analyses"):
        plot_roofline(analyze(PROBLEM_3, chip="v5e").at(B=4, D=8, F=8), labels=["a", "b"])
    forced = plot_sweep(analyze(PROBLEM_3, chip="v5e").at(D=8, F=8), "B", numpy.arange(1, 513), xscale="log")
    assert forced.get_xscale() == "log"
    out, err = io.StringIO(), io.StringIO()
    code = main(["plot", "roofline", PROBLEM_3, "--chip", "v5e", "--set", "B=1,D=2,F=2", "--sweep", "B=1:8",
                 "-o", str(tmp_path / "x.png")], out=out, err=err)
    assert code == 2 and "--sweep is for 'symroof plot sweep'" in err.getvalue()
    assert len(err.getvalue().strip().splitlines()) == 1


def test_a_knee_the_network_keeps_under_the_peak_says_so():
    two_chips = analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="v5e").at(D=8192, F=8192)
    ax = plot_sweep(two_chips, "B", numpy.unique(numpy.geomspace(1, 1e5, 500).round()))
    curve = ax.get_lines()[0].get_ydata()
    assert curve.max() < 1.97e14 * 0.99                                  # the network holds it under the peak
    assert [t.get_text() for t in ax.texts] == ["B = 263.4 (then network-bound)"]
    assert "mesh X=2" in ax.get_title() and ax.get_lines()[0].get_label() == "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]"


def test_titles_name_the_mesh_every_analysis_shares_and_no_other():
    sharded, one_chip = "mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
    points = [analyze(s, chip="v5e").at(B=4096, D=4096, F=4096) for s in (sharded, one_chip)]
    assert plot_roofline(points[0]).get_title() == "Roofline: TPU v5e (bf16; dense peaks; mesh X=2)"
    assert plot_roofline(points).get_title() == "Roofline: TPU v5e (bf16; dense peaks)"
    assert plot_roofline(points[1]).get_title() == "Roofline: TPU v5e (bf16; dense peaks)"
    curves = [analyze(s, chip="v5e").at(D=8192, F=8192) for s in (sharded, one_chip)]
    held = "D = 8192, F = 8192"  # the sizes every curve holds fixed
    assert plot_sweep(curves[0], "B", [1, 2, 4]).get_title() == \
        f"Achieved FLOPs/s against B on TPU v5e (mesh X=2); {held}"
    assert plot_sweep(curves, "B", [1, 2, 4], quantity="time").get_title() == f"Time against B on TPU v5e; {held}"
    assert plot_sweep(curves[1], "B", [1, 2, 4]).get_title() == f"Achieved FLOPs/s against B on TPU v5e; {held}"
    apart = [analyze(one_chip, chip="v5e").at(D=n, F=8192) for n in (4096, 8192)]
    assert plot_sweep(apart, "B", [1, 2, 4]).get_title() == "Achieved FLOPs/s against B on TPU v5e; F = 8192"


def test_a_sweep_whose_peak_moves_with_the_dim_plots_the_most_it_reaches(tmp_path):
    """A norm over the swept dim mixes the vector unit's per-element work with a per-row rsqrt,
    so the peak its achieved FLOPs/s approaches is a formula in that dim (found by the fuzzer:
    an internal error). The peak line is the most the mix reaches over the sweep."""
    a = analyze("rmsnorm_D bf16[D] -> bf16[D]", chip="h100")
    assert not a.peak_flops.is_number
    xs = numpy.arange(16, 100001, 16)
    ax = plot_sweep(a, "D", xs)
    peak = max(float(a.peak_flops.subs(next(iter(a.peak_flops.free_symbols)), x)) for x in (16, 100000))
    assert [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"] == pytest.approx([peak])
    out, err = io.StringIO(), io.StringIO()
    assert main(["plot", "sweep", "rmsnorm_D bf16[D] -> bf16[D]", "--chip", "h100", "--sweep", "D=16:100000",
                 "-o", str(tmp_path / "norm.png")], out=out, err=err) == 0, err.getvalue()
