"""Exception hierarchy of vllm-hpu-mm.

Every error we raise on purpose derives from :class:`VllmHpuMmError`, so callers can catch ours without catching
everything. Each concrete class also derives from the built-in it refines (``ValueError`` for bad values,
``RuntimeError`` for things that went wrong while running), so code written against plain Python keeps working.

    VllmHpuMmError
    ├── ConfigError(ValueError)        bad environment variable, flag, bucket list or ratio: fails at startup
    │   ├── BucketError                a bucket list that cannot be used (not multiples of 64, duplicates, ...)
    │   ├── ModelConfigUnavailable     no usable config.json for a model id: the plan cannot be made
    │   ├── WouldNotStart              input that parses but describes a server the runtime would not start
    │   └── NothingServed              traffic of which the server would serve no request (every image refused)
    ├── ImageError(ValueError)         an image we cannot or will not process: maps to an HTTP 4xx
    │   └── OversizeImageError         larger than the largest bucket under the ``reject`` policy
    └── BackendError(RuntimeError)     a graph backend that is not available on this machine

    InputNote(UserWarning)             not an error: something in the input read but not used (the CLI prints it
                                       once on stderr under an answer, never beside an error line)
"""

from __future__ import annotations


class VllmHpuMmError(Exception):
    """Base class of every error raised on purpose by vllm-hpu-mm."""


class ConfigError(VllmHpuMmError, ValueError):
    """A configuration value (environment variable, CLI flag, file) is invalid.

    The message names the setting, the bad value and the accepted form.
    """


class BucketError(ConfigError):
    """A vision bucket list is invalid or does not cover the configured pixel range."""


class ModelConfigUnavailable(ConfigError):
    """No Qwen2.5-VL ``config.json`` can be found for a model (not a local folder, not in the Hugging Face cache, not
    a recognisable Qwen2.5-VL id), or the one found is another architecture.

    ``memory plan`` exits 2 on it; ``serve`` may launch anyway, without a plan, and warn how to give a config.
    """


class WouldNotStart(ConfigError):
    """Input that is well-formed but describes a server the runtime would refuse to start (a bucket file from which
    vllm-gaudi generates no decode bucket). Commands that say whether a server would start (``buckets replay``) report
    it as a negative finding (exit 1); elsewhere it is invalid input, as any ConfigError."""


class NothingServed(ConfigError):
    """Traffic of which the server would serve no request (it refuses every request's image). Commands that size a
    server for the traffic it serves (``fleet plan``) report it as a negative finding (exit 1): the input is
    well-formed, the answer is that nothing of it would run."""


class ImageError(VllmHpuMmError, ValueError):
    """An image is corrupt, truncated, empty, too large to decode, or of an unsupported shape."""


class OversizeImageError(ImageError):
    """An image needs more patches than the largest bucket and the oversize policy is ``reject``."""


class BackendError(VllmHpuMmError, RuntimeError):
    """The requested graph backend (CPU, CUDA, HPU) cannot be used on this machine."""


class InputNote(UserWarning):
    """Something in the user's input that is read but not used (a CSV column no reader knows): issued with
    :func:`warnings.warn`, shown by the CLI as one ``note:`` line on stderr when the command answers (0 or 1).

    ``setting`` names the environment variable whose value the note is about (set by
    :meth:`vllm_hpu_mm.envs.EnvVar.read`): a command that plans for a runtime which does not read that variable leaves
    the note out, for its plan says the value is not read at all."""

    def __init__(self, message: str, setting: str | None = None) -> None:
        super().__init__(message)
        self.setting = setting


def one_line(text: str) -> str:
    """``text`` with every character that is not printable (newlines, control characters a user's input may hold)
    escaped, so that it stays one line."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


#: Characters of one word (a run without spaces: a value, a path, a line the user gave) an error line echoes, and of
#: the whole line: a 100,000-character flag value is named by its start and its length, never echoed whole.
ECHO_WORD_CHARS = 120
ECHO_LINE_CHARS = 2000


def clipped(text: str) -> str:
    """``text`` with each word longer than :data:`ECHO_WORD_CHARS` cut to its start and its length, and the whole
    cut in the middle past :data:`ECHO_LINE_CHARS` (the end says what is accepted: it is kept)."""
    words = [
        w if len(w) <= ECHO_WORD_CHARS else f"{w[: ECHO_WORD_CHARS // 2]}...({len(w):,} characters)"
        for w in text.split(" ")
    ]
    out = " ".join(words)
    if len(out) <= ECHO_LINE_CHARS:
        return out
    half = ECHO_LINE_CHARS // 2
    return f"{out[:half]} ...({len(out) - ECHO_LINE_CHARS:,} characters cut)... {out[-half:]}"


def error_line(message: str) -> str:
    """The one line every refusal is said in, on the command line and from the plugin inside a server: the program's
    name, then ``message`` kept to one line (:func:`one_line`) with what it echoes cut (:func:`clipped`)."""
    return f"vllm-hpu-mm: error: {clipped(one_line(message))}"
