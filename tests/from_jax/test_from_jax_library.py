"""Library models nobody here wrote, through from-jax (issue 30): transformers' Flax GPT-2,
LLaMA, BERT and ViT (4.57, the last release with Flax classes), flax.nnx and equinox
blocks, a causal LM's loss and its gradient, and a decode step with a KV cache passed
in. Each is built from a small configuration with random weights (nothing downloaded),
imported with symbolic dims (its params given whole: `{"p": model.params}`), and checked:
the dims survive, FLOPs agree with XLA's lowered module at two shapes once the stated
conventions are explained, and `symroof model` on the program counts the model's own
parameter tree.

Needs JAX, flax, equinox and transformers: each test skips where its library is absent."""

from __future__ import annotations

import functools
import warnings

import pytest
import sympy

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

import symroof  # noqa: E402

B, T = symroof.dim_symbol("B"), symroof.dim_symbol("T")


def _size(tree) -> int:
    return sum(leaf.size for leaf in jax.tree_util.tree_leaves(tree))


def _agrees(im, *shapes: dict[str, int]) -> None:
    for at in shapes:
        check = im.xla(at)
        assert check["flops_agree"], check
        assert check["transcendentals_agree"], check
        assert check["bytes_within_lowered"], check


@functools.cache
def _hf(name: str):
    transformers = pytest.importorskip("transformers")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # transformers' deprecation of its Flax classes
        if name == "gpt2":
            return transformers.FlaxGPT2LMHeadModel(transformers.GPT2Config(
                n_layer=2, n_embd=64, n_head=4, vocab_size=128, n_positions=64), seed=0)
        if name == "llama":
            return transformers.FlaxLlamaForCausalLM(transformers.LlamaConfig(
                num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                intermediate_size=128, vocab_size=128, max_position_embeddings=64), seed=0)
        if name == "bert":
            return transformers.FlaxBertModel(transformers.BertConfig(
                num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, vocab_size=128,
                max_position_embeddings=64), seed=0)
        return transformers.FlaxViTModel(transformers.ViTConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32,
            patch_size=8), seed=0)


@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_transformers_flax_text_models(name):
    model = _hf(name)
    out = "logits" if name != "bert" else "last_hidden_state"

    def forward(p, ids):
        return getattr(model(ids, params=p), out)

    # a causal LM slices its position mask to min(n_positions, T): T is bounded for JAX's shapes
    im = symroof.from_jax(forward, {"p": model.params, "ids": "int32[B, T]"}, "p", most={"T": 64})
    assert im.analysis.flops.free_symbols == {B, T}
    assert "# holds for T <= 64" in im.text
    with pytest.raises(symroof.SpecError, match="T = 65 breaks T <= 64"):
        im.xla({"B": 1, "T": 65})
    _agrees(im, {"B": 2, "T": 8}, {"B": 1, "T": 13})
    declared = im.model(None, {"B": 1, "T": 4}).params
    if name == "llama":
        # Flax LLaMA closes over its rotary sin/cos table (positions x head_dim): an array the
        # function closes over, declared as a param as from-jax declares each
        cfg = model.config
        assert declared == _size(model.params) + cfg.max_position_embeddings * cfg.hidden_size // 4 * 4
    else:
        assert declared == _size(model.params)
    # the leading term by hand: every matrix weight used once per token, 2 FLOPs a weight
    cfg = model.config
    d, layers = cfg.hidden_size, cfg.num_hidden_layers
    head = 2 * d * cfg.vocab_size if name != "bert" else 0
    inner = getattr(cfg, "intermediate_size", None) or 4 * d
    kv = d * getattr(cfg, "num_key_value_heads", cfg.num_attention_heads) // cfg.num_attention_heads
    mlp = (3 if name == "llama" else 2) * d * inner
    per_layer = 2 * (2 * d * d + 2 * d * kv + mlp)
    matrix = im.analysis.flops - im.analysis.flops_vector
    assert sympy.expand(matrix - B * T * (layers * per_layer + head) - layers * 4 * d * B * T * T) == 0


def test_transformers_flax_vit_with_its_patch_convolution():
    model = _hf("vit")
    im = symroof.from_jax(lambda p, x: model(x, params=p).last_hidden_state,
                          {"p": model.params, "x": "fp32[B, 3, 32, 32]"}, "p")
    assert not [w for w in im.warnings if "not costed" in w]
    assert "conv_" in im.text and im.analysis.flops.free_symbols == {B}
    _agrees(im, {"B": 2}, {"B": 3})
    assert im.model(None, {"B": 1}).params == _size(model.params)
    # the patch embedding by hand: 16 patches of 8x8x3, each against 32 outputs
    conv = next(st_ for st_ in im.model(None, {"B": 1}).analysis.steps if st_.step.kind == "conv")
    assert conv.flops == 2 * 16 * 8 * 8 * 3 * 32


def test_a_causal_lm_loss_and_its_gradient():
    model = _hf("gpt2")

    def loss(p, ids):
        logits = model(ids, params=p).logits[:, :-1]
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits), ids[:, 1:, None], axis=-1)
        return -jnp.mean(picked)

    # the shifted targets need T - 1 >= 1 to be decided: T is bounded below too
    bounds = {"most": {"T": 64}, "least": {"T": 2}}
    forward = symroof.from_jax(loss, {"p": model.params, "ids": "int32[B, T]"}, "p", **bounds)
    grad = symroof.from_jax(jax.grad(loss), {"p": model.params, "ids": "int32[B, T]"}, "p", **bounds)
    for im in (forward, grad):
        assert im.analysis.flops.free_symbols == {B, T}
        _agrees(im, {"B": 2, "T": 8}, {"B": 1, "T": 11})
    # the backward pass costs about twice the forward's matrix work (6N against 2N per token)
    ratio = (grad.model(None, {"B": 4, "T": 64}).analysis.flops
             / forward.model(None, {"B": 4, "T": 64}).analysis.flops)
    assert 2.5 < ratio < 3.5


