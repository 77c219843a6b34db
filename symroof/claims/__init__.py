"""`symroof check`: claims (a spec or a model, chip figures, expected results) checked
against what symroof derives."""

from .models import check_case, load_claims

__all__ = ["check_case", "load_claims"]
