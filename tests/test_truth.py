"""The truth scenarios of benchmarks/truth.py, over HTTP with the embedded defaults."""

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location(
    "truth_scenarios", Path(__file__).resolve().parent.parent / "benchmarks" / "truth.py"
)
assert _SPEC is not None and _SPEC.loader is not None
truth = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(truth)


@pytest.mark.parametrize("scenario", truth.SCENARIOS, ids=lambda s: s.name)
def test_scenario_holds(http, profile_name, scenario) -> None:
    outcome = truth.run_scenario(http, scenario, profile=profile_name)
    assert outcome.held, f"{outcome.problems}; answer {outcome.answer!r}; top {outcome.top!r}"
