"""The kernels of `measure.py` through JAX (`--backend jax`): on whatever device JAX sees
first, a GPU where there is one, else the CPU. JAX is imported here, inside functions
only: the rest of symroof runs without it.

Each call is a jitted function whose result is waited for (`block_until_ready`), since JAX
returns before the device has finished. The bytes and FLOPs are counted as in
`measure.py`. fp32 matmuls ask for `Precision.HIGHEST`: at the default precision a GPU
may compute them in TF32, which is a different rate.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from types import ModuleType
from typing import TYPE_CHECKING

from ..errors import SymroofError
from .kernels import Kernel, last_level_cache, matrix_side, stream_elements

if TYPE_CHECKING:  # JAX is optional: imported when a kernel runs
    import jax

# Sizes on a GPU: matmuls large enough to reach the tensor cores' peak, arrays far larger than
# any GPU's L2 (50 MB on an H100), and a chain of FMAs long enough to be compute-bound on
# every GPU's vector units (512 FLOPs per 8 bytes).
GPU_MATRIX_SIDE = 8192
GPU_STREAM_BYTES = 2**30
GPU_VECTOR_ELEMENTS = 2**26
CPU_VECTOR_ELEMENTS = 2**22
FMA_CHAIN = 256


def _jax() -> ModuleType:
    """The jax module, or a one-line error saying how to install it."""
    try:
        import jax
    except ImportError:
        raise SymroofError("--backend jax needs JAX: pip install 'symroof[jax]' (or 'jax[cuda12]' for a GPU)") from None
    return jax


def device() -> jax.Device:
    return _jax().devices()[0]


def kind() -> str:
    """"gpu", "tpu" or "cpu": the chip kind of JAX's first device."""
    platform = device().platform
    return "gpu" if platform in ("gpu", "cuda", "rocm") else platform if platform == "tpu" else "cpu"


def version() -> str:
    import jaxlib  # ships with jax
    return f"jax {_jax().__version__} (jaxlib {jaxlib.__version__}, {device().platform})"


def device_name() -> str:
    return str(getattr(device(), "device_kind", "") or device().platform)


def device_memory() -> int | None:
    """Bytes of memory the device offers JAX, where it says (GPUs do; CPUs do not)."""
    try:
        stats = device().memory_stats() or {}
    except Exception:  # backends that keep no statistics raise errors of their own
        return None
    limit = stats.get("bytes_limit")
    return int(limit) if limit else None


def _waited(function: Callable[..., jax.Array], *arrays: jax.Array) -> Callable[[], object]:
    compiled = _jax().jit(function)
    return lambda: compiled(*arrays).block_until_ready()


def _ones(shape: int | tuple[int, ...], dtype: jax.typing.DTypeLike) -> jax.Array:
    return _jax().numpy.ones(shape, dtype=dtype)


def jax_kernels(quick: bool = False) -> Iterator[Kernel]:
    """Matmuls per dtype, an add streaming large arrays, and a chain of FMAs on the device."""
    jnp = _jax().numpy
    on_gpu = kind() == "gpu"
    side = GPU_MATRIX_SIDE if on_gpu else matrix_side(last_level_cache())
    side //= 2 if quick else 1
    rates = {"bf16": jnp.bfloat16, "fp32": jnp.float32, **({"fp16": jnp.float16} if on_gpu else {})}
    for rate, dtype in rates.items():
        precision = _jax().lax.Precision.HIGHEST if rate == "fp32" else None
        a, b = _ones((side, side), dtype), _ones((side, side), dtype)
        yield Kernel(f"peak_flops_per_s.{rate}", f"matmul {rate} {side}x{side}x{side} (jit(jnp.dot))",
                     2 * side**3, _waited(functools.partial(jnp.dot, precision=precision), a, b))
    count = (GPU_STREAM_BYTES // (2 if quick else 1) // 4) if on_gpu else stream_elements(last_level_cache(), quick)
    a, b = _ones(count, jnp.float32), _ones(count, jnp.float32)
    mib = count * 4 // 2**20
    yield Kernel("hbm_bandwidth_bytes_per_s", f"add fp32 c = a + b, 3 arrays of {mib} MiB (jit(jnp.add), "
                 "3 x array bytes)", 3 * 4 * count, _waited(jnp.add, a, b))
    # reads alone: on a CPU, XLA's add writes a freshly allocated output, which the OS has to
    # map page by page, so the add alone can fall far below what the memory streams
    yield Kernel("hbm_bandwidth_bytes_per_s", f"sum(a * b) fp32, 2 arrays of {mib} MiB read (jit, fused; "
                 "2 x array bytes)", 2 * 4 * count, _waited(lambda a, b: jnp.sum(a * b), a, b))
    del a, b
    n = GPU_VECTOR_ELEMENTS if on_gpu else CPU_VECTOR_ELEMENTS
    x = _ones(n, jnp.float32)

    def chain(x: jax.Array, a: jax.Array, b: jax.Array) -> jax.Array:
        for _ in range(FMA_CHAIN):  # unrolled in the trace; XLA fuses it into one loop
            x = x * a + b
        return x

    # a and b are arguments, not constants, so that XLA cannot fold the chain
    yield Kernel("vector_flops_per_s.fp32", f"fp32 x = x * a + b, {FMA_CHAIN} times in one fused loop over "
                 f"{n} elements (a multiply-add is 2 FLOPs)", 2 * FMA_CHAIN * n,
                 _waited(chain, x, jnp.float32(0.999), jnp.float32(0.001)))


def validate_sizes(quick: bool) -> tuple[int, int]:
    """validate's matrix side and elementwise length on the device: a GPU's, or the CPU's."""
    if kind() == "gpu":
        return GPU_MATRIX_SIDE, GPU_STREAM_BYTES // 4 // (2 if quick else 1)
    return matrix_side(last_level_cache()), stream_elements(last_level_cache(), quick)


def jax_op(op: str, sizes: Mapping[str, int]) -> Callable[[], object]:
    """A call of one of validate's ops at its sizes, in fp32, jitted."""
    jnp = _jax().numpy
    if op == "matmul":
        return _waited(functools.partial(jnp.dot, precision=_jax().lax.Precision.HIGHEST),
                       _ones((sizes["B"], sizes["D"]), jnp.float32), _ones((sizes["D"], sizes["F"]), jnp.float32))
    x, y = _ones(sizes["N"], jnp.float32), _ones(sizes["N"], jnp.float32)
    return _waited({"dot": jnp.dot, "add": jnp.add, "multiply": jnp.multiply}[op], x, y)
