"""Speed figures for symroof. Run: python benchmarks/bench.py

Prints, each the median of several runs:
  * CLI cold start: a whole `symroof analyze ... --chip tpu-v5e` process (Python start included);
  * warm `analyze` of a matmul on a chip, reading every field of the result;
  * the same plus `limit("D", "F")` and `threshold("B")`;
  * T_lower over 1e6 values of B, vectorised with numpy;
  * a 3-axis sharded matmul with inserted collectives, and a 20-line sharded program;
  * the largest specs symroof accepts.
Warm figures use fresh dim names each run, so sympy's cache cannot answer from memory.
Targets on a 2-core machine: cold < 1 s, warm < 20 ms, limit + solve < 100 ms, sweep < 50 ms;
and the largest specs symroof accepts (its limits) take seconds, not minutes.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

import symroof

MATMUL = "bf16[B{i}, D{i}] @ bf16[D{i}, F{i}] -> bf16[B{i}, F{i}]"
_fresh = iter(range(10**9))


def median_time(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        i = next(_fresh)  # never the same dim names twice: no answer comes from sympy's cache
        start = time.perf_counter()
        run(i)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cold_start(repeat: int = 7) -> float:
    exe = shutil.which("symroof")
    command = [exe] if exe else [sys.executable, "-m", "symroof"]
    argv = [*command, "analyze", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "tpu-v5e"]
    subprocess.run(argv, check=True, capture_output=True)  # warm the OS file cache, not Python
    return median_time(lambda i: subprocess.run(argv, check=True, capture_output=True), repeat)


def warm_analysis(i: int) -> symroof.Analysis:
    a = symroof.analyze(MATMUL.format(i=i), chip="tpu-v5e")
    for field in ("flops", "flops_exact", "bytes", "intensity", "intensity_exact", "critical_intensity",
                  "t_math", "t_comms", "t_lower", "t_upper", "bound", "achieved_flops_per_s"):
        getattr(a, field)
    return a


def limit_and_solve(i: int) -> None:
    a = warm_analysis(i)
    a.limit(f"D{i}", f"F{i}")
    a.threshold(f"B{i}")


LARGEST = [
    ("largest tensor (64 dims), table + JSON",
     "bf16[" + ", ".join(f"D{i}" for i in range(64)) + "] -> bf16[D0]"),
    ("longest chain (64 operands), table + JSON",
     " * ".join(f"bf16[D{i}, D{i + 1}]" for i in range(63)) + " -> bf16[D0, D63]"),
    ("most dims (85 statements, 255 dims), table + JSON",
     "; ".join(f"bf16[B{i}, D{i}] @ bf16[D{i}, F{i}] -> bf16[B{i}, F{i}]" for i in range(85))),
]


def sharded_3axis(i: int) -> None:
    """Contracting dim split over Y on one side only (an AllGather), Z-unreduced partial
    sums (an AllReduce), on a 4x4x4 v5p slice; every field and the network threshold."""
    a = symroof.analyze(f"mesh X=4, Y=4, Z=4; bf16[B{i}_X, D{i}_{{YZ}}] *_D{i} bf16[D{i}_Z, F{i}] "
                        f"-> bf16[B{i}_X, F{i}]", chip="tpu-v5p")
    for field in ("flops", "t_math", "t_comms", "t_network", "t_lower", "bound", "network_intensity"):
        getattr(a, field)
    a.threshold(f"D{i}")


def sharded_program(i: int) -> None:
    from symroof.render.json_report import to_json_dict
    from symroof.render.text import table
    lines = ["mesh X=16, Y=16"]
    for _ in range(10):
        lines.append(f"bf16[B{i}_X, D{i}_Y] @ bf16[D{i}_Y, F{i}] -> bf16[B{i}_X, F{i}]")
        lines.append(f"AllGather_X bf16[B{i}_X, F{i}] -> bf16[B{i}, F{i}]")
    a = symroof.analyze("\n".join(lines), chip="tpu-v5e")
    table(a, solve=f"B{i}")
    to_json_dict(a, solve=f"B{i}")


def transformer(layers: int = 24, distinct: bool = False, i: int = 0) -> str:
    """A decoder transformer of `layers` layers as symroof statements (13 a layer, one a
    fused attention block of three): with `distinct`, every layer's dims get their own
    names (the worst case for sympy), else they share B, T, D, F, N, H as a model does."""
    lines = []
    for layer in range(layers):
        s = f"{i}x{layer}" if distinct else f"{i}"
        B, T, S, D, F, N, H = (f"{x}{s}" for x in "BTSDFNH")
        x, h = f"bf16[{B}, {T}, {D}]", f"bf16[{B}, {T}, {F}]"
        lines += [
            f"rmsnorm_{D} {x}, bf16[{D}] -> {x}",
            f"{x} *_{D} bf16[{D}, {N}, {H}] -> bf16[{B}, {T}, {N}, {H}]",
            f"bf16[{B}, {S}, {D}] *_{D} bf16[{D}, {N}, {H}] -> bf16[{B}, {N}, {S}, {H}]",  # keys: S = T
            f"bf16[{B}, {S}, {D}] *_{D} bf16[{D}, {N}, {H}] -> bf16[{B}, {N}, {S}, {H}]",
            "fused {",
            f"  bf16[{B}, {T}, {N}, {H}] *_{H} bf16[{B}, {N}, {S}, {H}] -> fp32[{B}, {N}, {T}, {S}]",
            f"  softmax_{S} fp32[{B}, {N}, {T}, {S}] -> bf16[{B}, {N}, {T}, {S}]",
            f"  bf16[{B}, {N}, {T}, {S}] *_{S} bf16[{B}, {N}, {S}, {H}] -> bf16[{B}, {T}, {N}, {H}]",
            "}",
            f"bf16[{B}, {T}, {N}, {H}] *_{{{N},{H}}} bf16[{N}, {H}, {D}] -> {x}",
            f"{x} + {x} -> {x}",
            f"rmsnorm_{D} {x}, bf16[{D}] -> {x}",
            f"{x} *_{D} bf16[{D}, {F}] -> {h}",
            f"{x} *_{D} bf16[{D}, {F}] -> {h}",
            f"silu({h}) -> {h}",
            f"{h} * {h} -> {h}",
            f"{h} *_{F} bf16[{F}, {D}] -> {x}",
            f"{x} + {x} -> {x}",
        ]
    return "\n".join(lines)


def transformer_analysis(distinct: bool, i: int) -> None:
    from symroof.render.json_report import to_json_dict
    from symroof.render.text import table
    a = symroof.analyze(transformer(24, distinct, i), chip="tpu-v5p")
    table(a)
    to_json_dict(a)


def model_405b(mode: str) -> None:
    """LLaMA-3 405B (126 layers, symbolic in L: the repeated block costed once) from its
    models.json entry: every model quantity and its text report, on 8960 TPU v5p."""
    from symroof.models.report import table
    m = symroof.model("llama-3-405b", mode, chip="tpu-v5p", chips=8960,
                      sizes={"B": 2240, "T": 8192} if mode == "train" else {"B": 64, "S": 8192})
    table(m, None, "llama-3-405b")


def model_strategy_train() -> None:
    """LLaMA-3 70B training under fsdp=64,tp=4 on TPU v5p: forward and written backward
    costed with their collectives, and the strategy's report rows."""
    from symroof.models.report import table
    m = symroof.model("llama-3-70b", "train", chip="tpu-v5p", sizes={"B": 256, "T": 4096}, strategy="fsdp=64,tp=4")
    table(m, None, "llama-3-70b")


