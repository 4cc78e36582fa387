"""The doctor advises only what the log's writer reads: TGI's flags for TGI, optimum-habana's for its scripts, the
Gaudi runtimes' variables for Gaudi only, vision knobs for vision models only; never a larger memory share when
other processes hold the device; host advice for a host kill; no alarm for a non-OOM failure while vLLM profiles."""

from __future__ import annotations

import re

from tests.support.data import LOGS
from tests.support.logs import GAUDI_LOG, body_lines
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines
from vllm_hpu_mm.logs.doctor.source import SourceSniffer, other_processes_gib
from vllm_hpu_mm.runtimes.base import Runtime

VLLM_FLAGS = re.compile(r"--(?:gpu-memory-utilization|max-num-seqs|max-num-batched-tokens|max-model-len|"
                        r"tensor-parallel-size|enforce-eager|mm-processor-kwargs|compilation-config)")  # fmt: skip
GAUDI_ONLY = re.compile(r"VLLM_MULTIMODAL_BUCKETS|VLLM_SKIP_WARMUP|VLLM_GRAPH_RESERVED_MEM")
VISION = re.compile(r"VLLM_MULTIMODAL_BUCKETS|max_pixels|--limit-mm-per-prompt|--mm-processor")
CUDA_OOM = (
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.15 GiB "
    "of which 1.17 GiB is free. Including non-PyTorch memory, this process has 77.96 GiB memory in use."
)


def advice(lines: list[str]) -> str:
    return "\n".join(diagnose(lines, load({})).recommendations)


def test_tgi_logs_get_tgi_flags_not_vllms() -> None:
    for name in ("tgi_710_total_tokens.log", "tgi_1164_warmup_prefill_tokens.log", "tgi_755_warmup_prefill_tokens.log"):
        text = advice(body_lines(LOGS / name))
        assert "--max-batch-" in text, name
        assert not VLLM_FLAGS.search(text), name
        assert not GAUDI_ONLY.search(text), name


def test_a_tgi_refusal_names_the_tokens_it_could_not_hold() -> None:
    assert "--max-batch-total-tokens below 16000" in advice(body_lines(LOGS / "tgi_710_total_tokens.log"))


def test_optimum_habana_gets_its_scripts_flags() -> None:
    text = advice(body_lines(LOGS / "optimum_habana_2214_devmem_convert.log"))
    assert "--use_deepspeed" in text
    assert not VLLM_FLAGS.search(text)
    assert not GAUDI_ONLY.search(text)


def test_vllm_on_cuda_never_gets_the_gaudi_variables() -> None:
    lines = ["INFO Starting vLLM API server", "model='Qwen/Qwen2.5-VL-7B-Instruct'", "INFO POST /v1/chat/completions",
             CUDA_OOM]  # fmt: skip
    d = diagnose(lines, load({"VLLM_MULTIMODAL_BUCKETS": "1600,3136,4096"}))
    assert d.source.runtime is Runtime.VLLM_CUDA
    assert d.source.multimodal
    text = "\n".join(d.recommendations)
    assert not GAUDI_ONLY.search(text)
    assert "max_pixels" in text  # a vision model: images are what it can cap


def test_a_text_model_on_gaudi_gets_no_vision_advice() -> None:
    lines = ["INFO hpu_worker.py] model='meta-llama/Llama-3.1-8B-Instruct'", "INFO Warmup finished in 42 secs",
             "INFO POST /v1/completions",
             "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::1 (1)MB"]  # fmt: skip
    d = diagnose(lines, load({"VLLM_MULTIMODAL_BUCKETS": "1600,3136,4096"}))
    assert d.stage == "runtime"
    assert not d.source.multimodal
    assert not VISION.search("\n".join(d.recommendations))


def test_a_vision_model_on_gaudi_gets_its_bucket_list() -> None:
    text = "\n".join(diagnose(GAUDI_LOG, load({"VLLM_MULTIMODAL_BUCKETS": "1600,3136,4096,6400,7744,9216,12544"}))
                     .recommendations)  # fmt: skip
    assert "VLLM_MULTIMODAL_BUCKETS=1600,3136" in text


