"""The README's Python examples run as written, and its two commands are the ones CI uses."""

import doctest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_python_examples_run():
    parser = doctest.DocTestParser()
    test = parser.get_doctest(README, {}, "README.md", str(ROOT / "README.md"), 0)
    assert test.examples, "the README has Python examples"
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    command = next(line for line in ci.splitlines() if line.startswith("python3 -m venv"))
    assert f"```\n{command}\n```" in README
    assert "pytest" in command


def test_readme_latex_example_is_what_symroof_prints():
    import io

    from symroof.cli.command import main
    start = README.index("$ symroof latex ")
    command, block = README[start:].split("\n", 1)
    block = block[:block.index("```")].rstrip("\n")
    out = io.StringIO()
    argv = ["latex", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "tpu-v5e", "--limit", "D,F", "--solve", "B"]
    assert command == '$ symroof latex "bf16[B, D] @ bf16[D, F] -> bf16[B, F]" --chip tpu-v5e --limit D,F --solve B'
    assert main(argv, out=out) == 0
    assert out.getvalue().rstrip("\n") == block
