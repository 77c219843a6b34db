"""DeepSeek's layers in the transformer template: multi-head latent attention (MLA) and a
mixture of experts with shared experts after dense-first layers (DeepSeek-V2, V2-Lite, V3;
arXiv 2405.04434 and 2412.19437, and deepseek-ai/DeepSeek-V3 inference/model.py).

A models.json entry opts in with an `mla` object (its ranks) and, for its experts, `moe`'s
`shared`, `dense_layers` and `width`; templates.py calls `layers` in place of its own
repeated block. Dims: N heads (K = N, G = 1: every head its own key), Cq the query's rank
(q_lora_rank; none: the query projected straight from D, as V2-Lite's), Ckv the latent's
rank (kv_lora_rank), Hn, Hr and Hv the no-rope and rope parts of a query/key head and a
value head, Ld the dense-first layers (of width F), Fe one expert's width, Es the shared
experts (written as one gated MLP of width Es*Fe: the same weights and FLOPs).

Sharding: dp and ep (`SHARDED_BY`) split the batch as for any attention, ep the routed
experts too; tp, fsdp, sp and pp are refused (MLA's heads are N, not the K that tp splits).

Conventions, stated where they change a number:
* the cache holds, per token and layer, the compressed latent and the rope key:
  (Ckv + Hr) elements, shared by every head;
* decode runs the absorbed form, as DeepSeek's and FlashMLA's kernels do: W_UK folded into
  the query (each head's query taken to the latent's Ckv dims), the attention over the
  latent and the rope key, W_UV applied after it; its FLOPs are counted in that form;
* training and prefill run the expanded form: each head's keys and values
  up-projected from the latent, then attention over them;
* the router's score-correction bias (V3's e_score_correction_bias) is an fp32 vector of E;
  the router's scores are written as the template's softmax over E (V3 scores with a
  sigmoid: the same E elements a token, a few FLOPs each, either way); group-limited
  routing (n_group, topk_group) changes which experts, not how many, and is not written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

import sympy

from ..errors import SpecError
from ..lang.source import Apply, Comment, Contraction, Fused, Item, Let, Op, Part, Repeat, Tensor
from ..resources import whole
from ..symbols import dim_symbol

if TYPE_CHECKING:
    from .whole import Model

# an `mla` object's fields: the query's rank (null: projected straight from D), the
# latent's rank, the no-rope and rope parts of a query/key head, a value head
MLA_KEYS = ("q_rank", "kv_rank", "nope", "rope", "v")
# `moe`'s fields for DeepSeek's experts (each optional; all or none of the three first)
SHARED_KEYS = ("shared", "dense_layers", "width")
ROUTER_BIAS = "router_bias"
MAX_RANK = 10**9
# the weight matrices MLA and the experts declare (templates.py stores them in --weights)
PARAM_SHAPES = frozenset({("D", "Cq"), ("Cq", "N", "Hq"), ("D", "N", "Hq"), ("D", "Ckv"), ("D", "Hr"),
                          ("Ckv", "N", "Hn"), ("Ckv", "N", "Hv"), ("N", "Hv", "D"), ("D", "Fs"), ("Fs", "D"),
                          ("E", "D", "Fe"), ("E", "Fe", "D"), ("Et", "D", "Fe"), ("Et", "Fe", "D")})
GATED = ("swiglu", "geglu")  # the MLPs DeepSeek's layers are written with (the experts gated)
# the routed experts' matrices: a token reads A of their E
EXPERT_MATRICES = ("Wg", "Wu", "Wd")


def uses(config: dict) -> bool:
    """Whether a configuration has DeepSeek's layers (an `mla` object)."""
    return config.get("mla") is not None


# the kinds that shard MLA as they shard any attention: each splits the batch (and ep the
# routed experts, the shared ones copied on every chip); MLA's heads are N, not K, and a
# kind that splits heads, widths, the sequence or the layers is refused, never costed as
# another attention's
SHARDED_BY = ("dp", "ep")


def check_strategy(config: dict, strategy: dict) -> None:
    """A strategy of kinds other than `SHARDED_BY` on an MLA model: refused in one line."""
    other = [kind for kind in strategy if kind not in SHARDED_BY]
    if uses(config) and other:
        raise SpecError(f"model {config['id']}: {other[0]} on multi-head latent attention (MLA) is not written yet; "
                        f"MLA models shard by {' and '.join(SHARDED_BY)} only")


