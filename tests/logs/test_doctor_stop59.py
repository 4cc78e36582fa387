"""Classes closed from stop 58's second set of rounds (202 to 207), after they were scored once (issue 34):

- A sequence-to-sequence program's frames that translate or transcribe (OpenNMT's ``translate_batch``, a script's
  ``translator.translate``) are serving, and outweigh an unknown program's start-up line above them ("Loading model
  parameters."): the frames show the load over.
- A Lua traceback's frames are read by their names, as Java's and JavaScript's are: Torch7's ``readObject`` rebuilding
  a saved model is start-up.
- A generator's hypothesis lines (fairseq's ``H-0\\t<score>\\t<text>``, fairseq-lua's ``H\\t<score>\\t<text>``) say
  the model was serving.
- llama.cpp's empty warm-up run once its context exists is the warm-up.
- Google's logging's information record is below warning level wherever the doctor asks."""

from __future__ import annotations

import pytest

from tests.support.logs import verdict
from vllm_hpu_mm.logs.patterns import INFO_LEVEL

_THC_OOM = "THCudaCheck FAIL file=/opt/torch/lib/THC/generic/THCStorage.cu line=66 error=2 : out of memory"


def _opennmt(frame: str, outer: str = "translate") -> list[str]:
    return [
        "Loading model parameters.",
        "average src size 12.3 20000",
        _THC_OOM,
        "Traceback (most recent call last):",
        '  File "translate.py", line 29, in <module>',
        "    main(opt)",
        f'  File "/src/OpenNMT-py/onmt/translate/Translator.py", line 159, in {outer}',
        f"    batch_data = self.{frame}(batch, data)",
        f'  File "/src/OpenNMT-py/onmt/translate/Translator.py", line 282, in {frame}',
        "    memory_bank = rvar(memory_bank.data)",
        "RuntimeError: cuda runtime error (2) : out of memory at /opt/torch/lib/THC/generic/THCStorage.cu:66",
    ]


@pytest.mark.parametrize("frame", ["translate_batch", "transcribe_segment"])
def test_frames_that_translate_or_transcribe_are_serving_after_an_unknown_program_s_load_line(frame: str) -> None:
    assert verdict(_opennmt(frame))[0] == "runtime"


def test_an_unknown_program_s_load_line_still_decides_where_its_frames_name_no_work() -> None:
    assert verdict(_opennmt("encode_source", outer="run"))[0] == "startup"


def test_a_lua_frame_that_rebuilds_a_saved_model_is_startup() -> None:
    lines = [
        "| [source] Dictionary: 44409 types",
        _THC_OOM,
        "/opt/torch/bin/luajit: /opt/torch/share/lua/5.1/torch/File.lua:351: cuda runtime error (2) : out of memory",
        "stack traceback:",
        "\t[C]: in function 'read'",
        "\t/opt/torch/share/lua/5.1/torch/File.lua:351: in function 'readObject'",
        "\t/opt/torch/share/lua/5.1/nn/Module.lua:192: in function 'read'",
    ]
    assert verdict(lines)[0] == "startup"
    assert verdict(lines[:5])[0] == "unknown"  # a C function named read: reading what, the frame does not say


@pytest.mark.parametrize(
    "hypothesis", ["H\t-0.7654139995575\tmais maintenant je suis", "H-12\t-0.3318\tmais maintenant je suis"]
)
def test_a_generator_s_hypothesis_line_says_the_model_was_serving(hypothesis: str) -> None:
    lines = ["| [target] Dictionary: 44666 types", "S\tbut now i am", hypothesis, "A\t1 2 4 4",
             "/usr/local/bin/luajit: not enough memory"]  # fmt: skip
    assert verdict(lines)[0] == "runtime"
    assert verdict([lines[0], lines[-1]])[0] != "runtime"


def test_llama_cpp_s_empty_warm_up_run_is_the_warm_up() -> None:
    lines = [
        "llama_kv_cache:      Metal KV buffer size = 11440.00 MiB",
        "llama_context:      Metal compute buffer size =   307.00 MiB",
        "common_init_from_params: warming up the model with an empty run - please wait ... (--no-warmup to disable)",
        "ggml_metal_synchronize: error: command buffer 0 failed with status 5",
        "error: Insufficient Memory (00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)",
    ]
    assert verdict(lines)[0] == "graph_capture"
    assert verdict([*lines[:2], *lines[3:]])[0] == "startup"


def test_google_s_information_record_is_below_warning_level() -> None:
    assert INFO_LEVEL.search("I0224 16:15:27.563535 140378916851712 xla_bridge.py:689] Unable to initialize backend")
    assert not INFO_LEVEL.search("E0224 16:15:27.563535 140378916851712 xla_bridge.py:689] Unable to initialize")
