"""The ``buckets plan`` and ``buckets check`` jobs: sizes from every source (only those the server accepts), the
planned list and the default one on the same images, the list checked under each oversize policy."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.data import PHOTOS, size_csv
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.jobs.buckets import SizeSources, check_job, plan_job
from vllm_hpu_mm.values import AlignMode

DEFAULT = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
COCO = str(size_csv("coco_val2017.csv"))


def test_plan_with_no_sizes_takes_the_embedded_real_data() -> None:
    job = plan_job(SizeSources(), load(), num_buckets=7)
    assert "coco_val2017.csv (5000 images) + mathvista_testmini.csv (1000 images)" in job.sizes.source
    assert tuple(job.result.buckets) == (384, 768, 1152, 1536, 2304, 4608, 12544)
    assert job.result.evaluation.num_images == 6000


def test_plan_on_coco_beats_the_default_list_on_the_same_images() -> None:
    r = plan_job(SizeSources(csv=(COCO,)), load(), num_buckets=7).result
    assert tuple(r.buckets) == (384, 768, 1152, 1536, 1600, 1920, 2304)
    assert r.evaluation.efficiency == pytest.approx(0.997, abs=0.001)
    assert r.evaluation.num_images == 5000
    assert r.evaluation.num_shrunk == 0
    assert sum(r.evaluation.per_bucket.values()) == 5000
    assert round(r.default.efficiency, 2) == 0.85
    assert r.max_pixels == 12544 * 196


def test_keep_largest_covers_max_pixels() -> None:
    kept = plan_job(SizeSources(csv=(COCO,)), load(), keep_largest=True).result
    assert kept.buckets[-1] == 12544
    assert kept.warnings == ()
    assert kept.evaluation.efficiency > 0.99
    plain = plan_job(SizeSources(csv=(COCO,)), load()).result
    assert "largest bucket 2304 is below the 12544 patches" in plain.warnings[0]


def test_a_target_efficiency_takes_the_fewest_buckets_reaching_it() -> None:
    src = SizeSources(csv=(str(size_csv("mathvista_testmini.csv")),))
    r = plan_job(src, load(), target_efficiency=0.95).result
    assert r.evaluation.efficiency >= 0.95
    fewer = plan_job(src, load(), num_buckets=len(r.buckets) - 1).result
    assert fewer.evaluation.efficiency < 0.95


def test_repeated_sizes_and_image_folders_are_merged(tmp_path: Path) -> None:
    csv = str(size_csv("funsd_forms.csv"))
    for photo in PHOTOS:
        shutil.copy(photo, tmp_path / photo.name)
    (tmp_path / "README.txt").write_text("not an image", encoding="utf-8")
    job = plan_job(SizeSources(csv=(csv, csv), folders=(str(tmp_path),)), load())
    assert job.result.evaluation.num_images == 2 * 199 + 7
    assert "1 non-image files skipped" in job.sizes.source


def test_down_says_which_images_under_one_tile_it_bills_above_stock(tmp_path: Path) -> None:
    # held-out vision round, case 9: 1x1, 20x20 and 50x40 planned [64] under down without a word, where Qwen2.5-VL's
    # own processor gives 16, 16 and 24 patches; the 112-px grid has no size below one tile
    tiny = tmp_path / "tiny.csv"
    tiny.write_text("width,height\n1,1\n20,20\n50,40\n640,480\n")
    down = plan_job(SizeSources(csv=(str(tiny),), align_mode=AlignMode.DOWN), load(), num_buckets=2).result
    # 640x480 is 1280 patches under down, but 1280 x 196 px (that list's own cap under shrink) shrinks it: Qwen2.5-VL's
    # count there is lower, and down never exceeds it; 1408 is the least largest bucket that keeps it at 1280
    assert tuple(down.buckets) == (64, 1408)
    said = ("3 of 4 images get more patches under down than stock Qwen2.5-VL gives them (16 to 24 each): the 112-px "
            "grid's least size is one 112x112 tile (64 patches) and min_pixels is reached in whole tiles; down is at "
            "most stock only for images of a tile or more")  # fmt: skip
    assert down.notes[0] == said
    assert down.notes[1].startswith("the largest bucket is 1408, above the largest image's 1280 patches")
    assert down.evaluation.num_shrunk == 0
    for mode in (AlignMode.NEAREST, AlignMode.PAD):  # neither promises anything against stock
        assert plan_job(SizeSources(csv=(str(tiny),), align_mode=mode), load()).result.notes == ()
    photos = plan_job(SizeSources(csv=(COCO,), align_mode=AlignMode.DOWN), load()).result
    assert not any("stock" in note for note in photos.notes)  # (its largest bucket is raised, which a note says)


def test_a_broken_image_file_is_refused_and_named_not_skipped_as_a_stray_file(tmp_path: Path) -> None:
    # held-out vision round, case 11: broken.jpg (text) was lumped in "non-image files skipped"; vLLM's open_image
    # cannot open it, so a request carrying it is refused
    shutil.copy(PHOTOS[0], tmp_path / PHOTOS[0].name)
    (tmp_path / "broken.jpg").write_text("not a JPEG", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not an image", encoding="utf-8")
    job = plan_job(SizeSources(folders=(str(tmp_path),)), load(), num_buckets=1)
    assert job.admission.refused == {"unreadable": 1}
    assert job.result.evaluation.num_images == 1
    assert "1 non-image files skipped" in job.sizes.source
    assert "1 image file no reader opens or decodes, as the server cannot: broken.jpg" in job.sizes.source
    checked = check_job("1600", SizeSources(folders=(str(tmp_path),)), load())
    assert checked.admission.refused == {"unreadable": 1}


def test_images_above_vllms_own_pixel_cap_are_refused_naming_it(tmp_path: Path) -> None:
    edge = tmp_path / "edge.csv"
    edge.write_text("width,height\n640,480\n14351,12470\n14351,12471\n", encoding="utf-8")
    lowered = plan_job(SizeSources(csv=(str(edge),)), load({"VLLM_MAX_IMAGE_PIXELS": "100000000"}), num_buckets=1)
    assert lowered.admission.refused == {"pixels": 2}
    assert "2 above VLLM_MAX_IMAGE_PIXELS=100000000" in lowered.sizes.source
    raised = plan_job(SizeSources(csv=(str(edge),)), load({"VLLM_HPU_MM_MAX_IMAGE_PIXELS": "200000000"}))
    assert raised.admission.refused == {"pixels": 1}  # 178971321 px: vLLM's own 178956970 still refuses it
    assert "1 above VLLM_MAX_IMAGE_PIXELS=178956970" in raised.sizes.source


def test_a_pixel_range_alone_plans_a_synthetic_grid_and_says_so() -> None:
    job = plan_job(SizeSources(min_pixels=3136, max_pixels=1003520), load(), num_buckets=4)
    assert "log-uniform" in job.sizes.source
    assert len(job.result.buckets) == 4
    assert job.result.buckets[-1] <= 1003520 // 196


def test_pixel_limits_are_checked_before_any_size_is_read() -> None:
    with pytest.raises(ConfigError, match="above --max-pixels"):
        plan_job(SizeSources(csv=("/nonexistent/sizes.csv",), min_pixels=9000, max_pixels=5000), load())


def test_check_takes_the_argument_then_the_environment_then_the_default_list(monkeypatch: pytest.MonkeyPatch) -> None:
    job = check_job(None, SizeSources(csv=(COCO,)), load())
    assert tuple(job.buckets) == DEFAULT
    assert job.source == "the default list"
    assert round(job.result.evaluation.efficiency, 2) == 0.85
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "1536,2304")
    job = check_job(None, SizeSources(csv=(COCO,)), load())
    assert tuple(job.buckets) == (1536, 2304)
    assert job.source == "$VLLM_MULTIMODAL_BUCKETS"
    assert job.result.max_pixels == 2304 * 196  # the largest bucket x 196
    job = check_job("64,128,1536", SizeSources(csv=(COCO,)), load())
    assert (tuple(job.buckets), job.source) == ((64, 128, 1536), "BUCKETS argument")


def test_check_with_bucketing_disabled_has_no_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "None")
    with pytest.raises(ConfigError, match="disables vision bucketing"):
        check_job(None, SizeSources(csv=(COCO,)), load())


def test_check_with_bucketing_disabled_says_vllm_gaudi_then_needs_skip_warmup(monkeypatch: pytest.MonkeyPatch) -> None:
    # README: None makes vllm-gaudi fail at warm-up (len(None), hpu_model_runner.py) unless VLLM_SKIP_WARMUP=true
    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "None")
    with pytest.raises(ConfigError, match=r"VLLM_SKIP_WARMUP off vllm-gaudi fails at warm-up .*VLLM_SKIP_WARMUP=true"):
        check_job(None, SizeSources(csv=(COCO,)), load())
    monkeypatch.setenv("VLLM_SKIP_WARMUP", "true")
    with pytest.raises(ConfigError, match=r"only because VLLM_SKIP_WARMUP is on\); pass BUCKETS$"):
        check_job(None, SizeSources(csv=(COCO,)), load())


def test_check_counts_shrunk_images_under_shrink_and_oversize_ones_under_eager(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = SizeSources(csv=(str(size_csv("sroie_receipts.csv")),), max_pixels=12845056)  # scans up to 4961x7016
    shrink = check_job(",".join(map(str, DEFAULT)), src, load())
    assert shrink.result.evaluation.num_shrunk > 0
    assert shrink.result.evaluation.num_oversize == 0  # every image fits after resizing
    assert "policy shrink" in shrink.result.warnings[0]
    monkeypatch.setenv("VLLM_HPU_MM_OVERSIZE_POLICY", "eager")
    eager = check_job(",".join(map(str, DEFAULT)), src, load())
    assert eager.policy.value == "eager"
    assert eager.result.evaluation.num_oversize > 0
    assert max(eager.counts) > DEFAULT[-1]  # the histogram's counts are before any shrink


@pytest.mark.parametrize("policy", ["shrink", "reject"])
def test_check_of_the_planned_list_says_what_the_plan_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, policy: str
) -> None:
    # N07/N08: the plan counted a 3000x2000 image at its own 12544 patches above its largest bucket (11968) where the
    # check (and the server) shrinks it into that bucket: 0.9799 against 0.9615 for one list.
    monkeypatch.setenv("VLLM_HPU_MM_OVERSIZE_POLICY", policy)
    path = tmp_path / "sizes.csv"
    sizes = [(640, 480), (800, 600), (1024, 768), (1280, 720), (1920, 1080), (448, 448), (3000, 2000), (224, 224)]
    path.write_text("width,height\n" + "".join(f"{w},{h}\n" for w, h in sizes * 5), encoding="utf-8")
    src = SizeSources(csv=(str(path),))
    planned = plan_job(src, load(), num_buckets=5)
    assert planned.result.buckets.largest < 12544  # the large images are above the planned list
    checked = check_job(",".join(map(str, planned.result.buckets)), src, load())
    p, c = planned.result.evaluation, checked.result.evaluation
    assert (p.efficiency, p.num_shrunk, p.num_oversize) == (c.efficiency, c.num_shrunk, c.num_oversize)
    assert planned.rejected == checked.result.rejected == (5 if policy == "reject" else 0)
