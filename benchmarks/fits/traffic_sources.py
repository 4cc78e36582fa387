"""Real request traffic built from public traces, for the embedded default traffic and the replay benchmarks.

Nothing here is made up except the stated mixing shares. Sources, read at run time from local mirrors (``git show``;
nothing of them is kept in this repository except the generated traffic files):

- text and answer lengths: the Azure LLM inference trace 2023 (Azure/AzurePublicDataset @ b469a11,
  ``data/AzureLLMInferenceTrace_conv.csv`` (19,366 chat requests) and ``..._code.csv`` (8,819 code requests):
  ``ContextTokens``, ``GeneratedTokens`` per request; CC-BY 4.0);
- prefix-cache hits: the Mooncake FAST'25 conversation trace (kvcache-ai/Mooncake @ 3b5a594,
  ``FAST25-release/traces/conversation_trace.jsonl``, 12,031 requests with 512-token prefix block hashes): for each
  request, the share of its prompt covered by blocks an earlier request already had (an unbounded cache);
- images: the project's real image-size sets (``vllm_hpu_mm/data``, ``../shared/data/image_sizes``).

``python benchmarks/traffic_sources.py`` writes ``vllm_hpu_mm/data/default_traffic.csv``: every COCO val2017 and
MathVista testmini image once, plus text-only requests making up :data:`TEXT_ONLY_SHARE` of the total (an
assumption, stated), each with a (text, answer) pair of the chat trace and a prefix-hit share of the Mooncake
trace applied to its text.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import random
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
AZURE = Path("/work/.mirror/Azure+AzurePublicDataset/repo")
AZURE_COMMIT = "b469a11"
MOONCAKE = Path("/work/.mirror/kvcache-ai+Mooncake/repo")
MOONCAKE_COMMIT = "3b5a594"
SHARED_SIZES = ROOT.parent / "shared" / "data" / "image_sizes"
PACKAGE_DATA = ROOT / "vllm_hpu_mm" / "data"
#: Share of text-only requests in the default traffic: an assumption (the public multimodal trace that would tell,
#: Azure's LMM trace 2025, is not in the mirror).
TEXT_ONLY_SHARE = 0.2
SEED = 20261127


def _git_show(repo: Path, commit: str, path: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "show", f"{commit}:{path}"], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip


def azure_text(kind: str = "conv") -> list[tuple[int, int]]:
    """(prompt tokens, answer tokens) per request of the Azure LLM inference trace 2023 (``conv`` or ``code``)."""
    text = _git_show(AZURE, AZURE_COMMIT, f"data/AzureLLMInferenceTrace_{kind}.csv")
    return [(int(r["ContextTokens"]), max(1, int(r["GeneratedTokens"]))) for r in csv.DictReader(io.StringIO(text))]


def mooncake_hit_shares() -> list[float]:
    """Per request of the Mooncake conversation trace: the share of its prompt an unbounded prefix cache holds."""
    seen: set[tuple[int, ...]] = set()
    shares = []
    for line in _git_show(MOONCAKE, MOONCAKE_COMMIT, "FAST25-release/traces/conversation_trace.jsonl").splitlines():
        r = json.loads(line)
        hashes, hit = r["hash_ids"], 0
        for i in range(len(hashes)):
            if tuple(hashes[: i + 1]) not in seen:
                break
            hit = i + 1
        seen.update(tuple(hashes[: i + 1]) for i in range(len(hashes)))
        shares.append(min(1.0, hit * 512 / max(1, r["input_length"])))
    return shares


def image_sizes(path: Path) -> list[tuple[int, int]]:
    with path.open() as f:
        return [(int(r["width"]), int(r["height"])) for r in csv.DictReader(f)]


def build(images: list[tuple[int, int]], texts: list[tuple[int, int]], shares: list[float], *,
          text_only_share: float, seed: int) -> list[tuple[str, str, int, int, int]]:  # fmt: skip
    """Rows (width, height, text, output, cached): every image once plus text-only rows to the given share."""
    rng = random.Random(seed)
    text_only = round(len(images) * text_only_share / (1 - text_only_share))
    rows = []
    for image in [*images, *([None] * text_only)]:
        prompt, answer = rng.choice(texts)
        cached = int(rng.choice(shares) * prompt)
        w, h = ("", "") if image is None else (str(image[0]), str(image[1]))
        rows.append((w, h, prompt, answer, cached))
    rng.shuffle(rows)
    return rows


def write(rows: list[tuple[str, str, int, int, int]], path: Path) -> None:
    with path.open("w", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["width", "height", "text_tokens", "output_tokens", "cached_tokens"])
        out.writerows(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--output", type=Path, default=PACKAGE_DATA / "default_traffic.csv")
    args = p.parse_args()
    images = image_sizes(PACKAGE_DATA / "coco_val2017.csv") + image_sizes(PACKAGE_DATA / "mathvista_testmini.csv")
    rows = build(images, azure_text("conv"), mooncake_hit_shares(), text_only_share=TEXT_ONLY_SHARE, seed=SEED)
    write(rows, args.output)
    print(f"wrote {len(rows)} requests to {args.output}")


if __name__ == "__main__":
    main()
