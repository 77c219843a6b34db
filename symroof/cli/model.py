"""`symroof model NAME|FILE`: a whole model's parameters, FLOPs, memory, chips and time.

    symroof model llama-3-70b --train --chip v5p --set B=4,T=8192 --chips 64
    symroof model llama-3-70b --decode --chip h100 --set B=32,S=4096
    symroof model llama-3-70b --print > my.sr; symroof model my.sr --chip v5p
    symroof model --params 70e9 --chip v5p --chips 8960 --mfu 0.4 --tokens 15e12
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable

from ..errors import SpecError
from ..hardware.machines import Machine, machine
from ..lang.sizes import size_value
from ..models import report
from ..models.counted import NEEDS_CONFIG, SIZE_FLAGS, Counted, from_entry, is_counted
from ..models.decls import Options
from ..models.whole import Model
from ..render.json_report import json_value
from ..show import human, number, seconds
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
    whole_numbers,
)


def add_parser(commands: Commands) -> None:
    models_cmd = commands.add_parser("models", help="list the models in models.json with their parameter counts",
                                     description="Each model of the catalogue: its parameters as the template "
                                                 "counts them beside the count its publisher states, and that "
                                                 "count's source.")
    models_cmd.add_argument("--models", metavar="FILE", help="a models file in place of the shipped models.json")
    models_cmd.add_argument("--json", action="store_true", help="print JSON")
    models_cmd.set_defaults(handler=_models)
    cmd = commands.add_parser("model", help="a whole model: parameters, FLOPs, memory, chips, step time",
                              description="Analyse a model from models.json, a Hugging Face config.json "
                                          "(or a program file with let, repeat and param lines) for training, "
                                          "prefill or decode.")
    cmd.add_argument("name", metavar="NAME|FILE", nargs="?",
                     help="a model in models.json (llama-3-70b; symroof models lists them), a local Hugging "
                          "Face config.json (a path ending .json), or a program file; left out with --params")
    cmd.add_argument("--params", metavar="N",
                     help="a model given only by its parameter count (70e9), training: FLOPs by the 6·N rule, "
                          "weights, gradients and optimizer state, the chips they need, and at --mfu tokens/s, "
                          "days (--tokens) and a step's time (--set B=...,T=...); with --layers, --dim and "
                          "--context, attention's 12·L·D·T FLOPs a token beside 6·N; what needs the "
                          "configuration (activations, a KV cache, a roofline, --strategy) is refused. NAME, if "
                          "given, is what to call it (one models.json knows is refused: its entry is the model)")
    for name, flag in SIZE_FLAGS.items():
        cmd.add_argument(flag, metavar=name if name != "context" else "T",
                         help=f"with --params: the model's {_SIZE_WORDS[name]}, where known"
                              + ("" if name in ("L", "D", "N", "context") else " (shown; no count follows from it)"))
    mode_options(cmd)
    cmd.add_argument("--print", action="store_true", help="print the model's program and stop")
    machine_options(cmd)
    cmd.add_argument("--chips", type=int, default=1, help="chips the step runs on (an even split)")
    cmd.add_argument("--set", action="append", default=[], metavar="DIM=VALUE",
                     help="sizes: B, T (train, prefill), S (decode's context); default B=1 and the "
                          "model's context")
    cmd.add_argument("--mfu", type=float, help="time a step at this fraction of the peak, not the roofline")
    training_options(cmd)
    remat_option(cmd)
    budget_options(cmd)
    cmd.add_argument("--weights", default="bf16", metavar="DTYPE",
                     help="the layers' weight matrices' dtype or quantized format, scales counted: int8, fp8, "
                          "int4 (int4-g128), fp4 (mxfp4), nvfp4, fp8-b128 (bf16)")
    cmd.add_argument("--kv", default="bf16", metavar="DTYPE",
                     help="the KV cache's dtype or quantized format: int8, fp8, int4, mxfp4, nvfp4 (bf16)")
    cmd.add_argument("--batches", metavar="B1,B2,...",
                     help="a table of throughput against latency over these batches (1,2,4,...,256)")
    cmd.add_argument("-o", "--output", metavar="FILE", help="with --batches: plot it (png, svg, pdf)")
    cmd.add_argument("--strategy", metavar="KIND=SIZE,...",
                     help="shard a named model: dp=4,tp=8 (data over X=4, tensor over Y=8); kinds dp, "
                          "zero1, zero2, fsdp (zero3), tp (with Megatron sequence parallelism in training and "
                          "prefill: norms and residuals split over the sequence), tp-nosp (tp without it), pp, "
                          "sp (context parallelism), ep (a mixture of experts); or dp=X,tp=Y with --mesh")
    cmd.add_argument("--mesh", metavar="AXIS=N,...", help="with --strategy KIND=AXIS: the mesh's axes")
    cmd.add_argument("--microbatches", type=int, metavar="M",
                     help="in training, the microbatches a step's batch runs as, their gradients accumulated "
                          "(a replica's sequences must split into them); with --strategy pp=P, the pipeline's "
                          "(default 4 x P)")
    cmd.add_argument("--schedule", metavar="NAME",
                     help="with --strategy pp=P: gpipe, 1f1b (default) or interleaved[:CHUNKS] (2 chunks a chip)")
    cmd.add_argument("--models", metavar="FILE", help="a models file in place of the shipped models.json")
    cmd.add_argument("--json", action="store_true", help="print one JSON object")
    cmd.add_argument("--latex", action="store_true",
                     help="print the quantities as LaTeX (display math, as a notebook shows them): each one's "
                          "formula in B, T and S and its value")
    _serving_options(cmd)
    cmd.set_defaults(handler=run)


def _serving_options(cmd: argparse.ArgumentParser) -> None:
    """--serve and its flags: a request's cost (models/serving.py)."""
    group = cmd.add_argument_group("serving (--serve)")
    group.add_argument("--serve", action="store_true",
                       help="a request of --prompt P tokens in and --generate G out, B (--set B=...) batched: ttft, "
                            "tpot, t_request, tokens/s, requests/s, the KV caches that fit")
    group.add_argument("--prompt", type=int, metavar="P", help="with --serve: the prompt's tokens")
    group.add_argument("--generate", type=int, metavar="G", help="with --serve: the tokens generated")
    group.add_argument("--tpot-slo", metavar="SECONDS",
                       help="with --serve: the largest batch whose time per output token stays within SECONDS")
    group.add_argument("--draft", metavar="NAME", help="with --serve: speculative decoding with this draft model")
    group.add_argument("--draft-tokens", type=int, metavar="K", help="with --draft: tokens drafted (4)")
    group.add_argument("--accept", metavar="ALPHA", help="with --draft: each draft token's acceptance rate (0.8)")
    group.add_argument("--chunk", type=int, metavar="C",
                       help="with --serve: chunked prefill, C prompt tokens a step mixed into the decode steps")


