"""Build the notebooks from the cells below and execute them, so that the committed files
carry their outputs. Run: python notebooks/make.py   (needs `pip install -e '.[notebooks]'`)

The cells are kept here, as code, so that a change to them is a reviewable diff; the
.ipynb files are what readers open.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent

SETUP = '''import io
import numpy as np
from IPython.display import Image, Markdown, display

import symroof
from symroof.latex import derivation
from symroof.plot import plot_roofline, plot_sweep


def show(ax):
    """Display a plot as a PNG (symroof draws on a Figure of its own, not pyplot's)."""
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=110)
    display(Image(buffer.getvalue()))


def tex(analysis, **options):
    display(Markdown(derivation(analysis, markdown=True, **options)))'''

ROOFLINES = [
    ("md", """# All About Rooflines, with symroof

This notebook walks through the rooflines chapter of *How To Scale Your Model*. Every
number below is derived by symroof from a spec and the chip figures in `hardware.json`;
none is typed in. Conventions: a FLOP is one multiply or one add (a multiply-add is 2),
peaks are dense, GB = 1e9 bytes."""),
    ("code", SETUP),
    ("md", """## Where the time goes

An algorithm takes at least as long as its arithmetic (FLOPs over the chip's peak) and as
its data movement (bytes over the bandwidth): a lower bound is the larger of the two, an
upper bound their sum. A trillion FLOPs on an H100 (9.89e14 bf16 FLOPs/s) and on a TPU v6e
(9.1e14 in the chapter's introduction):"""),
    ("code", '''for chip, variant in [("h100", None), ("tpu-v6e", "book-roofline-intro")]:
    t = symroof.roofline(flops=1e12, chip=chip, variant=variant).t_math
    print(f"{chip}: T_math = {float(t) * 1e3:.3f} ms")'''),
    ("md", """## The dot product

A bf16 dot product reads two vectors of N elements, does N multiplies and N - 1 adds,
and writes one element. Its intensity never gets past 1/2, far below any chip's critical
intensity: it is memory-bound at every size."""),
    ("code", '''dot = symroof.analyze("x • y: bf16[N], bf16[N] → bf16[1]", chip="tpu-v5e")
print("FLOPs (exact):", dot.flops_exact, "  bytes:", dot.bytes)
print("intensity:", dot.intensity_exact, " -> ", dot.limit("N"), "as N -> oo")
print(dot.threshold("N").reason)
tex(dot, limit=["N"])'''),
    ("md", """Even on the TPU v5p's vector unit (about 7e12 FLOPs/s per core against 2.5e12
bytes/s), whose critical intensity is under 3, the dot product stays memory-bound:"""),
    ("code", '''vpu = symroof.analyze("bf16[N] *_N bf16[N] -> bf16[1]", peak_flops=7e12, hbm_bw=2.5e12)
print("critical intensity:", float(vpu.critical_intensity), "  bound:", vpu.bound)'''),
    ("md", """## The roofline picture

Achievable FLOPs/s against arithmetic intensity on the v5e: below the critical intensity
(the ridge), time goes to moving bytes; above it, to arithmetic."""),
    ("code", '''matmul = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
points = [symroof.analyze(matmul, chip="tpu-v5e").at(B=b, D=8192, F=8192) for b in (16, 128, 1024)]
points.append(symroof.analyze("bf16[N] *_N bf16[N] -> bf16[1]", chip="tpu-v5e").at(N=8192))
show(plot_roofline(points, labels=["matmul B=16", "matmul B=128", "matmul B=1024", "dot product"]))'''),
    ("md", """## The matmul and its critical batch

A bf16 matmul loads 2BD + 2DF bytes, does 2BDF FLOPs and writes 2BF bytes. As D and F
grow its intensity tends to B, so it is compute-bound on a v5e once B exceeds the
chip's critical intensity. At finite D = F = 4096 the exact crossover comes later."""),
    ("code", '''mm = symroof.analyze(matmul, chip="tpu-v5e")
