"""The verdict: which stage a log's failure belongs to, weighed from the features :mod:`.scan` kept.

Rules, in order:

1. vLLM's or TGI's KV-cache refusal, or profiling that left nothing for the KV cache -> ``kv_cache`` (unless a device
   or host failure with its own traceback came first, or the refusal is TGI's refusal of its token budget reported
   from inside its warm-up, which step 2 reads as the warm-up's: :func:`_in_tgi_warmup`).
2. An out-of-memory line: its stage comes from the first of these that names one, in the order :class:`Rules`
   gives: the traceback's frames (:mod:`.phases`: a serving loop, else the innermost phase function), the error
   message itself (TGI's warm-up prefill, vLLM's sampler warm-up; llama.cpp's compute-buffer reservation, start-up
   unless serving had begun or a request's image is being encoded beside it; a numbered input of a list the program
   reports failed and then goes on with, :func:`.phases.listed_item_stage`; a failed model load before any later
   phase line, for an engine whose load precedes its KV cache; else, in any program, the work item the failure's line
   names: a request, session or invocation by its id, a case it skips, or its words that it failed while working
   over its inputs ("Error processing batch of 3 sequences", "Memory limit exceeded during prefill"),
   :func:`.phases.work_item_stage`, or the step of its pipeline
   over its data the app reports failed after it, :func:`.phases.pipeline_step_stage`, or the failure's line or the
   runtime's report after it that it could not run the model on its input, :func:`.phases.run_refused_stage`: MNN's
   "Can't run session because not resized"; or a runtime's report that it could not compile the model for its
   device, start-up: :data:`~vllm_hpu_mm.logs.patterns.MODEL_COMPILE_FAILED`; or a web server's record, right
   after the failure, of a request that brought it work answered with a server error, serving, unless a load's
   failure is reported first, :func:`.phases.answered_error_stage`: werkzeug's ``"POST /translate HTTP/1.1" 500 -``),
   the last phase line before it (weights loaded, KV cache sized, capture started, serving; in any program, its own
   line opening a clause with a verb of working over its inputs, serving, or with loading or starting a program that
   serves, start-up, :func:`.phases.announced_stage`: "Model loaded, transcribing next", "Loading pygmalion-6b...",
   "Starting server, this might take a few minutes..."; a server's report that it listens at an address, serving,
   :func:`.phases.listening_stage`; where the excerpt elides lines after it, only the last
   stage; where none came before it, the phase Ray's summary lines right after it name, :func:`_summarised_phase`:
   copies the other workers printed before), the learned frame
   votes (frame names the phase table does not know, counted over labelled logs; a protocol method such as
   ``__init__`` casts none: any object's constructor runs in any phase) and, without a vote, the words of the
   frames' names in any program (:func:`.phases.named_stage`: a ``_forward_generate`` is serving, a ``from_dir``
   start-up, a thread's ``forward_thread_func`` serving, a worker's body that runs a forward pass it was sent
   (exllamav3's ``mp_model_worker`` -> ``mp_model_forward``) serving; a ``get_decode_mask``, named for what it
   makes, nothing; a set-up such as ``_init_engine`` whose inner frames the excerpt elides, nothing; else the dotted
   name of the logger that wrote the failure's line, read the same way, :func:`.phases.logger_stage`:
   ``fairseq.trainer``, serving).
   The frames are a traceback's, or Python's fault handler's dump after a fatal abort (innermost first there, read
   outermost first). Else, where one worker failed on device memory :data:`REPEATED` times, ``runtime`` (basis
   ``repeated``: it survived its failures).
   Failures are counted, not lines: a failure counts again only after a line of the program's other work; lines with
   nothing else between are one failure reported again (an allocator's back-off, TensorFlow's, keras-team/keras
   #13889: five lines at start-up; ggml's Metal backend failing each command buffer of one computation, ollama/ollama
   #6257), not a worker that went on (:attr:`.scan.RunFeatures.repeated`). Else ``unknown``.
3. No failure line, but the log (or the run, before a restart) stops inside a traceback whose frames name a phase
   (or its learned votes do) -> ``unknown`` with no out-of-memory claim (basis ``undecided``): the frames say where
   an exception was raised, not which (:func:`silent_cut`). Only a frame that raises nothing but a memory refusal
   (the KV cache's check) reads the cut as that phase's failure (basis ``cut``). A traceback whose error the log
   states without memory words is no cut but that error, a failure of another kind -> ``none`` (basis ``error``),
   however it was cut: stated on the line that opens it (a logger's "<what failed>: <message>, Traceback ..."), right
   above it (a failed check or lookup, a collective's or NCCL's relayed runtime failure), a few lines above it with
   only records announcing a failure between (NCCL's "internal error" over vLLM's "Error executing method
   'init_device'", a request's error body over TGI's "Method Prefill encountered an error.", another rank's exception
   line over SGLang's "Scheduler hit an exception:": :func:`.scan._stated_before_announcements`; so too above the
   first frame of a traceback shown without its header, its error quoted first), by the exception line of the cause it
   is chained to ("The above exception was the direct cause ..."), by an exception line stated without its own traceback
   a few lines above it, the program not going on between (torch dynamo's error, its traceback elided, with its
   hints, then the chained traceback; vLLM's engine core's error, its executor's report of the dead worker, then the
   driving program's traceback: :func:`.scan._raised_above`), or by a line after its frames
   (:attr:`.scan.RunFeatures.error`). A device fault (CUDA's or HIP's "an illegal memory access was encountered",
   "device-side assert triggered", a failed launch, no kernel image: :data:`.scan.DEVICE_FAULT`) is such an error
   though it may say "memory": the word names where the fault hit, not what ran out. A traceback quoted whole on one
   line (a JSON error body, its breaks written ``\\n``) ends at its quoted exception line: no cut.
4. A log that stops partway through a counted phase (``[Warmup][..][i/n]`` with i < n, a CUDA-graph bar, weight
   shards) with nothing else -> ``none`` (basis ``stopped``): no out-of-memory line, no kill (``Killed``, exit code
   137 or -9, the OOM killer: those are failure lines, step 2), no traceback. An excerpt copied while the phase ran,
   or cut short by whoever posted it, ends the same way; three held-out rounds running read such a log as a killed
   process and were wrong (issue 34 item 10).
5. Otherwise ``none``.

The order of step 2, how close to the end a cut must be, and the frame votes are :class:`Rules`, fitted on labelled
logs by :func:`.fitting.fit` (``benchmarks/fits/doctor_accuracy.py`` fits them on some folds and scores the others; the
package ships the rules fitted on the whole development set, ``vllm_hpu_mm/data/doctor_rules.json``).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from vllm_hpu_mm.logs.doctor.phases import (
    MODEL_RUNS,
    SHARED_RUNS,
    TGI_WARMUP,
    WORK_ITEM,
    answered_error_stage,
    encoder_frame,
    frame_meaning,
    generic_frame,
    logger_stage,
    named_stage,
    past_read_at,
    pipeline_step_stage,
    run_refused_stage,
    short_for_stage,
    traceback_stage,
    work_item_stage,
)
from vllm_hpu_mm.logs.doctor.scan import Failure, Frame, GaudiMemory, LogFeatures, Memory, marker_stage
from vllm_hpu_mm.logs.doctor.source import HOST_NAMES, LogSource
from vllm_hpu_mm.logs.numbers import SkippedLines
from vllm_hpu_mm.logs.patterns import (
    CPU_NODE_KV,
    DEVICE_OOM,
    ELISION,
    FAILURE_MARK,
    HOST_OOM,
    KV_FIT_FIGURE,
    KV_REFUSAL,
    MEMORY_REFUSED,
    MODEL_COMPILE_FAILED,
    RAY_REPEATED,
    strip_prefix,
)
from vllm_hpu_mm.values import STAGES as BASE_STAGES
from vllm_hpu_mm.values import Stage

__all__ = [
    "CONFIDENCE",
    "REFUSAL_FRAMES",
    "RULES_FILE",
    "STAGES",
    "Basis",
    "Cut",
    "Diagnosis",
    "DiagnosisStage",
    "Evidence",
    "Judgement",
    "Rules",
    "Source",
    "decide",
    "default_rules",
    "frame_tokens",
    "judge",
    "silent_cut",
    "stopped_partway",
]  # fmt: skip

#: Where in a server's life the failure happened; ``unknown`` when nothing in the log says, ``none`` without one.
DiagnosisStage = Literal[Stage, "unknown", "none"]
STAGES: tuple[DiagnosisStage, ...] = (*BASE_STAGES, "unknown", "none")
#: The kinds of evidence step 2 weighs, in the order :class:`Rules` tries them.
Source = Literal["frames", "message", "phase", "votes"]
#: What the stage rests on.
#: ``undecided``: the log stops inside a traceback that says nothing of memory (stage ``unknown``, no OOM claimed).
#: ``stopped``: the log stops partway through a counted phase and shows nothing else (stage ``none``, no OOM claimed).
Basis = Literal["kv_refusal", "traceback", "message", "phase", "learned", "repeated", "cut", "undecided", "unknown",
                "error", "stopped", "none"]  # fmt: skip
#: What a cut verdict stopped inside: a traceback, or (a ``stopped`` log) a counted phase.
Cut = Literal["traceback", "phase"]
#: A setting's value as the advice gives it: a number, a word, a JSON value (``--mm-processor-kwargs``'s object), or
#: None where the advice names the setting without one value.
SettingValue = float | int | str | list[Any] | dict[str, Any] | None
#: A worker that failed this many times, with its other work between (:attr:`.scan.RunFeatures.repeated`), survived
#: its failures (one failure prints the error two or three times: the logger's line, the traceback's last line, the
#: engine's report of it, with the engine's other lines between at times): it was serving.
REPEATED = 5
_BASIS_OF: dict[Source, Basis] = {"frames": "traceback", "message": "message", "phase": "phase", "votes": "learned"}
#: Confidence by the kind of evidence (a stated scale, not a probability fitted to data).
CONFIDENCE: dict[Basis, float] = {
    "kv_refusal": 0.95,
    "traceback": 0.9,
    "message": 0.85,
    "phase": 0.6,
    "learned": 0.5,
    "repeated": 0.5,
    "cut": 0.35,
    "undecided": 0.2,
    "unknown": 0.2,
    "error": 0.8,
    "stopped": 0.5,
    "none": 0.8,
}
RULES_FILE = Path(__file__).resolve().parents[2] / "data" / "doctor_rules.json"
#: The most characters of one line an evidence entry quotes.
_CLIP = 300
#: The failure's words an over-long line is quoted around, the first that matches: memory ran out, the KV cache
#: refused, memory was refused, else any failure mark (an error of another kind).
_FOCUS = (DEVICE_OOM, HOST_OOM, KV_FIT_FIGURE, KV_REFUSAL, MEMORY_REFUSED, FAILURE_MARK)
#: The words an over-long error of another kind is quoted around: its failure mark, never memory words it may list
#: among possible causes (Ray's "(1) The process is killed by SIGKILL by OOM killer ..." after "The actor died").
ERROR_FOCUS = (FAILURE_MARK,)


@dataclasses.dataclass(frozen=True)
class Rules:
    """What :func:`.fitting.fit` chooses from labelled logs (defaults: the order the module docstring gives)."""

    order: tuple[Source, ...] = ("frames", "message", "phase", "votes")
    #: A cut counts when the log's last line is at most this many lines after the cut phase or traceback.
    cut_lines: int = 5
    #: Whether a traceback the log stops inside (no exception line) counts as a failure of its frames' phase (an
    #: excerpt may also stop inside a traceback of another kind of error: fitting weighs the two).
    cut_tracebacks: bool = True
    #: Frame votes: token -> stage -> labelled logs whose failure traceback held it (tokens the phase table knows
    #: are left out: the table decides those).
    votes: Mapping[str, Mapping[str, int]] = dataclasses.field(default_factory=dict)
    #: Least number of votes (and margin over the runner-up) for the votes to decide.
    min_votes: int = 2
    #: Whether a cut traceback that says nothing of memory (:func:`silent_cut`) is answered ``unknown`` with no
    #: out-of-memory claim rather than as its frames' phase.
    cut_evidence: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"order": list(self.order), "cut_lines": self.cut_lines, "cut_tracebacks": self.cut_tracebacks,
                "min_votes": self.min_votes, "cut_evidence": self.cut_evidence,
                "votes": {t: dict(sorted(v.items())) for t, v in sorted(self.votes.items())}}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Rules:
        order = tuple(data["order"])
        if sorted(order) != sorted(("frames", "message", "phase", "votes")):
            raise ValueError(f"rules order {order!r} is not a permutation of frames, message, phase, votes")
        votes = {str(t): {str(s): int(n) for s, n in v.items()} for t, v in data["votes"].items()}
        cut, tracebacks = int(data["cut_lines"]), bool(data["cut_tracebacks"])
        evidence = bool(data.get("cut_evidence", True))
        return cls(order, cut, tracebacks, votes, int(data["min_votes"]), evidence)  # type: ignore[arg-type]


def default_rules() -> Rules:
    """The rules the package ships: fitted on the whole development set (see :data:`RULES_FILE`)."""
    return Rules.from_json(json.loads(RULES_FILE.read_text()))


@dataclasses.dataclass(frozen=True)
class Evidence:
    line: int  # 1-based
    text: str


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
    #: Which run of the log the verdict is about (1-based) and how many runs (server starts) the log holds.
    run: int = 1
    runs: int = 1
    #: Each setting the recommendations change, with its one value (None: named without one value): setting -> value.
    settings: Mapping[str, SettingValue] = dataclasses.field(default_factory=dict)
    #: What wrote the log: framework, accelerator, our runtime, a vision model, other processes' memory.
    source: LogSource = dataclasses.field(default_factory=LogSource)
    #: Lines left out because a figure in them is garbled.
    skipped: SkippedLines = dataclasses.field(default_factory=SkippedLines, compare=False)
    #: For a cut verdict, what the log stopped inside (None otherwise).
    cut: Cut | None = None
    #: For an error of another kind (basis ``error``), the evidence's lines (1-based) that state it: its exception
    #: line, and the line that closes its message where the message goes on over more lines.
    error_lines: tuple[int, ...] = ()

    @property
    def oom(self) -> bool:
        """Whether the doctor claims an out-of-memory failure (an ``undecided`` cut claims none)."""
        return self.stage != "none" and self.basis != "undecided"


@functools.lru_cache(maxsize=1024)
def _tokens(frames: tuple[Frame, ...]) -> frozenset[str]:
    return frozenset(frame_tokens(frames))


#: Names that say nothing about a phase: Python's and torch's plumbing, builtins, exception classes.
_PLUMBING = frozenset(
    ("<module>", "<listcomp>", "<lambda>", "<genexpr>", "__call__", "_call_impl", "_wrapped_call_impl", "wrapper",
     "inner", "decorate_context", "run", "_bootstrap", "main", "func", "fn", "f", "super", "len", "sum", "getattr",
     "isinstance", "print", "raise", "return", "forward_call",
     # threading's: a thread runs its target in every phase (Thread.run -> self._target)
     "_target", "_bootstrap_inner")
)  # fmt: skip
#: Functions that run the model for requests as well as at start-up (a module's ``forward``, vLLM's
#: ``execute_model``, TGI's ``generate_token``): a traceback through them alone cannot tell a request from the
#: profiling pass, so they cast no vote (a vote for ``forward`` counted where the labelled logs happened to fail, not
#: what a forward is). The dummy runs (``_dummy_run``, ``_dummy_sampler_run``) never serve a request: they vote. Runs
#: shared by profiling and warm-up (:data:`.phases.SHARED_RUNS`) cannot tell those two apart: no vote either.
_ANY_PHASE = frozenset(("forward", "_model_forward", "execute_model", "generate_token", *SHARED_RUNS))


def frame_tokens(frames: Iterable[Frame]) -> set[str]:
    """The names of the frames the phase table does not know, less plumbing: what frame votes count."""
    names = {f.func.rsplit(".", 1)[-1] for f in frames
             if f.func and frame_meaning(f.path, f.func) is None and not generic_frame(f.path, f.func)}  # fmt: skip
    return {n for n in names
            if n not in _PLUMBING and n not in _ANY_PHASE and not _protocol(n)
            and not n.endswith(("Error", "Exception"))}  # fmt: skip


def _protocol(name: str) -> bool:
    """Whether ``name`` is a Python protocol method (``__init__``, ``__torch_function__``): it names how an object
    was reached, not the work. A constructor runs whenever its object is made: a model's layer at start-up, a server's
    runner or engine whose construction encloses every start-up phase (bentoml/OpenLLM #968: a runner's ``__init__``
    above vLLM's engine constructor, the frames below it left out), an object a request builds. Two labelled
    start-up logs had voted ``__init__`` start-up; the phase table already reads a model's own constructors
    (:data:`.phases.MODEL_CODE`), and :func:`.phases.named_stage` leaves ``__init__`` out for the same reason."""
    return name.startswith("__") and name.endswith("__")


def _voted(frames: tuple[Frame, ...], rules: Rules) -> Stage | None:
    tally: Counter[str] = Counter()
    for token in _tokens(frames):
        tally.update(rules.votes.get(token, {}))
    ranked = tally.most_common(2)
    if not ranked or ranked[0][1] < rules.min_votes:
        return None
    if len(ranked) > 1 and ranked[0][1] - ranked[1][1] < rules.min_votes:
        return None
    stage = ranked[0][0]
    return stage if stage in BASE_STAGES else None  # type: ignore[return-value]


@functools.lru_cache(maxsize=1024)
def _frames_stage(frames: tuple[Frame, ...]) -> tuple[Stage, int] | None:
    hit = traceback_stage((f.path, f.func) for f in frames)
    return None if hit is None else (hit[0], frames[hit[1]].line)


@dataclasses.dataclass(frozen=True)
class Judgement:
    """A verdict before it is dressed as a :class:`Diagnosis`: the stage, what it rests on, and the lines it cites
    (0-based; the failure, the frame or phase line that decided, the warm-up and memory lines)."""

    stage: DiagnosisStage
    basis: Basis
    memory: Memory | None
    lines: tuple[int, ...]
    warmup: tuple[str, int, int] | None = None
    #: Where a cut verdict stopped: inside a traceback (an exception was being printed: the log or its excerpt ends
    #: there) or inside a counted phase or phase line (the process may have been killed there).
    cut: Cut | None = None


def judge(features: LogFeatures, rules: Rules) -> Judgement:
    """The verdict on ``features`` under ``rules`` (what :func:`.fitting.fit` scores; :func:`decide` dresses it)."""
    run = features.run
    f = run.failure
    gaudi_at = run.gaudi[0] if run.gaudi else -1
    hint = _frames_stage(f.frames) if f is not None and not _scope_above_elision(f) else None
    if f is not None:
        hint = _before_phase_line(f, hint) or _profiled_encoder(f)
    if run.kv is not None and (f is None or run.kv[0] <= f.line or hint is None) and not _in_tgi_warmup(f):
        # vLLM CPU's KV cache is host memory: its node had less available than the cache asked (cpu_worker.py 0.32)
        memory: Memory = "host" if CPU_NODE_KV.search(run.kv[1]) else "device"
        return Judgement("kv_cache", "kv_refusal", memory, (run.kv[0], gaudi_at))
    if f is not None:
        warm = f.warmup[2] if f.warmup else None
        marks = (f.line, gaudi_at, f.warmup[0] if f.warmup else -1)
        for source in rules.order:
            found = _source(source, f, hint, rules, features.source)
            if found is not None:
                return Judgement(found[0], _BASIS_OF[source], f.memory, (*marks, found[1]), warm)
        if f.memory == "device" and run.repeated >= REPEATED:
            return Judgement("runtime", "repeated", f.memory, (f.line,), warm)
        return Judgement("unknown", "unknown", f.memory, (f.line,), warm)
    tb = run.open_traceback
    if tb is not None and rules.cut_tracebacks and run.end - tb.last <= rules.cut_lines:
        found = _frames_stage(tb.frames)
        voted = _voted(tb.frames, rules) if found is None else None
        at = found[1] if found is not None else tb.last
        if (found or voted) and rules.cut_evidence and silent_cut(tb.frames):
            return Judgement("unknown", "undecided", None, (at, gaudi_at), cut="traceback")
        if found is not None:
            return Judgement(found[0], "cut", "device", (found[1], gaudi_at), cut="traceback")
        if voted is not None:
            return Judgement(voted, "cut", "device", (tb.last, gaudi_at), cut="traceback")
    p = run.progress
    partway = p is not None and stopped_partway(p) and run.completed_at < p[1]
    warm = run.warmup[2] if p is not None and run.warmup and run.warmup[0] == p[1] else None
    # A traceback that opens right after the counted phase line and names no phase of its own (a loader the phase
    # table does not know: ms-swift's or transformers' from_pretrained while the shards load), cut: the phase stopped
    # partway with an error being printed.
    if p is not None and partway and tb is not None and rules.cut_tracebacks and tb.frames:
        opened = tb.frames[0].line - p[1]
        if run.end - tb.last <= rules.cut_lines and 0 < opened <= rules.cut_lines and _frames_stage(tb.frames) is None:
            if rules.cut_evidence and silent_cut(tb.frames):
                return Judgement("unknown", "undecided", None, (p[1], gaudi_at), warm, cut="traceback")
            return Judgement(p[0], "cut", "device", (p[1], gaudi_at), warm, cut="traceback")
    if run.error is not None:  # a traceback that ended in an error of another kind: a failure, not an OOM
        return Judgement("none", "error", None, (run.error[0], gaudi_at))
    if p is not None and partway:
        # stopped partway with no failure line and no traceback: no evidence of an out-of-memory failure (step 4)
        return Judgement("none", "stopped", None, (p[1], gaudi_at), warm, cut="phase")
    return Judgement("none", "none", None, (gaudi_at,))


def _in_tgi_warmup(f: Failure | None) -> bool:
    """Whether a frame of the failure puts it inside TGI's warm-up (:data:`~.phases.TGI_WARMUP`), which step 2 reads
    as the warm-up's whatever failed there. TGI's warm-up sizes its KV cache itself and reports a token budget it could
    not fit as its own failure ("Not enough memory to handle N total tokens with M prefill tokens" under the router's
    warm-up span, round 75): that refusal is the warm-up's, not the KV cache's (the labels of record since stop 50).
    The same refusal with no warm-up in view stays the KV cache's (TGI issue #710's, development tgi_710)."""
    return f is not None and any(fr.func.rsplit(".", 1)[-1] in TGI_WARMUP for fr in f.frames)


def stopped_partway(progress: tuple[Stage, int, str, int, int]) -> bool:
    """Whether a counted phase line shows the phase partway: some of its steps done, not all. A count of 0 is the
    bar's first print (tqdm draws it when the phase begins: vLLM's ``Capturing CUDA graph shapes``, the weight
    loader's shards), so it says only that the phase began, as a phase line does (and a run that stops after a phase
    line is not read as a failure: a healthy excerpt stops there as often, and a line like ``# GPU blocks`` says its
    phase finished)."""
    return 0 < progress[3] < progress[4]


#: Frames that only raise a memory refusal (vLLM V0 ``worker.raise_if_cache_size_invalid``; V1
#: ``kv_cache_utils.check_enough_kv_cache_memory``, ``_check_enough_kv_cache_memory`` before it): a traceback through
#: one says the KV cache did not fit even where its error line is cut off.
REFUSAL_FRAMES = frozenset(("raise_if_cache_size_invalid", "check_enough_kv_cache_memory",
                            "_check_enough_kv_cache_memory"))  # fmt: skip


def silent_cut(frames: tuple[Frame, ...]) -> bool:
    """Whether a traceback the log stops inside, before its error line, says nothing of memory (False only where a
    frame in it raises nothing but a memory refusal, :data:`REFUSAL_FRAMES`: the cut is that refusal).

    A cut traceback's frames say where an exception was raised, never which: a load, a profiling pass or a request
    fails with a compile error, a collective's broken pipe, a bad argument or a device fault as well as with memory,
    and an excerpt cut before the error line cannot tell them apart. Three held-out rounds (issue 34 item 10: a
    vllm-fork load cut before its graph-compile failure, TGI's decode cut before an invalid argument, ipex-llm's
    ``init_device`` cut after oneCCL's broken pipe) read such a cut as an out-of-memory failure of its phase: a false
    alarm or a miss each time. A frame that merely runs where memory is measured (``profile_run``, ``warmup``) is
    where a guess would come from, not evidence."""
    return not any(f.func.rsplit(".", 1)[-1] in REFUSAL_FRAMES for f in frames)


#: How many lines after a traceback's last frame shown an elision line may come (its source and caret lines between).
_ELIDED_WITHIN = 3


def _scope_above_elision(f: Failure) -> bool:
    """Whether the frames would place the failure by a scope frame alone (one that encloses several phases, vLLM's
    ``from_engine_args``: load, profiling, the KV cache and capture all run inside it) because the excerpt left out the
    frames below it: an elision line (``...``) right after the last frame shown. The phase frames that would say which
    stage are in the lines left out, so the scope says nothing; a traceback shown whole, whose innermost phase frame is
    the scope, still counts."""
    hit = traceback_stage((fr.path, fr.func) for fr in f.frames)
    if hit is None:
        return False
    decider = f.frames[hit[1]]
    meaning = frame_meaning(decider.path, decider.func)
    if meaning is None or meaning.kind != "scope":
        return False
    return _elided_below(f)


def _elided_below(f: Failure) -> bool:
    """Whether the excerpt left out the frames below the last one shown: an elision line (``...``) right after it."""
    if not f.frames:
        return False
    last = f.frames[-1].line
    return any(0 < k - last <= _ELIDED_WITHIN and ELISION.fullmatch(strip_prefix(text).strip()) for k, text in f.window)


def _before_phase_line(f: Failure, hint: tuple[Stage, int] | None) -> tuple[Stage, int] | None:
    """The frames' word, weighed against the last phase line before the failure where the frames alone mislead:

    - frames that only run the model (``execute_model``, a forward; no phase frame) after the KV cache was sized: the
      cache exists, so the model ran for a graph (``_dummy_run``: capture and warm-up) or for requests, not to size
      the cache;
    - a serving frame (TGI's prefill span, a request's generate) while the last phase line says start-up or the
      warm-up is under way (loading; TGI's router "Warming up model") and nothing said it finished: the runtime's
      warm-up runs requests' code paths. The phase line's stage is the failure's.
    """
    ph = f.phase
    if ph is None:
        return hint
    if hint is None and ph[0] == "kv_cache":
        runs = [fr for fr in f.frames if fr.func.rsplit(".", 1)[-1] in MODEL_RUNS]
        if runs:
            graph = any(fr.func.rsplit(".", 1)[-1] in ("_dummy_run", "_dummy_sampler_run", *SHARED_RUNS) for fr in runs)
            return ("graph_capture" if graph else "runtime", runs[-1].line)
    if hint is not None and hint[0] == "runtime" and ph[0] in ("startup", "graph_capture"):
        return (ph[0], ph[1])
    return hint


def _profiled_encoder(f: Failure) -> tuple[Stage, int] | None:
    """Start-up's profiling run, where vLLM V1's engine core failed to start (:attr:`.scan.Failure.start_failed`) in
    its multimodal encoder (:func:`.phases.encoder_frame`) and no frame names a phase: of the passes the engine core's
    construction makes (load, ``profile_run``, the KV cache, capture and warm-up), only ``profile_run`` runs the encoder
    unless its graphs are asked for (vLLM 0.32 ``v1/worker/gpu_model_runner.py``, ``config/compilation.py``
    ``cudagraph_mm_encoder``). A phase line past start-up before the failure (the KV cache sized, capture begun) says
    profiling was done: then the frames decide nothing (gpustack/gpustack #4963, a vision tower's attention asking
    192 GiB under "EngineCore failed to start")."""
    if not f.start_failed or (f.phase is not None and f.phase[0] != "startup"):
        return None
    at = next((fr.line for fr in f.frames if encoder_frame(fr.path, fr.func)), None)
    return None if at is None else ("startup", at)


def _working_while_starting(f: Failure) -> bool:
    """Whether the failure's words that it failed working over an input (:func:`.phases.failed_working`, no work item
    named by its id) come while the last phase line before it says start-up or the warm-up is under way: as with a
    serving frame there (:func:`_before_phase_line`), the phase line is the failure's. exo loads a shard's weights on
    its first tensor and reports a failure in either as "Error processing tensor for shard ..." (exo-explore/exo #140:
    under tinygrad's weight bar at 85%, start-up; #101: after "loaded weights in 4041.00 ms", serving). Only a
    counted phase line partway (``249/292``) says the phase is still under way: a line that merely opened it
    ("loading in lowvram mode", Fooocus #700, then "Ran out of memory when regular VAE decoding") says nothing of it
    still running."""
    if f.phase is None or f.phase[0] not in ("startup", "graph_capture") or WORK_ITEM.search(f.text):
        return False
    return any(int(i) < int(n) for i, n in _COUNT.findall(f.phase[2]))


#: A counted phase line's count: ``249/292``. Not a part of a date (``11/30/2026``, ``2026/11/30``): a slash or a
#: digit on either side makes it one.
_COUNT = re.compile(r"(?<![\d/])(\d+)/(\d+)(?![\d/])")


def _source(source: Source, f: Failure, hint: tuple[Stage, int] | None, rules: Rules,
            writer: LogSource) -> tuple[Stage, int] | None:  # fmt: skip
    if source == "frames":
        return hint
    if source == "message":
        if f.message_stage is None or (f.message_kind == "load" and _load_runs_everything(writer)):
            # no runtime's own wording: the work item the failure's line names, in any program, or the step of an
            # app's pipeline it reports failed after it, or its report (on the failure's line or after it) that it
            # could not run the model on its input (AHEAD lines)
            item = work_item_stage(f.text) or short_for_stage(f.text)
            if item == "runtime" and _working_while_starting(f):
                item = None
            if item is not None:
                return item, f.line
            for k, text in f.window:
                if k > f.line and (step := pipeline_step_stage(text)) is not None:
                    return step, k
                if k >= f.line and (ran := run_refused_stage(text)) is not None:
                    return ran, k  # the failure, or the runtime's report after it, says a run over an input failed
                if k >= f.line and MODEL_COMPILE_FAILED.search(text):
                    return "startup", k  # the failure, or the runtime's report of it, says the model's build failed
            return _answered_error(f)
        return f.message_stage, f.message_line if f.message_line >= 0 else f.line
    if source == "phase":
        if f.phase is None:
            return _summarised_phase(f)
        # lines left out after the phase line: the failure came in that phase or a later one (the last stage alone
        # is then still known), unless the line opened a load that nothing showed finished (_LOAD_OPENED)
        if f.phase_gap and f.phase[0] != BASE_STAGES[-1] and not _LOAD_OPENED.search(f.phase[2]):
            return None
        # an unknown program's frames that name running work (OpenNMT's translate_batch under its "Loading model
        # parameters.", held-out round 207) show the load above them over; frames the labelled logs voted on are
        # read where the rules' order puts them
        if f.phase[0] == "startup" and _voted(f.frames, rules) is None:
            named = named_stage(((fr.path, fr.func) for fr in f.frames), elided=_elided_below(f))
            if named is not None and named[0] == "runtime":
                return named[0], f.frames[named[1]].line
        return f.phase[0], f.phase[1]
    voted = _voted(f.frames, rules)
    if voted is not None:
        return voted, f.line
    # no vote: the words of the frames' names, in any program (:func:`.phases.named_stage`)
    named = named_stage(((fr.path, fr.func) for fr in f.frames), elided=_elided_below(f))
    if named is not None:
        return named[0], f.frames[named[1]].line
    # no frame's name says: a source line that reads the past keys or values says a sequence was decoding
    past = past_read_at((fr.path, fr.text) for fr in f.frames)
    if past is not None:
        return "runtime", f.frames[past].line
    # nor does a source line: the name of the logger that wrote the failure's line, read the same way
    logged = logger_stage(f.text)
    return None if logged is None else (logged, f.line)


#: How many lines after the failure a web server's record of the request it failed may come: right after the error
#: line (a blank line, the message's wrapped end or a logger's one-line report of it between).
_ANSWERED_WITHIN = 3


def _answered_error(f: Failure) -> tuple[Stage, int] | None:
    """The failure's request, where a web server's record of a request it answered with a server error comes right
    after the failure (:func:`.phases.answered_error_stage`), and no load's failure was reported
    (:attr:`.scan.Failure.message_kind`, or in those lines): the failure was that request's. The record's line."""
    if f.message_kind == "load":
        return None
    return answered_error_stage((k, text) for k, text in f.window if f.line <= k <= f.line + _ANSWERED_WITHIN)


#: How many lines after the failure Ray's summary of a phase line may come (the failure's own record, its allocator's
#: lines, then the summaries of the window it closed).
_SUMMARY_WITHIN = 5


#: A phase line that opens a model's load and says nothing of its end ("Loading vicuna-13b-GPTQ-4bit-128g..."), not one
#: that reports it done ("Loading model weights took 19.9 GB") or a later phase. An excerpt that leaves lines out after
#: it and then shows the failure, with no later phase's line, is read by its poster and its readers as failing to load
#: (text-generation-webui #943: the load line, "...", the out-of-memory error; both labellers said start-up): what an
#: excerpt cuts from a load is its progress. After a line that reports a phase done, the lines left out may hold any
#: later phase.
_LOAD_OPENED = re.compile(r"^(?!.*\b(?:took|loaded|done|finished|complete[d]?|in \d)).*\bloading\b", re.IGNORECASE)


def _summarised_phase(f: Failure) -> tuple[Stage, int] | None:
    """The phase Ray's summary lines right after the failure name, where no phase line came before it: a line tagged
    ``[repeated Nx across cluster]`` (:data:`~vllm_hpu_mm.logs.patterns.RAY_REPEATED`) stands for copies the other
    workers printed before the tag shows, while they ran the phase with the one that failed (QwenLM/Qwen #819:
    vLLM's Ray workers' "Capturing the model for CUDA graphs. ... [repeated 7x across cluster]" right after "CUDA error:
    out of memory"). The furthest phase they name; None where none does. A summary can come long after its copies
    (vllm-ascend's Ray workers' "Starting to load model ... [repeated 14x across cluster]" stamped half an hour before
    the line above it): it says the workers had entered the phase, so it is read only where the excerpt shows no phase
    line before the failure."""
    found: tuple[Stage, int] | None = None
    for k, text in f.window:
        if f.line < k <= f.line + _SUMMARY_WITHIN and RAY_REPEATED.search(text):
            stage = marker_stage(text)
            if stage is not None and (found is None or BASE_STAGES.index(stage) >= BASE_STAGES.index(found[0])):
                found = stage, k
    return found


def _load_runs_everything(writer: LogSource) -> bool:
    """Whether a failed model load says nothing of the stage for this writer: vLLM builds its engine, profiles,
    allocates the KV cache and captures graphs all inside the host's load (Triton's vLLM backend initialises the engine
    in ``initialize``); a host that starts a named engine may run the engine's whole start-up in its load. A load that
    failed in a log naming no engine is the model's load as far as the log tells (mudler/LocalAI #2126: the load an
    embeddings request set off)."""
    return writer.framework == "vllm" or writer.name in HOST_NAMES


def decide(features: LogFeatures, rules: Rules) -> Diagnosis:
    """The verdict on ``features`` under ``rules``, with its evidence quoted (no recommendations: :mod:`.advice`
    adds those)."""
    j = judge(features, rules)
    run = features.run
    f = run.failure
    # every text read for a line: an over-long line is read in overlapping windows that share its number
    texts: dict[int, list[str]] = {}

    def put(k: int, text: str) -> None:
        texts.setdefault(k, []).append(text)

    for item in (run.gaudi, run.warmup, run.kv, run.phase and run.phase[1:], run.progress and run.progress[1:3]):
        if item is not None:
            put(item[0], item[1])  # type: ignore[index]
    if run.error is not None:
        put(*run.error)
    # the lines that state the failure: an over-long one is quoted around the failure's words, any other line (a
    # phase's, a traceback's frame) from its head, where what it was read for is
    failing: dict[int, tuple[re.Pattern[str], ...]] = {}
    if run.error is not None:
        failing[run.error[0]] = ERROR_FOCUS
    for item in (*(f.window if f is not None else ()), run.kv):
        if item is not None:
            failing[item[0]] = _FOCUS
    for tb in (run.open_traceback,):
        if tb is not None:
            for fr in tb.frames:
                put(fr.line, fr.text)
    if f is not None:
        for k, text in f.window:
            put(k, text)
        for item in (f.warmup, f.phase and f.phase[1:]):
            if item is not None:
                put(item[0], item[1])  # type: ignore[index]
    error_lines: tuple[int, ...] = ()
    if j.basis == "error" and run.error is not None and run.error[0] in j.lines:
        # the error's message quoted to the line that closes it ("Graph compile failed. synStatus=..." after the
        # exception line of a Habana bridge error): that line says what failed
        error_lines = (run.error[0],)
        if run.error_end is not None:
            put(*run.error_end)
            failing[run.error_end[0]] = ERROR_FOCUS
            error_lines += (run.error_end[0],)
    picked = sorted(k for k in {*j.lines, *error_lines} if k >= 0 and texts.get(k, [""])[-1])
    return Diagnosis(
        stage=j.stage,
        evidence=tuple(Evidence(k + 1, _quote(texts[k], failing.get(k))) for k in picked),
        recommendations=(),
        gaudi_memory=run.gaudi[2] if run.gaudi else None,
        warmup=j.warmup,
        model=features.model,
        memory=j.memory,
        basis=j.basis,
        confidence=CONFIDENCE[j.basis],
        backend=features.backend,
        kv_fit=run.kv_fit,
        run=features.run_index,
        runs=features.runs,
        skipped=features.skipped,
        source=features.source,
        cut=j.cut,
        error_lines=tuple(k + 1 for k in error_lines if k in picked),
    )


def _focus(text: str, focus: tuple[re.Pattern[str], ...] = _FOCUS) -> tuple[int, int] | None:
    """Which of the words ``focus`` lists (by its place there) ``text`` holds first, and where."""
    for kind, pattern in enumerate(focus):
        if (m := pattern.search(text)) is not None:
            return kind, m.start()
    return None


def _quote(texts: list[str], focus: tuple[re.Pattern[str], ...] | None) -> str:
    """The evidence of a line read as ``texts`` (the last one read): a line that states the failure (``focus``: the
    words it is quoted around) and is over-long is quoted from the window that shows the most of those words (a
    message cut at one window's end lies whole in the next), around them; any other from its head."""
    last = texts[-1]
    if len(last) <= _CLIP:
        return last
    if focus is None:
        return last[: _CLIP - 3] + "..."
    ranked = [((f[0], f[1] - len(t)), t) for t in texts if (f := _focus(t, focus)) is not None]
    return clip(min(ranked, key=lambda r: r[0])[1] if ranked else last, focus=focus)


def clip(text: str, cap: int = _CLIP, focus: tuple[re.Pattern[str], ...] = _FOCUS) -> str:
    """``text`` quoted in at most ``cap`` characters: a longer line is quoted around the failure's words
    (``focus``), not only from its head (a JSON record whose message comes after kilobytes of context), with "..."
    where text was cut."""
    if len(text) <= cap:
        return text
    at = (_focus(text, focus) or (0, 0))[1]
    lead = cap // 4  # what led up to the words (the record's message starting before them)
    if at + lead < cap - 3:  # the words are in the head: quote it
        return text[: cap - 3] + "..."
    start = min(at - lead, len(text) - (cap - 3))
    if start + cap - 3 >= len(text):
        return "..." + text[start:]
    return "..." + text[start : start + cap - 6] + "..."
