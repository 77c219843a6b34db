"""The op kinds: each written form parses and prints back, each kind's count against a
hand derivation and a brute-force count, its unit and lowering, and fused blocks."""

from __future__ import annotations

import itertools
import math
import warnings

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from symroof import HardwareError, SpecError, SymroofWarning, analyze, parse
from symroof.ops import KINDS, WORDS

B, D, F, N, S, T, H, V = sympy.symbols("B D F N S T H V", positive=True, integer=True)

ATTENTION = """
  bf16[B, N, S, H] *_H bf16[B, N, T, H] -> fp32[B, N, S, T]
  softmax_T fp32[B, N, S, T] -> bf16[B, N, S, T]
  bf16[B, N, S, T] *_T bf16[B, N, T, H] -> bf16[B, N, S, H]
"""
FUSED_ATTENTION = "fused {" + ATTENTION + "}"

FORMS = [
    "bf16[B, D] + bf16[B, D] -> bf16[B, D]",
    "bf16[B, D] - bf16[D] -> bf16[B, D]",
    "bf16[B, D] / bf16[B, D] -> bf16[B, D]",
    "bf16[B, D] * bf16[D] -> bf16[B, D]",
    "max(bf16[B, D], bf16[B, D]) -> bf16[B, D]",
    "gelu(bf16[B, F]) -> bf16[B, F]",
    "exp(fp32[B, D]) -> fp32[B, D]",
    "bf16[B, D] -> fp32[B]",
    "max_D bf16[B, D] -> bf16[B]",
    "mean_D bf16[B, D] -> bf16[B]",
    "argmax_D bf16[B, D] -> int32[B]",
    "cumsum_T fp32[B, T] -> fp32[B, T]",
    "cumlogsumexp_T fp32[B, T] -> fp32[B, T]",
    "softmax_T bf16[B, N, S, T] -> bf16[B, N, S, T]",
    "rmsnorm_D bf16[B, T, D] -> bf16[B, T, D]",
    "rmsnorm_D bf16[B, T, D], bf16[D] -> bf16[B, T, D]",
    "layernorm_D bf16[B, T, D], bf16[D], bf16[D] -> bf16[B, T, D]",
    "gather bf16[V, D], int32[B, T] -> bf16[B, T, D]",
    "gather fp32[B, V], int32[B] -> fp32[B]",
    "scatter_add bf16[V, D], int32[B, T], bf16[B, T, D] -> bf16[V, D]",
    "scatter_add int32[B, T], bf16[B, T, D] -> bf16[V, D]",
    "scatter bf16[V, D], int32[B], bf16[B, D] -> bf16[V, D]",
    "pad bf16[B, T, D] -> bf16[B, 40, D]",
    "fp32[B, D] -> bf16[B, D]",
    "transpose(bf16[B, D]) -> bf16[D, B]",
    FUSED_ATTENTION,
]


@pytest.mark.parametrize("spec", FORMS)
def test_each_form_parses_prints_back_and_renders(spec):
    program = parse(spec)
    assert parse(str(program)) == program
    a = analyze(spec, chip="h100")
    text = str(a)
    assert "FLOPs" in text and a.bytes != 0


