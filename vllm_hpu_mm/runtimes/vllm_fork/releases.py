"""vllm-fork's release lines: which bucketing each Gaudi release of HabanaAI/vllm-fork ships, keyed by version.

A line is a run of tags whose bucketing generates the same buckets for the same inputs and which read the same
variables (1.19 and 1.20 share their bucketing but only 1.20 reads ``VLLM_FP32_SOFTMAX``), read at each tag (the fork's
in-tree ``habana_model_runner.py`` before 1.19; after dbde4b81b #534 the vllm-hpu-extension commit its
``requirements-hpu.txt`` / ``requirements/hpu.txt`` pins) and checked against that code by
``benchmarks/agreement/vllm_fork_releases.py``. The generation itself is :mod:`.linear` and :mod:`.exponential`.

The fork installs as ``vllm`` versioned ``<vLLM base>+gaudi<first three digits of the Gaudi software>`` (its
``setup.py``), e.g. ``0.9.0.1+gaudi122``; a tag spelling (``0.7.2+Gaudi-1.21.0``) is accepted as well, read as pip
reads it; what pip refuses is refused, such as the 1.17 and 1.16 tags' ``0.5.3.post1-Gaudi-1.17.0`` (a ``-`` where PEP
440 wants the ``+`` of a local label). A base older than the oldest line or newer than the newest is refused saying
so (the fork has no code read for it); one between lines that no line has is refused as unknown. The vLLM base
picks the line; the Gaudi suffix settles the one base two lines share (0.5.3.post1: 1.17 vs 1.18). The tag
v0.7.2+Gaudi-1.21.2 is the same commit as v0.8.5.post1+Gaudi-1.21.2 (a vLLM 0.8.5.post1 tree), so a bare 0.7.2 is
1.21.0; ``0.7.2+Gaudi-1.21.2`` names the later line. Not modelled (refused): v0.4.2-Gaudi-1.16.0 and older, the
aice builds (0.8.5+Gaudi-...-aice-v0: one pins a moving branch, the other b6d48ef spaces every prompt range as long
context), and any other base. ``habana_main`` (@95af70093) pins extension f1d9275, which the mirror read here lacks:
a plain ``vllm-fork`` (no release named) is planned as the newest checked line, unchecked; ``vllm-fork==habana_main``
is refused, as pip refuses it (a branch is no version, and naming it would claim a plan of its head).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from pathlib import Path

from packaging.version import InvalidVersion, Version

from vllm_hpu_mm.errors import ConfigError

__all__ = ["ARCHITECTURES_FILE", "LINES", "NEWEST", "OLDEST", "Release", "architectures_of", "release_for"]

#: Each line's model registry, read at its tags by ``benchmarks/agreement/vllm_fork_architectures.py``.
ARCHITECTURES_FILE = Path(__file__).resolve().parents[2] / "data" / "vllm_fork_architectures.json"


@dataclasses.dataclass(frozen=True)
class Release:
    """One release line and the bucketing generation it ships."""

    #: The line in words, e.g. "v0.9.0.1+Gaudi-1.22.0".
    name: str
    #: How :func:`release_for` takes it back (the canonical spelling of its newest tag's version).
    spec: str
    #: The fork tags checked against their own code, newest first.
    tags: tuple[str, ...]
    #: The fork commit of the newest tag (short).
    commit: str
    #: The vllm-hpu-extension commit its requirements pin (None: bucketing in the fork's own tree).
    extension: str | None
    #: "intree2024" (decode by sequence length), "intree118", "ext119", "ext1210", "ext1212", "ext122".
    generation: str
    #: Whether VLLM_EXPONENTIAL_BUCKETING can pick the exponential strategy, and its default.
    exponential_default: bool = False
    #: The runner's warm-up splits graph memory by ``VLLM_GRAPH_PROMPT_RATIO`` and captures while each pool lasts
    #: (1.17 ``habana_model_runner.py`` @1e0e492e1:1150 and 1.18 @84922944d:1575, default 0.5; 1.19 - 1.21.3
    #: ``hpu_model_runner.py`` ``warmup_model``, default 0.3). False: it warms every prompt then every decode
    #: bucket with no ratio and no memory check (1.22 ``vllm/worker/hpu_model_runner.py`` @2e9b2b3d4:3230-3262;
    #: extension @8211e0b reads no ratio). No release reads ``VLLM_GRAPH_MULTIMODAL_PROMPT_RATIO`` (only
    #: development branches do).
    reads_prompt_ratio: bool = True
    #: The runner buckets the vision tower by ``VLLM_MULTIMODAL_BUCKETS`` and warms every bucket (1.22:
    #: ``VisionBuckets`` @2e9b2b3d4:115, the multimodal warm-up of #1178 6bac2f76b); before, no release reads it.
    reads_vision_buckets: bool = False
    #: Where the release reads ``VLLM_FP32_SOFTMAX``, an extension feature on by default for ``qwen2`` only (1.20 -
    #: 1.21.3 ``flags.py`` ``EnvFlag("VLLM_FP32_SOFTMAX", ModelType('qwen2'))``, 1.22 ``features.py``
    #: ``Value('fp32_softmax', ModelType('qwen2'))``); "": not read, no fp32 softmax at all (1.17 - 1.19: ``git grep
    #: -i fp32_softmax`` finds nothing in the fork's ``vllm/`` at the tag nor in extension @4ff86cf).
    fp32_softmax_source: str = ""
    #: How its warm-up runs (:mod:`vllm_hpu_mm.runtimes.warmup`): ``two_pass`` before #1178 (6bac2f76b), whose
    #: ``warmup_model`` runs ``warmup_all_buckets`` over every prompt and decode bucket eagerly before the ``if not
    #: self.enforce_eager`` graph block, under ``--enforce-eager`` too (1.17 ``habana_model_runner.py:1138-1141``
    #: @1e0e492e1 to 1.21.3 ``hpu_model_runner.py:2379-2385`` @3bcdfd4af); ``one_pass`` from 1.22, whose whole warm-up
    #: sits inside that block (``hpu_model_runner.py:3231`` @2e9b2b3d4).
    warmup_era: str = "two_pass"
    #: Where its V0 runner refuses ``--speculative-config`` while contiguous PA is on (``HPUModelRunnerBase.__init__``
    #: raises "Speculative decoding is not supported with contiguous PA, please set VLLM_CONTIGUOUS_PA=false"); "":
    #: no such check (1.17 - 1.19).
    speculative_refused: str = ""
    #: Under a skipped warm-up (``VLLM_SKIP_WARMUP``) the runner still runs every bucket as an HPU graph, each
    #: captured on its first use with no pool check (``_use_graphs`` returns True on ``skip_warmup``,
    #: ``hpu_model_runner.py`` @61f141c62 to @3bcdfd4af; 1.22 graphs every shape unless eager, @2e9b2b3d4:1402). False:
    #: it graphs only the buckets warm-up captured, so none (1.17 / 1.18 ``habana_model_runner.py`` ``_use_graphs``
    #: @1e0e492e1:460, @84922944d:645).
    graphs_unwarmed: bool = True
    #: Where the release reads ``VLLM_FP32_SOFTMAX_VISION`` (1.22's Qwen2.5-VL tower); "": not read (``git grep`` finds
    #: it at no earlier tag, nor in the extensions they pin).
    fp32_softmax_vision_source: str = ""
    #: It builds its bucket lists (and runs their range checks, min <= max among them) only in ``warmup_model``,
    #: after ``if skip_warmup: return``, so a skipped warm-up never checks them (1.18
    #: ``habana_model_runner.py:1505-1533`` @84922944d, 1.19 ``hpu_model_runner.py:1557-1563`` @61f141c62). False:
    #: every other line builds them whatever the skip: 1.17 in ``__init__`` (``_setup_buckets``, @1e0e492e1:413),
    #: 1.20 before the skip (@6af2f6752:1815-1830), 1.21.x prompt in the bucketing context's ``__init__`` and decode
    #: before the skip (extension ``bucketing/linear.py:49`` @29bc7a4, ``hpu_model_runner.py:2327`` @3bcdfd4af), 1.22
    #: in the worker's cache set-up (``hpu_worker.py:391-393`` @2e9b2b3d4).
    ranges_at_warmup_only: bool = False
    #: Its own ``VLLM_GRAPH_RESERVED_MEM`` and ``VLLM_GRAPH_PROMPT_RATIO`` defaults where they differ from the guide's
    #: 0.1 and 0.3 (from 1.19: ``hpu_worker.py:184`` and ``hpu_model_runner.py:1609`` @61f141c62), with where they
    #: are set; None: the guide's.
    graph_defaults: tuple[float, float, str] | None = None

    def __str__(self) -> str:
        where = f"extension @{self.extension}" if self.extension else "in-tree"
        return f"vllm-fork {self.name} (@{self.commit}, {where})"


NEWEST = Release("v0.9.0.1+Gaudi-1.22.0", "0.9.0.1", ("v0.9.0.1+Gaudi-1.22.0",), "2e9b2b3d4", "8211e0b", "ext122",
                 exponential_default=True, reads_prompt_ratio=False, reads_vision_buckets=True,
                 fp32_softmax_source="vllm_hpu_extension/features.py:60 @8211e0b", warmup_era="one_pass",
                 speculative_refused="vllm/worker/hpu_model_runner.py:1053-1058 @2e9b2b3d4",
                 fp32_softmax_vision_source="vllm/model_executor/models/qwen2_5_vl.py:316-318 @2e9b2b3d4")  # fmt: skip

#: Newest first.
LINES: tuple[Release, ...] = (
    NEWEST,
    Release("v0.7.2+Gaudi-1.21.2 - v0.8.5.post1+Gaudi-1.21.3", "0.8.5.post1",
            ("v0.8.5.post1+Gaudi-1.21.3", "v0.8.5.post1+Gaudi-1.21.2"), "3bcdfd4af", "29bc7a4", "ext1212",
            fp32_softmax_source="vllm_hpu_extension/flags.py:154 @29bc7a4",
            speculative_refused="vllm/worker/hpu_model_runner.py:784-788 @3bcdfd4af"),
    Release("v0.7.2+Gaudi-1.21.0", "0.7.2", ("v0.7.2+Gaudi-1.21.0",), "0275ce4c2", "2b4ba56", "ext1210",
            fp32_softmax_source="vllm_hpu_extension/flags.py:153 @2b4ba56",
            speculative_refused="vllm/worker/hpu_model_runner.py:698-702 @0275ce4c2"),
    Release("v0.6.6.post1+Gaudi-1.20.0", "0.6.6.post1", ("v0.6.6.post1+Gaudi-1.20.0",), "6af2f6752", "d4b0d38",
            "ext119", fp32_softmax_source="vllm_hpu_extension/flags.py:146 @d4b0d38",
            speculative_refused="vllm/worker/hpu_model_runner.py:666-670 @6af2f6752"),
    # 1.20's bucketing (extension @4ff86cf generates the same buckets as @d4b0d38), without fp32 softmax
    Release("v0.6.4.post2+Gaudi-1.19.0 - v0.6.4.post2+Gaudi-1.19.2", "0.6.4.post2",
            ("v0.6.4.post2+Gaudi-1.19.2", "v0.6.4.post2+Gaudi-1.19.1", "v0.6.4.post2+Gaudi-1.19.0"), "61f141c62",
            "4ff86cf", "ext119", ranges_at_warmup_only=True),
    Release("v0.5.3.post1+Gaudi-1.18.0", "0.5.3.post1+Gaudi-1.18.0", ("v0.5.3.post1+Gaudi-1.18.0",), "84922944d",
            None, "intree118", graphs_unwarmed=False, ranges_at_warmup_only=True,
            graph_defaults=(0.4, 0.5, "vllm/worker/habana_worker.py:153 and habana_model_runner.py:1575 @84922944d")),
    Release("v0.5.3.post1-Gaudi-1.17.0", "0.5.3.post1+Gaudi-1.17.0", ("v0.5.3.post1-Gaudi-1.17.0",), "1e0e492e1",
            None, "intree2024", graphs_unwarmed=False,
            graph_defaults=(0.4, 0.5, "vllm/worker/habana_worker.py:141 and habana_model_runner.py:1150 @1e0e492e1")),
)  # fmt: skip

_BY_SPEC = {r.spec: r for r in LINES}
OLDEST = LINES[-1]
#: The vLLM bases of the oldest and newest lines, as pip orders versions (the local label left out).
_OLDEST_BASE, _NEWEST_BASE = Version("0.5.3.post1"), Version(NEWEST.spec)


@functools.cache
def _registries() -> dict[str, frozenset[str]]:
    return {spec: frozenset(names) for spec, names in json.loads(ARCHITECTURES_FILE.read_text()).items()}


def architectures_of(release: Release) -> frozenset[str]:
    """The model architectures ``release``'s vLLM registry lists (``vllm/model_executor/models/registry.py``)."""
    return _registries()[release.spec]


