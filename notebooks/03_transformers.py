# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # A whole transformer: LLaMA-3 70B, with symroof
#
# The first two notebooks cost one contraction at a time. Here symroof costs a whole model:
# its configuration (`models.json`, with the source of every size) is written out as a
# program of statements, the layers as a `repeat L { ... }` block costed once and
# multiplied by L, and from that one analysis come the parameter count, FLOPs per token,
# the memory training needs, the KV cache and the time of a step. Every number below is
# derived; the only figures typed in are inputs (a token budget, a chip count, an MFU, a
# batch, a decode context).
# Conventions: a FLOP is one multiply or one add, GB = 1e9 bytes, peaks are dense bf16.

# %%
import io

from IPython.display import Image, display

import symroof


def show(ax):
    """Display a plot as a PNG (symroof draws on a Figure of its own, not pyplot's)."""
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png", dpi=110)
    display(Image(buffer.getvalue()))


# %% [markdown]
# ## The model, as symroof reads it
#
# The sizes are the published config's. The template below is the training program symroof
# costs (`symroof model llama-3-70b --print`): grouped-query attention (K KV heads, each
# shared by G query heads: N = K·G), a SwiGLU MLP, RMSNorm, untied input and output
# embeddings. `param` and `embedding` declare the weights; each statement is a step. Above
# it, the conventions every model quantity follows.

# %%
import sympy

from symroof.lang.structure import read_structured
from symroof.models.catalogue import get_model
from symroof.models.decls import Options
from symroof.models.report import conventions
from symroof.models.templates import program
from symroof.models.whole import Model
from symroof.show import human

NAME = "llama-3-70b"
config = get_model(NAME)
context = config["sizes"]["context"]
print(config["name"], config["sizes"])
print()
for convention in conventions(Options(mode="train")):  # a training step's, on one chip
    print("*", convention)
print()
print(program(config, "train"))

# %% [markdown]
# ## Parameters
#
# symroof counts the declared tensors: the repeated ones L times. The embeddings are the
# input table and the output projection (V x D each, untied); the published count is the
# sum of the tensors in Meta's checkpoint, read from `models.json`.

# %%
m = symroof.model(NAME)
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
          + f" x {str(m.at(d.count)):>2}  {int(m.at(d.count * d.elements)):>15,}")

# %% [markdown]
# The MLP's three D x F matrices hold most of each block; attention's Wq and Wo are
# D x N·H each, and grouped-query attention makes Wk and Wv K/N of Wq's size. The norms'
# scales are a rounding error. The shares of one block:

# %%
block = [d for d in m.structured.declared if d.block is not None]
for part, names in [("attention", {"Wq", "Wk", "Wv", "Wo"}), ("MLP", {"Wg", "Wu", "Wd"}), ("norms", {"Wn1", "Wn2"})]:
    count = sum(m.at(d.elements) for d in block if d.name in names)
    print(f"{part:9} {human(count):>8}  {float(count / m.params_per_block):7.3%} of a block")

# %% [markdown]
# ## Training FLOPs per token, in T
#
# Leave the sequence length T free and the FLOPs per token come out as a line in T. The
# named-model shortcut fills T with the model's context, so here the `Model` is built from
# the template directly, with B = 1 and no T. Training is 3x the forward (the backward
# does twice the forward's FLOPs).

# %%
T = symroof.dim_symbol("T")
free = Model(read_structured(program(config, "train")), None, {"B": 1})
print("forward FLOPs per token: ", free.flops_per_token)
print("training FLOPs per token:", free.flops_train_per_token)
six_n = 6 * free.params
print("6 N:                     ", six_n)
print("training - 6 N:          ", sympy.expand(free.flops_train_per_token - six_n))

# %% [markdown]
# Two things separate the count from 6N. The constant is a little *below* 6N: the input
# embedding is a gather, not a matmul, so its V x D parameters cost no FLOPs; what is left
# over is the vector unit's work (norms, SiLU, the gate product, residual adds). The term
# in T is attention: the scores and their product with V, 4·N·H FLOPs per token per position
# per layer forward, 12·L·N·H for training, plus softmax's 4 FLOPs per score. symroof counts
# the full T x S scores; a causal kernel that skips the masked half does about half of this
# term.