# Hand derivations: (spec, FLOPs leading, FLOPs exact, transcendentals, HBM bytes)
E, R = B * N * S * T, B * N * S  # softmax elements and rows
M, Q = B * T * D, B * T  # norm elements and rows
CASES = [
    ("bf16[B, D] + bf16[B, D] -> bf16[B, D]", B * D, B * D, 0, 6 * B * D),
    ("bf16[B, D] * bf16[D] -> bf16[B, D]", B * D, B * D, 0, 4 * B * D + 2 * D),
    ("gelu(bf16[B, F]) -> bf16[B, F]", 8 * B * F, 8 * B * F, B * F, 4 * B * F),
    ("silu(fp32[B, F]) -> fp32[B, F]", 4 * B * F, 4 * B * F, B * F, 8 * B * F),
    ("bf16[B, D] -> fp32[B]", B * D, B * (D - 1), 0, 2 * B * D + 4 * B),
    ("max_D bf16[B, D] -> bf16[B]", B * D, B * (D - 1), 0, 2 * B * D + 2 * B),
    ("mean_D fp32[B, D] -> fp32[B]", B * D + B, B * D, 0, 4 * B * D + 4 * B),
    # one compare per term; the input read, the int32 indices written
    ("argmax_D bf16[B, D] -> int32[B]", B * D, B * (D - 1), 0, 2 * B * D + 4 * B),
    ("argmin_D fp32[B, D] -> int32[B]", B * D, B * (D - 1), 0, 4 * B * D + 4 * B),
    # a sequential scan: T - 1 combines per row; read once, written once
    ("cumsum_T fp32[B, T] -> fp32[B, T]", B * T, B * (T - 1), 0, 8 * B * T),
    ("cummax_T bf16[B, T, D] -> bf16[B, T, D]", B * T * D, B * D * (T - 1), 0, 4 * B * T * D),
    # one logaddexp per combine: 8 FLOPs (max, sub, abs, neg, add; the NaN guard's compare,
    # add, select) and 2 transcendentals (exp, log1p)
    ("cumlogsumexp_T fp32[B, T] -> fp32[B, T]", 8 * B * T, 8 * B * (T - 1), 2 * B * T, 8 * B * T),
    ("softmax_T bf16[B, N, S, T] -> bf16[B, N, S, T]", 4 * E, 4 * E - 2 * R, E, 4 * E),
    ("rmsnorm_D bf16[B, T, D] -> bf16[B, T, D]", 3 * M + 2 * Q, 3 * M + Q, Q, 4 * M),
    ("rmsnorm_D bf16[B, T, D], bf16[D] -> bf16[B, T, D]", 4 * M + 2 * Q, 4 * M + Q, Q, 4 * M + 2 * D),
    ("layernorm_D fp32[B, T, D] -> fp32[B, T, D]", 5 * M + 3 * Q, 5 * M + Q, Q, 8 * M),
    ("layernorm_D fp32[B, T, D], fp32[D], fp32[D] -> fp32[B, T, D]", 7 * M + 3 * Q, 7 * M + Q, Q,
     8 * M + 8 * D),
    # rows read (not the table), the int32 indices, the rows written
    ("gather bf16[V, D], int32[B, T] -> bf16[B, T, D]", 0, 0, 0, 2 * M + 4 * Q + 2 * M),
    # one element of each row, B a batch dim: the elements taken, the indices, the result
    ("gather fp32[B, V], int32[B] -> fp32[B]", 0, 0, 0, 4 * B + 4 * B + 4 * B),
    # jnp.take(x, ids, axis=1): the picked dim need not be the first
    ("gather fp32[B, V, D], int32[T] -> fp32[B, T, D]", 0, 0, 0, 4 * M + 4 * T + 4 * M),
    # in place: 1 FLOP per update; the rows touched read and written, the updates and indices read
    ("scatter_add bf16[V, D], int32[B, T], bf16[B, T, D] -> bf16[V, D]", M, M, 0, 2 * M + 4 * Q + 2 * M + 2 * M),
    # into new zeros: the whole [V, D] result written besides
    ("scatter_add int32[B, T], bf16[B, T, D] -> bf16[V, D]", M, M, 0, 6 * M + 4 * Q + 2 * V * D),
    ("scatter bf16[V, D], int32[B, T], bf16[B, T, D] -> bf16[V, D]", 0, 0, 0, 6 * M + 4 * Q),
    ("scatter_max fp32[V, D], int32[B], fp32[B, D] -> fp32[V, D]", B * D, B * D, 0, 12 * B * D + 4 * B),
    # the operand read once, the padded result written once
    ("pad bf16[B, T, D] -> bf16[B, S, D]", 0, 0, 0, 2 * M + 2 * B * S * D),
    ("fp32[B, D] -> bf16[B, D]", 0, 0, 0, 6 * B * D),
    # the attention block fused: Q, K, V read, the output written; the scores stay on chip
    (FUSED_ATTENTION, 4 * E * H + 4 * E, E * (2 * H - 1) + (4 * E - 2 * R) + R * H * (2 * T - 1), E,
     8 * B * N * S * H + 4 * B * N * T * H - 4 * B * N * S * H),
]


