"""Check claims (a spec, chip figures, expected results) against what symroof derives.

A claim is a mapping in the format of the textbook cases file:

    id: matmul-critical-batch-v5e
    spec: "bf16[B, D] @ bf16[D, F] -> bf16[B, F]"
    chip: {name: tpu-v5e, peak_flops: 1.97e+14, hbm_bw: 8.2e+11}
    expect:
      flops: "2*B*D*F"                            # an expression in the spec's dims
      threshold: {var: B, op: ">", rule: 240.2439}
    tolerance: 0.001                              # relative, for numbers

The keys of `expect` are the quantities of `quantities.py` (those a claim may check),
`bound`, `threshold` and `intensity_limit`. Other keys of a claim: `given: {flops, bytes}`
(bare counts, no spec), `set: {D: 4096}` (dim sizes), `mesh: {X: 2}` (for sharded specs),
`chip: {ici_bw: 4.5e10, variant: ...}`, `book` (the figure the source prints, shown
beside the result), `quote`, `issue`; any other key is an error (`KEYS`), as is a claim
that cannot fail (a tolerance of 1 or more; a threshold with nothing to compare).
Expected expressions are read by `expr.read_expression`, never evaluated; numbers are
compared exactly, never as floats.
A claim that names a `model:` in place of a spec is checked by claims/models.py.

Examples:
    >>> r = check_case({"id": "dot", "spec": "bf16[N] *_N bf16[N] -> bf16[1]",
    ...                 "expect": {"flops_exact": "2*N - 1", "intensity_limit": {"as": ["N"], "expr": "1/2"}}})
    >>> r.ok, [o.key for o in r.outcomes]
    (True, ['flops_exact', 'intensity_limit'])
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sympy

from ..analysis import Analysis, analyze, roofline
from ..errors import SymroofError
from ..hardware.chips import list_chips
from ..lang.expr import read_expression
from ..roofline.quantities import QUANTITIES, available
from ..show import number, pretty

DEFAULT_TOLERANCE = 1e-9
# The quantities a claim may expect (quantities.py), and the keys that are not quantities.
QUANTITY_KEYS = tuple(q.name for q in QUANTITIES if q.check)
OTHER_KEYS = ("bound", "threshold", "intensity_limit")
# What can be checked with neither a spec nor counts: ratios of the chip's figures.
_MACHINE_ONLY = {q.name for q in QUANTITIES if q.check and not q.expression}
# The keys a spec claim may have: a typo (`sett:`, `tolerence:`) is an error, never a
# setting silently left at its default (models.KEYS are a model claim's).
KEYS = ("id", "spec", "given", "set", "mesh", "chip", "expect", "tolerance", "book", "quote", "issue")
_GIVEN_KEYS = ("flops", "bytes")
_LIMIT_KEYS = ("as", "expr")


@dataclass(frozen=True)
class Outcome:
    """One expected value against what symroof got."""

    key: str
    expected: object
    got: object
    ok: bool
    note: str = ""


@dataclass(frozen=True)
class CaseResult:
    """All outcomes of one claim, or the error that stopped it."""

    id: str
    outcomes: tuple[Outcome, ...] = ()
    error: str | None = None
    book: object = None
    line: int | None = None  # the line of the claims file the claim starts on, where it came from one

    @property
    def ok(self) -> bool:
        return self.error is None and all(o.ok for o in self.outcomes)


def check_case(case: object, hardware: str | os.PathLike | None = None) -> CaseResult:
    """Derive everything a claim expects and compare."""

    def outcomes(expect: Mapping, tolerance: float) -> list[Outcome]:
        assert isinstance(case, Mapping)  # `checked` answers any other claim with an error of its own
        unknown_keys(case, KEYS, "a claim", {"sizes": "set"})
        analysis = _analysis(case, expect, hardware)
        return [_outcome(analysis, str(key), value, tolerance, hardware) for key, value in expect.items()]

    return checked(case, outcomes)


def checked(case: object, outcomes: Callable[[Mapping, float], Iterable[Outcome]]) -> CaseResult:
    """The frame every kind of claim shares (claims/models.py checks models in it): its
    `expect` and `tolerance` read, `outcomes(expect, tolerance)` compared, and whatever
    stops it one ERROR line of its own, never a traceback."""
    if not isinstance(case, Mapping):
        return CaseResult("?", error=f"a claim is a mapping (id, spec, chip, expect), not {type(case).__name__} "
                                     f"{str(case)[:40]!r}")
    case_id = str(case.get("id", "?"))
    line = getattr(case, "line", None)  # models.Claim's
    try:
        expect = case.get("expect")
        if not isinstance(expect, Mapping) or not expect:
            raise SymroofError("'expect' must be a non-empty mapping of keys to expected values")
        tolerance = read_tolerance(case.get("tolerance", DEFAULT_TOLERANCE))
        found = tuple(outcomes(expect, tolerance))
    except SymroofError as err:
        return CaseResult(case_id, error=str(err).split("\n")[0], book=case.get("book"), line=line)
    except (ValueError, TypeError, AttributeError) as err:
        # a claim of the wrong shape (a list where a number goes, ...): its own row, not a crash
        return CaseResult(case_id, error=f"malformed claim: {err}", book=case.get("book"), line=line)
    return CaseResult(case_id, found, book=case.get("book"), line=line)


def unknown_keys(mapping: Mapping, known: tuple[str, ...], what: str, hints: Mapping[str, str] | None = None) -> None:
    """A key `known` lacks is an error naming it, with the nearest known key (or the hint
    `hints` gives for it: where the setting it means goes)."""
    unknown = [str(k) for k in mapping if k not in known]
    if not unknown:
        return
    said = []
    for key in unknown:
        hint = (hints or {}).get(key)
        close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        said.append(f"{key} (did you mean {hint or close[0]}?)" if hint or close else key)
    raise SymroofError(f"unknown key(s) {', '.join(said)} in {what}; known: {', '.join(known)}")


def compared(key: str, got: sympy.Basic | str, expected: object, tolerance: float,
             names: Iterable[str]) -> Outcome:
    """One value against its expected number (within the relative `tolerance`) or
    expression (in the dims `names`, exactly)."""
    return Outcome(key, expected, got, _matches(got, expected, tolerance, names))


def read_tolerance(value: object) -> float:
    """A relative tolerance: a number from 0 up to (not including) 1. Of 1 or more, 0 would
    pass for every expected value, and of infinity, anything would: a claim that cannot fail."""
    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise TypeError  # (YAML's other values: none reads as a number)
        tolerance = float(value)
    except (TypeError, ValueError, OverflowError):
        raise SymroofError(f"tolerance must be a number, not {value!r}") from None
    if not 0 <= tolerance < 1:
        raise SymroofError(f"tolerance must be zero or positive and below 1 (it is relative), not {value!r}: "
                           "at 1 or more a claim passes 0 for any expected value")
    return tolerance


def _analysis(case: Mapping, expect: Mapping, hardware: str | os.PathLike | None) -> Analysis:
    chip = case.get("chip") or {}
    if not isinstance(chip, Mapping):
        raise SymroofError("'chip' must be a mapping such as {name: tpu-v5e, hbm_bw: 8.2e11}")
    unknown = set(chip) - {"name", "peak_flops", "hbm_bw", "ici_bw", "variant", "dtype"}
    if unknown:
        raise SymroofError(f"unsupported chip figure(s) {sorted(unknown)} in this claim")
    # the claim's YAML values, checked where the machine is built
    figures: dict[str, Any] = dict(chip=chip.get("name"), peak_flops=chip.get("peak_flops"),
                                   hbm_bw=chip.get("hbm_bw"), variant=chip.get("variant"))
    if case.get("spec") is not None:
        mesh = case.get("mesh")
        if mesh is not None and not isinstance(mesh, (Mapping, str)):
            raise SymroofError("'mesh' must be a mapping such as {X: 2} or text such as 'X=2, Y=4@dcn'")
        return analyze(str(case["spec"]), values=case.get("set"), dtype=chip.get("dtype", "bf16"),
                       mesh=dict(mesh) if isinstance(mesh, Mapping) else mesh, ici_bw=chip.get("ici_bw"),
                       hardware=hardware, **figures)
    given = case.get("given")
    if given is None:
        if not set(expect) <= _MACHINE_ONLY:
            raise SymroofError("a claim needs a 'spec' or 'given: {flops, bytes}' "
                               f"(only {', '.join(sorted(_MACHINE_ONLY))} can be checked without)")
        given = {"flops": 1}  # the chip's figures alone; one FLOP puts its peak in play
    if not isinstance(given, Mapping):
        raise SymroofError("'given' must be a mapping such as {flops: 2e12, bytes: 1e9}")
    unknown_keys(given, _GIVEN_KEYS, "'given'")
    return roofline(given.get("flops", 0), given.get("bytes", 0), dtype=chip.get("dtype", "bf16"), hardware=hardware,
                    **figures)


def _outcome(a: Analysis, key: str, expected: object, tolerance: float, hardware: str | os.PathLike | None) -> Outcome:
    names = a.dims
    if key == "threshold":
        if a.machine is None and expected in ("none", None):
            return _never_on_any_chip(a, hardware)
        return _threshold_outcome(a, expected, tolerance)
    if key == "intensity_limit":
        if not isinstance(expected, Mapping) or "as" not in expected or "expr" not in expected:
            raise SymroofError("intensity_limit expects {as: [dims], expr: ...}")
        unknown_keys(expected, _LIMIT_KEYS, "intensity_limit")
        dims = expected["as"]
        # `as: D` or `as: "D, F"` is as good as `as: [D, F]`: never letters of one name
        dims = [d.strip() for d in dims.split(",")] if isinstance(dims, str) else [str(d) for d in dims]
        got = a.limit(*dims)
        return Outcome(key, expected["expr"], got, _matches(got, expected["expr"], tolerance, names),
                       f"as {', '.join(dims)} -> oo")
    if key == "bound":
        got = a.bound
        if isinstance(got, str) or str(expected) in ("compute", "memory", "balanced"):
            return Outcome(key, expected, got, str(got) == str(expected))
        return compared(key, got, expected, tolerance, names)
    known = available(a, QUANTITY_KEYS)
    if key not in known:
        if key in QUANTITY_KEYS:
            raise SymroofError(f"symroof does not derive '{key}' yet")
        raise SymroofError(f"unknown expected key '{key}' (known: {', '.join(known + list(OTHER_KEYS))})")
    return compared(key, getattr(a, key), expected, tolerance, names)


def _never_on_any_chip(a: Analysis, hardware: str | os.PathLike | None) -> Outcome:
    """`threshold: none` with no chip named: it must hold on every chip that has a peak for
    the compute dtype ("far below any chip's")."""
    free = a.free_dims
    if a.program is None or len(free) != 1:
        raise SymroofError("'threshold: none' without a chip needs a spec with one dim left free "
                           f"(this one has {', '.join(free) or 'none'}); name a chip, or give the "
                           "others sizes with 'set'")
    rates = {d.rate for d in a.compute_dtypes}
    failures, checked = [], 0
    for chip in list_chips(hardware):
        if any(chip.figure(f"peak_flops_per_s.{rate}") is None for rate in rates):
            continue
        checked += 1
        t = analyze(a.program, chip=chip, values=a.values).threshold(free[0])
        if t.op is not None:
            failures.append(chip.id)
    ok = checked > 0 and not failures
    note = f"never compute-bound on any of {checked} chips" if ok else f"compute-bound on {failures}"
    return Outcome("threshold", "none", "none" if ok else failures, ok, note)


def threshold_parts(expected: Mapping) -> None:
    """A threshold's parts: each known, and one at least to compare (with none, it would
    pass whatever the threshold is)."""
    for part in set(expected) - {"var", "op", "rule", "exact", "none", "network"}:
        raise SymroofError(f"unknown threshold part '{part}' (known: var, op, rule, exact, network, none)")
    if not isinstance(expected.get("none", False), bool):  # "false" is text, and text is true
        raise SymroofError(f"threshold's none is true or false, not {expected['none']!r}")
    if not expected.get("none") and not set(expected) & {"op", "rule", "exact", "network"}:
        raise SymroofError(f"threshold {{var: {expected.get('var')}}} checks nothing: give op, rule, exact, "
                           "network or none: true")


def _threshold_outcome(a: Analysis, expected: object, tolerance: float) -> Outcome:
    if expected in ("none", None):
        free = a.free_dims
        if len(free) != 1:
            raise SymroofError("'threshold: none' needs a spec with one dim left free (give the others "
                               "sizes with 'set'), or {var: DIM, none: true}")
        t = a.threshold(free[0])
        return Outcome("threshold", "none", t, t.op is None, t.reason or "")
    if not isinstance(expected, Mapping) or "var" not in expected:
        raise SymroofError("threshold expects 'none' or {var: B, op: '>', rule: ..., exact: ...}")
    threshold_parts(expected)
    t = a.threshold(expected["var"])
    if expected.get("none"):
        return Outcome("threshold", "none", t, t.op is None, t.reason or "")
    ok = "op" not in expected or expected["op"] == t.op
    notes = []
    for part in ("rule", "exact", "network"):
        if part not in expected:
            continue
        if part == "network":
            # against the network roof: its rule and its exact value must both match
            if t.network is None:
                ok, got = False, None
            else:
                got = t.network.exact if t.network.exact is not None else t.network.rule
                ok = ok and got is not None and _matches(got, expected[part], tolerance, a.dims) and \
                    (t.network.rule is None or _matches(t.network.rule, expected[part], tolerance, a.dims))
            notes.append(f"network: {t.var} {t.network.op if t.network else None} {_shown(got)}")
            continue
        got = getattr(t, part)
        good = got is not None and _matches(got, expected[part], tolerance, a.dims)
        ok = ok and good
        notes.append(f"{part}: {t.var} {t.op} {_shown(got)}")
    wanted = "; ".join(f"{part}: {expected['var']} {expected.get('op', '>')} {expected[part]}"
                       for part in ("rule", "exact", "network") if part in expected)
    return Outcome("threshold", wanted or dict(expected), t, ok, "; ".join(notes))


def _shown(value: sympy.Basic | None) -> str:
    return "none" if value is None else pretty(value)


def _matches(got: sympy.Basic | str, expected: object, tolerance: float, names: Iterable[str]) -> bool:
    """Numbers within a relative tolerance; expressions exactly (sympy.simplify of the
    difference is 0), with decimals in the expected text read as exact rationals."""
    want = read_expression(expected, names) if not isinstance(expected, sympy.Basic) else expected
    if isinstance(got, str):
        return False
    if isinstance(got, sympy.Rel) or isinstance(want, sympy.Rel):
        return isinstance(got, sympy.Rel) and isinstance(want, sympy.Rel) and type(got) is type(want) \
            and _matches(got.lhs - got.rhs, want.lhs - want.rhs, tolerance, names)
    if got.is_number and want.is_number:
        if not (got.is_finite and want.is_finite):
            return got == want      # oo is oo, and no tolerance makes a number infinite
        # exactly, never through floats: 1e200*1e200 is no float, and inf <= inf would pass it
        tol = sympy.Rational(repr(float(tolerance)))
        if want == 0:
            return bool(abs(got) <= tol)
        return bool(abs(got - want) <= tol * abs(want))
    return _identical(got, want)


def _identical(got: sympy.Expr, want: sympy.Expr) -> bool:
    """Whether two expressions in the dims are the same function of them. A few exact
    evaluations at integer points first, which tell most different pairs apart at once;
    then, for rational functions, the numerator of the difference over a common
    denominator expanded (no gcds: sympy.simplify's cancel can run for minutes on a
    fraction in thirty dims); simplify only for the rest (Max, Min, sqrt)."""
    difference = got - want
    if difference == 0:
        return True
    free = sorted(difference.free_symbols, key=str)
    for k in range(3):
        point = {s: sympy.Integer(2 + (7 * i + 13 * k) % 31) for i, s in enumerate(free)}
        value = difference.xreplace(point)
        if value.is_number and value.is_finite and value.is_zero is False:
            return False
    if all(isinstance(a, (sympy.Add, sympy.Mul, sympy.Pow, sympy.Symbol, sympy.Number))
           for a in sympy.preorder_traversal(difference)) and \
            all(p.exp.is_Integer for p in difference.atoms(sympy.Pow)):
        numerator, _ = sympy.fraction(sympy.together(difference))
        return sympy.expand(numerator) == 0
    return sympy.expand(difference) == 0 or sympy.simplify(difference) == 0


def report(results: list[CaseResult]) -> str:
    """A pass/fail table: each claim, each expected value against what symroof got."""
    rows = []
    for result in results:
        if result.error is not None:
            rows.append(("ERROR", result.id, (f"line {result.line}: " if result.line else "") + result.error))
        for i, o in enumerate(result.outcomes):
            if o.key == "threshold":
                got = o.note or str(o.got)     # a Threshold says itself in words
            elif isinstance(o.got, str):
                got = o.got
            else:
                got = pretty(o.got)
            expected = o.expected if not isinstance(o.expected, float) else number(o.expected)
            rows.append(("pass" if o.ok else "FAIL", result.id if i == 0 else "",
                         f"{o.key}: got {got}; expected {expected}"))
        if result.book is not None:
            rows.append(("", "", f"the book says: {result.book}"))
    width = max((len(r[1]) for r in rows), default=2) + 2
    lines = [f"{mark:<6}{name:<{width}}{text}" for mark, name, text in rows]
    passed = sum(r.ok for r in results)
    lines.append(f"\n{len(results)} claims: {passed} passed, {len(results) - passed} failed")
    return "\n".join(lines)
