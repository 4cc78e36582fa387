"""Out-of-memory failures rounds 82-85 showed unrecognised (issue 34), each a class any program's log can show, pinned
on lines composed after the public logs under tests/data/logs/heldout_round83 and heldout_round84:

- A server that weighs a request against its memory and refuses it: the size the prompt needs set against a smaller
  size left, and the refusal of the work ("prompt 39113 tokens needs ~63155MB ..., ~17818MB available — rejecting").
  A prompt named by its token count is a request: serving. The same sizes with room to spare, or without the refusal,
  are no failure; the refusal of something that is no memory is none.
- A runtime's placement of the model's layers over its devices that could not be allocated ("memory layout cannot be
  allocated with num_gpu = 49", Ollama's load, relayed as a 500 to the request that started it): memory refused in
  the passive, and start-up, whatever served before it. Its information line that a layout did not fit and it backs
  off is none."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines


def _verdict(lines: list[str]) -> tuple[bool, str]:
    d = diagnose_lines(lines)
    return d.oom, d.stage


# --- a request refused for memory ------------------------------------------------------------------------------------


def test_a_prompt_refused_because_it_needs_more_memory_than_is_left_is_a_serving_oom() -> None:
    # ddalcu/mlx-serve #197: a vision prompt, its image's tokens inserted, weighed before its prefill
    lines = [
        "Inserted 880 image + 0 audio soft tokens at position 38216 (prompt: 38231 -> 39113 tokens)",
        "prompt 39113 tokens needs ~63155MB (KV+working+margin), ~17818MB available — rejecting",
    ]
    assert _verdict(lines) == (True, "runtime")


def test_other_wordings_of_a_request_refused_for_memory() -> None:
    for line in (
        "request of 8192 tokens requires 12.5 GiB, only 3.1 GiB free; refusing",
        "ERROR: prompt needs 20 GB of memory, 12 GB available",
    ):
        assert diagnose_lines([line]).oom, line
    assert _verdict(["request of 8192 tokens requires 12.5 GiB, only 3.1 GiB free; refusing"]) == (True, "runtime")


def test_sizes_with_room_to_spare_or_no_refusal_are_no_failure() -> None:
    for line in (
        "prompt 2048 tokens needs ~3155MB (KV+working+margin), ~17818MB available — rejecting",
        "prompt 39113 tokens needs ~63155MB (KV+working+margin), ~17818MB available",
        "model needs 4.2 GB, 20 GB available: loading",
        "token budget exceeded: prompt unavailable — rejecting",
    ):
        assert diagnose_lines([line]).stage == "none", line


# --- a layout of the model's layers that cannot be allocated --------------------------------------------------------


SERVED = [
    'level=INFO source=server.go:1274 msg="llama runner started in 7.22 seconds"',
    '[GIN] 2025/10/30 - 00:12:12 | 200 | 18.269250086s |       127.0.0.1 | POST     "/api/chat"',
    "...",
]


def test_a_layout_of_the_layers_that_cannot_be_allocated_is_a_start_up_oom() -> None:
    # ollama/ollama #12846: num_gpu forced, the load a chat request started fails; the client prints the 500
    line = "Error: 500 Internal Server Error: memory layout cannot be allocated with num_gpu = 49"
    assert _verdict([*SERVED, line]) == (True, "startup")
    assert _verdict([line]) == (True, "startup")


def test_other_programs_refusing_to_place_the_models_layers_are_start_up() -> None:
    for line in (
        "ERROR: could not offload 49 layers: the buffer could not be allocated",
        "fatal: memory layout could not be allocated for 2 devices",
    ):
        assert _verdict([line]) == (True, "startup"), line


def test_a_layout_that_did_not_fit_and_backs_off_is_no_failure() -> None:
    lines = [
        'level=INFO source=server.go:914 msg="model layout did not fit, applying backoff" backoff=0.10',
        'level=WARN source=server.go:908 msg="memory layout cannot be allocated" memory.InputWeights=1.2GiB',
    ]
    assert diagnose_lines(lines).stage == "none"
