"""What a traceback means (logs/doctor/phases.py): one test per rule, on frame names from the runtimes' sources."""

from __future__ import annotations

import pytest

from tests.support.logs import cut_read_as_phase
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines
from vllm_hpu_mm.logs.doctor.phases import frame_meaning, traceback_stage

V1 = "/usr/lib/python3.12/site-packages/vllm/v1"


def frames(*names: str) -> list[tuple[str, str]]:
    return [(f"{V1}/worker/gpu_worker.py", name) for name in names]


def test_a_serving_loop_makes_everything_inside_it_runtime() -> None:
    # A shape compiled on first use runs capture code, but inside the engine's busy loop: the server was serving.
    assert traceback_stage(frames("run_busy_loop", "execute_model", "capture_model")) == ("runtime", 0)


def test_the_innermost_phase_function_wins() -> None:
    # vllm-gaudi: initialize_from_config (KV scope) -> compile_or_warm_up_model -> warmup_model.
    assert traceback_stage(frames("initialize_from_config", "compile_or_warm_up_model", "warmup_model")) == (
        "graph_capture",
        2,
    )
    # V0 profiling runs the model through execute_model, which means nothing on its own.
    assert traceback_stage(frames("determine_num_available_blocks", "profile_run", "execute_model")) == ("startup", 1)


def test_a_scope_counts_only_when_nothing_more_specific_is_in_view() -> None:
    assert traceback_stage(frames("__init__", "_initialize_kv_caches", "collective_rpc")) == ("kv_cache", 1)
    assert traceback_stage(frames("_initialize_kv_caches", "determine_available_memory")) == ("startup", 1)


def test_a_serving_only_function_is_runtime_unless_a_phase_encloses_it() -> None:
    assert traceback_stage(frames("worker_busy_loop", "_execute_mm_encoder")) == ("runtime", 1)
    assert traceback_stage(frames("profile_run", "_execute_mm_encoder")) == ("startup", 0)


def test_functions_of_several_phases_mean_nothing_alone() -> None:
    for name in ("_dummy_run", "forward", "generate_token", "worker_busy_loop"):
        assert frame_meaning(f"{V1}/worker/gpu_model_runner.py", name) is None, name
    # V0's runner and V1's V2 runner run execute_model for their dummy runs too (V1's classic runner does not)
    assert frame_meaning("/x/vllm/worker/model_runner.py", "execute_model") is None
    assert frame_meaning(f"{V1}/worker/gpu/model_runner.py", "execute_model") is None
    assert traceback_stage(frames("_dummy_run", "forward")) is None


def test_a_constructor_in_model_code_builds_the_model() -> None:
    layers = "/x/vllm/model_executor/layers/linear.py"
    assert frame_meaning(layers, "__init__") == frame_meaning("", "load_model")
    assert frame_meaning("/x/vllm/entrypoints/llm.py", "__init__") is None
    tgi = "/opt/text_generation_server/models/custom_modeling/flash_llama_modeling.py"
    assert traceback_stage([("", "serve_inner"), (tgi, "__init__")]) == ("startup", 1)


def test_notebook_frames_are_class_dot_function() -> None:
    assert frame_meaning("cache_engine.py", "CacheEngine._allocate_kv_cache") == frame_meaning("", "_allocate_kv_cache")
    assert frame_meaning("worker.py", "Worker.load_model") == frame_meaning("", "load_model")


def test_vllms_kernel_warm_up_files_are_graph_warm_up_whatever_the_function() -> None:
    assert traceback_stage([("/x/vllm/model_executor/warmup/deep_gemm_warmup.py", "_warmup")]) == ("graph_capture", 0)


@pytest.mark.parametrize(
    ("lines", "stage"),
    [
        # A frame line wrapped by the terminal: the path continues on the next line.
        (
            [
                '(Worker pid=1) ERROR 11-25 08:05:06 [multiproc_executor.py:815]   File "/usr/lib/vllm/model_exe',
                'cutor/warmup/deep_gemm_warmup.py", line 262, in _warmup',
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 666.00 MiB.",
            ],
            "graph_capture",
        ),
        # The source line under the last frame names the call the excerpt cuts off.
        (
            [
                "Traceback (most recent call last):",
                '  File "vllm/v1/worker/gpu_worker.py", line 157, in determine_available_memory',
                "    self.model_runner.profile_run()",
            ],
            "startup",
        ),
        # vLLM V0's multiprocessing executor names the method the worker ran.
        (
            [
                "(VllmWorkerProcess pid=1) ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB",
                "(VllmWorkerProcess pid=2) ERROR Exception in worker VllmWorkerProcess while processing method "
                "start_worker_execution_loop.",
            ],
            "runtime",
        ),
        # TGI's router span of the warm-up request: the warm-up's, whatever failed in it. (Until stop 50 this read as
        # start-up's profiling; the labels of record make every failure in TGI's warm-up the warm-up's:
        # test_doctor_relabel50.py.)
        (
            ["ERROR warmup{max_input_length=64}:warmup: Server error: CUDA out of memory. Tried to allocate 2.00 GiB"],
            "graph_capture",
        ),
    ],
)
def test_how_frames_are_read(lines: list[str], stage: str) -> None:
    assert diagnose_lines(lines, cut_read_as_phase()).stage == stage


