"""Kinds of line whose labels differed between rounds, labelled again by two blind labellers at stop 50
(tests/data/logs/SOURCES.md, "Stop 50: blind relabels ..."), each pinned on lines composed after the public logs it
names; the doctor answers by the labels of record:

- Any out-of-memory failure during TGI's warm-up (the shard's ``warmup`` frame, "Method Warmup encountered an error",
  the router's ``warmup{...}:warmup`` span, its report as it exits that the warm-up failed: "Unable to warmup model",
  "Error: Warmup(...)") is the warm-up's (labelled ``warmup``, the doctor's ``graph_capture``): TGI's refusal of its
  token budget ("Not enough memory to handle N prefill tokens", TGI 0.9's "N total tokens with M prefill tokens")
  and a plain out-of-memory error alike (stop 46 had read the latter as start-up's profiling; the blind relabels of
  rounds 20's and development's TGI warm-ups overturned it). The "total tokens" refusal with no warm-up in view stays
  the KV cache's refusal.
- TensorRT's builder failing while it builds an engine (its "TensorRT-managed allocation in building engine" line
  before the failure) is start-up, whatever program drives the build.
- A failure after a user's query typed at an interactive program's prompt ("Enter a query: ...") or after
  llama-cpp-python's own record of a completion it computes ("Llama.generate: prefix-match hit") came while the
  program served that input: ``runtime`` (ggml's context pool overflowing there, rounds 56 and 62).

(LMDeploy TurboMind's model instance, created as the engine is set up, is start-up: test_doctor_round11.py; llama.cpp's
loader summary after a tensor that failed to initialise is an out-of-memory failure at start-up:
test_doctor_round13.py.)"""

from __future__ import annotations

from vllm_hpu_mm.envs import load
from vllm_hpu_mm.logs.doctor import diagnose, diagnose_lines

# --- TGI's warm-up refusing its token budget -------------------------------------------------------------------------

TGI_SHARD = "/opt/conda/lib/python3.9/site-packages/text_generation_server/models/flash_causal_lm.py"
PREFILL = ("RuntimeError: Not enough memory to handle 4096 prefill tokens. You need to decrease "
           "`--max-batch-prefill-tokens`")  # fmt: skip
SPAN = ("2023-07-19T18:51:36.034291Z ERROR warmup{max_input_length=1024 max_prefill_tokens=4096 max_total_tokens=16000}"
        ":warmup: text_generation_client: router/client/src/lib.rs:33: Server error: ")  # fmt: skip
TOTAL = ("Not enough memory to handle 16000 total tokens with 4096 prefill tokens. You need to decrease "
         "`--max-batch-total-tokens` or `--max-batch-prefill-tokens`")  # fmt: skip


def test_tgis_refusal_of_its_token_budget_inside_its_warmup_is_the_warmups_failure() -> None:
    # huggingface/text-generation-inference #1067: the shard's warmup raises it, the launcher reports the method
    d = diagnose_lines([f'  File "{TGI_SHARD}", line 755, in warmup', "    raise RuntimeError(", PREFILL, "",
                        "2023-09-26T21:48:00.969072Z ERROR text_generation_launcher: Method Warmup encountered an "
                        "error."])  # fmt: skip
    assert (d.oom, d.stage) == (True, "graph_capture")
    # #1085: the router relays it under its warm-up span
    assert diagnose_lines([PREFILL, SPAN + PREFILL.removeprefix("RuntimeError: ")]).stage == "graph_capture"
    # #648: TGI 0.9's words for it, the total tokens with the prefill, under the same span
    assert diagnose_lines([SPAN + TOTAL]).stage == "graph_capture"


def test_the_total_tokens_refusal_with_no_warmup_in_view_stays_the_kv_caches() -> None:
    # huggingface/text-generation-inference #710: the refusal as the issue states it, no frame or span
    d = diagnose_lines(["Not enough memory to handle 16000 total tokens with 2 prefill tokens. You need to decrease "
                        "`--max-batch-total-tokens` or `--max-batch-prefill-tokens"])  # fmt: skip
    assert (d.stage, d.basis) == ("kv_cache", "kv_refusal")


def test_a_plain_out_of_memory_error_inside_tgis_warmup_is_the_warmups_too() -> None:
    # huggingface/text-generation-inference #2301 (round 20): the warm-up's prefill itself failed. Labelled profile at
    # stop 46 and answered start-up until doctor62a; two blind labellers read it as the warm-up at stop 50
    d = diagnose(["Traceback (most recent call last):", f'  File "{TGI_SHARD}", line 1251, in warmup',
                  "    _, batch, _ = self.generate_token(batch)",
                  "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.93 GiB."], load({}))  # fmt: skip
    assert (d.oom, d.stage) == (True, "graph_capture")
    # its advice is the budget the warm-up's prefill ran, not CUDA graphs: none was being captured
    text = "\n".join(d.recommendations)
    assert "--max-batch-prefill-tokens" in text
    assert "--cuda-graphs" not in text


def test_tgis_router_reporting_its_failed_warmup_as_it_exits_is_the_warmups_failure() -> None:
    # huggingface/text-generation-inference #563 (TGI 0.9.0's router panics: "Unable to warmup model: <error>"), the
    # development log labelled startup until stop 50's blind relabel made it the warm-up
    panic = (
        "thread 'main' panicked at 'Unable to warmup model: Generation(\"Allocation on device 0 would exceed "
        "allowed memory. (out of memory)\\nCurrently allocated     : 16.08 GiB\")', router/src/main.rs:216:18"
    )
    assert diagnose_lines([panic, "Error: WebserverFailed"]).stage == "graph_capture"
    # #755: later routers return their Warmup error from main, which Rust prints with its Debug form
    assert diagnose_lines(["Error: Warmup(Generation(\"" + PREFILL.removeprefix("RuntimeError: ") + "\"))"]
                          ).stage == "graph_capture"  # fmt: skip
    # since the backends were split the error is the backend's (backends/v3/src/lib.rs: V3Error::Warmup)
    oom = "CUDA out of memory. Tried to allocate 2.00 GiB"
    assert diagnose_lines([f'Error: Backend(Warmup(Generation("{oom}")))']).stage == "graph_capture"
    # the words alone, with no memory failure, claim nothing
    assert not diagnose_lines(['Error: Warmup(Connection("transport error"))']).oom


def test_tgis_refusal_of_its_prefill_budget_is_the_warmups_even_with_no_warmup_in_view() -> None:
    # only TGI's warm-up raises it (flash_causal_lm.py warmup, tgi-gaudi's too): its words name the warm-up
    assert diagnose_lines([PREFILL]).stage == "graph_capture"


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
