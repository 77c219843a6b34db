"""The transformer template: a model's configuration written out as a symroof program the
user can read, edit and pass back (`symroof model NAME --print > my.sr`).

Dims: B batch, T tokens per sequence in this step, S tokens attended to (S = T in training
and prefill; the cached context in decode), D model width, F MLP width, K KV heads, G query
heads per KV head (N = K*G query heads), H head dim, L layers, V vocabulary; for a mixture
of experts E experts of which A are active per token, C = tokens*A/E tokens per expert (a
capacity factor of 1: the router's load taken as even), slots = E*C their results.
Every config field the template reads is listed in `FIELDS`. The tensors a remat policy
may keep are named: x (a block's input), q, k, v, o (attention's output), a (its
projection), g, u (the gated MLP's two projections), h (the MLP's hidden activation), m (its
output): `--remat save=x,o,h`.
"""

from __future__ import annotations

from .. import dtypes
from ..errors import SpecError
from .backward import backward
from .catalogue import FIELDS, MLPS, NORMS, POSITIONS
from .strategies import gathered, shard, subscripted


def program(config: dict, mode: str = "train", weights: str = "bf16", kv: str = "bf16",
            strategy: dict | None = None) -> str:
    """The program of a model configuration (a `models.json` entry) for one mode, its
    parameters stored in `weights` (int8, fp8: weight-only quantization, computing in
    bf16) and its KV cache in `kv`, sharded by `strategy` (strategies.parse_strategy)."""
    if mode not in _CACHE:
        raise SpecError(f"mode is one of {', '.join(_CACHE)}, not {mode!r}")
    sizes = config["sizes"]
    missing = [f for f in FIELDS if f not in sizes]
    if missing:
        raise SpecError(f"model {config.get('id', '?')}: sizes lack {', '.join(missing)}")
    N, K = sizes["N"], sizes["K"]
    if N % K:
        raise SpecError(f"model {config['id']}: {N} query heads do not group evenly over {K} KV heads")
    for field in ("id", "name"):  # written into the program's first line: one line, nothing more
        if not isinstance(config.get(field), str) or not config[field].isprintable():
            raise SpecError(f"model {config.get('id', '?')!r}: its {field} must be printable text on one line, "
                            f"not {config.get(field)!r}")
    choices = {}
    for field, known, default in (("mlp", MLPS, "swiglu"), ("norm", NORMS, "rmsnorm"),
                                  ("positions", POSITIONS, "rope")):
        choices[field] = config.get(field, default)  # a config from models.json has each (models_file.py)
        if choices[field] not in known:
            raise SpecError(f"model {config['id']}: {field} is one of {', '.join(known)}, not {choices[field]!r}")
    for field in ("bias", "tied_embeddings"):
        if not isinstance(config.get(field, False), bool):
            raise SpecError(f"model {config['id']}: {field} is true or false, not {config[field]!r}")
    mlp = choices["mlp"]
    moe = config.get("moe")
    decode = mode == "decode"
    stored = {}
    for name, dtype in (("weights", weights), ("kv", kv)):
        found = dtypes.lookup(dtype)
        if found is None:
            hint = dtypes.suggest(dtype)
            raise SpecError(f"unknown {name} dtype '{dtype}'" + (f"; did you mean '{hint}'?" if hint else ""))
        stored[name] = found.name
    kv = stored["kv"]
    seq = "" if decode else ", T"  # decode runs one token per sequence
    x = f"bf16[B{seq}, D]"
    norm = choices["norm"]
    bias = config.get("bias", False)
    lines = [f"# {config['name']}, {mode}: the transformer template (symroof model {config['id']} --print)",
             "let " + ", ".join(f"{d} = {sizes[d]}" for d in ("D", "F", "K", "H", "L", "V")) + f", G = {N // K}",
             "let N = K*G" + ("" if decode else ", S = T"),
             f"let tokens = {'B' if decode else 'B*T'}"]
    if moe:
        lines.append(f"let E = {moe['experts']}, A = {moe['active']}, C = tokens*A/E, slots = E*C")
    if choices["positions"] == "learned":
        lines.append(f"let Tmax = {sizes['context']}")
    lines += ["", "embedding Emb: bf16[V, D]", f"gather bf16[V, D], int32[B{seq}] -> {x}"]
    if choices["positions"] == "learned":
        lines += ["embedding Pos: bf16[Tmax, D]", f"gather bf16[Tmax, D], int32[B{seq}] -> {x}",
                  f"{x} + {x} -> {x}"]
    lines += ["", "repeat L {"]
    attention = _attention(x, seq, norm, bias, decode, kv, _CACHE[mode])
    feed = _mlp(x, seq, norm, bias, mlp, moe)
    lines += ["  part attention {", *("    " + line for line in attention), "  }",
              "  part mlp {", *("    " + line for line in feed), "  }"]
    lines += ["}", ""]
    lines += _norm(x, norm, bias, "Wnf", "bnf")
    if config.get("tied_embeddings", False):
        lines.append(f"{x} *_D bf16[V, D] -> bf16[B{seq}, V]   # tied: the embedding table again")
    else:
        lines += ["embedding Wout: bf16[D, V]", f"{x} *_D bf16[D, V] -> bf16[B{seq}, V]"]
    text = "\n".join(lines) + "\n"
    # the weight matrices (declared, and read as matmul operands) in their own dtype
    text = text if stored["weights"] == "bf16" else _weights_in(text, stored["weights"])
    return sharded(text, mode, strategy or {})


