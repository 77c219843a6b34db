"""The command line's options for the figures an analysis runs against, shared by
`symroof analyze` and its siblings and by `symroof model`."""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Iterable
from typing import Any, TypeAlias

from ..analysis import Analysis
from ..errors import SpecError, SymroofError
from ..hardware.machines import Machine
from ..lang.sizes import size_value
from ..resources import write_atomically
from ..show import beside, duration, pretty, wrapped

# What a subcommand's parser names with set_defaults(handler=...): the text to print, and the
# exit code where it is not 0.
Handler: TypeAlias = Callable[[argparse.Namespace], "str | tuple[str, int]"]
# what add_subparsers returns, each subcommand's module adding its parser to it
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def dumps(data: object) -> str:
    """A command's JSON, strict: a NaN or an infinity that slipped through is a bug, not output."""
    return json.dumps(data, indent=2, allow_nan=False)


def machine_options(parser: argparse.ArgumentParser, symbolic: bool = True) -> None:
    """The chip and its figures; `symbolic=False` leaves out --symbolic FIELD (plan's --symbolic
    is a flag of its own)."""
    parser.add_argument("--chip", help="chip name: tpu-v5e, v5e, 'TPU v5e', h100, ... (see symroof chips)")
    parser.add_argument("--variant", help="a named variant of the chip's figures (see symroof chip CHIP)")
    parser.add_argument("--peak-flops", metavar="X", help="peak FLOPs/s to use (overrides the chip's)")
    parser.add_argument("--hbm-bw", metavar="X", help="HBM bandwidth in bytes/s (overrides the chip's)")
    parser.add_argument("--vector-flops", metavar="X",
                        help="vector-unit FLOPs/s for elementwise ops, reductions, softmax and norms "
                             "(overrides the chip's; needed where the chip has no vector figure)")
    parser.add_argument("--ici-bw", metavar="X",
                        help="ICI bandwidth in bytes/s, one way per link (overrides the chip's)")
    parser.add_argument("--override", action="append", default=[], metavar="FIELD=VALUE",
                        help="replace any chip figure for this analysis, e.g. "
                             "peak_flops_per_s.int8=3.94e14 (repeatable)")
    parser.add_argument("--slice", metavar="AxBxC",
                        help="lay the mesh's ICI axes on this slice of a torus chip's pod (4x8x8 for 256 "
                             "v5p chips; see symroof chip CHIP for the vendor's shapes) rather than on the pod")
    parser.add_argument("--hardware", metavar="FILE", help="a hardware file in place of the shipped one")
    if not symbolic:
        return
    parser.add_argument("--symbolic", metavar="FIELD[,FIELD...]",
                        help="make chip figures symbols: peak (C), hbm_bw (W_hbm), ici_bw (W_ici), vector "
                             "(C_vec), hbm_capacity (M_hbm); --chip symbolic makes them all symbols")


def machine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    overrides = dict(pair(item, "--override") for item in args.override)
    symbolic = tuple(f.strip() for f in (getattr(args, "symbolic", None) or "").split(",") if f.strip())
    return dict(chip=args.chip, peak_flops=args.peak_flops, hbm_bw=args.hbm_bw, ici_bw=args.ici_bw,
                overrides=overrides or None, variant=args.variant, hardware=args.hardware,
                vector_flops=args.vector_flops, slice=getattr(args, "slice", None),
                **({"symbolic": symbolic} if symbolic else {}))


def pair(item: str, flag: str) -> tuple[str, str]:
    name, sep, value = item.strip().partition("=")
    if not sep or not name.strip() or not value.strip():
        raise SymroofError(f"{flag} {item!r}: expected NAME=VALUE")
    return name.strip(), value.strip()


def set_sizes(items: Iterable[str]) -> dict[str, int]:
    """`--set B=8,D=512` (repeatable) as sizes by dim name."""
    values = {}
    for item in items:
        for part in item.split(","):
            if part.strip():
                name, value = pair(part, "--set")
                values[name] = size_value(value, f"--set {part.strip()}")
    return values


