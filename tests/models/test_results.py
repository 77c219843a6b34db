"""What `symroof.model` and `symroof.plan` return: objects whose `to_dict()`, `str()` and
`_repr_latex_()` are what `symroof model` and `symroof plan` print (one output for the
command and Python), and whose formulas model is made only when a report asks for it."""

from __future__ import annotations

import io
import json
import re

import pytest

import symroof
from symroof.cli.command import main
from symroof.models.decls import MODEL_QUANTITY
from symroof.models.pipeline import PipelinedModel
from symroof.models.whole import Model


def printed(argv: list[str]) -> str:
    """What the command prints for `argv` (it must succeed), without the final newline."""
    out = io.StringIO()
    assert main(argv, out=out) == 0
    return out.getvalue().removesuffix("\n")


# symroof.model's arguments, and the command's for the same model
MODELS = {
    "train": (("llama-3-8b", "train", "h100", {"B": 4}), {},
              ["model", "llama-3-8b", "--train", "--chip", "h100", "--set", "B=4"]),
    "decode": (("llama-3-70b", "decode", "h100", {"B": 32, "S": 4096}), {},
               ["model", "llama-3-70b", "--decode", "--chip", "h100", "--set", "B=32,S=4096"]),
    "strategy": (("llama-3-8b", "train", "tpu-v5p", {"B": 16, "T": 4096}), {"strategy": "fsdp=16"},
                 ["model", "llama-3-8b", "--train", "--chip", "tpu-v5p", "--set", "B=16,T=4096",
                  "--strategy", "fsdp=16"]),
    "pipeline": (("llama-3-8b", "train", "h100", {"B": 64}), {"strategy": "pp=4,dp=2", "microbatches": 8},
                 ["model", "llama-3-8b", "--train", "--chip", "h100", "--set", "B=64", "--strategy", "pp=4,dp=2",
                  "--microbatches", "8"]),
    "symbolic chip": (("llama-3-8b", "prefill", "symbolic", {"B": 2, "T": 2048}), {"chips": 4},
                      ["model", "llama-3-8b", "--prefill", "--chip", "symbolic", "--set", "B=2,T=2048",
                       "--chips", "4"]),
}


@pytest.mark.parametrize("case", MODELS)
def test_a_model_gives_what_symroof_model_prints(case, katex):
    args, kwargs, argv = MODELS[case]
    m = symroof.model(*args, **kwargs)
    assert isinstance(m, PipelinedModel) == (case == "pipeline")
    found = m.to_dict()
    assert found == json.loads(printed([*argv, "--json"]))
    assert found["name"] and found["mode"] == args[1] and args[3].items() <= found["sizes"].items()
    text = printed(argv)
    assert str(m) == m.table() == text
    assert text.startswith(f"model                  {found['name']}, {args[1]} on ")
    # LaTeX: a title, a header, then a row for each quantity: its name, its formula where the sizes
    # hide one, its value at the sizes with its unit
    tex = m._repr_latex_()
    katex.check(tex)
    assert tex.startswith("$$\n\\begin{array}{l}\n\\text{" + found["name"]) and tex.endswith("\n\\end{array}\n$$")
    assert "\n\\begin{array}{lll}\n" in tex  # the title, then the quantities' array
    head, *rows = tex.split("\n")[4:-3]
    assert head.startswith(r"\text{quantity} & \text{formula} & \text{value at }")
    quantities = m.quantities()
    assert [row.split(" & ")[0] for row in rows] == ["\\text{" + name.replace("_", "\\_") + "}" for name in quantities]
    cells = {name: row.removesuffix(r" \\").split(" & ") for name, row in zip(quantities, rows)}
    assert cells["params"][1:] == ["", str(m.params)]  # no formula in B, T, S: the count, exact
    assert cells["flops"][1] and "B" in cells["flops"][1]  # the forward's FLOPs grow with the batch
    for name, (_, _, value) in cells.items():
        unit = MODEL_QUANTITY[name].unit
        assert value.endswith(rf"\ \text{{{unit}}}") if unit else r"\text" not in value


def test_days_to_train_as_the_command_gives_them():
    m = symroof.model("llama-3-8b", "train", "h100", {"B": 64}, chips=8)
    argv = ["model", "llama-3-8b", "--train", "--chip", "h100", "--chips", "8", "--set", "B=64",
            "--train-tokens", "15e12"]
    assert m.to_dict(total_tokens=15 * 10**12) == json.loads(printed([*argv, "--json"]))
    assert m.table(total_tokens=15 * 10**12) == printed(argv)
    assert "days_to_train" not in m.to_dict()