def test_a_vision_warm_up_failure_is_answered_with_vision_buckets_not_text_limits() -> None:
    runner = "(EngineCore_DP0 pid=7) INFO 01-21 06:56:21 [hpu_model_runner.py:6128] "
    lines = [
        "INFO 01-21 06:50:00 [hpu_worker.py:120] model='Qwen/Qwen2.5-VL-7B-Instruct'",
        runner
        + "[Warmup][Graph/Multimodal(image)][1/5] batch_size:1 seq_len:0 resolution:1120X1120 free_mem:13.31 GiB",
        runner
        + "[Warmup][Graph/Multimodal(image)][2/5] batch_size:1 seq_len:0 resolution:1568X1568 free_mem:11.02 GiB",
        "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::1927282688 (1838.0)MB",
    ]
    d = diagnose(lines, load({}))
    warm_up = next(r for r in d.recommendations if r.startswith("failed at warm-up graph 2/5"))
    assert "VLLM_MULTIMODAL_BUCKETS" in warm_up
    assert "a lower --max-num-seqs" not in warm_up


def test_memory_other_processes_hold_is_never_answered_with_a_larger_share() -> None:
    line = (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. GPU 0 has a total capacity of "
        "23.64 GiB of which 120.00 MiB is free. Process 1111 has 14.00 GiB memory in use. Process 2222 has 9.50 GiB "
        "memory in use. Including non-PyTorch memory, this process has 9.50 GiB memory in use."
    )
    assert other_processes_gib([line]) == 14.0
    for before in (["INFO # GPU blocks: 0"], ["INFO Loading weights took 12 GiB"], ["INFO Capturing CUDA graph"]):
        d = diagnose([*before, line], load({}))
        text = "\n".join(d.recommendations)
        assert "other processes held 14.0 GiB" in d.recommendations[0]
        assert "raise --gpu-memory-utilization" not in text
        assert "--gpu-memory-utilization" not in d.settings


def test_vllms_refusal_to_start_on_a_busy_device_is_start_up_and_caps_the_share() -> None:
    # vLLM V1 gpu_worker.py init_device, before any weight loads (newer releases name the device); its healthy
    # report of the same figures is no failure
    refused = [
        "(EngineCore_DP0 pid=211) ERROR 09-01 10:00:00 [core.py:708] ValueError: Free memory on device cuda:0 "
        "(10.5/79.1 GiB) on startup is less than desired GPU memory utilization (0.9, 71.2 GiB). Decrease GPU memory "
        "utilization or reduce GPU memory used by other processes."
    ]
    d = diagnose(refused, load({}))
    assert (d.stage, d.basis, d.memory) == ("startup", "message", "device")
    assert d.settings == {"--gpu-memory-utilization": 0.13}
    assert "--max-num-batched-tokens" not in "\n".join(d.recommendations)
    healthy = ("(Worker_TP0 pid=3264) INFO 07-14 09:50:23 [gpu_worker.py:855] Free memory on device (77.57/79.11 GiB) "
               "on startup. Desired GPU memory utilization is (0.92, 72.78 GiB).")  # fmt: skip
    assert diagnose_lines([healthy]).stage == "none"


def test_this_process_alone_is_not_another_user() -> None:
    line = ("GPU 0 has a total capacity of 79.15 GiB of which 1.17 GiB is free. Process 7 has 77.96 GiB memory in use. "
            "Including non-PyTorch memory, this process has 77.96 GiB memory in use.")  # fmt: skip
    assert other_processes_gib([line]) == 0.0
    assert "raise --gpu-memory-utilization" in advice(["INFO # GPU blocks: 0", line])


