"""The kinds of parallelism are declared once (models/kinds.py): every alias parses to its
kind, each builds its own axis, and a kind made up here, declared and nothing else, is taken
by `--strategy` and costed as the kind it copies."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

import symroof
from symroof.cli.command import main
from symroof.errors import SpecError
from symroof.models import kinds, strategy_costs
from symroof.models.strategies import parse_strategy

SIZES = {"B": 16, "T": 4096}


@pytest.mark.parametrize("kind", kinds.KINDS, ids=lambda k: k.name)
def test_every_name_and_alias_parses_to_its_kind(kind: kinds.Kind) -> None:
    for word in (kind.name, *kind.aliases, kind.name.upper()):
        found = parse_strategy(f"{word}=4")
        assert list(found) == [kind.name]
        assert found[kind.name] == ((kind.axis, 4, "ici"),)


def test_each_kind_builds_its_own_axes() -> None:
    # the ZeRO stages run data parallelism's axes, tp-nosp tp's: a strategy takes only one of each
    kept = [k for k in kinds.KINDS if not (k.data and k.zero) and not (k.splits_width and not k.sequence_parallel)]
    for letters in ([k.axis for k in kept], [k.outer for k in kept]):
        assert len(set(letters)) == len(letters)
    assert {k.axis for k in kinds.KINDS if k.data} == {kinds.rest().axis}
    assert not {k.axis for k in kinds.KINDS} & {k.outer for k in kinds.KINDS}


def test_the_unknown_kind_message_names_every_kind() -> None:
    with pytest.raises(SpecError) as err:
        parse_strategy("xp=4")
    assert str(err.value) == ("unknown strategy 'xp': dp (data), zero1, zero2, fsdp (zero3), tp (tensor), tp-nosp, "
                              "pp (pipeline), sp (sequence) or ep (expert)")


def test_a_kind_refused_outside_its_modes_says_why() -> None:
    for kind in kinds.KINDS:
        for mode in set(kinds.MODES) - set(kind.modes):
            with pytest.raises(SpecError, match=f"^{kind.name} "):
                symroof.model("llama-3-8b", mode, "h100", strategy=f"{kind.name}=2")


@pytest.fixture
def copied(monkeypatch: pytest.MonkeyPatch) -> kinds.Kind:
    """A made-up kind: data parallelism under another name, declared and nothing else."""
    dp = kinds.kind("dp")
    made = replace(dp, name="xdp", aliases=("extra",), called="", listed=False)
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS, made))
    return made


def _cli(*argv: str) -> dict:
    out, err = io.StringIO(), io.StringIO()
    assert main(list(argv), out=out, err=err) == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_a_declared_kind_is_taken_and_costed_as_the_kind_it_copies(copied: kinds.Kind) -> None:
    assert parse_strategy("extra=4,tp=2") == {"xdp": (("X", 4, "ici"),), "tp": (("Y", 2, "ici"),)}
    assert "or xdp" in kinds.known()
    for name in ("llama-3-8b", "mixtral-8x7b"):
        for mode in ("train", "prefill"):
            made = symroof.model(name, mode, "h100", SIZES, strategy="xdp=4,tp=2")
            dp = symroof.model(name, mode, "h100", SIZES, strategy="dp=4,tp=2")
            assert made.quantities() == dp.quantities()
            assert made.t_step == dp.t_step
            assert [(c.kind, c.axes, c.bytes, c.count, c.time) for c in strategy_costs.collectives(made)] == \
                [(c.kind, c.axes, c.bytes, c.count, c.time) for c in strategy_costs.collectives(dp)]
            ours = strategy_costs.thresholds(made, {"xdp": "X", "tp": "Y"})
            theirs = strategy_costs.thresholds(dp, {"dp": "X", "tp": "Y"})
            assert ours.pop("xdp") == theirs.pop("dp") and ours == theirs
            assert ours["step"]["per_chip_tokens"] is not None  # a batch threshold: it splits the batch
    # and from the command, as the user gives it
    made_json = _cli("model", "llama-3-8b", "--chip", "h100", "--strategy", "extra=4,tp=2", "--set", "B=16",
                     "--json")
    dp_json = _cli("model", "llama-3-8b", "--chip", "h100", "--strategy", "dp=4,tp=2", "--set", "B=16", "--json")
    assert made_json.pop("strategy") == {"xdp": "X", "tp": "Y"}
    assert dp_json.pop("strategy") == {"dp": "X", "tp": "Y"}
    assert made_json["threshold"].pop("xdp") == dp_json["threshold"].pop("dp")
    assert made_json == dp_json and dp_json["collectives"]
    # one data kind a strategy: the made-up copy is one of them
    with pytest.raises(SpecError, match="dp and xdp each split the batch"):
        parse_strategy("dp=2,xdp=2")
