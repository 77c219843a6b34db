"""The command line's training options, token budgets and parameter-count models: what they
print, and bad values refused in one line with exit code 2."""

from __future__ import annotations

import io
import json

import pytest
import sympy

from symroof.cli.command import main
from symroof.hardware.chips import get_chip


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def refused(*argv: str) -> str:
    """The one error line of a command that must exit 2."""
    code, out, err = run(*argv)
    assert code == 2 and out == "", (code, out[:300], err)
    assert err.startswith("symroof: error: ") and len(err.strip().splitlines()) == 1, err
    return err.strip()


def test_the_book_questions_from_the_command_line():
    code, out, err = run("model", "--params", "70e9", "--chip", "v5p", "--chips", "8960", "--mfu", "0.4",
                         "--tokens", "15e12", "--json")
    assert code == 0, err
    data = json.loads(out)
    peak = get_chip("tpu-v5p").peak_flops("bf16")
    days = sympy.Rational(6 * 70 * 10**9 * 15 * 10**12) / (8960 * peak * sympy.Rational(2, 5)) / 86400
    assert data["days_to_train"] == pytest.approx(float(days))
    code, out, err = run("model", "--params", "7e10", "--chip", "v5e", "--override", "hbm_capacity_bytes=16e9",
                         "--hbm-usable", "1.0")
    assert code == 0, err
    assert "min_chips              70 " in out  # 7e10 x 16 bytes / 16e9


def test_train_tokens_is_still_the_token_budget():
    common = ("model", "llama-3-8b", "--chip", "h100", "--chips", "8", "--set", "B=64", "--json")
    _, old, _ = run(*common, "--train-tokens", "15e12")
    _, new, _ = run(*common, "--tokens", "15e12")
    assert old == new and json.loads(new)["budget"]["tokens"] == 15 * 10**12


def test_the_options_reach_the_report():
    code, out, err = run("model", "llama-2-7b", "--chip", "h100", "--optimizer", "adam-bf16", "--grads", "fp32",
                         "--master", "none", "--hbm-usable", "1", "--json")
    assert code == 0, err
    data = json.loads(out)
    params = data["params"]
    assert (data["grad_bytes"], data["optimizer_bytes"]) == (4 * params, 4 * params)
    assert data["training_state"]["bytes_per_param"]["optimizer"] == 4
    assert any("usable HBM is 1.0 of its capacity" in c for c in data["conventions"])


def test_a_plan_takes_the_options_and_a_budget():
    code, out, err = run("plan", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch", "1M", "--context", "4096",
                         "--optimizer", "adam8bit", "--tokens", "1e12", "--price", "3", "--top", "2")
    assert code == 0, err
    assert "budget (" in out and "price units" in out and "training state: " in out


