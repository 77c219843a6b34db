# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # From JAX to a roofline
#
# You have a model written in JAX and want its roofline: how many FLOPs and bytes a block
# costs, as formulas in its sizes, whether it is compute- or memory-bound on a chip, and
# whether those counts can be trusted. This notebook takes a pre-norm transformer block
# written in plain JAX, imports it with `symroof.from_jax`, reads its costs, edits the
# program it writes, checks the counts against XLA's cost analysis of the same function, and
# finally measures this machine and times the block on it.
#
# Every number printed comes from symroof, XLA or the stopwatch; what the stopwatch measures
# changes from run to run, so it appears only in the plots, never in the text.

# %%
import io

from IPython.display import Image, display

import symroof
from symroof.render.plot import plot_roofline


def show(ax):
    """Display a plot as a PNG (symroof draws on a Figure of its own, not pyplot's)."""
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=110)
    display(Image(buffer.getvalue()))


# %% [markdown]
# ## A block in plain JAX
#
# RMSNorm, multi-head attention with the scores and the softmax in fp32, a residual add,
# RMSNorm again, a SwiGLU MLP (silu), a residual add: LLaMA's block without the rotary
# embedding. Nothing in it knows about symroof. `from_jax` traces it with symbolic dims
# (`jax.export.symbolic_shape`): the shapes string names each parameter's dtype and dims.

# %%
import os

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
print(imported.text)

# %% [markdown]
# Each jaxpr equation that computes becomes one statement, with the primitive it came
# from as a comment. Broadcasts, transposes and constants write none (the header counts
# them): they change how an array is read, not its data. The keys' axis of the scores gets
# a name of its own, `T2 = T`, so that the scores' two axes can be told apart. `jnp.mean`
# is a sum in fp32 and a divide; `jax.nn.softmax` is a max over the keys (and one more
# against its initial value, -inf), a subtract, an exp, a sum and a divide; silu is a
# sigmoid and a multiply.
#
# What symroof cannot cost it names, with its count, in `warnings` and in the program's
# header, and leaves out of every figure; it never drops it silently:

# %%
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    sorted_scores = symroof.from_jax(lambda x: jnp.sort(x, axis=-1) * x, "x=fp32[B, T]")
print([str(w.message) for w in caught])
print(sorted_scores.text)

# %% [markdown]
# ## Its costs, as formulas
#
# `imported.analysis` analyses the program with every dim a symbol. FLOPs count a
# multiply-add as 2; transcendentals (exp, rsqrt, the sigmoid's exp) are counted apart, as
# XLA counts them; bytes are HBM bytes with each statement's inputs read once and its
# output written once: every statement is its own kernel, nothing is fused. The bytes that
# do not grow with the batch B are the weights and the norms' scales, read once.

# %%
import sympy

a = imported.analysis
B, T = sympy.symbols("B T", positive=True, integer=True)   # as symroof makes its dims
print("FLOPs          ", a.flops)
print("transcendentals", a.transcendentals)
print("bytes          ", a.bytes)
print("  of which read once, whatever B:", a.bytes.subs(B, 0))
print("intensity      ", a.intensity)

# %% [markdown]
# The intensity's limits say which part of the block sets it as a size grows. As the
# sequence grows, the T² terms take over: the scores [B, N, T, T2] in fp32, written and read
# back by each of the softmax's statements, against attention's FLOPs, which grow as T² too
# but only H-fold per score. As the batch grows, the weights' bytes are spread over more
# tokens and the intensity tends to a ratio per token. As the widths D and F grow together,
# the MLP's weights dominate both counts and the intensity tends to the tokens, B·T, as a
# matmul's tends to its batch.

# %%
for dims in (["T"], ["B"], ["D", "F"]):
    print(f"intensity as {', '.join(dims)} -> oo:", a.limit(*dims))

# %% [markdown]
# ## On an H100
#
# A chip turns the counts into times. The H100's matrix units run the contractions at the
# bf16 peak; its vector unit runs the rest (norms, softmax, silu, casts cost no FLOPs), and
# T_math is the sum of the two. (On a TPU v5e symroof refuses: `hardware.json` has no
# vector-unit figure for it, and symroof does not run vector work at the matrix peak.)
#
# The sizes are a LLaMA-2 7B layer's, read from `models.json`, at its full context. The
# analysis is symbolic; `at` gives it sizes (the alias T2 needs its size too, to place a
# point on a plot).

