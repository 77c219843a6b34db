"""The notebooks' sources (notebooks/NN_name.py, jupytext's percent format) run top to
bottom on a clean kernel, and the committed .ipynb files, built from them by
notebooks/build.py, carry their outputs and hold the sources' cells."""

from pathlib import Path

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
STEMS = sorted(path.stem for path in NOTEBOOKS.glob("[0-9][0-9]_*.py"))
REBUILD = "run python notebooks/build.py"


def _source(stem: str) -> nbformat.NotebookNode:
    return jupytext.read(NOTEBOOKS / f"{stem}.py", fmt="py:percent")


def _committed(stem: str) -> nbformat.NotebookNode:
    return nbformat.read(NOTEBOOKS / f"{stem}.ipynb", as_version=4)


def _cells(book: nbformat.NotebookNode) -> list[tuple[str, str]]:
    return [(cell.cell_type, cell.source) for cell in book.cells]


def _texts(book: nbformat.NotebookNode) -> list[list[str]]:
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


def test_each_notebook_has_a_source_and_each_source_a_notebook():
    assert len(STEMS) == 8
    assert sorted(path.stem for path in NOTEBOOKS.glob("*.ipynb")) == STEMS


@pytest.mark.parametrize("stem", STEMS)
def test_source_executes_and_says_what_the_committed_notebook_says(stem, katex):
    fresh = _source(stem)
    NotebookClient(fresh, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()  # raises on any error
    errors = [o for c in fresh.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert not errors
    # a stale committed notebook (the engine or the source changed, build.py was not rerun) fails here
    assert _texts(fresh) == _texts(_committed(stem)), f"the committed outputs are stale: {REBUILD}"
    for lines in _texts(fresh):
        for block in "\n".join(lines).split("$$")[1::2]:   # every displayed formula renders
            katex.check(block)


@pytest.mark.parametrize("stem", STEMS)
def test_committed_notebook_has_outputs_and_matches_its_source(stem):
    book = _committed(stem)
    assert _cells(book) == _cells(_source(stem)), REBUILD
    # build.py's stable ids and bare metadata: `jupytext --to ipynb` would give random ids and
    # its own metadata, a diff in every cell at each rebuild
    assert [cell.id for cell in book.cells] == [f"{stem}-{n}" for n in range(len(book.cells))], REBUILD
    assert "jupytext" not in book.metadata, REBUILD
    code = [cell for cell in book.cells if cell.cell_type == "code"]
    assert all(cell.outputs for cell in code[1:]), "every cell after the setup shows its result"
    kinds = {key for cell in code for out in cell.outputs for key in out.get("data", {})}
    assert "image/png" in kinds or stem.startswith("02")
