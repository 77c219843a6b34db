"""Issue 26, item 11: data files and declarations were trusted too much. Each case here gave
a wrong number (or a claim that could not fail) before the fix; now each is one error line,
exit 2, that says where (the file, the model and the field; the program's line; the claims
file's line) and what."""

import io
import json
from pathlib import Path

import pytest
import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symroof import SpecError
from symroof.claims.check import _matches
from symroof.claims.models import check_case
from symroof.cli.command import main
from symroof.models.catalogue import MLPS, NORMS, POSITIONS, get_model
from symroof.models.templates import program

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = json.loads((ROOT / "models.json").read_text(encoding="utf-8"))
LLAMA_3_8B = next(m for m in SHIPPED["models"] if m["id"] == "llama-3-8b")


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def refused(*argv) -> str:
    """The one error line of a command that must exit 2."""
    code, out, err = run(*argv)
    assert code == 2, (code, out[:300], err)
    assert out == "" and err.startswith("symroof: error: ") and len(err.strip().splitlines()) in (1, 3), err
    assert "Traceback" not in err
    return err.strip().splitlines()[0]


def models_file(tmp_path, *entries, **top) -> Path:
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": list(entries), **top}), encoding="utf-8")
    return path


def llama(**changes) -> dict:
    return {**json.loads(json.dumps(LLAMA_3_8B)), **changes}


def hand_params(D=4096, L=32, N=32, K=8, H=128, F=14336, V=128256) -> int:
    """LLaMA-3 8B's parameters by hand: the embedding and the untied output (V x D each),
    per layer two norm scales, Wq (D x N*H), Wk and Wv (D x K*H each), Wo (N*H x D) and the
    gated MLP's three D x F matrices; the final norm's scale."""
    return 2 * V * D + L * (2 * D + D * N * H + 2 * D * K * H + N * H * D + 3 * D * F) + D


# ---- the models file --------------------------------------------------------------------

def test_the_shipped_models_file_passes_the_schema():
    for model in SHIPPED["models"]:
        assert get_model(model["id"])["id"] == model["id"]
    code, out, _ = run("model", "llama-3-8b", "--json")
    assert code == 0 and json.loads(out)["params"] == hand_params()


def test_a_line_break_in_a_name_injects_no_program_lines(tmp_path):
    # before: the name's second line was a declaration, 1e12 parameters more (1.008 T in all)
    path = models_file(tmp_path, llama(name="Innocent 8B\nparam Hidden: bf16[1000000000000]\n#"))
    line = refused("model", "llama-3-8b", "--models", path)
    assert "model llama-3-8b: 'name'" in line and "line break" in line
    # the template refuses one too, whoever hands it the configuration
    with pytest.raises(SpecError, match="its name must be printable text on one line"):
        program(llama(name="x\nparam Hidden: bf16[1000]"))
    # and a name that prints is the model it was: the hand count
    code, out, _ = run("model", "llama-3-8b", "--models", models_file(tmp_path, llama(name="Innocent 8B")), "--json")
    assert code == 0 and json.loads(out)["params"] == hand_params()


@pytest.mark.parametrize("field, value", [
    ("tied_embeddings", "false"),  # before: a non-empty string, read as true (V x D parameters fewer)
    ("bias", "no"),                # before: read as true (biases added)
    ("bias", 0),
    ("tied_embeddings", None),
])
def test_a_flag_is_a_json_boolean(tmp_path, field, value):
    line = refused("model", "llama-3-8b", "--models", models_file(tmp_path, llama(**{field: value})))
    assert f"model llama-3-8b: {field} must be true or false" in line


@pytest.mark.parametrize("field, value, choices", [
    ("norm", "batchnorm", "rmsnorm, layernorm"),  # before: rmsnorm, silently
    ("positions", "alibi", "rope, learned"),      # before: rope, silently
    ("mlp", "relu", "swiglu, geglu, gelu"),
    ("norm", "RMSNorm", "rmsnorm, layernorm"),
])
def test_a_choice_has_no_fallback(tmp_path, field, value, choices):
    line = refused("model", "llama-3-8b", "--models", models_file(tmp_path, llama(**{field: value})))
    assert f"model llama-3-8b: {field} is one of {choices}, got a string ('{value}')" in line


