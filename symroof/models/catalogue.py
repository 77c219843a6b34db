"""models.json: real transformer configurations, each with the source of its sizes and of
its published parameter count. Read and checked here, as strictly as the hardware file
(hardware/file.py): a wrong field would silently change every number drawn from it.

Every problem is one error naming the file, the model and the field: an unknown field (with
a "did you mean"), a missing one, a value of the wrong type or out of range, a choice that
is not one of its choices (no fallback: `"norm": "batchnorm"` is not read as rmsnorm), a
flag that is not a JSON boolean (`"bias": "no"` is not true), `moe.active` above
`moe.experts`, a duplicate id, a model given by its parameter count (`params`, with
whichever sizes are known) that carries a template's field, an alias that also names another model, and a name with a
line break or another character that does not print (the name is written into the
template's program text). The file is bounded in size, and so is each text and number.
`get_model` also takes a path ending .json: a local Hugging Face config.json, read by
hf_config.py into an entry of the same shape.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Callable
from typing import NoReturn

from ..errors import SpecError
from ..resources import describe, did_you_mean, load_json, read_input, resource_path, whole
from . import hf_config, mla, windows

FIELDS = ("D", "L", "N", "K", "H", "F", "V", "context")  # the sizes the transformer template reads
MLPS = ("swiglu", "geglu", "gelu")
NORMS = ("rmsnorm", "layernorm")
POSITIONS = ("rope", "learned")
_CHOICES = {"mlp": MLPS, "norm": NORMS, "positions": POSITIONS}
# Optional choices (the first when left out): where a layer's norms sit (OLMo 2 normalizes
# each sublayer's output before the residual, not its input), and an RMSNorm over the whole
# query and key projections (OLMo 2's q_norm, k_norm) before attention
NORM_POSITIONS = ("pre", "post", "both")
QK_NORMS = ("none", "whole", "head")
OPTIONAL_CHOICES = {"norm_position": NORM_POSITIONS, "qk_norm": QK_NORMS}
_FLAGS = ("tied_embeddings", "bias")
# Optional flags (false when left out): biases on q, k and v only (Qwen2's attention; `bias`
# puts them on every projection), and a published count the publisher rounded ("7.61B"),
# which the tests hold to 1% where a checkpoint's exact sum is held to 0.5%
_OPTIONAL_FLAGS = ("qkv_bias", "params_rounded")
_MODEL_KEYS = ("id", "name", "aliases", "sizes", *_CHOICES, *OPTIONAL_CHOICES, *_FLAGS, *_OPTIONAL_FLAGS, "moe", "mla",
               "sliding_window", "softcap", "params_published", "params", "sources")
_REQUIRED = ("id", "name", "sizes", *_CHOICES, *_FLAGS, "params_published", "sources")
# A model given by its parameter count (`params`) and the sizes known of it, if any
# (models/counted.py): no template, so none of its fields
_COUNTED_REQUIRED = ("id", "name", "params", "sources")
_TEMPLATE_ONLY = (*_CHOICES, *OPTIONAL_CHOICES, *_FLAGS, *_OPTIONAL_FLAGS, "moe", "mla", "sliding_window", "softcap",
                  "params_published")
_COUNTED_SOURCE_KEYS = ("params", "sizes")
_FILE_KEYS = ("about", "models")
_SOURCE_KEYS = ("sizes", "params_published", "moe", "mla")
_MOE_KEYS = ("experts", "active")

MAX_FILE_BYTES = 1_000_000  # the shipped file is under 10 kB
MAX_MODELS = 1000
MAX_SIZE = 10**12           # a width, a vocabulary or a context far beyond any model's
MAX_PARAMS = 10**18
MAX_TEXT = 2000             # a source or the file's `about`
MAX_NAME = 100
# An id or alias: what `symroof model NAME` takes, one word (looked up case-insensitively).
_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}")


def _describe(value: object) -> str:
    return describe(value, 60)


def _load(path: str) -> tuple[dict, ...]:
    """The checked models of a file, read again each time (a file edited between two calls
    is never answered from the cache), checked once for each content."""
    return _checked(path, read_input(path, MAX_FILE_BYTES, "models file", SpecError))


@functools.lru_cache(maxsize=16)
def _checked(path: str, raw: bytes) -> tuple[dict, ...]:
    try:
        data = load_json(raw)
    except ValueError as err:
        raise SpecError(f"models file {path}: {err}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise SpecError(f"models file {path}: expected an object with a list 'models'")
    for key in data:
        if key not in _FILE_KEYS:
            raise SpecError(f"models file {path}: {key}: unknown top-level field{did_you_mean(key, _FILE_KEYS)}")
    about = data.get("about", "")
    if not isinstance(about, str) or len(about) > MAX_TEXT:
        raise SpecError(f"models file {path}: about: must be text of at most {MAX_TEXT} characters")
    models = data["models"]
    if not models:
        raise SpecError(f"models file {path}: models: the list is empty")
    if len(models) > MAX_MODELS:
        raise SpecError(f"models file {path}: models: {len(models)} models, more than {MAX_MODELS}")
    owners: dict[str, int] = {}  # each name a model answers to (lower case) -> the model's index
    for k, model in enumerate(models):
        _check_model(path, k, model)
        for field, spelling in (("id", model["id"]), *(("aliases", a) for a in model.get("aliases", ()))):
            owner = owners.setdefault(spelling.lower(), k)
            if owner != k:
                other = models[owner]["id"]
                what = f"duplicate id (model #{k} repeats model #{owner})" if field == "id" and \
                    other.lower() == spelling.lower() else f"{spelling!r} also names model {other!r}"
                raise SpecError(f"models file {path}, model {model['id']}: {field}: {what}; a name picks one "
                                "model")
    return tuple(models)


def _check_model(path: str, k: int, model: object) -> None:
    """One entry of the file, every field checked; a problem raises naming the model and
    the field."""
    label = model["id"] if isinstance(model, dict) and isinstance(model.get("id"), str) \
        and _ID.fullmatch(model["id"]) else f"#{k}"
    where = f"models file {path}, model {label}"

    def fail(problem: str) -> NoReturn:
        raise SpecError(f"{where}: {problem}")

    if not isinstance(model, dict):
        fail(f"a model is an object, not {_describe(model)}")
    for key in model:
        if key not in _MODEL_KEYS:
            fail(f"{key}: unknown field{did_you_mean(key, _MODEL_KEYS)}")
    counted = "params" in model
    for field in _COUNTED_REQUIRED if counted else _REQUIRED:
        if field not in model:
            fail(f"missing field '{field}'" + (" (a model given by `params` needs it too)" if counted else ""))
    for field in ("id", *(("aliases",) if "aliases" in model else ())):
        names = [model[field]] if field == "id" else model[field]
        if field == "aliases" and not isinstance(names, list):
            fail(f"'aliases' must be a list of names, not {_describe(names)}")
        for name in names:
            if not isinstance(name, str) or not _ID.fullmatch(name):
                fail(f"'{field}' must be {'a name' if field == 'id' else 'a list of names'}: one word of letters, "
                     f"digits and . _ + - (up to 64), not {_describe(name)}")
    name = model["name"]
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME or not name.isprintable():
        fail(f"'name' must be text on one line of at most {MAX_NAME} printable characters (no line break: "
             f"it is written into the model's program), not {_describe(name)}")
    if counted:
        _check_counted(model, fail)
        return
    sizes = model["sizes"]
    if not isinstance(sizes, dict):
        fail(f"'sizes' must be an object, not {_describe(sizes)}")
    for field in sizes:
        if field not in FIELDS:
            fail(f"sizes.{field}: unknown size{did_you_mean(field, FIELDS)} (the sizes: {', '.join(FIELDS)})")
    for field in FIELDS:
        value = sizes.get(field)
        if not whole(value, MAX_SIZE):
            fail(f"sizes.{field} must be a positive whole number up to {MAX_SIZE:.0e}, got {_describe(value)}")
    if sizes["N"] % sizes["K"]:
        fail(f"sizes.N: {sizes['N']} query heads do not group evenly over sizes.K = {sizes['K']} KV heads")
    for field, choices in (*_CHOICES.items(), *((f, c) for f, c in OPTIONAL_CHOICES.items() if f in model)):
        if model[field] not in choices:
            fail(f"{field} is one of {', '.join(choices)}, got {_describe(model[field])}"
                 + (did_you_mean(model[field], choices) if isinstance(model[field], str) else ""))
    for field in (*_FLAGS, *(f for f in _OPTIONAL_FLAGS if f in model)):
        if not isinstance(model[field], bool):
            fail(f"{field} must be true or false (a JSON boolean), not {_describe(model[field])}")
    if model["bias"] and model.get("qkv_bias"):
        fail("qkv_bias: 'bias' already puts biases on q, k and v (and every other projection); give one of them")
    moe = model.get("moe")
    if moe is not None:
        if not isinstance(moe, dict) or not set(_MOE_KEYS) <= set(moe) <= {*_MOE_KEYS, *mla.SHARED_KEYS,
                                                                           mla.ROUTER_BIAS} or \
                not all(whole(moe[key], MAX_SIZE) for key in _MOE_KEYS):
            fail(f"'moe' must be an object with whole numbers 'experts' and 'active' (and nothing else), "
                 f"not {json.dumps(moe)[:80] if isinstance(moe, (dict, list)) else _describe(moe)}")
        if moe["active"] > moe["experts"]:
            fail(f"moe.active: {moe['active']} experts active per token, more than moe.experts = {moe['experts']}")
    mla.check_entry(model, fail)
    windows.check_entry(model, fail)
    if not whole(model["params_published"], MAX_PARAMS):
        fail(f"params_published must be a positive whole number, got {_describe(model['params_published'])}")
    _check_sources(model["sources"], _SOURCE_KEYS, ("sizes", "params_published"), fail)


def _check_counted(model: dict, fail: Callable[[str], NoReturn]) -> None:
    """A model given by its parameter count: `params`, any of the sizes (each checked as a
    full model's), and the sources of both; no template field."""
    for field in _TEMPLATE_ONLY:
        if field in model:
            fail(f"{field}: a model given by 'params' has no template to choose for; drop {field} (or give every "
                 "size and the template's fields, with params_published, in place of params)")
    if not whole(model["params"], MAX_PARAMS):
        fail(f"params must be a positive whole number up to {MAX_PARAMS:.0e}, got {_describe(model['params'])}")
    sizes = model.get("sizes", {})
    if not isinstance(sizes, dict):
        fail(f"'sizes' must be an object, not {_describe(sizes)}")
    for field, value in sizes.items():
        if field not in FIELDS:
            fail(f"sizes.{field}: unknown size{did_you_mean(field, FIELDS)} (the sizes: {', '.join(FIELDS)})")
        if not whole(value, MAX_SIZE):
            fail(f"sizes.{field} must be a positive whole number up to {MAX_SIZE:.0e}, got {_describe(value)}")
    if "N" in sizes and "K" in sizes and sizes["N"] % sizes["K"]:
        fail(f"sizes.N: {sizes['N']} query heads do not group evenly over sizes.K = {sizes['K']} KV heads")
    _check_sources(model["sources"], _COUNTED_SOURCE_KEYS, ("params", *(("sizes",) if sizes else ())), fail)


def _check_sources(sources: object, keys: tuple[str, ...], required: tuple[str, ...],
                   fail: Callable[[str], NoReturn]) -> None:
    """`sources`: an object naming sourced fields only (`keys`), each with its source as
    text, and every field in `required` among them."""
    if not isinstance(sources, dict):
        fail(f"'sources' must be an object, not {_describe(sources)}")
    for field in sources:
        if field not in keys:
            fail(f"sources.{field}: names no sourced field{did_you_mean(field, keys)}")
        if not isinstance(sources[field], str) or not sources[field].strip() or len(sources[field]) > MAX_TEXT:
            fail(f"sources.{field} must be text of at most {MAX_TEXT} characters, not {_describe(sources[field])}")
    for field in required:
        if field not in sources:
            fail(f"sources.{field} is missing: every figure carries its source")


def models(path: str | None = None) -> tuple[dict, ...]:
    """Every model in the file (the shipped models.json by default)."""
    return _load(str(path or resource_path("models.json")))


def configured(path: str | None = None) -> tuple[dict, ...]:
    """The models with a full configuration (the template's): all but those given by `params`."""
    return tuple(m for m in models(path) if "params" not in m)


def get_model(name: str, path: str | None = None) -> dict:
    """A model by id or alias, case-insensitive; an unknown name suggests the nearest. A
    name ending in .json is a local Hugging Face config.json, read (hf_config.py)."""
    if hf_config.is_config_path(name):
        return hf_config.read(name)
    key = name.strip().lower()
    found = models(path)
    for model in found:
        if key in (n.lower() for n in (model["id"], *model.get("aliases", ()))):
            return model
    names = [m["id"] for m in found]
    close = difflib.get_close_matches(key, [n.lower() for n in names], n=1, cutoff=0.5)
    hint = f"; did you mean {names[[n.lower() for n in names].index(close[0])]}?" if close else \
        f" (known: {', '.join(names)})"
    raise SpecError(f"unknown model '{name}'{hint}")
