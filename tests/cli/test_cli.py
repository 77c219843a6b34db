"""The command line contract: text and JSON output, options, errors with exit code 2."""

import io
import json
import subprocess
import sys

import pytest
import sympy
from sympy.parsing.sympy_parser import parse_expr

from symroof.cli.command import main

MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def run_json(*argv):
    code, out, err = run(*argv, "--json")
    assert code == 0, err
    return json.loads(out)


def read_back(text, data):
    """What a script does with our JSON: parse_expr in the spec's dim names."""
    local = {name: sympy.Symbol(name, positive=True, integer=True) for name in data["symbols"]}
    return parse_expr(text, local_dict=local)


def test_json_contract_with_chip_limit_and_solve():
    data = run_json("analyze", MATMUL, "--chip", "tpu-v5e", "--limit", "D,F", "--solve", "B")
    for key in ("flops", "flops_exact", "bytes", "bytes_read", "bytes_written", "intensity",
                "intensity_exact", "critical_intensity", "t_math", "t_comms", "t_lower", "t_upper",
                "bound", "intensity_limit", "threshold"):
        assert key in data, key
    B, D, F = (sympy.Symbol(n, positive=True, integer=True) for n in "BDF")
    assert read_back(data["flops"], data) == 2 * B * D * F
    assert sympy.simplify(read_back(data["intensity"], data) - B * D * F / (B * D + D * F + B * F)) == 0
    assert read_back(data["intensity_limit"], data) == B
    assert data["critical_intensity"] == pytest.approx(240.2439, rel=1e-6)
    threshold = data["threshold"]
    assert {"var", "op", "rule", "exact"} <= set(threshold)
    assert threshold["var"] == "B" and threshold["op"] == ">"
    assert threshold["rule"] == pytest.approx(240.2439, rel=1e-6)
    assert isinstance(read_back(threshold["exact"], data), sympy.Expr)
    assert isinstance(read_back(data["bound"], data), sympy.StrictGreaterThan)
    t_lower = read_back(data["t_lower"], data)
    assert isinstance(t_lower, sympy.Max)


def test_json_numbers_when_everything_has_a_value():
    data = run_json("analyze", MATMUL, "--chip", "v5e", "--set", "B=128", "--set", "D=4096,F=4096")
    assert data["flops"] == 2 * 128 * 4096 * 4096
    assert isinstance(data["t_math"], float) and data["bound"] == "memory"
    assert data["values"] == {"B": 128, "D": 4096, "F": 4096}


def test_json_no_threshold_has_reason():
    data = run_json("analyze", "bf16[N] *_N bf16[N] -> bf16[1]", "--chip", "v5e", "--solve", "N")
    assert data["threshold"]["rule"] is None and data["threshold"]["exact"] is None
    assert "never compute-bound" in data["threshold"]["reason"]


def test_overrides_apply_for_one_analysis():
    data = run_json("analyze", MATMUL, "--chip", "v5e", "--hbm-bw", "8.1e11", "--peak-flops", "1.97e14")
    assert data["critical_intensity"] == pytest.approx(1.97e14 / 8.1e11)
    data = run_json("analyze", "int8[B, D] @ int8[D, F] -> int8[B, F]", "--chip", "v5e",
                    "--override", "peak_flops_per_s.int8=4e14")
    assert data["critical_intensity"] == pytest.approx(4e14 / 8.2e11)
    data = run_json("analyze", MATMUL, "--peak-flops", "1e15", "--hbm-bw", "3.35e12", "--solve", "B")
    assert data["threshold"]["rule"] == pytest.approx(298.5075, rel=1e-6)


def test_text_output_reads_well():
    code, out, err = run("analyze", MATMUL, "--chip", "tpu-v5e", "--solve", "B", "--set", "D=4096,F=4096")
    assert code == 0 and err == ""
    assert "T_math" in out and "240.24" in out and "272.17" in out
    assert "1 FLOP = one multiply or one add" in out


def test_dtype_option_for_untyped_forms():
    data = run_json("analyze", "bd,df->bf", "--dtype", "int8")
    b, d, f = (sympy.Symbol(n, positive=True, integer=True) for n in "bdf")
    assert read_back(data["bytes"], data) == b * d + d * f + b * f


