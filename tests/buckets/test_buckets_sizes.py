"""Where the planner's image sizes come from: CSV, image folders, a synthetic grid, the embedded data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from PIL import Image

from tests.support.bad_inputs import png_header_only
from tests.support.data import EMBEDDED_SIZES, IMAGES, PHOTO_SIZES, PHOTOS
from vllm_hpu_mm.buckets.sizes import (
    SYNTHETIC_AREA_STEPS,
    SYNTHETIC_ASPECTS,
    embedded_sizes,
    patch_counts,
    read_sizes_csv,
    scan_images,
    synthetic_sizes,
)
from vllm_hpu_mm.errors import ConfigError, InputNote
from vllm_hpu_mm.plan.bucket_choice import read_traffic


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "sizes.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_csv_reads_width_height_rows_in_any_column_order(tmp_path: Path) -> None:
    with pytest.warns(InputNote, match="column 'name' ignored"):
        sizes = read_sizes_csv(write(tmp_path, "name,height,width\na,480,640\n\nb,100,200\n"))
    assert sizes.counts == {(640, 480): 1, (200, 100): 1}
    assert sizes.source == "sizes.csv"


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty file"),
        ("640,480\n", ":1: header '640,480' lacks width,height"),
        ("width,height\n", "no rows after the header"),
        ("width,height\n640,480\n640,abc\n", ":3: height 'abc' is not an integer"),
        ("width,height\n640\n", ":2: width '640' and height '': give both"),
        ("width,height\n640,480\n0,480\n", ":3: width 0 is out of range"),
    ],
)
def test_bad_csv_gives_file_and_line(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as info:
        read_sizes_csv(write(tmp_path, text))
    assert "sizes.csv" in str(info.value)
    assert needle in str(info.value)


def test_missing_csv_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read it"):
        read_sizes_csv(tmp_path / "nope.csv")


def test_folder_scan_reads_real_photos_and_skips_non_images(tmp_path: Path) -> None:
    # The seven photos and scans of tests/data/images (sizes as published, SOURCES.md), plus one text file.
    for photo in PHOTOS:
        shutil.copy(photo, tmp_path / photo.name)
    (tmp_path / "notes.txt").write_text("not an image", encoding="utf-8")
    found, skipped = scan_images(tmp_path, progress=False)
    assert sorted(found.counts) == sorted(PHOTO_SIZES.values())
    assert skipped == 1
    assert "1 non-image files skipped" in found.source


def test_folder_scan_applies_exif_rotation(tmp_path: Path) -> None:
    shutil.copy(IMAGES / "skimage_rocket.jpg", tmp_path / "plain.jpg")  # 640x427
    exif = Image.Exif()
    exif[0x0112] = 6  # rotated 90 degrees: displayed as portrait
    Image.new("RGB", (640, 427)).save(tmp_path / "rotated.jpg", exif=exif)
    found, skipped = scan_images(tmp_path, progress=False)
    assert sorted(found.counts) == [(427, 640), (640, 427)]
    assert skipped == 0


def test_folder_scan_reads_headers_only_even_for_huge_images(tmp_path: Path) -> None:
    (tmp_path / "huge.png").write_bytes(png_header_only(30000, 20000))  # 600 Mpx: Pillow's bomb guard would refuse it
    exif = Image.Exif()
    exif[0x0112] = 8
    Image.new("RGB", (64, 32)).save(tmp_path / "rotated.png", exif=exif)
    limit = Image.MAX_IMAGE_PIXELS
    found, _ = scan_images(tmp_path, progress=False)
    assert sorted(found.counts) == [(32, 64), (30000, 20000)]
    assert limit == Image.MAX_IMAGE_PIXELS  # the guard is restored


def test_folder_scan_names_an_image_whose_header_opens_but_whose_data_is_cut(tmp_path: Path) -> None:
    # held-out images round 5, case 18: half a JPEG's bytes (header intact) was planned as a 1024x768 image; vLLM's
    # loader decodes it (image.load()) and fails, "image file is truncated"
    shutil.copy(PHOTOS[0], tmp_path / "whole.jpg")
    for name, fmt in (("cut.jpg", "JPEG"), ("cut.png", "PNG")):
        Image.new("RGB", (1024, 768), (200, 30, 90)).save(tmp_path / "full", format=fmt)
        data = (tmp_path / "full").read_bytes()
        (tmp_path / name).write_bytes(data[: len(data) // 2])
        (tmp_path / "full").unlink()
    found, skipped = scan_images(tmp_path, progress=False)
    assert found.counts == {PHOTO_SIZES[PHOTOS[0].name]: 1}
    assert found.unreadable == ("cut.jpg", "cut.png")
    assert skipped == 0


def test_folder_scan_follows_links_names_a_dangling_one_and_ends_a_loop(tmp_path: Path) -> None:
    # held-out images round 10, case 9: a dangling gone.jpg was named nowhere (neither unreadable nor skipped); vLLM
    # reads a local image with read_bytes(), which follows a link and fails on a dangling one
    outside, folder = tmp_path / "outside", tmp_path / "links"
    outside.mkdir()
    folder.mkdir()
    Image.new("RGB", (64, 32)).save(folder / "r1.png")
    Image.new("RGB", (32, 64)).save(outside / "ext.png")
    (folder / "ext.png").symlink_to(outside / "ext.png")
    (folder / "gone.jpg").symlink_to(folder / "missing.jpg")
    (folder / "gone.txt").symlink_to(folder / "missing.txt")  # unreadable whatever its name: it may be an image
    (folder / "self.jpg").symlink_to(folder / "self.jpg")  # a link loop
    (folder / "loop").symlink_to(folder)  # the folder itself: read once
    (folder / "linked").symlink_to(outside)  # another folder: read through the link
    found, skipped = scan_images(folder, progress=False)
    assert found.counts == {(64, 32): 1, (32, 64): 2}
    assert found.unreadable == ("gone.jpg", "gone.txt", "self.jpg")
    assert skipped == 0


def test_folder_traffic_names_its_unreadable_files(tmp_path: Path) -> None:
    # memory plan / buckets replay / fleet plan / serve read a folder as traffic: its unreadable files were dropped
    # unnamed there
    Image.new("RGB", (64, 32)).save(tmp_path / "r1.png")
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "missing.jpg")
    traffic = read_traffic(str(tmp_path), flag="--sizes")
    assert traffic.num_requests == 1
    assert "1 image file no reader opens or decodes, as the server cannot: gone.jpg" in traffic.source


def test_folder_scan_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder"):
        scan_images(tmp_path / "missing", progress=False)
    (tmp_path / "notes.txt").write_text("hello", encoding="utf-8")
    with pytest.raises(ConfigError, match="no readable images among 1 files"):
        scan_images(tmp_path, progress=False)


def test_synthetic_grid_spans_the_pixel_range() -> None:
    grid = synthetic_sizes(3136, 12544 * 196)
    assert grid.num_images == SYNTHETIC_AREA_STEPS * len(SYNTHETIC_ASPECTS)
    areas = [w * h for w, h in grid.counts]
    assert min(areas) == pytest.approx(3136, rel=0.05)
    assert max(areas) == pytest.approx(12544 * 196, rel=0.01)
    assert "log-uniform" in grid.source
    with pytest.raises(ConfigError, match="min_pixels <= max_pixels"):
        synthetic_sizes(5000, 4000)


def test_embedded_sizes_are_the_shipped_real_datasets() -> None:
    sizes = embedded_sizes()
    assert sizes.num_images == 6000
    assert "coco_val2017.csv (5000 images)" in sizes.source
    assert "mathvista_testmini.csv (1000 images)" in sizes.source
    assert embedded_sizes(["coco_val2017.csv"]).counts == read_sizes_csv(EMBEDDED_SIZES / "coco_val2017.csv").counts


def test_patch_counts_align_to_112_and_count_shrunk_images() -> None:
    # 640x427 -> 672x448 (48x32 patches); 4000x3000 is capped by max_pixels; 10x10 grows to one tile.
    sample = patch_counts([(640, 427), (4000, 3000), (10, 10)], max_pixels=12544 * 196)
    assert sample.counts[1536] == sample.counts[64] == 1
    assert sample.num_images == 3
    assert max(sample.counts) <= 12544
    assert all(c % 64 == 0 for c in sample.counts)
    assert sample.num_shrunk == 1
