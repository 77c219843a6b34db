# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Inference: the book's serving questions, derived
#
# How To Scale Your Model's inference chapters (part 7, and part 8's LLaMA 3 on TPU v5e)
# ask what a request costs: a model's KV cache per token, the batch at which decode stops
# being bound by memory, how many caches fit beside the weights, a decode step's time, the
# queries a slice serves, what int8 buys, when tensor parallelism's communication shows.
# Here each question is put to symroof: the model is built as a program from its sizes, its
# prefill and decode steps costed on the chip file's TPU v5e, and each figure printed is
# the engine's. The book's answers appear only in this prose, beside the engine's, with the
# reason wherever the two differ. The cells check the engine's figures against counts
# written out by hand in them.
#
# Conventions, each where it changes a number:
#
# * **Bytes.** GB is 1e9 bytes. The chip file gives a v5e 16 GiB of HBM (17.18e9 bytes); the
#   book rounds it to 16e9. symroof lets the weights and caches fill 90% of it
#   (`hbm_usable`), the book all of it.
# * **Counts.** The template counts every parameter, norms included, and the untied
#   LLaMA models' two embedding tables; the book counts the matrices and rounds (70e9 for
#   LLaMA 3-70B's 70.55e9).
# * **Step time.** symroof's decode step is the roofline of the whole program: every
#   matmul and the attention's cache reads, each at max(FLOPs / peak, bytes / HBM
#   bandwidth), activations' reads and writes included, plus on a mesh its collectives.
#   The book's estimate is KV bytes / bandwidth + max(2 B params / peak, weight bytes /
#   bandwidth).
# * **Bandwidth.** The chip file's interconnect figure is one direction of one link.

# %%
import sympy
from IPython.display import Image, display

from symroof import serving
from symroof.hardware.chips import get_chip
from symroof.models import templates
from symroof.models.report import model, named

v5e = get_chip("tpu-v5e")
C, W_hbm, M_hbm = v5e.peak_flops("bf16"), v5e.hbm_bandwidth, v5e.figure("hbm_capacity_bytes")
print(f"TPU v5e: {float(C):.3g} bf16 FLOPs/s, {float(v5e.peak_flops('int8')):.3g} int8 OPs/s, "
      f"HBM {float(W_hbm):.3g} B/s, {float(M_hbm):.4g} bytes")


def allreduce_wait(name, strategy, mesh, dtype, batch):
    """What a request's step waits for tensor parallelism's AllReduces after its work (its
    t_step_exposed less the roofline's overlapped t_step; the step memory-bound, as here)."""
    m = model(name, "decode", "tpu-v5e", {"B": batch, "S": 8192}, strategy=strategy, mesh=mesh, weights=dtype, kv=dtype)
    return serving.step_time(m) - m.t_step


def ms(t):
    return f"{float(t) * 1e3:.2f} ms"


def show(figure):
    """Display a figure as a PNG (drawn on a Figure of its own, not pyplot's)."""
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110)
    display(Image(buffer.getvalue()))


def int8_weights(z, tied):
    """By hand, a LLaMA's int8 weights: each layer's matrices a byte a parameter and a bf16
    scale per output channel; the embedding, the LM head (unless tied) and the norms bf16."""
    L, D, F, N, K, H, V = (z[k] for k in "LDFNKHV")
    layers = L * (D * (N * H + 2 * K * H) + N * H * D + 3 * D * F)
    scales = 2 * L * (N * H + 2 * K * H + D + 2 * F + D)
    return layers + scales + 2 * V * D * (1 if tied else 2) + 2 * (2 * L * D + D)


# %% [markdown]
# ## The critical batch: when does a decode step's matmul stop waiting on HBM?
#
# A `bf16[B, D] @ W[D, F]` matmul does 2BDF FLOPs and reads the DF weights; with B small
# beside D and F, the weights' bytes are the memory time, so the step is compute-bound once
# 2BDF / C > DF bytes(W) / W_hbm. The chip file's ratio C / W_hbm, and the threshold the
# engine solves for on LLaMA 3-70B's decode step with the KV cache left out (its weights in
# bf16, then int8 with bf16 FLOPs):
#
# The book: 240 in bf16, 120 with int8 weights and bf16 FLOPs, 240 again with int8 FLOPs.
# The engine's thresholds are lower, 219 and 111, because it counts the attention's FLOPs
# at S = 8192 (4 S N H a token a layer, about 15% beside 2 x 70e9), which the book's matmul
# alone leaves out, and, pulling the other way, each token's activations' HBM traffic; the
# ratio C / W_hbm is the book's 240. symroof's int8 weights are weight-only quantization
# (the matmuls run in bf16), so the int8 x int8 case is the chip file's int8 ratio alone:
# 480 OPs a byte, over 2 OPs a one-byte weight, 240. Its int8 weights are not one byte a
# parameter: each layer's matrices carry a bf16 scale per output channel and the LM head
# stays bf16, 1.5% more bytes a step, which raise the int8 threshold by as much.

# %%
print(f"C / W_hbm = {float(v5e.critical_intensity('bf16')):.2f} FLOPs/byte (bf16), "
      f"{float(v5e.critical_intensity('int8')):.2f} (int8 OPs)")
b_crit = {}
for weights in ("bf16", "int8"):
    step = model("llama-3-70b", "decode", "tpu-v5e", {"S": 8192}, weights=weights)
    b_crit[weights] = step.decode_batch(with_kv=False).root
    print(f"LLaMA 3-70B decode, {weights} weights: compute-bound above B = {float(b_crit[weights]):.1f}")
# by hand: each weight matrix (all but the input embedding, a lookup) is read once and used
# for 2 FLOPs a token; attention adds 4 S N H FLOPs a token a layer (scores and mix) whose
# cache reads are left out here. The bytes read: bf16, 2 a parameter; int8, the layers'
# matrices a byte a parameter with their scales, the LM head and norms bf16 (int8_weights,
# less the input embedding), 1.5% over a byte a parameter, mostly the LM head's second byte
z = named("llama-3-70b")["sizes"]
matrices = step.params - z["V"] * z["D"]
read = {"bf16": 2 * matrices, "int8": int8_weights(z, tied=False) - 2 * z["V"] * z["D"]}
print(f"  int8 bytes read a step: {float(read['int8']) / 1e9:.2f}e9; "
      f"at a byte a parameter {float(matrices) / 1e9:.2f}e9")
for weights in ("bf16", "int8"):
    flops_per_token = 2 * matrices + 4 * 8192 * z["N"] * z["H"] * z["L"]
    hand = v5e.critical_intensity("bf16") * read[weights] / flops_per_token
    print(f"  by hand ({weights}): {float(hand):.1f}")
    # the engine also reads and writes each token's activations, bytes that grow with B: its
    # memory roof rises with the batch, so its threshold sits a little above the weights-only one
    assert 1 < b_crit[weights] / hand < 1.08, (weights, b_crit[weights], hand)
