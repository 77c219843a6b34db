"""Convolutions through from-jax (issue 30): `conv_general_dilated` in any layout, N-d,
strided, padded and dilated, its gradient, and a small flax CNN; each against a hand
count and against XLA's cost analysis, which counts only the window positions that meet
the input (the check explains the padding's, exactly).

JAX is optional: without it this file is skipped."""

from __future__ import annotations

import functools

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
from jax import lax  # noqa: E402

import symroof  # noqa: E402
from symroof.from_jax.conv import VALID  # noqa: E402
from symroof.from_jax.importer import Imported  # noqa: E402


def s(name: str) -> sympy.Symbol:
    return symroof.dim_symbol(name)


def test_a_strided_valid_convolution_by_hand():
    im = symroof.from_jax(lambda x, k: lax.conv_general_dilated(x, k, (2, 2), "VALID"),
                          "x=fp32[B, 3, H, W]; k=fp32[8, 3, 3, 3]", "k")
    h2, w2 = sympy.floor((s("H") - 3) / 2) + 1, sympy.floor((s("W") - 3) / 2) + 1
    # by hand: 2·3·9 per output element, 8 output features
    assert sympy.simplify(im.analysis.flops - 2 * 27 * 8 * s("B") * h2 * w2) == 0
    check = im.xla({"B": 2, "H": 9, "W": 11})
    assert check["flops_agree"] and check["bytes_within_lowered"] and not any(check["explained_flops"].values())
    assert im.model(None, {"B": 1, "H": 5, "W": 5}).params == 8 * 27


def test_same_padding_is_dense_in_symroof_and_valid_in_xla():
    im = symroof.from_jax(lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                                                dimension_numbers=("NHWC", "HWIO", "NHWC")),
                          "x=fp32[B, H, W, C]; k=fp32[3, 3, C, F]")
    b, h, w, c, f = (s(n) for n in "BHWCF")
    assert sympy.expand(im.analysis.flops - 2 * b * h * w * c * f * 9) == 0
    at = {"B": 2, "H": 5, "W": 6, "C": 3, "F": 4}
    check = im.xla(at)
    # by hand, per dim: a 3-tap window over n positions with one pad each side misses 2 of its 3n pairs
    valid = (3 * 5 - 2) * (3 * 6 - 2)
    assert check["xla_lowered"]["flops"] == 2 * 2 * 3 * 4 * valid
    assert check["explained_flops"][VALID] == 2 * 2 * 3 * 4 * (valid - 9 * 5 * 6) and check["flops_agree"]


@st.composite
def _conv(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(1, 3))
    kernel = [draw(st.integers(1, 3)) for _ in range(n)]
    stride = [draw(st.integers(1, 2)) for _ in range(n)]
    dilation = [draw(st.integers(1, 2)) for _ in range(n)]
    padding = [(draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in range(n)]
    # every input at least the dilated window, so every output size is 1 or more
    size = [draw(st.integers(d * (k - 1) + 1, d * (k - 1) + 5)) for k, d in zip(kernel, dilation)]
    channels_last = draw(st.booleans())
    # g groups of c input and f output features each (g = 1: an ordinary convolution)
    b, c, f, g = draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 2))
    return n, kernel, stride, dilation, padding, size, channels_last, b, c, f, g


