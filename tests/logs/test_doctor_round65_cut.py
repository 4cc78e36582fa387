"""Held-out rounds 62 and 65's class (issue 34): a cut traceback that follows an exception line of another kind than
memory, stated a few lines above it (its own traceback shown or elided; the traceback after it chained to it or the
program's own, printed once the engine died), is that failure, not an undecided cut: torch dynamo's error during CUDA
graph capture, vLLM's engine core refusing a prompt. Where nothing states the error, or the stated error speaks of
memory, the cut stays undecided."""

from __future__ import annotations

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose

_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/x/sglang/srt/managers/scheduler.py", line 2255, in run_scheduler_process',
    "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, pp_rank, dp_rank)",
    '  File "/x/sglang/srt/model_executor/model_runner.py", line 192, in __init__',
    "    self.initialize(min_per_gpu_memory)",
    "...",
]
_DYNAMO_HINT = [
    "",
    "from user code:",
    '   File "/x/sglang/srt/layers/sampler.py", line 88, in forward',
    "    torch.manual_seed(seed)",
    "",
    "You can suppress this exception and fall back to eager by setting:",
    "    import torch._dynamo",
    "    torch._dynamo.config.suppress_errors = True",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
]
_ENGINE_DIED = [
    "(EngineCore_DP0 pid=26617) ERROR 01-07 16:00:16 [multiproc_executor.py:231] Worker proc VllmWorker-0 died "
    "unexpectedly, shutting down executor.",
    "/x/multiprocessing/resource_tracker.py:324: UserWarning: resource_tracker: There appear to be 1 leaked "
    "shared_memory objects to clean up at shutdown: {'/psm_1120bbfb'}",
    "  warnings.warn(",
]


def _verdict(lines: list[str]) -> tuple[str, str]:
    d = diagnose(lines, load({}))
    return d.stage, d.basis


def test_a_cut_traceback_chained_to_a_dynamo_error_whose_own_traceback_was_elided_is_that_error() -> None:
    for stated in (
        "torch._dynamo.exc.InternalTorchDynamoError: RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during "
        "CUDA graph capture.",
        "torch._dynamo.exc.Unsupported: call_function UserDefinedObjectVariable(Generator) [] {}",
    ):
        assert _verdict(["...", stated, *_DYNAMO_HINT, *_FRAMES]) == ("none", "error"), stated
    oom = "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised: CUDA out of memory."
    assert _verdict(["...", oom, *_DYNAMO_HINT, *_FRAMES])[0] != "none"  # the stated error is memory's
    assert _verdict(["...", *_DYNAMO_HINT, *_FRAMES]) == ("unknown", "undecided")  # nothing states the error


def test_a_cut_traceback_after_the_engines_stated_error_and_its_death_is_that_error() -> None:
    stated = (
        "(EngineCore_DP0 pid=26617) RuntimeError: Expected there to be 1 prompt placeholders corresponding to 1 "
        "image items, but instead found 0 prompt placeholders!"
    )
    assert _verdict([stated, *_ENGINE_DIED, *_FRAMES]) == ("none", "error")
    assert _verdict([*_ENGINE_DIED, *_FRAMES]) == ("unknown", "undecided")  # the engine's death alone states nothing
    throughput = "[loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s"
    going_on = [f"INFO 01-07 16:00:{t} {throughput}" for t in (17, 27)]
    assert _verdict([stated, *going_on, *_FRAMES]) == ("unknown", "undecided")  # served on: the cut may be another's
    announced = "Exception in thread Thread-1:"  # announces a traceback, states no error
    assert _verdict([announced, *_FRAMES]) == ("unknown", "undecided")
    memory = "(EngineCore_DP0 pid=26617) RuntimeError: Failed to allocate memory for the KV cache on the device."
    assert _verdict([memory, *_ENGINE_DIED, *_FRAMES]) != ("none", "error")