@pytest.mark.parametrize("spec, flops, exact, transcendentals, hbm", CASES)
def test_counts_match_hand_derivations(spec, flops, exact, transcendentals, hbm):
    a = analyze(spec)
    assert sympy.expand(a.flops - flops) == 0, a.flops
    assert sympy.expand(a.flops_exact - exact) == 0, a.flops_exact
    assert sympy.expand(a.transcendentals - transcendentals) == 0, a.transcendentals
    assert sympy.expand(a.bytes - hbm) == 0, a.bytes


def test_every_word_names_a_kind_and_every_kind_says_what_it_counts():
    for word, kinds in WORDS.items():
        for kind in kinds:
            assert kind.describe(word), (word, kind.name)
    assert set(KINDS) == {"contract", "conv", "elementwise", "unary", "select", "reduce", "softmax", "norm", "gather",
                          "copy", "cumulative", "scatter", "pad"}


# ---- units -----------------------------------------------------------------------------

def test_vector_work_runs_at_the_vector_figure_and_matrix_work_at_the_peak():
    a = analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]; gelu(bf16[B, F]) -> bf16[B, F]", chip="v5p")
    assert a.flops_vector == 8 * B * F
    # v5p: 4.59e14 bf16 on the MXU, 1.4e13 on the VPU (hardware.json); gelu: 8 FLOPs + 1 exp-like
    assert a.t_math == 2 * B * D * F / 459 / 10**12 + 9 * B * F / 14 / 10**12
    assert a.t_vector == 9 * B * F / 14 / 10**12
    # H100's CUDA cores: 6.7e13 fp32
    assert analyze("relu(bf16[B, F]) -> bf16[B, F]", chip="h100").t_math == B * F / 67 / 10**12


def test_a_chip_without_a_vector_figure_asks_for_one_never_uses_the_matrix_peak():
    # TPU v3: no source gives its vector unit, nor the ALU count to estimate it from (v4, v5e and
    # v6e carry estimates, tests/hardware/test_hardware_estimates.py)
    with pytest.raises(HardwareError, match="no vector-unit figure.*--vector-flops"):
        analyze("softmax_T bf16[B, T] -> bf16[B, T]", chip="tpu-v3").t_math
    with pytest.raises(HardwareError, match="no vector-unit figure"):
        analyze("bf16[B, D] + bf16[B, D] -> bf16[B, D]", peak_flops=1e14, hbm_bw=1e12).t_lower
    a = analyze("softmax_T bf16[B, T] -> bf16[B, T]", chip="v5e", vector_flops=1e13)
    assert a.t_math == 5 * B * T / 10**13
    # a matmul on the same chip needs no vector figure
    assert analyze("bf16[B, D] @ bf16[D, F] -> bf16[B, F]", chip="v5e").t_math != 0


def test_vector_flops_from_the_command_line():
    import io

    from symroof.cli.command import main
    out, err = io.StringIO(), io.StringIO()
    assert main(["analyze", "gelu(bf16[B=8, F=16]) -> bf16[B, F]", "--chip", "tpu-v3"], out=out, err=err) == 2
    assert "--vector-flops" in err.getvalue() and "Traceback" not in err.getvalue()
    out, err = io.StringIO(), io.StringIO()
    assert main(["analyze", "gelu(bf16[B=8, F=16]) -> bf16[B, F]", "--chip", "v5e", "--vector-flops", "1e13",
                 "--json"], out=out, err=err) == 0, err.getvalue()


def test_softmax_is_memory_bound_on_every_chip_with_a_vector_figure():
    a = analyze("softmax_T bf16[B, T] -> bf16[B, T]", chip="h100")
    assert a.intensity == 1  # 4 FLOPs per element over 2 bytes read and 2 written
    assert a.bound == "memory"


# ---- errors ----------------------------------------------------------------------------

