"""The code's shape: lint, types and layers clean. A module is as long as its one concern
needs: cohesion decides its size, not a line count (the 400-line cap this file once held
split classes across files to meet a number, and is gone).

The tools come with the `test` extra (`pip install -e '.[test]'`) and run from the
virtual environment that runs the tests.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(tool: str, *args: str) -> None:
    program = BIN / tool
    if not program.exists():
        pytest.fail(f"{tool} is not installed beside {sys.executable}: pip install -e '.[test]'")
    done = subprocess.run([str(program), *args], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{tool} {' '.join(args)} found:\n{done.stdout}{done.stderr}"


def test_ruff_finds_nothing():
    _run("ruff", "check", "symroof", "tests")


def test_mypy_finds_nothing():
    _run("mypy", "symroof")


def test_imports_keep_to_the_layers():
    """The layers of pyproject.toml's [tool.importlinter] contract: no module imports one
    above it (the renderers sit above roofline, roofline above the counts)."""
    _run("lint-imports")