def whole_numbers(text: str, flag: str, most: int) -> list[int]:
    """A list flag's whole numbers (--batches 1,8,64), sorted and each once: 1 to `most`
    of them, each at least 1; an empty item (1,,8) is refused, not dropped."""
    try:
        values = sorted({int(part) for part in text.split(",")})
    except ValueError:
        raise SpecError(f"{flag} takes whole numbers, e.g. 1,8,64; got {text!r}") from None
    if not values or values[0] < 1 or len(values) > most:
        raise SpecError(f"{flag} takes 1 to {most} whole numbers of at least 1, got {text!r}")
    return values


def remat_option(parser: argparse.ArgumentParser) -> None:
    """--remat: what a training step keeps of its activations, and so what it recomputes."""
    parser.add_argument("--remat", default="full",
                        help="activations kept: full (each block's input; the backward recomputes each block's "
                             "forward), none (every output), or save=x,o,h (the tensors so named, the rest of a "
                             "block recomputed; the templates name x, q, k, v, o, a, g, u, h, m)")


def mode_options(parser: argparse.ArgumentParser) -> None:
    """--train (the default), --prefill, --decode: a model's step."""
    mode = parser.add_mutually_exclusive_group()
    for m in ("train", "prefill", "decode"):
        mode.add_argument(f"--{m}", dest="mode", action="store_const", const=m, help=f"the {m} step")
    parser.set_defaults(mode="train")


def training_options(parser: argparse.ArgumentParser) -> None:
    """--grads, --optimizer, --master, --hbm-usable: a training step's state and the HBM it may
    fill (models/decls.py: `OPTIMIZERS`, `state_bytes`, which check them)."""
    from ..models.decls import GRADS, MASTERS, OPTIMIZERS  # the model commands', not every command's
    parser.add_argument("--grads", metavar="|".join(GRADS),
                        help="the gradients' dtype (default: each parameter's own, bf16 in the templates)")
    parser.add_argument("--optimizer", default="adam", metavar="|".join(OPTIMIZERS),
                        help="the optimizer's state beside the master copy: " + "; ".join(
                            f"{o.name}: {o.meaning}" for o in OPTIMIZERS.values()) + " (adam)")
    parser.add_argument("--master", metavar="|".join(MASTERS),
                        help="fp32: a 4-byte master copy of each parameter narrower than fp32, counted in "
                             "optimizer_bytes; none: no copy (default fp32, but none with sgd, whose 0 bytes of "
                             "state are kept)")
    parser.add_argument("--hbm-usable", metavar="FRACTION",
                        help="the fraction of each chip's HBM a step may fill, in (0, 1] (0.9; the book's "
                             "questions use 1.0)")


def _number(text: str, flag: str, what: str) -> float:
    """A decimal number from the command line (1e12, 0.4), finite; SpecError otherwise."""
    try:
        value = float(text)
    except ValueError:
        raise SpecError(f"{flag} takes {what}, not {text!r}") from None
    if not math.isfinite(value):
        raise SpecError(f"{flag} takes {what}, not {text!r}")
    return value


def training_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """The options `training_options` reads, as `symroof.model` and `symroof.plan` take them."""
    usable = 0.9 if args.hbm_usable is None else _number(args.hbm_usable, "--hbm-usable", "a fraction in (0, 1]")
    if not 0 < usable <= 1:
        raise SpecError(f"--hbm-usable takes a fraction in (0, 1], not {args.hbm_usable}")
    stated = [flag for flag, given in (("--grads", args.grads), ("--master", args.master),
                                       ("--optimizer", args.optimizer != "adam")) if given]
    if stated and args.mode != "train":
        raise SpecError(f"{stated[0]} sets a training step's state: it goes with --train, not --{args.mode}")
    return dict(optimizer=args.optimizer, grads=args.grads, master=args.master, hbm_usable=usable)


