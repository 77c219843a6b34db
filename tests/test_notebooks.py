"""The notebooks run top to bottom on a clean kernel, and the committed ones carry their
outputs and match the cells in notebooks/make.py."""

import copy
import importlib.util
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
spec = importlib.util.spec_from_file_location("make_notebooks", NOTEBOOKS / "make.py")
make = importlib.util.module_from_spec(spec)
spec.loader.exec_module(make)


def _texts(book) -> list[list[str]]:
    """What each code cell says in words: its printed text and its Markdown/LaTeX, not
    pictures (PNG bytes differ between matplotlib builds)."""
    said = []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        parts = []
        for out in cell.outputs:
            if out.output_type == "stream":
                parts.append(out.text)
            for kind in ("text/markdown", "text/latex"):
                if kind in out.get("data", {}):
                    parts.append(out["data"][kind])
        said.append("".join(parts).splitlines())
    return said


@pytest.mark.parametrize("name", sorted(make.NOTEBOOKS))
def test_notebook_executes_and_says_what_the_committed_one_says(name, katex):
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    fresh = copy.deepcopy(book)
    for cell in fresh.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    NotebookClient(fresh, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()  # raises on any error
    errors = [o for c in fresh.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # a stale committed notebook (the engine changed, make.py was not rerun) fails here
    assert _texts(fresh) == _texts(book), "the committed outputs are stale: run python notebooks/make.py"
    for lines in _texts(fresh):
        for block in "\n".join(lines).split("$$")[1::2]:   # every displayed formula renders
            katex.check(block)


@pytest.mark.parametrize("name", sorted(make.NOTEBOOKS))
def test_committed_notebook_has_outputs_and_matches_its_source(name):
    book = nbformat.read(NOTEBOOKS / name, as_version=4)
    sources = [cell.source for cell in book.cells]
    assert sources == [source for _, source in make.NOTEBOOKS[name]], "run python notebooks/make.py"
    code = [cell for cell in book.cells if cell.cell_type == "code"]
    assert all(cell.outputs for cell in code[1:]), "every cell after the setup shows its result"
    kinds = {key for cell in code for out in cell.outputs for key in out.get("data", {})}
    assert "image/png" in kinds or name.startswith("02")
