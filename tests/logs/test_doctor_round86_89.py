"""What rounds 86-89 (development data since) saw the doctor miss (issue 34), each a class any program's log can show,
pinned on lines composed after the public logs under tests/data/logs/heldout_round87 and heldout_round89, and on those
logs:

- A record wrapped over two lines inside an excerpt indented as a whole (an indented code block, a quoted reply): each
  of its lines carries the block's indentation, which is the excerpt's, not a line of its own.
- A failed lookup (a model, a file, a key not there) stated in an error record right above a traceback is that
  traceback's error, also where the record's level stands after a long logger name and a process id.
- A class called on a traceback's source line is an object being made, named for what it is, not the work under way;
  reloading a model is loading it.
- MLC-LLM's settings are keys of its model's config and of its run-time overrides, not flags."""

from __future__ import annotations

import re

from tests.support.data import LOGS
from tests.support.logs import body_lines
from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose


def _verdict(lines: list[str]) -> tuple[str, str]:
    d = diagnose(lines, load({}))
    return d.stage, d.basis


def _log(name: str) -> tuple[str, str]:
    return _verdict(body_lines(LOGS / name))


# --- a record wrapped inside an indented excerpt --------------------------------------------------------------------

_WRAPPED = (
    "ValueError: Free memory on device cuda:0 (1.33/23.98 GiB) on startup is less",
    "than desired GPU memory utilization (0.95, 22.79 GiB).",
)


def test_a_record_wrapped_inside_an_indented_excerpt_is_read_whole() -> None:
    for indent in ("    ", "\t", "  "):
        assert _verdict([f"{indent}{line}" for line in _WRAPPED]) == ("startup", "message"), repr(indent)
    # a terminal's wrap of an indented line goes on at the margin, as before
    assert _verdict([f"    {_WRAPPED[0]}", _WRAPPED[1]]) == ("startup", "message")
    assert _log("heldout_round87/vllm_rocm_36720_free_memory_on_startup.log") == ("startup", "message")


def test_a_line_indented_further_than_the_one_before_starts_its_own_record() -> None:
    # a source line under a frame, a message under a traceback: indented deeper, not the record carried on
    assert _verdict([f"  {_WRAPPED[0]}", f"      {_WRAPPED[1]}"])[0] == "none"
    # a line that ends its sentence is no wrapped record, however the next one is indented
    assert _verdict(["    ValueError: Free memory on device cuda:0 (1.33/23.98 GiB) on startup is less.",
                     f"    {_WRAPPED[1]}"])[0] == "none"  # fmt: skip


# --- a failed lookup stated above a traceback -----------------------------------------------------------------------

_CUT = [
    "Traceback (most recent call last):",
    '  File "/x/site-packages/xinference/api/restful_api.py", line 1400, in create_chat_completion',
    "    model = await (await self._get_supervisor_ref()).get_model(model_uid)",
    '  File "/x/site-packages/xoscar/backends/context.py", line 227, in send',
    "    return self._process_result_message(result)",
    "...",
]


def test_a_failed_lookup_stated_in_the_error_record_above_a_traceback_is_its_error() -> None:
    for record in (
        "2024-06-18 19:19:51,807 xinference.api.restful_api 6217 ERROR    [address=0.0.0.0:45235, pid=6285] Model "
        "not found in the model list, uid: qwen:72b",
        "ERROR 05-30 22:22:26 [serving_chat.py:210] The model `llama-3-70b` does not exist.",
        "[ERROR] FileNotFoundError: [Errno 2] No such file or directory: '/models/qwen/config.json'",
    ):
        assert _verdict([record, *_CUT]) == ("none", "error"), record
    assert _log("heldout_round87/xinference_1668_model_not_found.log") == ("none", "error")


def test_an_error_records_level_is_read_after_a_long_logger_name_and_a_process_id() -> None:
    record = ("2024-06-18 19:19:51,807 xinference.core.worker.model_actor_launcher 6217 ERROR    Tensor parallel "
              "size must be divisible by the number of attention heads")  # fmt: skip
    assert _verdict([record, *_CUT]) == ("none", "error")
    going_on = "2024-06-18 19:19:51,900 xinference.core.supervisor.model_registry 6285 INFO     Enter list_models"
    # a record below warning level between: the program went on, the traceback may be another failure
    assert _verdict([record, going_on, *_CUT]) == ("unknown", "undecided")


def test_a_lookup_that_speaks_of_memory_is_no_other_error() -> None:
    record = "ERROR 05-30 22:22:26 [worker.py:88] No free memory block found for the request; out of memory"
    assert _verdict([record, *_CUT])[1] != "error"


# --- a class constructed on a source line; a reload -----------------------------------------------------------------

_OOM = "tvm.error.InternalError: Check failed: (e == cudaSuccess) is false: CUDA: out of memory"


def test_a_class_constructed_on_a_source_line_names_what_is_made_not_the_work() -> None:
    session = [
        "Traceback (most recent call last):",
        '  File "/app/run.py", line 8, in <module>',
        '    sess = ort.InferenceSession("model.onnx", providers=["CUDAExecutionProvider"])',
        '  File "/x/onnxruntime/capi/onnxruntime_inference_collection.py", line 419, in __init__',
        "    self._create_inference_session(providers, provider_options, disabled_optimizers)",
        '  File "/x/onnxruntime/capi/onnxruntime_inference_collection.py", line 460, in _create_inference_session',
        "    sess = C.InferenceSession(session_options, self._model_path, True, self._read_config_from_model)",
        "RuntimeError: CUDA failure 2: out of memory",
    ]
    assert _verdict(session)[0] != "runtime"  # a session being built, whatever its class's name says


def test_reloading_a_model_is_loading_it() -> None:
    chat_module = [
        _OOM,
        "Traceback (most recent call last):",
        '  File "/app/sample_mlc_chat.py", line 8, in <module>',
        '    cm = ChatModule(model="Llama-2-7b-chat-hf-q4f16_1")',
        '  File "/x/mlc_chat/chat_module.py", line 713, in __init__',
        "    self._reload(self.model_lib_path, self.model_path, user_chat_config_json_str)",
        '  File "/x/mlc_chat/chat_module.py", line 927, in _reload',
        "    self._reload_func(lib, model_path, app_config_json)",
        "...",
    ]
    assert _verdict(chat_module) == ("startup", "learned")
    assert _log("heldout_round89/other_mlc_llm_1462_chatmodule_reload_cuda_oom.log") == ("startup", "learned")


# --- MLC-LLM's settings -------------------------------------------------------------------------------------------

_FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def test_mlc_llm_is_advised_its_own_settings_as_keys_not_flags() -> None:
    refusal = [
        '  File "/opt/conda/lib/python3.11/site-packages/mlc_llm/serve/engine_base.py", line 590, in __init__',
        "tvm.error.InternalError: Check failed: Insufficient GPU memory error: The available single GPU memory is "
        "7000.000 MB, which is less than the sum of model weight size (13500.000 MB) and temporary buffer size "
        "(800.000 MB).",
    ]
    for lines in (refusal, body_lines(LOGS / "heldout_round89/other_mlc_llm_1462_chatmodule_reload_cuda_oom.log")):
        advice = " ".join(diagnose(lines, load({})).recommendations)
        assert "MLC-LLM" in advice
        assert "context_window_size" in advice
        assert "prefill_chunk_size" in advice
        assert not _FLAG.findall(advice), advice  # mlc_llm serve and chat take them as keys (--overrides), not flags
