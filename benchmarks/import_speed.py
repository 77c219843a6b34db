"""Import speed of a 2-layer GPT-2 (issue 30): symroof's import beside the framework's own
trace of the same model, measured in the same run. Run: python benchmarks/import_speed.py

* PyTorch: `symroof.from_torch` (torch.export, then the ATen graph written and resolved)
  beside `torch.export.export` alone, on transformers' GPT2LMHeadModel.
* JAX: `symroof.from_jax` (make_jaxpr with symbolic dims, then the jaxpr written and
  resolved) beside `jax.jit(f).lower(...)` of the same function at concrete shapes, on
  transformers' FlaxGPT2LMHeadModel.
Each is the model at B x T symbolic (JAX: T bounded by n_positions); the JAX reference
lowers at concrete shapes, and each JAX run traces a new function, so that no cache
answers. The target: each
import within 3x of its framework's own trace. Printed: min and median of N runs each.
The symbolic analysis is then read once (`.analysis.flops`), timed apart.
"""

from __future__ import annotations

import statistics
import sys
import time
import warnings
from collections.abc import Callable

RUNS = 7


def timed(run: Callable[[], object], runs: int = RUNS) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def row(what: str, ours: tuple[float, float], theirs: tuple[float, float], reference: str) -> str:
    return (f"{what:<8} symroof import  min {ours[0]:6.3f} s  median {ours[1]:6.3f} s | {reference:<28} "
            f"min {theirs[0]:6.3f} s  median {theirs[1]:6.3f} s | ratio (medians) {ours[1] / theirs[1]:4.2f}x")


def analysed(imported: object) -> str:
    """The import's analysis read once, timed apart from the import."""
    start = time.perf_counter()
    flops = imported.analysis.flops  # type: ignore[attr-defined]
    return f"\n         then .analysis: {time.perf_counter() - start:.3f} s -> flops = {flops}"


def torch_side() -> str:
    import torch
    from torch.export import Dim
    from transformers import GPT2Config, GPT2LMHeadModel

    import symroof
    model = GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64,
                                       use_cache=False)).eval()
    ids = torch.randint(0, 128, (2, 8))
    dims = ({0: Dim("B"), 1: Dim("T", max=64)},)
    theirs = timed(lambda: torch.export.export(model, (ids,), dynamic_shapes=dims, strict=False))
    ours = timed(lambda: symroof.from_torch(model, (ids,), dims))
    return row("PyTorch", ours, theirs, "torch.export.export") + analysed(symroof.from_torch(model, (ids,), dims))


def jax_side() -> str:
    import jax
    import jax.numpy as jnp
    from transformers import FlaxGPT2LMHeadModel, GPT2Config

    import symroof
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FlaxGPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64),
                                    seed=0)

    def forward(p, ids):
        return model(ids, params=p).logits

    def fresh() -> Callable:
        """A new function each run: neither jit's cache nor make_jaxpr's answers from memory."""
        return lambda p, ids: forward(p, ids)

    ids = jax.ShapeDtypeStruct((2, 8), jnp.int32)
    theirs = timed(lambda: jax.jit(fresh()).lower(model.params, ids))
    shapes = {"p": model.params, "ids": "int32[B, T]"}
    ours = timed(lambda: symroof.from_jax(fresh(), shapes, "p", most={"T": 64}))
    return row("JAX", ours, theirs, "jax.jit(f).lower(...)") + \
        analysed(symroof.from_jax(forward, shapes, "p", most={"T": 64}))


def main() -> int:
    print(f"a 2-layer GPT-2 (hidden 64, 4 heads, vocab 128), {RUNS} runs each, on this machine:")
    for side in (torch_side, jax_side):
        try:
            print(side())
        except ImportError as error:
            print(f"{side.__name__}: skipped ({error})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
