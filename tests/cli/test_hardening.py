"""Issue 9: inputs that used to give a wrong answer silently, or crash, and the rough edges
a first user hits. Each test failed before the fix it names."""

import json
import math
import warnings

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symroof import SpecError, SymroofWarning, analyze, parse
from symroof.cli.command import main
from symroof.ir import dim_symbol
from symroof.lang.sizes import size_value

B, D, F, K, T = (dim_symbol(n) for n in "BDFKT")
C = sympy.Rational(197 * 10**12, 82 * 10**10)  # v5e: bf16 peak over HBM bandwidth
MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"


def run(*argv):
    import io
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# ---- a mistyped dtype is not a tensor's name --------------------------------------------

@pytest.mark.parametrize("spec, message", [
    ("bfloat[B, D] @ bf16[D, F] -> bf16[B, F]", r"unknown dtype 'bfloat'; did you mean 'bfloat16'\?"),
    ("int[B, D] @ int8[D, F] -> int8[B, F]", r"unknown dtype 'int'; did you mean 'int8'\?"),
    ("fp[B, D] @ bf16[D, F] -> bf16[B, F]", r"unknown dtype 'fp'; did you mean 'fp8'\?"),
    ("bf[B, D] @ bf16[D, F] -> bf16[B, F]", r"unknown dtype 'bf'; did you mean 'bf16'\?"),
    # even with no dtype anywhere: these words are dtypes gone wrong, not names
    ("int[B, D] @ int[D, F] -> int[B, F]", r"unknown dtype 'int'; did you mean 'int8'\?"),
    ("bfloat[N] * bfloat[N] -> bfloat[]", r"unknown dtype 'bfloat'"),
    ("flot[N] * flot[N] -> flot[]", r"unknown dtype 'flot'; did you mean 'float'\?"),
    # a plain name beside a typed tensor: say how to name it
    ("X[B, D] @ bf16[D, F] -> bf16[B, F]",
     r"unknown dtype 'X': the statement's other tensors have dtypes \(bf16\), so this one needs one too; "
     r"to name a tensor, write 'X: bf16\[B, D\]'"),
    ("bf16[B, D] @ W[D, F] -> bf16[B, F]", r"unknown dtype 'W'"),
    ("X[B, D] @ Y[D, F] -> bf16[B, F]", r"unknown dtype 'X'"),
])
def test_mistyped_dtypes_are_errors_with_a_suggestion(spec, message):
    with pytest.raises(SpecError, match=message) as info:
        parse(spec)
    assert info.value.column == 1 or "W" in spec or "dtype 'X'" in message


def test_bare_names_are_tensors_only_where_no_tensor_has_a_dtype():
    program = parse(r"X[B, D] \cdot_D Y[D, F] \rightarrow Z[B, F]", dtype="fp32")
    statement = program.statements[0]
    assert [(t.name, t.dtype.name) for t in (*statement.operands, statement.output)] == \
        [("X", "fp32"), ("Y", "fp32"), ("Z", "fp32")]
    # named operands are always fine, and so are capitalised words such as Float or W1
    assert parse("x: bf16[N] * y: bf16[N] -> bf16[]").statements[0].operands[0].name == "x"
    assert parse("Float[B, D] @ W1[D, F] -> Out[B, F]").statements[0].operands[1].name == "W1"


def test_a_collective_needs_its_dtype_too():
    with pytest.raises(SpecError, match=r"write 'X: bf16\[I_X, J\]'"):
        parse("mesh X=2; AllGather_X X[I_X, J] -> bf16[I, J]")


# ---- a dim summed in one operand only is summed first -----------------------------------

def test_a_dim_summed_in_one_operand_is_summed_away_first():
    with pytest.warns(SymroofWarning, match="K is summed in the left operand only"):
        a = analyze("bf16[B, D, K] * bf16[D, F] -> bf16[B, F]")
    # by hand: B*D*K adds for the sum over K (leading count: one per term summed), then the
    # matmul's 2*B*D*F; the [B, D] intermediate is written and read back
    assert len(a.steps) == 2 and a.steps[0].step.summed == ("K",)
    assert sympy.expand(a.flops - (B * D * K + 2 * B * D * F)) == 0
    assert sympy.expand(a.flops_exact - (B * D * (K - 1) + B * F * (2 * D - 1))) == 0
    assert sympy.expand(a.bytes - 2 * (B * D * K + B * D + B * D + D * F + B * F)) == 0
    # never the full loop nest
    assert sympy.expand(a.flops - 2 * B * D * F * K) != 0


