"""The `symroof` command.

    symroof analyze SPEC [--chip CHIP] [--peak-flops X] [--hbm-bw X] [--dtype T]
                         [--set DIM=VALUE ...] [--limit DIM[,DIM...]] [--solve DIM] [--json]
    symroof roofline --flops X [--bytes Y] [--chip CHIP] ...
    symroof chips
    symroof chip CHIP [--chips N | --slice AxBxC]
    symroof model NAME|FILE [--train | --prefill | --decode] [--chip CHIP] [--set B=...,T=...]

Errors go to stderr as one line plus a caret under the spec, with exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
import typing
import warnings
from collections.abc import Mapping, Sequence
from typing import TextIO

import sympy

from ..analysis import analyze, roofline
from ..errors import SpecError, SymroofError, SymroofWarning, printable
from ..hardware.chips import Chip, cited_keys, get_chip, list_chips, source_keys
from ..hardware.machines import machine
from ..ir import dim_symbol
from ..render.text import table
from ..sharding.layout import fix_message
from ..sharding.lowering import ShardingError
from ..show import over, seconds
from . import pareto as cli_pareto
from .options import Handler, dumps, machine_kwargs, machine_options, set_sizes

# the subcommands of modules that import what they run (models, the planner, the importers,
# the measurements), each module by name: imported to run its own command, or all of them
# to list every command (a cold `symroof analyze` loads none of them)
_MODULES = {"check": "claims", "model": "model", "models": "model", "plan": "plan", "calibrate": "measure",
            "validate": "measure", "from-jax": "from_jax", "from-torch": "from_torch"}


class _Parser(argparse.ArgumentParser):
    """argparse's parser, whose usage errors are one line, as every other error is: what is
    wrong, and where the flags are listed (its usage block is what --help prints)."""

    def error(self, message: str) -> typing.NoReturn:
        self.exit(2, printable(f"{self.prog}: error: {message} ({self.prog} --help lists the flags)") + "\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every subcommand's, or where `command` is one the commands
    of `_MODULES` give, this module's and that one's only."""
    parser = _Parser(
        prog="symroof",
        description="Symbolic roofline analysis: FLOPs, bytes, intensities, times and critical "
                    "thresholds of einsum-style contractions on real chips.",
        epilog="Conventions: 1 FLOP = one multiply or one add (a multiply-add is 2); peaks are dense; "
               "GB = 1e9 bytes; bandwidths are bytes/s.")
    parser.add_argument("--version", action=_Version)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    analyze_cmd = commands.add_parser("analyze", help="analyse a spec (on a chip)",
                                      description="Analyse a spec, e.g. "
                                                  "symroof analyze 'bf16[B, D] @ bf16[D, F] -> bf16[B, F]' "
                                                  "--chip v5e --solve B")
    analyze_cmd.add_argument("spec", help="the spec; '-' reads it from stdin")
    machine_options(analyze_cmd)
    _spec_options(analyze_cmd)
    analyze_cmd.add_argument("--json", action="store_true", help="print one JSON object")
    analyze_cmd.set_defaults(handler=_analyze)

    latex_cmd = commands.add_parser("latex", help="the derivation as LaTeX, in the chapter's style",
                                    description="Print the analysis as aligned equations (align*), or "
                                                "as $$...$$ for docs sites with --format markdown.")
    latex_cmd.add_argument("spec", help="the spec; '-' reads it from stdin")
    machine_options(latex_cmd)
    _spec_options(latex_cmd)
    latex_cmd.add_argument("--format", choices=("latex", "markdown"), default="latex")
    latex_cmd.set_defaults(handler=_analyze)

    plot_cmd = commands.add_parser("plot", help="a roofline plot, a sweep of one dim, or a served model's "
                                                "latency-throughput curve (png, svg, pdf)",
                                   description="symroof plot roofline SPEC... --chip v5e --set B=256 -o r.png; "
                                               "symroof plot sweep SPEC... --chip v5e --sweep B=1:512 -o s.png; "
                                               "symroof plot serve MODEL --chip h100 --prompt 1000 --generate 500 "
                                               "--batches 1,4,16,64 --chips 1,2,4 --tpot-slo 0.03 -o p.png")
    plot_cmd.add_argument("kind", choices=("roofline", "sweep", "serve"))
    plot_cmd.add_argument("specs", nargs="+", metavar="SPEC", help="one or more specs (serve: one model's name)")
    machine_options(plot_cmd)
    plot_cmd.add_argument("--dtype", default="bf16", help="dtype of tensors written without one (bf16)")
    plot_cmd.add_argument("--set", action="append", default=[], metavar="DIM=VALUE",
                          help="sizes for named dims, for every spec")
    plot_cmd.add_argument("--mesh", metavar="AXIS=N[,...]", help="the device mesh for sharded dims")
    plot_cmd.add_argument("--sweep", metavar="DIM=LO:HI", help="for a sweep: the dim and its range")
    plot_cmd.add_argument("--time", action="store_true", help="for a sweep: plot T_lower, not FLOPs/s")
    plot_cmd.add_argument("--label", action="append", default=[], help="a label per spec, in order")
    plot_cmd.add_argument("-o", "--output", metavar="FILE",
                          help="FILE.png, .svg or .pdf (serve: optional, the table or --json without it)")
    cli_pareto.add_options(plot_cmd)
    plot_cmd.set_defaults(handler=_plot)

    roof_cmd = commands.add_parser("roofline", help="the roofline of bare FLOP and byte counts")
    roof_cmd.add_argument("--flops", required=True, help="FLOPs (e.g. 1e12)")
    roof_cmd.add_argument("--bytes", default="0", help="HBM bytes (e.g. 4e9)")
    roof_cmd.add_argument("--dtype", default="bf16", help="the dtype whose peak applies (bf16)")
    machine_options(roof_cmd)
    roof_cmd.add_argument("--json", action="store_true", help="print one JSON object")
    roof_cmd.set_defaults(handler=_roofline)

    chips_cmd = commands.add_parser("chips", help="list chips with their headline figures")
    chips_cmd.add_argument("--hardware", metavar="FILE", help="a hardware file in place of the shipped one")
    chips_cmd.add_argument("--json", action="store_true", help="print JSON")
    chips_cmd.set_defaults(handler=_chips)

    chip_cmd = commands.add_parser("chip", help="one chip: every figure with its source")
    chip_cmd.add_argument("name", metavar="CHIP")
    chip_cmd.add_argument("--variant", help="apply a named variant of the figures")
    chip_cmd.add_argument("--hardware", metavar="FILE", help="a hardware file in place of the shipped one")
    chip_cmd.add_argument("--chips", type=int, metavar="N",
                          help="the totals of N chips: peak FLOPs/s, HBM and bisection bandwidth (a TPU's "
                               "pod, or the vendor's slice of N; GPUs in NVLink domains joined by the scale-out "
                               "fabric)")
    chip_cmd.add_argument("--slice", metavar="AxBxC", help="the totals of this slice of a torus chip's pod")
    chip_cmd.add_argument("--json", action="store_true", help="print JSON")
    chip_cmd.set_defaults(handler=_chip)
    given = (_MODULES[command],) if command in _MODULES else dict.fromkeys(_MODULES.values()) \
        if command is None or command.startswith("-") or command not in _OWN else ()
    for name in given:
        importlib.import_module(f".{name}", __package__).add_parser(commands)
    return parser


