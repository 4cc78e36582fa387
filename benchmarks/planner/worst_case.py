"""The planned text buckets' worst shape against vllm-gaudi's ``exp``, on configurations the bound was not tuned on
(issue 35): for every shape the limits allow, the planned bucket's step time over exp's, the graphs against exp's,
the run-time compiles, the traffic-weighted padded time against exp's at every load, and a drifted replay (planned
on one traffic, served another) against the stated worst.

Each configuration is planned by the default rule as ``serve`` plans it (``plan/text_buckets.plan_for_traffic``:
the budget rule, then the corner buckets of ``buckets/text_worst.py``). Its traffic is the embedded default traffic
reshaped (text, answers and prefix hits scaled, images scaled, a share made text-only), the drifted traffic another
reshaping of it. Both are scheduled by our model of vLLM 0.32's scheduler at every load level (the drain kept), and
every step is looked up with the project's model of vllm-gaudi's lookup (``buckets/text_time.LookupTable``, which
agrees with vllm-gaudi's own code on every event: benchmarks/agreement/results/vllm_gaudi_lookup_check.md) and priced
with the step-time model (``models/step_time.py``) at its bucket and at its own shape.

Reported per configuration: the stated worst decode and prefill shape and ratio (and the graphs that reach 1.5x when
the budget does not); graphs, ours against exp's; shapes no bucket holds (run-time compiles) on both traffics; per
load, padded time ours / exp's on the planned traffic and on the drifted one; on the drifted traffic the largest
step ratio of any step that ran and its busy-time ratio, each against the stated worst (never above it, by
construction: every step's bucket is looked up by the same rule the worst was found with).

    PYTHONPATH=. .venv/bin/python -m benchmarks.planner.worst_case [--requests N] [--only K] [--name STEM --note TEXT]
        [--seeds N] [--own-lookup [--mirror DIR] [--commit SHA]]

``--seeds N`` samples each load between the levels and each level the plan judges N times (seeds 3 to N + 2; the
plan samples seed 1) and reports each one's most, and the most over the levels and over the loads between them: one
sample of a load pads up to about 9% apart from another (issue 35).

``--own-lookup`` checks all of it through vllm-gaudi's OWN code (its source from the local mirror, run on CPU by
agreement/vllm_gaudi_driver.py with VLLM_USE_FAKE_HPU=1), with the planned bucket file and with exp: the
:data:`PROBES` worst cells per phase our model ranks (the worst first), the graphs it generates, and every schedule's
events replayed in order (run-time compiles: the fallback buckets it answers with, and decodes above its largest
decode bucket, which run at their own blocks; padded time against exp's per load,
priced with the same step model). About 10 s of CPU more.

Runs: ``worst_case`` (the first run of these configurations, at the planner it was written for),
``worst_case_replan`` (after one change made on seeing it: the smaller budget re-planned again from each plan that
keeps its loads; these configurations are development data since), ``worst_case_own_lookup`` (``--own-lookup``,
the planner unchanged since ``worst_case_replan``), ``worst_case_fresh`` (``--set fresh``: the fresh six, first run;
one load padded longer than exp there, which made the rule that no judged load may), ``worst_case_fresh_rerun`` (the
fresh six again on that rule) and ``worst_case_fresh2`` (``--set fresh2``: seven more, written before their first
run, on that rule), ``worst_case_fresh2_final`` (fresh2 on the merged tree, loads between the levels added; rerun
after the fix that judges those loads too: development data since) and ``worst_case_fresh3`` (``--set fresh3``: six
more, written before their first run, on that fix) and ``worst_case_fresh4`` (``--set fresh4``: six more, written
before their first run, on the fix that chooses the loads between the levels by their steady state; committed
alone at 51b3f00), ``worst_case_fresh4_rerun`` and ``worst_case_fresh4_final`` (fresh4 again after the changes made
on seeing it: development data since) and ``worst_case_fresh3_rerun`` (fresh3 on that final code), and
``worst_case_fresh5`` (``--set fresh5``: six more, written before their first run, on that final code; committed
alone before it), ``worst_case_fresh5_prune`` and ``worst_case_fresh3_prune`` (``--seeds 3``: fresh5 and fresh3 on
the prune pass and the sampled loads' margin, made on seeing fresh5 and fresh4: development data),
``worst_case_fresh3_levels_before``, ``worst_case_fresh4_levels_before`` and ``worst_case_fresh5_levels_before``
(``--seeds 3``, the levels sampled too, at 9d3a40c: the spread the levels' margin is derived from),
``worst_case_fresh5_levels_085`` and ``worst_case_fresh3_levels_085`` (that margin at 0.85) and
``worst_case_fresh5_levels`` and ``worst_case_fresh3_levels`` (at 0.83, the one kept), and
``--set fresh6``: six more, written before those changes landed and before their first run, committed alone
(48f9f80); ``worst_case_fresh6_kv`` (``--only 2``: its prefix-heavy bot, development data since, after decodes above
exp's ceiling were counted as compiles and held by a planned bucket); ``worst_case_SET_before8`` (``--seeds 3``,
every development set at 3d28ae4, before helper worst8's change) and ``worst_case_SET_worst8`` (the same on it: loads
padding beyond text_worst.THIN of exp's on their one sample judged on a second one, the loads the prune left beyond
their margin repaired again; compiles counted as vllm-gaudi counts them, at its padded batch, :func:`compiles`):
``worst_case_held-out_before8`` and ``worst_case_held-out_worst8`` for the first set, and
``worst_case_fresh6_worst8_own`` (fresh6 on it through vllm-gaudi's own lookup); ``worst_case_fresh7``
(``--set fresh7``: six more, written at 08:20 before worst8 landed and committed alone at bcfb01a, run once on it;
development data since); ``worst_case_fresh7_worst9``, ``worst_case_fresh3_worst9``, ``worst_case_fresh4_worst9`` and
``worst_case_fresh6_worst9`` (``--seeds 3``, on helper worst9's change: the top level judged too with its decodes' KV
blocks text_worst.TAIL times as many, held to exp's), beside ``worst_case_fresh3_base9``, ``worst_case_fresh4_base9``
and ``worst_case_fresh6_base9`` (the same at 1cd6164, before it; fresh7's before is ``worst_case_fresh7``);
``worst_case_fresh8`` (``--set fresh8``: six more, written at 11:10 on 2026-11-29 before any change of that session and
committed alone at d3cd9bf, run once on the tree submitted the stop before, 1e3d820; figures as they came);
``worst_case_fresh9`` (``--set fresh9``: six more written with fresh8 and kept for the stop's final planner, run once on
it; figures as they came); ``worst_case_fresh9_search`` (fresh9 again, development data since, once the graphs that
reach the bound were searched up to the runtime's own graph count); ``worst_case_fresh10`` (``--set fresh10``: six more,
run once as they came) and ``worst_case_fresh10_ladder`` (fresh10 again, development data, on a planner that kept
every ladder through its later passes, 1519eb25: reverted on this measurement).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import MIRROR, extract, file_env, load_note, run_driver, trace_events, write_results
from vllm_hpu_mm.buckets.text import TextLimits
from vllm_hpu_mm.buckets.text_budget import LoadShapes, padded_time
from vllm_hpu_mm.buckets.text_time import LookupTable, StepTimes, cached
from vllm_hpu_mm.buckets.text_worst import _phases
from vllm_hpu_mm.engine import Bucket, EngineShape
from vllm_hpu_mm.models.catalog import catalog_by_id
from vllm_hpu_mm.models.dims import kv_bytes_per_token, weight_bytes
from vllm_hpu_mm.models.step_time import StepTime, step_time
from vllm_hpu_mm.plan.text_buckets import load_shapes, loads_at, plan_for_traffic, text_warmup
from vllm_hpu_mm.replay.scheduler import DecodeRun, Trace
from vllm_hpu_mm.replay.schedules import Images, schedules
from vllm_hpu_mm.runtimes.vllm_gaudi import TRAITS, VllmGaudi
from vllm_hpu_mm.runtimes.vllm_gaudi.common import BucketLookup
from vllm_hpu_mm.runtimes.vllm_gaudi.config import VLLM_GAUDI_COMMIT, config_from_env
from vllm_hpu_mm.runtimes.vllm_gaudi.exponential import decode_block_ceiling
from vllm_hpu_mm.runtimes.vllm_gaudi.file_strategy import bucket_file
from vllm_hpu_mm.traffic.default import default_traffic
from vllm_hpu_mm.traffic.requests import Request, Traffic

RESULTS = Path(__file__).resolve().parent / "results"
MACHINE = "2-core dev machine (x86-64, shared with three other sessions and a latency measurement: loaded)"
VISION_BUCKETS = (1600, 3136, 4096, 6400, 7744, 9216, 12544)
#: Card memory (GiB) for the KV estimate: 0.9 utilisation, 10% of it for graphs.
CARD_GIB = {"gaudi2": 96, "gaudi3": 128}
BLOCK = 128
#: The worst ratio as the JSON keeps it (WorstCase.to_dict: 4 decimals) is off by up to this: a drifted step in the
#: worst cell itself equals the worst, not above it.
HALF_DECIMAL = 0.5e-4


@dataclasses.dataclass(frozen=True)
class Reshape:
    """The default traffic reshaped: prompts, answers and prefix hits scaled, image sides scaled, a share of the
    requests made text-only (every ``1 / text_only``-th distinct request), a fixed prefix added to a share."""

    text: float = 1.0
    answers: float = 1.0
    image: float = 1.0
    text_only: float = 0.0
    prefix: int = 0

    def describe(self) -> str:
        parts = [f"text x{self.text:g}", f"answers x{self.answers:g}", f"image sides x{self.image:g}"]
        if self.text_only:
            parts.append(f"{self.text_only:.0%} of distinct requests text-only")
        if self.prefix:
            parts.append(f"a {self.prefix}-token cached prefix on every other request")
        return "default traffic, " + ", ".join(parts)


@dataclasses.dataclass(frozen=True)
class Config:
    """A model on a device (tensor parallel ``tp``), the engine limits (max_model_len, max_num_seqs,
    max_num_batched_tokens), the traffic planned on and the one served, and the load planned for (None: unknown)."""

    name: str
    model: str
    device: str
    tp: int
    limits: tuple[int, int, int]
    plan: Reshape
    drift: Reshape
    load: int | None = None

    @property
    def max_model_len(self) -> int:
        return self.limits[0]

    @property
    def max_num_seqs(self) -> int:
        return self.limits[1]

    @property
    def max_num_batched_tokens(self) -> int:
        return self.limits[2]


#: Written before their first run; none of them is the main job or a configuration the bound was developed on (the
#: main job's limits and tests/plan's 16k / 32-sequence configuration).
CONFIGS = (
    Config("long contexts, few sequences (7B, Gaudi2, 128k, 8 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1,
           (131072, 8, 8192), Reshape(text=24.0, answers=2.0, text_only=0.3), Reshape(text=4.0, answers=0.5)),
    Config("short requests at high batch (3B, Gaudi3, 4k, 256 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 1,
           (4096, 256, 2048), Reshape(text=0.25, answers=0.3, image=0.5, text_only=0.5),
           Reshape(text=1.0, answers=1.0, image=0.7)),
    Config("prefix-heavy (7B, Gaudi2, 32k, 64 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1, (32768, 64, 4096),
           Reshape(text=1.5, prefix=4096, text_only=0.4), Reshape(text=1.0, prefix=512)),
    Config("large images (7B, Gaudi2, 16k, 32 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1, (16384, 32, 8192),
           Reshape(image=2.5, answers=1.5), Reshape(image=1.0, text=2.0)),
    Config("RAG mix, planned for 64 at once (7B, Gaudi2, 32k, 128 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2",
           1, (32768, 128, 8192), Reshape(text=8.0, answers=0.5, prefix=2048, text_only=0.6),
           Reshape(text=2.0, answers=2.0, text_only=0.2), 64),
    Config("many small requests (7B, Gaudi2, 128k, 256 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1,
           (131072, 256, 2048), Reshape(text=0.5, answers=0.5), Reshape(text=6.0, answers=1.5, text_only=0.5)),
)  # fmt: skip

#: A second set, written on 2026-11-28 after the bound's last change (text_worst's re-plans) and before its first run:
#: the final code on configurations nobody has seen a figure of (``--set fresh``).
FRESH = (
    Config("72B long context (72B, Gaudi3 TP4, 64k, 32 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi3", 4,
           (65536, 32, 8192), Reshape(text=12.0, answers=1.5, text_only=0.3), Reshape(text=3.0, answers=1.0)),
    Config("short chat (3B, Gaudi2, 8k, 128 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi2", 1, (8192, 128, 4096),
           Reshape(text=0.5, answers=0.4, image=0.6, text_only=0.5), Reshape(text=2.0, answers=1.0, image=1.0)),
    Config("shared system prompt (7B, Gaudi3, 16k, 64 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3", 1,
           (16384, 64, 4096), Reshape(text=1.0, prefix=1024, text_only=0.3), Reshape(text=1.5, prefix=0)),
    Config("three-times image sides (7B, Gaudi2, 32k, 16 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1,
           (32768, 16, 8192), Reshape(image=3.0, answers=1.0), Reshape(image=1.5, text=3.0)),
    Config("document RAG, planned for 48 at once (32B, Gaudi3 TP2, 32k, 96 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct",
           "gaudi3", 2, (32768, 96, 8192), Reshape(text=6.0, answers=0.6, prefix=1024, text_only=0.5),
           Reshape(text=1.0, answers=3.0, text_only=0.1), 48),
    Config("long answers (7B, Gaudi3, 64k, 128 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3", 1,
           (65536, 128, 4096), Reshape(text=1.0, answers=4.0), Reshape(text=4.0, answers=0.5)),
)  # fmt: skip
#: A third set, written on 2026-11-28 after the fix that no judged load pads longer than exp (text_worst's
#: ``_no_longer``, made on seeing the fresh six) and before its first run (``--set fresh2``): models, devices,
#: tensor parallel sizes and limits none of the earlier sets used.
FRESH2 = (
    Config("long documents, four sequences (32B, Gaudi2 TP4, 96k, 4 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi2",
           4, (98304, 4, 16384), Reshape(text=12.0, answers=1.0, text_only=0.5), Reshape(text=3.0, answers=4.0)),
    Config("short requests at very high batch (3B, Gaudi3, 3k, 192 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 1,
           (3072, 192, 1536), Reshape(text=0.12, answers=0.15, image=0.4, text_only=0.7),
           Reshape(text=0.4, answers=0.5, image=0.7)),
    Config("agent with a long shared prefix (7B, Gaudi3 TP2, 48k, 48 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3",
           2, (49152, 48, 6144), Reshape(text=2.0, answers=0.8, prefix=8192, text_only=0.6),
           Reshape(text=2.0, answers=1.5)),
    Config("four-times image sides (3B, Gaudi3, 24k, 24 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 1,
           (24576, 24, 12288), Reshape(image=4.0, answers=0.7), Reshape(text=2.0, text_only=0.3)),
    Config("72B on eight Gaudi2 (72B, Gaudi2 TP8, 32k, 64 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi2", 8,
           (32768, 64, 16384), Reshape(text=4.0, image=1.5, text_only=0.2),
           Reshape(text=1.0, answers=2.5, text_only=0.6)),
    Config("chat, planned for 24 at once (32B, Gaudi2 TP4, 16k, 160 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi2",
           4, (16384, 160, 3072), Reshape(text=0.8, answers=0.6, text_only=0.4),
           Reshape(text=2.5, answers=1.2, image=1.3), 24),
    Config("long answers, few sequences (7B, Gaudi2 TP2, 12k, 12 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 2,
           (12288, 12, 2048), Reshape(text=0.6, answers=6.0, image=2.0), Reshape(text=3.0, answers=0.5)),
)  # fmt: skip
#: A fourth set, written on 2026-11-28 after the fix that loads between the judged levels are judged too
#: (text_worst's ``Between``, made on seeing fresh2's off-grid loads) and before its first run (``--set fresh3``):
#: model, device, tensor parallel and limit combinations none of the earlier sets used.
FRESH3 = (
    Config("very long contexts, six sequences (72B, Gaudi3 TP8, 128k, 6 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct",
           "gaudi3", 8, (131072, 6, 16384), Reshape(text=20.0, answers=1.5, text_only=0.4),
           Reshape(text=5.0, answers=3.0)),
    Config("tiny requests at 384 at once (7B, Gaudi2 TP2, 2.5k, 384 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2",
           2, (2560, 384, 1280), Reshape(text=0.1, answers=0.2, image=0.35, text_only=0.6),
           Reshape(text=0.3, answers=0.6, image=0.5)),
    Config("prefix-heavy tools (32B, Gaudi3 TP4, 24k, 40 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi3", 4,
           (24576, 40, 8192), Reshape(text=1.2, prefix=6144, text_only=0.5), Reshape(text=3.0, answers=1.2)),
    Config("three-and-a-half-times image sides (7B, Gaudi3 TP2, 20k, 20 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct",
           "gaudi3", 2, (20480, 20, 16384), Reshape(image=3.5, answers=0.8),
           Reshape(text=1.5, image=1.2, text_only=0.2)),
    Config("chat, planned for 40 at once (3B, Gaudi2, 12k, 96 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi2", 1,
           (12288, 96, 2560), Reshape(text=0.6, answers=0.9, text_only=0.3), Reshape(text=2.0, answers=0.5), 40),
    Config("prefix and long answers (72B, Gaudi3 TP4, 40k, 48 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi3", 4,
           (40960, 48, 8192), Reshape(text=2.5, answers=3.0, prefix=2048, text_only=0.3),
           Reshape(text=1.0, answers=1.0)),
)  # fmt: skip
#: A fifth set, written on 2026-11-29 after the fix that chooses the loads between the levels by their steady state
#: (text_worst's ``_Steady``, made on seeing fresh3's off-grid loads) and before its first run (``--set fresh4``):
#: model, device and tensor parallel combinations none of the earlier sets used (32B on one Gaudi3, 7B on four
#: Gaudi3, 72B on four Gaudi2, 32B on two Gaudi2, 3B on two Gaudi3, 72B on two Gaudi3) and limits none used.
FRESH4 = (
    Config("long contexts, ten sequences (32B, Gaudi3, 112k, 10 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi3", 1,
           (114688, 10, 12288), Reshape(text=18.0, answers=1.2, text_only=0.5), Reshape(text=6.0, answers=2.5)),
    Config("short requests at 320 at once (7B, Gaudi3 TP4, 3.5k, 320 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3",
           4, (3584, 320, 1792), Reshape(text=0.15, answers=0.25, image=0.45, text_only=0.55),
           Reshape(text=0.5, answers=0.4, image=0.6)),
    Config("prefix-heavy retrieval (72B, Gaudi2 TP4, 28k, 56 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi2", 4,
           (28672, 56, 6144), Reshape(text=1.3, prefix=5120, text_only=0.45),
           Reshape(text=2.5, answers=1.5, prefix=1024)),
    Config("three-point-two-times image sides (32B, Gaudi2 TP2, 28k, 28 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct",
           "gaudi2", 2, (28672, 28, 10240), Reshape(image=3.2, answers=1.1),
           Reshape(text=2.5, image=1.4, text_only=0.25)),
    Config("chat, planned for 60 at once (3B, Gaudi3 TP2, 10k, 144 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 2,
           (10240, 144, 3072), Reshape(text=0.7, answers=0.8, text_only=0.35),
           Reshape(text=1.8, answers=0.6, image=1.2), 60),
    Config("long answers at 80 at once (72B, Gaudi3 TP2, 20k, 80 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi3", 2,
           (20480, 80, 4096), Reshape(text=0.8, answers=5.0, image=0.8), Reshape(text=3.0, answers=0.7)),
)  # fmt: skip
#: A sixth set, written on 2026-11-29 after the changes made on seeing fresh4 (the fallback never takes more graphs
#: than the runtime's own; exp's own row tried as a group) and before its first run (``--set fresh5``): model, device
#: and tensor parallel combinations none of the earlier sets used (3B on two Gaudi2, 7B on four Gaudi2, 32B on two
#: Gaudi3 at a planned load, 72B on eight Gaudi3 at mid context, 3B on one Gaudi3 at long context, 32B on eight
#: Gaudi2) and limits none used.
FRESH5 = (
    Config("short requests at 256 at once (3B, Gaudi2 TP2, 4k, 256 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi2", 2,
           (4096, 256, 2048), Reshape(text=0.2, answers=0.3, image=0.5, text_only=0.6),
           Reshape(text=0.6, answers=0.8, image=0.8)),
    Config("prefix-heavy assistant (7B, Gaudi2 TP4, 20k, 72 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 4,
           (20480, 72, 5120), Reshape(text=1.1, prefix=3072, text_only=0.5),
           Reshape(text=2.0, answers=1.3, prefix=512)),
    Config("chat, planned for 32 at once (32B, Gaudi3 TP2, 14k, 112 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi3",
           2, (14336, 112, 3584), Reshape(text=0.9, answers=0.7, text_only=0.4),
           Reshape(text=2.2, answers=1.0, image=1.3), 32),
    Config("mid contexts, twenty-four sequences (72B, Gaudi3 TP8, 48k, 24 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct",
           "gaudi3", 8, (49152, 24, 8192), Reshape(text=9.0, answers=1.3, text_only=0.4),
           Reshape(text=2.5, answers=2.0)),
    Config("long prompts, long answers (3B, Gaudi3, 56k, 40 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 1,
           (57344, 40, 6144), Reshape(text=7.0, answers=3.0, text_only=0.5), Reshape(text=1.5, answers=1.0)),
    Config("two-point-eight-times image sides (32B, Gaudi2 TP8, 24k, 36 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct",
           "gaudi2", 8, (24576, 36, 12288), Reshape(image=2.8, answers=0.9),
           Reshape(text=2.0, image=1.2, text_only=0.3)),
)  # fmt: skip
#: A seventh set, written on 2026-11-29 at 05:50 UTC, before the changes made on seeing fresh5 (helper worst6's) landed
#: and before its first run (``--set fresh6``): model, device and tensor parallel combinations none of the earlier
#: sets used where the model's heads allow one (32B on eight Gaudi3, 3B on four Gaudi3, 32B on one Gaudi2, 3B on four
#: Gaudi2, 72B on two Gaudi2: weights leave little for the KV cache) and limits none used.
FRESH6 = (
    Config("long contexts, twelve sequences (32B, Gaudi3 TP8, 96k, 12 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct",
           "gaudi3", 8, (98304, 12, 16384), Reshape(text=14.0, answers=1.6, text_only=0.35),
           Reshape(text=4.0, answers=3.0)),
    Config("short requests at 224 at once (3B, Gaudi3 TP4, 3k, 224 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3",
           4, (3072, 224, 1536), Reshape(text=0.18, answers=0.35, image=0.45, text_only=0.65),
           Reshape(text=0.55, answers=0.7, image=0.75)),
    Config("prefix-heavy support bot (32B, Gaudi2, 16k, 48 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi2", 1,
           (16384, 48, 4096), Reshape(text=1.0, prefix=4096, text_only=0.55),
           Reshape(text=1.8, answers=1.4)),
    Config("three-point-six-times image sides (3B, Gaudi2 TP4, 32k, 32 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct",
           "gaudi2", 4, (32768, 32, 16384), Reshape(image=3.6, answers=0.8),
           Reshape(text=2.2, image=1.3, text_only=0.2)),
    Config("chat, planned for 48 at once (7B, Gaudi3 TP4, 12k, 176 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3",
           4, (12288, 176, 3072), Reshape(text=0.75, answers=0.65, text_only=0.45),
           Reshape(text=2.0, answers=1.1, image=1.2), 48),
    Config("long answers, a tight KV cache (72B, Gaudi2 TP2, 16k, 32 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi2",
           2, (16384, 32, 4096), Reshape(text=1.2, answers=4.0, text_only=0.3), Reshape(text=3.0, answers=0.8)),
)  # fmt: skip
#: An eighth set, written on 2026-11-29 at 08:20 UTC, before any change of that session (helper worst8's rules were
#: cut from 3d28ae4 and never saw it) and before its first run (``--set fresh7``): limits and traffic none of the
#: earlier sets used (every model, device and tensor parallel pair the heads allow has been used, so pairs repeat with
#: new limits: 72B on eight Gaudi2 at 112k and five sequences, 7B on one Gaudi2 at 2k and 288 sequences, a 6k-token
#: prefix on 7B over two Gaudi3, 4.2-times image sides on one Gaudi3, 32B on four Gaudi3 planned for 72 at once, 32B
#: on one Gaudi2 with long answers and little KV room).
FRESH7 = (
    Config("long contexts, five sequences (72B, Gaudi2 TP8, 112k, 5 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi2",
           8, (114688, 5, 14336), Reshape(text=16.0, answers=2.0, text_only=0.45), Reshape(text=3.5, answers=2.5)),
    Config("short requests at 288 at once (7B, Gaudi2, 2k, 288 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1,
           (2048, 288, 1024), Reshape(text=0.12, answers=0.3, image=0.4, text_only=0.6),
           Reshape(text=0.5, answers=0.9, image=0.7)),
    Config("prefix-heavy coding assistant (7B, Gaudi3 TP2, 40k, 80 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3",
           2, (40960, 80, 6144), Reshape(text=1.6, answers=1.5, prefix=6144, text_only=0.5),
           Reshape(text=2.5, prefix=1024)),
    Config("four-point-two-times image sides (7B, Gaudi3, 48k, 16 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3", 1,
           (49152, 16, 20480), Reshape(image=4.2, answers=0.9), Reshape(text=1.8, image=1.1, text_only=0.25)),
    Config("chat, planned for 72 at once (32B, Gaudi3 TP4, 18k, 200 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi3",
           4, (18432, 200, 4096), Reshape(text=0.85, answers=0.75, text_only=0.4),
           Reshape(text=2.4, answers=1.3, image=1.1), 72),
    Config("long answers, little KV room (32B, Gaudi2, 20k, 40 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi2", 1,
           (20480, 40, 4096), Reshape(text=1.4, answers=3.5, text_only=0.35), Reshape(text=3.5, answers=0.6)),
)  # fmt: skip
#: A ninth set, written on 2026-11-29 at 11:10 UTC, before any change of that session (helper worst10's rules are cut
#: from 1e3d820 and never see it) and before its first run (``--set fresh8``): limits and traffic none of the earlier
#: sets used (32B on two Gaudi3 at 80k and three sequences, 3B on two Gaudi2 at 2.5k and 320 sequences, a 3k-token
#: prefix on 72B over eight Gaudi3, five-times image sides on 3B over two Gaudi3, 7B on two Gaudi2 planned for 96 at
#: once, 72B on four Gaudi3 with long answers).
FRESH8 = (
    Config("long contexts, three sequences (32B, Gaudi3 TP2, 80k, 3 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi3",
           2, (81920, 3, 12288), Reshape(text=13.0, answers=1.8, text_only=0.4), Reshape(text=2.5, answers=3.0)),
    Config("short requests at 320 at once (3B, Gaudi2 TP2, 2.5k, 320 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi2",
           2, (2560, 320, 1280), Reshape(text=0.15, answers=0.25, image=0.35, text_only=0.7),
           Reshape(text=0.6, answers=0.8, image=0.8)),
    Config("prefix-heavy agent, 3k system prompt (72B, Gaudi3 TP8, 24k, 56 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct",
           "gaudi3", 8, (24576, 56, 6144), Reshape(text=1.3, answers=1.2, prefix=3072, text_only=0.6),
           Reshape(text=2.0, answers=0.7, prefix=512)),
    Config("five-times image sides (3B, Gaudi3 TP2, 64k, 12 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 2,
           (65536, 12, 24576), Reshape(image=5.0, answers=0.7), Reshape(text=1.5, image=1.2, text_only=0.3)),
    Config("chat, planned for 96 at once (7B, Gaudi2 TP2, 10k, 240 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2",
           2, (10240, 240, 3584), Reshape(text=0.7, answers=0.8, text_only=0.5),
           Reshape(text=2.2, answers=1.2, image=1.3), 96),
    Config("long answers (72B, Gaudi3 TP4, 28k, 24 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi3", 4,
           (28672, 24, 4096), Reshape(text=1.1, answers=4.5, text_only=0.3), Reshape(text=3.0, answers=0.7)),
)  # fmt: skip
#: A tenth set, written with fresh8 at 11:10 UTC and kept for that session's final tree (its first run comes after
#: helper worst10's rules land; worst10 never sees it, ``--set fresh9``): 7B on two Gaudi3 at 96k and six sequences,
#: 32B on four Gaudi3 at 4k and 192 sequences, an 8k-token prefix on 32B over four Gaudi2, six-times image sides on
#: 7B over two Gaudi2, 72B on eight Gaudi2 planned for 40 at once, 3B on one Gaudi2 with long answers.
FRESH9 = (
    Config("long contexts, six sequences (7B, Gaudi3 TP2, 96k, 6 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3", 2,
           (98304, 6, 16384), Reshape(text=18.0, answers=1.4, text_only=0.5), Reshape(text=5.0, answers=2.0)),
    Config("short requests at 192 at once (32B, Gaudi3 TP4, 4k, 192 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi3",
           4, (4096, 192, 2048), Reshape(text=0.3, answers=0.35, image=0.5, text_only=0.55),
           Reshape(text=1.1, answers=0.9, image=0.9)),
    Config("prefix-heavy retrieval, 8k prefix (32B, Gaudi2 TP4, 48k, 40 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct",
           "gaudi2", 4, (49152, 40, 8192), Reshape(text=2.0, answers=0.8, prefix=8192, text_only=0.45),
           Reshape(text=3.0, answers=1.2, prefix=2048)),
    Config("six-times image sides (7B, Gaudi2 TP2, 80k, 8 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 2,
           (81920, 8, 32768), Reshape(image=6.0, answers=0.8), Reshape(text=2.0, image=1.0, text_only=0.4)),
    Config("chat, planned for 40 at once (72B, Gaudi2 TP8, 14k, 160 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi2",
           8, (14336, 160, 4096), Reshape(text=0.9, answers=0.9, text_only=0.4),
           Reshape(text=1.9, answers=1.5, image=1.2), 40),
    Config("long answers (3B, Gaudi2, 36k, 64 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi2", 1, (36864, 64, 5120),
           Reshape(text=1.3, answers=5.0, text_only=0.3), Reshape(text=4.0, answers=0.5)),
)  # fmt: skip
#: An eleventh set, written on 2026-11-29 at 14:35 UTC before any change of that session and run once on the tree
#: as submitted at 0c136ec (``--set fresh10``): 72B on eight Gaudi3 at 128k and two sequences, 3B on one Gaudi3 at
#: 2k and 512 sequences, a 16k-token prefix on 7B over one Gaudi3, four-times image sides on 32B over two Gaudi3,
#: 7B on one Gaudi2 planned for 24 at once, 3B on one Gaudi3 with long answers drifting to long prompts.
FRESH10 = (
    Config("long contexts, two sequences (72B, Gaudi3 TP8, 128k, 2 seqs)", "Qwen/Qwen2.5-VL-72B-Instruct", "gaudi3",
           8, (131072, 2, 16384), Reshape(text=30.0, answers=1.2, text_only=0.5), Reshape(text=6.0, answers=3.0)),
    Config("short requests at 512 at once (3B, Gaudi3, 2k, 512 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3", 1,
           (2048, 512, 4096), Reshape(text=0.12, answers=0.2, image=0.3, text_only=0.8),
           Reshape(text=0.4, answers=0.6, image=0.6, text_only=0.3)),
    Config("prefix-heavy, 16k prefix (7B, Gaudi3, 64k, 24 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi3", 1,
           (65536, 24, 8192), Reshape(text=1.5, answers=0.6, prefix=16384, text_only=0.5),
           Reshape(text=2.5, answers=1.0, prefix=1024)),
    Config("four-times image sides (32B, Gaudi3 TP2, 40k, 20 seqs)", "Qwen/Qwen2.5-VL-32B-Instruct", "gaudi3", 2,
           (40960, 20, 16384), Reshape(image=4.0, answers=0.9), Reshape(text=1.8, image=0.8, text_only=0.2)),
    Config("chat, planned for 24 at once (7B, Gaudi2, 20k, 128 seqs)", "Qwen/Qwen2.5-VL-7B-Instruct", "gaudi2", 1,
           (20480, 128, 6144), Reshape(text=0.8, answers=1.1, text_only=0.35),
           Reshape(text=2.5, answers=0.8, image=1.4), 24),
    Config("long answers drifting to long prompts (3B, Gaudi3, 48k, 96 seqs)", "Qwen/Qwen2.5-VL-3B-Instruct", "gaudi3",
           1, (49152, 96, 6144), Reshape(text=0.9, answers=6.0, text_only=0.2), Reshape(text=7.0, answers=0.6)),
)  # fmt: skip
SETS = {"held-out": CONFIGS, "fresh": FRESH, "fresh2": FRESH2, "fresh3": FRESH3, "fresh4": FRESH4, "fresh5": FRESH5,
        "fresh6": FRESH6, "fresh7": FRESH7, "fresh8": FRESH8, "fresh9": FRESH9, "fresh10": FRESH10}  # fmt: skip


#: The first seed the loads between the levels are sampled with (the plan samples seed 1; ``--seeds N``: this one
#: and the N - 1 after it, each load's most reported).
OFF_GRID_SEED = 3
#: Most loads between the plan's judged levels checked per configuration (spread over 1..max_num_seqs; 12 up to
#: fresh3, 24 since fresh4: each one schedule of 600 requests, about 30 ms).
OFF_GRID_LOADS = 24


def reshaped(base: Traffic, r: Reshape) -> Traffic:
    counts: dict[Request, int] = {}
    for k, (req, n) in enumerate(sorted(base.counts.items(), key=lambda kv: kv[0].sort_key())):
        text = max(1, round((req.text_tokens or 1) * r.text))
        cached = min(text - 1, round((req.cached_tokens or 0) * r.text))
        if r.prefix and k % 2 == 0:
            text, cached = text + r.prefix, cached + r.prefix
        image = req.image
        if image is not None and r.text_only and k % round(1 / r.text_only) == 0:
            image = None
        elif image is not None:
            image = (max(28, round(image[0] * r.image)), max(28, round(image[1] * r.image)))
        out = Request(image, text, max(1, round((req.output_tokens or 1) * r.answers)), max(0, cached))
        counts[out] = counts.get(out, 0) + n
    return Traffic(counts, r.describe())


def kv_blocks(c: Config) -> int:
    m = catalog_by_id(c.model)
    assert m is not None
    usable = CARD_GIB[c.device] * 2**30 * 0.9 * 0.9 - weight_bytes(m, 2, c.tp)
    return max(64, int(usable // (kv_bytes_per_token(m, 2, c.tp) * BLOCK)))


def step_ratios(buckets: tuple[tuple[Bucket, ...], tuple[Bucket, ...]], exp: tuple[tuple[Bucket, ...], ...],
                load: LoadShapes, t: StepTime) -> dict[str, float]:  # fmt: skip
    """The largest ratio, over the steps the load ran, of a step's time in our bucket to its time in exp's."""
    out = {}
    for phase, shapes, ours, theirs in (("prefill", load.prefill, buckets[0], exp[0]),
                                        ("decode", load.decode, buckets[1], exp[1])):  # fmt: skip
        if not shapes:
            continue
        a = np.array([s[0] for s in shapes], dtype=np.int64)
        c = np.array([s[1] for s in shapes], dtype=np.int64)
        secs = []
        for table in (LookupTable(ours), LookupTable(theirs)):
            at = table.index(np.ones_like(a), a, c) if phase == "prefill" else table.index(a, np.ones_like(a), c)
            priced = [math.inf if i < 0 else (t.prefill_s(*table.bucket(i)) if phase == "prefill" else
                      t.decode_s(table.bucket(i)[0], table.bucket(i)[2])) for i in at.tolist()]  # fmt: skip
            secs.append(np.array(priced))
        out[phase] = float((secs[0] / secs[1]).max())
    return out


def compiles(buckets: tuple[tuple[Bucket, ...], tuple[Bucket, ...]], load: LoadShapes, shape: EngineShape) -> int:
    """The run-time compiles of one load on a fresh server, counted as vllm-gaudi counts them: the project's model of
    its stateful lookup (``runtimes/vllm_gaudi/common.BucketLookup``, which agrees with its own code) over the given
    buckets, each distinct bucket it runs a step in that it did not generate: a fallback bucket (appended, so later
    shapes it holds reuse it), or a decode above the largest decode bucket (its lookup caps the blocks there and pads
    the batch to that bucket's; the block list is never cut), at the padded batch, not the step's own. The load's
    shapes are fed in sorted order (a schedule's own order is not kept): a fallback's reuse may differ from the
    schedule's, a decode above the largest bucket's count does not."""
    generated = {*buckets[0], *buckets[1]}
    lookup = BucketLookup(config_from_env({}), shape, (tuple(sorted(buckets[0])), tuple(sorted(buckets[1]))))
    ran: set[Bucket] = set()
    for query, context in sorted(load.prefill):
        ran.add(lookup.find_prompt(1, query, context))
    for sequences, blocks in sorted(load.decode):
        b = lookup.find_decode(sequences, blocks)
        ran.add((b[0], 1, max(b[2], blocks)))
    return len(ran - generated)


#: The worst cells per phase (the worst and the next ones, by our lookup's ratio) fed to vllm-gaudi's own lookup.
PROBES = 4
#: Most events of one schedule replayed through vllm-gaudi's own lookup (a decode run is one event): every schedule
#: here has fewer; the cap bounds the driver's work on larger inputs.
MAX_EVENTS = 200_000
EXP_ENV = {"VLLM_BUCKETING_STRATEGY": "exp"}


@dataclasses.dataclass(frozen=True)
class OwnInputs:
    """What one configuration hands vllm-gaudi's own lookup: the planned bucket file, the worst cells (phase, first,
    second, our ratio), and every schedule (traffic, load, trace) with the padded ratio our lookup gave it."""

    shape: EngineShape
    plan_file: str
    probes: list[tuple[str, int, int, float]]
    schedules: list[tuple[str, str, Trace, float | None]]
    time: StepTime


def probes(plan: Any, exp: tuple[tuple[Bucket, ...], tuple[Bucket, ...]], limits: TextLimits,
           t: StepTime) -> list[tuple[str, int, int, float]]:  # fmt: skip
    """The :data:`PROBES` worst cells of each phase as our model of the lookup ranks them (text_worst's own grid)."""
    out = []
    for phase in _phases(plan, exp, limits, cached(t)):
        for i in np.argsort(-phase.ratio, kind="stable")[:PROBES].tolist():
            out.append((phase.name, *phase.first_second(i), float(phase.ratio[i])))
    return out


def _probe_event(phase: str, first: int, second: int) -> list[Any]:
    return ["decode", first, second] if phase == "decode" else ["prefill", [[first, second * BLOCK]]]


def _forwards(answer: list[Any], event: list[Any]) -> list[tuple[int, int, int]]:
    """The buckets one event ran in, as vllm-gaudi answered (a decode bucket as (batch, 1, blocks))."""
    if event[0] == "decode":
        return [(answer[0], 1, answer[1])]
    return [(b, q, c) for b, q, c in answer]


def _priced(t: StepTimes, bucket: tuple[int, int, int], phase: str) -> float:
    return t.decode_s(bucket[0], bucket[2]) if phase == "decode" else t.prefill_s(*bucket)


def own_cases(own: OwnInputs, tmp: Path, name: str) -> tuple[list[dict[str, Any]], list[int]]:
    """Two driver cases (the planned file, exp), each every schedule's events in turn and the probes at the end; and
    where each schedule's events start."""
    events: list[list[Any]] = []
    starts = []
    for _, _, trace, _ in own.schedules:
        starts.append(len(events))
        events += trace_events(trace, MAX_EVENTS)
    starts.append(len(events))
    events += [_probe_event(*p[:3]) for p in own.probes]
    shape = dataclasses.asdict(own.shape)
    return [{"env": file_env({}, own.plan_file, tmp, name), "shape": shape, "events": events},
            {"env": dict(EXP_ENV), "shape": shape, "events": events}], starts  # fmt: skip


def _padded_ratio(seconds: list[float], useful: float) -> float | None:
    """Padded time in the planned file's buckets over exp's (None: exp pads nothing)."""
    return (seconds[0] - useful) / (seconds[1] - useful) if seconds[1] > useful else None


def _close(a: float | None, b: float | None) -> bool:
    return (a is None and b is None) or (a is not None and b is not None and abs(a - b) <= 0.005)


def _modelled(tables: tuple[LookupTable, LookupTable], t: StepTimes, phase: str, first: int, second: int) -> float:
    """A step's seconds as our model prices it over the buckets vllm-gaudi generated (prompt, decode tables): in the
    first bucket holding it, at its own shape where none does."""
    one = np.ones(1, dtype=np.int64)
    a, b = np.array([first], dtype=np.int64), np.array([second], dtype=np.int64)
    if phase == "decode":
        i = int(tables[1].index(a, one, b)[0])
        return t.decode_s(first, second) if i < 0 else t.decode_s(tables[1].bucket(i)[0], tables[1].bucket(i)[2])
    i = int(tables[0].index(one, a, b)[0])
    return t.prefill_s(1, first, second) if i < 0 else t.prefill_s(*tables[0].bucket(i))


def _replayed(trace: Trace, answers: tuple[list[Any], list[Any]], generated: list[set[tuple[int, ...]]],
              tables: list[tuple[LookupTable, LookupTable]], t: StepTimes,
              block: int) -> tuple[float, list[float], list[float], list[int]]:  # fmt: skip
    """One schedule's useful seconds, its seconds in the buckets vllm-gaudi answered (planned file, exp), the same
    with every step vllm-gaudi ran in a fallback bucket priced as our model prices it over the generated buckets (a
    fallback, once generated, also takes later shapes a generated bucket would have held), and the distinct
    fallback buckets each side answered with (run-time compiles)."""
    useful = 0.0
    seconds, as_ours = [0.0, 0.0], [0.0, 0.0]
    compiled: list[set[tuple[int, int, int]]] = [set(), set()]
    for raw, *side in zip(trace.events, *answers, strict=False):
        if isinstance(raw, DecodeRun):
            own_s = raw.steps * t.decode_s(raw.sequences, raw.blocks)
            useful += own_s
            for j, ans in enumerate(side):
                b = _forwards(ans, ["decode"])[0]
                step = raw.steps * t.decode_s(b[0], max(b[2], raw.blocks))
                seconds[j] += step
                as_ours[j] += (
                    step
                    if b in generated[j]
                    else raw.steps * _modelled(tables[j], t, "decode", raw.sequences, raw.blocks)
                )
                if b not in generated[j]:
                    compiled[j].add(b)
            continue
        own_p = [t.prefill_s(1, c.query, math.ceil(c.context / block)) for c in raw]
        useful += sum(own_p)
        for j, ans in enumerate(side):
            for b, chunk in zip(_forwards(ans, ["prefill"]), raw, strict=True):
                ctx = math.ceil(chunk.context / block)
                step = t.prefill_s(b[0], max(b[1], chunk.query), max(b[2], ctx))
                seconds[j] += step
                as_ours[j] += step if b in generated[j] else _modelled(tables[j], t, "prefill", chunk.query, ctx)
                if b not in generated[j]:
                    compiled[j].add(b)
    return useful, seconds, as_ours, [len(c) for c in compiled]


def own_figures(own: OwnInputs, starts: list[int], planned: dict[str, Any], exp: dict[str, Any]) -> dict[str, Any]:
    """vllm-gaudi's own answers priced with the step model: the probes' ratios, the graphs it generated, and per
    schedule the run-time compiles (buckets it answered that it had not generated) and padded time over exp's."""
    for side in (planned, exp):
        if "driver_error" in side:
            return {"error": side["driver_error"][-300:]}
    t = cached(own.time)
    generated = [{tuple(b) for b in side["generated_prompt"]} | {tuple(b) for b in side["generated_decode"]}
                 for side in (planned, exp)]  # fmt: skip
    tables = [(LookupTable(sorted(tuple(b) for b in side["generated_prompt"])),
               LookupTable(sorted(tuple(b) for b in side["generated_decode"]))) for side in (planned, exp)]  # fmt: skip
    out: dict[str, Any] = {
        "graphs": len(generated[0]), "exp_graphs": len(generated[1]),
        "fallbacks": len(planned["prompt"]) + len(planned["decode"]) - len(generated[0]),
        "exp_fallbacks": len(exp["prompt"]) + len(exp["decode"]) - len(generated[1]),
    }  # fmt: skip
    probe_rows = []
    for k, (phase, first, second, ours) in enumerate(own.probes):
        i = starts[-1] + k
        event = _probe_event(phase, first, second)
        mine, theirs = (_forwards(side["events"][i], event)[0] for side in (planned, exp))
        ratio = _priced(t, mine, phase) / _priced(t, theirs, phase)
        probe_rows.append({"phase": phase, "first": first, "second": second, "planned_bucket": list(mine),
                           "exp_bucket": list(theirs), "own_lookup_ratio": ratio, "our_ratio": ours,
                           "agree": abs(ratio - ours) <= 1e-6 * ours})  # fmt: skip
    out["probes"] = probe_rows
    loads = []
    for (traffic, load, trace, ours_ratio), lo, hi in zip(own.schedules, starts[:-1], starts[1:], strict=True):
        answers = (planned["events"][lo:hi], exp["events"][lo:hi])
        useful, seconds, as_ours, compiles = _replayed(trace, answers, generated, tables, t, own.shape.block_size)
        padded, conv = (_padded_ratio(x, useful) for x in (seconds, as_ours))
        loads.append({"traffic": traffic, "load": load, "events": hi - lo, "steps": trace.steps,
                      "compiles": compiles[0], "exp_compiles": compiles[1], "padded_ratio": padded,
                      "padded_ratio_fallbacks_as_our_model": conv, "our_padded_ratio": ours_ratio,
                      "agree": _close(conv, ours_ratio)})  # fmt: skip
    out["loads"] = loads
    return out


def own_lookup(inputs: list[OwnInputs], mirror: Path, commit: str) -> list[dict[str, Any]]:
    """Every configuration's schedules and probes through vllm-gaudi's own lookup (one driver process)."""
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        runner = extract(mirror, commit, tmp)
        payload, starts = [], []
        for k, own in enumerate(inputs):
            cases, at = own_cases(own, tmp, str(k))
            payload += cases
            starts.append(at)
        answers = run_driver(payload, tmp, runner)
    return [own_figures(own, at, answers[2 * k], answers[2 * k + 1])
            for k, (own, at) in enumerate(zip(inputs, starts, strict=True))]  # fmt: skip


def sampled_levels(planned: Traffic, shape: EngineShape, images: Images, load: int | None, requests: int, seeds: int,
                   swept: bool, names: list[str], ours: tuple[tuple[Bucket, ...], tuple[Bucket, ...]],
                   exp: tuple[tuple[Bucket, ...], tuple[Bucket, ...]],
                   t: StepTime) -> list[dict[str, Any]]:  # fmt: skip
    """The levels the plan judges (``names``, as planned on seed 1), each scheduled again with the seeds the loads
    between the levels are sampled with: padded / exp's per seed and the most."""
    per: list[list[float | None]] = [[] for _ in names]
    uncovered = [0] * len(names)
    for seed in range(OFF_GRID_SEED, OFF_GRID_SEED + seeds):
        runs = schedules(planned, shape, images, concurrency=load, requests=requests, seed=seed)
        loads = load_shapes(runs)
        if swept:
            loads += load_shapes(schedules(planned, shape, images, concurrency=None, requests=requests, seed=seed))
        if [x.load for x in loads] != names:
            raise AssertionError(f"seed {seed} scheduled {[x.load for x in loads]}, the plan judged {names}")
        for k, x in enumerate(loads):
            mine, theirs = padded_time(*ours, x, t), padded_time(*exp, x, t)
            per[k].append(mine.padded_s / theirs.padded_s if theirs.padded_s else None)
            uncovered[k] = max(uncovered[k], compiles(ours, x, shape))
    out = []
    for name, ratios, u in zip(names, per, uncovered, strict=True):
        known = [x for x in ratios if x is not None]
        out.append({"load": name, "padded_ratio": max(known) if known else None, "per_seed": ratios, "uncovered": u})
    return out


def _most(xs: list[dict[str, Any]]) -> float | None:
    return max((x["padded_ratio"] for x in xs if x["padded_ratio"] is not None), default=None)


def run(c: Config, requests: int, seeds: int = 1) -> tuple[dict[str, Any], OwnInputs]:
    m = catalog_by_id(c.model)
    assert m is not None
    shape = EngineShape(max_model_len=c.max_model_len, max_num_seqs=c.max_num_seqs, block_size=BLOCK,
                        max_num_batched_tokens=c.max_num_batched_tokens, num_kv_blocks=kv_blocks(c))  # fmt: skip
    limits = TextLimits.of(shape, decode_block_ceiling(shape), 1)
    t = step_time(m, c.device, block_size=BLOCK, tensor_parallel_size=c.tp)
    images = Images(VISION_BUCKETS)
    base = default_traffic()
    planned, drifted = reshaped(base, c.plan), reshaped(base, c.drift)
    runs = schedules(planned, shape, images, concurrency=c.load, requests=requests, seed=1)
    sweep = None if runs.balanced else schedules(planned, shape, images, concurrency=None, requests=requests, seed=1)
    exp = VllmGaudi().text_shapes(shape)
    exp_buckets = (exp.prefill, tuple((b, 1, k) for b, k in exp.decode))
    start = time.process_time()
    chosen = plan_for_traffic(runs, limits, exp, t, budget=None, sweep=sweep,
                              warmup=text_warmup(TRAITS, block_size=BLOCK),
                              between=loads_at(planned, shape, images, requests, seed=1))  # fmt: skip
    plan_cpu = time.process_time() - start
    worst = chosen.worst
    assert worst is not None
    ours = (chosen.plan.prompt, chosen.plan.decode)
    drift_runs = schedules(drifted, shape, images, concurrency=None, requests=requests, seed=2)
    drift_loads: list[dict[str, Any]] = []
    for load in load_shapes(drift_runs):
        mine, theirs = padded_time(*ours, load, t), padded_time(*exp_buckets, load, t)
        busy = (mine.bucket_prefill_s + mine.bucket_decode_s) / (theirs.bucket_prefill_s + theirs.bucket_decode_s)
        drift_loads.append({"load": load.load, "padded_ratio": mine.padded_s / theirs.padded_s if theirs.padded_s
                            else None, "busy_ratio": busy, "uncovered": compiles(ours, load, shape),
                            "exp_uncovered": compiles(exp_buckets, load, shape),
                            "largest_step_ratio": step_ratios(ours, exp_buckets, load, t)})  # fmt: skip
    # loads between the levels the plan judges (it judges powers of two, the quarters and max_num_seqs): each at
    # once on the planned traffic, up to OFF_GRID_LOADS of them spread over 1..max_num_seqs
    judged = {int(v.load.split()[0]) for v in chosen.loads}
    between = [n for n in range(1, c.max_num_seqs + 1) if n not in judged]
    step_k = max(1, len(between) // OFF_GRID_LOADS)
    off_grid: list[dict[str, Any]] = []
    for n in between[::step_k][:OFF_GRID_LOADS]:
        samples = []  # one sample of the traffic per seed, none the plan was made on (it schedules seed 1)
        for seed in range(OFF_GRID_SEED, OFF_GRID_SEED + seeds):
            (load,) = load_shapes(schedules(planned, shape, images, concurrency=n, requests=requests, seed=seed))
            mine, theirs = padded_time(*ours, load, t), padded_time(*exp_buckets, load, t)
            samples.append((mine.padded_s / theirs.padded_s if theirs.padded_s else None, compiles(ours, load, shape)))
        ratios = [x for x, _ in samples if x is not None]
        off_grid.append({"load": load.load, "padded_ratio": max(ratios) if ratios else None,
                         "per_seed": [x for x, _ in samples], "uncovered": max(u for _, u in samples)})  # fmt: skip
    levels = sampled_levels(planned, shape, images, c.load, requests, seeds, sweep is not None,
                            [v.load for v in chosen.loads], ours, exp_buckets, t)  # fmt: skip
    planned_traces = runs.traces + (sweep.traces if sweep is not None else ())
    planned_shapes = load_shapes(runs) + (load_shapes(sweep) if sweep is not None else ())
    if len(planned_traces) != len(chosen.loads):
        raise AssertionError(f"{len(planned_traces)} planned schedules for {len(chosen.loads)} loads")
    own = OwnInputs(shape, bucket_file(*ours), probes(chosen.plan, (exp.prefill, exp_buckets[1]), limits, t),
                    [*(("planned", v.load, tr, v.ours.padded_s / v.own.padded_s if v.own.padded_s else None)
                       for tr, v in zip(planned_traces, chosen.loads, strict=True)),
                     *(("drifted", d["load"], tr, d["padded_ratio"])
                       for tr, d in zip(drift_runs.traces, drift_loads, strict=True))], t)  # fmt: skip
    return {
        "name": c.name, "model": c.model, "device": c.device, "tp": c.tp,
        "limits": {"max_model_len": c.max_model_len, "max_num_seqs": c.max_num_seqs,
                   "max_num_batched_tokens": c.max_num_batched_tokens, "kv_blocks": shape.num_kv_blocks},
        "planned_traffic": planned.source, "drifted_traffic": drifted.source, "planned_load": c.load,
        "graphs": chosen.plan.graphs, "exp_graphs": len(exp.prefill) + len(exp.decode), "budget_reason": chosen.reason,
        "worst": worst.to_dict(),
        "planned_loads": [{"load": v.load, "padded_ratio": v.ours.padded_s / v.own.padded_s if v.own.padded_s else None,
                           "uncovered": compiles(ours, x, shape), "exp_uncovered": compiles(exp_buckets, x, shape)}
                          for v, x in zip(chosen.loads, planned_shapes, strict=True)],
        "drifted_loads": drift_loads,
        "off_grid_loads": off_grid,
        "level_samples": levels,
        "plan_cpu_s": plan_cpu,
    }, own  # fmt: skip


def _f(x: float | None, digits: int = 2) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def render(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [
        "# The planned text buckets' worst shape against vllm-gaudi's exp (issue 35)",
        "",
        f"Machine: {meta['machine']}; {meta['load']}; commit {meta['commit']}; {meta['date']}; "
        f"{meta['requests']} requests per load level; CPU {meta['cpu_s']:.0f} s in all. Produced by "
        f"`benchmarks/planner/worst_case.py`; figures as they came ({meta['note']}). Every shape "
        "looked up with the project's model of vllm-gaudi's lookup (agrees with vllm-gaudi's own code on every "
        "event: agreement/results/vllm_gaudi_lookup_check.md) and priced with the step-time model (ratios of two "
        "modelled steps; each ratio's range within the model's held-out interval is in the JSON).",
        "",
        "| configuration | worst decode (x exp) | worst prefill (x exp) | bound 1.5x | graphs (exp) | compiles "
        "(planned / drifted) (exp's) | padded / exp's per load, planned traffic | drifted: padded / exp's per load | "
        "drifted: largest step / busy ratio (<= worst?) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        w = r["worst"]
        reach = ("met" if w["within_bound"] else
                 f"not met: {w['graphs_reaching_bound'] or 'more than +64'} graphs reach it")  # fmt: skip
        planned = ", ".join(f"{x['load'].split()[0]}: {_f(x['padded_ratio'])}" for x in r["planned_loads"])
        drifted = ", ".join(f"{x['load'].split()[0]}: {_f(x['padded_ratio'])}" for x in r["drifted_loads"])
        step = max((v for x in r["drifted_loads"] for v in x["largest_step_ratio"].values()), default=0.0)
        busy = max(x["busy_ratio"] for x in r["drifted_loads"])
        ok = "yes" if max(step, busy) <= (w["ratio"] or 0) + HALF_DECIMAL else "NO"
        compiles = " / ".join(str(sum(x["uncovered"] for x in r[k])) for k in ("planned_loads", "drifted_loads"))
        compiles += " (" + " / ".join(str(sum(x.get("exp_uncovered", 0) for x in r[k]))
                                      for k in ("planned_loads", "drifted_loads")) + ")"  # fmt: skip
        lines.append(
            f"| {r['name']} | {_f(w['decode']['ratio'] if w['decode'] else None)} | "
            f"{_f(w['prefill']['ratio'] if w['prefill'] else None)} | {reach} | {r['graphs']} ({r['exp_graphs']}) | "
            f"{compiles} | {planned} | {drifted} | {step:.2f} / {busy:.2f} ({ok}) |"
        )
    if any(r.get("off_grid_loads") for r in rows):
        seeds = meta.get("seeds", 1)
        sampled = (f"the most over {seeds} samples of {meta['requests']} requests (seeds {OFF_GRID_SEED} to "
                   f"{OFF_GRID_SEED + seeds - 1})" if seeds > 1 else f"one sample (seed {OFF_GRID_SEED})")  # fmt: skip
        lines += ["", "Loads the plan does not judge (between its levels), each at once on the planned traffic "
                  f"(padded / exp's, {sampled}; the most above 1 would be a load padding longer than exp):",
                  ""]  # fmt: skip
        for r in rows:
            xs = r.get("off_grid_loads", [])
            worst = _most(xs)
            each = ", ".join(f"{x['load'].split()[0]}: {_f(x['padded_ratio'])}" for x in xs)
            lines.append(f"- {r['name']}: {each} (most {_f(worst, 4)}; compiles {sum(x['uncovered'] for x in xs)})")
    if any(r.get("level_samples") for r in rows):
        seeds = meta.get("seeds", 1)
        lines += ["", f"The levels the plan judges, each scheduled again with the same {seeds} seed(s) (padded / "
                  "exp's, the most; the plan's own sample is in the table above):", ""]  # fmt: skip
        for r in rows:
            xs = r.get("level_samples", [])
            each = ", ".join(f"{x['load'].split()[0]}: {_f(x['padded_ratio'])}" for x in xs)
            lines.append(f"- {r['name']}: {each} (most {_f(_most(xs), 4)}; compiles {sum(x['uncovered'] for x in xs)})")
        levels = [(_most(r.get("level_samples", [])), r["name"]) for r in rows]
        off = [(_most(r.get("off_grid_loads", [])), r["name"]) for r in rows]
        for words, xs in (("levels", levels), ("loads between the levels", off)):
            known = [(x, n) for x, n in xs if x is not None]
            if known:
                most, name = max(known)
                lines += ["", f"The most over the {words} on the other samples: {most:.4f} ({name})."]
    if any("own_lookup" in r for r in rows):
        lines += render_own(rows, meta)
    lines += ["", "Worst shapes, in the plan's words:", ""]
    lines += [f"- {r['name']}: {r['worst']['line']} (plan: {r['plan_cpu_s']:.1f} s CPU)" for r in rows]
    lines += ["", "Planned traffics and drifted traffics:", ""]
    lines += [f"- {r['name']}: planned on {r['planned_traffic']} (load {r['planned_load'] or 'unknown'}); "
              f"served {r['drifted_traffic']}" for r in rows]  # fmt: skip
    return "\n".join(lines)


def _ratios(loads: list[dict[str, Any]], traffic: str) -> str:
    return ", ".join(f"{x['load'].split()[0]}: {_f(x['padded_ratio'])}" for x in loads if x["traffic"] == traffic)


def _fallback_note(loads: list[dict[str, Any]]) -> str:
    """Where vllm-gaudi's ratio as it came differs from ours: exp's run-time compiles (fallback buckets)."""
    moved = [x for x in loads if not _close(x["padded_ratio"], x["our_padded_ratio"])]
    if not moved:
        return ""
    higher = sum(1 for x in moved if (x["our_padded_ratio"] or 0) > (x["padded_ratio"] or 0))
    return (
        f"; exp's run-time compiles (steps vllm-gaudi runs in the fallback buckets it generates, which our model "
        f"prices otherwise) make vllm-gaudi's padded ratio differ from ours at {len(moved)} of {len(loads)} "
        f"loads, ours the higher (the plan's side pessimistic) at {higher} of them"
    )


def render_own(rows: list[dict[str, Any]], meta: dict[str, Any]) -> list[str]:
    """The own-lookup cross-check: vllm-gaudi's own code's answers beside our model's, per configuration."""
    lines = [
        "",
        f"## Through vllm-gaudi's own lookup (commit {meta['vllm_gaudi_commit']} of the local mirror)",
        "",
        "vllm-gaudi's bucketing and runner lookup code run on CPU (VLLM_USE_FAKE_HPU=1, agreement/"
        "vllm_gaudi_driver.py), with the planned bucket file (VLLM_BUCKETING_FROM_FILE) and with exp, fed: the "
        f"{PROBES} worst cells per phase our model ranks (the worst first), then every event of every schedule "
        "above (planned traffic at each load, drifted traffic at each load; drain included, in order). The buckets "
        "it returned are priced with the same step model. Graphs: the buckets it generated at start-up. Compiles: "
        "distinct buckets it answered with that it had not generated (fallbacks), or a decode it ran above its largest "
        "decode bucket (find_decode_bucket caps the blocks it looks up there; pad_list never cuts the block list, so "
        "the step runs at its own blocks, a shape no warm-up ran), per schedule. The padded ratios "
        "shown are vllm-gaudi's as they came (a step priced in the fallback bucket it generated and ran it in; once "
        "generated, a fallback also takes later shapes a generated bucket would have held); our model prices a "
        "shape no bucket holds at its own shape and knows no fallback, so agreement is judged with every step "
        "vllm-gaudi ran in a fallback priced as our model prices it over the generated buckets: each probe's ratio "
        "within 1e-6 relative of ours, each load's padded ratio within 0.005 of "
        "ours.",
        "",
        "| configuration | worst decode: ours / own lookup | worst prefill: ours / own lookup | probes agreeing | "
        "graphs generated, planned file (ours) / exp (ours) | compiles planned file: planned / drifted traffic, "
        "summed over its loads, each a fresh server (exp) | padded / exp's per load, planned traffic (own lookup) | "
        "drifted (own lookup) | loads agreeing |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        o = r.get("own_lookup")
        if o is None:
            continue
        if "error" in o:
            lines.append(f"| {r['name']} | driver error: {o['error']} |||||||")
            continue
        worst = {}
        for phase in ("decode", "prefill"):
            first = next((p for p in o["probes"] if p["phase"] == phase), None)
            worst[phase] = "n/a" if first is None else f"{first['our_ratio']:.3f} / {first['own_lookup_ratio']:.3f}"
        agree_p = sum(p["agree"] for p in o["probes"])
        agree_l = sum(x["agree"] for x in o["loads"])
        comp = {tr: (sum(x["compiles"] for x in o["loads"] if x["traffic"] == tr),
                     sum(x["exp_compiles"] for x in o["loads"] if x["traffic"] == tr))
                for tr in ("planned", "drifted")}  # fmt: skip
        lines.append(
            f"| {r['name']} | {worst['decode']} | {worst['prefill']} | {agree_p} of {len(o['probes'])} | "
            f"{o['graphs']} ({r['graphs']}) / {o['exp_graphs']} ({r['exp_graphs']}) | "
            f"{comp['planned'][0]} / {comp['drifted'][0]} ({comp['planned'][1]} / {comp['drifted'][1]}) | "
            f"{_ratios(o['loads'], 'planned')} | {_ratios(o['loads'], 'drifted')} | {agree_l} of {len(o['loads'])} |"
        )
    lines += ["", "Per configuration, in words:", ""]
    for r in rows:
        o = r.get("own_lookup")
        if o is None or "error" in o:
            continue
        ok = all(p["agree"] for p in o["probes"]) and all(x["agree"] for x in o["loads"])
        ok = ok and o["graphs"] == r["graphs"] and o["exp_graphs"] == r["exp_graphs"]
        ran = [sum(x[k] for x in o["loads"]) for k in ("compiles", "exp_compiles")]
        ours = [sum(x.get(k, 0) for t in ("planned_loads", "drifted_loads") for x in r[t])
                for k in ("uncovered", "exp_uncovered")]  # fmt: skip
        verdict = ("vllm-gaudi's own lookup agrees with our model on every probe, every load's padded ratio "
                   "(fallback steps priced as ours) and both graph counts" if ok else
                   "**DISAGREES** with our model (see the JSON's own_lookup entries)")  # fmt: skip
        verdict += "; the compile counts agree" if ran == ours else "; the compile counts **differ**"
        lines.append(f"- {r['name']}: {verdict}; fallbacks generated in all: {o['fallbacks']} with the planned file, "
                     f"{o['exp_fallbacks']} with exp; run-time compiles over the schedules (fallbacks and decodes "
                     f"above the largest bucket): {ran[0]} with the planned file, {ran[1]} with exp (our model: "
                     f"{ours[0]} and {ours[1]}, counted as vllm-gaudi counts: the buckets it runs at the padded "
                     "batch)"
                     f"{_fallback_note(o['loads'])}.")  # fmt: skip
    return lines


def _cpu() -> float:
    """CPU seconds of this process and its finished children (vllm-gaudi's driver)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600, help="requests per load level (serve: 2000)")
    parser.add_argument(
        "--only",
        type=int,
        default=None,
        help="run configuration K only (0-based), printed, not written unless --name is given",
    )
    parser.add_argument(
        "--set",
        choices=sorted(SETS),
        default="held-out",
        help="which configurations: the first six (held-out), then the later sets (fresh, fresh2 ... fresh6)",
    )
    parser.add_argument("--seeds", type=int, default=1, choices=range(1, 9), metavar="1..8",
                        help="samples (seeds) of each load between the levels; the most is reported")  # fmt: skip
    parser.add_argument("--name", default=None, help="results file stem (results/NAME.md, .json; worst_case)")
    parser.add_argument("--note", default="first run of these configurations", help="what run this is, in words")
    parser.add_argument(
        "--own-lookup",
        action="store_true",
        help="also feed the worst cells and every schedule to vllm-gaudi's own lookup (the mirror)",
    )
    parser.add_argument("--mirror", type=Path, default=MIRROR, help="vllm-gaudi's git mirror")
    parser.add_argument("--commit", default=VLLM_GAUDI_COMMIT, help="vllm-gaudi commit of the mirror to run")
    args = parser.parse_args()
    before = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    start = _cpu()
    chosen = SETS[args.set]
    configs = chosen if args.only is None else (chosen[args.only],)
    rows, owns = [], []
    for c in configs:
        row, own = run(c, args.requests, args.seeds)
        rows.append(row)
        owns.append(own)
        print(f"{c.name}: {rows[-1]['worst']['line']}", flush=True)
    if args.own_lookup:
        for row, checked in zip(rows, own_lookup(owns, args.mirror, args.commit), strict=True):
            row["own_lookup"] = checked
    after = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            check=False).stdout.strip()  # fmt: skip
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    meta = {"machine": MACHINE, "load": load_note(before, after), "commit": commit, "requests": args.requests,
            "date": date, "cpu_s": _cpu() - start, "note": args.note, "seeds": args.seeds,
            "vllm_gaudi_commit": args.commit if args.own_lookup else None}  # fmt: skip
    if args.only is None or args.name is not None:
        write_results(args.name or "worst_case", render(rows, meta), {"meta": meta, "rows": rows}, RESULTS)
    else:
        print(render(rows, meta))


if __name__ == "__main__":
    main()
