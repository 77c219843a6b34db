"""symroof: symbolic roofline analysis for ML accelerators.

Write a contraction the way the textbook does and get FLOPs, bytes, arithmetic
intensity, times on a chip and critical thresholds, as sympy expressions:

    >>> import symroof
    >>> a = symroof.analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="tpu-v5e")
    >>> a.flops, a.limit("D", "F")
    (2*B*D*F, B)
    >>> print(a.threshold("B"))
    B > 240.24 (B >= 241)  [rule: D, F -> oo]
    exact: B > 240.244*D*F/(D*F - 240.244*D - 240.244*F), when D*F/(D + F) > 240.244 (never otherwise)

Each name below is imported when first used (PEP 562), so that `import symroof`, and
each command of the command line, loads only what it uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from . import lazy
from .errors import HardwareError, SpecError, SymroofError, SymroofWarning

# three packages share their names with functions here (from_jax, from_torch, roofline): loaded now
# (each is light) and their names dropped, the functions' they are (`__getattr__`); a package is
# loaded once, so no later import binds its name here again
for _package in ("from_jax", "from_torch", "roofline"):
    importlib.import_module(f".{_package}", __name__)
    del globals()[_package]

if TYPE_CHECKING:  # the names as a type checker sees them
    from .analysis import Analysis, analyze, roofline
    from .claims.models import check_case
    from .from_jax.importer import from_jax
    from .from_torch.importer import from_torch
    from .hardware.chips import Chip, get_chip, list_chips, load_hardware
    from .ir import Program, dim_symbol
    from .lang.expr import read_expression
    from .lang.parsing import parse
    from .models import derive, serving
    from .models.counted import counted
    from .models.planner import plan
    from .models.report import model
    from .roofline.bounds import CONVENTIONS
    from .roofline.cost import Cost, StepCost, cost
    from .roofline.quantities import QUANTITIES, Quantity
    from .roofline.thresholds import Threshold

# each lazily imported name: the module it is in (derive and serving: the modules themselves)
_WHERE = {
    "Analysis": "analysis", "analyze": "analysis", "roofline": "analysis", "check_case": "claims.models",
    "from_jax": "from_jax.importer", "from_torch": "from_torch.importer", "Chip": "hardware.chips",
    "get_chip": "hardware.chips", "list_chips": "hardware.chips", "load_hardware": "hardware.chips",
    "Program": "ir", "dim_symbol": "ir", "read_expression": "lang.expr", "parse": "lang.parsing",
    "derive": "models.derive", "serving": "models.serving", "counted": "models.counted", "plan": "models.planner",
    "model": "models.report", "CONVENTIONS": "roofline.bounds", "Cost": "roofline.cost", "StepCost": "roofline.cost",
    "cost": "roofline.cost", "QUANTITIES": "roofline.quantities", "Quantity": "roofline.quantities",
    "Threshold": "roofline.thresholds",
}

_MODULES = ("derive", "serving")

__all__ = [
    "Analysis", "CONVENTIONS", "Chip", "Cost", "HardwareError", "Program", "QUANTITIES", "Quantity", "SpecError",
    "StepCost", "SymroofError", "SymroofWarning", "Threshold", "analyze", "check_case", "cost", "counted", "derive",
    "dim_symbol", "from_jax", "from_torch",
    "get_chip", "list_chips", "load_hardware", "model", "parse", "plan", "read_expression", "roofline", "serving",
]


__getattr__ = lazy.names(__name__, _WHERE, _MODULES)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
