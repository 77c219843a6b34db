"""Sliding-window (local) attention and soft-capping, for the transformer template
(templates.py): Mistral 7B v0.1's window in every layer, Gemma 2's local and global layers
in turn, and Gemma 2's caps on the attention scores and the logits.

A models.json entry says so in two optional objects:

* `"sliding_window": {"window": W, "layers": n}`: n of the L layers (the local ones) attend
  to at most the W tokens before each query; the other L - n attend to the whole context.
  The template writes the local layers as their own `repeat Ll` block over the keys
  `Sl = min(S, W)` (S the context in decode, S = T in training and prefill): a local
  layer's cache holds min(S, W) tokens a sequence (a ring buffer, as vLLM's and HF's
  hybrid caches keep it) and its queries attend min(S, W) keys. The layers' order does not
  change a count, so only n is given.
* `"softcap": {"attention": c, "logits": c}` (either): cap * tanh(x / cap) on the attention
  scores (inside the fused attention: on chip) and on the logits: a multiply, a tanh (a
  transcendental) and a multiply an element.

In training and prefill the template counts each query's attention over min(T, W) keys,
as it counts a global layer's over all T (every query over every key: its convention, not
the causal half); a local layer's fused attention reads its window's keys and values, so
past T = W the keys outside one window (which a kernel reads at least once) are not in its
bytes: `CONVENTIONS` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

from ..errors import SpecError
from ..ir import dim_symbol
from ..lang.source import Let
from ..lang.structure import Structured
from ..resources import whole

WINDOW_KEYS = ("window", "layers")
# the config.json fields of soft-capping, read here (hf_config.py refuses them elsewhere)
HF_FIELDS = ("attn_logit_softcapping", "final_logit_softcapping")
SOFTCAP_KEYS = ("attention", "logits")
MAX_WINDOW = 10**9
MAX_CAP = 10**6

CONVENTIONS = (
    "sliding window: a local layer's cache holds Sl = min(S, W) tokens a sequence and its queries attend Sl keys; "
    "in training and prefill Sl = min(T, W) keys a query (every query over its window, as the template counts a "
    "global layer's every query over every key), its fused attention reading the window's keys and values: past "
    "T = W, 4·B·(T - W)·K·H bytes a local layer under what a kernel reads; kv_bytes_per_token at the S given "
    "(the local layers' min(S, W) over S); serving's steady state at the mean context is an estimate where "
    "min(S, W) bends the step inside the running contexts",
)
CAP_COMMENT = "soft cap: x / cap"  # the template's first statement of a cap (templates._capped)
SOFTCAP = "soft-capping: cap * tanh(x / cap) on the attention scores (on chip) and on the logits: 2 FLOPs and 1 " \
          "transcendental an element"


def stated(structured: Structured) -> list[str]:
    """The conventions a program with local layers or soft caps states beside the
    template's (report.py, serving.py)."""
    out = list(CONVENTIONS) if dim_symbol("Sl") in structured.relations else []
    return out + ([SOFTCAP] if f"# {CAP_COMMENT}" in structured.text else [])


def uses(config: dict) -> bool:
    """Whether some layers attend over a window shorter than the model's context."""
    return config.get("sliding_window") is not None


def softcap(config: dict, where: str) -> bool:
    """Whether the model caps its attention scores (`where` = "attention") or its logits."""
    return where in (config.get("softcap") or {})


def lets(config: dict) -> Let:
    """The window W, the local layers Ll and the keys a local layer attends, Sl."""
    window = config["sliding_window"]
    return Let((("W", str(window["window"])), ("Ll", str(window["layers"])), ("Sl", "min(S, W)")))


def counts(config: dict) -> tuple[str | None, str]:
    """The repeat counts of the global layers (None where every layer is local) and of the
    local ones."""
    local = config["sliding_window"]["layers"]
    return (None if local == config["sizes"]["L"] else "L-Ll"), "Ll"


