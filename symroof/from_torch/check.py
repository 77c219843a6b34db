"""The cross-check against torch's own count: `torch.utils.flop_counter.FlopCounterMode`,
run on the module with inputs of the sizes given, beside symroof's program at those sizes.

What each counts (both 2 FLOPs per multiply-add):
* FlopCounterMode counts the matrix ops only (mm, bmm, addmm, baddbmm, convolution,
  scaled_dot_product_attention: its two products, the softmax not), and nothing else:
  no elementwise op, norm, softmax or reduction. It has no formula for the CPU's fused
  attention kernel (it would count 0): the check runs attention on the math backend,
  whose two bmm's it counts;
* symroof counts every op; its matrix-unit FLOPs (the contractions, and the two products
  inside an attention) are the ones to compare. A bias add is elementwise in both (torch
  counts addmm's product only; symroof writes the bias its own statement, on the vector
  unit).
So `flops_agree` compares symroof's matrix-unit FLOPs with FlopCounterMode's total, and the
vector-unit FLOPs are reported beside them, as what FlopCounterMode leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ..errors import SymroofError
from ..symbols import dim_symbol
from .framework import load_torch

if TYPE_CHECKING:
    from .importer import Imported

MATRIX_ONLY = ("FlopCounterMode counts the matrix ops only (mm, bmm, addmm, baddbmm, convolution, "
               "scaled_dot_product_attention), 2 per multiply-add; symroof's vector-unit FLOPs (elementwise "
               "ops, norms, softmax, reductions, bias adds) are what it leaves out")


def resized(imported: Imported, sizes: Mapping[str, int]) -> tuple:
    """The module's example inputs with each dynamic axis at its dim's size: floats drawn
    at random, integers (token ids) within the example's own range, booleans as the
    example's first element says."""
    torch = load_torch()
    missing = sorted(set(imported.dims) - set(sizes))
    if missing:
        raise SymroofError(f"the check runs the module at concrete sizes: give {', '.join(missing)} "
                           f"({','.join(f'{d}=...' for d in missing)})")
    axes: list[dict[int, str]] = [{} for _ in imported.args]
    for name, places in imported.axes.items():  # a dim in several inputs (a KV cache's B and P) resized in each
        for k, axis in places:
            axes[k][axis] = name
    out = []
    generator = torch.Generator().manual_seed(0)
    for k, arg in enumerate(imported.args):
        if not isinstance(arg, torch.Tensor):
            out.append(arg)
            continue
        shape = [sizes[axes[k][j]] if j in axes[k] else n for j, n in enumerate(arg.shape)]
        if arg.dtype.is_floating_point:
            out.append(torch.randn(shape, generator=generator).to(arg.dtype))
        elif arg.dtype == torch.bool:
            out.append(torch.full(shape, bool(arg.reshape(-1)[0]) if arg.numel() else True))
        else:
            high = int(arg.max()) + 1 if arg.numel() else 1
            out.append(torch.randint(0, high, shape, generator=generator, dtype=arg.dtype))
    return tuple(out)


def cross_check(imported: Imported, sizes: Mapping[str, int]) -> dict:
    load_torch()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    args = resized(imported, sizes)
    counter = FlopCounterMode(display=False)
    # FlopCounterMode has no formula for the CPU's fused attention kernel: the math backend
    # runs the same products as bmm, which it counts
    with sdpa_kernel([SDPBackend.MATH]), counter:
        imported.module(*args)
    by_op = {str(op).removeprefix("aten."): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    torch_flops = int(counter.get_total_flops())
    a = imported.model(None, {k: int(v) for k, v in sizes.items() if k in imported.dims}).analysis
    matrix = int(a.flops - a.flops_vector)
    at = {dim_symbol(k): int(v) for k, v in sizes.items()}
    explained: dict[str, int] = {}
    for flops, why in imported.writer.differences:
        explained[why] = explained.get(why, 0) + int(flops.xreplace(at))
    unexplained = matrix - torch_flops - sum(explained.values())
    return {"sizes": dict(sizes), "symroof_matrix_flops": matrix, "symroof_vector_flops": int(a.flops_vector),
            "symroof_flops": int(a.flops), "flop_counter": torch_flops, "flop_counter_by_op": by_op,
            "explained_flops": explained, "flops_unexplained": unexplained, "flops_agree": unexplained == 0,
            "ratio": matrix / torch_flops if torch_flops else None, "convention": MATRIX_ONLY}
