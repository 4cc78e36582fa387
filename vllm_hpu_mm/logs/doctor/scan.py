"""One pass over a log, keeping only what a verdict needs, so memory stays bounded however long the log is.

The pass splits the log into runs (a server started again in the same log: its banner after the previous run failed,
finished starting or died) and keeps, for the latest run that shows a failure, what :mod:`.decide` reads:

- the first out-of-memory line (device or host) with the traceback around it and the frames it names; where the run
  shows none, a refusal of pinned host memory the runtime fell back from, if nothing after it says the load finished
  or serving began;
- vLLM's or TGI's KV-cache refusal;
- the last phase line before the failure (weights loaded, KV cache sized, capture started, serving);
- an error of another kind the run shows: a traceback's message printed without its class, a failed check, a
  collective's failure or a device fault stated right above a traceback, an exception's message or a device fault a
  logger printed on the line that opens its traceback, an error stated a few lines above a traceback (shown with its
  header or without) with only announcements of a failure between, an exception line that closed the traceback the
  run then prints again, cut, or the cause a cut traceback is chained to;
- a traceback the log stops inside (no exception line after its frames), and a counted phase it stops inside
  (``[Warmup][..][i/n]`` with i < n, the CUDA-graph bar, weight shards: alone, no evidence of a failure);
- the Gaudi memory split, the warm-up line, the model, the runtime.

Each kept part is a bounded window (:data:`BACK` lines before the failure, :data:`AHEAD` after, at most
:data:`MAX_FRAMES` frames of an open traceback) of lines of at most ``reading.MAX_LINE_CHARS`` characters.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from typing import Literal

from vllm_hpu_mm.logs.doctor.phases import (
    ANSWERED_ERROR,
    announced_stage,
    encoder_frame,
    listed_item_stage,
    tf_node_stage,
    vm_frame_stage,
)
from vllm_hpu_mm.logs.doctor.source import LogSource, SourceSniffer
from vllm_hpu_mm.logs.numbers import GarbledNumber, SkippedLines, integer, number
from vllm_hpu_mm.logs.patterns import (
    ALLOCATOR_BOOKKEEPING,
    ARENA_OVERFLOW,
    BACKEND_ALLOC,
    BARE_KILL,
    CALL,
    CATCH_ALL_OOM,
    COMM_FAILURE,
    COMMAND_LINE,
    CRASHED,
    DECODE_RESERVE,
    DEVICE_OOM,
    ELISION,
    ENGINE_START_FAILED,
    ERROR_MESSAGE,
    EXCEPTION_LINE,
    EXCEPTION_NAMED,
    FAILED_CHECK,
    FAILURE_MARK,
    FATAL_SHUTDOWN,
    FIGURE_HAVE,
    FIGURE_MEMORY,
    FIGURE_NOT_MEMORY,
    FIGURE_TOTAL,
    FIGURE_WHOSE,
    FRAME_HEAD,
    GAUDI_GRAPH_RESERVE,
    GAUDI_KV_DUMMY,
    GAUDI_MEMORY,
    GLOG_INFO_HEAD,
    GOES_ON,
    HOST_BUFFER,
    HOST_OOM,
    HOST_RESOURCE,
    HYPOTHESIS_LINE,
    INFO_LEVEL,
    KV_BUFFER_STATEMENT,
    KV_BUFFER_SUMMARY,
    KV_CREATING,
    KV_ESTIMATE,
    KV_REFUSAL,
    KV_RETRY,
    KV_TOKENS,
    KV_WORDS,
    LINE_PREFIX,
    LLAMA_SUMMARY,
    LOAD_FAILED,
    LOAD_FINISHED,
    LOAD_REPORT,
    LOADER_BUFFER_SUMMARY,
    MEDIA_ENCODING,
    MEMORY_FIGURE,
    MEMORY_REFUSED,
    MEMORY_REFUSED_WORDS,
    MESSAGE_STAGES,
    METHOD,
    MODEL,
    NATIVE_SERVING,
    NATIVE_STARTUP,
    NEGATIVE_KV,
    NO_EXHAUSTION,
    NOT_IMPLEMENTED,
    OWN_STOP,
    PHASE_MARKERS,
    PINNED_FALLBACK,
    POST_MARKUP,
    PROCESS_DEATH,
    PROCESS_NAME,
    PROGRESS,
    PYTHON_ERROR_TEXT,
    REFUSES_WORK,
    RESERVE_FAILED,
    ROOT_ERRORS,
    RUN_START,
    TRACEBACK_START,
    WARMUP,
    RuntimeSniffer,
    dumped_frames,
    frames_in,
    own_words,
    short_of_memory,
    size_bytes,
    strip_prefix,
    unechoed,
)
from vllm_hpu_mm.values import GIB, Stage

__all__ = ["AHEAD", "BACK", "DEVICE_FAULT", "MAX_FRAMES", "Failure", "Frame", "GaudiMemory", "LogFeatures", "Memory",
           "MessageKind", "OpenTraceback", "RunFeatures", "Scanner", "marker_stage", "refused_memory",
           "scan"]  # fmt: skip

#: Which memory ran out.
Memory = Literal["device", "host"]
#: What an error message placed by the phase lines before it says (:data:`~vllm_hpu_mm.logs.patterns.RESERVE_FAILED`,
#: :data:`~vllm_hpu_mm.logs.patterns.LOAD_FAILED`).
MessageKind = Literal["reserve", "load"]
#: How far back a traceback may start, and how far after the error line frames may follow (several workers print
#: their tracebacks after one another; some tools print the error first).
BACK, AHEAD = 200, 40
#: Frames kept of a traceback the log may stop inside (the innermost ones matter).
MAX_FRAMES = 64
#: Non-frame lines tolerated inside a traceback (a long frame line wrapped by a terminal or an issue tracker).
MAX_GAP = 2
#: How many KV-cache retries in a row, with nothing else between, read as the server failing to fit a batch where the
#: excerpt stops inside them (:meth:`Scanner._kv_retries`): one retry with a halved batch is routine.
KV_RETRIES = 2
_PHASES_LAST_FIRST = tuple(reversed(PHASE_MARKERS))


def marker_stage(text: str) -> Stage | None:
    """The stage of the phase line ``text`` (:data:`~vllm_hpu_mm.logs.patterns.PHASE_MARKERS`, the later stage where
    it names two; a generator's hypothesis, :data:`~vllm_hpu_mm.logs.patterns.HYPOTHESIS_LINE`, is serving), or
    None."""
    low = text.lower()
    if "\\" in low:
        low = low.replace("\\", "/")  # a Windows build names its source files with backslashes (OpenVINO's)
    for stage, words in _PHASES_LAST_FIRST:
        if any(map(low.__contains__, words)):  # map: no generator frame per marker (every line is checked)
            return stage
    if text.startswith("H") and HYPOTHESIS_LINE.match(text):
        return "runtime"  # a translated sentence's hypothesis: the model serves
    return None


#: An exception line whose class does not end in Error or Exception, as Python prints it (``module.Class: message``):
#: ``torch._dynamo.exc.BackendCompilerFailed: ...``, ``ray.exceptions.RayTaskError(...)``. It ends the traceback, so
#: a failure of another kind (a compile error while vLLM profiles memory) is not read as a process killed there.
RAISED = re.compile(r"(?:[A-Za-z_]\w*\.)+[A-Z]\w*(?:[:(]|\s*$)")
#: Workers whose out-of-memory lines are told apart (tensor parallelism of 64 ranks at most).
MAX_WORKERS = 64
#: A worker's tag: vLLM's process tag, torch's rank prefix, Ray's actor prefix.
WORKER_TAG = re.compile(r"pid=\d+|\[rank\d+\]|\[Rank:\d+\]|\brank=\d+")
#: How far before a bare kill the program's own fatal shutdown may be announced (its workers' last warnings, a
#: resource tracker's, come between).
SHUTDOWN_BACK = 8
#: How many lines after a model load's report the figures it lists may come (an error body, one key a line).
REPORT_LINES = 30
#: Less than this share of a memory left, as a report's figures give it, is that memory gone.
EXHAUSTED_SHARE = 0.01
#: Substrings one of which every :data:`~vllm_hpu_mm.logs.patterns.RUN_START` line holds (a cheap first check).
_RUN_WORDS = ("server version", "  version ", "LLM engine", "Args {", "non-default args")
#: The order in which one start prints its :data:`~vllm_hpu_mm.logs.patterns.RUN_START` lines.
_START_ORDER = {"server": 0, "args": 1, "engine": 2}
#: Substrings one of which an :data:`~vllm_hpu_mm.logs.patterns.ELISION` line holds (a cheap first check; a mark
#: written in capitals is missed).
_ELISION_WORDS = ("...", "…", "snip", "runcat", "mitted", "kipped")


@dataclasses.dataclass(frozen=True)
class Frame:
    line: int  # 0-based line of the log
    path: str
    func: str
    text: str = ""  # the line it is on


@dataclasses.dataclass(frozen=True)
class GaudiMemory:
    free_gib: float
    usable_gib: float
    gpu_memory_utilization: float
    graph_gib: float
    graph_reserved_mem: float
    kv_gib: float


def _gaudi_memory(text: str) -> GaudiMemory | None:
    """The Gaudi runtimes' memory split line, in both spellings: the fork's and early vllm-gaudi's (every share in
    GiB, the KV cache whole), and vllm-gaudi V1's (hpu_worker.py @091bbadd: format_bytes' own unit, the KV share as
    one dummy block and the usable rest, which together are the KV cache)."""
    if (g := GAUDI_MEMORY.search(text)) is None:
        return None
    head = number(g["free"]), number(g["usable"]), number(g["util"])
    if g["graph"] is not None:
        return GaudiMemory(*head, number(g["graph"]), number(g["reserved"]), number(g["kv"]))
    reserve, kv = GAUDI_GRAPH_RESERVE.search(text), GAUDI_KV_DUMMY.search(text)
    if reserve is None or kv is None:
        return None
    kv_gib = (size_bytes(kv) + size_bytes(kv, "d")) / GIB
    return GaudiMemory(*head, round(size_bytes(reserve) / GIB, 2), number(reserve["reserved"]), round(kv_gib, 2))


@dataclasses.dataclass(frozen=True)
class Failure:
    """The first out-of-memory line of a run, with its traceback window and what it names."""

    line: int
    text: str
    memory: Memory
    frames: tuple[Frame, ...]
    #: The stage the error message itself names (:data:`~vllm_hpu_mm.logs.patterns.MESSAGE_STAGES`).
    message_stage: Stage | None
    #: The last phase line before the failure: (stage, line, text).
    phase: tuple[Stage, int, str] | None
    warmup: tuple[int, str, tuple[str, int, int]] | None
    window: tuple[tuple[int, str], ...]
    #: Which placed message :attr:`message_stage` comes from (None: one that names its phase itself).
    message_kind: MessageKind | None = None
    #: The line that named :attr:`message_stage` (-1: none).
    message_line: int = -1
    #: Whether the excerpt left lines out (an elision line) between :attr:`phase` and the failure: the phase line is
    #: then only the earliest the failure can be, not the last phase before it.
    phase_gap: bool = False
    #: Whether vLLM V1 reports, in the lines that open the failure's traceback or in its window, that its engine core
    #: failed to start (:data:`~vllm_hpu_mm.logs.patterns.ENGINE_START_FAILED`): the failure came while the engine core
    #: was built, before it served.
    start_failed: bool = False


@dataclasses.dataclass(frozen=True)
class OpenTraceback:
    """A traceback no exception line closed before the run ended."""

    frames: tuple[Frame, ...]
    last: int  # its last line


@dataclasses.dataclass(frozen=True)
class RunFeatures:
    """What a verdict reads of one run (rule-independent: :func:`.decide.decide` weighs it)."""

    failure: Failure | None
    kv: tuple[int, str] | None
    open_traceback: OpenTraceback | None
    progress: tuple[Stage, int, str, int, int] | None  # (stage, line, text, i, n): the last counted phase line
    phase: tuple[Stage, int, str] | None  # the last phase line of the run
    warmup: tuple[int, str, tuple[str, int, int]] | None
    completed_at: int  # last line that says start-up finished or serving goes on (-1: none)
    end: int  # last non-empty line of the run
    gaudi: tuple[int, str, GaudiMemory] | None
    kv_fit: tuple[int, int] | None
    #: The most device out-of-memory failures one worker printed with a line of the program's other work between each
    #: and the next (a process that fails again and again and goes on between survived its failures: it was serving).
    #: The same failure reported again with nothing else between counts once (:meth:`Scanner._count_failure`).
    repeated: int = 0
    #: The first error line of another kind that closed a traceback without an exception class (vLLM's logger prints
    #: some errors as their message alone) or stated, on the line that opens a traceback or a few lines above it, what
    #: it raised (:func:`_stated_error`): (line, text). The traceback then ended in an error, not a cut.
    error: tuple[int, str] | None = None
    #: Where the error's message goes on over more lines of the same logger record after its exception line (a
    #: Habana bridge error closed by "Graph compile failed. synStatus=..."), the last of them: (line, text).
    error_end: tuple[int, str] | None = None

    @property
    def shows_failure(self) -> bool:
        """Anything a verdict could call a failure: an OOM line, a KV refusal, a traceback cut (a run that stops
        partway through a counted phase with nothing else shows none: :func:`.decide.judge`, step 4)."""
        return self.failure is not None or self.kv is not None or self.open_traceback is not None


@dataclasses.dataclass(frozen=True)
class LogFeatures:
    run: RunFeatures  # the run the verdict is about
    run_index: int  # 1-based
    runs: int
    model: str | None
    backend: str | None
    #: Lines left out because a figure in them is garbled (interleaved output of several processes).
    skipped: SkippedLines = dataclasses.field(default_factory=SkippedLines, compare=False)
    #: What wrote the log (framework, accelerator, our runtime, a vision model, other processes' memory).
    source: LogSource = dataclasses.field(default_factory=LogSource)


#: Substrings one of which every frame line or the line a frame's source continues on holds (a cheap first check):
#: Python's ``File "..."``, a notebook's ``---->`` arrow. A frame written bare is screened by :data:`_BARE_FRAME`.
_FRAME_WORDS = ("File", "-->")
#: A frame written bare (``<path>.py:<line>, in <func>``): vLLM's own record prefix ``[engine.py:123]`` also holds
#: ``.py:``, so that substring alone would send every line of a vLLM log through the frame reader.
_BARE_FRAME = re.compile(r"\.py:\d+,? in ")


#: The first half of a frame line a terminal wrapped at a word (rich's console inside docker: the line ends with
#: "File", the next one opens with the quoted path, a compose service's ``<service>  | `` prefix before both:
#: TabbyAPI's traceback in theroyallab/tabbyAPI #304), and either half as a traceback's line.
_WRAPPED_HEAD = r"(?:^|\s)File$"
WRAPPED_HEAD = re.compile(_WRAPPED_HEAD)
WRAPPED_FRAME = re.compile(_WRAPPED_HEAD + r'|^"[^"\s]+", line \d+, in\b')


#: The arrow IPython draws at a frame's current line, its length padded to the line numbers (``---->  5 model = ...``).
_ARROW = re.compile(r"-{2,}>")


class _FrameReader:
    """The frames of consecutive lines: frame lines (a frame line a terminal wrapped is joined with the next line),
    and the calls of the source line under a frame (they name the next frame, which a cut traceback lacks)."""

    def __init__(self) -> None:
        self.partial: str | None = None
        self.after_frame = False

    def read(self, k: int, text: str) -> list[Frame]:
        if (
            self.partial is None
            and not self.after_frame
            and not any(map(text.__contains__, _FRAME_WORDS))
            and not (".py:" in text and _BARE_FRAME.search(text))
        ):
            return []  # most lines of a log: no frame and no source line of one
        found = frames_in(text)
        if not found and self.partial is not None:
            found = frames_in(self.partial + strip_prefix(text).lstrip())
        self.partial = None
        head = text.rfind(FRAME_HEAD)
        if head >= 0 and not frames_in(text[head:]):
            self.partial = text[head : head + 1024]
        elif WRAPPED_HEAD.search(text.rstrip()):
            self.partial = "File "  # wrapped after the word: the path and the function come on the next line
        if found:
            self.after_frame = True
            return [Frame(k, path, func, text) for path, func in found]
        body = strip_prefix(text)
        stripped = body.strip()
        if _ARROW.match(stripped) or (self.after_frame and body[:1].isspace() and stripped[:1] not in "^~"):
            self.after_frame = False
            return [Frame(k, "", name, text) for name in CALL.findall(stripped)]
        if stripped[:1] not in ("^", "~", ""):
            self.after_frame = False
        return []


class _Traceback:
    """The traceback being read: its frames (the innermost :data:`MAX_FRAMES`) and whether it ended."""

    def __init__(self, start: int, explained: bool = False) -> None:
        self.frames: deque[Frame] = deque(maxlen=MAX_FRAMES)
        self.last = start
        self.closed = False  # an exception line ended it
        self.explained = explained  # an error message right before it said what failed
        self.prefix = ""  # the log prefix of its last line (one logger record prints every line with the same one)
        self.message_at = -1  # the line of a message without a class that closed it (-1: none)


#: A failure line held until the lines after it are read: (line, text, memory, lines before, phase and warm-up line
#: then, whether lines were elided since that phase line).
_Held = tuple[int, str, Memory, list[tuple[int, str]], tuple[Stage, int, str] | None,
              tuple[int, str, tuple[str, int, int]] | None, bool]  # fmt: skip


class _Run:
    def __init__(self) -> None:
        self.failure: Failure | None = None
        #: A failure waiting for its AHEAD lines (:meth:`Scanner._held`).
        self.pending: _Held | None = None
        self.after: list[tuple[int, str]] = []
        #: A refusal of memory printed without a failure mark, held as :attr:`pending` would hold it: the failure only
        #: if the next line states one (:meth:`Scanner._unmarked_refusal`).
        self.unmarked: _Held | None = None
        #: The last such refusal, kept after the lines that follow it (:meth:`Scanner._ended_on_refusal`).
        self.refused: _Held | None = None
        self.kv: tuple[int, str] | None = None
        #: The run's first line that its process crashed (:data:`~vllm_hpu_mm.logs.patterns.CRASHED`), no memory words
        #: in it: a failure of another kind that a traceback cut after it is the consequence of.
        self.crashed: tuple[int, str] | None = None
        self.kv_fit: tuple[int, int] | None = None
        self.gaudi: tuple[int, str, GaudiMemory] | None = None
        self.phase: tuple[Stage, int, str] | None = None
        self.warmup: tuple[int, str, tuple[str, int, int]] | None = None
        self.progress: tuple[Stage, int, str, int, int] | None = None
        self.completed_at = -1
        self.end = -1
        self.tb: _Traceback | None = None
        self.reader = _FrameReader()
        self.method: Frame | None = None  # the worker method named just before a traceback
        #: Device out-of-memory failures by the worker that printed them (its tag; at most MAX_WORKERS tags), and the
        #: line of each worker's last out-of-memory line.
        self.ooms: Counter[str] = Counter()
        self.failed_at: dict[str, int] = {}
        #: The last device out-of-memory line of any worker, and the first line of the program's other work after it
        #: (:func:`_goes_on`; -1: none).
        self.last_oom = -1
        self.went_on_at = -1
        self.error: tuple[int, str] | None = None
        #: The last traceback an exception line of another kind than memory closed: (that line, its text, the names
        #: of its frames).
        self.raised: tuple[int, str, frozenset[str]] | None = None
        #: The message of the last line that closed a traceback, over the lines of its logger record that go on with
        #: it: (its first line, its last line, that line's text).
        self.message: tuple[int, int, str] | None = None
        self.elided = -1  # the last elision line
        #: A model load's report, until the figures it lists say why it failed (:meth:`Scanner._load_report`), the
        #: figures read so far ([left, total] bytes by which memory), and the report whose figures made the pending
        #: failure (the record that failure belongs to).
        self.report: tuple[int, str] | None = None
        self.figures: dict[frozenset[str], list[int | None]] = {}
        self.reported: tuple[int, str] | None = None
        #: A refusal of pinned host memory the runtime fell back from
        #: (:data:`~vllm_hpu_mm.logs.patterns.PINNED_FALLBACK`), held as :attr:`pending` would hold it, with the lines
        #: after it: the run's failure only if nothing after it says the load finished or serving began, or states a
        #: failure of another kind (:meth:`Scanner._fallback_failed`); and the last line that said so (-1: none).
        self.fallback: _Held | None = None
        self.fallback_after: list[tuple[int, str]] = []
        self.went_on = -1
        #: llama.cpp's server retrying a batch the KV cache has no room for
        #: (:data:`~vllm_hpu_mm.logs.patterns.KV_RETRY`): the first retry, held as :attr:`pending` would hold it, and
        #: how many came; None once a line of other work follows (:meth:`Scanner._kv_retries`).
        self.retry: _Held | None = None
        self.retries = 0
        #: The start lines the run printed: their place in a start's order, and the process that printed each (an
        #: engine core of another data-parallel rank may print its own configuration line).
        self.starts: set[tuple[int, str]] = set()

    @property
    def has_begun(self) -> bool:
        """Whether the run got far enough that a new banner starts another run, not a second line of this one."""
        return (
            self.pending is not None
            or self.failure is not None
            or self.kv is not None
            or self.completed_at >= 0
            or self.progress is not None
            or (self.tb is not None and not self.tb.closed and not self.tb.explained)
        )


class Scanner:
    """Feed lines in order with :meth:`feed` (segments of one long line share its number), then :meth:`result`."""

    def __init__(self) -> None:
        self.n = 0
        self.recent: deque[tuple[int, str]] = deque(maxlen=BACK)
        self.run = _Run()
        self.runs = 1
        self.kept: tuple[int, RunFeatures] | None = None  # the latest earlier run that shows a failure
        self.model: str | None = None
        self.backend = RuntimeSniffer()
        self.skipped = SkippedLines()
        self.source = SourceSniffer()
        self.echoed = -1  # the last line that echoes a request (:func:`unechoed`)

    def feed(self, text: str, line: int | None = None) -> None:
        k = self.n if line is None else line - 1
        if "<" in text and POST_MARKUP.search(text):
            text = POST_MARKUP.sub("", text)
        self.n = k + 1
        # A request's text echoed by the runtime is the user's (or the model's answer), no evidence of what the
        # runtime did: only the writer's traits are read from it (a prompt's image placeholders are its chat template's)
        written = text
        if line is not None and k == self.echoed:  # a later window of an over-long line that echoes a request
            self.source.feed(written)
            return
        if (own := unechoed(text)) is not None:
            self.echoed, text = k, own
        # what the program itself said: a value the user supplied (a model's path, a served name, an argument's quoted
        # value) says no start, phase or failure ("/mnt/oom-repro/...", served_model_name 'qwen-OutOfMemoryError')
        said = own_words(text)
        # a line opening with "#" is a note about the log (a collector's header quoting its lines), not a start
        if any(w in said for w in _RUN_WORDS) and (start := RUN_START.search(said)) and text[:1] != "#":
            self._start_line(k, text, start)
        run = self.run
        if text.strip():
            run.end = k
        self._collect_after(run, k, text)
        self.recent.append((k, text))
        self.backend.feed(text)
        self.source.feed(written)
        if self.model is None and "model='" in text and (m := MODEL.search(text)):
            self.model = m["model"]
        try:
            self._memory_lines(run, k, text)
            self._phase_lines(run, k, text, said)
        except GarbledNumber as exc:
            self.skipped.add(k + 1, text, exc)
        self._traceback_lines(run, k, text)
        kind = _oom_kind(said)
        if kind is None and (joined := self._continued(text)) is not None:
            kind, text = "device", joined
        if kind == "host" and self._shutdown_kill(text):
            kind = None
        if kind is None and ("unable to allocate" in text or "failed to allocate buffer" in text):
            kind = _llama_summary(text)
        if kind == "device":
            self._count_failure(run, k, text)
        elif kind is None and run.went_on_at < run.last_oom and _goes_on(text):
            run.went_on_at = k
        mark = len(text) <= 64 and any(map(text.__contains__, _ELISION_WORDS))
        in_traceback = run.tb is not None and not run.tb.closed and bool(run.tb.frames)
        if mark and ELISION.fullmatch(strip_prefix(text).strip()) and not in_traceback:
            # (an elision among a traceback's frames leaves out frames, not the log's lines: no phase line can be in
            # it; vllm-project/vllm #9367's "Starting profile run ...", then a traceback cut short with "...")
            run.elided = k
        if run.failure is None and run.pending is None:
            self._unmarked_refusal(run, k, text, said, kind)
        if run.failure is None and run.pending is None and kind is None:
            self._load_report(run, k, text)
        if run.failure is None and run.pending is None and kind is not None:
            run.pending = self._held(run, k, text, kind)
        self._pinned_fallback(run, k, text, kind)
        self._kv_retries(run, k, text, kind)

    def _kv_retries(self, run: _Run, k: int, text: str, kind: Memory | None) -> None:
        """Follow llama.cpp's server retrying, each time with a smaller batch, a batch of requests the KV cache has no
        room for (:data:`~vllm_hpu_mm.logs.patterns.KV_RETRY`): the retries and the failures each reports
        ("llama_decode: failed to decode, ret = 1", "init_batch: failed to prepare attention ubatches") are one
        struggle; any other line says the server got past it (a smaller batch fit), and the retries are forgotten."""
        if kind is not None or run.failure is not None or run.pending is not None or not text.strip():
            return
        if "retrying with smaller" in text and KV_RETRY.search(text):
            run.retries += 1
            if run.retry is None:
                run.retry = self._held(run, k, text, "device")
        elif (
            run.retry is not None
            and not FAILURE_MARK.search(text)
            and not ELISION.fullmatch(strip_prefix(text).strip())
        ):
            run.retry, run.retries = None, 0

    def _pinned_fallback(self, run: _Run, k: int, text: str, kind: Memory | None) -> None:
        """Hold the first refusal of pinned host memory the runtime fell back from
        (:data:`~vllm_hpu_mm.logs.patterns.PINNED_FALLBACK`) while the run shows no failure, and note each later line
        that says the load finished (:data:`~vllm_hpu_mm.logs.patterns.LOAD_FINISHED`; a phase line of a later stage is
        noted by :meth:`_phase_lines`)."""
        if run.fallback is None:
            unfailed = kind is None and run.failure is None and run.pending is None
            if unfailed and "emory" in text and PINNED_FALLBACK.search(text):
                run.fallback = self._held(run, k, text, "host")
        elif ("oaded" in text or "[GIN]" in text) and LOAD_FINISHED.search(text):
            run.went_on = k
        elif _other_failure(text):
            run.went_on = k  # a failure of another kind after it ("error loading model: missing tensor"): that one's

    def _held(self, run: _Run, k: int, text: str, memory: Memory) -> _Held:
        """The failure line ``text`` held with what the run shows at it (:data:`_Held`)."""
        gap = run.phase is not None and run.elided > run.phase[1]
        return k, text, memory, list(self.recent)[:-1], run.phase, run.warmup, gap

    def _unmarked_refusal(self, run: _Run, k: int, text: str, said: str, kind: Memory | None) -> None:
        """Hold a line that refuses memory in a program's words but states no failure itself (ggml prints "not enough
        space in the context's memory pool (needed N, available M)" and then fails an assertion; its Metal backend
        "buffer 'data' size N is larger than buffer maximum of M", and the loader then "failed to add buffer"), and
        make it the pending failure when the very next line states one (:data:`~vllm_hpu_mm.logs.patterns.FAILURE_MARK`)
        or the process crashed there (:data:`~vllm_hpu_mm.logs.patterns.CRASHED`): the refusal was what failed. A
        refusal the program went on from is followed by its next step instead."""
        held, run.unmarked = run.unmarked, None
        if kind is not None or not text.strip():
            return
        if held is not None and k - held[0] == 1 and (FAILURE_MARK.search(text) or CRASHED.search(text)):
            run.pending = held
            run.after.append((k, text))
        elif (memory := _oom_kind(said, stated=False)) is not None:
            run.unmarked = run.refused = self._held(run, k, text, memory)

    def _load_report(self, run: _Run, k: int, text: str) -> None:
        """Hold a program's report that a model could not be loaded (:data:`~vllm_hpu_mm.logs.patterns.LOAD_REPORT`),
        and make it the pending failure once the figures it lists under it (:data:`REPORT_LINES`) show a memory all
        but gone: less than :data:`EXHAUSTED_SHARE` of it left (LM Studio's error body, "title": "Failed to load
        model" over "ram_capacity": "314.65 GB" and "ram_unused": "316.65 KB", lmstudio-ai/lmstudio-bug-tracker #14).
        The load failed for want of that memory. A report whose figures leave memory to spare says nothing of memory
        (a file it could not read, an architecture it does not know), and figures without a failed load's report are
        no failure (a server whose KV cache filled its device reports little free)."""
        if ("oad" in text or "OAD" in text) and LOAD_REPORT.search(text) and not GOES_ON.search(text):
            run.report, run.figures = (k, text), {}
        report = run.report
        if report is None:
            return
        if k - report[0] > REPORT_LINES:
            run.report = None
            return
        memory = _exhausted(run.figures, text)
        if memory is not None:
            run.pending, run.reported, run.report = self._held(run, k, text, memory), report, None

    @staticmethod
    def _count_failure(run: _Run, k: int, text: str) -> None:
        """Count a device out-of-memory line as a failure of the worker that printed it where the program printed a
        line of other work (:func:`_goes_on`) since that worker's last one: a failure the process went on from. Lines
        with nothing else between are one failure reported again, whatever their sizes: an allocator backing off
        (TensorFlow's BFC allocator asks again at 0.9 of the size, tensorflow/core/common_runtime/bfc_allocator.cc:116
        @dc0b924e ``kBackpedalFactor``, and the driver wrapper logs every refusal: "failed to allocate 127.99TiB ...
        115.19TiB ... 103.67TiB ... from device", keras-team/keras #13889, five lines at start-up), a runtime reporting
        each part of one computation (ggml's Metal backend: "error: Insufficient Memory
        (...kIOGPUCommandBufferCallbackErrorOutOfMemory)" and "ggml_metal_graph_compute: command buffer 3 failed with
        status 5", nine times over, ollama/ollama #6257: nothing says the process served between them)."""
        tag = _worker_tag(text)
        if tag not in run.ooms and len(run.ooms) >= MAX_WORKERS:
            return
        last = run.failed_at.get(tag)
        run.failed_at[tag] = run.last_oom = k
        if last is None or run.went_on_at > last:
            run.ooms[tag] += 1

    def _continued(self, text: str) -> str | None:
        """The record a terminal or issue form wrapped over this line and the one before it, where only the two
        together state the device running out (vLLM's "Free memory on device ... on startup is less than / desired
        GPU memory utilization ..."); None where the line starts a record of its own (:func:`_continues`)."""
        if len(self.recent) < 2:
            return None
        previous = self.recent[-2][1]
        if not _continues(previous, text) or _oom_kind(previous) is not None:
            return None
        joined = _joined(previous, text)
        return joined if _oom_kind(joined) == "device" else None

    def _shutdown_kill(self, text: str) -> bool:
        """Whether ``text`` is a kill that names no cause (:data:`~vllm_hpu_mm.logs.patterns.BARE_KILL`) ending the
        program's own shutdown after a failure of another kind: announced in the few lines before it
        (:data:`~vllm_hpu_mm.logs.patterns.FATAL_SHUTDOWN`), or an uncaught error just raised
        (:meth:`_raised_just_before`). The program killed itself, the OOM killer did not."""
        if not _bare_kill(text):
            return False
        before = list(self.recent)[-SHUTDOWN_BACK - 1 : -1]
        return (any(FATAL_SHUTDOWN.search(line) or _failed_otherwise(line) for _, line in before)
                or self._raised_just_before())  # fmt: skip

    def _raised_just_before(self) -> bool:
        """Whether a traceback ended in an error of another kind than memory in the few lines before this one. A
        process that raised it and then dies of SIGKILL was killed by its own handler (a launcher tearing its tree
        down, whatever its words), not by the kernel; an error that reports a process's death (a DataLoader worker
        "killed by signal", torchrun's ChildFailedError) is no such failure: the kill may be the OOM killer's."""
        raised = self.run.raised
        if raised is None or self.n - 1 - raised[0] > SHUTDOWN_BACK:
            return False
        return not PROCESS_DEATH.search(raised[1])

    # --- per line -------------------------------------------------------------------------------------------

    def _collect_after(self, run: _Run, k: int, text: str) -> None:
        if run.fallback is not None and len(run.fallback_after) < AHEAD:
            run.fallback_after.append((k, text))
        if run.pending is not None:
            run.after.append((k, text))
            if len(run.after) >= AHEAD:
                self._settle(run)

    def _memory_lines(self, run: _Run, k: int, text: str) -> None:
        if "Free device memory" in text and (memory := _gaudi_memory(text)) is not None:
            run.gaudi = (k, text, memory)
        if (
            run.kv is None
            and any(w in text for w in KV_WORDS)
            and (KV_REFUSAL.search(text) or NEGATIVE_KV.search(text))
        ):
            run.kv = (k, text)
        if run.kv_fit is None and "max seq len" in text and (m := KV_TOKENS.search(text) or KV_ESTIMATE.search(text)):
            run.kv_fit = (integer(m["len"]), integer(m["tok"]))

    def _phase_lines(self, run: _Run, k: int, text: str, said: str) -> None:
        """Follow the run's phase lines, read in the program's own words ``said`` (kept as ``text``)."""
        if "[Warmup]" in said and (w := WARMUP.search(said)):
            run.warmup = (k, text, (w["phase"], integer(w["i"]), integer(w["n"])))
        if "[Warmup]" in said or "Capturing" in said or "shards" in said or "ram used" in said:
            for stage, pattern in PROGRESS:
                if (p := pattern.search(said)) is not None:
                    run.progress = (stage, k, text, integer(p["i"]), integer(p["n"]))
                    if run.progress[3] < run.progress[4]:
                        # a counted phase not finished is under way (transformers' "Loading checkpoint shards: 2/4",
                        # which no phase word names): a failure now is in it, as after a phase line; at n it finished
                        run.phase = (stage, k, text)
                        return
                    break
        partway = run.phase is not None and run.progress is not None and run.phase[1] == run.progress[1]
        if partway and ("oaded" in said or "loading" in said) and LOAD_FINISHED.search(said):
            # the program's words that the load the counted phase showed partway is done (an excerpt cut the bar's
            # last steps): start-up's phase line still, no longer one under way
            run.phase = ("startup", k, text)
            return
        # a runtime's phase line, else any program's own words for the work it starts (phases.announced_stage)
        if (named := marker_stage(said) or announced_stage(said)) is not None:
            run.phase = (named, k, text)
            if named == "runtime":
                run.completed_at = k
            if named != "startup":
                run.went_on = k  # the load got past start-up

    def _traceback_lines(self, run: _Run, k: int, text: str) -> None:
        tb = run.tb
        if run.crashed is None and _crash_words(text) and CRASHED.search(text) and _oom_kind(text) is None:
            run.crashed = (k, text)
        if TRACEBACK_START in text:
            before = list(self.recent)[:-1]
            check = _stated_error(before, (k, text), run.raised)
            if check is None and run.crashed is not None and run.failure is None and run.pending is None:
                # the process crashed earlier in the run (a segmentation fault caught and reported), no out-of-memory
                # failure before it: the traceback that follows (the engine failing to start without its worker) is
                # that crash's consequence (vllm-project/vllm #8651's "Caught signal 11 (Segmentation fault ...)")
                check = run.crashed
            explained = check is not None or _explained(before)
            run.tb = tb = _Traceback(k, explained)
            if check is not None and run.error is None:
                run.error = check
            if run.method is not None and k - run.method.line <= 3:
                tb.frames.append(run.method)
        if "ethod" in text or "callback" in text or "{" in text or "armup" in text:
            for m in METHOD.finditer(text):
                name = m["m1"] or m["m2"] or m["m3"] or m["m4"] or m["m5"] or m["m6"] or f"span:{m['span']}"
                run.method = Frame(k, "", name, text)
        found = run.reader.read(k, text)
        if (
            tb is not None
            and tb.closed
            and tb.message_at == k - 1
            and (found or _caret(text))
            and (_prefix(text) == tb.prefix)
        ):
            # The "message" was a source line whose indentation a log viewer trimmed (a caret line or another frame
            # of the same logger record follows it): the traceback goes on.
            tb.closed, tb.message_at, tb.last = False, -1, k
            if run.error is not None and run.error[0] == k - 1:
                run.error = None
        if found:
            if tb is None or tb.closed:
                run.tb = tb = self._headless(run, k, text)
            elif k - tb.last > MAX_GAP + 1:
                run.tb = tb = _Traceback(k)
            tb.frames.extend(found)
            tb.last = k
            tb.prefix = _prefix(text)
            if (quoted := _quoted_exception(text)) is not None:
                tb.closed = True  # the whole traceback was quoted on this line, its exception line included
                if _oom_kind(quoted) is None:
                    run.raised = (k, text, frozenset(f.func for f in tb.frames if f.func))
        elif tb is not None and not tb.closed:
            body = strip_prefix(text)
            if EXCEPTION_LINE.match(body) or RAISED.match(body):
                tb.closed = True
                run.message = (k, k, text)
                if tb.frames and _oom_kind(text) is None:
                    run.raised = (k, text, frozenset(f.func for f in tb.frames if f.func))
            elif body.strip() and k - tb.last <= MAX_GAP + 1 and body[:1].isspace():
                tb.last = k  # a caret line, a wrapped source line
                tb.prefix = _prefix(text)
            elif k - tb.last == 1 and tb.frames and _error_message(body) and _prefix(text) == tb.prefix:
                # The line right after the frames, from the same logger record, that is not a frame: the exception's
                # message printed without its class. The traceback ended in that error: no cut.
                tb.closed, tb.message_at = True, k
                run.message = (k, k, text)
                if run.error is None and _oom_kind(text) is None:
                    run.error = (k, text)
        elif (
            (message := run.message) is not None
            and k == message[1] + 1
            and tb is not None
            and tb.closed
            and TRACEBACK_START not in text
            and (prefix := _prefix(text))
            and prefix == _prefix(message[2])
            and strip_prefix(text).strip()
        ):
            # the message goes on over the next lines of the same logger record (vLLM's logger prefixes each line of
            # an exception's text): its last line closes what the traceback raised
            run.message = (message[0], k, text)

    def _headless(self, run: _Run, k: int, text: str) -> _Traceback:
        """A traceback an excerpt shows from its first frame, without its header (the line ``text``), and the error
        stated right above it, where one is: the cause it is chained to (:func:`_chained_cause`) or an error stated
        in its own words with only announcements of a failure between (:func:`_stated_before_announcements`). An
        issue's author may quote the error first and its frames after it ("ValueError: Invalid type for tensors", then
        ``capture_model`` ... cut, tests/data/logs/heldout_round82/vllm_rocm_44_capture_invalid_type.log). The checks
        :func:`_stated_error` makes of a logger's record right above a header are not made: above a frame, a record
        of the same logger is the traceback's own source line where the excerpt began inside it."""
        before = list(self.recent)[:-1]
        check = _chained_cause(before, run.raised) or _stated_before_announcements(before)
        if check is not None and run.error is None:
            run.error = check
        return _Traceback(k, explained=check is not None)

    # --- runs -----------------------------------------------------------------------------------------------

    def _settle(self, run: _Run) -> None:
        """Turn the pending failure into a :class:`Failure` once the lines after it are in."""
        assert run.pending is not None
        k, text, memory, before, phase, warmup, gap = run.pending
        if _stopped_by_program(text, run.after):
            run.pending, run.after = None, []  # the program stopped the process itself, the OOM killer did not
            return
        above = _traceback_window(before)
        statement = None if above else _quoted_statement(before, text)
        window = [*([statement] if statement else above), (k, text), *run.after]
        if run.reported is not None and run.reported not in window:
            window.insert(0, run.reported)  # the load's report the failing figure was listed under, quoted with it
        if CATCH_ALL_OOM.search(text) and (fault := _device_fault(window)) is not None:
            # the wrapper's words claim memory for whatever failed; the failure it wrapped was a device fault
            run.pending, run.after = None, []
            run.error = run.error or fault
            return
        reader = _FrameReader()
        frames = [frame for j, line in window for frame in reader.read(j, line)]
        if statement is not None:  # its frame line cut off: the calls it makes are the innermost frames
            frames[:0] = [Frame(statement[0], "", name, statement[1]) for name in CALL.findall(statement[1])]
        # a process killed by the error (an uncaught C++ exception's abort) has its Python frames dumped after it
        lines = dict(window)
        frames += [Frame(j, path, func, lines[j]) for j, path, func in dumped_frames(window)]
        method = run.method if run.method is not None and abs(run.method.line - k) <= BACK else None
        if method is not None and all(f.func != method.func for f in frames):
            frames.insert(0, method)
        previous = before[-1][1] if before else ""
        opened = (
            _wrapped(previous, text)
            or _listed_under(previous, text)
            or _indented_under(previous, text)
            or _row_continued(previous, text)
        )
        head = [run.reported] if run.reported is not None else [before[-1]] if opened else []
        record = _record(text, run.after)
        wrapped = (k, record) if record != text else None
        message, kind, at = _message(phase, [*head, (k, text), *run.after[:5]], run.after, wrapped, memory)
        if message is None and statement is not None and KV_BUFFER_STATEMENT.match(statement[1]):
            message, at = "kv_cache", statement[0]  # the statement that raised it makes the KV cache's buffers
        if message is None and listed_item_stage([line for _, line in (*head, (k, text))], [t for _, t in run.after]):
            # one numbered input's failure in a list the program went on with (phases.listed_item_stage)
            message, at = "runtime", head[0][0] if head else k
        opening = window[0][0] if window else k
        announced = [line for j, line in before if opening - ANNOUNCED_BACK <= j < opening]
        started = any(ENGINE_START_FAILED.search(line) for line in [*announced, *(t for _, t in window)])
        run.failure = Failure(k, text, memory, tuple(frames), message, phase, warmup, tuple(window), kind, at, gap,
                              started)  # fmt: skip
        run.pending = None
        run.after = []

    def _features(self, run: _Run) -> RunFeatures:
        if run.pending is not None:
            self._settle(run)
        tb = run.tb
        is_open = tb is not None and not tb.closed and not tb.explained and bool(tb.frames)
        open_tb = OpenTraceback(tuple(tb.frames), tb.last) if tb is not None and is_open else None
        error = run.error
        if open_tb is not None and run.raised is not None and _reprinted(open_tb, run.raised):
            # the same failure printed again (another rank, the process's own handler), cut: it ended in that error
            open_tb, error = None, error or run.raised[:2]
        if run.kv is None and open_tb is None and error is None:
            # nothing else ended the run: a refusal it went on from, or ended on, may be its failure
            if self._fallback_failed(run):
                run.pending, run.after, run.fallback = run.fallback, run.fallback_after, None
                self._settle(run)
            elif self._ended_on_refusal(run):
                run.pending, run.after = run.refused, []
                self._settle(run)
            elif run.retry is not None and run.retries >= KV_RETRIES and run.failure is None:
                # the excerpt stops inside the retries, nothing after them but their own failures: the server had not
                # got a batch into the cache (the labels of record read it so: held-out rounds 149 and 175)
                run.pending, run.after = run.retry, []
                self._settle(run)
        raised = run.raised
        if (error is None and run.failure is None and run.kv is None and open_tb is None and raised is not None
                and raised[0] > run.completed_at and not _names_memory(raised[1])):  # fmt: skip
            # a traceback closed by its exception line of another kind, the server not going on after it (a TGI
            # shard's relayed "RuntimeError: Graph compile failed. synStatus 26"): the run failed on that error
            error = raised[:2]
        m = run.message
        end = (m[1], m[2]) if error is not None and m is not None and m[0] == error[0] < m[1] else None
        return RunFeatures(run.failure, run.kv, open_tb, run.progress, run.phase, run.warmup, run.completed_at,
                           run.end, run.gaudi, run.kv_fit, max(run.ooms.values(), default=0), error, end)  # fmt: skip

    @staticmethod
    def _fallback_failed(run: _Run) -> bool:
        """Whether the run's refusal of pinned host memory (:attr:`_Run.fallback`) is its out-of-memory failure: the
        run shows no other failure, and no line after the refusal says the load finished or serving began (a phase line
        of a stage after start-up, a program's words that its model loaded, a request it answered) or states a failure
        of another kind (:func:`_other_failure`: the run failed on that). The runtime went
        on with pageable memory, but an excerpt that shows nothing of it going on shows the host short of memory as the
        model loaded and no healthy run, which a ``none`` needs (as the labels are given: ollama/ollama #5469's labels
        of record, held-out round 96, read such a load so)."""
        return run.fallback is not None and run.failure is None and run.went_on < run.fallback[0]

    @staticmethod
    def _ended_on_refusal(run: _Run) -> bool:
        """Whether the run's excerpt ends on a refusal of memory printed without a failure mark (:attr:`_Run.refused`
        is its last line that is not blank), with no failure before it. A
        refusal the program went on from is followed by its next step; an excerpt that stops on the refusal shows
        nothing going on, and its poster quoted that line as what failed (Ollama's "memory layout cannot be allocated
        with num_gpu = 26" alone, ollama/ollama #14980; ggml's Metal "buffer 'data' size N is larger than buffer
        maximum of M" alone, ggml-org/llama.cpp #1815)."""
        refused = run.refused
        if refused is None or run.failure is not None or run.pending is not None or run.end != refused[0]:
            return False
        # device memory only: a bare kill is read by its own rules (another error before it is its cause); a refusal
        # in a warning or a retry's words says the program goes on (vLLM's preemption for want of KV cache space); a
        # size asked set against a smaller size left weighs the work but refuses nothing until the program says it
        # rejects it (mlx-serve's "prompt N tokens needs ~X, ~Y available" before its "— rejecting")
        if refused[2] != "device" or GOES_ON.search(refused[1]):
            return False
        return any(m["asked"] is None for m in _refusals(refused[1]))

    def _start_line(self, k: int, text: str, start: re.Match[str]) -> None:
        """A start line opens a new run once the run got going, or where this start has printed it already: a line
        its process printed in this run, or one a start prints before a line this run holds (a restart whose first
        start failed with no error the doctor reads, or stopped in a phase it does not count)."""
        rank = _START_ORDER[next(name for name, value in start.groupdict().items() if value is not None)]
        process = m["name"] if "pid=" in text and (m := PROCESS_NAME.search(text)) else ""
        printed = self.run.starts
        if self.run.has_begun or any(r > rank or (r, p) == (rank, process) for r, p in printed):
            self._new_run(k)
        self.run.starts.add((rank, process))

    def _new_run(self, k: int) -> None:
        features = self._features(self.run)
        if features.shows_failure:
            self.kept = (self.runs, features)
        self.run = _Run()
        self.runs += 1
        self.recent.clear()

    def result(self) -> LogFeatures:
        last = self._features(self.run)
        index, chosen = self.runs, last
        if not last.shows_failure and self.kept is not None:
            index, chosen = self.kept
        window = [] if chosen.failure is None else [text for _, text in chosen.failure.window]
        source = self.source.result(window)
        if chosen.failure is not None and any(encoder_frame(fr.path, fr.func) for fr in chosen.failure.frames):
            source = dataclasses.replace(source, multimodal=True)  # it failed in a vision encoder: the model has one
        return LogFeatures(chosen, index, self.runs, self.model, self.backend.name, self.skipped, source)


def _message(
    phase: tuple[Stage, int, str] | None,
    near: list[tuple[int, str]],
    after: list[tuple[int, str]],
    record: tuple[int, str] | None = None,
    memory: Memory | None = None,
) -> tuple[Stage | None, MessageKind | None, int]:
    """The stage the failure's own lines name, which kind of message named it and on which line: a message that names
    its phase (:data:`~vllm_hpu_mm.logs.patterns.MESSAGE_STAGES`); else a native backtrace's serving frames anywhere in
    the :data:`AHEAD` lines (:data:`~vllm_hpu_mm.logs.patterns.NATIVE_SERVING`, or start-up's
    :data:`~vllm_hpu_mm.logs.patterns.NATIVE_STARTUP`), a Java, Kotlin or JavaScript frame or a TensorFlow graph node
    whose words name the work (:func:`.phases.vm_frame_stage`, :func:`.phases.tf_node_stage`); else a compute-buffer
    reservation (start-up, or serving where the phase lines say it had begun; a backend's buffer refused right after
    llama.cpp announced its KV cache, :data:`~vllm_hpu_mm.logs.patterns.KV_CREATING`, is the cache's); else a failed
    model load before any later phase line, reported anywhere in the :data:`AHEAD` lines ``after`` the failure (a host
    or launcher reports the load it waited for once the worker's error and its allocator's figures are printed: TGI's
    "Shard 0 failed to start").
    Where no line names its phase alone, the failure's ``record`` (its line joined with the lines a terminal wrapped it
    over, :func:`_record`; None where it was not wrapped) may, as a whole. A failure of the host's ``memory`` whose
    record opens with a report that a model's load failed (:data:`~vllm_hpu_mm.logs.patterns.LOAD_REPORT`) is
    start-up's, whichever program wrote it: the host holds a model's weights as they are read in, and an engine that
    sizes its KV cache or captures its graphs inside its load does so in device memory."""
    for stage, pattern in MESSAGE_STAGES:
        for j, line in near:
            if pattern.search(line):
                return stage, None, j
    if record is not None:
        for stage, pattern in MESSAGE_STAGES:
            if pattern.search(record[1]):
                return stage, None, record[0]
    for j, line in [*near, *after]:  # a native backtrace lists its frames under the error, innermost first
        if NATIVE_SERVING.search(line):
            return "runtime", None, j
        bare = strip_prefix(line)  # a frame's number or "at" opens its line once the log's prefix is gone
        if NATIVE_STARTUP.search(bare):
            return "startup", None, j
        if (named := vm_frame_stage(bare) or tf_node_stage(line)) is not None:
            return named, None, j
    for pattern in (RESERVE_FAILED, BACKEND_ALLOC):  # the reservation's own line first, where both are there
        for j, line in near:
            if pattern.search(line):
                # a decode call's re-reservation, or a request's image or audio being encoded (MEDIA_ENCODING), says
                # it was for a request, whatever the phase lines say
                request = any(DECODE_RESERVE.search(t) or MEDIA_ENCODING.search(t) for _, t in near)
                serving = request or (phase is not None and phase[0] == "runtime")
                if pattern is BACKEND_ALLOC and not serving and phase is not None and KV_CREATING in phase[2].lower():
                    return "kv_cache", "reserve", j  # the buffers of the KV cache llama.cpp announced it was creating
                return ("runtime" if serving else "startup"), "reserve", j
    if memory == "host" and near and LOAD_REPORT.search(near[0][1]):
        return "startup", None, near[0][0]
    if phase is None or phase[0] == "startup":
        for j, line in [*near[:1], *after]:
            if LOAD_FAILED.search(line):
                return "startup", "load", j
    return None, None, -1


#: How far back a chained traceback's cause may have been stated (its own traceback, elided, and the logger's record).
CHAIN_BACK = 10
#: Where a logger's record names its level: within its first 40 characters ("ERROR 08-29 02:12:22 file.py:658] ...",
#: "ERROR:root:...", "[ERROR] ..."), or after a time stamp and up to three fields of the logger's format, however long
#: they are (Python's logging formats with the logger's dotted name and the process id: xinference's "2024-06-18
#: 19:19:51,807 xinference.api.restful_api 6217 ERROR    ...", tests/data/logs/heldout_round87/xinference_1668_model_
#: not_found.log), or in the key Go's log/slog text format gives it after the time, behind a journal's prefix
#: ("Feb 18 16:56:30 host ollama[27678]: time=2025-01-24T15:54:16.509-08:00 level=INFO source=server.go:589 ...").
_RECORD_HEAD = r"^(?:.{0,40}?|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[,.]?\d*\s+(?:\S+\s+){0,3}?|.{0,80}?\btime=\S+\s+level=)"
#: A logger's record at error level: a failure the program states in its own words, with or without an exception
#: class.
ERROR_RECORD = re.compile(_RECORD_HEAD + r"\b(?:ERROR|CRITICAL)\b")
#: Python's header of a traceback raised while handling, or because of, the one before it.
CHAINED = ("The above exception was the direct cause", "During handling of the above exception")


def _explained(before: list[tuple[int, str]]) -> bool:
    """Whether the lines ``before`` a traceback say what failed, in words without memory: an error message right
    above it; for a chained traceback, also an error record above the chain's header (the cause the program logged,
    its own traceback elided): vLLM's "Engine iteration timed out" before the request handler's traceback it raised
    (vllm-project/vllm #5901). The traceback that follows is that error's consequence, not a cut one."""
    near = before[-2:]
    if any(ERROR_MESSAGE.search(strip_prefix(line)) and _oom_kind(line) is None for _, line in near):
        return True
    last = strip_prefix(near[-1][1]).strip() if near else ""
    if PYTHON_ERROR_TEXT.search(last) or (NOT_IMPLEMENTED.search(last) and _oom_kind(last) is None):
        return True  # the exception's message alone, as ``logger.exception(e)`` prints it before the traceback
    if not any(line.lstrip().startswith(CHAINED) for _, line in near):
        return False
    return any(ERROR_RECORD.match(line) and _oom_kind(line) is None for _, line in before[-CHAIN_BACK:])


def _stated_error(
    before: list[tuple[int, str]], opening: tuple[int, str], raised: tuple[int, str, frozenset[str]] | None = None
) -> tuple[int, str] | None:
    """The line that states what a traceback raised, an error of another kind than memory, or None: the line that
    opens it, where a logger printed the exception's message there (:func:`_opened_with_message`) or a device fault
    before it (:data:`DEVICE_FAULT`); else the exception line that closed the traceback this one is chained to
    (:func:`_chained_cause`, ``raised``: the run's last such line); else an exception line stated a few lines above
    it, its own traceback shown or elided (:func:`_raised_above`); else an error record right above it stating a
    failed check or lookup (:data:`~vllm_hpu_mm.logs.patterns.FAILED_CHECK`: the exception's message, logged first by
    vLLM's ``logger.exception(e)``) or stating anything else in the traceback's own record (:func:`_message_of_record`),
    or a collective-communication failure or a device fault in either of the two lines above it
    (:data:`~vllm_hpu_mm.logs.patterns.COMM_FAILURE`, :data:`DEVICE_FAULT`), or an error stated a few lines above it
    with only records announcing a failure between (:func:`_stated_before_announcements`). A traceback an excerpt cuts
    after such a line is that error's, not a cut that may hide an out-of-memory one (:func:`.decide.judge`)."""
    if _opened_with_message(opening[1]) or DEVICE_FAULT.search(opening[1].split(TRACEBACK_START, 1)[0]):
        return opening
    if (cause := _chained_cause(before, raised)) is not None:
        return cause
    if (stated := _raised_above(before, raised)) is not None:
        return stated
    for k, line in reversed(before[-2:]):
        if _names_memory(line):
            continue
        if COMM_FAILURE.search(line) or DEVICE_FAULT.search(line):
            return k, line
    if (stated := _stated_before_announcements(before)) is not None:
        return stated
    if not before:
        return None
    k, line = before[-1]
    if not ERROR_RECORD.match(line) or _names_memory(line):
        return None
    body = strip_prefix(line)
    if FAILED_CHECK.search(body) or _message_of_record(line, opening[1]):
        return k, line
    return None


#: Words with which a logger announces that something failed, leaving what to the traceback it prints after
#: ("EngineCore failed to start.", "WorkerProc hit an exception.", "Error executing method init_device.", "Engine
#: background task failed", "An exception occurred while instantiating runner ..."): such a record states no error.
ANNOUNCES_FAILURE = re.compile(
    r"\b(?:errors?|exceptions?|fail\w*|fatal|died|dead|crash\w*|abort\w*|kill\w*|terminat\w*)\b", re.IGNORECASE
)
#: How many lines above a traceback the error it raised may be stated with only announcements of a failure (and blank
#: lines) between (:func:`_stated_before_announcements`).
ANNOUNCED_BACK = 4
#: uvicorn's announcement of a request handler's exception, printed after its access record of the 500 it answered
#: and before the handler's traceback (uvicorn/protocols/http/h11_impl.py ``run_asgi``): that record is the same
#: failure's, not other work.
ASGI_FAILED = "Exception in ASGI application"
#: An error body's message, as a server returns a request's failure (``{"error":"Request failed during generation:
#: Server error: ...","error_type":"generation"}``, TGI's router relaying the shard's exception): what follows the key.
ERROR_BODY = re.compile(r"""["'](?:error|detail|message)["']\s*:\s*["']""")


def _stated_before_announcements(before: list[tuple[int, str]]) -> tuple[int, str] | None:
    """The line that states the error a traceback raised, found above the records that only announce a failure
    (:data:`ANNOUNCES_FAILURE` without stating one: TGI's "Method Prefill encountered an error.", vLLM's "Error
    executing method 'init_device'. This might cause deadlock ...", pynccl's "Error type: <class 'RuntimeError'>",
    SGLang's "Received sigquit from a child process. It usually means the child failed.") in the :data:`ANNOUNCED_BACK`
    lines above it; None where a line between does other work (or is a record below warning level: the program went
    on), reports a process's death (the OOM killer's, maybe), or where the line found speaks of memory. What is
    printed between an error and its traceback, or between two ranks' reports of one error, is the program announcing
    that failure: the traceback is that error's (NCCL's "ncclCommInitRank failed with error: NCCL error: internal
    error" above vLLM's ``init_device`` traceback, tests/data/logs/heldout_round82/vllm_18997_nccl_init_internal.log;
    a request's error body above TGI's ``Prefill`` traceback, heldout_round47/tgi_375_cpu_attention_scores_cuda_tensor
    .log; another rank's NameError above SGLang's scheduler's, heldout_round84/sglang_3582_nextn_build_tree_nameerror
    .log). A web server's record that it answered a request with a server error (``ANSWERED_ERROR``) is work of its
    own, except above uvicorn's announcement that the request's handler raised (:data:`ASGI_FAILED`): LMDeploy's
    KeyError, uvicorn's ``"POST /v1/chat/completions HTTP/1.1" 500``, "Exception in ASGI application", the handler's
    traceback (heldout_round128/lmdeploy_2771_response_format_keyerror.log)."""
    asgi = False
    for k, line in _announced_window(before):
        body = strip_prefix(line).strip()
        if not body:
            continue
        if _names_memory(line) or PROCESS_DEATH.search(body):
            return None
        if _states_error(line, body):
            return k, line
        if asgi and ANSWERED_ERROR.search(line):
            continue  # the server's answer to the request whose handler raised the traceback
        asgi = asgi or ASGI_FAILED in body
        if _traceback_text(body) or not ANNOUNCES_FAILURE.search(body) or _going_on(line):
            return None
    return None


#: NCCL's trace of a failed call's code on its way up ("NCCL INFO transport/shm.cc:114 -> 2", one line a function the
#: error returns through: ``NCCLCHECK`` in NCCL's src/include/checks.h), printed between the error NCCL states and
#: the report of the call that failed: the same failure, neither other work nor an announcement
#: (:func:`_stated_before_announcements` passes over it).
NCCL_TRAIL = re.compile(r"\bNCCL INFO [\w/.-]+:\d+ -> \d+")


#: A traceback's header in words other than Python's, alone on its line ("Stack Trace:", "Stack trace:", "Call stack:",
#: "Backtrace:"), as a program or an issue's author puts it above the frames (nlzy/vllm-gfx906 #44: "ValueError: Invalid
#: type for tensors", a blank line, "Stack Trace:", then ``capture_model``'s frames): the traceback's own line, neither
#: other work nor an announcement (:func:`_stated_before_announcements` passes over it).
STACK_HEADER = re.compile(r"^\s*(?:stack ?trace(?:back)?|call ?stack|back ?trace)\s*:?\s*$", re.IGNORECASE)


def _announced_window(before: list[tuple[int, str]]) -> Iterator[tuple[int, str]]:
    """The :data:`ANNOUNCED_BACK` lines right above a traceback, nearest first, NCCL's return-code trace
    (:data:`NCCL_TRAIL`) and a header of the traceback (:data:`STACK_HEADER`) passed over: read back from the
    traceback only as far as they go."""
    taken = 0
    for k, line in reversed(before):
        if taken == ANNOUNCED_BACK:
            return
        if ("NCCL INFO" in line and NCCL_TRAIL.search(line)) or STACK_HEADER.match(strip_prefix(line)):
            continue
        taken += 1
        yield k, line


def _going_on(line: str) -> bool:
    """Whether ``line`` is a record below warning level (:data:`GOING_ON`), not an error record that tags its message
    ``[DEBUG]`` (vLLM's pynccl: "ERROR ... [pynccl.py:154] [DEBUG] Error type: ...")."""
    return bool(GOING_ON.match(line)) and not ERROR_RECORD.match(line)


#: An error record's words that something timed out: the error is the timeout (vLLM's "Engine iteration timed out. This
#: should never happen!" above "Engine background task failed" and the engine step's traceback, vllm-project/vllm
#: #5443).
TIMED_OUT = re.compile(r"\btimed out\b", re.IGNORECASE)


def _states_error(line: str, body: str) -> bool:
    """Whether ``line`` (``body``: without its log prefix and indentation) states an error, not only that one
    happened: a collective's failure or a device fault (:data:`~vllm_hpu_mm.logs.patterns.COMM_FAILURE`,
    :data:`DEVICE_FAULT`), an exception line (:data:`STATED_EXCEPTION`), or a failure with its reason
    (:data:`~vllm_hpu_mm.logs.patterns.ERROR_MESSAGE`), in the line or in an error body's message
    (:data:`ERROR_BODY`); an error record that something timed out (:data:`TIMED_OUT`)."""
    if COMM_FAILURE.search(line) or DEVICE_FAULT.search(line) or STATED_EXCEPTION.match(body):
        return True
    if ERROR_MESSAGE.search(body) or (ERROR_RECORD.match(line) and TIMED_OUT.search(body)):
        return True
    quoted = ERROR_BODY.search(body)
    return quoted is not None and bool(ERROR_MESSAGE.search(body[quoted.end() :]))


def _message_of_record(line: str, opening: str) -> bool:
    """Whether ``line``, the error record right above a traceback, is the exception's own message: printed in the same
    record as the traceback (the same prefix, time and source location included: ``logger.exception(e)`` prints
    ``str(e)`` and then the traceback, every line behind one prefix; vLLM's engine does so for whatever it raised,
    vllm/engine/multiprocessing/engine.py@02d0d889 ``run_mp_engine``) and stating something, not announcing that
    something failed (:data:`ANNOUNCES_FAILURE`). A KeyError's message is the missing key, quoted
    (``'layers.17.mlp.down_proj.weight.absmax'``); a setting refused, a sentence (``CPU backend only supports V1.``)."""
    prefix = _prefix(line)
    body = line[len(prefix) :].strip()
    if not prefix.strip() or prefix != _prefix(opening) or not any(c.isalnum() for c in body):
        return False
    return not ANNOUNCES_FAILURE.search(body)


def _names_memory(line: str) -> bool:
    """Whether ``line`` speaks of memory at all (an error it states may then be an out-of-memory one); a device fault
    (:data:`DEVICE_FAULT`: "an illegal memory access was encountered", ROCm's "Memory access fault") names memory as
    where the fault hit, not as what ran out."""
    return "memory" in FIXED_RESOURCE.sub("", DEVICE_FAULT.sub("", line)).lower() or _oom_kind(line) is not None


#: Memory words that name a resource of its own, not the memory a program ran out of: Triton's refusal of a kernel
#: whose block needs more on-chip shared memory than the hardware gives one block ("out of resource: shared memory,
#: Required: 131072, Hardware limit: 65536", triton/runtime/errors.py ``OutOfResources``: a kernel's configuration over
#: a fixed per-block limit, raised as it is compiled and loaded), and NCCL's shared-memory transport failing to create
#: its segment under /dev/shm ("NCCL WARN Error while creating shared memory segment /dev/shm/nccl-...", NCCL
#: src/misc/shmutils.cc; torch then raises "unhandled system error"). The labelled logs call both ``none``
#: (tests/data/logs/heldout_round160/sglang_2384_mi300_dsv2lite_triton_shared_memory.log, heldout_round31's
#: sglang_5_tp2_nccl_shm_segment, heldout_round163's vllm_3791 and vllm_4383).
FIXED_RESOURCE = re.compile(r"\bout of resource: shared memory\b|\bcreating shared memory segment\b", re.IGNORECASE)


#: A device runtime's error string for a fault other than running out of memory: CUDA's and HIP's
#: ``cudaGetErrorString``/``hipGetErrorString`` words as torch raises them ("CUDA error: <string>": an illegal address,
#: a misaligned one, a kernel's failed assertion, a failed or misconfigured launch, an illegal instruction, no kernel
#: built for the device, an invalid argument), their enum names (``hipErrorIllegalAddress``, ``cudaErrorAssert``), and
#: ROCm's page fault report ("Memory access fault by GPU node-2 ... Reason: Page not present"). The program was
#: stopped by a bad access or a bad kernel, not refused memory: the labelled logs call an illegal memory access
#: ``none`` (tests/data/logs/heldout_round51/vllm_23814_concurrent_illegal_memory_access.log, heldout_round28's
#: lmdeploy_698). The bare "device-side assertions" of CUDA's hint to compile with ``TORCH_USE_CUDA_DSA`` (printed
#: under every CUDA error, out of memory included) is no fault.
DEVICE_FAULT = re.compile(
    r"\billegal memory access\b|\bmisaligned address\b|\bdevice-side assert triggered\b|\bunspecified launch failure\b"
    r"|\billegal instruction was encountered\b|\bno kernel image is available\b|\binvalid device function\b"
    r"|\binvalid configuration argument\b|\b(?:cuda|hip) error: invalid argument\b"
    r"|\b(?:cuda|hip)Error(?:IllegalAddress|MisalignedAddress|Assert|LaunchFailure|IllegalInstruction"
    r"|NoKernelImageForDevice|NoBinaryForGpu|InvalidDeviceFunction|InvalidConfiguration|InvalidValue)\b"
    r"|\bMemory access fault by GPU\b",
    re.IGNORECASE,
)


def _device_fault(window: list[tuple[int, str]]) -> tuple[int, str] | None:
    """The first line of a failure's ``window`` (its traceback, its line and the lines after it) that names a device
    fault (:data:`DEVICE_FAULT`), or None."""
    return next(((j, line) for j, line in window if DEVICE_FAULT.search(line)), None)


def _chained_cause(
    before: list[tuple[int, str]], raised: tuple[int, str, frozenset[str]] | None
) -> tuple[int, str] | None:
    """The exception line of another kind than memory that closed the traceback the one opening now is chained to
    (Python's "The above exception was the direct cause of the following exception:" or "During handling of the above
    exception, another exception occurred:" in the lines right above it, that line at most :data:`CHAIN_BACK` lines
    before the header), or None. A server's handler re-raises a request's failure wrapped (starlette's
    ``ServerErrorMiddleware`` above vLLM's ``_prune_hidden_states`` that hit an illegal memory access,
    tests/data/logs/heldout_round57/vllm_1214_illegal_access_prune_hidden.log): the chained traceback, however an
    excerpt cuts it, is that error's consequence."""
    header = next((k for k, line in reversed(before[-3:]) if strip_prefix(line).lstrip().startswith(CHAINED)), None)
    if header is None or raised is None or not 0 < header - raised[0] <= CHAIN_BACK:
        return None
    return None if _names_memory(raised[1]) else raised[:2]


#: An exception line as Python prints it when it states what was raised: the class (one whose name ends in Error or
#: Exception, or any class behind its module's dotted path: torch._dynamo's ``torch._dynamo.exc.Unsupported``,
#: ``BackendCompilerFailed``), a colon and a message. A header that only announces a traceback ("Exception in thread
#: Thread-1:") states nothing, and ``SystemExit``/``KeyboardInterrupt`` report how a process ended, not what failed.
STATED_EXCEPTION = re.compile(r"^(?:(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)|(?:[A-Za-z_]\w*\.)+[A-Z]\w*):\s+\S")
#: How far above a traceback the exception it follows from may be stated: its message's own lines between (torch
#: dynamo's "from user code:" with the user's frames and its hints, torch/_dynamo/exc.py ``augment_exc_message``,
#: torch 2.13.0 line 755), a chain's header, the shutdown records of the processes it ended.
RAISED_BACK = 25
#: A logger's record below warning level ("INFO 08-16 18:12:20 [engine.py:310] ...", "DEBUG:root:..."): the program
#: went on after an error stated above it, so a traceback after the record may be another failure. Google's logging
#: heads its own (:data:`~vllm_hpu_mm.logs.patterns.GLOG_INFO_HEAD`: "I0224 16:15:27.563535 140378916851712
#: xla_bridge.py:689] Unable to initialize backend 'tpu': ...", google-deepmind/gemma #9, where JAX falls back to the
#: CPU and goes on).
GOING_ON = re.compile(_RECORD_HEAD + r"\b(?:INFO|DEBUG)\b|" + GLOG_INFO_HEAD)


def _raised_above(
    before: list[tuple[int, str]], raised: tuple[int, str, frozenset[str]] | None
) -> tuple[int, str] | None:
    """The exception line of another kind than memory (:data:`STATED_EXCEPTION`) stated without its traceback in the
    :data:`RAISED_BACK` lines above a traceback opening now, with no other traceback opened, no out-of-memory line
    (a resource tracker's warning of "leaked shared_memory objects" at shutdown is none) and no record of the program
    going on (:data:`GOING_ON`) between; None where there is none, where it speaks of memory (:func:`_names_memory`),
    where it reports a process's death (:data:`~vllm_hpu_mm.logs.patterns.PROCESS_DEATH`: that process may have been
    the OOM killer's), or where it closes a traceback the log shows (``raised``): whether that traceback's error is the
    next one's cause is :func:`_chained_cause`'s and :func:`_reprinted`'s to say (a traceback through other frames
    after it may be another failure).

    Its own traceback elided, the traceback after it chained to it ("During handling of the above exception ...":
    SGLang's scheduler, whose CUDA-graph capture hit torch dynamo's ``InternalTorchDynamoError``,
    tests/data/logs/heldout_round62/sglang_6342_fa3_cuda_graph_dynamo_error.log) or not (vLLM's engine core raised
    it, the executor's monitor reports the worker dead, vllm/v1/executor/multiproc_executor.py@c5c40ab2
    ``monitor_workers``, and the program that drove the engine prints its own traceback:
    heldout_round65/vllm_18_fakevlm_prompt_placeholder_error.log): the traceback is that error's consequence, however
    an excerpt cuts it."""
    for k, line in reversed(before[-RAISED_BACK:]):
        if TRACEBACK_START in line or GOING_ON.match(line) or _oom_kind(line) is not None:
            return None
        body = strip_prefix(line)
        if STATED_EXCEPTION.match(body):
            shown = raised is not None and raised[0] == k
            return None if shown or _names_memory(line) or PROCESS_DEATH.search(body) else (k, line)
    return None


#: A logger's record that prints an exception's message, then its traceback, on the line the traceback opens:
#: "<what failed>: <message>, Traceback (most recent call last):" (vLLM's multiprocessing worker: "Exception in worker
#: %s while processing method %s: %s, %s" with the exception and ``traceback.format_exc()``,
#: vllm/executor/multiproc_worker_utils.py@0531c222 ``_run_worker_process``). A record with nothing between its colon
#: and the traceback (SGLang's "Scheduler hit an exception: Traceback ...") states no message.
OPENED_WITH_MESSAGE = re.compile(r"^[^:]{1,200}:\s+\S.*?,\s*" + re.escape(TRACEBACK_START))


def _opened_with_message(text: str) -> bool:
    """Whether the line ``text`` that opens a traceback states the exception's message before it, one that says
    nothing of memory (:data:`OPENED_WITH_MESSAGE`)."""
    return bool(OPENED_WITH_MESSAGE.match(strip_prefix(text))) and not _names_memory(text)


#: Least frames a cut traceback must show to be read as an earlier error printed again (outer frames alone, the
#: interpreter's entry and ``main``, are shared by any two tracebacks of one program).
REPRINT_FRAMES = 2


def _reprinted(tb: OpenTraceback, raised: tuple[int, str, frozenset[str]]) -> bool:
    """Whether the traceback ``tb`` the run stops inside is the one an earlier exception line of another kind closed,
    printed again and cut: it opens within :data:`BACK` lines after that line and every frame it shows is one of that
    traceback's. SGLang's scheduler prints its failure twice (the exception's own traceback, then "Scheduler hit an
    exception: " with the same traceback: python/sglang/srt/managers/scheduler.py ``run_scheduler_process``), and
    every rank of a tensor-parallel group prints the same one."""
    names = [f.func for f in tb.frames if f.func]
    first = tb.frames[0].line
    return len(names) >= REPRINT_FRAMES and 0 < first - raised[0] <= BACK and all(n in raised[2] for n in names)


def _listed_under(previous: str, text: str) -> bool:
    """Whether ``text`` is one of the errors ``previous`` says it stems from, listed under it (indented, right after
    the header :data:`~vllm_hpu_mm.logs.patterns.ROOT_ERRORS` matches): the header is the failure's own record, and
    what it says the program was doing (Triton's "warmup error: Internal - 2 root error(s) found.") places it."""
    return text[:1].isspace() and bool(ROOT_ERRORS.search(previous))


def _indented_under(previous: str, text: str) -> bool:
    """Whether ``text`` is the failure's message carried on, indented, under the line that opened its record and ends
    with a colon ("1 FAILED (80.6s): Check '!exceed_allocatable_mem_size' failed at engine.cpp:324:" over "    [GPU]
    Exceeded max size of memory object allocation: ...", openvinotoolkit/openvino #37501): the opening line is the
    failure's own record, and says what the program was working on. A traceback's own lines are not such an opening."""
    body = strip_prefix(previous)
    stripped = body.strip()
    if not text[:1].isspace() or not stripped or body[:1].isspace() or _traceback_text(stripped):
        return False
    return stripped.endswith(":")


#: A record that opens with its time as a key and value, as Go's log/slog text handler writes every record
#: (``time=2025-03-12T12:14:22.015Z level=ERROR source=sched.go:456 msg=...``: golang/go src/log/slog/handler.go
#: @837c59e3 ``commonHandler.handle`` writes ``TimeKey``, "time", first; Ollama logs so): a record of its own, never
#: the line before it carried on, though it opens with a lower-case letter.
KEYED_TIME = re.compile(r'^time="?\d{4}-\d\d-\d\d')


def _wrapped(previous: str, text: str) -> bool:
    """Whether ``text`` continues ``previous``, one long record a terminal or issue tracker wrapped: the line before is
    long and ``text`` starts mid-word (a lower-case letter or a closing bracket, no log prefix, no indentation, not a
    record's own time key: :data:`KEYED_TIME`), so the words that open the record (Triton's "Failed to create
    instance: ...") are on the line before."""
    mid_word = bool(text) and (text[0].islower() or text[0] in ")]>") and not KEYED_TIME.match(text)
    return len(previous) >= 80 and not previous[-1:].isspace() and mid_word


def _crash_words(text: str) -> bool:
    """A cheap first check for :data:`~vllm_hpu_mm.logs.patterns.CRASHED` (most lines hold none of its words)."""
    return "egmentation" in text or "SIG" in text or "core dumped" in text


def _row_continued(previous: str, text: str) -> bool:
    """Whether ``text`` ends a table row ``previous`` opened, its cell broken over two lines: the row opens with a bar
    and is left open, and ``text`` closes it (Triton's model status table, "| dolly_v1_6b_onnx | 1 | UNAVAILABLE:
    Internal: onnx runtime error 6: Exception during initialization: ..." over "Failed to allocate memory for requested
    buffer of size 268435456 |", triton-inference-server/server #5661): the cell's words on the line before are the
    failure's own."""
    return previous.lstrip().startswith("|") and not previous.rstrip().endswith("|") and text.rstrip().endswith("|")


#: How long a line a terminal or an issue form wraps at least is (the narrowest wrap seen: 80 columns, less its
#: margin), and what ends a record rather than breaking it.
WRAP_WIDTH, _RECORD_ENDS = 60, (".", "!", "?", ":", ";", ")", "]", "}", ",")


def _continues(previous: str, text: str) -> bool:
    """Whether ``text`` may carry on the record ``previous`` began, wrapped: ``previous`` is as long as a wrapped line
    and stops mid-sentence, and ``text`` opens with a word, with no log prefix, time key (:data:`KEYED_TIME`),
    indentation or traceback line of its own (a new record, a frame or a message under a traceback keep their lines
    apart). Indentation that ``previous`` has too is not ``text``'s own: an excerpt indented as a whole (pasted as an
    indented code block, quoted under a reply) indents each wrapped line of a record alike ("    ValueError: Free
    memory on device cuda:0 (...) on startup is less" / "    than desired GPU memory utilization (...)",
    tests/data/logs/heldout_round87/vllm_rocm_36720_free_memory_on_startup.log), where a frame's source line or a
    message under a traceback is indented further."""
    body = previous.rstrip()
    indent = previous[: len(previous) - len(previous.lstrip())]
    rest = text[len(indent) :] if indent and text.startswith(indent) else text
    if len(body) < WRAP_WIDTH or body.endswith(_RECORD_ENDS) or not rest[:1].isalpha() or KEYED_TIME.match(rest):
        return False
    return strip_prefix(rest) == rest and not _traceback_text(rest) and not frames_in(rest)


def _joined(record: str, line: str) -> str:
    """The record ``record`` began, carried on by ``line`` (:func:`_continues`), as one line."""
    return f"{record.rstrip()} {line.lstrip()}"


def _failed_otherwise(line: str) -> bool:
    """Whether ``line`` is a record stating a failure of another kind than memory, at warning level or above, that is no
    report of a process's death: a kill right after it ends what that failure began (Ollama stops its runner once a
    request was canceled, "embedding generation failed: ... context canceled"), the cause the excerpt shows."""
    body = strip_prefix(line)
    if body[:1].isspace() or FRAME_HEAD in line or TRACEBACK_START in line or EXCEPTION_LINE.match(body):
        return False  # a traceback's lines: :meth:`Scanner._raised_just_before` reads the error it ended in
    return _other_failure(line) and not PROCESS_DEATH.search(line) and not CONNECTION_LOST.search(line)


#: A client's report that the server closed the connection under its request without an answer (Go's net/http error
#: ending in the reader's ``io.EOF``, ``Error: Post "http://127.0.0.1:11434/api/chat": EOF`` from Ollama's CLI;
#: Python's http.client "Remote end closed connection without response", aiohttp's "Server disconnected"): what the
#: other side's death looks like from the client, not a failure that caused it (ollama/ollama #6238, its runner killed
#: right after: tests/data/logs/heldout_round170/ollama_6238_cli_runner_killed.log).
CONNECTION_LOST = re.compile(
    r":\s*(?:unexpected )?EOF\s*$|\bRemote end closed connection without response\b"
    r"|\bServer disconnected(?: without sending a response)?\b"
)


def _other_failure(line: str) -> bool:
    """Whether ``line`` states a failure (:data:`~vllm_hpu_mm.logs.patterns.FAILURE_MARK`) that speaks of no memory,
    in a record at warning level or above (:func:`_going_on`)."""
    return bool(FAILURE_MARK.search(line)) and not _names_memory(line) and not _going_on(line)


def _bare_kill(text: str) -> bool:
    """Whether ``text`` states a kill that names no cause (:data:`~vllm_hpu_mm.logs.patterns.BARE_KILL`) and nothing
    else of the host's memory (the kernel's "Out of memory: Killed process" names its cause)."""
    return bool(BARE_KILL.search(text)) and not HOST_OOM.search(BARE_KILL.sub("", text))


def _stopped_by_program(text: str, after: list[tuple[int, str]]) -> bool:
    """Whether ``text`` is a bare kill (:func:`_bare_kill`) whose next line that says anything is the program's
    report that it stopped that process itself (:data:`~vllm_hpu_mm.logs.patterns.OWN_STOP`): the kill is read
    from the lines before it by :meth:`Scanner._shutdown_kill`, this one from the line after it."""
    following = next((line for _, line in after if line.strip()), "")
    return bool(OWN_STOP.search(following)) and _bare_kill(text)


#: How many lines a record wrapped by a terminal or an issue form is read over at most.
RECORD_LINES = 3


def _record(text: str, after: list[tuple[int, str]]) -> str:
    """The record ``text`` opens, with the lines after it a terminal or issue form wrapped it over (:func:`_continues`):
    a failure line that alone says what ran out may name its phase only on the next line (vLLM's "Free memory on
    device ... on startup is less than desired" / "GPU memory utilization ...")."""
    record = text
    for _, line in after[: RECORD_LINES - 1]:
        if not _continues(record, line):
            break
        record = _joined(record, line)
    return record


#: Words that offer what follows as one possible cause, not as what happened: Ray's raylet lists the OOM killer first
#: among "potential root causes" of any worker that died (its SIGKILL, ``ray stop --force``, a segfault: an NCCL
#: watchdog's abort ends the same way), and other runtimes' hints say what "may be caused by" or "could be due to"
#: memory; a warning says what a setting "may cause" or "could lead to"; advice names the error it is for ("when you
#: see 'CUDA out of memory'", "to avoid out-of-memory errors": a launch script's comment, a setting's help; llama.cpp's
#: "failed to load model ..., try reducing --n-gpu-layers if you're running out of VRAM", common/common.cpp, after any
#: failed load) without it having happened. An out-of-memory word after them claims nothing; one before them (the
#: error, then its hint) still counts.
HEDGE = re.compile(
    r"\b(?:potential|possible) (?:root )?(?:causes?|reasons?)\b"
    r"|\b(?:may|might|could|can|will|would) (?:have been |be |also be )?"
    r"(?:caused by|due to|killed by|the result of|cause|lead to|result in|trigger)\b"
    r"|\bpossibly\b|\bperhaps\b"
    r"|\b(?:if|when|in case) (?:you |we )?(?:see|get|hit|encounter|run into|experience|face|observe)\b"
    r"|\b(?:if|when|in case) (?:you(?:'re| are)? |we(?:'re| are)? |it(?:'s| is)? )?(?:running|run|runs) out of\b"
    r"|\bto (?:avoid|prevent)\b",
    re.IGNORECASE,
)
#: Substrings one of which every :data:`HEDGE` match holds (a cheap first check on every line).
_HEDGE_WORDS = ("caus", "possib", "perhaps", " due to", "lead to", "result in", "trigger", "if ", "when ", "in case",
                "to avoid", "to prevent")  # fmt: skip


#: A line break written out as the two characters backslash and n: an exception's message quoted inside another's repr
#: (``RuntimeError('TT_THROW @ ...\\ninfo:\\nOut of Memory: ...')``) or a JSON string holds its lines on one line.
_ESCAPED_BREAK = "\\n"


def _oom_kind(text: str, stated: bool = True) -> Memory | None:
    """Which memory the line ``text`` says ran out, or None; with ``stated`` False, a refusal in a program's own words
    counts without a failure mark on the line (:func:`refused_memory`)."""
    said = _screened(text)
    if said is None:
        return None
    if HOST_OOM.search(said):
        return "host"
    if DEVICE_OOM.search(said):
        return "device"
    return refused_memory(said, stated)


#: Substrings of a lowered line one of which every line that may say memory ran out holds (the first, cheap check of
#: :func:`_screened`, made on every line): the words of the out-of-memory patterns, their numbers (a kill's 137 and -9,
#: Windows's 1455 and STATUS_NO_MEMORY), their words in Chinese, Japanese, Korean and Russian, and a refusal's words
#: (:data:`~vllm_hpu_mm.logs.patterns.MEMORY_REFUSED_WORDS`).
_SCREEN_WORDS = ("memory", "devmem", "kill", "-9", "137", "oom", "outofme", "out of", "resource_exhausted", "mmap",
                 "out_of_res", "alloc", "vram", "retract", "code is 2070", "1455", "scratch space", "signal",
                 "decode the batch", "kv cache slot", "memlimit", "c0000017", "1073741801", "3221225495",
                 "cache is full", "capac", "null", "vk", "vulkan", "buffer_size",
                 "存", "メモリ", "메모리", "памят", "杀死", "砍掉", "強制終了", "убито",
                 *MEMORY_REFUSED_WORDS)  # fmt: skip


@functools.lru_cache(maxsize=2)
def _screened(text: str) -> str | None:
    """The part of the line ``text`` that may say memory ran out, or None where it cannot: no word of memory or
    failure in it, typed input, a failure the program goes on from. Kept for the last lines: the scanner asks of each
    line twice (whether it states a failure, and whether it refuses memory unmarked)."""
    # Cheap substring guards first: most lines of a long log are request lines that need one or two checks.
    if _ESCAPED_BREAK in text:
        text = text.replace(_ESCAPED_BREAK, "\n")  # a word after a quoted break starts a word ("\\nOut of Memory")
    low = text.lower()
    if any(map(low.__contains__, _HEDGE_WORDS)) and (h := HEDGE.search(text)):
        text, low = text[: h.start()], low[: h.start()]
    if not any(map(low.__contains__, _SCREEN_WORDS)):
        return None
    if COMMAND_LINE.match(strip_prefix(text)) or NO_EXHAUSTION.search(text):
        return None  # typed or pasted input, a failure the program goes on from, a missing name
    return text


def _llama_summary(text: str) -> Memory | None:
    """Which memory llama.cpp's summary of a buffer it could not make says ran out, or None where ``text`` is none: the
    loader's for the weights (:data:`~vllm_hpu_mm.logs.patterns.LOADER_BUFFER_SUMMARY`) or the KV cache's
    (:data:`~vllm_hpu_mm.logs.patterns.KV_BUFFER_SUMMARY`, relayed by any program built on llama.cpp, so only where the
    line is printed output that states no failure it goes on from). The host's where it names a host buffer type
    (:data:`~vllm_hpu_mm.logs.patterns.HOST_BUFFER`); else the device's, where llama.cpp puts the weights it offloads
    and, by default, the KV cache."""
    kv = KV_BUFFER_SUMMARY.search(text) is not None and _screened(text) is not None and not GOES_ON.search(text)
    if not kv and not LOADER_BUFFER_SUMMARY.search(text):
        return None
    return "host" if HOST_BUFFER.search(text) else "device"


def _refusals(text: str) -> Iterator[re.Match[str]]:
    """The refusals of memory in ``text`` (:data:`~vllm_hpu_mm.logs.patterns.MEMORY_REFUSED`) that say the memory fell
    short (:func:`~vllm_hpu_mm.logs.patterns.short_of_memory`), in order."""
    return filter(short_of_memory, MEMORY_REFUSED.finditer(text))


def refused_memory(text: str, stated: bool = True) -> Memory | None:
    """Which memory a failure line says could not be provided, in any program's words
    (:data:`~vllm_hpu_mm.logs.patterns.MEMORY_REFUSED`), or None. The line must state a failure
    (:data:`~vllm_hpu_mm.logs.patterns.FAILURE_MARK`; an information line only by naming its exception) and not one
    the program goes on from (:data:`~vllm_hpu_mm.logs.patterns.GOES_ON`: a warning, a retry, a fallback), nor an
    allocator's bookkeeping (:data:`~vllm_hpu_mm.logs.patterns.ALLOCATOR_BOOKKEEPING`), nor llama.cpp's summary of
    a buffer (:data:`~vllm_hpu_mm.logs.patterns.LLAMA_SUMMARY`: the loader's is read by its own rule, in
    :meth:`Scanner.feed`). A refusal its program never goes on from
    (:data:`~vllm_hpu_mm.logs.patterns.ARENA_OVERFLOW`) states the failure itself, and so does the program's refusal
    of the work it was given for the shortage (:data:`~vllm_hpu_mm.logs.patterns.REFUSES_WORK`: "... available —
    rejecting"); with ``stated`` False the failure mark may be missing (:meth:`Scanner._unmarked_refusal` looks for it
    on the next line). A size asked set against a larger size left is no refusal
    (:func:`~vllm_hpu_mm.logs.patterns.short_of_memory`). The host's where the refusal names it
    (:data:`~vllm_hpu_mm.logs.patterns.HOST_RESOURCE`), else the device's."""
    m = next(_refusals(text), None)
    if m is None or ALLOCATOR_BOOKKEEPING.search(text) or LLAMA_SUMMARY.search(text):
        return None
    if KV_REFUSAL.search(text):
        return None  # the KV cache's refusal: its own rule reads and places it (RunFeatures.kv)
    marked = FAILURE_MARK.search(text) or ARENA_OVERFLOW.search(text) or REFUSES_WORK.search(text)
    if GOES_ON.search(text) or (stated and not marked):
        return None
    if INFO_LEVEL.search(text) and not EXCEPTION_NAMED.search(text):
        return None
    return "host" if HOST_RESOURCE.search(m.group(0)) else "device"


#: What a traceback's own lines start with, after the log prefix: not the message that ends it (an IPython frame's
#: arrow, of any length, is :data:`_ARROW`).
_TRACEBACK_WORDS = ("Traceback", "The above exception", "During handling", "File ", "^", "~", "...")


def _traceback_text(stripped: str) -> bool:
    """Whether ``stripped`` (a line without its log prefix and indentation) is a traceback's own line: its header, a
    chain's, a frame, a caret line, an elision, or IPython's arrow at a frame's current line ("---->", its length
    padding the line number to a column)."""
    return stripped.startswith(_TRACEBACK_WORDS) or bool(_ARROW.match(stripped))


def _quoted_exception(text: str) -> str | None:
    """The exception line of a traceback quoted whole on the line ``text``, its line breaks written out (``\\n``): a
    JSON error body or an exception's repr that carries the traceback (``{'detail': '...Traceback (most recent call
    last):\\n  File ...\\nRuntimeError: CUDA error: device-side assert triggered\\n...'}``); None where the line
    quotes no such line after its last frame (a traceback cut inside the quote, or not quoted)."""
    if _ESCAPED_BREAK not in text:
        return None
    pieces = text.split(_ESCAPED_BREAK)
    last = max((i for i, piece in enumerate(pieces) if FRAME_HEAD in piece), default=None)
    if last is None:
        return None
    for piece in pieces[last + 1 :]:
        if piece[:1].isspace() or not piece.strip():
            continue  # the frame's source line, its carets
        return piece if EXCEPTION_LINE.match(piece) or RAISED.match(piece) else None
    return None


def _error_message(body: str) -> bool:
    """Whether ``body`` (a line without its log prefix) can be the message that ends a traceback."""
    stripped = body.strip()
    return bool(stripped) and not body[:1].isspace() and not _traceback_text(stripped)


def _caret(text: str) -> bool:
    """Whether ``text`` is a traceback's caret line (``^^^^``, ``~~~^^^``) behind its log prefix."""
    return strip_prefix(text).strip()[:1] in ("^", "~")


def _prefix(text: str) -> str:
    """The log prefixes :data:`~vllm_hpu_mm.logs.patterns.LINE_PREFIX` names at the start of ``text``."""
    rest = text
    for _ in range(6):
        m = LINE_PREFIX.match(rest)
        if m is None or not m.end():
            break
        rest = rest[m.end() :]
    return text[: len(text) - len(rest)]


def _exhausted(figures: dict[frozenset[str], list[int | None]], text: str) -> Memory | None:
    """Read the memory figures of a report's line ``text`` into ``figures`` (what is left of each memory and what it
    holds, :data:`~vllm_hpu_mm.logs.patterns.MEMORY_FIGURE`) and say which memory they now show all but gone (less
    than :data:`EXHAUSTED_SHARE` of it left): the host's where its words name the host's (RAM, system memory), else
    the device's; None where none is."""
    for m in MEMORY_FIGURE.finditer(text):
        words = [w for w in re.split(r"[\W_]+", m["key"].lower()) if w]
        named = set(words)
        measure = 0 if named & FIGURE_HAVE else 1 if named & FIGURE_TOTAL else None
        if measure is None or not named & FIGURE_MEMORY or named & FIGURE_NOT_MEMORY:
            continue
        try:
            size = size_bytes(m)
        except GarbledNumber:
            continue
        which = [w for w in words if w in FIGURE_MEMORY or w in FIGURE_WHOSE]
        pair = figures.setdefault(frozenset(which), [None, None])
        pair[measure] = size
        left, total = pair
        if left is not None and total and left < EXHAUSTED_SHARE * total:
            return "host" if HOST_RESOURCE.search(" ".join(which)) else "device"
    return None


def _goes_on(text: str) -> bool:
    """Whether ``text`` is a line of the program's other work, not a part of a failure's report: not blank, stating no
    failure (:data:`~vllm_hpu_mm.logs.patterns.FAILURE_MARK`), not a traceback's line (its header, a frame, an
    indented source or caret line) and not an excerpt's elision (the lines left out may be anything)."""
    body = strip_prefix(text)
    stripped = body.strip()
    if not stripped or body[:1].isspace() or _traceback_text(stripped):
        return False
    return not FAILURE_MARK.search(text) and not ELISION.fullmatch(stripped)


def _worker_tag(text: str) -> str:
    """Which process printed a line: vLLM's ``(Worker pid=N)`` tag or torch's ``[rankN]:`` prefix ("" if none)."""
    m = WORKER_TAG.search(text[:200])
    return m.group(0) if m else ""


#: A logger's level word that opens each record ahead of the traceback's own indentation ("ERROR:      File",
#: TabbyAPI's format in theroyallab/tabbyAPI #304): the indentation after it is the frame's.
_LEVEL_WORD = re.compile(r"^(?:ERROR|CRITICAL|WARNING|INFO|DEBUG):?(?=\s)")


def _traceback_window(before: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The traceback above a failure: back to its 'Traceback' line, or else over the frame lines right above it
    (excerpts often start mid-traceback)."""
    start = len(before)
    for j in range(len(before) - 1, -1, -1):
        if TRACEBACK_START in before[j][1]:
            return before[j:]
    gap, j = 0, start - 1
    while j >= 0 and gap <= MAX_GAP:
        body = _LEVEL_WORD.sub("", strip_prefix(before[j][1]), count=1)
        if (
            frames_in(before[j][1])
            or body[:1].isspace()
            or body.strip().startswith(("^", "~"))
            or _ARROW.match(body.strip())
            or WRAPPED_FRAME.search(body.strip())
        ):
            start, gap = j, 0
        else:
            gap += 1
        j -= 1
    return before[start:]


#: A line of Python source as a traceback quotes it under a frame: a call, or an assignment, a return or an await of
#: one (``self.weight = Parameter(torch.Tensor(...))``, ``return self.model(x)``), the call maybe opening a list
#: comprehension (``self.value_buffer = [torch.empty(...) for _ in range(n)]``).
SOURCE_STATEMENT = re.compile(
    r"(?:(?:return|await|yield)\s+|[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\s*,\s*[A-Za-z_][\w.]*)*\s*[-+*/]?=\s*"
    r"(?:await\s+)?)?\[?[A-Za-z_][\w.]*\s*\("
)


#: How many blank lines may stand between the statement an excerpt quotes and the error it raised: an issue's author
#: sets the code they ran apart from its output.
STATEMENT_BLANKS = 3
#: Marks an issue's author may put before an error line quoted under the code that raised it: a comment's sign (the
#: error pasted as a comment under the call, "#XlaRuntimeError: RESOURCE_EXHAUSTED: ...",
#: tests/data/logs/heldout_round71/other_keras_nlp_8358_gemma_tpu_resource_exhausted.log), a quote's, a list's, bold
#: or inline code.
ERROR_MARKUP = re.compile(r"^[#>*`\s]+")
#: A statement whole on its line, as a user's own code shows it: its call (or its list) closed, a statement's end or a
#: comment after it (``pipe = openvino_genai.Text2ImagePipeline(args.model_dir, device) #``). Prose that opens with a
#: call ("pipeline(...) fails with:") and a call left open over the lines below are not.
WHOLE_STATEMENT = re.compile(r".*[)\]]\s*;?\s*(?:#.*)?")


def _quoted_statement(before: list[tuple[int, str]], text: str) -> tuple[int, str] | None:
    """The statement an excerpt shows right above a Python exception line ``text``, without a frame line above it:
    the call that raised it. A traceback's last two lines where an excerpt kept no more ("self.weight =
    Parameter(torch.Tensor(...))", then "torch.OutOfMemoryError: ...", ogx-ai/llama-stack-apps #86: the traceback
    prints the statement right before its exception line); or the code an issue's author ran, then its error, set
    apart by blank lines (:data:`STATEMENT_BLANKS`) and maybe marked up (:data:`ERROR_MARKUP`): "generator =
    pipeline('text-generation', model='gpt2',device=0)", a blank line, "RuntimeError: CUDA out of memory. ...",
    tests/data/logs/heldout_round94/other_transformers_19947_pipeline_create_cuda_oom.log. Set apart, the statement
    must be whole on its line (:data:`WHOLE_STATEMENT`): a user's own code, not prose. None where the line above is no
    statement or a logger's record."""
    if not before or not EXCEPTION_LINE.match(ERROR_MARKUP.sub("", strip_prefix(text).strip())):
        return None
    blanks = 0
    while blanks < len(before) and not before[-1 - blanks][1].strip():
        blanks += 1
    if blanks == len(before) or blanks > STATEMENT_BLANKS:
        return None
    k, line = before[-1 - blanks]
    body = line.strip()
    if strip_prefix(line).strip() != body or not SOURCE_STATEMENT.match(body):
        return None
    if blanks and not WHOLE_STATEMENT.fullmatch(body):
        return None
    return k, line


def scan(lines: Iterable[str] | Iterable[tuple[int, str]]) -> LogFeatures:
    """Features of a log given as lines, or as ``(line number, text)`` records (no I/O)."""
    scanner = Scanner()
    for item in lines:
        if isinstance(item, tuple):
            scanner.feed(item[1].rstrip("\r\n"), item[0])
        else:
            scanner.feed(item.rstrip("\r\n"))
    return scanner.result()
