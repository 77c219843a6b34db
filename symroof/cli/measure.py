"""`symroof calibrate` and `symroof validate`: this machine measured, and the roofline checked
against a stopwatch.

    symroof calibrate --id my-cpu -o my.json [--quick] [--repeats 7] [--backend numpy|jax] [--json]
    symroof validate --hardware my.json --chip my-cpu [--quick] [--plot roof.png] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import SymroofError
from ..measure import calibrate, validate
from .options import Commands


def add_parser(commands: Commands) -> None:
    cal = commands.add_parser("calibrate", help="measure this machine and write it as a chip (hardware.json format)",
                              description="Time matmuls per dtype, a streaming kernel on arrays far larger than "
                                          "the cache, and elementwise arithmetic in cache; print each figure's "
                                          "best, median and spread, and the chip entry (the best rates), or "
                                          "write it into a hardware file with -o.")
    cal.add_argument("--id", default=None, help="the chip's id (local-cpu, or local-gpu through JAX on a GPU)")
    cal.add_argument("--name", help="the chip's display name (the CPU's or GPU's model, measured)")
    cal.add_argument("-o", "--output", metavar="FILE",
                     help="write a hardware file; where FILE is one, the chip of the same id is replaced or added")
    _common(cal)
    cal.add_argument("--json", action="store_true", help="print one JSON object")
    cal.set_defaults(handler=run)

    val = commands.add_parser("validate", help="time ops across both regimes against the roofline's T_lower",
                              description="Time matmuls from memory- to compute-bound, a dot product and "
                                          "elementwise ops, and report the fraction of the roof each reaches "
                                          "(T_lower / measured); flag any measured faster than the roof allows.")
    val.add_argument("--chip", required=True, help="the chip to check against (one calibrate wrote, or any)")
    val.add_argument("--hardware", metavar="FILE", help="a hardware file in place of the shipped one")
    _common(val)
    val.add_argument("--plot", metavar="FILE", help="draw the roofline with the measured points (png, svg, pdf)")
    val.add_argument("--json", action="store_true", help="print one JSON object")
    val.set_defaults(handler=run)


def _common(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--backend", default="numpy", help="numpy (the CPU; the default) or jax (JAX's first device)")
    cmd.add_argument("--repeats", metavar="N", help="runs of each kernel (7; 5 with --quick)")
    cmd.add_argument("--quick", action="store_true", help="smaller sizes and fewer runs (seconds, for tests)")


def run(args: argparse.Namespace) -> tuple[str, int]:
    """The text to print and the exit code: 1 where validate finds an op faster than the roof."""
    backend = calibrate.check_backend(args.backend)
    repeats = _repeats(args.repeats)
    if args.command == "validate":
        if args.plot:  # checked before the sweep's minute is spent
            _check_plot(args.plot)
        v = validate.run_sweep(args.chip, args.hardware, backend, args.quick, repeats)
        if args.plot:
            validate.plot(v, args.plot)
        code = 1 if any(r.faster for r in v.rows) else 0
        text = json.dumps(validate.to_json(v), indent=2) if args.json else validate.table(v)
        return text + (f"\nwrote {args.plot}" if args.plot and not args.json else ""), code
    if args.id is not None and not args.id.strip():
        raise SymroofError("--id: give the chip a non-empty id, e.g. --id my-cpu")
    if args.output:
        calibrate.check_output(args.output)
    cal = calibrate.measure_machine(backend, args.quick, repeats)
    chip = calibrate.entry(cal, args.id or f"local-{cal.kind}", args.name)
    written = calibrate.write(args.output, chip) if args.output else None
    if args.json:
        return json.dumps(calibrate.to_json(cal, chip, written), indent=2), 0
    return calibrate.report(cal, chip) + (f"\n\n{written}" if written else ""), 0


MOST_REPEATS = 1000  # runs of each kernel: a minute or so at most on any machine


def _repeats(text: str | None) -> int | None:
    if text is None:
        return None
    digits = text.strip()
    if not digits.isdigit() or len(digits) > 6 or not 2 <= int(digits) <= MOST_REPEATS:
        raise SymroofError(f"--repeats {text[:20]}: give a whole number of runs from 2 (to measure a spread) to "
                           f"{MOST_REPEATS}")
    return int(digits)


def _check_plot(path: str) -> None:
    if path.rsplit(".", 1)[-1].lower() not in ("png", "svg", "pdf"):
        raise SymroofError(f"--plot {path}: plots are saved as .png, .svg or .pdf")
    if not Path(path).resolve().parent.is_dir():
        raise SymroofError(f"--plot {path}: the directory {Path(path).parent} does not exist")
