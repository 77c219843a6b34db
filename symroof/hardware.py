"""Chips and their figures: `hardware.json` loaded and checked into frozen `Chip`s.

Every figure is an exact sympy Rational read from the decimal text in the file, so
1.97e14 is exactly 197000000000000 and 1e-6 exactly 1/1000000: ratios such as the
critical intensity come out as fractions, not as rounded binary floats. A figure is
addressed by its dotted path in the file ("peak_flops_per_s.bf16",
"interconnect.link_bandwidth_one_way_bytes_per_s"); null in the file is None here.

Examples:
    >>> v5e = get_chip("TPU v5e")
    >>> v5e.peak_flops("bf16"), v5e.hbm_bandwidth
    (197000000000000, 820000000000)
    >>> v5e.critical_intensity(), round(float(v5e.critical_intensity()), 2)
    (9850/41, 240.24)
    >>> v5e.with_variant("book-tpus-table").critical_intensity("int8")
    39400/81
    >>> v5e.figure("interconnect.hop_latency_s")
    1/1000000
"""

from __future__ import annotations

import difflib
import fractions
import functools
import json
import math
import numbers
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import sympy

from .dtypes import RATES
from .errors import HardwareError
from .resources import resource_path

__all__ = ["Chip", "cited_keys", "exact_value", "get_chip", "list_chips", "load_hardware", "source_keys"]

NUMBER, COUNT, TEXT = "number", "count", "text"

# Chip fields in the order the shipped file lists them (and `rows` shows them);
# a nested dict is a block, whose fields are addressed as "block.field".
_SCHEMA: dict[str, object] = {
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
                     "wraparound_min_axis_size": COUNT, "hop_latency_s": NUMBER, "domain_size": COUNT},
    "pcie_bandwidth_one_way_bytes_per_s": NUMBER,
    "dcn": {"bandwidth_one_way_bytes_per_s_per_chip": NUMBER, "bandwidth_bytes_per_s_per_host": NUMBER,
            "chips_per_host": COUNT},
    "scaleout": {"bandwidth_one_way_bytes_per_s_per_chip": NUMBER, "node_egress_bytes_per_s": NUMBER,
                 "chips_per_node": COUNT, "fabric": TEXT},
}
_FIELDS: dict[str, str] = {}
for _key, _spec in _SCHEMA.items():
    if isinstance(_spec, dict):
        _FIELDS.update({f"{_key}.{_sub}": _kind for _sub, _kind in _spec.items()})
    else:
        _FIELDS[_key] = _spec
_FIGURE_PATHS = tuple(path for path, kind in _FIELDS.items() if kind != TEXT)
_BLOCKS = tuple(key for key, spec in _SCHEMA.items() if isinstance(spec, dict))
_CHOICES = {"kind": ("tpu", "gpu", "cpu"),
            "interconnect.topology": ("torus_2d", "torus_3d", "switch", "mesh")}
_CHIP_KEYS = ("id", "name", "vendor", "kind", "aliases", *_SCHEMA, "variants", "sources", "notes")
_REQUIRED = ("id", "name", "vendor", "kind", "peak_flops_per_s", "hbm_capacity_bytes",
             "hbm_bandwidth_bytes_per_s")
_NOT_NULL = ("hbm_capacity_bytes", "hbm_bandwidth_bytes_per_s")
_FILE_KEYS = ("schema_version", "conventions", "source_keys", "chips")

# A plain decimal or scientific number, so that no string ever reaches an evaluator.
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d{1,6}))?")


