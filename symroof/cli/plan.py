"""`symroof plan MODEL`: the parallelism strategies that fit, ranked by step time.

    symroof plan llama-3-70b --chip h100 --chips 64 --batch 512k --train
    symroof plan llama-3-70b --chip tpu-v5p --chips 16 --batch 64 --decode --json
"""

from __future__ import annotations

import argparse
import json

import sympy

from ..errors import SpecError
from ..hardware.machine import Machine, machine
from ..lang.sizes import size_value
from ..mesh import Mesh
from ..models import planner
from ..models import strategy_costs as model_strategy
from ..models.report import CONVENTIONS
from ..render.chip_card import estimates_text
from ..render.json_report import json_value
from ..show import number, seconds, wrapped
from .options import Commands, machine_kwargs, machine_options, mode_options, remat_option


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
    found = planner.plan(args.name, target, chips, tokens, args.mode, context, args.models, remat=args.remat)
    guessed = _estimates(found, target)
    if args.json:
        return json.dumps({**_as_json(found, args), "estimates": {
            path: {"value": json_value(value), "source": source} for path, (value, source) in guessed.items()}},
            indent=2)
    text = _table(found, args, target.name)
    if guessed:
        assert target.chip is not None
        text += "\n\n" + "\n".join(wrapped("estimates: " + estimates_text(guessed, target.chip.id)))
    return text


def _estimates(p: planner.Plan, target: Machine) -> dict[str, tuple[sympy.Rational, str]]:
    """The estimated chip figures the costed strategies run at (path -> (value, source))."""
    rates = {rate for c in p.candidates if c.model is not None and c.model.analysis.has_peak
             for rate in c.model.analysis.rates}
    return target.estimates(sorted(rates))


def _as_json(p: planner.Plan, args: argparse.Namespace) -> dict:
    ranked = p.ranked
    return {"model": args.name, "mode": p.mode, "chips": p.chips, "batch": p.batch, "seconds": round(p.seconds, 3),
            "considered": len(p.candidates), "ranked": [_row(c) for c in ranked],
            "set_aside": [{"strategy": c.strategy, "why": c.rejected} for c in p.candidates if c.rejected],
            "why": planner.why(p), "conventions": CONVENTIONS}


def _row(c: planner.Candidate) -> dict:
    f = c.figures
    assert c.model is not None
    mesh = c.model.structured.program.mesh
    return {"strategy": c.strategy, **({"schedule": c.schedule} if c.sizes.get("pp", 1) > 1 else {}),
            "mesh": _mesh_text(mesh), "bound": f["bound"],
            **{k: json_value(f[k]) for k in ("t_step", "t_step_exposed", "t_comm_exposed", "memory_per_chip",
                                              "tokens_per_s")},
            "threshold": {kind: {k: _json(v) for k, v in entry.items()} for kind, entry in c.thresholds.items()}}


def _json(v: object) -> object:
    """A threshold's value: text as it is, a table (microbatches for each bubble target) entry by entry."""
    if isinstance(v, dict):
        return {k: _json(x) for k, x in v.items()}
    return v if isinstance(v, str) or v is None else json_value(v)


def _table(p: planner.Plan, args: argparse.Namespace, chip: str) -> str:
    ranked = p.ranked
    batch = ", ".join(f"{k} = {v}" for k, v in p.batch.items())
    aside = [c for c in p.candidates if c.rejected]
    kinds: dict[str, int] = {}
    for c in aside:
        why = c.rejected or ""
        key = "out of memory" if "memory" in why else "its bubble alone is slower" if "bubble alone" in why else \
            "does not divide" if "divide" in why or "split" in why else "other"
        kinds[key] = kinds.get(key, 0) + 1
    lines = [f"{args.name}, {p.mode} on {p.chips} x {chip}; {batch}",
             f"considered {len(p.candidates)} strategies in {p.seconds:.2f} s: {len(ranked)} fit and are ranked; "
             + (", ".join(f"{n} set aside ({k})" for k, n in kinds.items()) or "none set aside"), ""]
    shown = ranked[:args.top]
    meshes = [_mesh_text(c.model.structured.program.mesh) for c in shown if c.model is not None]
    wide, mesh_wide = max([18, *(len(c.text) for c in shown)]), max([26, *map(len, meshes)])
    head = f"{'#':>2}  {'strategy':<{wide}} {'mesh':<{mesh_wide}} {'HBM/chip':>9} {'t_step':>11} {'exposed':>11} " \
           f"{'bound':<8} thresholds (per-chip tokens: now / where compute-bound; tp: T_math/T_net; " \
           "ep: T_math/T_AllToAll)"
    lines.append(head)
    for k, (c, mesh) in enumerate(zip(shown, meshes), 1):
        f = c.figures
        lines.append(f"{k:>2}  {c.text:<{wide}} {mesh:<{mesh_wide}} {float(f['memory_per_chip']) / 1e9:>6.3g} GB "
                     f"{seconds(f['t_step']):>11} {seconds(f['t_step_exposed']):>11} {f['bound']:<8} "
                     + _thresholds(c))
    if len(ranked) > args.top:
        lines.append(f"    ... {len(ranked) - args.top} more (--top {len(ranked)})")
    lines += ["", *wrapped("why: " + planner.why(p)), ""]
    lines += wrapped("t_step: the roofline's bound, every collective overlapped; exposed: the activations' "
                     "collectives (tensor parallelism's) waiting on the critical path, and a pipeline's bubble and "
                     "exposed sends; ranked by exposed. Pipelines run 4 x pp microbatches, 1F1B, or interleaved "
                     "(2 chunks a chip) where that is faster. Sequence parallelism is tried where the batch has "
                     "fewer sequences than chips; ZeRO-1, then ZeRO-2, where plain data parallelism does not fit.")
    return "\n".join(lines)


def _mesh_text(mesh: Mesh | None) -> str:
    # (a program without a mesh line has printed as "None" here)
    return mesh.axes_text() if mesh is not None else "None"


def _thresholds(c: planner.Candidate) -> str:
    out = []
    assert c.model is not None
    for kind, entry in c.thresholds.items():
        tokens = entry.get("per_chip_tokens")
        if tokens is not None:
            now = entry.get("now", model_strategy.tokens_per_chip(c.model))
            out.append(f"{kind} {number(now, 4)}/{number(tokens, 4)}"
                       + (f" x{number(entry['exchange_ratio'], 3)}" if entry.get("exchange_ratio") else ""))
        elif entry.get("ratio") is not None:
            out.append(f"{kind} {number(entry['ratio'], 3)}")
    return ", ".join(out)