int8_int8 = v5e.critical_intensity("int8") * 1 / 2
print(f"int8 weights, int8 OPs (the chip's ratio, no model): B > {float(int8_int8):.1f}")
assert int8_int8 == v5e.peak_flops("int8") / W_hbm / 2


# %% [markdown]
# ## Part 7, question 1: the book's own model, its parameters and KV cache per token
#
# The chapter invents a model near LLaMA 2-13B: L = 64, D = 4096, F = 16384, N = 32 query
# heads, K = 8 KV heads of H = 256, V = 32128, input and output embeddings shared. Built by
# the same template as the catalogue's models (gated MLP, RMSNorm), from these sizes:
#
# The book: L D (3F + 2H(N + K)) + D V = 18.4e9 parameters. (The chapter does not print the
# KV cache per token; 2 L K H bf16 values is the count it teaches.)

# %%
book = {"id": "book-18b", "name": "the chapter's model",
        "sizes": {"D": 4096, "L": 64, "N": 32, "K": 8, "H": 256, "F": 16384, "V": 32128, "context": 8192},
        "mlp": "swiglu", "norm": "rmsnorm", "positions": "rope", "tied_embeddings": True, "bias": False}
book_decode = model(str(templates.program(book, "decode")), "decode", "tpu-v5e", {"B": 1, "S": 8192})
print(f"parameters {book_decode.params} ({float(book_decode.params) / 1e9:.2f}e9)")
print(f"KV cache per token {book_decode.kv_bytes_per_token} bytes in bf16")
L, D, F, N, K, H, V = (book["sizes"][k] for k in "LDFNKHV")
matrices = L * D * (3 * F + 2 * H * (N + K)) + D * V
norms = 2 * L * D + D  # two RMSNorm scales a layer and the final one: the template's, not the book's
assert book_decode.params == matrices + norms
assert book_decode.kv_bytes_per_token == 2 * L * K * H * 2  # keys and values, each K H a layer, 2 bytes


# %% [markdown]
# Part 7's question 3, the time to read every weight once from HBM on a 4x4 slice in int8
# (16 chips, each reading its sixteenth): the lower bound on a decode step while the batch
# is small. The chapter leaves it unanswered; the engine's weight bytes, in int8, over 16
# chips' bandwidth. Its int8 is not the book's one byte a parameter: each layer's matrices
# carry a 2-byte bf16 scale per output channel (weight-only int8 as TensorRT-LLM ships it,
# 6.8e6 bytes here), and the shared embedding stays bf16 (0.13e9 bytes more), so the read
# is 18.52e9 bytes against 18.39e9, 0.76% more; the hand count below writes each part.

# %%
book_int8 = model(str(templates.program(book, "decode", weights="int8")), "decode", "tpu-v5e", {"B": 1, "S": 8192})
load = book_int8.weight_bytes / (16 * W_hbm)
print(f"int8 weights {float(book_int8.weight_bytes) / 1e9:.2f} GB; read over 16 chips in {ms(load)}")
# by hand: each layer's matrices one byte a parameter plus a 2-byte bf16 scale per output
# channel (Q's N H, K's and V's K H each, O's D, gate's and up's F each, down's D); the
# shared embedding / LM head and the norms stay bf16
layer_matrices = L * D * (3 * F + 2 * H * (N + K))
scales = 2 * L * (N * H + 2 * K * H + D + 2 * F + D)
hand = layer_matrices + scales + 2 * D * V + 2 * norms
print(f"  by hand: {layer_matrices} + {scales} (scales) + {2 * D * V} (bf16 embedding) + {2 * norms} (norms) "
      f"= {hand}; the book's 1 byte a parameter: {matrices}, {float(hand / matrices - 1) * 100:.2f}% more")
assert book_int8.weight_bytes == hand, (book_int8.weight_bytes, hand)

# %% [markdown]
# ## LLaMA 2-13B's KV cache, and its decode step on 8 chips
#
# The chapter's example: LLaMA 2-13B (K = 40 KV heads, no grouping) at a context of 8192,
# in bf16, on 8 TPU v5e, the model split 8 ways by tensor parallelism (heads and the MLP's
# F), then the same model with 8 KV heads (5x smaller caches). (LLaMA 2 was trained to
# 4096 tokens; 8192 is the book's choice, kept here.)
#
# The book: 6.7 GB of cache a sequence; step times 4.98, 12.13, 20.30, 36.65, 69.33,
# 249.09 ms at B = 1, 8, 16, 32, 64, 240 (201 .. 964 tokens/s), out of memory past B = 16;
# with 8 KV heads 4.17 .. 52.99 ms (240 .. 4529 tokens/s), B = 64 fitting. The engine's
# steps are within about 1% of the book's for K = 40. Its largest batch is 14, not 16:
# it fills 90% of 8 x 16 GiB, and the book all of 8 x 16e9 bytes. With K = 8 its steps are
# shorter at small B (3.62 ms, not 4.17): the book keeps the parameter count at 13e9 while
# shrinking the cache, and the template, building the model with 8 KV heads, drops the
# 1.7e9 parameters of the K and V projections' other 32 heads. Each step is also checked,
# below, against the book's formula evaluated on the engine's own counts.

# %%
from symroof.models.strategies import parse_strategy

S = 8192
l13 = named("llama-2-13b")
gqa = dict(l13, id="llama-2-13b-k8", sizes=dict(l13["sizes"], K=8))
batches = (1, 8, 16, 32, 64, 240)
frontier = {}
for label, config in (("K = 40", l13), ("K = 8", gqa)):
    text = str(templates.program(config, "decode", strategy=parse_strategy("tp=8")))
    m1 = model(text, "decode", "tpu-v5e", {"B": 1, "S": S})
    per_seq = m1.kv_bytes_per_token * S
    print(f"{label}: KV cache {float(per_seq) / 1e9:.2f} GB a sequence at S = {S}; "
          f"the largest batch that fits: {m1.max_batch()}")
    z = config["sizes"]
    assert per_seq == 2 * z["L"] * z["K"] * z["H"] * 2 * S
    for b in batches:
        m = model(text, "decode", "tpu-v5e", {"B": b, "S": S})
        frontier.setdefault(label, []).append((b, m.t_step, b / m.t_step))
        # by hand, the book's estimate: the caches read at the bandwidth, plus the weights'
        # read or the MLP's FLOPs, whichever is longer, over 8 chips
        hand = (b * per_seq / (8 * W_hbm)
                + max(2 * b * m1.params / (8 * C), 2 * m1.params / (8 * W_hbm)))
        print(f"  B = {b:3}: step {ms(m.t_step)}  ({b / float(m.t_step):7.1f} tokens/s); "
              f"the book's formula on the engine's counts {ms(hand)}")
        assert 0.85 < m.t_step / hand < 1.15, (label, b, float(m.t_step), float(hand))


# %% [markdown]
# The same steps as the chapter's latency-throughput picture: each batch a point, its step
# time against its tokens a second a chip; the batches past what fits in memory are drawn
# hollow.

