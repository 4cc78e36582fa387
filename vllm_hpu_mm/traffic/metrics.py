"""Text traffic from a running server's ``/metrics`` (a URL or a saved exposition), for ``--from-metrics``.

What vLLM 0.32 itself exports (``v1/metrics/loggers.py``): the histograms ``vllm:request_prompt_tokens`` and
``vllm:request_generation_tokens`` (prompt and answer tokens per finished request, image placeholders included in
the prompt), the counters ``vllm:prefix_cache_queries`` / ``vllm:prefix_cache_hits`` (tokens) and the gauge
``vllm:num_requests_running``. What our plugin adds: ``vllm_hpu_mm_requests_total{prompt_tokens, images}``, each
multimodal request's prompt length bucketed (:func:`prompt_bucket`, a quarter octave: bounded label cardinality) and
its image count, counted by the processor in the API server.

A histogram gives counts per bucket, not values: each bucket stands for its midpoint (:func:`histogram_values`),
prompt and answer lengths are taken as independent (the exposition has no joint), and the prefix-cache hit share
applies to every prompt alike. The traffic says all of that in its source line.
"""

from __future__ import annotations

import dataclasses
import http.client
import math
import threading
import urllib.error
import urllib.request
import zlib
from collections import Counter
from pathlib import Path
from typing import Any

from vllm_hpu_mm.errors import ConfigError
from vllm_hpu_mm.traffic.requests import TextRow
from vllm_hpu_mm.values import size_cap

__all__ = [
    "FLAG",
    "TextMetrics",
    "counts_since",
    "families",
    "histogram_values",
    "nonnegative_count",
    "prompt_bucket",
    "read_exposition",
    "text_metrics",
]

FLAG = "--from-metrics"
#: Seconds the whole fetch may take, connection to last byte: a server trickling bytes is cut here.
DEADLINE_S = 20.0
#: Seconds one read may wait: the deadline itself, so that a server silent before its first byte has the time the
#: docs promise (a shorter per-read wait cut one at 10 s, r20metrics 9); the deadline is what bounds the fetch.
TIMEOUT_S = DEADLINE_S
#: Most bytes of an exposition read (a URL's body or a saved file). vLLM 0.32's own page for one engine is about
#: 60 KB (its ~40 families, histograms of 1-2-5 buckets up to max_model_len); 8 MiB holds over a hundred engines'.
MAX_BYTES = 8 << 20
#: Most (prompt, answer) rows the two histograms make together. vLLM's own histograms have 1-2-5 buckets up to
#: max_model_len (loggers.py build_1_2_5_buckets): 19 each at a million tokens, 361 rows; past this cap (a page with
#: custom wide histograms) each length is first snapped to its quarter octave (:func:`prompt_bucket`), at most
#: 4 x 24 values per side up to MAX_TOKENS.
MAX_TEXT_ROWS = 10_000
PROMPT = "vllm:request_prompt_tokens"
GENERATION = "vllm:request_generation_tokens"
QUERIES = "vllm:prefix_cache_queries"
HITS = "vllm:prefix_cache_hits"
RUNNING = "vllm:num_requests_running"
REQUESTS = "vllm_hpu_mm_requests"
#: Most tokens a count or a bucket edge may say (anything above is not a real request).
MAX_TOKENS = 10_000_000
#: Most requests a counter may say.
MAX_COUNT = 10**15
#: Characters of an error's own text a message echoes.
ECHO_CHARS = 120
#: The forms a page is read from: urllib's http and https only (another scheme would be spoken to the server, an
#: ftp:// one sitting out the deadline), or a path (no file:// URL).
_ACCEPTED = ("expected a server's /metrics URL, http:// or https:// (http://HOST:PORT/metrics), or a saved exposition "
             "file by its path")  # fmt: skip


def _clip(text: object) -> str:
    """One line of at most ECHO_CHARS, control characters and the replacement character (bytes that were not UTF-8)
    escaped: a binary file's bytes never reach the terminal."""
    raw = "".join(c if c.isprintable() and c != "\ufffd" else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                  for c in " ".join(str(text).split()))  # fmt: skip
    return raw if len(raw) <= ECHO_CHARS else raw[:ECHO_CHARS] + "..."


#: The Content-Encodings a body is decoded from (zlib's window bits: gzip's header, zlib's for HTTP's deflate). We ask
#: for identity (urllib's default Accept-Encoding), as vLLM's prometheus_client then answers; a proxy may not.
_DECODERS = {"gzip": 16 + zlib.MAX_WBITS, "x-gzip": 16 + zlib.MAX_WBITS, "deflate": zlib.MAX_WBITS}


