"""Property tests of the exit-code contract: any float, any integer, any string on the CLI's numeric flags gives
exit 0, 1 or 2 — never a traceback, never exit 3 — and exit 2 is exactly one error line.

In-process ``main([...])`` calls with a bounded number of examples, so they run in CI with the unit tests.
"""

from __future__ import annotations

import contextlib
import io
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_hpu_mm.cli.main import main

MEMORY_FLOATS = ("--free-memory-gib", "--total-memory-gib", "--gpu-memory-utilization", "--graph-reserved-mem",
                 "--graph-prompt-ratio", "--graph-multimodal-prompt-ratio")  # fmt: skip
MEMORY_INTS = ("--tensor-parallel-size", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens",
               "--block-size", "--kv-cache-memory-bytes")  # fmt: skip
MEMORY_STRINGS = ("--model", "--device", "--dtype", "--buckets", "--quantization", "--vision-pool")
BUCKET_NUMBERS = ("--min-pixels", "--max-pixels")
PLAN_NUMBERS = ("--num-buckets", "--target-efficiency")

#: Floats of every kind (NaN, infinities, subnormals, 1e300) spelled as a user would type them.
floats = st.floats(allow_nan=True, allow_infinity=True).map(lambda x: repr(x) if math.isfinite(x) else str(x))
#: Integers from small to far beyond any int64.
integers = st.one_of(st.integers(-(2**70), 2**70), st.integers(-3, 300)).map(str)
#: Any text, and number-ish text (underscores, exponents, signs, spaces, hex).
strings = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"\A[ +\-]?[0-9_.eExXa-f]{0,12}[ ]?\Z"),
    st.from_regex(r"\A[~./]?[a-zA-Z0-9_.\-/~ ]{0,8}\Z"),  # path- and id-like strings
    st.integers(250, 5000).map(lambda n: "x" * n),  # longer than any file name
)
values = st.one_of(floats, integers, strings)

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
#: For commands whose every valid example plans the main job's text buckets in full (seconds each): fewer examples,
#: so that the suite stays within CI's 15 minutes. They reach most flags, not all: every flag is also given a value it
#: cannot take below, which costs no plan.
PLANNING = settings(SETTINGS, max_examples=30)
#: The same for the combinations of sizing flags, each example a plan.
COMBINATIONS = settings(SETTINGS, max_examples=40)
#: The text graph budget of a planning example: given in most (the flag under test is what these properties are
#: about, and a given budget plans the same path once instead of the default search's many budgets), the default
#: search in a tenth of them (its own tests are tests/buckets/test_text_budget.py). 44 graphs hold the ladders at the
#: main job's limits (vllm-gaudi's own strategy warms 228 there); where a flag's value leaves the runtime fewer, the
#: budget is refused with exit 2 and one line, which the contract covers too.
budgets = st.sampled_from([None, *["44"] * 9])


def with_budget(argv: list[str], budget: str | None, flag: str = "--text-graph-budget") -> list[str]:
    return argv if budget is None else [*argv, f"{flag}={budget}"]


def run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def check_contract(argv: list[str]) -> int:
    """The command's exit code, once its contract holds: 0, 1 or 2, never a traceback, exit 2 with one line."""
    code, _, err = run(argv)
    assert code in (0, 1, 2), (argv, code, err)
    assert "Traceback" not in err, (argv, err)
    if code == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1, (argv, err)
        assert lines[0].startswith("vllm-hpu-mm: error: "), (argv, err)
    return code


@pytest.fixture(autouse=True)
def _no_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("VLLM_MULTIMODAL_BUCKETS", "VLLM_GRAPH_RESERVED_MEM", "VLLM_GRAPH_PROMPT_RATIO",
                 "VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO", "VLLM_HPU_MM_ALIGN_MODE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)


@PLANNING
@given(flag=st.sampled_from(MEMORY_FLOATS + MEMORY_INTS + MEMORY_STRINGS), value=values, budget=budgets)
def test_memory_plan_any_value_on_any_flag(flag: str, value: str, budget: str | None) -> None:
    # --flag=VALUE so that values starting with "-" are values, not options.
    check_contract(with_budget(["memory", "plan", f"{flag}={value}"], budget))


@COMBINATIONS
@given(
    free=st.one_of(st.none(), floats),
    tp=st.one_of(st.none(), integers),
    block=st.one_of(st.none(), integers),
    device=st.sampled_from(["gaudi2", "gaudi3", "h100", "h200", "cpu"]),
    max_len=st.one_of(st.none(), integers),
    budget=budgets,
)
def test_memory_plan_combinations(
    free: str | None, tp: str | None, block: str | None, device: str, max_len: str | None, budget: str | None
) -> None:  # fmt: skip
    argv = with_budget(["memory", "plan", f"--device={device}", "--json"], budget)
    for flag, value in (("--free-memory-gib", free), ("--tensor-parallel-size", tp), ("--block-size", block),
                        ("--max-model-len", max_len)):  # fmt: skip
        if value is not None:
            argv.append(f"{flag}={value}")
    check_contract(argv)


@SETTINGS
@given(flag=st.sampled_from(BUCKET_NUMBERS + PLAN_NUMBERS), value=values)
def test_buckets_plan_any_value(flag: str, value: str) -> None:
    check_contract(["buckets", "plan", f"{flag}={value}"])


@SETTINGS
@given(buckets=st.one_of(values, st.lists(integers, min_size=1, max_size=5).map(",".join)),
       flag=st.sampled_from(BUCKET_NUMBERS), value=values)  # fmt: skip
def test_buckets_check_any_value(buckets: str, flag: str, value: str) -> None:
    check_contract(["buckets", "check", f"{flag}={value}", "--", buckets])


SERVE_NUMBERS = ("--plan-free-memory-gib", "--plan-total-memory-gib", "--plan-max-buckets", "--tensor-parallel-size",
                 "-pp", "--data-parallel-size", "--max-model-len", "--max-num-seqs", "--max-num-batched-tokens",
                 "--block-size", "--kv-cache-memory-bytes", "--gpu-memory-utilization")  # fmt: skip


@PLANNING
@given(flag=st.sampled_from(SERVE_NUMBERS), value=values, budget=budgets)
def test_serve_dry_run_any_value_on_any_sizing_flag(flag: str, value: str, budget: str | None) -> None:
    argv = ["serve", "--dry-run", "--json", "--plan-device", "gaudi2", f"{flag}={value}"]
    check_contract(with_budget(argv, budget, "--plan-text-graph-budget"))


#: A value no flag takes (the random examples above need not reach every flag; this does, without planning).
NO_VALUE = "~1e999x"


@pytest.mark.parametrize("flag", MEMORY_FLOATS + MEMORY_INTS + MEMORY_STRINGS)
def test_every_memory_flag_refuses_a_value_it_cannot_take_in_one_line(flag: str) -> None:
    assert check_contract(["memory", "plan", f"{flag}={NO_VALUE}"]) == 2


@pytest.mark.parametrize("flag", SERVE_NUMBERS)
def test_every_sizing_flag_of_serve_refuses_a_value_it_cannot_take_in_one_line(flag: str) -> None:
    argv = ["serve", "--dry-run", "--plan-device", "gaudi2", f"{flag}={NO_VALUE}"]
    assert check_contract(argv) == 2
