"""symroof calibrate and validate: the chip entry they write loads, repeated calibrations agree
within their spreads, no op runs faster than the calibrated roof, and a row that does is
flagged with the figure to suspect.

The timings are real (quick sizes: the file takes about half a minute on two cores). This
machine may be shared: where a neighbour's load changes between two runs, their figures can
differ by more than either run's spread, so the timing assertions allow one retry."""

import io
import json
import os
import shutil
import sys

import pytest

from symroof.cli.command import main
from symroof.errors import SymroofError
from symroof.hardware.chips import get_chip, load_hardware
from symroof.measure import calibrate, validate
from symroof.measure import kernels as measure
from symroof.measure import kernels_jax as measure_jax
from symroof.measure.kernels import Timing
from symroof.resources import resource_path

MEASURED = ("peak_flops_per_s.fp64", "peak_flops_per_s.fp32", "hbm_bandwidth_bytes_per_s",
            "vector_flops_per_s.fp64", "vector_flops_per_s.fp32")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def calibrated_and_validated(path):
    """calibrate --json -o path, then validate --json against it: the two reports."""
    code, out, err = run("calibrate", "--quick", "--id", "test-cpu", "-o", str(path), "--json")
    assert code == 0, err
    cal = json.loads(out)
    code, out, err = run("validate", "--quick", "--hardware", str(path), "--chip", "test-cpu", "--json")
    assert code in (0, 1), err
    report = json.loads(out)
    assert code == (1 if report["faster_than_roof"] else 0)
    return cal, report


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    """A copy of the shipped hardware file with this machine added, and what validate found on it
    (once more where a row beat the roof: a neighbour's load may have changed in between)."""
    path = tmp_path_factory.mktemp("calibrate") / "hardware.json"
    shutil.copy(resource_path("hardware.json"), path)
    cal, report = calibrated_and_validated(path)
    if report["faster_than_roof"]:
        cal, report = calibrated_and_validated(path)
    return path, cal, report


def test_the_written_file_loads_with_every_measured_figure_sourced(measured):
    path, cal, _ = measured
    chip = get_chip("test-cpu", path)
    assert chip.kind == "cpu" and chip.id in load_hardware(path)
    for figure in MEASURED:
        assert chip.figure(figure) > 0
        assert chip.sources[figure].startswith("measured: ")
        assert "runs" in chip.sources[figure] and "spread" in chip.sources[figure]
    # what was not measured is null, never guessed
    assert chip.figure("peak_flops_per_s.bf16") is None and chip.figure("clock_hz") is None
    assert chip.figure("hbm_capacity_bytes") == measure.memory_bytes()
    assert chip.sources["hbm_capacity_bytes"].startswith("read from the OS")
    # the figure written is the best rate of its fastest kernel, to four digits
    for figure in MEASURED:
        best = max(k["best"] for k in cal["kernels"] if k["figure"] == figure)
        assert float(chip.figure(figure)) == pytest.approx(best, rel=1e-3)
        for k in cal["kernels"]:
            assert k["worst"] <= k["median"] <= k["best"]
            assert k["spread"] == pytest.approx((k["best"] - k["worst"]) / k["median"])


def test_the_other_chips_of_the_file_are_kept_exactly(measured):
    path, _, _ = measured
    shipped, written = load_hardware(), load_hardware(path)
    assert list(written) == [*shipped, "test-cpu"]
    for chip_id, chip in shipped.items():
        assert written[chip_id].figures == chip.figures and written[chip_id].sources == chip.sources


