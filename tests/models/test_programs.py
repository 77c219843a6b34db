"""The templates' programs as objects (models/templates.py, strategies.py, backward.py,
pipeline.py): printed, each is byte for byte the text the text-editing templates wrote
(their hashes, taken before the change, in golden_programs.json); resolved directly, each is
what its printed text reads as, costs and collectives alike; and a plan parses no spec text."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.hardware.machines import machine
from symroof.lang import syntax
from symroof.lang.parsing import parse_mesh
from symroof.lang.source import Program
from symroof.lang.structure import read_source, read_structured
from symroof.models import pipeline, planner, strategy_costs
from symroof.models.catalogue import get_model
from symroof.models.decls import Options
from symroof.models.strategies import parse_strategy
from symroof.models.templates import program, sharded, whole
from symroof.models.whole import Model

GOLDEN = Path(__file__).with_name("golden_programs.json")
MESHED = (("fsdp=XZ,tp=Y", "X=2,Z=2,Y=2"), ("dp=X,tp=Y", "X=2,Y=4@dcn"))
# One model of each shape the template writes (dense and MoE, GQA and MHA, gated and plain
# MLP, tied, learned positions, biases, QKV-only biases): the catalogue's other entries are
# these programs at other sizes, and each program here is read and costed many times over
COVERED = ("llama-2-7b", "llama-2-13b", "llama-2-70b", "llama-3-8b", "llama-3-70b", "llama-3-405b", "gemma-7b",
           "mixtral-8x7b", "gpt-3-175b", "qwen2.5-72b")


def _strategies(config: dict, mode: str) -> list[str]:
    out = ["", "dp=2", "tp=2", "dp=2,tp=4"]
    if mode == "train":
        out += ["fsdp=2", "zero1=2", "zero2=2", "fsdp=2,tp=2,sp=2", "dp=2,fsdp=2,tp=2", "sp=2", "fsdp=4,tp=8,dp=16"]
    if mode == "prefill":
        out += ["sp=2", "dp=2,sp=2,tp=2"]
    if config.get("moe"):
        out += ["ep=2", "ep=2,tp=2", "dp=2,ep=4"] + (["fsdp=2,ep=2,sp=2"] if mode == "train" else [])
    return out


def cases() -> dict[str, Program]:
    """Every models.json model in each mode, unsharded and under strategies of every kind
    (fsdp=4,tp=8,dp=16 past a 256-chip domain: axes on DCN), in int8/fp8 too, on a mesh of
    named axes, and a pipeline's two end stages."""
    out = {}
    for config in (get_model(name) for name in COVERED):
        for mode in ("train", "prefill", "decode"):
            for weights, kv in (("bf16", "bf16"), ("int8", "fp8")):
                given = _strategies(config, mode) if weights == "bf16" else \
                    ["", "dp=2,tp=2"] + (["fsdp=2"] if mode == "train" else [])
                for text in given:
                    kinds = parse_strategy(text, None, 256) if text else {}
                    out[f"{config['id']}|{mode}|{weights}|{kv}|{text}"] = program(config, mode, weights, kv, kinds)
                if weights == "bf16":
                    for text, mesh in MESHED:
                        if mode != "train" and "fsdp" in text:
                            continue
                        kinds = parse_strategy(text, parse_mesh(mesh))
                        out[f"{config['id']}|{mode}|{weights}|{kv}|{text}@{mesh}"] = \
                            program(config, mode, weights, kv, kinds)
            if mode == "train":
                for text in ("pp=2,dp=2", "pp=4,tp=2,fsdp=2", "pp=2,sp=2"):
                    stages = 2 if text.startswith("pp=2") else 4
                    if config["sizes"]["L"] % stages:
                        continue
                    for end in ("first", "last"):
                        out[f"{config['id']}|{mode}|pp|{text}|{end}"] = sharded(
                            pipeline.stage_program(whole(config, mode), end, stages), mode,
                            parse_strategy(text, None, None))
    return out


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@pytest.fixture(scope="module")
def built() -> dict[str, Program]:
    return cases()