_OWN = ("analyze", "latex", "plot", "roofline", "chips", "chip")  # this module's commands


class _Version(argparse.Action):
    """--version, looked up only when asked for: reading the package metadata costs a
    noticeable part of a cold start."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(option_strings, dest, nargs=0, help="print the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[object] | None, option_string: str | None = None) -> None:
        print(f"symroof {_version()}")
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("symroof")
    except PackageNotFoundError:
        return "(not installed)"


def _spec_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dtype", default="bf16", help="dtype of tensors written without one (bf16)")
    parser.add_argument("--set", action="append", default=[], metavar="DIM=VALUE",
                        help="give a named dim a size (repeat, or D=4096,F=4096); sizes may be written "
                             "1e6, 2**20, 128k (k, M, G are powers of 1024) or 4*1024")
    parser.add_argument("--grow", metavar="DIM[,DIM...]",
                        help="the dims a threshold's rule takes to infinity together, such as the "
                             "batch-like B,T (default: every dim without a size but the one solved for)")
    parser.add_argument("--limit", metavar="DIM[,DIM...]",
                        help="the intensity's limit as these dims grow together")
    parser.add_argument("--solve", metavar="DIM", help="the threshold on DIM for compute-bound")
    parser.add_argument("--mesh", metavar="AXIS=N[,AXIS=N@dcn...]",
                        help="the device mesh for sharded dims, e.g. X=16,Y=16 or X=8,Z=4@dcn; an axis "
                             "without a size (X,Y=4) is a symbol, X@line one without wraparound")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Run the command line; returns the exit code: 0, 1 when a claim fails (`check`), 2 for
    bad input, 3 for an internal error (a bug in symroof), 130 when interrupted (Ctrl-C:
    one line, no traceback)."""
    err = err or sys.stderr
    try:
        return _main(argv, out or sys.stdout, err)
    except KeyboardInterrupt:
        print("symroof: interrupted", file=err)
        return 130


