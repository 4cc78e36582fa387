"""The public Gaudi log excerpts the memory plan is checked against (tests/data/gaudi_logs, sources in SOURCES.md):
each states the run it came from on a ``# inputs: {json}`` header line (model config in tests/data/configs, runtime,
device, tensor parallelism, utilisation, graph reserve, block size, quantization, eager), read here into the typed
:class:`~vllm_hpu_mm.logs.reproduce.RunInputs` the reproduction takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.data import DATA
from vllm_hpu_mm.engine import EngineShape
from vllm_hpu_mm.logs.reproduce import RunInputs
from vllm_hpu_mm.models import devices
from vllm_hpu_mm.models.config_json import dims_from_config, read_config_json
from vllm_hpu_mm.runtimes.base import Runtime
from vllm_hpu_mm.runtimes.registry import model_for

GAUDI_LOGS = DATA / "gaudi_logs"
CONFIGS = DATA / "configs"
#: Every excerpt with memory figures, development (``dev/``) and held-out (``heldout/``); ``buckets/`` holds
#: bucket-count-only excerpts (no memory lines, no model config), read by benchmarks/agreement/gaudi_log_buckets.py
#: alone.
ALL_GAUDI_LOGS = sorted(p for p in GAUDI_LOGS.rglob("*.log") if "buckets" not in p.relative_to(GAUDI_LOGS).parts)
#: The bucket-count-only excerpts (``buckets/{dev,heldout}``), each with a ``# buckets: {json}`` header.
BUCKET_LOGS = sorted((GAUDI_LOGS / "buckets").rglob("*.log"))
#: What a header leaves out: vllm-fork's defaults (V0 engine) on one Gaudi2; ``engine`` (max_model_len,
#: max_num_seqs, max_num_batched_tokens), the sizes its profiling pass is shaped from, only where the log shows them;
#: ``release`` (the runtime's line, whose code shapes that pass), only where the log's code can be dated.
DEFAULTS: dict[str, Any] = {"runtime": "vllm-fork", "device": "gaudi2", "tp": 1, "block_size": 128,
                            "gpu_memory_utilization": 0.9, "graph_reserved_mem": 0.1, "quantization": None,
                            "enforce_eager": False}  # fmt: skip


def stated(path: Path) -> dict[str, Any]:
    """What an excerpt's ``# inputs:`` header states (no defaults)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# inputs:"):
            out: dict[str, Any] = json.loads(line.split(":", 1)[1])
            return out
    raise AssertionError(f"{path} has no '# inputs:' header")


def header(path: Path) -> dict[str, Any]:
    """The ``# inputs:`` header with what it leaves out filled in (:data:`DEFAULTS`)."""
    return {**DEFAULTS, **stated(path)}


def run_inputs(path: Path) -> RunInputs:
    """The run an excerpt states, typed."""
    h = header(path)
    config = CONFIGS / h["model"]
    model = dims_from_config(read_config_json(config, source="log inputs"), name=h["model"], path=config,
                             source=str(config))  # fmt: skip
    return RunInputs(
        model=model,
        runtime=model_for(Runtime(h["runtime"]), version=h.get("release")),
        total_bytes=devices.device_spec(h["device"]).total_bytes,
        gpu_memory_utilization=float(h["gpu_memory_utilization"]),
        graph_reserved_mem=float(h["graph_reserved_mem"]),
        tensor_parallel_size=int(h["tp"]),
        block_size=int(h["block_size"]),
        quantization=h["quantization"],
        enforce_eager=bool(h["enforce_eager"]),
        engine=engine_of(h),
    )


def engine_of(h: dict[str, Any]) -> EngineShape | None:
    """The header's engine sizes, [max_model_len, max_num_seqs, max_num_batched_tokens] (KV blocks not known: 1)."""
    if not h.get("engine"):
        return None
    mml, seqs, tokens = h["engine"]
    return EngineShape(max_model_len=mml, max_num_seqs=seqs, max_num_batched_tokens=tokens,
                       block_size=int(h["block_size"]), num_kv_blocks=1)  # fmt: skip
