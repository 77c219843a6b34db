"""`symroof plot serve MODEL --chip C --prompt P --generate G --batches 1,2,4,... [--chips
1,2,4,8] [--strategy S ...] [--tpot-slo SECONDS] [-o pareto.png] [--json]`: the latency-
throughput curve of a served model (models/pareto.py), as a table, JSON, and with -o a plot."""

from __future__ import annotations

import argparse

from ..errors import SpecError
from ..hardware.machines import machine
from .options import dumps, machine_kwargs, whole_numbers

MAX_BATCHES = 64


def add_options(cmd: argparse.ArgumentParser) -> None:
    """The flags of `symroof plot serve`, beside the plot command's own."""
    group = cmd.add_argument_group("serve: tokens/s a chip against time per output token, over batches and chips")
    group.add_argument("--prompt", type=int, metavar="P", help="serve: the prompt's tokens")
    group.add_argument("--generate", type=int, metavar="G", help="serve: the tokens generated")
    group.add_argument("--batches", metavar="B1,B2,...", help="serve: the batches (1,2,4,...,256)")
    group.add_argument("--chips", metavar="N1,N2,...", help="serve: chip counts, each an even split (1)")
    group.add_argument("--strategy", action="append", default=[], metavar="KIND=SIZE,...",
                       help="serve: a sharding (tp=8, dp=2,tp=4), repeatable, each its own placement")
    group.add_argument("--tpot-slo", metavar="SECONDS", help="serve: the target time per output token")
    group.add_argument("--weights", default="bf16", metavar="DTYPE", help="serve: the weights' dtype (bf16)")
    group.add_argument("--kv", default="bf16", metavar="DTYPE", help="serve: the KV cache's dtype (bf16)")
    group.add_argument("--models", metavar="FILE", help="serve: a models file in place of the shipped models.json")
    group.add_argument("--json", action="store_true", help="serve: print the points and the frontier as JSON")


SERVE_ONLY = ("prompt", "generate", "batches", "chips", "tpot_slo", "models")


def refuse_serve_flags(args: argparse.Namespace) -> None:
    """A roofline or a sweep of specs given one of serve's flags: say so, do not ignore it."""
    given = [f"--{name.replace('_', '-')}" for name in SERVE_ONLY if getattr(args, name) is not None]
    given += ["--strategy"] * bool(args.strategy) + ["--json"] * args.json
    given += [f for f, v in (("--weights", args.weights), ("--kv", args.kv)) if v != "bf16"]
    if given:
        raise SpecError(f"{given[0]} goes with 'symroof plot serve MODEL'")


def run(args: argparse.Namespace) -> str:
    from ..models import pareto
    if len(args.specs) != 1:
        raise SpecError(f"'symroof plot serve' takes one model's name, got {len(args.specs)}: "
                        f"{' '.join(args.specs)}")
    for flag, value in (("--set", args.set), ("--sweep", args.sweep), ("--time", args.time), ("--label", args.label),
                        ("--dtype", args.dtype != "bf16")):
        if value:
            raise SpecError(f"{flag} is for plots of specs; 'plot serve' takes --prompt, --generate and --batches")
    if args.prompt is None or args.generate is None or args.batches is None:
        raise SpecError("'symroof plot serve' needs --prompt P, --generate G and --batches B1,B2,...")
    target = machine(**machine_kwargs(args))
    if target is None:
        raise SpecError("'symroof plot serve' times each point: it needs a chip (--chip)")
    batches = whole_numbers(args.batches, "--batches", MAX_BATCHES)
    chips = whole_numbers(args.chips, "--chips", 16) if args.chips is not None else []
    found = pareto.curve(args.specs[0], target, args.prompt, args.generate, batches, chips=chips,
                         strategies=args.strategy, mesh=args.mesh, tpot_slo=args.tpot_slo, weights=args.weights,
                         kv=args.kv, models_file=args.models)
    wrote = ""
    if args.output:
        from ..render.plot import save
        save(pareto.draw(found), args.output)
        wrote = f"wrote {args.output}"
    if args.json:
        return dumps({**found.to_dict(), **({"wrote": args.output} if args.output else {})})
    return found.table() + ("\n" + wrote if wrote else "")
