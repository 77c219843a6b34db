"""`symroof from-torch MODULE:FACTORY`: a PyTorch module exported with symbolic dims, its
ATen graph written as a symroof program and analysed; `--check` runs torch's
FlopCounterMode on it at the `--set` sizes beside symroof's count.

    symroof from-torch my_model.py:make --chip h100 --set B=8,T=1024
    symroof from-torch my_model.py:make --set B=2,T=16 --check -o block.sr

The factory takes no argument and returns `(module, args, dynamic_shapes)`, as
`torch.export.export` takes them, each dynamic axis a `torch.export.Dim` whose name is
the dim's name in the program (`{0: Dim("B"), 1: Dim("T", max=4096)}`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from ..errors import SymroofError
from ..from_torch import importer
from ..from_torch.framework import load_torch
from ..hardware.machines import machine
from ..show import wrapped
from ..targets import load_target
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
    cmd = commands.add_parser("from-torch", help="import a PyTorch module (exported with symbolic dims) and analyse "
                                                 "it",
                              description="Export a PyTorch module with torch.export (its dynamic dims named with "
                                          "torch.export.Dim), write its ATen graph as a symroof program, and "
                                          "analyse it; --check compares the FLOPs with torch's FlopCounterMode at "
                                          "the --set sizes. Needs PyTorch: pip install 'symroof[torch]'.")
    cmd.add_argument("target", metavar="MODULE:FACTORY",
                     help="my_model:make, or path/to/file.py:make: a function of no argument returning "
                          "(module, args, dynamic_shapes)")
    machine_options(cmd)
    cmd.add_argument("--set", action="append", default=[], metavar="DIM=VALUE", help="sizes for the dims (B=8,T=128)")
    cmd.add_argument("--check", action="store_true",
                     help="run the module under torch's FlopCounterMode at the --set sizes and compare")
    cmd.add_argument("-o", "--output", metavar="FILE", help="write the program to FILE (symroof model FILE --prefill)")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.set_defaults(handler=run)


def _made(target: str) -> importer.Imported:
    load_torch()  # first: a factory that imports torch then says what to install
    made = load_target(target, "FACTORY")()
    if not isinstance(made, tuple) or len(made) not in (2, 3):
        raise SymroofError(f"{target} returned {type(made).__name__}: a factory returns (module, args) or "
                           "(module, args, dynamic_shapes)")
    return importer.from_torch(*made)


def run(args: argparse.Namespace) -> str:
    imported, out = _run(args)
    save_program(args.output, imported.text)  # last: a step that fails leaves no file behind
    return out


def _run(args: argparse.Namespace) -> tuple[importer.Imported, str]:
    sizes = set_sizes(args.set)
    imported = _made(args.target)
    if args.check and imported.dims and not sizes:
        raise SymroofError(f"--check runs the module at concrete sizes: give them with --set "
                           f"({','.join(f'{d}=...' for d in imported.dims)})")
    target = machine(**machine_kwargs(args))
    a = imported.model(target, sizes).analysis
    formulas = imported.analysis if sizes else None
    check = imported.flop_counter(sizes) if args.check else None
    if args.json:
        out: dict[str, Any] = {"module": args.target, "program": imported.text, "nodes": imported.nodes,
                               "statements": len(imported.writer.statements), "warnings": imported.warnings,
                               "layout_free": dict(imported.writer.layout), "params_declared": imported.params,
                               **count_values(a, target)}
        if check is not None:
            out["flop_counter"] = check
        return imported, json.dumps(out, indent=2)
    head = f"imported        {args.target}: {imported.nodes} ATen ops -> {len(imported.writer.statements)} statements"
    return imported, imported_report(head, imported.text, [], imported.warnings, a, target, formulas,
                                     _check_lines(check) if check is not None else [],
                                     "views, reshapes, permutes and slices move no data; attention is fused (its "
                                     "scores stay on chip)")


def _check_lines(check: Mapping[str, Any]) -> list[str]:
    at = ", ".join(f"{k}={v}" for k, v in check["sizes"].items())
    lines = [f"torch FlopCounterMode at {at or 'the shapes given'}:",
             f"  symroof, matrix unit   {check['symroof_matrix_flops']:>16}",
             f"  FlopCounterMode        {check['flop_counter']:>16}   "
             + ", ".join(f"{k} {v}" for k, v in check["flop_counter_by_op"].items())]
    for why, n in check["explained_flops"].items():
        lines += wrapped(f"  FLOPs {n:+d}: {why}")
    lines.append("  FLOPs: " + ("agree, every difference explained above" if check["flops_agree"] else
                                f"DISAGREE by {check['flops_unexplained']:+d} unexplained"))
    lines.append(f"  symroof, vector unit   {check['symroof_vector_flops']:>16}   (FlopCounterMode counts none: "
                 "elementwise ops, norms, softmax, reductions, bias adds)")
    return lines