def _main(argv: Sequence[str] | None, out: TextIO, err: TextIO) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(given[0] if given else None)
    args = parser.parse_args(given)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SymroofWarning)
            text, code = _run(args)
        for warning in caught:
            if issubclass(warning.category, SymroofWarning):
                print(printable(f"symroof: warning: {warning.message}"), file=err)
        out.write(text + "\n")
        return code
    except SymroofError as error:  # its text may quote a file's: control characters shown as codes
        print(printable(f"symroof: error: {error}"), file=err)
        return 2
    except Exception as error:  # a bug: say so plainly, keep the traceback for those who ask
        if os.environ.get("SYMROOF_DEBUG"):
            raise
        print(printable(f"symroof: internal error: {type(error).__name__}: {error} "
                        "(set SYMROOF_DEBUG=1 for the traceback, and please report it)"), file=err)
        return 3


def _run(args: argparse.Namespace) -> tuple[str, int]:
    """The text to print and the exit code. Each subcommand's parser names its handler
    (`set_defaults(handler=...)`), so a new subcommand is added where its options are;
    argparse has already refused a missing or unknown one (exit 2, with the usage)."""
    handler: Handler = args.handler
    outcome = handler(args)
    return outcome if isinstance(outcome, tuple) else (outcome, 0)


def _roofline(args: argparse.Namespace) -> str:
    figures = machine_kwargs(args)
    if figures.pop("ici_bw") is not None:
        raise SymroofError("--ici-bw costs collectives on a mesh; bare counts have none")
    if figures.pop("slice") is not None:
        raise SymroofError("--slice lays a mesh on a torus; bare counts have none")
    if figures.pop("vector_flops") is not None:
        raise SymroofError("--vector-flops costs elementwise work; bare counts run at the matrix peak "
                           "of --dtype (analyze a spec to split the work between the units)")
    result = roofline(args.flops, args.bytes, dtype=args.dtype, **figures)
    return dumps(result.to_dict()) if args.json else table(result)


def _plot(args: argparse.Namespace) -> str:
    # Imported here, not at the top: matplotlib takes longer to import than an analysis
    # takes, and only `symroof plot` needs it.
    if args.kind == "serve":
        return cli_pareto.run(args)
    cli_pareto.refuse_serve_flags(args)
    if not args.output:
        raise SymroofError(f"symroof plot {args.kind} writes a file: give -o FILE.png, .svg or .pdf")
    from ..render import plot
    if args.label and len(args.label) != len(args.specs):
        raise SymroofError(f"{len(args.label)} labels for {len(args.specs)} specs: give one per spec")
    values = set_sizes(args.set)
    analyses = []
    for spec in args.specs:
        a = analyze(spec, dtype=args.dtype, mesh=args.mesh, **machine_kwargs(args))
        analyses.append(a.at(**{k: v for k, v in values.items() if k in a.dims}))
    labels = args.label or None
    if args.kind == "roofline":
        if args.sweep or args.time:
            raise SymroofError(f"{'--sweep' if args.sweep else '--time'} is for 'symroof plot sweep'; "
                               "a roofline places each spec at the sizes --set gives")
        ax = plot.plot_roofline(analyses, labels=labels)
    else:
        if not args.sweep:
            raise SymroofError("a sweep needs --sweep DIM=LO:HI, e.g. --sweep B=1:512")
        dim, _, span = args.sweep.partition("=")
        match = re.fullmatch(r"\s*([0-9]+)\s*:\s*([0-9]+)\s*", span)
        if not dim.strip() or not match or not 0 < int(match[1]) < int(match[2]) <= 10**9:
            raise SymroofError(f"--sweep {args.sweep!r}: expected DIM=LO:HI with 0 < LO < HI, e.g. B=1:512")
        lo, hi = int(match[1]), int(match[2])
        import numpy  # only a sweep needs it (see sized.evaluate)

        sizes = numpy.unique(numpy.geomspace(lo, hi, 2000).round()) if hi - lo > 5000 else numpy.arange(lo, hi + 1)
        ax = plot.plot_sweep(analyses, dim.strip(), sizes, labels=labels,
                             quantity="time" if args.time else "flops")
    plot.save(ax, args.output)
    return f"wrote {args.output}"


def _analyze(args: argparse.Namespace) -> str:
    spec = _stdin() if args.spec == "-" else args.spec
    values = set_sizes(args.set)
    limit = [d.strip() for d in args.limit.split(",") if d.strip()] if args.limit else None
    try:
        result = analyze(spec, dtype=args.dtype, values=values, mesh=args.mesh, grow=args.grow,
                         **machine_kwargs(args))
    except ShardingError as error:
        raise _with_fix_times(error, args, values) from None
    except SpecError as error:
        if error.text is not None and re.search(r"^\s*(let|repeat|part|param|embedding|cache)\b", spec, re.M):
            raise SpecError(error.message + "; a program with let, repeat, part or declarations is a "
                            "model: run it with 'symroof model FILE'", error.text, error.start, error.end) from None
        raise
    if args.command == "latex":
        from ..render import latex  # each output's module imported where it is asked for
        return latex.derivation(result, solve=args.solve, limit=limit, markdown=args.format == "markdown")
    if args.json:
        return dumps(result.to_dict(limit=limit, solve=args.solve))
    return table(result, limit=limit, solve=args.solve)