def _serve(args: argparse.Namespace, target: Machine | None) -> str:
    from ..models import serving
    if args.mode != "train":
        raise SpecError(f"--serve costs a request's prefill and decode steps itself: drop --{args.mode}")
    if args.prompt is None or args.generate is None:
        raise SpecError("--serve needs --prompt P and --generate G (tokens in and out)")
    if args.draft is None and args.draft_tokens is not None:
        raise SpecError("--draft-tokens goes with --draft MODEL: the tokens the draft proposes a step")
    if target is None:
        raise SpecError("--serve times a request: it needs a chip (--chip)")
    sizes = _sizes(args.set)
    if set(sizes) - {"B"}:
        raise SpecError(f"--serve takes --set B=... only; the contexts come from --prompt and --generate, "
                        f"got {', '.join(sorted(set(sizes) - {'B'}))}")
    found = serving.request(args.name, target, args.prompt, args.generate, sizes.get("B", 1),
                            strategy=args.strategy, mesh=args.mesh, chips=args.chips, weights=args.weights,
                            kv=args.kv, tpot_slo=args.tpot_slo, draft=args.draft,
                            draft_tokens=4 if args.draft_tokens is None else args.draft_tokens,
                            accept=args.accept, models_file=args.models, hbm_usable=training_kwargs(args)["hbm_usable"],
                            chunk=args.chunk)
    return json.dumps(found.to_dict(), indent=2) if args.json else found.table()


