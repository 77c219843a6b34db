"""Build the notebooks from the cells below and execute them, so that the committed files
carry their outputs. Run: python notebooks/make.py   (needs `pip install -e '.[notebooks]'`);
python notebooks/make.py 03_transformers.ipynb builds only the notebooks named.

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
from symroof.render.latex import derivation
from symroof.render.plot import plot_roofline, plot_sweep


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

TRANSFORMERS = [
    ("md", """# A whole transformer: LLaMA-3 70B, with symroof

The first two notebooks cost one contraction at a time. Here symroof costs a whole model:
its configuration (`models.json`, with the source of every size) is written out as a
program of statements, the layers as a `repeat L { ... }` block costed once and
multiplied by L, and from that one analysis come the parameter count, FLOPs per token,
the memory training needs, the KV cache and the time of a step. Every number below is
derived; the only figures typed in are inputs (a token budget, a chip count, an MFU, a
batch, a decode context).
Conventions: a FLOP is one multiply or one add, GB = 1e9 bytes, peaks are dense bf16."""),
    ("code", SETUP),
    ("md", """## The model, as symroof reads it

The sizes are the published config's. The template below is the training program symroof
costs (`symroof model llama-3-70b --print`): grouped-query attention (K KV heads, each
shared by G query heads: N = K·G), a SwiGLU MLP, RMSNorm, untied input and output
embeddings. `param` and `embedding` declare the weights; each statement is a step. Above
it, the conventions every model quantity follows."""),
    ("code", '''import sympy

from symroof.models.model import Model
from symroof.models.report import CONVENTIONS
from symroof.models.catalogue import get_model
from symroof.show import human
from symroof.lang.structure import read_structured
from symroof.models.templates import program

NAME = "llama-3-70b"
config = get_model(NAME)
context = config["sizes"]["context"]
print(config["name"], config["sizes"])
print()
for convention in CONVENTIONS:
    print("*", convention)
print()
print(program(config, "train"))'''),
    ("md", """## Parameters