def test_a_decode_step_with_a_kv_cache():
    model = _hf("gpt2")
    cache = model.init_cache(2, 32)
    # the cache's leaves written as shapes: its batch and length symbolic
    shapes = jax.tree_util.tree_map(lambda x: "int32[]" if x.ndim == 0 else "fp32[B, S, 4, 16]", cache)

    def step(p, cache, ids, pos, mask):
        out = model(ids, params=p, past_key_values=cache, position_ids=pos, attention_mask=mask)
        return out.logits, out.past_key_values

    im = symroof.from_jax(step, {"p": model.params, "cache": shapes, "ids": "int32[B, 1]", "pos": "int32[B, 1]",
                                 "mask": "int32[B, S]"}, "p", most={"S": 64})
    s = symroof.dim_symbol("S")
    flops = im.analysis.flops
    assert flops.free_symbols == {B, s}
    # attention over the cache by hand: per layer and sequence, scores and values 2·64 per cached key each
    assert sympy.expand(sympy.Poly(flops - im.analysis.flops_vector, B, s).coeff_monomial(B * s)
                        - 2 * 2 * 2 * 64) == 0
    _agrees(im, {"B": 2, "S": 32}, {"B": 3, "S": 17})


def test_flax_nnx_attention_and_mlp():
    nnx = pytest.importorskip("flax.nnx")

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.attn = nnx.MultiHeadAttention(4, 32, qkv_features=32, decode=False, rngs=rngs)
            self.up, self.down = nnx.Linear(32, 64, rngs=rngs), nnx.Linear(64, 32, rngs=rngs)

        def __call__(self, x):
            x = x + self.attn(x)
            return x + self.down(nnx.gelu(self.up(x)))

    graph, state = nnx.split(Block(nnx.Rngs(0)))
    im = symroof.from_jax(lambda s, x: nnx.merge(graph, s)(x), {"s": state, "x": "fp32[B, T, 32]"}, "s")
    assert im.analysis.flops.free_symbols == {B, T}
    _agrees(im, {"B": 2, "T": 8}, {"B": 1, "T": 5})
    assert im.model(None, {"B": 1, "T": 2}).params == _size(state)
    matrix = im.analysis.flops - im.analysis.flops_vector
    assert sympy.expand(matrix - B * T * 2 * (4 * 32 * 32 + 2 * 32 * 64) - 2 * 2 * 32 * B * T * T) == 0


def test_equinox_layers():
    eqx = pytest.importorskip("equinox")
    key = jax.random.key(0)
    mlp = eqx.nn.MLP(16, 8, 32, 2, key=key)
    attn = eqx.nn.MultiheadAttention(4, 32, key=key)
    for model, shape, hand in (
            (mlp, "fp32[B, 16]", lambda: B * 2 * (16 * 32 + 32 * 32 + 32 * 8)),
            (attn, "fp32[B, T, 32]", lambda: B * T * 2 * 4 * 32 * 32 + B * 2 * 2 * 32 * T * T)):
        params, static = eqx.partition(model, eqx.is_array)
        im = symroof.from_jax(_batched(eqx, static), {"p": params, "x": shape}, "p")
        matrix = im.analysis.flops - im.analysis.flops_vector
        assert sympy.expand(matrix - hand()) == 0
        dims = {str(d) for d in im.analysis.flops.free_symbols}
        at = [{k: v for k, v in sizes.items() if k in dims} for sizes in ({"B": 3, "T": 4}, {"B": 2, "T": 7})]
        assert im.model(None, at[0]).params == _size(params)
        _agrees(im, *at)


def _batched(eqx, static):
    """An equinox layer's call, vmapped over the batch, its parameters an argument."""
    def run(p, x):
        layer = eqx.combine(p, static)
        if isinstance(layer, eqx.nn.MultiheadAttention):
            return jax.vmap(lambda s: layer(s, s, s))(x)
        return jax.vmap(layer)(x)
    return run


def test_the_command_bounds_a_dim(tmp_path, capsys):
    from symroof.cli.command import main
    module = tmp_path / "sliced.py"
    # a table of 64 rows sliced to T: JAX must know T <= 64 to trace it
    module.write_text("import jax.numpy as jnp\nfrom jax import lax\n"
                      "def f(x):\n    return x * lax.dynamic_slice_in_dim(jnp.arange(64.0), 0, x.shape[1])[None, :]\n")
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[B, T]"]) == 2
    assert "inconclusive" in capsys.readouterr().err
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[B, T]", "--max", "T=64", "--set", "B=2,T=8",
                 "--xla"]) == 0
    out = capsys.readouterr().out
    assert "FLOPs: agree" in out and any(line.split()[:2] == ["flops", "16"] for line in out.splitlines())
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[B, T]", "--max", "Q=64"]) == 2
    assert "a bound on Q, which no shape has" in capsys.readouterr().err
    # sizes outside the bound: the function computes otherwise there, so the program is refused, in one line
    assert main(["from-jax", f"{module}:f", "--shapes", "x=fp32[B, T]", "--max", "T=64", "--set", "B=2,T=65"]) == 2
    err = capsys.readouterr().err
    assert "T = 65 breaks T <= 64" in err and len(err.strip().splitlines()) == 1
