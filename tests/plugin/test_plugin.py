"""The vLLM plugin without a server: registration (re-entrant, coexisting with another plugin's class in either
order), env declaration, startup validation, the aligned budget rule, metrics and the shape log."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")

from vllm.model_executor.models.qwen2_5_vl import (
    Qwen2_5_VisionTransformer,
    Qwen2_5_VLForConditionalGeneration,
    Qwen2_5_VLMultiModalProcessor,
    Qwen2_5_VLProcessingInfo,
)
from vllm.model_executor.models.registry import _LazyRegisteredModel, _ModelRegistry

from tests.support.bad_inputs import png_header_only
from vllm_hpu_mm import envs
from vllm_hpu_mm.graphs.base import PassRecord
from vllm_hpu_mm.plugin import model as plugin_model
from vllm_hpu_mm.plugin import processor as plugin_processor
from vllm_hpu_mm.plugin import registration
from vllm_hpu_mm.plugin.metrics import ShapeLog, record_pass
from vllm_hpu_mm.plugin.processor import (
    AlignedMultiModalProcessorMixin,
    AlignedProcessingInfoMixin,
    settings_pixel_limits,
)

ARCH = registration.ARCH


class OtherPluginQwen(Qwen2_5_VLForConditionalGeneration):
    """Stands in for vllm-gaudi's own Qwen2.5-VL class (another plugin's registration)."""


def stock_registry() -> _ModelRegistry:
    return _ModelRegistry(models={ARCH: _LazyRegisteredModel(registration.STOCK_MODULE, ARCH)})


def entry_of(registry: _ModelRegistry) -> Any:
    return registry.models[ARCH]


def base_cls() -> Any:
    return registration.base_entry().model_cls


@pytest.fixture(autouse=True)
def _fresh_registration() -> None:
    registration.reset_for_tests()
    plugin_model.build_model_class.cache_clear()


def test_registers_ours_by_string_on_the_stock_class() -> None:
    registry = stock_registry()
    registration.register_model(registry)
    entry = entry_of(registry)
    assert (entry.module_name, entry.class_name) == ("vllm_hpu_mm.plugin.model", registration.OUR_CLASS)
    assert registration.base_entry() is None  # stock: nothing to build on but vLLM's class


def test_reentrant_registration_keeps_one_wrapper() -> None:
    registry = stock_registry()
    for _ in range(3):
        registration.register_model(registry)
    original = registry.register_model._hpu_mm_original  # type: ignore[attr-defined]
    assert not getattr(original, "_hpu_mm_wrapper", False)
    assert entry_of(registry).module_name == "vllm_hpu_mm.plugin.model"


def test_other_plugin_first_becomes_our_base() -> None:
    registry = stock_registry()
    registry.register_model(ARCH, OtherPluginQwen)  # e.g. vllm-gaudi loaded before us
    registration.register_model(registry)
    assert entry_of(registry).module_name == "vllm_hpu_mm.plugin.model"
    assert base_cls() is OtherPluginQwen


def test_other_plugin_after_us_becomes_our_base_and_we_stay_registered() -> None:
    registry = stock_registry()
    registration.register_model(registry)
    registry.register_model(ARCH, OtherPluginQwen)  # loaded after us: would overwrite us without the wrapper
    assert entry_of(registry).module_name == "vllm_hpu_mm.plugin.model"
    assert base_cls() is OtherPluginQwen
    registry.register_model("SomethingElse", OtherPluginQwen)  # other architectures pass through untouched
    other: Any = registry.models["SomethingElse"]
    assert other.model_cls is OtherPluginQwen


def test_our_class_builds_on_the_other_plugins_class_with_the_aligned_processor() -> None:
    registry = stock_registry()
    registry.register_model(ARCH, OtherPluginQwen)
    registration.register_model(registry)
    cls = getattr(plugin_model, registration.OUR_CLASS)  # what vLLM's lazy "module:Class" import does
    assert issubclass(cls, OtherPluginQwen)
    assert issubclass(cls, plugin_model.BucketedModelMixin)
    factories = cls._processor_factory
    assert issubclass(factories.info, AlignedProcessingInfoMixin)
    assert issubclass(factories.info, Qwen2_5_VLProcessingInfo)
    assert issubclass(factories.processor, AlignedMultiModalProcessorMixin)
    assert issubclass(factories.processor, Qwen2_5_VLMultiModalProcessor)
    # The other class keeps its own processor registration: we did not overwrite it.
    assert OtherPluginQwen._processor_factory.info is Qwen2_5_VLProcessingInfo


def test_stock_base_when_no_other_plugin() -> None:
    registration.register_model(stock_registry())
    cls = plugin_model.build_model_class()
    assert cls.__mro__[2] is Qwen2_5_VLForConditionalGeneration


def test_register_declares_env_vars_and_logs_once() -> None:
    import vllm.envs

    import vllm_hpu_mm.plugin as plugin

    class Collect(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.records: list[logging.LogRecord] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.records.append(record)

    plugin._logged = False
    vllm_logger = logging.getLogger("vllm")
    collect = Collect()
    vllm_logger.addHandler(collect)  # stands in for the handlers vLLM configures
    try:
        plugin.register()
        plugin.register()
        plugin.log_settings_once()
    finally:
        vllm_logger.removeHandler(collect)
    assert set(envs.ENVIRONMENT_VARIABLES) <= set(vllm.envs.environment_variables)
    lines = [r.getMessage() for r in collect.records if r.getMessage().startswith("vllm-hpu-mm: buckets=")]
    assert len(lines) == 1
    assert "oversize_policy=" in lines[0]
    assert "align_mode=" in lines[0]
    assert "graph_backend=" in lines[0]


def test_a_bucket_list_vllm_gaudi_accepts_starts_the_server_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    # vllm-gaudi reads a repeated bucket (sorted, kept) and an empty value (its default): the plugin must not stop it
    import vllm_hpu_mm.plugin as plugin

    monkeypatch.setenv("VLLM_MULTIMODAL_BUCKETS", "4096,256,1024,256")
    envs.get_settings.cache_clear()
    collect = _Collect()
    logging.getLogger("vllm").addHandler(collect)
    try:
        plugin.register()
        assert envs.get_settings().multimodal_buckets == (256, 1024, 4096)
    finally:
        logging.getLogger("vllm").removeHandler(collect)
        envs.get_settings.cache_clear()
    warned = [r.getMessage() for r in collect.records if r.levelno == logging.WARNING]
    assert any("VLLM_MULTIMODAL_BUCKETS='4096,256,1024,256' lists 256 more than once" in m for m in warned), warned


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


# vLLM 0.32's load_general_plugins (vllm/plugins/__init__.py), in every process: each entry point of the group is
# loaded inside `try/except Exception`, then called outside any try. Importing vLLM (and its own plugins of the
# group) takes seconds: loading our entry point the same way shows what vLLM's loader gets, in a process of its own.
LOAD_LIKE_VLLM = """
from importlib.metadata import entry_points
plugins = {}
for ep in entry_points(group="vllm.general_plugins", name="hpu_mm"):
    try:
        plugins[ep.name] = ep.load()
    except Exception:
        pass
