"""The spec language: every form the issue lists parses to the contraction it means, and
every malformed spec gets one clear message with its position."""

import time

import pytest
from lark import Lark

from symroof import SpecError, parse
from symroof.ir import label_text
from symroof.resources import resource_path


def steps(spec, **kw):
    """Each step as (inputs' dims, output dims, summed dims), in display names."""
    program = parse(spec, **kw)
    return [([[label_text(l) for l in t.labels] for t in s.inputs],
             [label_text(l) for l in s.output.labels],
             sorted(label_text(l) for l in s.summed))
            for st in program.statements for s in st.steps]


def test_grammar_has_no_conflicts():
    # strict mode fails on any LALR conflict or terminal collision
    Lark(resource_path("symroof.lark").read_text(), parser="lalr", strict=True,
         maybe_placeholders=True, propagate_positions=True)


MATMUL = [([["B", "D"], ["D", "F"]], ["B", "F"], ["D"])]


@pytest.mark.parametrize("spec, expected", [
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", MATMUL),
    ("bf16[B, D] * int8[D, F] -> bf16[B, F]", MATMUL),
    ("int8[B, D] *_D int8[D, F] -> int8[B, F]", MATMUL),
    ("int8[B, D] *_D int8[B, D, F] -> int8[B, F]", [([["B", "D"], ["B", "D", "F"]], ["B", "F"], ["D"])]),
    ("bf16[N] *_N bf16[N] -> bf16[1]", [([["N"], ["N"]], ["1"], ["N"])]),
    ("bf16[N] *_N bf16[N] -> bf16[]", [([["N"], ["N"]], [], ["N"])]),
    ("x: bf16[N] * y: bf16[N] -> bf16[]", [([["N"], ["N"]], [], ["N"])]),
    ("x • y: bf16[N], bf16[N] → bf16[1]", [([["N"], ["N"]], ["1"], ["N"])]),
    (r"X[B, D] \cdot_D Y[D, F] \rightarrow Z[B, F]", MATMUL),
    ("bfloat16[B, 4096] @ bfloat16[4096, F] -> bfloat16[B, F]",
     [([["B", "4096"], ["4096", "F"]], ["B", "F"], ["4096"])]),
    ("bd,df->bf", [([["b", "d"], ["d", "f"]], ["b", "f"], ["d"])]),
    ("bf16[B, D] *_D bf16[D, F] *_F bf16[F, D] -> bf16[B, D]",
     [([["B", "D"], ["D", "F"]], ["B", "F"], ["D"]), ([["B", "F"], ["F", "D"]], ["B", "D"], ["F"])]),
    # Unicode and LaTeX spellings, comments, the book's \text{} and $...$
    ("bf16[B, D] · bf16[D, F] → bf16[B, F]  # a comment", MATMUL),
    ("bf16[B, D] × bf16[D, F] -> bf16[B, F]", MATMUL),
    (r"$\text{int8[B, D]} *_D \text{int8[D, F]} \rightarrow \text{int8[B, F]}$", MATMUL),
    ("bf16[B, D] *_{D} bf16[D, F] -> bf16[B, F]", MATMUL),
])
def test_the_issue_forms_parse_to_what_they_mean(spec, expected):
    assert steps(spec) == expected


def test_dtypes_and_defaults():
    program = parse(r"X[B, D] \cdot_D Y[D, F] \rightarrow Z[B, F]", dtype="int8")
    names = [(t.name, t.dtype.name) for t in program.statements[0].operands]
    assert names == [("X", "int8"), ("Y", "int8")]
    assert program.statements[0].output.name == "Z"
    mixed = parse("bf16[B, D] * int8[D, F] -> bf16[B, F]").statements[0].steps[0]
    assert mixed.compute.name == "bf16"
    assert parse("int8[B, D] * int8[D, F] -> int8[B, F]").statements[0].steps[0].compute.name == "int8"
    forced = parse("bf16[B, D] * bf16[D, F] -> bf16[B, F] {compute=fp8}").statements[0].steps[0]
    assert forced.compute.name == "fp8"
    for alias, name in [("float32", "fp32"), ("f16", "fp16"), ("e4m3", "fp8_e4m3"),
                        ("float8_e5m2", "fp8_e5m2"), ("int4", "int4"), ("fp4", "fp4"), ("tf32", "tf32")]:
        assert parse(f"{alias}[N] -> {alias}[N]").statements[0].operands[0].dtype.name == name


