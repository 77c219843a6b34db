"""One `Analysis`: every entry point returns it (or a result holding it), it shows itself as
JSON, text and LaTeX, and the package defines no other class of that name and no subclass."""

import ast
import importlib
import importlib.util
import inspect
import io
import json
import pkgutil
from pathlib import Path

import pytest
import sympy

import symroof
from symroof.cli.command import main
from symroof.models import planner
from symroof.render.json_report import json_value, to_json_dict

MATMUL = "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"


def _modules() -> list[str]:
    return ["symroof", *(m.name for m in pkgutil.walk_packages(symroof.__path__, "symroof."))]


def test_a_models_analysis_is_the_analysis_and_gives_the_json_report():
    m = symroof.model("llama-3-70b")
    a = m.analysis
    assert type(a) is symroof.Analysis
    data = a.to_dict()
    assert data == to_json_dict(a)
    assert json.loads(json.dumps(data)) == data  # JSON-ready: no sympy object left in it
    assert data["flops"] == int(a.flops) and data["bytes"] == int(a.bytes)
    assert data["values"] == {} and len(data["lines"]) == len(a.lines) > 1
    # the model's own --json reports the same FLOPs (one chip: per chip is the whole step)
    out = io.StringIO()
    assert main(["model", "llama-3-70b", "--json"], out=out) == 0
    assert json.loads(out.getvalue())["flops"] == data["flops"]


def test_a_models_analysis_on_a_chip_has_its_times_in_the_json():
    a = symroof.model("llama-3-70b", "prefill", "v5e").analysis
    data = a.to_dict()
    assert data["t_math"] == pytest.approx(float(a.t_math)) and data["t_lower"] == pytest.approx(float(a.t_lower))
    assert data["bound"] == a.bound == "compute"


def _is_latex(text: object) -> bool:
    return isinstance(text, str) and text.startswith("$$") and text.endswith("$$") and r"\text{FLOPs}" in text


@pytest.mark.filterwarnings("ignore:fused:symroof.SymroofWarning")  # the scores of attention at T = 1024
def test_every_entry_point_shows_itself_in_latex():
    analyses = {
        "analyze": symroof.analyze(MATMUL, chip="v5e"),
        "roofline": symroof.roofline(flops=1e12, bytes=4e9, chip="h100"),
    }
    m = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": 16, "T": 1024}, strategy="dp=2,tp=2")
    analyses |= {"model": m.analysis, "model_analysis": m.model_analysis, "step_analysis": m.step_analysis}
    piped = symroof.model("llama-3-8b", "train", "tpu-v5p", {"B": 16, "T": 1024}, strategy="pp=4", microbatches=8)
    analyses |= {"first stage": piped.pipeline.first.step_analysis, "last stage": piped.pipeline.last.step_analysis}
    for name, a in analyses.items():
        assert type(a) is symroof.Analysis, name
        assert _is_latex(a._repr_latex_()), name
        assert a.to_dict()["flops"] == json_value(a.flops), name
        assert str(a) == a.table() and "T_lower" in a.table() and repr(a) != str(a), name


def test_every_planner_candidate_holds_the_analysis():
    p = planner.plan("llama-2-7b", "h100", 2, 2 * 4096, "train")
    costed = [c for c in p.candidates if c.model is not None]
    assert costed
    for c in costed:
        assert c.model is not None
        assert type(c.model.analysis) is symroof.Analysis and _is_latex(c.model.analysis._repr_latex_())


def test_from_jax_holds_the_analysis_of_its_program():
    pytest.importorskip("jax")
    imported = symroof.from_jax(lambda x, w: x @ w, "x=bf16[B, D]; w=bf16[D, F]")
    a = imported.analysis
    assert type(a) is symroof.Analysis
    B, D, F = (symroof.dim_symbol(n) for n in "BDF")
    assert sympy.simplify(a.flops - 2 * B * D * F) == 0
    assert imported.to_dict() == a.to_dict() and imported.to_dict()["flops"] == "2*B*D*F"
    assert _is_latex(imported._repr_latex_()) and imported._repr_latex_() == a._repr_latex_()


def test_the_public_functions_show_no_internal_parameter():
    for function in (symroof.analyze, symroof.roofline):
        parameters = inspect.signature(function).parameters
        assert "cls" not in parameters and not any(p.startswith("_") for p in parameters), function.__name__
        assert inspect.signature(function).return_annotation in ("Analysis", symroof.Analysis)


def test_the_package_defines_one_analysis_and_no_subclass_of_it():
    defined, subclassing = [], []
    for name in _modules():
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        # read, not only imported: a module whose optional dependency is missing still counts
        tree = ast.parse(Path(spec.origin).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                if node.name == "Analysis":
                    defined.append(name)
                if any("Analysis" in ast.unparse(base) for base in node.bases):
                    subclassing.append(f"{name}.{node.name}")
    assert defined == ["symroof.analysis"]
    assert subclassing == []


def test_no_imported_class_derives_from_the_analysis():
    found = []
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ImportError:  # an optional dependency (torch, ...): the source check above reads it
            continue
        found += [f"{name}.{k}" for k, v in vars(module).items()
                  if inspect.isclass(v) and v.__module__ == name and v.__name__ == "Analysis"]
    assert found == ["symroof.analysis.Analysis"]
    assert symroof.Analysis.__subclasses__() == []
    assert symroof.Analysis.__mro__ == (symroof.Analysis, object)  # built by composition
