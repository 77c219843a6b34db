"""Models from Python (`symroof.model`), and a model's report: each model quantity at the
sizes given, beside its formula in the batch and sequence dims (B, T, S); as text and as a
JSON object."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import sympy

from ..errors import SpecError
from ..hardware.chips import Chip
from ..hardware.machines import Machine, machine
from ..ir import dim_symbol
from ..lang.source import Program
from ..lang.structure import Structured, read_structured
from ..mesh import Mesh
from ..render.chip_card import estimates_text
from ..render.json_report import json_value
from ..render.tex import TexPrinter, tex_name, tex_words
from ..resources import read_text_bounded
from ..roofline.solve import Region
from ..show import beside, human, number, pretty, seconds, wrapped
from . import accumulation, kinds, latency_bound, mla, pipeline, quant, strategy_costs, windows
from . import context as contexts
from .catalogue import get_model, models
from .counted import NEEDS_CONFIG, is_counted
from .decls import MODEL_QUANTITY, Options, budget_json, budget_rows, state_bytes, state_json, state_text, usable_text
from .strategies import Strategy, strategy_of
from .templates import TOUCHED_EXPERTS, program, sharded, touches_experts, whole
from .whole import Model


def model(name: str, mode: str = "train", chip: str | Chip | Machine | None = None, sizes: dict | None = None, *,
          chips: int = 1,
          optimizer: str = "adam", remat: str = "full", mfu: float | None = None, weights: str = "bf16",
          kv: str = "bf16", strategy: str | None = None, mesh: str | Mesh | None = None,
          microbatches: int | None = None,
          schedule: str | None = None, models_file: str | None = None, grads: str | None = None,
          master: str | None = None, hbm_usable: float = 0.9) -> Model:
    """A model by name (models.json: "llama-3-70b"), or a program with structure (its text,
    or a path to a file holding it), for one mode ("train", "prefill", "decode").

    `sizes` gives B, T (S in decode) and any other dim; a named model defaults to B = 1
    and its context (`{"T": None}` leaves T a symbol). The result's quantities are
    attributes (`params`, `kv_bytes_per_token`, `t_step`, ...; see
    `symroof.models.decls.MODEL_QUANTITIES`), `quantities()` has them all and
    `analysis` is the whole step's roofline analysis. `weights` and `kv` store a named
    model's weight matrices and KV cache in another dtype (int8, fp8); `strategy` shards it
    ("dp=4,tp=8", "fsdp=64,tp=4" in training, or "dp=X,tp=Y" with `mesh`, its text
    "X=4, Y=8" or a `Mesh`: strategies.py);
    a pipeline ("pp=4,dp=8") takes `microbatches` and a `schedule` (pipeline.py); any other
    training step takes `microbatches` too, and runs its batch as that many microbatches,
    accumulating their gradients (accumulation.py).
    Training's state: `grads` (fp32, bf16; the parameters' dtype by default), `optimizer`
    (decls.OPTIMIZERS), `master` (fp32, none; the optimizer's default), and `hbm_usable`, the
    fraction of a chip's HBM it may fill (0.9).

    Examples:
        >>> import symroof
        >>> m = symroof.model("llama-3-70b", "decode")
        >>> m.params, m.kv_bytes_per_token
        (70553706496, 327680)
    """
    target = chip if chip is None or isinstance(chip, Machine) else machine(chip)  # a name, a Chip or a Machine
    about: dict = {}
    text: str | Program
    if "\n" in name or "{" in name:  # the program's own text
        text, context = name, None
    else:
        text, about, context = source(name, mode, weights=weights, kv=kv, strategy=strategy, mesh=mesh, chips=chips,
                                  target=target, microbatches=microbatches, schedule=schedule,
                                  models_file=models_file)
    structured = read_source(name, text)
    sized = with_defaults(structured, mode, context, sizes or {})
    stages = about.pop("stage_programs", None)
    chips = record(about, mode, sized, sizes or {}, target, chips, strategy)
    return assemble(structured, about, stages, target, sized,
                    Options(mode=mode, chips=chips, optimizer=optimizer, remat=remat, mfu=mfu,
                            strategy=tuple(about.get("strategy", {}).items()), grads=grads, master=master,
                            headroom=hbm_usable))


def assemble(structured: Structured, about: dict, stages: tuple[Program, Program] | None, target: Machine | None,
             sizes: dict, options: Options, mesh: Mesh | None = None) -> Model:
    """The model of a program, or with a pipeline (`about["pipeline"]` and the stages'
    programs, from `source`) the whole program's model with its end stages' (pipeline.py),
    read on `mesh` where given (a strategy family's). It keeps `about` for its report, and
    this function (all but the sizes) to make its formulas at other sizes when asked
    (`Model.formulas`)."""
    origin = functools.partial(assemble, structured, about, stages, target, options=options, mesh=mesh)
    if stages is None:
        if about.get("microbatches") is not None:  # gradient accumulation (accumulation.py)
            return accumulation.AccumulatedModel(structured, target, sizes, options, about["microbatches"], about,
                                                 origin)
        return Model(structured, target, sizes, options, about, origin)
    plan = about["pipeline"]
    schedule = pipeline.parse_schedule(plan["schedule"])
    micro = dict(sizes)
    if "B" in sizes and not isinstance(plan["stages"], int):
        # a strategy family's (families.py), each member checked on its own: where its
        # microbatches are a formula, its stages' B is free, a microbatch's, put in member by member
        if isinstance(plan["microbatches"], int):
            micro["B"] = sizes["B"] // plan["microbatches"]
        else:
            del micro["B"]
    elif "B" in sizes:
        replicas = accumulation.replicas(structured, about["strategy"])
        pipeline.check_batch(plan["layers"], plan["stages"], plan["microbatches"], sizes["B"],
                             int(replicas) if replicas.is_Integer else None, schedule)
        micro["B"] = sizes["B"] // plan["microbatches"]
    first, last = (Model(read_structured(text, mesh=mesh), target, micro, options) for text in stages)
    # the axes the gradients are summed over, once a step
    summed = "".join(about["strategy"].get(kind.name, "") for kind in kinds.where(lambda k: k.defers_gradients))
    pipe = pipeline.Pipeline(first, last, plan["stages"], plan["microbatches"], schedule,
                             about["strategy"][kinds.stages().name], summed)
    return pipeline.PipelinedModel(structured, target, sizes, options, pipe, about, origin)


def catalogue_rows(models_file: str | None = None) -> list[dict]:
    """Each model of the catalogue (`symroof models`): its parameters as the template counts
    them (a model given only by its count: that count), the count its publisher states
    (None for the latter), whether that figure is rounded, and its source."""
    rows = []
    for config in models(models_file):
        if is_counted(config):
            rows.append({"id": config["id"], "name": config["name"], "params": config["params"],
                         "params_published": None, "rounded": True, "source": config["sources"]["params"]})
            continue
        rows.append({"id": config["id"], "name": config["name"],
                     "params": int(Model(read_structured(whole(config))).params),
                     "params_published": config["params_published"], "rounded": config.get("params_rounded", False),
                     "source": config["sources"]["params_published"]})
    return rows


def read_source(name: str, text: str | Program) -> Structured:
    """What `source` gave for `name`, read: a file not named as a program (.sr, .txt) that
    does not read as one is refused saying where, but with none of its text (it may be any
    file: /etc/passwd)."""
    try:
        return read_structured(text)
    except SpecError as err:
        if isinstance(text, str) and text is not name and Path(name).suffix not in PROGRAM_SUFFIXES:
            raise SpecError(f"{name} does not read as a symroof program: {err.headline()}; a program file's "
                            f"name ends in {' or '.join(PROGRAM_SUFFIXES)}") from None
        raise


def named(name: str, models_file: str | None = None) -> dict | None:
    """The models.json entry NAME names; None for a program (its text, or a file)."""
    if "\n" in name or "{" in name or _is_file(name):
        return None
    return get_model(name, models_file)


def source(name: str, mode: str, *, weights: str = "bf16", kv: str = "bf16", strategy: str | None = None,
           mesh: str | Mesh | None = None, chips: int = 1, target: Machine | None = None,
           microbatches: int | None = None,
           schedule: str | None = None, models_file: str | None = None) -> tuple[str | Program, dict, int | None]:
    """What `symroof model NAME|FILE` and `symroof.model` run: the program (a named model's
    as objects, a file's text; `str()` prints either), what to call it ({"model", "name"}),
    and the model's context (None for a program file). With a pipeline, `about` carries it
    ("pipeline") and its two end stages' programs ("stage_programs": take them out before
    `about` is printed)."""
    if not _is_file(name):
        config = get_model(name, models_file)
        if is_counted(config):
            raise SpecError(f"{config['id']} is given by its parameter count only: {NEEDS_CONFIG} is needed here; "
                            f"symroof model {config['id']} (symroof.counted) gives what the count does")
        found = strategy_of(strategy, mesh, mode, config, chips, target)
        built, about = sharded_source(config, mode, found, weights=weights, kv=kv, microbatches=microbatches,
                                      schedule=schedule)
        return built, about, config["sizes"]["context"]
    text = read_text_bounded(name, MAX_PROGRAM_BYTES, "program file", SpecError)
    if not text.strip():
        raise SpecError(f"program file {name} is empty: write a model's statements in it "
                        "(symroof model llama-3-8b --print shows one)")
    for flag, given in (("--strategy", strategy), ("--mesh", mesh), ("--weights", weights != "bf16"),
                        ("--kv", kv != "bf16")):
        if given:  # they write a named model's template; a file says all of it itself
            raise SpecError(f"{flag} rewrites a named model's template; a program file carries its own "
                            "dtypes and mesh (write them in it)")
    if schedule is not None:
        raise SpecError("--schedule goes with a pipeline of a named model: --strategy pp=4,...")
    about = {"model": name, "name": name}
    if microbatches is not None:
        about["microbatches"] = accumulation.check(microbatches, mode)
    return text, about, None


def sharded_source(config: dict, mode: str, found: Strategy, *, weights: str = "bf16", kv: str = "bf16",
                   microbatches: int | None = None, schedule: str | None = None) -> tuple[Program, dict]:
    """A named model's program sharded by a strategy given as axes (`strategies.Strategy`:
    one `strategy_of` read, or a strategy family's, families.py, whose axes have no sizes:
    its pipeline's stage count the product of its pp axes' size symbols, each member's own),
    and what to call it (as `source`)."""
    built = program(config, mode, weights, kv, found)
    about = {"model": config["id"], "name": config["name"], "context_limit": config["sizes"]["context"]}
    said = [quant.storage(what, given, config["sizes"])[1] for what, given in (("weights", weights), ("kv", kv))]
    if any(said):
        about["storage"] = [s for s in said if s]
    if found:
        about["strategy"] = {kind: "".join(a for a, *_ in axes) for kind, axes in found.items()}
    if kinds.stages().name in found:
        about.update(_pipeline(config, mode, weights, kv, found, microbatches, schedule))
    elif schedule is not None:
        raise SpecError("--schedule goes with a pipeline: --strategy pp=4,...")
    elif microbatches is not None:
        about["microbatches"] = accumulation.check(microbatches, mode)
    return built, about


def _pipeline(config: dict, mode: str, weights: str, kv: str, found: Strategy, microbatches: int | None,
              schedule: str | None) -> dict:
    """A pipeline's figures for `about`, and its two end stages' programs. A strategy
    family's pp axes have no sizes: its stage count is their size symbols' product, its
    default microbatches 4 times that, each member's checked on its own (families.py)."""
    axes = found[kinds.stages().name]
    stages: pipeline.Count = math.prod(size for _, size, _ in axes) if all(size for _, size, _ in axes) \
        else sympy.Mul(*(dim_symbol(a) if size is None else sympy.Integer(size) for a, size, _ in axes))
    layers = config["sizes"]["L"]
    plan = pipeline.parse_schedule(schedule)
    count = pipeline.microbatches_default(stages) if microbatches is None else microbatches
    if isinstance(count, bool) or not isinstance(count, (int, sympy.Expr)) \
            or isinstance(count, int) and not 1 <= count <= 65536:
        raise SpecError(f"--microbatches takes a whole number from 1 to 65536, not {microbatches!r}")
    if isinstance(stages, int) and isinstance(count, int):
        pipeline.check(layers, stages, count, None, plan)
    template = whole(config, mode, weights, kv)
    programs = tuple(sharded(pipeline.stage_program(template, end, stages), mode, found) for end in ("first", "last"))
    return {"pipeline": {"stages": stages, "layers": layers, "microbatches": count, "schedule": str(plan),
                         "microbatches_default": microbatches is None},
            "stage_programs": programs}


MAX_PROGRAM_BYTES = 1_000_000  # a program file (the language reads 200,000 characters of a program)


PROGRAM_SUFFIXES = (".sr", ".txt")  # a program file's name (any other path is read as one where it exists)


def _is_file(name: str) -> bool:
    path = Path(name)
    try:
        # a .json file is a Hugging Face config (models/hf_config.py), read as a named model's; a
        # path that is there but no regular file (a FIFO, /dev/zero) is read as a program's, and refused
        # a file here by a plain name (`-o mlp.prog` then `model mlp.prog`) is the file
        return path.suffix in PROGRAM_SUFFIXES or (path.suffix != ".json" and (("/" in name and path.exists())
                                                                              or path.is_file()))
    except (OSError, ValueError):  # a name too long for a path, or with a NUL: a model's name, then
        return False


def record(about: dict, mode: str, sized: dict, given: dict, target: Machine | None, chips: int,
           strategy: str | None) -> int:
    """What a model's report says of how it was asked for, into `about`: its mode, sizes (and
    which it `defaulted`, not `given`), chip and chips; the chips its options split the step
    over, returned: 1 beside a strategy, whose mesh splits the work (a --chips beside it was
    checked to be what the mesh spans)."""
    chips = 1 if strategy else chips
    about.update(mode=mode, sizes=sized, chip=target.name if target is not None else None, chips=chips,
                 defaulted=[k for k in sized if k not in given])
    return chips


def with_defaults(structured: Structured, mode: str, context: int | None, sizes: dict) -> dict:
    """The sizes given, over a named model's defaults: B = 1 and its context (T; S in
    decode). A size given as None leaves that dim a symbol."""
    defaults = {"B": 1, ("S" if mode == "decode" else "T"): context} if context else {}
    dims = set(structured.program.dims)
    given = {**{k: v for k, v in defaults.items() if k in dims}, **sizes}
    return {k: v for k, v in given.items() if v is not None}

# the conventions a model's report states, each with when it applies: "train" (a training
# step's), "split" (chips without a strategy), "strategy", or always (None)
CONVENTIONS: tuple[tuple[str | None, str], ...] = (
    (None, "1 FLOP = one multiply or one add (a multiply-add is 2); GB = 1e9 bytes; a time's formula (after "
           "=) is in seconds"),
    ("train", "training = forward + backward, the backward 2x the forward: model FLOPs (flops_train, what an MFU "
              "counts) 3x the forward's; hardware FLOPs (flops_train_hardware, an HFU's, what t_step runs) add what "
              "is recomputed: (remat full) each repeated block's whole forward again, as PyTorch's checkpoint reruns "
              "it (XLA may skip a statement no gradient reads); (remat save=x,o,h) a block's statements whose "
              "outputs are not named; under every policy a fused block's intermediates (flash attention's scores) "
              "again in its backward; a recomputed statement's collectives run again, a parameter's gather does not"),
    ("train", "Adam keeps 12 bytes per parameter (fp32 master copy and two moments); gradients in the parameters' "
              "dtype"),
    ("train", "activations kept (remat full): each repeated block's input; (remat none): every statement's output; "
              "(remat save=x,o,h): the tensors so named; under full and save=, the statements after the blocks (the "
              "final norm, the LM head) keep their input and output (the logits)"),
    (None, "attention counts the full T x S scores (a causal mask's skipped half is not subtracted)"),
    ("split", "on N chips memory and time split evenly (no collectives)"),
    (None, "a chip's usable HBM is 0.9 of its capacity"),
    ("strategy", "with --strategy the program is sharded and its collectives costed; in training its backward pass "
                 "is written out (each matmul's two gradient matmuls, every other statement twice: still 3x the "
                 "model FLOPs); t_step overlaps every collective, t_step_exposed waits for those on activations"),
)


def conventions(options: Options, structured: Structured | None = None, sharded: bool = False) -> list[str]:
    """The conventions a model's numbers follow under its options: those of `CONVENTIONS`
    that apply to its mode (training's in training) and its chips (an even split, or a
    strategy; `sharded`: strategies, as a plan's), with the training state and the usable
    HBM as the options set them, and (given its program) the experts a mixture of experts'
    decode reads."""
    applies = {None, "strategy" if options.strategy or sharded else "split" if options.chips > 1 else None,
               "train" if options.mode == "train" else None}
    default = Options()
    out = []
    for when, text in CONVENTIONS:
        if when not in applies:
            continue
        if text.startswith("Adam keeps") and (options.grads, options.optimizer, options.master) != \
                (default.grads, default.optimizer, default.master):
            text = "training state: " + state_text(options)
        if "usable HBM" in text and options.headroom != default.headroom:
            text = text.replace("0.9 of its capacity", f"{usable_text(options)} of its capacity")
        out.append(text)
    return out + ([TOUCHED_EXPERTS] if structured is not None and touches_experts(structured) else [])


def _shown(value: sympy.Expr, unit: str) -> str:
    if unit == "s":
        return seconds(value) if value.is_number else f"{pretty(value)} s"
    if value.is_number and unit in ("bytes", "FLOPs", "tokens/s", ""):
        return beside(value, unit) if value.is_Integer or unit != "" else pretty(value)
    return f"{pretty(value)}" + (f" {unit}" if unit else "")


# what a row is, where its name alone could be taken for another count
NOTES = {"flops_train": "model FLOPs: 3x forward, nothing recomputed; MFU's",
         "flops_train_hardware": "hardware FLOPs: with what remat recomputes; HFU's, t_step's",
         "mfu": "model FLOPs / (t_step x chips x matrix peak): at the roofline's t_step, the most",
         "hfu": "hardware FLOPs / (t_step x chips x matrix peak)"}


def rows(model: Model, formulas: Model | None, total_tokens: int | float | None = None,
         price: float | None = None) -> list[tuple[str, str]]:
    """The report's rows: quantity, value (and formula in B, T, S where it has one)."""
    found = model.quantities()
    symbolic = formulas.quantities() if formulas is not None else {}
    notes = {**NOTES, **state_notes(model.options), **assumed(model.options)}
    for name, scope in _scopes(model).items():  # whose bytes and FLOPs a row counts, beside its other note
        notes[name] = f"{scope}; {notes[name]}" if name in notes else scope
    out = []
    reach, dim = contexts.reach(model.options.mode, model.sizes)
    limit = model.about.get("context_limit")
    if reach is not None and limit is not None and contexts.past(reach, limit):
        out.append(("context", contexts.warning(model.about.get("name", "the model"), reach, limit,
                                                f"the step's {dim}")))
    for name, value in found.items():
        text = _shown(value, MODEL_QUANTITY[name].unit)
        if name in notes:
            text += f" [{notes[name]}]"
        formula = symbolic.get(name)
        if isinstance(formula, sympy.Expr) and not formula.is_number and formula != value:
            # a whole number of chips: the count the formula gives, rounded up
            text += f"   = ceil({pretty(formula)})" if name == "min_chips" and not formula.has(sympy.ceiling) \
                else f"   = {pretty(formula)}"
        out.append((name, text))
    out += [(name, beside(value, "")) for name, value in mla.activated(model).items()]
    block = model.per_block()
    if block:
        out.append(("per_block", f"params {beside(block['params'], '')}, FLOPs {beside(block['flops'], 'FLOPs')}, "
                                 f"bytes {beside(block['bytes'], 'bytes')} (one pass through the repeated block)"))
    left = found.get("hbm_left_per_chip")
    if left is not None and left.is_number:
        chips = model.options.chips
        usable = usable_text(model.options)
        if left >= 0:
            fits = f"yes: {human(left, 'bytes')} of usable HBM ({usable} of capacity) left on each chip"
        elif "min_chips" in found:
            on = f"each of {chips} chips" if chips > 1 else "the chip"
            fits = f"NO: {human(-left, 'bytes')} too much on {on}; it needs at least {found['min_chips']} chips at " \
                f"{usable} of HBM"
        else:
            fits = f"NO: {human(-left, 'bytes')} too much on each chip of the mesh: shard the weights (fsdp, tp), " \
                "or give it more chips"
        out.append(("fits", fits))
    if total_tokens is not None and "tokens_per_s" in found:
        spent, step = _spent(model, total_tokens, price)
        out += budget_rows(spent, total_tokens, price, step)
    if model.machine is not None:
        split = model.time_split()
        total = sum(split.values())
        if all(t.is_number for t in split.values()) and total:
            out.append(("time_split", ", ".join(f"{part} {seconds(t)} ({float(t / total):.0%})"
                                                for part, t in split.items())
                        + " (each statement at its own roofline)"))
        guessed = _estimates(model)
        if guessed:
            out.append(("estimates", estimates_text(guessed, model.machine.chip.id if model.machine.chip else "")))
        largest = model.max_batch()
        if largest is not None:
            where = "each chip of the mesh" if model.structured.program.mesh is not None else \
                f"{model.options.chips} chip{'s' if model.options.chips > 1 else ''}"
            out.append(("max_batch", f"none: even B = 1 does not fit {where} at {usable_text(model.options)} of HBM"
                        if largest == 0 else f"{largest}: the largest B whose memory fits {where} at "
                                     f"{usable_text(model.options)} of HBM"))
    if model.accumulation is not None:
        out.append(("microbatches", model.accumulation.describe()))
    out += strategy_costs.rows(model, lambda v: beside(v, "") if v.is_Integer else pretty(v) if not v.is_number
                               else number(v, 4), lambda t: _shown(t, "s"))
    latency = latency_bound.of_model(model)
    if latency is not None:
        out += latency_bound.rows(latency, model.machine.name if model.machine else "", model.sizes.get("B"))
    if model.options.mode == "decode" and model.machine is not None:
        for with_kv in (True, False):
            label = "decode_batch" + ("" if with_kv else "_no_kv")
            out.append((label, _region_text(model.decode_batch(with_kv))
                        + ("" if with_kv else " (the KV cache's reads left out)")))
    return out


_KEPT = {"full": "each repeated block's input", "none": "every statement's output"}


_BYTES = ("weight_bytes", "grad_bytes", "optimizer_bytes", "activation_bytes", "kv_bytes", "memory_bytes")
_WHOLE = ("flops", "flops_train", "flops_train_hardware")


def _scopes(model: Model) -> dict[str, str]:
    """On several chips, whose count each memory and FLOPs row is: under a strategy a
    chip's shard of each tensor, evenly split the whole; the FLOPs always the whole step's."""
    sharded, chips = model.structured.program.mesh is not None, model.options.chips
    if not sharded and chips == 1:
        return {}
    mine = "per chip (each tensor's shard)" if sharded else f"all {chips} chips (hbm_per_chip: each one's)"
    whole = {name: "the whole step, all chips" for name in _WHOLE}
    if model.options.mode == "train":  # a training step's `flops` is its forward pass's
        whole["flops"] = "the forward pass, all chips"
    return {**{name: mine for name in _BYTES}, **whole}


def assumed(options: Options) -> dict[str, str]:
    """The assumptions that change a row's number, on its line: the remat policy the hardware
    FLOPs and the activations follow, the fraction of HBM a chip may fill."""
    out = {"hbm_left_per_chip": f"{usable_text(options)} of HBM, less hbm_per_chip"}
    if options.mode == "train":
        kept = _KEPT.get(options.remat, "the tensors named: " + options.remat.removeprefix("save="))
        out["flops_train_hardware"] = f"hardware FLOPs: with what remat {options.remat} recomputes; HFU's, t_step's"
        out["activation_bytes"] = f"remat {options.remat}: {kept}"
    return out


def state_notes(options: Options) -> dict[str, str]:
    """Where the training state is not the default, the gradient and optimizer rows' bytes
    per parameter (for the templates' bf16 parameters), so the rows say what they count."""
    if options.mode != "train" or (options.grads, options.optimizer, options.master) == (None, "adam", None):
        return {}
    s = state_bytes(options, 2)
    factored = " + its factored second moment (from the shapes)" if s.optimizer.factored else ""
    grads = options.grads or "the parameters' bf16"
    return {"grad_bytes": f"{grads}: {s.grads} bytes/param",
            "optimizer_bytes": f"master copy {s.master} + {options.optimizer} moments {_per_param(s.moments)} "
                               f"= {_per_param(s.optimizer_state)} bytes/param{factored}"}


def _per_param(value: sympy.Expr) -> str:
    return str(value) if value.is_Integer else number(value, 6)


def _spent(model: Model, total_tokens: int | float, price: float | None) -> tuple[dict[str, sympy.Expr], str]:
    """A model's token budget, and the step time it takes each step at: under a strategy
    (timed by its roofline, not an MFU) t_step_exposed, the activations' collectives and a
    pipeline's bubble on the critical path, as a plan ranks and budgets it; else t_step."""
    if model.options.strategy and model.options.mfu is None and model.machine is not None:
        return model.budget(total_tokens, price, strategy_costs.times(model)["t_step_exposed"]), "t_step_exposed"
    return model.budget(total_tokens, price), "t_step"


def _estimates(model: Model) -> dict:
    """The estimated chip figures the model's step runs at (path -> (value, source))."""
    a = model.analysis
    return model.machine.estimates(a.rates) if model.machine is not None and a.has_peak else {}


def _region_text(region: Region) -> str:
    root = region.root
    if region.kind == "above" and root is not None:
        when = f", when {pretty(region.condition)}" if region.condition is not None else ""
        return f"compute-bound once B > {pretty(root)}" + (f" (B >= {sympy.floor(root) + 1})" if root.is_number
                                                           else "") + when
    if region.kind == "all":
        return "compute-bound at every batch"
    if region.kind == "none":
        return "memory-bound at every batch"
    return f"{region.kind}{': ' + region.reason if region.reason else ''}"


def _article(n: int) -> str:
    """'an 8-chip mesh', 'an 11-chip', 'a 16-chip': as the number is said (eight, eleven, eighteen...)."""
    said = str(n)
    return "an" if said.startswith("8") or (len(said) in (2, 5) and said.startswith(("11", "18"))) else "a"


def title(model: Model) -> str:
    """The report's first line: the model's name, mode, chips and sizes, a size not given
    marked as the default it is (B = 1, the model's context)."""
    defaulted = model.about.get("defaulted", ())
    shown = ", ".join(f"{k} = {v}" + (" (the model's context)" if k in defaulted and k in ("S", "T") else
                                      " (default)" if k in defaulted else "") for k, v in model.sizes.items())
    mesh = model.structured.program.mesh
    chips = f"{_article(mesh.chips)} {mesh.chips}-chip mesh ({mesh.axes_text()}) of" if mesh is not None \
        else f"{model.options.chips} x"
    on = f" on {chips} {model.machine.name}" if model.machine is not None else ""
    return f"{model.about.get('name', 'a program')}, {model.options.mode}{on}; {shown or 'no sizes'}"


def table(model: Model, formulas: Model | None, title: str, total_tokens: int | float | None = None,
          price: float | None = None) -> str:
    lines = [f"{'model':<22} {title}"]
    for name, text in rows(model, formulas, total_tokens, price):
        lines.append(f"{name:<22} {text}")
    lines.append("")
    lines += wrapped("conventions: " + "; ".join(conventions(model.options, model.structured)
                                                + model.about.get("storage", []) + mla.stated(model)
                                                + windows.stated(model.structured)))
    return "\n".join(lines)


def latex(model: Model, formulas: Model | None) -> str:
    """The model's quantities for notebooks (`Model._repr_latex_`) and `symroof model --latex`:
    its title, then each quantity's name, its formula in B, T and S where the sizes hide one
    (as the text report's `= ...`), and its value at the sizes with its unit, as one array in
    display math."""
    found = model.quantities()
    symbolic = formulas.quantities() if formulas is not None else {}
    dims = model.structured.program.dims
    printer = TexPrinter({dim_symbol(n): tex_name(n) for n in dims}, words=any(len(n) > 1 for n in dims))
    at = ",\\ ".join(f"{tex_name(k)} = {printer.doprint(sympy.Integer(v))}" for k, v in model.sizes.items())
    head = r"\text{quantity} & \text{formula} & \text{value" + (r" at }" + at if at else "}")
    lines = []
    for name, value in found.items():
        formula = symbolic.get(name)
        shown = printer.doprint(formula) if isinstance(formula, sympy.Expr) and not formula.is_number \
            and formula != value else ""
        unit = MODEL_QUANTITY[name].unit
        lines.append(rf"\text{{{tex_words(name)}}} & {shown} & {printer.doprint(value)}"
                     + (rf"\ \text{{{tex_words(unit)}}}" if unit else ""))
    body = head + " \\\\ \\hline\n" + " \\\\\n".join(lines)
    return (f"$$\n\\begin{{array}}{{l}}\n\\text{{{tex_words(title(model))}}} \\\\\n\\begin{{array}}{{lll}}\n{body}\n"
            f"\\end{{array}}\n\\end{{array}}\n$$")


def to_dict(model: Model, formulas: Model | None, about: dict, total_tokens: int | float | None = None,
            price: float | None = None) -> dict:
    out = dict(about)
    symbolic = formulas.quantities() if formulas is not None else {}
    out["formulas"] = {name: json_value(value) for name, value in symbolic.items() if not value.is_number}
    for name, value in model.quantities().items():
        out[name] = json_value(value)
    out["per_block"] = {name: json_value(value) for name, value in model.per_block().items()}
    if "context_limit" in about:
        out["past_context"] = contexts.past(contexts.reach(model.options.mode, model.sizes)[0], about["context_limit"])
    left = out.get("hbm_left_per_chip")
    if isinstance(left, (int, float)):
        out["fits"] = left >= 0
    if total_tokens is not None and "tokens_per_s" in out:
        spent, step = _spent(model, total_tokens, price)
        out["days_to_train"] = json_value(spent["days"])
        out["budget"] = {"tokens": total_tokens, "step": step, **budget_json(spent, price)}
    if model.machine is not None:
        out["time_split"] = {part: json_value(t) for part, t in model.time_split().items()}
        out["estimates"] = {path: {"value": json_value(value), "source": source}
                            for path, (value, source) in _estimates(model).items()}
        out["max_batch"] = json_value(model.max_batch())
    latency = latency_bound.of_model(model)
    if latency is not None:
        out["latency_bound"] = {"collectives": [b.to_dict() for b in latency],
                                "step_latency_bound": latency_bound.step_bound(latency),
                                "memory": latency_bound.NO_MEMORY_LATENCY}
    if model.options.mode == "decode" and model.machine is not None:
        for with_kv in (True, False):
            region = model.decode_batch(with_kv)
            out["decode_batch" + ("" if with_kv else "_no_kv")] = {
                "kind": region.kind, "root": json_value(region.root) if region.root is not None else None}
    if model.accumulation is not None:
        out["accumulation"] = model.accumulation.to_dict(json_value)
    out.update(strategy_costs.as_json(model, json_value))
    if model.options.mode == "train":
        out["training_state"] = state_json(model.options)
    out.update({name: json_value(value) for name, value in mla.activated(model).items()})
    out["conventions"] = conventions(model.options, model.structured) + mla.stated(model) \
        + windows.stated(model.structured)
    return out