def test_the_formulas_model_is_made_only_when_a_report_asks(monkeypatch):
    made: list[Model] = []
    original = Model.__init__

    def counted(self, *args, **kwargs):
        made.append(self)
        original(self, *args, **kwargs)

    monkeypatch.setattr(Model, "__init__", counted)
    m = symroof.model("llama-3-8b", "train", "h100", {"B": 4})
    assert made == [m]
    m.quantities()
    assert made == [m] and "formulas" not in vars(m)
    m.to_dict()
    formulas = m.formulas
    assert formulas is not None and formulas in made and formulas.sizes == {}  # B and T left symbols
    assert formulas.about == m.about and formulas.options == m.options
    before = len(made)
    m.table(), m._repr_latex_()
    assert made.count(formulas) == 1 and len(made) == before + 1  # made once (and max_batch's once more)
    # a plan makes its strategies' models and no formulas for any of them
    made.clear()
    p = symroof.plan("llama-2-7b", "h100", 4, 8 * 4096, "train")
    assert made and all("B" in one.sizes for one in made)
    assert all("formulas" not in vars(c.model) for c in p.ranked)


def test_a_model_from_its_text_has_the_reports_too(katex):
    text = symroof.model("llama-3-8b", "decode").structured.program
    m = symroof.model(str(text), "decode", "h100", {"B": 8, "S": 1024})
    assert m.about == {"mode": "decode", "sizes": {"B": 8, "S": 1024}, "chip": "H100 SXM", "chips": 1, "defaulted": []}
    assert str(m).startswith("model                  a program, decode on 1 x H100 SXM; B = 8, S = 1024\n")
    assert m.to_dict()["kv_bytes"] == m.kv_bytes
    katex.check(m._repr_latex_())


ARGV = ["plan", "llama-3-8b", "--chip", "h100", "--chips", "8", "--batch", "1M", "--context", "4096"]


@pytest.fixture(scope="module")
def plan() -> symroof.models.planner.Plan:
    return symroof.plan("llama-3-8b", "h100", 8, 2**20, "train", context=4096)


def test_a_plan_gives_what_symroof_plan_prints(plan):
    command = json.loads(printed([*ARGV, "--json"]))
    assert isinstance(command.pop("seconds"), float)  # a run's own: to_dict() leaves it out
    assert plan.to_dict() == command
    assert list(plan.to_dict(timed=True)) == list(json.loads(printed([*ARGV, "--json"])))

    def untimed(text: str) -> str:
        return re.sub(r"strategies in \d+\.\d\d s:", "strategies in _ s:", text)

    assert untimed(str(plan)) == untimed(plan.table()) == untimed(printed(ARGV))
    assert untimed(plan.table(top=3)) == untimed(printed([*ARGV, "--top", "3"]))
    assert "    ... 7 more (--top 10)" in plan.table(top=3)


def test_a_plans_candidates_say_what_the_plan_says(plan, katex):
    command = plan.to_dict()
    assert [c.to_dict() for c in plan.ranked] == command["ranked"]
    aside = [c for c in plan.candidates if c.rejected]
    assert aside and [c.to_dict() for c in aside] == command["set_aside"]
    for c in aside:
        assert c.analysis is None and c.model is None
        tex = c._repr_latex_()
        katex.check(tex)
        assert tex == rf"$$\text{{{c.strategy}, set aside: {c.rejected}}}$$"
    best = plan.ranked[0]
    assert best.model is not None and best.analysis is best.model.analysis
    assert best.analysis.to_dict()["flops"] == best.model.analysis.to_dict()["flops"]
    tex = best._repr_latex_()
    katex.check(tex)
    assert tex == best.model._repr_latex_()


