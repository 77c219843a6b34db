"""Importing PyTorch modules (issue 30): torch.nn layers and transformers' PyTorch GPT-2
and LLaMA built from small configurations (random weights, nothing downloaded), each
exported with symbolic dims. Each: the dims survive as symbols; FLOPs agree with
torch's FlopCounterMode at two shapes (its convention: matrix ops only, 2 per
multiply-add); params equal the module's own count; hand counts where a layer is small
enough to count by hand; the program re-reads as text.

PyTorch is optional: without it this file is skipped."""

from __future__ import annotations

import warnings

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
from torch.export import Dim  # noqa: E402

import symroof  # noqa: E402
from symroof.cli.command import main  # noqa: E402
from symroof.errors import SymroofError, SymroofWarning  # noqa: E402
from symroof.from_torch import from_torch  # noqa: E402

B, T = symroof.dim_symbol("B"), symroof.dim_symbol("T")


def _numel(module) -> int:
    return sum(p.numel() for p in module.parameters())


def _agrees(imported, *shapes: dict[str, int]) -> list[dict]:
    checks = [imported.flop_counter(at) for at in shapes]
    for check in checks:
        assert check["flops_agree"], check
        # and the symbolic program at these sizes is the count compared
        a = imported.model(None, check["sizes"]).analysis
        assert check["symroof_matrix_flops"] == a.flops - a.flops_vector
    return checks


def test_a_linear_layer_by_hand():
    layer = torch.nn.Linear(32, 48)
    im = from_torch(layer, (torch.randn(4, 32),), ({0: Dim("B")},))
    # by hand: 2·32·48 per row for the product, 48 for the bias
    assert sympy.expand(im.analysis.flops - B * (2 * 32 * 48 + 48)) == 0
    # x read (4 bytes each), W and b read, y written; the bias add reads y and b again and writes y
    assert sympy.expand(im.analysis.bytes - 4 * (32 * B + 32 * 48 + 48 * B + 48 * B + 48 + 48 * B)) == 0
    assert im.model(None, {"B": 4}).params == _numel(layer) == 32 * 48 + 48
    _agrees(im, {"B": 4}, {"B": 7})


def test_an_mlp_keeps_its_dims_and_counts_gelu():
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.GELU(), torch.nn.Linear(64, 16)).eval()
    im = from_torch(mlp, (torch.randn(2, 8, 16),), ({0: Dim("B"), 1: Dim("T")},))
    assert im.analysis.flops.free_symbols == {B, T}
    # by hand, per token: 2·16·64 + 64, gelu's erf form, 2·64·16 + 16
    gelu = symroof.analyze("gelu_erf(fp32[N]) -> fp32[N]").flops.subs(symroof.dim_symbol("N"), 1)
    assert sympy.expand(im.analysis.flops - B * T * (2 * 16 * 64 + 64 + 64 * gelu + 2 * 64 * 16 + 16)) == 0
    _agrees(im, {"B": 2, "T": 8}, {"B": 3, "T": 5})


@pytest.mark.parametrize("masked", [False, True])
def test_multihead_attention(masked):
    mha = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()

    class Self(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mha = mha

        def forward(self, x):
            t = x.shape[1]
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1) if masked else None
            return self.mha(x, x, x, attn_mask=mask, need_weights=False)[0]

    im = from_torch(Self(), (torch.randn(2, 6, 32),), ({0: Dim("B"), 1: Dim("T", max=512)},))
    assert not im.warnings
    flops = im.analysis.flops
    # the products by hand: q, k, v and out projections 4·2·32·32 per token; scores and values 2·2·32·T per token
    matrix = im.analysis.flops - im.analysis.flops_vector
    assert sympy.expand(matrix - (B * T * 4 * 2 * 32 * 32 + 2 * 2 * B * T * T * 32)) == 0
    assert flops.free_symbols == {B, T}
    assert im.model(None, {"B": 1, "T": 4}).params == _numel(mha)
    _agrees(im, {"B": 2, "T": 6}, {"B": 1, "T": 9})


