"""The importer's table of rules (symroof/from_jax/rules.py): one rule per primitive, the
counts of what it writes coming from ops/ (no second copy), and the program built as the
spec's objects, never read back from text, however often it is analysed.

JAX is optional: without it the import tests are skipped."""

from __future__ import annotations

import functools
import operator
from pathlib import Path

import pytest
import sympy

from symroof.from_jax import rules, scans, xla
from symroof.from_jax.convert import walk  # noqa: F401 (imports every family: the table whole)
from symroof.ops import cumulative, elementwise, unary

B, D = (sympy.Symbol(n, positive=True, integer=True) for n in ("B", "D"))


def test_one_table_one_rule_per_primitive():
    for name in (*rules.BINARY, *rules.UNARY, "dot_general", "scan", "while", "cond", "shard_map", "psum", "gather",
                 "scatter-add", "pad", "reduce_sum", "cumsum", "convert_element_type", "sharding_constraint"):
        assert name in rules.RULES, name
    with pytest.raises(ValueError, match="two rules for add"):
        rules.rule("add")(lambda ctx, eqn, env, depth: None)
    assert "sort" not in rules.RULES  # not costed: the one path that counts it for the warning


def test_the_counts_of_what_the_rules_write_are_the_ops_tables():
    assert set(rules.UNARY.values()) <= set(unary.FUNCTIONS)
    assert set(rules.BINARY.values()) - {"+", "-", "*", "/"} <= set(elementwise.FUNCTIONS)
    assert scans.COMBINE is cumulative.FUNCTIONS
    for primitive, word in rules.UNARY.items():  # what XLA's folds take as one FLOP: ops' count
        assert xla.one_flop(primitive) == (unary.FUNCTIONS[word][:2] == (1, 0)), primitive
    assert {p for p in rules.BINARY if not xla.one_flop(p)} == set(elementwise.TRANSCENDENTAL)


def test_what_xla_folds_follows_the_ops_table(monkeypatch: pytest.MonkeyPatch):
    assert xla.one_flop("neg")
    monkeypatch.setitem(unary.FUNCTIONS, "neg", (2, 0, "patched"))
    assert not xla.one_flop("neg")


# every unary primitive of a float the importer writes (not, population_count and clz take
# integers; is_finite gives a bool)
FLOAT_UNARY = [p for p in rules.UNARY if p not in ("not", "population_count", "clz", "is_finite")]


@pytest.fixture
def fresh_costs():
    """Statement costs computed anew (the cost of a statement is cached across programs)."""
    from symroof.roofline.cost import statement_cost
    statement_cost.cache_clear()
    yield
    statement_cost.cache_clear()


def test_every_unary_primitive_is_counted_by_the_ops_table(monkeypatch: pytest.MonkeyPatch, fresh_costs: None):
    jax = pytest.importorskip("jax")
    import symroof
    patched = {rules.UNARY[p]: (100 + k, k + 1, "patched") for k, p in enumerate(FLOAT_UNARY)}
    for word, counts in patched.items():
        monkeypatch.setitem(unary.FUNCTIONS, word, counts)

    def f(x):
        return functools.reduce(operator.add, (getattr(jax.lax, p)(x) for p in FLOAT_UNARY))

    im = symroof.from_jax(f, "x=fp32[B, D]")
    assert {st.primitive for st in im.converted.statements} == {*FLOAT_UNARY, "add"}
    a = im.analysis
    adds = len(FLOAT_UNARY) - 1
    assert sympy.simplify(a.flops - B * D * (sum(f for f, _, _ in patched.values()) + adds)) == 0
    assert sympy.simplify(a.transcendentals - B * D * sum(t for _, t, _ in patched.values())) == 0