def test_a_traceback_an_error_message_explains_is_not_a_cut() -> None:
    # vllm-fork prints Habana's error before the traceback: the failure is known, and it is not memory.
    lines = [
        "ERROR 02-04 12:35:23 engine.py:387] [Rank:0] FATAL ERROR :: MODULE:PT_LAZY Error, tensor_data is empty.",
        "ERROR 02-04 12:35:23 engine.py:387] Traceback (most recent call last):",
        'ERROR 02-04 12:35:23 engine.py:387]   File "vllm/engine/multiprocessing/engine.py", line 378, in run_mp_eng',
        "ERROR 02-04 12:35:23 engine.py:387]     engine = MQLLMEngine.from_engine_args(engine_args=engine_args,",
    ]
    assert diagnose_lines(lines).stage == "none"
    assert diagnose_lines(lines[1:], cut_read_as_phase()).stage == "startup"  # the same traceback, cut, unexplained
    assert diagnose_lines(lines[1:]).basis == "undecided"  # which the shipped doctor claims nothing of


SGL = "/usr/local/lib/python3.12/dist-packages/sglang/srt"


@pytest.mark.parametrize(
    ("names", "stage"),
    [(("run_scheduler_process", "event_loop_overlap", "run_batch", "forward_batch_generation", "forward"), "runtime"),
     (("run_scheduler_process", "__init__", "initialize", "load_model"), "startup"),
     (("run_scheduler_process", "__init__", "initialize", "init_memory_pool", "profile_max_num_token"), "kv_cache"),
     (("run_scheduler_process", "__init__", "initialize", "init_device_graphs", "__init__"), "graph_capture")],
)  # fmt: skip
def test_sglangs_scheduler_loop_and_start_up_functions(names: tuple[str, ...], stage: str) -> None:
    # sglang managers/scheduler.py (its event loops serve), model_executor/model_runner.py ``initialize``
    found = traceback_stage([(f"{SGL}/model_executor/model_runner.py", name) for name in names])
    assert found is not None
    assert found[0] == stage


def test_lmdeploys_model_agent_loop_serves_and_its_cache_engine_is_the_kv_cache() -> None:
    # lmdeploy pytorch/engine/model_agent.py: the forward loop runs requests; build_cache_engine allocates the cache
    agent = "/opt/py3/lib/python3.10/site-packages/lmdeploy/pytorch/engine/model_agent.py"
    assert traceback_stage([(agent, "_async_loop_background"), (agent, "_async_step"), (agent, "forward")]) == (
        "runtime",
        0,
    )
    assert traceback_stage([(agent, "build_cache_engine"), (agent, "__init__")]) == ("kv_cache", 0)


def test_setting_the_device_and_its_process_groups_up_is_start_up() -> None:
    # vLLM V1 gpu_worker.py init_device -> init_worker_distributed_environment -> ensure_model_parallel_initialized
    # (NCCL communicators, custom all-reduce buffers), before the weights load
    found = traceback_stage(frames("run_engine_core", "init_device", "init_worker_distributed_environment",
                                   "ensure_model_parallel_initialized", "initialize_model_parallel"))  # fmt: skip
    assert found == ("startup", 4)


FORK = "/usr/local/lib/python3.10/dist-packages/vllm/worker"
FORK_LOADED = (
    "INFO 06-12 14:21:37 [hpu_model_runner.py:951] Loading model weights took in total 15.55 GiB of device memory"
)
FORK_OOM = "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::9663676416 (9216)MB"


def fork_traceback(*names: str) -> list[str]:
    lines = ["Traceback (most recent call last):"]
    for k, name in enumerate(names):
        runner = "hpu_worker.py" if name == "determine_num_available_blocks" else "hpu_model_runner.py"
        lines.append(f'  File "{FORK}/{runner}", line {100 + k}, in {name}')
    return [*lines, FORK_OOM]


def test_the_forks_warmup_scenario_is_placed_by_its_caller() -> None:
    # vllm-fork@3bcdfd4a hpu_model_runner.py: profile_run (:2090, before the KV cache exists) and the warm-up
    # (warmup_graphs :2294, warmup_all_buckets :2255, warmup_model :2339, after) all run warmup_scenario.
    runner = f"{FORK}/hpu_model_runner.py"
    profiling = ("_initialize_kv_caches", "determine_num_available_blocks", "profile_run", "warmup_scenario")
    assert traceback_stage((runner, name) for name in (*profiling, "execute_model")) == ("startup", 2)
    warming = ("warmup_model", "warmup_graphs", "warmup_scenario")
    assert traceback_stage((runner, name) for name in warming) == ("graph_capture", 1)
    assert frame_meaning(runner, "warmup_scenario") is None


def test_an_oom_in_the_forks_profiling_run_is_start_up_with_start_up_advice() -> None:
    lines = [
        "INFO 06-12 14:20:33 [api_server.py:1042] vLLM API server version 0.8.5.post1+gaudi000-g3bcdfd4a",
        FORK_LOADED,
        *fork_traceback("determine_num_available_blocks", "profile_run", "warmup_scenario", "execute_model"),
    ]
    d = diagnose(lines, load({}))
    assert (d.stage, d.source.describe) == ("startup", "vllm-fork")
    assert "--max-num-batched-tokens" in d.settings
    assert "VLLM_GRAPH_RESERVED_MEM" not in d.settings


def test_the_forks_warmup_scenario_without_its_caller_takes_the_phase_line_before_it() -> None:
    start = ["INFO 06-12 14:20:33 [api_server.py:1042] vLLM API server version 0.8.5.post1+gaudi000-g3bcdfd4a"]
    run = fork_traceback("warmup_scenario", "execute_model")
    blocks = "INFO 06-14 08:03:14 [hpu_executor.py:85] # HPU blocks: 8918, # CPU blocks: 585"
    assert diagnose_lines([*start, FORK_LOADED, *run]).stage == "startup"
    assert diagnose_lines([*start, FORK_LOADED, blocks, *run]).stage == "graph_capture"