for func in plugins.values():
    func()
print("LOADED")
"""


@pytest.mark.parametrize(
    ("name", "value", "said"),
    [
        ("VLLM_MULTIMODAL_BUCKETS", "256,1002", "bucket 1002 is not a multiple of 4"),
        ("VLLM_HPU_MM_ALIGN_MODE", "up", "'up' is invalid; accepted: one of nearest, down, pad"),
        ("VLLM_HPU_MM_GRAPH_BACKEND", "gpu", "'gpu' is invalid; accepted: one of auto, cpu, cuda, hpu, none"),
    ],
)
def test_a_bad_setting_stops_the_process_loading_the_plugin_with_one_line_and_status_2(
    name: str, value: str, said: str
) -> None:
    env = envs.process_environ()
    env[name] = value
    proc = subprocess.run([sys.executable, "-c", LOAD_LIKE_VLLM], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "LOADED" not in proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines == [lines[0]], proc.stderr  # no traceback
    assert lines[0].startswith(f"vllm-hpu-mm: error: {name}")
    assert said in lines[0]


# ---- the aligned budget rule --------------------------------------------------------------------------------


class _Info(AlignedProcessingInfoMixin):
    """The info mixin over a stand-in for vLLM's merged min/max pixels."""

    def __init__(self, max_pixels: int = 12845056) -> None:
        self.max_pixels = max_pixels

    def hpu_mm_requested_limits(self, mm_kwargs: object) -> tuple[int, int]:
        return 3136, int(getattr(mm_kwargs, "get", lambda k, d: d)("max_pixels", self.max_pixels))


@pytest.fixture
def buckets_256_1024_4096(monkeypatch: pytest.MonkeyPatch) -> envs.Settings:
    settings = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024,4096"})
    monkeypatch.setattr(plugin_processor, "get_settings", lambda: settings)
    return settings