def test_both_sides_may_be_summed_first():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        a = analyze("bf16[B, K] * bf16[F, J] -> bf16[B, F]")
    said = " ".join(str(w.message) for w in caught)
    assert "K is summed in the left operand only" in said and "J is summed in the right operand only" in said
    J = dim_symbol("J")
    assert [s.step.summed for s in a.steps] == [("K",), ("J",), ()]
    assert sympy.expand(a.flops - (B * K + F * J + B * F)) == 0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 5), st.integers(1, 5))
def test_summing_first_agrees_with_numpy_and_a_hand_count(b, d, f, k):
    """The two steps compute what einsum computes, and their exact count is the adds of the
    sum over K plus the matmul's loop nest, counted here by hand."""
    import numpy as np
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SymroofWarning)
        a = analyze("bf16[B, D, K] * bf16[D, F] -> bf16[B, F]").at(B=b, D=d, F=f, K=k)
    rng = np.random.default_rng(b * 1000 + d * 100 + f * 10 + k)
    x, w = rng.integers(-3, 4, (b, d, k)), rng.integers(-3, 4, (d, f))
    summed = x.sum(axis=2)
    assert (np.einsum("bd,df->bf", summed, w) == np.einsum("bdk,df->bf", x, w)).all()
    adds_k = b * d * (k - 1)
    matmul = b * f * d + b * f * (d - 1)
    assert a.value("flops_exact") == adds_k + matmul


# ---- *_Q with a scalar side -------------------------------------------------------------

@pytest.mark.parametrize("spec, side", [("bf16[B] *_Q bf16[] -> bf16[B]", "left"),
                                        ("bf16[] *_B bf16[B] -> bf16[B]", "left"),
                                        ("bf16[B] *_B bf16[] -> bf16[B]", "right")])
def test_a_named_contraction_dim_must_be_shared_even_beside_a_scalar(spec, side):
    with pytest.raises(SpecError, match=f"is not in the {side} operand: a contracted dim must be in both"):
        parse(spec)


# ---- JSON is always JSON ----------------------------------------------------------------

def test_json_beyond_a_floats_range_is_still_json():
    dims = ", ".join(f"D{i}=999999999999999999" for i in range(20))
    spec = f"bf16[{dims}] -> bf16[D0]"
    code, out, _ = run("analyze", spec, "--chip", "v5e", "--vector-flops", "1.4e13", "--json")
    assert code == 0
    data = json.loads(out, parse_constant=lambda name: pytest.fail(f"{name} in JSON"))
    # the count is kept exact, as a string parse_expr reads back
    assert sympy.Integer(data["flops"]) == sympy.Integer(10**18 - 1) ** 20
    # a ratio past a float's range: its exact value as a string, never Infinity
    assert isinstance(data["t_math"], str) and sympy.Rational(data["t_math"]) > sympy.Integer(10) ** 300
    assert data["bound"] == "memory"


def test_ici_bw_without_a_mesh_is_an_error_not_a_crash():
    for extra in ([], ["--json"], ["--json", "--solve", "B"]):
        code, out, err = run("analyze", MATMUL, "--ici-bw", "1e10", "--peak-flops", "1e14", "--hbm-bw", "1e12",
                             *extra)
        assert code == 2 and err.startswith("symroof: error: an ICI bandwidth (--ici-bw) costs collectives "
                                            "between chips, and this spec has no mesh")


# ---- printing and parsing back ----------------------------------------------------------

@settings(max_examples=80, deadline=None)
@given(st.dictionaries(st.sampled_from("BDF"), st.tuples(st.integers(0, 1), st.integers(1, 10**6))))
def test_values_print_and_parse_back_wherever_they_are_written(where):
    """A value may be written at either appearance of its dim; printed back (at the first),
    the program reads the same."""
    slots = {"B": [(0, 0), (2, 0)], "D": [(0, 1), (1, 0)], "F": [(1, 1), (2, 1)]}
    tensors = [["B", "D"], ["D", "F"], ["B", "F"]]
    for dim, (which, size) in where.items():
        t, i = slots[dim][which]
        tensors[t][i] = f"{dim}={size}"
    spec = " -> ".join([" * ".join(f"bf16[{', '.join(t)}]" for t in tensors[:2]), f"bf16[{', '.join(tensors[2])}]"])
    program = parse(spec)
    assert parse(str(program)) == program
    assert dict(program.values) == {dim: size for dim, (_, size) in where.items()}


