# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Sharded matmuls and collectives, with symroof
#
# A subscript names the mesh axes a dim is split over: `D_X` is D split over axis X.
# symroof finds what each chip does, which collectives the layout forces, and what they
# cost on the chip's links. Every number is derived; nothing is typed in.

# %%
import symroof

# %% [markdown]
# ## The four cases of a sharded matmul
#
# On a mesh of 4 x 2 TPU v5e chips, `B = 8192`, `D = 8192`, `F = 32768`:
#
# 1. nothing split along the contraction: no communication;
# 2. one side split along the contraction: AllGather it first;
# 3. both split alike along it: multiply the shards, then AllReduce the partial sums
#    (or ReduceScatter them where the result is split, or keep them with `{U_X}`);
# 4. both split over one axis on non-contracting dims: not valid as written.

# %%
sizes = dict(B=8192, D=8192, F=32768)
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
          f"{a.bound:8}  {moves or 'no collectives'}")

# %%
try:
    symroof.analyze("bf16[B_X, D] @ bf16[D, F_X] -> bf16[B, F]", chip="tpu-v5e", mesh="X=4, Y=2")
except symroof.SpecError as error:
    print(error)

# %% [markdown]
# ## Collectives and their costs
#
# Written out, each collective is costed on its axes' links: AllGather and ReduceScatter
# move V bytes per chip (V: the larger side's block), AllReduce twice that; an AllToAll
# moves each chip's block V, a quarter of an AllGather of the whole array (16 V on X).
# An axis of 16 closes the v5e's ring (both directions of each link); shorter
# axes do not. Small arrays are latency-bound (about 1 us per hop).

# %%
program = """mesh X=16, Y=4
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
              f"{float(t.total) * 1e6:10.2f} us  ({kind}-bound; {t.links})")

# %% [markdown]
# ## Two strategies on one mesh
#
# A layer `A[B, D] @ W[D, F]` on 16 TPU v5e chips (axis X), each chip to do a 16th of the
# work. Either split the batch and gather the weights: `W` is stored split along D, each
# chip AllGathers it and multiplies its own rows of `A` (the weights move: 2DF bytes). Or
# split the contraction: each chip multiplies its D-slice of `A` by its D-slice of `W` and
# the partial sums are AllReduced (the result moves: 2BF bytes, twice for an AllReduce).
# The compute is the same; the traffic is not, and which is cheaper depends on B against D:
# the crossover is at B = D/2.

# %%
gather_weights = """mesh X=16
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
              f"   T_lower {float(a.t_lower) * 1e6:8.1f} us   bound: {a.bound}")

# %% [markdown]
# At B = 256 moving the small result is 16 times cheaper than moving the weights; at
# B = 4096 = D/2 the two move the same bytes; at B = 65536 gathering the weights is the
# only one of the two that is compute-bound. Where each stops being network-bound, as
# symroof solves it:

# %%
for name, spec in [("AllGather W, multiply B_X", gather_weights), ("multiply D_X, AllReduce", reduce_result)]:
    print(name)
    print(symroof.analyze(spec, chip="tpu-v5e").threshold("B"))
    print()

# %% [markdown]
# Gathering the weights turns compute-bound once the batch is large enough. Splitting
# the contraction does not depend on B at all: its traffic grows with B as fast as its
# FLOPs do, so only D decides (each chip's slice of D must be long enough). The second
# strategy, as symroof lays it out per chip:

# %%
a = symroof.analyze(reduce_result, chip="tpu-v5e")
print(a)
print(a.threshold("D"))
