"""The doctor's general rules (issue 34 item 10, held-out classes closed by class, not by case): each on a few
composed lines, after the runtimes' own log calls and the public logs under tests/data/logs."""

from __future__ import annotations

import pytest

from benchmarks.common import candidate_rules
from vllm_hpu_mm.logs.doctor.decide import default_rules, judge
from vllm_hpu_mm.logs.doctor.scan import scan

V0 = "INFO 08-19 07:51:03 model_runner.py:732] "
#: A start-up excerpt that stops right after a phase line: the weights loaded, the KV cache sized (a line that says its
#: phase finished), the capture announced. A healthy excerpt stops there as often as a failing one.
STOPS_AFTER_A_PHASE_LINE = [
    [V0 + "Loading model weights took 2.3463 GB"],
    [V0 + "Loading model weights took 2.3463 GB", "INFO 08-19 07:51:08 executor.py:56] # GPU blocks: 22982"],
    [V0 + "Loading model weights took 2.3463 GB", "INFO 08-19 07:51:08 executor.py:56] # GPU blocks: 22982",
     V0 + "Capturing the model for CUDA graphs. This may lead to unexpected consequences"],
]  # fmt: skip


@pytest.mark.parametrize("lines", STOPS_AFTER_A_PHASE_LINE, ids=("loaded", "kv_sized", "capture_started"))
def test_a_run_that_stops_after_a_phase_line_is_no_failure_under_any_fitted_rules(lines: list[str]) -> None:
    features = scan(lines)
    # every rule set the fit may choose, with any votes: none reads the last phase line as where it failed
    for rules in candidate_rules(default_rules().votes):
        assert judge(features, rules).stage == "none", rules
