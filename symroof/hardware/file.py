"""The hardware file (`hardware.json`) read and checked: its schema, and each chip's
fields as `ChipFields`, which `hardware.Chip` extends with what symroof asks of them.

Every figure becomes an exact sympy Rational read from its decimal text (`exact_value`),
never through a binary float: the JSON reader keeps non-integer numbers as their text.
The checks are strict (unknown fields, missing sources and misspelt choices are errors,
with a "did you mean") since a wrong figure silently skews every result drawn from it.
"""

from __future__ import annotations

import dataclasses
import fractions
import json
import math
import numbers
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NoReturn

import sympy

from ..dtypes import RATES
from ..errors import HardwareError, printable, unprintable_at
from ..resources import describe, did_you_mean, read_text_bounded, unique_keys
from .shapes import Shape, pod_shape_problem, read_shape, read_shapes, slice_shapes_problem

NUMBER, COUNT, TEXT, SHAPE, SHAPES = "number", "count", "text", "shape", "shapes"

# Chip fields and their kinds, in the order the shipped file lists them (and `rows` shows them);
# a nested dict is a block, whose fields are addressed as "block.field". Each network (the
# interconnect, dcn, scaleout) has a hop_latency_s, the time of one hop that collectives.py
# floors a collective at: the shipped file gives every network one, sourced or marked as an
# estimate (tests/hardware/test_hardware_latency.py); a user's file may leave it out, and the
# floor is then reported as unknown. A torus's pod_shape (16 x 16 on v5e) is read by shapes.py.
SCHEMA: dict[str, str | dict[str, str]] = {
    "peak_flops_per_s": dict.fromkeys(RATES, NUMBER),
    "peak_flops_sparse_per_s": dict.fromkeys(RATES, NUMBER),
    "vector_flops_per_s": dict.fromkeys(RATES, NUMBER),
    "clock_hz": NUMBER,
    "hbm_capacity_bytes": NUMBER,
    "hbm_bandwidth_bytes_per_s": NUMBER,
    "onchip": {"vmem_capacity_bytes": NUMBER, "smem_capacity_bytes": NUMBER,
               "l2_capacity_bytes": NUMBER, "vmem_bandwidth_bytes_per_s": NUMBER},
    "interconnect": {"name": TEXT, "link_bandwidth_one_way_bytes_per_s": NUMBER,
                     "link_bandwidth_bidi_bytes_per_s": NUMBER, "links_per_chip": COUNT,
                     "chip_bandwidth_one_way_bytes_per_s": NUMBER, "topology": TEXT,
                     "wraparound_min_axis_size": COUNT, "hop_latency_s": NUMBER, "domain_size": COUNT,
                     "pod_shape": SHAPE, "slice_shapes": SHAPES},
    "pcie_bandwidth_one_way_bytes_per_s": NUMBER,
    "dcn": {"bandwidth_one_way_bytes_per_s_per_chip": NUMBER, "bandwidth_bytes_per_s_per_host": NUMBER,
            "chips_per_host": COUNT, "hop_latency_s": NUMBER},
    "scaleout": {"name": TEXT, "bandwidth_one_way_bytes_per_s_per_chip": NUMBER, "node_egress_bytes_per_s": NUMBER,
                 "chips_per_node": COUNT, "fabric": TEXT, "hop_latency_s": NUMBER},
}
FIELDS: dict[str, str] = {}
for _key, _spec in SCHEMA.items():
    if isinstance(_spec, dict):
        FIELDS.update({f"{_key}.{_sub}": _kind for _sub, _kind in _spec.items()})
    else:
        FIELDS[_key] = _spec
FIGURE_PATHS = tuple(path for path, kind in FIELDS.items() if kind in (NUMBER, COUNT))
_BLOCKS = tuple(key for key, spec in SCHEMA.items() if isinstance(spec, dict))
_CHOICES = {"kind": ("tpu", "gpu", "cpu"),
            "interconnect.topology": ("torus_2d", "torus_3d", "switch", "mesh")}
_CHIP_KEYS = ("id", "name", "vendor", "kind", "aliases", *SCHEMA, "variants", "sources", "notes")
_REQUIRED = ("id", "name", "vendor", "kind", "peak_flops_per_s", "hbm_capacity_bytes",
             "hbm_bandwidth_bytes_per_s")
_NOT_NULL = ("hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s")
_FILE_KEYS = ("schema_version", "conventions", "source_keys", "chips")

# A plain decimal or scientific number, so that no string ever reaches an evaluator.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d{1,6}))?")