print(mm.threshold("B"))
print()
print(mm.at(D=4096, F=4096).threshold("B"))
tex(mm, solve="B", limit=["D", "F"])'''),
    ("md", """On GPUs the number is a little higher: an H100 at its dense 9.89e14 bf16 FLOPs/s
and 3.35e12 bytes/s:"""),
    ("code", '''print(f"H100: B > {float(symroof.analyze(matmul, chip='h100').threshold('B').rule):.1f}")'''),
    ("md", """## Two chips: the network roofline

Split D over two v5e chips. Each multiplies its halves (half the FLOPs) and holds partial
sums of the whole B x F result, which the chips must AllReduce over their link. symroof
inserts that AllReduce, costs it on the ICI link (an axis of 2 has no wraparound), and
finds the threshold on D, not B, against the network."""),
    ("code", '''two = symroof.analyze("mesh X=2\\nbf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="tpu-v5e")
print("per chip FLOPs:", two.flops, "  T_math:", two.t_math, "  T_network:", two.t_network)
print("network intensity:", two.network_intensity, f"  critical: {float(two.critical_network_intensity):.1f}")
print(f"compute-bound against the network once D > {float(two.threshold('D').network.rule):.1f}")'''),
    ("md", """On the roofline, each point sits twice: at its HBM intensity (circle) and at its network
intensity (square), under the network roof of the link. D = 4096 is under the network's
slope; D = 16384 is past the network's critical intensity."""),
    ("code", '''show(plot_roofline([two.at(B=4096, D=d, F=4096) for d in (4096, 16384)],
                  labels=["2 chips, D = 4096", "2 chips, D = 16384"]))'''),
    ("md", """## Problem 1: an int8 matmul

In int8 each element is one byte and the v5e does 3.94e14 int8 OPs/s; the chapter takes
8.1e11 bytes/s here (the `book-tpus-table` variant of the v5e's figures)."""),
    ("code", '''p1 = symroof.analyze("int8[B, D] *_D int8[D, F] -> int8[B, F]", chip="tpu-v5e", variant="book-tpus-table")
print("intensity:", p1.intensity, " -> ", p1.limit("D", "F"))
print(f"critical intensity: {float(p1.critical_intensity):.1f}   B > {float(p1.threshold('B').rule):.1f}")'''),
    ("md", """## Problem 2: int8 weights, bf16 activations and math

The weights take half the bytes, the math runs at the bf16 rate: the intensity tends to
2B, so the critical batch halves."""),
    ("code", '''p2 = symroof.analyze("bf16[B, D] * int8[D, F] -> bf16[B, F]", chip="tpu-v5e")
print("bytes:", p2.bytes, "  intensity -> ", p2.limit("D", "F"), f"  B > {float(p2.threshold('B').rule):.1f}")'''),
    ("md", """## Problem 3: achieved FLOPs/s against the batch

For D = F = 4096 and D = F = 1024, with the exact byte counts: both reach the peak, the
larger model at a smaller batch. The dashed lines are the exact thresholds."""),
    ("code", '''big = symroof.analyze("bf16[B, D] * int8[D, F] -> bf16[B, F]", chip="tpu-v5e").at(D=4096, F=4096)
small = symroof.analyze("bf16[B, D] * int8[D, F] -> bf16[B, F]", chip="tpu-v5e").at(D=1024, F=1024)
show(plot_sweep([big, small], "B", np.arange(1, 513), labels=["D = F = 4096", "D = F = 1024"]))
print(f"exact thresholds: B > {float(big.threshold('B').exact):.1f} (D = F = 4096), "
      f"B > {float(small.threshold('B').exact):.1f} (D = F = 1024)")'''),
    ("md", """## Problem 4: a weight matrix per batch element

With `int8[B, D, F]` weights the bytes grow with B as fast as the FLOPs: the intensity is
about 2 whatever B is, and it never becomes compute-bound."""),
    ("code", '''p4 = symroof.analyze("int8[B, D] *_D int8[B, D, F] -> int8[B, F]", chip="tpu-v5e")
print("intensity:", p4.intensity, " -> ", p4.limit("D", "F"))
print(p4.threshold("B").reason)'''),
    ("md", """## Problem 5: the H100's critical batch

The H100 datasheet's tensor-core figures assume 2:4 sparsity; the dense bf16 rate is half
(hardware.json keeps dense figures). The chapter rounds it to 1e15 (the `book-v1-problem5`
variant); with the datasheet's 9.89e14 the answer moves a little."""),
    ("code", '''for variant in ("book-v1-problem5", None):
    a = symroof.analyze(matmul, chip="h100", variant=variant)
    print(f"{variant or 'datasheet figures'}: peak {float(a.peak_flops):.3g} FLOPs/s, B > {float(a.threshold('B').rule):.1f}")'''),
]

SHARDING = [
    ("md", """# Sharded matmuls and collectives, with symroof

A subscript names the mesh axes a dim is split over: `D_X` is D split over axis X.
symroof finds what each chip does, which collectives the layout forces, and what they
cost on the chip's links. Every number is derived; nothing is typed in."""),
    ("code", SETUP),
    ("md", """## The four cases of a sharded matmul

On a mesh of 4 x 2 TPU v5e chips, `B = 8192`, `D = 8192`, `F = 32768`:

1. nothing split along the contraction: no communication;
2. one side split along the contraction: AllGather it first;
3. both split alike along it: multiply the shards, then AllReduce the partial sums
   (or ReduceScatter them where the result is split, or keep them with `{U_X}`);
4. both split over one axis on non-contracting dims: not valid as written."""),
    ("code", '''sizes = dict(B=8192, D=8192, F=32768)
cases = {
    "1: nothing along D": "bf16[B_X, D] @ bf16[D, F_Y] -> bf16[B_X, F_Y]",
    "2: one side along D": "bf16[B, D_X] @ bf16[D, F] -> bf16[B, F]",
    "3: both along D": "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]",
    "3: ... ReduceScatter": "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F_X]",
    "3: ... unreduced": "bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F] {U_X}",
}
for name, spec in cases.items():
    a = symroof.analyze(spec, chip="tpu-v5e", mesh="X=4, Y=2").at(**sizes)
    moves = ", ".join(f"{m.move.kind}_{''.join(m.move.axes)} ({float(t.total) * 1e6:.1f} us)" for m, t in a.collectives)
    print(f"{name:22} T_math {float(a.t_math) * 1e6:8.1f} us  T_network {float(a.t_network) * 1e6:8.1f} us  "
          f"{a.bound:8}  {moves or 'no collectives'}")'''),
    ("code", '''try:
    symroof.analyze("bf16[B_X, D] @ bf16[D, F_X] -> bf16[B, F]", chip="tpu-v5e", mesh="X=4, Y=2")
except symroof.SpecError as error:
    print(error)'''),
    ("md", """## Collectives and their costs

Written out, each collective is costed on its axes' links: AllGather and ReduceScatter
move V bytes per chip (V: the larger side's block), AllReduce twice that; an AllToAll
moves each chip's block V, a quarter of an AllGather of the whole array (16 V on X).
An axis of 16 closes the v5e's ring (both directions of each link); shorter
axes do not. Small arrays are latency-bound (about 1 us per hop)."""),
    ("code", '''program = """mesh X=16, Y=4
AllGather_X bf16[I_X, J] -> bf16[I, J]
AllGather_Y bf16[I_Y, J] -> bf16[I, J]
ReduceScatter_{X,K} bf16[I, K] {U_X} -> bf16[I, K_X]
AllReduce_Y bf16[I_X, J] {U_Y} -> bf16[I_X, J]
AllToAll_{X,J} bf16[I_X, J] -> bf16[I, J_X]"""
for size in (64, 16384):
    a = symroof.analyze(program, chip="tpu-v5e").at(I=size, J=size, K=size)
    print(f"I = J = K = {size}:")
    for move, t in a.collectives:
        kind = "latency" if t.latency > t.bandwidth else "bandwidth"
        print(f"  {str(move.move).split(' (')[0]:40} V = {int(move.bytes):>12} bytes  "
              f"{float(t.total) * 1e6:10.2f} us  ({kind}-bound; {t.links})")'''),
    ("md", """## Two strategies on one mesh

A layer `A[B, D] @ W[D, F]` on 16 TPU v5e chips (axis X), each chip to do a 16th of the
work. Either split the batch and gather the weights: `W` is stored split along D, each
chip AllGathers it and multiplies its own rows of `A` (the weights move: 2DF bytes). Or
split the contraction: each chip multiplies its D-slice of `A` by its D-slice of `W` and
the partial sums are AllReduced (the result moves: 2BF bytes, twice for an AllReduce).
The compute is the same; the traffic is not, and which is cheaper depends on B against D:
the crossover is at B = D/2."""),
    ("code", '''gather_weights = """mesh X=16
AllGather_X bf16[D_X, F] -> bf16[D, F]
bf16[B_X, D] @ bf16[D, F] -> bf16[B_X, F]"""
reduce_result = """mesh X=16
bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]"""
for batch in (256, 4096, 65536):
    print(f"B = {batch}, D = F = 8192:")
    for name, spec in [("AllGather W, multiply B_X", gather_weights),
                       ("multiply D_X, AllReduce", reduce_result)]:
        a = symroof.analyze(spec, chip="tpu-v5e").at(B=batch, D=8192, F=8192)
        print(f"  {name:26} T_math {float(a.t_math) * 1e6:8.1f} us   T_network {float(a.t_network) * 1e6:8.1f} us"
              f"   T_lower {float(a.t_lower) * 1e6:8.1f} us   bound: {a.bound}")'''),
    ("md", """At B = 256 moving the small result is 16 times cheaper than moving the weights; at
B = 4096 = D/2 the two move the same bytes; at B = 65536 gathering the weights is the
only one of the two that is compute-bound. Where each stops being network-bound, as
symroof solves it:"""),
    ("code", '''for name, spec in [("AllGather W, multiply B_X", gather_weights), ("multiply D_X, AllReduce", reduce_result)]:
    print(name)
    print(symroof.analyze(spec, chip="tpu-v5e").threshold("B"))
    print()'''),
    ("md", """Gathering the weights turns compute-bound once the batch is large enough. Splitting
the contraction does not depend on B at all: its traffic grows with B as fast as its
FLOPs do, so only D decides (each chip's slice of D must be long enough). The second
strategy, as symroof lays it out per chip:"""),
    ("code", '''a = symroof.analyze(reduce_result, chip="tpu-v5e")
print(a)
print(a.threshold("D"))'''),
]


def build(name: str, cells) -> nbformat.NotebookNode:
    book = nbformat.v4.new_notebook()
    book.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    for number, (kind, source) in enumerate(cells):
        cell = nbformat.v4.new_markdown_cell(source) if kind == "md" else nbformat.v4.new_code_cell(source)
        cell.id = f"{Path(name).stem}-{number}"    # stable ids: a rebuild changes only what changed
        book.cells.append(cell)
    return book


def execute(book: nbformat.NotebookNode, timeout: int = 600) -> float:
    start = time.perf_counter()
    NotebookClient(book, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}}).execute()
    for cell in book.cells:
        cell.metadata.pop("execution", None)    # timestamps: noise in every diff
        if cell.cell_type == "code":
            cell.outputs = _joined_streams(cell.outputs)
    return time.perf_counter() - start


def _joined_streams(outputs: list) -> list:
    """One stream output where the kernel happened to flush a cell's printing in pieces,
    so that rebuilding a notebook gives the same file."""
    joined: list = []
    for out in outputs:
        last = joined[-1] if joined else None
        if (out.output_type == "stream" and last is not None and last.output_type == "stream"
                and last.name == out.name):
            last.text += out.text
        else:
            joined.append(out)
    return joined


NOTEBOOKS = {"01_rooflines.ipynb": ROOFLINES, "02_sharding.ipynb": SHARDING}


def pictures() -> None:
    """The README's pictures: the chapter's problem 3, and a roofline."""
    import numpy

    import symroof
    from symroof.plot import plot_roofline, plot_sweep, save
    spec = "bf16[B, D] * int8[D, F] -> bf16[B, F]"
    sweeps = [symroof.analyze(spec, chip="tpu-v5e").at(D=n, F=n) for n in (4096, 1024)]
    save(plot_sweep(sweeps, "B", numpy.arange(1, 513), labels=["D = F = 4096", "D = F = 1024"]),
         HERE / "problem3.png")
    matmul = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
    points = [symroof.analyze(matmul, chip="tpu-v5e").at(B=b, D=8192, F=8192) for b in (16, 128, 1024)]
    points.append(symroof.analyze("mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]",
                                  chip="tpu-v5e").at(B=4096, D=4096, F=4096))
    save(plot_roofline(points, labels=["matmul B=16", "matmul B=128", "matmul B=1024", "2-chip matmul"]),
         HERE / "roofline.png")


def main() -> int:
    pictures()
    for name, cells in NOTEBOOKS.items():
        book = build(name, cells)
        seconds = execute(book)
        nbformat.write(book, HERE / name)
        print(f"{name}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
