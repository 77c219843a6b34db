"""A local Hugging Face `config.json` read as the transformer template's configuration
(the shape of a models.json entry), for `symroof model path/config.json`.

Each `model_type` the template writes exactly has one row in `FAMILIES`: its MLP, norm,
positions and biases, and the field names of its sizes. Anything else is refused in one
line naming it, never guessed: an unknown `model_type`, a missing size, and a field that
changes the architecture in a way the template cannot write (a sliding window that binds,
logit soft-capping, MLA's low-rank projections outside DeepSeek's model types, biases the
template has no place for). DeepSeek-V2/V3's MLA and experts are read by mla.py; Mistral's
and Gemma 2's sliding windows and Gemma 2's soft-capping by windows.py.
Fields that change no count (rope_scaling, rope_theta, the norms' epsilon, token ids) are
read past. The file is input: its size is bounded and every value read is type-checked.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from ..errors import SpecError
from ..resources import describe, load_json, read_bounded
from . import mla, windows

MAX_BYTES = 1_000_000  # a config.json is a few kB
MAX_SIZE = 10**12


@dataclass(frozen=True)
class Family:
    """How one `model_type` maps onto the template."""
    gated: bool                   # a gated MLP (swiglu or geglu, by hidden_act) or GPT-2's plain one
    norm: str
    positions: str
    tied: bool                    # tie_word_embeddings when the file leaves it out (the HF class's default)
    window: bool = False          # sliding_window is a field of this family (it must not bind)
    window_switch: bool = False   # use_sliding_window turns it on (Qwen2; off by default)
    qkv_bias: bool = False        # biases on q, k and v only (Qwen2)
    attention_bias: bool = False  # attention_bias (q, k, v and o) is a field of this family
    moe: bool = False
    mla: bool = False             # DeepSeek's latent attention and experts (mla.py)
    norm_position: str = "pre"    # the layer's norms: on each sublayer's input, output (OLMo 2) or both (Gemma 2)
    qk_norm: str = "none"         # an RMSNorm over the whole q and k projections (OLMo 2's) or each head (Gemma 3's)
    local: bool = False           # a binding sliding_window and soft-capping are read (windows.py)
    sizes: tuple[tuple[str, str], ...] = (("D", "hidden_size"), ("L", "num_hidden_layers"),
                                          ("N", "num_attention_heads"), ("F", "intermediate_size"),
                                          ("V", "vocab_size"), ("context", "max_position_embeddings"))


_GPT2_SIZES = (("D", "n_embd"), ("L", "n_layer"), ("N", "n_head"), ("V", "vocab_size"), ("context", "n_positions"))
FAMILIES = {
    "llama": Family(True, "rmsnorm", "rope", tied=False, attention_bias=True),
    "mistral": Family(True, "rmsnorm", "rope", tied=False, window=True, local=True),
    "mixtral": Family(True, "rmsnorm", "rope", tied=False, window=True, moe=True),
    "qwen2": Family(True, "rmsnorm", "rope", tied=False, window=True, window_switch=True, qkv_bias=True),
    "gemma": Family(True, "rmsnorm", "rope", tied=True, attention_bias=True),
    "phi3": Family(True, "rmsnorm", "rope", tied=False, window=True),
    "gpt2": Family(False, "layernorm", "learned", tied=True, sizes=_GPT2_SIZES),
    "deepseek_v2": Family(True, "rmsnorm", "rope", tied=False, mla=True),
    "deepseek_v3": Family(True, "rmsnorm", "rope", tied=False, mla=True),
    "olmo2": Family(True, "rmsnorm", "rope", tied=False, attention_bias=True, norm_position="post", qk_norm="whole"),
    "gemma2": Family(True, "rmsnorm", "rope", tied=True, attention_bias=True, window=True, norm_position="both",
                     local=True),
    "gemma3_text": Family(True, "rmsnorm", "rope", tied=True, attention_bias=True, window=True, norm_position="both",
                          qk_norm="head", local=True),
}
# model types whose attention the template cannot write yet: what they need
_NOT_YET = {
    "gemma3": "vision tower (its text_config, written as a gemma3_text config of its own, is read)",
    "phi3small": "block-sparse attention",
    "qwen2_moe": "shared experts",
}
# fields that, set (not null, not false), change the architecture past the template
_REFUSED = {
    "attn_logit_softcapping": "logit soft-capping",
    "final_logit_softcapping": "logit soft-capping",
    "q_lora_rank": "multi-head latent attention's low-rank projections",
    "kv_lora_rank": "multi-head latent attention's low-rank projections",
    "n_shared_experts": "shared experts",
    "mlp_bias": "biases on the gated MLP",
    "use_qk_norm": "QK-norm",
    "add_cross_attention": "cross-attention layers",
    # a quantized checkpoint: its scheme is the --weights flag's (quant.py), not read from here
    "quantization_config": "a quantized checkpoint's scheme: remove the field and name the scheme with --weights "
                           "(fp8-b128 for DeepSeek-V3's 128x128 blocks, int4-g128 for AWQ and GPTQ, mxfp4, nvfp4)",
}
_GATED = {"silu": "swiglu", "swish": "swiglu", "gelu": "geglu", "gelu_pytorch_tanh": "geglu", "gelu_new": "geglu"}
_GPT2_ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast")


def _shown(value: object) -> str:
    """A value as the file wrote it where short ('bloom', 4096), else described."""
    if isinstance(value, (str, int)) and not isinstance(value, bool) and len(repr(value)) <= 40:
        return repr(value)
    return describe(value, 40)


def is_config_path(name: str) -> bool:
    """Whether NAME is taken as a config.json path (it ends in .json) rather than a model's name."""
    return name.strip().lower().endswith(".json")


