"""The served processor's HF call with and without our pixel path, in one process, through vLLM's own processor.

vLLM's multimodal processor for our model class (``MULTIMODAL_REGISTRY.create_processor``, plugin registered) calls
the HF processor exactly as the API server does (``_call_hf_processor``: vLLM 0.32 asks for uint8 patches). Rounds
alternate ``ours`` (``vllm_hpu_mm.plugin.pixels`` on) and ``transformers`` (our path refused, so transformers'
torchvision processor runs); one random RGB image per call at each size. Reported: median process CPU time and wall
time per call, and whether the outputs are identical.

    python -m benchmarks.performance.processor_cpu [--rounds 21]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image

from benchmarks.common import machine_meta, write_results

RESULTS = Path(__file__).resolve().parent / "results"

SIZES = ((224, 224), (336, 448), (672, 896))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=21, help="alternating rounds per size (default 21)")
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "vllm-hpu-mm-processor")
    args = parser.parse_args()
    import vllm_hpu_mm.plugin as plugin
    from tests.e2e.checkpoint import build_tiny_qwen25vl
    from vllm_hpu_mm.plugin import pixels

    plugin.register()
    from vllm.config import ModelConfig
    from vllm.multimodal import MULTIMODAL_REGISTRY

    args.workdir.mkdir(parents=True, exist_ok=True)
    model = build_tiny_qwen25vl(args.workdir)
    processor: Any = MULTIMODAL_REGISTRY.create_processor(ModelConfig(model=str(model), max_model_len=4096))
    ours = pixels.pixel_values_if_exact

    def refuse(*_: Any) -> None:
        return None

    rng = np.random.default_rng(0)
    load_before = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    rows = []
    for h, w in SIZES:
        image = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        data = {"text": "<|vision_start|><|image_pad|><|vision_end|>Describe.", "images": [image]}
        samples: dict[str, list[tuple[float, float]]] = {"ours": [], "transformers": []}
        outputs = {}
        for k in range(args.rounds):
            for name in ("ours", "transformers") if k % 2 else ("transformers", "ours"):
                pixels.pixel_values_if_exact = ours if name == "ours" else refuse  # type: ignore[assignment]
                cpu0, wall0 = time.process_time(), time.perf_counter()
                outputs[name] = processor._call_hf_processor(data, {})
                samples[name].append((1e3 * (time.process_time() - cpu0), 1e3 * (time.perf_counter() - wall0)))
        pixels.pixel_values_if_exact = ours
        same = all(torch.equal(outputs["ours"][k], outputs["transformers"][k]) for k in outputs["ours"])
        row: dict[str, Any] = {"size": f"{w}x{h}", "identical": same}
        for name, values in samples.items():
            row[f"{name}_cpu_ms"] = statistics.median(c for c, _ in values)
            row[f"{name}_wall_ms"] = statistics.median(t for _, t in values)
        rows.append(row)
        print(row, flush=True)
    meta = machine_meta(1)
    data_out = {"meta": meta, "rounds": args.rounds, "load_before": load_before, "rows": rows}
    data_out["load_after"] = " / ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [
        "# The served processor's HF call on CPU: our pixel path vs transformers' (vLLM's own processor, one process)",
        "",
        f"Machine: {meta['machine']}; load average {load_before} before, {data_out['load_after']} after. vLLM "
        f"{meta['vllm']}, torch {meta['torch']}. Run {meta['date']}; command "
        "`python -m benchmarks.performance.processor_cpu "
        f"--rounds {args.rounds}`. One random RGB image per call (already 112-aligned, as the aligned processor "
        "hands it over), vLLM's `_call_hf_processor` (uint8 patches, normalised later on the device). Median over "
        "alternating rounds.",
        "",
        "| size | identical output | ours CPU ms | transformers CPU ms | ours wall ms | transformers wall ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['size']} | {'yes' if r['identical'] else 'NO'} | {r['ours_cpu_ms']:.2f} | "
        f"{r['transformers_cpu_ms']:.2f} | {r['ours_wall_ms']:.2f} | {r['transformers_wall_ms']:.2f} |"
        for r in rows
    ]
    write_results("processor_cpu", "\n".join(lines), data_out, RESULTS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
