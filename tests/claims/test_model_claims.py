"""Claims about whole models (symroof/claims/models.py), from Python and through `symroof check`."""

import io
import json
from pathlib import Path

import pytest

from symroof.claims.check import report
from symroof.claims.models import check_case, load_claims
from symroof.cli.command import main

DATA = Path(__file__).resolve().parents[1] / "data"
PASSING = DATA / "model_claims.yaml"
FAILING = DATA / "model_claims_failing.yaml"


def _check(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["check", *args], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _results(path: Path) -> dict:
    return {r.id: r for r in (check_case(case) for case in load_claims(path))}


def test_the_passing_file_passes_with_the_published_figures():
    results = _results(PASSING)
    assert [r.id for r in results.values() if not r.ok] == []
    got = {(r.id, o.key): o.got for r in results.values() for o in r.outcomes}
    assert got["llama-3-70b-params", "params"] == 70553706496
    assert got["llama-3-70b-kv-cache-per-token", "kv_bytes_per_token"] == 327680
    assert got["llama-2-70b-params", "params"] == 68976648192
    assert got["llama-3-70b-decode-on-h100", "min_chips"] == 3


def test_numbers_are_compared_within_a_relative_tolerance():
    # 70553706496 is 5.3e-5 away from 70.55e9, relatively
    claim = {"id": "p", "model": "llama-3-70b", "expect": {"params": 70.55e9}}
    assert check_case({**claim, "tolerance": 1e-4}).ok
    assert not check_case({**claim, "tolerance": 1e-5}).ok
    assert not check_case(claim).ok        # the default tolerance, 1e-9


def test_a_wrong_number_is_a_failed_outcome_not_an_error():
    result = _results(FAILING)["wrong-params"]
    assert result.error is None and not result.ok
    assert [(o.key, o.ok) for o in result.outcomes] == [("params", False)]


@pytest.mark.parametrize("claim, message", [
    ("unknown-quantity", "unknown model quantity 'kv_bytes_per_tokn'; did you mean kv_bytes_per_token?"),
    ("unknown-model", "unknown model 'llama-9-70b'"),
    ("training-quantity-in-decode", "'optimizer_bytes' is a training quantity; this claim's mode is decode"),
    ("time-without-chip", "'t_step' needs a chip"),
])
def test_what_cannot_be_checked_is_a_one_line_error(claim, message):
    result = _results(FAILING)[claim]
    assert not result.ok and result.outcomes == ()
    assert result.error is not None and message in result.error and "\n" not in result.error


def test_a_spec_claims_sizes_key_in_a_model_claim_is_refused():
    result = check_case({"id": "s", "model": "llama-3-70b", "set": {"B": 32}, "expect": {"params": 70.55e9}})
    assert result.outcomes == () and "unknown key(s) set (did you mean sizes?) in a model claim" in result.error


@pytest.mark.parametrize("settings, message", [
    ({"sizes": {"s": 4096}}, "the program has no dim s; did you mean S"),
    ({"sizes": "B=1,S=4096"}, "'sizes' must be a mapping"),
    ({"chips": 0}, "chips: 0 must be a positive integer"),
    ({"mfu": "fast"}, "'mfu' must be a fraction of the peak"),
    ({"mode": "serve"}, "mode is one of train, prefill, decode, not 'serve'"),
    ({"chip": {"name": "h100", "ici_bw": 1}}, "unsupported chip figure(s) ['ici_bw']"),
    ({"model": 70}, "'model' must name a model in models.json"),
])
def test_bad_settings_are_one_line_errors(settings, message):
    result = check_case({"id": "bad", "model": "llama-3-70b", "mode": "decode", "expect": {"params": 1}, **settings})
    assert result.error is not None and message in result.error


def test_sizes_and_chips_reach_the_model():
    base = {"model": "llama-3-70b", "mode": "decode", "chip": "h100"}
    one = check_case({**base, "sizes": {"B": 1, "S": 4096}, "expect": {"kv_bytes": "4096 * 327680"}})
    assert one.ok, report([one])
    split = check_case({**base, "sizes": {"B": 32, "S": 4096}, "chips": 4,
                        "expect": {"hbm_per_chip": "(141107412992 + 32 * 4096 * 327680) / 4"}})
    assert split.ok, report([split])


def test_a_hardware_file_is_where_the_chip_is_looked_up(tmp_path):
    hardware = json.loads((DATA.parent.parent / "hardware.json").read_text(encoding="utf-8"))
    hardware["chips"] = [chip for chip in hardware["chips"] if chip["id"].startswith("tpu")]
    path = tmp_path / "tpus.json"
    path.write_text(json.dumps(hardware), encoding="utf-8")
    claim = {"id": "c", "model": "llama-3-70b", "chip": "h100", "expect": {"params": 70553706496}}
    assert check_case(claim).ok
    assert "unknown chip 'h100'" in (check_case(claim, str(path)).error or "")


def test_spec_claims_still_go_to_the_spec_checker():
    result = check_case({"id": "dot", "spec": "bf16[N] *_N bf16[N] -> bf16[1]", "expect": {"flops_exact": "2*N - 1"}})
    assert result.ok and [o.key for o in result.outcomes] == ["flops_exact"]


# ---- symroof check ----------------------------------------------------------------------


def test_check_passes_the_passing_file():
    code, out, err = _check(str(PASSING))
    assert code == 0, out + err
    assert "5 claims: 5 passed, 0 failed" in out and "FAIL" not in out and "ERROR" not in out
    assert err == ""


def test_check_fails_on_one_wrong_number(tmp_path):
    path = tmp_path / "claims.yaml"
    path.write_text("- {id: too-many, model: llama-3-70b, expect: {params: 80e9}, tolerance: 0.01}\n", encoding="utf-8")
    code, out, err = _check(str(path))
    assert code == 1
    assert "FAIL  too-many" in out and "params: got 70553706496" in out and err == ""


def test_check_reports_each_failing_claim_on_its_row():
    code, out, err = _check(str(FAILING))
    assert code == 1 and err == ""    # errors are rows of the table, not tracebacks or exit 2/3
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith(("FAIL", "ERROR"))}
    assert rows["wrong-params"].startswith("FAIL")
    assert rows["unknown-quantity"].startswith("ERROR") and "kv_bytes_per_tokn" in rows["unknown-quantity"]
    assert rows["unknown-model"].startswith("ERROR") and "unknown model 'llama-9-70b'" in rows["unknown-model"]
    assert "5 claims: 0 passed, 5 failed" in out


def test_check_json_has_model_claims():
    code, out, _ = _check(str(PASSING), "--json")
    assert code == 0
    found = {c["id"]: c for c in json.loads(out)}
    kv = found["llama-3-70b-kv-cache-per-token"]
    assert kv["ok"] is True and kv["error"] is None
    assert kv["outcomes"] == [{"key": "kv_bytes_per_token", "ok": True, "expected": "327680", "got": "327680",
                               "note": ""}]
    code, out, _ = _check(str(FAILING), "--json")
    found = {c["id"]: c for c in json.loads(out)}
    assert code == 1 and not any(c["ok"] for c in found.values())
    assert found["unknown-model"]["error"].startswith("unknown model 'llama-9-70b'")
    assert found["wrong-params"]["outcomes"][0]["got"] == "70553706496"
