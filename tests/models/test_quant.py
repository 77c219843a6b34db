"""Quantized weights and KV caches with their scales counted (models/quant.py, dtypes.SCHEMES),
each figure against a hand count written here from the published sizes and the formats'
layouts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import sympy

import symroof
from symroof import dtypes
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.models import serving
from symroof.models.counted import Counted
from symroof.models.decls import Options

R = sympy.Rational
# LLaMA-3 8B (Meta's config.json): hidden 4096, 32 layers, 32 heads of 128, 8 KV heads, MLP 14336, vocab 128256
D, L, N, K, H, F, V = 4096, 32, 32, 8, 128, 14336, 128256
# one layer's weight matrices: Wq and Wo (D x N*H), Wk and Wv (D x K*H), the gated MLP's three (D x F)
MATRICES = 2 * D * N * H + 2 * D * K * H + 3 * D * F
# what stays bf16: the embedding and the untied LM head (V x D each), two norms a layer and the final one
REST_BF16 = 2 * (2 * V * D + (2 * L + 1) * D)

# bytes a weight, from each format's layout
INT4_G128 = R(1, 2) + (2 + R(1, 2)) / 128  # 4-bit weight; per 128: an fp16 scale and a 4-bit zero point
MXFP4 = R(1, 2) + R(1, 32)  # e2m1; per 32: an e8m0 byte
NVFP4 = R(1, 2) + R(1, 16)  # e2m1; per 16: an e4m3 byte
FP8_B128 = 1 + R(4, 128 * 128)  # e4m3; per 128x128 tile: an fp32


def _decode(weights: str = "bf16", kv: str = "bf16", s: int = 4096) -> symroof.Model:
    return symroof.model("llama-3-8b", "decode", "h100", {"B": 1, "S": s}, weights=weights, kv=kv)


def test_scheme_bytes_per_element() -> None:
    assert [dtypes.lookup(n).bytes for n in ("int4_g128", "mxfp4", "nvfp4", "fp8_b128")] == [
        INT4_G128, MXFP4, NVFP4, FP8_B128]
    # a scheme runs at its elements' rate, and beside bf16 activations the contraction is bf16
    assert dtypes.lookup("mxfp4").rate == "fp4" and dtypes.lookup("fp8_b128").rate == "fp8"
    assert dtypes.compute_dtype([dtypes.lookup("bf16"), dtypes.lookup("nvfp4")]).name == "bf16"


@pytest.mark.parametrize("given, per_weight", [("int4", INT4_G128), ("int4-g128", INT4_G128), ("mxfp4", MXFP4),
                                               ("fp4", MXFP4), ("nvfp4", NVFP4), ("fp8_b128", FP8_B128),
                                               ("fp8", 1), ("bf16", 2)])
def test_weight_bytes_count_the_scales(given: str, per_weight: sympy.Rational) -> None:
    assert _decode(given).weight_bytes == L * MATRICES * per_weight + REST_BF16


@pytest.mark.parametrize("given", ["int8", "i8", "int8-pc"])
def test_int8_weights_carry_a_scale_per_output_channel(given: str) -> None:
    # a bf16 scale (2 bytes) for each output of each matrix: Wq N*H outputs, Wk and Wv K*H each,
    # Wo D, the MLP's gate and up F each, its down D
    outputs = N * H + 2 * K * H + D + 2 * F + D
    assert outputs == 43008
    assert _decode(given).weight_bytes == L * (MATRICES + 2 * outputs) + REST_BF16 == 9083953152
    assert dtypes.lookup("int8_pc14336").bytes == 1 + R(2, 14336)  # the down projection's: F inputs


def test_int4_weights_by_hand() -> None:
    # 32 x 218103808 weights x 133/256 bytes, plus 2 x (2 x 525336576 + 65 x 4096) bf16 bytes
    assert MATRICES == 218103808
    assert _decode("int4").weight_bytes == 3625975808 + 2101878784 == 5727854592


def test_a_decode_step_reads_the_scales() -> None:
    # everything but the layers' matrices is the same step: the difference is their bytes alone,
    # and at B = 1 the step is memory-bound, so its time falls by those bytes over the H100's 3.35 TB/s
    bf16, int4, nvfp4 = _decode(), _decode("int4"), _decode("nvfp4")
    assert bf16.analysis.bytes - int4.analysis.bytes == L * MATRICES * (2 - INT4_G128)
    assert bf16.analysis.bytes - nvfp4.analysis.bytes == L * MATRICES * (2 - NVFP4)
    assert bf16.t_step - int4.t_step == L * MATRICES * (2 - INT4_G128) / 3_350_000_000_000


@pytest.mark.parametrize("kv, per_element", [("fp8", 1), ("int8", 1), ("int4", INT4_G128), ("nvfp4", NVFP4),
                                             ("mxfp4", MXFP4), ("bf16", 2)])
def test_kv_bytes_per_token(kv: str, per_element: sympy.Rational) -> None:
    # K and V, each K heads of H, in each of L layers; a block scheme's scales along the head dim
    assert _decode(kv=kv).kv_bytes_per_token == 2 * L * K * H * per_element


def test_serving_moves_with_the_scales() -> None:
    bf16 = serving.request("llama-3-8b", "h100", 1000, 500, 1)
    int4 = serving.request("llama-3-8b", "h100", 1000, 500, 1, weights="int4", kv="fp8")
    # at B = 1 each decode step is memory-bound: it moves the bytes saved less, the layers' matrices'
    # and, a byte an element less, the cache's S tokens read and the new token's k and v written
    for s in (1000, 1499):
        saved = L * MATRICES * (2 - INT4_G128) + 2 * L * K * H * (2 - 1) * (s + 1)
        assert bf16.tpot_at(s) - int4.tpot_at(s) == saved / 3_350_000_000_000
    said = "; ".join(int4.conventions())
    assert "--weights int4_g128" in said and "scales counted" in said and "--kv fp8" in said
    assert not bf16.storage


def test_mixture_quantizes_its_experts_not_its_router() -> None:
    # Mixtral 8x7B: 8 experts of a gated MLP (4096 x 14336) a layer, a bf16 router (4096 x 8), vocab 32000
    d, l, e, f, v = 4096, 32, 8, 14336, 32000
    matrices = 2 * d * 32 * 128 + 2 * d * 8 * 128 + e * 3 * d * f
    rest = 2 * (2 * v * d + (2 * l + 1) * d + l * d * e)
    got = symroof.model("mixtral-8x7b", "decode", None, {"B": 1, "S": 1}, weights="mxfp4").weight_bytes
    assert got == l * matrices * MXFP4 + rest


def test_the_output_says_the_scheme() -> None:
    out = io.StringIO()
    assert main(["model", "llama-3-8b", "--decode", "--weights", "nvfp4", "--json"], out=out) == 0
    storage = json.loads(out.getvalue())["storage"]
    assert storage[0].startswith("--weights nvfp4: fp4 e2m1, a block of 16 per fp8 e4m3 scale")
    assert "9/16 bytes a weight, scales counted (not counted: one fp32 scale per tensor" in storage[0]


def test_unknown_scheme_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "llama-3-8b", "--decode", "--weights", "int4-g12"], out=io.StringIO()) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "unknown weights dtype 'int4-g12'; did you mean 'int4-g128'?" in err


def test_blocks_must_divide() -> None:
    # GPT-2's heads are 64 wide: groups of 128 along a head would split a scale's block
    with pytest.raises(SpecError, match=r"--kv int4_g128: its blocks of 128 do not divide H = 64"):
        symroof.model("gpt2", "decode", None, {"B": 1, "S": 1}, kv="int4")
    with pytest.raises(SpecError, match=r"--weights int8_pc4096: name int8 \(or int8-pc\)"):
        symroof.model("llama-3-8b", "decode", None, {"B": 1, "S": 1}, weights="int8_pc4096")
    with pytest.raises(SpecError, match=r"--kv fp8_b128 tiles weight matrices \(128x128\)"):
        symroof.model("llama-3-8b", "decode", None, {"B": 1, "S": 1}, kv="fp8_b128")


def test_a_parameter_count_model_counts_the_scales_too() -> None:
    # a model known by its count has no matrices to tell apart: all N weights at int4_g128's bytes
    got = Counted(7 * 10**10, None, Options(), weights="int4").weight_bytes
    assert got == 7 * 10**10 * INT4_G128 == 36367187500


def test_the_printed_program_reads_back_with_its_scales(tmp_path: Path) -> None:
    # --print writes the formats as dtypes (int4_g128[D, F], nvfp4[B, S, K, H]); read back, the same bytes
    path = tmp_path / "llama.txt"
    out = io.StringIO()
    assert main(["model", "llama-3-8b", "--decode", "--weights", "int4", "--kv", "nvfp4", "--print"], out=out) == 0
    path.write_text(out.getvalue(), encoding="utf-8")
    read = symroof.model(str(path), "decode", None, {"B": 1, "S": 1})
    assert read.weight_bytes == L * MATRICES * INT4_G128 + REST_BF16
    assert read.kv_bytes_per_token == 2 * L * K * H * NVFP4


@pytest.mark.parametrize(("upper", "lower"), [("INT4", "int4"), ("Int4", "int4"), ("FP4", "fp4"), ("INT8", "int8"),
                                            ("i4", "int4"), ("f4", "fp4")])
def test_a_schemes_name_in_capitals_is_the_same_scheme(upper, lower):
    # INT4 and i4 once read as bare 4-bit, without the scales int4 counts
    a, b = (symroof.model("llama-3-8b", "decode", "h100", {"B": 1, "S": 1000}, weights=w, kv=w) for w in (upper, lower))
    assert (a.weight_bytes, a.kv_bytes_per_token) == (b.weight_bytes, b.kv_bytes_per_token)