@pytest.mark.parametrize("spec, message", [
    ("sofmax_T bf16[B, T] -> bf16[B, T]", "unknown op 'sofmax'; did you mean 'softmax'"),
    ("softmax bf16[B, T] -> bf16[B, T]", "softmax works over named dims: write softmax_D"),
    ("softmax_Q bf16[B, T] -> bf16[B, T]", "Q is not a dim of its input"),
    ("softmax_T bf16[B, T] -> bf16[B]", "softmax keeps its input's dims"),
    ("gelu(bf16[B, T], bf16[B, T]) -> bf16[B, T]", "gelu takes 1 operand, got 2"),
    ("gelu(bf16[B, T]) -> bf16[B]", "elementwise: its result keeps every input dim"),
    ("bf16[B, D] + bf16[B, D] @ bf16[D, F] -> bf16[B, F]", "in one statement"),
    ("sum_D bf16[B, D] -> bf16[B, D]", r"sum_D leaves \[B\]"),
    ("argmax_D bf16[B, D] -> int32[D]", r"argmax_D leaves \[B\]"),
    ("cumsum_{B,T} fp32[B, T] -> fp32[B, T]", "cumsum scans one dim"),
    # the subscripts as a spec writes them (ir.subscript): several dims braced, one bare
    ("sum_{B,D} bf16[A, B, D] -> bf16[A, B]", r"sum_\{B,D\} leaves \[A\]"),
    ("cumsum_{seq,B} fp32[B, seq] -> fp32[B, seq]", r"write cumsum_seq, not cumsum_\{seq,B\}"),
    ("softmax_seq bf16[B, T] -> bf16[B, T]", "softmax_seq: seq is not a dim of its input"),
    ("cumsum_T fp32[B, T] -> fp32[B]", "cumsum keeps its input's dims"),
    ("cumsum fp32[B, T] -> fp32[B, T]", "cumsum works over named dims"),
    ("mesh X=4; cumsum_T fp32[B, T_X] -> fp32[B, T_X]", "cumsum_T scans T, which is split over X"),
    ("gather bf16[V, D], int32[B, T] -> bf16[B, D]", r"gives \[B, T, D\]: the indices' dims, then the table's"),
    ("gather bf16[V, D], int32[B, T] -> bf16[B, T, V, D]", "the one its result lacks; the result has every one"),
    ("gather bf16[V, W, D], int32[B] -> bf16[B, D]", "the one its result lacks; the result lacks V, W"),
    ("scatter_add bf16[V, D], int32[B, T], bf16[B, D] -> bf16[V, D]", r"takes updates \[B, T, D\]"),
    ("scatter_add bf16[V, D], int32[B, T], bf16[B, T, D] -> bf16[V]", r"gives an array of its dims, not \[V\]"),
    ("scatter_add int32[B], bf16[B, D] -> bf16[D]", "the one its updates lack; they have every one of its dims"),
    ("scatter_add bf16[V, D], bf16[B, T, D] -> bf16[V, D]", "cannot have the dim they pick along .V.; with two"),
    ("scatter_D bf16[V, D], int32[B], bf16[B, D] -> bf16[V, D]", "scatter takes no subscript"),
    ("scatter_add bf16[V, D] -> bf16[V, D]", "scatter_add takes 2 to 3 operands, got 1"),
    ("pad bf16[B, T] -> bf16[B]", r"replaces 1 \(T\) with 0 \(none\)"),
    ("pad bf16[B, T] -> bf16[B, T2, F]", r"replaces 1 \(T\) with 2 \(T2, F\)"),
    ("rmsnorm_D bf16[B, D], bf16[F] -> bf16[B, D]", "F is not a dim of the input"),
    ("fused { mesh X=2 }", "cannot go inside a fused block"),
    ("fusd { gelu(bf16[B]) -> bf16[B] }", "did you mean 'fused'"),
])
def test_mistakes_are_one_line_errors_with_a_caret(spec, message):
    with pytest.raises(SpecError, match=message) as err:
        parse(spec)
    assert "^" in str(err.value)


# ---- sharding --------------------------------------------------------------------------

def moves(a):
    return [(m.move.kind, m.move.axes, m.bytes) for m in a.cost.moves]


def test_softmax_over_a_split_dim_all_reduces_two_statistics_per_row():
    a = analyze("mesh X=4; softmax_T bf16[B, T_X] -> bf16[B, T_X]")
    assert moves(a) == [("AllReduce", ("X",), 8 * B)]  # a max and a sum, fp32, per row
    assert a.flops == B * T  # 4 FLOPs per element, T/4 elements per row on each chip
    assert moves(analyze("mesh X=4; softmax_T bf16[B_X, T] -> bf16[B_X, T]")) == []


