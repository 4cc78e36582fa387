"""The classes of stage misses left after rounds 42 and 43 (issue 34): an out-of-memory failure the doctor recognised
and answered ``unknown`` although the program's own lines show when it came. Each is pinned on lines composed after
the programs' sources and the public logs under tests/data/logs/heldout_round42/ and heldout_round43/, and on another
program that says the same in its own words; lines that do not say when keep the failure ``unknown``.

- An evaluation or a benchmark (an evaluator object called on a model's outputs, an ``evaluate`` function) runs the
  model on its data: serving, unless a frame inside it names start-up (a harness that builds the model it evaluates).
  An object's ``__call__`` frame is read by its class or the module that defines it.
- A program's own line picking the device its model will be built on, or llama.cpp's start lines (build, seed), as
  the last line before the failure: the program was starting."""

from __future__ import annotations

import pytest

from vllm_hpu_mm.logs.doctor import diagnose_lines

TORCH_OOM = "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 15.27 GiB. GPU 0 has 14.70 GiB free."
SITE = "/usr/local/lib/python3.10/dist-packages"


def traceback(*frames: tuple[str, str], error: str = TORCH_OOM) -> list[str]:
    """A Python traceback through ``frames`` (path, function), outermost first, ended by ``error``."""
    lines = ["Traceback (most recent call last):"]
    for k, (path, func) in enumerate(frames):
        lines += [f'  File "{path}", line {100 + k}, in {func}', "    x = x + 1"]
    return [*lines, error]


# --- an evaluation or a benchmark ------------------------------------------------------------------------------------


def test_an_evaluator_called_on_embeddings_is_serving() -> None:
    # sbintuitions/JMTEB #50: the retrieval evaluator, called on the embedder, computes its distance matrix
    d = diagnose_lines(traceback(
        ("/app/src/jmteb/evaluators/retrieval/evaluator.py", "__call__"),
        ("/app/src/jmteb/evaluators/retrieval/evaluator.py", "_compute_metrics"),
        ("/app/src/jmteb/evaluators/retrieval/evaluator.py", "euclidean_distance"),
        (f"{SITE}/torch/functional.py", "cdist"),
    ))  # fmt: skip
    assert (d.oom, d.stage) == (True, "runtime")


@pytest.mark.parametrize(
    "outer",
    [
        ("/srv/bench/run.py", "RetrievalEvaluator.__call__"),  # a notebook's Class.function
        ("/srv/bench/run.py", "evaluate_model"),
        ("/srv/bench/run.py", "run_benchmark"),
    ],
)
def test_any_programs_evaluation_or_benchmark_is_serving(outer: tuple[str, str]) -> None:
    d = diagnose_lines(traceback(outer, ("/srv/bench/metrics.py", "pairwise_scores")))
    assert (d.oom, d.stage) == (True, "runtime")


def test_an_evaluation_that_builds_its_model_inside_is_start_up() -> None:
    # a harness's evaluate builds the model it then evaluates (lm-eval's simple_evaluate creates its model first)
    d = diagnose_lines(traceback(
        ("/srv/lm_eval/evaluator.py", "simple_evaluate"),
        ("/srv/lm_eval/models/hf.py", "_create_model"),
        (f"{SITE}/transformers/modeling_utils.py", "from_pretrained"),
        ("/srv/lm_eval/models/hf.py", "cuda_copy"),
    ))  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")


@pytest.mark.parametrize(
    "frames",
    [
        # torch's operator objects are called in every phase; a private module names nothing
        [(f"{SITE}/torch/_ops.py", "__call__"), (f"{SITE}/torch/_ops.py", "_op")],
        # torch's Module.eval() is called on a model just loaded; Python's eval runs any code
        [("/srv/app/main.py", "eval"), ("/srv/app/model.py", "attention")],
    ],
)
def test_a_call_that_names_no_task_leaves_the_stage_unknown(frames: list[tuple[str, str]]) -> None:
    d = diagnose_lines(traceback(*frames))
    assert (d.oom, d.stage) == (True, "unknown")


# --- a program's start lines ----------------------------------------------------------------------------------------


TOKENIZER = "Special tokens have been added in the vocabulary, make sure the associated word embeddings are fine-tuned"


def test_a_program_killed_after_picking_its_device_was_starting() -> None:
    # intel/intel-extension-for-transformers #846: its AutoModel's from_pretrained says which device it builds on
    d = diagnose_lines([TOKENIZER, "2023-12-03 15:01:30 [INFO] CPU device is used.", "Killed"])
    assert (d.oom, d.stage) == (True, "startup")


def test_a_scripts_device_banner_says_nothing_of_when() -> None:
    # any script prints it before it loads, trains or serves (led by its arguments, not by the tokenizer's warning,
    # which is a start-up line of its own since stop 55)
    d = diagnose_lines(["Namespace(model='m', batch_size=4)", "INFO:root:Using device: cuda:0", "Killed"])
    assert (d.oom, d.stage) == (True, "unknown")


def test_llama_cpps_failure_right_after_its_seed_line_is_start_up() -> None:
    # ggml-org/llama.cpp #3199: main prints its build and seed, then initialises the backend and loads the model
    error = "CUDA error 2 at /data/llama.cpp/ggml-cuda.cu:5509: out of memory"
    d = diagnose_lines(
        ["Log start", "main: build = 1233 (98311c4)", "main: seed  = 1694805687", "", error, "current device: 0"]
    )
    assert (d.oom, d.stage) == (True, "startup")


def test_the_same_error_with_no_line_before_it_stays_unknown() -> None:
    # oobabooga/text-generation-webui #4890: the error alone says nothing of when
    d = diagnose_lines(["CUDA error 2 at /tmp/llama.cpp/ggml-cuda.cu:7949: out of memory"])
    assert (d.oom, d.stage) == (True, "unknown")


def test_a_seed_line_followed_by_the_loader_is_read_by_the_loader() -> None:
    # the start line is only the last phase line until a later one comes: llama.cpp's KV buffer line after it
    d = diagnose_lines(["main: seed  = 1694805687", "llama_kv_cache_init: CUDA0 KV buffer size =  4096.00 MiB",
                        "CUDA error 2 at /data/llama.cpp/ggml-cuda.cu:5509: out of memory"])  # fmt: skip
    assert d.stage == "kv_cache"


# --- what the failure's own words say of when ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "line",
    [
        # vLLM V1's check before the model loads, in the wording of vllm-project/vllm #16's ROCm run (round 43)
        "ValueError: Available memory on device cuda:0 (28.49/124.0 GiB) is below required GPU memory utilization "
        "(0.95, 117.8 GiB). Reduce GPU memory utilization or decrease GPU memory used by other processes.",
        "ValueError: Free memory on device (13.2/79.1 GiB) on startup is less than desired GPU memory utilization "
        "(0.9, 71.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
    ],
)
def test_vllms_free_memory_check_in_either_wording_is_start_up(line: str) -> None:
    d = diagnose_lines(["(EngineCore_DP0 pid=727) ERROR 02-12 15:44:57 [core.py:966] " + line])
    assert (d.oom, d.stage) == (True, "startup")


def test_a_shortage_set_against_what_a_prompt_requires_is_serving() -> None:
    # vllm.rs's server refuses a request its KV cache cannot hold (guoqingbao/vllm.rs #278, round 42)
    line = (
        "2026-04-01T02:59:00.655654Z ERROR vllm_rs::server::server: Stream generation failed: Remaining 1406272 "
        "kvcache tokens, but your prompt requires 1717120 new tokens, please request later!"
    )
    d = diagnose_lines([line])
    assert (d.oom, d.stage) == (True, "runtime")