# %%
from matplotlib.figure import Figure

figure = Figure(figsize=(6, 3.6))
axes = figure.add_subplot()
for label, config in (("K = 40", l13), ("K = 8", gqa)):
    text = str(templates.program(config, "decode", strategy=parse_strategy("tp=8")))
    most = model(text, "decode", "tpu-v5e", {"B": 1, "S": S}).max_batch()
    points = frontier[label]
    line, = axes.plot([float(t) * 1e3 for _, t, _ in points], [float(r) / 8 for _, _, r in points], "-",
                      label=f"LLaMA 2-13B, {label}")
    for b, t, r in points:
        axes.plot(float(t) * 1e3, float(r) / 8, "o", color=line.get_color(),
                  fillstyle="full" if b <= most else "none")
        axes.annotate(f"B={b}", (float(t) * 1e3, float(r) / 8), fontsize=7, xytext=(3, -8),
                      textcoords="offset points")
axes.set_xscale("log")
axes.set_xlabel("decode step (ms), S = 8192, 8 x TPU v5e")
axes.set_ylabel("tokens/s a chip")
axes.legend()
figure.tight_layout()
show(figure)
print({label: [round(float(r) / 8, 1) for _, _, r in points] for label, points in frontier.items()})

# %% [markdown]
# ## Part 8: LLaMA 3-70B on TPU v5e
#
# ### Its KV cache per token, and a batch of 32 at 8192 tokens in int8
#
# The book: 2 K H L = 160 kB a token in int8 (it writes 160e3 and 162e3 for 163,840
# bytes); 41.9e9 bytes of cache for 32 sequences of 8192, plus 70e9 of weights, 112e9 in
# all, so at least 7 chips: a 4x2 slice, tight. The engine asks for 8 chips: 115.6e9 bytes
# over 90% of 16 GiB a chip is 7.5. Its int8 weights are 72.67e9 bytes, not the book's one
# byte a parameter (70.55e9, the published count): each layer's matrices are one byte a
# parameter plus a 2-byte bf16 scale per output channel (int8 weight-only, as TensorRT-LLM
# ships it: 0.02% more), and the input embedding and the LM head stay bf16, as the
# checkpoints keep them (2 x 1.05e9 bytes, not 1.05e9: 3% more). Counted below by hand.

# %%
z = named("llama-3-70b")["sizes"]
m32 = model("llama-3-70b", "decode", "tpu-v5e", {"B": 32, "S": 8192}, weights="int8", kv="int8")
caches = 32 * 8192 * m32.kv_bytes_per_token
print(f"KV cache {m32.kv_bytes_per_token} bytes a token (int8); 32 x 8192 tokens: {float(caches) / 1e9:.1f} GB")
print(f"weights {float(m32.weight_bytes) / 1e9:.2f} GB; memory {float(m32.memory_bytes) / 1e9:.1f} GB; "
      f"fewest chips {m32.min_chips}")
assert m32.kv_bytes_per_token == 2 * z["K"] * z["H"] * z["L"] * 1
usable = sympy.Rational(9, 10) * M_hbm
assert m32.min_chips == sympy.ceiling(m32.memory_bytes / usable)
assert abs(m32.memory_bytes - (caches + m32.weight_bytes)) < 1e-3 * m32.memory_bytes  # activations: a few MB


assert m32.weight_bytes == int8_weights(z, tied=False)
print(f"  by hand: {float(int8_weights(z, tied=False)) / 1e9:.3f} GB of int8 weights; at the book's byte a "
      f"parameter {float(m32.params) / 1e9:.3f} GB")
embedding8 = 2 * z["V"] * z["D"]  # the input embedding, bf16, a lookup: not read whole in a decode step
kv_proj8 = 2 * z["L"] * (z["D"] * z["K"] * z["H"] + 2 * z["K"] * z["H"])  # K and V projections, int8 + scales

# %% [markdown]
# ### A decode step on a 4x2 and a 4x4
#
# Everything in int8 (FLOPs in bf16), B = 32, prompt 8192, split by tensor parallelism over
# the slice. A 4x4 has 16 chips and the model 8 KV heads: symroof splits the heads 8 ways
# and keeps two copies of each, so each chip holds an eighth of the cache, not a sixteenth
# (mesh Y = 8 for the heads, W = 2 for the copies).
#
# The book: (112e9 bytes) / (8 x 8.1e11) = 17 ms a step on the 4x2, 1882 tokens/s, 235 a
# chip; 8.5 ms on the 4x4, the same throughput. On the 4x2 the engine agrees to within 10%
# (its bandwidth is the chip file's 8.2e11; it adds activations and the collectives). On
# the 4x4 its step is longer than the book's because the book shards the cache 16 ways
# ("fully sharded", over the batch as well as the heads, the AllToAlls of the chapter's
# KV-sharding algorithm), where symroof's tensor parallelism copies the KV heads.

# %%
slices = {"4x2": ("tp=8", None, 8, 1), "4x4": ("tp=YW", "Y=8,W=2", 16, 2)}
for name, (strategy, mesh, n, copies) in slices.items():
    r = serving.request("llama-3-70b", "tpu-v5e", 8192, 512, 32, strategy=strategy, mesh=mesh,
                        weights="int8", kv="int8")
    step = r.tpot_at(8192)
    # the request waits for tensor parallelism's AllReduces after the work (t_step_exposed);
    # the roofline's t_step overlaps them: the memory hand count below is that one's
    alone = model("llama-3-70b", "decode", "tpu-v5e", {"B": 32, "S": 8192}, strategy=strategy, mesh=mesh,
                  weights="int8", kv="int8")
    assert step == serving.step_time(alone) and step >= alone.t_step
    print(f"{name} ({r.chips} chips): step {ms(step)} at S = 8192 with the AllReduces waited for "
          f"({ms(alone.t_step)} overlapped), {32 / float(step):.0f} tokens/s, {32 / float(step) / n:.0f} a chip")
    # by hand: each chip reads its share of the int8 weights (with their scales; the bf16
    # LM head; not the input embedding, a lookup; the K and V projections on `copies`
    # chips) and its share of the caches (each KV head on `copies` chips)
    weights_read = m32.weight_bytes - embedding8 + (copies - 1) * kv_proj8
    hand = (weights_read / n + 32 * 8192 * m32.kv_bytes_per_token * copies / n) / W_hbm
    print(f"  by hand: {ms(hand)}")
    assert 1 <= alone.t_step / hand < 1.1, (name, float(alone.t_step), float(hand))


