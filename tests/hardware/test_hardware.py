"""hardware.json and symroof.hardware.chips: the shipped figures, exact arithmetic on them,
overrides and variants, and one broken file per validation rule."""

import copy
import json
import os
import re
from fractions import Fraction

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symroof.dtypes import RATES
from symroof.errors import HardwareError
from symroof.hardware.chips import Chip, cited_keys, get_chip, list_chips, load_hardware, source_keys
from symroof.resources import resource_path

REQUIRED_CHIPS = ("tpu-v2", "tpu-v3", "tpu-v4p", "tpu-v5e", "tpu-v5p", "tpu-v6e", "tpu7x",
                  "h100-sxm", "h100-pcie", "h200", "b200", "gb200", "a100-sxm-80gb", "mi300x")


def R(text: str) -> sympy.Rational:
    """An exact Rational from decimal text, independent of the module under test."""
    value = Fraction(text)
    return sympy.Rational(value.numerator, value.denominator)


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(resource_path("hardware.json").read_text(encoding="utf-8"))


# -- the shipped file ---------------------------------------------------------------

def test_shipped_file_has_every_required_chip():
    chips = load_hardware()
    assert set(REQUIRED_CHIPS) <= set(chips)
    assert all(isinstance(chip, Chip) for chip in chips.values())
    assert [chip.id for chip in list_chips()] == list(chips)


@pytest.mark.parametrize("spelling, chip_id", [
    ("v5e", "tpu-v5e"), ("TPU v5e", "tpu-v5e"), ("tpu_v5e", "tpu-v5e"), ("TPU-V5E", "tpu-v5e"),
    ("tpu v5 lite", "tpu-v5e"), ("v5p", "tpu-v5p"), ("v4", "tpu-v4p"), ("TPU v4p", "tpu-v4p"),
    ("v3", "tpu-v3"), ("v2", "tpu-v2"), ("trillium", "tpu-v6e"), ("v6e", "tpu-v6e"),
    ("ironwood", "tpu7x"), ("TPU7x", "tpu7x"),
    ("H100", "h100-sxm"), ("h100 sxm", "h100-sxm"), ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("H100 PCIe", "h100-pcie"), ("h200", "h200"), ("B200", "b200"), ("GB200", "gb200"),
    ("A100", "a100-sxm-80gb"), ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
    ("MI300X", "mi300x"), ("AMD Instinct MI300X", "mi300x"),
])
def test_chips_resolve_by_many_spellings(spelling, chip_id):
    assert get_chip(spelling).id == chip_id


def test_v5e_figures_are_the_rooflines_chapter_values_exactly():
    v5e = get_chip("v5e")
    assert v5e.peak_flops("bf16") == 197 * 10**12
    assert v5e.peak_flops("int8") == 394 * 10**12
    assert v5e.hbm_bandwidth == 82 * 10**10
    assert v5e.critical_intensity() == sympy.Rational(9850, 41)
    assert float(v5e.critical_intensity()) == pytest.approx(240.2439, abs=1e-4)
    assert v5e.figure("interconnect.link_bandwidth_one_way_bytes_per_s") == 45 * 10**9
    assert v5e.figure("interconnect.link_bandwidth_bidi_bytes_per_s") == 90 * 10**9
    assert v5e.figure("interconnect.hop_latency_s") == sympy.Rational(1, 10**6)
    assert v5e.figure("interconnect.wraparound_min_axis_size") == 16
    assert v5e.texts["interconnect.topology"] == "torus_2d"
    # the two-chip example: 1.97e14 / 4.5e10 = 4377 FLOPs per ICI byte
    ici = v5e.peak_flops("bf16") / v5e.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
    assert int(ici) == 4377


def test_every_figure_is_an_exact_rational():
    for chip in list_chips():
        for path, value in chip.figures.items():
            assert value is None or (isinstance(value, sympy.Rational) and value > 0), (chip.id, path)


