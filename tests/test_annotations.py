"""Every parameter and return of a function annotated, so that mypy checks its calls (mypy
passes over a call to a function it has no types for). Counted per package with `ast`;
`python tests/test_annotations.py` prints the table.

A parameter is `self` or `cls` only as a method's first; `__init__` needs no return type.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "symroof"

# Every module of the package is annotated, and stays so: a new module is checked by being
# in the package.


def _functions(tree: ast.AST) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.arg]]]:
    """Each function (methods and nested ones too) with its parameters, a method's first
    (`self`, `cls`) left out."""

    def walk(node: ast.AST, method: bool) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, list[ast.arg]]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = child.args
                found = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
                static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in child.decorator_list)
                if method and not static and (args.posonlyargs or args.args):
                    found.remove((args.posonlyargs + args.args)[0])
                yield child, found
                yield from walk(child, False)
            else:
                yield from walk(child, isinstance(child, ast.ClassDef))

    return walk(tree, False)


def _needs_return(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return function.returns is None and function.name != "__init__"


def unannotated(source: str) -> list[tuple[int, str]]:
    """(line, what) for each parameter and return without an annotation.

    Examples:
        >>> unannotated("def f(a, b: int) -> int: ...\\nclass C:\\n    def m(self, x): ...")
        [(1, 'f(a)'), (3, 'm(x)'), (3, 'm -> ?')]
    """
    missing: list[tuple[int, str]] = []
    for function, parameters in _functions(ast.parse(source)):
        missing += [(function.lineno, f"{function.name}({p.arg})") for p in parameters if p.annotation is None]
        if _needs_return(function):
            missing.append((function.lineno, f"{function.name} -> ?"))
    return missing


def _files() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "__pycache__" not in p.parts)


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def counts() -> dict[str, tuple[int, int, int]]:
    """Per package (the top-level modules as "(top)"): parameters, those unannotated, and
    functions without a return annotation."""
    found: dict[str, Counter[str]] = {}
    for path in _files():
        name = _name(path)
        tally = found.setdefault(name.split("/")[0] if "/" in name else "(top)", Counter())
        for function, parameters in _functions(ast.parse(path.read_text(encoding="utf-8"))):
            tally["parameters"] += len(parameters)
            tally["unannotated"] += sum(p.annotation is None for p in parameters)
            tally["no return"] += _needs_return(function)
    return {k: (c["parameters"], c["unannotated"], c["no return"]) for k, c in sorted(found.items())}


def test_every_module_annotates_every_parameter_and_return():
    typed = _files()
    assert len(typed) > 100  # the walk finds the package's modules
    missing = [f"{_name(p)}:{line} {what}" for p in typed for line, what in unannotated(p.read_text("utf-8"))]
    assert not missing, "annotate these (mypy does not check calls to them):\n" + "\n".join(missing)


def test_the_count_finds_what_is_missing():
    source = "def f(a, *args, b=1, **kw): ...\nclass C:\n    @staticmethod\n    def s(x: int) -> None: ...\n" \
             "    def __init__(self, y): ...\n    async def g(cls, /, z: int): ..."
    assert unannotated(source) == [(1, "f(a)"), (1, "f(b)"), (1, "f(args)"), (1, "f(kw)"), (1, "f -> ?"),
                                   (5, "__init__(y)"), (6, "g -> ?")]


if __name__ == "__main__":
    total = [0, 0, 0]
    for package, (n, bare, no_return) in counts().items():
        print(f"{package:10} {n:5} parameters, {bare:4} unannotated ({bare / max(n, 1):4.0%}); "
              f"{no_return:3} functions without a return type")
        total = [t + x for t, x in zip(total, (n, bare, no_return))]
    print(f"{'all':10} {total[0]:5} parameters, {total[1]:4} unannotated ({total[1] / total[0]:4.0%}); "
          f"{total[2]:3} functions without a return type")
    sys.exit(0)
