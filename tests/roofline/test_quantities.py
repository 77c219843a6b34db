"""The declared quantities (symroof/roofline/quantities.py) against what the code does: every one is
an attribute of an analysis, and the JSON, `symroof check`, `value()` and the reports use
those names and no others."""

import re

import pytest
import sympy

import symroof
from symroof.claims import check as claims
from symroof.render import json_report
from symroof.render.latex import derivation
from symroof.render.text import table
from symroof.roofline import quantities
from symroof.roofline.quantities import EVALUABLE, QUANTITIES, QUANTITY

DECLARED = set(QUANTITY)
MESH = "mesh X=2; bf16[B, D_X] @ bf16[D_X, F] -> bf16[B, F]"
MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
SIZES = dict(B=4096, D=4096, F=4096)


def analyses():
    """Between them, every kind of analysis: symbolic, sized, on a mesh, bare counts."""
    return [symroof.analyze(MATMUL, chip="v5e"), symroof.analyze(MATMUL, chip="v5e").at(**SIZES),
            symroof.analyze(MESH, chip="v5e"), symroof.analyze(MESH, chip="v5e").at(**SIZES),
            symroof.roofline(flops=1e12, bytes=4e9, chip="h100")]


def derived():
    return {q.name for q in QUANTITIES if quantities.derived(analyses()[0], q.name)}


def test_declarations_are_well_formed():
    assert len(QUANTITY) == len(QUANTITIES)
    for q in QUANTITIES:
        assert re.fullmatch(r"[a-z_]+", q.name) and q.meaning and q.symbol and q.label
        assert q.unit in ("FLOPs", "bytes", "FLOPs/byte", "s", "FLOPs/s", "transcendentals", ""), q
        assert q.machine == bool(q.needs)
        assert not (q.needs == "links" and not q.mesh), f"{q.name}: links exist only on a mesh"
    labels = [q.label for q in QUANTITIES]
    assert len(set(labels)) == len(labels), "two quantities with one row label"


def test_every_declared_quantity_is_an_attribute_of_an_analysis():
    missing = {name for name in DECLARED if not hasattr(symroof.Analysis, name)}
    assert not missing, f"declared in quantities.py, not derived by Analysis: {missing}"


@pytest.mark.parametrize("make", range(5))
def test_json_top_level_keys_are_declared_quantities_or_structure(make):
    a = analyses()[make]
    free = a.free_dims
    data = a.to_dict(limit=["F"] if "F" in free else None, solve="B" if "B" in free else None)
    keys = set(data)
    unknown = keys - DECLARED - set(json_report.STRUCTURE_KEYS)
    assert not unknown, f"top-level JSON keys neither declared in quantities.py nor STRUCTURE_KEYS: {unknown}"
    assert not set(json_report.STRUCTURE_KEYS) & DECLARED


def test_json_writes_every_quantity_the_analysis_has():
    written = set()
    for a in analyses():
        written |= set(a.to_dict())
    assert derived() <= written, f"derived but not in the JSON: {derived() - written}"


def test_check_accepts_every_declared_quantity_and_nothing_else():
    assert set(claims.QUANTITY_KEYS) <= DECLARED
    assert not set(claims.OTHER_KEYS) & DECLARED
    a = symroof.analyze(MESH, chip="v5e").at(**SIZES)
    for name in derived():
        value = getattr(a, name)
        expected = "nan" if value is sympy.nan else str(value)
        result = claims.check_case({"id": name, "spec": MESH, "chip": {"name": "v5e"}, "set": SIZES,
                                    "expect": {name: expected}})
        assert result.error is None, (name, result.error)
        assert result.ok or value is sympy.nan, (name, result.outcomes)
    result = claims.check_case({"id": "x", "spec": MATMUL, "expect": {"not_a_quantity": 1}})
    assert result.error is not None and result.error.startswith("unknown expected key 'not_a_quantity'")
    listed = set(re.search(r"known: (.*)\)", result.error)[1].split(", "))
    assert listed == (derived() & set(claims.QUANTITY_KEYS)) | set(claims.OTHER_KEYS)


