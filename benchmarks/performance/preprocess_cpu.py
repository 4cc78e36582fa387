"""CPU preprocessing throughput: encoded image -> aligned image -> Qwen2-VL ``pixel_values``, ours vs transformers.

Every pipeline starts from the same encoded bytes in memory and ends with the same patch grid:

- ``ours``: ``align_image`` (decode, EXIF orientation, RGB, one Pillow BICUBIC resize to the 112-aligned size;
  grey images are resized as one channel, then expanded: same pixels) then ``to_pixel_values`` (uint8 patch
  shuffle, per-channel lookup-table normalisation).
- ``hf-pil`` / ``hf-torchvision``: decode with Pillow, ``convert("RGB")`` if not RGB, the same Pillow BICUBIC
  resize to the same aligned size, then transformers' ``Qwen2VLImageProcessorPil`` / ``Qwen2VLImageProcessor`` with
  ``do_resize=False`` (the image is already at its target, so skipping their resize only spares them work).
  Their output is checked against ours (same grid, values within 1e-6) before timing.
- ``hf-pil stock`` (context only, not compared): the PIL processor resizing the original itself with the stock
  factor-28 rule, i.e. what vLLM does today; its grid differs.

Images: the 12 real photographs in ``../shared/data/images`` (scikit-image, see that folder's README) plus generated
photo-like JPEGs and document-like PNGs at common camera, screen and scan sizes. Pipelines run alternately, each
image repeated for at least ``--min-seconds``; the table uses the minimum process CPU time per image (the machine is
shared; CPU time does not count other jobs' turns), the JSON also has wall-clock times and medians. One command::

    .venv/bin/python benchmarks/performance/preprocess_cpu.py --machine "CPU: 2-core x86-64 dev machine, 24 GiB"

It prints a Markdown table and writes ``benchmarks/performance/results/preprocess_cpu.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import PIL
import torch
import transformers
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

from vllm_hpu_mm.preprocess import (
    QWEN_IMAGE_MEAN,
    QWEN_IMAGE_STD,
    QWEN_MAX_PIXELS,
    QWEN_MIN_PIXELS,
    align_image,
    aligned_size,
    to_pixel_values,
)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_IMAGES = ROOT.parent / "shared" / "data" / "images"
RESULTS = Path(__file__).resolve().parent / "results"
#: (name, width, height, format): camera photos, screens, an A4 scan at 300 dpi, a tall phone screenshot.
GENERATED = [
    ("photo-640x480", 640, 480, "JPEG"),
    ("photo-1280x720", 1280, 720, "JPEG"),
    ("photo-1920x1080", 1920, 1080, "JPEG"),
    ("photo-4032x3024", 4032, 3024, "JPEG"),
    ("screen-2560x1440", 2560, 1440, "PNG"),
    ("scan-2480x3508", 2480, 3508, "PNG"),
    ("phone-1080x2400", 1080, 2400, "PNG"),
]
Output = tuple[npt.NDArray[np.float32], tuple[int, int, int]]


@dataclasses.dataclass(frozen=True)
class Sample:
    name: str
    data: bytes
    source: str


def generated(width: int, height: int, fmt: str, seed: int) -> bytes:
    """Photo-like (gradients + noise, JPEG) or document-like (text-ish strokes on white, PNG) bytes."""
    rng = np.random.default_rng(seed)
    if fmt == "JPEG":
        y, x = np.mgrid[0:height, 0:width].astype(np.float32)
        base = np.stack([x * 255 / width, y * 255 / height, (x + y) * 127 / (width + height)], -1)
        pixels = np.clip(base + rng.normal(0, 12, base.shape), 0, 255).astype(np.uint8)
    else:
        pixels = np.full((height, width, 3), 255, np.uint8)
        for row in range(40, height - 40, 48):  # lines of dark "words"
            for col in range(40, width - 200, 160):
                pixels[row : row + 18, col : col + int(rng.integers(40, 140))] = rng.integers(0, 90, 3)
    buffer = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buffer, format=fmt, quality=90)
    return buffer.getvalue()


def samples(images: Path) -> list[Sample]:
    real = [
        Sample(p.name, p.read_bytes(), "real")
        for p in sorted(images.iterdir())
        if p.suffix.lower() in (".png", ".jpg", ".jpeg")
    ]
    synthetic = [Sample(n, generated(w, h, f, i), "generated") for i, (n, w, h, f) in enumerate(GENERATED)]
    return real + synthetic


def ours(data: bytes) -> Output:
    aligned = align_image(data)
    return to_pixel_values(aligned.image, image_mean=QWEN_IMAGE_MEAN, image_std=QWEN_IMAGE_STD)


def rgb(image: Image.Image) -> Image.Image:
    """What the processors' ``do_convert_rgb`` does, without the copy ``convert`` makes of an RGB image."""
    return image if image.mode == "RGB" else image.convert("RGB")


