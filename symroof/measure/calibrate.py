"""What `symroof calibrate` measures on this machine, as a chip entry of hardware.json's
format, and the hardware file it is written into.

The figure written for each path is the best rate of its kernels' repetitions: a roof is
the most the machine reaches, and a slower repetition was slowed by something else (the
OS, another process). The report gives each kernel's median, worst and spread beside it.
Every measured figure's source starts with "measured:" and says how it was measured;
what is not measured is null (or left out), never guessed.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from ..dtypes import RATES
from ..errors import HardwareError, SymroofError
from ..hardware.file import read_file
from ..resources import did_you_mean
from ..show import capacity, human
from . import kernels as measure
from . import kernels_jax as measure_jax
from .kernels import Rate

BACKENDS = ("numpy", "jax")
# Figures are written to this many significant digits: the repetitions differ in the second or third.
DIGITS = 4
BYTES_COUNTED = ("bytes counted as the roofline counts them: each input read once, the output written once; "
                 "traffic the hardware adds (write-allocate: a store first reads its cache line) is not counted")
CONVENTIONS = {
    "measured": "figures measured by 'symroof calibrate' on this machine: each the best rate over repeated runs "
                "of its kernel (a roof is the most the machine reaches); each source gives the method, the "
                "repetitions, the median, worst and spread ((best - worst) / median), the date and the versions",
    "flops": "a multiply-add counts as 2 FLOPs: an N x N x N matmul does 2*N^3",
    "bytes": BYTES_COUNTED,
    "null": "not measured; never a guess",
}


@dataclass(frozen=True, slots=True)
class Calibration:
    """The rates measured, with what is known of the machine they were measured on."""

    backend: str
    kind: str                      # "cpu" or "gpu": the chip kind of the entry
    device: str                    # the CPU's model, or the GPU's name
    vendor: str
    versions: str                  # numpy's and its BLAS's, or JAX's
    threads: int
    cache: int | None              # last-level cache, bytes
    memory: int | None             # bytes
    memory_source: str
    date: str
    repeats: int
    rates: tuple[Rate, ...]
    load: str = ""                 # the load on the CPUs as the run started

    def figures(self) -> dict[str, Rate]:
        """The rate each figure takes: its fastest kernel's, by best repetition."""
        chosen: dict[str, Rate] = {}
        for rate in self.rates:
            if rate.path not in chosen or rate.best > chosen[rate.path].best:
                chosen[rate.path] = rate
        return chosen


def check_backend(backend: str) -> str:
    if backend not in BACKENDS:
        raise SymroofError(f"unknown backend {backend!r}{did_you_mean(backend, BACKENDS)} "
                           f"(backends: {', '.join(BACKENDS)})")
    return backend


def measure_machine(backend: str = "numpy", quick: bool = False, repeats: int | None = None,
                    clock: Callable[[], float] = time.perf_counter) -> Calibration:
    """Time every kernel of the backend on this machine."""
    check_backend(backend)
    repeats = repeats or measure.REPEATS[quick]
    load = measure.busy()
    if backend == "jax":
        kernels, kind = measure_jax.jax_kernels(quick), measure_jax.kind()
        versions = measure_jax.version()
    else:
        kernels, kind, versions = measure.numpy_kernels(quick), "cpu", measure.numpy_version()
    rates = tuple(Rate(k.path, k.what, k.work, measure.time_it(k.run, repeats, measure.MIN_SECONDS[quick], clock))
                  for k in kernels)
    memory, memory_source = measure.memory_bytes(), "read from the OS: os.sysconf SC_PHYS_PAGES x SC_PAGE_SIZE " \
                                                    "(the machine's RAM, where a CPU keeps its arrays)"
    device, vendor = measure.cpu_model(), measure.cpu_vendor()
    if kind != "cpu":
        memory, memory_source = measure_jax.device_memory(), "read from JAX: device.memory_stats()['bytes_limit']"
        device = measure_jax.device_name()
        vendor = device.split()[0].lower() if device.split() else "unknown"
    return Calibration(backend, kind, device, vendor, versions, measure.threads(), measure.last_level_cache(),
                       memory, memory_source, datetime.date.today().isoformat(), repeats, rates, load)


