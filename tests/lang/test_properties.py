"""Properties by hypothesis: printing round-trips, random text only ever raises SpecError,
renaming dims changes nothing, and the symbolic counts equal a brute-force count over
the loop nest and over numpy arrays of the dtypes."""

import itertools
import string

import numpy as np
import pytest
import sympy
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.lark import from_lark
from lark import Lark

from symroof import SpecError, analyze, cost, parse
from symroof.ir import dim_symbol
from symroof.resources import resource_path

# Generated specs may be read two ways (literal sizes); the warning saying so is expected here.
pytestmark = pytest.mark.filterwarnings("ignore::symroof.errors.SymroofWarning")

NAMES = ["B", "D", "F", "N", "K", "Hd", "seq", "x", "T2", "Δ"]
DTYPES = ["bf16", "fp32", "int8", "fp8", "int4", "fp16", "fp64", "int32", "fp4"]


@st.composite
def contractions(draw):
    """A statement as parts: operands [(dtype, dims)], ops [(symbol, contracted)], output dims,
    output dtype. Dims are names or small literal sizes; most draws are valid specs."""
    n = draw(st.integers(1, 3))
    pool = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=5, unique=True))
    dim = st.one_of(st.sampled_from(pool), st.sampled_from(["2", "3"]))
    operands = []
    for _ in range(n):
        dims = draw(st.lists(dim, max_size=3, unique_by=lambda d: d if not d.isdigit() else object()))
        operands.append((draw(st.sampled_from(DTYPES)), dims))
    ops = []
    for k in range(1, n):
        left = set().union(*(set(d) for _, d in operands[:k])) - {"2", "3"}
        shared = sorted(left & set(operands[k][1]))
        style = draw(st.sampled_from(["*", "*_", "@"]))
        if style == "*_" and shared:
            ops.append(("*", tuple(draw(st.lists(st.sampled_from(shared), min_size=1, unique=True)))))
        elif style == "@" and k == 1 and operands[0][1]:
            # make it matmul-shaped: the right's first dim is the left's last
            last = operands[0][1][-1]
            rest = [d for d in operands[1][1] if d != last][:2]
            operands[1] = (operands[1][0], [last, *rest] if len(rest) < 2 else [rest[0], last, rest[1]])
            ops.append(("@", None))
        else:
            ops.append(("*", None))
    everything = list(dict.fromkeys(d for _, dims in operands for d in dims))
    if any(contract or symbol == "@" for symbol, contract in ops):
        named = {d for _, contract in ops if contract for d in contract}
        out = [d for d in everything if d not in named]
        out = draw(st.permutations(out))
    else:
        out = draw(st.lists(st.sampled_from(everything), unique=True)) if everything else []
    return operands, ops, list(out), draw(st.sampled_from(DTYPES))


def text(parts, rename=None):
    operands, ops, out, out_dtype = parts
    r = (lambda d: rename.get(d, d)) if rename else (lambda d: d)
    pieces = [f"{operands[0][0]}[{', '.join(map(r, operands[0][1]))}]"]
    for (symbol, contract), (dtype, dims) in zip(ops, operands[1:]):
        op = symbol if not contract else f"*_{{{','.join(map(r, contract))}}}"
        pieces += [op, f"{dtype}[{', '.join(map(r, dims))}]"]
    return " ".join(pieces) + f" -> {out_dtype}[{', '.join(map(r, out))}]"


def valid_programs():
    return contractions().map(text).filter(_parses)


def _parses(spec):
    try:
        parse(spec)
        return True
    except SpecError:
        return False


@settings(max_examples=200, deadline=None)
@given(contractions())
def test_print_parse_round_trip(parts):
    spec = text(parts)
    try:
        program = parse(spec)
    except SpecError:
        assume(False)
    assert parse(str(program)) == program


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_random_text_raises_only_spec_errors(junk):
    try:
        parse(junk)
    except SpecError as err:
        assert str(err).split("\n")[0]  # a message, always


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(from_lark(Lark(resource_path("symroof.lark").read_text(encoding="utf-8"), parser="lalr",
                      maybe_placeholders=True, propagate_positions=True)))
def test_grammatical_text_raises_only_spec_errors(spec):
    try:
        parse(spec)
    except SpecError as err:
        assert str(err).split("\n")[0]


@settings(max_examples=150, deadline=None)
@given(contractions(), st.randoms(use_true_random=False))
def test_renaming_dims_changes_no_count(parts, rnd):
    spec = text(parts)
    assume(_parses(spec))
    names = sorted({d for _, dims in parts[0] for d in dims if not d.isdigit()})
    fresh = rnd.sample([f"Q{i}" for i in range(20)], len(names))
    rename = dict(zip(names, fresh))
    before, after = cost(parse(spec)), cost(parse(text(parts, rename)))
    back = {dim_symbol(new): dim_symbol(old) for old, new in rename.items()}
    for key in ("flops", "flops_exact", "bytes_read", "bytes_written"):
        assert sympy.expand(getattr(after, key).xreplace(back) - getattr(before, key)) == 0


STORAGE = {8: np.float64, 4: np.float32, 2: np.float16, 1: np.int8}


