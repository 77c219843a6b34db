"""Speed of plans, a large program, the command line's start and the importers (issue 31),
each figure beside its reference measured in the same run. Run:

    python benchmarks/speed.py            # every figure but the test suite's
    python benchmarks/speed.py --whole    # and each plan costed strategy by strategy (minutes)
    python benchmarks/speed.py --suite    # and the test suite's wall time (minutes), as the README runs it

Printed: min and median of RUNS runs (3), CPU seconds where a figure is a computation
(time.process_time, in a fresh process, beyond its imports), wall seconds where it is a
process (the command line's start). A plan runs cold (its strategy families derived, in a
cache directory of its own) and warm (read back from the disk, as a second plan of the
same model, chip and batch reads them). References: a plan's target (2 s) and, with --whole,
the same plan costed strategy by strategy (`plan(..., families=False)`, what every plan
did before strategy families); the sweep's target (10 s); `python -c "import sympy"` for
the command line's start (target: 1.2x it), beside what importing lark and sympy's first
sum take (the least any program reading a Lark grammar into sympy pays), symroof's
bytecode written first, as pip writes it; JAX's `jit(f).lower(...)` and
`torch.export.export` for the importers (target: 3x them, benchmarks/import_speed.py);
8 minutes for the test suite.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = 3
ROOT = Path(__file__).resolve().parent.parent

PLANS = [("llama-3-70b", "tpu-v5p", 1024, 2**22), ("llama-3-70b", "tpu-v5p", 8192, 2**22),
         ("mixtral-8x7b", "b200", 256, 2**22)]
SWEEP = [64, 128, 256, 512, 1024, 2048, 4096, 8192]

# each child prints one number: the CPU seconds of its work, its imports done first
_PLAN = """
import sys, time
import symroof
from symroof.models import planner
name, chip, chips, tokens, whole = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] == "1"
start = time.process_time()
p = planner.plan(name, chip, chips, tokens, "train", families=not whole)
p.table()  # what `symroof plan` prints: its best strategies built whole, their thresholds
print(time.process_time() - start)
"""
_SWEEP = """
import sys, time
import symroof
from symroof.models import planner
shown, chips = sys.argv[1] == "1", list(map(int, sys.argv[2:]))
start = time.process_time()
for n in chips:
    p = planner.plan("llama-3-70b", "tpu-v5p", n, 2**22, "train")
    p.table() if shown else [c.text for c in p.ranked[:1]]  # each plan's table, or its best strategy's name
