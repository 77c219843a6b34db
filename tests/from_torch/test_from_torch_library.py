"""Library models through from-torch (issue 30, item 3), from the factories in
tests/data/torch_models.py (which `symroof from-torch tests/data/torch_models.py:NAME`
reads too): transformers' GPT-2 and LLaMA with eager attention (sdpa's are in
test_from_torch.py), the two against each other, a small CNN with a max pool, the command
on a library model, and what does not import yet (xfail, each with its reason).
FlopCounterMode's convention: matrix ops only, 2 per multiply-add.

PyTorch and transformers are optional: without them this file is skipped."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import sympy

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from data import torch_models  # noqa: E402

import symroof  # noqa: E402
from symroof.cli.command import main  # noqa: E402
from symroof.errors import SymroofError, SymroofWarning  # noqa: E402
from symroof.from_torch import Imported, from_torch  # noqa: E402

B, T = symroof.dim_symbol("B"), symroof.dim_symbol("T")
FACTORIES = Path(__file__).parents[1] / "data" / "torch_models.py"


def _quiet(made: tuple) -> Imported:
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)  # every op costed: no warning
        return from_torch(*made)


def _matrix(im) -> sympy.Expr:
    return sympy.expand(im.analysis.flops - im.analysis.flops_vector)


def _agrees(im, *shapes: dict[str, int]) -> None:
    for at in shapes:
        check = im.flop_counter(at)
        assert check["flops_agree"], check
        a = im.model(None, check["sizes"]).analysis
        assert check["symroof_matrix_flops"] == a.flops - a.flops_vector


def _lm_matrix_by_hand(config) -> sympy.Expr:
    """2 FLOPs per weight per token for the layers' products and the LM head, and per layer
    the scores and the weighted values: 2·d per query per key each (no causal saving:
    both attention paths compute the whole T x T square)."""
    d, layers, v = config.hidden_size, config.num_hidden_layers, config.vocab_size
    if config.model_type == "gpt2":
        per_layer = 2 * (d * 3 * d + d * d + 2 * d * 4 * d)
    else:
        kv = config.num_key_value_heads * d // config.num_attention_heads
        per_layer = 2 * (2 * d * d + 2 * d * kv + 3 * d * config.intermediate_size)
    return sympy.expand(B * T * (layers * per_layer + 2 * d * v) + layers * 4 * d * B * T * T)


def test_gpt2_eager_attention():
    from torch.export import Dim
    model, args, _ = torch_models.gpt2_eager()
    # eager attention slices its causal mask so that torch.export guards T != n_positions: T's max is 63
    with pytest.raises(SymroofError, match="torch.export could not export"):
        from_torch(model, args, ({0: Dim("B"), 1: Dim("T", max=64)},))
    im = _quiet((model, args, ({0: Dim("B"), 1: Dim("T", max=63)},)))
    assert im.analysis.flops.free_symbols == {B, T}
    assert _matrix(im) - _lm_matrix_by_hand(model.config) == 0
    _agrees(im, {"B": 2, "T": 8}, {"B": 1, "T": 33})
    # parameters by hand: token and position tables, per layer two norms (scale and shift), qkv and
    # output projections, the MLP's two; the final norm. The LM head is the token table itself (tied:
    # one tensor read twice, counted once, as sum(p.numel()) over model.parameters() counts it)
    d, v, n = 64, 128, 64
    layer = 2 * 2 * d + (3 * d * d + 3 * d) + (d * d + d) + (4 * d * d + 4 * d) + (4 * d * d + d)
    by_hand = v * d + n * d + 2 * layer + 2 * d
    assert by_hand == sum(p.numel() for p in model.parameters())
    # eager attention's causal mask (a bool [64, 64] buffer per layer) and its fill value (a lifted
    # scalar constant) are read, their bytes counted, and are no parameters
    assert im.model(None, {"B": 1, "T": 1}).params == by_hand
    assert model.lm_head.weight is model.transformer.wte.weight


def test_llama_eager_attention_is_sdpa_in_matrix_flops():
    eager = _quiet(torch_models.llama_eager())
    sdpa = _quiet(torch_models.llama())
    config = torch_models.llama_model().config
    assert eager.analysis.flops.free_symbols == {B, T}
    # the same products either way: eager's two matmuls per layer are sdpa's scores and values
    assert _matrix(eager) - _lm_matrix_by_hand(config) == 0 == _matrix(sdpa) - _lm_matrix_by_hand(config)
    _agrees(eager, {"B": 2, "T": 8}, {"B": 3, "T": 17})
    # the parameters alone: rotary inv_freq (a buffer) and eager's lifted scalar torch.tensor(0.0) are
    # read, not declared
    own = sum(p.numel() for p in torch_models.llama_model("eager").parameters())
    assert sdpa.model(None, {"B": 1, "T": 1}).params == own == eager.model(None, {"B": 1, "T": 1}).params


def test_a_cnn_with_a_max_pool():
    model, args, dims = torch_models.cnn()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)  # the 2x2 max pool tiles its input: costed
        im = from_torch(model, args, dims)
    h, w = symroof.dim_symbol("H"), symroof.dim_symbol("W")
    assert im.analysis.flops.free_symbols == {B, h, w}
    # by hand: c1 2·8·3·9 per pixel (padding 1 keeps H x W); the 2x2 max pool floors H/2; c2 grouped 4
    # ways (2 input channels a group), 3x3, stride 2, padding 1: floor((floor(H/2) + 2 - 3)/2) + 1 rows;
    # the head 2·16·10. The pool is vector work: 4 compares a window (leading), over 8 channels
    h2, w2 = (sympy.floor((sympy.floor(x / 2) - 1) / 2) + 1 for x in (h, w))
    matrix = B * h * w * 2 * 8 * 3 * 9 + B * h2 * w2 * 2 * 16 * 2 * 9 + B * 2 * 16 * 10
    at = {"B": 2, "H": 16, "W": 16}
    assert sympy.simplify(_matrix(im) - matrix) == 0
    for sizes in (at, {"B": 1, "H": 21, "W": 18}):
        assert _matrix(im).subs({symroof.dim_symbol(k): n for k, n in sizes.items()}) == \
            matrix.subs({symroof.dim_symbol(k): n for k, n in sizes.items()})
    _agrees(im, at, {"B": 1, "H": 21, "W": 18})
    pooled = next(st_ for st_ in im.model(None, {"B": 1, "H": 21, "W": 18}).analysis.steps
                  if st_.step.fn == "max")
    # 21 x 18 pooled 2x2: 10 x 9 windows (the 21st row is not read), 4 elements each, 8 channels
    assert pooled.flops == 8 * 10 * 9 * 4 and pooled.bytes_read == 4 * 8 * 10 * 9 * 4
    # BatchNorm's running mean and variance (8 channels each) are buffers: read, not parameters
    assert im.model(None, {"B": 1, "H": 8, "W": 8}).params == sum(p.numel() for p in model.parameters())


def test_the_command_on_a_library_model(capsys):
    assert main(["from-torch", f"{FACTORIES}:llama", "--set", "B=2,T=8", "--check", "--chip", "h100"]) == 0
    out = capsys.readouterr().out
    assert "FLOPs: agree" in out
    assert "NOT COSTED" not in out


def _decode_flop_counter(module: torch.nn.Module, b: int, p: int) -> int:
    """FlopCounterMode on the decode step at B=b, P=p, its inputs built here (the cache's
    four tensors all at P). It has no formula for the CPU's fused attention kernel: the math
    backend runs the same products as bmm, which it counts."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    ids = torch.randint(0, 128, (b, 1))
    cache = [torch.randn(b, 4, p, 16) for _ in range(4)]
    with sdpa_kernel([SDPBackend.MATH]), FlopCounterMode(display=False) as counter, torch.no_grad():
        module(ids, *cache)
    return counter.get_total_flops()