def test_chips_and_chip():
    code, out, _ = run("chips")
    assert code == 0
    for name in ("tpu-v5e", "tpu-v5p", "tpu-v4p", "tpu-v3", "tpu-v6e", "h100", "h200", "b200", "a100"):
        assert name in out.lower()
    code, out, _ = run("chip", "TPU v5e")
    assert code == 0 and "hbm_bandwidth_bytes_per_s" in out and "SB1" in out


@pytest.mark.parametrize("argv, message", [
    (["analyze", "bf16[B, D] @ bf16[D F] -> bf16[B, F]"], "expected ',' or ']', got 'F' (column 21)"),
    (["analyze", MATMUL, "--chip", "tpu-v5f"], "unknown chip 'tpu-v5f'; did you mean"),
    (["analyze", MATMUL, "--set", "B=0"], "positive integer"),
    (["analyze", MATMUL, "--set", "Q=3"], "unknown dim 'Q'"),
    (["analyze", MATMUL, "--solve", "B"], "needs a chip"),
    (["analyze", MATMUL, "--chip", "v5e", "--hbm-bw", "fast"], "HBM bandwidth must be a finite decimal number, got 'fast'"),
    (["analyze", ""], "empty spec"),
])
def test_errors_exit_2_with_one_line(argv, message):
    code, out, err = run(*argv)
    assert code == 2 and out == ""
    assert message in err.split("\n")[0]
    assert "Traceback" not in err


