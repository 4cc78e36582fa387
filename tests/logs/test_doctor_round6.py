"""The doctor's round-6 classes (issue 34 item 10, held-out round 6), each pinned on the structure real logs have (the
lines are composed after the public logs and sources cited beside each test; the real excerpts are fixtures under
tests/data/logs/heldout_round6)."""

from __future__ import annotations

import pytest

from tests.support.logs import cut_read_as_phase
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

# --- a counted phase at its first step only says the phase began ----------------------------------------------------

#: vLLM V0's capture (worker/model_runner.py ``capture_model``): the driver draws its tqdm bar "Capturing CUDA graph
#: shapes" when the capture begins, the workers log that they capture (LMCache issue #503's start-up).
V0W = "(VllmWorkerProcess pid={}) INFO 04-24 08:27:56 [model_runner.py:1456] "
CAPTURING = "Capturing cudagraphs for decoding. This may lead to unexpected consequences if the model is not static."


def _capture_bar(i: int, n: int = 11) -> str:
    return f"Capturing CUDA graph shapes:  {100 * i // n}%|####      | {i}/{n} [00:03<00:10,  1.10it/s]"


def test_a_bar_at_its_first_step_is_no_cut() -> None:
    lines = [_capture_bar(0) + V0W.format(21013) + CAPTURING, V0W.format(21014) + CAPTURING,
             V0W.format(21016) + CAPTURING]  # fmt: skip
    d = diagnose(lines, load({}))
    assert (d.stage, d.basis, d.oom) == ("none", "none", False)


def test_a_bar_the_log_stops_partway_through_is_no_failure_on_its_own() -> None:
    lines = [_capture_bar(0), _capture_bar(3), V0W.format(21014) + CAPTURING]
    d = diagnose_lines(lines)
    assert (d.stage, d.basis, d.cut) == ("none", "stopped", "phase")


def test_the_weight_loaders_bar_at_zero_is_no_cut() -> None:
    # vLLM's safetensors loader prints its bar at 0 when loading begins (model_loader/weight_utils.py)
    d = diagnose_lines(["Loading safetensors checkpoint shards:   0% Completed | 0/14 [00:00<?, ?it/s]"])
    assert d.stage == "none"


# --- TensorRT-LLM names the component it could not create -----------------------------------------------------------

#: TensorRT-LLM's PyTorch executor re-raises an out-of-memory error of any component it creates with this message
#: (tensorrt_llm/_torch/pyexecutor/py_executor_creator.py ``_ExecutorMemoryMonitor._maybe_explain_if_oom``), logged by
#: its worker (TensorRT-LLM issue #5872).
TRT = "[07/08/2025-19:47:15] [TRT-LLM] [RANK 0] [E] Failed to initialize executor on rank 0: "


def _trt_failure(component: str) -> list[str]:
    return [TRT + "Executor creation failed due to insufficient GPU memory.", "",
            f"The following component could not be created: {component}", "Total GPU memory (GiB): 79.11",
            "Free GPU memory before component creation attempt (GiB): 10.86", "",
            "Previously created components and free GPU memory before/after creation (GiB):",
            "Model: 78.55 / 10.70"]  # fmt: skip


@pytest.mark.parametrize(
    ("component", "stage"),
    [
        ("KV cache", "kv_cache"),
        ("Model", "startup"),
        ("Draft model for speculative decoding", "startup"),
        ("Sampler", "startup"),
        ("Guided Decoder", "startup"),
        ("Initial KV Cache (temporary for KV cache size estimation)", "startup"),
        ("Additional executor resources (temporary for KV cache size estimation)", "startup"),
        ("Model resources created during usage", "startup"),
        ("Speculative decoding resources", "startup"),
        ("Drafter", "startup"),
        # created after the final KV cache: PyExecutor's constructor warms the model engine up (its CUDA graphs)
        ("Additional executor resources", "graph_capture"),
    ],
)
def test_tensorrt_llms_component_names_the_stage(component: str, stage: str) -> None:
    d = diagnose(_trt_failure(component), load({}))
    assert (d.stage, d.basis, d.memory) == (stage, "message", "device")
    assert d.source.name == "tensorrt_llm"
    text = "\n".join(d.recommendations)
    assert "--gpu-memory-utilization" not in text
    assert "free_gpu_memory_fraction" in text