def test_h100_figures_give_the_books_intensities():
    h100 = get_chip("H100")
    assert h100.peak_flops("bf16") == R("9.89e14")
    assert h100.hbm_bandwidth == R("3.35e12")
    assert h100.critical_intensity() == sympy.Rational(19780, 67)
    assert float(h100.critical_intensity()) == pytest.approx(295.2239, abs=1e-4)
    assert h100.figure("interconnect.chip_bandwidth_one_way_bytes_per_s") == R("4.5e11")
    assert int(h100.peak_flops("bf16") / R("4.5e11")) == 2197     # the book's "2200"
    assert round(float(h100.critical_intensity("fp8"))) == 591      # the book's "590"


def test_variants_give_the_books_other_values():
    table = get_chip("v5e").with_variant("book-tpus-table")
    assert table.hbm_bandwidth == R("8.1e11")
    assert table.critical_intensity("int8") == sympy.Rational(39400, 81)
    assert float(table.critical_intensity("int8")) == pytest.approx(486.42, abs=0.01)
    assert float(table.critical_intensity("int8")) / 2 == pytest.approx(243.21, abs=0.01)
    assert table.sources["hbm_bandwidth_bytes_per_s"].startswith("variant book-tpus-table: SB1-tpus")
    assert table.peak_flops("bf16") == get_chip("v5e").peak_flops("bf16")      # only HBM changes
    p5 = get_chip("h100", variant="book-v1-problem5")
    assert p5.peak_flops("bf16") == 10**15
    assert round(float(p5.critical_intensity())) == 299 and int(p5.critical_intensity()) == 298
    assert get_chip("v6e").with_variant("book-roofline-intro").peak_flops("bf16") == R("9.1e14")
    assert get_chip("v4").with_variant("book-tpus-q1").hbm_bandwidth == R("1.23e12")


def test_canonical_choices_where_sources_disagree():
    assert get_chip("v3").peak_flops("bf16") == R("1.4e14")          # book, not vendor 1.23e14
    assert get_chip("v4").hbm_bandwidth == R("1.2e12")               # table, not Q1's 1.23e12
    assert get_chip("v5p").hbm_bandwidth == R("2.8e12")              # table, not prose 2.5e12
    assert get_chip("v6e").peak_flops("bf16") == R("9.2e14")         # spec table, JAX
    assert get_chip("b200").peak_flops("bf16") == R("2.25e15")       # text and vendor, not 2.3e15
    assert get_chip("b200").hbm_bandwidth == R("8e12")
    assert get_chip("v5p").figure("interconnect.link_bandwidth_one_way_bytes_per_s") == R("9e10")


def test_unavailable_rates_are_null_and_say_how_to_supply_them():
    v5e = get_chip("v5e")
    assert v5e.figure("peak_flops_per_s.fp8") is None
    with pytest.raises(HardwareError, match=r"tpu-v5e has no figure for peak_flops_per_s\.fp8; "
                                            r"pass it with --peak-flops or --override"):
        v5e.peak_flops("fp8")
    with pytest.raises(HardwareError, match=r"\(fp32 matmul\)"):
        v5e.require("peak_flops_per_s.fp32", "fp32 matmul")
    with pytest.raises(HardwareError, match=r"hardware.json lists no int32 rate for any chip"):
        v5e.peak_flops("int32")
    assert get_chip("a100").figure("peak_flops_per_s.fp8") is None    # A100 has no fp8
    assert get_chip("tpu7x").figure("interconnect.link_bandwidth_one_way_bytes_per_s") is None


def test_unknown_paths_are_errors_with_a_suggestion():
    v5e = get_chip("v5e")
    with pytest.raises(HardwareError, match=r"tpu-v5e has no figure 'hbm_bandwith_bytes_per_s'; "
                                            r"did you mean 'hbm_bandwidth_bytes_per_s'\?"):
        v5e.figure("hbm_bandwith_bytes_per_s")
    with pytest.raises(HardwareError, match=r"is text, not a figure"):
        v5e.figure("interconnect.topology")
    # a known path the chip's entry leaves out is simply unknown, not an error
    assert v5e.figure("scaleout.node_egress_bytes_per_s") is None