# %% [markdown]
# ### The smallest slices, the batches they hold, their step time and queries a chip
#
# The weights alone set the fewest chips; the HBM they leave sets how many caches of
# 8192 tokens fit, which is the largest batch; a decode step at that batch reads nearly
# the whole of each chip's HBM. With 512 tokens generated a request, the queries a second
# a chip follow: B / (512 x step) / chips (continuous batching: each slot's context spread
# over its 512 steps, the step taken at their mean; prompts of 7680 so the caches end at
# 8192).
#
# The book: fewest chips 8.75 in bf16 and 4.38 in int8, so slices of 4x4 and 4x2, holding
# 43 and 52 caches at 8k (a later edition's table: 58e9 bytes left on the 4x2, 43 caches);
# each step about 16 GB / 8.2e11 = 19 ms; 0.27 and 0.66 queries a
# second a chip (int4: 2x2, in the next cell). Doubling each slice (bf16 on 4x8, int8 on
# 4x4) holds more caches at the same step time: 0.51 and 1.03 a chip.
#
# The engine's answers differ, for two reasons. It fills 90% of 16 GiB (15.5e9 bytes; the
# book 16e9) and its int8 weights carry their scales and a bf16 embedding and LM head
# (above), so int8 on the 4x2 holds 38 caches, not 52. And on a slice wider than the 8
# KV heads its tensor parallelism copies each head (and its cache) on 2 or 4 chips, so bf16
# on the 4x4 holds 19, not 43, and a chip's share of a cache does not shrink as the
# slice doubles: the batch grows only by the weights' freed HBM, and the queries a chip
# fall (0.11 to 0.09 in bf16, 0.40 to 0.29 in int8) where the book's rise. The book's
# doubling shards each cache over every chip, over the batch as well as the heads (its
# KV-sharding algorithm, with two AllToAlls a layer); symroof's strategies cannot write
# that yet (the last cell). The step times agree on the HBM: each reads about a chip's
# full HBM (the hand counts below); a request's step then also waits 3 to 7 ms for tensor
# parallelism's 161 AllReduces, which symroof's serving puts on the critical path (each at
# least its hops' latency floor) and the book leaves out.

# %%
P, G = 8192 - 512, 512
setups = [("bf16", "4x4", "tp=YW", "Y=8,W=2", 16, 2), ("int8", "4x2", "tp=8", None, 8, 1),
          ("bf16", "4x8", "tp=YW", "Y=8,W=4", 32, 4), ("int8", "4x4", "tp=YW", "Y=8,W=2", 16, 2)]
qps = {}
for dtype, name, strategy, mesh, n, copies in setups:
    one = model("llama-3-70b", "decode", "tpu-v5e", {"B": 1, "S": 8192}, weights=dtype, kv=dtype)
    fits = serving.request("llama-3-70b", "tpu-v5e", P, G, 1, strategy=strategy, mesh=mesh,
                           weights=dtype, kv=dtype).kv_caches_fit
    r = serving.request("llama-3-70b", "tpu-v5e", P, G, int(fits), strategy=strategy, mesh=mesh,
                        weights=dtype, kv=dtype)
    qps[(dtype, name)] = r.requests_per_s_steady / n
    print(f"{dtype} on {name} ({n} chips; fewest {one.min_chips}): {fits} caches of 8192; step {ms(r.tpot_steady)} "
          f"(mean context); {float(qps[(dtype, name)]):.2f} queries/s a chip")
    # by hand: the caches that fit beside a chip's share of the weights (each KV head on
    # `copies` chips, the K and V projections too), 90% of the chip's HBM
    kv_seq = 8192 * one.kv_bytes_per_token
    kv_proj = 2 * z["L"] * z["D"] * z["K"] * z["H"] * 2 if dtype == "bf16" else kv_proj8
    weights_chip = (one.weight_bytes + (copies - 1) * kv_proj) / n
    hand_fits = sympy.floor((usable - weights_chip) / (kv_seq * copies / n))
    assert abs(fits - hand_fits) <= 1, (dtype, name, fits, hand_fits)
    # the step reads each chip's weights (not the input embedding, a lookup) and its caches
    # at the mean context
    embedding = z["V"] * z["D"] * 2  # bf16 in both cases
    caches_read = fits * (P + sympy.Rational(G - 1, 2)) * one.kv_bytes_per_token * copies / n
    hand_step = (weights_chip - embedding / n + caches_read) / W_hbm
    print(f"  by hand: {int(hand_fits)} caches, step {ms(hand_step)}")
    wait = allreduce_wait("llama-3-70b", strategy, mesh, dtype, int(fits))
    print(f"  the AllReduces waited for: {ms(wait)} of the step")
    assert 1 <= (r.tpot_steady - wait) / hand_step < 1.15, (dtype, name, float(r.tpot_steady - wait), float(hand_step))
# with the KV heads copied, a wider slice does not shrink a chip's share of a cache: the batch
# grows only by the weights' HBM freed, and the queries a chip fall
assert qps[("bf16", "4x8")] < qps[("bf16", "4x4")] and qps[("int8", "4x4")] < qps[("int8", "4x2")]


# %% [markdown]
# ### The int4 row: a 2x2, with the scales counted
#
# The book's table puts LLaMA 3-70B in int4 (weights and caches) on a 2x2: 35e9 bytes of
# weights at half a byte a parameter, 29e9 left of 4 x 16e9 for caches of 8192 tokens at
# 81 kB a token, 43 caches (an earlier edition printed 45e9, 19e9 and 67, which do not
# agree with each other). symroof's int4 is what AWQ and GPTQ checkpoints ship, int4_g128:
# each group of 128 weights along a matrix's inputs carries a bf16 scale and a 4-bit zero,
# 1/2 + 2.5/128 bytes a weight (3.9% over half a byte), and the input embedding and the LM
# head stay bf16 (4.2e9 bytes, not 1.05e9). A KV cache in int4 carries the same per 128 of a
# head's H = 128 values. So the weights are 39.8e9 bytes, and 90% of 4 x 16 GiB leaves room
# for 31 caches, not 43. Tensor parallelism over the 4 chips splits the 8 KV heads 2 a chip,
# nothing copied. Each step reads about a chip's HBM (19 ms, as the book's) and waits 2.7 ms
# more for its AllReduces, and the queries a second a chip are 0.69 (the earlier edition's
# 1.72 followed its 67 caches).

# %%
one4 = model("llama-3-70b", "decode", "tpu-v5e", {"B": 1, "S": 8192}, weights="int4", kv="int4")
fits4 = serving.request("llama-3-70b", "tpu-v5e", P, G, 1, strategy="tp=4", weights="int4", kv="int4").kv_caches_fit
r4 = serving.request("llama-3-70b", "tpu-v5e", P, G, int(fits4), strategy="tp=4", weights="int4", kv="int4")
print(f"int4 weights {float(one4.weight_bytes) / 1e9:.2f} GB, KV {one4.kv_bytes_per_token} bytes a token; "
      f"fewest chips {one4.min_chips}; on a 2x2: {fits4} caches of 8192, step {ms(r4.tpot_steady)} (mean context), "
      f"{float(r4.requests_per_s_steady / 4):.2f} queries/s a chip")