@pytest.mark.parametrize("norm_first", [False, True])
def test_a_transformer_encoder_layer(norm_first, tmp_path):
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True, norm_first=norm_first).eval()
    im = from_torch(layer, (torch.randn(2, 8, 32),), ({0: Dim("B"), 1: Dim("T", max=512)},))
    assert not im.warnings
    assert im.model(None, {"B": 2, "T": 8}).params == _numel(layer)
    _agrees(im, {"B": 2, "T": 8}, {"B": 3, "T": 17})
    # the program as text reads back to the same counts
    path = tmp_path / "layer.sr"
    path.write_text(im.text)
    again = symroof.model(path.read_text(), "prefill", None, {"B": 3, "T": 17})
    assert again.analysis.flops == im.model(None, {"B": 3, "T": 17}).analysis.flops
    assert again.analysis.bytes == im.model(None, {"B": 3, "T": 17}).analysis.bytes


def _gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    return GPT2LMHeadModel(GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64,
                                      use_cache=False)).eval()


def _llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                        num_key_value_heads=2, intermediate_size=128, vocab_size=128,
                                        max_position_embeddings=64, use_cache=False)).eval()


@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_transformers_causal_lms(make):
    pytest.importorskip("transformers")
    model = make()
    ids = torch.randint(0, 128, (2, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)  # every op costed: no warning
        im = from_torch(model, (ids,), ({0: Dim("B"), 1: Dim("T", max=64)},))
    assert im.analysis.flops.free_symbols == {B, T}
    checks = _agrees(im, {"B": 2, "T": 8}, {"B": 1, "T": 33})
    # the leading term by hand: 2 FLOPs per weight per token for the layers' products and the LM head
    cfg = model.config
    d, layers, v = cfg.hidden_size, cfg.num_hidden_layers, cfg.vocab_size
    if make is _gpt2:
        per_layer = 2 * (d * 3 * d + d * d + 2 * d * 4 * d)
        # GPT-2 ties its LM head to the token embedding: counted once
        assert im.model(None, {"B": 1, "T": 1}).params == _numel(model)
    else:
        kv = cfg.num_key_value_heads * d // cfg.num_attention_heads
        per_layer = 2 * (2 * d * d + 2 * d * kv + 3 * d * cfg.intermediate_size)
        # LLaMA's rotary inv_freq is a buffer: read (its bytes counted), no parameter
        assert im.model(None, {"B": 1, "T": 1}).params == _numel(model)
        assert "rotaryEmb" not in im.text and any("inv_freq" in n for n, _ in model.named_buffers())
    matrix = im.analysis.flops - im.analysis.flops_vector
    heads = 2 * 2 * d  # scores and values: 2·d per query per key each
    assert sympy.expand(matrix - B * T * (layers * per_layer + 2 * d * v) - layers * heads * B * T * T) == 0
    assert checks[1]["ratio"] == pytest.approx(1, abs=1e-3)


@settings(max_examples=12, deadline=None)
@given(b=st.integers(1, 4), t=st.integers(2, 12), d=st.sampled_from([8, 16]))
def test_the_symbolic_import_at_sizes_is_the_concrete_import(b, t, d):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d, 2, 2 * d, batch_first=True).eval()
    symbolic = _symbolic_layer(d)
    concrete = from_torch(layer, (torch.randn(b, t, d),))
    at = symbolic.model(None, {"B": b, "T": t})
    for quantity in ("flops", "flops_exact", "transcendentals", "bytes"):
        assert getattr(at.analysis, quantity) == getattr(concrete.analysis, quantity), quantity
    assert at.params == concrete.model().params


_SYMBOLIC: dict[int, object] = {}


def _symbolic_layer(d: int):
    if d not in _SYMBOLIC:
        layer = torch.nn.TransformerEncoderLayer(d, 2, 2 * d, batch_first=True).eval()
        _SYMBOLIC[d] = from_torch(layer, (torch.randn(2, 8, d),), ({0: Dim("B"), 1: Dim("T", max=512)},))
    return _SYMBOLIC[d]


def test_an_op_without_a_rule_is_named_never_zero():
    class Sorted(torch.nn.Module):
        def forward(self, x):
            return torch.sort(x, dim=-1).values * 2

    with pytest.warns(SymroofWarning, match=r"not costed: sort\.\w+ x 1"):
        im = from_torch(Sorted(), (torch.randn(3, 5),), ({0: Dim("B")},))
    assert "NOT COSTED: sort" in im.text
    assert im.analysis.flops == 5 * B  # the multiply, and nothing for the sort