@dataclass(frozen=True, slots=True, repr=False)
class ChipFields:
    """One accelerator and its figures, read-only.

    Attributes:
        id: the file's id ("tpu-v5e").
        name: the display name ("TPU v5e").
        vendor: "google", "nvidia", "amd", ...
        kind: "tpu", "gpu" or "cpu".
        aliases: other names `get_chip` accepts.
        figures: numbers by dotted path, exact; None where the file has null (not
            published, not available on the chip, or not sourced).
        texts: the non-numeric fields by dotted path ("interconnect.topology").
        sources: where each field's value comes from, by dotted path. A value with no
            source of its own takes its block's; a null has only its own, if any.
            "override" marks a figure replaced by `with_figures`, "variant <name>: ..."
            one replaced by `with_variant`; each variant's own source is under
            "variants.<name>".
        variants: named sets of alternative figures (other values the book or the
            vendor use), applied with `with_variant`.
        notes: free-text remarks from the file.
        shapes: the lists of axis lengths by dotted path ("interconnect.pod_shape"), as
            tuples of ints, and lists of them ("interconnect.slice_shapes") as tuples of
            those; None where the file has null.
    """

    id: str
    name: str
    vendor: str
    kind: str
    aliases: tuple[str, ...]
    figures: Mapping[str, sympy.Rational | None]
    texts: Mapping[str, str]
    sources: Mapping[str, str]
    variants: Mapping[str, Mapping[str, sympy.Rational]]
    notes: tuple[str, ...] = ()
    shapes: Mapping[str, Shape | tuple[Shape, ...] | None] = dataclasses.field(
        default_factory=lambda: MappingProxyType({}))


class _JsonNumber(str):
    """A JSON non-integer number kept as its text, so it is converted exactly."""


def _json_int(text: str) -> int | _JsonNumber:
    # An integer too long for int() is kept as text, so the check of its field names it.
    return int(text) if len(text) <= 40 else _JsonNumber(text)


MAX_FILE_BYTES = 5_000_000  # a hardware file; the shipped one is under 100 kB


def read_file(file: str) -> tuple[dict[str, ChipFields], dict[str, str], Mapping[str, str]]:
    """A hardware file's chips as checked records by id, in file order; the index from each
    spelling of a chip's names (`normal_name`) to its id; and the file's source keys. Every
    problem is one `HardwareError` naming the file, the chip and the field."""
    text = read_text_bounded(file, MAX_FILE_BYTES, "hardware file", HardwareError)
    try:
        data = json.loads(text, parse_float=_JsonNumber, parse_constant=_JsonNumber,
                          parse_int=_json_int, object_pairs_hook=unique_keys)
    except json.JSONDecodeError as error:
        raise HardwareError(f"{file}: not valid JSON: {error.msg} "
                            f"(line {error.lineno}, column {error.colno})") from None
    except ValueError as error:
        raise HardwareError(f"{file}: {error}") from None
    except RecursionError:
        raise HardwareError(f"{file}: not valid JSON: nested too deeply") from None
    if not isinstance(data, dict) or not isinstance(data.get("chips"), list):
        raise HardwareError(f"{file}: expected a JSON object with a 'chips' list")
    found = unprintable_at(data)
    if found is not None:
        raise HardwareError(printable(f"{file}: {found}: holds a control or format character; write plain text"))
    for key in data:
        if key not in _FILE_KEYS:
            raise HardwareError(f"{file}: {key}: unknown top-level field{did_you_mean(key, _FILE_KEYS)}")
    if data.get("schema_version", 1) != 1:
        raise HardwareError(f"{file}: schema_version: this symroof reads version 1, "
                            f"got {data['schema_version']!r}")
    if not data["chips"]:
        raise HardwareError(f"{file}: chips: the list is empty")
    keys = data.get("source_keys", {})
    if not isinstance(keys, dict):
        raise HardwareError(f"{file}: source_keys: must be a JSON object, got {_describe(keys)}")
    for key, title in keys.items():
        if not key.strip() or type(title) is not str or not title.strip():
            raise HardwareError(f"{file}: source_keys.{key}: must be a non-empty key naming a non-empty "
                                f"string, got {_describe(title)}")
    records: dict[str, ChipFields] = {}
    index: dict[str, str] = {}
    for number, raw in enumerate(data["chips"]):
        record = _parse_chip(file, number, raw)
        chip_id = record.id
        if chip_id in records:
            raise HardwareError(f"{file}: chip {chip_id!r}: id: duplicate id (chip #{number} "
                                f"repeats chip #{list(records).index(chip_id)})")
        for field, spelling, key in _spellings(record):
            owner = index.setdefault(key, chip_id)
            if owner != chip_id:
                raise HardwareError(f"{file}: chip {chip_id!r}: {field}: {spelling!r} "
                                    f"also names chip {owner!r}")
        records[chip_id] = record
    return records, index, MappingProxyType(dict(keys))


