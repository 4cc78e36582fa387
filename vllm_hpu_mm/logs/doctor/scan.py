"""One pass over a log, keeping only what the verdict needs, so memory stays bounded however long the log is.

Rules, in order (the guide's stages; tests/data/logs holds the real logs they are checked on):

1. vLLM's KV-cache refusals, or profiling that left nothing for the KV cache -> ``kv_cache`` (unless a device or
   host failure with its own traceback came first).
2. Otherwise the first out-of-memory line, device or host (host: the OOM killer, ``MemoryError``, ``Cannot allocate
   memory``, Ray's low-memory kill). Its stage comes from the traceback frames around it (warm-up and capture >
   KV allocation > loading and profiling > request execution); else from the last phase line before it; else it is
   ``unknown`` (an OOM with nothing that says when).
3. No failure line, but the log ends in the middle of a phase that counts its progress (``[Warmup][..][i/n]`` with
   i < n, a CUDA-graph capture bar, weight shards) and never says start-up finished -> that phase's stage, with the
   cut as the only evidence (the process died there: low confidence).
4. Otherwise ``none``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import deque
from collections.abc import Iterable
from typing import Any, Literal

from vllm_hpu_mm.logs.patterns import (
    DEVICE_OOM,
    FRAME_HINTS,
    GAUDI_MEMORY,
    HOST_OOM,
    KV_ESTIMATE,
    KV_REFUSAL,
    KV_TOKENS,
    KV_WORDS,
    MODEL,
    NEGATIVE_KV,
    PHASE_MARKERS,
    PROGRESS,
    WARMUP,
    RuntimeSniffer,
)
from vllm_hpu_mm.values import STAGES as BASE_STAGES
from vllm_hpu_mm.values import Stage

__all__ = ["STAGES", "Basis", "Diagnosis", "DiagnosisStage", "Evidence", "GaudiMemory", "Memory", "Scanner",
           "diagnose_lines"]  # fmt: skip

#: Where in a server's life the failure happened; ``unknown`` when nothing in the log says, ``none`` without one.
DiagnosisStage = Literal[Stage, "unknown", "none"]
STAGES: tuple[DiagnosisStage, ...] = (*BASE_STAGES, "unknown", "none")
#: What the stage rests on.
Basis = Literal["kv_refusal", "traceback", "phase", "cut", "unknown", "none"]
#: Which memory ran out.
Memory = Literal["device", "host"]
#: How far back a traceback may start, and how far after the error line frames may follow (some tools print the
#: error first).
BACK, AHEAD = 200, 40
#: Confidence by the kind of evidence (a stated scale, not a probability fitted to data).
CONFIDENCE: dict[Basis, float] = {
    "kv_refusal": 0.95,
    "traceback": 0.9,
    "phase": 0.6,
    "cut": 0.35,
    "unknown": 0.2,
    "none": 0.8,
}
_CLIP = 300
_PHASES_LAST_FIRST = tuple(reversed(PHASE_MARKERS))


def _clip(text: str) -> str:
    return text if len(text) <= _CLIP else text[: _CLIP - 3] + "..."


@dataclasses.dataclass(frozen=True)
class Evidence:
    line: int  # 1-based
    text: str


@dataclasses.dataclass(frozen=True)
class GaudiMemory:
    free_gib: float
    usable_gib: float
    gpu_memory_utilization: float
    graph_gib: float
    graph_reserved_mem: float
    kv_gib: float


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    stage: DiagnosisStage
    evidence: tuple[Evidence, ...]
    recommendations: tuple[str, ...]
    gaudi_memory: GaudiMemory | None = None
    warmup: tuple[str, int, int] | None = None  # (kind, i, n) of the last warm-up line before the failure
    model: str | None = None
    #: None without a failure.
    memory: Memory | None = None
    basis: Basis = "none"
    confidence: float = CONFIDENCE["none"]
    #: "hpu", "cuda", "cpu", or None when the log does not say.
    backend: str | None = None
    #: KV-cache refusal numbers: (max_model_len asked, tokens the cache holds).
    kv_fit: tuple[int, int] | None = None
    summary: str = ""

    @property
    def oom(self) -> bool:
        return self.stage != "none"


#: Non-frame lines tolerated inside a traceback when walking back from the error (a long frame line wrapped by the
#: terminal or the issue tracker leaves a fragment such as ``float16)``).
MAX_GAP = 2
_LINE_REF = re.compile(r'File "|", line \d+, in ')


def _is_frame(text: str) -> bool:
    """A traceback line (``File "..."``, an indented source line, a ``^^^`` marker), behind any log prefix."""
    body = text.split("] ", 1)[-1]
    if ") " in body[:60] and body.startswith("("):  # "(EngineCore pid=1)   File ..." prefixes
        body = body.split(") ", 1)[-1]
    return bool(_LINE_REF.search(text)) or body.startswith((" ", "\t")) or body.strip().startswith(("^", "~"))


def _frame_stage(window: list[tuple[int, str]]) -> tuple[Stage, int] | None:
    for stage, pattern in FRAME_HINTS:
        for k, text in window:
            if pattern.search(text):
                return stage, k
    return None


@dataclasses.dataclass
class _Failure:
    at: int
    text: str
    memory: Memory
    before: list[tuple[int, str]]
    after: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    phase: tuple[Stage, int, str] | None = None
    warmup: tuple[int, str, tuple[str, int, int]] | None = None


class Scanner:
    """Feed lines in order with :meth:`feed`, then :meth:`result`."""

    def __init__(self) -> None:
        self.n = 0
        self.recent: deque[tuple[int, str]] = deque(maxlen=BACK)
        self.failure: _Failure | None = None
        self.kv: tuple[int, str] | None = None
        self.kv_fit: tuple[int, int] | None = None
        self.gaudi: tuple[int, str, GaudiMemory] | None = None
        self.model: str | None = None
        self.backend = RuntimeSniffer()
        self.phase: tuple[Stage, int, str] | None = None  # last phase marker
        self.warmup: tuple[int, str, tuple[str, int, int]] | None = None
        self.progress: tuple[Stage, int, str, int, int] | None = None  # (stage, line, text, i, n), the last one
        self.completed_at = -1
        self.last_text_at = -1

    def feed(self, text: str) -> None:
        k = self.n
        self.n += 1
        if text.strip():
            self.last_text_at = k
        f = self.failure
        if f is not None and len(f.after) < AHEAD:
            f.after.append((k, text))
        self.recent.append((k, text))
        # Cheap substring guards first: most lines of a long log are request lines that need one or two checks.
        self.backend.feed(text)
        if self.model is None and "model='" in text and (m := MODEL.search(text)):
            self.model = m["model"]
        if "Free device memory" in text and (g := GAUDI_MEMORY.search(text)) and g["graph"] is not None:
            memory = GaudiMemory(float(g["free"]), float(g["usable"]), float(g["util"]), float(g["graph"]),
                                 float(g["reserved"]), float(g["kv"]))  # fmt: skip
            self.gaudi = (k, text, memory)
        if "[Warmup]" in text and (w := WARMUP.search(text)):
            self.warmup = (k, text, (w["phase"], int(w["i"]), int(w["n"])))
        if "[Warmup]" in text or "Capturing" in text or "shards" in text:
            for stage, pattern in PROGRESS:
                if (p := pattern.search(text)) is not None:
                    self.progress = (stage, k, text, int(p["i"]), int(p["n"]))
                    break
        low = text.lower()
        for stage, words in _PHASES_LAST_FIRST:
            if any(w in low for w in words):
                self.phase = (stage, k, text)
                if stage == "runtime":
                    self.completed_at = k
                break
        memoryish = "emory" in text
        if (
            self.kv is None
            and any(w in text for w in KV_WORDS)
            and (KV_REFUSAL.search(text) or NEGATIVE_KV.search(text))
        ):
            self.kv = (k, text)
        if self.kv_fit is None and "max seq len" in text and (m2 := KV_TOKENS.search(text) or KV_ESTIMATE.search(text)):
            self.kv_fit = (int(m2["len"]), int(m2["tok"]))
        if f is None and (
            memoryish or "DEVMEM" in text or "Killed" in text or "-9" in text or "KILL" in text or "oom" in text
        ):
            kind: Memory | None = "host" if HOST_OOM.search(text) else "device" if DEVICE_OOM.search(text) else None
            if kind is not None:
                self.failure = _Failure(k, text, kind, list(self.recent)[:-1], [], self.phase, self.warmup)

    # --- verdict ---------------------------------------------------------------------------------------------

    def _traceback(self, f: _Failure) -> list[tuple[int, str]]:
        """The traceback around the failure: back to its 'Traceback' line, or else over the frame lines right above
        it (excerpts often start mid-traceback), and the lines after it."""
        before = f.before
        start = len(before)
        for j in range(len(before) - 1, -1, -1):
            if "Traceback (most recent call last)" in before[j][1]:
                start = j
                break
        else:
            gap, j = 0, start - 1
            while j >= 0 and gap <= MAX_GAP:
                if _is_frame(before[j][1]):
                    start, gap = j, 0
                else:
                    gap += 1
                j -= 1
        return [*before[start:], (f.at, f.text), *f.after]

    def result(self) -> Diagnosis:
        texts: dict[int, str] = {}
        for item in (self.gaudi, self.warmup):
            if item is not None:
                texts[item[0]] = item[1]
        if self.kv is not None:
            texts[self.kv[0]] = self.kv[1]
        if self.progress is not None:
            texts[self.progress[1]] = self.progress[2]
        common = {
            "gaudi_memory": self.gaudi[2] if self.gaudi else None,
            "model": self.model,
            "backend": self.backend.name,
            "kv_fit": self.kv_fit,
        }
        f = self.failure
        gaudi_at = self.gaudi[0] if self.gaudi else -1
        window = self._traceback(f) if f is not None else []
        texts.update(window)
        hint = _frame_stage(window)
        if self.kv is not None and (f is None or self.kv[0] <= f.at or hint is None):
            return _verdict(texts, "kv_cache", "kv_refusal", "device", [self.kv[0], gaudi_at], None, common)
        if f is not None:
            warm = f.warmup[2] if f.warmup else None
            marks = [f.at, gaudi_at, f.warmup[0] if f.warmup else -1]
            if f.warmup is not None:
                texts[f.warmup[0]] = f.warmup[1]
            if hint is not None:
                return _verdict(texts, hint[0], "traceback", f.memory, [*marks, hint[1]], warm, common)
            if f.phase is not None:
                texts[f.phase[1]] = f.phase[2]
                return _verdict(texts, f.phase[0], "phase", f.memory, [*marks, f.phase[1]], warm, common)
            return _verdict(texts, "unknown", "unknown", f.memory, [f.at], warm, common)
        p = self.progress
        if p is not None and p[3] < p[4] and self.completed_at < p[1] and self.last_text_at - p[1] <= 5:
            warm = self.warmup[2] if self.warmup and self.warmup[0] == p[1] else None
            return _verdict(texts, p[0], "cut", "device", [p[1], gaudi_at], warm, common)
        return _verdict(texts, "none", "none", None, [gaudi_at], None, common)


def _verdict(
    texts: dict[int, str],
    stage: DiagnosisStage,
    basis: Basis,
    memory: Memory | None,
    lines: list[int],
    warm: tuple[str, int, int] | None,
    common: dict[str, Any],
) -> Diagnosis:
    picked = sorted({k for k in lines if k >= 0 and k in texts})
    return Diagnosis(
        stage=stage,
        evidence=tuple(Evidence(k + 1, _clip(texts[k])) for k in picked),
        recommendations=(),
        warmup=warm,
        memory=memory,
        basis=basis,
        confidence=CONFIDENCE[basis],
        **common,
    )


def diagnose_lines(lines: Iterable[str]) -> Diagnosis:
    """Classify a log given as lines (no I/O, no advice)."""
    scanner = Scanner()
    for text in lines:
        scanner.feed(text.rstrip("\r\n"))
    return scanner.result()
