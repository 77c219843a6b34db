"""Chips and their figures: frozen `Chip`s, built from `hardware.json` as `file.py` reads
and checks it, and found by name (`get_chip`).

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
import functools
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType

import sympy

from ..dtypes import RATES
from ..errors import HardwareError
from ..resources import did_you_mean, resource_path
from .file import (
    COUNT,
    FIELDS,
    FIGURE_PATHS,
    NUMBER,
    SHAPE,
    SHAPES,
    TEXT,
    ChipFields,
    exact_value,
    normal_name,
    read_file,
)
from .shapes import Shape, slice_problem

# exact_value reads figures with the file in `file.py`; it is offered from here,
# with the chips, to whoever reads a figure from elsewhere (an override, a machine file).
__all__ = ["Chip", "cited_keys", "exact_value", "get_chip", "list_chips", "load_hardware", "source_keys"]


@dataclass(frozen=True, slots=True, repr=False)
class Chip(ChipFields):
    """One accelerator and its figures, read-only (the fields are `ChipFields`'), with
    what symroof asks of them: peaks, bandwidths, lookups, overrides and variants."""

    def __repr__(self) -> str:
        return f"Chip({self.id!r}, {self.name!r})"

    # its hash, worked out once: a chip is a key of the collectives' and the families' caches,
    # looked up for every strategy a plan costs
    _hashed: int = field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hashed", hash((self.id, tuple(self.figures.items()), self.shapes.get("slice"))))

    def __hash__(self) -> int:
        return self._hashed

    def fingerprint(self) -> str:
        """Every figure, text and shape an analysis may read, as text: what tells two chips
        of one name apart (a user's file may give a shipped chip's name other figures) where
        a cache is keyed by text (the strategy families kept on disk)."""
        return repr((self.id, *(sorted(getattr(self, name).items()) for name in ("figures", "texts", "shapes"))))

    def figure(self, path: str) -> sympy.Rational | None:
        """The figure at a dotted path, exact, or None where the chip has no value.

        Examples:
            >>> get_chip("h100").figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
            450000000000
            >>> get_chip("v5e").figure("peak_flops_per_s.fp8") is None
            True
            >>> get_chip("v5e").figure("hbm_bandwith_bytes_per_s")  # doctest: +NORMALIZE_WHITESPACE
            Traceback (most recent call last):
            ...
            symroof.errors.HardwareError: tpu-v5e has no figure 'hbm_bandwith_bytes_per_s';
                did you mean 'hbm_bandwidth_bytes_per_s'?
        """
        if path in self.figures:
            return self.figures[path]
        kind = FIELDS.get(path)
        if kind == TEXT:
            raise HardwareError(f"{path!r} is text, not a figure: read {self.id}'s texts[{path!r}]")
        if kind in (SHAPE, SHAPES):
            raise HardwareError(f"{path!r} is a list of axis lengths, not a figure: read {self.id}'s shapes[{path!r}]")
        if kind is None:
            raise HardwareError(f"{self.id} has no figure {path!r}{did_you_mean(path, FIGURE_PATHS)}")
        return None

    def require(self, path: str, why: str = "") -> sympy.Rational:
        """Like `figure`, but a missing value is an error that says how to supply it.

        Examples:
            >>> get_chip("v5e").require("peak_flops_per_s.fp8", "fp8 matmul")  # doctest: +NORMALIZE_WHITESPACE
            Traceback (most recent call last):
            ...
            symroof.errors.HardwareError: tpu-v5e has no figure for peak_flops_per_s.fp8 (fp8 matmul);
                pass it with --peak-flops or --override peak_flops_per_s.fp8=VALUE
        """
        value = self.figure(path)
        if value is None:
            flag = {"peak_flops_per_s": "--peak-flops or ",
                    "hbm_bandwidth_bytes_per_s": "--hbm-bw or "}.get(path.partition(".")[0], "")
            because = f" ({why})" if why else ""
            raise HardwareError(f"{self.id} has no figure for {path}{because}; "
                                f"pass it with {flag}--override {path}=VALUE")
        return value

    def is_estimate(self, path: str) -> bool:
        """Whether the figure at a dotted path is an estimate: one no source used gives, its
        source text starting "estimate:" (as a variant's does after "variant NAME: "). A
        figure replaced by an override is the user's, not an estimate.

        Examples:
            >>> vector = "vector_flops_per_s.fp32"
            >>> get_chip("v5e").is_estimate(vector), get_chip("v5p").is_estimate(vector)
            (True, False)
            >>> get_chip("v5e").with_figures({vector: "6e12"}).is_estimate(vector)
            False
        """
        has_value = self.figures.get(path) is not None or path in self.texts or self.shapes.get(path) is not None
        return has_value and _ESTIMATE.match(self.sources.get(path, "")) is not None

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
            >>> faster = get_chip("v5e").with_figures({"hbm_bandwidth_bytes_per_s": "8.1e11"})
            >>> faster.hbm_bandwidth, faster.sources["hbm_bandwidth_bytes_per_s"]
            (810000000000, 'override')
        """
        values = {}
        for path, value in overrides.items():
            if FIELDS.get(path) not in (NUMBER, COUNT):
                raise HardwareError(f"cannot override {path!r} on {self.id}: no such figure"
                                    + did_you_mean(path, FIGURE_PATHS))
            try:
                values[path] = exact_value(value, FIELDS[path])
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
            raise HardwareError(f"{self.id} has no variant {name!r}{did_you_mean(name, self.variants)} "
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

    @property
    def pod_shape(self) -> tuple[int, ...] | None:
        """The lengths of the physical axes of the chip's torus pod, or None where the
        file gives none (a switch, a fully connected node, or a shape no source gives).

        Examples:
            >>> get_chip("v5e").pod_shape, get_chip("v5p").pod_shape, get_chip("h100").pod_shape
            ((16, 16), (16, 20, 28), None)
        """
        return _shape(self.shapes.get("interconnect.pod_shape"))

    @property
    def slice_shapes(self) -> tuple[Shape, ...]:
        """The slice shapes the vendor sells (4x8x8 for 256 v5p chips); empty where unknown."""
        shapes = self.shapes.get("interconnect.slice_shapes")
        return tuple(s for s in shapes or () if isinstance(s, tuple))

    @property
    def slice(self) -> Shape | None:
        """The slice a mesh's ICI axes are laid on (`on_slice`); None: the whole pod."""
        return _shape(self.shapes.get("slice"))

    def vendor_slice(self, chips: int) -> Shape | None:
        """The vendor's slice shape of that many chips, if the file lists one.

        Examples:
            >>> get_chip("v5p").vendor_slice(256), get_chip("v5p").vendor_slice(96)
            ((4, 8, 8), None)
        """
        return next((s for s in self.slice_shapes if math.prod(s) == chips), None)

    def on_slice(self, shape: Shape | str) -> Chip:
        """A copy whose mesh axes are laid on a slice of its pod ("4x8x8") rather than on
        the whole pod: a slice's axes close into rings only where whole (and long enough).

        Examples (a doctest's "..." stands for the vendor's shapes the message lists):
            >>> get_chip("v5p").on_slice("4x8x8").slice
            (4, 8, 8)
            >>> get_chip("v5e").on_slice("32x8")
            Traceback (most recent call last):
            ...
            symroof.errors.HardwareError: --slice 32x8 on TPU v5e: a slice 32x8 does not fit the 16x16 pod ...
        """
        if isinstance(shape, str):
            shape = _read_slice(shape)
        problem = slice_problem(shape, self.pod_shape)
        if problem:
            vendor = ", ".join("x".join(map(str, s)) for s in self.slice_shapes)
            raise HardwareError(f"--slice {'x'.join(map(str, shape))} on {self.name}: {problem}"
                                + (f" (its vendor slices: {vendor})" if vendor else ""))
        return replace(self, shapes=MappingProxyType({**self.shapes, "slice": shape}))

    def rows(self) -> list[tuple[str, sympy.Rational | str | tuple[int, ...] | None, str]]:
        """(path, value, source) for every figure, text and shape field the chip has, in the
        schema's order (the order the shipped file lists them).

        Examples:
            >>> [row for row in get_chip("v5e").rows() if row[0] == "interconnect.topology"][0][:2]
            ('interconnect.topology', 'torus_2d')
        """
        values = {**self.figures, **self.texts, **self.shapes}
        return [(path, values[path], self.sources.get(path, "")) for path in FIELDS if path in values]

    def _replaced(self, values: dict[str, sympy.Rational], source: str) -> Chip:
        figures = {**self.figures, **values}
        return replace(self,
                       figures=MappingProxyType({p: figures[p] for p in FIELDS if p in figures}),
                       sources=MappingProxyType({**self.sources, **dict.fromkeys(values, source)}))


# A figure's source that marks it an estimate, itself or as a variant's ("variant two-mxus: estimate: ...").
_ESTIMATE = re.compile(r"(?:variant [^:]*: )?estimate\b")


def _shape(value: object) -> Shape | None:
    return value if isinstance(value, tuple) and all(isinstance(v, int) for v in value) else None


def _read_slice(text: str) -> Shape:
    """"4x8x8" as (4, 8, 8); a HardwareError saying what is expected otherwise."""
    parts = text.strip().lower().split("x")
    if not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise HardwareError(f"--slice {text!r}: expected axis lengths joined by x, e.g. 4x8x8")
    return tuple(int(p) for p in parts)


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


def cited_keys(text: str, keys: Iterable[str]) -> list[str]:
    """The source keys a source text cites, in the order it first cites them. A key is
    cited where it stands as a word of its own ("GC-7x" is not cited by "GC-7x-perf").

    Examples:
        >>> cited_keys("SB1-tpus (16GiB); GC-v5e (16 GB); JAX-tpuinfo; SB1-tpus Q4", source_keys())
        ['SB1-tpus', 'GC-v5e', 'JAX-tpuinfo']
    """
    found: dict[str, int] = {}
    for key in keys:
        match = re.search(rf"(?<![\w.-]){re.escape(key)}(?![\w-])", text)
        if match:
            found[key] = match.start()
    return sorted(found, key=found.__getitem__)


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
        >>> get_chip("tpu-v5f")  # doctest: +NORMALIZE_WHITESPACE
        Traceback (most recent call last):
        ...
        symroof.errors.HardwareError: unknown chip 'tpu-v5f'; did you mean 'tpu-v5e' or 'tpu-v5p'?
            (known: tpu-v2, tpu-v3, tpu-v4p, tpu-v5e, tpu-v5p, tpu-v6e, tpu7x, a100-sxm-80gb, h100-sxm,
            h100-pcie, h200, b200, gb200, mi300x)
    """
    chips, index, _ = _cached(path)
    if not isinstance(name, str):
        raise HardwareError(f"a chip name must be a string, got {name!r}")
    key = normal_name(name)
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


def _cached(path: str | os.PathLike | None) -> tuple[dict[str, Chip], dict[str, str], Mapping[str, str]]:
    file = resource_path("hardware.json") if path is None else Path(path)
    try:
        file = file.resolve()
        stat = file.stat()
    except OSError as error:
        raise HardwareError(f"cannot read hardware file {file}: {error.strerror or error}") from None
    return _load(str(file), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _load(file: str, mtime_ns: int, size: int) -> tuple[dict[str, Chip], dict[str, str], Mapping[str, str]]:
    """A file's chips, its name index and source keys. Cached on the file's modification
    time and size as well as its path, so that an edited file is read again."""
    records, index, keys = read_file(file)
    return {chip_id: Chip(**{f.name: getattr(record, f.name) for f in fields(record)})
            for chip_id, record in records.items()}, index, keys
