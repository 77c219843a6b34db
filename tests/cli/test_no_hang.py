"""Inputs that once made sympy build an exact power of billions of digits (a let's **, a
mixture's (1 - A/E)**tokens at a huge batch or over many chips) answer, or refuse in one line,
in a fresh process within a bound that a hang cannot meet."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BOUND_S = 60  # a hang never ends; the work here is about a second's, with the shared CPUs' slack


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "symroof", *argv], capture_output=True, text=True,
                          timeout=BOUND_S)


@pytest.mark.parametrize(("text", "said"), [
    ("let X = 10**100000000", "X = 1.00000E+100000000: too large to be a size (past 4096 bits)"),
    # 0.75**1e11 is no whole number: said so, not called large
    ("let X = (3/4)**100000000000", "X = 1.47912E-12493873661: a size is a positive whole number"),
    ("let n = 100000000, X = 3**n", "too large to be a size (past 4096 bits)"),
])
def test_a_huge_power_in_a_let_is_one_line(tmp_path: Path, text: str, said: str) -> None:
    program = tmp_path / "p.sr"
    program.write_text(f"{text}\nbf16[X] -> bf16[X]\n")
    proc = _run("model", str(program))
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert said in proc.stderr.split("\n")[0]


@pytest.mark.parametrize("argv", [
    ("model", "mixtral-8x7b", "--decode", "--chip", "h100", "--set", "B=10**12", "--set", "S=4096"),
    ("model", "mixtral-8x7b", "--serve", "--chip", "h100", "--prompt", "100", "--generate", "100",
     "--set", "B=1000000000000"),
    ("plan", "mixtral-8x7b", "--decode", "--chip", "h100", "--chips", "8192", "--batch", "65536",
     "--context", "4096", "--top", "1"),
])
def test_a_mixtures_decode_at_a_huge_batch_answers_with_its_assumption(argv: tuple[str, ...]) -> None:
    proc = _run(*argv)
    assert proc.returncode == 0, proc.stderr
    # the touched-experts convention is stated wherever the count is used
    assert "uniformly and independently" in " ".join(proc.stdout.split())


def test_a_plan_at_a_huge_batch_on_many_chips_answers() -> None:
    proc = _run("plan", "mixtral-8x7b", "--decode", "--chip", "h100", "--chips", "8192", "--batch", "100000000",
                "--context", "4096", "--top", "1")
    # 1e8 sequences' caches fit no split of 8192 H100s; the search ends and says so
    assert proc.returncode == 0 and "0 fit and are ranked" in proc.stdout, proc.stderr
