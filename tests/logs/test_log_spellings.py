"""memory compare reads every figure a log prints, in the runtimes' own wordings and vLLM's V0 and V1 spellings, and
names the cause the log itself shows. The lines are the format strings of the cited sources filled with numbers
(no public vllm-gaudi V1 log with its dummy-block line was found); the fork's are quoted from public logs."""

from __future__ import annotations

from pathlib import Path

from tests.support.gaudi_logs import GAUDI_LOGS, run_inputs
from vllm_hpu_mm.logs.compare import compare
from vllm_hpu_mm.logs.reproduce import read_log
from vllm_hpu_mm.values import GIB

#: vllm-gaudi v1/worker/hpu_worker.py @091bbadd determine_available_memory / initialize_from_config.
GAUDI_V1 = [
    "INFO 08-21 10:00:00 [hpu_worker.py:404] Model profiling run took 0 B of device memory (15.1 GiB/94.62 GiB used)",
    "INFO 08-21 10:00:00 [hpu_worker.py:432] Free device memory: 79.52 GiB, 71.57 GiB usable "
    "(gpu_memory_utilization=0.9), 7.157 GiB reserved for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 16 MiB reserved "
    "for KV cache dummy block 64.4 GiB reserved for usable KV cache",
    "INFO 08-21 10:00:01 [hpu_worker.py:546] Usable num_blocks: 4121, actual allocated num_blocks (max across "
    "layers): 4122 (_PAD_BLOCK_ID=0, _PAD_SLOT_ID=-1)",
    "INFO 08-21 10:00:01 [kv_cache_utils.py:2328] HPU KV cache size: 527,488 tokens, Maximum concurrency for "
    "32,768 tokens per request: 16.10x",
]
#: vLLM's V0 wordings (model_runner.py "Loading model weights took %.4f GB", executor_base.py "# %s blocks").
VLLM_V0 = [
    "INFO 03-03 20:36:02 [model_runner.py:1117] Loading model weights took 15.4137 GB",
    "INFO 03-03 20:36:05 [executor_base.py:113] # GPU blocks: 27153, # CPU blocks: 2048",
    "INFO 03-03 20:30:00 [api_server.py:912] vLLM API server version 0.7.3",
]


def test_vllm_gaudi_v1_dummy_block_line_gives_graph_reserve_and_usable_kv() -> None:
    logged = read_log(GAUDI_V1)
    assert logged.free_bytes == round(79.52 * GIB)
    assert logged.graph_bytes == round(7.157 * GIB)
    assert logged.graph_reserved_mem == 0.1
    assert logged.kv_bytes == round(64.4 * GIB)  # the usable part, not the 16 MiB dummy block
    assert logged.kv_blocks == 4121
    assert logged.kv_tokens == 527_488


def test_vllm_v0_weights_in_gb_are_gib_and_gpu_blocks_and_release_are_read() -> None:
    logged = read_log(VLLM_V0)
    assert logged.weight_bytes == round(15.4137 * GIB)  # vLLM divides by 2**30 and prints "GB"
    assert logged.kv_blocks == 27153
    assert logged.release == "0.7.3"
    assert logged.has_memory


def test_kv_tokens_are_compared_as_blocks_times_block_size() -> None:
    path = GAUDI_LOGS / "dev" / "vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log"
    lines = [
        *path.read_text(encoding="utf-8").splitlines(),
        "INFO [kv_cache_utils.py:1] GPU KV cache size: 525,696 tokens",
    ]
    c = compare(read_log(lines), run_inputs(path), lambda f: f"--{f}", source=path.name)
    row = next(r for r in c.rows if r.name == "kv_tokens")
    assert row.logged == 4107 * 128
    assert row.alone is not None
    assert row.alone % 128 == 0
    assert row.tolerance_alone == 0.05


def test_a_larger_profiling_run_in_the_log_is_named_as_the_cause_of_less_free_memory(tmp_path: Path) -> None:
    path = GAUDI_LOGS / "dev" / "vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log"
    text = path.read_text(encoding="utf-8")
    # the same run, had its profiling pass held 5.3 GiB: free memory 4.9 GiB lower
    text = text.replace("Model profiling run took 355 MiB", f"Model profiling run took {5.3 * 1024:.0f} MiB")
    text = text.replace(
        "Free device memory: 79.22 GiB, 71.3 GiB usable", "Free device memory: 74.32 GiB, 66.89 GiB usable"
    )
    c = compare(read_log(text.splitlines()), run_inputs(path), lambda f: f"--{f}", source="edited")
    free = next(m for m in c.misses if m.row.name == "free")
    assert "the log's own profiling run held 5427 MiB" in free.cause
    assert "another process" not in free.cause
    assert free.planned - free.row.logged > 4 * GIB
    assert free.row.logged == round(74.32 * GIB)