def hf_pipeline(processor: Qwen2VLImageProcessor | Qwen2VLImageProcessorPil) -> Callable[[bytes], Output]:
    def run(data: bytes) -> Output:
        image = rgb(Image.open(io.BytesIO(data)))
        height, width = aligned_size(image.height, image.width)
        image = image.resize((width, height), Image.Resampling.BICUBIC)
        out = processor(images=image, do_resize=False, return_tensors="np")
        grid = out["image_grid_thw"][0]
        return out["pixel_values"], (int(grid[0]), int(grid[1]), int(grid[2]))

    return run


def hf_stock(processor: Qwen2VLImageProcessorPil) -> Callable[[bytes], Output]:
    def run(data: bytes) -> Output:
        out = processor(images=rgb(Image.open(io.BytesIO(data))), return_tensors="np")
        grid = out["image_grid_thw"][0]
        return out["pixel_values"], (int(grid[0]), int(grid[1]), int(grid[2]))

    return run


def time_pipelines(
    pipelines: dict[str, Callable[[bytes], Output]], data: bytes, min_seconds: float, min_repeats: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """(wall times, process CPU times) per pipeline, run alternately until each has ``min_repeats`` runs and the
    round took ``min_seconds``. CPU time (all threads of this process) is what the table ranks by: on a shared
    machine it does not count the time other jobs hold the cores."""
    wall: dict[str, list[float]] = {name: [] for name in pipelines}
    cpu: dict[str, list[float]] = {name: [] for name in pipelines}
    started = time.perf_counter()
    while min(len(t) for t in wall.values()) < min_repeats or time.perf_counter() - started < min_seconds:
        for name, pipeline in pipelines.items():
            w0, c0 = time.perf_counter(), time.process_time()
            pipeline(data)
            cpu[name].append(time.process_time() - c0)
            wall[name].append(time.perf_counter() - w0)
    return wall, cpu


def machine_info(label: str) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {
        "machine": label,
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "load_average_at_start": os.getloadavg()[0],
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pillow": PIL.__version__,
        "transformers": transformers.__version__,
        "torch": torch.__version__,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--images", type=Path, default=DEFAULT_IMAGES, help="folder of real images")
    parser.add_argument("--machine", default="CPU: 2-core x86-64 dev machine, 24 GiB", help="what this ran on")
    parser.add_argument("--min-seconds", type=float, default=1.0, help="least time per image and pipeline round")
    parser.add_argument("--min-repeats", type=int, default=3)
    parser.add_argument("--out-dir", type=Path, default=RESULTS, help="where the .md and .json go")
    args = parser.parse_args(argv)

    info = machine_info(args.machine)
    limits = {"min_pixels": QWEN_MIN_PIXELS, "max_pixels": QWEN_MAX_PIXELS}
    pil, tv = Qwen2VLImageProcessorPil(**limits), Qwen2VLImageProcessor(**limits)
    compared = {"ours": ours, "hf-pil": hf_pipeline(pil), "hf-torchvision": hf_pipeline(tv)}
    pipelines = {**compared, "hf-pil stock": hf_stock(pil)}

    rows: list[dict[str, Any]] = []
    for sample in samples(args.images):
        reference, grid = ours(sample.data)
        for name in ("hf-pil", "hf-torchvision"):
            values, other_grid = compared[name](sample.data)
            if other_grid != grid or not np.allclose(values, reference, rtol=0, atol=1e-6):
                raise SystemExit(f"{name} output differs from ours on {sample.name}: not a fair comparison")
        original = Image.open(io.BytesIO(sample.data)).size
        wall, cpu = time_pipelines(pipelines, sample.data, args.min_seconds, args.min_repeats)
        rows.append(
            {
                "image": sample.name,
                "source": sample.source,
                "bytes": len(sample.data),
                "original_wh": list(original),
                "aligned_wh": [grid[2] * 14, grid[1] * 14],
                "patches": grid[1] * grid[2],
                "cpu_min_s": {name: min(t) for name, t in cpu.items()},
                "cpu_median_s": {name: statistics.median(t) for name, t in cpu.items()},
                "wall_min_s": {name: min(t) for name, t in wall.items()},
                "wall_median_s": {name: statistics.median(t) for name, t in wall.items()},
                "runs": {name: len(t) for name, t in wall.items()},
            }
        )
        print(f"  {sample.name}: {rows[-1]['cpu_min_s']['ours'] * 1e3:.1f} ms CPU ours", file=sys.stderr)

    report = render(rows, info)
    print(report)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    (args.out_dir / "preprocess_cpu.md").write_text(report)
    summary = {
        clock: {key: throughput(rows, key, clock=clock) for key in pipelines} for clock in ("cpu_min_s", "wall_min_s")
    }
    payload = {"meta": {**info, **limits, "align_mode": "nearest"}, "images_per_s": summary, "rows": rows}
    (args.out_dir / "preprocess_cpu.json").write_text(json.dumps(payload, indent=2) + "\n")
    return 0


def throughput(rows: list[dict[str, Any]], pipeline: str, source: str | None = None, clock: str = "cpu_min_s") -> float:
    """Images per second over a set: images / sum of per-image minimum times (CPU or wall)."""
    chosen = [r for r in rows if source is None or r["source"] == source]
    return len(chosen) / float(sum(r[clock][pipeline] for r in chosen))


def render(rows: list[dict[str, Any]], info: dict[str, Any]) -> str:
    lines = [
        "# Image preprocessing on CPU: decode -> 112-aligned -> pixel_values",
        "",
        f"Machine: {info['machine']} ({info['cpu']}, {info['cpu_count']} CPUs, torch threads "
        f"{info['torch_threads']}, load average {info['load_average_at_start']:.1f} at start: shared with other "
        "jobs).  ",
        f"Versions: Python {info['python']}, NumPy {info['numpy']}, Pillow {info['pillow']}, transformers "
        f"{info['transformers']}, torch {info['torch']}.",
        "",
        "Same bytes in, same grid out (checked: values within 1e-6). `ours` = `align_image` + `to_pixel_values`; "
        "`hf-*` = Pillow decode + `convert('RGB')` (non-RGB files only) + the same BICUBIC resize + transformers' "
        "Qwen2-VL processor with `do_resize=False`. `hf-pil stock` resizes with the stock factor-28 rule "
        "(different grid): context only. Times are per-image minima of process CPU time (all threads), which "
        "other jobs on the machine do not inflate; wall-clock minima are in the JSON and the last table.",
        "",
        "| image | original | aligned | patches | ours ms | hf-pil ms | hf-torchvision ms | hf-pil stock ms "
        "| vs hf-pil | vs hf-torchvision |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        t = {k: v * 1e3 for k, v in r["cpu_min_s"].items()}
        lines.append(
            f"| {r['image']} | {r['original_wh'][0]}x{r['original_wh'][1]} | {r['aligned_wh'][0]}x"
            f"{r['aligned_wh'][1]} | {r['patches']} | {t['ours']:.1f} | {t['hf-pil']:.1f} | "
            f"{t['hf-torchvision']:.1f} | {t['hf-pil stock']:.1f} | {t['hf-pil'] / t['ours']:.2f}x | "
            f"{t['hf-torchvision'] / t['ours']:.2f}x |"
        )
    header = (
        "| set | clock | images | ours img/s | hf-pil img/s | hf-torchvision img/s | vs hf-pil | vs hf-torchvision |"
    )
    lines += ["", header, "|---|---|---:|---:|---:|---:|---:|---:|"]
    for clock, clock_label in (("cpu_min_s", "CPU"), ("wall_min_s", "wall")):
        for label, source in (("real (12 photos)", "real"), ("generated", "generated"), ("all", None)):
            n = sum(1 for r in rows if source is None or r["source"] == source)
            rates = [throughput(rows, k, source, clock) for k in ("ours", "hf-pil", "hf-torchvision")]
            lines.append(
                f"| {label} | {clock_label} | {n} | {rates[0]:.1f} | {rates[1]:.1f} | {rates[2]:.1f} | "
                f"{rates[0] / rates[1]:.2f}x | {rates[0] / rates[2]:.2f}x |"
            )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