def test_gpt2_decode_step_with_a_kv_cache():
    module, args, dims = torch_models.gpt2_decode()
    im = _quiet((module, args, dims))
    p = symroof.dim_symbol("P")
    assert im.analysis.flops.free_symbols == {B, p}
    # by hand: one token per sequence, 2 per weight (the layers' 12·d² and the head's d·V), and per
    # layer its query against the P cached keys and itself, scores and values: 2·2·d·(P + 1)
    d, v = 64, 128
    matrix = B * (2 * (2 * 12 * d * d) + 2 * d * v) + 2 * 4 * d * B * (p + 1)
    assert _matrix(im) - sympy.expand(matrix) == 0
    # the cross-check resizes B and P in every input that names them (the four cache tensors)
    _agrees(im, {"B": 2, "P": 5}, {"B": 1, "P": 30})
    for b, n in ((1, 30), (3, 62)):
        assert _decode_flop_counter(module, b, n) == matrix.subs({B: b, p: n})


@pytest.mark.xfail(strict=True, raises=SymroofError,
                   reason="torch.export: LLaMA's repeat_kv (2 kv heads) guards min(16 + 16*P, 32 + 32*P) == 16 + "
                          "16*P, so P cannot stay symbolic in this decode step")
def test_llama_decode_step_with_a_kv_cache():
    from_torch(*torch_models.llama_decode())


@pytest.mark.xfail(strict=True, raises=SymroofError,
                   reason="importer: a derived dim (2*Dim('H2')) reaches the graph as 2*s89, a symbol torch named "
                          "itself, and is refused")
def test_a_derived_dim():
    from torch.export import Dim
    model, args, _ = torch_models.cnn()
    h = Dim("H2", min=4, max=256)
    from_torch(model, args, ({0: Dim("B"), 2: 2 * h, 3: 2 * h},))