@dataclass(frozen=True, slots=True, repr=False)
class Chip:
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

    def __repr__(self) -> str:
        return f"Chip({self.id!r}, {self.name!r})"

    def __hash__(self) -> int:
        return hash((self.id, tuple(self.figures.items())))

    def figure(self, path: str) -> sympy.Rational | None:
        """The figure at a dotted path, exact, or None where the chip has no value.

        Examples:
            >>> get_chip("h100").figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
            450000000000
            >>> get_chip("v5e").figure("peak_flops_per_s.fp8") is None
            True
            >>> get_chip("v5e").figure("hbm_bandwith_bytes_per_s")
            Traceback (most recent call last):
            ...
            symroof.errors.HardwareError: tpu-v5e has no figure 'hbm_bandwith_bytes_per_s'; did you mean 'hbm_bandwidth_bytes_per_s'?
        """
        if path in self.figures:
            return self.figures[path]
        kind = _FIELDS.get(path)
        if kind == TEXT:
            raise HardwareError(f"{path!r} is text, not a figure: read {self.id}'s texts[{path!r}]")
        if kind is None:
            raise HardwareError(f"{self.id} has no figure {path!r}{_hint(path, _FIGURE_PATHS)}")
        return None

    def require(self, path: str, why: str = "") -> sympy.Rational:
        """Like `figure`, but a missing value is an error that says how to supply it.

        Examples:
            >>> get_chip("v5e").require("peak_flops_per_s.fp8", "fp8 matmul")
            Traceback (most recent call last):
            ...
            symroof.errors.HardwareError: tpu-v5e has no figure for peak_flops_per_s.fp8 (fp8 matmul); pass it with --peak-flops or --override peak_flops_per_s.fp8=VALUE
        """
        value = self.figure(path)
        if value is None:
            flag = {"peak_flops_per_s": "--peak-flops or ",
                    "hbm_bandwidth_bytes_per_s": "--hbm-bw or "}.get(path.partition(".")[0], "")
            because = f" ({why})" if why else ""
            raise HardwareError(f"{self.id} has no figure for {path}{because}; "
                                f"pass it with {flag}--override {path}=VALUE")
        return value

    def peak_flops(self, rate: str) -> sympy.Rational:
        """The dense peak FLOPs/s (OPs/s for integers) at one of `dtypes.RATES`.

        Examples:
            >>> get_chip("h100").peak_flops("fp8")
            1979000000000000
        """
        if rate not in RATES:
            raise HardwareError(f"hardware.json lists no {rate} rate for any chip (rates: "
                                f"{', '.join(RATES)}); give one with --peak-flops, or a compute "
                                "dtype with {compute=...}")
        return self.require(f"peak_flops_per_s.{rate}")

    @property
    def hbm_bandwidth(self) -> sympy.Rational:
        """HBM bandwidth in bytes/s."""
        return self.require("hbm_bandwidth_bytes_per_s")

    def critical_intensity(self, rate: str = "bf16") -> sympy.Rational:
        """Peak FLOPs/s over HBM bytes/s: the intensity above which a kernel is compute-bound.

        Examples:
            >>> get_chip("H100").critical_intensity()
            19780/67
        """
        return self.peak_flops(rate) / self.hbm_bandwidth

    def with_figures(self, overrides: Mapping[str, object]) -> Chip:
        """A copy with some figures replaced; their source becomes "override".

        A value may be an int, a float (read as its shortest decimal, `repr`), a
        sympy Rational, or a string holding a plain decimal number ("8.1e11").

        Examples:
            >>> get_chip("v5e").with_figures({"hbm_bandwidth_bytes_per_s": "8.1e11"}).hbm_bandwidth
            810000000000
            >>> get_chip("v5e").with_figures({"hbm_bandwidth_bytes_per_s": "8.1e11"}).sources["hbm_bandwidth_bytes_per_s"]
            'override'
        """
        values = {}
        for path, value in overrides.items():
            if _FIELDS.get(path) not in (NUMBER, COUNT):
                raise HardwareError(f"cannot override {path!r} on {self.id}: no such figure"
                                    + _hint(path, _FIGURE_PATHS))
            try:
                values[path] = exact_value(value, _FIELDS[path])
            except ValueError as error:
                raise HardwareError(f"override {path}={value!r} on {self.id}: {error}") from None
        return self._replaced(values, "override")

    def with_variant(self, name: str) -> Chip:
        """A copy with one of the chip's named variants applied.

        Examples:
            >>> get_chip("h100").with_variant("book-v1-problem5").peak_flops("bf16")
            1000000000000000
        """
        if name not in self.variants:
            known = ", ".join(self.variants) or "none"
            raise HardwareError(f"{self.id} has no variant {name!r}{_hint(name, self.variants)} "
                                f"(its variants: {known})")
        return self._replaced(dict(self.variants[name]),
                              f"variant {name}: {self.sources.get('variants.' + name, '')}")

    def headline(self) -> dict:
        """The figures `symroof chips` lists: bf16 peak, HBM bandwidth and capacity, the
        bf16 critical intensity and the one-way link bandwidth (None where unknown)."""
        bf16 = self.figure("peak_flops_per_s.bf16")
        bw = self.figure("hbm_bandwidth_bytes_per_s")
        return {"bf16_flops_per_s": bf16, "hbm_bandwidth_bytes_per_s": bw,
                "hbm_capacity_bytes": self.figure("hbm_capacity_bytes"),
                "critical_intensity_bf16": None if bf16 is None or bw is None else bf16 / bw,
                "link_one_way_bytes_per_s": self.figure("interconnect.link_bandwidth_one_way_bytes_per_s")}

    def rows(self) -> list[tuple[str, sympy.Rational | str | None, str]]:
        """(path, value, source) for every figure and text field the chip has, in the
        schema's order (the order the shipped file lists them).

        Examples:
            >>> [row for row in get_chip("v5e").rows() if row[0] == "interconnect.topology"][0][:2]
            ('interconnect.topology', 'torus_2d')
        """
        return [(path, self.figures[path] if path in self.figures else self.texts[path],
                 self.sources.get(path, ""))
                for path in _FIELDS if path in self.figures or path in self.texts]

    def _replaced(self, values: dict[str, sympy.Rational], source: str) -> Chip:
        figures = {**self.figures, **values}
        return replace(self,
                       figures=MappingProxyType({p: figures[p] for p in _FIELDS if p in figures}),
                       sources=MappingProxyType({**self.sources, **dict.fromkeys(values, source)}))