symroof counts the declared tensors: the repeated ones L times. The embeddings are the
input table and the output projection (V x D each, untied); the published count is the
sum of the tensors in Meta's checkpoint, read from `models.json`."""),
    ("code", '''m = symroof.model(NAME)
L = m.at(symroof.dim_symbol("L"))
published = config["params_published"]
print(f"params          {int(m.params):>15,}  ({human(m.params)})")
print(f"  embeddings    {int(m.params_embedding):>15,}  ({human(m.params_embedding)})")
print(f"  per block     {int(m.params_per_block):>15,}  ({human(m.params_per_block)}), x L = {L}: "
      f"{human(L * m.params_per_block)}")
print(f"published       {published:>15,}  (input: the model card's count)")
print(f"symroof - published = {int(m.params - published)}")
print()
print("each declared tensor, all its copies:")
for d in m.structured.declared:
    print(f"  {d.word:9} {d.name:4} {str(d.dtype)}[{', '.join(map(str, d.dims))}]".ljust(40)
          + f" x {str(m.at(d.count)):>2}  {int(m.at(d.count * d.elements)):>15,}")'''),
    ("md", """The MLP's three D x F matrices hold most of each block; attention's Wq and Wo are
D x N·H each, and grouped-query attention makes Wk and Wv K/N of Wq's size. The norms'
scales are a rounding error. The shares of one block:"""),
    ("code", '''block = [d for d in m.structured.declared if d.block is not None]
for part, names in [("attention", {"Wq", "Wk", "Wv", "Wo"}), ("MLP", {"Wg", "Wu", "Wd"}), ("norms", {"Wn1", "Wn2"})]:
    count = sum(m.at(d.elements) for d in block if d.name in names)
    print(f"{part:9} {human(count):>8}  {float(count / m.params_per_block):7.3%} of a block")'''),
    ("md", """## Training FLOPs per token, in T

Leave the sequence length T free and the FLOPs per token come out as a line in T. The
named-model shortcut fills T with the model's context, so here the `Model` is built from
the template directly, with B = 1 and no T. Training is 3x the forward (the backward
does twice the forward's FLOPs)."""),
    ("code", '''T = symroof.dim_symbol("T")
free = Model(read_structured(program(config, "train")), None, {"B": 1})
print("forward FLOPs per token: ", free.flops_per_token)
print("training FLOPs per token:", free.flops_train_per_token)
six_n = 6 * free.params
print("6 N:                     ", six_n)
print("training - 6 N:          ", sympy.expand(free.flops_train_per_token - six_n))'''),
    ("md", """Two things separate the count from 6N. The constant is a little *below* 6N: the input
embedding is a gather, not a matmul, so its V x D parameters cost no FLOPs; what is left
over is the vector unit's work (norms, SiLU, the gate product, residual adds). The term
in T is attention: the scores and their product with V, 4·N·H FLOPs per token per position
per layer forward, 12·L·N·H for training, plus softmax's 4 FLOPs per score. symroof counts
the full T x S scores; a causal kernel that skips the masked half does about half of this
term."""),
    ("code", '''emb_table = next(d for d in m.structured.declared if d.name == "Emb")
constant = free.flops_train_per_token.subs(T, 0)
slope = free.flops_train_per_token.coeff(T)
N, H = (m.at(symroof.dim_symbol(x)) for x in "NH")
print(f"6 x the input table's parameters: {int(6 * m.at(emb_table.elements)):,}")
print(f"constant - 6 (N - table):         {int(constant - 6 * (free.params - m.at(emb_table.elements))):,}"
      "  (vector-unit FLOPs per token)")
print(f"slope in T: {int(slope):,}  vs 12 L N H = {int(12 * L * N * H):,}  (the rest: softmax)")
print()
for t in (2048, context, 32768, 131072):
    per_token = free.flops_train_per_token.subs(T, t)
    print(f"T = {t:>6}: {human(per_token, 'FLOPs')} per token, {float(per_token / six_n):.3f} x 6N")'''),
    ("md", """## Training on 15T tokens with 8960 TPU v5p

The inputs: 15e12 tokens, 8960 chips, an MFU of 0.4, sequences of the model's context and
a global batch of about 16M tokens (2^24, rounded to a whole number of sequences whose
tokens split evenly over the chips: symroof refuses an uneven split). The step time at
an MFU is the step's training FLOPs over chips x peak x MFU, and `days_to_train` is the
token budget over tokens per second."""),
    ("code", '''import math

TOKENS, CHIPS, MFU = 15e12, 8960, 0.4        # inputs
step = CHIPS // math.gcd(CHIPS, context)        # sequences whose tokens split evenly over the chips
batch = round(2**24 / context / step) * step    # sequences per step: ~16M tokens
run = symroof.model(NAME, chip="tpu-v5p", sizes={"B": batch, "T": context}, chips=CHIPS, mfu=MFU)
print(f"B = {batch} sequences of T = {context}: {human(run.tokens, 'tokens')} per step")
print(f"training FLOPs per step: {human(run.flops_train, 'FLOPs')}")
print(f"t_step = {human(run.t_step, 's')}, {human(run.tokens_per_s, 'tokens/s')}")
print(f"days to train on {human(TOKENS, 'tokens')}: {float(run.days_to_train(TOKENS)):.1f}")'''),
    ("md", """The MFU is a fraction of the matrix unit's bf16 peak, as papers quote it
(`run.matrix_peak`): a step takes its training FLOPs, the vector unit's small share
included, over chips x that peak x MFU. The back-of-the-envelope uses 6N FLOPs per token
instead; the two side by side, from the same counts:"""),
    ("code", '''print(f"the peak the MFU is a fraction of: {human(run.matrix_peak, 'FLOPs/s')}")
rate = CHIPS * run.matrix_peak * sympy.nsimplify(MFU)
for label, per_token in [("symroof's t_step", None), ("6N at the same rate", 6 * run.params)]:
    days = run.days_to_train(TOKENS) if per_token is None else sympy.Integer(TOKENS) * per_token / rate / 86400
    print(f"  {label:20} {float(days):6.1f} days")'''),
    ("md", """## Memory for training

Per parameter: 2 bytes of bf16 weights, 2 of gradients and 12 of Adam state (an fp32
master copy and two fp32 moments): 16 bytes, before a single activation. With
full rematerialisation each block keeps only its input (B·T·D bf16 per layer), and the
head, which is not recomputed, its input, its output and the logits. A chip's
usable HBM is 0.9 of its capacity, and memory splits evenly over chips (an ideal
sharding, no collectives); `min_chips` is the fewest chips that hold it all. First one
sequence of 8192 tokens, then the 16M-token batch on the 8960-chip slice:"""),
    ("code", '''for chip_name in ("tpu-v5p", "h100"):
    one = symroof.model(NAME, chip=chip_name)
    chip = symroof.get_chip(chip_name)
    print(f"{chip.name} ({human(chip.figure('hbm_capacity_bytes'), 'bytes')} HBM), B = 1, T = {context}:")
    for q in ("weight_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes", "memory_bytes"):
        print(f"  {q:17} {human(getattr(one, q), 'bytes'):>10}")
    print(f"  min_chips         {str(one.min_chips):>10}")
    big = symroof.model(NAME, chip=chip_name, sizes={"B": batch, "T": context}, chips=CHIPS)
    print(f"  at B = {batch}: activations {human(big.activation_bytes, 'bytes')}, "
          f"min_chips {big.min_chips}; on {CHIPS} chips {human(big.hbm_per_chip, 'bytes')} per chip, "
          f"{human(big.hbm_left_per_chip, 'bytes')} left")'''),
    ("md", """Without rematerialisation (every statement's output kept for the backward pass) the
activations of a single sequence are many times larger; with it, the backward computes each
layer's forward again. The model FLOPs (3x the forward, what an MFU counts) are the same
under every policy; the hardware FLOPs (what the chips run, what an HFU counts) add what is
recomputed, flash attention's scores included, and the step's time follows them:"""),
    ("code", '''for remat in ("full", "save=x,o,h", "none"):
    r = symroof.model(NAME, chip="h100", remat=remat)
    print(f"remat {remat:10}: activations {human(r.activation_bytes, 'bytes'):>9}, min_chips on H100 {r.min_chips}; "
          f"hardware / model FLOPs {float(r.flops_train_hardware / r.flops_train):.3f}, "
          f"t_step on one H100 {human(r.t_step, 's')}")'''),
    ("md", """## The KV cache

In decode the model reads the keys and values of every earlier token: the decode template
declares them as `cache Kc, Vc: bf16[B, S, K, H]` in each layer. Per token of context that
is 2 (K and V) x K heads x H x 2 bytes x L layers; grouped-query attention (K KV heads
for N query heads) makes it N/K times smaller than full multi-head attention would."""),
    ("code", '''dec = symroof.model(NAME, "decode")
print(f"KV cache per token: {int(dec.kv_bytes_per_token):,} bytes ({human(dec.kv_bytes_per_token, 'bytes')})")
print(f"per sequence of S = {dec.sizes['S']} tokens: {int(dec.kv_bytes):,} bytes ({human(dec.kv_bytes, 'bytes')})")
print(f"sequences of full context whose cache equals the weights: {float(dec.weight_bytes / dec.kv_bytes):.1f}")'''),
    ("md", """## Decode: step time against batch

One decode step makes one token for each of B sequences, each attending to S = 4096 cached
tokens. The weights are read once per step whatever B is; each sequence adds its own KV
cache reads and its share of FLOPs. On an H100, T_step is the roofline's lower bound,
max(T_math, T_comms), as if one chip held it all (the weights alone do not fit in its
HBM: `min_chips` says how many it takes; on n chips, ideally split, the times divide by
n, tokens/s multiplies by n, and the batch where it turns compute-bound stays the same):"""),
    ("code", '''batches = [2**k for k in range(12)]
steps = [symroof.model(NAME, "decode", "h100", sizes={"B": b, "S": 4096}) for b in batches]
print("    B    T_step     T_math   tokens/s   bound   memory  min_chips")
for b, s in zip(batches, steps):
    print(f"{b:5} {human(s.t_step, 's'):>9} {human(s.analysis.t_math, 's'):>10} {float(s.tokens_per_s):10.0f}"
          f"   {str(s.analysis.bound):6} {human(s.memory_bytes, 'bytes'):>8} {str(s.min_chips):>6}")'''),
    ("code", '''from matplotlib.figure import Figure

fig = Figure(figsize=(9, 3.6))
left, right = fig.subplots(1, 2)
left.loglog(batches, [float(s.t_step) * 1e3 for s in steps], "o-", label="T_step")
left.loglog(batches, [float(s.analysis.t_math) * 1e3 for s in steps], "--", label="T_math")
left.set(xlabel="batch B (sequences)", ylabel="ms per step", title="LLaMA-3 70B decode, S = 4096, H100")
right.loglog(batches, [float(s.tokens_per_s) for s in steps], "o-")
right.set(xlabel="batch B (sequences)", ylabel="tokens/s", title="throughput")
for ax in (left, right):
    ax.grid(True, which="both", alpha=0.3)
left.legend()
fig.tight_layout()
show(left)'''),
    ("md", """At small B the step is the time to read the weights, and throughput grows almost
linearly with B for free. Once the sequences' caches outweigh the weights, the KV cache
reads dominate the bytes, and they grow with B as the FLOPs do, so throughput flattens
instead of reaching the compute roof.

## Where decode turns compute-bound

`decode_batch` solves T_math(B) > T_comms(B) for B. With the KV cache's reads counted,
attention's intensity is about N/K FLOPs per byte, far under the H100's critical
intensity, and so are the FLOPs each added sequence brings per byte it adds: no batch
is compute-bound. Leave the cache reads out (the weights alone, as the usual
"critical batch" rule of thumb does) and the answer is a batch a little above the
critical intensity:"""),
    ("code", '''at_4096 = symroof.model(NAME, "decode", "h100", sizes={"S": 4096})
print(f"H100 critical intensity: {float(symroof.get_chip('h100').critical_intensity()):.1f} FLOPs/byte")
one, two = steps[0].analysis, steps[1].analysis   # B = 1 and B = 2
print(f"FLOPs per byte of one more sequence: {float((two.flops - one.flops) / (two.bytes - one.bytes)):.1f}")
for with_kv in (True, False):
    region = at_4096.decode_batch(with_kv=with_kv)
    root = f"B > {float(region.root):.1f}" if region.root is not None else "no batch"
    print(f"KV reads {'counted' if with_kv else 'left out'}: {region.kind:5} -> {root}")'''),
]