def read(path: str) -> dict:
    """The template configuration of the Hugging Face config file at `path`."""
    # the id and name are written into the program's first line, and the path into one-line
    # errors: printable, or the file's plain name
    label = path if path.isprintable() else (Path(path).name if Path(path).name.isprintable() else "config.json")
    where = f"config file {label}"

    def fail(problem: str) -> NoReturn:
        raise SpecError(f"{where}: {problem}")

    try:
        raw = read_bounded(path, MAX_BYTES)
    except (OSError, ValueError) as err:
        raise SpecError(f"cannot read {where}: {getattr(err, 'strerror', None) or err}") from None
    if raw is None:
        fail(f"more than {MAX_BYTES} bytes, more than a config.json has")
    try:
        data = load_json(raw)
    except ValueError as err:
        fail(str(err))
    if not isinstance(data, dict):
        fail(f"a config is a JSON object, not {describe(data, 40)}")
    kind = data.get("model_type")
    if kind is None:
        fail("no model_type: symroof reads a Hugging Face config by its model_type")
    if not isinstance(kind, str):
        fail(f"model_type must be text, not {describe(kind, 40)}")
    if kind in _NOT_YET:
        fail(f"model_type {kind!r}: its {_NOT_YET[kind]} the transformer template cannot write yet")
    if kind not in FAMILIES:
        fail(f"model_type {_shown(kind)} is not one symroof reads (it reads {', '.join(FAMILIES)})")
    family = FAMILIES[kind]
    for field, what in _REFUSED.items():
        if data.get(field) not in (None, False, 0) and not (family.mla and field in mla.HF_FIELDS) \
                and not (family.local and field in windows.HF_FIELDS):
            fail(f"{field}: {what}, which the transformer template cannot write")

    # newer configs list each layer's kind; only full attention in every layer is the template's
    # (Mistral's and Gemma 2's sliding layers are counted by windows.py)
    kinds = data.get("layer_types")
    if kinds is not None and not family.local and \
            (not isinstance(kinds, list) or any(k != "full_attention" for k in kinds)):
        fail(f"layer_types: {describe(kinds, 40)}: layers other than full attention, which the transformer "
             "template cannot write yet")

    def whole(field: str) -> int:
        value = data.get(field)
        if value is None:
            fail(f"missing field '{field}' (a {kind} config gives it)")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_SIZE:
            fail(f"{field} must be a positive whole number, not {describe(value, 40)}")
        return value

    def flag(field: str, default: bool) -> bool:
        value = data.get(field, default)
        if not isinstance(value, bool):
            fail(f"{field} must be true or false, not {describe(value, 40)}")
        return value

    sizes = {name: whole(field) for name, field in family.sizes}
    heads = sizes["N"]
    # HF's own defaults where the class has one: as many KV heads as query heads,
    # head_dim = hidden_size / heads, GPT-2's MLP four times its width
    sizes["K"] = whole("num_key_value_heads") if data.get("num_key_value_heads") is not None else heads
    if family.mla:  # MLA's heads are its own fields (mla.py): K and H only name them
        sizes["K"], sizes["H"] = heads, whole("v_head_dim")
    elif data.get("head_dim") is not None:
        sizes["H"] = whole("head_dim")
    elif sizes["D"] % heads:
        fail(f"hidden_size {sizes['D']} does not split over {heads} heads and no head_dim is given")
    else:
        sizes["H"] = sizes["D"] // heads
    if kind == "gpt2":
        sizes["F"] = whole("n_inner") if data.get("n_inner") is not None else 4 * sizes["D"]
    if heads % sizes["K"]:
        fail(f"num_attention_heads: {heads} query heads do not group evenly over {sizes['K']} KV heads")
    _window(data, family, sizes["context"], fail)
    act_field = "activation_function" if kind == "gpt2" else \
        ("hidden_activation" if data.get("hidden_activation") is not None else "hidden_act")
    act = data.get(act_field, "gelu_new" if kind == "gpt2" else None)
    if family.gated:
        if act not in _GATED:
            fail(f"{act_field} {_shown(act)}: a gated MLP of silu or gelu is what the template writes")
        mlp = _GATED[act]
    else:
        if act not in _GPT2_ACTS:
            fail(f"{act_field} {_shown(act)}: the template's plain MLP is a GELU")
        mlp = "gelu"
    if not family.attention_bias and data.get("attention_bias") not in (None, False):
        fail(f"attention_bias: not a field a {kind} model reads; its biases are fixed by its model_type")
    bias = kind == "gpt2" or flag("attention_bias", False)
    config: dict = {"id": label, "name": f"{kind} config {Path(label).name}", "sizes": sizes, "mlp": mlp,
                    "norm": family.norm, "positions": family.positions,
                    "tied_embeddings": flag("tie_word_embeddings", family.tied), "bias": bias,
                    "qkv_bias": family.qkv_bias and not bias}
    if family.norm_position != "pre":
        config["norm_position"] = family.norm_position
    if family.local:
        config.update(windows.from_hf(data, kind, sizes["L"], sizes["context"], fail))
    if family.qk_norm != "none":
        config["qk_norm"] = family.qk_norm
    if family.moe:
        experts, active = whole("num_local_experts"), whole("num_experts_per_tok")
        if active > experts:
            fail(f"num_experts_per_tok: {active} experts a token, more than num_local_experts = {experts}")
        config["moe"] = {"experts": experts, "active": active}
    if family.mla:
        config.update(mla.from_hf(data, kind, whole, fail))
    return config


def _window(data: dict, family: Family, context: int, fail: Callable[[str], NoReturn]) -> None:
    """A sliding window must not bind: null, switched off (Qwen2's use_sliding_window,
    false by default), or at least the context (Phi-3 mini 128k's 262144)."""
    window = data.get("sliding_window")
    if family.local or window is None or (family.window_switch and data.get("use_sliding_window", False) is False):
        return
    if not family.window:
        fail(f"sliding_window: {_shown(window)}, a field this model_type does not have")
    if isinstance(window, bool) or not isinstance(window, int) or window < context:
        fail(f"sliding_window: {_shown(window)}: attention over a sliding window, which the transformer "
             "template cannot write yet (null, or at least max_position_embeddings, is read)")