def load_hardware(path: str | os.PathLike | None = None) -> dict[str, Chip]:
    """All chips of a hardware file by id, in file order; None reads the shipped file.

    The file is read and checked once per (path, modification time); every problem
    is one `HardwareError` naming the file, the chip and the field.

    Examples:
        >>> list(load_hardware())[:3]
        ['tpu-v2', 'tpu-v3', 'tpu-v4p']
    """
    return dict(_cached(path)[0])


def source_keys(path: str | os.PathLike | None = None) -> dict[str, str]:
    """The file's table of source keys: each short key the chips' sources cite ("SB1-roof",
    "GC-v5e") with the reference it stands for (a title, a revision, a URL).

    Examples:
        >>> source_keys()["GC-v5e"]
        'Google Cloud TPU v5e system architecture, cloud.google.com/tpu/docs/v5e (several revisions)'
    """
    return dict(_cached(path)[2])


def cited_keys(text: str, keys) -> list[str]:
    """The source keys a source text cites, in the order it first cites them. A key is
    cited where it stands as a word of its own ("GC-7x" is not cited by "GC-7x-perf").

    Examples:
        >>> cited_keys("SB1-tpus (16GiB); GC-v5e (16 GB); JAX-tpuinfo; SB1-tpus Q4", source_keys())
        ['SB1-tpus', 'GC-v5e', 'JAX-tpuinfo']
    """
    found = {}
    for key in keys:
        match = re.search(rf"(?<![\w.-]){re.escape(key)}(?![\w-])", text)
        if match:
            found[key] = match.start()
    return sorted(found, key=found.get)


def list_chips(path: str | os.PathLike | None = None) -> list[Chip]:
    """The chips of a hardware file, in file order."""
    return list(_cached(path)[0].values())


def get_chip(name: str, path: str | os.PathLike | None = None, variant: str | None = None) -> Chip:
    """A chip by id, name or alias, with an optional variant applied.

    Matching ignores case, spaces, '-', '_' and '.', and accepts the name with or
    without its vendor or kind ("v5e", "TPU v5e", "tpu_v5e", "NVIDIA H100").

    Examples:
        >>> get_chip("tpu_v5e"), get_chip("NVIDIA H100")
        (Chip('tpu-v5e', 'TPU v5e'), Chip('h100-sxm', 'H100 SXM'))
        >>> get_chip("tpu-v5f")
        Traceback (most recent call last):
        ...
        symroof.errors.HardwareError: unknown chip 'tpu-v5f'; did you mean 'tpu-v5e' or 'tpu-v5p'? (known: tpu-v2, tpu-v3, tpu-v4p, tpu-v5e, tpu-v5p, tpu-v6e, tpu7x, a100-sxm-80gb, h100-sxm, h100-pcie, h200, b200, gb200, mi300x)
    """
    chips, index, _ = _cached(path)
    if not isinstance(name, str):
        raise HardwareError(f"a chip name must be a string, got {name!r}")
    key = _normal(name)
    if key not in index:
        # Every chip tied for the closest spelling: 'tpu-v5f' is as near v5e as v5p.
        score = {k: difflib.SequenceMatcher(None, key, k).ratio() for k in index}
        best = max(score.values(), default=0)
        tied = {index[k] for k, s in score.items() if s == best >= 0.6}
        close = [chip_id for chip_id in chips if chip_id in tied]
        hint = f"; did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise HardwareError(f"unknown chip {name!r}{hint} (known: {', '.join(chips)})")
    chip = chips[index[key]]
    return chip if variant is None else chip.with_variant(variant)