def test_the_measured_chip_works_wherever_a_chip_is_taken(measured):
    path, _, _ = measured
    # (a square matmul is written with three names: a dim appears once per tensor)
    code, out, err = run("analyze", "fp32[M, N] @ fp32[N, K] -> fp32[M, K]", "--hardware", str(path),
                         "--chip", "test-cpu", "--set", "M=4096,N=4096,K=4096", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["bound"] == "compute"
    assert result["t_lower"] == pytest.approx(2 * 4096**3 / float(get_chip("test-cpu", path).peak_flops("fp32")))
    code, out, err = run("chip", "test-cpu", "--hardware", str(path))
    assert code == 0, err
    assert "measured: matmul fp32" in out


# Timing this machine against itself: real stopwatches on shared cores, so these two run
# only on request (SYMROOF_TIMING=1), as speed is measured in benchmarks, not in CI's tests;
# the flag's logic is tested below with a fake stopwatch, every run.
TIMING = pytest.mark.skipif(not os.environ.get("SYMROOF_TIMING"),
                            reason="times this machine: run with SYMROOF_TIMING=1 on a quiet machine")


@TIMING
def test_no_op_runs_faster_than_the_calibrated_roof(measured):
    _, _, report = measured
    assert {r["op"] for r in report["rows"]} == {"matmul", "dot", "add", "multiply"}
    assert {r["regime"] for r in report["rows"]} == {"memory", "compute"}
    for row in report["rows"]:
        assert 0 < row["fraction"] <= 1 + row["tolerance"], row
        assert row["fraction"] == pytest.approx(row["t_lower"] / row["measured"]["median"])
        assert row["suspect"] is None
    assert report["largest"]["matmul"]["sizes"]["B"] == max(r["sizes"].get("B", 0) for r in report["rows"])
    assert [r["op"] for r in report["largest"]["elementwise"]] == ["add", "multiply"]


def _figures(cal) -> dict:
    """(best, worst) of each figure written, from calibrate's JSON report or a Calibration."""
    if isinstance(cal, dict):
        return {k["figure"]: (k["best"], k["worst"]) for k in cal["kernels"] if k["written"]}
    return {path: (r.best, r.worst) for path, r in cal.figures().items()}


def _disagree(one, two) -> list:
    """The figures of two runs further apart than both runs' spreads allow:
    |best - best'| > (best - worst) + (best' - worst')."""
    a, b = _figures(one), _figures(two)
    assert a.keys() == b.keys() == set(MEASURED)
    return [(path, a[path], b[path]) for path in a
            if abs(a[path][0] - b[path][0]) > (a[path][0] - a[path][1]) + (b[path][0] - b[path][1])]


@TIMING
def test_repeated_calibrations_agree_within_their_spread(measured):
    runs = [measured[1], calibrate.measure_machine("numpy", quick=True)]
    if _disagree(*runs):  # a neighbour's load changed in between: two runs once more, back to back
        runs = [calibrate.measure_machine("numpy", quick=True) for _ in range(2)]
    assert not _disagree(*runs)


# The flag, with a fake stopwatch ----------------------------------------------------------------

def _chip_file(tmp_path, peak=1e9, vector=1e9, bandwidth=1e9):
    chip = {"id": "toy", "name": "Toy", "vendor": "test", "kind": "cpu",
            "peak_flops_per_s": {**dict.fromkeys(("fp64", "tf32", "bf16", "fp16", "fp8", "int8", "int4", "fp4")),
                                 "fp32": peak},
            **({"vector_flops_per_s": {"fp32": vector}} if vector else {}),
            "hbm_capacity_bytes": 2**34, "hbm_bandwidth_bytes_per_s": bandwidth,
            "sources": {"peak_flops_per_s": "test", "vector_flops_per_s": "test", "hbm_capacity_bytes": "test",
                        "hbm_bandwidth_bytes_per_s": "test"}}
    path = tmp_path / "toy.json"
    path.write_text(json.dumps({"schema_version": 1, "chips": [chip]}))
    return path


def _t_lower(point, peak, vector, bandwidth):
    """T_lower by hand: a matmul or dot runs at the peak, add and multiply on the vector unit."""
    s = point.sizes
    if point.op == "matmul":
        b, d, f = s["B"], s["D"], s["F"]
        flops, moved, rate = 2 * b * d * f, 4 * (b * d + d * f + b * f), peak
    elif point.op == "dot":
        flops, moved, rate = 2 * s["N"], 8 * s["N"] + 4, peak
    else:
        flops, moved, rate = s["N"], 12 * s["N"], vector
    return flops, moved, max(flops / rate, moved / bandwidth)


def _sweep(tmp_path, factor, spread=0.0, cache=2**20, **figures):
    """validate on a toy chip whose every op takes T_lower * factor (the spread around it)."""
    figures = {"peak": 1e9, "vector": 1e9, "bandwidth": 1e9, **figures}
    path = _chip_file(tmp_path, **figures)

    def timer(point):
        t = _t_lower(point, **figures)[2] * factor
        return Timing((t * (1 - spread / 2), t, t * (1 + spread / 2)))

    return validate.run_sweep("toy", str(path), quick=True, timer=timer, cache=cache), figures


def test_the_fraction_is_t_lower_over_the_measured_median(tmp_path):
    v, figures = _sweep(tmp_path, factor=2.5)
    assert v.rows and not v.skipped
    for row in v.rows:
        flops, moved, t_lower = _t_lower(row.point, **figures)
        assert (row.flops, row.bytes) == (flops, moved)
        assert row.t_lower == pytest.approx(t_lower)
        assert row.fraction == pytest.approx(1 / 2.5)
        assert not row.faster and row.suspect is None
    assert "FASTER" not in validate.table(v)


def test_a_row_within_its_spread_is_not_flagged(tmp_path):
    v, _ = _sweep(tmp_path, factor=1 / 1.1, spread=0.2)
    assert all(row.fraction == pytest.approx(1.1) and not row.faster for row in v.rows)


def test_a_row_faster_than_the_roof_names_the_suspect_figure(tmp_path):
    v, _ = _sweep(tmp_path, factor=0.5, cache=1024)
    assert all(row.faster for row in v.rows)
    regimes = {row.bound for row in v.rows}
    assert regimes == {"memory", "compute"}
    for row in v.rows:
        if row.bound == "compute":
            assert "peak figure peak_flops_per_s.fp32 is too low" in row.suspect
        else:
            assert "far larger than the last-level cache" in row.suspect
            assert "hbm_bandwidth_bytes_per_s is too low" in row.suspect
    text = validate.table(v)
    assert "the largest matmul (B=" in text and "the largest elementwise ops (N=" in text
    assert f"{len(v.rows)} of {len(v.rows)} ops measured FASTER than the roof allows" in text
    assert sum(line.startswith("!! ") for line in text.splitlines()) == 2 * len(v.rows)  # marked, explained


def test_a_memory_bound_row_in_cache_blames_the_cache(tmp_path):
    # a chip with a tiny bandwidth: every op memory-bound; a cache larger than every array
    v, _ = _sweep(tmp_path, factor=0.5, bandwidth=1e3, cache=2**40)
    assert {row.bound for row in v.rows} == {"memory"}
    for row in v.rows:
        assert "fit in the last-level cache" in row.suspect and "timed the cache, not memory" in row.suspect


def test_a_chip_without_a_vector_figure_skips_the_elementwise_ops(tmp_path):
    path = _chip_file(tmp_path, vector=None)
    v = validate.run_sweep("toy", str(path), quick=True, timer=lambda p: Timing((1.0, 1.0)), cache=2**20)
    assert {row.point.op for row in v.rows} == {"matmul", "dot"}
    assert [s.split()[0] for s in v.skipped] == ["add", "multiply"]
    assert "no vector-unit figure" in v.skipped[0] and "skipped add" in validate.table(v)


def test_the_plot_draws_measured_points_on_the_roofline(tmp_path):
    v, _ = _sweep(tmp_path, factor=2.0)
    validate.plot(v, str(tmp_path / "roof.png"))
    assert (tmp_path / "roof.png").stat().st_size > 10_000


# The pieces -------------------------------------------------------------------------------------

def test_time_it_runs_enough_calls_to_last_the_minimum():
    now = [0.0]
    calls = []

    def kernel():
        calls.append(1)
        now[0] += 0.001

    timing = measure.time_it(kernel, repeats=3, min_seconds=0.01, clock=lambda: now[0], warmups=4)
    assert timing.calls == 10 and len(calls) == 4 + 1 + 3 * 10
    assert timing.seconds == pytest.approx((0.001,) * 3)
    assert timing.spread == pytest.approx(0.0)


def test_cycled_calls_run_each_copy_in_turn():
    made = []

    def make():
        k = len(made)
        made.append(0)
        return lambda: made.__setitem__(k, made[k] + 1)

    call = measure.cycled(make, 3)
    for _ in range(7):
        call()
    assert made == [3, 2, 2]


def test_copies_keep_each_array_out_of_the_cache():
    assert measure.copies(64 * 2**20, 32 * 2**20) == 4
    assert measure.copies(2**30, 32 * 2**20) == 1
    assert measure.copies(100, None) == 1
    assert measure.copies(2**20, 2**40) == measure.ROTATE_BYTES // 2**20  # no more memory than that
    points = validate.points(4096, 2**25, quick=True, cache=32 * 2**20)
    assert all(p.span >= measure.ROTATE_CACHES * 32 * 2**20 for p in points)
    assert [p.sizes["B"] for p in points if p.op == "matmul"] == [1, 2, 4, 8, 16, 64, 256]


def test_jax_kernels_cover_each_figure_and_run():
    pytest.importorskip("jax")
    paths = [k.path for k in measure_jax.jax_kernels(quick=True)]
    assert paths[:2] == ["peak_flops_per_s.bf16", "peak_flops_per_s.fp32"]
    assert paths.count("hbm_bandwidth_bytes_per_s") == 2 and "vector_flops_per_s.fp32" in paths
    for op in ("add", "multiply", "dot"):
        measure_jax.jax_op(op, {"N": 1024})()
    measure_jax.jax_op("matmul", {"B": 2, "D": 8, "F": 4})()


# The command line's errors ----------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "message"), [
    (["calibrate", "--backend", "numpi"], "unknown backend 'numpi'; did you mean 'numpy'?"),
    (["validate", "--chip", "v5e", "--backend", "torch"], "unknown backend 'torch'"),
    (["validate", "--chip", "no-such-chip", "--quick"], "unknown chip 'no-such-chip'"),
    (["calibrate", "--repeats", "1"], "--repeats 1: give a whole number of runs from 2 (to measure a spread) to 1000"),
    (["calibrate", "--repeats", "many"], "--repeats many: give a whole number"),
    (["calibrate", "--id", " "], "--id: give the chip a non-empty id"),
    (["validate", "--chip", "v5e", "--plot", "roof.txt"], "plots are saved as .png, .svg or .pdf"),
])
def test_bad_input_is_one_line_and_exit_2(argv, message):
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert err.startswith("symroof: error: ") and message in err and err.count("\n") == 1


