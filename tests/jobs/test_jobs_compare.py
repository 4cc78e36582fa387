"""The ``memory compare`` job: a public Gaudi log (tests/data/gaudi_logs) against the plan for the flags its
``# inputs:`` header states; a flag the run did not use comes out named with its likely cause."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest

from tests.support.gaudi_logs import CONFIGS, GAUDI_LOGS, stated
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.jobs.compare import compare_log
from vllm_hpu_mm.logs.compare import Comparison
from vllm_hpu_mm.plan.args import SizingArgs

DEV = GAUDI_LOGS / "dev" / "vllm_gaudi_perf_tuning_llama31_8b_gaudi2.log"
HELD_147 = GAUDI_LOGS / "heldout" / "vllm_fork_147_llama3_8b_gaudi2.log"
HELD_809 = GAUDI_LOGS / "heldout" / "vllm_fork_809_deepseek_r1_gaudi2.log"


def sizing_for(path: Path, tmp_path: Path) -> SizingArgs:
    """The sizing flags the log's header states (nothing more), with its model as a checkpoint folder."""
    h = stated(path)
    folder = tmp_path / Path(h["model"]).stem
    folder.mkdir(exist_ok=True)
    shutil.copy(CONFIGS / h["model"], folder / "config.json")
    engine = h.get("engine") or (None, None, None)
    runtime = f"{h['runtime']}=={h['release']}" if h.get("release") else h["runtime"]  # the line its pass follows
    return SizingArgs(model=str(folder), runtime=runtime, device=h["device"], tensor_parallel_size=h["tp"],
                      block_size=h["block_size"], gpu_memory_utilization=h.get("gpu_memory_utilization"),
                      graph_reserved_mem=h.get("graph_reserved_mem"), quantization=h.get("quantization") or None,
                      enforce_eager=h.get("enforce_eager") or None, max_model_len=engine[0], max_num_seqs=engine[1],
                      max_num_batched_tokens=engine[2])  # fmt: skip


def compare(path: Path, sizing: SizingArgs) -> Comparison:
    return compare_log(str(path), sizing, load(), {})


def test_the_development_log_with_its_flags_is_within_tolerance(tmp_path: Path) -> None:
    c = compare(DEV, sizing_for(DEV, tmp_path))
    assert c.misses == ()
    assert c.compared == 8
    assert c.formula.startswith("vllm-fork hpu_worker.determine_num_available_blocks")


def test_a_utilisation_the_run_did_not_use_is_named_with_the_logs_own_value(tmp_path: Path) -> None:
    c = compare(DEV, dataclasses.replace(sizing_for(DEV, tmp_path), gpu_memory_utilization=0.8))
    usable = next(m for m in c.misses if m.row.name == "usable")
    assert usable.mode == "given_free"
    assert usable.cause == "the log ran with gpu_memory_utilization=0.9 where --gpu-memory-utilization says 0.8"
    assert usable.difference == pytest.approx(-0.1111, abs=1e-4)


def test_the_graph_reserve_is_read_from_the_environment_as_memory_plan_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sizing = dataclasses.replace(sizing_for(HELD_147, tmp_path), graph_reserved_mem=None)
    # the run set nothing: the 1.17 line's own default 0.4 (habana_worker.py:141 @1e0e492e1) is what it printed
    assert compare(HELD_147, sizing).misses == ()
    monkeypatch.setenv("VLLM_GRAPH_RESERVED_MEM", "0.1")
    c = compare(HELD_147, sizing)  # a shell's 0.1 is not the run's 0.4
    assert {m.row.name for m in c.misses} >= {"graph_reserve", "kv_cache"}
    assert "VLLM_GRAPH_RESERVED_MEM=0.4 where the plan used 0.1" in c.misses[0].cause


def test_a_wrong_device_is_named_by_the_total_the_log_printed(tmp_path: Path) -> None:
    c = compare(HELD_809, dataclasses.replace(sizing_for(HELD_809, tmp_path), device="gaudi3"))
    total = next(m for m in c.misses if m.row.name == "total")
    assert "the log's card reports 94.62 GiB (a gaudi2's), --device gaudi3 plans 126.55 GiB" in total.cause


