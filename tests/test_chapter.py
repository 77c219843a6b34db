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