def test_more_experts_active_than_there_are_is_refused(tmp_path):
    line = refused("model", "llama-3-8b", "--models", models_file(tmp_path, llama(moe={"experts": 2, "active": 8})))
    assert "model llama-3-8b: moe.active: 8 experts active per token, more than moe.experts = 2" in line
    line = refused("model", "llama-3-8b", "--models",
                   models_file(tmp_path, llama(moe={"experts": 8, "active": 2, "shared": 1})))
    assert "moe.shared: shared experts, dense-first layers and a router bias are written with MLA only" in line
    line = refused("model", "llama-3-8b", "--models",
                   models_file(tmp_path, llama(moe={"experts": 8, "active": 2, "experts_": 1})))
    assert "'moe' must be an object with whole numbers 'experts' and 'active'" in line


def test_a_duplicate_id_or_a_colliding_alias_is_refused(tmp_path):
    # before: the first of the two won, whichever the user meant
    other = llama(name="Other", sizes={**LLAMA_3_8B["sizes"], "L": 1})
    line = refused("model", "llama-3-8b", "--models", models_file(tmp_path, llama(), other))
    assert "model llama-3-8b: id: duplicate id (model #1 repeats model #0)" in line
    second = dict(other, id="second", aliases=["LLAMA3-8B"])  # the first's alias, in other letters
    line = refused("model", "second", "--models", models_file(tmp_path, llama(), second))
    assert "model second: aliases: 'LLAMA3-8B' also names model 'llama-3-8b'" in line
    third = dict(other, id="Llama-3-8B", aliases=[])  # an id that differs from another in case only
    line = refused("model", "second", "--models", models_file(tmp_path, llama(), third))
    assert "model Llama-3-8B: id: duplicate id" in line


def test_an_upper_case_id_can_be_selected(tmp_path):
    # before: "unknown model 'LLAMA-UP' (known: LLAMA-UP)"
    path = models_file(tmp_path, llama(id="LLAMA-UP", aliases=["Llama-Up-Alias"]))
    for name in ("LLAMA-UP", "llama-up", "llama-up-alias"):
        code, out, err = run("model", name, "--models", path, "--json")
        assert code == 0, err
        assert json.loads(out)["params"] == hand_params()


@pytest.mark.parametrize("change, says", [
    ({"nrom": "rmsnorm"}, "nrom: unknown field; did you mean 'norm'?"),
    ({"sizes": {**LLAMA_3_8B["sizes"], "E": 8}}, "sizes.E: unknown size"),
    ({"sizes": {**LLAMA_3_8B["sizes"], "K": 5}}, "sizes.N: 32 query heads do not group evenly over sizes.K = 5"),
    ({"sizes": {**LLAMA_3_8B["sizes"], "D": 4096.0}}, "sizes.D must be a positive whole number"),
    ({"sizes": {**LLAMA_3_8B["sizes"], "V": 10**30}}, "sizes.V must be a positive whole number up to 1e+12"),
    ({"params_published": "8B"}, "params_published must be a positive whole number, got a string ('8B')"),
    ({"sources": {**LLAMA_3_8B["sources"], "moe": ""}}, "sources.moe must be text"),
    ({"sources": {**LLAMA_3_8B["sources"], "size": "x"}}, "sources.size: names no sourced field; did you mean"),
    ({"id": "llama 3"}, "'id' must be a name: one word"),
    ({"aliases": "llama"}, "'aliases' must be a list of names"),
    ({"name": "a\u2028b"}, "'name' must be text on one line"),
    ({"name": "\x1b[31mred"}, "'name' must be text on one line"),
])
def test_every_field_is_checked(tmp_path, change, says):
    line = refused("model", "x", "--models", models_file(tmp_path, llama(**change)))
    assert says in line, line


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                     | st.text(max_size=12), lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
_CHOICES = {"mlp": MLPS, "norm": NORMS, "positions": POSITIONS}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(["tied_embeddings", "bias", "mlp", "norm", "positions"]), value=_JSON)
def test_any_value_but_a_valid_one_is_refused_naming_the_field(tmp_path, field, value):
    """Whatever JSON value a flag or a choice holds, it is one the schema allows (a JSON
    boolean; one of the choices) or it is refused with the model and the field named: never
    read as something else."""
    valid = isinstance(value, bool) if field in ("tied_embeddings", "bias") else value in _CHOICES[field]
    path = models_file(tmp_path, llama(**{field: value}))
    if valid:
        assert get_model("llama-3-8b", str(path))[field] == value
        return
    with pytest.raises(SpecError) as caught:
        get_model("llama-3-8b", str(path))
    assert f"model llama-3-8b: {field} " in str(caught.value) and "\n" not in str(caught.value)


