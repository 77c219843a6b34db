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
