"""`symroof check`: claims in a YAML file (a spec, chip figures, expected values) checked
against what symroof derives; exit 1 where one fails."""

from __future__ import annotations

import argparse

from ..claims.check import report as claims_report
from ..claims.models import check_case, load_claims
from .options import Commands, dumps


def add_parser(commands: Commands) -> None:
    check_cmd = commands.add_parser("check", help="check claims in a YAML file against what symroof derives",
                                    description="Check claims (spec, chip figures, expected values) "
                                                "in the format of tests/data/rooflines_chapter.yaml; "
                                                "exits 1 if any fails.")
    check_cmd.add_argument("file", metavar="CLAIMS.yaml")
    check_cmd.add_argument("--hardware", metavar="FILE", help="a hardware file in place of the shipped one")
    check_cmd.add_argument("--json", action="store_true", help="print JSON")
    check_cmd.set_defaults(handler=_check)


def _check(args: argparse.Namespace) -> tuple[str, int]:
    results = [check_case(case, args.hardware) for case in load_claims(args.file)]
    failed = not all(r.ok for r in results)
    if args.json:
        text = dumps([{"id": r.id, "ok": r.ok, "error": r.error,
                       "outcomes": [{"key": o.key, "ok": o.ok, "expected": str(o.expected),
                                     "got": str(o.got), "note": o.note} for o in r.outcomes]}
                      for r in results])
    else:
        text = claims_report(results)
    return text, 1 if failed else 0