def check_plan(config: dict) -> None:
    """A plan of an MLA model: refused (see `check_strategy`)."""
    if uses(config):
        raise SpecError(f"model {config['id']}: a plan searches every kind of sharding, and only "
                        f"{' and '.join(SHARDED_BY)} are written for multi-head latent attention (MLA); cost those "
                        f"with symroof model {config['id']} --strategy")


def widths(config: dict) -> dict[str, int]:
    """The sizes `lets` names, as numbers: the input widths of MLA's matrices and the
    experts' (models/quant.py's per-channel scales)."""
    mla, moe = config["mla"], config.get("moe") or {}
    out = {"Ckv": mla["kv_rank"], "Hn": mla["nope"], "Hr": mla["rope"], "Hv": mla["v"], "Hq": mla["nope"] + mla["rope"]}
    if mla["q_rank"] is not None:
        out["Cq"] = mla["q_rank"]
    if moe:
        out["Fe"] = moe.get("width", config["sizes"]["F"])
        out["Fs"] = moe.get("shared", 0) * out["Fe"]
    return out


def lets(config: dict) -> list[Item]:
    """The sizes of MLA and of the experts, as `let` lines."""
    mla, moe = config["mla"], config.get("moe") or {}
    sizes: list[tuple[str, str]] = []
    if mla["q_rank"] is not None:
        sizes.append(("Cq", str(mla["q_rank"])))
    sizes += [("Ckv", str(mla["kv_rank"])), ("Hn", str(mla["nope"])), ("Hr", str(mla["rope"])),
              ("Hv", str(mla["v"])), ("Hq", "Hn+Hr")]
    items: list[Item] = [Let(tuple(sizes))]
    if moe:  # a size is positive: no dense-first layers or shared experts, no let of them
        sizes = [("Fe", str(moe.get("width", config["sizes"]["F"])))]
        if moe.get("dense_layers", 0):
            sizes.insert(0, ("Ld", str(moe["dense_layers"])))
        if moe.get("shared", 0):
            sizes += [("Es", str(moe["shared"])), ("Fs", "Es*Fe")]
        items.append(Let(tuple(sizes)))
    return items


def layers(config: dict, x: Tensor, seq: tuple[str, ...], mode: str, cache: str, says: str) -> list[Item]:
    """The repeated blocks: MLA with a dense MLP in the first Ld layers (F wide), with the
    experts (routed and shared) in the rest; without `moe`, every layer dense."""
    from . import templates as tp  # templates.py calls this module: its helpers, read at call time

    decode = mode == "decode"
    norm, bias, mlp = config["norm"], config["bias"], config["mlp"]
    attention = Part("attention", _attention(config, x, seq, decode, cache, says))
    moe = config.get("moe")
    if not moe:
        return [Repeat("L", (attention, Part("mlp", tp._mlp(x, seq, norm, bias, mlp, None))))]
    out: list[Item] = []
    if moe.get("dense_layers", 0):
        dense = (attention, Part("mlp", tp._mlp(x, seq, norm, bias, mlp, None)))
        out.append(Repeat("Ld", tuple(tp.renamed(part, "d") for part in dense), "the dense-first layers"))
    experts = [*tp._norm(x, norm, bias, "Wn2", "bn2")]
    if moe.get("shared", 0):
        experts += _shared(x, seq, mlp)
    routed = tp._experts(x, seq, mlp, ("Et", "Ct") if decode else ("E", "C"), "Fe")
    if moe.get(ROUTER_BIAS, False):
        scores = tp.t("fp32", *seq, "E")
        routed.insert(2, tp._params("param", ("br", tp.t("fp32", "E")), comment="the router's score-correction bias"))
        routed.insert(3, Contraction((scores, tp.t("fp32", "E")), (Op("+"),), scores,
                                     "the bias picks the experts; the gates stay unbiased"))
    if moe.get("dense_layers", 0) == config["sizes"]["L"]:
        return out  # every layer dense
    out.append(Repeat("L-Ld" if moe.get("dense_layers", 0) else "L", (attention, Part("mlp", tuple(experts + routed)))))
    return out