def test_value_takes_the_expressions_and_numbers_gives_them():
    a = symroof.analyze(MESH, chip="v5e").at(**SIZES)
    for name in EVALUABLE:
        if name in derived():
            assert isinstance(a.value(name), (int, float)), name
    assert set(a.numbers()) <= set(EVALUABLE)
    assert not {q.name for q in QUANTITIES if not q.expression} & set(a.numbers())
    with pytest.raises(symroof.SpecError, match="no quantity 'critical_intensity'"):
        a.value("critical_intensity")   # a ratio of figures: read the attribute


def test_report_rows_use_the_declared_labels():
    report = table(symroof.analyze(MESH, chip="v5e").at(**SIZES))
    labels = {line.split("  ")[0] for line in report.splitlines() if "  " in line}
    for name in ("flops", "flops_total", "bytes_read", "bytes_written", "bytes", "intensity",
                 "critical_intensity", "network_intensity", "t_math", "t_comms", "t_network", "t_lower",
                 "t_upper", "achieved_flops_per_s"):
        assert QUANTITY[name].label in labels, name


def test_latex_rows_use_the_declared_symbols():
    tex = derivation(symroof.analyze(MATMUL, chip="v5e"))
    for name in ("flops", "bytes", "t_math", "t_comms"):
        assert f"{QUANTITY[name].symbol} &" in tex, name
    assert r"\text{FLOPs per chip} &" in derivation(symroof.analyze(MESH, chip="v5e"))


# ---- the quantities another change adds: shown where they are not zero -----------------------

B, D, F = (symroof.dim_symbol(n) for n in "BDF")
EXTRA = {"transcendentals": B * F, "flops_vector": 3 * B * F, "t_vector": 3 * B * F / sympy.Integer(10**12)}


@pytest.fixture
def with_extras(monkeypatch):
    """Analyses that derive transcendentals, vector FLOPs and T_vector (whether or not
    roofline does yet), with these values, or zero."""
    def give(zero: bool = False):
        for name, value in EXTRA.items():
            shown = sympy.Integer(0) if zero else value
            monkeypatch.setattr(symroof.Analysis, name, property(lambda self, v=shown: self.substitute(v)))
    return give


def test_the_added_quantities_show_where_they_are_not_zero(with_extras):
    with_extras()
    a = symroof.analyze(MATMUL, chip="v5e").at(B=128, D=4096, F=4096)
    report = str(a)
    assert "transcendentals  524288 (524.3 k) (exp, log, tanh, rsqrt, ...: counted apart from FLOPs)" in report
    assert "vector FLOPs     1572864 (1.573 MFLOPs) on the vector unit (the rest on the matrix unit)" in report
    assert "T_vector         1.57286 us of T_math on the vector unit" in report
    data = a.to_dict()
    assert data["transcendentals"] == 524288 and data["flops_vector"] == 1572864
    assert data["t_vector"] == pytest.approx(1.572864e-6)
    tex = derivation(a)
    assert r"\text{transcendentals} &= 524288" in tex and r"\text{FLOPs}_\text{vector} &= 1572864" in tex
    assert r"T_\text{vector} &=" in tex
    result = symroof.check_case({"id": "t", "spec": MATMUL, "expect": {"transcendentals": "B*F"}})
    assert result.ok, result
    assert a.value("t_vector") == pytest.approx(1.572864e-6) and "transcendentals" in a.numbers()


def test_the_added_quantities_hide_where_they_are_zero(with_extras):
    with_extras(zero=True)
    a = symroof.analyze(MATMUL, chip="v5e").at(B=128, D=4096, F=4096)
    report, tex = str(a), derivation(a)
    assert "transcendentals" not in report and "vector" not in report
    assert "transcendentals" not in tex and "vector" not in tex
    assert a.to_dict()["transcendentals"] == 0   # the JSON has every quantity


# ---- the analysis shows itself, and so does every analysis it makes ------------------------------

def test_the_public_analysis_and_what_it_makes_show_themselves():
    a = symroof.analyze(MESH.replace("; ", "\n") + "\nbf16[B, F] -> bf16[B, F]", chip="v5e")
    assert isinstance(a, symroof.Analysis)
    made = [a.at(B=8), *a.lines, symroof.roofline(flops=1e12, chip="h100")]
    assert all(type(b) is symroof.Analysis for b in made)
    assert repr(a).startswith("spec ") and str(a.at(B=8)).startswith("spec ")
    assert a._repr_latex_().startswith("$$") and a.to_dict()["spec"] == a.spec