def entry(cal: Calibration, chip_id: str, name: str | None = None) -> dict:
    """The chip entry, as hardware.json holds chips."""
    if not chip_id.strip():
        raise SymroofError("--id: give the chip a non-empty id, e.g. --id my-cpu")
    if cal.memory is None:
        raise SymroofError("cannot read this machine's memory size, and a chip entry needs hbm_capacity_bytes")
    figures = cal.figures()
    if "hbm_bandwidth_bytes_per_s" not in figures:
        raise SymroofError("no bandwidth was measured, and a chip entry needs hbm_bandwidth_bytes_per_s")
    peaks = {rate: _rounded(figures[f"peak_flops_per_s.{rate}"].best) if f"peak_flops_per_s.{rate}" in figures
             else None for rate in RATES}
    vector = {rate: _rounded(figures[f"vector_flops_per_s.{rate}"].best) for rate in RATES
              if f"vector_flops_per_s.{rate}" in figures}
    sources = {path: source(cal, path) for path in figures}
    sources["hbm_capacity_bytes"] = cal.memory_source
    return {"id": chip_id.strip(), "name": name or f"{_where(cal)}, measured", "vendor": cal.vendor,
            "kind": cal.kind, "peak_flops_per_s": peaks, **({"vector_flops_per_s": vector} if vector else {}),
            "hbm_capacity_bytes": cal.memory,
            "hbm_bandwidth_bytes_per_s": _rounded(figures["hbm_bandwidth_bytes_per_s"].best),
            "sources": sources,
            "notes": [f"measured by 'symroof calibrate --backend {cal.backend}' on {cal.date}: {cal.device}, "
                      f"{cal.versions}; rates not measured are null"]}


def source(cal: Calibration, path: str) -> str:
    """'measured: ...' for one figure: its kernel, how many runs, how far apart, when, with what."""
    kernels = [r for r in cal.rates if r.path == path]
    best = cal.figures()[path]
    unit = "bytes/s" if path.startswith("hbm_") else "FLOPs/s"
    text = (f"measured: {best.what}; best of {cal.repeats} runs{_calls(best)}: {human(best.best, unit)} "
            f"(median {human(best.median, unit)}, worst {human(best.worst, unit)}, spread {best.spread:.1%})")
    others = [r for r in kernels if r is not best]
    if others:
        text += f"; other kernel{'s' if len(others) > 1 else ''}: " + ", ".join(
            f"{r.what}: {human(r.best, unit)}" for r in others)
    if unit == "bytes/s":
        text += f"; {BYTES_COUNTED}"
    return f"{text}; {cal.date}; {cal.versions}; {_where(cal)}"


def _where(cal: Calibration) -> str:
    return f"{cal.device} ({cal.threads} CPUs)" if cal.kind == "cpu" else f"{cal.device} (through JAX)"


def _calls(rate: Rate) -> str:
    return f" of {rate.timing.calls} calls each" if rate.timing.calls > 1 else ""


def _rounded(value: float) -> float | int:
    rounded = float(f"{value:.{DIGITS}g}")
    return int(rounded) if rounded.is_integer() and abs(rounded) < 2**53 else rounded


# The file ---------------------------------------------------------------------------------

def check_output(path: str) -> dict | None:
    """The hardware file at `path` as JSON, None where there is none yet; an error where the
    path cannot be written or holds something else. Checked before measuring: a calibration
    takes a minute, and a typo should not cost it."""
    file = Path(path)
    if file.is_dir():
        raise SymroofError(f"-o {path}: is a directory; give a file name, e.g. -o {file / 'my-machine.json'}")
    if not file.parent.is_dir():
        raise SymroofError(f"-o {path}: the directory {file.parent} does not exist")
    if not os.access(file.parent, os.W_OK) or (file.exists() and not os.access(file, os.W_OK)):
        raise SymroofError(f"-o {path}: cannot write there (permission denied)")
    if not file.exists():
        return None
    try:
        read_file(str(file))
    except HardwareError as error:
        raise SymroofError(f"-o {path}: exists and is not a hardware file this symroof reads ({error}); give a "
                           "new file, or a hardware file to add the chip to") from None
    try:
        return json.loads(file.read_text(encoding="utf-8"), parse_float=_exact_float)
    except ValueError as error:
        raise SymroofError(f"-o {path}: {error}: writing the file back would change it; give another file") from None


