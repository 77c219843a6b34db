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
    _run("ruff", "check", "symroof", "tests", "notebooks")


def test_mypy_finds_nothing():
    _run("mypy", "symroof")


def test_imports_keep_to_the_layers():
    """The layers of pyproject.toml's [tool.importlinter] contract: no module imports one
    above it (the renderers sit above roofline, roofline above the counts)."""
    _run("lint-imports")


def _layers() -> list[list[str]]:
    import tomllib  # Python 3.11+: the test below is skipped on 3.10

    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (contract,) = config["tool"]["importlinter"]["contracts"]
    return [[name.strip() for name in layer.split("|")] for layer in contract["layers"]]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_the_contract_names_packages_and_fits_on_a_screen():
    """The contract layers symroof's packages (and the few top-level modules beneath
    them), not the modules inside a package: a person reads it in a minute."""
    import symroof

    top = Path(symroof.__file__).parent
    children = {p.name for p in top.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    children |= {p.stem for p in top.glob("*.py") if p.stem != "__init__"}
    layers = _layers()
    named = [name for layer in layers for name in layer]
    assert len(layers) <= 15
    assert set(named) == children, "every package and top-level module sits in exactly one layer"
    assert len(named) == len(set(named))


def test_the_packages_import_one_way():
    """Folded to packages, the import graph has no cycle: each package's imports point
    down the pipeline (an independent check of what lint-imports enforces)."""
    import grimp

    graph = grimp.build_graph("symroof", exclude_type_checking_imports=True)

    def child(module: str) -> str:
        return module.split(".")[1] if module.count(".") >= 1 else module

    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        if module == "symroof":
            continue
        for imported in graph.find_modules_directly_imported_by(module):
            if imported != "symroof" and child(imported) != child(module):
                edges.setdefault(child(module), set()).add(child(imported))
    done: set[str] = set()

    def visit(node: str, path: tuple[str, ...]) -> None:
        assert node not in path, f"a cycle among packages: {' -> '.join((*path, node))}"
        if node in done:
            return
        for target in sorted(edges.get(node, ())):
            visit(target, (*path, node))
        done.add(node)

    for node in sorted(edges):
        visit(node, ())
    assert {"models", "lang", "roofline"} <= done


def test_a_package_name_is_not_hidden_by_what_it_exports():
    """A package's `__init__` exporting a function named as one of its modules hides the
    module (`symroof.lang.parse` would be the function, and `import symroof.lang.parse as
    p` would give it). Only the two public functions named after their package, as the
    architecture names them, are let be: `symroof.roofline`, `symroof.from_jax` and
    `symroof.from_torch`."""
    import importlib
    import pkgutil

    import symroof

    hidden = []
    for info in pkgutil.walk_packages(symroof.__path__, "symroof."):
        parent_name, _, leaf = info.name.rpartition(".")
        parent = importlib.import_module(parent_name)
        importlib.import_module(info.name)
        if getattr(parent, leaf) is not sys.modules[info.name]:
            hidden.append(info.name)
    assert sorted(hidden) == ["symroof.from_jax", "symroof.from_torch", "symroof.roofline"]