def _stdin() -> str:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read()
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SpecError(f"the spec on stdin is not UTF-8 text (byte {error.start + 1} is "
                        f"{data[error.start]:#04x})") from None


def _with_fix_times(error: ShardingError, args: argparse.Namespace, values: Mapping[str, int]) -> SymroofError:
    """A layout that cannot run, with what each fix would take on the chip, if one is named
    (or the links given): the message stands on its own where they cannot be costed."""
    if not error.fixes or error.mesh is None or not (args.chip or args.ici_bw):
        return error
    try:
        target = machine(**machine_kwargs(args))
        if target is None:
            return error
        sizes = {dim_symbol(k): v for k, v in values.items()}
        times = []
        for _what, fix, V in error.fixes:
            if V is None:  # not costed: the layout's check gives every fix its bytes
                return error
            V = V.xreplace(sizes)
            from ..roofline.collectives import time as collective_time  # only where a layout cannot run
            t = collective_time("AllGather", [error.mesh.axis(a) for a in fix.axes], V, target.chip,
                                target.ici_bw, error.mesh.axes)
            shown = seconds(t.bandwidth) if V.is_number else over(V, V / t.bandwidth) + " s"
            times.append(f"{shown} on {target.chip.name if target.chip is not None else 'the given links'}")
    except SymroofError:
        return error
    return ShardingError(fix_message(getattr(error, "problem", error.message), error.fixes, times), error.fixes,
                         error.text, error.start, error.end, error.mesh)


def _chips(args: argparse.Namespace) -> str:
    chips = list_chips(args.hardware)
    rows = [{"id": chip.id, "name": chip.name, **chip.headline()} for chip in chips]
    if args.json:
        return dumps([{k: _plain(v) for k, v in row.items()} for row in rows])
    from ..render.chip_card import chips_table  # the chip commands' own
    return chips_table(chips)


def _chip(args: argparse.Namespace) -> str:
    chip = get_chip(args.name, args.hardware, variant=args.variant)
    if args.chips is not None or args.slice is not None:
        return _totals(chip, args)
    rows = chip.rows()
    references = source_keys(args.hardware)
    if args.json:
        cited = cited_keys(" ".join([*(source for _, _, source in rows), *chip.notes,
                                     *(chip.sources.get(f"variants.{name}", "") for name in chip.variants)]),
                           references)
        return dumps({"id": chip.id, "name": chip.name,
                       "figures": {path: _plain(value) for path, value, _ in rows},
                       "sources": {path: source for path, _, source in rows},
                       "variants": {name: {k: _plain(v) for k, v in fields.items()}
                                    for name, fields in chip.variants.items()},
                       "notes": list(chip.notes),
                       "references": {key: references[key] for key in cited}})
    from ..render.chip_card import chip_card
    return chip_card(chip, references, args.variant)


def _totals(chip: Chip, args: argparse.Namespace) -> str:
    """`symroof chip CHIP --chips N` (or `--slice AxBxC`): what that many chips add up to."""
    from ..hardware.pods import totals
    found = totals(chip, args.chips, args.slice)
    if not args.json:
        return str(found)
    return dumps({"id": chip.id, "chips": found.chips, "shape": list(found.shape) if found.shape else None,
                   "peak_flops_per_s": {rate: _plain(v) for rate, v in found.peak_flops.items()},
                   "hbm_capacity_bytes": _plain(found.hbm_capacity),
                   "hbm_bandwidth_bytes_per_s": _plain(found.hbm_bandwidth),
                   "bisection": [{"network": c.network, "links": c.links, "one_way_bytes_per_s": _plain(c.one_way),
                                  "bidi_bytes_per_s": _plain(c.bidi), "upper_bound": c.upper_bound, "how": c.how}
                                 for c in found.cuts],
                   "unknown": list(found.unknown)})


def _plain(value: sympy.Rational | str | int | float | tuple[int, ...] | None
           ) -> int | float | str | list[int] | None:
    if value is None or isinstance(value, (str, int, float)):
        return value
    if isinstance(value, tuple):  # a shape: axis lengths
        return list(value)
    return int(value) if value.is_Integer else float(value)


if __name__ == "__main__":
    sys.exit(main())