@settings(max_examples=20, deadline=None)
@given(case=_conv())
def test_any_convolution_agrees_with_xla(case):
    n, kernel, stride, dilation, padding, size, channels_last, b, c, f, g = case
    spatial = "DHW"[3 - n:]
    if channels_last:
        numbers = ("N" + spatial + "C", spatial + "IO", "N" + spatial + "C")
        x = ["B", *spatial, "GC"]
        k = [*map(str, kernel), "C", "GF"]
    else:
        numbers = ("NC" + spatial, "OI" + spatial, "NC" + spatial)
        x = ["B", "GC", *spatial]
        k = ["GF", "C", *map(str, kernel)]

    def f_(x, k):
        return lax.conv_general_dilated(x, k, stride, padding, rhs_dilation=dilation, dimension_numbers=numbers,
                                        feature_group_count=g)

    at = {"B": b, "C": c, "GC": g * c, "GF": g * f, **dict(zip(spatial, size))}
    # traced at these sizes: a dilated window's output size is max(H - 2, 0) in JAX's symbolic
    # shapes, which symroof does not write (the import says so, in one line)
    im = symroof.from_jax(f_, f"x=fp32[{', '.join(str(at.get(d, d)) for d in x)}]; "
                              f"k=fp32[{', '.join(str(at.get(d, d)) for d in k)}]")
    assert not im.warnings
    check = im.xla({})
    assert check["flops_agree"], check
    assert check["bytes_within_lowered"], check
    # the dense count by hand: 2 per multiply-add, every output element (g·f features), the whole
    # window, its group's c input features
    outs = [(m + lo + hi - d * (kk - 1) - 1) // st_ + 1 for m, (lo, hi), d, kk, st_ in
            zip(size, padding, dilation, kernel, stride)]
    dense = 2 * b * g * f * c
    for o, kk in zip(outs, kernel):
        dense *= o * kk
    assert check["symroof"]["flops"] == dense


def test_the_gradient_of_a_convolution():
    """jax.grad through a convolution: the input's gradient is a transposed convolution
    (the output gradient dilated by the stride), the kernel's a convolution of the input
    with it; each costed, and XLA's count matched once the padding is explained."""
    def loss(x, k):
        return jnp.sum(lax.conv_general_dilated(x, k, (2, 2), ((1, 1), (1, 1))) ** 2)

    im = symroof.from_jax(jax.grad(loss, argnums=(0, 1)), "x=fp32[2, 3, 9, 9]; k=fp32[4, 3, 3, 3]")
    assert not im.warnings
    assert sum(1 for st_ in im.converted.statements if "conv_" in st_.text) == 3  # forward, and two backward
    check = im.xla({})
    assert check["flops_agree"], check


def _imported(module: type) -> tuple[Imported, object]:
    """A flax CNN imported on an image of B x H x W x 3, its variables (each leaf named by its
    path) the parameters; and the variables' tree of shapes."""
    tree = jax.eval_shape(module().init, jax.random.key(0), jnp.zeros((1, 16, 16, 3)))
    leaves = "; ".join(f"v.{'.'.join(str(getattr(k, 'key', k)) for k in path)}=fp32[{', '.join(map(str, leaf.shape))}]"
                       for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0])
    return symroof.from_jax(lambda v, x: module().apply(v, x), "x=fp32[B, H, W, 3]; " + leaves, "v"), tree


def test_a_flax_cnn():
    nn = pytest.importorskip("flax.linen")

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(8, (3, 3), padding="SAME")(x))
            x = nn.relu(nn.Conv(16, (3, 3), strides=(2, 2), padding="VALID")(x))
            return nn.Dense(10)(jnp.mean(x, axis=(1, 2)))

    im, tree = _imported(CNN)
    assert not im.warnings
    b, h, w = s("B"), s("H"), s("W")
    h2, w2 = sympy.floor((h - 3) / 2) + 1, sympy.floor((w - 3) / 2) + 1
    convs = b * h * w * 2 * 9 * 3 * 8 + b * h2 * w2 * 2 * 9 * 8 * 16
    assert sympy.simplify(im.analysis.flops - im.analysis.flops_vector - convs - b * 2 * 16 * 10) == 0
    n_params = sum(leaf.size for leaf in jax.tree_util.tree_leaves(tree))
    assert im.model(None, {"B": 1, "H": 8, "W": 8}).params == n_params
    for at in ({"B": 2, "H": 16, "W": 16}, {"B": 1, "H": 11, "W": 13}):
        check = im.xla(at)
        assert check["flops_agree"] and check["bytes_within_lowered"], check