# by hand: int4_g128 is 1/2 + (2 + 1/2)/128 bytes a weight of each layer's matrices; the
# embedding, the LM head and the norms bf16; the cache's K H values a layer likewise. A
# step reads all but the input embedding (a lookup)
g128 = sympy.Rational(1, 2) + sympy.Rational(5, 2) / 128
layers = z["L"] * (z["D"] * (z["N"] * z["H"] + 2 * z["K"] * z["H"]) + z["N"] * z["H"] * z["D"] + 3 * z["D"] * z["F"])
hand_w = layers * g128 + 2 * 2 * z["V"] * z["D"] + 2 * (2 * z["L"] * z["D"] + z["D"])
assert one4.weight_bytes == hand_w, (one4.weight_bytes, hand_w)
assert one4.kv_bytes_per_token == 2 * z["L"] * z["K"] * z["H"] * g128
hand_fits = sympy.floor((usable - hand_w / 4) / (8192 * one4.kv_bytes_per_token / 4))
hand_step = ((hand_w - 2 * z["V"] * z["D"]) / 4
             + fits4 * (P + sympy.Rational(G - 1, 2)) * one4.kv_bytes_per_token / 4) / W_hbm
print(f"  by hand: weights {float(hand_w) / 1e9:.2f} GB ({float(layers / 2) / 1e9:.2f} at half a byte, the "
      f"embedding and LM head {float(4 * z['V'] * z['D']) / 1e9:.2f}); {int(hand_fits)} caches; step {ms(hand_step)}")
assert abs(fits4 - hand_fits) <= 1, (fits4, hand_fits)
wait4 = allreduce_wait("llama-3-70b", "tp=4", None, "int4", int(fits4))
print(f"  the AllReduces waited for: {ms(wait4)} of the step")
assert 1 <= (r4.tpot_steady - wait4) / hand_step < 1.15, (float(r4.tpot_steady - wait4), float(hand_step))


# %% [markdown]
# ### Prefill, and how many prefill servers a generate server needs
#
# A prefill of 8192 tokens of one prompt on 16 chips in bf16 (the 4x4 split as above).
# The engine's prefill runs at the roofline: it has no utilization figure for inference, so
# its T_math is the book's time at 100% of the peak, and over 0.4 the book's 40% case,
# longer than the book's 0.91 s by the attention's FLOPs (4 T^2 N H a layer, 15% more at
# T = 8192; the book counts 2 x params x T alone) and the element-wise work. Its
# ttft is longer: 16-way tensor parallelism all-reduces each layer's activations (8192 x
# 8192 in bf16, twice a layer), and on the slice's links that outlasts the math; a request
# waits for those on the critical path (1.34 s, where overlapped with the work they would
# take 0.90 s). The book
# counts FLOPs only (and, in part 7, advises no more tensor parallelism than the ICI bound,
# then sequence parallelism, which symroof's strategies do not write for prefill).
#
# The book: 2 x 70e9 x 8192 / (16 x 1.97e14 x 0.4) = 0.91 s. Then, with a median decode of
# 512 tokens at 19 ms a step and a batch of 32 (it rounds 43 down), prefill servers
# against generate servers: P / 0.91 = 32 G / (0.019 x 512), P = 3 G. With the engine's 19
# slots (its smaller batch, above) the generate server needs fewer prefill servers.

# %%
pre = serving.request("llama-3-70b", "tpu-v5e", 8192, 512, 1, strategy="tp=YW", mesh="Y=8,W=2")
prefill = model("llama-3-70b", "prefill", "tpu-v5e", {"B": 1, "T": 8192}, strategy="tp=YW", mesh="Y=8,W=2")
a = prefill.analysis
print(f"ttft {ms(pre.ttft)}: T_math {ms(a.t_math)}, T_HBM {ms(a.t_comms)}, T_network {ms(a.t_network)}")
print(f"T_math at 40% of the peak: {ms(a.t_math / sympy.Rational(2, 5))}")
# by hand: 2 FLOPs a parameter (all but the input embedding, a lookup) a token, plus the
# attention's 4 T^2 N H a layer (scores and mix; the template counts the whole T x T
# square, not the causal half), over 16 chips' peak
T = 8192
flops = 2 * (prefill.params - z["V"] * z["D"]) * T + 4 * T * T * z["N"] * z["H"] * z["L"]
hand = flops / (16 * C)
print(f"  by hand: T_math {ms(hand)} ({float(flops):.4g} FLOPs)")
# the engine's T_math is a little more: the norms', softmax's and SiLU's element-wise work
# at the vector units' lower peak, and the K and V projections done on both copies
assert 1 <= a.t_math / hand < 1.08, (float(a.t_math), float(hand))
# the request's ttft waits for the AllReduces after the work (t_step_exposed), where the
# roofline's t_step overlaps them
assert pre.ttft == serving.step_time(prefill) and pre.ttft >= prefill.t_step
print(f"ttft with the AllReduces waited for: {ms(pre.ttft)}; overlapped: {ms(prefill.t_step)}")

# generate: the 4x4 bf16 server above at its 19 caches and G = 512; a prefill server
# delivers 1 / t_prefill prompts a second, a generate server finishes B / (512 x step)
gen = serving.request("llama-3-70b", "tpu-v5e", P, 512, 19, strategy="tp=YW", mesh="Y=8,W=2")
for label, t_prefill in (("the engine's ttft", pre.ttft), ("T_math at 40%", a.t_math / sympy.Rational(2, 5))):
    ratio = gen.requests_per_s_steady * t_prefill
    print(f"prefill servers a generate server ({label}, {gen.batch} slots): {float(ratio):.2f}")
    assert ratio == gen.batch / (512 * gen.tpot_steady) * t_prefill


# %% [markdown]
# ### Tensor parallelism's communication in decode: bf16 on a 4x8 at B = 64
#
# Each layer all-reduces the attention's output and the MLP's, B x D activations in
# bf16; the weights and caches stay put. The question is whether those AllReduces outlast
# the step's HBM reads.
#
# The book, for one matmul: T_ici = 2BD / W_ici = 11 us (W_ici = 9e10, both directions),
# T_hbm = 2DF / (32 W_hbm) = 18 us, T_math = 4 us: HBM-bound, so 32-way model parallelism
# is fine at this batch. The engine costs each AllReduce as a ring over the 32 chips, each
# chip sending 2 (n - 1)/n of the bytes (a ReduceScatter and an AllGather) on one
# direction of one link (the chip file's 4.5e10): 45 us, about four times the book's
# figure, which moves the 2BD bytes once at both directions' 9e10. Over the whole step (two
# a layer, 161 in all) its network time is still well under its HBM time: the book's
# conclusion. The engine adds what the book's question sets aside: in bf16, with the 8 KV
# heads each copied on 4 chips, 64 caches of 8192 tokens do not fit a 4x8 (its memory a
# chip, below, against 90% of 16 GiB; `symroof plan` finds no decode strategy that fits).

# %%
from symroof.models import strategy_costs