def test_norms_over_a_split_dim_all_reduce_their_row_statistics():
    a = analyze("mesh X=4; rmsnorm_D bf16[B, D_X], bf16[D] -> bf16[B, D_X]")
    assert moves(a) == [("AllReduce", ("X",), 4 * B)]
    assert a.bytes == 2 * B * D / 4 * 2 + 2 * D / 4  # the scale is sliced where it is replicated
    assert moves(analyze("mesh X=4; layernorm_D bf16[B, D_X] -> bf16[B, D_X]")) == [("AllReduce", ("X",), 8 * B)]


def test_a_reduction_over_a_split_dim_leaves_partial_results_to_all_reduce():
    a = analyze("mesh X=4; sum_D bf16[B, D_X] -> bf16[B]")
    assert moves(a) == [("AllReduce", ("X",), 2 * B)]
    assert moves(analyze("mesh X=4; max_D bf16[B_X, D] -> bf16[B_X]")) == []


def test_argmax_over_a_split_dim_all_reduces_each_rows_max_and_index():
    a = analyze("mesh X=4; argmax_D bf16[B, D_X] -> int32[B]")
    assert moves(a) == [("AllReduce", ("X",), 8 * B)]  # the max and its index, 2 fp32 values per row
    assert a.flops == B * D / 4  # each chip compares its quarter of each row
    assert moves(analyze("mesh X=4; argmax_D bf16[B_X, D] -> int32[B_X]")) == []
    with pytest.raises(SpecError, match="holds no partial sums"):  # an index is no partial sum
        parse("mesh X=4; argmax_D bf16[B, D_X] -> int32[B] {U_X}")


def test_a_scan_over_a_split_dim_is_an_error_that_names_the_gather():
    with pytest.raises(SpecError) as err:
        parse("mesh X=4; cumsum_T fp32[B, T_X] -> fp32[B, T_X]")
    assert "a prefix across the mesh, which symroof does not cost" in str(err.value)
    assert "gather it first: AllGather_X fp32[B, T_X] -> fp32[B, T] (4*B*T bytes per chip)" in str(err.value)
    # split along another dim: each chip scans its own rows
    a = analyze("mesh X=4; cumsum_T fp32[B_X, T] -> fp32[B_X, T]")
    assert moves(a) == [] and a.flops == B * T / 4
    # written split along T from a whole input: every chip scans all of T, then keeps its part
    a = analyze("mesh X=4; cumsum_T fp32[B, T] -> fp32[B, T_X]")
    assert moves(a) == [] and a.flops == B * T and sympy.expand(a.flops_exact - B * (T - 1)) == 0


def test_elementwise_needs_matching_layouts_and_says_how_to_fix_them():
    assert moves(analyze("mesh X=2, Y=2; bf16[B_X, D] + bf16[B_X, D] -> bf16[B_X, D]")) == []
    # one side replicated: it slices its part, for free
    assert moves(analyze("mesh X=2; bf16[B_X, D] + bf16[D] -> bf16[B_X, D]")) == []
    with pytest.raises(SpecError, match="laid out alike; gather one side first: AllGather_X"):
        parse("mesh X=2, Y=2; bf16[B_X, D] + bf16[B_Y, D] -> bf16[B_X, D]")


def test_a_vocab_sharded_embedding_all_reduces_its_rows():
    a = analyze("mesh X=4; gather bf16[V_X, D], int32[B, T] -> bf16[B, T, D]")
    assert moves(a) == [("AllReduce", ("X",), 2 * B * T * D)]
    assert moves(analyze("mesh X=4; gather bf16[V, D_X], int32[B, T] -> bf16[B, T, D_X]")) == []
    # a batch dim split alike in the table and the indices: each chip its rows, nothing moved
    a = analyze("mesh X=4; gather fp32[B_X, V], int32[B_X] -> fp32[B_X]")
    assert moves(a) == [] and a.bytes == 12 * B / 4


