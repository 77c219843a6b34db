"""The stopwatch, and the numpy kernels `symroof calibrate` and `symroof validate` time on
this machine (their JAX twins are in `kernels_jax.py`), with what the OS says of the
machine: its CPU, RAM and caches.

Work is counted as the roofline counts it. A multiply-add is 2 FLOPs: an N x N x N matmul
does 2·N³. A streaming kernel reads each input once and writes its output once: np.add
on arrays of n fp32 moves 3·4·n bytes. Traffic the hardware adds on its own is not
counted: a store to a line that is not in cache reads the line first (write-allocate), so
np.add really moves 4·4·n bytes, and a bandwidth taken from it alone would be 3/4 of what
the memory streams. That is why calibrate also times a copy (memcpy may stream its stores
past the cache) and a dot product (loads alone), and keeps the fastest.

Examples:
    >>> t = Timing((0.5, 0.4, 0.6))
    >>> t.best, t.median, t.worst, round(t.spread, 3)
    (0.4, 0.5, 0.6, 0.4)
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy

# Sizes, all in one place. A square matmul's fp32 operand is at least twice the last-level
# cache (so validate's matrix-vector products stream from memory), between these sides:
MATRIX_SIDES = (2048, 4096)
# A streaming kernel's arrays, each this many times the last-level cache (full, quick), and at
# least this many bytes; where the cache size is unknown, the larger sizes.
STREAM_CACHES = (8, 4)
STREAM_BYTES = (256 * 2**20, 64 * 2**20)
# validate's ops cycle through copies of their arrays until the copies span this many times the
# last-level cache (a cache keeps part of a stream only twice its size from one call to the next),
# or this many bytes, where the cache is so large that they would take too much memory.
ROTATE_CACHES = 8
ROTATE_BYTES = 2**31
# The vector kernel's arrays share half of a core's L2 (else of this many bytes), and each call
# runs this many adds per thread: a call lasts long enough to dwarf the thread pool's overhead.
VECTOR_L2_DEFAULT = 256 * 2**10
VECTOR_LOOPS = 256
# A repetition of a short kernel runs it enough times to last this long (full, quick): one call
# of a few microseconds is below what the clock and the call's overhead resolve.
MIN_SECONDS = (0.05, 0.02)
REPEATS = (7, 5)
# A load average this high as a run starts: something else has been using the CPUs.
BUSY_LOAD = 0.5

_RATE = {"float64": "fp64", "float32": "fp32"}


@dataclass(frozen=True, slots=True)
class Timing:
    """Seconds per call, one number per repetition (the mean of the `calls` it ran)."""

    seconds: tuple[float, ...]
    calls: int = 1

    @property
    def best(self) -> float:
        return min(self.seconds)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def worst(self) -> float:
        return max(self.seconds)

    @property
    def spread(self) -> float:
        """(worst - best) / median: how far apart the repetitions are."""
        return (self.worst - self.best) / self.median if self.median > 0 else 0.0


def time_it(run: Callable[[], object], repeats: int, min_seconds: float = 0.0,
            clock: Callable[[], float] = time.perf_counter, warmups: int = 1) -> Timing:
    """Time `run()`: `warmups` calls first (faulting the pages in, warming the caches and, in
    JAX, compiling), and one more timed to see how many calls last `min_seconds`; then
    `repeats` repetitions of that many calls."""
    for _ in range(warmups):
        run()
    start = clock()
    run()
    once = clock() - start
    calls = max(1, math.ceil(min_seconds / once)) if once > 0 else 1
    seconds = []
    for _ in range(repeats):
        start = clock()
        for _ in range(calls):
            run()
        seconds.append((clock() - start) / calls)
    return Timing(tuple(seconds), calls)


@dataclass(frozen=True, slots=True)
class Kernel:
    """Something to time for a chip figure: `work` FLOPs (or bytes) per call of `run`."""

    path: str                       # the figure it measures: "peak_flops_per_s.fp32"
    what: str                       # the kernel in words
    work: float
    run: Callable[[], object]


@dataclass(frozen=True, slots=True)
class Rate:
    """A kernel's work per second, timed: best, median and worst over the repetitions."""

    path: str
    what: str
    work: float
    timing: Timing

    @property
    def best(self) -> float:
        return self.work / self.timing.best

    @property
    def median(self) -> float:
        return self.work / self.timing.median

    @property
    def worst(self) -> float:
        return self.work / self.timing.worst

    @property
    def spread(self) -> float:
        """(best - worst) / median, of the rates."""
        return (self.best - self.worst) / self.median