def sharded(text: str, mode: str, strategy: dict) -> str:
    """A template's program sharded by `strategy`, with its backward pass written out in
    training on a mesh (for the gradients' collectives)."""
    if mode != "train" or not strategy:
        return shard(text, strategy)
    split = subscripted(text, strategy)
    return gathered(split, strategy) + "\n" + gathered(backward(split, strategy), strategy)


def _norm(x: str, norm: str, bias: bool, w: str, b: str, name: str = "") -> list[str]:
    if norm == "layernorm":
        return [f"param {w}: bf16[D], {b}: bf16[D]", f"layernorm_D {name}{x}, bf16[D], bf16[D] -> {x}"]
    return [f"param {w}: bf16[D]", f"rmsnorm_D {name}{x}, bf16[D] -> {x}"]


# what the cache declaration is in each mode: decode reads the context's keys and values,
# prefill writes them; training keeps none, but their bytes per token are the model's
_CACHE = {"train": "a cache's keys and values (kv_bytes_per_token; training keeps none)",
          "prefill": "the keys and values this step writes", "decode": "the context's keys and values"}


def _attention(x: str, seq: str, norm: str, bias: bool, decode: bool, cache: str, says: str) -> list[str]:
    q, kv = f"bf16[B{seq}, K, G, H]", f"{cache}[B, S, K, H]"
    new_kv = f"{cache}[B, K, H]" if decode else kv
    lines = _norm(x, norm, bias, "Wn1", "bn1", "x: ")  # x: the block's input
    lines += ["param Wq: bf16[D, K, G, H], Wk: bf16[D, K, H], Wv: bf16[D, K, H], Wo: bf16[K, G, H, D]"]
    if bias:
        lines += ["param bq: bf16[K, G, H], bk: bf16[K, H], bv: bf16[K, H], bo: bf16[D]"]
    lines += [f"cache Kc: {kv}, Vc: {kv}   # {says}"]
    source = x if decode else "bf16[B, S, D]"
    lines += [f"{x} *_D bf16[D, K, G, H] -> q: {q}", f"{source} *_D bf16[D, K, H] -> k: {new_kv}",
              f"{source} *_D bf16[D, K, H] -> v: {new_kv}"]
    if bias:
        lines += [f"{q} + bf16[K, G, H] -> {q}", f"{new_kv} + bf16[K, H] -> {new_kv}",
                  f"{new_kv} + bf16[K, H] -> {new_kv}"]
    scores = f"fp32[B, K, G{seq}, S]"
    lines += ["fused {   # attention: the scores stay on chip",
              f"  {q} *_H {kv} -> {scores}",
              f"  softmax_S {scores} -> {scores.replace('fp32', 'bf16')}",
              f"  {scores.replace('fp32', 'bf16')} *_S {kv} -> o: {q}",
              "}",
              f"{q} *_{{K,G,H}} bf16[K, G, H, D] -> a: {x}"]
    if bias:
        lines.append(f"{x} + bf16[D] -> {x}")
    lines.append(f"{x} + {x} -> {x}   # residual")
    return lines


