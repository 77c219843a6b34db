"""Every result of the rooflines chapter, derived by the engine from the spec and the chip
figures (tests/data/rooflines_chapter.yaml), and the shared textbook file read as it is."""

from pathlib import Path

import pytest
import yaml

from symroof import check_case
from symroof.claims.check import report as claims_report

HERE = Path(__file__).resolve().parents[1]
OURS = yaml.safe_load((HERE / "data" / "rooflines_chapter.yaml").read_text(encoding="utf-8"))
SHARED = HERE.parent.parent / "shared" / "textbook" / "rooflines.yaml"

def _cases(cases):
    return [pytest.param(c, id=c["id"]) for c in cases]


@pytest.mark.parametrize("case", _cases(OURS))
def test_chapter_claim(case):
    result = check_case(case)
    assert result.error is None, result.error
    failed = [f"{o.key}: expected {o.expected}, got {o.got} {o.note}" for o in result.outcomes if not o.ok]
    assert not failed, failed
    assert len(result.outcomes) == len(case["expect"])


def test_our_file_covers_every_shared_case():
    """Each case of the shared textbook file has a twin in ours with the same expectations."""
    if not SHARED.exists():
        pytest.skip("the shared textbook file is not beside this checkout")
    shared = yaml.safe_load(SHARED.read_text(encoding="utf-8"))
    ours = {c["id"]: c for c in OURS}
    for case in shared:
        assert case["id"] in ours, case["id"]
        for key, value in case["expect"].items():
            assert ours[case["id"]]["expect"][key] == value, (case["id"], key)


@pytest.mark.parametrize("case", _cases(yaml.safe_load(SHARED.read_text(encoding="utf-8"))
                                        if SHARED.exists() else []))
def test_shared_textbook_case_as_written(case):
    result = check_case(case)
    assert result.ok, (result.error, [o for o in result.outcomes if not o.ok])


def test_a_wrong_claim_fails():
    case = {"id": "wrong", "spec": "bf16[B, D] @ bf16[D, F] -> bf16[B, F]",
            "chip": {"name": "tpu-v5e"}, "tolerance": 0.001,
            "expect": {"flops": "B*D*F", "threshold": {"var": "B", "op": ">", "rule": 250}}}
    result = check_case(case)
    assert [o.ok for o in result.outcomes] == [False, False]
    assert not result.ok


def test_symroof_check_runs_the_chapter_file():
    import io

    from symroof.cli.command import main
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(HERE / "data" / "rooflines_chapter.yaml")], out=out, err=err) == 0
    assert f"{len(OURS)} claims: {len(OURS)} passed, 0 failed" in out.getvalue()


def test_symroof_check_fails_on_a_wrong_claim_and_refuses_bad_files(tmp_path):
    import io

    from symroof.cli.command import main
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(yaml.safe_dump([{"id": "w", "spec": "bf16[N] *_N bf16[N] -> bf16[1]",
                                      "expect": {"flops": "3*N"}}]))
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(wrong)], out=out, err=err) == 1
    assert "FAIL" in out.getvalue() and "1 claims: 0 passed, 1 failed" in out.getvalue()
    broken = tmp_path / "broken.yaml"
    broken.write_text("- id: [unclosed\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(broken)], out=out, err=err) == 2
    assert "not valid YAML (line" in err.getvalue()


MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"


@pytest.mark.parametrize("case, message", [
    ({"spec": MATMUL}, "'expect' must be a non-empty mapping"),
    ({"spec": MATMUL, "expect": {}}, "'expect' must be a non-empty mapping"),
    ({"spec": MATMUL, "expect": {"flops": "2*B*D*F"}, "tolerance": "tight"}, "tolerance must be a number"),
    ({"spec": MATMUL, "expect": {"flops": "2*B*D*F"}, "tolerance": -1}, "zero or positive"),
    ({"chip": {"name": "v5e"}, "expect": {"t_math": 1}}, "needs a 'spec' or 'given"),
    ({"given": [1, 2], "chip": {"name": "v5e"}, "expect": {"t_math": 1}}, "'given' must be a mapping"),
    ({"spec": MATMUL, "expect": {"threshold": "none"}}, "without a chip needs a spec with one dim left free"),
    ({"spec": MATMUL, "set": {"D": [1, 2]}, "expect": {"flops": 1}}, ""),
    ({"spec": MATMUL, "expect": {"nonsense": 1}}, "unknown expected key 'nonsense'"),
])
def test_malformed_claims_are_error_rows_not_crashes(case, message):
    result = check_case({"id": "bad", **case})
    assert not result.ok and result.error and message in result.error
    assert "ERROR" in claims_report([result]) and "1 claims: 0 passed, 1 failed" in claims_report([result])


def test_claim_forms_people_write():
    # `as` as one string, a machine-only claim, and a threshold of 'none' shown in words
    result = check_case({"id": "limit", "spec": MATMUL, "expect": {
        "intensity_limit": {"as": "D, F", "expr": "B"}}})
    assert result.ok, result
    assert check_case({"id": "ridge", "chip": {"name": "v5e"}, "expect": {"critical_intensity": 240.24},
                       "tolerance": 1e-3}).ok
    never = check_case({"id": "p4", "spec": "int8[B, D] *_D int8[B, D, F] -> int8[B, F]",
                        "chip": {"name": "v5e"}, "set": {"D": 4096, "F": 4096}, "book": "never",
                        "expect": {"threshold": "none"}})
    text = claims_report([never])
    assert never.ok and "pass" in text and "the book says: never" in text.splitlines()[-3]


def test_symroof_check_refuses_an_empty_file(tmp_path):
    import io

    from symroof.cli.command import main
    empty = tmp_path / "empty.yaml"
    empty.write_text("[]\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(empty)], out=out, err=err) == 2 and "no claims to check" in err.getvalue()


def test_a_claim_that_is_not_a_mapping_is_its_own_error_row(tmp_path):
    import io

    from symroof.cli.command import main
    assert "a claim is a mapping" in check_case("nonsense").error
    mixed = tmp_path / "mixed.yaml"
    mixed.write_text(yaml.safe_dump(["just a string", {"id": "ok", "spec": "bf16[N] *_N bf16[N] -> bf16[1]",
                                                        "expect": {"flops": "2*N"}}]))
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(mixed)], out=out, err=err) == 1
    assert "ERROR" in out.getvalue() and "2 claims: 1 passed, 1 failed" in out.getvalue()