def model_pipeline_train() -> None:
    """LLaMA-3 70B training under dp=2,pp=4,tp=8 on H100: the whole program and its two end
    stages, each costed forward and backward, and the pipeline's report rows."""
    from symroof.models.report import table
    m = symroof.model("llama-3-70b", "train", chip="h100", sizes={"B": 64, "T": 4096}, strategy="dp=2,pp=4,tp=8",
                      microbatches=16)
    table(m, None, "llama-3-70b")


def plan_256() -> None:
    """symroof plan llama-3-70b --chip tpu-v5p --chips 256 --batch 1M --context 4096."""
    from symroof.models import planner
    planner.why(planner.plan("llama-3-70b", "tpu-v5p", 256, 2**20, "train", context=4096))


def largest(spec: str) -> None:
    from symroof.render.json_report import to_json_dict
    from symroof.render.text import table
    a = symroof.analyze(spec, chip="tpu-v5p")  # a chip with a vector figure: the 64-dim spec sums
    table(a, solve=a.dims[0])
    to_json_dict(a)


def sweep() -> tuple[float, float]:
    a = symroof.analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="tpu-v5e").at(D=4096, F=4096)
    batch = np.arange(1, 10**6 + 1)
    first = time.perf_counter()
    a.evaluate("t_lower", B=batch)  # compiles the expression once
    first = time.perf_counter() - first
    return first, median_time(lambda i: a.evaluate("t_lower", B=batch), 9)


def main() -> None:
    print(f"symroof benchmarks  (python {sys.version.split()[0]}, {os.cpu_count()} cores)")
    warm_analysis(next(_fresh))  # import-time and parser warm-up
    rows = [
        ("CLI cold start, one analysis (process)", cold_start(), 1.0),
        ("warm analyze: matmul on tpu-v5e, all fields", median_time(warm_analysis, 40), 0.020),
        ("warm analyze + limit(D, F) + threshold(B)", median_time(limit_and_solve, 30), 0.100),
    ]
    compile_time, sweep_time = sweep()
    rows.append(("T_lower over 1e6 values of B (numpy)", sweep_time, 0.050))
    rows.append(("3-axis sharded matmul, inserted collectives", median_time(sharded_3axis, 20), 0.100))
    rows.append(("20-line sharded program, table + JSON", median_time(sharded_program, 5), 2.0))
    statements = sum(1 for line in transformer().splitlines() if line.strip() not in ("fused {", "}"))
    rows.append((f"transformer, 24 layers ({statements} ops), table + JSON",
                 median_time(lambda i: transformer_analysis(False, i), 3), 2.0))
    rows.append(("  the same, every layer's dims distinct", median_time(lambda i: transformer_analysis(True, i), 3),
                 2.0))
    for mode in ("train", "decode"):
        rows.append((f"LLaMA-3 405B model, {mode}, report", median_time(lambda i, m=mode: model_405b(m), 5), 2.0))
    rows.append(("LLaMA-3 70B train, fsdp=64,tp=4, report", median_time(lambda i: model_strategy_train(), 3), 2.0))
    rows.append(("LLaMA-3 70B train, dp=2,pp=4,tp=8, report", median_time(lambda i: model_pipeline_train(), 3), 2.0))
    rows.append(("plan: LLaMA-3 70B on 256 v5p (165 strategies)", median_time(lambda i: plan_256(), 3), 10.0))
    for name, spec in LARGEST:
        rows.append((name, median_time(lambda i, spec=spec: largest(spec), 3), 10.0))
    for name, seconds, target in rows:
        verdict = "ok" if seconds < target else "OVER TARGET"
        print(f"  {name:<50} {seconds * 1e3:9.2f} ms   (target < {target * 1e3:.0f} ms: {verdict})")
    print(f"  {'(first sweep call, compiling the expression)':<50} {compile_time * 1e3:9.2f} ms")


if __name__ == "__main__":
    main()