def test_every_non_null_figure_has_a_source_naming_a_source_key(shipped):
    keys = shipped["source_keys"]
    for chip in list_chips():
        for path, value in chip.figures.items():
            if value is not None:
                assert chip.sources.get(path, "").strip(), (chip.id, path)
        for key, text in chip.sources.items():
            assert any(k in text for k in keys), (chip.id, key, text)
        for name in chip.variants:
            assert chip.sources[f"variants.{name}"].strip()


def test_block_sources_cover_values_but_not_nulls():
    v5e = get_chip("v5e")
    assert v5e.sources["interconnect.links_per_chip"] == v5e.sources["interconnect.topology"]
    assert "SB1-tpus" in v5e.sources["interconnect.links_per_chip"]
    assert "peak_flops_per_s.fp64" not in v5e.sources        # null, no source of its own
    assert "JAX-tpuinfo" in v5e.sources["peak_flops_per_s.fp8"]  # null, explained


def test_dense_peaks_are_half_the_vendor_sparse_figures():
    compared = 0
    for chip in list_chips():
        for rate in RATES:
            dense = chip.figures.get(f"peak_flops_per_s.{rate}")
            sparse = chip.figures.get(f"peak_flops_sparse_per_s.{rate}")
            if dense is not None and sparse is not None:
                compared += 1
                assert dense <= sparse, (chip.id, rate)
                assert abs(2 * dense / sparse - 1) < sympy.Rational(1, 1000), (chip.id, rate)
    assert compared > 20


def test_interconnect_figures_agree_with_each_other():
    for chip in list_chips():
        one_way = chip.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
        bidi = chip.figure("interconnect.link_bandwidth_bidi_bytes_per_s")
        links = chip.figure("interconnect.links_per_chip")
        egress = chip.figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
        if one_way is not None and bidi is not None:
            assert bidi == 2 * one_way, chip.id
        if one_way is not None and links is not None and egress is not None:
            assert egress == links * one_way, chip.id
        for name, fields in chip.variants.items():
            varied = chip.with_variant(name)
            one_way = varied.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
            bidi = varied.figure("interconnect.link_bandwidth_bidi_bytes_per_s")
            if one_way is not None and bidi is not None:
                assert bidi == 2 * one_way, (chip.id, name)


def test_chips_are_frozen_and_read_only():
    v5e = get_chip("v5e")
    with pytest.raises(TypeError):
        v5e.figures["hbm_bandwidth_bytes_per_s"] = 1
    with pytest.raises(AttributeError):
        v5e.name = "other"
    assert get_chip("v5e") == get_chip("TPU v5e") and hash(get_chip("v5e")) == hash(v5e)
    assert "tpu-v5e" in repr(v5e)


def test_rows_list_figures_and_texts_in_file_order():
    rows = get_chip("h100").rows()
    paths = [path for path, _, _ in rows]
    assert len(paths) == len(set(paths))
    assert paths.index("peak_flops_per_s.bf16") < paths.index("hbm_bandwidth_bytes_per_s") \
        < paths.index("interconnect.name") < paths.index("scaleout.fabric")
    table = {path: (value, source) for path, value, source in rows}
    assert table["interconnect.name"][0] == "NVLink"
    assert table["hbm_bandwidth_bytes_per_s"] == (R("3.35e12"), table["hbm_bandwidth_bytes_per_s"][1])
    assert "SB1-roof" in table["hbm_bandwidth_bytes_per_s"][1]


# -- overrides ----------------------------------------------------------------------

def test_with_figures_overrides_exactly_and_marks_the_source():
    v5e = get_chip("v5e")
    changed = v5e.with_figures({"hbm_bandwidth_bytes_per_s": "8.1e11", "peak_flops_per_s.fp8": 4e14,
                                "interconnect.hop_latency_s": "1e-6",
                                "peak_flops_per_s.int8": sympy.Rational(394, 1) * 10**12})
    assert changed.hbm_bandwidth == 81 * 10**10
    assert changed.peak_flops("fp8") == 4 * 10**14
    assert changed.figure("interconnect.hop_latency_s") == sympy.Rational(1, 10**6)
    for path in ("hbm_bandwidth_bytes_per_s", "peak_flops_per_s.fp8"):
        assert changed.sources[path] == "override"
    assert v5e.hbm_bandwidth == 82 * 10**10 and v5e.figure("peak_flops_per_s.fp8") is None  # untouched
    assert changed.sources["peak_flops_per_s.bf16"] == v5e.sources["peak_flops_per_s.bf16"]
    added = v5e.with_figures({"scaleout.node_egress_bytes_per_s": 1e11})
    assert added.figure("scaleout.node_egress_bytes_per_s") == 10**11