def _shared(x: Tensor, seq: tuple[str, ...], mlp: str) -> list[Item]:
    """The shared experts, every token through each: one gated MLP Es*Fe wide."""
    from . import templates as tp

    act = "silu" if mlp == "swiglu" else "gelu"
    h, up, down = tp.t("bf16", *seq, "Fs"), tp.t("bf16", "D", "Fs"), tp.t("bf16", "Fs", "D")
    out = tp.t("bf16", *seq, "D")
    return [tp._params("param", ("Wsg", up), ("Wsu", up), ("Wsd", down), comment="the shared experts"),
            tp._matmul(x, ("D",), up, h), tp._matmul(x, ("D",), up, h), Apply(act, (), "call", (h,), h),
            Contraction((h, h), (Op("*"),), h), tp._matmul(h, ("Fs",), down, out),
            tp._add(x, out, x, "the shared experts' output, beside the routed ones'")]


def _attention(config: dict, x: Tensor, seq: tuple[str, ...], decode: bool, cache: str,
               says: str) -> tuple[Item, ...]:
    """MLA: the query through its low-rank pair (or straight), the latent and the rope key
    from x (their norms inside), then the expanded form (training, prefill) or the absorbed
    one (decode); see the module's conventions."""
    from . import templates as tp

    t, named, mm = tp.t, tp.named, tp._matmul
    low_rank_q = config["mla"]["q_rank"] is not None
    items: list[Item] = tp._norm(x, config["norm"], config["bias"], "Wn1", "bn1", "x")
    latent_w, rope_w = t("bf16", "D", "Ckv"), t("bf16", "D", "Hr")
    uk, uv, wo = t("bf16", "Ckv", "N", "Hn"), t("bf16", "Ckv", "N", "Hv"), t("bf16", "N", "Hv", "D")
    if low_rank_q:
        qa, qb = t("bf16", "D", "Cq"), t("bf16", "Cq", "N", "Hq")
        items.append(tp._params("param", ("Wqa", qa), ("Wqn", t("bf16", "Cq")), ("Wqb", qb),
                                comment="the query's low-rank pair and the norm between"))
    else:
        items.append(tp._params("param", ("Wq", t("bf16", "D", "N", "Hq"))))
    items += [tp._params("param", ("Wkva", latent_w), ("Wkr", rope_w), ("Wkvn", t("bf16", "Ckv")),
                         comment="the latent and the rope key (kv_a_proj), the latent's norm"),
              tp._params("param", ("Wuk", uk), ("Wuv", uv), ("Wo", wo), comment="kv_b_proj's halves, o_proj")]
    items.append(tp._params("cache", ("Cc", t(cache, "B", "S", "Ckv")), ("Kr", t(cache, "B", "S", "Hr")),
                            comment=f"{says}: MLA's latent and rope key, shared by every head"))
    q = t("bf16", *seq, "N", "Hq")
    if low_rank_q:
        cq = t("bf16", *seq, "Cq")
        items += [mm(x, ("D",), qa, cq), Apply("rmsnorm", ("Cq",), "prefix", (cq, t("bf16", "Cq")), cq),
                  mm(cq, ("Cq",), qb, named(q, "q"))]
    else:
        items.append(mm(x, ("D",), t("bf16", "D", "N", "Hq"), named(q, "q")))
    source = x if decode else t("bf16", "B", "S", "D")
    c = t(cache, *(("B",) if decode else ("B", "S")), "Ckv")
    kr = t(cache, *(("B",) if decode else ("B", "S")), "Hr")
    items += [mm(source, ("D",), latent_w, c), Apply("rmsnorm", ("Ckv",), "prefix", (c, t("bf16", "Ckv")), c),
              mm(source, ("D",), rope_w, kr)]
    q_nope, q_rope = t("bf16", *seq, "N", "Hn"), t("bf16", *seq, "N", "Hr")
    scores = t("fp32", "B", "N", *seq[1:], "S")
    probs = Tensor("bf16", scores.dims)
    latent, rope_key = t(cache, "B", "S", "Ckv"), t(cache, "B", "S", "Hr")
    o = t("bf16", *seq, "N", "Hv")
    if decode:
        absorbed = t("bf16", "B", "N", "Ckv")
        items += [Comment("absorbed: W_UK folded into the query, W_UV after the attention over the latent"),
                  mm(q_nope, ("Hn",), uk, absorbed),
                  # the latent is the keys and the values both: read from HBM once (the copy), then
                  # on chip for both matmuls, as FlashMLA's kernel loads it
                  Fused((Apply("copy", (), "call", (latent,), named(latent, "lat"), "the latent, read once"),
                         mm(absorbed, ("Ckv",), named(latent, "lat"), scores),
                         mm(q_rope, ("Hr",), rope_key, scores),
                         Apply("softmax", ("S",), "prefix", (scores,), probs),
                         mm(probs, ("S",), named(latent, "lat"), absorbed)),
                        "attention over the latent: the scores stay on chip"),
                  mm(absorbed, ("Ckv",), uv, named(o, "o"))]
    else:
        keys, values = t("bf16", "B", "S", "N", "Hn"), t("bf16", "B", "S", "N", "Hv")
        items += [Comment("expanded: each head's keys and values up-projected from the latent"),
                  mm(latent, ("Ckv",), uk, keys), mm(latent, ("Ckv",), uv, values),
                  Fused((mm(q_nope, ("Hn",), keys, scores), mm(q_rope, ("Hr",), rope_key, scores),
                         Apply("softmax", ("S",), "prefix", (scores,), probs),
                         mm(probs, ("S",), values, named(o, "o"))), "attention: the scores stay on chip")]
    items += [mm(o, ("N", "Hv"), wo, named(x, "a")), tp._add(x, x, x, "residual")]
    return tuple(items)