def test_a_ray_memory_kill_gets_host_advice() -> None:
    lines = ["INFO Avg prompt throughput: 10.0 tokens/s",
             "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory. Memory on the "
             "node was 60.1GB / 62.7GB (0.96), which exceeds the memory usage threshold of 0.95. Ray killed this "
             "worker"]  # fmt: skip
    d = diagnose(lines, load({}))
    assert d.memory == "host"
    assert "host ran out of memory" in d.recommendations[0]
    assert any("RAY_memory_usage_threshold" in r for r in d.recommendations)
    assert not any("gpu-memory-utilization" in r for r in d.recommendations)
    assert not any("dmesg" in r for r in d.recommendations)  # Ray killed it, not the kernel


def test_a_kernel_kill_of_the_host_points_to_the_oom_killer_in_dmesg() -> None:
    # I12: a warm-up ended by "Killed" (the kernel's OOM killer) got host advice without where to confirm it.
    lines = ["INFO hpu_model_runner.py:1066] [Warmup][Graph/Prompt][11/24] batch_size:1 seq_len:896 free_mem:48.77 GiB",
             "Killed"]  # fmt: skip
    d = diagnose(lines, load({}))
    assert d.memory == "host"
    assert any("dmesg" in r and "OOM killer" in r for r in d.recommendations)


#: SGLang's own server flags (its server arguments documentation) that bound memory.
SGLANG_FLAGS = {"--mem-fraction-static", "--chunked-prefill-size", "--max-running-requests", "--max-total-tokens",
                "--cuda-graph-max-bs", "--max-prefill-tokens"}  # fmt: skip


def test_another_framework_gets_its_own_flags_never_vllms() -> None:
    lines = ["[2025-01-01 00:00:00] sglang.launch_server: server_args=ServerArgs(model_path='x')",
             "[2025-01-01 00:00:09] Load weight end.", CUDA_OOM]  # fmt: skip
    d = diagnose(lines, load({}))
    assert d.source.framework == "other"
    text = "\n".join(d.recommendations)
    assert "SGLang, not a vLLM runtime" in text
    flags = set(re.findall(r"--[a-z][a-z-]*", text))
    assert flags
    assert flags <= SGLANG_FLAGS


def test_a_compile_failure_while_vllm_profiles_is_no_oom() -> None:
    prefix = "ERROR 05-01 10:00:10 [core.py:1] "
    lines = ["INFO 05-01 10:00:00 [gpu_model_runner.py:1] Model loading took 14.2 GiB and 5.1 seconds",
             *(prefix + line for line in (
                 "Traceback (most recent call last):",
                 '  File "/x/vllm/v1/worker/gpu_worker.py", line 200, in determine_available_memory',
                 "    self.model_runner.profile_run()",
                 '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 2000, in profile_run',
                 "    hidden_states = self._dummy_run(self.max_num_tokens)",
                 '  File "/x/torch/_dynamo/output_graph.py", line 1500, in call_user_compiler',
                 "    raise BackendCompilerFailed(self.compiler_fn, e) from e",
                 "torch._dynamo.exc.BackendCompilerFailed: backend='inductor' raised:"))]  # fmt: skip
    assert diagnose_lines(lines).stage == "none"


def test_an_error_of_another_kind_is_quoted_to_the_line_that_closes_its_message() -> None:
    # A Habana bridge error whose message goes on over two more lines of the same logger record, after Gaudi's memory
    # report: the advice quotes the error and the line that closes it ("Graph compile failed"), not the report.
    prefix = "(EngineCore_DP0 pid=2390) ERROR 09-02 10:17:40 [core.py:1515] "
    lines = [GAUDI_LOG[0],
             *(prefix + line for line in (
                 "Traceback (most recent call last):",
                 '  File "/x/vllm_gaudi/v1/worker/hpu_model_runner.py", line 6108, in warmup_multimodal_graphs',
                 "    self._execute_dummy_mm_batch(batch)",
                 "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_BRIDGE Exception in Lowering thread...",
                 "[Rank:0] FATAL ERROR :: MODULE:PT_EAGER HabanaLaunchOpPT Run returned exception....",
                 "Graph compile failed. synStatus=synStatus 26 [Generic failure].")),
             "(APIServer pid=2211) ERROR 09-02 10:17:41 [utils.py:1432] Engine core initialization failed"]  # fmt: skip
    d = diagnose(lines, load({}))
    assert (d.stage, d.basis, d.settings) == ("none", "error", {})
    assert [e.line for e in d.evidence] == [1, 5, 7]
    (text,) = d.recommendations
    assert "line 5: RuntimeError: [Rank:0]" in text
    assert "line 7: Graph compile failed. synStatus=synStatus 26 [Generic failure]." in text
    assert "Free device memory" not in text
    assert "Engine core initialization failed" not in text