def test_bad_output_paths_are_refused_before_measuring(tmp_path):
    code, _, err = run("calibrate", "-o", str(tmp_path / "missing" / "x.json"))
    assert code == 2 and "does not exist" in err and err.count("\n") == 1
    code, _, err = run("calibrate", "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err
    other = tmp_path / "notes.json"
    other.write_text('{"chips": "no"}')
    code, _, err = run("calibrate", "-o", str(other))
    assert code == 2 and "exists and is not a hardware file" in err and err.count("\n") == 1
    assert other.read_text() == '{"chips": "no"}'


def test_a_chip_that_would_not_load_is_not_written(tmp_path):
    path = tmp_path / "hw.json"
    shutil.copy(resource_path("hardware.json"), path)
    before = path.read_text()
    toy = json.loads(_chip_file(tmp_path).read_text())["chips"][0]
    with pytest.raises(SymroofError, match="would not load, so nothing was written: .*'H100' also names chip"):
        calibrate.write(str(path), {**toy, "id": "mine", "name": "H100"})
    assert path.read_text() == before and [p.name for p in tmp_path.iterdir()] == ["hw.json", "toy.json"]
    assert calibrate.write(str(path), {**toy, "id": "mine"}).startswith("added chip 'mine'")
    assert calibrate.write(str(path), {**toy, "id": "mine", "name": "Mine"}).startswith("replaced chip 'mine'")
    assert get_chip("mine", path).name == "Mine" and len(load_hardware(path)) == len(load_hardware()) + 1


def test_a_number_a_float_would_change_is_refused(tmp_path):
    path = _chip_file(tmp_path, peak=None)
    path.write_text(path.read_text().replace('"fp32": null', '"fp32": 1.23456789012345678901e12'))
    assert float(get_chip("toy", path).peak_flops("fp32")) > 0
    with pytest.raises(SymroofError, match="more digits than a float keeps"):
        calibrate.check_output(str(path))


def test_jax_missing_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "jax", None)  # import jax now raises ImportError
    code, _, err = run("calibrate", "--backend", "jax", "--quick")
    assert code == 2 and "--backend jax needs JAX: pip install 'symroof[jax]'" in err and err.count("\n") == 1