def activated_params(model: Model) -> sympy.Expr:
    """The parameters one token's forward pass reads: all of them but the routed experts it
    is not sent to (A of E per MoE layer) and the embedding table's other rows (a lookup
    reads one row, D). The convention of the published counts DeepSeek states, which
    exclude the multi-token-prediction module (the template has none)."""
    E, A, V = dim_symbol("E"), dim_symbol("A"), dim_symbol("V")
    total = sympy.Integer(0)
    for d in model.structured.declared:
        if d.word not in ("param", "embedding"):
            continue
        elements = d.count * d.elements
        if d.name in EXPERT_MATRICES and E in d.dims:
            elements = elements.subs(E, A)
        elif d.word == "embedding" and d.name == "Emb":
            elements = elements.subs(V, 1)
        total += elements
    return model.at(total)


def check_entry(model: dict, fail: Callable[[str], NoReturn]) -> None:
    """A models.json entry's `mla` object and `moe`'s DeepSeek fields, as strictly as the
    catalogue's others: each a whole number in range (`q_rank` may be null), nothing else,
    and the expert fields only with `mla` (the other template has no place for them)."""
    mla, moe = model.get("mla"), model.get("moe") or {}
    extra = [k for k in (*SHARED_KEYS, ROUTER_BIAS) if isinstance(moe, dict) and k in moe]
    if mla is None:
        if "mla" in model:
            fail("mla: an object of the latent attention's ranks, not null (leave it out for other attention)")
        if extra:
            fail(f"moe.{extra[0]}: shared experts, dense-first layers and a router bias are written with MLA "
                 "only (give an 'mla' object)")
        return
    for flag in ("bias", "qkv_bias"):
        if model.get(flag):
            fail(f"{flag}: MLA's projections have no biases in the template (DeepSeek's have none); give false")
    if model.get("mlp") not in GATED:
        fail(f"mlp: MLA's experts are gated ({', '.join(GATED)}), not {str(model.get('mlp'))[:40]!r}")
    if not isinstance(mla, dict) or set(mla) != set(MLA_KEYS):
        fail(f"'mla' must be an object with exactly {', '.join(MLA_KEYS)}, not {str(mla)[:80]}")
    for key in MLA_KEYS:
        value = mla[key]
        if key == "q_rank" and value is None:
            continue
        if not whole(value, MAX_RANK):
            fail(f"mla.{key} must be a positive whole number up to {MAX_RANK}"
                 f"{' (or null: the query straight from D)' if key == 'q_rank' else ''}, not {value!r}"[:200])
    for key in extra:
        value = moe[key]
        if key == ROUTER_BIAS:
            if not isinstance(value, bool):
                fail(f"moe.{key} must be true or false, not {value!r}"[:200])
        elif isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_RANK or \
                (key == "width" and value == 0):
            fail(f"moe.{key} must be a whole number up to {MAX_RANK}{'' if key != 'width' else ', above 0'}, "
                 f"not {value!r}"[:200])
    if moe and moe.get("dense_layers", 0) > model["sizes"]["L"]:
        fail(f"moe.dense_layers: {moe['dense_layers']} dense-first layers, more than sizes.L = "
             f"{model['sizes']['L']}")