def test_an_error_message_of_one_line_is_quoted_alone() -> None:
    prefix = "ERROR 05-01 10:00:10 [core.py:1] "
    lines = [GAUDI_LOG[0],
             *(prefix + line for line in (
                 "Traceback (most recent call last):",
                 '  File "/x/vllm_gaudi/v1/worker/hpu_model_runner.py", line 6108, in warmup_multimodal_graphs',
                 "    self._execute_dummy_mm_batch(batch)",
                 "RuntimeError: Graph compile failed. synStatus 26")),
             "ERROR 05-01 10:00:11 [utils.py:1] Engine core initialization failed."]  # fmt: skip
    d = diagnose(lines, load({}))
    assert [e.line for e in d.evidence] == [1, 5]
    assert "(line 5: RuntimeError: Graph compile failed. synStatus 26); fix" in d.recommendations[0]


def test_the_sniffer_names_frameworks_accelerators_and_gaudi_runtimes() -> None:
    cases = [
        (['2024-01-01T00:00:00Z INFO text_generation_launcher: Args { model_id: "x" }'], "tgi", None, None),
        (
            ['File "/root/optimum-habana/examples/text-generation/run_generation.py", line 1', "PT_HPU_LAZY_MODE=1"],
            "optimum-habana",
            "hpu",
            None,
        ),
        (['File "/workspace/vllm-fork/vllm/worker/hpu_model_runner.py", line 1'], "vllm", "hpu", Runtime.VLLM_FORK),
        (["(EngineCore pid=1) INFO vllm_gaudi/platform.py] Gaudi"], "vllm", "hpu", Runtime.VLLM_GAUDI),
        (["INFO vLLM API server version 0.8.5", "torch.OutOfMemoryError: HIP out of memory"], "vllm", "rocm", None),
        (["INFO vLLM API server version 0.8.5", "INFO tpu_worker.py] TPU"], "vllm", "tpu", None),
        # optimum-habana's text-generation set-up line; SGLang's scheduler, per served batch
        (["11/25/2024 11:49:11 - INFO - __main__ - device: hpu, n_hpu: 0, bf16: True"], "optimum-habana", "hpu", None),
        (["[TP0] Decode batch. #running-req: 36, #token: 958017, token usage: 0.96"], "other", None, None),
    ]
    for lines, framework, accelerator, runtime in cases:
        sniffer = SourceSniffer()
        for line in lines:
            sniffer.feed(line)
        s = sniffer.result()
        assert (s.framework, s.accelerator) == (framework, accelerator), lines
        if runtime is not None:
            assert s.runtime is runtime


