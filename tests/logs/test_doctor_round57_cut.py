"""Held-out rounds 55 and 57's class (issue 34): a cut traceback whose error the log states as a device fault (CUDA's
"an illegal memory access was encountered", "device-side assert triggered"), on its opening line, in the cause it is
chained to, or inside a quote of the whole traceback, is that failure of another kind, not an undecided cut; where
nothing states the error the cut stays undecided."""

from __future__ import annotations

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose

_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/x/vllm/engine/llm_engine.py", line 587, in from_engine_args',
    "    engine = cls(",
    '  File "/x/vllm/worker/model_runner.py", line 1094, in load_model',
    "    self.model = get_model(vllm_config=self.vllm_config)",
]
_HINT = [
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be "
    "incorrect.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1.",
    "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
]


def _verdict(lines: list[str]) -> tuple[str, str]:
    d = diagnose(lines, load({}))
    return d.stage, d.basis


def test_a_cut_traceback_chained_to_an_illegal_memory_access_is_that_fault_not_an_undecided_cut() -> None:
    cause = [
        '  File "/x/vllm/model_executor/layers/sampler.py", line 104, in _prune_hidden_states',
        "    0, torch.tensor(last_token_indicies, device=hidden_states.device))",
    ]
    chain = ["", "The above exception was the direct cause of the following exception:", "", *_FRAMES]
    for fault in ("RuntimeError: CUDA error: an illegal memory access was encountered",
                  "RuntimeError: CUDA error: misaligned address"):  # fmt: skip
        assert _verdict([*cause, fault, *_HINT, *chain]) == ("none", "error"), fault
    assert _verdict(["...", *chain]) == ("unknown", "undecided")  # the cause left out: nothing states the error


def test_a_device_fault_stated_where_a_traceback_opens_is_its_error_but_cudas_hint_alone_is_not() -> None:
    stated = "ERROR 01-21 02:26:24 worker.py:91] CUDA error: device-side assert triggered"
    assert _verdict([stated, *_FRAMES]) == ("none", "error")
    assert _verdict([f"Error: {{'detail': 'Bad request!\\nCUDA error: device-side assert triggered\\n{_FRAMES[0]}",
                     *_FRAMES[1:]]) == ("none", "error")  # fmt: skip
    assert _verdict([*_HINT, *_FRAMES]) == ("unknown", "undecided")


def test_a_traceback_quoted_whole_on_one_line_ends_in_its_quoted_exception_not_a_cut() -> None:
    quoted = "\\n".join(_FRAMES)
    error = "\\nValueError: top_p must be in (0, 1]\\n'}"
    body = f"Exception: Could not generate text. Error: {{'detail': '{quoted}{error}"
    d = diagnose([body], load({}))
    assert d.stage == "none"
    assert not d.oom
    assert _verdict([f"Exception: Could not generate text. Error: {{'detail': '{quoted}"]) == ("unknown", "undecided")