def test_bad_input_is_one_line(tmp_path, capsys):
    module = tmp_path / "bad.py"
    module.write_text("import torch\nfrom torch.export import Dim\n"
                      "def wrong():\n    return 3\n"
                      "def fixed():\n    m = torch.nn.Linear(4, 4)\n"
                      "    return m, (torch.randn(2, 4),), ({0: Dim('B'), 1: Dim('D')},)\n"
                      "def underscore():\n    m = torch.nn.Linear(4, 4)\n"
                      "    return m, (torch.randn(2, 4),), ({0: Dim('B_1')},)\n")
    for target, message in ((f"{module}:wrong", "returned int"), (f"{module}:missing", "has no factory"),
                            ("nowhere:make", "cannot import nowhere"), (f"{module}:underscore", "without '_'"),
                            (f"{module}:fixed", "torch.export")):
        assert main(["from-torch", target]) == 2, target
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err, (target, err)
    with pytest.raises(SymroofError, match="torch.nn.Module"):
        from_torch(lambda x: x, (torch.randn(2),))


def test_the_command(tmp_path, capsys):
    module = tmp_path / "block.py"
    module.write_text("import torch\nfrom torch.export import Dim\n"
                      "def make():\n"
                      "    torch.manual_seed(0)\n"
                      "    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()\n"
                      "    return layer, (torch.randn(2, 8, 32),), ({0: Dim('B'), 1: Dim('T', max=512)},)\n")
    out_file = tmp_path / "block.sr"
    assert main(["from-torch", f"{module}:make", "--set", "B=2,T=8", "--check", "--chip", "h100",
                 "-o", str(out_file)]) == 0
    out = capsys.readouterr().out
    assert "FLOPs: agree" in out and "bound" in out
    assert any(line.startswith("flops") and "B*T**2" in line for line in out.splitlines())
    # the saved program analyses as `symroof model FILE --prefill` would
    assert main(["model", str(out_file), "--prefill", "--set", "B=2,T=8"]) == 0
    assert main(["from-torch", f"{module}:make", "--check"]) == 2  # no sizes to run at
    assert "--set" in capsys.readouterr().err


