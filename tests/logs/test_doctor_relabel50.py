"""Kinds of line whose labels differed between rounds, labelled again by two blind labellers at stop 50
(tests/data/logs/SOURCES.md, "Stop 50: blind relabels ..."), each pinned on lines composed after the public logs it
names; the doctor answers by the labels of record:

- TensorRT's builder failing while it builds an engine (its "TensorRT-managed allocation in building engine" line
  before the failure) is start-up, whatever program drives the build.
- A failure after a user's query typed at an interactive program's prompt ("Enter a query: ...") or after
  llama-cpp-python's own record of a completion it computes ("Llama.generate: prefix-match hit") came while the
  program served that input: ``runtime`` (ggml's context pool overflowing there, rounds 56 and 62).

(LMDeploy TurboMind's model instance, created as the engine is set up, is start-up: test_doctor_round11.py; llama.cpp's
loader summary after a tensor that failed to initialise is an out-of-memory failure at start-up:
test_doctor_round13.py.)"""

from __future__ import annotations

from vllm_hpu_mm.logs.doctor import diagnose_lines

# --- a TensorRT engine build ----------------------------------------------------------------------------------------


def test_a_failure_while_tensorrt_builds_an_engine_is_start_up() -> None:
    # open-mmlab/mmdeploy #641: MMDeploy's converter builds the TensorRT engine a deployment will load
    d = diagnose_lines([
        "[06/24/2022-16:29:30] [TRT] [I] Total Activation Memory: 294057472",
        "[06/24/2022-16:29:37] [TRT] [I] [MemUsageChange] TensorRT-managed allocation in building engine: CPU +22, "
        "GPU +512, now: CPU 22, GPU 512 (MiB)",
        "[06/24/2022-16:29:37] [TRT] [E] 1: Unexpected exception std::bad_alloc",
    ])  # fmt: skip
    assert (d.oom, d.stage) == (True, "startup")
    # the failure alone names no stage
    assert diagnose_lines(["[06/24/2022-16:29:37] [TRT] [E] 1: Unexpected exception std::bad_alloc"]).stage == "unknown"


# --- a failure after a user's query or a completion's own record ----------------------------------------------------

#: ggml's context pool too small for the next tensor: an out-of-memory failure that names no stage by itself.
POOL = "ggml_new_tensor_impl: not enough space in the context's memory pool (needed 28728784, available 10485760)"


def test_a_failure_after_a_query_typed_at_the_programs_prompt_is_runtime() -> None:
    # zylon-ai/private-gpt #885: the script asks "Enter a query: ", the user's query is echoed after it, then it fails
    d = diagnose_lines(["Enter a query: Which indices are mentioned in the document?", POOL])
    assert (d.oom, d.stage) == (True, "runtime")
    # the prompt with nothing typed after it is no request yet
    assert diagnose_lines(["Enter a query: ", POOL]).stage == "unknown"


def test_a_failure_after_llama_cpp_pythons_record_of_a_completion_is_runtime() -> None:
    # abetlen/llama-cpp-python #546: Llama.generate reuses the prefix of the last prompt it evaluated
    d = diagnose_lines(["Llama.generate: prefix-match hit", POOL])
    assert (d.oom, d.stage) == (True, "runtime")
    d = diagnose_lines(["Llama._create_completion: cache miss", POOL])
    assert (d.oom, d.stage) == (True, "runtime")
