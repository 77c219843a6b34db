"""Reading a text in chunks (symroof/lang/chunks.py, each chunk parsed once and cached)
gives what reading it whole gives: the same statements, spans and all, or the same error."""

from __future__ import annotations

import io

import fuzz_strategies as fs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from symroof.errors import SpecError
from symroof.lang import syntax
from symroof.lang.chunks import chunks


def read(text: str, whole: bool = False):
    """The statements (or the error's words) read in chunks, or (whole) as one chunk."""
    saved = syntax.chunks
    if whole:
        syntax.chunks = lambda t: [(0, t)]
    try:
        return syntax.read(text)
    except SpecError as error:
        return str(error)
    finally:
        syntax.chunks = saved


# k specs of fuzzed text draw more than hypothesis's entropy budget for one input: the
# fuzzer's own tests suppress the same checks (test_fuzz_cli.CI)
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(r=st.randoms(use_true_random=False), k=st.integers(1, 4), sep=st.sampled_from(["\n", "\n\n# a note {\n", ";\n"]))
def test_reading_in_chunks_is_reading_whole(r, k, sep):
    text = sep.join(fs.gen_spec_text(r)[0] for _ in range(k))
    assert read(text) == read(text, whole=True)


def test_a_fused_block_over_several_lines_is_one_chunk():
    text = "mesh X=2\nfused {  # {\n  bf16[B, D] @ bf16[D, F] -> fp32[B, F]\n  gelu(fp32[B, F]) -> bf16[B, F]\n}\nx"
    assert [at for at, _ in chunks(text)] == [0, 9, len(text) - 1]
    text = text[:-2]
    got = read(text)
    assert got == read(text, whole=True)
    assert got[1].statements[1].span[0] == text.index("gelu")


def test_the_programs_a_plan_reads_read_the_same_and_errors_point_where_they_did(monkeypatch):
    from symroof.cli.command import main
    from symroof.lang import structure
    texts = []
    saved = structure.read_source

    def keep(p, *args):  # a plan resolves its programs as objects: their text is what --print shows
        texts.append(str(p))
        return saved(p, *args)
    monkeypatch.setattr(structure, "read_source", keep)
    assert main(["plan", "llama-3-8b", "--train", "--chip", "tpu-v5p", "--chips", "16", "--batch", "65536",
                 "--context", "4096", "--top", "1"], out=io.StringIO(), err=io.StringIO()) == 0
    assert len(set(texts)) > 2  # its strategy families' programs (a mesh of sizeless axes), and those shown
    for text in dict.fromkeys(texts):
        assert read(text) == read(text, whole=True)
    broken = texts[-1].replace("->", "-> ->", 1)
    assert read(broken) == read(broken, whole=True) and "column" in read(broken)