@pytest.mark.parametrize("overrides, message", [
    ({"hbm_bandwith_bytes_per_s": 1e12}, r"no such figure; did you mean 'hbm_bandwidth_bytes_per_s'\?"),
    ({"interconnect.topology": 1}, r"cannot override 'interconnect\.topology'"),
    ({"hbm_bandwidth_bytes_per_s": 0}, r"must be positive"),
    ({"hbm_bandwidth_bytes_per_s": -8.2e11}, r"must be positive"),
    ({"hbm_bandwidth_bytes_per_s": float("nan")}, r"finite decimal number"),
    ({"hbm_bandwidth_bytes_per_s": float("inf")}, r"finite decimal number"),
    ({"hbm_bandwidth_bytes_per_s": True}, r"must be a number"),
    ({"hbm_bandwidth_bytes_per_s": "fast"}, r"finite decimal number, got 'fast'"),
    ({"hbm_bandwidth_bytes_per_s": "__import__('os')"}, r"finite decimal number"),
    ({"hbm_bandwidth_bytes_per_s": "8.2e11 + 1"}, r"finite decimal number"),
    ({"hbm_bandwidth_bytes_per_s": "1/0"}, r"finite decimal number"),
    ({"hbm_bandwidth_bytes_per_s": "1e999999999"}, r"finite decimal number"),
    ({"hbm_bandwidth_bytes_per_s": [1]}, r"must be a number, got list"),
    ({"interconnect.links_per_chip": 4.5}, r"must be a whole number"),
])
def test_bad_overrides_are_refused(overrides, message):
    with pytest.raises(HardwareError, match=message):
        get_chip("v5e").with_figures(overrides)


def test_unknown_variant_lists_the_chips_variants():
    with pytest.raises(HardwareError, match=r"tpu-v5e has no variant 'book-tpu-table'; did you mean "
                                            r"'book-tpus-table'\? \(its variants: book-tpus-table, "):
        get_chip("v5e").with_variant("book-tpu-table")
    with pytest.raises(HardwareError, match=r"its variants: none"):
        get_chip("mi300x").with_variant("vendor")


def test_unknown_chip_suggests_the_closest():
    with pytest.raises(HardwareError, match=r"unknown chip 'tpu-v5f'; did you mean 'tpu-v5e' or "
                                            r"'tpu-v5p'\? \(known: tpu-v2, "):
        get_chip("tpu-v5f")
    with pytest.raises(HardwareError, match=r"unknown chip 'H1000'; did you mean 'h100-sxm'\?"):
        get_chip("H1000")
    with pytest.raises(HardwareError, match=r"unknown chip 'zzz' \(known: "):
        get_chip("zzz")


json_numbers = st.one_of(
    st.integers(min_value=1, max_value=10**30),
    st.floats(min_value=0, exclude_min=True, allow_nan=False, allow_infinity=False),
)


@settings(max_examples=300, deadline=None)
@given(value=json_numbers, path=st.sampled_from(["hbm_bandwidth_bytes_per_s", "peak_flops_per_s.fp8",
                                                 "interconnect.hop_latency_s", "onchip.l2_capacity_bytes"]))
def test_any_json_number_round_trips_exactly(value, path):
    chip = get_chip("v5e")
    expected = sympy.Rational(repr(value))
    assert chip.with_figures({path: value}).figure(path) == expected
    assert chip.with_figures({path: repr(value)}).figure(path) == expected
    assert chip.with_figures({path: json.loads(json.dumps(value))}).figure(path) == expected


# -- user files and validation ------------------------------------------------------