def test_a_grouped_convolution_by_hand():
    """G = 2 groups of Cg = 2 input features (the input's 4), M = 3 outputs each (the
    kernel's 6): the group a dim of all three, each output summing its group's 2 features."""
    im = symroof.from_jax(lambda x, k: lax.conv_general_dilated(x, k, (1, 1), ((1, 0), (0, 1)), feature_group_count=2),
                          "x=fp32[B, 4, H, W]; k=fp32[6, 2, 3, 3]", "k")
    assert not im.warnings
    (conv,) = (st_.text for st_ in im.converted.statements)
    # the input's 4 features as G x Cg, the kernel's 6 outputs as G x M, groups major
    assert conv.startswith("conv_{H,W} fp32[B, G, Cg, H, W], fp32[G, M, Cg, ") and "-> fp32[B, G, M, " in conv
    assert "G = 2, Cg = 2, M = 3" in im.text
    b, h, w = s("B"), s("H"), s("W")
    # one pad low on H, one high on W: each output dim is H + 1 - 3 + 1 = H - 1
    assert sympy.expand(im.analysis.flops - 2 * b * 6 * (h - 1) * (w - 1) * 9 * 2) == 0
    # bytes: the input, the kernel and the result once each (fp32)
    assert sympy.expand(im.analysis.bytes - 4 * (b * 4 * h * w + 6 * 2 * 9 + b * 6 * (h - 1) * (w - 1))) == 0
    check = im.xla({"B": 1, "H": 5, "W": 5})
    # XLA by hand: per dim 4 outputs x 3 taps, less the one (output, tap) pair on the pad: 11 each
    assert check["xla_lowered"]["flops"] == 2 * 1 * 6 * 2 * 11 * 11 and check["flops_agree"], check
    assert im.model(None, {"B": 1, "H": 5, "W": 5}).params == 6 * 2 * 9


def test_a_depthwise_convolution_and_a_channel_multiplier():
    """flax's depthwise Conv (feature_group_count = the input's features): one input
    feature per group, none summed but the window; with a multiplier of 2 outputs each."""
    nn = pytest.importorskip("flax.linen")
    b, h, w = s("B"), s("H"), s("W")
    for mult in (1, 2):
        conv = nn.Conv(4 * mult, (3, 3), padding="SAME", feature_group_count=4, use_bias=False)
        tree = jax.eval_shape(conv.init, jax.random.key(0), jnp.zeros((1, 8, 8, 4)))
        im = symroof.from_jax(functools.partial(lambda conv, k, x: conv.apply({"params": {"kernel": k}}, x), conv),
                              f"x=fp32[B, H, W, 4]; k=fp32[3, 3, 1, {4 * mult}]", "k")
        assert tree["params"]["kernel"].shape == (3, 3, 1, 4 * mult) and not im.warnings
        # by hand: every output element (4·mult features) times its 9 taps, one input feature
        assert sympy.expand(im.analysis.flops - 2 * b * h * w * 4 * mult * 9) == 0
        for at in ({"B": 2, "H": 5, "W": 6}, {"B": 1, "H": 7, "W": 3}):
            check = im.xla(at)
            # XLA: the pairs on the input only, (3n - 2) per dim of n (one pad each side)
            valid = (3 * at["H"] - 2) * (3 * at["W"] - 2)
            assert check["xla_lowered"]["flops"] == 2 * at["B"] * 4 * mult * valid and check["flops_agree"], check


def test_the_gradient_of_a_grouped_convolution():
    """jax.grad of a grouped, strided convolution: the input's gradient a grouped transposed
    convolution, the kernel's a batch-grouped convolution (batch_group_count = G: the
    input's batch axis is the features, split into the groups); each costed, none skipped."""
    def loss(x, k):
        return jnp.sum(lax.conv_general_dilated(x, k, (2, 2), ((1, 1), (1, 1)), feature_group_count=2) ** 2)

    im = symroof.from_jax(jax.grad(loss, argnums=(0, 1)), "x=fp32[2, 4, 7, 7]; k=fp32[6, 2, 3, 3]")
    assert not im.warnings
    convs = [st_ for st_ in im.converted.statements if "conv" in st_.text]
    assert len(convs) == 3 and sum("conv_transpose" in st_.text for st_ in convs) == 1
    # by hand (dense): the forward and the kernel's gradient 2·(2·6·4·4)·9·2 each (B = 2, O = 6,
    # 4x4 outputs, 9 taps, Cg = 2; the kernel's gradient sums B·(4x4) for each of 6·2·9 taps,
    # the same products); the input's gradient 2·(2·6·4·4)·9·2 too (each output gradient element
    # times 9 taps and its group's 2 input features)
    dense = 3 * 2 * (2 * 6 * 4 * 4) * 9 * 2
    check = im.xla({})
    assert check["flops_agree"], check
    assert im.analysis.flops - im.analysis.flops_vector == dense


