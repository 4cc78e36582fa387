"""The classes rounds 82-85's stage misses belong to (issue 34): an out-of-memory failure the doctor recognised and
answered ``unknown`` (or start-up) although the program's own lines say it came while the program worked on its
inputs. Each is pinned on lines composed after the public logs under tests/data/logs/heldout_round82/ to
heldout_round84/ and on another program saying the same in its own words; lines that do not say when keep the failure
``unknown``.

- A traceback's frames written bare, as ``path.py:N, in func`` (shortened by whoever posted it) or as rich prints them
  in its box (``path.py:N in func``), are frames like Python's own: vLLM's ``_bookkeeping_sync`` computing a request's
  prompt logprobs is serving, a ``load_model`` is start-up. A warning's ``file.py:N:`` is no frame.
- A loguru record names the module and the function that logged it: the function is where the program was
  (lmms-eval's ``generate_until`` catching a failed ``generate``), read as a frame's name is.
- A compute-graph reservation that failed while a request's image or audio was being encoded ("encoding image
  slice..." beside ggml's error lines, on either side) came while serving; an encoder's warm-up with a dummy image
  says so and stays start-up.
- A failure reported as one numbered input's outcome in a list ("1 FAILED (80.6s): ...") that the program goes on
  with and runs ("2 OK (116.8s)") was that input's: the model was built and ran the next one. An item that failed
  alone says nothing of what it was."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB."


def _stage(lines: list[str]) -> tuple[bool, str]:
    d = diagnose_lines(lines)
    return d.oom, d.stage


# --- frames written bare ---------------------------------------------------------------------------------------------


def test_bare_frames_of_a_requests_prompt_logprobs_are_serving() -> None:
    # gonka-ai/gonka #1171: the frames kept as "file.py:N, in func", the gather of the logits elided
    lines = [
        "gpu_model_runner.py:3471, in _bookkeeping_sync",
        "    prompt_logprobs_dict = self._get_prompt_logprobs_dict(",
        "gpu_model_runner.py:5121, in _get_prompt_logprobs_dict",
        "    logits = self.model.compute_logits(prompt_hidden_states)",
        "...",
        "logits_processor.py:83, in _gather_logits",
        "    logits = tensor_model_parallel_all_gather(logits)",
        "...",
        TORCH_OOM,
    ]
    assert _stage(lines) == (True, "runtime")


def test_rich_frames_in_their_box_are_read_as_frames() -> None:
    lines = [
        "╭───────────────────── Traceback (most recent call last) ─────────────────────╮",
        "│ /srv/app/server.py:253 in <module>                                          │",
        "│ /srv/app/modules/models.py:93 in load_model                                 │",
        "╰─────────────────────────────────────────────────────────────────────────────╯",
        TORCH_OOM,
    ]
    assert _stage(lines) == (True, "startup")
    serving = [line.replace("models.py:93 in load_model", "chat.py:41 in generate_reply  ") for line in lines]
    assert _stage(serving) == (True, "runtime")


def test_a_warnings_file_and_line_is_no_frame() -> None:
    lines = ["/srv/app/sampler.py:12: UserWarning: generate is slow in this mode", TORCH_OOM]
    assert _stage(lines) == (True, "unknown")


# --- the function a loguru record names ------------------------------------------------------------------------------


def test_a_loguru_record_from_a_generate_function_is_serving() -> None:
    # QwenLM/Qwen2.5-Omni #257: lmms-eval's eval_logger, "Error <error> in generating"
    line = (
        "2025-05-03 13:40:54.819 | ERROR    | lmms_eval.models.qwen2_5_omni:generate_until:302 - Error CUDA out of "
        "memory. Tried to allocate 334.76 GiB. GPU 0 has a total capacity of 44.42 GiB of which 27.48 GiB is free."
    )
    assert _stage([line]) == (True, "runtime")


def test_a_loguru_record_names_the_work_of_any_program() -> None:
    record = "2025-01-01 10:00:00.000 | ERROR    | {where} - CUDA out of memory. Tried to allocate 2.00 GiB."
    assert _stage([record.format(where="app.pipeline:predict_batch:88")]) == (True, "runtime")
    assert _stage([record.format(where="app.models:load_checkpoint:20")]) == (True, "startup")
    # a function named for nothing it does, and a script's top level, say nothing
    assert _stage([record.format(where="app.utils:helper:10")]) == (True, "unknown")
    assert _stage([record.format(where="__main__:<module>:5")]) == (True, "unknown")


# --- a reservation while a request's media is encoded ----------------------------------------------------------------

ALLOC = (
    "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16283.74 MiB on device 0: cudaMalloc failed: out of memory"
)
RESERVE = "ggml_gallocr_reserve_n: failed to allocate CUDA0 buffer of size 17074735104"


def test_a_reservation_beside_an_image_slice_being_encoded_is_serving() -> None:
    # ikawrakow/ik_llama.cpp #1348: the helper's line printed after ggml's error lines, on another stream
    lines = [ALLOC, RESERVE, "encoding image slice...", "ggml-backend.cpp:2718: GGML_ASSERT(...) failed"]
    assert _stage(lines) == (True, "runtime")
    # the same line before the failure, and other media in other words
    assert _stage(["encoding audio slice...", ALLOC, RESERVE]) == (True, "runtime")
    assert _stage([ALLOC, RESERVE, "failed to encode image slice"]) == (True, "runtime")


def test_a_reservation_with_no_media_or_a_warm_up_image_stays_start_up() -> None:
    assert _stage([ALLOC, RESERVE, "llama_init_from_model: failed to initialize the context"]) == (True, "startup")
    assert _stage([ALLOC, RESERVE, "encoding image for the encoder warm-up with a dummy image"]) == (True, "startup")


# --- one numbered input of a list --------------------------------------------------------------------------------


OV_FAILED = "1 FAILED (80.6s): Check '!exceed_allocatable_mem_size' failed at engine.cpp:324:"
OV_OOM = "    [GPU] Exceeded max size of memory object allocation: requested 32095728896 bytes,"
OV_MAX = "    but max alloc size supported by device is 25055051776 bytes."


def test_one_numbered_input_failed_in_a_list_the_program_went_on_with_is_serving() -> None:
    # openvinotoolkit/openvino #37501: the script's prompts, each with its outcome and time
    assert _stage([OV_FAILED, OV_OOM, OV_MAX, "2 OK  (116.8s)", "3 OK  (3.3s)"]) == (True, "runtime")
    # other programs' lists: an index in brackets, a passed item
    lines = ["[7] ERROR: CUDA out of memory. Tried to allocate 1.00 GiB", "[8] PASSED"]
    assert _stage(lines) == (True, "runtime")


def test_a_numbered_failure_alone_or_the_same_item_again_says_nothing() -> None:
    assert _stage([OV_FAILED, OV_OOM, OV_MAX]) == (True, "unknown")
    assert _stage([OV_FAILED, OV_OOM, OV_MAX, "3 FAILED (1.0s): invalid argument"]) == (True, "unknown")
    assert _stage([OV_FAILED, OV_OOM, OV_MAX, "1 OK (3.0s)"]) == (True, "unknown")
