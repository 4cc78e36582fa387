"""A refusal of pinned (page-locked) host memory that the runtime falls back from, after held-out round 96 (issue 34).

ggml's CUDA backend logs "ggml_cuda_host_malloc: failed to allocate N MiB of pinned memory: out of memory" and goes on
with a pageable CPU buffer (ggml-cuda.cu ``ggml_backend_cuda_host_buffer_type_alloc_buffer``). Where the log goes on
to say that the load finished or that serving began, the run was healthy and the line is no failure. Where nothing
after it says so (an excerpt that stops while the model loads), the labels of record read it as the run's
out-of-memory failure: the host's memory, at the stage the phase lines give. A pinned buffer refused for another
reason ("invalid argument") is no shortage at all. The lines are composed after ollama/ollama #5469's load
(tests/data/logs/heldout_round96/), not read from it."""

from __future__ import annotations

import re

import pytest

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

_OLLAMA = "Jul 10 16:29:17 DESKTOP ollama[180]: "
PINNED = "ggml_cuda_host_malloc: failed to allocate 16607.35 MiB of pinned memory: out of memory"
#: Ollama relaying its runner's load of a model partly offloaded: the pinned host buffer for the layers kept on the CPU
#: is refused and made pageable, and the server waits for the runner to come up.
LOADING = [
    _OLLAMA + "llm_load_tensors: ggml ctx size =    0.83 MiB",
    _OLLAMA + PINNED,
    _OLLAMA + "llm_load_tensors: offloading 11 repeating layers to GPU",
    _OLLAMA + "llm_load_tensors: offloaded 11/33 layers to GPU",
    _OLLAMA + "llm_load_tensors:        CPU buffer size = 16607.35 MiB",
    _OLLAMA + "llm_load_tensors:      CUDA0 buffer size =  8608.53 MiB",
    _OLLAMA + 'time=2024-07-10T16:29:17.692-05:00 level=INFO source=server.go:594 msg="waiting for server to become '
    'available" status="llm server loading model"',
]
#: Lines that say the load went on past the refusal: llama.cpp's KV cache made after the weights, its server's
#: "model loaded" and its listener, Ollama's runner started, a request served.
WENT_ON = [
    _OLLAMA + "llama_kv_cache_init:      CUDA0 KV buffer size =   352.00 MiB",
    "main: model loaded",
    "main: server is listening on http://127.0.0.1:8080 - starting the main loop",
    _OLLAMA + 'time=2024-07-10T16:29:21.101-05:00 level=INFO source=server.go:632 msg="llama runner started in 3.41 '
    'seconds"',
    _OLLAMA + '[GIN] 2024/07/10 - 16:29:30 | 200 |  12.5s |  127.0.0.1 | POST     "/api/chat"',
    "slot launch_slot_: id  0 | task 0 | processing task",
]
_VLLM_FLAGS = re.compile(r"--gpu-memory-utilization|--max-num-seqs|--max-model-len|--enforce-eager")


def test_a_pinned_refusal_nothing_after_says_the_load_survived_is_the_hosts_failure_at_startup() -> None:
    d = diagnose_lines(LOADING)
    assert (d.stage, d.oom, d.memory) == ("startup", True, "host")
    assert any("pinned memory: out of memory" in e.text for e in d.evidence)
    # a status line of the waiting server (its VRAM not yet recovered from the last model) is no sign the load went on
    vram = (_OLLAMA + 'time=2024-07-10T16:29:17.817-05:00 level=WARN source=sched.go:575 msg="gpu VRAM usage didn\'t '
            'recover within timeout" seconds=5.57')  # fmt: skip
    assert diagnose_lines([*LOADING, vram, "..."]).stage == "startup"
    # nor is the request that asked for the model answered with an error
    failed = _OLLAMA + '[GIN] 2024/07/10 - 16:29:41 | 500 | 24.15s |  127.0.0.1 | POST     "/api/chat"'
    assert diagnose_lines([*LOADING, failed]).stage == "startup"


def test_a_pinned_refusal_alone_is_an_out_of_memory_failure_of_no_known_stage() -> None:
    d = diagnose_lines([PINNED])
    assert (d.oom, d.memory, d.stage) == (True, "host", "unknown")


@pytest.mark.parametrize("line", WENT_ON)
def test_a_pinned_refusal_the_load_went_on_from_stays_no_failure(line: str) -> None:
    assert diagnose_lines([*LOADING, line]).stage == "none"
    # only a line after the refusal says the load survived it: before it, the refusal is the failure (of the stage
    # that line names)
    assert diagnose_lines([*LOADING[:1], line, *LOADING[1:]]).oom


def test_a_pinned_refusal_for_another_reason_is_no_shortage() -> None:
    # llama.cpp #9629's title: CUDA refused to pin the buffer for an invalid argument; pageable memory follows
    other = "ggml_cuda_host_malloc: failed to allocate 1900,00 MiB of pinned memory: invalid argument"
    assert diagnose_lines([*LOADING[:1], other, *LOADING[2:]]).stage == "none"
    assert diagnose_lines([*LOADING[:1], other.replace("invalid argument", "out of memory"), *LOADING[2:]]).oom


def test_a_later_failure_is_the_runs_not_the_pinned_refusal_before_it() -> None:
    # ollama/ollama #8964: the pinned host buffer refused, then the device's own buffer for the offloaded layers
    cuda = ("ggml_backend_cuda_buffer_type_alloc_buffer: allocating 28426.68 MiB on device 0: cudaMalloc failed: out "
            "of memory")  # fmt: skip
    d = diagnose_lines([*LOADING, cuda])
    assert (d.stage, d.memory) == ("startup", "device")
    assert diagnose_lines(LOADING).memory == "host"


def test_a_pinned_refusal_gets_host_advice_in_its_writers_own_settings() -> None:
    advice = " ".join(diagnose(LOADING, load({})).recommendations)
    for said in ("pin", "16607.35 MiB", "host memory", "num_gpu", "OLLAMA_MAX_LOADED_MODELS"):
        assert said in advice, said
    assert "dmesg" not in advice  # a buffer refused, no process killed
    assert not _VLLM_FLAGS.search(advice)
    llama_cpp = ["main: build = 3400 (97bdd26e)", "llama_model_loader: loaded meta data with 29 key-value pairs",
                 "llm_load_tensors: ggml ctx size =    0.83 MiB", PINNED]  # fmt: skip
    d = diagnose(llama_cpp, load({}))
    advice = " ".join(d.recommendations)
    assert d.source.name == "llama.cpp", d.source
    for said in ("--n-gpu-layers", "GGML_CUDA_NO_PINNED=1"):
        assert said in advice, said
    assert "num_gpu" not in advice  # Ollama's option, not llama.cpp's
    assert not _VLLM_FLAGS.search(advice)


def test_a_failure_of_another_kind_after_the_refusal_is_that_ones() -> None:
    # the load then failed on something else: the run's failure is that error, not the pinned buffer it fell back from
    for error in ("llama_model_load: error loading model: missing tensor 'blk.0.attn_q.weight'",
                  'time=2024-07-10T16:29:18.001-05:00 level=ERROR source=sched.go:443 msg="error loading llama '
                  'server" error="llama runner process has terminated: exit status 2"'):  # fmt: skip
        d = diagnose_lines([*LOADING, _OLLAMA + error])
        assert not d.oom, error
    # a warning after it (Ollama's VRAM not recovered) says nothing of another failure: the refusal stands
    warned = _OLLAMA + 'level=WARN source=sched.go:575 msg="gpu VRAM usage didn\'t recover within timeout"'
    assert diagnose_lines([*LOADING, warned]).stage == "startup"