def test_values_are_kept_in_the_order_dims_appear():
    program = parse("bf16[B, D] * bf16[F=2, D=4096] -> bf16[B, F]")
    assert program.values == (("D", 4096), ("F", 2)) and parse(str(program)) == program


@pytest.mark.parametrize("name", ["\u1372", "B\u1372", "\u2460"])
def test_number_letters_that_do_not_read_back_are_refused(name):
    # U+1372 (Ethiopic ten) is a number of category No; Python refuses it in names
    try:
        spec = f"bf16[B, {name}] -> bf16[B]"
        parse(spec)
    except SpecError as err:
        assert "cannot name a dim (it does not read back as a name in Python or sympy)" in str(err) \
            or "expected" in str(err)
    else:  # NFKC folded it into a plain name (the circled 1 is '1'): it must read back
        program = parse(spec)
        for dim in program.dims:
            assert sympy.parse_expr(dim, local_dict=program.symbols) == dim_symbol(dim)


# ---- crashes that became errors ---------------------------------------------------------

def test_deep_nesting_is_an_error_with_a_position():
    spec = "\\text{" * 1000 + "bf16[B]" + "}" * 1000 + " -> bf16[B]"
    with pytest.raises(SpecError, match=r"'\{' nested more than 16 deep") as info:
        parse(spec)
    assert info.value.column == 6 * 16 + 6
    code, _, err = run("analyze", spec)
    assert code == 2 and err.startswith("symroof: error: '{' nested")
    # a comment full of braces is no nesting, and two levels of \text are fine
    assert parse("bf16[B] -> bf16[] # " + "{" * 40).dims == ("B",)
    assert parse(r"\text{\text{int8[B, D]}} @ int8[D, F] -> int8[B, F]").statements[0].operands[0].dtype.name == "int8"


# ---- sizes as people write them ---------------------------------------------------------

@pytest.mark.parametrize("text, value", [("1e6", 10**6), ("2**20", 2**20), ("2^20", 2**20), ("128k", 128 * 1024),
                                         ("1M", 2**20), ("1G", 2**30), ("32768", 32768), ("32_768", 32768),
                                         ("4*1024", 4096), ("1.5e3", 1500), ("8Ki", 8192)])
def test_sizes_as_people_write_them(text, value):
    assert size_value(text) == value
    code, out, _ = run("analyze", MATMUL, "--set", f"B={text}", "--json")
    assert code == 0 and json.loads(out)["values"] == {"B": value}


@pytest.mark.parametrize("text, message", [("1.5", "a size must be a whole number"), ("0", "positive integer"),
                                           ("1e18", "below 1e18"), ("2**70", "below 1e18"),
                                           ("128kb", "cannot be read"), ("-4", "cannot be read"), ("x", "cannot be read")])
def test_sizes_that_are_not_sizes(text, message):
    with pytest.raises(SpecError, match=message):
        size_value(text)
    code, _, err = run("analyze", MATMUL, "--set", f"B={text}")
    assert code == 2 and message in err and err.count("\n") == 1


def test_python_values_take_the_same_forms():
    assert analyze(MATMUL, values={"B": "128k", "D": "2**12"}).values == {"B": 131072, "D": 4096}


# ---- sizes given stay fixed in the rule; --grow says what grows ------------------------

def test_a_size_given_is_not_taken_to_infinity_by_the_rule():
    a = analyze(MATMUL, chip="tpu-v5e", values={"D": 8192})
    t = a.threshold("B")
    assert t.rule_as == ("F",)
    # as F grows with D = 8192: B*D/(B + D) > C, so B > C*D/(D - C)
    assert t.rule == C * 8192 / (8192 - C)
    code, out, _ = run("analyze", MATMUL, "--chip", "v5e", "--set", "D=8192", "--solve", "B")
    assert "[rule: F -> oo]" in out and "D, F -> oo" not in out


