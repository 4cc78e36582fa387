"""Ask the installed vllm-gaudi: its own bucketing code, imported lazily behind a narrow adapter.

On a Gaudi host that runs vllm-gaudi, the buckets it will warm are what its own ``HPUBucketingManager`` generates,
whatever its release: the adapter imports ``vllm_gaudi.extension`` (nothing of the platform, torch only as far as
the extension imports it), configures it as the runner does (``set_vllm_config``'s model type and prefix caching,
``finalize_config`` over the user's variables, ``initialize`` with the engine numbers and the KV blocks) and reads
back its prompt and decode buckets. The API surface it touches, the same from v0.11.2 to main @091bbadd:

- ``vllm_gaudi.extension.environment._VLLM_VALUES`` (model_type, prefix_caching);
- ``vllm_gaudi.extension.runtime``: ``clear_config``, ``finalize_config``, ``get_config`` (``use_bucketing``,
  ``merged_prefill``, ``VLLM_PROMPT_BS_BUCKET_MAX``);
- ``vllm_gaudi.extension.bucketing.common.HPUBucketingManager``: ``initialize(...)`` (keywords it takes),
  ``num_hpu_blocks``, ``generate_prompt_buckets()``, ``generate_decode_buckets()``, ``prompt_buckets``,
  ``decode_buckets``.

Any failure (not installed, an API it does not have, its own error on the configuration) raises
:class:`InstalledUnavailable` with the reason; the caller falls back to the model and says why. Checked against the
real code of every modelled release by ``benchmarks/agreement/vllm_gaudi_releases.py`` (``--adapter``).
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.metadata
import importlib.util
import inspect
from collections.abc import Mapping
from typing import Any

from packaging.version import InvalidVersion, Version

from vllm_hpu_mm import envs
from vllm_hpu_mm.engine import Bucket, EngineShape

__all__ = ["InstalledUnavailable", "InstalledVllmGaudi", "find_installed"]

PACKAGE = "vllm_gaudi"


class InstalledUnavailable(Exception):
    """The installed vllm-gaudi could not be asked; the message says why."""


def _version() -> str | None:
    for dist in ("vllm-gaudi", "vllm_gaudi"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def find_installed() -> InstalledVllmGaudi | None:
    """The installed vllm-gaudi when its package can be found (a spec lookup: nothing is imported yet), else None."""
    try:
        if importlib.util.find_spec(PACKAGE) is None:
            return None
    except (ImportError, ValueError):
        return None
    return InstalledVllmGaudi(_version())


@dataclasses.dataclass(frozen=True)
class InstalledVllmGaudi:
    """The vllm-gaudi importable here (``version`` from its distribution metadata, None when it has none)."""

    version: str | None

    def __str__(self) -> str:
        return f"installed vllm-gaudi {self.version or '(version unknown)'}"

    def is_release(self, version: str | None) -> bool:
        """Whether ``version`` (None: none named) is this build's, in any spelling pip reads as the same version
        (``V0.26.0`` is ``0.26.0``): a release named as the user typed it."""
        if version is None or version == self.version:
            return True
        try:
            return self.version is not None and Version(version.strip()) == Version(self.version)
        except InvalidVersion:
            return False

    def buckets(
        self, env: Mapping[str, str], shape: EngineShape, *, model_type: str = "qwen2_5_vl"
    ) -> tuple[tuple[Bucket, ...], tuple[Bucket, ...]]:
        """(prompt, decode) buckets its own code generates for ``env`` and ``shape``, sorted."""
        try:
            with envs.runtime_variables(env):
                return self._buckets(shape, model_type)
        except InstalledUnavailable:
            raise
        except Exception as exc:  # its code, any release: every failure is a reason to fall back
            raise InstalledUnavailable(
                f"{self}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            ) from exc

    def _buckets(self, shape: EngineShape, model_type: str) -> tuple[tuple[Bucket, ...], tuple[Bucket, ...]]:
        environment = importlib.import_module(f"{PACKAGE}.extension.environment")
        runtime = importlib.import_module(f"{PACKAGE}.extension.runtime")
        common = importlib.import_module(f"{PACKAGE}.extension.bucketing.common")
        environment._VLLM_VALUES["model_type"] = model_type
        environment._VLLM_VALUES["prefix_caching"] = True
        runtime.clear_config()
        runtime.finalize_config()
        cfg = runtime.get_config()
        if not cfg.use_bucketing:
            return (), ()
        manager_cls: Any = common.HPUBucketingManager
        if "_instance" in vars(manager_cls):  # releases before v0.24 keep a singleton: start fresh
            manager_cls._instance = None
        manager = manager_cls()
        bs_max = cfg.VLLM_PROMPT_BS_BUCKET_MAX
        kwargs: dict[str, Any] = {
            "max_num_seqs": shape.max_num_seqs,
            # hpu_model_runner.py: merged prefill takes max_num_seqs, else VLLM_PROMPT_BS_BUCKET_MAX or 1
            "max_num_prefill_seqs": shape.max_num_seqs if cfg.merged_prefill else (bs_max or 1),
            "block_size": shape.block_size,
            "max_num_batched_tokens": shape.max_num_batched_tokens,
            "max_model_len": shape.max_model_len,
            "num_speculative_tokens": shape.num_speculative_tokens,
        }
        accepted = inspect.signature(manager.initialize).parameters
        if shape.num_speculative_tokens and "num_speculative_tokens" not in accepted:
            raise InstalledUnavailable(f"{self}: its bucketing has no speculative decoding")
        manager.initialize(**{k: v for k, v in kwargs.items() if k in accepted})
        manager.num_hpu_blocks = shape.num_kv_blocks
        if hasattr(manager, "skip_decode_block_clamp"):
            manager.skip_decode_block_clamp = shape.skip_decode_block_clamp
        manager.generate_prompt_buckets()
        manager.generate_decode_buckets()
        prompt = tuple(sorted({tuple(int(x) for x in b) for b in manager.prompt_buckets}))
        decode = tuple(sorted({tuple(int(x) for x in b) for b in manager.decode_buckets}))
        return prompt, decode  # type: ignore[return-value]