def budget_options(parser: argparse.ArgumentParser) -> None:
    """--tokens (--train-tokens), --price: a token budget's time, chip-hours and cost."""
    parser.add_argument("--tokens", "--train-tokens", dest="tokens", metavar="N",
                        help="a token budget (15e12): the days (and hours, under three days) and chip-hours to "
                             "train on it")
    parser.add_argument("--price", metavar="PER_CHIP_HOUR",
                        help="with --tokens: the cost at this price per chip-hour, in price units (no currency "
                             "is assumed; no prices are shipped)")


def budget_values(args: argparse.Namespace) -> tuple[int | None, float | None]:
    """--tokens as a whole number of tokens (or None) and --price (or None), checked; a
    price without a budget is refused."""
    price = None
    if args.price is not None:
        price = _number(args.price, "--price", "a positive number per chip-hour")
        from ..models.decls import price_exact  # as training_options: the model commands'
        price_exact(price)
        if not args.tokens:
            raise SpecError("--price is per chip-hour: give a token budget (--tokens 15e12) to cost")
    return (size_value(args.tokens, "--tokens") if args.tokens else None), price


def count_lines(a: Analysis, target: Machine | None, formulas: Analysis | None) -> list[str]:
    """An imported program's counts as the from-jax and from-torch reports print them: each
    at the sizes given, its formula beside it where sizes were given; with a chip, the
    times and the bound."""
    rows = [("flops", a.flops, "FLOPs"), ("transcendentals", a.transcendentals, ""), ("bytes", a.bytes, "bytes"),
            ("intensity", a.intensity, "FLOPs/byte")]
    lines = []
    for k, v, unit in rows:  # a count with its scaled form (33.69 MFLOPs), a ratio with its unit
        shown = beside(v, unit) if v.is_Integer else f"{pretty(v)} {unit}" if v.is_number and unit else pretty(v)
        formula = getattr(formulas, k) if formulas is not None else None
        lines.append(f"{k:<15} {shown}" + (f"   = {pretty(formula)}" if formula is not None and formula != v else ""))
    if target is not None:  # each time with its unit, the network's where its collectives take any
        lines += [f"{k:<15} {duration(getattr(a, k.lower()))}" for k in _times(a)]
        lines.append(f"{'bound':<15} {a.bound}")
    return lines


def _times(a: Analysis) -> tuple[str, ...]:
    return ("T_math", "T_comms", *(("T_network",) if a.t_network != 0 else ()), "T_lower")


def count_values(a: Analysis, target: Machine | None) -> dict:
    """The same counts for --json."""
    from ..render.json_report import json_value  # the importers' --json, not every command's
    keys = ("flops", "transcendentals", "bytes", "intensity") + (tuple(t.lower() for t in _times(a)) if target else ())
    return {k: json_value(getattr(a, k)) for k in keys}


def save_program(path: str | None, text: str) -> None:
    """-o FILE: an imported program's text saved, for `symroof model FILE --prefill`: whole,
    once everything else has worked (the importers call it last)."""
    if not path:
        return
    try:
        write_atomically(path, text)
    except OSError as error:
        raise SymroofError(f"cannot write {path}: {error.strerror or error}") from None


def imported_report(head: str, program: str, notes: list[str], warnings: list[str], a: Analysis,
                    target: Machine | None, formulas: Analysis | None, checked: list[str], conventions: str) -> str:
    """An imported program's report as from-jax and from-torch print it: its head line, the
    program, any notes on it, each warning, its counts (`count_lines`), the framework's own
    count beside them (`checked`, where asked for) and the conventions, the importer's
    own last."""
    lines = [head, "", *program_lines(program), *notes]
    for w in warnings:
        lines += wrapped(f"WARNING: {w}")
    lines += count_lines(a, target, formulas)
    if checked:
        lines += ["", *checked]
    lines += ["", *wrapped("conventions: 1 FLOP = one multiply or one add; bytes = each statement's inputs read "
                           f"once and output written once; {conventions}")]
    return "\n".join(lines)


def program_lines(text: str) -> list[str]:
    """An imported program as the from-jax and from-torch reports show it, indented."""
    return ["program (symroof notation; -o FILE.sr saves it, symroof model FILE.sr --prefill analyses it):",
            *("  " + line for line in text.rstrip("\n").split("\n")), ""]