# %%
emb_table = next(d for d in m.structured.declared if d.name == "Emb")
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
    print(f"T = {t:>6}: {human(per_token, 'FLOPs')} per token, {float(per_token / six_n):.3f} x 6N")

# %% [markdown]
# ## Training on 15T tokens with 8960 TPU v5p
#
# The inputs: 15e12 tokens, 8960 chips, an MFU of 0.4, sequences of the model's context and
# a global batch of about 16M tokens (2^24, rounded to a whole number of sequences whose
# tokens split evenly over the chips: symroof refuses an uneven split). The step time at
# an MFU is the step's training FLOPs over chips x peak x MFU, and `days_to_train` is the
# token budget over tokens per second.

# %%
import math

TOKENS, CHIPS, MFU = 15e12, 8960, 0.4        # inputs
step = CHIPS // math.gcd(CHIPS, context)        # sequences whose tokens split evenly over the chips
batch = round(2**24 / context / step) * step    # sequences per step: ~16M tokens
run = symroof.model(NAME, chip="tpu-v5p", sizes={"B": batch, "T": context}, chips=CHIPS, mfu=MFU)
print(f"B = {batch} sequences of T = {context}: {human(run.tokens, 'tokens')} per step")
print(f"training FLOPs per step: {human(run.flops_train, 'FLOPs')}")
print(f"t_step = {human(run.t_step, 's')}, {human(run.tokens_per_s, 'tokens/s')}")
print(f"days to train on {human(TOKENS, 'tokens')}: {float(run.days_to_train(TOKENS)):.1f}")

# %% [markdown]
# The MFU is a fraction of the matrix unit's bf16 peak, as papers quote it
# (`run.matrix_peak`): a step takes its training FLOPs, the vector unit's small share
# included, over chips x that peak x MFU. The back-of-the-envelope uses 6N FLOPs per token
# instead; the two side by side, from the same counts:

# %%
print(f"the peak the MFU is a fraction of: {human(run.matrix_peak, 'FLOPs/s')}")
rate = CHIPS * run.matrix_peak * sympy.nsimplify(MFU)
for label, per_token in [("symroof's t_step", None), ("6N at the same rate", 6 * run.params)]:
    days = run.days_to_train(TOKENS) if per_token is None else sympy.Integer(TOKENS) * per_token / rate / 86400
    print(f"  {label:20} {float(days):6.1f} days")

# %% [markdown]
# ## Memory for training
#
# Per parameter: 2 bytes of bf16 weights, 2 of gradients and 12 of Adam state (an fp32
# master copy and two fp32 moments): 16 bytes, before a single activation. With
# full rematerialisation each block keeps only its input (B·T·D bf16 per layer), and the
# head, which is not recomputed, its input, its output and the logits. A chip's
# usable HBM is 0.9 of its capacity, and memory splits evenly over chips (an ideal
# sharding, no collectives); `min_chips` is the fewest chips that hold it all. First one
# sequence of 8192 tokens, then the 16M-token batch on the 8960-chip slice:

# %%
for chip_name in ("tpu-v5p", "h100"):
    one = symroof.model(NAME, chip=chip_name)
    chip = symroof.get_chip(chip_name)
    print(f"{chip.name} ({human(chip.figure('hbm_capacity_bytes'), 'bytes')} HBM), B = 1, T = {context}:")
    for q in ("weight_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes", "memory_bytes"):
        print(f"  {q:17} {human(getattr(one, q), 'bytes'):>10}")
    print(f"  min_chips         {str(one.min_chips):>10}")
    big = symroof.model(NAME, chip=chip_name, sizes={"B": batch, "T": context}, chips=CHIPS)
    print(f"  at B = {batch}: activations {human(big.activation_bytes, 'bytes')}, "
          f"min_chips {big.min_chips}; on {CHIPS} chips {human(big.hbm_per_chip, 'bytes')} per chip, "
          f"{human(big.hbm_left_per_chip, 'bytes')} left")

# %% [markdown]
# Without rematerialisation (every statement's output kept for the backward pass) the
# activations of a single sequence are many times larger; with it, the backward computes each
# layer's forward again. The model FLOPs (3x the forward, what an MFU counts) are the same
# under every policy; the hardware FLOPs (what the chips run, what an HFU counts) add what is
# recomputed, flash attention's scores included, and the step's time follows them:

# %%
for remat in ("full", "save=x,o,h", "none"):
    r = symroof.model(NAME, chip="h100", remat=remat)
    print(f"remat {remat:10}: activations {human(r.activation_bytes, 'bytes'):>9}, min_chips on H100 {r.min_chips}; "
          f"hardware / model FLOPs {float(r.flops_train_hardware / r.flops_train):.3f}, "
          f"t_step on one H100 {human(r.t_step, 's')}")

# %% [markdown]
# ## The KV cache
#
# In decode the model reads the keys and values of every earlier token: the decode template
# declares them as `cache Kc, Vc: bf16[B, S, K, H]` in each layer. Per token of context that
# is 2 (K and V) x K heads x H x 2 bytes x L layers; grouped-query attention (K KV heads
# for N query heads) makes it N/K times smaller than full multi-head attention would.

# %%
dec = symroof.model(NAME, "decode")
print(f"KV cache per token: {int(dec.kv_bytes_per_token):,} bytes ({human(dec.kv_bytes_per_token, 'bytes')})")
print(f"per sequence of S = {dec.sizes['S']} tokens: {int(dec.kv_bytes):,} bytes ({human(dec.kv_bytes, 'bytes')})")
print(f"sequences of full context whose cache equals the weights: {float(dec.weight_bytes / dec.kv_bytes):.1f}")

# %% [markdown]
# ## Decode: step time against batch
#
# One decode step makes one token for each of B sequences, each attending to S = 4096 cached
# tokens. The weights are read once per step whatever B is; each sequence adds its own KV
# cache reads and its share of FLOPs. On an H100, T_step is the roofline's lower bound,
# max(T_math, T_comms), as if one chip held it all (the weights alone do not fit in its
# HBM: `min_chips` says how many it takes; on n chips, ideally split, the times divide by
# n, tokens/s multiplies by n, and the batch where it turns compute-bound stays the same):

# %%
batches = [2**k for k in range(12)]
steps = [symroof.model(NAME, "decode", "h100", sizes={"B": b, "S": 4096}) for b in batches]
print("    B    T_step     T_math   tokens/s   bound   memory  min_chips")
for b, s in zip(batches, steps):
    print(f"{b:5} {human(s.t_step, 's'):>9} {human(s.analysis.t_math, 's'):>10} {float(s.tokens_per_s):10.0f}"
          f"   {str(s.analysis.bound):6} {human(s.memory_bytes, 'bytes'):>8} {str(s.min_chips):>6}")

# %%
from matplotlib.figure import Figure

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
show(left)

# %% [markdown]
# At small B the step is the time to read the weights, and throughput grows almost
# linearly with B for free. Once the sequences' caches outweigh the weights, the KV cache
# reads dominate the bytes, and they grow with B as the FLOPs do, so throughput flattens
# instead of reaching the compute roof.
#
# ## Where decode turns compute-bound
#
# `decode_batch` solves T_math(B) > T_comms(B) for B. With the KV cache's reads counted,
# attention's intensity is about N/K FLOPs per byte, far under the H100's critical
# intensity, and so are the FLOPs each added sequence brings per byte it adds: no batch
# is compute-bound. Leave the cache reads out (the weights alone, as the usual
# "critical batch" rule of thumb does) and the answer is a batch a little above the
# critical intensity:

# %%
at_4096 = symroof.model(NAME, "decode", "h100", sizes={"S": 4096})
print(f"H100 critical intensity: {float(symroof.get_chip('h100').critical_intensity()):.1f} FLOPs/byte")
one, two = steps[0].analysis, steps[1].analysis   # B = 1 and B = 2
print(f"FLOPs per byte of one more sequence: {float((two.flops - one.flops) / (two.bytes - one.bytes)):.1f}")
for with_kv in (True, False):
    region = at_4096.decode_batch(with_kv=with_kv)
    root = f"B > {float(region.root):.1f}" if region.root is not None else "no batch"
    print(f"KV reads {'counted' if with_kv else 'left out'}: {region.kind:5} -> {root}")
