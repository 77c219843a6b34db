"""Factories for `symroof from-torch tests/data/torch_models.py:NAME` and
tests/from_torch/test_from_torch_library.py: transformers' PyTorch GPT-2 and LLaMA built
from small configurations (2 layers, hidden 64, 4 heads, vocab 128; random weights,
nothing downloaded; eval mode), with either attention implementation, a decode step
reading a KV cache, and a small CNN.

Each factory takes no argument and returns `(module, args, dynamic_shapes)`, as
`torch.export.export` takes them and the from-torch command expects: each dynamic axis a
`torch.export.Dim` named as the dim is in the program. T is bounded by the model's
position table (64): both models slice a fixed table to T."""

from __future__ import annotations

import warnings

import torch
from torch.export import Dim

VOCAB, HIDDEN, HEADS, LAYERS, POSITIONS = 128, 64, 4, 2, 64


def gpt2_model(attention: str = "sdpa", use_cache: bool = False) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel
    torch.manual_seed(0)
    config = GPT2Config(n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS, vocab_size=VOCAB, n_positions=POSITIONS,
                        use_cache=use_cache, attn_implementation=attention)
    return GPT2LMHeadModel(config).eval()


def llama_model(attention: str = "sdpa", use_cache: bool = False) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    config = LlamaConfig(num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS,
                         num_key_value_heads=2, intermediate_size=128, vocab_size=VOCAB,
                         max_position_embeddings=POSITIONS, use_cache=use_cache, attn_implementation=attention)
    return LlamaForCausalLM(config).eval()


def _prefill(model: torch.nn.Module) -> tuple[torch.nn.Module, tuple, tuple]:
    return model, (torch.randint(0, VOCAB, (2, 8)),), ({0: Dim("B"), 1: Dim("T", max=POSITIONS)},)


def gpt2() -> tuple[torch.nn.Module, tuple, tuple]:
    return _prefill(gpt2_model("sdpa"))


def gpt2_eager() -> tuple[torch.nn.Module, tuple, tuple]:
    return _prefill(gpt2_model("eager"))


def llama() -> tuple[torch.nn.Module, tuple, tuple]:
    return _prefill(llama_model("sdpa"))


def llama_eager() -> tuple[torch.nn.Module, tuple, tuple]:
    return _prefill(llama_model("eager"))


class DecodeStep(torch.nn.Module):
    """One token per sequence reading a KV cache of P positions: the cache's tensors are the
    step's arguments (k and v per layer, [B, kv heads, P, head dim]), rebuilt into
    transformers' DynamicCache inside forward, so that export sees plain tensors."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor, k0: torch.Tensor, v0: torch.Tensor, k1: torch.Tensor,
                v1: torch.Tensor) -> torch.Tensor:
        from transformers import DynamicCache
        cache = DynamicCache()
        for layer, (k, v) in enumerate(((k0, v0), (k1, v1))):
            cache.update(k, v, layer)
        return self.model(input_ids=ids, past_key_values=cache, use_cache=True).logits


def _decode(model: torch.nn.Module, kv_heads: int) -> tuple[torch.nn.Module, tuple, tuple]:
    past = 5
    cache = tuple(torch.randn(2, kv_heads, past, HIDDEN // HEADS) for _ in range(2 * LAYERS))
    batch, positions = Dim("B"), Dim("P", min=2, max=POSITIONS - 1)
    kv_dims = tuple({0: batch, 2: positions} for _ in cache)
    return DecodeStep(model), (torch.randint(0, VOCAB, (2, 1)), *cache), ({0: batch}, *kv_dims)


def gpt2_decode() -> tuple[torch.nn.Module, tuple, tuple]:
    return _decode(gpt2_model("sdpa", use_cache=True), HEADS)


def llama_decode() -> tuple[torch.nn.Module, tuple, tuple]:
    return _decode(llama_model("sdpa", use_cache=True), 2)


class CNN(torch.nn.Module):
    """Two convolutions (padded; strided and grouped), batch norm in eval mode, ReLU, max
    and average pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.c2 = torch.nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=4)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.nn.functional.max_pool2d(torch.relu(self.bn(self.c1(x))), 2)
        x = torch.relu(self.c2(x))
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(x, 1).flatten(1))


def cnn() -> tuple[torch.nn.Module, tuple, tuple]:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = CNN().eval()
    dims = {0: Dim("B"), 2: Dim("H", min=8, max=512), 3: Dim("W", min=8, max=512)}
    return model, (torch.randn(2, 3, 16, 16),), (dims,)