def test_a_plan_in_latex_ranks_its_strategies(plan, katex):
    tex = plan._repr_latex_()
    katex.check(tex)
    title, _, head, *rows = tex.split("\n")[2:-3]
    assert title.startswith(r"\text{") and str(plan.chips) in title and plan.machine.name in title
    assert head == r"\# & \text{strategy} & \text{t\_step} & \text{exposed} & \text{MFU} & \text{HBM per chip} " \
                   r"& \text{bound} \\ \hline"
    ranked = plan.ranked
    assert len(ranked) == len(rows) == 10  # all ten ranked: no "... more" row
    for k, (c, row) in enumerate(zip(ranked, rows), 1):
        cells = row.removesuffix(r" \\").split(" & ")
        assert cells[:2] == [str(k), rf"\text{{{c.text}}}"]
        assert float(cells[2].removesuffix(r"\ \text{s}")) == pytest.approx(float(c.figures["t_step"]), rel=1e-3)
        assert float(cells[3].removesuffix(r"\ \text{s}")) == \
            pytest.approx(float(c.figures["t_step_exposed"]), rel=1e-3)
        assert float(cells[4]) == pytest.approx(float(c.model.mfu), rel=1e-3) and 0 < float(cells[4]) <= 1
        assert float(cells[5].removesuffix(r"\ \text{GB}")) == \
            pytest.approx(float(c.figures["memory_per_chip"]) / 1e9, rel=1e-2)
        assert cells[6] == rf"\text{{{c.figures['bound']}}}"


def test_model_and_plan_print_latex_on_the_command_line(katex):
    """`symroof model --latex` and `symroof plan --latex`: what a notebook shows, the title
    first; KaTeX renders them; --json beside them is refused."""
    from symroof.cli.command import main
    model_argv = ["model", "llama-3-8b", "--decode", "--chip", "h100", "--set", "B=8,S=2048"]
    tex = printed([*model_argv, "--latex"])
    katex.check(tex)
    assert tex.rstrip("\n") == symroof.model("llama-3-8b", "decode", chip="h100", sizes={"B": 8, "S": 2048}) \
        ._repr_latex_()
    assert r"\text{LLaMA-3 8B, decode on 1 x H100 SXM; B = 8, S = 2048}" in tex
    tex = printed([*ARGV, "--latex", "--top", "3"])
    katex.check(tex)
    assert tex.count(r"\text{compute}") + tex.count(r"\text{HBM}") == 3 and r"\text{... " in tex
    for argv in ([*model_argv, "--latex", "--json"], [*ARGV, "--latex", "--json"]):
        err = io.StringIO()
        assert main(argv, out=io.StringIO(), err=err) == 2
        assert "--latex" in err.getvalue() and err.getvalue().count("\n") == 1


def test_a_plans_batch_in_sequences_is_its_batch_in_tokens():
    """`--sequences 256` is `--batch` of 256 x the context in training, and `--batch` itself in
    decode, where --batch counts sequences; the two together are refused."""
    from symroof.cli.command import main
    by_tokens = json.loads(printed([*ARGV, "--json"]))
    by_sequences = json.loads(printed([*ARGV[:6], "--sequences", "256", "--context", "4096", "--json"]))
    for found in (by_tokens, by_sequences):
        found.pop("seconds")
    assert by_sequences == by_tokens and by_tokens["batch"] == {"B": 256, "T": 4096}
    decode = ["plan", "llama-3-8b", "--decode", "--chip", "h100", "--chips", "8"]
    assert json.loads(printed([*decode, "--sequences", "64", "--json"]))["batch"] == \
        json.loads(printed([*decode, "--batch", "64", "--json"]))["batch"] == {"B": 64, "S": 8192}
    err = io.StringIO()
    with pytest.raises(SystemExit):
        main([*ARGV, "--sequences", "256"], out=io.StringIO(), err=err)


def test_chips_beside_a_strategy_say_what_it_spans():
    """`--chips 8 --strategy fsdp=8` is the same model as the strategy alone; a count its axes
    do not span is refused, naming both."""
    from symroof.cli.command import main
    argv = ["model", "llama-3-8b", "--train", "--chip", "h100", "--strategy", "fsdp=8", "--set", "B=8,T=4096"]
    assert printed([*argv, "--chips", "8"]) == printed(argv)
    assert symroof.model("llama-3-8b", "train", "h100", {"B": 8, "T": 4096}, strategy="fsdp=8", chips=8).to_dict() \
        == symroof.model("llama-3-8b", "train", "h100", {"B": 8, "T": 4096}, strategy="fsdp=8").to_dict()
    err = io.StringIO()
    assert main([*argv, "--chips", "16"], out=io.StringIO(), err=err) == 2
    assert "spans 8 chips, not the 16 of --chips" in err.getvalue()