def test_a_missing_choice_is_refused_not_defaulted(tmp_path):
    entry = llama()
    del entry["tied_embeddings"]  # before: untied, silently (gemma-7b ties its embeddings)
    line = refused("model", "llama-3-8b", "--models", models_file(tmp_path, entry))
    assert "model llama-3-8b: missing field 'tied_embeddings'" in line


@pytest.mark.parametrize("text, says", [
    ('{"models": [], "modles": []}', "modles: unknown top-level field; did you mean 'models'?"),
    ('{"models": []}', "models: the list is empty"),
    ('{"models": [{"id": "a", "id": "b"}]}', "duplicate key 'id' in one JSON object"),
    ('{"models": [{"sizes": {"D": NaN}}]}', "NaN is not a number symroof reads"),
    ('{"about": "' + "x" * 1_000_001 + '", "models": []}', "more than a models file may have"),
])
def test_the_file_itself_is_checked(tmp_path, text, says):
    path = tmp_path / "models.json"
    path.write_text(text, encoding="utf-8")
    line = refused("model", "x", "--models", path)
    assert says in line and str(path) in line, line


def test_a_models_file_edited_between_two_calls_is_read_again(tmp_path):
    # before: cached by its path, the first content answered for the rest of the process
    path = models_file(tmp_path, llama())
    assert get_model("llama-3-8b", str(path))["sizes"]["L"] == 32
    models_file(tmp_path, llama(sizes={**LLAMA_3_8B["sizes"], "L": 16}))
    assert get_model("llama-3-8b", str(path))["sizes"]["L"] == 16


# ---- declarations -----------------------------------------------------------------------

def program_file(tmp_path, text: str) -> Path:
    path = tmp_path / "m.sr"
    path.write_text(text, encoding="utf-8")
    return path


MATMUL = "bf16[B, D] *_D bf16[D, F] -> bf16[B, F]\n"


def test_a_declared_dim_of_zero_is_refused(tmp_path):
    # before: 0 parameters, where a statement refuses a 0 dim
    path = program_file(tmp_path, "let D = 64, F = 32\nparam W: bf16[0, D]\n" + MATMUL)
    code, _, err = run("model", path, "--set", "B=8")
    assert code == 2 and "a dim's size must be a positive integer, got 0 (line 2, column 15)" in err
    too_big = program_file(tmp_path, "let D = 64, F = 32\nparam W: bf16[1000000000000000000000, D]\n" + MATMUL)
    assert "a dim's size has at most 18 digits (line 2" in refused("model", too_big)


def test_a_declared_dim_that_does_not_split_evenly_is_refused(tmp_path):
    # before: D = 64 over X=3 gave 64*F*2/3 bytes a chip, not a whole number of rows
    path = program_file(tmp_path, "mesh X=3\nlet D = 64, F = 128\nparam Wq: bf16[D_X, F]\n" + MATMUL)
    line = refused("model", path, "--set", "B=8")
    assert "param Wq: D = 64 does not split evenly over X (3 chips) (line 3, column 7)" in line
    # a size given on the command line is checked as a `let` is
    given = program_file(tmp_path, "mesh X=3\nlet F = 128\nparam Wq: bf16[D_X, F]\n" + MATMUL)
    assert "param Wq: D = 64 does not split evenly over X (3 chips)" in refused("model", given, "--set", "B=8,D=64")
    literal = program_file(tmp_path, "mesh X=3\nlet D = 64, F = 128\nparam Wq: bf16[64_X, F]\n" + MATMUL)
    assert "param Wq: 64 does not split evenly over X" in refused("model", literal)
    twice = program_file(tmp_path, "mesh X=2\nlet D = 64, F = 128\nparam Wq: bf16[D_{X,X}, F]\n" + MATMUL)
    assert "D_{X,X} is split over X twice" in refused("model", twice)
    # 66 rows do split over 3 chips: each holds 22 rows of F = 128 bf16 values, by hand
    even = program_file(tmp_path, "mesh X=3\nlet D = 66, F = 128\nparam Wq: bf16[D_X, F]\n" + MATMUL)
    code, out, err = run("model", even, "--set", "B=8", "--json")
    assert code == 0, err
    assert json.loads(out)["weight_bytes"] == 22 * 128 * 2