def _cached(path) -> tuple[dict[str, Chip], dict[str, str], Mapping[str, str]]:
    file = resource_path("hardware.json") if path is None else Path(path)
    try:
        file = file.resolve()
        stat = file.stat()
    except OSError as error:
        raise HardwareError(f"cannot read hardware file {file}: {error.strerror or error}") from None
    return _load(str(file), stat.st_mtime_ns, stat.st_size)


class _JsonNumber(str):
    """A JSON non-integer number kept as its text, so it is converted exactly."""


def _json_int(text: str) -> int | _JsonNumber:
    # An integer too long for int() is kept as text, so the check of its field names it.
    return int(text) if len(text) <= 40 else _JsonNumber(text)


def _unique_keys(pairs: list[tuple[str, object]]) -> dict:
    keys = [key for key, _ in pairs]
    for key in keys:
        if keys.count(key) > 1:
            raise ValueError(f"duplicate key {key!r} in one JSON object")
    return dict(pairs)


@functools.lru_cache(maxsize=16)
def _load(file: str, mtime_ns: int, size: int) -> tuple[dict[str, Chip], dict[str, str], Mapping[str, str]]:
    try:
        text = Path(file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise HardwareError(f"cannot read hardware file {file}: {error}") from None
    try:
        data = json.loads(text, parse_float=_JsonNumber, parse_constant=_JsonNumber,
                          parse_int=_json_int, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as error:
        raise HardwareError(f"{file}: not valid JSON: {error.msg} "
                            f"(line {error.lineno}, column {error.colno})") from None
    except ValueError as error:
        raise HardwareError(f"{file}: {error}") from None
    if not isinstance(data, dict) or not isinstance(data.get("chips"), list):
        raise HardwareError(f"{file}: expected a JSON object with a 'chips' list")
    for key in data:
        if key not in _FILE_KEYS:
            raise HardwareError(f"{file}: {key}: unknown top-level field{_hint(key, _FILE_KEYS)}")
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
    chips: dict[str, Chip] = {}
    index: dict[str, str] = {}
    for number, raw in enumerate(data["chips"]):
        chip = _parse_chip(file, number, raw)
        if chip.id in chips:
            raise HardwareError(f"{file}: chip {chip.id!r}: id: duplicate id (chip #{number} "
                                f"repeats chip #{list(chips).index(chip.id)})")
        for field, spelling, key in _spellings(chip):
            owner = index.setdefault(key, chip.id)
            if owner != chip.id:
                raise HardwareError(f"{file}: chip {chip.id!r}: {field}: {spelling!r} "
                                    f"also names chip {owner!r}")
        chips[chip.id] = chip
    return chips, index, MappingProxyType(dict(keys))


def _parse_chip(file: str, number: int, raw: object) -> Chip:
    label = f"chip #{number}"
    if isinstance(raw, dict) and type(raw.get("id")) is str and raw["id"].strip():
        label = f"chip {raw['id']!r}"

    def fail(path: str, problem: str):
        raise HardwareError(f"{file}: {label}: {path}: {problem}")

    if not isinstance(raw, dict):
        fail("(entry)", f"must be a JSON object, got {_describe(raw)}")
    for key in raw:
        if key not in _CHIP_KEYS:
            fail(key, "unknown field" + _hint(key, _CHIP_KEYS))
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
    for key, spec in _SCHEMA.items():
        if key not in raw:
            continue
        if isinstance(spec, dict):
            block = raw[key]
            if not isinstance(block, dict):
                fail(key, f"must be a JSON object, got {_describe(block)}")
            for sub in block:
                if sub not in spec:
                    fail(f"{key}.{sub}", "unknown field" + _hint(sub, spec))
            if key == "peak_flops_per_s":
                for rate in RATES:
                    if rate not in block:
                        fail(f"{key}.{rate}", "missing (every rate needs a number or null)")
            items = [(f"{key}.{sub}", block[sub]) for sub in spec if sub in block]
        else:
            items = [(key, raw[key])]
        for path, value in items:
            if _FIELDS[path] != TEXT:
                figures[path] = _read_figure(value, _FIELDS[path], lambda problem: fail(path, problem))
            elif value is not None:
                if type(value) is not str:
                    fail(path, f"must be a string or null, got {_describe(value)}")
                if path in _CHOICES and value not in _CHOICES[path]:
                    fail(path, f"must be one of {', '.join(_CHOICES[path])}, got {value!r}"
                         + _hint(value, _CHOICES[path]))
                texts[path] = value
    for path in _NOT_NULL:
        if figures[path] is None:
            fail(path, "must be a number, not null")

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
            if _FIELDS.get(path) not in (NUMBER, COUNT):
                fail(where, "names no figure" + _hint(path, _FIGURE_PATHS))
            values[path] = _read_figure(value, _FIELDS[path], lambda problem: fail(where, problem))
            if values[path] is None:
                fail(where, "must be a number, not null")
        variants[name] = MappingProxyType(values)

    raw_sources = raw.get("sources", {})
    if not isinstance(raw_sources, dict):
        fail("sources", f"must be a JSON object, got {_describe(raw_sources)}")
    known = (*_FIELDS, *_BLOCKS, *(f"variants.{name}" for name in variants))
    for key, text in raw_sources.items():
        if key not in known:
            fail(f"sources.{key}", "names no field, block or variant" + _hint(key, known))
        if type(text) is not str or not text.strip():
            fail(f"sources.{key}", f"must be a non-empty string, got {_describe(text)}")
    sources = {}
    for path in _FIELDS:
        if path in raw_sources:
            sources[path] = raw_sources[path]
        elif path in texts or figures.get(path) is not None:
            # A block's source covers each of its values with no source of its own; a
            # null keeps only its own, as the block's source does not speak for it.
            text = raw_sources.get(path.partition(".")[0])
            if not text and path in figures:
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
    return Chip(id=raw["id"], name=raw["name"], vendor=raw["vendor"], kind=raw["kind"],
                aliases=tuple(aliases), figures=MappingProxyType(figures),
                texts=MappingProxyType(texts), sources=MappingProxyType(sources),
                variants=MappingProxyType(variants), notes=tuple(notes))


def _read_figure(value: object, kind: str, fail) -> sympy.Rational | None:
    """A figure from the file: null, a JSON integer, or a JSON number kept as text."""
    if value is None:
        return None
    if type(value) is not int and not isinstance(value, _JsonNumber):
        fail(f"must be a number or null, got {_describe(value)}")
    if kind == COUNT and type(value) is not int:
        fail(f"must be a whole number (it is a count), got {_describe(value)}")
    try:
        return exact_value(value, kind)
    except ValueError as error:
        fail(str(error))


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
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, _JsonNumber) or isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return f"a string ({value!r})"
    return {list: "a list", dict: "an object"}.get(type(value), type(value).__name__)


def _normal(name: str) -> str:
    return re.sub(r"[\s\-_.]", "", name.lower())


def _spellings(chip: Chip) -> Iterator[tuple[str, str, str]]:
    """(field, spelling, lookup key) for each way to name a chip: its id, name and
    aliases, each also with its vendor or kind prefix dropped or added."""
    prefixes = {_normal(chip.vendor), _normal(chip.kind)}
    for field, spelling in [("id", chip.id), ("name", chip.name),
                            *(("aliases", alias) for alias in chip.aliases)]:
        key = _normal(spelling)
        yield field, spelling, key
        for prefix in prefixes:
            if key.startswith(prefix):
                if len(key) > len(prefix):
                    yield field, spelling, key[len(prefix):]
            else:
                yield field, spelling, prefix + key


def _hint(word: str, choices) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