#: The Gaudi suffix as installed (gaudi122), tagged (Gaudi-1.21.2) or as pip normalises a tag (gaudi.1.21.2).
_GAUDI = re.compile(r"gaudi[-.]?(\d)\.?(\d\d)(?:\.(\d+))?", re.IGNORECASE)
#: A git tag's spelling with ``-`` before the Gaudi suffix (v0.5.3.post1-Gaudi-1.17.0), which pip refuses.
_DASHED_TAG = re.compile(r"^(v?[\d.]+(?:\.?post\d+)?)-gaudi(-?[\d.]+)$", re.IGNORECASE)
_ACCEPTED = ("accepted: 0.9.0.1 (1.22.0), 0.8.5.post1 (1.21.2 - 1.21.3), 0.7.2 (1.21.0; 0.7.2+Gaudi-1.21.2 for the "
             "later line), 0.6.6.post1 (1.20.0), 0.6.4.post2 (1.19), 0.5.3.post1+gaudi117 or +gaudi118, "
             "each with an optional +gaudiNNN / +Gaudi-X.Y.Z suffix; or a plain vllm-fork, no ==, for the newest line "
             "(what habana_main plans as)")  # fmt: skip


def release_for(version: str | None) -> Release:
    """The line a vllm-fork version belongs to (None: the newest checked line, as habana_main plans), read as pip
    reads it (PEP 440, the ``packaging`` pip vendors): what pip refuses is refused, a branch name too."""
    if version is None:
        return NEWEST
    try:
        v = Version(version.strip())
    except InvalidVersion:
        dashed = _DASHED_TAG.match(version.strip())
        if version.strip().lower() in ("main", "habana_main"):
            raise ConfigError(f"vllm-fork=={version}: a branch, not a version pip takes; {_ACCEPTED}") from None
        if dashed is None:
            raise ConfigError(f"vllm-fork=={version}: not a version pip takes; {_ACCEPTED}") from None
        # the 1.16 and 1.17 tags put a '-' before the Gaudi suffix: say what pip takes for the same release, the
        # suffix spelled as the tags spell it (Gaudi-1.17.0)
        plus = f"{dashed.group(1).lstrip('vV')}+Gaudi{dashed.group(2)}"
        try:
            release_for(plus)
        except ConfigError as exc:
            raise ConfigError(f"vllm-fork=={version} is the git tag's spelling, not a version pip takes; as pip "
                              f"spells it, {exc}") from None  # fmt: skip
        raise ConfigError(f"vllm-fork=={version} is the git tag's spelling, not a version pip takes; name the same "
                          f"release as pip spells it: vllm-fork=={plus}") from None  # fmt: skip
    base, local = Version(v.public), v.local or ""
    g = _GAUDI.search(local)
    gaudi = (int(g.group(1)), int(g.group(2)), int(g.group(3)) if g.group(3) else None) if g else None
    if "aice" in local.lower():
        raise ConfigError(f"vllm-fork=={version}: the aice builds are not modelled (their extension pins differ); "
                          f"{_ACCEPTED}")  # fmt: skip
    if base < _OLDEST_BASE:
        raise ConfigError(f"vllm-fork=={version}: older than the oldest release line modelled, {OLDEST.name} "
                          f"(Gaudi 1.17, vLLM base {_OLDEST_BASE}); {_ACCEPTED}")  # fmt: skip
    if base > _NEWEST_BASE:
        raise ConfigError(f"vllm-fork=={version}: newer than the newest release line modelled, {NEWEST.name} "
                          f"(vLLM base {_NEWEST_BASE}); no code of it has been read; {_ACCEPTED}")  # fmt: skip
    if str(base) == "0.5.3.post1":
        if gaudi is not None and gaudi[:2] in ((1, 17), (1, 18)):
            return _BY_SPEC[f"0.5.3.post1+Gaudi-1.{gaudi[1]}.0"]
        raise ConfigError(f"vllm-fork=={version}: 0.5.3.post1 shipped two lines (Gaudi 1.17: decode by sequence "
                          f"length; 1.18: by blocks); name it with +gaudi117 or +gaudi118; {_ACCEPTED}")  # fmt: skip
    if str(base) == "0.7.2":  # v0.7.2+Gaudi-1.21.2 is the 0.8.5.post1 line's commit
        return _BY_SPEC["0.8.5.post1" if gaudi == (1, 21, 2) else "0.7.2"]
    if str(base) in _BY_SPEC:
        return _BY_SPEC[str(base)]
    raise ConfigError(f"vllm-fork=={version}: no release line modelled has vLLM base {base} (it lies between the "
                      f"oldest, {_OLDEST_BASE}, and the newest, {_NEWEST_BASE}); {_ACCEPTED}")  # fmt: skip
