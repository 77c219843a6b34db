"""`symroof from-jax MODULE:FUNCTION --shapes "x=bf16[B, D]; w=bf16[D, F]"`: a JAX function
traced with symbolic shapes, written as a symroof program and analysed; `--xla` checks it
against XLA's cost analysis at the sizes `--set` gives.

    symroof from-jax my_model:block --shapes "x=bf16[B, T, D]; w=bf16[D, F]" --chip h100
    symroof from-jax path/to/file.py:mlp --shapes "..." --set B=8,T=128,D=512,F=2048 --xla
    symroof from-jax my_model:apply --shapes "v.w=bf16[D, F]; x=bf16[B, D]" --params v -o block.sr

`--params` names the arguments that are weights (a pytree argument by its leaves, p.w):
with the arrays the function closes over, they are declared `param` in the program.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from ..analysis import Analysis
from ..errors import SymroofError
from ..from_jax import importer
from ..hardware.machines import Machine, machine
from ..show import wrapped
from .options import (
    Commands,
    count_values,
    imported_report,
    machine_kwargs,
    machine_options,
    save_program,
    set_sizes,
)


def add_parser(commands: Commands) -> None:
    cmd = commands.add_parser("from-jax", help="import a JAX function (traced with symbolic shapes) and analyse it",
                              description="Trace a JAX function with symbolic dims, write its jaxpr as a symroof "
                                          "program, and analyse it; --xla checks the counts against XLA's cost "
                                          "analysis at the --set sizes. Needs JAX: pip install 'symroof[jax]'.")
    cmd.add_argument("target", metavar="MODULE:FUNCTION", help="my_model:block, or path/to/file.py:block")
    cmd.add_argument("--shapes", required=True,
                     help="each parameter's dtype and dims: \"x=bf16[B, D]; w=bf16[D, F]\" (names are symbolic dims); "
                          "a pytree argument by its leaves: \"p.w=bf16[D, F]; p.b=bf16[F]\"")
    cmd.add_argument("--params", action="append", default=[], metavar="ARG[,ARG...]",
                     help="the arguments that are the model's weights (w_up,w_down; a pytree argument whole: p): "
                          "declared `param` in the program, as are the arrays the function closes over, so "
                          "`symroof model FILE` counts params and weight_bytes")
    cmd.add_argument("--max", action="append", default=[], metavar="DIM=N",
                     help="bound a dim for JAX's symbolic shapes (T=1024: T <= 1024), where the function takes the "
                          "least of it and a number (a causal LM's min(n_positions, T))")
    cmd.add_argument("--min", action="append", default=[], metavar="DIM=N",
                     help="bound a dim from below (T=2: T >= 2), where the function slices it (T - 1)")
    machine_options(cmd)
    cmd.add_argument("--set", action="append", default=[], metavar="DIM=VALUE", help="sizes for the dims (B=8,D=512)")
    cmd.add_argument("--xla", action="store_true",
                     help="compare FLOPs, transcendentals and bytes with XLA's cost analysis at the --set sizes")
    cmd.add_argument("-o", "--output", metavar="FILE", help="write the program to FILE (symroof model FILE --prefill)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> str:
    imported, out = _run(args)
    save_program(args.output, imported.text)  # last: a step that fails leaves no file behind
    return out


def _run(args: argparse.Namespace) -> tuple[importer.Imported, str]:
    sizes = set_sizes(args.set)
    imported = importer.from_jax(importer.load_function(args.target), args.shapes,
                                   [name for given in args.params for name in given.split(",")],
                                   most=set_sizes(args.max), least=set_sizes(args.min))
    if args.xla and imported.dims() and not sizes:
        raise SymroofError(f"--xla compares at concrete sizes: give them with --set "
                           f"({','.join(f'{d}=...' for d in imported.dims())})")
    target = machine(**machine_kwargs(args))
    m = imported.model(target, sizes)  # the machine whole: --peak-flops, --override and the rest apply
    a = m.analysis
    formulas = imported.model().analysis if sizes else None  # the symbolic counts beside the numbers
    check = imported.xla(sizes) if args.xla else None
    if args.json:
        out = {"function": args.target, "program": imported.text, "equations": imported.equations,
               "statements": len(imported.converted.statements), "warnings": imported.warnings,
               "layout_free": dict(imported.converted.layout), "dead_dropped": imported.converted.dead,
               "params_declared": [str(p) for p in imported.converted.params], **count_values(a, target)}
        if check is not None:
            out["xla"] = check
        return imported, json.dumps(out, indent=2)
    return imported, _text(args, imported, a, target, check, formulas)


def _text(args: argparse.Namespace, imported: importer.Imported, a: Analysis, target: Machine | None,
          check: Mapping[str, Any] | None, formulas: Analysis | None) -> str:
    c = imported.converted
    free = ", ".join(f"{k} x {n}" for k, n in sorted(c.layout.items()))
    dead = f"{c.dead} dead, dropped" if c.dead else ""
    said = f"{free}: layout, no statement" + (f"; {dead}" if dead else "") if free else dead
    head = f"imported        {args.target}: {imported.equations} jaxpr equations -> {len(c.statements)} statements" \
        + (f" ({said})" if said else "")
    notes = [] if c.params else \
        wrapped("params: none declared, so symroof model FILE counts no params or weight_bytes: name the arguments "
                "that are weights with --params ARG[,ARG] (the arrays the function closes over are declared "
                "without it)") + [""]
    return imported_report(head, imported.text, notes, imported.warnings, a, target, formulas,
                           _xla_lines(check) if check is not None else [],
                           "layout ops (reshape, transpose, broadcast) move no data, as XLA's lowered module counts "
                           "them")


def _xla_lines(check: Mapping[str, Any]) -> list[str]:
    s, low, comp = check["symroof"], check["xla_lowered"], check["xla_compiled"]
    at = ", ".join(f"{k}={v}" for k, v in check["sizes"].items())
    loops = (" (loops as XLA counts them: a loop's body once, an unrolled scan's as often as the lowered module "
             "holds it)") if check["loops_counted_once"] else ""
    lines = [f"XLA cost analysis at {at or 'the shapes given'}{loops}:",
             f"  {'':16}{'symroof':>14}{'XLA lowered':>14}{'XLA compiled':>14}"]
    for key in ("flops", "transcendentals", "bytes"):
        lines.append(f"  {key:16}{s[key]:>14}{low[key]:>14}{(comp or {}).get(key, '-'):>14}")
    lines += [f"  {said}" for said in check.get("unrolled", ())]
    for why, n in check["explained_flops"].items():
        lines.append(f"  FLOPs {n:+d}: {why}")
    for why, n in check["explained_transcendentals"].items():
        lines.append(f"  transcendentals {n:+d}: {why}")
    near = (f" ({check['flops_unexplained']:+d} left: within XLA's float32 resolution at this size, "
            f"±{check['xla_resolution']})") if check["flops_unexplained"] \
        else ""
    lines.append("  FLOPs: " + (f"agree with XLA's lowered module, every difference explained above{near} (the "
                                "compiled module counts its own fusions and rewrites)" if check["flops_agree"] else
                                f"DISAGREE by {check['flops_unexplained']:+d} unexplained"
                                + (f" (not costed: {', '.join(check['not_costed'])})" if check["not_costed"] else "")))
    if check["explained_transcendentals"] or not check["transcendentals_agree"]:
        agree = check["transcendentals_agree"]
        lines.append("  transcendentals: " + ("agree, every difference explained above" if agree else
                                              f"DISAGREE by {check['transcendentals_unexplained']:+d} unexplained"))
    folded = check.get("bytes_without_folded")
    lines.append("  bytes: " + ("symroof counts MORE than XLA's lowered module: a bug, please report it"
                                if not check["bytes_within_lowered"] else
                                f"symroof's less what XLA folds away ({folded}: XLA neither reads nor writes "
                                "what it folds) are within XLA's lowered figure" if folded is not None else
                                "symroof's are within XLA's lowered figure, which writes and reads every "
                                "intermediate (fusion keeps them on chip)"))
    return lines