tp32 = model("llama-3-70b", "decode", "tpu-v5e", {"B": 64, "S": 8192}, strategy="tp=YW", mesh="Y=8,W=4")
a = tp32.analysis
print(f"step: T_math {ms(a.t_math)}, T_HBM {ms(a.t_comms)}, T_network {ms(a.t_network)}; t_step {ms(tp32.t_step)}")
W_link = v5e.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
for c in strategy_costs.collectives(tp32):
    each = c.time / c.count
    print(f"  {int(c.count):3} x {c.kind} over {c.axes} of {c.bytes} bytes, {float(each) * 1e6:.1f} us each")
    n = 32
    assert c.bytes == 64 * z["D"] * 2  # B x D activations in bf16
    # by hand: a ring AllReduce, one direction of one link
    assert c.time == c.count * 2 * sympy.Rational(n - 1, n) * c.bytes / W_link
assert a.t_network < a.t_comms == tp32.t_step
print(f"HBM a chip {float(tp32.hbm_per_chip) / 1e9:.2f} GB, usable {float(usable) / 1e9:.2f} GB")
# by hand: a 32nd of the weights, the K and V projections' other 3 copies, and a chip's
# share of the caches, each KV head on 4 chips
kv_proj = 2 * z["L"] * z["D"] * z["K"] * z["H"] * 2
hand = (2 * m32.params + 3 * kv_proj) / 32 + 64 * 8192 * tp32.kv_bytes_per_token * 4 / 32
print(f"  by hand: {float(hand) / 1e9:.2f} GB")
assert abs(tp32.hbm_per_chip / hand - 1) < 0.01 and tp32.hbm_per_chip > usable
from symroof.models.planner import plan

found = plan("llama-3-70b", "tpu-v5e", 32, 64, mode="decode", context=8192)
print(f"symroof plan, decode, 32 chips, B = 64: {len(found.ranked)} of {len(found.candidates)} strategies fit")
assert not found.ranked


# %% [markdown]
# ### Latency against throughput on a 4x4, int8
#
# Part 8's frontier: LLaMA 3-70B, int8 weights and caches, FLOPs in bf16, 16-way model
# parallelism on a 4x4, batches from 1 to 240 at contexts of 2048 and 8192.
#
# The book (from its plot): about 5.5 ms a step at small batches; at 2048 tokens the
# throughput levels off near 1 token a ms a chip once B reaches 120, the int8 critical
# batch; at longer contexts the largest batch that fits stops short of it, and the caches'
# reads dominate the step. The engine agrees at B = 1 (5.57 ms; its LM head stays bf16)
# and on the shape, but its
# plateau is about half the book's, for two reasons the book's formula leaves out. With 8
# KV heads on 16 chips, each chip holds and reads two chips' share of the caches (the
# copied heads). And tensor parallelism keeps the B x D activations whole on every chip,
# so each chip reads and writes all of them in every norm, residual add and projection:
# at B = 120 that is a quarter of its HBM traffic, bytes that do not shrink with the
# chips as the weights' do (the step's T_HBM, T_math and T_network, below). Batches past
# the largest that fits (`max_batch`, in brackets) are costed as if they fit.

# %%
for S in (2048, 8192):
    for b in (1, 16, 64, 120, 240):
        m = model("llama-3-70b", "decode", "tpu-v5e", {"B": b, "S": S}, weights="int8", kv="int8",
                  strategy="tp=YW", mesh="Y=8,W=2")
        a = m.analysis
        print(f"S = {S:5}, B = {b:3}: step {ms(m.t_step)}, {b / float(m.t_step) / 16 / 1e3:.3f} tokens/ms a chip "
              f"(T_math {ms(a.t_math)}, T_HBM {ms(a.t_comms)}, T_network {ms(a.t_network)}; "
              f"fits up to B = {m.max_batch()})")
        if b == 1:
            # by hand: a chip's share of the int8 weights but the input embedding (a lookup of
            # B rows), the K, V projections on 2 chips each, and of one cache (each KV head
            # on 2 chips), read at the bandwidth
            read = m32.weight_bytes - embedding8 + kv_proj8
            hand = (read / 16 + S * m32.kv_bytes_per_token * 2 / 16) / W_hbm
            print(f"  by hand: {ms(hand)}")
            assert 1 <= m.t_step / hand < 1.03, (S, float(m.t_step), float(hand))
        if (S, b) == (2048, 120):
            # by hand: a chip's weights and caches, and what the rest of its HBM bytes are
            stored = read / 16 + b * S * m32.kv_bytes_per_token * 2 / 16
            rest = a.t_comms * W_hbm - stored
            print(f"  weights and caches {float(stored) / 1e9:.2f} GB a chip; the rest {float(rest) / 1e9:.2f} GB")
            assert 0.2 < rest / (a.t_comms * W_hbm) < 0.3

# %% [markdown]
# ### Part 8's closing question 1: LLaMA 3-405B's FLOPs a token
#
# The book leaves it to the reader: the FLOPs of a forward pass a token, and the time of
# one on N chips if FLOPs-bound. The engine's count at a context of 8192 (decode: one new
# token attending to 8192), and its lower bound over N chips of v5e, N a symbol:

# %%
m405 = model("llama-3-405b", "decode", "tpu-v5e", {"B": 1, "S": 8192})
z405 = named("llama-3-405b")["sizes"]
n_chips = sympy.Symbol("N", positive=True)
print(f"{float(m405.flops_per_token):.4g} FLOPs a token ({float(m405.params) / 1e9:.1f}e9 parameters); "
      f"FLOPs-bound forward: {float(m405.flops_per_token / C) * 1e3:.2f} ms / N = "
      f"{m405.flops_per_token / (n_chips * C)} s")
# by hand: 2 FLOPs a parameter of every matrix (the input embedding is a lookup), plus the
# attention's 4 S N H a layer
hand = 2 * (m405.params - z405["V"] * z405["D"]) + 4 * 8192 * z405["N"] * z405["H"] * z405["L"]
print(f"  by hand: {float(hand):.4g}")
assert abs(m405.flops_per_token / hand - 1) < 0.001

# %% [markdown]
# ## Part 7's appendix D: speculative decoding, where the batch is small
#
# The appendix gives no worked numbers, only the argument: at a small batch the target's
# step is bound by reading its weights, so verifying k + 1 tokens a sequence costs about
# one step, and a cheap draft's k tokens, accepted with probability a each until the first
# rejection, yield (1 - a^(k+1)) / (1 - a) tokens a target step. Here: LLaMA 3-70B in int8
# on a 4x2 (tp = 8), B = 1, prompt 8192; Llama 3.2 1B drafting k = 4 tokens on the same
# chips, split the same way, accepted at a = 0.8 (an assumption, not a measurement).
#
# The draft's step is more than its weights' read (0.19 ms): 8-way tensor parallelism
# all-reduces its 4 kB activations twice a layer, each AllReduce bound by its hops'
# latency, 2 x 7 hops of the chip file's 1 us estimate, not its bytes, and a request waits
# for them after each step's work (symroof's serving takes a step's t_step_exposed under
# a strategy). (The book's
# appendix C: a ring collective is latency-bound below about W_ici x 1 us of bytes a
# hop; the book's bidirectional ring takes half the hops. The threshold is derived at the
# end of this notebook.)