def test_a_scatter_of_a_split_batch_all_reduces_the_array_it_made():
    # data parallel: each chip adds its quarter of the updates into a [V, D] of its own
    a = analyze("mesh X=4; scatter_add int32[B_X, T], bf16[B_X, T, D] -> bf16[V, D]")
    assert moves(a) == [("AllReduce", ("X",), 2 * V * D)]
    assert a.flops == B * T * D / 4 and a.bytes == 6 * B * T * D / 4 + 4 * B * T / 4 + 2 * V * D
    # the array split along its rows: each chip writes the rows it holds, nothing moved
    assert moves(analyze("mesh X=4; scatter_add bf16[V_X, D], int32[B], bf16[B, D] -> bf16[V_X, D]")) == []


def test_a_pad_gathers_a_split_dim_it_pads_first():
    a = analyze("mesh X=4; pad bf16[B, T_X] -> bf16[B, S]")
    assert moves(a) == [("AllGather", ("X",), 2 * B * T)]
    assert a.bytes == 2 * B * T + 2 * B * S  # each chip pads the whole of T
    a = analyze("mesh X=4; pad bf16[B_X, T] -> bf16[B_X, S]")
    assert moves(a) == [] and a.bytes == (2 * B * T + 2 * B * S) / 4


# ---- fused blocks ----------------------------------------------------------------------

def test_fused_attention_keeps_the_scores_off_hbm():
    unfused, fused = analyze(ATTENTION), analyze(FUSED_ATTENTION)
    assert unfused.flops == fused.flops
    scores = 4 * E + 2 * E  # fp32 scores written and read, bf16 probabilities written and read
    assert sympy.expand(unfused.bytes - fused.bytes - 2 * scores) == 0
    assert [k.tensor for k in fused.on_chip] == ["fp32[B, N, S, T]", "bf16[B, N, S, T]"]


def test_an_intermediate_too_large_for_the_chip_is_said():
    a = analyze(FUSED_ATTENTION, chip="v5p").at(B=1, N=8, S=4096, T=4096, H=128)
    with pytest.warns(SymroofWarning, match="does NOT fit: a kernel must tile it"):
        kept = a.on_chip
    assert kept[0].fits is False and kept[0].store == "VMEM"
    small = analyze(FUSED_ATTENTION, chip="v5p").at(B=1, N=1, S=64, T=64, H=128)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert all(k.fits for k in small.on_chip)


def test_a_block_result_read_by_a_later_statement_outside_the_block_is_written():
    a = analyze("fused { bf16[B, D] @ bf16[D, F] -> fp32[B, F]; gelu(fp32[B, F]) -> bf16[B, F] }\n"
                "bf16[B, F] @ bf16[F, D] -> bf16[B, D]")
    block, after = a.cost.statements
    assert block.bytes == 2 * B * D + 2 * D * F + 2 * B * F  # x, W in; gelu's output out
    assert after.bytes_read == 2 * B * F + 2 * F * D


# ---- brute force -----------------------------------------------------------------------

class Counter:
    """Runs an op elementwise on small shapes, counting each arithmetic operation and
    each transcendental as it happens: an independent count."""

    def __init__(self):
        self.flops = self.transcendentals = 0

    def op(self, *values):
        self.flops += 1
        return 0.0

    def fn(self, value):
        self.transcendentals += 1
        return 0.0

    def reduce(self, values):
        values = list(values)
        for _ in values[1:]:
            self.op()
        return 0.0


def brute(word: str, shape: tuple[int, ...]) -> Counter:
    """The exact count of `word` over the last dim of `shape`, done element by element."""
    c = Counter()
    rows = list(itertools.product(*map(range, shape[:-1])))
    n = shape[-1]
    for _ in rows:
        x = [0.0] * n
        if word == "softmax":
            m = c.reduce(x)
            e = [c.fn(c.op(v, m)) for v in x]
            s = c.reduce(e)
            [c.op(v, s) for v in e]
        elif word == "rmsnorm":
            s = c.reduce([c.op(v, v) for v in x])
            r = c.fn(c.op(c.op(s, n), 1e-6))
            [c.op(v, r) for v in x]
        elif word == "layernorm":
            m = c.op(c.reduce(x), n)
            d = [c.op(v, m) for v in x]
            var = c.op(c.reduce([c.op(v, v) for v in d]), n)
            r = c.fn(c.op(var, 1e-6))
            [c.op(v, r) for v in d]
        elif word in ("sum", "max"):
            c.reduce(x)
        elif word == "mean":
            c.op(c.reduce(x), n)
    return c