def test_a_strided_same_convolution_of_symbolic_size():
    """SAME padding with stride 2: JAX's padding is itself a floor expression of H (its low
    half of the total), and XLA's count of the pairs on the input follows it, checked at
    even and odd sizes and at an input smaller than the window."""
    im = symroof.from_jax(lambda x, k: lax.conv_general_dilated(x, k, (2, 2), "SAME"),
                          "x=fp32[B, 3, H, W]; k=fp32[4, 3, 3, 3]")
    assert not im.warnings
    h2, w2 = sympy.ceiling(s("H") / 2), sympy.ceiling(s("W") / 2)
    for at in ({"B": 1, "H": 8, "W": 7}, {"B": 2, "H": 5, "W": 6}, {"B": 1, "H": 1, "W": 2}):
        b, h, w = at["B"], at["H"], at["W"]
        dense = 2 * b * 4 * 27 * int(h2.subs(s("H"), h)) * int(w2.subs(s("W"), w))
        check = im.xla(at)
        assert check["symroof"]["flops"] == dense and check["flops_agree"], check

        # XLA by hand: a total padding of max(0, (out - 1)·2 + 3 - n), its low half floor(total / 2);
        # the (output, tap) pairs whose input index falls inside [0, n)
        def pairs(n: int) -> int:
            out = -(-n // 2)
            low = max(0, (out - 1) * 2 + 3 - n) // 2
            return sum(1 for o in range(out) for i in range(3) if 0 <= 2 * o + i - low < n)
        assert check["xla_lowered"]["flops"] == 2 * b * 3 * 4 * pairs(h) * pairs(w)


def test_an_unstrided_valid_convolution_of_symbolic_size_says_what_it_assumes():
    """JAX's output size is max(H - 4, 0) (a window dilated to 5): written H - 4, the input
    taken to be no smaller than the window, and the warning says so."""
    with pytest.warns(symroof.SymroofWarning, match=r"is written (H4|W2): symroof's dims are at least 1"):
        im = symroof.from_jax(lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "VALID", rhs_dilation=(2, 1)),
                              "x=fp32[B, 3, H, W]; k=fp32[4, 3, 3, 3]")
    assert len(im.warnings) == 2 and "max(H - 4, 0) is written H4" in im.warnings[0]
    assert all("no smaller than the (dilated) window" in w for w in im.warnings)
    b, h, w = s("B"), s("H"), s("W")
    assert sympy.expand(im.analysis.flops - 2 * b * 4 * (h - 4) * (w - 2) * 27) == 0
    for at in ({"B": 1, "H": 8, "W": 7}, {"B": 2, "H": 5, "W": 6}):
        assert im.xla(at)["flops_agree"]


