"""vLLM general plugin: 112-aligned Qwen2.5-VL processing and a bucketed vision encoder.

Entry point ``vllm.general_plugins: hpu_mm = vllm_hpu_mm.plugin:register`` (setup.py). vLLM calls :func:`register`
in every process (API server, engine core, workers, the model-inspection subprocess), possibly more than once, so
it is re-entrant, imports vLLM lazily and touches no device. What it does:

1. validates our settings (``vllm_hpu_mm.envs``): a bad value prints our one error line on stderr and ends the
   process with exit status 2 (:class:`SystemExit`), before any device memory is taken; a value the runtime accepts
   but we read with a note (an empty or repeated ``VLLM_MULTIMODAL_BUCKETS``) is logged as a warning;
2. declares our environment variables in ``vllm.envs.environment_variables`` (no "unknown variable" warning);
3. registers ``Qwen2_5_VLForConditionalGeneration`` as ``"vllm_hpu_mm.plugin.model:<class>"``. If another plugin
   (vllm-gaudi) registers its own class for that architecture, before or after us, that class becomes our base
   (:mod:`.registration`), so its HPU execution is kept and we add alignment and bucket planning on top;
4. puts a header check in front of vLLM's image loader (:mod:`.media`): decompression bombs (HTTP 500 from vLLM
   alone) and images beyond our pixel and aspect limits get HTTP 400 with our message, before vLLM decodes them;
5. logs one line with the resolved settings, once per process.
"""

from __future__ import annotations

import logging
import sys
import threading
import warnings

__all__ = [
    "attach_to_vllm_logging",
    "declare_environment_variables",
    "log_settings_once",
    "register",
    "settings_line",
    "vllm_logging_ready",
]

logger = logging.getLogger("vllm_hpu_mm")

_lock = threading.Lock()
_logged = False


def settings_line() -> str:
    """The resolved settings, in one line (buckets, policy, align mode, backend, warm-up, precision, metrics)."""
    from vllm_hpu_mm.envs import get_settings

    s = get_settings()
    buckets = "None (bucketing off)" if s.multimodal_buckets is None else ",".join(map(str, s.multimodal_buckets))
    return (
        f"vllm-hpu-mm: buckets={buckets} oversize_policy={s.oversize_policy.value} align_mode={s.align_mode.value} "
        f"graph_backend={s.graph_backend} skip_warmup={s.skip_warmup} fp32_softmax={s.fp32_softmax} "
        f"fp32_softmax_vision={s.fp32_softmax_vision} max_image_pixels={s.max_image_pixels} "
        f"max_aspect_ratio={s.max_aspect_ratio:g} shape_log={s.shape_log or '-'}"
    )


def declare_environment_variables() -> None:
    """Add our variable names to vLLM's registry so ``Platform.validate_environ`` accepts them."""
    import vllm.envs

    from vllm_hpu_mm.envs import ENVIRONMENT_VARIABLES, getter

    for name in ENVIRONMENT_VARIABLES:
        vllm.envs.environment_variables.setdefault(name, getter(name))


class _ToVllmHandlers(logging.Handler):
    """Hands our records to vLLM's ``vllm`` logger, whose handlers vLLM configures after plugins are loaded."""

    def emit(self, record: logging.LogRecord) -> None:
        logging.getLogger("vllm").handle(record)


def attach_to_vllm_logging() -> None:
    """Send our package's log records through vLLM's handlers (same format, same ``VLLM_LOGGING_LEVEL``)."""
    ours = logging.getLogger("vllm_hpu_mm")
    if not any(isinstance(h, _ToVllmHandlers) for h in ours.handlers):
        ours.addHandler(_ToVllmHandlers())
        ours.setLevel(logging.INFO)
        ours.propagate = False


def vllm_logging_ready() -> bool:
    return bool(logging.getLogger("vllm").handlers)


def log_settings_once() -> None:
    """Log :func:`settings_line` once per process, as soon as vLLM's logging is configured.

    The API server loads plugins while parsing arguments, before it configures logging; there the line is logged
    on the first call after that (the aligned processor calls this when vLLM builds it at startup).
    """
    global _logged
    if _logged or not vllm_logging_ready():
        return
    with _lock:
        if not _logged:
            _logged = True
            logger.info("%s", settings_line())


def register() -> None:
    """vLLM general-plugin entry point. Safe to call any number of times in any process."""
    from vllm_hpu_mm.envs import get_settings
    from vllm_hpu_mm.errors import ConfigError, InputNote, error_line

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", InputNote)
        try:
            get_settings()
        except ConfigError as exc:
            # vLLM 0.32 calls each plugin outside any try (vllm/plugins/__init__.py load_general_plugins), while the
            # API server builds its argument parser: an exception would stop it under a 30-line traceback. A
            # SystemExit stops it as argparse does: one line, status 2. The engine core re-raises SystemExit
            # (v1/engine/core.py run_engine_core) and multiprocessing exits with its code, printing nothing.
            print(error_line(str(exc)), file=sys.stderr)
            raise SystemExit(2) from None
    declare_environment_variables()
    attach_to_vllm_logging()
    for note in caught:  # a value the runtime accepts and we read with a note (an empty or repeated bucket list)
        if issubclass(note.category, InputNote):
            logger.warning("vllm-hpu-mm: %s", note.message)
        else:
            warnings.showwarning(note.message, note.category, note.filename, note.lineno)
    from vllm_hpu_mm.plugin.registration import register_model

    register_model()
    from vllm_hpu_mm.plugin.media import install_image_header_check

    install_image_header_check()  # oversized / bomb headers -> HTTP 400 instead of vLLM's 500
    log_settings_once()
