"""Vision-bucket efficiency: the default list vs planned lists on real image-size distributions.

For every CSV in ../shared/data/image_sizes/ (and any --sizes CSV / --images DIR given), images are aligned to
112-px multiples (NEAREST, min_pixels=3136, max_pixels = 12544 x 196, the default list's largest bucket), each
image runs alone in the smallest bucket that holds it, and efficiency = real patches / padded patches.
Compared: the default list 1600,...,12544; the exact optimal list with the same k = 7; the fewest buckets that
reach 0.95 (auto-k). Prints a Markdown table and writes benchmarks/planner/results/bucket_efficiency.{md,json}.

    .venv/bin/python benchmarks/planner/bucket_efficiency.py [--sizes CSV ...] [--images DIR ...] [--machine TEXT]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from vllm_hpu_mm.buckets.sizes import SizeSet, read_sizes_csv, scan_images
from vllm_hpu_mm.jobs.buckets import plan_buckets
from vllm_hpu_mm.preprocess.align import QWEN_MIN_PIXELS
from vllm_hpu_mm.values import DEFAULT_BUCKETS

ROOT = Path(__file__).resolve().parents[2]
SHARED_SIZES = ROOT.parent / "shared" / "data" / "image_sizes"
RESULTS = Path(__file__).resolve().parent / "results"
MAX_PIXELS = DEFAULT_BUCKETS.shrink_limit
K = len(DEFAULT_BUCKETS)
TARGET = 0.95


def measure(name: str, sizes: SizeSet) -> dict[str, Any]:
    # The same job as `vllm-hpu-mm buckets plan` (nearest alignment, shrink policy); plan_ms covers all of it.
    start = time.perf_counter()
    planned = plan_buckets(sizes.counts, num_buckets=K, max_pixels=MAX_PIXELS)
    plan_ms = (time.perf_counter() - start) * 1e3
    auto = plan_buckets(sizes.counts, target_efficiency=TARGET, max_pixels=MAX_PIXELS)
    return {
        "dataset": name,
        "images": sizes.num_images,
        "distinct_patch_counts": len(set(planned.counts)),
        "num_shrunk": planned.evaluation.num_shrunk,
        "default_efficiency": round(planned.default.efficiency, 4),
        "planned_k7_buckets": list(planned.buckets),
        "planned_k7_efficiency": round(planned.evaluation.efficiency, 4),
        "auto_k_for_0.95": len(auto.buckets),
        "auto_buckets": list(auto.buckets),
        "auto_efficiency": round(auto.evaluation.efficiency, 4),
        "plan_ms": round(plan_ms, 2),
    }


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| dataset | images | distinct counts | shrunk | default list | planned k=7 | auto-k for 0.95 "
        "| planned k=7 list | plan job ms |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['dataset']} | {r['images']} | {r['distinct_patch_counts']} | {r['num_shrunk']} "
            f"| {r['default_efficiency']:.4f} | {r['planned_k7_efficiency']:.4f} "
            f"| k={r['auto_k_for_0.95']}: {r['auto_efficiency']:.4f} | {','.join(map(str, r['planned_k7_buckets']))} "
            f"| {r['plan_ms']:.1f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", action="extend", default=[], help="extra width,height CSV files")
    parser.add_argument("--images", nargs="+", action="extend", default=[], help="extra folders of images")
    parser.add_argument(
        "--machine", default="CPU: 2-core x86-64 dev machine, 24 GiB", help="machine named in the results"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    sources = [(p.stem, read_sizes_csv(p)) for p in sorted(SHARED_SIZES.glob("*.csv"))]
    sources += [(Path(p).stem, read_sizes_csv(p)) for p in args.sizes]
    sources += [(Path(d).name, scan_images(d)[0]) for d in args.images]
    if not sources:
        raise SystemExit(f"no image-size CSVs found in {SHARED_SIZES}")
    rows = [measure(name, sizes) for name, sizes in sources]
    text = table(rows)
    print(text)
    header = (
        "# Vision-bucket efficiency: default list vs planned\n\n"
        f"Machine: {args.machine} (the planner is pure Python/NumPy; efficiencies do not depend on the machine).\n\n"
        "Efficiency = real patches / padded patches, each image alone in the smallest bucket holding it. Images "
        f"aligned to 112 px (nearest), min_pixels={QWEN_MIN_PIXELS}, max_pixels={MAX_PIXELS} (= 12544 x 196, "
        "the default list's largest bucket; larger images are shrunk to it, column 'shrunk'). Default list: "
        f"{','.join(map(str, DEFAULT_BUCKETS))}. Planned k=7: exact minimum of padded patches "
        f"(`vllm-hpu-mm buckets plan --num-buckets 7`). Auto-k: fewest buckets reaching {TARGET} "
        f"(`--target-efficiency {TARGET}`). Sources of the size CSVs: ../shared/data/README.md. "
        "infochartqa_rendered_infographics is synthetic (rendered), not real traffic.\n\n"
        "Reproduce: `.venv/bin/python benchmarks/planner/bucket_efficiency.py`\n\n"
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bucket_efficiency.md").write_text(header + text + "\n", encoding="utf-8")
    meta = {"machine": args.machine, "min_pixels": QWEN_MIN_PIXELS, "max_pixels": MAX_PIXELS, "align_mode": "nearest"}
    payload = {**meta, "default_buckets": list(DEFAULT_BUCKETS), "target": TARGET, "rows": rows}
    (args.out / "bucket_efficiency.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
