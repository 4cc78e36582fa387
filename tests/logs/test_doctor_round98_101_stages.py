"""Three stage classes development round 98 saw the doctor answer ``unknown`` on (issue 34), each as any program's
log can show it, pinned on lines composed after the public logs under tests/data/logs/heldout_round98 (not loaded):

- A web server's record of a request that brought it work, answered with a server error right after the failure
  (werkzeug's ``"POST /translate HTTP/1.1" 500 -``, uvicorn's, gin's ``| 500 | ... | POST``, the common log format):
  the failure was that request's, serving. A load's own failure words before the record win: a host that loads a
  model when a request asks for one answers that request 500 too.
- A program's own line that it starts a program that serves ("Starting server, this might takes a few minutes...")
  with nothing after it that says the program is up: start-up. A start that names the address it will listen at, or
  work it starts (an engine loop, a download), says nothing of a start under way.
- DeepSpeed-inference sizing its workspace for the first forward pass it is given ("Setting maximum total tokens
  (input + output) to 414"): the model is built and runs on an input. A script's own prints of its batch and input
  size are no reading: any script prints its settings as it starts, too."""

from __future__ import annotations

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose
from vllm_hpu_mm.logs.doctor.phases import announced_stage, answered_error_stage


def _verdict(lines: list[str]) -> tuple[str, str]:
    d = diagnose(lines, load({}))
    return d.stage, d.basis


# --- a request answered with a server error right after the failure -------------------------------------------------