def test_a_let_that_is_never_positive_is_refused(tmp_path):
    # before: tokens = -B, and negative FLOPs per token
    path = program_file(tmp_path, "let D = 64, F = 32, tokens = 0 - B\nparam W: bf16[D, F]\n" + MATMUL)
    line = refused("model", path, "--set", "B=8")
    assert "tokens = -B is not positive at any size of B: a size is positive (line 1, column 21)" in line


def test_a_let_is_positive_at_the_sizes_given(tmp_path):
    path = program_file(tmp_path, "let D = 64, F = 32, tokens = B - 8\nparam W: bf16[D, F]\n" + MATMUL)
    assert "let tokens = B - 8 comes to 0 at B = 8: a size is positive" in refused("model", path, "--set", "B=8")
    code, out, err = run("model", path, "--set", "B=10", "--json")
    assert code == 0, err
    # by hand: the matmul's 2*B*D*F FLOPs over tokens = B - 8 = 2
    assert json.loads(out)["flops_per_token"] == 2 * 10 * 64 * 32 / 2


def test_a_repeat_count_is_a_positive_whole_number(tmp_path):
    block = "  param W: bf16[D, F]\n  " + MATMUL + "}\n"
    # before: L = 8 gave 0 parameters, L = 6 gave -4096, L/3 at L = 8 gave 8/3 layers
    zero = program_file(tmp_path, "let D = 64, F = 32, L = 8\nrepeat L - 8 {\n" + block)
    assert "repeat L - 8 = 0: a repeat count is a positive whole number (line 2, column 8)" in refused("model", zero)
    given = program_file(tmp_path, "let D = 64, F = 32\nrepeat L - 8 {\n" + block)
    assert "repeat L - 8 runs -2 times at L = 6" in refused("model", given, "--set", "B=4,L=6")
    never = program_file(tmp_path, "let D = 64, F = 32\nrepeat 0 - L {\n" + block)
    assert "repeat -L: a repeat count is positive, and this one is not at any size of L" in refused("model", never)
    third = program_file(tmp_path, "let D = 64, F = 32\nrepeat L/3 {\n" + block)
    assert "repeat L/3 runs 8/3 times at L = 8" in refused("model", third, "--set", "B=4,L=8")
    # at L = 9 it runs 3 times: 3 copies of a 64 x 32 matrix, by hand
    code, out, err = run("model", third, "--set", "B=4,L=9", "--json")
    assert code == 0, err
    assert json.loads(out)["params"] == 3 * 64 * 32


# ---- claims -----------------------------------------------------------------------------

SPEC = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"


def claims_file(tmp_path, text: str) -> Path:
    path = tmp_path / "claims.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_an_expected_number_past_a_floats_range_is_compared_exactly(tmp_path):
    # before: 1e200*1e200 became inf as a float, and |12 - inf| <= tolerance * inf passed
    path = claims_file(tmp_path, f'- id: big\n  spec: "{SPEC}"\n  set: {{B: 1, D: 2, F: 3}}\n'
                                 '  expect: {flops: "1e200*1e200"}\n')
    code, out, _ = run("check", path)
    assert code == 1 and "FAIL  big" in out and "flops: got 12" in out
    huge = sympy.Integer(10) ** 400
    assert not _matches(huge + 1, huge, 0.0, set()) and _matches(huge, huge, 0.0, set())
    assert not _matches(sympy.Integer(2) * huge, huge, 0.5, set())  # off by 100%: no float overflow hides it
    assert _matches(sympy.Integer(3), 2, 0.5, set()) and not _matches(sympy.Integer(3), 2, 0.49, set())


