"""The classes round 19's misses belong to (issue 34), each pinned on lines composed after the servers' sources and
the public logs under tests/data/logs/heldout_round19/: FastChat's own serving lines and its named host advice,
SGLang's scheduler process failing in its own set-up, and other hosts' lines that say they serve."""

from __future__ import annotations

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

OOM = ("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 42.00 MiB (GPU 0; 31.75 GiB total "
       "capacity; 30.70 GiB already allocated; 13.69 MiB free; 30.87 GiB reserved in total by PyTorch)")  # fmt: skip

# --- FastChat -------------------------------------------------------------------------------------------------------


def test_fastchats_error_reply_to_a_request_is_a_served_requests_oom() -> None:
    # the OpenAI API server relays the worker's reply: the server's error message, then the exception in brackets
    reply = (
        '\'{"object":"error","message":"**NETWORK ERROR DUE TO HIGH TRAFFIC. PLEASE REGENERATE OR REFRESH THIS '
        "PAGE.**\\\\n\\\\n(CUDA out of memory. Tried to allocate 42.00 MiB (GPU 0; 31.75 GiB total capacity)"
    )
    assert diagnose_lines([reply]).stage == "runtime"


def test_fastchat_is_named_as_the_host_and_told_its_model_workers_own_options() -> None:
    d = diagnose(["2023-08-10 10:00:00 | INFO | model_worker | Send heart beat. Models: ['vicuna-7b']. Semaphore: "
                  "None. global_counter: 3. worker_id: 1a2b3c4d.",
                  "2023-08-10 10:00:05 | ERROR | stderr | " + OOM], load({}))  # fmt: skip
    assert d.stage == "runtime"
    assert "FastChat" in d.source.describe
    assert any("--max-gpu-memory" in r for r in d.recommendations)


# --- SGLang's scheduler process -------------------------------------------------------------------------------------


def test_sglangs_scheduler_process_failing_in_its_own_set_up_is_start_up_on_the_host() -> None:
    d = diagnose_lines(["Process Process-6:",
                        "Traceback (most recent call last):",
                        '  File "/usr/lib/python3.10/multiprocessing/process.py", line 108, in run',
                        "    self._target(*self._args, **self._kwargs)",
                        '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line '
                        "1984, in run_scheduler_process",
                        "    faulthandler.enable()",
                        "OSError: [Errno 12] Cannot allocate memory"])  # fmt: skip
    assert (d.memory, d.stage) == ("host", "startup")


# --- other hosts' serving lines -------------------------------------------------------------------------------------


def test_a_hosts_own_line_that_it_serves_places_a_later_oom_at_serving() -> None:
    for served in (
        "Output generated in 2.48 seconds (12.10 tokens/s, 30 tokens, context 96, seed 1)",
        "llama_print_timings:        eval time =  1200.00 ms /    31 runs   (   38.71 ms per token)",
        "I0101 00:00:00.000000 1 grpc_server.cc:2451] Started GRPCInferenceService at 0.0.0.0:8001",
    ):
        assert diagnose_lines([served, OOM]).stage == "runtime", served