@pytest.mark.parametrize("spec, expected", [
    # literal sizes: a square weight is a matmul, equal shapes are elementwise
    ("bf16[B, 4096] * int8[4096, 4096] -> bf16[B, 4096]",
     [([["B", "4096"], ["4096", "4096"]], ["B", "4096"], ["4096"])]),
    ("bf16[B, 4096] * bf16[B, 4096] -> bf16[B, 4096]",
     [([["B", "4096"], ["B", "4096"]], ["B", "4096"], [])]),
    ("bf16[B, 4096] * bf16[4096] -> bf16[B, 4096]", [([["B", "4096"], ["4096"]], ["B", "4096"], [])]),
    ("bf16[B, 4096] * bf16[4096] -> bf16[B]", [([["B", "4096"], ["4096"]], ["B"], ["4096"])]),
    ("bf16[8, B, 64] * bf16[8, 64, S] -> bf16[8, B, S]",
     [([["8", "B", "64"], ["8", "64", "S"]], ["8", "B", "S"], ["64"])]),
    # batched matmul, reductions, outer products, transposes, 3-operand einsum
    ("bf16[H, B, D] @ bf16[H, D, F] -> bf16[H, B, F]",
     [([["H", "B", "D"], ["H", "D", "F"]], ["H", "B", "F"], ["D"])]),
    ("bf16[B, D] -> bf16[B]", [([["B", "D"]], ["B"], ["D"])]),
    ("a,b->ab", [([["a"], ["b"]], ["a", "b"], [])]),
    ("ab->ba", [([["a", "b"]], ["b", "a"], [])]),
    ("ab,bc,cd->ad", [([["a", "b"], ["b", "c"]], ["a", "c"], ["b"]),
                      ([["a", "c"], ["c", "d"]], ["a", "d"], ["c"])]),
    ("bf16[B, D] @ bf16[D, F] @ bf16[F, G] -> bf16[B, G]",
     [([["B", "D"], ["D", "F"]], ["B", "F"], ["D"]), ([["B", "F"], ["F", "G"]], ["B", "G"], ["F"])]),
])
def test_contraction_semantics(spec, expected):
    assert steps(spec) == expected


def test_chain_intermediate_is_unnamed_and_in_the_result_dtype():
    first, second = parse("fp8[B, D] *_D fp8[D, F] *_F fp8[F, G] -> bf16[B, G]").statements[0].steps
    assert first.output.dtype.name == "bf16" and first.output.name is None
    assert second.inputs[0].dtype.name == "bf16"


def test_bound_values_and_multiple_statements():
    program = parse("bf16[B, D=4096] @ bf16[D, F=1024] -> bf16[B, F]; bd,df->bf\nbf16[B, D] -> bf16[B]")
    assert dict(program.values) == {"D": 4096, "F": 1024}
    assert len(program.statements) == 3
    assert program.dims == ("B", "D", "F", "b", "d", "f")


@pytest.mark.parametrize("spec", [
    "bf16[B, D] @ bf16[D, F] -> bf16[B, F]",
    "x • y: bf16[N], bf16[N] → bf16[1]",
    r"X[B, D] \cdot_D Y[D, F] \rightarrow Z[B, F]",
    "bd,df->bf",
    "bf16[B, D=4096] *_D int8[D, F=1024] *_F fp32[F, G] -> fp32[B, G] {compute=fp32}",
    "bf16[B, 4096] * int8[4096, 4096] -> bf16[B, 4096]; a,b->ab",
])
def test_printing_round_trips(spec):
    program = parse(spec)
    assert parse(str(program)) == program


# ---- bad input: one clear line, the position, a caret ----------------------------------------