def run(args: argparse.Namespace) -> str:
    target = machine(**machine_kwargs(args))
    config = None
    if args.name is not None:
        try:
            config = report.named(args.name, args.models)
        except SpecError:
            if args.params is None:
                raise
            # with --params, a name models.json does not know only labels the count
    counted = args.params is not None or (config is not None and is_counted(config))
    if args.latex:
        other = [flag for flag, given in (("--json", args.json), ("--serve", args.serve), ("--batches", args.batches),
                                          ("--print", args.print), ("a model known by its count alone", counted))
                 if given]
        if other:
            raise SpecError(f"--latex prints a step's quantities as LaTeX: it does not go with {', '.join(other)}")
    if counted:
        return _counted(args, target, config)
    if args.name is None:
        raise SpecError("symroof model takes a model's NAME (models.json), a program FILE, or --params N")
    if args.serve:
        return _serve(args, target)
    serving = [f for f, v in (("--prompt", args.prompt), ("--generate", args.generate), ("--tpot-slo", args.tpot_slo),
                              ("--draft", args.draft), ("--draft-tokens", args.draft_tokens),
                              ("--accept", args.accept), ("--chunk", args.chunk))
               if v is not None]
    if serving:
        raise SpecError(f"{serving[0]} goes with --serve")
    given = [flag for name, flag in SIZE_FLAGS.items() if getattr(args, _dest(flag)) is not None]
    if given:
        raise SpecError(f"{', '.join(given)} {'go' if len(given) > 1 else 'goes'} with --params: a named model or "
                        "a program has its own sizes (--set B=...,T=... sets the batch and sequence)")
    text, about, context = report.source(args.name, args.mode, weights=args.weights, kv=args.kv,
                                               strategy=args.strategy, mesh=args.mesh, chips=args.chips,
                                               target=target, microbatches=args.microbatches,
                                               schedule=args.schedule, models_file=args.models)
    stages = about.pop("stage_programs", None)
    if args.print:
        if stages is not None:  # a pipeline runs its stages' programs: its two ends
            return json.dumps({**about, "mode": args.mode, "stage_programs": [str(p) for p in stages]}, indent=2) \
                if args.json else "\n\n".join(str(p).rstrip("\n") for p in stages)
        return json.dumps({**about, "mode": args.mode, "program": str(text)}, indent=2) if args.json \
            else str(text).rstrip("\n")
    if args.batches is not None and not args.batches.strip():
        raise SpecError("--batches takes 1 to 64 positive batch sizes, e.g. 1,8,64,256; got none")
    if args.batches and stages is not None:
        raise SpecError("--batches sweeps one program's batch; a pipeline's batch is its microbatches': give "
                        "--set B=... and --microbatches instead")
    if args.batches and about.get("microbatches") is not None:
        raise SpecError("--batches sweeps the batch; --microbatches splits one batch: give --set B=... with "
                        "--microbatches instead")
    structured = report.read_source(args.name, text)
    set_sizes = _sizes(args.set)
    sizes = report.with_defaults(structured, args.mode, context, set_sizes)
    state = training_kwargs(args)
    chips = report.record(about, args.mode, sizes, set_sizes, target, args.chips, args.strategy)
    options = Options(mode=args.mode, chips=chips, optimizer=state["optimizer"], remat=args.remat, mfu=args.mfu,
                      strategy=tuple(about.get("strategy", {}).items()), grads=state["grads"], master=state["master"],
                      headroom=state["hbm_usable"])
    # the model symroof.model gives for the same arguments: its report is the one printed
    found = report.assemble(structured, about, stages, target, sizes, options)
    if args.tokens and args.mode != "train":
        raise SpecError(f"--tokens (--train-tokens) gives the days to train: it goes with --train, not --{args.mode}")
    if args.remat != "full" and args.mode != "train":
        raise SpecError(f"--remat is what a training step keeps for its backward pass: it goes with --train, "
                        f"not --{args.mode}")
    total, price = budget_values(args)
    if total is not None and target is None:
        raise SpecError("--tokens times a token budget: it needs a chip (--chip) to run the steps on")
    if args.batches:
        return _batches(args, found, about)
    if args.output:
        raise SpecError("-o plots throughput against latency: give --batches too")
    if args.json:
        return json.dumps(found.to_dict(total, price), indent=2)
    if args.latex:
        return found._repr_latex_()
    return found.table(total, price)


