"""The transformer template: a model's configuration built as a symroof program (objects,
lang/source.py) the user can print, read, edit and pass back (`symroof model NAME --print >
my.sr`).

Dims: B batch, T tokens per sequence in this step, S tokens attended to (S = T in training
and prefill; the cached context in decode), D model width, F MLP width, K KV heads, G query
heads per KV head (N = K*G query heads), H head dim, L layers, V vocabulary; for a mixture
of experts E experts of which A are active per token, C = tokens*A/E tokens per expert (a
capacity factor of 1: the router's load taken as even), slots = E*C their results. In
decode the experts' matmuls run over Et = E*(1 - (1 - A/E)**tokens) experts, the expected
number a step's tokens touch when each token picks A of the E uniformly and independently
of the others (an expert is missed by a token with probability 1 - A/E); each touched
expert gets Ct = tokens*A/Et tokens, so the FLOPs are those of all E experts' C (tokens*A
rows), and only Et experts' weights are read; all E are stored (their `param` lines). Real
routers are skewed and touch fewer: Et is an estimate, the most under a uniform router.
Every config field the template reads is listed in `FIELDS`. The tensors a remat policy
may keep are named: x (a block's input), q, k, v, o (attention's output), a (its
projection), g, u (the gated MLP's two projections), h (the MLP's hidden activation), m (its
output): `--remat save=x,o,h`.
"""

from __future__ import annotations

import dataclasses
import math

from ..errors import SpecError
from ..ir import dim_symbol
from ..lang.source import (
    Apply,
    Blank,
    Comment,
    Contraction,
    Declare,
    Dim,
    Fused,
    Item,
    Let,
    Op,
    Part,
    Program,
    Repeat,
    Tensor,
)
from ..lang.structure import Structured
from . import kinds, mla, quant, windows
from .backward import backward
from .catalogue import FIELDS, MLPS, NORM_POSITIONS, NORMS, POSITIONS, QK_NORMS
from .strategies import Strategy, gathered, sequence_split, shard, subscripted


def t(dtype: str, *dims: str, name: str | None = None) -> Tensor:
    """A tensor of whole dims: t("bf16", "B", "T", "D") is bf16[B, T, D]."""
    return Tensor(dtype, tuple(Dim(d) for d in dims), name)


def named(tensor: Tensor, name: str) -> Tensor:
    return Tensor(tensor.dtype, tensor.dims, name)


def _sum(*dims: str) -> Op:
    return Op("*", dims)


def _add(a: Tensor, b: Tensor, out: Tensor, comment: str | None = None) -> Contraction:
    return Contraction((a, b), (Op("+"),), out, comment)


def _matmul(a: Tensor, over: tuple[str, ...], w: Tensor, out: Tensor, comment: str | None = None) -> Contraction:
    return Contraction((a, w), (_sum(*over),), out, comment)


def _params(word: str, *entries: tuple[str, Tensor], comment: str | None = None) -> Declare:
    return Declare(word, tuple(named(tensor, name) for name, tensor in entries), comment)


def program(config: dict, mode: str = "train", weights: str = "bf16", kv: str = "bf16",
            strategy: Strategy | None = None) -> Program:
    """The program of a model configuration (a `models.json` entry) for one mode, its
    layers' weight matrices stored in `weights` (a dtype or a scheme with its scales, such as
    int4_g128 or mxfp4: weight-only quantization computing in bf16; models/quant.py) and its
    KV cache in `kv`, sharded by `strategy` (strategies.parse_strategy)."""
    mla.check_strategy(config, strategy or {})
    windows.check_strategy(config, strategy or {})
    return sharded(whole(config, mode, weights, kv), mode, strategy or {})