@pytest.mark.parametrize("spec, message, column", [
    ("bf16[B, D] @ bf16[D F] -> bf16[B, F]", r"expected ',' or '\]', got 'F'", 21),
    ("bf16[B, D @ bf16[D, F] -> bf16[B, F]", r"this '\[' is never closed", 5),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F", r"this '\[' is never closed", 32),
    ("bf16[B, D]] @ bf16[D, F] -> bf16[B, F]", r"'\]' has no matching '\['", 11),
    ("bf61[B, D] @ bf16[D, F] -> bf16[B, F]", r"unknown dtype 'bf61'; did you mean 'bf16'\?", 1),
    ("bf16[B, D] @ bfloat61[D, F] -> bf16[B, F]", r"unknown dtype 'bfloat61'; did you mean 'bfloat16'\?", 14),
    ("bf16[B, D] @ bf16[D, F]", r"missing '->' and the result", 24),
    ("bf16[B, D] @ bf16[D, F] -> ", r"missing the result after the arrow", 27),
    ("bf16[B, D] @ bf16[D, F] => bf16[B, F]", r"write '->' .* not '=>'", 25),
    ("bf16[B, D] x bf16[D, F] -> bf16[B, F]", r"use '@' or '\*' between operands", 12),
    ("[B, D] @ bf16[D, F] -> bf16[B, F]", r"needs a dtype or a name before '\['", 1),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, G]", r"result dim G is not in any input", 36),
    ("bf16[B, D] *_K bf16[D, F] -> bf16[B, F]", r"K in '\*_K' is not in the left operand", 14),
    ("bf16[B, D] *_B bf16[D, F] -> bf16[B, F]", r"B in '\*_B' is not in the right operand", 14),
    ("bf16[B, 4096] @ bf16[2048, F] -> bf16[B, F]", r"4096 with the right's 2048: sizes differ", 22),
    ("bf16[B, D=4096] @ bf16[D=2048, F] -> bf16[B, F]", r"D is 4096 at column 9 but 2048 here", 24),
    ("bf16[B, 0] @ bf16[0, F] -> bf16[B, F]", r"size must be a positive integer, got 0", 9),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, -1]", r"size must be a positive integer", 36),
    ("bf16[B, D, E] *_D bf16[D, F] -> bf16[B, F]", r"E is neither contracted nor in the result", 12),
    ("bf16[B, D] *_D bf16[D, F] -> bf16[B, D, F]", r"D is contracted but also in the result", 38),
    ("bf16[B, B] @ bf16[B, F] -> bf16[B, F]", r"B appears twice in one tensor", 9),
    ("ii->i", r"'i' appears twice in 'ii'", 2),
    ("ab...,bc->ac", r"'\.\.\.' \(an ellipsis\) is not supported", 3),
    ("x: bf16[N] * x: bf16[M] -> bf16[]", r"x is bf16\[N\] at column 1 but bf16\[M\] here", 14),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F] {compute=fp9}", r"unknown dtype 'fp9'; did you mean 'fp8'\?", 40),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F] {fast}", r"unknown annotation 'fast'", 40),
    ("__import__('os').system('id')", r"a name cannot start with '_'", 1),
    ("x • y: bf16[N] → bf16[1]", r"2 operand names but 1 type: give one type per name", 8),
])
def test_bad_specs_say_what_and_where(spec, message, column):
    with pytest.raises(SpecError, match=message) as info:
        parse(spec)
    err = info.value
    assert err.column == column
    first, line, marks = str(err).split("\n")
    assert f"column {column}" in first
    assert line.strip() == spec.strip()
    assert marks.index("^") - 2 == column - 1  # the caret sits under the column named


@pytest.mark.parametrize("spec", ["", "   ", "# only a comment\n", ";;", "\n\n"])
def test_empty_spec(spec):
    with pytest.raises(SpecError, match="empty spec"):
        parse(spec)


def test_multiline_errors_name_the_line():
    with pytest.raises(SpecError, match=r"result dim Q is not in any input \(line 2, column 36\)") as info:
        parse("bf16[N] -> bf16[N]\nbf16[B, D] @ bf16[D, F] -> bf16[B, Q]")
    assert str(info.value).split("\n")[1].strip().startswith("bf16[B, D]")


def test_injection_text_is_never_evaluated(tmp_path, monkeypatch):
    marker = tmp_path / "pwned"
    attack = f"__import__('os').system('touch {marker}')"
    for spec in (attack, f"bf16[B, D] @ bf16[D, F] -> bf16[B, F] {{{attack}}}", f"bf16[{attack}] -> bf16[]"):
        with pytest.raises(SpecError):
            parse(spec)
    assert not marker.exists()


def test_huge_specs_are_refused_quickly():
    dims = ", ".join(f"D{i}" for i in range(5000))
    start = time.perf_counter()
    with pytest.raises(SpecError, match="5000 dims in one tensor; symroof handles at most 64"):
        parse(f"bf16[{dims}] -> bf16[D0]")
    with pytest.raises(SpecError, match="at most"):
        parse("bf16[N] -> bf16[N]\n" * 300_000)
    assert time.perf_counter() - start < 5


