# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # All About Rooflines, with symroof
#
# This notebook walks through the rooflines chapter of *How To Scale Your Model*. Every
# number below is derived by symroof from a spec and the chip figures in `hardware.json`;
# none is typed in. Conventions: a FLOP is one multiply or one add (a multiply-add is 2),
# peaks are dense, GB = 1e9 bytes.

# %%
import io

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
    display(Markdown(derivation(analysis, markdown=True, **options)))


# %% [markdown]
# ## Where the time goes
#
# An algorithm takes at least as long as its arithmetic (FLOPs over the chip's peak) and as
# its data movement (bytes over the bandwidth): a lower bound is the larger of the two, an
# upper bound their sum. A trillion FLOPs on an H100 (9.89e14 bf16 FLOPs/s) and on a TPU v6e
# (9.1e14 in the chapter's introduction):

# %%
for chip, variant in [("h100", None), ("tpu-v6e", "book-roofline-intro")]:
    t = symroof.roofline(flops=1e12, chip=chip, variant=variant).t_math
    print(f"{chip}: T_math = {float(t) * 1e3:.3f} ms")

# %% [markdown]
# ## The dot product
#
# A bf16 dot product reads two vectors of N elements, does N multiplies and N - 1 adds,
# and writes one element. Its intensity never gets past 1/2, far below any chip's critical
# intensity: it is memory-bound at every size.

# %%
dot = symroof.analyze("x • y: bf16[N], bf16[N] → bf16[1]", chip="tpu-v5e")
print("FLOPs (exact):", dot.flops_exact, "  bytes:", dot.bytes)
print("intensity:", dot.intensity_exact, " -> ", dot.limit("N"), "as N -> oo")
print(dot.threshold("N").reason)
tex(dot, limit=["N"])

# %% [markdown]
# Even on the TPU v5p's vector unit (about 7e12 FLOPs/s per core against 2.5e12
# bytes/s), whose critical intensity is under 3, the dot product stays memory-bound:

# %%
vpu = symroof.analyze("bf16[N] *_N bf16[N] -> bf16[1]", peak_flops=7e12, hbm_bw=2.5e12)
print("critical intensity:", float(vpu.critical_intensity), "  bound:", vpu.bound)

# %% [markdown]
# ## The roofline picture
#
# Achievable FLOPs/s against arithmetic intensity on the v5e: below the critical intensity
# (the ridge), time goes to moving bytes; above it, to arithmetic.

# %%
matmul = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
points = [symroof.analyze(matmul, chip="tpu-v5e").at(B=b, D=8192, F=8192) for b in (16, 128, 1024)]
points.append(symroof.analyze("bf16[N] *_N bf16[N] -> bf16[1]", chip="tpu-v5e").at(N=8192))
show(plot_roofline(points, labels=["matmul B=16", "matmul B=128", "matmul B=1024", "dot product"]))

# %% [markdown]
# ## The matmul and its critical batch
#
# A bf16 matmul loads 2BD + 2DF bytes, does 2BDF FLOPs and writes 2BF bytes. As D and F
# grow its intensity tends to B, so it is compute-bound on a v5e once B exceeds the
# chip's critical intensity. At finite D = F = 4096 the exact crossover comes later.

# %%
mm = symroof.analyze(matmul, chip="tpu-v5e")
print(mm.threshold("B"))
print()
print(mm.at(D=4096, F=4096).threshold("B"))
tex(mm, solve="B", limit=["D", "F"])

# %% [markdown]
# On GPUs the number is a little higher: an H100 at its dense 9.89e14 bf16 FLOPs/s
# and 3.35e12 bytes/s:

# %%
print(f"H100: B > {float(symroof.analyze(matmul, chip='h100').threshold('B').rule):.1f}")

# %% [markdown]
# ## Two chips: the network roofline
#
# Split D over two v5e chips. Each multiplies its halves (half the FLOPs) and holds partial
# sums of the whole B x F result, which the chips must AllReduce over their link. symroof
# inserts that AllReduce, costs it on the ICI link (an axis of 2 has no wraparound), and
# finds the threshold on D, not B, against the network.

