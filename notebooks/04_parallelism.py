# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Training on a slice: LLaMA-3 70B on TPU v5p, with symroof
#
# The third notebook costed the model as if one ideal chip held it all. Here it is trained on
# a real slice: 256 TPU v5p chips, a global batch of 2^20 (about 1M) tokens, sequences of
# 4096. symroof's planner tries every way to split the chips among data parallelism (dp),
# fully sharded data parallelism (fsdp: ZeRO-3, each weight split along D and gathered
# before use) and tensor parallelism (tp: Megatron's split of the heads and the MLP width),
# sets aside those that cannot work, writes each of the others out as a sharded program,
# forward and backward, and costs it. Every number below is derived; the inputs are the
# model, the chip, the chip count and the batch.
#
# Conventions: a FLOP is one multiply or one add; training is the forward pass plus a
# written-out backward pass (3x the forward's FLOPs: the model FLOPs) and, under full
# rematerialisation (the default, used throughout), each layer's forward again in the
# backward, its collectives included (about 4x: the hardware FLOPs, which the step's time
# counts); GB = 1e9 bytes; peaks are dense
# bf16. `t_step` is the roofline's step, max(T_math, T_HBM, T_network), every collective
# overlapped with compute. `t_step_exposed` is the same with the collectives on activations
# (tp's AllReduces, which the very next statement needs) waiting on the critical path;
# those on weights and gradients (FSDP's gathers, the gradients' reductions) can be
# prefetched or deferred, and stay overlapped. The planner ranks by `t_step_exposed`.

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
# ## The plan on 256 chips
#
# The candidates are the factorizations 256 = dp x fsdp x tp. Arithmetic on the model's
# figures sets some aside before any is costed (tp must divide the KV heads, the MLP width
# and the vocabulary; dp x fsdp must divide the 256 sequences; the parameters with their
# gradients and Adam state, 16 bytes each, over fsdp x tp must fit in a chip's usable HBM);
# the rest are costed whole, and those whose memory per chip then overflows are set aside
# too. The best eight, and why the first wins:

# %%
import re

from symroof.models import planner, strategy_costs

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
print(planner.why(p))

# %% [markdown]
# The ones set aside, by reason (numbers replaced by #):

# %%
set_aside = {}
for c in p.candidates:
    if c.rejected:
        set_aside.setdefault(re.sub(r"\d+(\.\d+)?", "#", c.rejected), []).append(c.text)
for reason, strategies in set_aside.items():
    print(f"{len(strategies):3} {reason}")
    print(f"      {', '.join(strategies[:4])}{', ...' if len(strategies) > 4 else ''}")

# %% [markdown]
# Several strategies tie at the compute roof: once every collective hides under the
# math, the step is the FLOPs over 256 chips whatever the split. The ties go to the one with
# the least network time, then the least memory: pure FSDP over all 256 chips. Strategies
# with tp are compute-bound in `t_step` too, but their AllReduces on activations are exposed,
# so they rank below.
#
# ## What the winner communicates
#
# Every weight is stored split along D over the 256 chips. Each layer gathers its weights
# before the forward uses them, gathers them again for the backward, and reduce-scatters
# their gradients back to the shards; nothing on activations moves. The step's collectives,
# grouped by pass, kind and axis (counts are per step, over the 80 layers and the
# embeddings):

# %%
best = p.ranked[0]
m = best.model
groups = {}
for c in strategy_costs.collectives(m):
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
split = strategy_costs.times(m)
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
          f"(T_math / T_network over {entry['axes']} = {float(entry['ratio']):.2f})")

# %% [markdown]
# ## The FSDP threshold
#
# FSDP's collectives move the weights, whose size does not depend on the batch, while the
# FLOPs grow with it: there is a batch above which the math outlasts the gathers. Per chip,
# a step moves about 3 x 2 bytes per parameter (two AllGathers and a ReduceScatter of bf16
# weights) and does a little over 6 FLOPs per parameter per token it holds (8 with each
# layer's forward recomputed), so the book's rule of thumb is: compute-bound once the tokens
# per chip exceed C / W_ici (about 3/4 of it with full rematerialisation), the chip's peak over
# the bandwidth a chip receives at along the axis. An axis of 256 on a v5p is laid on two of
# the torus's physical axes, 16 x 16, each a ring a chip receives on both ways at 2 x 9e10:
# 4.59e14 / (2 x 1.8e11) = 1275 tokens; here 4096 tokens a chip clear the exact threshold above.
#
# On a symbolic chip (every figure a symbol: C the matrix peak, C_vec the vector unit's,
# W_ici the link) the same analysis gives the rule as a formula. symroof's symbolic axis is
# a line, each chip taking in (N - 1)/N of the array one way at W_ici; the v5p's 16 x 16
# rings together give 2 x 2 x 9e10 = 3.6e11, so put that in for W_ici (the (N - 1)/N =
# 255/256 is the small difference left).

# %%
import sympy

from symroof.hardware.machines import figure_symbol
from symroof.hardware.topology import lay_out
from symroof.ir import MeshAxis