def test_a_writer_the_log_does_not_name_is_said_to_be_assumed_only_where_a_vllm_line_shows() -> None:
    bare = SourceSniffer()  # a script's output: Gaudi's allocator words, no framework named, no vLLM line
    for line in ["Loading checkpoint shards: 100%", "RuntimeError: FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed"]:
        bare.feed(line)
    s = bare.result()
    assert (s.framework, s.runtime, s.named) == ("other", None, False)
    assert s.describe == "an unknown writer (no framework named, no vLLM line) on hpu"
    traced = SourceSniffer()  # the same with vLLM's logger line: vLLM's, assumed
    for line in ["INFO 11-20 09:01:12 [hpu_worker.py:260] Free device memory: 79.02 GiB",
                 "RuntimeError: FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed"]:  # fmt: skip
        traced.feed(line)
    s = traced.result()
    assert s.runtime is Runtime.VLLM_GAUDI
    assert not s.named
    # hpu_worker.py is both Gaudi runtimes' file: the log does not say which of them wrote it
    assert s.describe == "vllm-gaudi or vllm-fork (its lines do not say which) (assumed: the log names no framework)"
    named = SourceSniffer()
    named.feed("(EngineCore pid=1) INFO vllm_gaudi/platform.py] Gaudi")
    assert named.result().named
    assert named.result().describe == "vllm-gaudi"


def test_a_gaudi_log_of_a_vllm_newer_than_any_fork_release_is_vllm_gaudis() -> None:
    # HabanaAI/vllm-fork's releases are built on vLLM 0.9.x and older (its newest tag v0.9.0.1+Gaudi-1.22.0): a Gaudi
    # log whose banner names vLLM 0.10 or later was written by the vllm-gaudi plugin
    memory = "INFO 01-21 06:55:50 [hpu_worker.py:431] Free device memory: 77.8 GiB"
    for banner, runtime in [("INFO 01-21 06:55:02 [api_server.py:1885] vLLM API server version 0.32.0", "vllm-gaudi"),
                            ("INFO 01-21 06:55:04 [core.py:134] Initializing a V1 LLM engine (v0.10.1.dev12+g1) with "
                             "config: device_config=hpu", "vllm-gaudi"),
                            ("INFO 05-02 10:00:00 api_server.py:1043] vLLM API server version 0.9.0.1+gaudi000",
                             "vllm-gaudi or vllm-fork (its lines do not say which)")]:  # fmt: skip
        sniffer = SourceSniffer()
        for line in (banner, memory):
            sniffer.feed(line)
        assert sniffer.result().describe == runtime, banner
    marked = SourceSniffer()  # the fork's own words outrank the version
    for line in ("INFO vLLM API server version 0.32.0", "INFO hpu_executor.py:85] # HPU blocks: 100"):
        marked.feed(line)
    assert marked.result().runtime is Runtime.VLLM_FORK


#: The KV cache's own allocation refused by the device (held-out round 8, G03): what vllm-gaudi sized did not fit.
KV_ALLOCATION_FAILED = [
    "INFO 11-20 09:00:01 [__init__.py:45] - hpu -> vllm_gaudi:register",
    "INFO 11-20 09:00:03 [utils.py:326] non-default args: {'model': 'Qwen/Qwen2.5-VL-7B-Instruct', 'max_model_len': "
    "32768}",
    "INFO 11-20 09:01:12 [hpu_worker.py:260] Free device memory: 79.02 GiB, 72.7 GiB usable "
    "(gpu_memory_utilization=0.92), 7.27 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 65.43 GiB "
    "reserved for KV cache",
    "ERROR 11-20 09:01:13 [core.py:708] EngineCore failed to start.",
    "ERROR 11-20 09:01:13 [core.py:708] Traceback (most recent call last):",
    'ERROR 11-20 09:01:13 [core.py:708]   File "/usr/local/lib/python3.12/dist-packages/vllm_gaudi/v1/worker/'
    'hpu_model_runner.py", line 4102, in initialize_kv_cache',
    "ERROR 11-20 09:01:13 [core.py:708]     kv_cache = torch.zeros(kv_cache_shape, dtype=dtype, device=self.device)",
    "ERROR 11-20 09:01:13 [core.py:708] RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed on "
    "device, requested 2.38 GB, free 1.02 GB",
]