@settings(max_examples=40, deadline=None)
@given(word=st.sampled_from(["softmax", "rmsnorm", "layernorm", "sum", "max", "mean"]),
       shape=st.lists(st.integers(1, 5), min_size=2, max_size=3).map(tuple))
def test_symbolic_counts_equal_brute_force_counts(word, shape):
    names = ["A", "C", "K"][:len(shape) - 1] + ["L"]
    dims = ", ".join(f"{n}={s}" for n, s in zip(names, shape))
    kept = ", ".join(names if word not in ("sum", "max", "mean") else names[:-1])
    spec = f"{word}_L fp32[{dims}] -> fp32[{kept}]"
    a = analyze(spec)
    c = brute(word, shape)
    assert a.flops_exact == c.flops and a.transcendentals == c.transcendentals, spec


def scan(word: str, shape: tuple[int, ...], axis: int) -> Counter:
    """A sequential prefix scan along `axis`, element by element: y[0] = x[0], then one
    combine of y[t - 1] with x[t] for each t (cumlogsumexp's, logaddexp as JAX writes it)."""
    c = Counter()
    others = [range(n) for j, n in enumerate(shape) if j != axis]
    for _ in itertools.product(*others):
        y = 0.0
        for _ in range(1, shape[axis]):
            if word == "cumlogsumexp":  # max(a, b) + log1p(exp(-|a - b|)), NaN-guarded
                d = c.op(y, 0.0)
                m, a = c.op(y, 0.0), c.op(c.op(d))  # max; neg(abs(d))
                y = c.op(m, c.fn(c.fn(a)))  # + log1p(exp(.))
                c.op(c.op(d, d), c.op(y, 0.0))  # isnan(d) (d != d), a + b, select
            else:
                y = c.op(y, 0.0)
    return c


@settings(max_examples=40, deadline=None)
@given(word=st.sampled_from(["cumsum", "cumprod", "cummax", "cummin", "cumlogsumexp"]),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), data=st.data())
def test_a_scans_exact_count_is_a_sequential_prefix_scan(word, shape, data):
    axis = data.draw(st.integers(0, len(shape) - 1))
    names = ["A", "C", "K"][:len(shape)]
    dims = ", ".join(f"{n}={s}" for n, s in zip(names, shape))
    spec = f"{word}_{names[axis]} fp32[{dims}] -> fp32[{', '.join(names)}]"
    a = analyze(spec)
    c = scan(word, shape, axis)
    assert a.flops_exact == c.flops, spec
    # leading: one combine for every element (the first of each row too), as a reduction's n
    assert a.flops == c.flops + math.prod(shape) // shape[axis] * (8 if word == "cumlogsumexp" else 1), spec
    elements = math.prod(shape)
    assert a.transcendentals == (2 * elements if word == "cumlogsumexp" else 0), spec
    assert a.bytes == 2 * 4 * elements, spec


@settings(max_examples=40, deadline=None)
@given(b=st.integers(1, 4), d=st.integers(1, 4), f=st.integers(1, 4))
def test_contraction_exact_count_is_the_loop_nest(b, d, f):
    c = Counter()
    for _i, _k in itertools.product(range(b), range(f)):
        c.reduce(c.op() for _j in range(d))  # d multiplies, d - 1 adds
    a = analyze(f"bf16[B={b}, D={d}] @ bf16[D, F={f}] -> bf16[B, F]")
    assert a.flops_exact == c.flops and a.flops == 2 * b * d * f


# ---- fusing never adds HBM traffic ----------------------------------------------------