class _Body:
    """A body read chunk by chunk, decoded from its Content-Encoding, the size cap applied to the decoded bytes as
    well as the bytes received (a small gzip body can stand for gigabytes)."""

    def __init__(self, encoding: str, max_bytes: int) -> None:
        codings = [c.strip().lower() for c in encoding.split(",") if c.strip() and c.strip().lower() != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in _DECODERS):
            raise _Cut(f"it is sent with Content-Encoding {_clip(encoding)}, which is not read; accepted: gzip, "
                       "deflate or none")  # fmt: skip
        self.decoder = zlib.decompressobj(_DECODERS[codings[0]]) if codings else None
        self.max_bytes, self.size, self.chunks = max_bytes, 0, list[bytes]()

    def _keep(self, data: bytes) -> None:
        self.size += len(data)
        if self.size > self.max_bytes:
            raise _Cut(f"the body passed {size_cap(self.max_bytes)}" + (" decompressed" if self.decoder else ""))
        self.chunks.append(data)

    def add(self, chunk: bytes) -> None:
        if self.decoder is None:
            self._keep(chunk)
            return
        try:
            data = self.decoder.decompress(chunk, self.max_bytes + 1 - self.size)
            self._keep(data)
            while self.decoder.unconsumed_tail:  # cap reached within this chunk is caught by _keep
                self._keep(self.decoder.decompress(self.decoder.unconsumed_tail, self.max_bytes + 1 - self.size))
        except zlib.error as exc:
            raise _Cut(f"its compressed body is corrupt ({_clip(exc)})") from None

    def whole(self) -> bytes:
        if self.decoder is not None and not self.decoder.eof:
            raise _Cut("its compressed body ended before the end of the stream")
        return b"".join(self.chunks)


def _timed_out(error: object) -> bool:
    """A socket wait that ran out (``urlopen`` wraps one before the answer in ``URLError``)."""
    reason = getattr(error, "reason", None) if isinstance(error, urllib.error.URLError) else error
    return isinstance(reason, TimeoutError)


class _Cut(Exception):
    """The fetch stopped: the body passed the size cap, or arrived incomplete."""


def _fetch(url: str, *, timeout_s: float, deadline_s: float, max_bytes: int, flag: str = FLAG) -> bytes:
    """The body of ``url``, read in a worker thread the caller waits on for ``deadline_s`` at most (a per-read
    timeout alone lets a server sending a byte at a time hold the fetch forever), at most ``max_bytes``."""
    done: dict[str, object] = {}
    stop = threading.Event()

    def work() -> None:
        try:
            with urllib.request.urlopen(url, timeout=min(timeout_s, deadline_s)) as response:
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > max_bytes:
                    raise _Cut(f"it declares {int(declared):,} bytes, more than the {size_cap(max_bytes)} read")
                body, size = _Body(response.headers.get("Content-Encoding", ""), max_bytes), 0
                while not stop.is_set():
                    chunk = response.read1(1 << 16)  # what has arrived, never waiting to fill a buffer
                    if not chunk:
                        break
                    size += len(chunk)
                    if size > max_bytes:
                        raise _Cut(f"the body passed {size_cap(max_bytes)}")
                    body.add(chunk)
                left = getattr(response, "length", None)
                if isinstance(left, int) and left > 0:  # read1 ends quietly where the server closed early
                    raise _Cut(f"the body ended {left:,} bytes short of its Content-Length")
                done["body"] = body.whole()
        except Exception as exc:  # every failure of the fetch becomes one line in the caller
            done["error"] = exc

    worker = threading.Thread(target=work, name="metrics-fetch", daemon=True)
    worker.start()
    worker.join(deadline_s)
    if worker.is_alive():
        stop.set()  # the worker ends at its next read (each waits timeout_s at most)
        raise ConfigError(f"{flag} {url}: no complete answer within {deadline_s:g} s; {_ACCEPTED}")
    error = done.get("error")
    if _timed_out(error):  # its own wait ran out with the deadline: the same finding
        raise ConfigError(f"{flag} {url}: no complete answer within {deadline_s:g} s; {_ACCEPTED}")
    if error is not None:
        if isinstance(error, http.client.IncompleteRead):
            reason = f"the body ended {len(error.partial):,} bytes in, short of what the server announced"
        elif isinstance(error, urllib.error.HTTPError):  # the status code, not only the reason the server chose
            reason = f"HTTP {error.code} {_clip(error.reason or '')}".strip()
        else:
            reason = _clip(getattr(error, "reason", None) or error or type(error).__name__)
        raise ConfigError(f"{flag} {url}: cannot fetch it ({reason}); {_ACCEPTED}")
    body = done["body"]
    assert isinstance(body, bytes)
    return body


