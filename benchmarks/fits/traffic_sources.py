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

``python -m benchmarks.fits.traffic_sources`` writes ``vllm_hpu_mm/data/default_traffic.csv``: every COCO val2017 and
MathVista testmini image once, plus text-only requests making up :data:`TEXT_ONLY_SHARE` of the total (an
assumption, stated), each with a (text, answer) pair of the chat trace and a prefix-hit share of the Mooncake
trace applied to its text.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchmarks.common import (
    PACKAGE_DATA,
    SEED,
    TEXT_ONLY_SHARE,
    azure_text,
    build,
    image_sizes,
    mooncake_hit_shares,
    write,
)


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