# This machine ---------------------------------------------------------------------------

def threads() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def busy() -> str:
    """The load average as a run starts, with a warning where it is high. (The threads
    runnable now would say more, but numpy's BLAS threads spin for a while after any call.)"""
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        return "load unknown"
    text = f"load {load:.2f} over the last minute on {threads()} CPUs"
    if load >= BUSY_LOAD:
        text += (": other processes (or a run just before) were using the CPUs; if they still are, rates are "
                 "low and spreads wide")
    return text


@functools.cache
def caches() -> Mapping[int, int]:
    """Bytes of each level of data cache cpu0 sees ({1: 32768, 2: 524288, 3: 33554432}), from
    /sys (Linux), else from os.sysconf where the platform names them; {} where neither says."""
    found: dict[int, int] = {}
    for index in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            if (index / "type").read_text().strip() == "Instruction":
                continue
            level = int((index / "level").read_text())
            found[level] = max(found.get(level, 0), _bytes((index / "size").read_text()))
        except (OSError, ValueError):
            continue
    for level in (1, 2, 3):
        name = f"SC_LEVEL{level}_{'D' if level == 1 else ''}CACHE_SIZE"
        if level not in found and name in os.sysconf_names:
            size = os.sysconf(name)
            if size > 0:
                found[level] = size
    return found


def _bytes(text: str) -> int:
    """"32768K" (as /sys writes cache sizes) as 33554432."""
    text = text.strip().upper()
    scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:], 1)
    return int(text.rstrip("KMG")) * scale


def last_level_cache() -> int | None:
    found = caches()
    return found[max(found)] if found else None


def memory_bytes() -> int | None:
    """The machine's RAM, as the OS reports it."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo), else what the platform module knows."""
    for key in ("model name", "Model", "Hardware"):
        value = _cpuinfo(key)
        if value:
            return value
    return platform.processor() or platform.machine() or "unknown CPU"


def cpu_vendor() -> str:
    vendor = _cpuinfo("vendor_id")
    return {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(vendor or "", (vendor or "unknown").lower())


def _cpuinfo(key: str) -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return None
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if sep and name.strip() == key and value.strip():
            return value.strip()
    return None


def numpy_version() -> str:
    """"numpy 2.2.1 (scipy-openblas)": the BLAS does the matmuls."""
    try:
        blas = numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]
    except (TypeError, KeyError):  # older numpy prints its configuration, returns none
        blas = "BLAS unknown"
    return f"numpy {numpy.__version__} ({blas})"


# Sizes ----------------------------------------------------------------------------------

def matrix_side(cache: int | None) -> int:
    """The side of the square matmuls: the smallest of MATRIX_SIDES whose fp32 matrix is at
    least twice the last-level cache, else the largest."""
    for side in MATRIX_SIDES:
        if cache is not None and 4 * side * side >= 2 * cache:
            return side
    return MATRIX_SIDES[-1]


def stream_elements(cache: int | None, quick: bool, itemsize: int = 4) -> int:
    """Elements of each array of a streaming kernel: much larger than the last-level cache."""
    times, floor = STREAM_CACHES[quick], STREAM_BYTES[quick]
    size = STREAM_BYTES[0] if cache is None and not quick else max(floor, times * (cache or 0))
    return size // itemsize


# Kernels --------------------------------------------------------------------------------

def _filled(shape: int | tuple[int, ...], dtype: str) -> numpy.ndarray:
    # Ones, never np.zeros: calloc'd zeros are pages not yet touched, which read from one
    # shared zero page, out of cache, faster than any memory.
    return numpy.full(shape, 1.0, dtype=dtype)