def test_every_program_prints_the_text_the_templates_wrote(built):
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert set(built) == set(golden)
    changed = [key for key, p in built.items() if _hash(str(p)) != golden[key]]
    assert not changed, f"{len(changed)} programs print otherwise than before, e.g. {changed[:3]}"


def test_every_program_resolved_directly_is_its_text_read(built):
    refused = []
    for key, p in built.items():
        try:
            read = read_structured(str(p))
        except SpecError as err:  # refused as its text is, at the same line
            with pytest.raises(SpecError) as direct_err:
                read_source(p)
            assert str(direct_err.value) == str(err), key
            refused.append(key)
            continue
        direct = read_source(p)
        assert direct.program == read.program, key
        assert (direct.counts, direct.parts, direct.relations, direct.lets) == \
            (read.counts, read.parts, read.relations, read.lets), key
        assert [(d.name, d.dims, d.count, d.split) for d in direct.declared] == \
            [(d.name, d.dims, d.count, d.split) for d in read.declared], key
        assert (direct.backward is None) == (read.backward is None), key
        if direct.backward is not None and read.backward is not None:
            assert direct.backward.program == read.backward.program, key
            assert direct.backward.counts == read.backward.counts, key
    # only GPT-3's vocabulary, V = 50257 (prime to every tp size), which tp's both tables split
    assert refused and all(key.startswith("gpt-3-175b|") and "tp=" in key for key in refused)


@pytest.mark.parametrize("key", ["llama-3-8b|train|bf16|bf16|fsdp=2,tp=2,sp=2",
                                 "mixtral-8x7b|train|bf16|bf16|dp=2,ep=4", "gpt-3-175b|train|pp|pp=2,dp=2|last",
                                 "gemma-7b|decode|int8|fp8|dp=2,tp=2"])
def test_costs_and_collectives_are_the_texts(built, key):
    p = built[key]
    mode = key.split("|")[1]
    sizes = {"B": 8, ("S" if mode == "decode" else "T"): 2048}
    direct, read = (Model(s, machine("tpu-v5p"), sizes, Options(mode=mode))
                    for s in (read_source(p), read_structured(str(p))))
    assert direct.params == read.params and direct.params > 0
    assert direct.quantities() == read.quantities()
    assert strategy_costs.collectives(direct) == strategy_costs.collectives(read)


class _Counted:
    """The Lark parser, counting the texts it parses."""

    def __init__(self, parser):
        self.parser, self.texts = parser, []

    def parse(self, text: str):
        self.texts.append(text)
        return self.parser.parse(text)


def test_a_plan_and_a_named_model_parse_no_spec_text(monkeypatch):
    counted = _Counted(syntax._parser())
    monkeypatch.setattr(syntax, "_parser", lambda: counted)
    syntax._chunk.cache_clear()  # a chunk parsed before would not reach the parser
    found = planner.plan("llama-3-8b", "tpu-v5p", 16, 65536, "train", 4096)
    assert found.ranked and not counted.texts
    out = io.StringIO()
    assert main(["model", "mixtral-8x7b", "--train", "--chip", "tpu-v5p", "--strategy", "pp=2,dp=2,ep=2",
                 "--set", "B=64"], out=out, err=io.StringIO()) == 0
    assert "t_step" in out.getvalue() and not counted.texts
    # a program file is parsed, once
    printed = io.StringIO()
    assert main(["model", "llama-3-8b", "--print"], out=printed, err=io.StringIO()) == 0
    assert not counted.texts
    assert read_structured(printed.getvalue()).program == read_source(program(get_model("llama-3-8b"), "train")).program
    assert len(counted.texts) == len(set(counted.texts)) > 0


def test_a_template_refused_points_at_its_printed_line():
    err = io.StringIO()
    assert main(["model", "llama-3-70b", "--strategy", "tp=3"], out=io.StringIO(), err=err) == 2
    headline, line, caret = err.getvalue().rstrip("\n").split("\n")[-3:]
    assert headline.endswith("param Wq: K = 8 does not split evenly over Y (3 chips) (line 14, column 11)")
    assert line.strip().startswith("param Wq: bf16[D, K_Y, G, H], Wk: bf16[D, K_Y, H]")
    assert caret.index("^") == line.index("Wq")