PARALLELISM = [
    ("md", """# Training on a slice: LLaMA-3 70B on TPU v5p, with symroof

The third notebook costed the model as if one ideal chip held it all. Here it is trained on
a real slice: 256 TPU v5p chips, a global batch of 2^20 (about 1M) tokens, sequences of
4096. symroof's planner tries every way to split the chips among data parallelism (dp),
fully sharded data parallelism (fsdp: ZeRO-3, each weight split along D and gathered
before use) and tensor parallelism (tp: Megatron's split of the heads and the MLP width),
sets aside those that cannot work, writes each of the others out as a sharded program,
forward and backward, and costs it. Every number below is derived; the inputs are the
model, the chip, the chip count and the batch.

Conventions: a FLOP is one multiply or one add; training is the forward pass plus a
written-out backward pass (3x the forward's FLOPs: the model FLOPs) and, under full
rematerialisation (the default, used throughout), each layer's forward again in the
backward, its collectives included (about 4x: the hardware FLOPs, which the step's time
counts); GB = 1e9 bytes; peaks are dense
bf16. `t_step` is the roofline's step, max(T_math, T_HBM, T_network), every collective
overlapped with compute. `t_step_exposed` is the same with the collectives on activations
(tp's AllReduces, which the very next statement needs) waiting on the critical path;
those on weights and gradients (FSDP's gathers, the gradients' reductions) can be
prefetched or deferred, and stay overlapped. The planner ranks by `t_step_exposed`."""),
    ("code", SETUP),
    ("md", """## The plan on 256 chips

The candidates are the factorizations 256 = dp x fsdp x tp. Arithmetic on the model's
figures sets some aside before any is costed (tp must divide the KV heads, the MLP width
and the vocabulary; dp x fsdp must divide the 256 sequences; the parameters with their
gradients and Adam state, 16 bytes each, over fsdp x tp must fit in a chip's usable HBM);
the rest are costed whole, and those whose memory per chip then overflows are set aside
too. The best eight, and why the first wins:"""),
    ("code", '''import re

from symroof.models import strategy_costs as model_strategy, planner

NAME, CHIP, CONTEXT = "llama-3-70b", "tpu-v5p", 4096
SEQUENCES = 256
TOKENS = SEQUENCES * CONTEXT      # the global batch: 2^20 tokens
p = planner.plan(NAME, CHIP, 256, TOKENS, "train", context=CONTEXT)
print(f"{len(p.candidates)} ways to split 256 chips; {len(p.ranked)} fit and are costed")
print()
print(f"{'strategy':18} {'mesh':16} {'HBM/chip':>9} {'t_step':>9} {'t_step_exposed':>15}  bound")
for c in p.ranked[:8]:
    f = c.figures
    mesh = str(c.model.structured.program.mesh).removeprefix("mesh ")
    print(f"{c.text:18} {mesh:16} {float(f['memory_per_chip']) / 1e9:6.1f} GB {float(f['t_step']):7.3f} s"
          f" {float(f['t_step_exposed']):13.3f} s  {f['bound']}")
print()
print(planner.why(p))'''),
    ("md", """The ones set aside, by reason (numbers replaced by #):"""),
    ("code", '''set_aside = {}
for c in p.candidates:
    if c.rejected:
        set_aside.setdefault(re.sub(r"\\d+(\\.\\d+)?", "#", c.rejected), []).append(c.text)
for reason, strategies in set_aside.items():
    print(f"{len(strategies):3} {reason}")
    print(f"      {', '.join(strategies[:4])}{', ...' if len(strategies) > 4 else ''}")'''),
    ("md", """Several strategies tie at the compute roof: once every collective hides under the
math, the step is the FLOPs over 256 chips whatever the split. The ties go to the one with
the least network time, then the least memory: pure FSDP over all 256 chips. Strategies
with tp are compute-bound in `t_step` too, but their AllReduces on activations are exposed,
so they rank below.

## What the winner communicates

Every weight is stored split along D over the 256 chips. Each layer gathers its weights
before the forward uses them, gathers them again for the backward, and reduce-scatters
their gradients back to the shards; nothing on activations moves. The step's collectives,
grouped by pass, kind and axis (counts are per step, over the 80 layers and the
embeddings):"""),
    ("code", '''best = p.ranked[0]
m = best.model
groups = {}
for c in model_strategy.collectives(m):
    key = ("backward" if c.backward else "forward", c.kind, c.axes,
           "params/grads: overlaps" if c.overlaps else "activations: exposed")
    count, moved, seconds = groups.get(key, (0, 0, 0))
    groups[key] = (count + c.count, moved + c.count * c.bytes, seconds + c.time)
mesh = str(m.structured.program.mesh).removeprefix("mesh ")
print(f"{best.text} on the mesh {mesh}:")
for (which, kind, axes, what), (count, moved, seconds) in groups.items():
    print(f"  {which:8} {int(count):4} x {kind:13} over {axes}  {float(moved) / 1e9:7.1f} GB  "
          f"{float(seconds) * 1e3:7.1f} ms  ({what})")
a = m.step_analysis
split = model_strategy.times(m)
print()
print(f"T_math {float(a.t_math):.3f} s   T_HBM {float(a.t_comms):.3f} s   T_network {float(a.t_network):.3f} s "
      f"(overlapped {float(split['t_network_overlapped']):.3f} s, exposed {float(split['t_network_exposed']):.3f} s)")
print(f"t_step {float(m.t_step):.3f} s   t_step_exposed {float(split['t_step_exposed']):.3f} s   "
      f"HBM per chip {float(m.hbm_per_chip) / 1e9:.1f} GB   training FLOPs {float(m.flops_train):.4g}")
print()
batch_split = best.sizes["dp"] * best.sizes["fsdp"]
for kind, entry in best.thresholds.items():
    now = m.tokens / batch_split
    print(f"threshold {kind} (over {entry['axes']}): compute-bound once per-chip tokens > "
          f"{float(entry['per_chip_tokens']):.0f}; now {float(now):.0f} "
          f"(T_math / T_network over {entry['axes']} = {float(entry['ratio']):.2f})")'''),
    ("md", """## The FSDP threshold

FSDP's collectives move the weights, whose size does not depend on the batch, while the
FLOPs grow with it: there is a batch above which the math outlasts the gathers. Per chip,
a step moves about 3 x 2 bytes per parameter (two AllGathers and a ReduceScatter of bf16
weights) and does a little over 6 FLOPs per parameter per token it holds (8 with each
layer's forward recomputed), so the book's rule of thumb is: compute-bound once the tokens
per chip exceed C / W_ici (about 3/4 of it with full rematerialisation), the chip's peak over
the bandwidth a chip receives at along the axis. An axis of 256 on a v5p is laid on two of
the torus's physical axes, 16 x 16, each a ring a chip receives on both ways at 2 x 9e10:
4.59e14 / (2 x 1.8e11) = 1275 tokens; here 4096 tokens a chip clear the exact threshold above.

On a symbolic chip (every figure a symbol: C the matrix peak, C_vec the vector unit's,
W_ici the link) the same analysis gives the rule as a formula. symroof's symbolic axis is
a line, each chip taking in (N - 1)/N of the array one way at W_ici; the v5p's 16 x 16
rings together give 2 x 2 x 9e10 = 3.6e11, so put that in for W_ici (the (N - 1)/N =
255/256 is the small difference left)."""),
    ("code", '''import sympy

from symroof.hardware.machine import figure_symbol

C, W_ici, C_vec = (figure_symbol(f) for f in ("peak", "ici_bw", "vector"))
sym = symroof.model(NAME, "train", chip="symbolic", sizes={"B": SEQUENCES, "T": CONTEXT}, strategy=best.text)
rule = model_strategy.thresholds(sym, dict(sym.options.strategy))["fsdp"]["per_chip_tokens"]
print("per-chip tokens >", rule)
r = sympy.Symbol("r", positive=True)               # C / C_vec
share = sympy.simplify((rule * W_ici / C).subs(C_vec, C / r))
lead = share.subs(r, 0)
vector = sympy.simplify((lead / share - 1) / r)
print(f"               = {float(lead):.4f} x (C / W_ici) / (1 + {float(vector):.3e} x C / C_vec)")
from symroof.ir import MeshAxis
from symroof.hardware.topology import lay_out

chip = symroof.get_chip(CHIP)
rings = lay_out([MeshAxis("Z", 256)], chip)["Z"]  # the physical axes an axis of 256 spans
v5p = {C: chip.figure("peak_flops_per_s.bf16"), C_vec: chip.figure("vector_flops_per_s.fp32"),
       W_ici: len(rings) * chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")}
print(f"v5p: C / W_ici = {float((C / W_ici).subs(v5p)):.0f}, C / C_vec = {float((C / C_vec).subs(v5p)):.1f}: "
      f"per-chip tokens > {float(rule.subs(v5p)):.0f} (on the v5p's {' x '.join(map(str, rings))} rings: "
      f"{float(best.thresholds['fsdp']['per_chip_tokens']):.0f})")'''),
    ("md", """The leading factor is about 0.7: full rematerialisation runs each layer's forward
again, 8 FLOPs per parameter per token rather than 6 (a factor 3/4), at T = 4096 attention
adds FLOPs per token beyond those, flash attention's recomputed scores among them, and the
input embedding, a gather, adds none but still moves. The
vector unit's work (norms, SiLU, residuals, at C_vec, about 33 times slower than the
matrix unit) lengthens T_math a little more, and lowers the threshold with it.

## The tensor-parallel ratio

Tensor parallelism's AllReduces move activations, B x T x D per layer, which grow with the
batch exactly as the FLOPs do: the batch does not decide it. What does is the model's width
over the axis, so symroof gives tp a ratio, T_math / T_network over tp's axis (above 1:
compute-bound), and it falls as 1/tp. For a Megatron MLP alone a hand estimate is
1.5 x F / tp / (C / W_ici); with the attention sublayer (fewer FLOPs per AllReduce) and the
backward pass (3x the FLOPs for 2x the AllReduces; with the layer's forward recomputed, 4x
the FLOPs for 3x, which takes the ratio down by 8/9) the whole layer lands a little under it. The
ratio staying above 1 does not make tp free: its AllReduces sit on the critical path."""),
    ("code", '''F = symroof.model(NAME).at(symroof.dim_symbol("F"))
one_ring = {**v5p, W_ici: chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")}  # tp's axis: one ring
print(f"1.5 x F / (C / W_ici) = 1.5 x {F} / {float((C / W_ici).subs(one_ring)):.0f} = "
      f"{float(1.5 * F / (C / W_ici).subs(one_ring)):.1f}")
print()
print(f"{'strategy':14} {'tp ratio':>9} {'x tp':>6} {'t_step':>9} {'t_step_exposed':>15} {'HBM/chip':>9}")
for tp in (2, 4, 8):
    run = symroof.model(NAME, "train", chip=CHIP, sizes={"B": SEQUENCES, "T": CONTEXT},
                        strategy=f"fsdp={256 // tp},tp={tp}")
    ratio = model_strategy.thresholds(run, dict(run.options.strategy))["tp"]["ratio"]
    print(f"fsdp={256 // tp},tp={tp:<3} {float(ratio):9.2f} {float(ratio * tp):6.1f} {float(run.t_step):7.3f} s "
          f"{float(model_strategy.times(run)['t_step_exposed']):13.3f} s {float(run.hbm_per_chip) / 1e9:6.1f} GB")'''),
    ("md", """tp past 8 is not an option for this model: it has 8 KV heads, and the planner's
Megatron split gives each chip whole ones.

## Step time against chips

The same global batch, 1M tokens, on 64 to 512 chips, each time the planner's best. Up to
256 chips the batch's 256 sequences split over the chips by FSDP alone, and the step stays
at the compute roof: the time halves with each doubling. Past 256 there are more chips than
sequences, so the planner must split a sequence or the model: at 512 it splits each
sequence in two (sp=2, the keys and values gathered before attention, a small exposed
cost), and each chip holds fewer tokens: tokens per second per chip falls. (The planner
considers pipelines too, but here their bubble sets them back. At 1024 chips it adds tp=2;
that plan costs about 300 strategies, a couple of minutes, so it is left out here:
`symroof plan llama-3-70b --chip tpu-v5p --chips 1024 --batch 1M --train`.)"""),
    ("code", '''CHIPS = [64, 128, 256, 512]
plans = [planner.plan(NAME, CHIP, n, TOKENS, "train", context=CONTEXT) for n in CHIPS]
print(f"{'chips':>5}  {'best':16} {'t_step':>9} {'t_step_exposed':>15} {'tokens/s/chip':>14} {'HBM/chip':>9}  bound")
for n, q in zip(CHIPS, plans):
    f = q.ranked[0].figures
    per_chip = float(f["tokens"] / f["t_step_exposed"]) / n
    print(f"{n:5}  {q.ranked[0].text:16} {float(f['t_step']):7.3f} s {float(f['t_step_exposed']):13.3f} s "
          f"{per_chip:14.1f} {float(f['memory_per_chip']) / 1e9:6.1f} GB  {f['bound']}")'''),
    ("code", '''from matplotlib.figure import Figure

fig = Figure(figsize=(9, 3.6))
left, right = fig.subplots(1, 2)
best_figures = [q.ranked[0].figures for q in plans]
exposed = [float(f["t_step_exposed"]) for f in best_figures]
left.loglog(CHIPS, [float(f["t_step"]) for f in best_figures], "o-", label="t_step")
left.loglog(CHIPS, exposed, "s--", label="t_step_exposed")
left.set(xlabel="chips", ylabel="seconds per step", title="LLaMA-3 70B training, 1M tokens, TPU v5p")
right.semilogx(CHIPS, [float(f["tokens"]) / t / n for f, t, n in zip(best_figures, exposed, CHIPS)], "o-")
right.set(xlabel="chips", ylabel="tokens/s per chip (exposed)", title="throughput per chip")
right.set_ylim(bottom=0)
for ax in (left, right):
    ax.grid(True, which="both", alpha=0.3)
    ax.set_xticks(CHIPS, [str(n) for n in CHIPS])
    ax.set_xticks([], minor=True)
left.legend()
fig.tight_layout()
show(left)'''),
    ("md", """## Pipelines: the bubble and the microbatches

A pipeline splits the 80 layers into stages (`pp=8`: 10 layers a stage) and the batch into
microbatches that pass from stage to stage. Each stage waits for the first microbatch to
reach it and idles again while the last drains: (P - 1) slots of a microbatch's work out
of M + P - 1, the bubble. symroof writes the first and the last stage as programs of their
own, costs each for one microbatch, forward and backward, and lets the schedule put them
together. More microbatches shrink the bubble; 1F1B keeps fewer of them in memory than
GPipe (P in flight on the first stage, not M); interleaving two layer chunks a chip halves
the bubble again, at the cost of more activations in flight and twice the sends."""),
    ("code", '''print(f"{'schedule':12} {'M':>3} {'bubble':>7} {'t_step':>9} {'t_step_exposed':>15} {'HBM/chip':>9}")
for schedule in ("gpipe", "1f1b", "interleaved"):
    for M in (8, 16, 32):
        run = symroof.model(NAME, "train", chip=CHIP, sizes={"B": SEQUENCES, "T": CONTEXT},
                            strategy="fsdp=8,pp=8,tp=4", microbatches=M, schedule=schedule)
        f = model_strategy.report(run)
        print(f"{schedule:12} {M:3} {float(f['bubble_fraction']):7.1%} {float(run.t_step):7.3f} s "
              f"{float(f['t_step_exposed']):13.3f} s {float(run.hbm_per_chip) / 1e9:6.1f} GB")
pp = model_strategy.thresholds(run, dict(run.options.strategy))["pp"]
print("microbatches for a bubble under 10% and 5% (interleaved, 2 chunks):", pp["microbatches_for_bubble"])'''),
    ("md", """Against the planner's best on the same 256 chips (FSDP alone, about 4.1 s), even 32
microbatches leave this pipeline slower: a batch of 256 sequences is not large enough to
hide the bubble of 8 stages. Pipelines pay where the weights do not fit otherwise, or where
the only links left between groups of chips are slow ones (a pipeline sends one
microbatch's activations between neighbours, where FSDP gathers every weight over all
chips)."""),
    ("md", """## A mixture of experts: expert parallelism

Mixtral 8x7B routes each token to 2 of its 8 experts. `ep=8` puts one expert on each of 8
H100s and splits the batch over them too; each layer then sends every token to its
experts' chips and back (two AllToAlls, written into the program), while the attention
and the router are copied on every chip. Serving 64 sequences at a 4096-token context,
a decode step mostly reads weights, so what matters is how many bytes of them each chip
holds: tensor parallelism splits every weight, expert parallelism only the experts'."""),
    ("code", '''print(f"{'strategy':10} {'HBM/chip':>9} {'t_step':>9} {'exposed':>9} {'AllToAll':>9}")
for strategy in ("tp=8", "ep=8", "tp=2,ep=4", "tp=4,ep=2"):
    run = symroof.model("mixtral-8x7b", "decode", chip="h100", sizes={"B": 64, "S": 4096}, strategy=strategy)
    f = model_strategy.report(run)
    exchange = sum(float(c.time) for c in f["collectives"] if c.kind == "AllToAll")
    print(f"{strategy:10} {float(run.hbm_per_chip) / 1e9:6.1f} GB {float(run.t_step) * 1e3:6.2f} ms "
          f"{float(f['t_step_exposed']) * 1e3:6.2f} ms {exchange * 1e6:6.1f} us")'''),
    ("md", """Here tensor parallelism wins: every chip reads an eighth of every weight, where under
`ep=8` each also reads the whole attention. The AllToAlls themselves are small at 64
sequences (a few tokens a chip). Expert parallelism pays where the experts' weights dominate
and the batch is large enough that the experts' matmuls, not the weight reads, set the
time (training, or prefill); `symroof plan mixtral-8x7b` weighs it against the rest."""),
]