# %%
r = serving.request("llama-3-70b", "tpu-v5e", 8192, 512, 1, strategy="tp=8", weights="int8", kv="int8",
                    draft="llama-3.2-1b", draft_tokens=4, accept=sympy.Rational(4, 5))
sp = r.speculative
step = r.tpot_at(sp.context)
print(f"target step at S = {sp.context}: {ms(step)}; draft: {ms(sp.t_draft)} for {sp.k} tokens; "
      f"verify {ms(sp.t_verify_low)} .. {ms(sp.t_verify)}")
print(f"tokens a target step {float(sp.tokens_per_step):.4f}; speedup {float(sp.speedup):.2f} .. "
      f"{float(sp.speedup_high):.2f}")
a_, k_ = sympy.Rational(4, 5), 4
assert sp.tokens_per_step == sum(a_ ** i for i in range(k_ + 1))
# by hand, the draft: 16 layers x 2 AllReduces and one more, each 2 x 7 hops of the hop latency
hop = v5e.figure("interconnect.hop_latency_s")
z1 = named("llama-3.2-1b")["sizes"]
# ... waited for after each step's own work (its weights' and cache's reads, the roofline's
# max(T_math, T_HBM) of the draft's program)
def draft_work(s):
    d = model("llama-3.2-1b", "decode", "tpu-v5e", {"B": 1, "S": s}, strategy="tp=8", weights="int8", kv="int8")
    return sympy.Max(d.analysis.t_math, d.analysis.t_comms)


work = sum(draft_work(s) for s in range(sp.context, sp.context + k_))
assert sp.t_draft == work + k_ * (2 * z1["L"] + 1) * 2 * 7 * hop, (float(sp.t_draft), float(work))
# by hand, the verify: the target's weights read once (but the input embedding) and the
# 5 rows' caches, an eighth a chip (8 KV heads on 8 chips: nothing copied), then its 161
# AllReduces of 5 rows, each at its latency floor (2 x 7 hops), waited for
hand = ((m32.weight_bytes - embedding8) / 8 + (k_ + 1) * sp.context * m32.kv_bytes_per_token / 8) / W_hbm \
    + (2 * z["L"] + 1) * 2 * 7 * hop
print(f"  by hand: verify {ms(hand)}")
assert 1 <= sp.t_verify / hand < 1.03, (float(sp.t_verify), float(hand))

# %% [markdown]
# ### Part 8's closing question 2: LLaMA 3-8B at a batch of 240, int8 weights and caches
#
# The book leaves it to the reader: the bytes of the weights, of the caches and of the
# working activations, and the smallest slice. At a context of 8192 (the engine's decode
# memory, and so its fewest chips, counts the weights and the caches; it has no figure for
# a decode step's peak working activations, listed in the last cell):

# %%
m8 = model("llama-3-8b", "decode", "tpu-v5e", {"B": 240, "S": 8192}, weights="int8", kv="int8")
z8 = named("llama-3-8b")["sizes"]
print(f"weights {float(m8.weight_bytes) / 1e9:.2f} GB, KV caches {float(m8.kv_bytes) / 1e9:.1f} GB; "
      f"fewest v5e chips {m8.min_chips}")
hand_kv = 240 * 8192 * 2 * z8["L"] * z8["K"] * z8["H"] * 1
assert m8.kv_bytes == hand_kv
assert m8.min_chips == sympy.ceiling(m8.memory_bytes / usable)
assert m8.memory_bytes == m8.weight_bytes + m8.kv_bytes  # a decode step's memory: its activations not held

# %% [markdown]
# ## Part 8: chunked prefill, interleaved with decode on one server
#
# Instead of separate prefill servers, a generate server can prefill each new prompt a
# chunk of C tokens at a time, each chunk riding in a decode step of the B sequences already
# decoding (Sarathi-Serve, vLLM's chunked prefill): the weights are read once for both, but
# a step carrying a chunk does the chunk's FLOPs too. The book describes the idea without
# numbers. LLaMA 3-8B, int8 weights and caches, on one v5e; prompts of 2048 tokens in
# chunks of 512, 512 tokens generated, 8 sequences decoding (`symroof model llama-3-8b
# --serve --chunk 512`; the engine takes the decoding sequences at their mean context
# P + (G - 1)/2 and one prefill in flight at a time). A step carrying a chunk is bound by
# its FLOPs: about 4x a plain decode step, which is bound by reading the weights. Its
# prompt's time to first token, four such steps, is a little under the same prompt's
# prefill alone: each chunk attends only to the chunks before it.

# %%
r8 = serving.request("llama-3-8b", "tpu-v5e", 2048, 512, 8, weights="int8", kv="int8", chunk=512)
ch = r8.chunked
print(f"{ch.chunks} chunks of {ch.chunk}; mixed steps {ms(ch.step_at(0))} .. {ms(ch.step_at(ch.chunks - 1))}; "
      f"plain decode step {ms(ch.tpot_plain)}; ttft {ms(ch.ttft)} (the prompt prefilled alone: {ms(ch.ttft_alone)})")
print(f"steps carrying a chunk: {ch.busy} of them; {float(ch.tokens_per_s):.0f} tokens/s")
# by hand, a mixed step's FLOPs: 2 a matrix parameter (not the input embedding) for each of
# the B decoding tokens and the C chunk tokens; attention's 4 N H L a query a key: the B
# queries over their mean context, the chunk's C over its own C (the whole square, as the
# template counts a prefill) and the c C prompt tokens before it
z8 = named("llama-3-8b")["sizes"]
matrices8 = model("llama-3-8b", "decode", "tpu-v5e", {"B": 1, "S": 8}).params - z8["V"] * z8["D"]
att = 4 * z8["N"] * z8["H"] * z8["L"]
Bd, Cc, ctx = 8, 512, sympy.Rational(2 * 2048 + 512 - 1, 2)
hand_steps = [(2 * matrices8 * (Bd + Cc) + Bd * att * ctx + att * Cc * (Cc + c * Cc)) / C for c in range(4)]
for c in range(4):
    # the engine's is a little more: the element-wise work at the vector units' lower peak
    assert 1 <= ch.step_at(c) / hand_steps[c] < 1.05, (c, float(ch.step_at(c)), float(hand_steps[c]))
# a plain decode step reads the int8 weights (but the bf16 input embedding) and 8 caches
m8one = model("llama-3-8b", "decode", "tpu-v5e", {"B": 1, "S": 8}, weights="int8", kv="int8")
hand_plain = (m8one.weight_bytes - 2 * z8["V"] * z8["D"] + Bd * ctx * m8one.kv_bytes_per_token) / W_hbm
assert 1 <= ch.tpot_plain / hand_plain < 1.05, (float(ch.tpot_plain), float(hand_plain))
# the steady state: B/G requests start a step, each ceil(P/C) = 4 chunks: a fraction 8 x 4/512
# of the steps carry a chunk; a step on average (B/G) ttft + (1 - that) plain, B tokens each
busy = sympy.Rational(Bd * 4, 512)
hand_tokens = Bd / (sympy.Rational(Bd, 512) * sum(hand_steps) + (1 - busy) * hand_plain)
print(f"  by hand: mixed steps {ms(hand_steps[0])} .. {ms(hand_steps[3])}; plain {ms(hand_plain)}; "
      f"{float(hand_tokens):.0f} tokens/s")