def test_shrink_caps_max_pixels_at_the_largest_bucket() -> None:
    shrink = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024,4096"})
    assert settings_pixel_limits(3136, 12845056, shrink) == (3136, 4096 * 196)
    assert settings_pixel_limits(3136, 200704, shrink) == (3136, 200704)  # a smaller request limit wins
    eager = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024,4096", "VLLM_HPU_MM_OVERSIZE_POLICY": "eager"})
    assert settings_pixel_limits(3136, 12845056, eager) == (3136, 12845056)
    reject = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024,4096", "VLLM_HPU_MM_OVERSIZE_POLICY": "reject"})
    assert settings_pixel_limits(3136, 12845056, reject) == (3136, 12845056)  # aligned uncapped, then refused
    # The budget helpers assume the largest accepted image.
    assert settings_pixel_limits(3136, 12845056, reject, for_budget=True) == (3136, 4096 * 196)
    off = envs.load({"VLLM_MULTIMODAL_BUCKETS": "None"})
    assert settings_pixel_limits(3136, 12845056, off) == (3136, 12845056)


@pytest.mark.parametrize(
    ("width", "height", "size", "tokens"),
    [
        (640, 427, (672, 448), 384),  # stock rule: 345 tokens
        (500, 333, (448, 336), 192),  # stock rule: 216
        (224, 224, (224, 224), 64),
    ],
)
def test_vision_info_bills_aligned_tokens(
    buckets_256_1024_4096: envs.Settings, width: int, height: int, size: tuple[int, int], tokens: int
) -> None:
    image_size, n = _Info()._get_vision_info(image_width=width, image_height=height, image_processor=None, mm_kwargs={})
    assert (image_size.width, image_size.height) == size
    assert n == tokens == (size[0] // 28) * (size[1] // 28)


def test_vision_info_honours_request_max_pixels(buckets_256_1024_4096: envs.Settings) -> None:
    image_size, n = _Info()._get_vision_info(
        image_width=640, image_height=427, image_processor=None, mm_kwargs={"max_pixels": 112 * 112 * 4}
    )
    assert image_size.width * image_size.height <= 112 * 112 * 4
    assert image_size.width % 112 == 0
    assert image_size.height % 112 == 0
    assert n == (image_size.width // 28) * (image_size.height // 28)


def test_largest_image_fills_the_largest_bucket(buckets_256_1024_4096: envs.Settings) -> None:
    size = _Info().get_image_size_with_most_features()
    assert size.width % 112 == 0
    assert size.height % 112 == 0
    assert (size.width // 14) * (size.height // 14) == 4096  # 8x8 tiles of 112 px = the largest bucket
    # No aligned image under the same limit bills more tokens.
    info = _Info()
    for w, h in [(3000, 2000), (4000, 100), (801, 1002)]:
        _, n = info._get_vision_info(image_width=w, image_height=h, image_processor=None, mm_kwargs={})
        assert n <= (size.width // 28) * (size.height // 28)


# ---- metrics and shape log ---------------------------------------------------------------------------------


def test_pass_counters() -> None:
    from prometheus_client import REGISTRY

    def value(name: str, **labels: str) -> float:
        return REGISTRY.get_sample_value(name, labels) or 0.0

    before = value("vllm_hpu_mm_vision_padded_patches_total", bucket="1024")
    passes = value("vllm_hpu_mm_vision_encoder_passes_total", bucket="1024", backend="cpu")
    record_pass(PassRecord(backend="cpu", bucket=1024, image_patches=(512, 256), padding=256))
    assert value("vllm_hpu_mm_vision_padded_patches_total", bucket="1024") == before + 256
    assert value("vllm_hpu_mm_vision_encoder_passes_total", bucket="1024", backend="cpu") == passes + 1
    eager = value("vllm_hpu_mm_oversize_images_total", policy="eager")
    record_pass(PassRecord("cpu", None, (9000,), 0, oversize=1, oversize_policy="eager"))
    assert value("vllm_hpu_mm_oversize_images_total", policy="eager") == eager + 1
    assert value("vllm_hpu_mm_vision_images_total", bucket="none") >= 1
    timed = value("vllm_hpu_mm_vision_encoder_seconds_count", bucket="256")
    spent = value("vllm_hpu_mm_vision_encoder_seconds_sum", bucket="256")
    record_pass(PassRecord("cpu", 256, (256,), 0, seconds=0.004))
    record_pass(PassRecord("cpu", 256, (200,), 56))  # a pass nobody timed is counted, not timed
    assert value("vllm_hpu_mm_vision_encoder_seconds_count", bucket="256") == timed + 1
    assert value("vllm_hpu_mm_vision_encoder_seconds_sum", bucket="256") == pytest.approx(spent + 0.004)


def test_shape_log_appends_one_json_line_per_pass(tmp_path: Path) -> None:
    log = ShapeLog(str(tmp_path / "shapes.jsonl"))
    log(PassRecord(backend="cpu", bucket=1024, image_patches=(768,), padding=256))
    log(PassRecord(backend="cpu", bucket=256, image_patches=(128, 64), padding=64))
    lines = [json.loads(x) for x in (tmp_path / "shapes.jsonl").read_text().splitlines()]
    assert [(x["bucket"], x["images"], x["padding"], x["total"]) for x in lines] == [
        (1024, [768], 256, 1024),
        (256, [128, 64], 64, 256),
    ]


def test_reject_policy_refuses_images_above_the_largest_bucket() -> None:
    from vllm_hpu_mm.errors import OversizeImageError
    from vllm_hpu_mm.plugin.processor import check_oversize

    reject = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024,4096", "VLLM_HPU_MM_OVERSIZE_POLICY": "reject"})
    check_oversize(896, 896, reject, original=(900, 900))  # 4096 patches: fits
    with pytest.raises(OversizeImageError, match=r"1000x900 pixels needs 4608 vision patches"):
        check_oversize(896, 1008, reject, original=(1000, 900))
    shrink = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024,4096"})
    check_oversize(896, 1008, shrink, original=(1000, 900))  # not this function's business under shrink


def test_arrays_become_images_for_alignment() -> None:
    import numpy as np
    import torch

    from vllm_hpu_mm.plugin.processor import _to_pil

    hwc = np.zeros((30, 40, 3), dtype=np.uint8)
    assert _to_pil(hwc).size == (40, 30)
    chw = torch.rand(3, 30, 40)  # floats in 0..1
    image = _to_pil(chw)
    assert image.size == (40, 30)
    assert image.mode == "RGB"


def test_image_loader_refuses_bomb_and_aspect_headers_with_a_value_error() -> None:
    from vllm.multimodal.media.image import ImageMediaIO

    from vllm_hpu_mm.errors import ImageError
    from vllm_hpu_mm.plugin.media import install_image_header_check

    assert install_image_header_check()
    assert install_image_header_check()  # idempotent: one wrapper
    loader = ImageMediaIO()
    with pytest.raises(ImageError, match=r"decompression bomb.*VLLM_HPU_MM_MAX_IMAGE_PIXELS"):
        loader.load_bytes(png_header_only(60000, 60000))  # vLLM alone raises Pillow's error: HTTP 500
    with pytest.raises(ImageError, match=r"aspect ratio 300\.0:1"):
        loader.load_bytes(png_header_only(1, 300))
    with pytest.raises(ValueError, match="Failed to load image"):  # unreadable data: vLLM's own message
        loader.load_bytes(b"not an image")


def test_a_vllm_gaudi_class_keeps_its_own_tower() -> None:
    """hpu_route: a base class from the vllm_gaudi package owns its tower's graphs; we do not wrap it again."""
    import torch

    vllm_gaudi_base = type("HpuQwen2_5_VL", (torch.nn.Module,), {"__module__": "vllm_gaudi.models.qwen2_5_vl"})
    ours: Any = type("Ours", (plugin_model.BucketedModelMixin, vllm_gaudi_base), {})

    tower = Qwen2_5_VisionTransformer.__new__(Qwen2_5_VisionTransformer)  # the stock class, not built: never run
    torch.nn.Module.__init__(tower)
    model = ours.__new__(ours)
    torch.nn.Module.__init__(model)
    model.__dict__["visual"] = tower
    settings = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024"})
    assert plugin_model.install_bucketed_tower(model, settings) is None
    assert model.__dict__["visual"] is tower
    assert type(tower) is Qwen2_5_VisionTransformer  # no class swap, no runner


def test_cuda_backend_turns_buckets_into_vllm_encoder_graphs() -> None:
    """Checked against vLLM's real config classes (no GPU needed: the backend is given)."""
    from vllm.config import VllmConfig

    settings = envs.load({"VLLM_MULTIMODAL_BUCKETS": "256,1024,4096"})
    config = VllmConfig()
    fields = plugin_model.apply_cuda_encoder_graphs(config, settings, backend="cuda")
    assert fields is not None
    compilation = config.compilation_config
    assert compilation.cudagraph_mm_encoder is True
    assert list(compilation.encoder_cudagraph_token_budgets) == [64, 256, 1024]  # patches / 4
    assert (
        compilation.encoder_cudagraph_max_vision_items_per_batch
        == fields["encoder_cudagraph_max_vision_items_per_batch"]
    )
    assert plugin_model.apply_cuda_encoder_graphs(VllmConfig(), settings, backend="cpu") is None
    user = VllmConfig()
    user.compilation_config.cudagraph_mm_encoder = True
    user.compilation_config.encoder_cudagraph_token_budgets = [128]
    assert plugin_model.apply_cuda_encoder_graphs(user, settings, backend="cuda") is None  # the user's choice stays
    assert list(user.compilation_config.encoder_cudagraph_token_budgets) == [128]
