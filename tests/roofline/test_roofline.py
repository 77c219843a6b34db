"""The roofline engine: counts, times, bounds, limits, thresholds, evaluation."""

import warnings

import pytest
import sympy

from symroof import HardwareError, SpecError, SymroofError, SymroofWarning, analyze, roofline
from symroof.ir import dim_symbol

B, D, F, N = (dim_symbol(n) for n in "BDFN")
V5E = dict(peak_flops=1.97e14, hbm_bw=8.2e11)
MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"


def same(a, b):
    return sympy.simplify(a - b) == 0


def test_counts_of_basic_shapes():
    dot = analyze("bf16[N] *_N bf16[N] -> bf16[1]")
    assert (dot.flops, dot.flops_exact, dot.bytes) == (2 * N, 2 * N - 1, 4 * N + 2)
    outer = analyze("bf16[B] * bf16[F] -> bf16[B, F]")
    assert outer.flops == outer.flops_exact == B * F  # one multiply per output element
    elementwise = analyze("fp32[B, D] * fp32[B, D] -> fp32[B, D]")
    assert elementwise.flops == B * D and elementwise.bytes == 12 * B * D
    reduce = analyze("bf16[B, D] -> bf16[B]")
    assert (reduce.flops, reduce.flops_exact) == (B * D, B * (D - 1))
    copy = analyze("bf16[B, D] -> bf16[D, B]")
    assert copy.flops == 0 and copy.bytes == 4 * B * D
    square = analyze("x: bf16[N] * x: bf16[N] -> bf16[]")  # one tensor, read once
    assert square.bytes_read == 2 * N
    int4 = analyze("int4[B, D] @ int4[D, F] -> int4[B, F]")
    assert int4.bytes == (B * D + D * F + B * F) / 2


def test_chain_costs_each_step_and_sums():
    a = analyze("bf16[B, D] *_D bf16[D, F] *_F bf16[F, D] -> bf16[B, D]")
    first, second = a.steps
    assert first.flops == 2 * B * D * F and second.flops == 2 * B * F * D
    assert first.bytes_written == 2 * B * F and second.bytes_read == 2 * B * F + 2 * F * D
    assert a.flops == 4 * B * D * F
    assert a.bytes == first.bytes + second.bytes


def test_mixed_dtype_chain_runs_each_step_at_its_rate():
    a = analyze("int8[B, D] *_D int8[D, F] *_F bf16[F, G] -> int8[B, G]", chip="tpu-v5e")
    rates = [s.step.compute.name for s in a.steps]
    assert rates == ["int8", "bf16"]
    G = dim_symbol("G")
    assert same(a.t_math, 2 * B * D * F / 394_000_000_000_000 + 2 * B * F * G / 197_000_000_000_000)


def test_times_bounds_and_achieved():
    a = analyze(MATMUL, **V5E).at(B=128, D=4096, F=4096)
    assert a.t_math == sympy.Rational(2 * 128 * 4096 * 4096, 197 * 10**12)
    assert a.t_comms == sympy.Rational(2 * (128 * 4096 * 2 + 4096 * 4096), 82 * 10**10)
    assert a.t_lower == max(a.t_math, a.t_comms) and a.t_upper == a.t_math + a.t_comms
    assert a.bound == "memory"
    assert a.achieved_flops_per_s == a.flops / a.t_lower
    big = analyze(MATMUL, **V5E).at(B=1024, D=4096, F=4096)
    assert big.bound == "compute" and big.achieved_flops_per_s == 197 * 10**12


def test_bound_is_a_condition_when_it_depends_on_free_dims():
    a = analyze(MATMUL, **V5E)
    assert isinstance(a.bound, sympy.StrictGreaterThan)
    assert a.bound.subs({B: 1000, D: 10**6, F: 10**6}) == sympy.true
    assert a.bound.subs({B: 10, D: 10**6, F: 10**6}) == sympy.false
    assert analyze("bf16[N] *_N bf16[N] -> bf16[1]", **V5E).bound == "memory"


def test_limits():
    assert analyze(MATMUL).limit("D", "F") == B
    assert analyze("bf16[N] *_N bf16[N] -> bf16[1]").limit("N") == sympy.Rational(1, 2)
    assert analyze("int8[B, D] *_D int8[B, D, F] -> int8[B, F]").limit("D", "F") == 2
    assert analyze("bf16[B, D] * int8[D, F] -> bf16[B, F]").limit("D,F") == 2 * B
    assert analyze(MATMUL).limit("B", "D", "F") == sympy.oo


def test_path_dependent_limit_warns():
    # intensity D*K/(2*D*K + 2*K + 4*F): D first gives 1/2, F first gives 0
    a = analyze("bf16[D, K] -> bf16[K]; bf16[F] -> bf16[F]")
    with pytest.warns(SymroofWarning, match="depends on how they grow"):
        a.limit("D", "F")