class _CNN(torch.nn.Module):
    """Two convolutions (padded; strided and grouped), a depthwise one, batch norm in eval
    mode, a global pool and a linear head."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, groups=4)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):
        x = torch.relu(self.bn(self.c1(x)))
        x = self.dw(torch.relu(self.c2(x)))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


def test_a_small_cnn():
    model = _CNN().eval()
    dims = ({0: Dim("B"), 2: Dim("H", min=8, max=512), 3: Dim("W", min=8, max=512)},)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = from_torch(model, (torch.randn(2, 3, 16, 16),), dims)
    h, w = symroof.dim_symbol("H"), symroof.dim_symbol("W")
    assert im.analysis.flops.free_symbols == {B, h, w}
    # by hand: c1 2·8·3·9 per pixel (padding 1 keeps H x W); c2 grouped 4 ways (2 input channels a group),
    # stride 2 and no padding: floor((H - 3)/2) + 1 rows; the depthwise 2·16·9 on that grid; the head 2·16·10
    h2, w2 = sympy.floor((h - 3) / 2) + 1, sympy.floor((w - 3) / 2) + 1
    matrix = B * h * w * 2 * 8 * 3 * 9 + B * h2 * w2 * (2 * 16 * 2 * 9 + 2 * 16 * 9) + B * 2 * 16 * 10
    assert sympy.simplify(im.analysis.flops - im.analysis.flops_vector - matrix) == 0
    # BatchNorm's running statistics are buffers: read, no parameters
    assert im.model(None, {"B": 1, "H": 8, "W": 8}).params == _numel(model)
    _agrees(im, {"B": 2, "H": 16, "W": 16}, {"B": 1, "H": 21, "W": 18})


@pytest.mark.parametrize("layer", [
    torch.nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1),  # a transposed convolution: per input element
    torch.nn.ConvTranspose2d(8, 4, 4, stride=2, groups=2),
    torch.nn.Conv1d(4, 6, 5, dilation=2, padding=2),
    torch.nn.Conv3d(2, 3, 3),
], ids=["transpose", "transpose-grouped", "conv1d-dilated", "conv3d"])
def test_convolutions_of_every_kind_against_flop_counter(layer):
    n = layer.weight.dim() - 2
    names = "HWD"[:n]
    dims = {0: Dim("B"), **{2 + i: Dim(names[i], min=6, max=64) for i in range(n)}}
    im = from_torch(layer.eval(), (torch.randn(2, layer.in_channels, *[10] * n),), (dims,))
    assert not im.warnings
    assert im.analysis.flops.free_symbols == {B, *(symroof.dim_symbol(d) for d in names)}
    _agrees(im, {"B": 2, **dict.fromkeys(names, 10)}, {"B": 3, **dict.fromkeys(names, 13)})
    if isinstance(layer, torch.nn.ConvTranspose2d):
        # by hand: each input element times each tap (k x k) and each output channel of its group
        k, groups = layer.kernel_size[0], layer.groups
        h, w = symroof.dim_symbol("H"), symroof.dim_symbol("W")
        products = B * layer.in_channels * h * w * k * k * (layer.out_channels // groups)
        assert sympy.expand(im.analysis.flops - im.analysis.flops_vector - 2 * products) == 0


@pytest.mark.parametrize("which", ["var", "std", "var_mean"])
def test_variance_by_its_steps(which):
    class Spread(torch.nn.Module):
        def forward(self, x):
            if which == "var_mean":
                v, m = torch.var_mean(x, dim=-1, correction=0)
                return v + m
            return getattr(x, which)(-1, keepdim=True) * 2

    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = from_torch(Spread(), (torch.randn(3, 16),), ({0: Dim("B")},))
    # by hand, per row of 16: the mean (16 adds and a divide), 16 subtracts, 16 squares, 16 adds,
    # a divide by N - correction; then the op after it (1 per row); std's square root is a
    # transcendental, no FLOP (symroof's convention, ops/unary.py)
    per_row = 16 + 1 + 16 + 16 + 16 + 1 + 1
    assert sympy.expand(im.analysis.flops - B * per_row) == 0
    assert im.analysis.transcendentals == (B if which == "std" else 0)


def test_an_op_without_a_rule_runs_as_torchs_decomposition():
    """softplus has no rule: torch's own decomposition of it is costed, and the header says
    so; the same steps written out by hand import to the same counts."""
    class Soft(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.softplus(x) * 2

    class ByHand(torch.nn.Module):  # softplus(x) with beta 1, threshold 20, as torch defines it
        def forward(self, x):
            return torch.where(x > 20, x, torch.log1p(torch.exp(x))) * 2

    dims = ({0: Dim("B")},)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = from_torch(Soft(), (torch.randn(3, 16),), dims)
        hand = from_torch(ByHand(), (torch.randn(3, 16),), dims)
    assert "decomposed by torch's own table (no rule of their own): softplus.default x 1" in im.text
    for quantity in ("flops", "transcendentals", "bytes"):
        assert getattr(im.analysis, quantity) == getattr(hand.analysis, quantity), quantity
    # exp and log1p: two transcendentals per element
    assert im.analysis.transcendentals == 2 * 16 * B


def test_core_ops_by_torchs_full_table_and_moves_as_copies():
    """leaky_relu, a core ATen op export keeps, is costed as torch's decomposition of it (the
    same counts as those steps written by hand); flip and roll move bytes, no FLOPs."""
    class Leaky(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.leaky_relu(x, 0.1) + x.flip(-1) + x.roll(1, -1)

    class ByHand(torch.nn.Module):
        def forward(self, x):
            return torch.where(x > 0, x, x * 0.1) + x + x

    dims = ({0: Dim("B")},)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = from_torch(Leaky(), (torch.randn(3, 16),), dims)
        hand = from_torch(ByHand(), (torch.randn(3, 16),), dims)
    assert "leaky_relu.default x 1" in im.text
    assert im.analysis.flops == hand.analysis.flops
    # by hand, bytes beyond the by-hand module's: flip and roll each read x and write a copy (4 bytes an element)
    assert sympy.expand(im.analysis.bytes - hand.analysis.bytes - 2 * 2 * 4 * 16 * B) == 0


@pytest.mark.parametrize("which", ["index_select", "gather"])
def test_index_select_and_gather_read_what_they_take(which):
    class Take(torch.nn.Module):
        def forward(self, x, ids):
            return x.index_select(1, ids) if which == "index_select" else x.gather(1, ids)

    x = torch.randn(3, 16)
    if which == "index_select":
        ids, dims = torch.tensor([0, 3, 5, 7]), ({0: Dim("B")}, None)
    else:
        ids, dims = torch.zeros(3, 1, dtype=torch.long), ({0: Dim("B")}, {0: Dim("B")})
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = from_torch(Take(), (x, ids), dims)
    assert im.analysis.flops == 0
    # by hand: the elements taken read and written (fp32, 4 bytes) and the int64 indices (8 bytes) read:
    # index_select 4 a row and 4 indices; gather 1 a row and 1 index a row
    expected = 2 * 4 * 4 * B + 8 * 4 if which == "index_select" else 2 * 4 * B + 8 * B
    assert sympy.expand(im.analysis.bytes - expected) == 0


def test_group_norm_by_torchs_decomposition_by_hand():
    gn = torch.nn.GroupNorm(4, 16).eval()
    L = symroof.dim_symbol("L")
    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)  # its as_strided views free, nothing uncosted
        im = from_torch(gn, (torch.randn(2, 16, 8),), ({0: Dim("B"), 2: Dim("L", min=2, max=512)},))
    assert "native_group_norm.default x 1" in im.text
    # by hand, per sample: each of 4 groups' statistics over 4·L elements (mean 4L + 1, subtract 4L,
    # square 4L, sum 4L, divide 1, + eps 1; the rsqrt a transcendental); the scale and shift folded per
    # channel as torch's decomposition does (rstd·weight 16, -mean 4, ·scale 16, + bias 16); then a
    # multiply and an add per element (2·16·L)
    per_sample = 4 * (16 * L + 3) + 16 + 4 + 16 + 16 + 2 * 16 * L
    assert sympy.expand(im.analysis.flops - B * per_sample) == 0
    assert im.analysis.transcendentals == 4 * B
    assert im.model(None, {"B": 2, "L": 8}).params == _numel(gn) == 32


def test_a_constant_pad_moves_bytes():
    class Pad(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.pad(x, (1, 2))

    with warnings.catch_warnings():
        warnings.simplefilter("error", SymroofWarning)
        im = from_torch(Pad(), (torch.randn(3, 16),), ({0: Dim("B")},))
    # by hand: no FLOPs; 16 fp32 read and 19 written a row
    assert im.analysis.flops == 0
    assert sympy.expand(im.analysis.bytes - 4 * (16 + 19) * B) == 0


def test_pools_whose_windows_tile_the_input_and_one_that_overlaps():
    dims = ({0: Dim("B"), 2: Dim("H", min=8, max=512), 3: Dim("W", min=8, max=512)},)
    h2, w2 = (sympy.floor(symroof.dim_symbol(d) / 2) for d in "HW")
    for layer, per_window in ((torch.nn.MaxPool2d(2), 4), (torch.nn.AvgPool2d(2), 4 + 1)):
        im = from_torch(layer.eval(), (torch.randn(2, 4, 16, 16),), dims)
        assert not im.warnings
        # by hand: per window of 2x2 over 4 channels, 4 combines (leading), a mean's divide one more;
        # the windows' elements read (a row past the last window is not), the pooled result written
        assert sympy.simplify(im.analysis.flops - per_window * 4 * B * h2 * w2) == 0
        assert sympy.simplify(im.analysis.bytes - 4 * (4 * 4 * B * h2 * w2 + 4 * B * h2 * w2)) == 0
    with pytest.warns(SymroofWarning, match=r"not costed: max_pool2d\.default x 1"):
        from_torch(torch.nn.Sequential(torch.nn.MaxPool2d(3, 2), torch.nn.ReLU()), (torch.randn(2, 4, 16, 16),), dims)


def test_dropout_in_training_mode_is_named_not_free():
    """Eval-mode dropout is the identity (free); in training mode it draws and applies a
    mask, which no rule costs: named, never counted as a free view."""
    class Dropped(torch.nn.Module):
        def forward(self, x):
            return torch.nn.functional.dropout(x, 0.1, training=True) * 2

    with pytest.warns(SymroofWarning, match=r"not costed: dropout\.default x 1"):
        im = from_torch(Dropped(), (torch.randn(3, 5),), ({0: Dim("B")},))
    assert not any("dropout" in line for line in im.text.splitlines() if line.startswith("# free"))
    eval_im = from_torch(torch.nn.Sequential(torch.nn.Dropout(0.1), torch.nn.ReLU()).eval(), (torch.randn(3, 5),),
                         ({0: Dim("B")},))
    assert not eval_im.warnings and "dropout x 1" in eval_im.text