def _exact_float(text: str) -> float:
    # Chips already in the file are written back as floats: refuse a number a float would change.
    value = float(text)
    if Fraction(repr(value)) != Fraction(text):
        raise ValueError(f"the number {text} has more digits than a float keeps")
    return value


def write(path: str, chip: dict) -> str:
    """Write `chip` into the hardware file at `path`: replacing the chip of the same id, else
    appended, the others kept; a new file where there is none. Checked by symroof's reader
    before it replaces anything. Returns what was done, in words."""
    data = check_output(path)
    if data is None:
        data = {"schema_version": 1, "conventions": CONVENTIONS, "source_keys": {}, "chips": []}
    chips = data["chips"]
    ids = [c.get("id") for c in chips]
    done = "replaced" if chip["id"] in ids else "added"
    if chip["id"] in ids:
        chips[ids.index(chip["id"])] = chip
    else:
        chips.append(chip)
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    file = Path(path)
    draft = file.with_name(f".{file.name}.{os.getpid()}.tmp")
    try:
        draft.write_text(text, encoding="utf-8")
        read_file(str(draft))
        os.replace(draft, file)
    except OSError as error:
        raise SymroofError(f"-o {path}: cannot write: {error.strerror or error}") from None
    except HardwareError as error:
        raise SymroofError(f"-o {path}: the chip would not load, so nothing was written: {error}") from None
    finally:
        draft.unlink(missing_ok=True)
    return f"{done} chip {chip['id']!r} in {path} ({len(chips)} chip{'s' if len(chips) > 1 else ''})"


# Reports ----------------------------------------------------------------------------------

def report(cal: Calibration, chip: dict) -> str:
    """A table of each kernel's rates (the figure written marked *), then the chip entry."""
    figures = cal.figures()
    cache = capacity(cal.cache) if cal.cache else "unknown"
    memory = capacity(cal.memory) if cal.memory else "unknown"
    lines = [f"calibrate: {cal.backend} on {_where(cal)}, "
             + (f"last-level cache {cache}, " if cal.kind == "cpu" else "") + f"memory {memory}; "
             f"{cal.versions}; {cal.date}; {cal.load}",
             f"best, median and worst of {cal.repeats} runs each; spread = (best - worst) / median; "
             "* the figure written (the best)", ""]
    wide = max(len(r.what) for r in cal.rates)
    lines.append(f"  {'figure':<28} {'kernel':<{wide}}  {'best':>14} {'median':>14} {'worst':>14} {'spread':>7}")
    for r in cal.rates:
        unit = "bytes/s" if r.path.startswith("hbm_") else "FLOPs/s"
        mark = "*" if figures[r.path] is r else " "
        lines.append(f"{mark} {r.path:<28} {r.what:<{wide}}  {human(r.best, unit):>14} {human(r.median, unit):>14} "
                     f"{human(r.worst, unit):>14} {r.spread:>7.1%}")
    lines += ["", "a multiply-add is 2 FLOPs; " + BYTES_COUNTED, "", json.dumps(chip, indent=2)]
    return "\n".join(lines)


def to_json(cal: Calibration, chip: dict, written: str | None) -> dict:
    figures = cal.figures()
    return {"backend": cal.backend, "device": cal.device, "kind": cal.kind, "versions": cal.versions,
            "threads": cal.threads, "cache_bytes": cal.cache, "memory_bytes": cal.memory, "date": cal.date,
            "load": cal.load, "repeats": cal.repeats,
            "kernels": [{"figure": r.path, "kernel": r.what, "work_per_call": r.work, "calls_per_run": r.timing.calls,
                         "seconds": list(r.timing.seconds), "best": r.best, "median": r.median, "worst": r.worst,
                         "spread": r.spread, "written": figures[r.path] is r} for r in cal.rates],
            "conventions": CONVENTIONS, "chip": chip, "written": written}
