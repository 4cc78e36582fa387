"""Stage readings after rounds 50 and 51 (issue 34), each a class any program's log can show, pinned on lines composed
after the programs' sources and the public logs under tests/data/logs/heldout_round50/ and heldout_round51/:

- A constructor (``__init__``, any protocol method) names how an object was reached, not the work: it casts no frame
  vote, and a set-up name (``_init_engine``, ``setup``) whose inner frames the excerpt left out says nothing (the
  frames left out would say load, KV cache or capture): the failure stays ``unknown``.
- Python's fault handler's dump ("Fatal Python error: Aborted", then each thread's frames, innermost first) places the
  failure as a traceback does.
- SGLang's threaded weight loader's bar ("Multi-thread loading shards") is a start-up phase line."""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines
from vllm_hpu_mm.logs.doctor.decide import default_rules, frame_tokens
from vllm_hpu_mm.logs.doctor.scan import Frame

HIP_OOM = "torch.cuda.OutOfMemoryError: HIP out of memory. Tried to allocate 112.00 MiB. GPU 0 has 0 bytes free."
SITE = "/opt/conda/lib/python3.10/site-packages"


def frame_lines(*frames: tuple[str, str]) -> list[str]:
    lines = []
    for k, (path, func) in enumerate(frames):
        lines += [f'  File "{path}", line {100 + k}, in {func}', "    self.x = make(x)"]
    return lines


# --- constructors and set-up names say nothing of when ---------------------------------------------------------------


def test_constructors_cast_no_frame_vote() -> None:
    frames = [Frame(1, "/srv/app/runner.py", "__init__", ""), Frame(2, "/srv/app/runner.py", "Runner.__enter__", "")]
    assert frame_tokens(frames) == set()
    assert not any(t.startswith("__") and t.endswith("__") for t in default_rules().votes)


def test_a_runner_built_around_an_engine_whose_inner_frames_are_left_out_is_unknown() -> None:
    # bentoml/OpenLLM #968: the error, then the runner's instantiation failing through vLLM's engine constructor, the
    # frames below _init_engine left out of the excerpt; here another server's runner and engine
    lines = [HIP_OOM, "ERROR An exception occurred while instantiating runner 'chat-runner', see details below:",
             "Traceback (most recent call last):",
             *frame_lines((f"{SITE}/myserve/runners.py", "__init__"), (f"{SITE}/myengine/engine.py", "_init_engine")),
             "..."]  # fmt: skip
    d = diagnose_lines(lines)
    assert (d.oom, d.stage) == (True, "unknown")


def test_a_set_up_shown_to_its_innermost_frame_is_start_up() -> None:
    lines = ["Traceback (most recent call last):",
             *frame_lines((f"{SITE}/myengine/engine.py", "_init_engine"), (f"{SITE}/myengine/layers.py", "alloc")),
             HIP_OOM]  # fmt: skip
    assert diagnose_lines(lines).stage == "startup"


# --- the fault handler's dump -----------------------------------------------------------------------------------------


def fatal_dump(*frames: tuple[str, str]) -> list[str]:
    """An uncaught C++ allocation error aborting the process, then faulthandler's dump of ``frames`` (outermost first
    given, printed innermost first as the dump does)."""
    head = ["libc++abi: terminating due to uncaught exception of type std::runtime_error: Attempting to allocate "
            "51619840000 bytes which is greater than the maximum allowed buffer size of 21743271936 bytes.",
            "Fatal Python error: Aborted", "", "Current thread 0x00007f00 (most recent call first):"]  # fmt: skip
    dumped = [f'  File "{path}", line {10 + k} in {func}' for k, (path, func) in enumerate(frames)]
    return [*head, *reversed(dumped)]


def test_a_fatal_abort_under_a_generation_step_is_serving() -> None:
    # Blaizzy/mlx-vlm #79: the image features merged into a prompt's embeddings under generate_step / generate
    d = diagnose_lines(fatal_dump(("/srv/vlm/generate.py", "<module>"), ("/srv/vlm/utils.py", "stream_chat"),
                                  ("/srv/vlm/models/vl.py", "merge_image_features")))  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


def test_a_fatal_abort_while_the_weights_load_is_start_up() -> None:
    d = diagnose_lines(fatal_dump(("/srv/vlm/generate.py", "<module>"), ("/srv/vlm/utils.py", "load_checkpoint"),
                                  ("/srv/vlm/utils.py", "stack_tensors")))  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


# --- SGLang's threaded weight load ----------------------------------------------------------------------------------


def test_an_oom_after_sglangs_threaded_weight_load_is_start_up() -> None:
    # guqiong96/Lsglang #7: the shards loaded, then a MoE kernel's set-up failed
    lines = ["Multi-thread loading shards: 100% Completed | 8/8 [00:25<00:00,  5.66it/s]",
             "[2026-04-16 01:02:09 TP0] Failed to set up the expert cache: CUDA out of memory. Tried to allocate "
             "24.00 MiB. GPU 0 has a total capacity of 47.37 GiB of which 4.31 MiB is free."]  # fmt: skip
    assert diagnose_lines(lines).stage == "startup"