def check_entry(model: dict, fail: Callable[[str], NoReturn]) -> None:
    """A models.json entry's `sliding_window` and `softcap` objects, as strictly as the
    catalogue's other fields."""
    window = model.get("sliding_window")
    if "sliding_window" in model:
        if not isinstance(window, dict) or set(window) != set(WINDOW_KEYS) or \
                not all(whole(window[k], MAX_WINDOW) for k in WINDOW_KEYS):
            fail("'sliding_window' must be an object of whole numbers 'window' (tokens) and 'layers' (how many "
                 "layers are local), and nothing else")
        if window["layers"] > model["sizes"]["L"]:
            fail(f"sliding_window.layers: {window['layers']} local layers, more than the model's "
                 f"{model['sizes']['L']}")
        if window["window"] >= model["sizes"]["context"]:
            fail(f"sliding_window.window: {window['window']} tokens, not below the context "
                 f"({model['sizes']['context']}): no layer is local; leave it out")
        if model.get("moe") or model.get("mla"):
            fail("sliding_window: written for dense models without MLA only")
    cap = model.get("softcap")
    if "softcap" in model:
        if not isinstance(cap, dict) or not cap or not set(cap) <= set(SOFTCAP_KEYS) or \
                not all(_cap(v) for v in cap.values()):
            fail("'softcap' must be an object of positive caps 'attention' and/or 'logits' (numbers up to "
                 f"{MAX_CAP}), and nothing else")
        if model.get("moe") or model.get("mla"):
            fail("softcap: written for dense models without MLA only")


def check_strategy(config: dict, strategy: dict) -> None:
    """A windowed model's local layers are their own repeat block, with keys Sl: sequence
    and pipeline splits, which split S and the layers, are not written for them."""
    if not uses(config):
        return
    for kind in ("sp", "pp"):
        if kind in strategy:
            raise SpecError(f"{config['id']}: {kind} is not written for sliding-window layers yet (their keys "
                            "are min(S, W), their layers a repeat block of their own); dp, fsdp, zero and tp are")


def from_hf(data: dict, kind: str, layers: int, context: int, fail: Callable[[str], NoReturn]) -> dict:
    """The `sliding_window` and `softcap` objects of a Mistral, Gemma 2 or Gemma 3 config.json:
    a Mistral's window binds in every layer, Gemma 2's in every other from the first, Gemma
    3's in all but every sliding_window_pattern-th (6: 5 local to 1 global); `layer_types`,
    where given, lists them."""
    out: dict = {}
    window = data.get("sliding_window")
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
        fail(f"sliding_window must be a whole number of tokens or null, not {str(window)[:40]}")
    if window is not None and window < context:
        kinds = data.get("layer_types")
        if kinds is not None:
            if not isinstance(kinds, list) or len(kinds) != layers or \
                    any(k not in ("sliding_attention", "full_attention") for k in kinds):
                fail(f"layer_types: {str(kinds)[:60]}: one of sliding_attention or full_attention a layer")
            local = sum(k == "sliding_attention" for k in kinds)
        elif kind == "gemma3_text":  # every sliding_window_pattern-th layer global, the rest local
            pattern = data.get("sliding_window_pattern", 6)
            if isinstance(pattern, bool) or not isinstance(pattern, int) or pattern < 1:
                fail(f"sliding_window_pattern must be a whole number of layers, not {str(pattern)[:40]}")
            local = layers - layers // pattern
        else:
            local = (layers + 1) // 2 if kind == "gemma2" else layers
        if local:
            out["sliding_window"] = {"window": window, "layers": local}
    caps = {}
    for key, field in (("attention", "attn_logit_softcapping"), ("logits", "final_logit_softcapping")):
        value = data.get(field)
        if value is None:
            continue
        if not _cap(value):
            fail(f"{field} must be a positive number or null, not {str(value)[:40]}")
        caps[key] = value
    if caps:
        out["softcap"] = caps
    return out


def _cap(value: object) -> bool:
    """Whether a soft cap is a positive number up to MAX_CAP (not a JSON boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= MAX_CAP