def read_exposition(source: str, *, timeout_s: float = TIMEOUT_S, deadline_s: float = DEADLINE_S,
                    max_bytes: int = MAX_BYTES, flag: str = FLAG) -> str:  # fmt: skip
    """The exposition text of a ``http(s)://`` URL or a file path; :class:`ConfigError` naming ``flag`` if not.

    A URL is fetched within ``deadline_s`` in all and ``max_bytes``; a file is read up to ``max_bytes`` (a device or
    a file growing as it is read included)."""
    scheme = source.split("://", 1)[0] if "://" in source else ""
    if scheme and scheme.lower() not in ("http", "https"):
        raise ConfigError(f"{flag} {_clip(source)}: a {_clip(scheme)}:// URL is not read; {_ACCEPTED}")
    if source.lower().startswith(("http://", "https://")):
        body = _fetch(source, timeout_s=timeout_s, deadline_s=deadline_s, max_bytes=max_bytes, flag=flag)
    else:
        try:
            with Path(source).open("rb") as f:
                body = f.read(max_bytes + 1)
        except OSError as exc:
            raise ConfigError(f"{flag} {source}: cannot read it ({_clip(exc.strerror or exc)}); {_ACCEPTED}") from None
    if len(body) > max_bytes:
        raise ConfigError(f"{flag} {source}: larger than {size_cap(max_bytes)}; {_ACCEPTED} (vLLM's own page is "
                          "tens of kilobytes)")  # fmt: skip
    if body.startswith(b"\x1f\x8b"):  # gzip's magic: a page saved compressed, or sent so without saying it
        try:
            unzipped = _Body("gzip", max_bytes)
            unzipped.add(body)
            body = unzipped.whole()
        except _Cut as exc:
            raise ConfigError(f"{flag} {source}: gzip-compressed, and {exc}; {_ACCEPTED}") from None
    return body.decode("utf-8", errors="replace")


#: The option that picks one model's series from a page holding several.
MODEL_FLAG = "--model-name"


