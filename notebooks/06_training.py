# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Training: the book's strategy formulas, derived
#
# How To Scale Your Model's training chapter (part 5) works out, for one layer, when each way
# of splitting training over chips keeps the chips computing rather than waiting on the
# network: data parallelism (DP), fully sharded data parallelism (FSDP), tensor parallelism
# (TP) and FSDP with TP. Its layer is an MLP alone, `In[B, D] @ W_in[D, F] @ W_out[F, D]` in
# bf16, B the batch in tokens. This notebook has symroof derive each result: the layer is
# built as a program, sharded by each strategy on a mesh whose sizes are symbols (X, Y), its
# backward pass written out, its collectives found and costed on a chip whose peak C and
# link bandwidth are symbols, and the inequality T_math > T_comms solved. Nothing of the
# book's answers is typed in.
#
# Conventions, each where it changes a number:
#
# * **Bandwidth.** symroof's `W_ici` is one direction of one link, as the chip files give it;
#   the book's W_ici is bidirectional. Below, `W_bidi` = 2 W_ici is the book's, and
#   alpha = C / W_bidi (2550 on TPU v5p: 4.59e14 / 1.8e11).
# * **Torus axes.** A mesh axis laid over n of the torus's axes, each a ring with wraparound,
#   runs its collectives over the n rings at once: an AllGather of V bytes takes
#   V / (n W_bidi). The book's n_axes, M_X and M_Y count them.
# * **Per pass** (the book's) compares each pass's collectives with that pass's compute; DP's
#   gradient AllReduce overlaps only the backward. **Whole step** (what `symroof plan` ranks
#   by) lets a step's collectives overlap all of its compute, forward and backward.
# * A FLOP is one multiply or one add; an AllReduce costs two AllGathers.

# %%
import sympy
from IPython.display import Image, display

import symroof
from symroof.models import derive

B, D, F, X, Y, N = (symroof.dim_symbol(n) for n in "BDFXYN")
alpha = derive.ALPHA