def test_a_flax_cnn_with_a_pool_and_a_strided_same_convolution():
    """A 2x2 max pool of stride 2 (a window that tiles its input) is a max over the window's
    dims (4 compares per output; XLA 3, explained); the strided SAME convolution after it
    is explained exactly."""
    nn = pytest.importorskip("flax.linen")

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.relu(nn.Conv(8, (3, 3), padding="SAME")(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = nn.relu(nn.Conv(16, (3, 3), strides=(2, 2), padding="SAME")(x))
            return nn.Dense(10)(jnp.mean(x, axis=(1, 2)))

    im, _ = _imported(CNN)
    assert not im.warnings
    assert any(st_.text.startswith("max_{") and st_.primitive == "reduce_window_max"
               for st_ in im.converted.statements)
    b, h, w = s("B"), s("H"), s("W")
    h2, w2 = sympy.floor(h / 2), sympy.floor(w / 2)  # the pool's output
    h3, w3 = sympy.ceiling(h2 / 2), sympy.ceiling(w2 / 2)  # the strided SAME conv's
    convs = 2 * b * h * w * 8 * 9 * 3 + 2 * b * h3 * w3 * 16 * 9 * 8
    for at in ({"B": 2, "H": 16, "W": 16}, {"B": 1, "H": 11, "W": 13}):
        sub = {s(k): v for k, v in at.items()}
        got = (im.analysis.flops - im.analysis.flops_vector).xreplace(sub)
        assert got == (convs + 2 * b * 16 * 10).xreplace(sub)
        check = im.xla(at)
        # the pool by hand: 4 per output element in symroof, XLA's window - 1 = 3
        pool = at["B"] * (at["H"] // 2) * (at["W"] // 2) * 8
        assert check["explained_flops"]["XLA counts T - 1 combines per output, symroof T"] <= -pool
        assert check["flops_agree"] and check["bytes_within_lowered"], check


@pytest.mark.parametrize("pool, window, bytes_read", [
    # a max pool tiling [B, H, W, 3]: the rows a window leaves (H odd) are not read
    ("max", (2, 2), lambda b, h, w: 4 * b * (h // 2 * 2) * (w // 2 * 2) * 3),
    ("avg", (2, 3), lambda b, h, w: 4 * b * (h // 2 * 2) * (w // 3 * 3) * 3),
])
def test_a_pool_that_tiles_its_input_by_hand(pool, window, bytes_read):
    nn = pytest.importorskip("flax.linen")
    f = getattr(nn, f"{pool}_pool")
    im = symroof.from_jax(functools.partial(lambda f, window, x: f(x, window, strides=window), f, window),
                          "x=fp32[B, H, W, 3]")
    assert not im.warnings
    (reduced,) = (st_ for st_ in im.converted.statements if st_.primitive.startswith("reduce_window"))
    taps = window[0] * window[1]
    for at in ({"B": 2, "H": 8, "W": 12}, {"B": 1, "H": 7, "W": 13}):
        outputs = at["B"] * (at["H"] // window[0]) * (at["W"] // window[1]) * 3
        check = im.xla(at)
        # XLA: window - 1 per output (+ the average's divide, 1 per output); symroof: window per output
        assert check["xla_lowered"]["flops"] == outputs * (taps - 1) + (outputs if pool == "avg" else 0)
        assert check["symroof"]["flops"] == outputs * taps + (outputs if pool == "avg" else 0)
        assert check["flops_agree"], check
    assert reduced.text.startswith(f"{'max' if pool == 'max' else 'sum'}_{{")
    # bytes by hand, fp32: the pool reads the windows' input and writes its result; the
    # average's divide reads that result and the scalar 9 and writes its own
    at = {"B": 1, "H": 7, "W": 13}
    sizes = {s(k): v for k, v in at.items()}
    outputs = at["B"] * (at["H"] // window[0]) * (at["W"] // window[1]) * 3
    reduce_bytes = bytes_read(at["B"], at["H"], at["W"]) + 4 * outputs
    divide_bytes = 4 * outputs * 2 + 4 if pool == "avg" else 0
    assert im.analysis.bytes.xreplace(sizes) == reduce_bytes + divide_bytes


def test_an_overlapping_pool_is_named_not_costed():
    nn = pytest.importorskip("flax.linen")
    with pytest.warns(symroof.SymroofWarning, match="reduce_window"):
        im = symroof.from_jax(lambda x: nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME") * 2.0,
                              "x=fp32[B, H, W, 3]")
    assert any(w.startswith("not costed: reduce_window_max x 1") for w in im.warnings)
    assert any("costed only where it tiles its input" in w for w in im.warnings)


def test_a_grouped_convolution_under_shard_map_is_named_not_costed():
    """Inside shard_map a grouped convolution is not costed yet: the warning says why and
    names it with its count, never a silent zero."""
    from jax.sharding import AbstractMesh
    from jax.sharding import PartitionSpec as P

    mesh = AbstractMesh((2,), ("x",))

    def f(x, k):
        return jax.shard_map(lambda x, k: lax.conv_general_dilated(x, k, (1, 1), "SAME", feature_group_count=2) * x,
                             mesh=mesh, in_specs=(P("x"), P()), out_specs=P("x"))(x, k)

    with pytest.warns(symroof.SymroofWarning, match="conv_general_dilated"):
        im = symroof.from_jax(f, "x=fp32[B, 6, 6, 6]; k=fp32[6, 3, 3, 3]")
    assert any(w.startswith("not costed: conv_general_dilated x 1") for w in im.warnings)
    assert any("feature_group_count 2, batch_group_count 1) is costed only with its operands whole" in w
               for w in im.warnings)
    assert im.xla({"B": 4})["not_costed"] == {"conv_general_dilated": 1}


@pytest.mark.parametrize("stride, padding, groups, dilation, shapes", [
    ((1, 1), "SAME", 1, (1, 1), "x=fp32[2, 3, 6, 5]; k=fp32[4, 3, 3, 3]"),
    ((2, 1), ((2, 1), (0, 1)), 3, (1, 2), "x=fp32[1, 6, 7, 8]; k=fp32[6, 2, 3, 2]"),
    ((2, 2), "SAME", 4, (1, 1), "x=fp32[2, 4, 7, 6]; k=fp32[8, 1, 3, 3]"),  # depthwise, a multiplier of 2
    ((1, 2), "VALID", 2, (2, 1), "x=fp32[1, 4, 9, 9]; k=fp32[2, 2, 2, 3]"),
])
def test_gradients_of_grouped_strided_dilated_convolutions_agree_with_xla(stride, padding, groups, dilation, shapes):
    """Each of a convolution's gradients (the input's: a transposed or a padded convolution,
    grouped as the forward; the kernel's: batch-grouped where the forward is grouped) is
    costed, and XLA's count is matched once the padding's pairs are explained."""
    def loss(x, k):
        y = lax.conv_general_dilated(x, k, stride, padding, rhs_dilation=dilation, feature_group_count=groups)
        return jnp.sum(y * y)

    im = symroof.from_jax(jax.grad(loss, argnums=(0, 1)), shapes)
    assert not im.warnings
    assert sum("conv" in st_.text for st_ in im.converted.statements) == 3
    check = im.xla({})
    assert check["flops_agree"] and check["bytes_within_lowered"], check


def _conv_pool(x, k):
    """A grouped (2 groups), strided SAME convolution, then a 2x2 max pool of stride 2."""
    y = lax.conv_general_dilated(x, k, (2, 2), "SAME", feature_group_count=2,
                                 dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


@functools.cache
def _conv_pool_symbolic() -> Imported:
    return symroof.from_jax(_conv_pool, "x=fp32[B, H, W, 4]; k=fp32[3, 3, 2, 6]", "k")


@settings(max_examples=12, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(3, 12), w=st.integers(3, 12))
def test_the_symbolic_convolution_and_pool_at_sizes_is_the_import_at_those_sizes(b, h, w):
    assert not _conv_pool_symbolic().warnings
    assert [st_.primitive for st_ in _conv_pool_symbolic().converted.statements] == \
        ["conv_general_dilated", "reduce_window_max"]
    symbolic = _conv_pool_symbolic().model(None, {"B": b, "H": h, "W": w})
    concrete = symroof.from_jax(_conv_pool, f"x=fp32[{b}, {h}, {w}, 4]; k=fp32[3, 3, 2, 6]", "k").model(None, {})
    for quantity in ("flops", "flops_exact", "bytes"):
        assert getattr(symbolic.analysis, quantity) == getattr(concrete.analysis, quantity), (b, h, w, quantity)
    assert symbolic.params == concrete.params == 3 * 3 * 2 * 6