def test_grow_names_the_dims_the_rule_takes_to_infinity():
    spec = "bf16[B, T, D] @ bf16[D, F] -> bf16[B, T, F]"
    a = analyze(spec, chip="tpu-v5e", grow="B,T")
    t = a.threshold("F")
    assert t.rule_as == ("B", "T")
    # as B, T grow with D free: F*D/(D + F) > C, so F > C*D/(D - C) where D > C
    assert sympy.simplify(t.rule - C * D / (D - C)) == 0
    assert any("the rule holds when" in "".join(map(str, p)) for p in t.reason_parts)
    # without --grow the rule takes D, B, T all to infinity
    assert analyze(spec, chip="tpu-v5e").threshold("F").rule == C
    code, out, _ = run("analyze", spec, "--chip", "v5e", "--solve", "F", "--grow", "B,T", "--json")
    assert code == 0 and json.loads(out)["threshold"]["rule_as"] == ["B", "T"]
    # the same through at(): grow is kept
    assert a.at(D=4096).threshold("F").rule == C * 4096 / (4096 - C)


@pytest.mark.parametrize("grow, values, message", [("B,Q", {}, "unknown dim 'Q'"),
                                                   ("B", {"B": 4}, "B has a size \\(4\\) and cannot also grow"),
                                                   (",", {}, "name the dims that grow")])
def test_grow_refuses_what_cannot_grow(grow, values, message):
    with pytest.raises(SpecError, match=message):
        analyze(MATMUL, chip="tpu-v5e", grow=grow, values=values)


def test_a_limit_over_a_dim_with_a_size_is_refused():
    with pytest.raises(SpecError, match=r"D has a size \(4096\): a limit takes a dim without one"):
        analyze(MATMUL, values={"D": 4096}).limit("D", "F")
    code, _, err = run("analyze", MATMUL, "--set", "D=4096", "--limit", "D,F")
    assert code == 2 and "D has a size" in err


# ---- plain numbers where a number is asked for -----------------------------------------

def test_value_and_numbers_give_plain_python_numbers():
    a = analyze(MATMUL, chip="tpu-v5e").at(B=128, D=4096, F=4096)
    assert a.value("flops") == 2 * 128 * 4096 * 4096 and type(a.value("flops")) is int
    t = a.value("t_lower")
    assert type(t) is float and t == pytest.approx(float(a.t_lower))
    assert f"{t:.3g}"  # formats, where a sympy Rational would raise
    numbers = a.numbers()
    assert set(numbers) >= {"flops", "bytes", "intensity", "t_math", "t_comms", "t_lower", "t_upper"}
    assert not set(numbers) & {"t_network", "network_intensity"}  # one chip: no network
    assert all(type(v) in (int, float) for v in numbers.values())
    json.dumps(numbers, allow_nan=False)
    with pytest.raises(SpecError, match="t_lower depends on B: give it a size"):
        analyze(MATMUL, chip="tpu-v5e").at(D=4096, F=4096).value("t_lower")
    assert math.isnan(analyze("fp8[K, V] -> bf16[K, V]", chip="v5e").at(K=2, V=2).value("intensity")) is False


# ---- an invalid sharded matmul says how to fix it --------------------------------------

def test_an_invalid_sharded_matmul_says_the_fix_in_one_line():
    code, _, err = run("analyze", "bf16[B_X, D] @ bf16[D, F_X] -> bf16[B, F]", "--mesh", "X=2")
    first = err.split("\n")[0]
    assert code == 2 and first.startswith("symroof: error: X would split both B and F of the result")
    assert ("gather one side first: AllGather_X bf16[B_X, D] -> bf16[B, D] (2*B*D bytes per chip), "
            "or AllGather_X bf16[D, F_X] -> bf16[D, F] (2*D*F bytes per chip)") in first
    # the fix, written as said, runs
    fixed = analyze("mesh X=2\nAllGather_X bf16[B_X, D] -> bf16[B, D]\nbf16[B, D] @ bf16[D, F_X] -> bf16[B, F_X]",
                    chip="v5e")
    assert fixed.flops == B * D * F


def test_a_tab_before_the_error_keeps_the_caret_line_spaces_and_carets():
    # found by the command-line fuzzer: the caret line copied the tab
    code, _, err = run("analyze", "bf16[B,\tD] @ bf16[D F] -> bf16[B, F]")
    headline, shown, marks = err.rstrip("\n").split("\n")
    assert code == 2 and headline.startswith("symroof: error: expected ',' or ']', got 'F'")
    assert set(marks) <= {" ", "^"} and "\t" not in shown
    assert shown[marks.index("^")] == "F"