@pytest.mark.parametrize("argv, words", [
    (("model", "llama-2-7b", "--optimizer", "adamw"), "optimizer is one of adam, adam-bf16"),
    (("model", "llama-2-7b", "--grads", "fp16"), "grads (the gradients' dtype) is one of fp32, bf16"),
    (("model", "llama-2-7b", "--master", "bf16"), "master (the weights' master copy) is one of fp32, none"),
    (("model", "llama-2-7b", "--hbm-usable", "0"), "--hbm-usable takes a fraction in (0, 1]"),
    (("model", "llama-2-7b", "--hbm-usable", "1.5"), "--hbm-usable takes a fraction in (0, 1]"),
    (("model", "llama-2-7b", "--hbm-usable", "most"), "--hbm-usable takes a fraction in (0, 1]"),
    (("model", "llama-2-7b", "--hbm-usable", "nan"), "--hbm-usable takes a fraction in (0, 1]"),
    (("model", "llama-2-7b", "--tokens", "1e12", "--price", "-1"), "--price is a positive number"),
    (("model", "llama-2-7b", "--tokens", "1e12", "--price", "cheap"), "--price takes a positive number"),
    (("model", "llama-2-7b", "--price", "2"), "--price is per chip-hour: give a token budget"),
    (("model", "llama-2-7b", "--decode", "--tokens", "1e12"), "goes with --train, not --decode"),
    (("model", "llama-2-7b", "--decode", "--optimizer", "sgd"), "--optimizer sets a training step's state"),
    (("model", "llama-2-7b", "--layers", "3"), "--layers goes with --params"),
    (("model",), "takes a model's NAME"),
    (("model", "llama-2-7b", "--tokens", "1e12"), "it needs a chip (--chip)"),
    (("model", "--params", "7e10", "--strategy", "fsdp=8"), "--strategy needs the model's configuration"),
    (("model", "--params", "7e10", "--decode"), "no KV cache or attention shapes"),
    (("model", "--params", "7e10", "--chip", "v5p", "--tokens", "1e12"), "give --mfu"),
    (("model", "--params", "7e10", "--print"), "--print needs the model's configuration"),
    (("model", "--params", "0"), "--params"),
    (("model", "--params", "7.5"), "--params"),
    (("model", "llama-3-8b", "--params", "7e10"), "give one or the other"),
    (("model", "chinchilla-70b", "--batches", "1,2"), "--batches needs the model's configuration"),
    (("plan", "chinchilla-70b", "--chip", "h100", "--chips", "8", "--batch", "1M"), "a plan needs"),
    (("plan", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch", "64", "--decode", "--grads", "fp32"),
     "--grads sets a training step's state"),
    (("plan", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch", "1M", "--price", "1"),
     "--price is per chip-hour"),
])
def test_bad_values_are_one_line_and_exit_2(argv, words):
    assert words in refused(*argv)


def test_a_strategys_budget_takes_its_exposed_step_as_a_plan_does():
    # tp=8's collectives on activations wait on the critical path: each step of a token budget
    # takes t_step_exposed (the plan's time), not the roofline's overlapped t_step
    argv = ("model", "llama-2-7b", "--train", "--chip", "h100", "--strategy", "tp=8", "--set", "B=8,T=4096",
            "--tokens", "1e12", "--json")
    code, out, err = run(*argv)
    assert code == 0, err
    data = json.loads(out)
    exposed, overlapped = data["t_step_exposed"], data["t_step"]
    assert exposed > overlapped
    assert data["budget"]["step"] == "t_step_exposed"
    assert data["budget"]["days"] == pytest.approx(1e12 / (8 * 4096) * exposed / 86400)
    code, out, err = run(*argv[:-1])
    assert "(each step t_step_exposed)" in out
    # no strategy: nothing exposed, the roofline's step
    code, out, err = run("model", "llama-2-7b", "--train", "--chip", "h100", "--set", "B=8,T=4096", "--tokens",
                         "1e12", "--json")
    data = json.loads(out)
    assert data["budget"]["step"] == "t_step"
    assert data["budget"]["days"] == pytest.approx(1e12 / (8 * 4096) * data["t_step"] / 86400)


def test_strategy_formulas_of_a_parameter_count_are_refused_and_a_vendor_slice_is_said():
    assert "chinchilla-70b is given by its parameter count only" in refused(
        "plan", "chinchilla-70b", "--chip", "v5p", "--chips", "64", "--batch", "48000", "--symbolic")
    # 64 v5p chips are sold as a 4x4x4 slice: three torus axes each way, the book's alpha / 3
    code, out, err = run("plan", "llama-3-70b", "--chip", "v5p", "--chips", "64", "--batch", "48000", "--symbolic")
    assert code == 0, err
    assert "dp (dp over 3 torus axes)" in out and "B/X > alpha/3" in out
    assert "4x4x4 slice, the vendor's shape of 64 chips" in out
    # what the formulas take no account of is refused, not ignored
    for extra in (("--tokens", "1e12"), ("--price", "2"), ("--optimizer", "adam8bit"), ("--hbm-usable", "1")):
        assert f"drop {extra[0]}" in refused("plan", "llama-3-70b", "--chip", "v5p", "--chips", "64", "--batch",
                                             "48000", "--optimize", *extra)
