"""Claims about whole models, and the claims file read (`load_claims`, every claim's shape
checked, each claim knowing its line). A claim that names `model:` (a models.json id or alias) in
place of a spec, checked against `symroof.model` in the frame and with the comparisons of
check.py (numbers within a relative `tolerance`, expressions exactly).

    id: llama-3-70b-kv-cache
    model: llama-3-70b
    mode: decode                      # train (the default), prefill or decode
    chip: h100                        # a name, or {name: h100, variant: ..., peak_flops, hbm_bw}
    sizes: {B: 32, S: 4096}           # default B = 1 and the model's context
    chips: 8                          # also optimizer, grads, master, hbm_usable, remat, mfu: as `symroof model`
    expect:
      params: 70.55e9
      kv_bytes_per_token: 327680
    tolerance: 0.01

The keys of `expect` are the model quantities (`symroof.models.decls.MODEL_QUANTITIES`); one that does not
apply to the claim (a training one in decode, a chip's without a chip) is an error, as an
unknown key or an unknown model is. `check_case` takes either kind of claim.

Examples:
    >>> r = check_case({"id": "kv", "model": "llama-3-70b", "mode": "decode",
    ...                 "expect": {"kv_bytes_per_token": 327680}})
    >>> r.ok, r.outcomes[0].got
    (True, 327680)
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterator, Mapping

import sympy
import yaml

from ..errors import SymroofError
from ..hardware.machines import Machine, machine
from ..lang.sizes import size_value
from ..models.decls import MODEL_QUANTITY
from ..models.report import model
from ..models.whole import Model
from ..resources import read_text_bounded
from . import check
from .check import CaseResult, Outcome

# The keys a model claim may have: a typo (`size:`, or a spec claim's `set:`) is an error,
# never a setting silently left at its default.
KEYS = ("id", "model", "mode", "chip", "sizes", "chips", "optimizer", "grads", "master", "hbm_usable", "remat", "mfu",
        "expect", "tolerance", "book", "quote", "issue")
_CHIP_KEYS = ("name", "variant", "peak_flops", "hbm_bw")
MAX_FILE_BYTES = 5_000_000  # a claims file; the chapter's is under 10 kB
MAX_CLAIMS = 2000  # in one file (the chapter's has 38): checked one by one, a few ms each


class Claim(dict):
    """A claim as `load_claims` reads it: a mapping that knows the line of the file it
    starts on (`line`), for the report to say where a claim that cannot be checked is."""

    line: int | None = None


def check_case(case: object, hardware: str | os.PathLike | None = None) -> CaseResult:
    """A claim about a model (it names `model:`) or about a spec (check.check_case)."""
    if isinstance(case, Mapping) and "model" in case:
        return check_model_case(case, hardware)
    return check.check_case(case, hardware)


def check_model_case(case: Mapping, hardware: str | os.PathLike | None = None) -> CaseResult:
    """Build the model a claim names and compare each expected quantity."""

    def outcomes(expect: Mapping, tolerance: float) -> list[Outcome]:
        m = _model(case, hardware)  # a size for a dim the model lacks is refused there
        names = set(m.structured.program.dims) | {s.name for s in m.structured.relations}
        return [check.compared(str(key), _quantity(m, str(key)), value, tolerance, names)
                for key, value in expect.items()]

    return check.checked(case, outcomes)


def _model(case: Mapping, hardware: str | os.PathLike | None) -> Model:
    check.unknown_keys(case, KEYS, "a model claim", {"set": "sizes"})
    name = case["model"]
    if not isinstance(name, str) or not name.strip():
        raise SymroofError(f"'model' must name a model in models.json (llama-3-70b), not {name!r}")
    sizes = case.get("sizes") or {}
    if not isinstance(sizes, Mapping):
        raise SymroofError("'sizes' must be a mapping such as {B: 32, S: 4096}")
    given = {str(dim): size_value(value, f"sizes: {dim}") for dim, value in sizes.items()}
    mfu = case.get("mfu")
    if mfu is not None and (isinstance(mfu, bool) or not isinstance(mfu, (int, float))):
        raise SymroofError(f"'mfu' must be a fraction of the peak such as 0.4, not {mfu!r}")
    return model(name, str(case.get("mode", "train")), _machine(case.get("chip"), hardware), given,
                 chips=size_value(case.get("chips", 1), "chips"), optimizer=case.get("optimizer", "adam"),
                 remat=case.get("remat", "full"), mfu=mfu, grads=case.get("grads"), master=case.get("master"),
                 hbm_usable=case.get("hbm_usable", 0.9))


def _machine(chip: object, hardware: str | os.PathLike | None) -> Machine | None:
    """The chip a claim names, from the hardware file `symroof check --hardware` reads."""
    if chip is None:
        return None
    if isinstance(chip, str):
        chip = {"name": chip}
    if not isinstance(chip, Mapping) or not chip.get("name"):
        raise SymroofError("'chip' must be a chip's name (h100) or a mapping such as {name: h100, variant: ...}")
    unknown = set(chip) - set(_CHIP_KEYS)
    if unknown:
        raise SymroofError(f"unsupported chip figure(s) {sorted(unknown)} in a model claim "
                           f"(known: {', '.join(_CHIP_KEYS)})")
    return machine(str(chip["name"]), variant=chip.get("variant"), peak_flops=chip.get("peak_flops"),
                   hbm_bw=chip.get("hbm_bw"), hardware=hardware)


def _quantity(m: Model, key: str) -> sympy.Basic:
    """A model quantity by name; why not, in one line, where the claim's model has none."""
    q = MODEL_QUANTITY.get(key)
    if q is None:
        close = difflib.get_close_matches(key, list(MODEL_QUANTITY), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]}?" if close else f" (known: {', '.join(MODEL_QUANTITY)})"
        raise SymroofError(f"unknown model quantity '{key}'{hint}")
    # Model.quantities() leaves these out; asked for by name, it would derive them anyway
    if q.train_only and m.options.mode != "train":
        raise SymroofError(f"'{key}' is a training quantity; this claim's mode is {m.options.mode}")
    if q.needs_chip and m.machine is None:
        raise SymroofError(f"'{key}' needs a chip: name one, e.g. 'chip: h100'")
    return getattr(m, key)  # tokens and the per-token ones say themselves when a program has no tokens


