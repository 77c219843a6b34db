"""Turn each notebook's source (notebooks/NN_name.py, jupytext's percent format) into its
.ipynb, executed, so that the committed notebooks carry their outputs; and draw the
docs' pictures (docs/img/). Run: python notebooks/build.py   (needs `pip install -e '.[notebooks]'`);
python notebooks/build.py 03_transformers builds only the notebooks named.

The sources are what to edit and review (ruff lints them); the .ipynb files are what
readers open.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
SOURCES = {path.stem: path for path in sorted(HERE.glob("[0-9][0-9]_*.py"))}


def build(source: Path) -> nbformat.NotebookNode:
    """The notebook a source holds, not yet executed: its cells, and no metadata but the
    kernel's (jupytext's own describes the .py file, not the notebook)."""
    book = nbformat.v4.new_notebook()
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for number, cell in enumerate(jupytext.read(source, fmt="py:percent").cells):
        made = nbformat.v4.new_markdown_cell if cell.cell_type == "markdown" else nbformat.v4.new_code_cell
        # stable ids: a rebuild changes only what changed
        book.cells.append(made(cell.source, id=f"{source.stem}-{number}"))
    return book


def execute(book: nbformat.NotebookNode, timeout: int = 600) -> float:
    start = time.perf_counter()
    NotebookClient(book, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    for cell in book.cells:
        cell.metadata.pop("execution", None)    # timestamps: noise in every diff
        if cell.cell_type == "code":
            cell.outputs = _joined_streams(cell.outputs)
    return time.perf_counter() - start


def _joined_streams(outputs: list[nbformat.NotebookNode]) -> list[nbformat.NotebookNode]:
    """One stream output where the kernel happened to flush a cell's printing in pieces,
    so that rebuilding a notebook gives the same file."""
    joined: list[nbformat.NotebookNode] = []
    for out in outputs:
        last = joined[-1] if joined else None
        if (out.output_type == "stream" and last is not None and last.output_type == "stream"
                and last.name == out.name):
            last.text += out.text
        else:
            joined.append(out)
    return joined


def pictures() -> None:
    """The docs' pictures (docs/img/): the chapter's problem 3, and a roofline."""
    import numpy

    import symroof
    from symroof.render.plot import plot_roofline, plot_sweep, save
    spec = "bf16[B, D] * int8[D, F] -> bf16[B, F]"
    sweeps = [symroof.analyze(spec, chip="tpu-v5e").at(D=n, F=n) for n in (4096, 1024)]
    save(plot_sweep(sweeps, "B", numpy.arange(1, 513), labels=["D = F = 4096", "D = F = 1024"]),
         HERE.parent / "docs" / "img" / "problem3.png")
    matmul = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
    points = [symroof.analyze(matmul, chip="tpu-v5e").at(B=b, D=8192, F=8192) for b in (16, 128, 1024)]
    points.append(symroof.analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]",
                                  chip="tpu-v5e").at(B=4096, D=4096, F=4096))
    save(plot_roofline(points, labels=["matmul B=16", "matmul B=128", "matmul B=1024", "2-chip matmul"]),
         HERE.parent / "docs" / "img" / "roofline.png")


def main(names: list[str]) -> int:
    """Build and execute the notebooks named (all of them, and the docs' pictures, by default)."""
    stems = [Path(name).stem for name in names]    # 03_transformers, its .py or its .ipynb
    unknown = [name for name, stem in zip(names, stems) if stem not in SOURCES]
    if unknown:
        print(f"unknown notebook {', '.join(unknown)} (known: {', '.join(SOURCES)})", file=sys.stderr)
        return 2
    if not names:
        pictures()
    for stem in stems or SOURCES:
        book = build(SOURCES[stem])
        seconds = execute(book)
        nbformat.write(book, HERE / f"{stem}.ipynb")
        print(f"{stem}.ipynb: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
