"""What a first user reads: counts with their SI-scaled figures beside them, short reprs, and
chip cards that fit a terminal, in one unit system, with their sources as footnotes."""

import io
import re

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symroof import analyze
from symroof.cli.command import main
from symroof.hardware.chips import get_chip, list_chips, source_keys
from symroof.render.chip_card import chip_card, chips_table
from symroof.render.text import summary, table
from symroof.roofline.collectives import link
from symroof.roofline.oneline import collective_line
from symroof.roofline.thresholds import threshold_summary
from symroof.show import beside, capacity, human

MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
SHARDED = "bf16[B_X, D_Y] *_D bf16[D_Y, F] -> bf16[B_X, F]"      # two mesh axes, an inserted AllReduce

_PREFIX = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24,
           "R": 1e27, "Q": 1e30, "m": 1e-3, "u": 1e-6, "n": 1e-9, "p": 1e-12, "f": 1e-15}


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), out=out, err=err)
    assert code == 0, err.getvalue()
    return out.getvalue()


def parse_human(text: str, unit: str) -> float:
    """Read back what `human` wrote: a number, an optional SI prefix, the unit."""
    shown = {"bytes": ("B", "bytes"), "bytes/s": ("B/s", "bytes/s")}.get(unit, (unit, unit))
    match = re.fullmatch(r"(-?[0-9.]+(?:e-?[0-9]+)?) ([kMGTPEZYRQmunpf]?)(\S+)", text)
    assert match, text
    number, prefix, tail = match.groups()
    assert tail == (shown[0] if prefix else shown[1]) or (not prefix and tail == shown[0]), text
    return float(number) * _PREFIX[prefix]


# ---- human-scaled figures -----------------------------------------------------------------

@settings(max_examples=400, deadline=None)
@given(mantissa=st.floats(1, 10, exclude_max=True), exponent=st.integers(-20, 40),
       unit=st.sampled_from(["FLOPs", "bytes", "bytes/s", "FLOPs/s", "s", "Hz"]),
       negative=st.booleans())
def test_human_reads_back_within_a_thousandth(mantissa, exponent, unit, negative):
    x = (-1 if negative else 1) * mantissa * 10.0**exponent
    text = human(x, unit)
    assert parse_human(text, unit) == pytest.approx(x, rel=1e-3)
    # the figure is short: at most four significant figures
    digits = re.match(r"-?([0-9.]+)", text).group(1).replace(".", "").strip("0")
    assert len(digits) <= 4, text


@given(st.integers(1, 10**40))
def test_human_of_exact_integers_and_rationals(n):
    assert parse_human(human(sympy.Integer(n), "FLOPs"), "FLOPs") == pytest.approx(n, rel=1e-3)
    assert parse_human(human(sympy.Rational(n, 7**5), "s"), "s") == pytest.approx(n / 7**5, rel=1e-3)


def test_human_rounds_up_into_the_next_prefix_and_says_bytes_plainly():
    assert human(999_960_000, "bytes") == "1 GB" and human(999_940_000, "bytes") == "999.9 MB"
    assert human(sympy.Rational(9_999_999, 10**10), "s") == "1 ms"
    assert human(100, "bytes") == "100 bytes" and human(0, "FLOPs") == "0 FLOPs"


def test_exact_counts_stay_exact_beside_the_scaled_figure():
    n = sympy.Integer(268435456)
    assert beside(n, "FLOPs") == "268435456 (268.4 MFLOPs)"
    assert beside(sympy.Integer(999), "FLOPs") == "999 FLOPs"            # nothing to scale: its unit
    assert beside(2 * sympy.Symbol("B"), "bytes") == "2*B"               # expressions as they are
    assert capacity(16 * 2**30) == "17.18 GB (16 GiB)" and capacity(80 * 10**9) == "80 GB"


# ---- the analyze report -------------------------------------------------------------------

def test_report_at_known_sizes_scales_counts_derived_by_the_engine():
    a = analyze(MATMUL, chip="v5e").at(B=4096, D=4096, F=4096)
    flops, bytes_, read = int(a.flops), int(a.bytes), int(a.bytes_read)
    assert flops == 2 * 4096**3
    out = run("analyze", MATMUL, "--chip", "v5e", "--set", "B=4096,D=4096,F=4096")
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines()
                if re.match(r"\S+( \S+)?\s{2,}", line))
    assert rows["FLOPs"].startswith(f"{flops} ({flops / 1e9:.1f} GFLOPs)")      # 137.4 GFLOPs
    assert rows["bytes"] == f"{bytes_} ({bytes_ / 1e6:.1f} MB)"
    assert rows["bytes read"] == f"{read} ({read / 1e6:.2f} MB)"
    peak, hbm = a.machine.peak("bf16"), a.machine.hbm_bw
    assert rows["chip"] == f"TPU v5e: {peak / 10**12} TFLOPs/s bf16 peak (dense), HBM {hbm / 10**9} GB/s"
    assert rows["achieved"].startswith(f"{a.achieved_flops_per_s / 10**12} TFLOPs/s")
    assert "e14" not in out and "e11" not in out                          # no raw exponents for rates


