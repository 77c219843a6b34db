"""Fuzz the symroof command line at scale.

    python benchmarks/fuzz_cli.py --cases 100000 [--workers 2] [--seed N] [--deadline S]
    python benchmarks/fuzz_cli.py --cases 3000 --kinds models     # `symroof model` alone

Generates cases with tests/fuzz_strategies.py (random and mutated specs, flags, meshes, chips,
claims files, over every subcommand), runs each in-process through `symroof.cli.command.main`,
and checks the property written there (exit 0 with valid output, 1 only from `check`, 2
with a one-line error and an optional caret, never 3, never an exception, never a hang).
Prints the cases run, counts per subcommand, the exit-code histogram, the failures found
(deduplicated, each with a shrunk reproducer and the traceback's innermost symroof frame)
and the wall time. Case i of seed N is always the same case: `--only I` runs it again.
`--kinds` draws from some kinds only; a group name stands for several (`models`: named
models with their flags, program files with structure, and --print's round trip).
Exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import collections
import os
import random
import shutil
import sys
import tempfile
import time
from multiprocessing import get_context
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

os.environ.pop("SYMROOF_DEBUG", None)
os.environ.setdefault("MPLBACKEND", "Agg")

import fuzz_strategies as fs  # noqa: E402
from katex_renderer import KaTeX  # noqa: E402

_STATE: dict = {}
# `--kinds` groups: a name that stands for several kinds
KIND_GROUPS = {"models": ("model", "model-file", "model-print", "plan")}


def case_random(seed: int, i: int) -> random.Random:
    return random.Random(f"symroof-fuzz-{seed}-{i}")


def _init(seed: int, deadline: float, shrink_budget: float, weights, katex: bool = True):
    import warnings
    warnings.simplefilter("ignore")
    import symroof.cli.command  # noqa: F401  (import once per worker)
    checker = None
    if katex:
        try:
            checker = KaTeX(install=False)
        except RuntimeError:
            checker = None
    _STATE.update(seed=seed, deadline=deadline, shrink=shrink_budget, weights=weights,
                  root=tempfile.mkdtemp(prefix="symroof-fuzz-"), seen=set(), katex=checker)


def _check(case):
    """The property, with KaTeX for LaTeX output where it is installed."""
    tmp = _fresh_tmp()
    try:
        return fs.check_case_property(case, tmp, _STATE["deadline"], _STATE.get("katex"))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _fresh_tmp() -> str:
    return tempfile.mkdtemp(dir=_STATE["root"])


def _code_label(res: fs.Result) -> str:
    if isinstance(res.exception, fs.Hang):
        return "hang"
    if res.exception is not None:
        return "exception"
    if isinstance(res.code, tuple):
        return f"argparse-exit-{res.code[1]}"
    return str(res.code)


def _failure_key(case, problem, res) -> str:
    """The failure's signature; an internal error (exit 3) is run again with
    SYMROOF_DEBUG=1 first, for the frame it names."""
    if res.code == 3 and not res.tb:
        tmp = _fresh_tmp()
        res.tb = fs.debug_traceback(case, tmp, _STATE["deadline"])
        shutil.rmtree(tmp, ignore_errors=True)
    return fs.failure_key(case, res, problem)


def _one(i: int):
    seed = _STATE["seed"]
    case = fs.gen_case(case_random(seed, i), _STATE["weights"])
    problem, res = _check(case)
    summary = {"i": i, "kind": case.kind, "code": _code_label(res), "seconds": res.seconds}
    if problem is None:
        return summary
    key = _failure_key(case, problem, res)
    summary.update(problem=problem, key=key)
    if key in _STATE["seen"]:
        return summary          # already shrunk in this worker; the parent counts it
    _STATE["seen"].add(key)

    def key_of(c):
        p, r = _check(c)
        return None if p is None else _failure_key(c, p, r)

    small = case
    if _STATE["shrink"] > 0 and "hang" not in problem:
        try:
            small = fs.shrink(case, _fresh_tmp, key_of, _STATE["shrink"])
        except BaseException:  # noqa: BLE001 - shrinking is best effort
            small = case
    summary.update(reproducer=small.reproducer(), original=case.reproducer(), tb=res.tb[-2500:])
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="the first case index")
    ap.add_argument("--deadline", type=float, default=30.0, help="seconds before a case counts as a hang")
    ap.add_argument("--slow", type=float, default=5.0, help="list cases slower than this (seconds)")
    ap.add_argument("--shrink", type=float, default=20.0, help="seconds to shrink each new failure (0: off)")
    ap.add_argument("--only", type=int, help="run case I of the seed alone and show everything")
    ap.add_argument("--kinds", help="comma-separated subcommand kinds to draw from "
                                    f"({', '.join(fs.DEFAULT_WEIGHTS)}), or groups of them "
                                    f"({', '.join(f'{g}: {chr(43).join(ks)}' for g, ks in KIND_GROUPS.items())})")
    ap.add_argument("--no-katex", action="store_true",
                    help="skip rendering LaTeX output through KaTeX (on where node and the KaTeX "
                         "the test suite installs are found)")
    ap.add_argument("--maxtasks", type=int, default=4000, help="cases per worker process before it restarts")
    args = ap.parse_args(argv)

    weights = dict(fs.DEFAULT_WEIGHTS)
    if args.kinds:
        wanted = [k for name in args.kinds.split(",") if name.strip()
                  for k in KIND_GROUPS.get(name.strip(), (name.strip(),))]
        unknown = set(wanted) - set(weights)
        if unknown:
            ap.error(f"unknown kinds {sorted(unknown)}")
        weights = {k: w for k, w in weights.items() if k in wanted}

    if args.only is not None:
        _init(args.seed, args.deadline, 0, weights, not args.no_katex)
        case = fs.gen_case(case_random(args.seed, args.only), weights)
        print(case.reproducer())
        problem, res = _check(case)
        print(f"code: {_code_label(res)}  ({res.seconds:.2f} s)\nstdout:\n{res.out}\nstderr:\n{res.err}")
        if res.sys_err:
            print(f"sys.stderr:\n{res.sys_err}")
        for k, step in enumerate(res.steps):          # the case's followups (model --print's round trip)
            print(f"then {case.followups[k]!r}\ncode: {_code_label(step)}\nstdout:\n{step.out[:2000]}\n"
                  f"stderr:\n{step.err}")
        print("problem:", problem)
        if res.code == 3:
            print(fs.debug_traceback(case, _fresh_tmp(), args.deadline))
        elif res.tb:
            print(res.tb)
        return 0 if problem is None else 1

    start = time.perf_counter()
    kinds = collections.Counter()
    codes = collections.Counter()
    per_kind_codes = collections.defaultdict(collections.Counter)
    failures: dict[str, dict] = {}
    counts = collections.Counter()
    slow = []
    done = 0
    indices = range(args.start, args.start + args.cases)
    ctx = get_context("fork") if hasattr(os, "fork") else get_context()
    pool = ctx.Pool(args.workers, initializer=_init,
                    initargs=(args.seed, args.deadline, args.shrink, weights, not args.no_katex),
                    maxtasksperchild=args.maxtasks)
    last = start
    try:
        for summary in pool.imap_unordered(_one, indices, chunksize=16):
            done += 1
            kinds[summary["kind"]] += 1
            codes[summary["code"]] += 1
            per_kind_codes[summary["kind"]][summary["code"]] += 1
            if summary["seconds"] > args.slow:
                slow.append((summary["seconds"], summary["i"], summary["kind"]))
            if "problem" in summary:
                key = summary["key"]
                counts[key] += 1
                if key not in failures and "reproducer" in summary:
                    failures[key] = summary
                    print(f"[{done}] new failure: {key}  (--seed {args.seed} --only {summary['i']})\n"
                          f"    {summary['problem'][:300]}\n"
                          f"    {summary['reproducer'][:600]}", flush=True)
                elif key not in failures:
                    failures.setdefault(key, summary)
            now = time.perf_counter()
            if now - last > 60:
                last = now
                print(f"[{done}/{args.cases}] {now - start:.0f} s, {len(failures)} distinct failures",
                      flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        pool.terminate()
    else:
        pool.close()
    pool.join()
    wall = time.perf_counter() - start

    print("\n=== symroof CLI fuzz ===")
    print(f"seed {args.seed}, cases {args.start}..{args.start + args.cases - 1}: {done} run "
          f"with {args.workers} workers in {wall:.1f} s ({done / wall if wall else 0:.0f} cases/s)"
          + ("" if not args.no_katex else "; LaTeX not rendered through KaTeX"))
    print("\nper subcommand:")
    for kind, n in kinds.most_common():
        hist = ", ".join(f"{c}: {k}" for c, k in sorted(per_kind_codes[kind].items()))
        print(f"  {kind:<13}{n:>8}   ({hist})")
    print("\nexit codes:")
    for code, n in sorted(codes.items()):
        print(f"  {code:<18}{n:>8}")
    if slow:
        slow.sort(reverse=True)
        print(f"\nslow cases (> {args.slow} s): {len(slow)}; slowest: " +
              ", ".join(f"#{i} {kind} {s:.1f} s" for s, i, kind in slow[:10]))
    print(f"\nfailures: {sum(counts.values())} cases, {len(failures)} distinct")
    for key, summary in sorted(failures.items(), key=lambda kv: -counts[kv[0]]):
        print(f"\n--- {key}  ({counts[key]} cases; first: --seed {args.seed} --only {summary['i']})")
        print(f"problem: {summary['problem'][:500]}")
        if "reproducer" in summary:
            print("shrunk reproducer:\n  " + summary["reproducer"].replace("\n", "\n  "))
        if summary.get("tb"):
            frames = [line for line in summary["tb"].splitlines() if "symroof" in line and "File" in line]
            if frames:
                print("innermost symroof frame: " + frames[-1].strip())
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