def test_thresholds_rule_exact_and_condition():
    t = analyze(MATMUL, **V5E).threshold("B")
    assert t.op == ">" and t.rule == sympy.Rational(9850, 41) and t.rule_as == ("D", "F")
    C = sympy.Rational(9850, 41)
    assert same(t.exact, C * D * F / (D * F - C * D - C * F))
    assert same(t.condition.lhs - t.condition.rhs, D * F / (D + F) - C)
    at = analyze(MATMUL, **V5E).at(D=4096, F=4096).threshold("B")
    # sizes given stay fixed: nothing is left to grow, so the rule is the exact answer
    assert at.rule == at.exact and at.rule_as == () and float(at.exact) == pytest.approx(272.1714, rel=1e-6)
    small = analyze(MATMUL, **V5E).at(D=300, F=300).threshold("B")  # D*F/(D+F) = 150 < 240
    assert small.rule is None and small.exact is None


def test_thresholds_that_do_not_exist_say_why():
    dot = analyze("bf16[N] *_N bf16[N] -> bf16[1]", **V5E).threshold("N")
    assert dot.op is None and dot.rule is None and dot.exact is None
    assert "never compute-bound" in dot.reason and "1/2" in dot.reason
    per_example = analyze("int8[B, D] *_D int8[B, D, F] -> int8[B, F]", **V5E).threshold("B")
    assert per_example.op is None and "tends to 2 whatever B is" in per_example.reason


def test_threshold_on_another_dim_and_symmetry():
    t = analyze(MATMUL, **V5E).threshold("D")
    assert t.op == ">" and t.rule == sympy.Rational(9850, 41) and t.rule_as == ("B", "F")


def test_values_from_the_spec_and_from_set():
    a = analyze("bf16[B, D=4096] @ bf16[D, F=4096] -> bf16[B, F]", **V5E)
    assert a.values == {"D": 4096, "F": 4096}
    assert a.flops == 2 * 4096 * 4096 * B
    assert float(a.threshold("B").exact) == pytest.approx(272.1714, rel=1e-6)
    with pytest.raises(SpecError, match="D already has the size 4096"):
        a.at(D=1024)
    with pytest.raises(SpecError, match="D is 4096 in the spec"):
        analyze("bf16[B, D=4096] @ bf16[D, F] -> bf16[B, F]", values={"D": 2048})
    assert a.at(D=4096).values["D"] == 4096  # the same size again is no contradiction


def test_bad_requests_are_clear_errors():
    a = analyze(MATMUL, **V5E)
    with pytest.raises(SpecError, match="unknown dim 'G'"):
        a.threshold("G")
    with pytest.raises(SpecError, match="B has a value"):
        a.at(B=4).threshold("B")
    with pytest.raises(SpecError, match="positive integer"):
        a.at(B=0)
    with pytest.raises(SpecError, match="unknown dim 'Q'"):
        analyze(MATMUL, values={"Q": 3})
    with pytest.raises(HardwareError, match="needs a chip"):
        analyze(MATMUL).t_math
    with pytest.raises(HardwareError, match="no figure|has no|not available"):
        analyze("fp8[B, D] @ fp8[D, F] -> fp8[B, F]", chip="tpu-v5e").t_math


def test_bare_counts():
    t = roofline(flops=1e12, peak_flops=9.89e14)
    assert float(t.t_math) == pytest.approx(1e12 / 9.89e14)
    both = roofline(flops=1e12, bytes=1e9, chip="h100")
    assert both.bound == "compute"


def test_chip_figures_drive_the_numbers():
    v5e = analyze(MATMUL, chip="v5e")
    assert v5e.critical_intensity == sympy.Rational(197 * 10**12, 82 * 10**10)
    int8 = analyze("int8[B, D] @ int8[D, F] -> int8[B, F]", chip="TPU v5e")
    assert int8.critical_intensity == sympy.Rational(394 * 10**12, 82 * 10**10)
    overridden = analyze(MATMUL, chip="v5e", hbm_bw="8.1e11")
    assert overridden.critical_intensity == sympy.Rational(197 * 10**12, 81 * 10**10)


def test_readable_repr_and_latex():
    a = analyze(MATMUL, **V5E)
    text = repr(a)
    assert "2*B*D*F" in text and "240.244" in text and "conventions" in text
    assert a._repr_latex_().startswith("$$") and r"\frac" in a._repr_latex_()


def test_warnings_are_not_raised_for_ordinary_limits():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        analyze(MATMUL).limit("D", "F")


# ---- from the first review: conditions, reasons, edge cases -----------------------------------

def test_a_dim_that_does_not_matter_gets_a_condition_not_a_claim():
    t = analyze("bf16[H, B, D] @ bf16[H, D, F] -> bf16[H, B, F]", **V5E).threshold("H")
    assert t.op is None and t.exact is None
    assert "as B, D, F -> oo: compute-bound at every H" in t.reason
    assert "compute-bound at every H when" in t.reason and "never otherwise" in t.reason
    sized = analyze("bf16[H, B, D] @ bf16[H, D, F] -> bf16[H, B, F]", **V5E).at(B=4096, D=4096).threshold("H")
    assert same(sized.condition.lhs - sized.condition.rhs, dim_symbol("F") - sympy.Rational(10086400, 37059))