def test_report_leaves_expressions_as_they_are():
    out = run("analyze", MATMUL, "--chip", "v5e")
    assert "FLOPs          2*B*D*F   (exact: B*F*(2*D - 1))" in out
    assert "T_math         2*B*D*F / 1.97e14 s" in out


def test_report_lines_fit_and_the_conventions_say_units_are_si():
    out = run("analyze", SHARDED, "--mesh", "X=4,Y=2", "--chip", "v5e", "--set", "B=4096,D=8192,F=8192")
    tail = out.split("\n\n", 1)[1]
    assert all(len(line) <= 100 for line in tail.splitlines())
    assert "GB = 1e9 bytes" in tail
    V = 2 * 4096 // 4 * 8192                                              # bf16[B/X, F] per chip
    assert f"V = {V} bytes ({V / 1e6:.2f} MB) per chip" in out


# ---- reprs --------------------------------------------------------------------------------

def _short(text: str, lines: int = 15, width: int = 120) -> bool:
    return len(text.splitlines()) <= lines and all(len(line) <= width for line in text.splitlines())


@pytest.mark.parametrize("sizes", [{}, {"B": 4096, "D": 8192, "F": 8192}])
def test_summary_of_a_sharded_two_axis_analysis_is_a_short_table(sizes):
    a = analyze(SHARDED, chip="v5e", mesh="X=4,Y=2").at(**sizes)
    text = summary(a)
    assert _short(text), text
    rows = [line.split()[0] for line in text.splitlines()[:-1]]
    for name in ("spec", "mesh", "chip", "FLOPs", "bytes", "intensity", "T_math", "T_comms", "T_network",
                 "T_lower", "bound"):
        assert name in rows
    if sizes:
        flops = int(a.flops)
        assert f"{flops} ({flops / 1e9:.2f} GFLOPs)" in text
    assert len(table(a).splitlines()) > len(text.splitlines())           # the full report says more


def test_reprs_of_costs_collectives_and_thresholds_are_short():
    a = analyze(SHARDED, chip="v5e", mesh="X=4,Y=2")
    at = a.at(B=4096, D=8192, F=8192)
    for x in (a, at):
        move, t = x.collectives[0]
        for text in (repr(move), repr(t), repr(x.cost), repr(x.cost.steps[0]), collective_line(move, t)):
            assert _short(text, lines=1), text
        assert repr(move).startswith("MoveCost(AllReduce_Y bf16[B_X, F] {U_Y}: V = ")
    move, t = at.collectives[0]
    assert "16777216 bytes (16.78 MB)" in repr(move)
    assert repr(t) == f"Time({float(t.bandwidth) * 10**6:.6g} us; at least 2 us (2 hops); Y: ICI (no wraparound))"
    assert repr(link(a.mesh.axes[0], a.chip)) == \
        "Link(ICI (no wraparound): 45 GB/s one-way, 90 GB/s bidirectional, 1 us per hop)"
    threshold = threshold_summary(a.threshold("B"))
    assert _short(threshold) and "B > 960.98" in threshold


# ---- chips --------------------------------------------------------------------------------

def _figure_rows(card: str) -> list[tuple[str, str, str, str]]:
    """(label, value, footnote, path) for each figure row of a card."""
    row = re.compile(r"  (\S.*?)\s{2,}(\S.*?)\s{2,}(?:(\[\d+\])\s+)?([a-z0-9_]+(?:\.[a-z0-9_]+)?)")
    return [match.groups() for match in map(row.fullmatch, card.splitlines()) if match]


@pytest.mark.parametrize("chip", [c.id for c in list_chips()])
def test_chip_card_fits_100_columns_and_footnotes_every_source(chip):
    card = run("chip", chip)
    assert all(len(line) <= 100 for line in card.splitlines()), max(card.splitlines(), key=len)
    rows = _figure_rows(card)
    c = get_chip(chip)
    sourced = {path for path, value, source in c.rows() if value is not None or source}
    assert {path for *_, path in rows} == sourced
    footnotes = dict(re.findall(r"^  (\[\d+\]) (.*)$", card.split("\nsources\n")[1], re.M))
    for _, _, note, path in rows:
        if c.sources.get(path):
            assert footnotes[note].startswith(c.sources[path][:40])         # at the bottom, once
        else:
            assert note is None
    # every source key the card cites is expanded in its references, with its title
    keys = source_keys()
    body, _, references = card.partition("\nreferences")
    references = " ".join(references.split())                             # titles wrap
    for key, title in keys.items():
        if re.search(rf"(?<![\w.-]){re.escape(key)}(?![\w-])", body):
            assert f" {key} {title}" in references, key


@pytest.mark.parametrize("chip", [c.id for c in list_chips()])
def test_chip_card_capacities_are_si_with_binary_beside(chip):
    for label, value, _, path in _figure_rows(run("chip", chip)):
        if path.endswith("capacity_bytes"):
            assert re.fullmatch(r"[0-9.]+ [kMGT]?B( \([0-9]+ [KMGT]iB\))?", value), (path, value)
            exact = get_chip(chip).figure(path)
            assert parse_human(value.split(" (")[0], "bytes") == pytest.approx(float(exact), rel=1e-3)
        elif "GiB" in value or "MiB" in value:
            pytest.fail(f"a binary unit outside a capacity: {label} {value}")


