"""Held-out rounds 52-53's classes (issue 34): a cut traceback whose own logger record states its error, and advice for
a program that runs another engine, in that program's settings."""

from __future__ import annotations

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose

_FRAMES = [
    "{p} Traceback (most recent call last):",
    '{p}   File "/x/vllm/engine/multiprocessing/engine.py", line 357, in run_mp_engine',
    "{p}     engine = MQLLMEngine.from_engine_args(engine_args=engine_args,",
    '{p}   File "/x/vllm/worker/model_runner.py", line 1094, in load_model',
    "{p}     self.model = get_model(vllm_config=self.vllm_config)",
]
_PREFIX = "ERROR 01-21 02:26:24 engine.py:366]"


def _cut(message: str) -> list[str]:
    return [f"{_PREFIX} {message}", *(line.format(p=_PREFIX) for line in _FRAMES)]


def test_a_cut_traceback_whose_own_record_states_its_message_is_that_error_not_an_undecided_cut() -> None:
    for message in ("'layers.17.mlp.down_proj.weight.absmax'", "CPU backend only supports V1."):
        d = diagnose(_cut(message), load({}))
        assert (d.stage, d.basis) == ("none", "error"), message
        assert not d.oom


def test_a_record_that_only_announces_a_failure_or_names_memory_leaves_the_cut_undecided() -> None:
    for message in ("Engine background task failed", "WorkerProc hit an exception.", "CUDA out of memory"):
        d = diagnose(_cut(message), load({}))
        assert d.stage != "none", message


def test_a_program_running_llama_cpp_is_advised_in_its_own_settings_not_llama_cpp_flags() -> None:
    reserve = [
        "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 573.07 MiB on device 0: cudaMalloc failed: "
        "out of memory",
        "ggml_gallocr_reserve_n: failed to allocate ROCm0 buffer of size 600903680",
        "llama_new_context_with_model: failed to allocate compute buffers",
    ]
    for lines, named in ((reserve, "llama.cpp's library"),
                         (["Error: llama runner process has terminated: cudaMalloc failed: out of memory", *reserve],
                          "Ollama")):  # fmt: skip
        d = diagnose(lines, load({}))
        assert d.source.describe.startswith(named)
        advice = " ".join(map(str, d.recommendations))
        assert "--" not in advice
        assert "num_batch" in advice
        assert "num_ctx" in advice


def test_a_vllm_engine_built_by_openllm_is_advised_by_engine_argument_names_not_vllm_flags() -> None:
    lines = [
        "torch.cuda.OutOfMemoryError: HIP out of memory. Tried to allocate 112.00 MiB.",
        "2024-04-28T04:44:45+0000 [ERROR] [runner:llm-llama-runner:1] An exception occurred while instantiating runner",
        '  File "/env/lib/python3.8/site-packages/openllm/_runners.py", line 133, in __init__',
        '  File "/env/lib/python3.8/site-packages/vllm/engine/async_llm_engine.py", line 628, in from_engine_args',
    ]
    d = diagnose(lines, load({}))
    assert "OpenLLM" in d.source.describe
    assert not any("--" in str(r) for r in d.recommendations)