def test_an_upper_threshold_carries_its_condition():
    t = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]; bf16[K, V] -> bf16[K, V]", **V5E).threshold("K")
    assert t.op == "<" and t.condition is not None and t.otherwise == "never"


def test_no_threshold_at_given_sizes_says_why():
    t = analyze(MATMUL, **V5E).at(D=100, F=100).threshold("B")
    assert t.rule is None and t.exact is None and t.rule_as == ()
    assert "at D = 100, F = 100: never compute-bound" in t.reason and "at most 50" in t.reason
    t = analyze("bf16[B, D] -> bf16[B]", vector_flops=1.4e13, **V5E).threshold("D")
    assert "at most 1/2 for D >= 1" in t.reason


def test_steps_without_flops_need_no_peak():
    cast = analyze("fp8[K, V] -> bf16[K, V]", chip="v5e")  # v5e has no fp8 rate; a cast needs none
    assert cast.t_math == 0 and cast.bound == "memory" and cast.compute_dtypes == ()
    both = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]; int8[K] -> int8[K]", chip="v5e")
    assert [d.name for d in both.compute_dtypes] == ["bf16"]


def test_compute_dtype_does_not_depend_on_operand_order():
    one = analyze("fp16[B, D] @ bf16[D, F] -> bf16[B, F]").steps[0].step.compute
    other = analyze("bf16[B, D] @ fp16[D, F] -> bf16[B, F]").steps[0].step.compute
    assert one == other and one.name == "bf16"


def test_dtypes_without_chip_rates_say_how_to_proceed():
    with pytest.raises(HardwareError, match="lists no int32 rate for any chip"):
        analyze("int32[N] *_N int32[N] -> int32[]", chip="h100").t_math
    ok = analyze("int32[N] *_N int32[N] -> int32[]", chip="h100", peak_flops=1e13)
    assert ok.t_math == 2 * N / 10**13


def test_evaluate_is_vectorised_and_checked():
    import numpy as np
    a = analyze("bf16[B, D=4096] @ bf16[D, F=4096] -> bf16[B, F]", **V5E)
    batch = np.arange(1, 1001)
    values = a.evaluate("t_lower", B=batch)
    assert values.shape == (1000,) and values[0] == pytest.approx(float(a.at(B=1).t_lower))
    with pytest.raises(SpecError, match="D already has the size 4096"):
        a.evaluate("t_lower", B=128, D=np.array([1024, 4096]))
    with pytest.raises(SpecError, match="unknown dim 'Q'"):
        a.evaluate("t_lower", B=[1, 2], Q=[1, 2, 3])
    with pytest.raises(SpecError, match="cannot evaluate 'nope'"):
        a.evaluate("nope", B=1)
    free = analyze(MATMUL, **V5E)
    with pytest.raises(SpecError, match="do not broadcast"):
        free.evaluate("t_lower", B=[1, 2], D=[1, 2, 3], F=1)


def test_python_api_inputs_are_checked():
    import numpy as np
    assert analyze(MATMUL).at(B=np.int64(128)).values["B"] == 128
    with pytest.raises(HardwareError, match="chip must be"):
        analyze(MATMUL, chip=123)
    with pytest.raises(SpecError, match="dtype must be"):
        analyze(MATMUL, dtype=None)
    assert analyze(MATMUL).to_dict(limit="D,F")["limit_as"] == ["D", "F"]
    with pytest.raises(SymroofError, match="out of range"):
        analyze(MATMUL, hbm_bw=1e-300)


def test_bare_zero_counts_give_valid_json_or_an_error():
    import json
    data = roofline(flops=0, bytes=4e9, chip="h100").to_dict()
    json.dumps(data, allow_nan=False)
    assert data["intensity"] == 0 and data["bound"] == "memory"
    with pytest.raises(SpecError, match="nothing to cost"):
        roofline(flops=0, chip="h100")


def test_bandwidth_alone_gives_memory_time():
    a = analyze(MATMUL, hbm_bw=8.2e11)
    assert a.t_comms == (2 * B * D + 2 * D * F + 2 * B * F) / 820_000_000_000
    assert "T_comms" in repr(a) and "T_math" not in repr(a)


def test_evaluate_refuses_sizes_that_are_not_sizes():
    import numpy
    a = analyze(MATMUL, chip="v5e").at(D=4, F=4)
    for bad in ([0, 1], [1, -2], [1, float("nan")]):
        with pytest.raises(SpecError, match="positive and finite"):
            a.evaluate("t_lower", B=numpy.array(bad))
    assert a.evaluate("t_lower", B=numpy.array([1.5]))[0] > 0


def test_a_warning_points_at_the_callers_line_not_inside_symroof():
    import warnings

    import symroof
    from symroof.errors import SymroofWarning
    a = symroof.analyze("fused { bf16[B, D] @ bf16[D, F] -> fp32[B, F]; gelu(fp32[B, F]) -> bf16[B, F] }",
                        chip="h100").at(B=65536, D=8192, F=65536)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a.on_chip  # a cached property: the warning is raised two frames inside functools
    found = [w for w in caught if issubclass(w.category, SymroofWarning)]
    assert found and all(w.filename == __file__ for w in found)