# the Hugging Face fields of DeepSeek's MLA and experts, read by `from_hf` (hf_config.py
# reads the rest; it refuses these fields in any other model_type)
HF_FIELDS = ("q_lora_rank", "kv_lora_rank", "n_shared_experts")


def from_hf(data: dict, kind: str, whole: Callable[[str], int], fail: Callable[[str], NoReturn]) -> dict:
    """The `mla` and `moe` objects of a deepseek_v2 / deepseek_v3 config.json. The
    multi-token-prediction module (V3's num_nextn_predict_layers) is not in the template,
    as DeepSeek's published counts leave it out."""
    def optional(field: str) -> int | None:
        return None if data.get(field) is None else whole(field)

    freq = data.get("moe_layer_freq", 1)
    if freq != 1:
        fail(f"moe_layer_freq: {str(freq)[:40]}: experts in every {str(freq)[:40]}th layer only, which the "
             "template cannot write (it writes them in every layer after first_k_dense_replace)")
    mla = {"q_rank": optional("q_lora_rank"), "kv_rank": whole("kv_lora_rank"), "nope": whole("qk_nope_head_dim"),
           "rope": whole("qk_rope_head_dim"), "v": whole("v_head_dim")}
    routed = optional("n_routed_experts")
    if routed is None:
        return {"mla": mla}
    active = whole("num_experts_per_tok")
    if active > routed:
        fail(f"num_experts_per_tok: {active} experts a token, more than n_routed_experts = {routed}")
    dense = data.get("first_k_dense_replace", 0)
    if isinstance(dense, bool) or not isinstance(dense, int) or not 0 <= dense <= whole("num_hidden_layers"):
        fail(f"first_k_dense_replace must be a whole number of layers up to num_hidden_layers, not {str(dense)[:40]}")
    moe = {"experts": routed, "active": active, "shared": optional("n_shared_experts") or 0, "dense_layers": dense,
           "width": whole("moe_intermediate_size")}
    # noaux_tc routing (V3's) adds a learned bias to the scores: e_score_correction_bias
    topk = data.get("topk_method", "noaux_tc" if kind == "deepseek_v3" else "greedy")
    if topk not in ("noaux_tc", "greedy", "group_limited_greedy"):
        fail(f"topk_method {str(topk)[:40]!r}: not a routing symroof knows (noaux_tc, greedy, group_limited_greedy)")
    if topk == "noaux_tc":
        moe[ROUTER_BIAS] = True
    return {"mla": mla, "moe": moe}


# the conventions a model with MLA states beside the template's (report.py)
CONVENTIONS = ("MLA: the KV cache holds each token's latent and rope key ((kv_lora_rank + qk_rope_head_dim) a "
               "layer, shared by every head); decode counts the absorbed form (W_UK folded into the query, W_UV "
               "after the attention over the latent), as DeepSeek's and FlashMLA's kernels run it; training and "
               "prefill the expanded form (each head's keys and values up-projected from the latent)",
               "no multi-token-prediction module is counted (DeepSeek-V3's published 671B leaves its out too)",
               "params_activated: the parameters one token reads (A of the E routed experts a layer, one row of "
               "the embedding table); where the first layers are dense, params_per_block and per_block are a "
               "dense-first layer's")


def _has_mla(model: Model) -> bool:
    """Whether the model's program has MLA's latent cache."""
    latent = dim_symbol("Ckv")
    return any(d.word == "cache" and latent in d.dims for d in model.structured.declared)


def stated(model: Model) -> list[str]:
    """The conventions of a model with MLA, else none."""
    return list(CONVENTIONS) if _has_mla(model) else []


def activated(model: Model) -> dict[str, sympy.Expr]:
    """The report's row of a model with MLA, `params_activated` (else none: the other
    models' reports are as they were)."""
    return {"params_activated": activated_params(model)} if _has_mla(model) else {}