_REQUEST_OOM = [
    "Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/transformers/models/m2m_100/modeling_m2m_100.py", line 229, in '
    "_shape",
    "    return tensor.view(bsz, seq_len, self.num_heads, self.head_dim).transpose(1, 2).contiguous()",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 58.00 MiB (GPU 0; 14.75 GiB total capacity; "
    "13.96 GiB already allocated; 28.81 MiB free; 14.04 GiB reserved in total by PyTorch)",
]
_ANSWERED_500 = (
    'INFO:werkzeug:206.189.138.109 - - [19/May/2023 10:44:52] "POST /translate HTTP/1.1" 500 -',
    'INFO:     127.0.0.1:51992 - "POST /v1/completions HTTP/1.1" 500 Internal Server Error',
    '[GIN] 2025/03/12 - 12:14:22 | 500 |         2m48s |       127.0.0.1 | POST     "/api/generate"',
    "12:14:22 | 500 |  2.5s | 127.0.0.1 | POST | /v1/chat/completions | -",
    '10.0.0.5 - - [19/May/2023:10:44:52 +0000] "POST /api/translate HTTP/1.1" 500 612 "-" "curl/7.88.1"',
)


def test_a_request_answered_500_right_after_the_failure_was_serving() -> None:
    for record in _ANSWERED_500:
        assert _verdict([*_REQUEST_OOM, record]) == ("runtime", "message"), record
        assert _verdict([*_REQUEST_OOM, "", record]) == ("runtime", "message"), record
    assert _verdict(_REQUEST_OOM) == ("unknown", "unknown")  # without the record: nothing says when


def test_a_request_record_that_brought_no_work_or_no_server_error_says_nothing() -> None:
    for record in (
        'INFO:werkzeug:206.189.138.109 - - [19/May/2023 10:44:52] "POST /translate HTTP/1.1" 200 -',  # answered
        'INFO:     127.0.0.1:35352 - "GET /health HTTP/1.1" 500 Internal Server Error',  # a probe, no work
        'INFO:     127.0.0.1:51992 - "POST /v1/completions HTTP/1.1" 503 Service Unavailable',  # refused while loading
        '[GIN] 2025/03/12 - 12:14:22 | 502 |    1.2s |       127.0.0.1 | POST     "/api/generate"',  # a proxy's word
    ):
        assert _verdict([*_REQUEST_OOM, record]) == ("unknown", "unknown"), record


def test_a_request_record_long_after_the_failure_says_nothing() -> None:
    later = ["INFO: reloading the translator", "INFO: cache cleared", "INFO: waiting for requests"]
    assert _verdict([*_REQUEST_OOM, *later, _ANSWERED_500[0]]) == ("unknown", "unknown")


def test_a_loads_failure_before_the_request_record_wins() -> None:
    # Ollama answers the request that waited on a load 500 too (ollama/ollama #9685's shape)
    gin = _ANSWERED_500[2]
    load_failed = ('time=2025-03-12T12:14:22.015Z level=ERROR source=sched.go:456 msg="error loading llama server" '
                   'error="llama runner process has terminated: exit status 2"')  # fmt: skip
    assert _verdict([*_REQUEST_OOM, load_failed, gin]) == ("startup", "message")
    for words in ("ERROR: failed to load model: out of memory", "ERROR: could not start the model runner"):
        assert _verdict([*_REQUEST_OOM, words, gin])[0] != "runtime", words
        assert answered_error_stage([(0, words), (1, gin)]) is None
    assert answered_error_stage([(0, "torch.cuda.OutOfMemoryError: CUDA out of memory"), (1, gin)]) == ("runtime", 1)


# --- a program announcing that it starts ----------------------------------------------------------------------------

_ABORT = ["terminate called after throwing an instance of 'std::runtime_error'",
          "  what():  CUDA failed with error out of memory"]  # fmt: skip
_STARTS = (
    "2023-10-27T09:15:09.866543Z  INFO tabby::serve: crates/tabby/src/serve/mod.rs:143: Starting server, this might "
    "takes a few minutes...",
    "[INFO] Starting server ...",
    "2024-03-06T17:53:22.336246Z  INFO text_generation_launcher: Starting shard 0",
    "2023-12-14T20:28:23.986069Z  INFO text_embeddings_router: router/src/lib.rs:239: Starting model backend",
    "2023/12/28 22:36:56 llama.go:440: starting llama runner",
)


def test_a_program_announcing_that_it_starts_a_server_is_starting() -> None:
    for line in _STARTS:
        assert announced_stage(line) == "startup", line
        assert _verdict([line, *_ABORT]) == ("startup", "phase"), line


def test_a_start_followed_by_its_report_that_it_is_up_is_not_starting() -> None:
    listening = "2023-10-27T09:16:40.000000Z  INFO tabby::serve: crates/tabby/src/serve/mod.rs:161: Listening at " \
                "0.0.0.0:8080"  # fmt: skip
    assert _verdict([_STARTS[0], listening, *_ABORT]) == ("runtime", "phase")


def test_a_start_that_names_an_address_or_work_it_starts_says_nothing() -> None:
    for line in (
        "Starting RPC server on 192.168.13.12:50020, backend memory: 7937 MB",
        "INFO: Starting server on port 8080",
        "INFO:  Starting engine loop",
        "INFO:  Starting model download",
        "INFO:  Starting inference",
        "INFO:  Starting worker",
        "INFO Starting Text generation web UI",
    ):
        assert announced_stage(line) is None, line
        assert _verdict([line, *_ABORT]) == ("unknown", "unknown"), line


# --- DeepSpeed-inference sizing its workspace for an input ----------------------------------------------------------

_DS_OOM = ("RuntimeError: CUDA out of memory. Tried to allocate 568.00 MiB (GPU 0; 23.69 GiB total capacity; 11.57 GiB "
           "already allocated; 228.56 MiB free; 11.57 GiB reserved in total by PyTorch)")  # fmt: skip
_SCRIPT_SETTINGS = ["Batch size: 4", "Input size: torch.Size([4, 370])"]


def test_deepspeed_sizing_its_workspace_for_an_input_is_serving() -> None:
    one_line = ("Free memory : 10964500480 (Bytes)  Total memory: 25434587136 (Bytes)  Setting maximum total tokens "
                "(input + output) to 414 ")  # fmt: skip
    assert _verdict([*_SCRIPT_SETTINGS, one_line, "# Skipping some logs", _DS_OOM]) == ("runtime", "phase")
    framed = ["------------------------------------------------------", "Free memory : 10.211 (GigaBytes)  ",
              "Total memory: 23.688 (GigaBytes)  ", "Requested memory: 4.125 (GigaBytes) ",
              "Setting maximum total tokens (input + output) to 414 ", "WorkSpace: 0x7f3a40000000 ",
              "------------------------------------------------------"]  # fmt: skip
    assert _verdict([*framed, _DS_OOM]) == ("runtime", "phase")


def test_a_scripts_own_batch_and_input_size_say_nothing() -> None:
    assert _verdict([*_SCRIPT_SETTINGS, _DS_OOM]) == ("unknown", "unknown")