def whole(config: dict, mode: str = "train", weights: str = "bf16", kv: str = "bf16") -> Program:
    """The template's program unsharded (see `program`)."""
    if mode not in _CACHE:
        raise SpecError(f"mode is one of {', '.join(_CACHE)}, not {mode!r}")
    sizes = config["sizes"]
    missing = [f for f in FIELDS if f not in sizes]
    if missing:
        raise SpecError(f"model {config.get('id', '?')}: sizes lack {', '.join(missing)}")
    heads, kv_heads = sizes["N"], sizes["K"]
    if heads % kv_heads:
        raise SpecError(f"model {config['id']}: {heads} query heads do not group evenly over {kv_heads} KV heads")
    for field in ("id", "name"):  # written into the program's first line: one line, nothing more
        if not isinstance(config.get(field), str) or not config[field].isprintable():
            raise SpecError(f"model {config.get('id', '?')!r}: its {field} must be printable text on one line, "
                            f"not {config.get(field)!r}")
    choices = {}
    for field, known, default in (("mlp", MLPS, "swiglu"), ("norm", NORMS, "rmsnorm"),
                                  ("positions", POSITIONS, "rope"), ("norm_position", NORM_POSITIONS, "pre"),
                                  ("qk_norm", QK_NORMS, "none")):
        choices[field] = config.get(field, default)  # a config from models.json has each (catalogue.py)
        if choices[field] not in known:
            raise SpecError(f"model {config['id']}: {field} is one of {', '.join(known)}, not {choices[field]!r}")
    for field in ("bias", "qkv_bias", "tied_embeddings"):
        if not isinstance(config.get(field, False), bool):
            raise SpecError(f"model {config['id']}: {field} is true or false, not {config[field]!r}")
    moe = config.get("moe")
    decode = mode == "decode"
    stored = {what: quant.storage(what, dtype, sizes)[0] for what, dtype in (("weights", weights), ("kv", kv))}
    seq = ("B",) if decode else ("B", "T")  # decode runs one token per sequence
    x = t("bf16", *seq, "D")
    norm, bias = choices["norm"], config.get("bias", False)
    learned = choices["positions"] == "learned"
    items: list[Item] = [
        Comment(f"{config['name']}, {mode}: the transformer template (symroof model {config['id']} --print)"),
        Let(tuple((d, str(sizes[d])) for d in ("D", "F", "K", "H", "L", "V")) + (("G", str(heads // kv_heads)),)),
        Let((("N", "K*G"),) + (() if decode else (("S", "T"),))),
        Let((("tokens", "B" if decode else "B*T"),))]
    if moe:
        items.append(Let((("E", str(moe["experts"])), ("A", str(moe["active"])), ("C", "tokens*A/E"),
                          ("slots", "E*C"))))
        if decode:
            items.append(Let(_touched()))
    if mla.uses(config):
        items += mla.lets(config)
    if learned:
        items.append(Let((("Tmax", str(sizes["context"])),)))
    if windows.uses(config):
        items.append(windows.lets(config))
    indices = t("int32", *seq)
    items += [Blank(), _params("embedding", ("Emb", t("bf16", "V", "D"))),
              Apply("gather", (), "prefix", (t("bf16", "V", "D"), indices), x)]
    if learned:
        items += [_params("embedding", ("Pos", t("bf16", "Tmax", "D"))),
                  Apply("gather", (), "prefix", (t("bf16", "Tmax", "D"), indices), x), _add(x, x, x)]
    # qkv_bias: biases on the query, key and value projections only (Qwen2's), none on the
    # output projection or the MLP
    qkv_bias = bias or config.get("qkv_bias", False)
    style = Style(pre=choices["norm_position"] != "post", post=choices["norm_position"] != "pre",
                  qk_norm=choices["qk_norm"], softcap=windows.softcap(config, "attention"))
    if style != Style() and (mla.uses(config) or moe):
        raise SpecError(f"model {config['id']}: norm_position, qk_norm and softcap are written for dense, non-MLA "
                        "models only")

    def layer(style: Style) -> tuple[Part, Part]:
        return (Part("attention", _attention(x, seq, norm, bias, qkv_bias, decode, stored["kv"], _CACHE[mode], style)),
                Part("mlp", _mlp(x, seq, norm, bias, choices["mlp"], moe, decode, style)))

    if mla.uses(config):
        blocks = mla.layers(config, x, seq, mode, stored["kv"], _CACHE[mode])
    elif windows.uses(config):
        everywhere, local = windows.counts(config)
        blocks = [*([Repeat(everywhere, layer(style), "the global layers")] if everywhere else []),
                  Repeat(local, tuple(renamed(part, "l") for part in layer(dataclasses.replace(style, keys="Sl"))),
                         "the local layers: each query over the W tokens before it")]
    else:
        blocks = [Repeat("L", layer(style))]
    items += [Blank(), *blocks, Blank(), *_norm(x, norm, bias, "Wnf", "bnf")]
    logits = t("bf16", *seq, "V")
    if config.get("tied_embeddings", False):
        items.append(_matmul(x, ("D",), t("bf16", "V", "D"), logits, "tied: the embedding table again"))
    else:
        items += [_params("embedding", ("Wout", t("bf16", "D", "V"))), _matmul(x, ("D",), t("bf16", "D", "V"), logits)]
    if windows.softcap(config, "logits"):
        items += _capped(logits)
    p = Program(tuple(items))
    # the weight matrices (declared, and read as matmul operands) in their own dtype
    shapes, widths = (_PARAM_SHAPES | mla.PARAM_SHAPES, {**sizes, **mla.widths(config)}) if mla.uses(config) \
        else (_PARAM_SHAPES, sizes)
    return p if stored["weights"] == "bf16" else p.mapped(
        lambda tensor: _stored_in(tensor, stored["weights"], widths, shapes))


def sharded(p: Program, mode: str, strategy: Strategy) -> Program:
    """A template's program sharded by `strategy`, with its backward pass written out in
    training on a mesh (for the gradients' collectives)."""
    p = _touched_per_replica(p, strategy)
    if mode != "train" or not strategy:
        return shard(p, strategy)
    split = subscripted(p, strategy)
    back = sequence_split(backward(split, strategy), strategy, backward=True)
    return Program((*gathered(sequence_split(split, strategy), strategy).items, Blank(),
                    *gathered(back, strategy).items))


def _touched_per_replica(p: Program, strategy: Strategy) -> Program:
    """Decode's experts touched where the batch is split over axes that do not split the
    experts (dp, fsdp): each replica routes only its own tokens, tokens/R of them, through
    its own copy of the experts. Over ep's axes the experts' chips pool the tokens of all
    of them, so those do not count in R (each chip its E/|M| experts' share of Et)."""
    sizes = [size for kind in kinds.where(lambda k: k.splits_batch and not k.splits_experts)
             for _, size, _ in strategy.get(kind.name, ())]
    if not any(isinstance(item, Let) and "Et" in dict(item.entries) for item in p.items):
        return p
    if None in sizes:  # a strategy family's axes (families.py): each member is costed whole instead
        raise SpecError("a decode step's experts touched per replica need the replicas' sizes")
    replicas = math.prod(size for size in sizes if size is not None)
    if replicas == 1:
        return p
    touched = dict(_touched(f"(tokens/{replicas})"))["Et"]

    def each(item: Item) -> Item:
        return Let(tuple((n, touched if n == "Et" else v) for n, v in item.entries)) if isinstance(item, Let) else item

    return Program(tuple(each(item) for item in p.items))


def renamed(part: Part, suffix: str) -> Part:
    """A part with its declared tensors renamed (a name is declared once per program: a
    second repeat block's own weights beside the first's)."""
    return Part(part.name, tuple(Declare(i.word, tuple(Tensor(d.dtype, d.dims, f"{d.name}{suffix}", d.unreduced)
                                                       for d in i.tensors), i.comment)
                                 if isinstance(i, Declare) else i for i in part.body))


def _norm(x: Tensor, norm: str, bias: bool, w: str, b: str, name: str | None = None) -> list[Item]:
    scale = t("bf16", "D")
    source = named(x, name) if name else x
    if norm == "layernorm":
        return [_params("param", (w, scale), (b, scale)),
                Apply("layernorm", ("D",), "prefix", (source, scale, scale), x)]
    return [_params("param", (w, scale)), Apply("rmsnorm", ("D",), "prefix", (source, scale), x)]


# what the cache declaration is in each mode: decode reads the context's keys and values,
# prefill writes them; training keeps none, but their bytes per token are the model's
_CACHE = {"train": "a cache's keys and values (kv_bytes_per_token; training keeps none)",
          "prefill": "the keys and values this step writes", "decode": "the context's keys and values"}


@dataclasses.dataclass(frozen=True)
class Style:
    """How a layer is written beyond its sizes: its norms before (`pre`) and/or after
    (`post`: on each sublayer's output, before the residual; OLMo 2's alone, Gemma 2's
    beside the pre-norms) its sublayers, an RMSNorm over the whole q and k projections or
    over each head (`qk_norm` whole, OLMo 2's, or head, Gemma 3's), the keys its queries
    attend (`keys`: S, or a local layer's Sl,
    windows.py) and a soft cap on its attention scores (`softcap`, Gemma 2's)."""

    pre: bool = True
    post: bool = False
    qk_norm: str = "none"
    keys: str = "S"
    softcap: bool = False

    def post_names(self, k: int) -> tuple[str, str]:
        """The post-norm's scale and bias names in sublayer `k` (1 attention, 2 MLP)."""
        return (f"Wp{k}", f"bp{k}") if self.pre else (f"Wn{k}", f"bn{k}")


def _capped(x: Tensor) -> list[Item]:
    """cap * tanh(x / cap), elementwise (windows.py's soft-capping)."""
    cap = Tensor("fp32", ())
    return [Contraction((x, cap), (Op("*"),), x, windows.CAP_COMMENT), Apply("tanh", (), "call", (x,), x),
            Contraction((x, cap), (Op("*"),), x, "... * cap")]


def _attention(x: Tensor, seq: tuple[str, ...], norm: str, bias: bool, qkv_bias: bool, decode: bool, cache: str,
               says: str, style: Style = Style()) -> tuple[Item, ...]:
    """A layer's attention, written in `style`."""
    keys = style.keys
    q, kv = t("bf16", *seq, "K", "G", "H"), t(cache, "B", keys, "K", "H")
    new_kv = t(cache, "B", "K", "H") if decode else t(cache, "B", "S", "K", "H")
    wq, wkv, wo = t("bf16", "D", "K", "G", "H"), t("bf16", "D", "K", "H"), t("bf16", "K", "G", "H", "D")
    items = _norm(x, norm, bias, "Wn1", "bn1", "x") if style.pre else []  # x: the block's input
    items.append(_params("param", ("Wq", wq), ("Wk", wkv), ("Wv", wkv), ("Wo", wo)))
    qb, kvb, ob = t("bf16", "K", "G", "H"), t("bf16", "K", "H"), t("bf16", "D")
    if qkv_bias:
        items.append(_params("param", ("bq", qb), ("bk", kvb), ("bv", kvb), *((("bo", ob),) if bias else ())))
    items.append(_params("cache", ("Kc", kv), ("Vc", kv), comment=says))
    source = x if decode else t("bf16", "B", "S", "D")
    items += [_matmul(x if style.pre else named(x, "x"), ("D",), wq, named(q, "q")),
              _matmul(source, ("D",), wkv, named(new_kv, "k")), _matmul(source, ("D",), wkv, named(new_kv, "v"))]
    if qkv_bias:
        items += [_add(q, qb, q), _add(new_kv, kvb, new_kv), _add(new_kv, kvb, new_kv)]
    if style.qk_norm == "whole":
        qn, kn = t("bf16", "K", "G", "H"), t("bf16", "K", "H")
        items += [_params("param", ("Wqn", qn), ("Wkn", kn), comment="QK-norm: over the whole q and k projections"),
                  Apply(norm, ("K", "G", "H"), "prefix", (q, qn), q),
                  Apply(norm, ("K", "H"), "prefix", (new_kv, kn), new_kv)]
    elif style.qk_norm == "head":
        scale = t("bf16", "H")
        items += [_params("param", ("Wqn", scale), ("Wkn", scale), comment="QK-norm: over each head"),
                  Apply(norm, ("H",), "prefix", (q, scale), q), Apply(norm, ("H",), "prefix", (new_kv, scale), new_kv)]
    scores = t("fp32", "B", "K", "G", *seq[1:], keys)
    probs = Tensor("bf16", scores.dims)
    items += [Fused((_matmul(q, ("H",), kv, scores), *(_capped(scores) if style.softcap else ()),
                     Apply("softmax", (keys,), "prefix", (scores,), probs),
                     _matmul(probs, (keys,), kv, named(q, "o"))), "attention: the scores stay on chip"),
              _matmul(q, ("K", "G", "H"), wo, named(x, "a"))]
    if bias:
        items.append(_add(x, ob, x))
    if style.post:
        items += _norm(x, norm, bias, *style.post_names(1))
    items.append(_add(x, x, x, "residual"))
    return tuple(items)


def _mlp(x: Tensor, seq: tuple[str, ...], norm: str, bias: bool, mlp: str, moe: dict | None,
         decode: bool = False, style: Style = Style()) -> tuple[Item, ...]:
    """A layer's MLP (or experts), its norms as `style` places them."""
    items = _norm(x, norm, bias, "Wn2", "bn2") if style.pre else []
    if moe:
        return tuple(items + _experts(x, seq, mlp, ("Et", "Ct") if decode else ("E", "C")))
    h = t("bf16", *seq, "F")
    up, down = t("bf16", "D", "F"), t("bf16", "F", "D")
    act = {"swiglu": "silu", "geglu": "gelu", "gelu": "gelu"}[mlp]
    if mlp == "gelu":
        biases = (("b1", t("bf16", "F")), ("b2", t("bf16", "D"))) if bias else ()
        items += [_params("param", ("W1", up), ("W2", down), *biases), _matmul(x, ("D",), up, h)]
        if bias:
            items.append(_add(h, t("bf16", "F"), h))
        items += [Apply(act, (), "call", (h,), named(h, "h")), _matmul(h, ("F",), down, named(x, "m"))]
        if bias:
            items.append(_add(x, t("bf16", "D"), x))
    else:
        items += [_params("param", ("Wg", up), ("Wu", up), ("Wd", down)),
                  _matmul(x, ("D",), up, named(h, "g")), _matmul(x, ("D",), up, named(h, "u")),
                  Apply(act, (), "call", (h,), h), Contraction((h, h), (Op("*"),), named(h, "h")),
                  _matmul(h, ("F",), down, named(x, "m"))]
    return tuple(items + (_norm(x, norm, bias, *style.post_names(2)) if style.post else [])
                 + [_add(x, x, x, "residual")])


def _touched(tokens: str = "tokens") -> tuple[tuple[str, str], ...]:
    """Decode's experts touched by `tokens` routed (expected, under a uniform router: the
    module's docstring), and the tokens each gets."""
    return ("Et", f"E*(1 - (1 - A/E)**{tokens})"), ("Ct", "tokens*A/Et")


# the convention a report states where a program reads only the experts touched (`touches_experts`)
TOUCHED_EXPERTS = ("a mixture of experts' decode step reads the weights of Et = E*(1 - (1 - A/E)^n) experts, "
                   "the expected number its n tokens (a data-parallel replica's) touch if each picks A of the E "
                   "uniformly and independently of the others: an estimate, the most a router touches on "
                   "average (real routers are skewed and touch fewer); all E experts' weights are stored")


def touches_experts(structured: Structured) -> bool:
    """Whether a program's experts' matmuls run over Et, decode's experts touched."""
    return dim_symbol("Et") in structured.relations


def _experts(x: Tensor, seq: tuple[str, ...], mlp: str, run: tuple[str, str] = ("E", "C"),
             width: str = "F") -> list[Item]:
    """The experts' layer, each expert `width` wide (F; MLA's models' Fe), its matmuls over
    the experts `run` names and their tokens each: (E, C), all of them, or (Et, Ct), those
    a decode step touches."""
    act = "silu" if mlp == "swiglu" else "gelu"
    experts, each = run
    h, routed = t("bf16", experts, each, width), t("bf16", experts, each, "D")
    up, down = t("bf16", "E", "D", width), t("bf16", "E", width, "D")
    read_up, read_down = t("bf16", experts, "D", width), t("bf16", experts, width, "D")
    router, gates = t("fp32", *seq, "E"), t("bf16", *seq, "E")
    picked = t("bf16", *seq, "A", "D")
    return [_params("param", ("Wr", t("bf16", "D", "E")), ("Wg", up), ("Wu", up), ("Wd", down)),
            _matmul(x, ("D",), t("bf16", "D", "E"), router, "router"),
            Apply("softmax", ("E",), "prefix", (router,), gates, "the gates (the top A of them)"),
            Apply("gather", (), "prefix", (t("bf16", "tokens", "D"), t("int32", experts, each)), routed,
                  f"dispatch: each expert its {each} tokens"),
            _matmul(routed, ("D",), read_up, h), _matmul(routed, ("D",), read_up, h),
            Apply(act, (), "call", (h,), h), Contraction((h, h), (Op("*"),), h),
            _matmul(h, (width,), read_down, routed),
            Apply("gather", (), "prefix", (t("bf16", "slots", "D"), t("int32", *seq, "A")), picked,
                  "combine: each token its A experts"),
            _matmul(picked, ("A",), t("bf16", *seq, "A"), x), _add(x, x, x, "residual")]


# the layers' weight matrices (the embedding tables, the LM head, norm scales, biases and the
# router stay in bf16, as quantized checkpoints keep them: models/quant.py)
_PARAM_SHAPES = frozenset({("D", "K", "G", "H"), ("D", "K", "H"), ("K", "G", "H", "D"), ("D", "F"), ("F", "D"),
                           ("E", "D", "F"), ("E", "F", "D"), ("Et", "D", "F"), ("Et", "F", "D")})


def _stored_in(tensor: Tensor, dtype: str, sizes: dict, shapes: frozenset = _PARAM_SHAPES) -> Tensor:
    """A weight matrix's tensor in `dtype`: every bf16 tensor of such a shape (activations
    never have one: they carry B)."""
    if tensor.dtype == "bf16" and tensor.names in shapes:
        return Tensor(quant.matrix_dtype(dtype, tensor.names, sizes), tensor.dims, tensor.name, tensor.unreduced)
    return tensor