def numpy_kernels(quick: bool = False) -> Iterator[Kernel]:
    """The kernels calibrate times with numpy, made one at a time (each with its own arrays,
    freed when the next is made)."""
    cache, workers = last_level_cache(), threads()
    for dtype in ("float64", "float32"):
        yield _matmul(matrix_side(cache) // (2 if quick else 1), dtype)
    with ThreadPoolExecutor(workers) as pool:
        yield from _streams(pool, workers, stream_elements(cache, quick))
        for dtype in ("float64", "float32"):
            yield from _vectors(pool, workers, dtype)


def _matmul(side: int, dtype: str) -> Kernel:
    a, b, c = (_filled((side, side), dtype) for _ in range(3))
    return Kernel(f"peak_flops_per_s.{_RATE[dtype]}", f"matmul {_RATE[dtype]} {side}x{side}x{side} "
                  "(numpy.matmul on the BLAS's threads)", 2 * side**3, functools.partial(numpy.matmul, a, b, out=c))


def _streams(pool: ThreadPoolExecutor, workers: int, count: int) -> Iterator[Kernel]:
    """c = a + b, c = a and a . b over fp32 arrays, each thread streaming its share: stores and
    loads stream at different rates, and the roof is the fastest."""
    a, b, c = (_filled(count, "float32") for _ in range(3))
    chunks = [slice(k * count // workers, (k + 1) * count // workers) for k in range(workers)]
    mib = count * 4 // 2**20
    yield Kernel("hbm_bandwidth_bytes_per_s", f"add fp32 c = a + b, 3 arrays of {mib} MiB on {workers} threads "
                 "(3 x array bytes)", 3 * 4 * count,
                 functools.partial(_each, pool, lambda s: numpy.add(a[s], b[s], out=c[s]), chunks))
    yield Kernel("hbm_bandwidth_bytes_per_s", f"copy fp32 c = a, 2 arrays of {mib} MiB on {workers} threads "
                 "(2 x array bytes)", 2 * 4 * count,
                 functools.partial(_each, pool, lambda s: numpy.copyto(c[s], a[s]), chunks))
    yield Kernel("hbm_bandwidth_bytes_per_s", f"dot fp32 a . b, 2 arrays of {mib} MiB read on {workers} threads "
                 "(2 x array bytes)", 2 * 4 * count,
                 functools.partial(_each, pool, lambda s: numpy.dot(a[s], b[s]), chunks))


def _vectors(pool: ThreadPoolExecutor, workers: int, dtype: str) -> Iterator[Kernel]:
    """x += y, VECTOR_LOOPS times over arrays in cache, on one thread and on all: numpy
    releases the interpreter lock in its loops, but takes it back between calls."""
    n = caches().get(2, VECTOR_L2_DEFAULT) // (4 * numpy.dtype(dtype).itemsize)  # two arrays in half the L2
    pairs = [(_filled(n, dtype), _filled(n, dtype)) for _ in range(workers)]
    for used in sorted({1, workers}):
        yield Kernel(f"vector_flops_per_s.{_RATE[dtype]}",
                     f"add {_RATE[dtype]} x += y in cache ({n} elements), {VECTOR_LOOPS} times "
                     f"on {used} thread{'s' if used > 1 else ''}", used * VECTOR_LOOPS * n,
                     functools.partial(_each, pool, _adds, pairs[:used]))


def _adds(pair: tuple[numpy.ndarray, numpy.ndarray]) -> None:
    x, y = pair
    for _ in range(VECTOR_LOOPS):
        numpy.add(x, y, out=x)


def _each(pool: ThreadPoolExecutor, work: Callable, items: list) -> None:
    list(pool.map(work, items))


def copies(footprint: int, cache: int | None) -> int:
    """How many copies of an op's arrays (of `footprint` bytes) to cycle through, so that none is
    still in the cache when its turn comes again."""
    if not cache:
        return 1
    return max(1, min(math.ceil(ROTATE_CACHES * cache / footprint), ROTATE_BYTES // footprint))


def cycled(make: Callable[[], Callable[[], object]], count: int) -> Callable[[], object]:
    """A call that runs each of `count` calls made by `make` in turn (each with its own arrays)."""
    calls = itertools.cycle([make() for _ in range(count)])
    return lambda: next(calls)()


def numpy_op(op: str, sizes: Mapping[str, int]) -> Callable[[], object]:
    """A call of one of validate's ops at its sizes, in fp32, as numpy runs it."""
    if op == "matmul":
        a, w, out = _filled((sizes["B"], sizes["D"]), "float32"), _filled((sizes["D"], sizes["F"]), "float32"), \
            _filled((sizes["B"], sizes["F"]), "float32")
        return functools.partial(numpy.matmul, a, w, out=out)
    x, y = _filled(sizes["N"], "float32"), _filled(sizes["N"], "float32")
    if op == "dot":
        return functools.partial(numpy.dot, x, y)
    ufunc = {"add": numpy.add, "multiply": numpy.multiply}[op]
    return functools.partial(ufunc, x, y, out=_filled(sizes["N"], "float32"))


def validate_sizes(quick: bool) -> tuple[int, int]:
    """validate's matrix side (D = F) and elementwise length (N) on this CPU."""
    cache = last_level_cache()
    return matrix_side(cache), stream_elements(cache, quick)