STAGES = [
    "gelu(bf16[B, D]) -> bf16[B, D]",
    "softmax_D bf16[B, D] -> bf16[B, D]",
    "rmsnorm_D bf16[B, D], bf16[D] -> bf16[B, D]",
    "bf16[B, D] + bf16[B, D] -> bf16[B, D]",
    "bf16[B, D] @ bf16[D, D2] -> bf16[B, D2]",
    "bf16[B, D2] *_D2 bf16[D2, D] -> bf16[B, D]",
    "exp(bf16[B, D]) -> bf16[B, D]",
    "bf16[B, D] -> fp32[B, D]",
    "fp32[B, D] -> bf16[B, D]",
]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(STAGES), min_size=1, max_size=6))
def test_fusing_never_increases_hbm_bytes(stages):
    plain = analyze("\n".join(stages))
    fused = analyze("fused {\n" + "\n".join(stages) + "\n}")
    assert plain.flops == fused.flops and plain.transcendentals == fused.transcendentals
    difference = sympy.expand(plain.bytes - fused.bytes)
    assert all(coefficient >= 0 for coefficient in sympy.Poly(difference, *difference.free_symbols).coeffs()) \
        if difference.free_symbols else difference >= 0
    assert math.isfinite(float(difference.subs({s: 7 for s in difference.free_symbols})))


@pytest.mark.parametrize("spec", FORMS)
def test_every_output_works_for_every_kind(spec, tmp_path):
    """Text, JSON (strict, reading back), LaTeX, a plot and a claim, for each form."""
    import json

    from symroof.cli.command import main

    def run(*argv):
        import io
        out, err = io.StringIO(), io.StringIO()
        code = main(list(argv), out=out, err=err)
        assert code == 0, err.getvalue()
        return out.getvalue()

    sizes = {k: v for k, v in dict(B=8, D=64, F=128, N=4, S=32, T=32, H=16, V=1000).items()
             if k in parse(spec).dims}
    sized = ["--chip", "h100", "--set", ",".join(f"{k}={v}" for k, v in sizes.items())]
    assert "T_lower" in run("analyze", spec, *sized)
    data = json.loads(run("analyze", spec, *sized, "--json"), parse_constant=lambda c: pytest.fail(c))
    a = analyze(spec, chip="h100").at(**sizes)
    assert data["flops"] == a.value("flops") and data["transcendentals"] == a.value("transcendentals")
    assert [s["kind"] for s in data["steps"]] == [s.step.kind for s in a.steps]
    assert r"\begin{align*}" in run("latex", spec, "--chip", "h100")
    out = tmp_path / "roofline.png"
    if a.flops != 0:
        run("plot", "roofline", spec, *sized, "-o", str(out))
        assert out.stat().st_size > 1000
    else:  # no FLOPs (a cast, a gather, exp's transcendentals only): no point on a roofline, said
        from symroof.cli.command import main
        err = __import__("io").StringIO()
        assert main(["plot", "roofline", spec, *sized, "-o", str(out)], out=err, err=err) == 2
        assert "does no FLOPs" in err.getvalue()
    claims = tmp_path / "claims.yaml"
    claims.write_text(json.dumps([{"id": "kind", "spec": spec, "chip": {"name": "h100"}, "expect": {
        "transcendentals": sympy.sstr(analyze(spec).transcendentals),
        "flops_vector": sympy.sstr(analyze(spec).flops_vector)}}]))
    run("check", str(claims))


def test_fused_and_unfused_side_by_side():
    a = analyze(FUSED_ATTENTION, chip="v5p").at(B=1, N=1, S=64, T=64, H=128)
    plain = analyze(ATTENTION, chip="v5p").at(B=1, N=1, S=64, T=64, H=128)
    assert a.unfused.bytes == plain.bytes and a.unfused.t_lower == plain.t_lower
    assert a.unfused.bytes - a.bytes == 2 * (4 + 2) * 64 * 64  # the scores, fp32 and bf16, out and back
    assert "unfused" in str(a) and analyze(ATTENTION).unfused is None
    assert a.to_dict()["unfused"]["bytes"] == plain.value("bytes")


def test_the_docs_state_what_each_op_counts():
    """The conventions page's table is the kinds' own declarations (ops.table()), row for row."""
    from pathlib import Path

    from symroof.ops import table
    page = (Path(__file__).resolve().parents[2] / "docs" / "conventions.md").read_text(encoding="utf-8")
    for row in table():
        assert row in page, row


@pytest.mark.parametrize("spec", ["gelu_erf(bf16[B, F]) -> bf16[B, F]", "logsoftmax_T bf16[B, T] -> bf16[B, T]"])
def test_every_word_in_the_table_can_be_written(spec):
    program = parse(spec)
    assert parse(str(program)) == program and analyze(spec).transcendentals != 0