def test_installed_entry_point_exits_2_without_traceback():
    proc = subprocess.run([sys.executable, "-m", "symroof.cli.command", "analyze", "bf61[B] -> bf16[B]"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "unknown dtype 'bf61'; did you mean 'bf16'?" in proc.stderr
    assert "^^^^" in proc.stderr and "Traceback" not in proc.stderr


def test_version(capsys):
    from symroof.cli.command import build_parser
    with pytest.raises(SystemExit) as info:
        build_parser().parse_args(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out.startswith("symroof ")


@pytest.mark.parametrize("argv, message", [
    (["analyze", MATMUL, "--set", "B=²"], "a dim's size must be a positive integer"),
    (["analyze", MATMUL, "--chip", "v5e", "--hbm-bw", "1e-300"], "out of range"),
    (["analyze", MATMUL, "--peak-flops", "x"], "e.g. 1.97e14"),
    (["analyze", "bf16[B, D=4096] @ bf16[D, F] -> bf16[B, F]", "--set", "D=2048"], "D is 4096 in the spec"),
])
def test_more_bad_options_exit_2(argv, message):
    code, out, err = run(*argv)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("names", [["N", "E", "I", "S"], ["Q", "beta", "pi", "gamma"], ["Δ", "ℌ", "x1", "zeta"]])
def test_json_reads_back_for_awkward_names(names):
    a, b, c, d = names
    data = run_json("analyze", f"bf16[{a}, {b}] @ bf16[{b}, {c}] -> bf16[{a}, {c}]; bf16[{d}] -> bf16[]",
                    "--chip", "v5p", "--solve", a)
    local = {name: sympy.Symbol(name, positive=True, integer=True) for name in data["symbols"]}
    A, B_, C, D_ = (local[n] for n in data["symbols"])
    assert parse_expr(data["flops"], local_dict=local) == 2 * A * B_ * C + D_
    for key in ("bytes", "intensity", "t_lower", "bound"):
        assert parse_expr(data[key], local_dict=local).free_symbols <= set(local.values())


def test_mesh_json_contract():
    data = run_json("analyze", "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", "--mesh", "X=2",
                    "--chip", "v5e", "--ici-bw", "4.5e10", "--solve", "D")
    for key in ("flops", "bytes", "t_math", "t_comms", "flops_total", "t_network", "network_intensity",
                "critical_network_intensity", "collectives", "bound"):
        assert key in data, key
    B, D, F = (sympy.Symbol(n, positive=True, integer=True) for n in "BDF")
    assert read_back(data["flops"], data) == B * D * F
    assert read_back(data["flops_total"], data) == 2 * B * D * F
    assert read_back(data["network_intensity"], data) == D / 2
    (collective,) = data["collectives"]
    assert {"op", "axes", "array", "bytes", "link", "t"} <= set(collective)
    assert collective["op"] == "AllReduce" and collective["axes"] == ["X"] and collective["inserted"]
    assert read_back(collective["bytes"], data) == 2 * B * F
    assert data["threshold"]["network"]["rule"] == pytest.approx(8755.556, rel=1e-6)
    assert data["threshold"]["network"]["regime"] == "bandwidth-bound"


def test_multi_line_json_has_lines_and_totals():
    data = run_json("analyze", "mesh X=4\nAllGather_X bf16[B, D_X] -> bf16[B, D]\nbf16[B, D] @ bf16[D, F] -> bf16[B, F]",
                    "--chip", "v5e")
    assert len(data["lines"]) == 2
    assert data["lines"][0]["flops"] == 0 and data["lines"][1]["flops"] == "2*B*D*F"
    assert data["flops"] == "2*B*D*F" and len(data["collectives"]) == 1


def test_mesh_bound_with_numbers_can_be_network():
    data = run_json("analyze", "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", "--mesh", "X=2", "--chip", "v5e",
                    "--set", "B=16384,D=512,F=16384")
    assert data["bound"] == "network"


def test_case_4_at_the_command_line_costs_both_fixes():
    code, out, err = run("analyze", "bf16[B_X, D] @ bf16[D, F_X] -> bf16[B, F]", "--mesh", "X=2", "--chip", "v5e")
    assert code == 2 and "AllGather_X bf16[D, F_X] -> bf16[D, F] (2*D*F bytes per chip, 2*D*F / 9e10 s on TPU v5e)" in err


def test_a_bug_is_an_internal_error_with_exit_3(monkeypatch):
    import symroof.cli.command

    def broken(args):
        raise RuntimeError("boom")
    monkeypatch.setattr(symroof.cli.command, "_analyze", broken)
    monkeypatch.delenv("SYMROOF_DEBUG", raising=False)
    out, err = io.StringIO(), io.StringIO()
    assert main(["analyze", "bf16[N] *_N bf16[N] -> bf16[1]"], out=out, err=err) == 3
    assert err.getvalue().startswith("symroof: internal error: RuntimeError: boom") and "Traceback" not in err.getvalue()


def test_a_collective_alone_says_its_intensity_is_undefined_not_nan():
    out, err = io.StringIO(), io.StringIO()
    spec = "mesh X=8; AllReduce_X bf16[B, F] {U_X} -> bf16[B, F]"
    assert main(["analyze", spec, "--chip", "h100", "--set", "B=1024,F=8192"], out=out, err=err) == 0
    assert "nan" not in out.getvalue() and "undefined: no FLOPs and no HBM bytes" in out.getvalue()
    assert "network-bound" in out.getvalue()


def test_roofline_of_bare_counts():
    out, err = io.StringIO(), io.StringIO()
    assert main(["roofline", "--flops", "1e12", "--chip", "h100", "--json"], out=out, err=err) == 0, err.getvalue()
    data = json.loads(out.getvalue())
    assert sympy.Rational(data["t_math"]).limit_denominator(10**6) == sympy.Rational(1, 989)
    assert data["bound"] == "compute"
    out = io.StringIO()
    assert main(["roofline", "--flops", "1e12", "--bytes", "1e10", "--chip", "v5e"], out=out, err=err) == 0
    assert "memory-bound" in out.getvalue()
    for argv, message in [(["--flops", "0"], "nothing to cost"), (["--flops", "1e12", "--ici-bw", "1e10"], "--ici-bw")]:
        err = io.StringIO()
        assert main(["roofline", *argv, "--chip", "v5e"], out=io.StringIO(), err=err) == 2
        assert message in err.getvalue()


def test_an_empty_batch_list_is_refused_not_ignored(capsys, tmp_path):
    # `--batches ''` printed the plain report (no sweep) with exit 0, as if no --batches had
    # been given (the fuzzer's seed 43, case 2757)
    for argv in (["model", "llama-3-8b", "--chip", "h100", "--batches", ""],
                 ["model", "llama-3-8b", "--chip", "h100", "--batches", "  ", "--json"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--batches takes 1 to 64 positive batch sizes" in err and "got none" in err
