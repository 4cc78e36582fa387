"""Every planning command of an installed ``vllm-hpu-mm``, run as a user runs it (its console script, from a folder
outside the checkout, with a fresh cache), checked for its documented exit code: 0 ok, 1 a negative answer, 2 invalid
input; never 3. ``scripts/test-plain`` runs it in a virtualenv that holds only the package's declared dependencies.

Usage: python scripts/plain_smoke.py PATH/TO/vllm-hpu-mm
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

WARMUP_LOG = """\
INFO hpu_worker.py] Free device memory: 72.5 GiB, 66.7 GiB usable (gpu_memory_utilization=0.92), 6.67 GiB reserved \
for HPUGraphs (VLLM_GRAPH_RESERVED_MEM=0.1), 60.03 GiB reserved for KV cache
INFO hpu_model_runner.py] [Warmup][Graph/Prompt][1/3] batch_size:1 query_len:128 num_blocks:0 free_mem:60.00 GiB
INFO hpu_model_runner.py] [Warmup][Graph/Prompt][2/3] batch_size:1 query_len:256 num_blocks:0 free_mem:59.90 GiB
INFO hpu_model_runner.py] [Warmup][Graph/Prompt][3/3] batch_size:1 query_len:512 num_blocks:0 free_mem:59.70 GiB
INFO hpu_model_runner.py] [Warmup][Graph/Decode][1/2] batch_size:1 num_blocks:16 free_mem:59.50 GiB
INFO hpu_model_runner.py] [Warmup][Graph/Decode][2/2] batch_size:2 num_blocks:32 free_mem:59.40 GiB
"""
OOM_LOG = (
    WARMUP_LOG
    + """\
Traceback (most recent call last):
  File "vllm_gaudi/v1/worker/hpu_model_runner.py", line 4000, in warmup_model
RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::786432000 (750)MB
"""
)
HEALTHY_LOG = "INFO Starting vLLM API server\nINFO Application startup complete.\n"
#: A server's /metrics after 10 prompts of 1,000 to 2,000 tokens (vLLM's 1-2-5 histogram edges), for the stale-plan
#: alarm, and a bucket file planned for anything but them (one coarse bucket per phase).
LONG_PROMPTS = (
    "".join(
        f'vllm:request_prompt_tokens_bucket{{le="{le}"}} {n}\n'
        for le, n in (("1000.0", 0), ("2000.0", 10), ("+Inf", 10))
    )
    + 'vllm:request_generation_tokens_bucket{le="20.0"} 10\nvllm:request_generation_tokens_bucket{le="+Inf"} 10\n'
)
COARSE_PLAN = "(1, 2048, 0)\n(1, 2048, 31)\n(4, 1, 128)\n"


def main(script: str) -> int:
    failures = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "warmup.log").write_text(WARMUP_LOG)
        (folder / "oom.log").write_text(OOM_LOG)
        (folder / "healthy.log").write_text(HEALTHY_LOG)
        (folder / "sizes.csv").write_text("width,height\n640,480\n1024,768\n1920,1080\n")
        (folder / "metrics.txt").write_text(LONG_PROMPTS)
        (folder / "plan.txt").write_text(COARSE_PLAN)
        env = {**os.environ, "HOME": tmp, "VLLM_HPU_MM_CACHE_DIR": str(folder / "cache"),
               "VLLM_HPU_MM_PROFILE": str(folder / "profile.json"), "HF_HOME": str(folder / "hf")}  # fmt: skip
        cases: list[tuple[list[str], int, str]] = [
            (["buckets", "plan"], 0, "export VLLM_MULTIMODAL_BUCKETS="),
            (["buckets", "plan", "--sizes", "sizes.csv", "--num-buckets", "2", "--json"], 0, '"buckets"'),
            (["buckets", "check", "--sizes", "sizes.csv"], 0, "efficiency"),
            (["buckets", "plan", "--num-buckets", "0"], 2, "--num-buckets"),
            (
                ["buckets", "replay", "--sizes", "sizes.csv", "--max-model-len", "8192", "--requests", "100"],
                1,  # the default text drawn for sizes.csv's images holds prompts refused at 8192 tokens: exit 1
                "refused by the engine",
            ),
            (["buckets", "replay", "--text-graph-budget", "1"], 2, "--text-graph-budget"),
            (
                [
                    "buckets",
                    "stale",
                    "--from-metrics",
                    "metrics.txt",
                    "--bucket-file",
                    "plan.txt",
                    "--max-model-len",
                    "4096",
                    "--max-num-seqs",
                    "4",
                ],
                1,
                "verdict: STALE",
            ),
            (
                ["buckets", "stale", "--from-metrics", "http://127.0.0.1:9/metrics", "--bucket-file", "plan.txt"],
                2,
                "cannot fetch it",
            ),
            (["memory", "plan"], 0, "verdict:"),
            (["memory", "plan", "--json", "--sizes", "sizes.csv"], 0, '"verdict"'),
            (["memory", "plan", "--free-memory-gib", "0.5"], 1, "does_not_fit"),
            (["memory", "plan", "--model", "./no-such-model"], 2, "--model"),
            (["memory", "calibrate", "warmup.log", "--model", "Qwen/Qwen2.5-VL-7B-Instruct"], 0, "profile written"),
            (["memory", "calibrate", "healthy.log"], 1, "nothing measurable"),
            (["memory", "compare", "warmup.log"], 1, "outside: free memory"),
            (["memory", "compare", "healthy.log"], 2, "no memory lines"),
            (["serve", "--dry-run"], 0, "command:"),
            (["serve", "--dry-run", "--json", "--plan-profile", "none"], 0, '"command_line"'),
            (["serve", "--dry-run", "--plan-free-memory-gib", "-1"], 2, "--plan-free-memory-gib"),
            (["serve", "--model", "Qwen/Qwen2.5-VL-7B-Instruct"], 2, "vLLM is not installed"),
            (["oom-doctor", "oom.log"], 1, "stage: graph_capture"),
            (["oom-doctor", "healthy.log", "--json"], 0, '"stage": "none"'),
            (["oom-doctor", "missing.log"], 2, "missing.log"),
        ]
        for args, want, said in cases:
            done = subprocess.run(
                [str(Path(script).resolve()), *args], cwd=tmp, env=env, capture_output=True, text=True, timeout=120
            )
            out = done.stdout + done.stderr
            ok = done.returncode == want and said in out
            print(f"{'ok  ' if ok else 'FAIL'} exit {done.returncode} (want {want}): vllm-hpu-mm {' '.join(args)}")
            if not ok:
                failures.append(
                    f"vllm-hpu-mm {' '.join(args)}: exit {done.returncode}, want {want} and {said!r}:\n{out}"
                )
    for failure in failures:
        print(failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