def _count_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every program text the spec reader reads (the entry of lang's parse and read_structured)."""
    from symroof.lang import parsing, structure, syntax
    texts: list[str] = []

    def read(text, *args, **kwargs):
        texts.append(text)
        return syntax.read(text, *args, **kwargs)

    monkeypatch.setattr(structure, "read", read)
    monkeypatch.setattr(parsing, "read", read)
    return texts


def test_the_imported_program_is_built_as_objects_and_never_read(monkeypatch: pytest.MonkeyPatch):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    import symroof

    def f(x, ws):
        def step(h, w):
            return jnp.tanh(h @ w), None
        h, _ = jax.lax.scan(step, x, ws)
        return jax.lax.cond(h.sum() > 0, lambda h: jnp.exp(h) * 2.0, lambda h: h * 2.0, h)

    texts = _count_reads(monkeypatch)
    im = symroof.from_jax(f, "x=fp32[B, D]; ws=fp32[L, D, D]")
    assert "repeat L {" in im.text and "# cond: branch 1 of 2 written" in im.text  # (branch 1: the true one)
    im.model()
    _ = im.analysis
    im.xla({"B": 2, "D": 8, "L": 3})
    im.xla({"B": 4, "D": 8, "L": 5})
    im.model(None, {"B": 2})
    # the rules build the program's objects: no text is read, the cond's branches priced
    # from theirs, the program resolved from its own
    assert texts == []
    from symroof.lang import read_structured
    printed = read_structured(im.text)  # what is printed reads back as the program costed
    assert printed.program == im.structured.program and printed.counts == im.structured.counts
    assert len(texts) == 1


DATA = Path(__file__).resolve().parents[1] / "data"
# (file, function, a factory's arguments or None, shapes): a cond and a scan, attention's
# aliased dims, shard_map's collectives and local dims, jit's shardings, gathers and pads
IMPORTS = [("jax_blocks", "layers", None, "x=fp32[B, D]; ws=fp32[L, D, D]"),
           ("jax_blocks", "block", None, "x=bf16[B, T, D]; g1=bf16[D]; wq=bf16[D, N, H]; wk=bf16[D, N, H]; "
                                         "wv=bf16[D, N, H]; wo=bf16[N, H, D]; g2=bf16[D]; w_up=bf16[D, F]; "
                                         "w_down=bf16[F, D]"),
           ("jax_sharded", "collectives", None, "x=bf16[B, D]; w=bf16[D, F]"),
           ("jax_sharded", "megatron_mlp", (), "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]"),
           ("jax_sharded", "jit_mlp", (), "x=bf16[B, D]; w_up=bf16[D, F]; w_down=bf16[F, D]"),
           ("jax_sharded", "data_moves", None, "x=fp32[B, 8]; y=fp32[B, K]; u=fp32[B, 2]")]


@pytest.mark.parametrize("module, name, made, shapes", IMPORTS)
def test_the_printed_program_reads_back_as_the_objects_costed(module: str, name: str, made: tuple | None,
                                                              shapes: str):
    """parse(str(p)) == p: the text printed for the person is the program costed."""
    pytest.importorskip("jax")
    import warnings

    import symroof
    from symroof.from_jax.importer import load_function
    from symroof.lang import read_structured
    function = load_function(f"{DATA / module}.py:{name}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        im = symroof.from_jax(function if made is None else function(*made), shapes, params="w_up" if "w_up" in shapes
                              else ())
    built, printed = im.structured, read_structured(im.text)
    assert printed.program == built.program and printed.counts == built.counts
    assert printed.relations == built.relations and printed.lets == built.lets
    assert [(b.count, b.statements, b.parent) for b in printed.blocks] == \
        [(b.count, b.statements, b.parent) for b in built.blocks]
    assert [(d.name, d.dims, d.count, d.split) for d in printed.declared] == \
        [(d.name, d.dims, d.count, d.split) for d in built.declared]


def test_a_fork_writes_without_touching_the_context_it_came_from():
    """A cond's branch is tried in a fork: whatever it writes, the context is as it was."""
    import copy

    from symroof.from_jax.context import Context
    from symroof.from_jax.program import View
    ctx = Context()
    ctx.dim_name("B")
    x = View.whole("fp32", ("B",))
    ctx.out.closed[1] = ("fp32", ("B",), [x.array])
    ctx.remember(x, ["B"])
    before = copy.deepcopy(ctx)
    fork = ctx.fork()
    fork.labels(["B", "B"])  # an alias: a let, a name
    fork.tensor(x, ["B2"])  # a read, and a label the array had not (B is kept: it was written first)
    fork.written[x.array][0] = "B2"
    fork.out.closed[1][2].append(99)
    fork.emit(_statement(), "mul", 0)
    fork.out.skipped["sort"] += 1
    fork.splits[x.array] = ("X",)
    assert fork.out.lets and fork.reads[x.array] == 1 and fork.out.statements
    assert vars(ctx).keys() == vars(before).keys()
    for k in vars(ctx):
        if k not in ("folded", "out"):
            assert getattr(ctx, k) == getattr(before, k), k
    assert vars(ctx.out) == vars(before.out)


def _statement():
    from symroof.lang import source
    t = source.Tensor("fp32", (source.Dim("B"),))
    return source.Contraction((t, t), (source.Op("*"),), t)
