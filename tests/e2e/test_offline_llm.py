"""Offline ``vllm.LLM`` with our plugin bills the same aligned token counts as the server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.e2e.helpers import (
    chat,
    expected_image_tokens,
    expected_prompt_tokens,
    messages,
    photo,
    png_url,
    prompt_tokens,
)
from tests.e2e.server import IMAGES_DIR, Server, e2e_env

SIZES = [(500, 333), (3000, 200), (640, 427)]
TEXT = "offline"

# Runs in a fresh process: the engine inherits our settings from the environment like the server does.
SCRIPT = """
import json, sys
from vllm import LLM, SamplingParams
model, requests = sys.argv[1], json.loads(sys.stdin.read())
llm = LLM(model=model, enforce_eager=True, kv_cache_memory_bytes=128 * 2**20, max_model_len=4096, max_num_seqs=2,
          limit_mm_per_prompt={"image": 4, "video": 0})
outs = llm.chat(requests, SamplingParams(max_tokens=1), use_tqdm=False)
print("COUNTS=" + json.dumps([len(o.prompt_token_ids) for o in outs]))
"""


def test_offline_llm_gives_the_server_counts(server: Server, tiny_model: Path, tmp_path: Path) -> None:
    # A photo no other e2e test sends: the session server would answer a repeat from its caches without the tower.
    images = [photo(IMAGES_DIR, "skimage_clock_motion.png", size) for size in SIZES]
    requests = [messages([png_url(image)], TEXT) for image in images]
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_model)],
        input=json.dumps(requests),
        env=e2e_env(tmp_path, VLLM_SKIP_WARMUP="true"),  # counts do not depend on the warm-up
        capture_output=True,
        text=True,
        timeout=400,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    offline = json.loads(proc.stdout.split("COUNTS=")[-1].splitlines()[0])
    served = [prompt_tokens(chat(server, [png_url(image)], text=TEXT)) for image in images]
    expected = [expected_prompt_tokens(tiny_model, [expected_image_tokens(*s)], TEXT) for s in SIZES]
    assert offline == served == expected
