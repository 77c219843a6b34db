"""A chip for people: `symroof chip NAME` as a card in sections, with units stated once
and sources as numbered footnotes; `symroof chips` as one table of headline figures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeGuard

import sympy

from ..dtypes import RATES
from ..hardware.chips import Chip, cited_keys
from ..hardware.shapes import Shape
from ..show import capacity, human, number, seconds, wrapped

# Each section of a chip's card: a title, what its figures are, and its fields with the
# label each is shown under. Fields a file adds later than this list go under "other".
_CARD: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    ("compute", "peak FLOPs/s per dtype (integer dtypes: OPs/s), dense unless marked 2:4 sparse",
     (*((f"peak_flops_per_s.{r}", r) for r in RATES),
      *((f"peak_flops_sparse_per_s.{r}", f"{r} 2:4 sparse") for r in RATES),
      *((f"vector_flops_per_s.{r}", f"{r} vector units") for r in RATES),
      ("clock_hz", "clock"))),
    ("memory", "capacities in bytes (SI: 1 GB = 1e9 bytes), bandwidths in bytes/s; on-chip "
               "VMEM and SMEM per TensorCore on TPUs, SMEM per SM on GPUs, L2 per chip",
     (("hbm_capacity_bytes", "HBM capacity"), ("hbm_bandwidth_bytes_per_s", "HBM bandwidth"),
      ("onchip.vmem_capacity_bytes", "VMEM capacity"), ("onchip.smem_capacity_bytes", "SMEM capacity"),
      ("onchip.l2_capacity_bytes", "L2 capacity"), ("onchip.vmem_bandwidth_bytes_per_s", "VMEM bandwidth"))),
    ("interconnect", "the chip-to-chip links; bandwidths in bytes/s, one-way (one direction) or "
                     "bidirectional (both summed), per link or over all the chip's links",
     (("interconnect.name", "name"), ("interconnect.topology", "topology"),
      ("interconnect.link_bandwidth_one_way_bytes_per_s", "link one-way"),
      ("interconnect.link_bandwidth_bidi_bytes_per_s", "link bidirectional"),
      ("interconnect.links_per_chip", "links per chip"),
      ("interconnect.chip_bandwidth_one_way_bytes_per_s", "chip one-way"),
      ("interconnect.wraparound_min_axis_size", "rings from axis of"),
      ("interconnect.hop_latency_s", "latency per hop"), ("interconnect.domain_size", "domain"),
      ("interconnect.pod_shape", "pod shape"), ("interconnect.slice_shapes", "slice shapes"))),
    ("host and network", "PCIe, the data-center network (DCN), GPU scale-out; bandwidths in bytes/s, "
                         "per chip unless marked per host or node",
     (("pcie_bandwidth_one_way_bytes_per_s", "PCIe one-way"),
      ("dcn.bandwidth_one_way_bytes_per_s_per_chip", "DCN one-way"),
      ("dcn.bandwidth_bytes_per_s_per_host", "DCN per host"), ("dcn.chips_per_host", "chips per host"),
      ("dcn.hop_latency_s", "DCN latency"),
      ("scaleout.name", "scale-out network"),
      ("scaleout.bandwidth_one_way_bytes_per_s_per_chip", "scale-out one-way"),
      ("scaleout.node_egress_bytes_per_s", "scale-out per node"), ("scaleout.chips_per_node", "chips per node"),
      ("scaleout.fabric", "fabric"), ("scaleout.hop_latency_s", "scale-out latency"))),
)
_LABELS = {path: label for _, _, fields in _CARD for path, label in fields}
_TOPOLOGIES = {"torus_2d": "2D torus", "torus_3d": "3D torus", "switch": "switch",
               "mesh": "fully connected (mesh)"}


def figure_text(path: str, value: sympy.Rational | int | str | Shape | tuple[Shape, ...] | None) -> str:
    """A chip's figure for people, in the unit its path names, SI-scaled (capacities with the
    binary figure beside them where the source quoted one).

    Examples:
        >>> figure_text("hbm_capacity_bytes", 17179869184), figure_text("peak_flops_per_s.int8", 394 * 10**12)
        ('17.18 GB (16 GiB)', '394 TOPs/s')
        >>> import sympy
        >>> figure_text("interconnect.hop_latency_s", sympy.Rational(1, 10**6))
        '1 us'
        >>> figure_text("interconnect.topology", "torus_2d"), figure_text("interconnect.pod_shape", (16, 20, 28))
        ('2D torus', '16 x 20 x 28 chips')
        >>> figure_text("interconnect.slice_shapes", ((2, 2), (4, 4), (16, 16)))  # how many, the smallest, the largest
        '3, 2x2 to 16x16'
    """
    if value is None:
        return "none"
    if _shapes(value):  # slice shapes: too many for a row
        return f"{len(value)}, {'x'.join(map(str, value[0]))} to {'x'.join(map(str, value[-1]))}"
    if isinstance(value, tuple):  # a shape: axis lengths
        return " x ".join(map(str, value)) + " chips"
    if isinstance(value, str):
        return _TOPOLOGIES.get(value, value).replace("_", " ") if not path.endswith(".name") else value
    digits = 7  # every figure in the file has at most seven significant figures (v4's vector rate): shown exactly
    if path.endswith("capacity_bytes"):
        return capacity(value, digits)
    if path.endswith("_s") and not path.endswith("per_s"):
        return seconds(value)
    if path.endswith("bytes_per_s") or "_bytes_per_s_" in path:
        return human(value, "bytes/s", digits)
    if path.startswith(("peak_flops", "vector_flops")):
        rate = path.rpartition(".")[2]
        return human(value, "OPs/s" if rate.startswith("int") else "FLOPs/s", digits)
    if path == "clock_hz":
        return human(value, "Hz", digits)
    if path == "interconnect.domain_size":
        return f"{value} chips"
    if path == "interconnect.wraparound_min_axis_size":
        return f"{value} (and multiples)"
    return number(value)


def _shapes(value: object) -> TypeGuard[tuple[Shape, ...]]:
    return isinstance(value, tuple) and bool(value) and isinstance(value[0], tuple)


def estimates_text(estimates: dict[str, tuple[sympy.Rational, str]], chip_id: str) -> str:
    """The estimated figures a result runs at (`Machine.estimates`: path -> (value, source)),
    for a report's "estimates" row; empty where there are none.

    Examples:
        >>> estimates_text({"vector_flops_per_s.fp32": (6 * 10**12, "estimate: ...")}, "tpu-v5e")
        ... # doctest: +NORMALIZE_WHITESPACE
        'fp32 vector units 6 TFLOPs/s (vector_flops_per_s.fp32) is an estimate, not a sourced figure
        (symroof chip tpu-v5e says how it was derived); --vector-flops or --override replaces it'
    """
    if not estimates:
        return ""
    each = ", ".join(f"{_LABELS.get(path, path)} {figure_text(path, value)} ({path})"
                     for path, (value, _) in estimates.items())
    flags = "--vector-flops or --override" if any(p.startswith("vector") for p in estimates) else "--override"
    return (f"{each} {'is an estimate' if len(estimates) == 1 else 'are estimates'}, not a sourced figure "
            f"(symroof chip {chip_id} says how it was derived); {flags} replaces it")


def chip_card(chip: Chip, references: dict[str, str] | None = None, variant: str | None = None) -> str:
    """A chip's figures as a card: grouped sections, figures SI-scaled, each with its field
    path (for `--override` and hardware.json) and a numbered footnote for its source; the
    sources, the references their keys stand for (`references`, the file's source keys),
    the variants and the notes at the bottom. No line is wider than `WRAP` columns."""
    references = references or {}
    rows = chip.rows()
    given = {path: (value, source) for path, value, source in rows}
    notes: dict[str, int] = {}  # source text -> footnote number

    def mark(source: str) -> str:
        if not source:
            return ""
        return f"[{notes.setdefault(source, len(notes) + 1)}]"

    title = f"{chip.name} ({chip.id}): {chip.vendor} {chip.kind}" + (f", variant {variant}" if variant else "")
    out = [title]
    if chip.aliases:
        out += wrapped("also called: " + ", ".join(chip.aliases))
    out += wrapped("SI units (1 GB = 1e9 bytes; GiB = 2^30 bytes, in brackets where a source "
                    "quotes it); [n]: the source, listed at the end; the last column names the "
                    "field for --override and in hardware.json")
    placed = set()
    sections = []
    for name, about, fields in _CARD:
        body, missing = [], []
        for path, label in fields:
            if path not in given:
                continue
            placed.add(path)
            value, source = given[path]
            if value is None and not source:
                missing.append(label)
                continue
            estimate = " (estimate)" if value is not None and chip.is_estimate(path) else ""
            body.append((label, figure_text(path, value) + estimate, mark(source), path))
        sections.append((name, about, body, missing))
    other = [(path, *given[path]) for path in given if path not in placed]
    if other:
        sections.append(("other", "other figures", [(p, figure_text(p, v), mark(s), p) for p, v, s in other], []))
    width = max((len(label) for _, _, body, _ in sections for label, *_ in body), default=0)
    refs = max((len(ref) for _, _, body, _ in sections for _, _, ref, _ in body), default=0)
    for name, about, body, missing in sections:
        if not body and not missing:
            continue
        out += ["", *wrapped(f"{name}: {about}")]
        # each section's figures as wide as its widest, so that a long figure (an estimate's,
        # marked) does not push another section's long field paths past the card's width
        shown = max((len(text) for _, text, *_ in body), default=0)
        for label, text, ref, path in body:
            out.append(f"  {label:<{width}}  {text:<{shown}}  {ref:<{refs}}  {path}".rstrip())
        if missing:
            out += wrapped("no figure: " + ", ".join(missing), "  ")
    if chip.variants:
        out += ["", "variants: other figures the sources give, applied with --variant NAME"]
        for name, changed in chip.variants.items():
            guessed = chip.sources.get(f"variants.{name}", "").startswith("estimate")
            figures = "; ".join(f"{_LABELS.get(p, p)} {figure_text(p, v)}" + (" (estimate)" if guessed else "")
                                for p, v in changed.items())
            source = mark(chip.sources.get(f"variants.{name}", ""))
            out += wrapped(f"{name} {source}: {figures}", "  ")
    if chip.notes:
        out += ["", "notes"]
        for note in chip.notes:
            out += wrapped(f"- {note}", "  ")
    if notes:
        out += ["", "sources"]
        for text, n in notes.items():
            out += wrapped(f"[{n}] {text}", "  ", len(f"[{n}] "))
    cited = cited_keys(" ".join([*notes, *chip.notes]), references)
    if cited:
        out += ["", "references (the keys the sources and notes cite)"]
        key_width = max(len(k) for k in cited)
        for key in cited:
            out += wrapped(f"{key:<{key_width}}  {references[key]}", "  ", key_width + 2)
    return "\n".join(out)


def _links(chip: Chip) -> str:
    """A chip's fast links, one way: how many times each's bandwidth (18 x 25 GB/s), or the
    chip's total where the file gives no count, or one link's where it gives no more."""
    count = chip.figure("interconnect.links_per_chip")
    link = chip.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
    total = chip.figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
    if count is not None and link is not None:
        return f"{int(count)} x {human(link, 'bytes/s')}"
    if total is not None:
        return f"{human(total, 'bytes/s')} in all"
    return "-" if link is None else f"{human(link, 'bytes/s')} each"


def chips_table(chips: Iterable[Chip]) -> str:
    """Every chip's headline figures, one row each, SI-scaled."""
    header = ("chip", "name", "bf16 peak", "HBM BW", "HBM", "critical", "links, one way", "vector (fp32)")
    lines = []
    for chip in chips:
        h = chip.headline()
        shows = {"bf16_flops_per_s": lambda v: human(v, "FLOPs/s"), "hbm_bandwidth_bytes_per_s":
                 lambda v: human(v, "bytes/s"), "hbm_capacity_bytes": capacity,
                 "critical_intensity_bf16": lambda v: number(v, 4)}
        vector = chip.figure("vector_flops_per_s.fp32")
        lines.append((chip.id, chip.name, *("-" if h[k] is None else show(h[k]) for k, show in shows.items()),
                      _links(chip), "-" if vector is None else human(vector, "FLOPs/s")
                      + (" (estimate)" if chip.is_estimate("vector_flops_per_s.fp32") else "")))
    widths = [max(len(x) for x in col) for col in zip(header, *lines)]
    body = ["  ".join(f"{x:<{w}}" for x, w in zip(line, widths)).rstrip() for line in (header, *lines)]
    return "\n".join([*body, "", *wrapped(
        "bf16 peak: dense (no 2:4 sparsity); HBM BW: bandwidth; HBM: capacity; critical: bf16 peak / HBM "
        "bandwidth, FLOPs/byte; links, one way: a chip's fast links (ICI, NVLink, Infinity Fabric) times one "
        "direction of each "
        "(the chip's total where the links are not given; both directions carry as much again); vector (fp32): "
        "the vector units' "
        "rate for elementwise work, an estimate where marked (no source gives it: symroof chip NAME says how it "
        "was derived); four significant figures; "
        "SI units: 1 GB = 1e9 bytes (GiB = 2^30 bytes, in brackets "
        "where the source quotes it); symroof chip NAME shows every figure and its source")])