def load_claims(path: str | os.PathLike) -> list[object]:
    """The claims of a YAML file: a list of claims, or a mapping with a `claims` list. An
    entry that is not a mapping is kept: checking it gives its own ERROR row."""
    text = read_text_bounded(path, MAX_FILE_BYTES, "claims file", SymroofError)
    loader = None
    try:
        loader = _Loader(text)  # its reader refuses a character YAML does not allow, here
        node = loader.get_single_node()
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" (line {where.line + 1}, column {where.column + 1})" if where is not None else \
            f" (character {error.position + 1})" if isinstance(getattr(error, "position", None), int) else ""
        # one line: a ReaderError's text goes on with the file's name and position
        problem = (str(getattr(error, "problem", None) or error).strip().splitlines() or ["?"])[0]
        raise SymroofError(f"{path}: not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise SymroofError(f"{path}: not valid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
    items = node.value if isinstance(node, yaml.SequenceNode) else []
    if isinstance(data, Mapping) and isinstance(data.get("claims"), list):
        data = data["claims"]
        items = next((v.value for k, v in node.value if k.value == "claims"), [])
    if not isinstance(data, list):
        raise SymroofError(f"{path}: expected a list of claims (mappings with spec, chip, expect)")
    if not data:
        raise SymroofError(f"{path}: no claims to check")
    if len(data) > MAX_CLAIMS:
        raise SymroofError(f"{path}: {len(data):,} claims, more than the {MAX_CLAIMS:,} a claims file may have "
                           "(split it)")
    found = []
    for k, claim in enumerate(data):
        if isinstance(claim, Mapping) and k < len(items):
            claim = Claim(claim)
            claim.line = items[k].start_mark.line + 1
            try:
                check_shape(claim)
            except SymroofError as error:
                raise SymroofError(f"{path}, line {claim.line}, claim {str(claim.get('id', '?'))!r}: "
                                   f"{str(error).splitlines()[0]}") from None
        found.append(claim)
    return found


def check_shape(case: Mapping) -> None:
    """What a claims file is refused for as a whole (`load_claims`, exit 2), before anything
    is derived: a key no claim has (a typo would leave its setting at its default), and a
    claim that cannot fail (a tolerance of 1 or more, or infinite; a threshold with nothing
    to compare). `check_case` refuses the same, each claim on its own row."""
    if "model" in case:
        check.unknown_keys(case, KEYS, "a model claim", {"set": "sizes"})
    else:
        check.unknown_keys(case, check.KEYS, "a claim", {"sizes": "set"})
    if "tolerance" in case:
        check.read_tolerance(case["tolerance"])
    expect = case.get("expect")
    threshold = expect.get("threshold") if isinstance(expect, Mapping) else None
    if isinstance(threshold, Mapping):
        check.threshold_parts(threshold)


class _Loader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (PyYAML keeps the
    last silently: `expect: {flops: 1, flops: 2}` would check one of them), and every alias
    (`*name`): nine lines of aliases of aliases make a billion items (a claims file writes
    each claim out)."""

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, f"an alias ({event.anchor and '*' + event.anchor}): "
                                              "a claims file writes each claim out, without anchors and aliases",
                                              event.start_mark)
        return super().compose_node(parent, index)


def _mapping(loader: _Loader, node: yaml.MappingNode) -> Iterator[dict]:
    seen: list = []
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if any(key == other for other in seen):
            raise yaml.constructor.ConstructorError("while reading a mapping", node.start_mark,
                                                    f"the key {key!r} is given twice", key_node.start_mark)
        seen.append(key)
    return (yield from loader.construct_yaml_map(node))


_Loader.add_constructor("tag:yaml.org,2002:map", _mapping)