# %%
two = symroof.analyze("mesh X=2\nbf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]", chip="tpu-v5e")
print("per chip FLOPs:", two.flops, "  T_math:", two.t_math, "  T_network:", two.t_network)
print("network intensity:", two.network_intensity, f"  critical: {float(two.critical_network_intensity):.1f}")
print(f"compute-bound against the network once D > {float(two.threshold('D').network.rule):.1f}")

# %% [markdown]
# On the roofline, each point sits twice: at its HBM intensity (circle) and at its network
# intensity (square), under the network roof of the link. D = 4096 is under the network's
# slope; D = 16384 is past the network's critical intensity.

# %%
show(plot_roofline([two.at(B=4096, D=d, F=4096) for d in (4096, 16384)],
                  labels=["2 chips, D = 4096", "2 chips, D = 16384"]))

# %% [markdown]
# ## Problem 1: an int8 matmul
#
# In int8 each element is one byte and the v5e does 3.94e14 int8 OPs/s; the chapter takes
# 8.1e11 bytes/s here (the `book-tpus-table` variant of the v5e's figures).

# %%
p1 = symroof.analyze("int8[B, D] *_D int8[D, F] -> int8[B, F]", chip="tpu-v5e", variant="book-tpus-table")
print("intensity:", p1.intensity, " -> ", p1.limit("D", "F"))
print(f"critical intensity: {float(p1.critical_intensity):.1f}   B > {float(p1.threshold('B').rule):.1f}")

# %% [markdown]
# ## Problem 2: int8 weights, bf16 activations and math
#
# The weights take half the bytes, the math runs at the bf16 rate: the intensity tends to
# 2B, so the critical batch halves.

# %%
p2 = symroof.analyze("bf16[B, D] * int8[D, F] -> bf16[B, F]", chip="tpu-v5e")
print("bytes:", p2.bytes, "  intensity -> ", p2.limit("D", "F"), f"  B > {float(p2.threshold('B').rule):.1f}")

# %% [markdown]
# ## Problem 3: achieved FLOPs/s against the batch
#
# For D = F = 4096 and D = F = 1024, with the exact byte counts: both reach the peak, the
# larger model at a smaller batch. The dashed lines are the exact thresholds.

# %%
big = symroof.analyze("bf16[B, D] * int8[D, F] -> bf16[B, F]", chip="tpu-v5e").at(D=4096, F=4096)
small = symroof.analyze("bf16[B, D] * int8[D, F] -> bf16[B, F]", chip="tpu-v5e").at(D=1024, F=1024)
show(plot_sweep([big, small], "B", np.arange(1, 513), labels=["D = F = 4096", "D = F = 1024"]))
print(f"exact thresholds: B > {float(big.threshold('B').exact):.1f} (D = F = 4096), "
      f"B > {float(small.threshold('B').exact):.1f} (D = F = 1024)")

# %% [markdown]
# ## Problem 4: a weight matrix per batch element
#
# With `int8[B, D, F]` weights the bytes grow with B as fast as the FLOPs: the intensity is
# about 2 whatever B is, and it never becomes compute-bound.

# %%
p4 = symroof.analyze("int8[B, D] *_D int8[B, D, F] -> int8[B, F]", chip="tpu-v5e")
print("intensity:", p4.intensity, " -> ", p4.limit("D", "F"))
print(p4.threshold("B").reason)

# %% [markdown]
# ## Problem 5: the H100's critical batch
#
# The H100 datasheet's tensor-core figures assume 2:4 sparsity; the dense bf16 rate is half
# (hardware.json keeps dense figures). The chapter rounds it to 1e15 (the `book-v1-problem5`
# variant); with the datasheet's 9.89e14 the answer moves a little.

# %%
for variant in ("book-v1-problem5", None):
    a = symroof.analyze(matmul, chip="h100", variant=variant)
    print(f"{variant or 'datasheet figures'}: peak {float(a.peak_flops):.3g} FLOPs/s, "
          f"B > {float(a.threshold('B').rule):.1f}")