def test_tensorrt_llms_nccl_failure_is_no_oom() -> None:
    # the same monitor's other message (py_executor_creator.py): an NCCL error, not memory
    line = TRT + "Executor creation failed with NCCL error: Failed, NCCL error unhandled cuda error"
    assert diagnose_lines([line]).stage == "none"


# --- a traceback cut while transformers loads the shards ------------------------------------------------------------

#: transformers' ``from_pretrained`` draws "Loading checkpoint shards" (modeling_utils.py); ms-swift's ``swift deploy``
#: loads through it (swift/llm/infer.py ``prepare_model_template`` -> swift/llm/utils/model.py
#: ``get_model_tokenizer``; ms-swift issue #1402, on Ascend NPUs).
SHARDS = "Loading checkpoint shards:  22%|##2       | 8/37 [00:20<01:12,  2.51s/it]"
SWIFT_FRAMES = [
    "Traceback (most recent call last):",
    '  File "/model/swift/swift/cli/deploy.py", line 5, in <module>',
    "    deploy_main()",
    '  File "/model/swift/swift/llm/infer.py", line 179, in prepare_model_template',
    "    model, tokenizer = get_model_tokenizer(",
    '  File "/model/swift/swift/llm/utils/model.py", line 5572, in get_model_tokenizer',
    "    model, tokenizer = get_function(model_dir, torch_dtype, model_kwargs, load_model, **kwargs)",
]


def test_a_traceback_cut_while_the_shards_load_is_startup() -> None:
    lines = ["INFO: model_kwargs: {'device_map': 'npu:0'}", SHARDS, *SWIFT_FRAMES]
    assert diagnose_lines(lines).basis == "undecided"  # the shipped doctor claims nothing of a cut
    d = diagnose(lines, load({}), rules=cut_read_as_phase())
    assert (d.stage, d.basis, d.cut) == ("startup", "cut", "traceback")
    assert d.source.name == "ms-swift"
    assert d.source.accelerator == "npu"
    text = "\n".join(d.recommendations)
    assert "--tensor-parallel-size" not in text
    assert "--device_map_config_path" in text
    # another writer's cut says what it rests on, as vLLM's does
    assert "does not say it was out of memory" in d.recommendations[0]


def test_a_traceback_after_the_shards_all_loaded_is_no_cut_in_loading() -> None:
    done = "Loading checkpoint shards: 100%|##########| 37/37 [01:32<00:00,  2.51s/it]"
    assert diagnose_lines([done, *SWIFT_FRAMES]).stage == "none"


# --- a model's forward casts no learned vote ------------------------------------------------------------------------

#: vLLM V0 on Ascend (vllm-ascend issue #1617): a worker's NPU out-of-memory inside the vision encoder's attention,
#: frames that run in the profiling pass and for every request alike.
ASC = "(VllmWorkerProcess pid=270962) ERROR 07-03 19:33:28 [multiproc_worker_utils.py:238] "
ENCODER_OOM = [ASC + line for line in (
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1747, in _call_impl',
    "    return forward_call(*args, **kwargs)",
    '  File "/usr/lib/python3.10/site-packages/vllm_ascend/models/qwen2_5_vl.py", line 84, in forward',
    "    q, k, v = self.split_qkv(x)",
    '  File "/usr/lib/python3.10/site-packages/vllm/model_executor/models/qwen2_5_vl.py", line 262, in split_qkv',
    "    qkv = all_gather_interleave(qkv, self.qkv.hidden_size,",
    "RuntimeError: NPU out of memory.",
)]  # fmt: skip


def test_a_forward_alone_does_not_say_the_stage() -> None:
    d = diagnose_lines(ENCODER_OOM)
    assert (d.stage, d.basis) == ("unknown", "unknown")