FROM_JAX = [
    ("md", """# From JAX to a roofline

You have a model written in JAX and want its roofline: how many FLOPs and bytes a block
costs, as formulas in its sizes, whether it is compute- or memory-bound on a chip, and
whether those counts can be trusted. This notebook takes a pre-norm transformer block
written in plain JAX, imports it with `symroof.from_jax`, reads its costs, edits the
program it writes, checks the counts against XLA's cost analysis of the same function, and
finally measures this machine and times the block on it.

Every number printed comes from symroof, XLA or the stopwatch; what the stopwatch measures
changes from run to run, so it appears only in the plots, never in the text."""),
    ("code", SETUP),
    ("md", """## A block in plain JAX

RMSNorm, multi-head attention with the scores and the softmax in fp32, a residual add,
RMSNorm again, a SwiGLU MLP (silu), a residual add: LLaMA's block without the rotary
embedding. Nothing in it knows about symroof. `from_jax` traces it with symbolic dims
(`jax.export.symbolic_shape`): the shapes string names each parameter's dtype and dims."""),
    ("code", r'''import os
os.environ.setdefault("JAX_PLATFORMS", "cpu")   # the same figures on every machine: XLA's CPU backend
import warnings

import jax
import jax.numpy as jnp
from jax import lax


def rmsnorm(x, g):
    return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6) * g


def attention(q, k, v):
    """q, k, v [B, T, N, H]: scores in fp32, softmax over the keys, weighted values."""
    scores = jnp.einsum("btnh,bsnh->bnts", q, k, preferred_element_type=jnp.float32)
    probs = jax.nn.softmax(scores / jnp.sqrt(q.shape[-1]).astype(jnp.float32), axis=-1)
    return jnp.einsum("bnts,bsnh->btnh", probs.astype(v.dtype), v)


def block(x, g1, wq, wk, wv, wo, g2, w_gate, w_up, w_down):
    h = rmsnorm(x, g1)
    q, k, v = (jnp.einsum("btd,dnh->btnh", h, w) for w in (wq, wk, wv))
    x = x + jnp.einsum("btnh,nhd->btd", attention(q, k, v), wo)
    h = rmsnorm(x, g2)
    return x + (jax.nn.silu(h @ w_gate) * (h @ w_up)) @ w_down


SHAPES = ("x=bf16[B, T, D]; g1=bf16[D]; wq=bf16[D, N, H]; wk=bf16[D, N, H]; wv=bf16[D, N, H]; "
          "wo=bf16[N, H, D]; g2=bf16[D]; w_gate=bf16[D, F]; w_up=bf16[D, F]; w_down=bf16[F, D]")
imported = symroof.from_jax(block, SHAPES)
print(f"{imported.equations} jaxpr equations -> {len(imported.converted.statements)} statements")
print("warnings:", imported.warnings or "none")
print()
print(imported.text)'''),
    ("md", """Each jaxpr equation that computes becomes one statement, with the primitive it came
from as a comment. Broadcasts, transposes and constants write none (the header counts
them): they change how an array is read, not its data. The keys' axis of the scores gets
a name of its own, `T2 = T`, so that the scores' two axes can be told apart. `jnp.mean`
is a sum in fp32 and a divide; `jax.nn.softmax` is a max over the keys (and one more
against its initial value, -inf), a subtract, an exp, a sum and a divide; silu is a
sigmoid and a multiply.

What symroof cannot cost it names, with its count, in `warnings` and in the program's
header, and leaves out of every figure; it never drops it silently:"""),
    ("code", r'''with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    sorted_scores = symroof.from_jax(lambda x: jnp.sort(x, axis=-1) * x, "x=fp32[B, T]")
print([str(w.message) for w in caught])
print(sorted_scores.text)'''),
    ("md", """## Its costs, as formulas

`imported.analysis` analyses the program with every dim a symbol. FLOPs count a
multiply-add as 2; transcendentals (exp, rsqrt, the sigmoid's exp) are counted apart, as
XLA counts them; bytes are HBM bytes with each statement's inputs read once and its
output written once: every statement is its own kernel, nothing is fused. The bytes that
do not grow with the batch B are the weights and the norms' scales, read once."""),
    ("code", r'''import sympy

a = imported.analysis
B, T = sympy.symbols("B T", positive=True, integer=True)   # as symroof makes its dims
print("FLOPs          ", a.flops)
print("transcendentals", a.transcendentals)
print("bytes          ", a.bytes)
print("  of which read once, whatever B:", a.bytes.subs(B, 0))
print("intensity      ", a.intensity)'''),
    ("md", """The intensity's limits say which part of the block sets it as a size grows. As the
sequence grows, the T² terms take over: the scores [B, N, T, T2] in fp32, written and read
back by each of the softmax's statements, against attention's FLOPs, which grow as T² too
but only H-fold per score. As the batch grows, the weights' bytes are spread over more
tokens and the intensity tends to a ratio per token. As the widths D and F grow together,
the MLP's weights dominate both counts and the intensity tends to the tokens, B·T, as a
matmul's tends to its batch."""),
    ("code", r'''for dims in (["T"], ["B"], ["D", "F"]):
    print(f"intensity as {', '.join(dims)} -> oo:", a.limit(*dims))'''),
    ("md", """## On an H100

A chip turns the counts into times. The H100's matrix units run the contractions at the
bf16 peak; its vector unit runs the rest (norms, softmax, silu, casts cost no FLOPs), and
T_math is the sum of the two. (On a TPU v5e symroof refuses: `hardware.json` has no
vector-unit figure for it, and symroof does not run vector work at the matrix peak.)

The sizes are a LLaMA-2 7B layer's, read from `models.json`, at its full context. The
analysis is symbolic; `at` gives it sizes (the alias T2 needs its size too, to place a
point on a plot)."""),
    ("code", r'''from symroof.models.catalogue import get_model

llama = get_model("llama-2-7b")["sizes"]
LAYER = {"D": llama["D"], "N": llama["N"], "H": llama["H"], "F": llama["F"], "T": llama["context"]}
print("LLaMA-2 7B layer:", ", ".join(f"{k}={v}" for k, v in LAYER.items()))
h100 = imported.model("h100").analysis
print("work per unit:", h100.work)


def at(analysis, **sizes):
    return analysis.at(T2=sizes["T"], **sizes)


def table(analysis, batches):
    print(f"{'B':>3} {'FLOPs':>10} {'bytes':>10} {'intensity':>9} {'T_math':>9} {'T_comms':>9}  bound")
    for b in batches:
        x = at(analysis, B=b, **LAYER)
        print(f"{b:3} {float(x.flops):10.3e} {float(x.bytes):10.3e} {float(x.intensity):9.1f} "
              f"{float(x.t_math) * 1e3:6.2f} ms {float(x.t_comms) * 1e3:6.2f} ms  {x.bound}")


BATCHES = (1, 4, 16, 64)
table(h100, BATCHES)
print()
print("threshold on B:", h100.at(T2=LAYER["T"], **LAYER).threshold("B").reason)'''),
    ("md", """Memory-bound at every batch, and the threshold says why: the intensity never gets near
the critical intensity. The statements that move the most bytes at B = 1 are the ones on
the fp32 scores: their scaling, the softmax's steps, the cast back to bf16:"""),
    ("code", r'''one = at(h100, B=1, **LAYER)
for line in sorted(one.lines, key=lambda x: -float(x.bytes))[:6]:
    print(f"{float(line.bytes / one.bytes):6.1%}  {str(line.program).strip()}")'''),
    ("md", """## Fusing attention: edit the program

The program is text: edit it. Flash attention keeps the scores on chip; in symroof that
is a `fused { ... }` block around the statements from the scores' contraction to the
values' contraction, whose intermediates then cost no HBM bytes. A fused block keeps a
tensor on chip where the statement that reads it names it as the one that wrote it, and
the import writes each array with the same labels wherever it is read: the probabilities
are [B, N, T, T2] where the cast writes them and where the values' contraction reads them
(it reads the values, v, as [B, T2, N, H] instead). Wrapping the statements in the block
is the whole edit."""),
    ("code", r'''lines = imported.text.split("\n")
scores = next(i for i, line in enumerate(lines) if line.endswith("-> fp32[B, N, T, T2]   # dot_general"))
values = next(i for i, line in enumerate(lines) if i > scores and line.endswith("# dot_general"))
fused_text = "\n".join(lines[:scores] + ["fused {"] + ["  " + line for line in lines[scores:values + 1]]
                       + ["}"] + lines[values + 1:])
fused = symroof.model(fused_text, "prefill", "h100").analysis
print("\n".join(fused_text.split("\n")[scores:values + 3]))
print()
table(fused, BATCHES)
print()
print("threshold on B:", fused.at(T2=LAYER["T"], **LAYER).threshold("B"))
print("intensity as T -> oo:", fused.limit("T"))
with warnings.catch_warnings():   # on_chip also warns where an intermediate does not fit: printed here
    warnings.simplefilter("ignore", symroof.SymroofWarning)
    kept = at(fused, B=1, **LAYER).on_chip
for item in dict.fromkeys(map(str, kept)):
    print("on chip:", item)'''),
    ("md", """Fused, the block is compute-bound from the first sequence, and the intensity now grows
without bound in T. symroof checks what the block keeps on chip against the H100's L2 (each
intermediate's size, once): the scores do not fit, so a kernel has to tile them, as flash attention does; the HBM bytes
assume it does. On the roofline, the block as imported sits under the memory slope, and
fused under the compute roof:"""),
    ("code", r'''points = [at(h100, B=b, **LAYER) for b in (1, 16)] + [at(fused, B=b, **LAYER) for b in (1, 16)]
show(plot_roofline(points, labels=["as imported, B=1", "as imported, B=16", "attention fused, B=1",
                                   "attention fused, B=16"]))'''),
    ("md", """## Against symroof's own LLaMA-2 7B

symroof ships a LLaMA-2 7B template (`symroof model llama-2-7b --print`). Its layer, costed
per block, against the block written in JAX, at B = 1 and the full context: the FLOPs
differ by a few terms in N and T, the JAX block's scaling of the scores by 1/sqrt(H) (one
divide per score, which the template leaves out) and `jax.nn.softmax`'s extra max per row.
The bytes differ because the template fuses its attention and writes each norm and
activation as one op, where the JAX block's every primitive is a kernel of its own."""),
    ("code", r'''template = symroof.model("llama-2-7b", "prefill", "h100", {"B": 1, "T": None}).per_block()
ours = imported.analysis.at(B=1, **{k: v for k, v in LAYER.items() if k != "T"}).flops
print("FLOPs per block, template:", template["flops"])
print("FLOPs per block, imported:", ours)
print("imported - template:      ", sympy.factor(ours - template["flops"]))
print()
print(f"bytes per block at B=1, T={LAYER['T']}:")
print(f"  template         {float(template['bytes'].subs(T, LAYER['T'])):10.3e}")
for name, analysis in (("as imported", h100), ("attention fused", fused)):
    print(f"  {name:16} {float(at(analysis, B=1, **LAYER).bytes):10.3e}")'''),

    ("md", """## Against XLA

At concrete sizes, `imported.xla(sizes)` (`symroof.from_jax.importer.cross_check`) lowers the same
function with `jax.jit` and sets symroof's counts beside XLA's cost analysis of the lowered
module (StableHLO as JAX emits it, unfused) and of the compiled one (after XLA's CPU
passes). The FLOPs must agree with the lowered module's once the two conventions in which
they differ are counted XLA's way, and the cross-check lists each difference with its
reason. Two sizes, small enough to compile in a second:"""),
    ("code", r'''SIZES = [{"B": 2, "T": 128, "D": 256, "N": 4, "H": 64, "F": 1024},
         {"B": 4, "T": 512, "D": 512, "N": 8, "H": 64, "F": 2048}]
checks = [imported.xla(sizes) for sizes in SIZES]
for check in checks:
    s, lowered, compiled = check["symroof"], check["xla_lowered"], check["xla_compiled"]
    print("at " + ", ".join(f"{k}={v}" for k, v in check["sizes"].items()))
    print(f"  {'':16}{'symroof':>14}{'XLA lowered':>14}{'XLA compiled':>14}")
    for key in ("flops", "transcendentals", "bytes"):
        print(f"  {key:16}{s[key]:>14}{lowered[key]:>14}{compiled[key]:>14}")
    for why, n in check["explained_flops"].items():
        print(f"  FLOPs {n:+d}: {why}")
    print(f"  FLOPs agree with the lowered module, differences counted: {check['flops_agree']} "
          f"(unexplained: {check['flops_unexplained']})")
    print(f"  transcendentals agree: {check['transcendentals_agree']}")
    print(f"  bytes: symroof / lowered = {s['bytes'] / lowered['bytes']:.3f} "
          f"(within the lowered: {check['bytes_within_lowered']}), compiled / symroof = "
          f"{compiled['bytes'] / s['bytes']:.3f}")
    print()'''),
    ("md", """The FLOPs agree exactly once XLA's conventions are counted: XLA counts a convert
(the casts to and from fp32 around the sums and the scores) as one FLOP per element, where
symroof counts a cast as data movement only, and XLA counts a reduction over n terms as
n - 1 combines per output, where symroof's `flops` counts n (its `flops_exact` counts n - 1).
The transcendentals agree as they stand.

The bytes are counted differently by design, and only one bound is asserted. symroof's are
each statement's inputs read once and output written once; the lowered module's count
every instruction's operands and result, broadcasts included, so they are larger. The
compiled module's bytes are XLA's count after its CPU backend has fused the module, printed
for reference: no bound is claimed for them (here they are above symroof's at the smaller
size and below at the larger). Its FLOPs differ from the lowered module's too, by what
XLA's passes rewrite; the cross-check explains the lowered figures only."""),
    ("md", """## This machine, measured

The chips above are datasheet figures. `symroof.calibrate` measures this machine instead:
a matmul per dtype for the peak, streaming kernels on arrays far larger than the cache for
the bandwidth, and in-cache adds for the vector rate, each the best of a few runs.
`calibrate.entry` writes the result as a chip in `hardware.json`'s format; written to a
file, `get_chip` reads it back like any other. `validate.run_sweep` then times fp32 ops
across both regimes (matmuls from one row, memory-bound, to many, compute-bound; a dot
product and elementwise ops on arrays beyond the cache) against the roofline of that chip.
The quick modes take seconds. (`symroof calibrate` and `symroof validate` do the same from
the command line.)"""),
    ("code", r'''import tempfile

from symroof.measure import calibrate, validate
from symroof.hardware.chips import get_chip

calibration = calibrate.measure_machine(quick=True)
hardware = os.path.join(tempfile.mkdtemp(), "this-machine.json")
calibrate.write(hardware, calibrate.entry(calibration, "this-machine"))
machine = get_chip("this-machine", hardware)
print(f"calibrated: {len(calibration.rates)} kernels, {calibration.repeats} runs each; figures written:")
for path in sorted(calibration.figures()):
    print("  ", path)
sweep = validate.run_sweep(machine, quick=True)
ops = [row.point.op for row in sweep.rows]
print(f"validated: {len(sweep.rows)} ops timed, " + ", ".join(f"{ops.count(op)} {op}" for op in dict.fromkeys(ops))
      + (f"; skipped: {len(sweep.skipped)}" if sweep.skipped else ""))'''),
    ("md", """The figures are in the plot, not in the text: they move from run to run on a shared
machine. Each op sits where the roofline of this machine puts it (open markers, on the
roof) and where the stopwatch put it (crosses: FLOPs over the median time). A cross under
its marker is an op short of the roof. A cross clearly above its marker was measured faster
than the roof allows, so a figure is wrong (`symroof validate` flags it): most often the
calibration ran while another process held a core, which lowers every rate it measured.
Calibrate on a quiet machine for figures to keep."""),
    ("code", r'''picture = os.path.join(os.path.dirname(hardware), "validate.png")
validate.plot(sweep, picture)
display(Image(filename=picture))'''),
    ("md", """## The block on this machine

The same JAX block, imported in fp32 (this CPU's matmul peak is measured in fp32), costed on
the measured chip, and timed: `jax.jit(block)` on XLA's CPU backend, the median of five
calls after a warm-up. The sequence is short (T = 8) so that the batch carries the block
from the memory slope to the compute roof. Every FLOP here grows with B, so the share of
vector work, and with it the block's roof, is the same at every batch."""),
    ("code", r'''import statistics
import time

import numpy

imported32 = symroof.from_jax(block, SHAPES.replace("bf16", "fp32"))
here = imported32.model(machine).analysis
step = jax.jit(block)
random = numpy.random.default_rng(0)
timed = []
print(f"{'sizes':38} {'FLOPs':>10} {'bytes':>10} {'intensity':>9}")
for b in (1, 4, 16, 64):
    sizes = {"B": b, "T": 8, "D": 1024, "N": 16, "H": 64, "F": 2816}
    args = [jnp.asarray(random.standard_normal([sizes[d] for d in arg.dims], dtype=numpy.float32))
            for arg in imported32.arguments]
    step(*args).block_until_ready()
    runs = []
    for _ in range(5):
        start = time.perf_counter()
        step(*args).block_until_ready()
        runs.append(time.perf_counter() - start)
    point = at(here, **sizes)
    timed.append((point, statistics.median(runs)))
    print(f"{', '.join(f'{k}={v}' for k, v in sizes.items()):38} {float(point.flops):10.3e} "
          f"{float(point.bytes):10.3e} {float(point.intensity):9.1f}")'''),
    ("code", r'''from matplotlib.figure import Figure

ax = Figure(figsize=(7, 4.5), dpi=110, layout="constrained").add_subplot()
for k, (point, seconds) in enumerate(timed):
    ax.scatter([float(point.intensity)], [float(point.flops) / seconds], marker="x", s=40, color=f"C{k}", zorder=4)
ax.scatter([], [], marker="x", color="black", label="crosses: measured (median)")
plot_roofline([point for point, _ in timed], ax=ax, labels=[f"block, B={int(p.values['B'])}" for p, _ in timed])
ax.set_title("The JAX block on this machine: jax.jit on XLA's CPU backend, fp32", fontsize=9)
show(ax)'''),
    ("md", """Read the block's crosses against the sweep's matmuls above. The distance from a cross
down from its marker is time the roofline does not account for: XLA's CPU kernels for
small matmuls, the dispatch of each call, vector work slower than the in-cache add rate.
A cross above its marker would mean XLA did less than symroof counts, most likely fewer
bytes: its compiled module fuses the elementwise chains that symroof costs one kernel at a
time, as the cross-check's compiled bytes show. From here, `symroof from-jax
MODULE:FUNCTION --shapes ... -o block.roof` writes the program to a file to edit, and
`symroof model block.roof --prefill` analyses the edited one."""),
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


NOTEBOOKS = {"01_rooflines.ipynb": ROOFLINES, "02_sharding.ipynb": SHARDING,
             "03_transformers.ipynb": TRANSFORMERS, "04_parallelism.ipynb": PARALLELISM,
             "05_from_jax.ipynb": FROM_JAX}


def pictures() -> None:
    """The README's pictures: the chapter's problem 3, and a roofline."""
    import numpy

    import symroof
    from symroof.render.plot import plot_roofline, plot_sweep, save
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


def main(names: list[str]) -> int:
    """Build and execute the notebooks named (all of them, and the README's pictures, by default)."""
    unknown = [name for name in names if name not in NOTEBOOKS]
    if unknown:
        print(f"unknown notebook {', '.join(unknown)} (known: {', '.join(NOTEBOOKS)})", file=sys.stderr)
        return 2
    if not names:
        pictures()
    for name in names or NOTEBOOKS:
        cells = NOTEBOOKS[name]
        book = build(name, cells)
        seconds = execute(book)
        nbformat.write(book, HERE / name)
        print(f"{name}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
