"""Every result of the rooflines chapter, derived by the engine from the spec and the chip
figures (tests/data/rooflines_chapter.yaml), and the shared textbook file read as it is."""

from pathlib import Path

import pytest
import yaml

from symroof import check_case

HERE = Path(__file__).parent
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

    from symroof.cli import main
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(HERE / "data" / "rooflines_chapter.yaml")], out=out, err=err) == 0
    assert f"{len(OURS)} claims: {len(OURS)} passed, 0 failed" in out.getvalue()


def test_symroof_check_fails_on_a_wrong_claim_and_refuses_bad_files(tmp_path):
    import io

    from symroof.cli import main
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