def test_a_missing_quantization_flag_shows_as_weights_outside_tolerance(tmp_path: Path) -> None:
    c = compare(HELD_809, dataclasses.replace(sizing_for(HELD_809, tmp_path), quantization=None))
    assert [m.row.name for m in c.misses] == ["weights"]
    assert "--quantization (none)" in c.misses[0].cause


#: vLLM's engine config line, the start line each start prints (vllm-fork's V0 engine; its length as max_seq_len).
START = (
    "INFO 09-24 17:31:30 llm_engine.py:184] Initializing an LLM engine (v0.5.3.post1) with config: model='{m}', "
    "max_seq_len={n}, tensor_parallel_size=1"
)
#: A restart that failed before it loaded its weights (the device was still held: no memory figure printed).
FAILED_START = [
    START.format(m="meta-llama/Llama-3.1-8B-Instruct", n=8192),
    "ERROR 09-24 17:40:02 engine.py:400] RuntimeError: synStatus=26 [Generic failure] Device acquire failed.",
]


def _body(path: Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if not line.startswith("#")]


def test_a_log_of_several_start_ups_is_compared_on_its_last(tmp_path: Path) -> None:
    # an earlier start-up that loaded other weights (another checkpoint, then a restart): only the last one counts
    body = _body(HELD_147)
    earlier = [line.replace("took 14.97 GiB", "took 20.00 GiB") for line in body if "model weights" in line]
    start = START.format(m="meta-llama/Meta-Llama-3-8B", n=131072)
    log = tmp_path / "restarted.log"
    log.write_text("\n".join([start, *earlier, start, *body]) + "\n")
    c = compare(log, sizing_for(HELD_147, tmp_path))
    assert c.misses == ()
    assert (c.run, c.runs) == (2, 2)


def test_a_restart_that_failed_before_its_weights_leaves_the_start_before_it_compared(tmp_path: Path) -> None:
    # round 8: compare split runs by its own rule and took the failed restart's max_model_len (8192) with the first
    # start's figures, blaming the length; it reads the run memory calibrate reads: the last with a memory figure
    log = tmp_path / "failed_restart.log"
    log.write_text("\n".join([START.format(m="meta-llama/Llama-3.1-8B-Instruct", n=131072), *_body(DEV),
                              *FAILED_START]) + "\n")  # fmt: skip
    c = compare(log, dataclasses.replace(sizing_for(DEV, tmp_path), gpu_memory_utilization=0.8))
    assert (c.run, c.runs) == (1, 2)
    kv = next(m for m in c.misses if m.row.name == "kv_cache")
    assert kv.cause == "the log ran with gpu_memory_utilization=0.9 where --gpu-memory-utilization says 0.8"
    assert not any("max_model_len" in m.cause for m in c.misses)


def test_the_device_defaults_as_the_planning_commands_default_it(tmp_path: Path) -> None:
    c = compare(DEV, dataclasses.replace(sizing_for(DEV, tmp_path), device=None))
    assert c.inputs.device == "gaudi2"


def test_the_kv_flags_the_plan_reads_are_compared_as_the_plan_reads_them(tmp_path: Path) -> None:
    """--kv-cache-dtype and --num-gpu-blocks-override move the plan's blocks (compare kept bf16's and memory's:
    a log run with neither came out within tolerance of flags it did not run)."""
    fp8 = compare(DEV, dataclasses.replace(sizing_for(DEV, tmp_path), kv_cache_dtype="fp8_inc"))
    blocks = next(m for m in fp8.misses if m.row.name == "kv_blocks" and m.mode == "given_free")
    assert blocks.planned == 2 * 4107 - 1  # twice the log's blocks from the same KV memory, less one dummy block
    assert "--kv-cache-dtype (1-byte elements)" in blocks.cause
    override = compare(DEV, dataclasses.replace(sizing_for(DEV, tmp_path), num_gpu_blocks_override=2000))
    (miss,) = (m for m in override.misses if m.row.name == "kv_blocks")
    assert miss.planned == 2000
    assert miss.cause.startswith("--num-gpu-blocks-override 2000 sets the plan's blocks; the log's server allocated")