def _parse_chip(file: str, number: int, raw: object) -> ChipFields:
    label = f"chip #{number}"
    if isinstance(raw, dict) and type(raw.get("id")) is str and raw["id"].strip():
        label = f"chip {raw['id']!r}"

    def fail(path: str, problem: str) -> NoReturn:
        raise HardwareError(f"{file}: {label}: {path}: {problem}")

    if not isinstance(raw, dict):
        fail("(entry)", f"must be a JSON object, got {_describe(raw)}")
    for key in raw:
        if key not in _CHIP_KEYS:
            fail(key, "unknown field" + did_you_mean(key, _CHIP_KEYS))
    for key in _REQUIRED:
        if key not in raw:
            fail(key, "missing (required)")
    for key in ("id", "name", "vendor", "kind"):
        if type(raw[key]) is not str or not raw[key].strip():
            fail(key, f"must be a non-empty string, got {_describe(raw[key])}")
    if raw["kind"] not in _CHOICES["kind"]:
        fail("kind", f"must be one of {', '.join(_CHOICES['kind'])}, got {raw['kind']!r}")
    aliases = raw.get("aliases", [])
    if not isinstance(aliases, list) or any(type(a) is not str or not a.strip() for a in aliases):
        fail("aliases", "must be a list of non-empty strings")

    figures: dict[str, sympy.Rational | None] = {}
    texts: dict[str, str] = {}
    shapes: dict[str, Shape | tuple[Shape, ...] | None] = {}
    for key, spec in SCHEMA.items():
        if key not in raw:
            continue
        if isinstance(spec, dict):
            block = raw[key]
            if not isinstance(block, dict):
                fail(key, f"must be a JSON object, got {_describe(block)}")
            for sub in block:
                if sub not in spec:
                    fail(f"{key}.{sub}", "unknown field" + did_you_mean(sub, spec))
            if key == "peak_flops_per_s":
                for rate in RATES:
                    if rate not in block:
                        fail(f"{key}.{rate}", "missing (every rate needs a number or null)")
            items = [(f"{key}.{sub}", block[sub]) for sub in spec if sub in block]
        else:
            items = [(key, raw[key])]
        for path, value in items:
            if FIELDS[path] in (SHAPE, SHAPES):
                try:
                    shapes[path] = (read_shape if FIELDS[path] == SHAPE else read_shapes)(value, _describe)
                except ValueError as error:
                    fail(path, str(error))
            elif FIELDS[path] != TEXT:
                figures[path] = _read_figure(value, FIELDS[path], path, fail)
            elif value is not None:
                if type(value) is not str:
                    fail(path, f"must be a string or null, got {_describe(value)}")
                if path in _CHOICES and value not in _CHOICES[path]:
                    fail(path, f"must be one of {', '.join(_CHOICES[path])}, got {value!r}"
                         + did_you_mean(value, _CHOICES[path]))
                texts[path] = value
    for path in _NOT_NULL:
        if figures[path] is None:
            fail(path, "must be a number, not null")
    pod = shapes.get("interconnect.pod_shape")
    slices = shapes.get("interconnect.slice_shapes")
    problem = pod_shape_problem(pod, texts.get("interconnect.topology"),  # type: ignore[arg-type]
                                figures.get("interconnect.domain_size"))
    if problem:
        fail("interconnect.pod_shape", problem)
    problem = slice_shapes_problem(slices, pod)  # type: ignore[arg-type]
    if problem:
        fail("interconnect.slice_shapes", problem)

    variants: dict[str, Mapping[str, sympy.Rational]] = {}
    raw_variants = raw.get("variants", {})
    if not isinstance(raw_variants, dict):
        fail("variants", f"must be a JSON object, got {_describe(raw_variants)}")
    for name, fields in raw_variants.items():
        if not isinstance(fields, dict) or not fields:
            fail(f"variants.{name}", "must be a non-empty object of dotted figure paths and numbers")
        values = {}
        for path, value in fields.items():
            where = f"variants.{name}.{path}"
            if FIELDS.get(path) not in (NUMBER, COUNT):
                fail(where, "names no figure" + did_you_mean(path, FIGURE_PATHS))
            values[path] = _read_figure(value, FIELDS[path], where, fail)
            if values[path] is None:
                fail(where, "must be a number, not null")
        variants[name] = MappingProxyType(values)

    raw_sources = raw.get("sources", {})
    if not isinstance(raw_sources, dict):
        fail("sources", f"must be a JSON object, got {_describe(raw_sources)}")
    known = (*FIELDS, *_BLOCKS, *(f"variants.{name}" for name in variants))
    for key, text in raw_sources.items():
        if key not in known:
            fail(f"sources.{key}", "names no field, block or variant" + did_you_mean(key, known))
        if type(text) is not str or not text.strip():
            fail(f"sources.{key}", f"must be a non-empty string, got {_describe(text)}")
    sources = {}
    for path in FIELDS:
        if path in raw_sources:
            sources[path] = raw_sources[path]
        elif path in texts or figures.get(path) is not None or shapes.get(path) is not None:
            # A block's source covers each of its values with no source of its own; a
            # null keeps only its own, as the block's source does not speak for it.
            text = raw_sources.get(path.partition(".")[0])
            if not text and path not in texts:
                fail(path, f"has no source: add sources[{path!r}] or a source for its block")
            if text:
                sources[path] = text
    for name in variants:
        if f"variants.{name}" not in raw_sources:
            fail(f"variants.{name}", f"has no source: add sources['variants.{name}']")
        sources[f"variants.{name}"] = raw_sources[f"variants.{name}"]

    notes = raw.get("notes", [])
    if not isinstance(notes, list) or any(type(note) is not str for note in notes):
        fail("notes", "must be a list of strings")
    return ChipFields(id=raw["id"], name=raw["name"], vendor=raw["vendor"], kind=raw["kind"],
                      aliases=tuple(aliases), figures=MappingProxyType(figures),
                      texts=MappingProxyType(texts), sources=MappingProxyType(sources),
                      variants=MappingProxyType(variants), notes=tuple(notes), shapes=MappingProxyType(shapes))