C, W_ici, C_vec = (figure_symbol(f) for f in ("peak", "ici_bw", "vector"))
sym = symroof.model(NAME, "train", chip="symbolic", sizes={"B": SEQUENCES, "T": CONTEXT}, strategy=best.text)
rule = strategy_costs.thresholds(sym, dict(sym.options.strategy))["fsdp"]["per_chip_tokens"]
print("per-chip tokens >", rule)
r = sympy.Symbol("r", positive=True)               # C / C_vec
share = sympy.simplify((rule * W_ici / C).subs(C_vec, C / r))
lead = share.subs(r, 0)
vector = sympy.simplify((lead / share - 1) / r)
print(f"               = {float(lead):.4f} x (C / W_ici) / (1 + {float(vector):.3e} x C / C_vec)")

chip = symroof.get_chip(CHIP)
rings = lay_out([MeshAxis("Z", 256)], chip)["Z"]  # the physical axes an axis of 256 spans
v5p = {C: chip.figure("peak_flops_per_s.bf16"), C_vec: chip.figure("vector_flops_per_s.fp32"),
       W_ici: len(rings) * chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")}
print(f"v5p: C / W_ici = {float((C / W_ici).subs(v5p)):.0f}, C / C_vec = {float((C / C_vec).subs(v5p)):.1f}: "
      f"per-chip tokens > {float(rule.subs(v5p)):.0f} (on the v5p's {' x '.join(map(str, rings))} rings: "
      f"{float(best.thresholds['fsdp']['per_chip_tokens']):.0f})")

# %% [markdown]
# The leading factor is about 0.7: full rematerialisation runs each layer's forward
# again, 8 FLOPs per parameter per token rather than 6 (a factor 3/4), at T = 4096 attention
# adds FLOPs per token beyond those, flash attention's recomputed scores among them, and the
# input embedding, a gather, adds none but still moves. The
# vector unit's work (norms, SiLU, residuals, at C_vec, about 33 times slower than the
# matrix unit) lengthens T_math a little more, and lowers the threshold with it.
#
# ## The tensor-parallel ratio
#
# Tensor parallelism's collectives move activations, B x T x D per layer, which grow with the
# batch exactly as the FLOPs do: the batch does not decide it. (tp runs with Megatron's
# sequence parallelism by default: the norms and residuals split along the sequence, an
# AllGather before the column-parallel matmuls and a ReduceScatter after the row-parallel
# ones, the bytes of the AllReduce each pair replaces; `tp-nosp` runs the AllReduces.) What
# does decide it is the model's width over the axis, so symroof gives tp a ratio, T_math /
# T_network over tp's axis (above 1: compute-bound), and it falls as 1/tp. For a Megatron MLP
# alone a hand estimate is 1.5 x F / tp / (C / W_ici); with the attention sublayer (fewer FLOPs
# per collective) and the backward pass (3x the FLOPs; with sequence parallelism it gathers
# each column-parallel input again for its weights' gradient, and the forward recomputed
# repeats the forward's collectives) the whole layer lands under it. The
# ratio staying above 1 does not make tp free: its AllReduces sit on the critical path.

# %%
F = symroof.model(NAME).at(symroof.dim_symbol("F"))
one_ring = {**v5p, W_ici: chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")}  # tp's axis: one ring
print(f"1.5 x F / (C / W_ici) = 1.5 x {F} / {float((C / W_ici).subs(one_ring)):.0f} = "
      f"{float(1.5 * F / (C / W_ici).subs(one_ring)):.1f}")
print()
print(f"{'strategy':14} {'tp ratio':>9} {'x tp':>6} {'t_step':>9} {'t_step_exposed':>15} {'HBM/chip':>9}")
for tp in (2, 4, 8):
    run = symroof.model(NAME, "train", chip=CHIP, sizes={"B": SEQUENCES, "T": CONTEXT},
                        strategy=f"fsdp={256 // tp},tp={tp}")
    ratio = strategy_costs.thresholds(run, dict(run.options.strategy))["tp"]["ratio"]
    print(f"fsdp={256 // tp},tp={tp:<3} {float(ratio):9.2f} {float(ratio * tp):6.1f} {float(run.t_step):7.3f} s "
          f"{float(strategy_costs.times(run)['t_step_exposed']):13.3f} s {float(run.hbm_per_chip) / 1e9:6.1f} GB")

# %% [markdown]
# tp past 8 copies the KV heads: this model has 8, so at tp=16 each lives on 2 chips (its
# projections computed on both, its gradients summed over the pair), as Megatron and vLLM do.
# symroof costs it (`--strategy tp=16`) and the planner considers it; here FSDP wins.
#
# ## Step time against chips
#
# The same global batch, 1M tokens, on 64 to 512 chips, each time the planner's best. Up to
# 256 chips the batch's 256 sequences split over the chips by FSDP alone, and the step stays
# at the compute roof: the time halves with each doubling. Past 256 there are more chips than
# sequences, so the planner must split a sequence or the model: at 512 it splits each
# sequence in two (sp=2, the keys and values gathered before attention, a small exposed
# cost), and each chip holds fewer tokens: tokens per second per chip falls. (The planner
# considers pipelines too, but here their bubble sets them back. At 1024 chips it adds tp=2;
# that plan costs about 300 strategies, a couple of minutes, so it is left out here:
# `symroof plan llama-3-70b --chip tpu-v5p --chips 1024 --batch 1M --train`.)

# %%
CHIPS = [64, 128, 256, 512]
plans = [planner.plan(NAME, CHIP, n, TOKENS, "train", context=CONTEXT) for n in CHIPS]
print(f"{'chips':>5}  {'best':16} {'t_step':>9} {'t_step_exposed':>15} {'tokens/s/chip':>14} {'HBM/chip':>9}  bound")
for n, q in zip(CHIPS, plans):
    f = q.ranked[0].figures
    per_chip = float(f["tokens"] / f["t_step_exposed"]) / n
    print(f"{n:5}  {q.ranked[0].text:16} {float(f['t_step']):7.3f} s {float(f['t_step_exposed']):13.3f} s "
          f"{per_chip:14.1f} {float(f['memory_per_chip']) / 1e9:6.1f} GB  {f['bound']}")

# %%
from matplotlib.figure import Figure

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
show(left)

# %% [markdown]
# ## Pipelines: the bubble and the microbatches
#
# A pipeline splits the 80 layers into stages (`pp=8`: 10 layers a stage) and the batch into
# microbatches that pass from stage to stage. Each stage waits for the first microbatch to
# reach it and idles again while the last drains: (P - 1) slots of a microbatch's work out
# of M + P - 1, the bubble. symroof writes the first and the last stage as programs of their
# own, costs each for one microbatch, forward and backward, and lets the schedule put them
# together. More microbatches shrink the bubble; 1F1B keeps fewer of them in memory than
# GPipe (P in flight on the first stage, not M); interleaving two layer chunks a chip halves
# the bubble again, at the cost of more activations in flight and twice the sends.

# %%
print(f"{'schedule':12} {'M':>3} {'bubble':>7} {'t_step':>9} {'t_step_exposed':>15} {'HBM/chip':>9}")
for schedule in ("gpipe", "1f1b", "interleaved"):
    for M in (8, 16, 32):
        run = symroof.model(NAME, "train", chip=CHIP, sizes={"B": SEQUENCES, "T": CONTEXT},
                            strategy="fsdp=8,pp=8,tp=4", microbatches=M, schedule=schedule)
        f = strategy_costs.report(run)
        print(f"{schedule:12} {M:3} {float(f['bubble_fraction']):7.1%} {float(run.t_step):7.3f} s "
              f"{float(f['t_step_exposed']):13.3f} s {float(run.hbm_per_chip) / 1e9:6.1f} GB")
pp = strategy_costs.thresholds(run, dict(run.options.strategy))["pp"]
print("microbatches for a bubble under 10% and 5% (interleaved, 2 chunks):", pp["microbatches_for_bubble"])

# %% [markdown]
# Against the planner's best on the same 256 chips (FSDP alone, about 4.1 s), even 32
# microbatches leave this pipeline slower: a batch of 256 sequences is not large enough to
# hide the bubble of 8 stages. Pipelines pay where the weights do not fit otherwise, or where
# the only links left between groups of chips are slow ones (a pipeline sends one
# microbatch's activations between neighbours, where FSDP gathers every weight over all
# chips).

# %% [markdown]
# ## A mixture of experts: expert parallelism
#
# Mixtral 8x7B routes each token to 2 of its 8 experts. `ep=8` puts one expert on each of 8
# H100s and splits the batch over them too; each layer then sends every token to its
# experts' chips and back (two AllToAlls, written into the program), while the attention
# and the router are copied on every chip. Serving 64 sequences at a 4096-token context,
# a decode step mostly reads weights, so what matters is how many bytes of them each chip
# holds: tensor parallelism splits every weight, expert parallelism only the experts'.

# %%
print(f"{'strategy':10} {'HBM/chip':>9} {'t_step':>9} {'exposed':>9} {'AllToAll':>9}")
for strategy in ("tp=8", "ep=8", "tp=2,ep=4", "tp=4,ep=2"):
    run = symroof.model("mixtral-8x7b", "decode", chip="h100", sizes={"B": 64, "S": 4096}, strategy=strategy)
    f = strategy_costs.report(run)
    exchange = sum(float(c.time) for c in f["collectives"] if c.kind == "AllToAll")
    print(f"{strategy:10} {float(run.hbm_per_chip) / 1e9:6.1f} GB {float(run.t_step) * 1e3:6.2f} ms "
          f"{float(f['t_step_exposed']) * 1e3:6.2f} ms {exchange * 1e6:6.1f} us")

# %% [markdown]
# Here tensor parallelism wins: every chip reads an eighth of every weight, where under
# `ep=8` each also reads the whole attention. The AllToAlls themselves are small at 64
# sequences (a few tokens a chip). Expert parallelism pays where the experts' weights dominate
# and the batch is large enough that the experts' matmuls, not the weight reads, set the
# time (training, or prefill); `symroof plan mixtral-8x7b` weighs it against the rest.