def _mlp(x: str, seq: str, norm: str, bias: bool, mlp: str, moe: dict | None) -> list[str]:
    lines = _norm(x, norm, bias, "Wn2", "bn2")
    if moe:
        return lines + _experts(x, seq, mlp)
    h = f"bf16[B{seq}, F]"
    act = {"swiglu": "silu", "geglu": "gelu", "gelu": "gelu"}[mlp]
    if mlp == "gelu":
        lines += ["param W1: bf16[D, F], W2: bf16[F, D]" + (", b1: bf16[F], b2: bf16[D]" if bias else ""),
                  f"{x} *_D bf16[D, F] -> {h}"]
        if bias:
            lines.append(f"{h} + bf16[F] -> {h}")
        lines += [f"{act}({h}) -> h: {h}", f"{h} *_F bf16[F, D] -> m: {x}"]
        if bias:
            lines.append(f"{x} + bf16[D] -> {x}")
    else:
        lines += ["param Wg: bf16[D, F], Wu: bf16[D, F], Wd: bf16[F, D]",
                  f"{x} *_D bf16[D, F] -> g: {h}", f"{x} *_D bf16[D, F] -> u: {h}",
                  f"{act}({h}) -> {h}", f"{h} * {h} -> h: {h}", f"{h} *_F bf16[F, D] -> m: {x}"]
    return lines + [f"{x} + {x} -> {x}   # residual"]


def _experts(x: str, seq: str, mlp: str) -> list[str]:
    act = "silu" if mlp == "swiglu" else "gelu"
    h = "bf16[E, C, F]"
    return ["param Wr: bf16[D, E], Wg: bf16[E, D, F], Wu: bf16[E, D, F], Wd: bf16[E, F, D]",
            f"{x} *_D bf16[D, E] -> fp32[B{seq}, E]   # router",
            f"softmax_E fp32[B{seq}, E] -> bf16[B{seq}, E]   # the gates (the top A of them)",
            "gather bf16[tokens, D], int32[E, C] -> bf16[E, C, D]   # dispatch: each expert its C tokens",
            f"bf16[E, C, D] *_D bf16[E, D, F] -> {h}", f"bf16[E, C, D] *_D bf16[E, D, F] -> {h}",
            f"{act}({h}) -> {h}", f"{h} * {h} -> {h}", f"{h} *_F bf16[E, F, D] -> bf16[E, C, D]",
            f"gather bf16[slots, D], int32[B{seq}, A] -> bf16[B{seq}, A, D]   # combine: each token its A experts",
            f"bf16[B{seq}, A, D] *_A bf16[B{seq}, A] -> {x}",
            f"{x} + {x} -> {x}   # residual"]


# the weight matrices and embedding tables (norm scales, biases and the router stay in bf16)
_PARAM_SHAPES = ("[D, K, G, H]", "[D, K, H]", "[K, G, H, D]", "[D, F]", "[F, D]", "[E, D, F]", "[E, F, D]",
                 "[V, D]", "[D, V]", "[Tmax, D]")


def _weights_in(text: str, dtype: str) -> str:
    """The template with its weight matrices in `dtype`: every tensor of such a shape
    (activations never have one: they carry B) is written in it."""
    for shape in _PARAM_SHAPES:
        text = text.replace(f"bf16{shape}", f"{dtype}{shape}")
    return text