def test_a_failed_kv_cache_allocation_is_answered_with_what_frees_memory_not_a_larger_cache() -> None:
    d = diagnose(KV_ALLOCATION_FAILED, load({}))
    assert d.stage == "kv_cache"
    text = "\n".join(d.recommendations)
    assert "lower --gpu-memory-utilization from 0.92 to 0.87" in text
    assert "--num-gpu-blocks-override" in text
    assert "raise --gpu-memory-utilization" not in text  # a larger KV cache fails the same way
    assert "lower VLLM_GRAPH_RESERVED_MEM" not in text
    # a cache too small for the context (no allocation failed) still gets the larger share
    refused = [*KV_ALLOCATION_FAILED[:3], "ERROR 11-20 09:01:13 [core.py:708] ValueError: No available memory for the "
               "cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."]  # fmt: skip
    assert "raise --gpu-memory-utilization" in "\n".join(diagnose(refused, load({})).recommendations)


# --- settings: every setting the advice changes -------------------------------------------------------------------

CAPTURE_OOM = [
    "(EngineCore_DP0 pid=1) INFO 11-29 08:41:00 [core.py:134] Initializing a V1 LLM engine (v0.32.0) with config: "
    "model='Qwen/Qwen2.5-VL-7B-Instruct'",
    "(EngineCore_DP0 pid=1) ERROR 11-29 08:41:17 [core.py:1510] Traceback (most recent call last):",
    '(EngineCore_DP0 pid=1) ERROR 11-29 08:41:17 [core.py:1510]   File "/usr/lib/python3/dist-packages/vllm/v1/worker/'
    'gpu_model_runner.py", line 6482, in capture_model',
    "(EngineCore_DP0 pid=1) ERROR 11-29 08:41:17 [core.py:1510] torch.OutOfMemoryError: CUDA out of memory. Tried to "
    "allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.06 GiB is free.",
]


def test_settings_hold_every_setting_the_advice_changes_with_the_value_it_gives() -> None:
    # held-out CLI round 10, doctor case 9: the advice gave capture sizes and named three more settings; settings was {}
    d = diagnose(CAPTURE_OOM, load({}))
    assert d.stage == "graph_capture"
    assert d.settings["--compilation-config"] == {"cudagraph_capture_sizes": [1, 2, 4, 8]}
    assert {"--max-num-seqs", "--gpu-memory-utilization", "--enforce-eager"} <= set(d.settings)
    text = "\n".join(d.recommendations)
    assert all(name in text for name in d.settings)


def test_a_setting_the_advice_names_without_a_value_is_listed_with_none() -> None:
    # held-out CLI round 10, doctor case 18: llama.cpp's compute-buffer reservation, advice "lower --ubatch-size ..."
    lines = [
        "llama_context: n_ctx = 65536, n_ubatch = 2048",
        "ggml_gallocr_reserve_n: failed to allocate ROCm0 buffer of size 14822711296",
        "graph_reserve: failed to allocate compute buffers",
        "main: exiting due to model loading error",
    ]
    d = diagnose(lines, load({}))
    assert d.settings["--ubatch-size"] is None
    assert "--gpu-memory-utilization" not in d.settings


def test_a_computed_value_stands_over_the_logs_own_value_quoted_beside_it() -> None:
    refused = [
        "(EngineCore_DP0 pid=211) ERROR 09-01 10:00:00 [core.py:708] ValueError: Free memory on device cuda:0 "
        "(10.5/79.1 GiB) on startup is less than desired GPU memory utilization (0.9, 71.2 GiB)."
    ]
    assert diagnose(refused, load({})).settings == {"--gpu-memory-utilization": 0.13}


def test_no_failure_changes_no_setting_whatever_error_it_quotes() -> None:
    lines = ["RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details) --max-num-seqs 4"]
    assert diagnose(lines, load({})).settings == {}