def write(tmp_path, data, name="hw.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return str(path)


def chip_of(data: dict, chip_id: str) -> dict:
    return next(c for c in data["chips"] if c["id"] == chip_id)


def test_a_copy_of_the_shipped_file_loads_the_same(tmp_path, shipped):
    path = write(tmp_path, shipped)
    mine = load_hardware(path)
    assert list(mine) == list(load_hardware())
    for chip_id, chip in mine.items():
        assert chip.figures == load_hardware()[chip_id].figures
    assert get_chip("v5e", path).critical_intensity() == sympy.Rational(9850, 41)


def test_a_minimal_user_file(tmp_path):
    data = {"chips": [{
        "id": "my-chip", "name": "My Chip", "vendor": "acme", "kind": "gpu",
        "peak_flops_per_s": dict.fromkeys(RATES) | {"bf16": 1e15},
        "hbm_capacity_bytes": 10**11, "hbm_bandwidth_bytes_per_s": 2.5e12,
        "sources": {"peak_flops_per_s": "measured", "hbm_capacity_bytes": "spec",
                    "hbm_bandwidth_bytes_per_s": "STREAM triad"}}]}
    path = write(tmp_path, data)
    chip = get_chip("Acme my chip", path)
    assert chip.critical_intensity() == 400
    assert chip.figure("interconnect.domain_size") is None


def test_the_cache_notices_an_edited_file(tmp_path, shipped):
    data = copy.deepcopy(shipped)
    path = write(tmp_path, data)
    assert get_chip("v5e", path).hbm_bandwidth == R("8.2e11")
    chip_of(data, "tpu-v5e")["hbm_bandwidth_bytes_per_s"] = 8.1e11
    write(tmp_path, data)
    stat = os.stat(path)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert get_chip("v5e", path).hbm_bandwidth == R("8.1e11")


def _set(chip_id, path, value):
    def mutate(data):
        node = chip_of(data, chip_id)
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        node[last] = value
    return mutate


def _delete(chip_id, path):
    def mutate(data):
        node = chip_of(data, chip_id)
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        del node[last]
    return mutate


def _rename(chip_id, old, new, block=None):
    def mutate(data):
        node = chip_of(data, chip_id)
        node = node[block] if block else node
        node[new] = node.pop(old)
    return mutate


def _source_drop(chip_id, key):
    return lambda data: chip_of(data, chip_id)["sources"].pop(key)


def _duplicate_id(data):
    clone = copy.deepcopy(chip_of(data, "tpu-v5e"))
    clone["aliases"] = []
    data["chips"].append(clone)


def _missing_id(data):
    del data["chips"][0]["id"]


BROKEN = [
    # missing required fields
    (_missing_id, r"chip #0: id: missing \(required\)"),
    (_delete("tpu-v5e", "name"), r"chip 'tpu-v5e': name: missing"),
    (_delete("tpu-v5e", "peak_flops_per_s"), r"chip 'tpu-v5e': peak_flops_per_s: missing"),
    (_delete("tpu-v5e", "peak_flops_per_s.fp8"), r"chip 'tpu-v5e': peak_flops_per_s\.fp8: missing"),
    (_delete("h100-sxm", "hbm_bandwidth_bytes_per_s"), r"chip 'h100-sxm': hbm_bandwidth_bytes_per_s: missing"),
    (_delete("tpu-v5e", "hbm_capacity_bytes"), r"chip 'tpu-v5e': hbm_capacity_bytes: missing"),
    (_set("tpu-v5e", "hbm_bandwidth_bytes_per_s", None), r"'tpu-v5e': hbm_bandwidth_bytes_per_s: must be a number, not null"),
    # wrong types
    (_set("tpu-v5e", "hbm_bandwidth_bytes_per_s", "8.2e11"),
     r"'tpu-v5e': hbm_bandwidth_bytes_per_s: must be a number or null, got a string \('8\.2e11'\)"),
    (_set("tpu-v5e", "peak_flops_per_s.bf16", True), r"'tpu-v5e': peak_flops_per_s\.bf16: must be a number or null, got true"),
    (_set("h100-sxm", "interconnect.links_per_chip", [18]), r"'h100-sxm': interconnect\.links_per_chip: .*got a list"),
    (_set("tpu-v5e", "interconnect", 4.5e10), r"'tpu-v5e': interconnect: must be a JSON object"),
    (_set("tpu-v5e", "name", 5), r"'tpu-v5e': name: must be a non-empty string"),
    (_set("tpu-v5e", "aliases", "v5e"), r"'tpu-v5e': aliases: must be a list"),
    (_set("tpu-v5e", "interconnect.topology", 2), r"'tpu-v5e': interconnect\.topology: must be a string or null"),
    (_set("tpu-v5e", "interconnect.links_per_chip", 4.0), r"'tpu-v5e': interconnect\.links_per_chip: must be a whole number"),
    (_set("tpu-v5e", "notes", "x"), r"'tpu-v5e': notes: must be a list of strings"),
    # non-positive, non-finite
    (_set("tpu-v5e", "hbm_bandwidth_bytes_per_s", 0), r"'tpu-v5e': hbm_bandwidth_bytes_per_s: must be positive"),
    (_set("tpu-v5e", "peak_flops_per_s.int8", -3.94e14), r"'tpu-v5e': peak_flops_per_s\.int8: must be positive"),
    (_set("tpu-v5e", "peak_flops_per_s.int8", float("nan")), r"'tpu-v5e': peak_flops_per_s\.int8: must be a finite"),
    (_set("tpu-v5e", "clock_hz", float("inf")), r"'tpu-v5e': clock_hz: must be a finite"),
    # unknown keys, with a suggestion
    (_rename("tpu-v5e", "hbm_bandwidth_bytes_per_s", "hbm_bandwith_bytes_per_s"),
     r"'tpu-v5e': hbm_bandwith_bytes_per_s: unknown field; did you mean 'hbm_bandwidth_bytes_per_s'\?"),
    (_rename("tpu-v5e", "topology", "topolgy", block="interconnect"),
     r"'tpu-v5e': interconnect\.topolgy: unknown field; did you mean 'topology'\?"),
    (_set("tpu-v5e", "peak_flops_per_s.bf61", 1e14), r"'tpu-v5e': peak_flops_per_s\.bf61: unknown field; did you mean 'bf16'\?"),
    (_set("tpu-v5e", "interconnect.topology", "torus2d"),
     r"'tpu-v5e': interconnect\.topology: must be one of .*; did you mean 'torus_2d'\?"),
    (_set("tpu-v5e", "kind", "npu"), r"'tpu-v5e': kind: must be one of tpu, gpu"),
    (_set("tpu-v5e", "sources.hbm_bandwith_bytes_per_s", "x"),
     r"'tpu-v5e': sources\.hbm_bandwith_bytes_per_s: names no field.*did you mean 'hbm_bandwidth_bytes_per_s'\?"),
    # duplicate ids, clashing aliases
    (_duplicate_id, r"chip 'tpu-v5e': id: duplicate id"),
    (_set("tpu-v5p", "aliases", ["v5e"]), r"chip 'tpu-v5p': aliases: 'v5e' also names chip 'tpu-v5e'"),
    (_set("h200", "name", "H100"), r"chip 'h200': name: 'H100' also names chip 'h100-sxm'"),
    # a figure with no source
    (_source_drop("tpu-v5e", "clock_hz"), r"'tpu-v5e': clock_hz: has no source"),
    (_source_drop("h100-sxm", "scaleout"), r"'h100-sxm': scaleout\.bandwidth_one_way_bytes_per_s_per_chip: has no source"),
    (_source_drop("tpu-v5e", "variants.vendor"), r"'tpu-v5e': variants\.vendor: has no source"),
    # variants naming fields that do not exist, or with bad values
    (_set("tpu-v5e", "variants.book-tpus-table", {"hbm_bandwith_bytes_per_s": 8.1e11}),
     r"'tpu-v5e': variants\.book-tpus-table\.hbm_bandwith_bytes_per_s: names no figure; did you mean"),
    (_set("tpu-v5e", "variants.book-tpus-table", {"interconnect.topology": 1}),
     r"'tpu-v5e': variants\.book-tpus-table\.interconnect\.topology: names no figure"),
    (_set("tpu-v5e", "variants.book-tpus-table", {"hbm_bandwidth_bytes_per_s": None}),
     r"'tpu-v5e': variants\.book-tpus-table\.hbm_bandwidth_bytes_per_s: must be a number"),
    (_set("tpu-v5e", "variants.book-tpus-table", {}), r"'tpu-v5e': variants\.book-tpus-table: must be a non-empty"),
    # the table of source keys
    (lambda data: data.update(source_keys=["SB1-roof"]), r"source_keys: must be a JSON object, got a list"),
    (lambda data: data["source_keys"].update({"GC-v5e": ""}), r"source_keys\.GC-v5e: must be a non-empty key"),
    (lambda data: data["source_keys"].update({"GC-v5e": 5}), r"source_keys\.GC-v5e: .*got the number 5"),
]


@pytest.mark.parametrize("mutate, message", BROKEN)
def test_broken_files_name_the_chip_and_field(tmp_path, shipped, mutate, message):
    data = copy.deepcopy(shipped)
    mutate(data)
    path = write(tmp_path, data, "broken.json")
    with pytest.raises(HardwareError, match=re.escape(path) + r": .*" + message):
        load_hardware(path)


@pytest.mark.parametrize("text, message", [
    ('{"chips": [}', r"not valid JSON: Expecting value \(line 1, column 12\)"),
    # the json module's own words differ by version (3.13: "Illegal trailing comma", column 13)
    ('{"chips": [\n  {"id": "x",}\n]}', r"not valid JSON: .* \(line 2, column 1[34]\)"),
    ('[1, 2]', r"expected a JSON object with a 'chips' list"),
    ('{"chips": [], "chip": []}', r"chip: unknown top-level field; did you mean 'chips'\?"),
    ('{"chips": [], "schema_version": 2}', r"schema_version: this symroof reads version 1"),
    ('{"chips": [], "chips": []}', r"duplicate key 'chips'"),
    ('{"chips": [3]}', r"chip #0: \(entry\): must be a JSON object"),
])
def test_broken_json_names_the_file_and_place(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(HardwareError, match=re.escape(str(path)) + r": " + message):
        load_hardware(path)


def test_a_missing_file_is_a_hardware_error(tmp_path):
    with pytest.raises(HardwareError, match=r"cannot read hardware file .*nothing\.json"):
        load_hardware(tmp_path / "nothing.json")


# -- source keys: what the sources cite, expanded --------------------------------------


def test_source_keys_are_the_files_table(tmp_path, shipped):
    assert source_keys() == shipped["source_keys"]
    assert source_keys(write(tmp_path, {"chips": shipped["chips"]})) == {}     # a file may have none


def test_cited_keys_are_whole_words_in_order_of_first_citation():
    keys = source_keys()
    assert cited_keys("GC-7x-perf (x); SB1-tpus Q4; GC-7x; SB1-tpus table", keys) == ["GC-7x-perf", "SB1-tpus", "GC-7x"]
    assert cited_keys("variants.book-tpus-table; underived", keys) == []
    for chip in list_chips():   # every source of every chip cites at least one key of the table
        for path, text in chip.sources.items():
            assert cited_keys(text, keys), (chip.id, path, text)


def test_a_card_for_a_file_without_source_keys(tmp_path):
    import io

    from symroof.cli.command import main
    data = {"chips": [{
        "id": "my-chip", "name": "My Chip", "vendor": "acme", "kind": "gpu",
        "peak_flops_per_s": dict.fromkeys(RATES) | {"bf16": 1e15},
        "hbm_capacity_bytes": 96 * 2**30, "hbm_bandwidth_bytes_per_s": 2.5e12,
        "sources": {"peak_flops_per_s": "measured", "hbm_capacity_bytes": "spec",
                    "hbm_bandwidth_bytes_per_s": "STREAM triad"}}]}
    out = io.StringIO()
    assert main(["chip", "my-chip", "--hardware", write(tmp_path, data)], out=out) == 0
    card = out.getvalue()
    assert "references" not in card and "[3] STREAM triad" in card
    assert re.search(r"^  bf16 +1 PFLOPs/s +\[1\] +peak_flops_per_s\.bf16$", card, re.M)
    assert re.search(r"^  HBM capacity +103.1 GB \(96 GiB\) +\[2\] +hbm_capacity_bytes$", card, re.M)
