"""`symroof plan MODEL`: the parallelism strategies that fit, ranked by step time.

    symroof plan llama-3-70b --chip h100 --chips 64 --batch 512k --train
    symroof plan llama-3-70b --chip tpu-v5p --chips 16 --batch 64 --decode --json
    symroof plan llama-3-8b --chip h100 --chips 64 --batch 4M --tokens 15e12 --price 2.5 --optimizer adam-bf16
"""

from __future__ import annotations

import argparse
import json

from ..errors import SpecError
from ..hardware.machines import machine
from ..lang.sizes import size_value
from ..models import planner
from .options import (
    Commands,
    budget_options,
    budget_values,
    machine_kwargs,
    machine_options,
    mode_options,
    remat_option,
    training_kwargs,
    training_options,
)


def add_parser(commands: Commands) -> None:
    cmd = commands.add_parser("plan", help="rank the parallelism strategies that fit a model on N chips",
                              description="Every split of the chips into data, FSDP, tensor and (in training) "
                                          "pipeline parallelism, the ones that fit in memory ranked by step "
                                          "time.")
    cmd.add_argument("name", metavar="MODEL", help="a model in models.json (llama-3-70b)")
    mode_options(cmd)
    machine_options(cmd)
    cmd.add_argument("--chips", required=True, help="how many chips (64, 256, 8k)")
    cmd.add_argument("--batch", required=True,
                     help="tokens a step processes (train, prefill: 512k, a multiple of the context); "
                          "sequences in decode (64)")
    cmd.add_argument("--context", help="tokens per sequence (train, prefill) or of context (decode); "
                                       "the model's by default")
    remat_option(cmd)
    training_options(cmd)
    budget_options(cmd)
    cmd.add_argument("--top", type=int, default=10, help="how many ranked strategies to show (10)")
    cmd.add_argument("--models", metavar="FILE", help="a models file in place of the shipped models.json")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> str:
    target = machine(**machine_kwargs(args))
    if target is None or target.chip is None:
        raise SpecError("a plan needs a named chip's figures, links and HBM (--chip tpu-v5p; see symroof chips), "
                        "not bare figures or --chip symbolic")
    chips = size_value(args.chips, "--chips")
    tokens = size_value(args.batch, "--batch")
    context = size_value(args.context, "--context") if args.context else None
    if args.mode != "train" and args.remat != "full":
        raise SpecError("--remat is what a training step keeps for its backward pass: it goes with --train")
    total, price = budget_values(args)
    if total is not None and args.mode != "train":
        raise SpecError(f"--tokens gives the time to train on a token budget: it goes with --train, not --{args.mode}")
    found = planner.plan(args.name, target, chips, tokens, args.mode, context, args.models, remat=args.remat,
                         total_tokens=total, price=price, **training_kwargs(args))
    return json.dumps(found.to_dict(timed=True), indent=2) if args.json else found.table(args.top)