def test_vllm_gaudi_v1s_dummy_block_split_line_is_read_for_the_advice() -> None:
    # vllm-gaudi v1/worker/hpu_worker.py @091bbadd: the graph reserve in format_bytes' unit, the KV share as a dummy
    # block and the usable rest; the advice starts from the log's own reserve (0.2), not the runtime's default
    split = ("INFO 11-20 09:01:12 [hpu_worker.py:432] Free device memory: 79.02 GiB, 72.7 GiB usable "
             "(gpu_memory_utilization=0.92), 14.54 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.2), 7 MiB "
             "reserved for KV cache dummy block 58.15 GiB reserved for usable KV cache")  # fmt: skip
    log = [*KV_ALLOCATION_FAILED[:2], split, "ERROR 11-20 09:01:13 [core.py:708] ValueError: No available memory for "
           "the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."]  # fmt: skip
    d = diagnose(log, load({}))
    assert d.gaudi_memory is not None
    assert (d.gaudi_memory.graph_reserved_mem, d.gaudi_memory.graph_gib, d.gaudi_memory.kv_gib) == (0.2, 14.54, 58.16)
    text = "\n".join(d.recommendations)
    assert "lower VLLM_GRAPH_RESERVED_MEM from 0.2 to 0.15" in text
    assert "(the log's split: 58.16 GiB KV of 72.7 GiB usable)" in text
    assert "raise --gpu-memory-utilization from 0.92 to 0.97" in text


def test_vllm_cpus_refusal_to_start_on_a_busy_host_caps_the_share_like_the_gpus() -> None:
    # vLLM 0.32 v1/worker/cpu_worker.py: the CPU twin of the GPU's start-up check, on the host's memory node
    refused = [
        "INFO 09-12 11:00:07 [core.py:95] Initializing a V1 LLM engine (v0.32.0) with config: device_config=cpu",
        "ERROR 09-12 11:00:08 [core.py:1510] ValueError: Available memory on node 0 (20.50/62.70 GiB) on startup is "
        "less than desired CPU memory utilization (0.9, 56.43 GiB). On the CPU backend, the `--gpu-memory-utilization` "
        "flag controls the fraction of CPU memory reserved (despite its name).",
    ]
    d = diagnose(refused, load({}))
    assert (d.stage, d.memory) == ("startup", "host")
    assert d.settings == {"--gpu-memory-utilization": 0.32, "--kv-cache-memory-bytes": None}
    text = "\n".join(d.recommendations)
    assert "host's memory node had 20.5 of 62.7 GiB available" in text
    assert "--kv-cache-memory-bytes" in text
    assert "--tensor-parallel-size" not in text


def test_vllm_cpus_kv_cache_above_its_nodes_available_memory_is_host_memory_and_made_smaller() -> None:
    # r16doctor 7: vLLM 0.32 cpu_worker.py determine_available_memory; it was device memory, told to give the cache more
    given = ["INFO 03-02 11:00:30 [core.py:95] Initializing a V1 LLM engine (v0.32.0) with config: device_config=cpu",
             "ERROR 03-02 11:00:41 [core.py:1510] ValueError: Available memory on node 0 (6.12/31.20 GiB) on kv cache "
             "allocation is less than requested memory for kv (16.00 GiB). Decrease --kv-cache-memory-bytes, "
             "VLLM_CPU_KVCACHE_SPACE, or reduce CPU memory used by other processes."]  # fmt: skip
    d = diagnose(given, load({}))
    assert (d.stage, d.memory) == ("kv_cache", "host")
    most = d.settings["--kv-cache-memory-bytes"]
    assert isinstance(most, int)
    assert 0 < most <= 6.12 * 2**30
    assert "lower --kv-cache-memory-bytes from 16 GiB" in "\n".join(d.recommendations)
    asked = [given[0], "ERROR 03-02 11:00:41 [core.py:1510] ValueError: Available memory on node 0 (6.12/31.20 GiB) "
             "on kv cache allocation is less than requested memory for kv (20.40/28.08 GiB). Reduce CPU memory used "
             "by other processes."]  # fmt: skip
    text = "\n".join(diagnose(asked, load({})).recommendations)
    assert "give --kv-cache-memory-bytes" in text
    assert "instead of the share --gpu-memory-utilization asked (20.4 GiB for the KV cache)" in text
