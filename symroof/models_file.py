"""models.json: real transformer configurations, each with the source of its sizes and of
its published parameter count. Read and checked here; a missing field is an error that
names the model and the field."""

from __future__ import annotations

import difflib
import functools
import json
from pathlib import Path

from .errors import SpecError
from .resources import resource_path

FIELDS = ("D", "L", "N", "K", "H", "F", "V", "context")  # the sizes the transformer template reads
MLPS = ("swiglu", "geglu", "gelu")
_REQUIRED = ("id", "name", "sizes", "params_published", "sources")


@functools.cache
def _load(path: str) -> tuple[dict, ...]:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as err:
        raise SpecError(f"cannot read models file {path}: {str(err) or type(err).__name__}") from None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        raise SpecError(f"models file {path}: expected an object with a list 'models'")
    for k, model in enumerate(models):
        where = f"models file {path}, model {model.get('id', k) if isinstance(model, dict) else k}"
        if not isinstance(model, dict):
            raise SpecError(f"{where}: a model is an object")
        for field in _REQUIRED:
            if field not in model:
                raise SpecError(f"{where}: missing field '{field}'")
        for field, kind in (("id", str), ("name", str), ("sizes", dict), ("sources", dict)):
            if not isinstance(model[field], kind) or kind is str and not model[field].strip():
                raise SpecError(f"{where}: '{field}' must be {'text' if kind is str else 'an object'}")
        aliases = model.get("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
            raise SpecError(f"{where}: 'aliases' must be a list of names")
        moe = model.get("moe")
        if moe is not None and not (isinstance(moe, dict) and all(
                isinstance(moe.get(k), int) and not isinstance(moe.get(k), bool) and moe[k] > 0
                for k in ("experts", "active"))):
            raise SpecError(f"{where}: 'moe' must be an object with whole numbers 'experts' and 'active'")
        sizes = model["sizes"]
        for field in FIELDS:
            value = sizes.get(field) if isinstance(sizes, dict) else None
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise SpecError(f"{where}: sizes.{field} must be a positive whole number, got {value!r}")
        if model.get("mlp", "swiglu") not in MLPS:
            raise SpecError(f"{where}: mlp is one of {', '.join(MLPS)}, got {model.get('mlp')!r}")
        for field in ("sizes", "params_published"):
            if not model["sources"].get(field):
                raise SpecError(f"{where}: sources.{field} is missing: every figure carries its source")
    return tuple(models)


def models(path: str | None = None) -> tuple[dict, ...]:
    """Every model in the file (the shipped models.json by default)."""
    return _load(str(path or resource_path("models.json")))


def get_model(name: str, path: str | None = None) -> dict:
    """A model by id or alias, case-insensitive; an unknown name suggests the nearest."""
    key = name.strip().lower()
    found = models(path)
    for model in found:
        if key == model["id"] or key in (a.lower() for a in model.get("aliases", ())):
            return model
    names = [m["id"] for m in found]
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(names)})"
    raise SpecError(f"unknown model '{name}'{hint}")