def _read_figure(value: object, kind: str, path: str, fail: Callable[[str, str], NoReturn]
                 ) -> sympy.Rational | None:
    """A figure from the file: null, a JSON integer, or a JSON number kept as text. A
    problem goes to `fail` with the figure's path."""
    if value is None:
        return None
    if type(value) is not int and not isinstance(value, _JsonNumber):
        fail(path, f"must be a number or null, got {_describe(value)}")
    if kind == COUNT and type(value) is not int:
        fail(path, f"must be a whole number (it is a count), got {_describe(value)}")
    try:
        return exact_value(value, kind)
    except ValueError as error:
        fail(path, str(error))


def exact_value(value: object, kind: str = NUMBER) -> sympy.Rational:
    """A positive number as an exact Rational, from its decimal text (1.97e14 is exactly
    197000000000000; a float is read as its shortest decimal, `repr`); ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"must be a number, got {value}")
    # Checked as a Fraction: asking sympy whether a number is positive runs its assumptions
    # system, a noticeable part of a cold start when a whole hardware file is read.
    if isinstance(value, sympy.Rational):
        exact = fractions.Fraction(int(value.p), int(value.q))
    elif isinstance(value, numbers.Rational):
        exact = fractions.Fraction(int(value.numerator), int(value.denominator))
    elif isinstance(value, (str, numbers.Real)):
        # A float's repr is the shortest decimal that reads back as it: what was written.
        text = value.strip() if isinstance(value, str) else repr(float(value))
        if len(text) > 40:
            raise ValueError(f"must be a number of at most 40 characters, got {len(text)}")
        match = _DECIMAL.fullmatch(text)
        # Bounding the exponent keeps Fraction from building a huge power of ten.
        if not match or abs(int(match.group(1) or 0)) > 400 or not math.isfinite(float(text)):
            raise ValueError(f"must be a finite decimal number, got {text!r}")
        exact = fractions.Fraction(text)
    else:
        raise ValueError(f"must be a number, got {type(value).__name__}")
    if exact <= 0:
        raise ValueError(f"must be positive, got {value}")
    if kind == COUNT and exact.denominator != 1:
        raise ValueError(f"must be a whole number (it is a count), got {value}")
    return sympy.Rational(exact.numerator, exact.denominator)


def _describe(value: object) -> str:
    return f"the number {value}" if isinstance(value, _JsonNumber) else describe(value)


def normal_name(name: str) -> str:
    """A chip's name as `get_chip` matches it: lower case, without spaces, '-', '_' or '.'."""
    return re.sub(r"[\s\-_.]", "", name.lower())


def _spellings(chip: ChipFields) -> Iterator[tuple[str, str, str]]:
    """(field, spelling, lookup key) for each way to name a chip: its id, name and
    aliases, each also with its vendor or kind prefix dropped or added."""
    prefixes = {normal_name(chip.vendor), normal_name(chip.kind)}
    for field, spelling in [("id", chip.id), ("name", chip.name),
                            *(("aliases", alias) for alias in chip.aliases)]:
        key = normal_name(spelling)
        yield field, spelling, key
        for prefix in prefixes:
            if key.startswith(prefix):
                if len(key) > len(prefix):
                    yield field, spelling, key[len(prefix):]
            else:
                yield field, spelling, prefix + key


