# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # From PyTorch to a roofline
#
# PyTorch's FLOP counters (`torch.utils.flop_counter.FlopCounterMode`, fvcore, calflops)
# answer one question: how many FLOPs at this one shape. This notebook takes a LLaMA-style
# decoder block written in plain PyTorch, exports it with its batch and sequence length
# symbolic (`torch.export.Dim`), and asks symroof for the formulas instead: FLOPs, bytes and
# intensity in B and T, where attention overtakes the MLP, and when the block turns
# compute-bound on an H100. Then it cross-checks the formulas against FlopCounterMode at
# concrete shapes and against a count by hand.
#
# Every number printed is derived by symroof or counted by torch, and each is asserted
# against a hand count in the cell that prints it.

# %%
import warnings

import sympy
import torch
import torch.nn.functional as F
from torch.export import Dim

import symroof

torch.manual_seed(0)
B, T = symroof.dim_symbol("B"), symroof.dim_symbol("T")

# %% [markdown]
# ## A decoder block in plain PyTorch
#
# RMSNorm, causal multi-head attention through `scaled_dot_product_attention`, a residual
# add, RMSNorm, a SwiGLU MLP, a residual add, in bf16: D = 256, 4 heads of 64, F = 688.
# Nothing in it knows about symroof.

# %%
D, HEADS, FF = 256, 4, 688


class RMSNorm(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(D), RMSNorm(D)
        self.qkv = torch.nn.Linear(D, 3 * D, bias=False)
        self.out = torch.nn.Linear(D, D, bias=False)
        self.gate = torch.nn.Linear(D, FF, bias=False)
        self.up = torch.nn.Linear(D, FF, bias=False)
        self.down = torch.nn.Linear(FF, D, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, t, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.out(a.transpose(1, 2).reshape(b, t, D))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


block = Block().to(torch.bfloat16).eval()
x = torch.randn(2, 16, D, dtype=torch.bfloat16)
with warnings.catch_warnings():
    warnings.simplefilter("error", symroof.SymroofWarning)   # every op costed, or this cell fails
    imported = symroof.from_torch(block, (x,), ({0: Dim("B"), 1: Dim("T", max=8192)},))
print(imported.text)

# %% [markdown]
# ## Its costs, as formulas
#
# The matrix-unit FLOPs hold the four projections, the three MLP products and attention's
# two; the vector unit the norms, the softmax, silu and the residual adds.

# %%
a = imported.analysis
matrix = sympy.expand(a.flops - a.flops_vector)
print("FLOPs         ", a.flops)
print("  matrix unit ", matrix)
print("bytes         ", a.bytes)
print("intensity     ", sympy.simplify(a.intensity))
# by hand: 2 FLOPs per weight per token (qkv, out, gate, up, down), and 2·D per query per key,
# twice (scores, then values), for every key: the causal mask does not halve the dense kernel's work
by_hand = 2 * B * T * (3 * D * D + D * D + 3 * D * FF) + 2 * 2 * D * B * T * T
assert sympy.expand(matrix - by_hand) == 0
params = imported.model(None, {"B": 1, "T": 1}).params
assert params == sum(p.numel() for p in block.parameters()) == 4 * D * D + 3 * D * FF + 2 * D
print("params        ", params)

# %% [markdown]
# ## Where attention overtakes the MLP
#
# The T² term is attention's; the linear terms the projections'. Setting attention's
# matrix FLOPs equal to the MLP's and solving for T gives the sequence length past which
# attention costs more, 3·F/2 here: a formula, not a measurement at one shape.

# %%
attention = 4 * D * B * T * T
mlp = sympy.expand(2 * B * T * 3 * D * FF)
assert sympy.expand(matrix - attention - mlp - 2 * B * T * 4 * D * D) == 0
(crossing,) = sympy.solve(sympy.Eq(attention, mlp), T)
print("attention's FLOPs exceed the MLP's once T >", crossing)
assert crossing == sympy.Rational(3 * FF, 2)

# the two terms per token, from the formulas, against T
import io

from IPython.display import Image, display
from matplotlib.figure import Figure

lengths = [2**k for k in range(6, 14)]
fig = Figure(figsize=(6, 3.5))
ax = fig.add_subplot()
for name, term in (("attention (scores, values)", attention), ("MLP (gate, up, down)", mlp),
                   ("projections (qkv, out)", 2 * B * T * 4 * D * D)):
    ax.plot(lengths, [float((term / (B * T)).subs(T, n)) for n in lengths], marker="o", label=name)
ax.axvline(float(crossing), color="grey", linestyle=":")
ax.set(xscale="log", yscale="log", xlabel="T (tokens)", ylabel="matrix FLOPs per token",
       title="Where attention overtakes the MLP: T = 3F/2")
ax.legend()
buffer = io.BytesIO()
fig.savefig(buffer, format="png", dpi=100, bbox_inches="tight")
display(Image(buffer.getvalue()))

# %% [markdown]
# ## On an H100
#
# With the chip's bf16 peak and HBM bandwidth, symroof times the block and says what bounds
# it, then solves for the batch at which it would turn compute-bound. It never does: run op
# by op, as the graph is written (no fusion), each norm, silu, product and residual add reads
# and writes B·T·D activations, so the bytes grow with the batch as fast as the FLOPs do,
# and the intensity levels off near 133 FLOPs/byte, under the H100's 250. Fusing them (as
# torch.compile would) is what the formulas say to do first.

# %%
for batch in (1, 64):
    at = imported.model("h100", {"B": batch, "T": 2048}).analysis
    print(f"B={batch:<3} T=2048: T_math {float(at.t_math) * 1e6:8.2f} us, T_comms {float(at.t_comms) * 1e6:8.2f} us, "
          f"{at.bound}-bound")
on_chip = imported.model("h100", {"T": 2048}).analysis
threshold = on_chip.threshold("B")
print(threshold)
assert "never compute-bound" in str(threshold)
# the ceiling by hand: at large B the weights' bytes vanish, leaving FLOPs per token over bytes per token
ceiling = sympy.limit(on_chip.intensity, B, sympy.oo)
per_token = sympy.limit(a.flops / a.bytes, B, sympy.oo).subs(T, 2048)
assert sympy.simplify(ceiling - per_token) == 0 and ceiling < 250

# %% [markdown]
# ## Cross-checked against torch's own count
#
# `flop_counter` runs the block under FlopCounterMode at the sizes given. FlopCounterMode
# counts the matrix ops only (2 per multiply-add) and nothing on the vector unit, so it is
# compared with symroof's matrix-unit FLOPs: at two shapes, the formula and torch agree to the FLOP.

# %%
for sizes in ({"B": 2, "T": 128}, {"B": 3, "T": 77}):
    check = imported.flop_counter(sizes)
    print(sizes, "symroof", check["symroof_matrix_flops"], "FlopCounterMode", check["flop_counter"],
          check["flop_counter_by_op"])
    assert check["flops_agree"]
    assert check["flop_counter"] == int(by_hand.subs({B: sizes["B"], T: sizes["T"]}))
