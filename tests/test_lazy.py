"""`import symroof` and each command load only what they use (issue 31): the package's names
are imported when first asked for, and are the objects their modules define."""

from __future__ import annotations

import importlib
import subprocess
import sys

import symroof

WHERE = {"analyze": "symroof.analysis", "check_case": "symroof.claims.models", "from_jax": "symroof.from_jax.importer",
         "from_torch": "symroof.from_torch.importer", "counted": "symroof.models.counted",
         "plan": "symroof.models.planner", "model": "symroof.models.report", "cost": "symroof.roofline.cost",
         "roofline": "symroof.analysis", "Threshold": "symroof.roofline.thresholds"}


def test_each_name_is_its_modules_object():
    for name in symroof.__all__:
        assert getattr(symroof, name) is not None
    for name, module in WHERE.items():  # a function named as its module, or as a package: the function
        assert getattr(symroof, name) is getattr(importlib.import_module(module), name)
    assert symroof.derive is importlib.import_module("symroof.models.derive")


def _loaded(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                          check=True, capture_output=True, text=True)
    return set(done.stdout.split())


def test_a_command_loads_only_its_own_modules():
    heavy = {"symroof.models.planner", "symroof.from_jax.importer", "symroof.from_torch.importer",
             "symroof.claims.models", "symroof.measure.calibrate", "torch", "jax"}
    loaded = _loaded("from symroof.cli.command import main\n"
                     "main(['analyze', 'bf16[B, D] @ bf16[D, F] -> bf16[B, F]', '--chip', 'tpu-v5e'])")
    assert "symroof.analysis" in loaded and not loaded & heavy
    # nor the models' tables, the other outputs' modules or what many chips add up to
    others = {"symroof.models", "symroof.render.latex", "symroof.render.json_report", "symroof.render.chip_card",
              "symroof.hardware.pods", "matplotlib", "numpy"}
    assert not loaded & others
    as_json = _loaded("from symroof.cli.command import main\n"
                      "main(['analyze', 'bf16[B, D] @ bf16[D, F] -> bf16[B, F]', '--chip', 'tpu-v5e', '--json'])")
    assert "symroof.render.json_report" in as_json and not as_json & (others - {"symroof.render.json_report"})
    assert not _loaded("import symroof") & (heavy | {"symroof.analysis", "sympy"})
    planned = _loaded("from symroof.cli.command import main\nmain(['models'])")
    assert "symroof.models.report" in planned and not planned & (heavy - {"symroof.models.planner"})