assert ch.busy == busy and 0.95 < ch.tokens_per_s / hand_tokens <= 1

# %% [markdown]
# ## Appendix C: the bytes below which a collective is latency-bound
#
# A ring AllReduce over n chips takes 2 (n - 1) hops, each at least the chip file's hop
# latency (1 us on the v5e, an estimate), and sends 2 (n - 1)/n of its V bytes over one
# direction of one link. Its bandwidth time passes its hops' latency above V* = n W_link
# x 1 us: the book's "W_ici x 1 us" a hop, times the ring's n chips. Decode's AllReduce of
# bf16[B, D] moves 2 B D bytes, so V* is a batch, B*. LLaMA 3-70B in bf16 on a 4x2
# (tp = 8): the engine's threshold (`symroof model llama-3-70b --decode --strategy tp=8`,
# the `latency_bound` rows):

# %%
from symroof.models import latency_bound

tp8 = model("llama-3-70b", "decode", "tpu-v5e", {"B": 1, "S": 8192}, strategy="tp=8")
(found,) = latency_bound.of_model(tp8)
print(f"{int(found.count)} x {found.kind} of {found.bytes} bytes; latency floor {float(found.floor) * 1e6:.1f} us; "
      f"V* = {float(found.threshold_bytes) / 1e3:.0f} kB, B* = {float(found.threshold_batch):.1f}; "
      f"latency-bound at B = 1: {found.latency_bound}")
# by hand: floor 2 (n - 1) hops; bandwidth time 2 (n - 1)/n V / W_link; equal at V* = n W_link hop
n, hop = 8, v5e.figure("interconnect.hop_latency_s")
assert found.floor == 2 * (n - 1) * hop
assert found.threshold_bytes == n * W_link * hop
assert found.threshold_batch == n * W_link * hop / (2 * z["D"])
print(f"  by hand: V* = {n} x {float(W_link):.3g} x {float(hop) * 1e6:.0f} us "
      f"= {float(n * W_link * hop) / 1e3:.0f} kB; "
      f"B* = V* / (2 D) = {float(n * W_link * hop / (2 * z['D'])):.1f}")

# %% [markdown]
# ## Part 7's questions 5 and 6: a mixture of experts' decode reads only the experts it touches
#
# At a small batch a mixture of experts' decode step reads the weights of only the experts
# its tokens pick: with A of E picked by each of B tokens, uniformly and independently (the
# engine's assumption, an estimate: real routers are skewed and touch fewer), the expected
# number touched is Et = E (1 - (1 - A/E)^B). For the chapter's E = 16, A = 2 nearly all
# are read (95%) from B = 23; for Mixtral 8x7B (E = 8, A = 2) from B = 11. Below that the
# step reads fewer bytes than the stored weights. Mixtral in bf16 on one chip's roofline
# (it does not fit one v5e; the step's bytes are the point), S = 4096:

# %%
mx = named("mixtral-8x7b")["sizes"]
E, A = named("mixtral-8x7b")["moe"]["experts"], named("mixtral-8x7b")["moe"]["active"]
for e, label in ((16, "the chapter's E = 16"), (E, "Mixtral")):
    b95 = next(b for b in range(1, 100) if 1 - (1 - sympy.Rational(2, e)) ** b >= sympy.Rational(95, 100))
    print(f"{label}, A = 2: 95% of the experts touched from B = {b95}")
assert 1 - (1 - sympy.Rational(2, 16)) ** 23 >= 0.95 > 1 - (1 - sympy.Rational(2, 16)) ** 22
for b in (1, 4, 16):
    m = model("mixtral-8x7b", "decode", "tpu-v5e", {"B": b, "S": 4096})
    touched = E * (1 - (1 - sympy.Rational(A, E)) ** b)
    # by hand: every weight but the input embedding (a lookup) and the experts' read in bf16,
    # plus Et experts' three D x F matrices a layer, plus the B caches
    experts = mx["L"] * E * 3 * mx["D"] * mx["F"]
    read = 2 * (m.params - mx["V"] * mx["D"] - experts) + 2 * experts * touched / E
    hand = (read + b * 4096 * m.kv_bytes_per_token) / W_hbm
    print(f"B = {b:2}: Et = {float(touched):.2f} of {E}; step {ms(m.t_step)}, by hand {ms(hand)} "
          f"(all experts read: {ms(hand + 2 * experts * (1 - touched / E) / W_hbm)})")
    assert 1 <= m.t_step / hand < 1.03, (b, float(m.t_step), float(hand))


# %% [markdown]
# ## Not yet answered here
#
# These questions need what symroof cannot yet say, or what other work on it is building
# now; they are left unanswered rather than answered by hand:
#
# * **Caches sharded over the batch as well as the heads** (part 7's KV-sharding algorithm
#   with its two AllToAlls a layer): part 7's question 2 (the largest batch on a 4x4 in
#   int8 with the cache fully sharded, with 8 KV heads and with 1) and part 8's doubled
#   slices. symroof's tensor parallelism copies the KV heads on a slice wider than K.
# * **Mixtures of experts, beyond the experts touched** (part 7's questions 5 and 6): the
#   experts a decode step reads and the batch at which nearly all are read are answered
#   above; expert sharding on an 8x16 is not (the engine's `ep` strategy writes it; it is
#   not yet worked here against a hand count), nor a hand derivation of the whole MoE
#   step's compute-bound batch: the engine's (986 for Mixtral at S = 4096) sits 22% above
#   the weights-only count (809) by the activations' bytes, which grow with the batch and
#   which a hand count would have to copy from the engine.
# * **2D weight-stationary sharding** (part 7's question 7): no strategy writes it.
# * **Latency-bound HBM reads**: appendix C's threshold is derived above for the
#   collectives only; the chip files carry no per-step (kernel launch) latency for memory.
# * **Chunked prefill under a strategy, or of a mixture of experts** (the engine refuses
#   both: a mixed step's collectives, and the experts both the chunk's and the batch's
#   tokens touch, are not costed), and the evictions a step under continuous batching
#   (part 8: B (P + G) / G tokens; arithmetic, no engine).
# * **A decode step's peak working activations** (part 8's closing question 2, part c).
# * **The pop quiz's 30B model** with 100 kB a token: no model of those sizes is in the
#   catalogue, and its KV size is given, not derived.
# * **Part 7's question 4 and part 8's closing question 3**: choosing a decode sharding for
#   the chapter's own model (`symroof plan` takes a catalogue model, not these sizes) and
#   for 405B in int8 (`symroof plan` costs the weights in bf16) under a 15 ms target.