def show(figure):
    """Display a figure as a PNG (drawn on a Figure of its own, not pyplot's)."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    display(Image(buffer.getvalue()))


# %% [markdown]
# ## The layer, and what the engine writes for it
#
# The layer as a program, then data parallelism's backward pass as `backward.py` writes it:
# each weight's gradient contracts away the batch, which is split over X, so each chip holds
# a partial sum that the sharding engine all-reduces.

# %%
from symroof.models.backward import backward
from symroof.models.strategies import subscripted

layer = derive.book_layer()
print(layer)
dp = {"dp": (("X", 0, "ici"),)}
print(backward(subscripted(layer, dp), dp))

# %% [markdown]
# ## Data parallelism
#
# Costed per pass, over X chips on three torus axes (a v5p slice's X, Y and Z). The forward
# has no collectives; the backward runs four matmuls (8BDF/X FLOPs per chip) and the two
# AllReduces of the gradients (2DF bytes each). The book's condition comes out of the
# backward: B/X > alpha/3, about 850 tokens per chip on v5p.

# %%
dp3 = derive.strategy_formulas(kinds=("dp",), n_axes={"dp": 3})["dp"]
display(dp3)
print("per pass (backward):", dp3.per_pass.book()["condition"])
print("whole step:         ", dp3.step.book()["condition"])

# %% [markdown]
# The whole-step convention overlaps the AllReduces with the forward's compute too (12BDF/X
# against 8DF/(3 W_bidi)), which lets data parallelism go down to 2/3 of the book's batch.
# On TPU v5p, with the chip file's figures:

# %%
v5p = derive.strategy_formulas("tpu-v5p", kinds=("dp",), n_axes={"dp": 3})["dp"]
print("alpha =", v5p.values[alpha], "(C / W_bidi from the chip file)")
print("per pass:  ", v5p.numbers(v5p.per_pass.condition))
print("whole step:", sympy.N(v5p.numbers(v5p.step.condition), 6))

# %% [markdown]
# ## FSDP
#
# Each weight is split along D over X and gathered before each use, in the forward and again
# in the backward, where its gradient is reduce-scattered back. Forward: two AllGathers of
# 2DF bytes against 4BDF/X FLOPs, the book's B/X > alpha/n_axes once more.

# %%
for n in (1, 3):
    f = derive.strategy_formulas(kinds=("fsdp",), n_axes={"fsdp": n})["fsdp"]
    print(f"{n} torus axes: forward {f.forward.book()['condition']};  backward {f.backward.book()['condition']}")
    for note in f.notes:
        print("  note:", note)

# %% [markdown]
# Over one axis the backward gives the same condition (4 collectives of 2DF bytes against 8
# matmuls). Over several, the engine reduce-scatters each gradient over one axis after
# another, where its AllGathers, and a `ReduceScatter_{XPQ,D}` written out, run over all the
# rings at once, so no formula in X alone comes out: the note above says so rather than
# hide it. The book's FSDP condition is the forward's, which is derived for every n.
#
# ## Tensor parallelism
#
# The MLP width F split over Y: the second matmul's output holds partial sums, all-reduced
# (the book writes an AllGather of the input and a ReduceScatter of the output: the same 2BD
# bytes each). The condition is a bound on Y, not on the batch: Y < n_axes F / alpha.

# %%
tp = derive.strategy_formulas("tpu-v5p", "llama-3-70b", kinds=("tp",), n_axes={"tp": 3})["tp"]
display(tp)
print("per pass:", tp.per_pass.book()["condition"], "  LLaMA-3 70B (F = 28672) on v5p:",
      sympy.N(tp.numbers(tp.per_pass.condition), 6))

# %% [markdown]
# ## FSDP with tensor parallelism, and the best split
#
# N = X Y chips, FSDP over X (on M_X torus axes) and TP over Y (on M_Y). The engine's
# forward pass, with M_X = 2 and M_Y = 1 as on a 4x4x4 slice with X = 16, Y = 4:

# %%
mixed = derive.strategy_formulas(kinds=("fsdp+tp",), n_axes={"fsdp": 2, "tp": 1})["fsdp+tp"]
t_math, t_comms = mixed.forward.book()["t_math"], mixed.forward.book()["t_comms"]
print("T_math  =", t_math)
print("T_comms =", sympy.expand(t_comms))

# %% [markdown]
# With N fixed, Y = N / X. The TP collectives move activations, B/X rows per chip, and fall
# as X grows; the FSDP gathers move weights, F/Y = F X / N columns per chip, and grow with X.
# Setting the derivative of their sum in X to zero:

# %%
x = sympy.Symbol("x", positive=True)
along = sympy.expand(t_comms.subs(Y, N / X)).subs(X, x)
x_opt = sympy.solve(sympy.diff(along, x), x)[0]
display(sympy.Eq(sympy.Symbol("X_opt"), x_opt))
assert sympy.simplify(x_opt - derive.x_opt(2, 1)) == 0  # the module's own derivation agrees

# %% [markdown]
# The book writes X_opt = sqrt((B/F)(M_X/M_Y) N); here M_X/M_Y = 2. At the optimum, compute
# hides the collectives while B/N > 4 alpha^2 / (M_X M_Y F):

# %%
for m_x, m_y in ((1, 1), (2, 1), (1, 2)):
    f = derive.strategy_formulas(kinds=("fsdp+tp",), n_axes={"fsdp": m_x, "tp": m_y})["fsdp+tp"]
    print(f"M_X = {m_x}, M_Y = {m_y}:  X_opt = {derive.x_opt(m_x, m_y)},  {f.per_pass.book()['condition']}")
print("on v5p at F = 32768, M_X M_Y = 2:  B/N >", float((4 * alpha**2 / (2 * F)).subs({alpha: 2550, F: 32768})))

# %% [markdown]
# The book's worked case: N = 64 chips, B = 48,000 tokens, F = 32,768, M_X/M_Y = 2. The
# continuous optimum is sqrt(1.46 x 2 x 64) = 13.7 (the book rounds B/F to 1.5 and writes
# 13.9). The whole split is chosen by laying each divisor split on v5p's 4x4x4 slice and
# costing its collectives there, rings and all:

# %%
split = derive.optimal_split(64, 48000, 32768, chip="tpu-v5p", slice="4x4x4")
display(split)
print(split.how)
for x_, y_, t in split.candidates:
    print(f"  X = {x_:2}, Y = {y_:2}: T_comms = {float(t):9.6g} x 4D / W_bidi")

# %%
from matplotlib.figure import Figure

figure = Figure(figsize=(6, 3.2))
ax = figure.add_subplot()
xs = [c[0] for c in split.candidates]
ax.plot(xs, [float(c[2]) for c in split.candidates], "o-", label="each whole split, costed on the 4x4x4 slice")
ax.axvline(float(split.x_opt), color="grey", linestyle="--", label=f"X_opt = {float(split.x_opt):.1f}")
ax.set_xscale("log", base=2)
ax.set_xlabel("X (FSDP chips); Y = 64 / X")
ax.set_ylabel("T_comms (units of 4D / W_bidi)")
ax.legend(fontsize=8)
figure.tight_layout()
show(figure)

# %% [markdown]
# ## The largest batch that stays communication-bound
#
# The threshold's root, floored: at the root itself T_math equals T_comms. Per chip, on v5p:

# %%
print("dp over 3 axes:        B/X <=", derive.largest_comms_bound_batch("dp", "tpu-v5p", n_axes={"dp": 3}))
print("fsdp over 3 axes:      B/X <=", derive.largest_comms_bound_batch("fsdp", "tpu-v5p", n_axes={"fsdp": 3}))
print("fsdp+tp, LLaMA-3 70B:  B/N <=", derive.largest_comms_bound_batch(
    "fsdp+tp", "tpu-v5p", "llama-3-70b", n_axes={"fsdp": 2}))

# %% [markdown]
# ## How much of a step is attention
#
# The book: the attention scores' FLOPs (Q K^T and P V, 4 N H T per token) against the
# weight matmuls' grow as T; for multi-head attention with a gated MLP of F = 4D their ratio
# is T / (8D), so attention takes over past T = 8D. symroof takes LLaMA-3 70B's template,
# costs it with T a symbol, and sums its parts (its attention is grouped-query: 8 KV heads):

# %%
share = derive.attention_share("llama-3-70b")
T = symroof.dim_symbol("T")
print("scores / weight matmuls:", share["scores_to_matmuls"])
print("share of the step's FLOPs in the scores:", share["scores"])
for t in (4096, 32768, 131072):
    print(f"  T = {t:6}: scores {float(share['scores'].subs(T, t)):.1%}, "
          f"attention with its projections {float(share['attention'].subs(T, t)):.1%}")

# %%
figure = Figure(figsize=(6, 3.2))
ax = figure.add_subplot()
ts = [2**k for k in range(10, 20)]
ax.plot(ts, [float(share["scores"].subs(T, t)) for t in ts], "o-", label="the scores (Q K^T, softmax, P V)")
ax.plot(ts, [float(share["attention"].subs(T, t)) for t in ts], "s-", label="the attention part, projections too")
ax.set_xscale("log", base=2)
ax.set_xlabel("T (tokens per sequence)")
ax.set_ylabel("share of a training step's FLOPs")
ax.set_title("LLaMA-3 70B")
ax.legend(fontsize=8)
figure.tight_layout()
show(figure)

# %% [markdown]
# ## 6 N tokens
#
# The book counts a training step as 6 FLOPs per parameter per token. symroof counts the
# template's statements (the backward twice the forward); the difference is the attention
# scores and the softmax and norms. The book's question: LLaMA-3 70B on 15e12 tokens over
# 8960 v5p chips at 40% MFU, sequences of 4096, one per chip per step.

# %%
m = symroof.model("llama-3-70b", "train", chip="tpu-v5p", chips=8960, mfu=0.4, sizes={"B": 8960, "T": 4096})
tokens = 8960 * 4096
peak = symroof.get_chip("tpu-v5p").peak_flops("bf16")
print("parameters:", m.params)
print("FLOPs per token per parameter, counted:", float(m.flops_train / (m.params * tokens)))
print("days by 6 N tokens:    ", float(6 * m.params * 15e12 / (8960 * peak * 0.4) / 86400))
print("days by symroof's count:", float(m.days_to_train(15e12)))

# %% [markdown]
# The book asks it of a model known only by its parameter count, 70e9: `symroof.counted`
# takes the count alone (with any sizes known) and answers what follows from it, each row
# with its rule (6·N a token for training; the state's bytes a parameter). Its second
# question, from the same count: how many chips of 16 GB hold the weights and the Adam state
# (the book counts the whole HBM: `hbm_usable=1.0`; a v5e's 16 GiB is 17.2 GB, so the
# book's round 16e9 is given as an override)?

# %%
book = symroof.counted(70e9, "tpu-v5p", chips=8960, mfu=0.4)
print(f"days on 15e12 tokens: {float(book.budget(15e12)['days']):.2f}  (6 x 70e9 x 15e12 / (8960 x "
      f"{float(peak):.3g} x 0.4) / 86400 = {6 * 70e9 * 15e12 / (8960 * float(peak) * 0.4) / 86400:.2f})")
sixteen = symroof.get_chip("tpu-v5e").with_figures({"hbm_capacity_bytes": 16e9})
state = symroof.counted(70e9, sixteen, hbm_usable=1.0)
print(f"weights + gradients + Adam: {float(state.memory_bytes) / 1e12:.2f} TB = 70e9 x "
      f"{float(state.memory_bytes) / 70e9:.0f} bytes; chips of 16 GB: {state.min_chips}")