def test_many_dims_within_limits_are_handled():
    dims = ", ".join(f"D{i}" for i in range(64))
    program = parse(f"bf16[{dims}] -> bf16[D0]")
    assert len(program.statements[0].steps[0].summed) == 63


# ---- what people paste and type -------------------------------------------------------------

@pytest.mark.parametrize("spec", [
    r"$\text{int8}[B, D] *_D \text{int8}[D, F] \rightarrow \text{int8}[B, F]$",  # the book's other form
    "\ufeffint8[B, D] *_D int8[D, F] -> int8[B, F]",                              # a BOM from an editor
    "int8［B, D］ *_D int8[D, F] -> int8[B, F]",                                   # full-width brackets
])
def test_pasted_forms(spec):
    assert steps(spec) == MATMUL


def test_line_endings_of_every_kind_separate_statements():
    for newline in ("\n", "\r\n", "\r"):
        assert len(parse(f"bf16[N] -> bf16[]{newline}bf16[M] -> bf16[]").statements) == 2


def test_names_are_folded_so_that_json_reads_them_back():
    # NFKC: the letter-like symbol and the plain letter are the same name, as in Python
    program = parse("bf16[H, D] @ bf16[D, ℌ2] -> bf16[H, ℌ2]")
    assert program.dims == ("H", "D", "H2")


@pytest.mark.parametrize("name", ["lambda", "None", "True", "if", "Integer", "Max", "oo"])
def test_names_that_would_not_read_back_are_refused(name):
    with pytest.raises(SpecError, match=f"'{name}' cannot name a dim"):
        parse(f"bf16[{name}, D] -> bf16[D]")


def test_words_that_look_like_aliases_stay_tensor_names():
    program = parse("Half[B, D] @ F1[D, F] -> Out[B, F]", dtype="fp32")
    assert [(t.name, t.dtype.name) for t in program.statements[0].operands] == [("Half", "fp32"), ("F1", "fp32")]
    assert parse("BF16[N] -> bf16[]").statements[0].operands[0].dtype.name == "bf16"


@pytest.mark.parametrize("spec, message", [
    ("bf16[B, D] @ bf16[D, F] bf16[B, F]", r"expected an operator \('@', '\*'\) or '->' before 'bf16'"),
    ("bf16[B, D] *_ bf16[D, F] -> bf16[B, F]", r"the '_' after an operator takes the next name"),
    ("bf16[B, D] @ bf16[D, F] -> bf16[B, F] {compute=fp8, compute=bf16}", r"compute dtype is given twice"),
    ("bf16[B, D] *_{D,K} bf16[D, F] -> bf16[B, F]", r"K in '\*_\{D,K\}' is not in the left operand"),
    ("bf16[B, 12345678901234567890] -> bf16[B]", r"a size of 20 digits"),
    ("bf16[B,\x07 D] -> bf16[B]", r"got '\\x07'"),
])
def test_more_messages(spec, message):
    with pytest.raises(SpecError, match=message):
        parse(spec)


def test_loose_dim_error_points_at_the_dim():
    with pytest.raises(SpecError, match="E is neither contracted nor in the result") as info:
        parse("bf16[B, D, E] *_D bf16[D, F] *_F bf16[F, G] -> bf16[B, G]")
    assert info.value.column == 12


def test_a_spec_read_two_ways_warns():
    from symroof import SymroofWarning
    with pytest.warns(SymroofWarning, match="read as a matmul"):
        parse("bf16[2, 2] * bf16[2, 2] -> bf16[2, 2]")


def test_caret_under_wide_characters_and_in_long_lines():
    with pytest.raises(SpecError) as info:
        parse("bf16[批次, D] @ bf16[D F] -> bf16[B, F]")
    _, line, marks = str(info.value).split("\n")
    # each CJK character takes two columns on screen
    assert marks.index("^") == line.index("F]") + 2
    dims = ", ".join(f"D{i}" for i in range(2000))
    with pytest.raises(SpecError) as info:
        parse(f"bf16[{dims}] -> bf16[D0] {{fast}}")
    _, line, marks = str(info.value).split("\n")
    assert len(line) < 120 and line.lstrip().startswith("...")
