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
"""

from .analysis import Analysis, analyze, roofline
from .claims.models import check_case
from .errors import HardwareError, SpecError, SymroofError, SymroofWarning
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

__all__ = [
    "Analysis", "CONVENTIONS", "Chip", "Cost", "HardwareError", "Program", "QUANTITIES", "Quantity", "SpecError",
    "StepCost", "SymroofError", "SymroofWarning", "Threshold", "analyze", "check_case", "cost", "counted", "derive",
    "dim_symbol", "from_jax", "from_torch",
    "get_chip", "list_chips", "load_hardware", "model", "parse", "plan", "read_expression", "roofline", "serving",
]