_SIZE_WORDS = {"N": "query heads", "L": "layers", "D": "width (d_model)", "F": "MLP width", "V": "vocabulary",
               "context": "sequence length (tokens a sequence)"}


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _counted(args: argparse.Namespace, target: Machine | None, config: dict | None) -> str:
    """`symroof model --params N ...` (or a models.json entry given by `params`): what the
    count gives (models/counted.py); what needs the configuration refused by name."""
    for flag, given in (("--strategy", args.strategy), ("--mesh", args.mesh), ("--microbatches", args.microbatches),
                        ("--schedule", args.schedule), ("--batches", args.batches), ("--print", args.print),
                        ("--kv", args.kv != "bf16")):
        if given:
            raise SpecError(f"{flag} needs {NEEDS_CONFIG}; a parameter count has none")
    if config is not None and args.params is not None:
        raise SpecError(f"--params gives a model by its count; {args.name!r} is in models.json: give one or the other")
    sizes = {name: size_value(getattr(args, _dest(flag)), flag) for name, flag in SIZE_FLAGS.items()
             if getattr(args, _dest(flag)) is not None}
    sizes.update(_sizes(args.set))
    state = training_kwargs(args)
    options = Options(mode=args.mode, chips=args.chips, optimizer=state["optimizer"], remat=args.remat,
                      mfu=args.mfu, grads=state["grads"], master=state["master"], headroom=state["hbm_usable"])
    total, price = budget_values(args)
    if config is not None:
        found = from_entry(config, target, options, sizes, args.weights)
    else:
        count = size_value(args.params, "--params")
        found = Counted(count, target, options, sizes, args.weights,
                        {"model": None, "name": args.name or f"{number(count)} parameters"})
    if args.output:
        raise SpecError("-o plots throughput against latency over --batches: it needs the model's configuration")
    return json.dumps(found.to_dict(total, price), indent=2) if args.json else found.table(total, price)


def _sizes(items: Iterable[str]) -> dict[str, int]:
    found = {}
    for item in items:
        for part in item.split(","):
            name, eq, value = part.partition("=")
            if not eq or not name.strip():
                raise SpecError(f"--set takes DIM=VALUE, got {part!r}")
            found[name.strip()] = size_value(value.strip(), part)
    return found


def _batches(args: argparse.Namespace, model: Model, about: dict) -> str:
    # Imported here: matplotlib takes longer to import than a model takes to analyse.
    from ..models import plot as model_plot
    if model.machine is None:
        raise SpecError("throughput against latency needs a chip (--chip)")
    rows = model_plot.sweep(model, whole_numbers(args.batches, "--batches", 64))
    if not all(r["t_step"].is_number for r in rows):
        raise SpecError("throughput against latency needs numbers: give every dim but B a size (--set) and a "
                        "chip whose figures are numbers (not --chip symbolic)")
    # what every row holds fixed, S above all (a decode step's context: the model's own unless given)
    fixed = ", ".join(f"{k} = {v}" for k, v in model.sizes.items() if k != "B")
    context = [k for k in ("S", "T") if k in about.get("defaulted", ())]
    title = f"{about['name']}, {args.mode} on {args.chips} x {model.machine.name}" + (f"; {fixed}" if fixed else "")
    if args.output:
        model_plot.plot(rows, title + (" (the model's context)" if context else ""), args.output, args.mode)
    if args.json:
        return json.dumps({**about, "batches": [{k: json_value(v) for k, v in r.items()}
                                                for r in rows]}, indent=2)
    usable = f"{float(model.options.headroom):.0%}"
    lines = [title + (f" (the model's context; --set {context[0]}=... for another)" if context else ""),
             f"fits: the step's memory within {usable} of each chip's HBM (--hbm-usable)", "",
             f"{'B':>6}  {'t_step':>12}  {'tokens/s':>12}  {'tokens/s/chip':>13}  fits"]
    for r in rows:
        fits = "?" if r["fits"] is None else "yes" if r["fits"] else "NO"
        lines.append(f"{r['B']:>6}  {seconds(r['t_step']):>12}  {number(r['tokens_per_s'], 4):>12}  "
                     f"{number(r['tokens_per_s_per_chip'], 4):>13}  {fits}")
    return "\n".join(lines) + (f"\nwrote {args.output}" if args.output else "")


def _models(args: argparse.Namespace) -> str:
    """`symroof models`: the catalogue, each model's counted parameters beside its publisher's."""
    rows = report.catalogue_rows(args.models)
    if args.json:
        return dumps(rows)
    lines = [f"{'id':<18} {'name':<24} {'counted':>10} {'published':>10} {'off':>7}  source of the published count"]
    for row in rows:
        published = row["params_published"]
        off = "" if published is None else f"{(row['params'] / published - 1) * 100:+.2f}%"
        shown = "-" if published is None else human(published) + ("~" if row["rounded"] else "")
        lines.append(f"{row['id']:<18} {row['name'][:24]:<24} {human(row['params']):>10} {shown:>10} {off:>7}  "
                     f"{row['source']}")
    return "\n".join([*lines, "", "counted: the transformer template's count of the model's configuration (for a "
                       "model given only by its count, that count); ~: the publisher's figure is rounded"])