print(time.process_time() - start)
"""
_PROGRAM = """
import sys, time
sys.path.insert(0, sys.argv[1])
import symroof
from symroof.render.json_report import to_json_dict
from symroof.render.text import table
from speed import LAYERS, sharded_transformer
text = sharded_transformer(LAYERS)
start = time.process_time()
a = symroof.analyze(text, chip="tpu-v5p")
table(a)
to_json_dict(a)
print(time.process_time() - start)
"""


LAYERS = 19  # 16 statements a layer: 304, the program


def statements(text: str) -> int:
    return sum(1 for s in text.splitlines() if s.strip() not in ("fused {", "}") and not s.startswith("mesh"))


def sharded_transformer(layers: int = LAYERS) -> str:
    """A decoder transformer of `layers` layers, 16 statements a layer (three of them a fused
    attention block), every layer's dims named apart (the worst case for sympy), on a 16 x 16
    mesh: the batch over X, the heads and the MLP width over Y (Megatron: the engine inserts
    the AllReduces of the row-parallel matmuls' partial sums)."""
    lines = ["mesh X=16, Y=16"]
    for layer in range(layers):
        B, T, S, D, F, N, H = (f"{x}{layer}" for x in "BTSDFNH")
        x, h = f"bf16[{B}_X, {T}, {D}]", f"bf16[{B}_X, {T}, {F}_Y]"
        q, kv = f"bf16[{B}_X, {T}, {N}_Y, {H}]", f"bf16[{B}_X, {N}_Y, {S}, {H}]"
        lines += [
            f"rmsnorm_{D} {x}, bf16[{D}] -> {x}",
            f"{x} *_{D} bf16[{D}, {N}_Y, {H}] -> {q}",
            f"bf16[{B}_X, {S}, {D}] *_{D} bf16[{D}, {N}_Y, {H}] -> {kv}",
            f"bf16[{B}_X, {S}, {D}] *_{D} bf16[{D}, {N}_Y, {H}] -> {kv}",
            "fused {",
            f"  {q} *_{H} {kv} -> fp32[{B}_X, {N}_Y, {T}, {S}]",
            f"  softmax_{S} fp32[{B}_X, {N}_Y, {T}, {S}] -> bf16[{B}_X, {N}_Y, {T}, {S}]",
            f"  bf16[{B}_X, {N}_Y, {T}, {S}] *_{S} {kv} -> {q}",
            "}",
            f"{q} *_{{{N},{H}}} bf16[{N}_Y, {H}, {D}] -> {x}",
            f"{x} + {x} -> {x}",
            f"rmsnorm_{D} {x}, bf16[{D}] -> {x}",
            f"{x} *_{D} bf16[{D}, {F}_Y] -> {h}",
            f"{x} *_{D} bf16[{D}, {F}_Y] -> {h}",
            f"silu({h}) -> {h}",
            f"{h} * {h} -> {h}",
            f"{h} *_{F} bf16[{F}_Y, {D}] -> {x}",
            f"{x} + {x} -> {x}",
        ]
    return "\n".join(lines)


def child(code: str, *args: object, cache: str | None = None) -> float:
    """A child's CPU seconds; its strategy families kept in `cache` (a directory), or, without
    one, in a fresh one that it alone sees (cold: every family derived)."""
    with tempfile.TemporaryDirectory() as fresh:
        env = {**os.environ, "XDG_CACHE_HOME": cache or fresh}
        done = subprocess.run([sys.executable, "-c", code, *map(str, args)], check=True, capture_output=True,
                              text=True, env=env)
    return float(done.stdout.strip().splitlines()[-1])


def wall(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True)
    return time.perf_counter() - start


def runs(measure, count: int = RUNS) -> tuple[float, float]:
    found = [measure() for _ in range(count)]
    return min(found), statistics.median(found)


def line(what: str, ours: tuple[float, float], reference: str) -> None:
    print(f"{what:<46} min {ours[0]:7.3f} s  median {ours[1]:7.3f} s | {reference}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--whole", action="store_true", help="also cost each plan strategy by strategy (minutes)")
    parser.add_argument("--suite", action="store_true", help="also time the test suite (minutes)")
    args = parser.parse_args()
    print(f"symroof speed (issue 31): python {sys.version.split()[0]}; min and median of {RUNS} runs")
    for name, chip, chips, tokens in PLANS:
        ours = runs(functools.partial(child, _PLAN, name, chip, chips, tokens, 0))
        if args.whole:
            whole = child(_PLAN, name, chip, chips, tokens, 1)
            reference = f"costed strategy by strategy: {whole:.3f} s ({whole / ours[1]:.1f}x); target 2 s"
        else:
            reference = "target 2 s (--whole: strategy by strategy)"
        line(f"plan {name} train, {chips} {chip} (CPU, cold)", ours, reference)
        with tempfile.TemporaryDirectory() as kept:
            child(_PLAN, name, chip, chips, tokens, 0, cache=kept)  # its families kept on disk
            warm = runs(functools.partial(child, _PLAN, name, chip, chips, tokens, 0, cache=kept))
        line("  the same, its families kept on disk (warm)", warm, "target 2 s")
    line(f"sweep: plans on {SWEEP[0]} to {SWEEP[-1]} chips, one process", runs(lambda: child(_SWEEP, 1, *SWEEP)),
         "target 10 s (cold, each plan's table printed)")
    line("  the same, each plan's best named, no table", runs(lambda: child(_SWEEP, 0, *SWEEP)), "target 10 s (cold)")
    line(f"analyze: {statements(sharded_transformer())} sharded statements, dims apart (CPU)",
         runs(lambda: child(_PROGRAM, Path(__file__).parent)), "target 2 s (table and JSON)")
    beside = Path(sys.executable).parent / "symroof"  # this interpreter's own, as a user runs it
    exe = str(beside) if beside.is_file() else shutil.which("symroof") or ""
    command = [exe] if exe else [sys.executable, "-m", "symroof"]
    analyze = [*command, "analyze", "bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "--chip", "tpu-v5e"]
    sympy_only = [sys.executable, "-c", "import sympy"]
    # what any program that sums sympy expressions and reads a Lark grammar pays: sympy's first
    # sum imports sympy.tensor (Add.flatten), which `import sympy` does not
    floor = [sys.executable, "-c", "import sympy, lark; sympy.Symbol('x') + 1"]
    # symroof's bytecode written first, as pip writes it on installing (a run with
    # PYTHONDONTWRITEBYTECODE set would compile every module from its source, sympy's not)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "symroof")], check=True)
    wall(analyze), wall(sympy_only)  # the OS's file cache warm, not Python's
    cold, base, least = runs(lambda: wall(analyze), 9), runs(lambda: wall(sympy_only), 9), runs(lambda: wall(floor), 9)
    line("cold start: symroof analyze (process, wall)", cold,
         f"import sympy: min {base[0]:.3f} s median {base[1]:.3f} s; ratio {cold[1] / base[1]:.2f}x "
         f"(target 1.2x); sympy, lark and a first sum: median {least[1]:.3f} s ({least[1] / base[1]:.2f}x)")
    importers = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "import_speed.py")], capture_output=True,
                               text=True)
    for each in importers.stdout.splitlines():
        if "ratio" in each:
            print("importer " + each + " (target 3x)")
    if importers.returncode:
        print("importers: not measured (" + (importers.stderr.strip().splitlines() or ["?"])[-1] + ")")
    if args.suite:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "auto", "-p", "no:cacheprovider"], cwd=ROOT,
                              capture_output=True, text=True)
        minutes = (time.perf_counter() - start) / 60
        print(f"test suite: {minutes:.2f} min wall ({done.stdout.strip().splitlines()[-1]}) | target 8 min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