def brute_force(step, sizes):
    """Run the step's loop nest on small integer arrays: count multiplies and adds, check
    the values against numpy's einsum, and count bytes from numpy arrays of the dtypes."""
    rng = np.random.default_rng(0)
    labels = list(dict.fromkeys(l for t in step.inputs for l in t.labels))
    arrays = [rng.integers(-3, 4, size=[sizes[l] for l in t.labels]) for t in step.inputs]
    result, ops = {}, 0
    for point in itertools.product(*(range(sizes[l]) for l in labels)):
        at = dict(zip(labels, point))
        value = None
        for term, array in zip(step.inputs, arrays):
            element = array[tuple(at[l] for l in term.labels)]
            if value is None:
                value = element
            else:
                value, ops = value * element, ops + 1
        key = tuple(at.get(l, 0) for l in step.output.labels)
        if key in result:
            result[key], ops = result[key] + value, ops + 1
        else:
            result[key] = value
    letters = {l: string.ascii_letters[i] for i, l in enumerate(dict.fromkeys(
        [*labels, *step.output.labels]))}
    out_labels = [l for l in step.output.labels if l in labels]
    expected = np.einsum(",".join("".join(letters[l] for l in t.labels) for t in step.inputs) + "->" +
                         "".join(letters[l] for l in out_labels), *arrays)
    for key, value in result.items():
        assert expected[tuple(k for k, l in zip(key, step.output.labels) if l in labels)] == value

    def nbytes(term):
        array = np.zeros([sizes[l] for l in term.labels], STORAGE[max(1, int(term.dtype.bytes))])
        return sympy.Rational(array.nbytes) * term.dtype.bytes / max(1, int(term.dtype.bytes))

    seen, read = set(), 0
    for term in step.inputs:
        if term.name is None or term.name not in seen:
            read += nbytes(term)
            seen.add(term.name)
    return ops, read, nbytes(step.output)


@settings(max_examples=120, deadline=None)
@given(contractions(), st.data())
def test_counts_equal_brute_force(parts, data):
    spec = text(parts)
    assume(_parses(spec))
    program = parse(spec)
    statement = program.statements[0]
    sizes = {}
    for label, size in statement.sizes:
        sizes[label] = int(size) if size.is_number else data.draw(st.integers(1, 3), label=label)
    counted = cost(program)
    subs = {dim_symbol(l): v for l, v in sizes.items() if not l[0].isdigit()}
    for step_cost in counted.steps:
        flops, read, written = brute_force(step_cost.step, sizes)
        assert step_cost.flops_exact.xreplace(subs) == flops
        assert step_cost.bytes_read.xreplace(subs) == read
        assert step_cost.bytes_written.xreplace(subs) == written


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 4000), st.integers(1, 4000), st.integers(1, 4000))
def test_threshold_separates_memory_from_compute(d, f, b):
    """At the exact threshold's sides, the bound flips as the threshold says."""
    a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", peak_flops=1.97e14, hbm_bw=8.2e11).at(D=d, F=f)
    t = a.threshold("B")
    bound = a.at(B=b).bound
    if t.exact is None:
        assert bound == "memory"
    elif b > t.exact:
        assert bound == "compute"
    elif b < t.exact:
        assert bound == "memory"


CHIPS = ["tpu-v5e", "h100", "b200", "tpu-v4p", "a100"]


@settings(max_examples=120, deadline=None)
@given(contractions(), st.sampled_from(CHIPS), st.data())
def test_any_spec_analyses_and_renders_or_says_why(parts, chip, data):
    """Through the whole engine: analysis on a chip, the table, the JSON, a limit and a
    threshold on every dim; the only exceptions allowed are symroof's own errors."""
    import json

    from symroof import SymroofError
    from symroof.render.json_report import to_json_dict
    from symroof.render.text import table
    spec = text(parts)
    assume(_parses(spec))
    a = analyze(spec, chip=chip)
    dims = list(a.dims)
    solve = data.draw(st.sampled_from(dims)) if dims else None
    limit = dims[:2] or None
    try:
        table(a, limit=limit, solve=solve)
        json.dumps(to_json_dict(a, limit=limit, solve=solve), allow_nan=False)
    except SymroofError as err:  # e.g. fp4 on a chip without an fp4 rate: said plainly
        assert "no figure" in str(err) or "lists no" in str(err) or "no vector-unit figure" in str(err), err


@pytest.mark.parametrize("spec", [
    "bf16[" + ", ".join(f"D{i}" for i in range(64)) + "] -> bf16[D0]",
    " * ".join(f"bf16[D{i}, D{i + 1}]" for i in range(63)) + " -> bf16[D0, D63]",
    "; ".join(f"bf16[B{i}, D{i}] @ bf16[D{i}, F{i}] -> bf16[B{i}, F{i}]" for i in range(85)),
])
def test_specs_at_the_limits_do_not_hang(spec):
    """The largest specs symroof accepts go through analysis and rendering. A hang guard,
    not a speed test (benchmarks/bench.py measures speed): minutes would mean a regression
    to polynomial GCDs."""
    import time

    from symroof.render.json_report import to_json_dict
    from symroof.render.text import table
    start = time.perf_counter()
    a = analyze(spec, chip="tpu-v5e", vector_flops=1.4e13)
    table(a, solve=a.dims[0])
    to_json_dict(a)
    assert time.perf_counter() - start < 60