@pytest.mark.parametrize("tolerance, says", [
    (".inf", "must be zero or positive and below 1"), ("1", "must be zero or positive and below 1"),
    ("1.5", "must be zero or positive and below 1"), (".nan", "must be zero or positive and below 1"),
    ("-0.1", "must be zero or positive and below 1"), ("true", "must be a number, not True"),
])
def test_a_tolerance_that_cannot_fail_is_refused(tmp_path, tolerance, says):
    # before: tolerance: .inf passed anything (1, or more, passes 0 for any expected value)
    path = claims_file(tmp_path, f'# a claim\n- id: loose\n  spec: "{SPEC}"\n  set: {{B: 1, D: 2, F: 3}}\n'
                                 f'  expect: {{flops: 1}}\n  tolerance: {tolerance}\n')
    line = refused("check", path)
    assert f"{path}, line 2, claim 'loose': tolerance {says}" in line


def test_misspelled_keys_in_a_spec_claim_are_refused(tmp_path):
    # before: ignored, so the sizes were never set and the tolerance stayed 1e-9
    path = claims_file(tmp_path, f'- id: fine\n  spec: "{SPEC}"\n  expect: {{flops: "2*B*D*F"}}\n'
                                 f'- id: typo\n  spec: "{SPEC}"\n  sett: {{B: 1, D: 2, F: 3}}\n'
                                 '  expect: {flops: 12}\n  tolerence: 0.5\n')
    line = refused("check", path)
    assert (f"{path}, line 4, claim 'typo': unknown key(s) sett (did you mean set?), tolerence (did you mean "
            "tolerance?) in a claim") in line
    # from Python, the same claim is an ERROR row of its own
    result = check_case({"id": "t", "spec": SPEC, "sizes": {"B": 1}, "expect": {"flops": 1}})
    assert result.outcomes == () and "unknown key(s) sizes (did you mean set?)" in result.error
    given = check_case({"id": "g", "given": {"flops": 1e12, "byte": 1e9}, "expect": {"flops": 1e12}})
    assert "unknown key(s) byte (did you mean bytes?) in 'given'" in given.error


def test_a_model_claims_misspelled_key_refuses_the_file_too(tmp_path):
    path = claims_file(tmp_path, "- id: m\n  model: llama-3-8b\n  sizez: {B: 1}\n  expect: {params: 8030261248}\n")
    assert "line 1, claim 'm': unknown key(s) sizez (did you mean sizes?) in a model claim" in refused("check", path)


def test_a_key_given_twice_is_refused(tmp_path):
    # before: YAML kept the last, and the first expectation was never checked
    path = claims_file(tmp_path, f'- id: twice\n  spec: "{SPEC}"\n  expect: {{flops: 1, flops: "2*B*D*F"}}\n')
    assert "not valid YAML (line 3, column 22): the key 'flops' is given twice" in refused("check", path)


def test_a_threshold_with_nothing_to_compare_is_refused(tmp_path):
    # before: {var: B} passed whatever the threshold was
    path = claims_file(tmp_path, f'- id: t\n  spec: "{SPEC}"\n  chip: {{name: v5e}}\n'
                                 '  expect: {threshold: {var: B}}\n')
    assert "claim 't': threshold {var: B} checks nothing" in refused("check", path)
    # before: the text "false" was true, and the claim checked there was no threshold
    text = claims_file(tmp_path, f'- id: t\n  spec: "{SPEC}"\n  chip: {{name: v5e}}\n'
                                 '  expect: {threshold: {var: B, op: ">", none: "false"}}\n')
    assert "claim 't': threshold's none is true or false, not 'false'" in refused("check", text)
    ok = check_case({"id": "t", "spec": SPEC, "chip": {"name": "v5e"}, "set": {"D": 4096, "F": 4096},
                     "expect": {"threshold": {"var": "B", "op": ">"}}})
    assert ok.ok, ok


def test_a_claims_file_is_bounded_in_size(tmp_path):
    path = claims_file(tmp_path, "# " + "x" * 5_000_000 + "\n- {id: a, given: {flops: 1}, expect: {flops: 1}}\n")
    assert "more than a claims file may have" in refused("check", path)


def test_an_error_row_says_its_line(tmp_path):
    path = claims_file(tmp_path, f'- id: ok\n  spec: "{SPEC}"\n  expect: {{flops: "2*B*D*F"}}\n'
                                 f'- id: bad\n  spec: "{SPEC}"\n  expect: {{flop: 1}}\n')
    code, out, _ = run("check", path)
    assert code == 1 and "ERROR bad" in out and "line 4: unknown expected key 'flop'" in out