def test_chip_card_figures_are_scaled_and_read_back_exactly():
    v5e = get_chip("v5e")
    rows = {path: value for _, value, _, path in _figure_rows(run("chip", "v5e"))}
    assert rows["hbm_capacity_bytes"] == "17.18 GB (16 GiB)"
    for path, unit in [("peak_flops_per_s.bf16", "FLOPs/s"), ("peak_flops_per_s.int8", "OPs/s"),
                       ("hbm_bandwidth_bytes_per_s", "bytes/s"),
                       ("dcn.bandwidth_one_way_bytes_per_s_per_chip", "bytes/s"),
                       ("interconnect.hop_latency_s", "s"), ("clock_hz", "Hz")]:
        assert parse_human(rows[path], unit) == pytest.approx(float(v5e.figure(path)), rel=1e-12), path


def test_chip_card_in_python_and_json_keeps_its_keys():
    import json
    data = json.loads(run("chip", "h100", "--json"))
    assert {"id", "name", "figures", "sources", "variants", "notes", "references"} <= set(data)
    assert data["figures"]["hbm_bandwidth_bytes_per_s"] == 3350000000000
    assert data["references"]["NV-H100"].startswith("NVIDIA H100 datasheet")
    assert chip_card(get_chip("h100"), source_keys()) == run("chip", "h100").rstrip("\n")


def test_chips_table_gives_a_chips_links_not_one_links_bandwidth():
    # "25 GB/s" under H100 read as its NVLink bandwidth: the table says how many links of how
    # much, and where the file gives all three, the links add up to the chip's own figure
    table = chips_table(list_chips())
    for chip in list_chips():
        count = chip.figure("interconnect.links_per_chip")
        link = chip.figure("interconnect.link_bandwidth_one_way_bytes_per_s")
        total = chip.figure("interconnect.chip_bandwidth_one_way_bytes_per_s")
        row = next(line for line in table.splitlines() if line.startswith(chip.id + " "))
        if count is not None and link is not None:
            assert f"  {int(count)} x {human(link, 'bytes/s')}  " in row, row
            assert total is None or count * link == total, chip.id
        elif total is not None:
            assert f"  {human(total, 'bytes/s')} in all  " in row, row


def test_chips_table_is_in_one_unit_system():
    out = run("chips")
    assert out.rstrip("\n") == chips_table(list_chips())
    header, *lines = out.split("\n\n")[0].splitlines()
    assert len(lines) == len(list_chips())
    for line in lines:
        assert not re.search(r"(?<!\()\b[0-9]+ [KMGT]iB", line), line   # GiB only in brackets beside GB
        assert "e1" not in line                                           # no raw exponents
    assert "1 GB = 1e9 bytes" in out


def test_achieved_says_which_peak_it_is_a_share_of():
    # 100% of peak under a chip line of 459 TFLOPs/s read as wrong: where the work mixes the
    # matrix and vector units, the line says its peak is FLOPs / T_math, and its share of the
    # matrix unit's own
    attention = ("fused { bf16[B, N, S, H] *_H bf16[B, N, T, H] -> fp32[B, N, S, T]; softmax_T fp32[B, N, S, T] -> "
                 "bf16[B, N, S, T]; bf16[B, N, S, T] *_T bf16[B, N, T, H] -> bf16[B, N, S, H] }")
    a = analyze(attention, chip="v5p").at(B=8, N=32, S=2048, T=2048, H=128)
    line = next(x for x in table(a).splitlines() if x.startswith("achieved"))
    matrix = a.rates["bf16"]
    assert f"{float(a.achieved_flops_per_s / a.peak_flops):.1%} of what its mix of matrix and vector work" in line
    assert f"{float(a.achieved_flops_per_s / matrix):.1%} of the {human(matrix, 'FLOPs/s')} bf16 peak" in line
    assert a.peak_flops < matrix  # the mix's peak is below the matrix unit's
    plain = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5p").at(B=8, D=4096, F=4096)
    assert next(x for x in table(plain).splitlines() if x.startswith("achieved")).endswith(" of peak)")


def test_a_max_is_printed_in_one_form_wherever_it_stands():
    # t_step printed as max(...) beside tokens/s as B/Max(...): one quantity, two forms
    from symroof.show import pretty
    B, S = sympy.symbols("B S", positive=True)
    step = sympy.Max(2 * B, B * S + 3)
    assert pretty(step).startswith("max(") and "max(" in pretty(B / step) and "Max(" not in pretty(B / step)
    assert "min(" in pretty(S / sympy.Min(B, S + 1))
    out = run("model", "llama-3-70b", "--decode", "--chip", "h100", "--chips", "8", "--set", "B=32,S=4096")
    lines = [x for x in out.splitlines() if x.split(" ")[0] in ("t_step", "tokens_per_s", "mfu")]
    assert len(lines) == 3 and all("= " in x and "max(" in x and "Max(" not in x for x in lines)