# %%
from symroof.models.catalogue import get_model

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
print("threshold on B:", h100.at(T2=LAYER["T"], **LAYER).threshold("B").reason)

# %% [markdown]
# Memory-bound at every batch, and the threshold says why: the intensity never gets near
# the critical intensity. The statements that move the most bytes at B = 1 are the ones on
# the fp32 scores: their scaling, the softmax's steps, the cast back to bf16:

# %%
one = at(h100, B=1, **LAYER)
for line in sorted(one.lines, key=lambda x: -float(x.bytes))[:6]:
    print(f"{float(line.bytes / one.bytes):6.1%}  {str(line.program).strip()}")

# %% [markdown]
# ## Fusing attention: edit the program
#
# The program is text: edit it. Flash attention keeps the scores on chip; in symroof that
# is a `fused { ... }` block around the statements from the scores' contraction to the
# values' contraction, whose intermediates then cost no HBM bytes. A fused block keeps a
# tensor on chip where the statement that reads it names it as the one that wrote it, and
# the import writes each array with the same labels wherever it is read: the probabilities
# are [B, N, T, T2] where the cast writes them and where the values' contraction reads them
# (it reads the values, v, as [B, T2, N, H] instead). Wrapping the statements in the block
# is the whole edit.

# %%
lines = imported.text.split("\n")
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
    print("on chip:", item)

# %% [markdown]
# Fused, the block is compute-bound from the first sequence, and the intensity now grows
# without bound in T. symroof checks what the block keeps on chip against the H100's L2 (each
# intermediate's size, once): the scores do not fit, so a kernel has to tile them, as flash
# attention does; the HBM bytes assume it does. On the roofline, the block as imported sits
# under the memory slope, and fused under the compute roof:

# %%
points = [at(h100, B=b, **LAYER) for b in (1, 16)] + [at(fused, B=b, **LAYER) for b in (1, 16)]
show(plot_roofline(points, labels=["as imported, B=1", "as imported, B=16", "attention fused, B=1",
                                   "attention fused, B=16"]))

# %% [markdown]
# ## Against symroof's own LLaMA-2 7B
#
# symroof ships a LLaMA-2 7B template (`symroof model llama-2-7b --print`). Its layer, costed
# per block, against the block written in JAX, at B = 1 and the full context: the FLOPs
# differ by a few terms in N and T, the JAX block's scaling of the scores by 1/sqrt(H) (one
# divide per score, which the template leaves out) and `jax.nn.softmax`'s extra max per row.
# The bytes differ because the template fuses its attention and writes each norm and
# activation as one op, where the JAX block's every primitive is a kernel of its own.

# %%
template = symroof.model("llama-2-7b", "prefill", "h100", {"B": 1, "T": None}).per_block()
ours = imported.analysis.at(B=1, **{k: v for k, v in LAYER.items() if k != "T"}).flops
print("FLOPs per block, template:", template["flops"])
print("FLOPs per block, imported:", ours)
print("imported - template:      ", sympy.factor(ours - template["flops"]))
print()
print(f"bytes per block at B=1, T={LAYER['T']}:")
print(f"  template         {float(template['bytes'].subs(T, LAYER['T'])):10.3e}")
for name, analysis in (("as imported", h100), ("attention fused", fused)):
    print(f"  {name:16} {float(at(analysis, B=1, **LAYER).bytes):10.3e}")

# %% [markdown]
# ## Against XLA
#
# At concrete sizes, `imported.xla(sizes)` (`symroof.from_jax.importer.cross_check`) lowers the same
# function with `jax.jit` and sets symroof's counts beside XLA's cost analysis of the lowered
# module (StableHLO as JAX emits it, unfused) and of the compiled one (after XLA's CPU
# passes). The FLOPs must agree with the lowered module's once the two conventions in which
# they differ are counted XLA's way, and the cross-check lists each difference with its
# reason. Two sizes, small enough to compile in a second:

# %%
SIZES = [{"B": 2, "T": 128, "D": 256, "N": 4, "H": 64, "F": 1024},
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
    print()

# %% [markdown]
# The FLOPs agree exactly once XLA's conventions are counted: XLA counts a convert
# (the casts to and from fp32 around the sums and the scores) as one FLOP per element, where
# symroof counts a cast as data movement only, and XLA counts a reduction over n terms as
# n - 1 combines per output, where symroof's `flops` counts n (its `flops_exact` counts n - 1).
# The transcendentals agree as they stand.
#
# The bytes are counted differently by design, and only one bound is asserted. symroof's are
# each statement's inputs read once and output written once; the lowered module's count
# every instruction's operands and result, broadcasts included, so they are larger. The
# compiled module's bytes are XLA's count after its CPU backend has fused the module, printed
# for reference: no bound is claimed for them (here they are above symroof's at the smaller
# size and below at the larger). Its FLOPs differ from the lowered module's too, by what
# XLA's passes rewrite; the cross-check explains the lowered figures only.

# %% [markdown]
# ## This machine, measured
#
# The chips above are datasheet figures. `symroof.calibrate` measures this machine instead:
# a matmul per dtype for the peak, streaming kernels on arrays far larger than the cache for
# the bandwidth, and in-cache adds for the vector rate, each the best of a few runs.
# `calibrate.entry` writes the result as a chip in `hardware.json`'s format; written to a
# file, `get_chip` reads it back like any other. `validate.run_sweep` then times fp32 ops
# across both regimes (matmuls from one row, memory-bound, to many, compute-bound; a dot
# product and elementwise ops on arrays beyond the cache) against the roofline of that chip.
# The quick modes take seconds. (`symroof calibrate` and `symroof validate` do the same from
# the command line.)

# %%
import tempfile

from symroof.hardware.chips import get_chip
from symroof.measure import calibrate, validate

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
      + (f"; skipped: {len(sweep.skipped)}" if sweep.skipped else ""))

# %% [markdown]
# The figures are in the plot, not in the text: they move from run to run on a shared
# machine. Each op sits where the roofline of this machine puts it (open markers, on the
# roof) and where the stopwatch put it (crosses: FLOPs over the median time). A cross under
# its marker is an op short of the roof. A cross clearly above its marker was measured faster
# than the roof allows, so a figure is wrong (`symroof validate` flags it): most often the
# calibration ran while another process held a core, which lowers every rate it measured.
# Calibrate on a quiet machine for figures to keep.

# %%
picture = os.path.join(os.path.dirname(hardware), "validate.png")
validate.plot(sweep, picture)
display(Image(filename=picture))

# %% [markdown]
# ## The block on this machine
#
# The same JAX block, imported in fp32 (this CPU's matmul peak is measured in fp32), costed on
# the measured chip, and timed: `jax.jit(block)` on XLA's CPU backend, the median of five
# calls after a warm-up. The sequence is short (T = 8) so that the batch carries the block
# from the memory slope to the compute roof. Every FLOP here grows with B, so the share of
# vector work, and with it the block's roof, is the same at every batch.

# %%
import statistics
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
          f"{float(point.bytes):10.3e} {float(point.intensity):9.1f}")

# %%
from matplotlib.figure import Figure

ax = Figure(figsize=(7, 4.5), dpi=110, layout="constrained").add_subplot()
for k, (point, seconds) in enumerate(timed):
    ax.scatter([float(point.intensity)], [float(point.flops) / seconds], marker="x", s=40, color=f"C{k}", zorder=4)
ax.scatter([], [], marker="x", color="black", label="crosses: measured (median)")
plot_roofline([point for point, _ in timed], ax=ax, labels=[f"block, B={int(p.values['B'])}" for p, _ in timed])
ax.set_title("The JAX block on this machine: jax.jit on XLA's CPU backend, fp32", fontsize=9)
show(ax)

# %% [markdown]
# Read the block's crosses against the sweep's matmuls above. The distance from a cross
# down from its marker is time the roofline does not account for: XLA's CPU kernels for
# small matmuls, the dispatch of each call, vector work slower than the in-cache add rate.
# A cross above its marker would mean XLA did less than symroof counts, most likely fewer
# bytes: its compiled module fuses the elementwise chains that symroof costs one kernel at a
# time, as the cross-check's compiled bytes show. From here, `symroof from-jax
# MODULE:FUNCTION --shapes ... -o block.roof` writes the program to a file to edit, and
# `symroof model block.roof --prefill` analyses the edited one.