def families(text: str, source: str, flag: str = FLAG, model_name: str | None = None) -> list[Any]:
    """The metric families of an exposition (prometheus_client's own parser); errors name ``flag``. With
    ``model_name``, only that model's series (and those without a ``model_name`` label) are kept."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        fams = list(text_string_to_metric_families(text))
    except Exception as exc:  # the parser raises more than ValueError on malformed lines (IndexError, KeyError)
        raise ConfigError(f"{flag} {source}: not a Prometheus text exposition ({_clip(exc)}); {_ACCEPTED}") from None
    for family in fams:
        _require_distribution(family, source, flag)
    return _one_model(fams, source, flag, model_name)


def _one_model(fams: list[Any], source: str, flag: str, model_name: str | None) -> list[Any]:
    """One vLLM server labels every series with one ``model_name`` (vLLM 0.32 v1/metrics/loggers.py: labelnames
    ``[model_name, engine]``, one ``served_model_name``), so two names are two servers' traffic (a federation or a
    merged page): summing them would replay a load no server saw. Engines of one server are summed; models are not."""
    names = sorted({s.labels["model_name"] for f in fams for s in f.samples if "model_name" in s.labels})
    if model_name is None:
        if len(names) > 1:
            raise ConfigError(f"{flag} {source}: series of {len(names)} models ({', '.join(map(_clip, names[:8]))}): "
                              f"several servers' traffic in one page; accepted: {MODEL_FLAG} NAME to read one of "
                              "them, or one server's own /metrics")  # fmt: skip
        return fams
    if model_name not in names:
        present = ", ".join(map(_clip, names[:8])) or "none (the page has no model_name label)"
        raise ConfigError(f"{MODEL_FLAG} {_clip(model_name)}: no series of that model at {flag} {source}; "
                          f"accepted: {present}")  # fmt: skip
    for family in fams:
        family.samples = [s for s in family.samples if s.labels.get("model_name", model_name) == model_name]
    return fams


def _require_distribution(family: Any, source: str, flag: str) -> None:
    """A vLLM histogram that counts values in no finite bucket (only +Inf) carries no distribution: every value
    read from it would be made up. No vLLM server writes one: prometheus_client 0.26 refuses a histogram of fewer
    than two buckets (metrics.py:649) and vLLM 0.32 an empty --custom-histogram-buckets (config/observability.py)."""
    if family.type != "histogram" or not family.name.startswith("vllm:"):
        return
    buckets = [s for s in family.samples if s.name.endswith("_bucket")]
    # one that counts nothing places nothing: the reader's "nothing counted" is the better answer there
    if any(s.value for s in buckets) and all(s.labels.get("le", "") in ("+Inf", "Inf", "inf") for s in buckets):
        raise ConfigError(f"{flag} {source}: {family.name} has only the le=\"+Inf\" bucket, no distribution of "
                          "values; expected vLLM's histogram with its finite buckets (1, 2, 5, ... for token "
                          "counts)")  # fmt: skip


def nonnegative_count(value: float, what: str, source: str, *, maximum: int = MAX_COUNT) -> int:
    """A counter value as a whole count; NaN, infinities, negatives, fractions and absurd sizes are refused."""
    if not math.isfinite(value) or value < 0 or value != int(value) or value > maximum:
        raise ConfigError(f"{FLAG} {source}: {what} has value {value}; expected a whole count from 0 to {maximum}")
    return int(value)


def prompt_bucket(tokens: int) -> int:
    """The label a prompt of ``tokens`` tokens is counted under: the upper edge of its quarter octave
    (``ceil(2 ** (ceil(4 log2 n) / 4))``), so at most 4 labels per doubling (19% apart) whatever the traffic."""
    if tokens <= 1:
        return 1
    return math.ceil(2 ** (math.ceil(4 * math.log2(tokens)) / 4))


def _edge(raw: str, what: str, source: str) -> float:
    if raw in ("+Inf", "Inf", "inf"):
        return math.inf
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(
            f"{FLAG} {source}: {what} bucket le={_clip(repr(raw))} is not a number; expected an edge "
            f"from 0 to {MAX_TOKENS} or +Inf"
        ) from None
    if not math.isfinite(value) or value < 0 or value > MAX_TOKENS:
        raise ConfigError(f"{FLAG} {source}: {what} bucket le={_clip(repr(raw))}; expected an edge from 0 to "
                          f"{MAX_TOKENS}")  # fmt: skip
    return value


def histogram_values(buckets: dict[float, float], what: str, source: str) -> dict[int, int]:
    """Cumulative histogram buckets (le -> count) as value -> count: each bucket's requests at its midpoint (the
    open top bucket at its lower edge)."""
    out: Counter[int] = Counter()
    previous_edge, previous_count = 0.0, 0
    for le in sorted(buckets):
        count = nonnegative_count(buckets[le], f"{what} bucket le={le}", source)
        if count < previous_count:
            raise ConfigError(
                f"{FLAG} {source}: {what} buckets are not cumulative at le={le}; expected counts that never "
                "fall as le grows"
            )
        if count > previous_count:
            value = previous_edge if math.isinf(le) else (previous_edge + le) / 2
            out[max(1, round(value))] += count - previous_count
        previous_edge = previous_edge if math.isinf(le) else le
        previous_count = count
    return dict(out)


def _snapped(values: dict[int, int]) -> dict[int, int]:
    """Values -> counts with each value at the upper edge of its quarter octave (:func:`prompt_bucket`)."""
    out: Counter[int] = Counter()
    for v, n in values.items():
        out[prompt_bucket(v)] += n
    return dict(out)


@dataclasses.dataclass(frozen=True)
class TextMetrics:
    """What an exposition says about text traffic (empty where it says nothing)."""

    #: Prompt tokens -> requests (every request; image placeholders included), and answer tokens -> requests.
    prompts: dict[int, int]
    answers: dict[int, int]
    #: Prefix-cache hit share of prompt tokens, None when the counters are absent.
    hit_share: float | None
    #: Requests running at once (the gauge, summed over engines), None when absent.
    running: int | None
    #: Our processor's multimodal requests: prompt bucket -> requests.
    image_request_prompts: dict[int, int]
    #: The prefix-cache counters themselves (queried tokens, hit tokens), (0, 0) when absent.
    cache_tokens: tuple[int, int] = (0, 0)

    @property
    def found(self) -> bool:
        return bool(self.prompts or self.image_request_prompts)

    def since(self, earlier: TextMetrics, source: str, earlier_source: str) -> TextMetrics:
        """What the server counted after ``earlier`` (a previous page of the same server): every count less the
        earlier one, as Prometheus' ``increase`` over the window; the running gauge is this page's."""
        queries, hits = (a - b for a, b in zip(self.cache_tokens, earlier.cache_tokens, strict=True))
        if queries < 0 or hits < 0:
            raise _went_down(f"{QUERIES} or {HITS}", source, earlier_source)
        share = (hits / queries if queries else 0.0) if self.hit_share is not None else None
        return TextMetrics(
            counts_since(self.prompts, earlier.prompts, PROMPT, source, earlier_source),
            counts_since(self.answers, earlier.answers, GENERATION, source, earlier_source),
            share,
            self.running,
            counts_since(self.image_request_prompts, earlier.image_request_prompts, REQUESTS, source, earlier_source),
            (queries, hits),
        )

    def text_rows(self) -> dict[TextRow, int]:
        """(prompt, answer, cached) -> weight, prompts and answers taken as independent."""
        prompts = self.prompts or self.image_request_prompts
        answers = self.answers or {1: 1}
        if len(prompts) * len(answers) > MAX_TEXT_ROWS:  # wide custom histograms: the product stays bounded
            prompts, answers = _snapped(prompts), _snapped(answers)
        total = sum(answers.values())
        share = self.hit_share or 0.0
        out: Counter[TextRow] = Counter()
        for p, n in prompts.items():
            for a, m in answers.items():
                weight = n * m / total
                if weight > 0:
                    out[(p, a, int(share * p))] += max(1, round(weight * 1000))
        return dict(out)


def _went_down(what: str, source: str, earlier_source: str) -> ConfigError:
    return ConfigError(f"--since {earlier_source}: {what} counted more there than at {FLAG} {source}; expected an "
                       "earlier page of the same server (a restart sets the counters back to zero: take a new "
                       "one)")  # fmt: skip


def counts_since(now: dict[int, int], earlier: dict[int, int], what: str, source: str,
                 earlier_source: str) -> dict[int, int]:  # fmt: skip
    """value -> count of ``now`` less ``earlier`` (zeros left out); a count that went down is refused."""
    out = {}
    for value in sorted(now.keys() | earlier.keys()):
        left = now.get(value, 0) - earlier.get(value, 0)
        if left < 0:
            raise _went_down(what, source, earlier_source)
        if left:
            out[value] = left
    return out


def text_metrics(fams: list[Any], source: str) -> TextMetrics:
    """Sum each metric over its other labels (engines, API servers)."""
    hist: dict[str, dict[float, float]] = {PROMPT: {}, GENERATION: {}}
    queries = hits = 0
    have_cache = False
    running: int | None = None
    requests: Counter[int] = Counter()
    for family in fams:
        for sample in family.samples:
            name = sample.name
            if name in (PROMPT + "_bucket", GENERATION + "_bucket"):
                base = name.removesuffix("_bucket")
                le = _edge(sample.labels.get("le", ""), base, source)
                hist[base][le] = hist[base].get(le, 0.0) + sample.value
            elif name in (QUERIES + "_total", HITS + "_total"):
                have_cache = True
                value = nonnegative_count(sample.value, name, source)
                if name.startswith(QUERIES):
                    queries += value
                else:
                    hits += value
            elif name == RUNNING:
                running = (running or 0) + nonnegative_count(sample.value, RUNNING, source, maximum=10**7)
            elif name == REQUESTS + "_total":
                raw = sample.labels.get("prompt_tokens", "")
                if not raw.isdigit() or len(raw) > 8 or not 1 <= int(raw) <= MAX_TOKENS:
                    raise ConfigError(f"{FLAG} {source}: {name} has prompt_tokens={raw[:20]!r}; expected a bucket "
                                      f"edge from 1 to {MAX_TOKENS}")  # fmt: skip
                requests[int(raw)] += nonnegative_count(sample.value, f'{name}{{prompt_tokens="{raw}"}}', source)
    if hits > queries:
        raise ConfigError(f"{FLAG} {source}: {HITS} ({hits}) exceeds {QUERIES} ({queries}); expected hits <= queries")
    share = (hits / queries if queries else 0.0) if have_cache else None
    return TextMetrics(
        histogram_values(hist[PROMPT], PROMPT, source),
        histogram_values(hist[GENERATION], GENERATION, source),
        share,
        running,
        {p: n for p, n in sorted(requests.items()) if n},
        (queries, hits),
    )
