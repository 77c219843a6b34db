"""`symroof plan MODEL`: the parallelism strategies that fit, ranked by step time.

    symroof plan llama-3-70b --chip h100 --chips 64 --batch 512k --train
    symroof plan llama-3-70b --chip tpu-v5p --chips 16 --batch 64 --decode --json
    symroof plan llama-3-70b --chip tpu-v5p --chips 64 --batch 48000 --slice 4x4x4 --symbolic --optimize
    symroof plan llama-3-8b --chip h100 --chips 64 --batch 4M --tokens 15e12 --price 2.5 --optimizer adam-bf16
"""

from __future__ import annotations

import argparse

from ..errors import SpecError
from ..hardware.machines import machine
from ..lang.sizes import size_value
from ..models import derive, planner
from .options import (
    Commands,
    budget_options,
    budget_values,
    dumps,
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
    machine_options(cmd, symbolic=False)
    cmd.add_argument("--chips", required=True, help="how many chips (64, 256, 8k)")
    batch = cmd.add_mutually_exclusive_group(required=True)
    batch.add_argument("--batch",
                       help="tokens a step processes (train, prefill: 512k, a multiple of the context); "
                            "sequences in decode (64)")
    batch.add_argument("--sequences",
                       help="sequences a step processes, in any mode (256: in training, 256 x the context tokens)")
    cmd.add_argument("--context", help="tokens per sequence (train, prefill) or of context (decode); "
                                       "the model's by default")
    remat_option(cmd)
    training_options(cmd)
    budget_options(cmd)
    cmd.add_argument("--top", type=int, default=10,
                     help="how many ranked strategies to show (10); with --json, every ranked strategy's figures "
                          "and the thresholds of this many (each costs its model)")
    cmd.add_argument("--models", metavar="FILE", help="a models file in place of the shipped models.json")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.add_argument("--latex", action="store_true",
                     help="print the ranking as LaTeX (display math, as a notebook shows it): the --top best's step "
                          "times, MFU, memory per chip and bound")
    # the training chapter's strategy formulas (models/derive.py), in place of the ranking
    cmd.add_argument("--symbolic", action="store_true",
                     help="print, in place of the ranking, each strategy kind's T_math, T_comms and compute-bound "
                          "condition for the book's MLP layer, derived by the engine as formulas in the model's D "
                          "and F and the chip's C and W_ici (alpha = C / W_ici bidirectional), per pass (the "
                          "book's convention) and over the whole step, with their numbers at --chips and --batch, "
                          "the largest batch each stays communication-bound at, and the share of the model's step "
                          "in attention as a function of T")
    cmd.add_argument("--optimize", action="store_true",
                     help="derive the FSDP x TP split of --chips that minimises the collectives' time "
                          "(d/dX T_comms = 0: X_opt), and the best whole split, each laid on the chip's torus "
                          "(--slice) and costed there; in place of the ranking")
    cmd.set_defaults(handler=run)


def run(args: argparse.Namespace) -> str:
    if args.latex and (args.json or args.symbolic or args.optimize):
        other = [f for f, on in (("--json", args.json), ("--symbolic", args.symbolic), ("--optimize", args.optimize))
                 if on]
        raise SpecError(f"--latex prints the ranking as LaTeX: it does not go with {', '.join(other)}")
    if args.symbolic or args.optimize:
        return _formulas(args)
    target = machine(**machine_kwargs(args))
    if target is None or target.chip is None:
        raise SpecError("a plan needs a named chip's figures, links and HBM (--chip tpu-v5p; see symroof chips), "
                        "not bare figures or --chip symbolic")
    if args.top < 1:
        raise SpecError(f"--top takes how many ranked strategies to show, at least 1, not {args.top}")
    chips = size_value(args.chips, "--chips")
    tokens = size_value(args.batch, "--batch") if args.batch is not None else None
    sequences = size_value(args.sequences, "--sequences") if args.sequences is not None else None
    context = size_value(args.context, "--context") if args.context else None
    if args.mode != "train" and args.remat != "full":
        raise SpecError("--remat is what a training step keeps for its backward pass: it goes with --train")
    total, price = budget_values(args)
    if total is not None and args.mode != "train":
        raise SpecError(f"--tokens gives the time to train on a token budget: it goes with --train, not --{args.mode}")
    found = planner.plan(args.name, target, chips, tokens, args.mode, context, args.models, remat=args.remat,
                         total_tokens=total, price=price, sequences=sequences, **training_kwargs(args))
    if args.json:
        return dumps(found.to_dict(timed=True, top=args.top))
    return found.latex(args.top) if args.latex else found.table(args.top)


def _formulas(args: argparse.Namespace) -> str:
    """--symbolic, --optimize: the book's training formulas, derived (models/derive.py)."""
    flags = " and ".join(f for f, on in (("--symbolic", args.symbolic), ("--optimize", args.optimize)) if on)
    if args.mode != "train":
        raise SpecError(f"{flags} derive{'s' if ' and ' not in flags else ''} the training chapter's formulas: "
                        "drop --prefill/--decode")
    if not args.chip:
        raise SpecError(f"{flags} needs a named TPU (--chip tpu-v5p): its torus lays the axes")
    refused = [f for f, given in (("--variant", args.variant), ("--peak-flops", args.peak_flops),
                                  ("--hbm-bw", args.hbm_bw), ("--vector-flops", args.vector_flops),
                                  ("--ici-bw", args.ici_bw), ("--override", args.override),
                                  ("--hardware", args.hardware), ("--context", args.context),
                                  ("--sequences (give --batch, in tokens)", args.sequences),
                                  ("--remat", args.remat != "full"), ("--top", args.top != 10),
                                  ("--tokens", args.tokens), ("--price", args.price),
                                  ("--optimizer", args.optimizer != "adam"), ("--grads", args.grads),
                                  ("--master", args.master), ("--hbm-usable", args.hbm_usable)) if given]
    if refused:
        raise SpecError(f"{flags} derive{'s' if ' and ' not in flags else ''} the book's layer from the chip's own "
                        f"figures and the model's D and F, with no ranking, state or budget: drop {', '.join(refused)}")
    found = derive.training_formulas(args.name, args.chip, size_value(args.chips, "--chips"),
                                     size_value(args.batch, "--batch"), slice=args.slice, symbolic=args.symbolic,
                                     optimize=args.optimize, models_file=args.models)
    return dumps(found.to_dict()) if args.json else found.table()
